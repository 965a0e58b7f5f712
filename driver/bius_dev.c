// SPDX-License-Identifier: GPL-2.0
/*
 * BIUS: device lifecycle.  CREATED (waiting for the queues to connect) ->
 * LIVE (disk added) -> STOPPING (being removed) -> DEAD (removed, waiting
 * for the last reference).  The disk is added and removed from work items
 * so that no ioctl or release ever waits for I/O it would have to serve.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/ctype.h>
#include <linux/idr.h>
#include <linux/log2.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "bius_drv.h"
#include "bius_compat.h"

static bool bius_name_valid(const char *name)
{
	size_t len = strnlen(name, BIUS_NAME_LEN);
	size_t i;

	if (len == BIUS_NAME_LEN)
		return false;
	for (i = 0; i < len; i++) {
		char c = name[i];

		if (!isalnum(c) && c != '_' && c != '-')
			return false;
	}
	return true;
}

static bool bius_reserved_zero(const struct bius_device_params *p)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(p->reserved); i++)
		if (p->reserved[i])
			return false;
	return true;
}

static const char *bius_block_sizes_problem(const struct bius_device_params *p)
{
	u32 lbs = p->logical_block_size, pbs = p->physical_block_size;

	if (!is_power_of_2(lbs) || lbs < 512 || lbs > 4096)
		return "logical_block_size must be a power of two in 512..4096";
	if (pbs && (!is_power_of_2(pbs) || pbs < lbs || pbs > SZ_64K))
		return "physical_block_size must be 0 or a power of two in logical_block_size..65536";
	if (!p->size)
		return "size is 0";
	if (p->size & (lbs - 1))
		return "size is not a multiple of logical_block_size";
	return NULL;
}

static const char *bius_queues_problem(const struct bius_device_params *p)
{
	u32 max_io = p->max_io_bytes;

	if (!p->nr_hw_queues || p->nr_hw_queues > BIUS_MAX_HW_QUEUES)
		return "nr_hw_queues must be in 1..BIUS_MAX_HW_QUEUES";
	if (!p->queue_depth || p->queue_depth > BIUS_MAX_QUEUE_DEPTH)
		return "queue_depth must be in 1..BIUS_MAX_QUEUE_DEPTH";
	if (max_io && (max_io < p->logical_block_size || max_io < PAGE_SIZE ||
		       max_io > BIUS_MAX_IO_BYTES))
		return "max_io_bytes must be 0 or in max(logical_block_size, page size)..BIUS_MAX_IO_BYTES";
	if (max_io & (p->logical_block_size - 1))
		return "max_io_bytes is not a multiple of logical_block_size";
	return NULL;
}

static const char *bius_transfer_problem(const struct bius_device_params *p)
{
	u32 max_io = p->max_io_bytes ?: BIUS_DEFAULT_MAX_IO_BYTES;

	switch (p->transfer_mode) {
	case BIUS_TRANSFER_COPY:
	case BIUS_TRANSFER_MAP:
		if (p->map_threshold)
			return "map_threshold is set without BIUS_TRANSFER_SELECTIVE";
		return NULL;
	case BIUS_TRANSFER_SELECTIVE:
		if (p->map_threshold > max_io)
			return "map_threshold is larger than max_io_bytes";
		return NULL;
	default:
		return "unknown transfer_mode";
	}
}

static const char *bius_params_problem(const struct bius_device_params *p)
{
	const char *why;

	if (p->abi_version != BIUS_ABI_VERSION)
		return "abi_version does not match BIUS_ABI_VERSION";
	why = bius_block_sizes_problem(p);
	if (why)
		return why;
	why = bius_queues_problem(p);
	if (why)
		return why;
	if (p->features & ~BIUS_FEATURES_ALL)
		return "unknown feature bits";
	if (p->features & BIUS_FEATURE_ZONED) {
		why = bius_zoned_problem(p);
		if (why)
			return why;
	} else if (memchr_inv(&p->zoned, 0, sizeof(p->zoned))) {
		return "zoned parameters are set without BIUS_FEATURE_ZONED";
	}
	why = bius_transfer_problem(p);
	if (why)
		return why;
	if (p->poll_usecs > BIUS_MAX_POLL_USECS)
		return "poll_usecs is larger than BIUS_MAX_POLL_USECS";
	if (p->recover_timeout_ms > BIUS_MAX_RECOVER_TIMEOUT_MS)
		return "recover_timeout_ms is larger than BIUS_MAX_RECOVER_TIMEOUT_MS";
	if (!bius_reserved_zero(p))
		return "reserved fields are not zero";
	if (!bius_name_valid(p->name))
		return "name is unterminated or has characters outside [A-Za-z0-9_-]";
	return NULL;
}

/* Validate CREATE_DEVICE parameters and apply the defaults. */
int bius_params_check(struct bius_device_params *p)
{
	const char *why = bius_params_problem(p);

	if (why) {
		pr_warn("CREATE_DEVICE refused: %s\n", why);
		return -EINVAL;
	}
	p->dev_id = 0;
	if (!p->physical_block_size)
		p->physical_block_size = p->logical_block_size;
	if (!p->max_io_bytes)
		p->max_io_bytes = BIUS_DEFAULT_MAX_IO_BYTES;
	if (!p->timeout_ms)
		p->timeout_ms = BIUS_DEFAULT_TIMEOUT_MS;
	if (p->transfer_mode == BIUS_TRANSFER_SELECTIVE && !p->map_threshold)
		p->map_threshold = min(BIUS_DEFAULT_MAP_THRESHOLD,
				       p->max_io_bytes);
	bius_zoned_normalize(p);
	return 0;
}

static void bius_dev_limits(const struct bius_device *dev,
			    struct bius_limits *bl)
{
	const struct bius_device_params *p = &dev->params;
	/* The request length travels in a __u32. */
	unsigned int max_len_sectors =
		round_down(UINT_MAX, p->logical_block_size) >> SECTOR_SHIFT;

	memset(bl, 0, sizeof(*bl));
	bl->logical_block_size = p->logical_block_size;
	bl->physical_block_size = p->physical_block_size;
	bl->max_hw_sectors = p->max_io_bytes >> SECTOR_SHIFT;
	bl->max_segments = USHRT_MAX;
	bl->max_segment_size = UINT_MAX;
	if (p->features & BIUS_FEATURE_DISCARD) {
		bl->max_discard_sectors = max_len_sectors;
		bl->discard_granularity = p->physical_block_size;
	}
	if (p->features & BIUS_FEATURE_WRITE_ZEROES)
		bl->max_write_zeroes_sectors = max_len_sectors;
	bl->write_cache = p->features & BIUS_FEATURE_WRITE_CACHE;
	bl->fua = p->features & BIUS_FEATURE_FUA;
	bl->rotational = p->features & BIUS_FEATURE_ROTATIONAL;
	bius_zoned_limits(dev, bl);
}

static int bius_disk_open(BIUS_BDOPS_OPEN_PARAMS)
{
	struct bius_device *dev = BIUS_BDOPS_OPEN_DISK->private_data;
	int ret = 0;

	mutex_lock(&dev->lock);
	if (dev->state >= BIUS_STATE_STOPPING)
		ret = -ENXIO;
	else
		dev->open_count++;
	mutex_unlock(&dev->lock);
	return ret;
}

static void bius_disk_release(BIUS_BDOPS_RELEASE_PARAMS)
{
	struct bius_device *dev = disk->private_data;

	mutex_lock(&dev->lock);
	dev->open_count--;
	mutex_unlock(&dev->lock);
}

/* The disk holds a device reference from add_disk until it is freed. */
static void bius_free_disk(struct gendisk *disk)
{
	bius_dev_put(disk->private_data);
}

static const struct block_device_operations bius_bdops = {
	.owner		= THIS_MODULE,
	.open		= bius_disk_open,
	.release	= bius_disk_release,
	.free_disk	= bius_free_disk,
	.report_zones	= bius_report_zones,
};

/* Fail everything in flight and make every queue refuse new requests. */
static void bius_dev_abort(struct bius_device *dev)
{
	u32 i;

	for (i = 0; i < dev->params.nr_hw_queues; i++)
		bius_queue_stop(&dev->queues[i]);
	for (i = 0; i < dev->params.nr_hw_queues; i++)
		bius_queue_fail_xfer(&dev->queues[i]);
	bius_dev_fail_sent(dev);
}

static void bius_dev_add_work(struct work_struct *work)
{
	struct bius_device *dev = container_of(work, struct bius_device,
					       add_work);
	int ret;

	/* A zoned disk's zones are read (from the daemon) before it is added. */
	ret = bius_zoned_revalidate(dev);
	if (!ret) {
		ret = add_disk(dev->disk);
		if (ret)
			pr_warn("%s: add_disk failed: %d\n", dev->params.name,
				ret);
	}
	if (ret) {
		bius_dev_kill(dev);
	} else {
		bius_dev_get(dev);	/* put by bius_free_disk() */
		mutex_lock(&dev->lock);
		dev->disk_added = true;
		strscpy(dev->disk_name, dev->disk->disk_name, BIUS_NAME_LEN);
		if (dev->state == BIUS_STATE_CREATED)
			dev->state = BIUS_STATE_LIVE;
		mutex_unlock(&dev->lock);
	}
	bius_dev_put(dev);
}

static void bius_dev_remove_work(struct work_struct *work)
{
	struct bius_device *dev = container_of(work, struct bius_device,
					       remove_work);
	bool added;

	flush_work(&dev->add_work);

	mutex_lock(&dev->lock);
	added = dev->disk_added;
	mutex_unlock(&dev->lock);

	/* While the queues are still served unless the device was killed. */
	if (added)
		del_gendisk(dev->disk);
	bius_dev_abort(dev);
	put_disk(dev->disk);
	dev->disk = NULL;

	mutex_lock(&dev->lock);
	dev->state = BIUS_STATE_DEAD;
	mutex_unlock(&dev->lock);
	complete_all(&dev->removed);
	bius_dev_put(dev);
}

/* Called with dev->lock held: start the removal, once. */
static void bius_dev_stopping_locked(struct bius_device *dev)
{
	lockdep_assert_held(&dev->lock);

	if (dev->state < BIUS_STATE_STOPPING)
		dev->state = BIUS_STATE_STOPPING;
	if (!dev->remove_queued) {
		dev->remove_queued = true;
		bius_dev_get(dev);	/* put by bius_dev_remove_work() */
		queue_work(bius_wq, &dev->remove_work);
	}
}

/*
 * The death path (an fd of the daemon was closed, add_disk failed, ...):
 * fail every request now and remove the disk in the background.
 */
void bius_dev_kill(struct bius_device *dev)
{
	bool dead;

	mutex_lock(&dev->lock);
	dead = dev->state == BIUS_STATE_DEAD;
	if (!dead)
		bius_dev_stopping_locked(dev);
	mutex_unlock(&dev->lock);

	if (!dead)
		bius_dev_abort(dev);
}

/*
 * Graceful removal (BIUS_IOC_DESTROY_DEVICE): the disk goes away while the
 * queues are still served, then the connections end.  Waits for it.
 */
int bius_dev_destroy(struct bius_device *dev, u32 flags)
{
	int ret = 0;

	mutex_lock(&dev->lock);
	if (dev->state == BIUS_STATE_DEAD)
		ret = -ENODEV;
	else if (dev->state != BIUS_STATE_STOPPING && dev->open_count &&
		 !(flags & BIUS_DESTROY_FORCE))
		ret = -EBUSY;
	else
		bius_dev_stopping_locked(dev);
	mutex_unlock(&dev->lock);

	if (ret)
		return ret;
	return wait_for_completion_killable(&dev->removed);
}

int bius_dev_connect(struct bius_device *dev, struct bius_conn *conn,
		     u32 queue)
{
	struct bius_queue *q;
	int ret = 0;

	if (queue >= dev->params.nr_hw_queues)
		return -EINVAL;
	q = &dev->queues[queue];

	mutex_lock(&dev->lock);
	if (dev->state >= BIUS_STATE_STOPPING) {
		ret = -ENODEV;
	} else if (dev->state != BIUS_STATE_CREATED || q->connected) {
		ret = -EBUSY;
	} else {
		q->connected = true;
		bius_dev_get(dev);	/* put when the file is released */
		if (++dev->nr_connected == dev->params.nr_hw_queues) {
			bius_dev_get(dev);	/* put by bius_dev_add_work() */
			queue_work(bius_wq, &dev->add_work);
		}
		/* publish the queue to read()/write(): bius_conn_queue() */
		smp_store_release(&conn->q, q);
	}
	mutex_unlock(&dev->lock);
	return ret;
}

void bius_dev_get_info(struct bius_device *dev, struct bius_device_info *info)
{
	u32 i;

	memset(info, 0, sizeof(*info));
	info->dev_id = dev->id;
	info->owner_pid = pid_vnr(dev->owner_pid);
	info->params = dev->params;
	info->map_slot_bytes = dev->map_slot_bytes;
	info->map_window_bytes = bius_map_window_bytes(dev);
	for (i = 0; i < dev->params.nr_hw_queues; i++) {
		info->mapped_requests += READ_ONCE(dev->queues[i].nr_mapped);
		info->segmented_requests +=
			READ_ONCE(dev->queues[i].nr_segmented);
	}

	mutex_lock(&dev->lock);
	info->state = dev->state;
	info->nr_connected = dev->nr_connected;
	memcpy(info->disk_name, dev->disk_name, BIUS_NAME_LEN);
	mutex_unlock(&dev->lock);
}

/* Name the device and its disk once its id is known. */
static void bius_dev_set_name(struct bius_device *dev)
{
	if (!dev->params.name[0])
		snprintf(dev->params.name, BIUS_NAME_LEN, "bius%u", dev->id);
	strscpy(dev->disk->disk_name, dev->params.name, DISK_NAME_LEN);
}

static int bius_dev_init_tag_set(struct bius_device *dev)
{
	struct blk_mq_tag_set *set = &dev->tag_set;
	int ret;

	set->ops = &bius_mq_ops;
	set->nr_hw_queues = dev->params.nr_hw_queues;
	set->queue_depth = dev->params.queue_depth;
	set->numa_node = NUMA_NO_NODE;
	set->cmd_size = sizeof(struct bius_cmd);
	set->flags = BIUS_TAG_SET_FLAGS;
	set->driver_data = dev;
	set->timeout = msecs_to_jiffies(dev->params.timeout_ms);

	ret = blk_mq_alloc_tag_set(set);
	if (!ret)
		dev->tag_set_allocated = true;
	return ret;
}

static int bius_dev_init_disk(struct bius_device *dev)
{
	struct bius_limits bl;
	struct gendisk *disk;

	bius_dev_limits(dev, &bl);
	disk = bius_alloc_disk(&dev->tag_set, &bl, dev);
	if (IS_ERR(disk))
		return PTR_ERR(disk);

	disk->fops = &bius_bdops;
	disk->private_data = dev;
	set_capacity(disk, dev->params.size >> SECTOR_SHIFT);
	set_disk_ro(disk, dev->params.features & BIUS_FEATURE_READ_ONLY);
	dev->disk = disk;
	return 0;
}

/* Allocate a device for validated parameters; one reference, unnamed. */
struct bius_device *bius_dev_alloc(const struct bius_device_params *p)
{
	struct bius_device *dev;
	u32 i;
	int ret;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return ERR_PTR(-ENOMEM);
	kref_init(&dev->kref);
	mutex_init(&dev->lock);
	INIT_LIST_HEAD(&dev->owner_node);
	INIT_WORK(&dev->add_work, bius_dev_add_work);
	INIT_WORK(&dev->remove_work, bius_dev_remove_work);
	init_completion(&dev->removed);
	dev->params = *p;
	dev->state = BIUS_STATE_CREATED;
	dev->owner_pid = get_pid(task_tgid(current));
	dev->map_slot_bytes = bius_map_slot_bytes(p);
	bius_zoned_init(dev);

	ret = -ENOMEM;
	dev->queues = kcalloc(p->nr_hw_queues, sizeof(*dev->queues),
			      GFP_KERNEL);
	if (!dev->queues)
		goto fail;
	for (i = 0; i < p->nr_hw_queues; i++)
		bius_queue_init(&dev->queues[i], dev, i);

	ret = bius_dev_init_tag_set(dev);
	if (ret)
		goto fail;
	ret = bius_dev_init_disk(dev);
	if (ret)
		goto fail;
	return dev;

fail:
	bius_dev_free(dev);
	return ERR_PTR(ret);
}

/* Free a device: unregistered, or its last reference is gone. */
void bius_dev_free(struct bius_device *dev)
{
	u32 i;

	if (dev->queues)
		for (i = 0; i < dev->params.nr_hw_queues; i++)
			bius_window_free(dev->queues[i].win);
	if (dev->disk)
		put_disk(dev->disk);
	if (dev->tag_set_allocated)
		blk_mq_free_tag_set(&dev->tag_set);
	put_pid(dev->owner_pid);
	kfree(dev->queues);
	kfree(dev);
}

/* The registry: the id -> device map, device references and names. */

/* Ids are < BIUS_MAX_DEVICES. */
#define BIUS_MAX_DEVICES	(1 << 16)

/* Guards bius_idr, device names and owners, CONNECT; see bius.h. */
DEFINE_MUTEX(bius_registry_lock);
static DEFINE_IDR(bius_idr);

void bius_dev_get(struct bius_device *dev)
{
	kref_get(&dev->kref);
}

static void bius_dev_release(struct kref *kref)
	__releases(&bius_registry_lock)
{
	struct bius_device *dev = container_of(kref, struct bius_device,
					       kref);

	idr_remove(&bius_idr, dev->id);
	mutex_unlock(&bius_registry_lock);
	bius_dev_free(dev);
}

/* Never call with bius_registry_lock or dev->lock held. */
void bius_dev_put(struct bius_device *dev)
{
	kref_put_mutex(&dev->kref, bius_dev_release, &bius_registry_lock);
}

struct bius_device *bius_dev_lookup(u32 id)
{
	struct bius_device *dev;

	mutex_lock(&bius_registry_lock);
	dev = idr_find(&bius_idr, id);
	if (dev)
		bius_dev_get(dev);
	mutex_unlock(&bius_registry_lock);
	return dev;
}

/* Is @name used by a device that is not dead?  Registry lock held. */
static bool bius_name_taken(const char *name)
{
	struct bius_device *dev;
	bool taken = false;
	int id;

	lockdep_assert_held(&bius_registry_lock);
	idr_for_each_entry(&bius_idr, dev, id) {
		mutex_lock(&dev->lock);
		taken = dev->state != BIUS_STATE_DEAD &&
			!strncmp(dev->params.name, name, BIUS_NAME_LEN);
		mutex_unlock(&dev->lock);
		if (taken)
			break;
	}
	return taken;
}

/* Give @dev an id and a name and make @conn its owner.  Registry lock held. */
int bius_dev_register(struct bius_device *dev, struct bius_conn *conn)
{
	bool named = dev->params.name[0];
	int id;

	lockdep_assert_held(&bius_registry_lock);
	if (named && bius_name_taken(dev->params.name))
		goto taken;

	id = idr_alloc(&bius_idr, NULL, 0, BIUS_MAX_DEVICES, GFP_KERNEL);
	if (id < 0)
		return id;
	dev->id = id;
	dev->params.dev_id = id;
	bius_dev_set_name(dev);
	if (!named && bius_name_taken(dev->params.name)) {
		idr_remove(&bius_idr, id);
		goto taken;
	}
	idr_replace(&bius_idr, dev, id);
	dev->owner = conn;
	list_add_tail(&dev->owner_node, &conn->owned);
	return 0;

taken:
	pr_warn("CREATE_DEVICE refused: name %s is already used\n",
		dev->params.name);
	return -EEXIST;
}

/* The device with id @id, or NULL; no reference.  Registry lock held. */
struct bius_device *bius_dev_find(u32 id)
{
	lockdep_assert_held(&bius_registry_lock);
	return idr_find(&bius_idr, id);
}

/*
 * Store up to @capacity device ids in @ids (may be NULL for none) and
 * return how many devices there are.  Registry lock held.
 */
u32 bius_dev_ids(u32 *ids, u32 capacity)
{
	struct bius_device *dev;
	u32 count = 0;
	int id;

	lockdep_assert_held(&bius_registry_lock);
	idr_for_each_entry(&bius_idr, dev, id) {
		if (count < capacity)
			ids[count] = id;
		count++;
	}
	return count;
}

/* At module unload: every device is gone by now. */
void bius_registry_exit(void)
{
	if (!idr_is_empty(&bius_idr))
		pr_err("devices left behind at unload\n");
	idr_destroy(&bius_idr);
}
