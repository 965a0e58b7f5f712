// SPDX-License-Identifier: GPL-2.0
/*
 * The zone model of bius_badinput's zoned test devices (a few null_blk
 * rules, no resource limits) and how their server answers zoned requests.
 */

#include "badinput.h"
#include "bius_zone_rules.h"

/* ---- the zone model (a few null_blk rules, no resource limits) --------- */

void zm_init(struct zmodel *zm, const struct bius_device_params *p)
{
	memset(zm, 0, sizeof(*zm));
	pthread_mutex_init(&zm->lock, NULL);
	zm->zone_sectors = p->zoned.zone_size / 512;
	zm->last_op = -1;
	zm->nr = bz_layout(zm->z, ZM_MAX_ZONES, p);
}

static struct blk_zone *zm_zone(struct zmodel *zm, uint64_t sector)
{
	uint64_t i = sector / zm->zone_sectors;

	return i < zm->nr ? &zm->z[i] : NULL;
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
			if (bz_seq(&zm->z[i]))
				bz_set_wp(&zm->z[i], zm->z[i].start);
		return 0;
	}
	return bz_op(z, r->op, r->sector, r->len);
}

/* A write to a sequential zone must land at its write pointer. */
static int zm_write(struct zmodel *zm, const struct bius_request *r)
{
	return bz_write(zm_zone(zm, r->sector), r->sector, r->len / 512);
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

	if (!bz_seq(z) || z->start != r->sector)
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
