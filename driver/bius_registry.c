// SPDX-License-Identifier: GPL-2.0
/*
 * BIUS: the registry of devices: the id -> device map, device references,
 * names and owners, under bius_registry_lock (see bius_drv.h).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blkdev.h>
#include <linux/device.h>
#include <linux/idr.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/string.h>

#include "bius_drv.h"

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

/* The device with id @id with a reference taken, or NULL. */
struct bius_device *bius_dev_get_by_id(u32 id)
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

/*
 * Is @name that of another block device (a disk or a partition)?  The one
 * found goes to *@found, for the caller to put_device() once it has
 * dropped the registry lock: the last reference to a partition of a disk
 * being removed may be that one, and the release of a BIUS disk takes the
 * registry lock.
 */
static bool bius_disk_name_taken(struct bius_device *dev, const char *name,
				 struct device **found)
{
	/* the block class, which is not exported, is the unadded disk's */
	*found = class_find_device_by_name(disk_to_dev(dev->disk)->class, name);
	return *found;
}

/*
 * An id for @dev, from dev->id on, and its name: the one asked for, or
 * bius<id> for the first id whose name no BIUS device has.  -EEXIST if the
 * name asked for is used.
 */
static int bius_dev_alloc_id(struct bius_device *dev)
{
	char *name = dev->params.name;
	int id, start = dev->id;

	if (name[0])
		return bius_name_taken(name) ? -EEXIST :
		       idr_alloc(&bius_idr, NULL, 0, BIUS_MAX_DEVICES,
				 GFP_KERNEL);
	for (;;) {
		id = idr_alloc(&bius_idr, NULL, start, BIUS_MAX_DEVICES,
			       GFP_KERNEL);
		if (id < 0)
			return id;
		snprintf(name, BIUS_NAME_LEN, "bius%d", id);
		if (!bius_name_taken(name))
			return id;
		/* its creator named a device bius<id>: try the next id */
		idr_remove(&bius_idr, id);
		start = id + 1;
	}
}

/*
 * Give @dev an id and a name and make @conn its owner.  Registry lock held;
 * *@found as for bius_disk_name_taken(), NULL on entry.  -EAGAIN: the name
 * given to an unnamed device is another block device's; call again (with
 * the lock dropped and *@found put): the next id is tried.
 */
int bius_dev_register(struct bius_device *dev, struct bius_conn *conn,
		      struct device **found)
{
	bool named = dev->params.name[0];
	int id;

	lockdep_assert_held(&bius_registry_lock);
	id = bius_dev_alloc_id(dev);
	if (id >= 0 && bius_disk_name_taken(dev, dev->params.name, found)) {
		idr_remove(&bius_idr, id);
		if (!named) {
			dev->params.name[0] = '\0';
			dev->id = id + 1;
			return -EAGAIN;
		}
		id = -EEXIST;
	}
	if (id == -EEXIST)
		pr_warn("CREATE_DEVICE refused: name %s is already used\n",
			dev->params.name);
	if (id < 0)
		return id;
	dev->id = id;
	dev->params.dev_id = id;
	strscpy(dev->disk->disk_name, dev->params.name, DISK_NAME_LEN);
	idr_replace(&bius_idr, dev, id);
	dev->owner = conn;
	list_add_tail(&dev->owner_node, &conn->owned);
	return 0;
}

/* The device with id @id, or NULL; no reference.  Registry lock held. */
struct bius_device *bius_dev_find_locked(u32 id)
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
