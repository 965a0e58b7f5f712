/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BIUS: every difference between the supported kernel versions (6.1, 6.6,
 * 6.12, mainline: Debian unstable's 7.2) lives here, behind small helpers
 * named for what they do.
 *
 *  - 6.5 changed block_device_operations.open/release.
 *  - 6.9 passes struct queue_limits to blk_mq_alloc_disk().
 *  - 6.11 moved write cache, FUA and rotational into queue_limits.features.
 *  - 6.14 made merging the default and dropped BLK_MQ_F_SHOULD_MERGE.
 *  - 6.3 made vma->vm_flags read-only: vm_flags_set() changes them.
 *  - import_ubuf() is not in 6.1 (see bius_import_ubuf()).
 *  - 6.14 made the error argument of blk_mq_add_to_batch() a bool (an
 *    int before): the poll path passes a comparison, right for both.
 *  - 7.2 made the NUMA node of blk_mq_ops.init_request an int (unsigned
 *    before): BIUS_NUMA_NODE_T.
 *  Zoned devices:
 *  - 6.8 dropped the zone model argument of disk_set_zoned().
 *  - 6.9 moved the zoned limits (zoned, chunk_sectors, max open/active
 *    zones, max zone append) into queue_limits; 6.11 made zoned a feature
 *    (BLK_FEAT_ZONED) and dropped the argument update_driver_data of
 *    blk_revalidate_disk_zones().
 *  - 6.10 zone write plugging replaced the required-elevator feature
 *    ELEVATOR_F_ZBD_SEQ_WRITE; 6.11 dropped QUEUE_FLAG_ZONE_RESETALL (every
 *    zoned driver must handle REQ_OP_ZONE_RESET_ALL).  Both are tested with
 *    #ifdef, as they are macros.  Since then the block layer emulates
 *    zone append for a zoned disk whose max zone append limit is 0
 *    (BIUS_HAVE_ZONE_APPEND_EMULATION).
 *  - 6.13: a driver sets its zone append limit in max_hw_zone_append_sectors;
 *    max_zone_append_sectors is derived from it (a value set there is
 *    overwritten, and the block layer then emulates zone append).
 *  - 6.19 replaced the callback and its data, the last parameters of
 *    block_device_operations.report_zones, by struct blk_report_zones_args,
 *    handed with each zone to disk_report_zone() (bius_report_zone()).
 */
#ifndef _BIUS_COMPAT_H
#define _BIUS_COMPAT_H

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/mm.h>
#include <linux/uaccess.h>
#include <linux/uio.h>
#include <linux/version.h>

/* True if building for kernel a.b or newer; the only version test. */
#define BIUS_KERNEL_AT_LEAST(a, b) \
	(KERNEL_VERSION(a, b, 0) <= LINUX_VERSION_CODE)

/*
 * True if the block layer turns zone appends into writes at the write
 * pointer for a zoned disk with max_zone_append_sectors 0 (zone write
 * plugging, 6.10): BIUS_FEATURE_ZONE_APPEND_EMULATED needs it.
 */
#define BIUS_HAVE_ZONE_APPEND_EMULATION	BIUS_KERNEL_AT_LEAST(6, 10)

/* Queue properties of a device, independent of the kernel version. */
struct bius_limits {
	unsigned int logical_block_size;
	unsigned int physical_block_size;
	unsigned int max_hw_sectors;
	unsigned short max_segments;
	unsigned int max_segment_size;
	unsigned int max_discard_sectors;	/* 0: no discard */
	unsigned int discard_granularity;
	unsigned int max_write_zeroes_sectors;	/* 0: no write zeroes */
	bool write_cache;
	bool fua;
	bool rotational;
	bool zoned;				/* host managed */
	unsigned int chunk_sectors;		/* zoned: the zone size */
	unsigned int max_open_zones;		/* zoned: 0 = no limit */
	unsigned int max_active_zones;		/* zoned: 0 = no limit */
	unsigned int max_zone_append_sectors;	/* zoned */
};

/*
 * Zoned settings that are not queue limits: before 6.11 the queue flag for
 * REQ_OP_ZONE_RESET_ALL, before 6.10 the elevator requirement (mq-deadline
 * keeps the writes of a zone in order).
 */
static inline void bius_set_zoned_flags(struct request_queue *q,
					const struct bius_limits *bl)
{
	if (!bl->zoned)
		return;
#ifdef QUEUE_FLAG_ZONE_RESETALL
	blk_queue_flag_set(QUEUE_FLAG_ZONE_RESETALL, q);
#endif
#ifdef ELEVATOR_F_ZBD_SEQ_WRITE
	blk_queue_required_elevator_features(q, ELEVATOR_F_ZBD_SEQ_WRITE);
#endif
}

/* The block layer takes the sector a zone append landed at from here. */
static inline void bius_rq_set_append_sector(struct request *rq,
					     sector_t sector)
{
	rq->__sector = sector;
}

#ifdef CONFIG_BLK_DEV_ZONED
static inline int bius_revalidate_disk_zones(struct gendisk *disk)
{
#if BIUS_KERNEL_AT_LEAST(6, 11)
	return blk_revalidate_disk_zones(disk);
#else
	return blk_revalidate_disk_zones(disk, NULL);
#endif
}

/*
 * block_device_operations.report_zones: the method is declared with
 * BIUS_REPORT_ZONES_METHOD(name), defined with the parameters
 * BIUS_REPORT_ZONES_PARAMS, and hands each zone it reports to
 * bius_report_zone() with a struct bius_zone_sink set to BIUS_ZONE_SINK
 * (which names those parameters).
 */
#if BIUS_KERNEL_AT_LEAST(6, 19)
#define BIUS_REPORT_ZONES_PARAMS	struct blk_report_zones_args *args
#define BIUS_ZONE_SINK			{ .args = args }
#else
#define BIUS_REPORT_ZONES_PARAMS	report_zones_cb cb, void *data
#define BIUS_ZONE_SINK			{ .cb = cb, .data = data }
#endif
#define BIUS_REPORT_ZONES_METHOD(name)					\
	int name(struct gendisk *disk, sector_t sector,			\
		 unsigned int nr_zones, BIUS_REPORT_ZONES_PARAMS)

struct bius_zone_sink {
#if BIUS_KERNEL_AT_LEAST(6, 19)
	struct blk_report_zones_args *args;
#else
	report_zones_cb cb;
	void *data;
#endif
};

static inline int bius_report_zone(struct gendisk *disk, struct blk_zone *zone,
				   unsigned int idx,
				   const struct bius_zone_sink *sink)
{
#if BIUS_KERNEL_AT_LEAST(6, 19)
	return disk_report_zone(disk, zone, idx, sink->args);
#else
	return sink->cb(zone, idx, sink->data);
#endif
}
#endif /* CONFIG_BLK_DEV_ZONED */

#if BIUS_KERNEL_AT_LEAST(6, 14)
#define BIUS_TAG_SET_FLAGS	0
#else
#define BIUS_TAG_SET_FLAGS	BLK_MQ_F_SHOULD_MERGE
#endif

/* The type of the NUMA node passed to blk_mq_ops.init_request. */
#if BIUS_KERNEL_AT_LEAST(7, 2)
#define BIUS_NUMA_NODE_T	int
#else
#define BIUS_NUMA_NODE_T	unsigned int
#endif

#if BIUS_KERNEL_AT_LEAST(6, 9)
static inline void bius_fill_queue_limits(struct queue_limits *lim,
					  const struct bius_limits *bl)
{
	lim->logical_block_size = bl->logical_block_size;
	lim->physical_block_size = bl->physical_block_size;
	lim->io_min = bl->physical_block_size;
	lim->max_hw_sectors = bl->max_hw_sectors;
	lim->max_segments = bl->max_segments;
	lim->max_segment_size = bl->max_segment_size;
	lim->max_hw_discard_sectors = bl->max_discard_sectors;
	if (bl->max_discard_sectors)
		lim->discard_granularity = bl->discard_granularity;
	lim->max_write_zeroes_sectors = bl->max_write_zeroes_sectors;
#if BIUS_KERNEL_AT_LEAST(6, 11)
	if (bl->write_cache)
		lim->features |= BLK_FEAT_WRITE_CACHE;
	if (bl->write_cache && bl->fua)
		lim->features |= BLK_FEAT_FUA;
	if (bl->rotational)
		lim->features |= BLK_FEAT_ROTATIONAL;
#endif
	if (bl->zoned) {
#if BIUS_KERNEL_AT_LEAST(6, 11)
		lim->features |= BLK_FEAT_ZONED;
#else
		lim->zoned = true;
#endif
		lim->chunk_sectors = bl->chunk_sectors;
		lim->max_open_zones = bl->max_open_zones;
		lim->max_active_zones = bl->max_active_zones;
#if BIUS_KERNEL_AT_LEAST(6, 13)
		lim->max_hw_zone_append_sectors = bl->max_zone_append_sectors;
#else
		lim->max_zone_append_sectors = bl->max_zone_append_sectors;
#endif
	}
}

/* Flags that still live in the request_queue before 6.11. */
static inline void bius_set_queue_flags(struct request_queue *q,
					const struct bius_limits *bl)
{
#if !BIUS_KERNEL_AT_LEAST(6, 11)
	blk_queue_write_cache(q, bl->write_cache, bl->write_cache && bl->fua);
	if (bl->rotational)
		blk_queue_flag_clear(QUEUE_FLAG_NONROT, q);
	else
		blk_queue_flag_set(QUEUE_FLAG_NONROT, q);
#endif
}

static inline struct gendisk *bius_alloc_disk(struct blk_mq_tag_set *set,
					      const struct bius_limits *bl,
					      void *queuedata)
{
	struct queue_limits lim = { };
	struct gendisk *disk;

	bius_fill_queue_limits(&lim, bl);
	disk = blk_mq_alloc_disk(set, &lim, queuedata);
	if (!IS_ERR(disk)) {
		bius_set_queue_flags(disk->queue, bl);
		bius_set_zoned_flags(disk->queue, bl);
	}
	return disk;
}
#else
static inline void bius_apply_limits(struct request_queue *q,
				     const struct bius_limits *bl)
{
	blk_queue_logical_block_size(q, bl->logical_block_size);
	blk_queue_physical_block_size(q, bl->physical_block_size);
	blk_queue_io_min(q, bl->physical_block_size);
	blk_queue_max_hw_sectors(q, bl->max_hw_sectors);
	blk_queue_max_segments(q, bl->max_segments);
	blk_queue_max_segment_size(q, bl->max_segment_size);
	if (bl->max_discard_sectors) {
		blk_queue_max_discard_sectors(q, bl->max_discard_sectors);
		q->limits.discard_granularity = bl->discard_granularity;
	}
	if (bl->max_write_zeroes_sectors)
		blk_queue_max_write_zeroes_sectors(q,
						   bl->max_write_zeroes_sectors);
	blk_queue_write_cache(q, bl->write_cache, bl->write_cache && bl->fua);
	if (bl->rotational)
		blk_queue_flag_clear(QUEUE_FLAG_NONROT, q);
	else
		blk_queue_flag_set(QUEUE_FLAG_NONROT, q);
}

/* Host-managed zone model and zoned limits, before 6.9. */
static inline void bius_apply_zoned_limits(struct gendisk *disk,
					   const struct bius_limits *bl)
{
#ifdef CONFIG_BLK_DEV_ZONED
	struct request_queue *q = disk->queue;

	if (!bl->zoned)
		return;
#if BIUS_KERNEL_AT_LEAST(6, 8)
	disk_set_zoned(disk);
#else
	disk_set_zoned(disk, BLK_ZONED_HM);
#endif
	blk_queue_chunk_sectors(q, bl->chunk_sectors);
	blk_queue_max_zone_append_sectors(q, bl->max_zone_append_sectors);
	disk_set_max_open_zones(disk, bl->max_open_zones);
	disk_set_max_active_zones(disk, bl->max_active_zones);
#endif
}

static inline struct gendisk *bius_alloc_disk(struct blk_mq_tag_set *set,
					      const struct bius_limits *bl,
					      void *queuedata)
{
	struct gendisk *disk = blk_mq_alloc_disk(set, queuedata);

	if (!IS_ERR(disk)) {
		bius_apply_limits(disk->queue, bl);
		bius_apply_zoned_limits(disk, bl);
		bius_set_zoned_flags(disk->queue, bl);
	}
	return disk;
}
#endif

/*
 * An iov_iter over one user buffer, as read() and write() build it: the
 * length capped at MAX_RW_COUNT, -EFAULT if the range is not user memory.
 * import_ubuf() does this on newer kernels but not on 6.1, whose
 * import_single_range() (gone since) needs an iovec that outlives the
 * iterator; ITER_UBUF itself is there from 6.0 on, so this one helper
 * serves every supported version.
 */
static inline int bius_import_ubuf(unsigned int direction, u64 uptr,
				   size_t len, struct iov_iter *iter)
{
	void __user *buf = u64_to_user_ptr(uptr);

	len = min_t(size_t, len, MAX_RW_COUNT);
	if (unlikely(!access_ok(buf, len)))
		return -EFAULT;
	iov_iter_ubuf(iter, direction, buf, len);
	return 0;
}

/* Set flags of a VMA being mmap()ed (mmap_lock held for writing). */
static inline void bius_vma_set_flags(struct vm_area_struct *vma,
				      unsigned long flags)
{
#if BIUS_KERNEL_AT_LEAST(6, 3)
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

/*
 * block_device_operations.open/.release: the signature changed in 6.5.  The
 * methods are declared with these parameter lists and find their disk with
 * BIUS_BDOPS_OPEN_DISK (release always has one named disk).
 */
#if BIUS_KERNEL_AT_LEAST(6, 5)
#define BIUS_BDOPS_OPEN_PARAMS		struct gendisk *disk, blk_mode_t mode
#define BIUS_BDOPS_OPEN_DISK		(disk)
#define BIUS_BDOPS_RELEASE_PARAMS	struct gendisk *disk
#else
#define BIUS_BDOPS_OPEN_PARAMS		struct block_device *bdev, fmode_t mode
#define BIUS_BDOPS_OPEN_DISK		(bdev->bd_disk)
#define BIUS_BDOPS_RELEASE_PARAMS	struct gendisk *disk, fmode_t mode
#endif

#endif /* _BIUS_COMPAT_H */
