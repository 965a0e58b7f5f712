// SPDX-License-Identifier: GPL-2.0
/*
 * BIUS: device lifecycle.
 *
 * The states and what moves a device between them are the uapi header's
 * ("Lifecycle"); each transition is one function here:
 *
 *   CREATED -> LIVE		bius_dev_add_work()
 *   LIVE -> RECOVERING		bius_dev_hold_locked()
 *   RECOVERING -> LIVE		bius_dev_resume_work()
 *   not DEAD -> STOPPING	bius_dev_stopping_locked()
 *   STOPPING -> DEAD		bius_dev_remove_work()
 *
 * The disk is added, resumed and removed from work items so that no ioctl
 * or release ever waits for I/O it would have to serve.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/file.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "bius_drv.h"
#include "bius_compat.h"

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

/* Is the device on its way out (STOPPING or DEAD)? */
static bool bius_state_ending(u32 state)
{
	return state == BIUS_STATE_STOPPING || state == BIUS_STATE_DEAD;
}

static int bius_disk_open(BIUS_BDOPS_OPEN_PARAMS)
{
	struct bius_device *dev = BIUS_BDOPS_OPEN_DISK->private_data;
	int ret = 0;

	mutex_lock(&dev->lock);
	if (bius_state_ending(dev->state))
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

/*
 * Fail everything in flight and make every queue refuse new requests; the
 * requests a recovery held then reach the queues, and fail.
 */
static void bius_dev_abort(struct bius_device *dev)
{
	u32 i;

	for (i = 0; i < dev->params.nr_hw_queues; i++)
		bius_queue_stop(&dev->queues[i]);
	for (i = 0; i < dev->params.nr_hw_queues; i++)
		bius_queue_fail_xfer(&dev->queues[i]);
	bius_dev_fail_sent(dev);

	mutex_lock(&dev->lock);
	if (dev->held) {
		dev->held = false;
		blk_mq_unquiesce_queue(dev->disk->queue);
	}
	mutex_unlock(&dev->lock);
}

/* Leaving RECOVERING (dev->lock held): the timeout and the module pin go. */
static void bius_dev_end_recovery_locked(struct bius_device *dev)
{
	lockdep_assert_held(&dev->lock);
	cancel_delayed_work(&dev->recover_timeout);
	module_put(THIS_MODULE);
}

/* -> LIVE (dev->lock held): from CREATED, or RECOVERING once resumed. */
static void bius_dev_live_locked(struct bius_device *dev)
{
	lockdep_assert_held(&dev->lock);
	if (dev->state == BIUS_STATE_RECOVERING) {
		bius_dev_end_recovery_locked(dev);
		pr_info("%s: recovered\n", dev->params.name);
	}
	dev->state = BIUS_STATE_LIVE;
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
			bius_dev_live_locked(dev);
		mutex_unlock(&dev->lock);
	}
	bius_dev_put(dev);
}

static void bius_dev_remove_work(struct work_struct *work)
{
	struct bius_device *dev = container_of(work, struct bius_device,
					       remove_work);
	bool added;

	/*
	 * Not flush_work(): bius_wq has a rescuer, which may be running this
	 * work alone.  An add that has not started never will; its reference
	 * is put here.
	 */
	if (cancel_work_sync(&dev->add_work))
		bius_dev_put(dev);

	mutex_lock(&dev->lock);
	added = dev->disk_added;
	mutex_unlock(&dev->lock);

	/* While the queues are still served unless the device was killed. */
	if (added)
		del_gendisk(dev->disk);
	bius_dev_abort(dev);
	/* a timeout's reap may abort too: not once the disk is put */
	if (cancel_work_sync(&dev->reap_work))
		bius_dev_put(dev);
	/* a resume's zone report has failed by now */
	cancel_work_sync(&dev->resume_work);
	cancel_delayed_work_sync(&dev->recover_timeout);
	/*
	 * The zone report of a zoned disk's bring-up armed the queue's request
	 * timer.  del_gendisk() stops it for an added disk; for one never
	 * added, disk_release() does only in later stable releases (6.12.107
	 * does, 6.12.95 frees the queue with the timer pending and oopses when
	 * it fires).
	 */
	if (!added)
		blk_sync_queue(dev->disk->queue);
	put_disk(dev->disk);
	dev->disk = NULL;

	mutex_lock(&dev->lock);
	dev->state = BIUS_STATE_DEAD;
	mutex_unlock(&dev->lock);
	complete_all(&dev->removed);
	bius_dev_put(dev);
}

/* -> STOPPING (dev->lock held): start the removal, once. */
static void bius_dev_stopping_locked(struct bius_device *dev)
{
	lockdep_assert_held(&dev->lock);

	if (dev->state == BIUS_STATE_RECOVERING)
		bius_dev_end_recovery_locked(dev);
	if (!bius_state_ending(dev->state))
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
	/*
	 * A recovering device whose held I/O no new daemon serves yet fails
	 * its requests now; one whose new daemon is connected (its zones
	 * being read again) is removed gracefully, as a live one.
	 */
	bool abort = false;
	int ret = 0;

	/*
	 * add_disk() scanned the partitions through a file it opened and put
	 * from a kworker, which only queues the release on the delayed fput
	 * list: release such files first, or the disk may look open.  Here,
	 * in the caller's context: from the WQ_MEM_RECLAIM bius_wq, newer
	 * kernels' flush_delayed_fput() (it flushes a work of the system
	 * workqueue) is a flush dependency the workqueue code warns about.
	 */
	mutex_lock(&dev->lock);
	if (dev->open_count && !(flags & BIUS_DESTROY_FORCE)) {
		mutex_unlock(&dev->lock);
		flush_delayed_fput();
		mutex_lock(&dev->lock);
	}
	if (dev->state == BIUS_STATE_DEAD) {
		ret = -ENODEV;
	} else if (dev->state != BIUS_STATE_STOPPING && dev->open_count &&
		 !(flags & BIUS_DESTROY_FORCE)) {
		ret = -EBUSY;
	} else {
		abort = dev->state == BIUS_STATE_RECOVERING && dev->held;
		bius_dev_stopping_locked(dev);
	}
	mutex_unlock(&dev->lock);

	if (ret)
		return ret;
	if (abort)
		bius_dev_abort(dev);
	return wait_for_completion_killable(&dev->removed);
}

/*
 * LIVE -> RECOVERING, or again while RECOVERING when a new daemon is lost
 * before the device is live (dev->lock held): new requests wait in the
 * quiesced disk queue, every queue's connection goes, and every request
 * the daemon had goes back to the block layer: those it had not taken now,
 * those it held (@sent) by bius_replay_sent() once the locks are dropped.
 */
static void bius_dev_hold_locked(struct bius_device *dev,
				 struct list_head *sent)
{
	u32 i;

	lockdep_assert_held(&dev->lock);
	if (dev->state == BIUS_STATE_LIVE) {
		unsigned long delay =
			msecs_to_jiffies(dev->params.recover_timeout_ms);

		dev->state = BIUS_STATE_RECOVERING;
		dev->recover_deadline = jiffies + delay;
		__module_get(THIS_MODULE);	/* the timeout's work */
		queue_delayed_work(bius_wq, &dev->recover_timeout, delay);
		pr_info("%s: daemon lost, holding I/O up to %u ms for recovery\n",
			dev->params.name, dev->params.recover_timeout_ms);
	}
	if (!dev->held) {
		blk_mq_quiesce_queue(dev->disk->queue);
		dev->held = true;
	}
	for (i = 0; i < dev->params.nr_hw_queues; i++)
		bius_queue_hold(&dev->queues[i]);
	dev->nr_connected = 0;
	bius_dev_hold_sent(dev, sent);
	blk_mq_kick_requeue_list(dev->disk->queue);
}

/* The fd that created or recovered @dev is no longer its owner. */
static bool bius_dev_disown(struct bius_device *dev)
{
	lockdep_assert_held(&bius_registry_lock);
	if (!dev->owner)
		return false;
	dev->owner = NULL;
	list_del_init(&dev->owner_node);
	return true;
}

/*
 * A device @conn owns, with a reference, or NULL if it owns none: the
 * release of @conn hands them to bius_dev_lost() one by one, each still
 * owned (so that no RECOVER_DEVICE can take it over before).
 */
struct bius_device *bius_dev_first_owned(struct bius_conn *conn)
{
	struct bius_device *dev;

	mutex_lock(&bius_registry_lock);
	dev = list_first_entry_or_null(&conn->owned, struct bius_device,
				       owner_node);
	if (dev)
		bius_dev_get(dev);
	mutex_unlock(&bius_registry_lock);
	return dev;
}

/* Is @conn still what it was to @dev (its owner, or a queue's connection)? */
static bool bius_dev_conn_current(struct bius_device *dev,
				  struct bius_conn *conn, bool owner)
{
	lockdep_assert_held(&bius_registry_lock);
	lockdep_assert_held(&dev->lock);
	return owner ? dev->owner == conn : conn->q->conn == conn;
}

/* What a loss leaves to do once the locks are dropped. */
struct bius_loss {
	struct list_head sent;	/* requests to replay */
	bool abort;		/* fail the I/O */
	bool disowned;		/* put the owner's reference */
};

/*
 * The daemon lost @conn, the fd that owns @dev (@owner) or a connection to
 * one of its queues (registry lock and dev->lock held): a device with
 * recovery is held and ownerless; a stopping one fails its I/O now (its
 * disk's write-back would otherwise wait a request timeout per batch); any
 * other one dies.  A lost queue connection is stale from then on (a held
 * queue forgets it, so does a dying one), so that nothing dereferences it
 * once its file is released.
 * Nothing happens if @conn is stale (its daemon was lost before).
 * bius_dev_lost_end() does the rest.
 */
static void bius_dev_lose_locked(struct bius_device *dev,
				 struct bius_conn *conn, bool owner,
				 struct bius_loss *loss)
{
	bool recoverable;

	lockdep_assert_held(&bius_registry_lock);
	lockdep_assert_held(&dev->lock);
	recoverable = dev->params.recover_timeout_ms &&
		      (dev->state == BIUS_STATE_LIVE ||
		       dev->state == BIUS_STATE_RECOVERING);
	if (!bius_dev_conn_current(dev, conn, owner))
		return;	/* stale */
	if (recoverable) {
		loss->disowned = bius_dev_disown(dev);
		bius_dev_hold_locked(dev, &loss->sent);
	} else {
		if (owner)
			loss->disowned = bius_dev_disown(dev);
		else
			bius_queue_disconnect(conn->q);
		if (dev->state != BIUS_STATE_DEAD) {
			bius_dev_stopping_locked(dev);
			loss->abort = true;
		}
	}
}

static void bius_dev_lost_end(struct bius_device *dev, struct bius_loss *loss)
{
	bius_replay_sent(&loss->sent);
	if (loss->abort)
		bius_dev_abort(dev);
	if (loss->disowned)
		bius_dev_put(dev);	/* the owner's reference */
}

/* The daemon lost @conn: see bius_dev_lose_locked(). */
void bius_dev_lost(struct bius_device *dev, struct bius_conn *conn,
		   bool owner)
{
	struct bius_loss loss = { .sent = LIST_HEAD_INIT(loss.sent) };

	mutex_lock(&bius_registry_lock);
	mutex_lock(&dev->lock);
	bius_dev_lose_locked(dev, conn, owner, &loss);
	mutex_unlock(&dev->lock);
	mutex_unlock(&bius_registry_lock);
	bius_dev_lost_end(dev, &loss);
}

/*
 * Has the process that serves @q (its connection's last reader) no thread
 * left (dev->lock held)?  Then it serves no more, though its files may not
 * be released yet: an exit releases them one by one, and the release of a
 * disk it has open can wait for the disk's open_mutex, which a partition
 * scan holds while its reads wait for this very daemon.
 */
static bool bius_queue_daemon_gone(struct bius_queue *q)
{
	bool gone;

	lockdep_assert_held(&q->dev->lock);
	mutex_lock(&q->xfer_lock);
	gone = q->conn && !atomic_read(&q->conn->mm->mm_users);
	mutex_unlock(&q->xfer_lock);
	return gone;
}

/*
 * A request of @dev timed out: if the daemon of one of its queues is
 * gone, lose it now, as its fd's release would, rather than let every
 * request after it time out too.  If the device is being removed, the
 * removal waits no longer for a daemon that let a request time out: the
 * rest fail at once (a partition scan holding the disk's open_mutex, say,
 * would otherwise hold the removal for a timeout per read).
 */
static void bius_dev_reap_work(struct work_struct *work)
{
	struct bius_device *dev = container_of(work, struct bius_device,
					       reap_work);
	struct bius_loss loss = { .sent = LIST_HEAD_INIT(loss.sent) };
	struct bius_conn *conn = NULL;
	bool abort;
	u32 i;

	mutex_lock(&bius_registry_lock);
	mutex_lock(&dev->lock);
	for (i = 0; i < dev->params.nr_hw_queues && !conn; i++)
		if (bius_queue_daemon_gone(&dev->queues[i]))
			conn = dev->queues[i].conn;
	if (conn)
		bius_dev_lose_locked(dev, conn, false, &loss);
	abort = !conn && dev->state == BIUS_STATE_STOPPING;
	mutex_unlock(&dev->lock);
	mutex_unlock(&bius_registry_lock);
	if (conn) {
		pr_info("%s: daemon gone before its files were released\n",
			dev->params.name);
		bius_dev_lost_end(dev, &loss);
	}
	if (abort) {
		pr_info("%s: a request timed out while the disk is removed: the rest fail\n",
			dev->params.name);
		bius_dev_abort(dev);
	}
	bius_dev_put(dev);
}

/* From the timeout handler: check for a gone daemon (bius_dev_reap_work). */
void bius_dev_reap(struct bius_device *dev)
{
	bius_dev_get(dev);	/* put by bius_dev_reap_work() */
	if (!queue_work(bius_wq, &dev->reap_work))
		bius_dev_put(dev);
}

/* RECOVERING -> LIVE, once every queue is connected again. */
static void bius_dev_resume_work(struct work_struct *work)
{
	struct bius_device *dev = container_of(work, struct bius_device,
					       resume_work);
	bool ready, kill = false;
	int ret;

	mutex_lock(&dev->lock);
	ready = dev->state == BIUS_STATE_RECOVERING && !dev->held;
	mutex_unlock(&dev->lock);
	if (!ready)
		return;

	/*
	 * The new daemon's zones must be what the kernel knows.  If it is lost
	 * while it reports them, the report is held with the other requests
	 * and answered by the daemon that connects next.
	 */
	ret = bius_zoned_revalidate(dev);

	mutex_lock(&dev->lock);
	if (dev->state == BIUS_STATE_RECOVERING && !dev->held) {
		if (ret) {
			bius_dev_stopping_locked(dev);
			kill = true;
		} else {
			bius_dev_live_locked(dev);
		}
	}
	mutex_unlock(&dev->lock);
	if (kill)
		bius_dev_abort(dev);
}

/* The recovery timeout ended: RECOVERING -> STOPPING, as without recovery. */
static void bius_dev_recover_timeout_work(struct work_struct *work)
{
	struct bius_device *dev = container_of(to_delayed_work(work),
					       struct bius_device,
					       recover_timeout);
	bool kill;

	/*
	 * A run of a recovery that ended (cancel_delayed_work() cannot wait
	 * for one blocked on dev->lock) finds the next one's deadline ahead.
	 */
	mutex_lock(&dev->lock);
	kill = dev->state == BIUS_STATE_RECOVERING &&
	       time_after_eq(jiffies, dev->recover_deadline);
	if (kill) {
		pr_warn("%s: not recovered within %u ms, failing its I/O\n",
			dev->params.name, dev->params.recover_timeout_ms);
		bius_dev_stopping_locked(dev);
	}
	mutex_unlock(&dev->lock);
	if (kill)
		bius_dev_abort(dev);
}

/*
 * RECOVER_DEVICE (registry lock held, @p checked): @conn becomes the owner
 * of the RECOVERING @dev, whose queues can then be connected again.
 */
int bius_dev_recover(struct bius_device *dev, struct bius_conn *conn,
		     struct bius_device_params *p)
{
	const char *field;
	int ret = 0;

	lockdep_assert_held(&bius_registry_lock);
	mutex_lock(&dev->lock);
	field = bius_params_mismatch(&dev->params, p);
	if (bius_state_ending(dev->state)) {
		ret = -ENODEV;
	} else if (dev->state != BIUS_STATE_RECOVERING || dev->owner) {
		ret = -EBUSY;
	} else if (field) {
		pr_warn("%s: RECOVER_DEVICE refused: %s differs\n",
			dev->params.name, field);
		ret = -EINVAL;
	} else {
		bius_dev_get(dev);	/* put when @conn is released */
		dev->owner = conn;
		list_add_tail(&dev->owner_node, &conn->owned);
		/* the new daemon's busy-wait; no queue is read now */
		WRITE_ONCE(dev->params.poll_usecs, p->poll_usecs);
	}
	mutex_unlock(&dev->lock);
	return ret;
}

/* Can a queue be connected now (dev->lock and registry lock held)? */
static bool bius_dev_connectable(struct bius_device *dev)
{
	return dev->state == BIUS_STATE_CREATED ||
	       (dev->state == BIUS_STATE_RECOVERING && dev->owner);
}

int bius_dev_connect(struct bius_device *dev, struct bius_conn *conn,
		     u32 queue)
{
	struct bius_queue *q;
	int ret = 0;

	if (queue >= dev->params.nr_hw_queues)
		return -EINVAL;
	q = &dev->queues[queue];

	lockdep_assert_held(&bius_registry_lock);
	mutex_lock(&dev->lock);
	if (bius_state_ending(dev->state)) {
		ret = -ENODEV;
	} else if (!bius_dev_connectable(dev) || q->conn) {
		ret = -EBUSY;
	} else {
		WRITE_ONCE(q->conn, conn);
		conn->mm = current->mm;	/* bius_queue_daemon_gone() */
		mmgrab(conn->mm);
		bius_dev_get(dev);	/* put when the file is released */
		if (++dev->nr_connected < dev->params.nr_hw_queues) {
			/* not yet */
		} else if (dev->state == BIUS_STATE_CREATED) {
			bius_dev_get(dev);	/* put by bius_dev_add_work() */
			queue_work(bius_wq, &dev->add_work);
		} else {
			/*
			 * The held requests go to the new daemon now, not
			 * from resume_work: a zone report a resume_work of
			 * a lost daemon is waiting for is among them.
			 */
			dev->held = false;
			blk_mq_unquiesce_queue(dev->disk->queue);
			/* flushed by bius_dev_remove_work() */
			queue_work(bius_wq, &dev->resume_work);
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

static int bius_dev_init_tag_set(struct bius_device *dev)
{
	struct blk_mq_tag_set *set = &dev->tag_set;
	int ret;

	set->ops = &bius_mq_ops;
	set->nr_hw_queues = dev->params.nr_hw_queues;
	/* the default map, and with poll queues the (empty) read and poll */
	set->nr_maps = dev->params.nr_poll_queues ? HCTX_MAX_TYPES : 1;
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
	INIT_WORK(&dev->resume_work, bius_dev_resume_work);
	INIT_DELAYED_WORK(&dev->recover_timeout, bius_dev_recover_timeout_work);
	INIT_WORK(&dev->reap_work, bius_dev_reap_work);
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
	for (i = 0; i < p->nr_hw_queues; i++) {
		ret = bius_queue_init(&dev->queues[i], dev, i);
		if (ret)
			goto fail;
	}

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
			bius_queue_free(&dev->queues[i]);
	if (dev->disk)
		put_disk(dev->disk);
	if (dev->tag_set_allocated)
		blk_mq_free_tag_set(&dev->tag_set);
	put_pid(dev->owner_pid);
	kfree(dev->queues);
	kfree(dev);
}
