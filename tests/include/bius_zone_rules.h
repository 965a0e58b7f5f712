/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The zone rules of the test programs' zoned devices (the zone models of
 * tests/badinput and tests/fuzz): the zones of a new device, and the few
 * null_blk rules the ABI names for a sequential zone's write pointer and
 * condition, on struct blk_zone (sectors), without resource limits.
 */
#ifndef BIUS_TESTS_ZONE_RULES_H
#define BIUS_TESTS_ZONE_RULES_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <linux/blkzoned.h>
#include <linux/bius.h>

/*
 * The zones of a device created with @p, as new (sequential ones empty),
 * into @z (at most @max); how many.
 */
static inline unsigned int bz_layout(struct blk_zone *z, unsigned int max,
				     const struct bius_device_params *p)
{
	const struct bius_zoned_params *zp = &p->zoned;
	uint64_t end = p->size / 512, zs = zp->zone_size / 512;
	uint64_t cap = (zp->zone_capacity ? zp->zone_capacity :
		       zp->zone_size) / 512;
	unsigned int i;

	for (i = 0; i < max && i * zs < end; i++, z++) {
		memset(z, 0, sizeof(*z));
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
	return i;
}

static inline int bz_seq(const struct blk_zone *z)
{
	return z && z->type == BLK_ZONE_TYPE_SEQWRITE_REQ;
}

/* Move the write pointer of sequential zone @z; its condition follows. */
static inline void bz_set_wp(struct blk_zone *z, uint64_t wp)
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
 * A write of @n sectors at @sector into zone @z: 0 (a conventional zone,
 * or the write pointer moved past it) or -EIO (not at the write pointer,
 * or past the capacity).
 */
static inline int bz_write(struct blk_zone *z, uint64_t sector, uint64_t n)
{
	if (!bz_seq(z))
		return 0;
	if (sector != z->wp || z->cond == BLK_ZONE_COND_FULL ||
	    z->wp + n > z->start + z->capacity)
		return -EIO;
	bz_set_wp(z, z->wp + n);
	return 0;
}

/*
 * BIUS_OP_ZONE_OPEN, _CLOSE, _FINISH or _RESET of zone @z, asked for
 * @sector (must be its start) and @len (must be 0): 0 or a negative errno.
 */
static inline int bz_op(struct blk_zone *z, int op, uint64_t sector,
			uint32_t len)
{
	if (!bz_seq(z) || z->start != sector || len)
		return -EIO;
	switch (op) {
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
		bz_set_wp(z, z->start);
		return 0;
	}
	return -EOPNOTSUPP;
}

#endif /* BIUS_TESTS_ZONE_RULES_H */
