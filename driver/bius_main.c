// SPDX-License-Identifier: GPL-2.0
/*
 * BIUS - Block device In UserSpace.
 *
 * Module init/exit, the control device /dev/bius and its ioctls; the
 * devices are bius_dev.c's, their registry bius_registry.c's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/build_bug.h>
#include <linux/capability.h>
#include <linux/device.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>

#include "bius_drv.h"
#include "bius_compat.h"

/* -DBIUS_VERSION=... by the Makefile: Cargo.toml's version, or VERSION */
#ifndef BIUS_VERSION
#error "BIUS_VERSION is not defined: build bius.ko with driver/Makefile"
#endif

struct workqueue_struct *bius_wq;

static long bius_ioctl_create(struct bius_conn *conn,
			      struct bius_device_params __user *argp)
{
	struct bius_device_params p;
	struct device *found = NULL;
	struct bius_device *dev;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (copy_from_user(&p, argp, sizeof(p)))
		return -EFAULT;
	ret = bius_params_check(&p);
	if (ret)
		return ret;

	dev = bius_dev_alloc(&p);
	if (IS_ERR(dev))
		return PTR_ERR(dev);

	do {
		mutex_lock(&bius_registry_lock);
		ret = bius_dev_register(dev, conn, &found);
		mutex_unlock(&bius_registry_lock);
		/* perhaps the last reference to a removed disk */
		put_device(found);
		found = NULL;
	} while (ret == -EAGAIN);
	if (ret) {
		bius_dev_free(dev);
		return ret;
	}

	if (put_user(dev->id, &argp->dev_id)) {
		/* The device stays owned by @conn until it is closed. */
		bius_dev_kill(dev);
		return -EFAULT;
	}
	return 0;
}

static long bius_ioctl_connect(struct bius_conn *conn,
			       struct bius_connect __user *argp)
{
	struct bius_connect c;
	struct bius_device *dev;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (copy_from_user(&c, argp, sizeof(c)))
		return -EFAULT;
	if (c.reserved)
		return -EINVAL;

	mutex_lock(&bius_registry_lock);
	dev = bius_dev_find_locked(c.dev_id);
	if (conn->q)
		ret = -EISCONN;
	else if (!dev)
		ret = -ENODEV;
	else
		ret = bius_dev_connect(dev, conn, c.queue);
	mutex_unlock(&bius_registry_lock);
	return ret;
}

static long bius_ioctl_recover(struct bius_conn *conn,
			       struct bius_device_params __user *argp)
{
	struct bius_device_params p;
	struct bius_device *dev;
	u32 id;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (copy_from_user(&p, argp, sizeof(p)))
		return -EFAULT;
	id = p.dev_id;
	ret = bius_params_check(&p);
	if (ret)
		return ret;

	mutex_lock(&bius_registry_lock);
	dev = bius_dev_find_locked(id);
	if (conn->q)
		ret = -EISCONN;
	else if (!dev)
		ret = -ENODEV;
	else
		ret = bius_dev_recover(dev, conn, &p);
	mutex_unlock(&bius_registry_lock);
	return ret;
}

static long bius_ioctl_destroy(struct bius_destroy __user *argp)
{
	struct bius_destroy d;
	struct bius_device *dev;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (copy_from_user(&d, argp, sizeof(d)))
		return -EFAULT;
	if (d.flags & ~BIUS_DESTROY_FORCE)
		return -EINVAL;

	dev = bius_dev_get_by_id(d.dev_id);
	if (!dev)
		return -ENODEV;
	ret = bius_dev_destroy(dev, d.flags);
	bius_dev_put(dev);
	return ret;
}

static long bius_ioctl_get_info(struct bius_device_info __user *argp)
{
	struct bius_device_info *info;
	struct bius_device *dev;
	u32 id;
	int ret = 0;

	if (get_user(id, &argp->dev_id))
		return -EFAULT;
	dev = bius_dev_get_by_id(id);
	if (!dev)
		return -ENODEV;

	info = kmalloc(sizeof(*info), GFP_KERNEL);
	if (info) {
		bius_dev_get_info(dev, info);
		if (copy_to_user(argp, info, sizeof(*info)))
			ret = -EFAULT;
		kfree(info);
	} else {
		ret = -ENOMEM;
	}
	bius_dev_put(dev);
	return ret;
}

static long bius_ioctl_list(struct bius_device_list __user *argp)
{
	struct bius_device_list l;
	u32 *ids = NULL;
	u32 count, n;
	int ret = 0;

	if (copy_from_user(&l, argp, sizeof(l)))
		return -EFAULT;

	mutex_lock(&bius_registry_lock);
	count = bius_dev_ids(NULL, 0);
	n = min(l.capacity, count);
	if (n) {
		ids = kvmalloc_array(n, sizeof(*ids), GFP_KERNEL);
		if (!ids) {
			mutex_unlock(&bius_registry_lock);
			return -ENOMEM;
		}
		bius_dev_ids(ids, n);
	}
	mutex_unlock(&bius_registry_lock);

	if (n && copy_to_user(u64_to_user_ptr(l.ids), ids, n * sizeof(*ids)))
		ret = -EFAULT;
	else if (put_user(count, &argp->count))
		ret = -EFAULT;
	kvfree(ids);
	return ret;
}

/*
 * BIUS_IOC_COMPLETE_FETCH: write() then read() in one call; completed is
 * zeroed first, so that an argument it cannot be written to is refused
 * before anything is taken.
 */
static long bius_ioctl_complete_fetch(struct file *file,
				      struct bius_complete_fetch __user *argp)
{
	const fmode_t rw = FMODE_READ | FMODE_WRITE;
	struct bius_complete_fetch cf;
	struct iov_iter from, to;
	size_t taken = 0;
	ssize_t ret;

	if ((file->f_mode & rw) != rw)
		return -EBADF;
	if (copy_from_user(&cf, argp, sizeof(cf)))
		return -EFAULT;
	if (cf.flags || cf.reserved)
		return -EINVAL;
	if (put_user(0, &argp->completed))
		return -EFAULT;

	ret = bius_import_ubuf(ITER_SOURCE, cf.completions, cf.completions_len,
			       &from);
	if (!ret)
		ret = bius_import_ubuf(ITER_DEST, cf.requests, cf.requests_len,
				       &to);
	if (!ret)
		ret = bius_complete_fetch(file, &from, &to, &taken);
	if (taken && put_user(taken, &argp->completed))
		return -EFAULT;
	return ret;
}

static long bius_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct bius_conn *conn = file->private_data;
	void __user *argp = (void __user *)arg;

	switch (cmd) {
	case BIUS_IOC_CREATE_DEVICE:
		return bius_ioctl_create(conn, argp);
	case BIUS_IOC_DESTROY_DEVICE:
		return bius_ioctl_destroy(argp);
	case BIUS_IOC_CONNECT:
		return bius_ioctl_connect(conn, argp);
	case BIUS_IOC_GET_INFO:
		return bius_ioctl_get_info(argp);
	case BIUS_IOC_LIST_DEVICES:
		return bius_ioctl_list(argp);
	case BIUS_IOC_RECOVER_DEVICE:
		return bius_ioctl_recover(conn, argp);
	case BIUS_IOC_COMPLETE_FETCH:
		return bius_ioctl_complete_fetch(file, argp);
	default:
		return -ENOTTY;
	}
}

static int bius_open(struct inode *inode, struct file *file)
{
	struct bius_conn *conn;

	conn = kzalloc(sizeof(*conn), GFP_KERNEL);
	if (!conn)
		return -ENOMEM;
	INIT_LIST_HEAD(&conn->owned);
	file->private_data = conn;
	return stream_open(inode, file);
}

/*
 * Closing a connected file or one that created or recovered devices loses
 * their daemon: see bius_dev_lost().
 */
static int bius_release(struct inode *inode, struct file *file)
{
	struct bius_conn *conn = file->private_data;
	struct bius_device *dev;

	if (conn->q) {
		dev = conn->q->dev;
		bius_dev_lost(dev, conn, false);
		bius_dev_put(dev);
	}
	while ((dev = bius_dev_first_owned(conn))) {
		bius_dev_lost(dev, conn, true);
		bius_dev_put(dev);
	}
	if (conn->mm)
		mmdrop(conn->mm);
	kfree(conn);
	return 0;
}

static const struct file_operations bius_fops = {
	.owner		= THIS_MODULE,
	.open		= bius_open,
	.release	= bius_release,
	.read_iter	= bius_read_iter,
	.write_iter	= bius_write_iter,
	.poll		= bius_poll,
	.mmap		= bius_mmap,
	.unlocked_ioctl	= bius_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
};

/* /sys/class/misc/bius/abi_version: the ABI this module speaks. */
static ssize_t abi_version_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", BIUS_ABI_VERSION);
}
static DEVICE_ATTR_RO(abi_version);

static struct attribute *bius_misc_attrs[] = {
	&dev_attr_abi_version.attr,
	NULL,
};
ATTRIBUTE_GROUPS(bius_misc);

static struct miscdevice bius_misc = {
	.minor		= MISC_DYNAMIC_MINOR,
	.name		= "bius",
	.fops		= &bius_fops,
	.groups		= bius_misc_groups,
	.mode		= 0600,
};

/* The ABI is fixed by include/uapi/linux/bius.h: check its layout. */
static void __init bius_check_abi(void)
{
	BUILD_BUG_ON(sizeof(struct bius_request) != 32);
	BUILD_BUG_ON(offsetof(struct bius_request, sector) != 8);
	BUILD_BUG_ON(offsetof(struct bius_request, len) != 16);
	BUILD_BUG_ON(offsetof(struct bius_request, op) != 20);
	BUILD_BUG_ON(offsetof(struct bius_request, nr_segments) != 21);
	BUILD_BUG_ON(offsetof(struct bius_request, flags) != 22);
	BUILD_BUG_ON(offsetof(struct bius_request, window_offset) != 24);
	BUILD_BUG_ON(sizeof(struct bius_completion) != 24);
	BUILD_BUG_ON(offsetof(struct bius_completion, result) != 8);
	BUILD_BUG_ON(offsetof(struct bius_completion, len) != 12);
	BUILD_BUG_ON(offsetof(struct bius_completion, sector) != 16);
	BUILD_BUG_ON(sizeof(struct bius_device_params) != 152);
	BUILD_BUG_ON(offsetof(struct bius_device_params, size) != 8);
	BUILD_BUG_ON(offsetof(struct bius_device_params,
			      logical_block_size) != 16);
	BUILD_BUG_ON(offsetof(struct bius_device_params, features) != 40);
	BUILD_BUG_ON(offsetof(struct bius_device_params, transfer_mode) != 48);
	BUILD_BUG_ON(offsetof(struct bius_device_params, map_threshold) != 52);
	BUILD_BUG_ON(offsetof(struct bius_device_params, name) != 56);
	BUILD_BUG_ON(offsetof(struct bius_device_params, zoned) != 88);
	BUILD_BUG_ON(sizeof(struct bius_zoned_params) != 32);
	BUILD_BUG_ON(offsetof(struct bius_device_params, poll_usecs) != 120);
	BUILD_BUG_ON(offsetof(struct bius_device_params,
			      nr_poll_queues) != 128);
	BUILD_BUG_ON(offsetof(struct bius_device_params, reserved) != 136);
	BUILD_BUG_ON(sizeof(struct bius_device_info) != 232);
	BUILD_BUG_ON(offsetof(struct bius_device_info, disk_name) != 16);
	BUILD_BUG_ON(offsetof(struct bius_device_info, params) != 48);
	BUILD_BUG_ON(offsetof(struct bius_device_info, map_window_bytes) != 200);
	BUILD_BUG_ON(offsetof(struct bius_device_info, map_slot_bytes) != 208);
	BUILD_BUG_ON(offsetof(struct bius_device_info, mapped_requests) != 216);
	BUILD_BUG_ON(offsetof(struct bius_device_info, segmented_requests) !=
		     224);
	BUILD_BUG_ON(sizeof(struct bius_segment) != 16);
	/* spare page counts, pool indexes and segment counts fit their types */
	BUILD_BUG_ON(BIUS_MAP_REQ_SPARES > U8_MAX);
	BUILD_BUG_ON(BIUS_MAX_QUEUE_DEPTH * BIUS_MAP_SPARE_PAGES > U16_MAX + 1);
	BUILD_BUG_ON(BIUS_MAP_MAX_SEGMENTS > U8_MAX);
	BUILD_BUG_ON(sizeof(struct bius_connect) != 16);
	BUILD_BUG_ON(sizeof(struct bius_destroy) != 8);
	BUILD_BUG_ON(sizeof(struct bius_device_list) != 16);
	BUILD_BUG_ON(sizeof(struct bius_complete_fetch) != 40);
	BUILD_BUG_ON(offsetof(struct bius_complete_fetch, requests) != 16);
	BUILD_BUG_ON(offsetof(struct bius_complete_fetch, completed) != 28);
	/* request ids carry the tag in 16 bits and the queue in 16 bits */
	BUILD_BUG_ON(BIUS_MAX_QUEUE_DEPTH > 0x10000);
	BUILD_BUG_ON(BIUS_MAX_HW_QUEUES > 0x10000);
	BUILD_BUG_ON(BIUS_NAME_LEN > DISK_NAME_LEN);
}

static int __init bius_init(void)
{
	int ret;

	bius_check_abi();

	bius_wq = alloc_workqueue("bius", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!bius_wq)
		return -ENOMEM;

	ret = misc_register(&bius_misc);
	if (ret) {
		destroy_workqueue(bius_wq);
		return ret;
	}
	pr_info("version %s loaded (ABI %d)\n", BIUS_VERSION, BIUS_ABI_VERSION);
	return 0;
}

static void __exit bius_exit(void)
{
	misc_deregister(&bius_misc);
	/* Finishes the removal of devices whose files are all closed. */
	destroy_workqueue(bius_wq);
	bius_registry_exit();
}

module_init(bius_init);
module_exit(bius_exit);

MODULE_DESCRIPTION("BIUS: Block device In UserSpace");
MODULE_AUTHOR("The BIUS project");
MODULE_LICENSE("GPL");
MODULE_VERSION(BIUS_VERSION);
