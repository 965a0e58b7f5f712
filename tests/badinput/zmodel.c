// SPDX-License-Identifier: GPL-2.0
/*
 * The zone model of bius_badinput's zoned test devices (a few null_blk
 * rules, no resource limits) and how their server answers zoned requests.
 */

#include "badinput.h"

/* ---- the zone model (a few null_blk rules, no resource limits) --------- */

void zm_init(struct zmodel *zm, const struct bius_device_params *p)
{
	uint64_t end = p->size / 512, zs = p->zoned.zone_size / 512;
	unsigned int i;

	memset(zm, 0, sizeof(*zm));
	pthread_mutex_init(&zm->lock, NULL);
	zm->zone_sectors = zs;
	zm->last_op = -1;
	for (i = 0; i < ZM_MAX_ZONES && i * zs < end; i++) {
		struct blk_zone *z = &zm->z[i];

		z->start = i * zs;
		z->len = end - z->start < zs ? end - z->start : zs;
		if (i < p->zoned.nr_conv_zones) {
			z->type = BLK_ZONE_TYPE_CONVENTIONAL;
			z->cond = BLK_ZONE_COND_NOT_WP;
			z->capacity = z->len;
			z->wp = z->start + z->len;
		} else {
			z->type = BLK_ZONE_TYPE_SEQWRITE_REQ;
			z->cond = BLK_ZONE_COND_EMPTY;
			z->capacity = p->zoned.zone_capacity / 512;
			if (z->capacity > z->len)
				z->capacity = z->len;
			z->wp = z->start;
		}
	}
	zm->nr = i;
}

static struct blk_zone *zm_zone(struct zmodel *zm, uint64_t sector)
{
	uint64_t i = sector / zm->zone_sectors;

	return i < zm->nr ? &zm->z[i] : NULL;
}

static int zm_seq(const struct blk_zone *z)
{
	return z && z->type == BLK_ZONE_TYPE_SEQWRITE_REQ;
}

static void zm_reset(struct blk_zone *z)
{
	z->cond = BLK_ZONE_COND_EMPTY;
	z->wp = z->start;
}

/* A zone operation; the caller holds zm->lock. */
static int zm_op(struct zmodel *zm, const struct bius_request *r)
{
	struct blk_zone *z = zm_zone(zm, r->sector);
	unsigned int i;

	zm->last_op = r->op;
	zm->last_sector = r->sector;
	if (zm->inject) {
		int res = zm->inject;

		zm->inject = 0;
		return res;
	}
	if (r->op == BIUS_OP_ZONE_RESET_ALL) {
		for (i = 0; i < zm->nr; i++)
			if (zm_seq(&zm->z[i]))
				zm_reset(&zm->z[i]);
		return 0;
	}
	if (!zm_seq(z) || z->start != r->sector || r->len)
		return -EIO;
	switch (r->op) {
	case BIUS_OP_ZONE_OPEN:
		if (z->cond == BLK_ZONE_COND_FULL)
			return -EIO;
		z->cond = BLK_ZONE_COND_EXP_OPEN;
		break;
	case BIUS_OP_ZONE_CLOSE:
		if (z->cond == BLK_ZONE_COND_IMP_OPEN ||
		    z->cond == BLK_ZONE_COND_EXP_OPEN)
			z->cond = z->wp == z->start ? BLK_ZONE_COND_EMPTY :
						      BLK_ZONE_COND_CLOSED;
		break;
	case BIUS_OP_ZONE_FINISH:
		z->cond = BLK_ZONE_COND_FULL;
		z->wp = z->start + z->len;
		break;
	case BIUS_OP_ZONE_RESET:
		zm_reset(z);
		break;
	default:
		return -EOPNOTSUPP;
	}
	return 0;
}

/* A write to a sequential zone must land at its write pointer. */
static int zm_write(struct zmodel *zm, const struct bius_request *r)
{
	struct blk_zone *z = zm_zone(zm, r->sector);
	uint64_t n = r->len / 512;

	if (!zm_seq(z))
		return 0;
	if (r->sector != z->wp || z->cond == BLK_ZONE_COND_FULL ||
	    z->wp + n > z->start + z->capacity)
		return -EIO;
	z->wp += n;
	if (z->wp == z->start + z->capacity)
		z->cond = BLK_ZONE_COND_FULL;
	else if (z->cond != BLK_ZONE_COND_EXP_OPEN)
		z->cond = BLK_ZONE_COND_IMP_OPEN;
	return 0;
}

/* Where a zone append will land (its zone's write pointer). */
uint64_t zm_append_dst(struct zmodel *zm, const struct bius_request *r)
{
	struct blk_zone *z;
	uint64_t dst;

	pthread_mutex_lock(&zm->lock);
	z = zm_zone(zm, r->sector);
	dst = z ? z->wp : r->sector;
	pthread_mutex_unlock(&zm->lock);
	return dst;
}

/* A zone append; the caller holds zm->lock.  Returns the landing sector. */
static int zm_append(struct zmodel *zm, const struct bius_request *r,
		     uint64_t *sector)
{
	struct blk_zone *z = zm_zone(zm, r->sector);
	struct bius_request w = *r;

	if (!zm_seq(z) || z->start != r->sector)
		return -EIO;
	*sector = w.sector = z->wp;
	return zm_write(zm, &w);
}

/* Bad append completions first: each must be refused with EINVAL. */
static void srv_append_probe(struct srv *s, const struct bius_request *r,
			     uint64_t sector)
{
	struct zmodel *zm = s->zm;
	struct blk_zone *z = zm_zone(zm, r->sector);
	uint64_t bad[3] = {
		z->start + z->len,			/* past the zone */
		sector + 1,				/* not block aligned */
		z->start + z->capacity - 8,		/* data past capacity */
	};
	struct bius_completion c = { .id = r->id };
	unsigned int i;

	srv_flush(s);
	for (i = 0; i < 3; i++) {
		c.sector = bad[i];
		zm->probe_err[i] = write(s->fd, &c, CMP) < 0 ? errno : 0;
	}
	zm->append_probe = 0;
}

void srv_zoned_request(struct srv *s, const struct bius_request *r)
{
	struct zmodel *zm = s->zm;
	struct blk_zone *z;
	unsigned int first, n;
	int res = 0;

	pthread_mutex_lock(&zm->lock);
	switch (r->op) {
	case BIUS_OP_REPORT_ZONES:
		z = zm_zone(zm, r->sector);
		if (!z) {
			res = -EIO;
			break;
		}
		first = z - zm->z;
		n = r->len / sizeof(*z);
		if (n > zm->nr - first)
			n = zm->nr - first;
		zm->reports++;
		srv_complete(s, r->id, 0, z, n * sizeof(*z));
		pthread_mutex_unlock(&zm->lock);
		return;
	case BIUS_OP_WRITE:
		res = zm_write(zm, r);
		break;
	case BIUS_OP_ZONE_APPEND: {
		uint64_t sector = 0;

		res = zm_append(zm, r, &sector);
		if (!res && zm->append_probe)
			srv_append_probe(s, r, sector);
		if (!res)
			zm->appends++;
		pthread_mutex_unlock(&zm->lock);
		srv_complete_at(s, r->id, res, res ? 0 : sector, NULL, 0);
		return;
	}
	default:
		res = zm_op(zm, r);
	}
	pthread_mutex_unlock(&zm->lock);
	srv_complete(s, r->id, res, NULL, 0);
}
