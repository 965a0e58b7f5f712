// SPDX-License-Identifier: GPL-2.0
/*
 * The zone model of a zoned slot, in shared memory so that a recovering
 * daemon (another process) finds the zones as its dead predecessor left
 * them: conventional zones first, then sequential ones with a write
 * pointer; the null_blk rules the ABI names, the replay rules of
 * "Recovery", and no resource limits.
 */

#include "fuzz.h"

void zones_lock(struct slot *s)
{
	/* a daemon killed while holding it leaves the zones consistent */
	if (pthread_mutex_lock(&s->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&s->lock);
}

void zones_unlock(struct slot *s)
{
	pthread_mutex_unlock(&s->lock);
}

void zones_init(struct slot *s)
{
	const struct bius_zoned_params *zp = &s->p.zoned;
	uint64_t end = s->p.size / 512, zs = zp->zone_size / 512;
	uint64_t cap = (zp->zone_capacity ? zp->zone_capacity :
		       zp->zone_size) / 512;
	unsigned int i;

	memset(s->z, 0, sizeof(s->z));
	for (i = 0; i < MAX_ZONES && i * zs < end; i++) {
		struct blk_zone *z = &s->z[i];

		z->start = i * zs;
		z->len = end - z->start < zs ? end - z->start : zs;
		if (i < zp->nr_conv_zones) {
			z->type = BLK_ZONE_TYPE_CONVENTIONAL;
			z->cond = BLK_ZONE_COND_NOT_WP;
			z->capacity = z->len;
			z->wp = z->start + z->len;
		} else {
			z->type = BLK_ZONE_TYPE_SEQWRITE_REQ;
			z->cond = BLK_ZONE_COND_EMPTY;
			z->capacity = cap < z->len ? cap : z->len;
			z->wp = z->start;
		}
	}
	s->nr_zones = i;
}

static struct blk_zone *zone_of(struct slot *s, uint64_t sector)
{
	uint64_t i = sector / (s->p.zoned.zone_size / 512);

	return i < s->nr_zones ? &s->z[i] : NULL;
}

static int seq(const struct blk_zone *z)
{
	return z && z->type == BLK_ZONE_TYPE_SEQWRITE_REQ;
}

static void set_wp(struct blk_zone *z, uint64_t wp)
{
	z->wp = wp;
	if (wp == z->start)
		z->cond = BLK_ZONE_COND_EMPTY;
	else if (wp >= z->start + z->capacity)
		z->cond = BLK_ZONE_COND_FULL;
	else if (z->cond != BLK_ZONE_COND_EXP_OPEN)
		z->cond = BLK_ZONE_COND_IMP_OPEN;
}

/*
 * A write of @n sectors at @sector: 0 to apply it, 1 if a replay finds it
 * applied already, or -EIO.
 */
static int zone_write(struct blk_zone *z, const struct bius_request *r)
{
	uint64_t n = r->len / 512;

	if (!seq(z))
		return 0;
	if ((r->flags & BIUS_REQ_REPLAY) && z->wp >= r->sector + n &&
	    r->sector >= z->start)
		return 1;
	if (r->sector != z->wp || z->cond == BLK_ZONE_COND_FULL ||
	    z->wp + n > z->start + z->capacity)
		return -EIO;
	set_wp(z, z->wp + n);
	return 0;
}

static int zone_mgmt(struct slot *s, struct blk_zone *z,
		     const struct bius_request *r)
{
	unsigned int i;

	if (r->op == BIUS_OP_ZONE_RESET_ALL) {
		for (i = 0; i < s->nr_zones; i++)
			if (seq(&s->z[i]))
				set_wp(&s->z[i], s->z[i].start);
		return 0;
	}
	if (!seq(z) || z->start != r->sector || r->len)
		return -EIO;
	switch (r->op) {
	case BIUS_OP_ZONE_OPEN:
		if (z->cond == BLK_ZONE_COND_FULL)
			return -EIO;
		z->cond = BLK_ZONE_COND_EXP_OPEN;
		return 0;
	case BIUS_OP_ZONE_CLOSE:
		if (z->cond == BLK_ZONE_COND_IMP_OPEN ||
		    z->cond == BLK_ZONE_COND_EXP_OPEN)
			z->cond = z->wp == z->start ? BLK_ZONE_COND_EMPTY :
						      BLK_ZONE_COND_CLOSED;
		return 0;
	case BIUS_OP_ZONE_FINISH:
		z->cond = BLK_ZONE_COND_FULL;
		z->wp = z->start + z->len;
		return 0;
	case BIUS_OP_ZONE_RESET:
		set_wp(z, z->start);
		return 0;
	}
	return -EOPNOTSUPP;
}

/*
 * WRITE, ZONE_APPEND and the zone operations of @r: 0 (apply the data,
 * of an append at *append_sector), 1 (a replayed write already applied),
 * or a negative errno.
 */
int zones_handle(struct slot *s, const struct bius_request *r,
		 uint64_t *append_sector)
{
	struct blk_zone *z;
	struct bius_request w;
	int res;

	zones_lock(s);
	z = zone_of(s, r->sector);
	switch (r->op) {
	case BIUS_OP_WRITE:
		res = z ? zone_write(z, r) : -EIO;
		break;
	case BIUS_OP_ZONE_APPEND:
		res = -EIO;
		if (!seq(z) || z->start != r->sector ||
		    (r->flags & BIUS_REQ_REPLAY))
			break;
		w = *r;
		w.flags = 0;
		*append_sector = w.sector = z->wp;
		res = zone_write(z, &w);
		break;
	default:
		res = zone_mgmt(s, z, r);
	}
	zones_unlock(s);
	return res;
}

/* REPORT_ZONES: the zones from r->sector on into @out; bytes, 0 if none. */
uint32_t zones_report(struct slot *s, const struct bius_request *r,
		      unsigned char *out)
{
	struct blk_zone *z;
	uint32_t n;

	zones_lock(s);
	z = zone_of(s, r->sector);
	n = z ? s->nr_zones - (z - s->z) : 0;
	if (n > r->len / sizeof(*z))
		n = r->len / sizeof(*z);
	if (n)
		memcpy(out, z, n * sizeof(*z));
	zones_unlock(s);
	return n * sizeof(*z);
}
