// SPDX-License-Identifier: GPL-2.0
/*
 * The zone model of a zoned slot, in shared memory so that a recovering
 * daemon (another process) finds the zones as its dead predecessor left
 * them: conventional zones first, then sequential ones with a write
 * pointer (the rules of tests/include/bius_zone_rules.h), plus the replay
 * rules of "Recovery".
 */

#include "fuzz.h"
#include "bius_zone_rules.h"

void slot_lock(struct slot *s)
{
	/* a daemon killed while holding it leaves the zones consistent */
	if (pthread_mutex_lock(&s->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&s->lock);
}

void slot_unlock(struct slot *s)
{
	pthread_mutex_unlock(&s->lock);
}

void zones_init(struct slot *s)
{
	s->nr_zones = bz_layout(s->z, MAX_ZONES, &s->p);
}

static struct blk_zone *zone_of(struct slot *s, uint64_t sector)
{
	uint64_t i = sector / (s->p.zoned.zone_size / 512);

	return i < s->nr_zones ? &s->z[i] : NULL;
}

/*
 * A write (the request @r): 0 to apply it, 1 if a replay finds it applied
 * already, or -EIO.
 */
static int zone_write(struct blk_zone *z, const struct bius_request *r)
{
	uint64_t n = r->len / 512;

	if ((r->flags & BIUS_REQ_REPLAY) && bz_seq(z) &&
	    z->wp >= r->sector + n && r->sector >= z->start)
		return 1;
	return bz_write(z, r->sector, n);
}

static int zone_mgmt(struct slot *s, struct blk_zone *z,
		     const struct bius_request *r)
{
	unsigned int i;

	if (r->op != BIUS_OP_ZONE_RESET_ALL)
		return bz_op(z, r->op, r->sector, r->len);
	for (i = 0; i < s->nr_zones; i++)
		if (bz_seq(&s->z[i]))
			bz_set_wp(&s->z[i], s->z[i].start);
	return 0;
}

/*
 * WRITE, ZONE_APPEND and the zone operations of @r, by the daemon of
 * @epoch: 0 (apply the data, of an append at *append_sector), 1 (a
 * replayed write already applied), or a negative errno (-ENODEV: the
 * daemon is stale, its requests are another daemon's now).
 */
int zones_handle(struct slot *s, const struct bius_request *r,
		 uint32_t epoch, uint64_t *append_sector)
{
	struct blk_zone *z;
	struct bius_request w;
	int res;

	slot_lock(s);
	if (s->epoch != epoch) {
		slot_unlock(s);
		return -ENODEV;
	}
	z = zone_of(s, r->sector);
	switch (r->op) {
	case BIUS_OP_WRITE:
		res = z ? zone_write(z, r) : -EIO;
		break;
	case BIUS_OP_ZONE_APPEND:
		res = -EIO;
		if (!bz_seq(z) || z->start != r->sector ||
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
	slot_unlock(s);
	return res;
}

/* REPORT_ZONES: the zones from r->sector on into @out; bytes, 0 if none. */
uint32_t zones_report(struct slot *s, const struct bius_request *r,
		      unsigned char *out)
{
	struct blk_zone *z;
	uint32_t n;

	slot_lock(s);
	z = zone_of(s, r->sector);
	n = z ? s->nr_zones - (z - s->z) : 0;
	if (n > r->len / sizeof(*z))
		n = r->len / sizeof(*z);
	if (n)
		memcpy(out, z, n * sizeof(*z));
	slot_unlock(s);
	return n * sizeof(*z);
}
