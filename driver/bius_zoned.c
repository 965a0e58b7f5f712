// SPDX-License-Identifier: GPL-2.0
/*
 * BIUS: host-managed zoned devices.  The daemon keeps the zones; the driver
 * checks the geometry, asks the daemon for zone reports (REPORT_ZONES, sent
 * as driver-internal REQ_OP_DRV_IN requests with a kernel buffer in the
 * pdu) and checks every zone and append position the daemon reports before
 * the block layer sees it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/string.h>
#include <linux/uio.h>

#include "bius_drv.h"
#include "bius_compat.h"

/* Number of zones, a smaller last zone included (zone_size is valid). */
static u64 bius_params_nr_zones(const struct bius_device_params *p)
{
	u64 zone_size = p->zoned.zone_size;

	return (p->size >> ilog2(zone_size)) + !!(p->size & (zone_size - 1));
}

static const char *bius_zone_size_problem(const struct bius_device_params *p)
{
	u64 zone_size = p->zoned.zone_size;
	u32 lbs = p->logical_block_size;

	if (!zone_size || !is_power_of_2(zone_size))
		return "zone_size is not a power of two";
	if (zone_size & (lbs - 1))
		return "zone_size is not a multiple of logical_block_size";
	if (zone_size < 2ULL * lbs)
		return "zone_size is smaller than 2 logical blocks";
	if (zone_size > p->size)
		return "zone_size is larger than the device";
	if ((zone_size >> SECTOR_SHIFT) > UINT_MAX)
		return "zone_size is 2 TiB or more";
	return NULL;
}

static const char *bius_zone_layout_problem(const struct bius_device_params *p)
{
	const struct bius_zoned_params *z = &p->zoned;
	u32 max_io = p->max_io_bytes ?: BIUS_DEFAULT_MAX_IO_BYTES;
	u32 lbs = p->logical_block_size;
	u64 nr_zones = bius_params_nr_zones(p);

	if (z->zone_capacity > z->zone_size)
		return "zone_capacity is larger than zone_size";
	if (z->zone_capacity & (lbs - 1))
		return "zone_capacity is not a multiple of logical_block_size";
	if (nr_zones > BIUS_MAX_ZONES)
		return "more than BIUS_MAX_ZONES zones";
	if (z->nr_conv_zones >= nr_zones)
		return "nr_conv_zones is not below the number of zones";
	if (z->max_append_bytes > max_io)
		return "max_append_bytes is larger than max_io_bytes";
	if (z->max_append_bytes > z->zone_size)
		return "max_append_bytes is larger than zone_size";
	if (z->max_append_bytes & (lbs - 1))
		return "max_append_bytes is not a multiple of logical_block_size";
	if (z->max_append_bytes &&
	    (p->features & BIUS_FEATURE_ZONE_APPEND_EMULATED))
		return "max_append_bytes is set with BIUS_FEATURE_ZONE_APPEND_EMULATED";
	return NULL;
}

/* Why the zoned parameters of a BIUS_FEATURE_ZONED device are refused. */
const char *bius_zoned_problem(const struct bius_device_params *p)
{
	return bius_zone_size_problem(p) ?: bius_zone_layout_problem(p);
}

/*
 * Apply the defaults and normalise the limits as null_blk does: a limit of
 * at least the number of sequential zones is no limit, and max open is
 * lowered to max active.  After the other defaults (max_io_bytes).
 */
void bius_zoned_normalize(struct bius_device_params *p)
{
	struct bius_zoned_params *z = &p->zoned;
	u32 nr_seq;

	if (!(p->features & BIUS_FEATURE_ZONED))
		return;
	nr_seq = bius_params_nr_zones(p) - z->nr_conv_zones;
	if (!z->zone_capacity)
		z->zone_capacity = z->zone_size;
	/* emulated appends: max zone append 0 tells the block layer so */
	if (!z->max_append_bytes &&
	    !(p->features & BIUS_FEATURE_ZONE_APPEND_EMULATED))
		z->max_append_bytes = min_t(u64, p->max_io_bytes, z->zone_size);
	if (z->max_active_zones >= nr_seq)
		z->max_active_zones = 0;
	if (z->max_active_zones && z->max_open_zones > z->max_active_zones)
		z->max_open_zones = z->max_active_zones;
	else if (z->max_open_zones >= nr_seq)
		z->max_open_zones = 0;
}

void bius_zoned_init(struct bius_device *dev)
{
	const struct bius_device_params *p = &dev->params;

	if (!(p->features & BIUS_FEATURE_ZONED))
		return;
	dev->zone_sectors = p->zoned.zone_size >> SECTOR_SHIFT;
	dev->nr_zones = bius_params_nr_zones(p);
}

void bius_zoned_limits(const struct bius_device *dev, struct bius_limits *bl)
{
	const struct bius_zoned_params *z = &dev->params.zoned;

	if (!dev->zone_sectors)
		return;
	bl->zoned = true;
	bl->chunk_sectors = dev->zone_sectors;
	bl->max_open_zones = z->max_open_zones;
	bl->max_active_zones = z->max_active_zones;
	bl->max_zone_append_sectors = z->max_append_bytes >> SECTOR_SHIFT;
}

/*
 * Before add_disk: the block layer reads every zone (REPORT_ZONES through
 * the connected queues) and sets up its zone bitmaps and nr_zones.
 */
int bius_zoned_revalidate(struct bius_device *dev)
{
	int ret;

	if (!dev->zone_sectors)
		return 0;
	ret = bius_revalidate_disk_zones(dev->disk);
	if (ret)
		pr_warn("%s: zone revalidation failed: %d\n", dev->params.name,
			ret);
	return ret;
}

static sector_t bius_zone_start(const struct bius_device *dev, u32 zno)
{
	return (sector_t)zno << ilog2(dev->zone_sectors);
}

/* Length of zone @zno: the zone size, or less for the last zone. */
static sector_t bius_zone_len(const struct bius_device *dev, u32 zno)
{
	sector_t end = dev->params.size >> SECTOR_SHIFT;

	return min_t(sector_t, dev->zone_sectors,
		     end - bius_zone_start(dev, zno));
}

static bool bius_zone_conv(const struct bius_device *dev, u32 zno)
{
	return zno < dev->params.zoned.nr_conv_zones;
}

static sector_t bius_zone_capacity(const struct bius_device *dev, u32 zno)
{
	sector_t len = bius_zone_len(dev, zno);

	if (bius_zone_conv(dev, zno))
		return len;
	return min_t(sector_t, len,
		     dev->params.zoned.zone_capacity >> SECTOR_SHIFT);
}

static bool bius_zone_cond_valid(const struct blk_zone *z, bool conv)
{
	if (conv)
		return z->cond == BLK_ZONE_COND_NOT_WP;
	switch (z->cond) {
	case BLK_ZONE_COND_EMPTY:
	case BLK_ZONE_COND_IMP_OPEN:
	case BLK_ZONE_COND_EXP_OPEN:
	case BLK_ZONE_COND_CLOSED:
	case BLK_ZONE_COND_FULL:
	case BLK_ZONE_COND_READONLY:
	case BLK_ZONE_COND_OFFLINE:
		return true;
	default:
		return false;
	}
}

/*
 * The write pointer: at the start of an empty zone, below the capacity of
 * an open or closed one; for a zone without one (conventional, full, read
 * only, offline) anywhere in the zone, its end, or all ones.
 */
static bool bius_zone_wp_valid(const struct blk_zone *z)
{
	switch (z->cond) {
	case BLK_ZONE_COND_EMPTY:
		return z->wp == z->start;
	case BLK_ZONE_COND_IMP_OPEN:
	case BLK_ZONE_COND_EXP_OPEN:
	case BLK_ZONE_COND_CLOSED:
		return z->wp >= z->start && z->wp < z->start + z->capacity;
	default:
		return z->wp == U64_MAX ||
		       (z->wp >= z->start && z->wp <= z->start + z->len);
	}
}

/* Why zone @zno as the daemon reported it is refused, or NULL. */
static const char *bius_zone_problem(const struct bius_device *dev,
				     const struct blk_zone *z, u32 zno)
{
	bool conv = bius_zone_conv(dev, zno);

	if (z->start != bius_zone_start(dev, zno))
		return "start is not the next zone's";
	if (z->len != bius_zone_len(dev, zno))
		return "len is not the zone's";
	if (z->capacity != bius_zone_capacity(dev, zno))
		return "capacity is not the zone's";
	if (z->type != (conv ? BLK_ZONE_TYPE_CONVENTIONAL :
			BLK_ZONE_TYPE_SEQWRITE_REQ))
		return "type is not the zone's";
	if (!bius_zone_cond_valid(z, conv))
		return "cond is invalid for the zone type";
	if (!bius_zone_wp_valid(z))
		return "wp is invalid for the zone condition";
	if (memchr_inv(z->resv, 0, sizeof(z->resv)) ||
	    memchr_inv(z->reserved, 0, sizeof(z->reserved)))
		return "reserved bytes are not zero";
	return NULL;
}

static struct bius_device *bius_rq_dev(struct request *rq)
{
	struct bius_queue *q = rq->mq_hctx->driver_data;

	return q->dev;
}

/*
 * write() side: the payload of a successful REPORT_ZONES completion, @len
 * bytes, into the request's kernel buffer.  0, -EINVAL if the length or a
 * zone is wrong, or -EFAULT.
 */
int bius_zoned_recv_report(struct request *rq, u32 len, struct iov_iter *from)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	struct bius_device *dev = bius_rq_dev(rq);
	u32 first = cmd->zone_sector >> ilog2(dev->zone_sectors);
	u32 n = len / sizeof(struct blk_zone), i;
	const char *why;

	if (len % sizeof(struct blk_zone) || !n || n > cmd->zone_room)
		return -EINVAL;
	if (copy_from_iter(cmd->zones, len, from) != len)
		return -EFAULT;
	for (i = 0; i < n; i++) {
		why = bius_zone_problem(dev, &cmd->zones[i], first + i);
		if (why) {
			pr_warn_ratelimited("%s: REPORT_ZONES completion refused: zone %u: %s\n",
					    dev->params.name, first + i, why);
			return -EINVAL;
		}
	}
	cmd->zone_count = n;
	return 0;
}

/*
 * write() side: a successful ZONE_APPEND landed at @sector, which must be
 * block aligned with the data inside the capacity of the request's zone.
 */
int bius_zoned_end_append(struct request *rq, u64 sector)
{
	struct bius_device *dev = bius_rq_dev(rq);
	u32 zno = blk_rq_pos(rq) >> ilog2(dev->zone_sectors);
	u32 lbs_sectors = dev->params.logical_block_size >> SECTOR_SHIFT;
	sector_t start, end;

	if (zno >= dev->nr_zones)
		return -EINVAL;
	start = bius_zone_start(dev, zno);
	end = start + bius_zone_capacity(dev, zno);
	if (sector < start || sector > end ||
	    blk_rq_sectors(rq) > end - sector || sector & (lbs_sectors - 1))
		return -EINVAL;
	bius_rq_set_append_sector(rq, sector);
	return 0;
}

/* queue_rq: the zone operations and the driver's own REPORT_ZONES. */
int bius_zoned_map_op(struct request *rq, struct bius_cmd *cmd)
{
	if (!bius_rq_dev(rq)->zone_sectors)
		return -EOPNOTSUPP;
	switch (req_op(rq)) {
	case REQ_OP_ZONE_APPEND:
		/* the block layer writes them at the write pointer instead */
		if (bius_rq_dev(rq)->params.features &
		    BIUS_FEATURE_ZONE_APPEND_EMULATED)
			return -EOPNOTSUPP;
		cmd->op = BIUS_OP_ZONE_APPEND;
		if (rq->cmd_flags & REQ_FUA)
			cmd->flags |= BIUS_REQ_FUA;
		break;
	case REQ_OP_ZONE_OPEN:
		cmd->op = BIUS_OP_ZONE_OPEN;
		break;
	case REQ_OP_ZONE_CLOSE:
		cmd->op = BIUS_OP_ZONE_CLOSE;
		break;
	case REQ_OP_ZONE_FINISH:
		cmd->op = BIUS_OP_ZONE_FINISH;
		break;
	case REQ_OP_ZONE_RESET:
		cmd->op = BIUS_OP_ZONE_RESET;
		break;
	case REQ_OP_ZONE_RESET_ALL:
		cmd->op = BIUS_OP_ZONE_RESET_ALL;
		break;
	case REQ_OP_DRV_IN:
		/* only bius_report_chunk() issues these */
		if (!cmd->zones)
			return -EOPNOTSUPP;
		cmd->op = BIUS_OP_REPORT_ZONES;
		break;
	default:
		return -EOPNOTSUPP;
	}
	return 0;
}

/*
 * Ask the daemon for up to @room zones from zone @first, into @zones.
 * Returns how many it reported (1..@room) or a negative errno.
 */
static int bius_report_chunk(struct gendisk *disk, u32 first, u32 room,
			     struct blk_zone *zones)
{
	struct bius_device *dev = disk->private_data;
	struct bius_cmd *cmd;
	struct request *rq;
	blk_status_t status;
	int ret;

	rq = blk_mq_alloc_request(disk->queue, REQ_OP_DRV_IN, 0);
	if (IS_ERR(rq))
		return PTR_ERR(rq);
	cmd = blk_mq_rq_to_pdu(rq);
	cmd->zones = zones;
	cmd->zone_room = room;
	cmd->zone_count = 0;
	cmd->zone_sector = bius_zone_start(dev, first);

	/* the request timeout and the death path end it like any other */
	status = blk_execute_rq(rq, false);
	ret = status ? blk_status_to_errno(status) : cmd->zone_count;

	cmd->zones = NULL;
	blk_mq_free_request(rq);
	return ret;
}

/* block_device_operations.report_zones */
int bius_report_zones(struct gendisk *disk, sector_t sector,
		      unsigned int nr_zones, BIUS_REPORT_ZONES_PARAMS)
{
	const struct bius_zone_sink sink = BIUS_ZONE_SINK;
	struct bius_device *dev = disk->private_data;
	unsigned int done = 0, i;
	u64 first;
	struct blk_zone *zones;
	u32 room;
	int n, ret = 0;

	if (!dev->zone_sectors)
		return -EOPNOTSUPP;
	first = sector >> ilog2(dev->zone_sectors);
	if (first >= dev->nr_zones)
		return 0;
	nr_zones = min_t(u64, nr_zones, dev->nr_zones - first);
	room = min_t(u32, nr_zones,
		     dev->params.max_io_bytes / sizeof(struct blk_zone));
	zones = kvmalloc_array(room, sizeof(*zones), GFP_KERNEL);
	if (!zones)
		return -ENOMEM;

	while (done < nr_zones && !ret) {
		n = bius_report_chunk(disk, first + done,
				      min(room, nr_zones - done), zones);
		if (n < 0) {
			ret = n;
			break;
		}
		for (i = 0; i < n && !ret; i++)
			ret = bius_report_zone(disk, &zones[i], done + i, &sink);
		done += n;
	}
	kvfree(zones);
	return ret ?: done;
}
