/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BIUS - Block device In UserSpace: internal definitions of the driver.
 *
 * Objects and their locks (lock order: bius_registry_lock, then
 * bius_device.lock, then bius_queue.xfer_lock, then bius_queue.lock):
 *
 *   bius_registry_lock  the id -> device map, device names, device owners,
 *                       CONNECT, RECOVER; the final kref_put of a device.
 *   bius_device.lock    device state and everything that changes with it,
 *                       the queues' connections.
 *   bius_queue.xfer_lock  the read() side of one queue (the timeout handler
 *                       only trylocks it); read() never takes another
 *                       mutex of the driver while it holds it.
 *   bius_queue.lock     one hardware queue's pending list (data path).
 *   bius_queue.done_lock  a poll queue's done list; taken alone.
 *
 * Map mode (bius_map.c) takes the mmap_lock of the daemon's mm for reading
 * only to map a request's pages, in read(), which only trylocks it under
 * xfer_lock: a daemon thread may hold its mmap_lock while it waits for I/O
 * of the disk, and a writer queued behind it blocks every later reader.
 * Unmapping (completion, timeout, loss) never takes it: it zaps under the
 * i_mmap_rwsem of the window's file mapping.  mmap() publishes a queue's
 * window under bius_queue.lock, with the mmap_lock held; no driver mutex is
 * taken under it.
 *
 * A request's progress is recorded as one 64-bit word, sequence << 32 |
 * state, changed with cmpxchg by whoever takes ownership, so stale, double
 * and foreign completions are detected in O(1).  The word lives in the
 * driver's own per-tag array (struct bius_tag), not in the request: a
 * completion may name any tag, and the request a tag last pointed to may
 * be gone (an I/O scheduler's requests are freed by a scheduler switch or
 * del_gendisk()).  A request is touched only by whoever owns it.
 */
#ifndef _BIUS_DRV_H
#define _BIUS_DRV_H

#include <linux/atomic.h>
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/completion.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/uio.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include <linux/bius.h>

#include "bius_compat.h"

/* States of a request, low half of bius_cmd.state. */
enum bius_cmd_state {
	BIUS_CMD_IDLE = 0,	/* not in user space's hands (new or finished) */
	BIUS_CMD_PENDING,	/* on bius_queue.pending, waiting for read() */
	BIUS_CMD_XFER,		/* owned by read(): header out, payload partly */
	BIUS_CMD_SENT,		/* delivered; waiting for its completion */
	BIUS_CMD_COMPLETING,	/* owned by write(): completion being applied */
	BIUS_CMD_DONE,		/* poll queue: completed, on bius_queue.done */
};

/* Spare pages one mapped request may use: a head and a tail per segment. */
#define BIUS_MAP_REQ_SPARES	(2 * BIUS_MAP_MAX_SEGMENTS)

/* One piece of a mapped request's data, in its slot of the window. */
struct bius_map_seg {
	u32 off;		/* bytes from the slot start */
	u32 len;
};

/*
 * Per-request driver data (blk-mq pdu).  A driver-internal REPORT_ZONES
 * request (REQ_OP_DRV_IN, see bius_zoned.c) carries its kernel buffer here;
 * zones is NULL for every other request.
 */
struct bius_cmd {
	struct list_head node;	/* on bius_queue.pending, a read() batch */
				/* or bius_queue.done */
	blk_status_t status;	/* DONE: the daemon's result */
	u8 op;			/* BIUS_OP_* */
	u16 flags;		/* BIUS_REQ_* */
	bool replay;		/* sent to a daemon that was lost */
	struct blk_zone *zones;	/* REPORT_ZONES: room for zone_room zones */
	u32 zone_room;
	u32 zone_count;		/* zones the completion delivered */
	sector_t zone_sector;	/* start of the first zone to report */

	/* map mode (bius_map.c), owned with the request */
	bool mapped;		/* data in the window: BIUS_REQ_MAPPED */
	struct bius_window *win;	/* the window it is mapped in */
	u8 nr_segs;		/* pieces of the data in the slot */
	u8 nr_spare;		/* spare pages in use */
	u32 map_pages;		/* pages of the slot mapped, from its start */
	struct bius_map_seg segs[BIUS_MAP_MAX_SEGMENTS];
	u32 spare_vpage[BIUS_MAP_REQ_SPARES];	/* slot page of each spare */
	u16 spare_index[BIUS_MAP_REQ_SPARES];	/* its page in the window */
};

/* Does a request of this BIUS_OP_* carry a payload on the request stream? */
static inline bool bius_op_has_payload(u8 op)
{
	return op == BIUS_OP_WRITE || op == BIUS_OP_ZONE_APPEND;
}

/* Does a request of this BIUS_OP_* move data (unless the device is NO_DATA)? */
static inline bool bius_op_has_data(u8 op)
{
	return op == BIUS_OP_READ || bius_op_has_payload(op);
}

/* Is @cmd's data kept from the daemon (BIUS_FEATURE_NO_DATA)? */
static inline bool bius_cmd_no_data(const struct bius_cmd *cmd)
{
	return cmd->flags & BIUS_REQ_NO_DATA;
}

static inline u64 bius_cmd_word(u32 seq, enum bius_cmd_state state)
{
	return (u64)seq << 32 | state;
}

static inline u32 bius_word_seq(u64 word)
{
	return word >> 32;
}

static inline enum bius_cmd_state bius_word_state(u64 word)
{
	return (enum bius_cmd_state)(u32)word;
}

/* Request id as user space sees it: seq << 32 | queue << 16 | tag. */
static inline u64 bius_make_id(u32 seq, u16 queue, u16 tag)
{
	return (u64)seq << 32 | (u64)queue << 16 | tag;
}

static inline u32 bius_id_seq(u64 id)
{
	return id >> 32;
}

static inline u16 bius_id_queue(u64 id)
{
	return (id >> 16) & 0xffff;
}

static inline u16 bius_id_tag(u64 id)
{
	return id & 0xffff;
}

struct bius_device;

/*
 * One driver tag of a hardware queue: the progress word of the request
 * holding it and that request, set by queue_rq before the word says
 * PENDING.  The array lives as long as the device.
 */
struct bius_tag {
	atomic64_t state;	/* seq << 32 | enum bius_cmd_state */
	struct request *rq;
};

/* One hardware queue and its (single) connection. */
struct bius_queue {
	struct bius_device *dev;
	u16 index;
	struct bius_tag *tags;		/* params.queue_depth of them */

	spinlock_t lock;		/* guards pending, seq, stopped */
	struct list_head pending;	/* PENDING requests, oldest first */
	u32 seq;			/* last sequence number handed out */
	bool stopped;			/* no request will be queued any more */
	wait_queue_head_t wait;		/* readers and pollers */

	spinlock_t done_lock;		/* guards done */
	struct list_head done;		/* DONE requests of a poll queue, */
					/* for blk_mq_ops.poll */

	struct mutex xfer_lock;		/* guards xfer_*, nr_*: read() side */
	struct request *xfer_rq;	/* request whose payload is going out */
	u32 xfer_off;			/* payload bytes of xfer_rq delivered */
	u32 xfer_pad;			/* bytes owed for a timed-out xfer_rq */
	u64 nr_mapped;			/* requests sent mapped */
	u64 nr_segmented;		/* of those, with a segment list */

	/*
	 * The connection serving the queue, NULL if none: set under
	 * bius_device.lock (and xfer_lock when it is lost); an fd connected
	 * to the queue before is stale (its daemon was lost).
	 */
	struct bius_conn *conn;

	/* the current connection's mmap()ed data window, or NULL: set and
	 * retired under lock (and xfer_lock when retired)
	 */
	struct bius_window *win;
} ____cacheline_aligned_in_smp;

/* A device: its disk, tag set and queues. */
struct bius_device {
	struct kref kref;	/* registry, conns, owner, work items, disk */
	u32 id;
	struct bius_device_params params;	/* validated, defaults applied */
	struct pid *owner_pid;			/* creating process */

	/* guards state, disk_added, remove_queued, held, open_count,
	 * nr_connected, disk_name and queues[].conn
	 */
	struct mutex lock;
	u32 state;			/* BIUS_STATE_*, see bius_dev.c */
	bool disk_added;
	bool remove_queued;
	bool held;			/* disk queue quiesced for recovery */
	unsigned int open_count;	/* opens of the disk */
	u32 nr_connected;
	char disk_name[BIUS_NAME_LEN];

	/* guarded by bius_registry_lock */
	struct bius_conn *owner;	/* creating fd, NULL once closed */
	struct list_head owner_node;	/* on owner->owned */

	struct blk_mq_tag_set tag_set;	/* freed with the device */
	bool tag_set_allocated;
	struct gendisk *disk;
	struct work_struct add_work;
	struct work_struct remove_work;
	struct completion removed;	/* remove_work has finished */
	struct work_struct resume_work;		/* RECOVERING -> LIVE */
	struct delayed_work recover_timeout;	/* RECOVERING -> STOPPING */
	struct work_struct reap_work;	/* a timeout: is a daemon gone? */
	unsigned long recover_deadline;	/* jiffies; dev->lock */

	struct bius_queue *queues;	/* params.nr_hw_queues of them */

	u32 map_slot_bytes;	/* map modes: bytes of a window slot; 0 in copy */

	/* zoned devices only (BIUS_FEATURE_ZONED), from params.zoned */
	sector_t zone_sectors;		/* 0 if the device is not zoned */
	u32 nr_zones;
};

/* An open file of /dev/bius. */
struct bius_conn {
	/* Set once by CONNECT (under bius_registry_lock, published with
	 * release semantics), then constant until the file is released.
	 */
	struct bius_queue *q;
	struct mm_struct *mm;	/* of the daemon that last read the queue */
				/* (mmgrab()ed), from CONNECT on; */
				/* q->xfer_lock */
	struct list_head owned;	/* devices created here; bius_registry_lock */
};

/* The progress word of the request holding @rq's driver tag: @rq's own. */
static inline atomic64_t *bius_rq_state(struct request *rq)
{
	struct bius_queue *q = rq->mq_hctx->driver_data;

	return &q->tags[rq->tag].state;
}

static inline atomic64_t *bius_cmd_state(struct bius_cmd *cmd)
{
	return bius_rq_state(blk_mq_rq_from_pdu(cmd));
}

/* bius_main.c */
extern struct workqueue_struct *bius_wq;

/* bius_registry.c */
extern struct mutex bius_registry_lock;
void bius_dev_get(struct bius_device *dev);
void bius_dev_put(struct bius_device *dev);
struct bius_device *bius_dev_get_by_id(u32 id);
struct bius_device *bius_dev_find_locked(u32 id);
int bius_dev_register(struct bius_device *dev, struct bius_conn *conn,
		      struct device **found);
u32 bius_dev_ids(u32 *ids, u32 capacity);
void bius_registry_exit(void);

static inline struct bius_queue *bius_conn_queue(struct bius_conn *conn)
{
	/* pairs with smp_store_release() in bius_dev_connect() */
	return smp_load_acquire(&conn->q);
}

/* Is @conn no longer the connection of @q (its daemon was lost)? */
static inline bool bius_conn_stale(struct bius_queue *q, struct bius_conn *conn)
{
	return READ_ONCE(q->conn) != conn;
}

/* bius_params.c */
int bius_params_check(struct bius_device_params *p);
const char *bius_params_mismatch(const struct bius_device_params *dev,
				 const struct bius_device_params *p);

/* bius_dev.c */
struct bius_device *bius_dev_alloc(const struct bius_device_params *p);
void bius_dev_free(struct bius_device *dev);
int bius_dev_connect(struct bius_device *dev, struct bius_conn *conn,
		     u32 queue);
int bius_dev_destroy(struct bius_device *dev, u32 flags);
int bius_dev_recover(struct bius_device *dev, struct bius_conn *conn,
		     struct bius_device_params *p);
void bius_dev_kill(struct bius_device *dev);
void bius_dev_reap(struct bius_device *dev);
void bius_dev_lost(struct bius_device *dev, struct bius_conn *conn,
		   bool owner);
struct bius_device *bius_dev_first_owned(struct bius_conn *conn);
void bius_dev_get_info(struct bius_device *dev,
		       struct bius_device_info *info);

/* bius_queue.c */
extern const struct blk_mq_ops bius_mq_ops;
int bius_queue_init(struct bius_queue *q, struct bius_device *dev,
		    u16 index);
void bius_queue_free(struct bius_queue *q);
void bius_queue_stop(struct bius_queue *q);
void bius_queue_disconnect(struct bius_queue *q);
void bius_queue_hold(struct bius_queue *q);
void bius_dev_hold_sent(struct bius_device *dev, struct list_head *list);
void bius_replay_sent(struct list_head *list);
void bius_queue_fail_xfer(struct bius_queue *q);
void bius_dev_fail_sent(struct bius_device *dev);
void bius_cmd_end(struct request *rq, blk_status_t status);
unsigned int bius_queue_take(struct bius_queue *q, struct list_head *batch,
			     unsigned int max);
void bius_queue_give_back(struct bius_queue *q, struct list_head *batch);
struct request *bius_queue_claim(struct bius_queue *q, u64 id);
void bius_queue_unclaim(struct bius_queue *q, struct bius_conn *conn,
			struct request *rq);
void bius_cmd_set_state(struct bius_cmd *cmd, enum bius_cmd_state state);
blk_status_t bius_result_status(const struct request *rq, int result);
void bius_cmd_end_accepted(struct request *rq, blk_status_t status);

/* bius_zoned.c */
struct bius_limits;
#ifdef CONFIG_BLK_DEV_ZONED
const char *bius_zoned_problem(const struct bius_device_params *p);
void bius_zoned_normalize(struct bius_device_params *p);
void bius_zoned_init(struct bius_device *dev);
void bius_zoned_limits(const struct bius_device *dev, struct bius_limits *bl);
int bius_zoned_revalidate(struct bius_device *dev);
BIUS_REPORT_ZONES_METHOD(bius_report_zones);
int bius_zoned_map_op(struct request *rq, struct bius_cmd *cmd);
int bius_zoned_recv_report(struct request *rq, u32 len,
			   struct iov_iter *from);
int bius_zoned_end_append(struct request *rq, u64 sector);
#else
static inline const char *
bius_zoned_problem(const struct bius_device_params *p)
{
	return "zoned devices need a kernel with CONFIG_BLK_DEV_ZONED";
}

static inline void bius_zoned_normalize(struct bius_device_params *p) { }
static inline void bius_zoned_init(struct bius_device *dev) { }
static inline void bius_zoned_limits(const struct bius_device *dev,
				     struct bius_limits *bl) { }

static inline int bius_zoned_revalidate(struct bius_device *dev)
{
	return 0;
}

#define bius_report_zones	NULL

static inline int bius_zoned_map_op(struct request *rq, struct bius_cmd *cmd)
{
	return -EOPNOTSUPP;
}

static inline int bius_zoned_recv_report(struct request *rq, u32 len,
					 struct iov_iter *from)
{
	return -EINVAL;
}

static inline int bius_zoned_end_append(struct request *rq, u64 sector)
{
	return -EINVAL;
}
#endif

/* bius_map.c */
u32 bius_map_slot_bytes(const struct bius_device_params *p);

/* Bytes of a queue's data window: a slot per tag. */
static inline u64 bius_map_window_bytes(const struct bius_device *dev)
{
	return (u64)dev->map_slot_bytes * dev->params.queue_depth;
}

int bius_mmap(struct file *file, struct vm_area_struct *vma);
bool bius_map_rq(struct bius_queue *q, struct request *rq, size_t room);
/* How bius_unmap_rq() leaves a request's range of the window. */
enum bius_unmap {
	BIUS_UNMAP_FAILED,	/* completed with an error: unmapped */
	BIUS_UNMAP_OK,		/* completed: unmapped, a read's spare data out */
	BIUS_UNMAP_ABORT,	/* timed out or device dead: the sink page */
};

void bius_unmap_rq(struct request *rq, enum bius_unmap how);
void bius_window_retire(struct bius_queue *q);
void bius_window_put(struct bius_window *win);

/* bius_proto.c */
ssize_t bius_read_iter(struct kiocb *iocb, struct iov_iter *to);
ssize_t bius_write_iter(struct kiocb *iocb, struct iov_iter *from);
ssize_t bius_complete_fetch(struct file *file, struct iov_iter *from,
			    struct iov_iter *to, size_t *taken);
__poll_t bius_poll(struct file *file, struct poll_table_struct *wait);

#endif /* _BIUS_DRV_H */
