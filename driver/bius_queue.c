// SPDX-License-Identifier: GPL-2.0
/*
 * BIUS: blk-mq side.  queue_rq parks requests on the hardware queue's
 * pending list for read(); the timeout handler and the death path take
 * requests back from whichever stage they are in.  A poll queue's
 * completed requests wait on its done list for blk_mq_ops.poll.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/list.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/wait.h>

#include "bius_drv.h"
#include "bius_compat.h"
#include "bius_trace.h"

int bius_queue_init(struct bius_queue *q, struct bius_device *dev,
		    u16 index)
{
	q->dev = dev;
	q->index = index;
	spin_lock_init(&q->lock);
	INIT_LIST_HEAD(&q->pending);
	init_waitqueue_head(&q->wait);
	spin_lock_init(&q->done_lock);
	INIT_LIST_HEAD(&q->done);
	mutex_init(&q->xfer_lock);
	/* every word IDLE with sequence 0, which no request id carries */
	q->tags = kvcalloc(dev->params.queue_depth, sizeof(*q->tags),
			   GFP_KERNEL);
	return q->tags ? 0 : -ENOMEM;
}

void bius_queue_free(struct bius_queue *q)
{
	bius_window_put(q->win);
	kvfree(q->tags);
}

/*
 * Caller owns the request (no one else can change its state).  Release:
 * whoever takes the request over from this state by cmpxchg sees what its
 * owner did before, the tag's request pointer included.
 */
void bius_cmd_set_state(struct bius_cmd *cmd, enum bius_cmd_state state)
{
	atomic64_t *st = bius_cmd_state(cmd);
	u64 word = atomic64_read(st);

	atomic64_set_release(st, bius_cmd_word(bius_word_seq(word), state));
}

/* Finish a request the caller owns. */
void bius_cmd_end(struct request *rq, blk_status_t status)
{
	bius_cmd_set_state(blk_mq_rq_to_pdu(rq), BIUS_CMD_IDLE);
	blk_mq_end_request(rq, status);
}

/*
 * Give a request the caller owns (IDLE) back to the block layer, to be
 * queued again when the device is recovered; @sent if the lost daemon had
 * it, so that it goes out as a replay (as it does if it was one before).
 */
static void bius_cmd_requeue(struct request *rq, bool sent)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);

	cmd->replay = sent || (cmd->flags & BIUS_REQ_REPLAY);
	blk_mq_requeue_request(rq, false);
}

/*
 * The block layer status of the daemon's @result for @rq: the errnos a disk
 * may end an I/O with keep their meaning (the zone resource ones on zoned
 * disks, -EAGAIN for I/O that asked not to wait); those that drive the block
 * layer's own machinery (dm requeue, resource retries, reservations) and
 * any other errno are an I/O error.
 */
blk_status_t bius_result_status(const struct request *rq, int result)
{
	const struct bius_queue *q = rq->mq_hctx->driver_data;

	switch (result) {
	case 0:
	case -EIO:
	case -EINVAL:
	case -EOPNOTSUPP:
	case -ETIMEDOUT:
	case -ENOSPC:
	case -ENOLINK:
	case -EREMOTEIO:
	case -ENODATA:
	case -EILSEQ:
	case -ENODEV:
		return errno_to_blk_status(result);
	case -ETOOMANYREFS:
	case -EOVERFLOW:
		if (q->dev->zone_sectors)
			return errno_to_blk_status(result);
		break;
	case -EAGAIN:
		if (rq->cmd_flags & REQ_NOWAIT)
			return BLK_STS_AGAIN;
		break;
	}
	return BLK_STS_IOERR;
}

/*
 * write() side: end a request whose completion was accepted (the caller
 * owns it): at once, or on a poll queue when its submitter polls, unless
 * the queue has stopped (then no done list is drained any more).
 */
void bius_cmd_end_accepted(struct request *rq, blk_status_t status)
{
	struct bius_queue *q = rq->mq_hctx->driver_data;
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	bool queued = false;

	if (rq->mq_hctx->type == HCTX_TYPE_POLL) {
		cmd->status = status;
		spin_lock(&q->done_lock);
		/* pairs with bius_queue_stop(): stopped, then done_lock */
		queued = !READ_ONCE(q->stopped);
		if (queued) {
			bius_cmd_set_state(cmd, BIUS_CMD_DONE);
			list_add_tail(&cmd->node, &q->done);
		}
		spin_unlock(&q->done_lock);
	}
	if (!queued)
		bius_cmd_end(rq, status);
}

/* Take the done list of a poll queue: its requests become the caller's. */
static void bius_take_done(struct bius_queue *q, struct list_head *list)
{
	struct bius_cmd *cmd;

	spin_lock(&q->done_lock);
	list_splice_init(&q->done, list);
	list_for_each_entry(cmd, list, node)
		bius_cmd_set_state(cmd, BIUS_CMD_IDLE);
	spin_unlock(&q->done_lock);
}

/*
 * End every request on the done list of a stopped queue with its
 * daemon's result: no one may poll for them any more.
 */
static void bius_queue_end_done(struct bius_queue *q)
{
	struct bius_cmd *cmd, *next;
	LIST_HEAD(list);

	bius_take_done(q, &list);
	list_for_each_entry_safe(cmd, next, &list, node) {
		list_del_init(&cmd->node);
		blk_mq_end_request(blk_mq_rq_from_pdu(cmd), cmd->status);
	}
}

/*
 * blk_mq_ops.poll: end the completed requests of a poll queue in the
 * poller's context, batched into @iob where the block layer allows it.
 * Returns how many were ended.
 */
static int bius_mq_poll(struct blk_mq_hw_ctx *hctx, struct io_comp_batch *iob)
{
	struct bius_queue *q = hctx->driver_data;
	struct bius_cmd *cmd, *next;
	struct request *rq;
	LIST_HEAD(list);
	int nr = 0;

	if (list_empty(&q->done))
		return 0;
	bius_take_done(q, &list);
	list_for_each_entry_safe(cmd, next, &list, node) {
		list_del_init(&cmd->node);
		rq = blk_mq_rq_from_pdu(cmd);
		trace_bius_polled(rq, q->index,
				  blk_status_to_errno(cmd->status));
		if (!blk_mq_add_to_batch(rq, iob, cmd->status != BLK_STS_OK,
					 blk_mq_end_request_batch))
			blk_mq_end_request(rq, cmd->status);
		nr++;
	}
	return nr;
}

static void bius_end_list(struct list_head *list, blk_status_t status)
{
	struct bius_cmd *cmd, *next;

	list_for_each_entry_safe(cmd, next, list, node) {
		list_del_init(&cmd->node);
		bius_cmd_end(blk_mq_rq_from_pdu(cmd), status);
	}
}

/* Move the progress word @st from @word to state @to, if it is @word. */
static bool bius_word_transition(atomic64_t *st, u64 word,
				 enum bius_cmd_state to)
{
	u64 new = bius_cmd_word(bius_word_seq(word), to);

	return atomic64_cmpxchg(st, word, new) == word;
}

static bool bius_cmd_transition(struct bius_cmd *cmd, u64 word,
				enum bius_cmd_state to)
{
	return bius_word_transition(bius_cmd_state(cmd), word, to);
}

static int bius_map_op(struct request *rq, struct bius_cmd *cmd)
{
	cmd->flags = 0;
	switch (req_op(rq)) {
	case REQ_OP_READ:
		cmd->op = BIUS_OP_READ;
		break;
	case REQ_OP_WRITE:
		cmd->op = BIUS_OP_WRITE;
		if (rq->cmd_flags & REQ_FUA)
			cmd->flags |= BIUS_REQ_FUA;
		break;
	case REQ_OP_FLUSH:
		cmd->op = BIUS_OP_FLUSH;
		break;
	case REQ_OP_DISCARD:
		cmd->op = BIUS_OP_DISCARD;
		break;
	case REQ_OP_WRITE_ZEROES:
		cmd->op = BIUS_OP_WRITE_ZEROES;
		if (rq->cmd_flags & REQ_NOUNMAP)
			cmd->flags |= BIUS_REQ_NOUNMAP;
		break;
	default:
		return bius_zoned_map_op(rq, cmd);
	}
	return 0;
}

/* Wake the reader; called once per batch of queued requests. */
static void bius_queue_kick(struct bius_queue *q)
{
	if (wq_has_sleeper(&q->wait))
		wake_up(&q->wait);
}

static blk_status_t bius_queue_rq(struct blk_mq_hw_ctx *hctx,
				  const struct blk_mq_queue_data *bd)
{
	struct bius_queue *q = hctx->driver_data;
	struct request *rq = bd->rq;
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	bool replay = cmd->replay;
	unsigned long flags;

	cmd->replay = false;
	if (bius_map_op(rq, cmd))
		return BLK_STS_NOTSUPP;
	if (replay)
		cmd->flags |= BIUS_REQ_REPLAY;
	if (bius_op_has_data(cmd->op) &&
	    (q->dev->params.features & BIUS_FEATURE_NO_DATA))
		cmd->flags |= BIUS_REQ_NO_DATA;

	blk_mq_start_request(rq);

	spin_lock_irqsave(&q->lock, flags);
	if (unlikely(q->stopped)) {
		spin_unlock_irqrestore(&q->lock, flags);
		return BLK_STS_IOERR;
	}
	q->seq++;
	/* the tag's word is IDLE: its last request ended or was requeued */
	WRITE_ONCE(q->tags[rq->tag].rq, rq);
	atomic64_set_release(&q->tags[rq->tag].state,
			     bius_cmd_word(q->seq, BIUS_CMD_PENDING));
	list_add_tail(&cmd->node, &q->pending);
	spin_unlock_irqrestore(&q->lock, flags);

	if (bd->last)
		bius_queue_kick(q);
	return BLK_STS_OK;
}

static void bius_commit_rqs(struct blk_mq_hw_ctx *hctx)
{
	bius_queue_kick(hctx->driver_data);
}

/* Take a PENDING request off its queue; false if it was not PENDING. */
static bool bius_unqueue_pending(struct bius_queue *q, struct bius_cmd *cmd,
				 u64 word)
{
	bool taken;

	spin_lock_irq(&q->lock);
	taken = bius_cmd_transition(cmd, word, BIUS_CMD_IDLE);
	if (taken)
		list_del_init(&cmd->node);
	spin_unlock_irq(&q->lock);
	return taken;
}

/*
 * A request whose payload read() left half delivered, while no read() runs:
 * take it; the rest of its payload is owed to the stream as zeroes, so the
 * framing of the request stream holds.
 */
static bool bius_unqueue_xfer(struct bius_queue *q, struct request *rq)
{
	bool taken = false;

	if (!mutex_trylock(&q->xfer_lock))
		return false;
	if (q->xfer_rq == rq) {
		q->xfer_pad = blk_rq_bytes(rq) - q->xfer_off;
		q->xfer_rq = NULL;
		bius_cmd_set_state(blk_mq_rq_to_pdu(rq), BIUS_CMD_IDLE);
		taken = true;
	}
	mutex_unlock(&q->xfer_lock);
	return taken;
}

/* Take a DONE request off its poll queue's done list; false if not DONE. */
static bool bius_unqueue_done(struct bius_queue *q, struct bius_cmd *cmd,
			      u64 word)
{
	bool taken;

	spin_lock(&q->done_lock);
	taken = bius_cmd_transition(cmd, word, BIUS_CMD_IDLE);
	if (taken)
		list_del_init(&cmd->node);
	spin_unlock(&q->done_lock);
	return taken;
}

static enum blk_eh_timer_return bius_timeout(struct request *rq)
{
	struct bius_queue *q = rq->mq_hctx->driver_data;
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	u64 word = atomic64_read(bius_rq_state(rq));
	bool taken = false;

	switch (bius_word_state(word)) {
	case BIUS_CMD_DONE:
		/* completed, but no one polled for it: end it as completed */
		if (!bius_unqueue_done(q, cmd, word))
			return BLK_EH_RESET_TIMER;
		blk_mq_end_request(rq, cmd->status);
		return BLK_EH_DONE;
	case BIUS_CMD_PENDING:
		taken = bius_unqueue_pending(q, cmd, word);
		break;
	case BIUS_CMD_XFER:
		taken = bius_unqueue_xfer(q, rq);
		break;
	case BIUS_CMD_SENT:
		taken = bius_cmd_transition(cmd, word, BIUS_CMD_IDLE);
		break;
	default:
		/* write() is completing it, or a poller ending it, right now */
		break;
	}
	if (!taken)
		return BLK_EH_RESET_TIMER;

	pr_warn_ratelimited("%s: request %llx timed out\n",
			    rq->q->disk ? rq->q->disk->disk_name : "?",
			    bius_make_id(bius_word_seq(word), q->index, rq->tag));
	bius_unmap_rq(rq, BIUS_UNMAP_ABORT);
	blk_mq_end_request(rq, BLK_STS_TIMEOUT);
	bius_dev_reap(q->dev);
	return BLK_EH_DONE;
}

static int bius_init_hctx(struct blk_mq_hw_ctx *hctx, void *data,
			  unsigned int index)
{
	struct bius_device *dev = data;

	hctx->driver_data = &dev->queues[index];
	return 0;
}

static int bius_init_request(struct blk_mq_tag_set *set, struct request *rq,
			     unsigned int hctx_idx, BIUS_NUMA_NODE_T numa_node)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);

	INIT_LIST_HEAD(&cmd->node);
	cmd->zones = NULL;
	cmd->mapped = false;
	cmd->replay = false;
	return 0;
}

/*
 * The default map has the first queues, the poll map (with poll queues
 * only) the last params.nr_poll_queues, as null_blk's null_map_queues().
 */
static void bius_map_queues(struct blk_mq_tag_set *set)
{
	struct bius_device *dev = set->driver_data;
	u32 nr_poll = dev->params.nr_poll_queues;
	unsigned int i, offset = 0;

	for (i = 0; i < set->nr_maps; i++) {
		struct blk_mq_queue_map *map = &set->map[i];

		switch (i) {
		case HCTX_TYPE_DEFAULT:
			map->nr_queues = set->nr_hw_queues - nr_poll;
			break;
		case HCTX_TYPE_POLL:
			map->nr_queues = nr_poll;
			break;
		default:
			map->nr_queues = 0;
			continue;
		}
		map->queue_offset = offset;
		offset += map->nr_queues;
		blk_mq_map_queues(map);
	}
}

const struct blk_mq_ops bius_mq_ops = {
	.queue_rq	= bius_queue_rq,
	.commit_rqs	= bius_commit_rqs,
	.timeout	= bius_timeout,
	.init_hctx	= bius_init_hctx,
	.init_request	= bius_init_request,
	.map_queues	= bius_map_queues,
	.poll		= bius_mq_poll,
};

/*
 * read() side: move up to @max PENDING requests to @batch, marking them
 * XFER.  Returns how many were taken.
 */
unsigned int bius_queue_take(struct bius_queue *q, struct list_head *batch,
			     unsigned int max)
{
	struct bius_cmd *cmd;
	unsigned int n = 0;

	spin_lock_irq(&q->lock);
	while (n < max && !q->stopped && !list_empty(&q->pending)) {
		cmd = list_first_entry(&q->pending, struct bius_cmd, node);
		list_move_tail(&cmd->node, batch);
		bius_cmd_set_state(cmd, BIUS_CMD_XFER);
		n++;
	}
	spin_unlock_irq(&q->lock);
	return n;
}

/*
 * read() side: put back requests of @batch that were not delivered, at the
 * head of the queue so the order is kept; fail them if the queue stopped.
 */
void bius_queue_give_back(struct bius_queue *q, struct list_head *batch)
{
	struct bius_cmd *cmd;
	bool stopped;

	if (list_empty(batch))
		return;

	spin_lock_irq(&q->lock);
	stopped = q->stopped;
	if (!stopped) {
		list_for_each_entry(cmd, batch, node)
			bius_cmd_set_state(cmd, BIUS_CMD_PENDING);
		list_splice_init(batch, &q->pending);
	}
	spin_unlock_irq(&q->lock);

	if (stopped)
		bius_end_list(batch, BLK_STS_IOERR);
}

/*
 * Stop a queue: no request will be queued any more, every PENDING one
 * fails, every DONE one ends with its result, and readers and pollers
 * are woken to see the end of file.
 */
void bius_queue_stop(struct bius_queue *q)
{
	struct bius_cmd *cmd;
	LIST_HEAD(list);

	spin_lock_irq(&q->lock);
	q->stopped = true;
	list_splice_init(&q->pending, &list);
	list_for_each_entry(cmd, &list, node)
		bius_cmd_set_state(cmd, BIUS_CMD_IDLE);
	spin_unlock_irq(&q->lock);

	bius_end_list(&list, BLK_STS_IOERR);
	bius_queue_end_done(q);
	wake_up_all(&q->wait);
}

/*
 * Fail the request whose payload read() was delivering.  Waits for a
 * read() in progress, which then sees the queue stopped.
 */
void bius_queue_fail_xfer(struct bius_queue *q)
{
	struct request *rq;

	mutex_lock(&q->xfer_lock);
	rq = q->xfer_rq;
	q->xfer_rq = NULL;
	mutex_unlock(&q->xfer_lock);

	if (rq)
		bius_cmd_end(rq, BLK_STS_IOERR);
}

/*
 * Forget the connection of @q (bius_device.lock held), lost: it is stale
 * from now on, and may be freed once its file is released.
 */
void bius_queue_disconnect(struct bius_queue *q)
{
	lockdep_assert_held(&q->dev->lock);
	mutex_lock(&q->xfer_lock);
	WRITE_ONCE(q->conn, NULL);
	mutex_unlock(&q->xfer_lock);
}

/*
 * Hold a queue for recovery (bius_device.lock held, the disk's queue
 * quiesced): disconnect its connection, which becomes stale, and give the
 * requests it had not taken or not received whole back to the block layer.
 */
void bius_queue_hold(struct bius_queue *q)
{
	struct bius_cmd *cmd, *prev;
	LIST_HEAD(list);

	/* a reader that takes xfer_lock after this sees its connection stale */
	bius_queue_disconnect(q);

	mutex_lock(&q->xfer_lock);
	if (q->xfer_rq) {
		cmd = blk_mq_rq_to_pdu(q->xfer_rq);
		bius_cmd_set_state(cmd, BIUS_CMD_IDLE);
		list_add(&cmd->node, &list);
		q->xfer_rq = NULL;
	}
	q->xfer_off = 0;
	q->xfer_pad = 0;
	bius_window_retire(q);

	spin_lock_irq(&q->lock);
	list_splice_tail_init(&q->pending, &list);
	list_for_each_entry(cmd, &list, node)
		bius_cmd_set_state(cmd, BIUS_CMD_IDLE);
	spin_unlock_irq(&q->lock);
	mutex_unlock(&q->xfer_lock);

	/* each goes to the head of the requeue list: the last one first */
	list_for_each_entry_safe_reverse(cmd, prev, &list, node) {
		list_del_init(&cmd->node);
		bius_cmd_requeue(blk_mq_rq_from_pdu(cmd), false);
	}
	wake_up_all(&q->wait);
}

/*
 * A request taken back from user space, which held it (the caller owns it
 * now): given back to the block layer as a replay if @requeue (recovery),
 * else failed.
 */
static void bius_sent_taken(struct request *rq, bool requeue)
{
	bius_unmap_rq(rq, BIUS_UNMAP_ABORT);
	if (requeue)
		bius_cmd_requeue(rq, true);
	else
		blk_mq_end_request(rq, BLK_STS_IOERR);
}

/* Take @rq from user space if it holds it (SENT): true if taken. */
static bool bius_take_sent(struct request *rq)
{
	u64 word = atomic64_read(bius_rq_state(rq));

	return bius_word_state(word) == BIUS_CMD_SENT &&
	       bius_cmd_transition(blk_mq_rq_to_pdu(rq), word, BIUS_CMD_IDLE);
}

static bool bius_collect_sent_one(struct request *rq, void *list)
{
	if (bius_take_sent(rq))
		list_add_tail(&((struct bius_cmd *)blk_mq_rq_to_pdu(rq))->node,
			      list);
	return true;
}

/*
 * Take every request the lost daemon held onto @list (after the queues
 * are held), for bius_replay_sent() once the driver's locks are dropped.
 */
void bius_dev_hold_sent(struct bius_device *dev, struct list_head *list)
{
	/* the connections are gone: pairs with bius_queue_unclaim() */
	smp_mb();
	blk_mq_tagset_busy_iter(&dev->tag_set, bius_collect_sent_one, list);
}

/*
 * Give the requests of bius_dev_hold_sent() back to the block layer, as
 * replays, their mapped ranges sunk (bius_unmap_rq()), once the driver's
 * locks are dropped.
 */
void bius_replay_sent(struct list_head *list)
{
	struct request_queue *rqq = NULL;
	struct bius_cmd *cmd, *next;
	struct request *rq;

	list_for_each_entry_safe(cmd, next, list, node) {
		list_del_init(&cmd->node);
		rq = blk_mq_rq_from_pdu(cmd);
		rqq = rq->q;
		bius_sent_taken(rq, true);
	}
	if (rqq)
		blk_mq_kick_requeue_list(rqq);
}

static bool bius_fail_sent_one(struct request *rq, void *data)
{
	if (bius_take_sent(rq))
		bius_sent_taken(rq, false);
	return true;
}

/* Fail every request user space holds (after the queues are stopped). */
void bius_dev_fail_sent(struct bius_device *dev)
{
	/* the queues are stopped: pairs with bius_queue_unclaim() */
	smp_mb();
	blk_mq_tagset_busy_iter(&dev->tag_set, bius_fail_sent_one, NULL);
}

/*
 * write() side: the completion of the claimed @rq was refused, so @rq is
 * @conn's to complete again (SENT).  If @conn is gone or its queue stopped
 * meanwhile, the loss took back the rest of what the daemon held while
 * this one was being completed: take it back the same way, as a replay
 * unless the queue is stopped.
 */
void bius_queue_unclaim(struct bius_queue *q, struct bius_conn *conn,
			struct request *rq)
{
	struct request_queue *rqq = rq->q;
	atomic64_t *st = bius_rq_state(rq);
	u64 sent = bius_cmd_word(bius_word_seq(atomic64_read(st)),
				 BIUS_CMD_SENT);
	bool stopped;

	/* release: pairs with the cmpxchg of the next owner */
	atomic64_set_release(st, sent);
	/* pairs with bius_dev_hold_sent() and bius_dev_fail_sent() */
	smp_mb();
	stopped = READ_ONCE(q->stopped);
	if (!stopped && !bius_conn_stale(q, conn))
		return;
	/*
	 * From the very word stored, and @rq untouched unless that wins: if
	 * the timeout or the loss has ended @rq meanwhile, its tag may hold
	 * a new request (of a new daemon), and @rq may be gone.
	 */
	if (!bius_word_transition(st, sent, BIUS_CMD_IDLE))
		return;
	bius_sent_taken(rq, !stopped);
	if (!stopped)
		blk_mq_kick_requeue_list(rqq);
}

/* The tag @id names, or NULL if there is no such queue or tag. */
static struct bius_tag *bius_id_to_tag(struct bius_device *dev, u64 id)
{
	u16 queue = bius_id_queue(id), tag = bius_id_tag(id);

	/* blk-mq uses at most nr_cpu_ids queues: the others stay idle */
	if (queue >= dev->params.nr_hw_queues ||
	    tag >= dev->params.queue_depth)
		return NULL;
	return &dev->queues[queue].tags[tag];
}

/*
 * write() side: take ownership of the SENT request @id of queue @q (state
 * COMPLETING).  ERR_PTR(-EXDEV) if @id is outstanding on another queue,
 * ERR_PTR(-ENOENT) if it is not outstanding at all.  Only the tag's word
 * is read until it says the request is the caller's.
 */
struct request *bius_queue_claim(struct bius_queue *q, u64 id)
{
	u64 sent = bius_cmd_word(bius_id_seq(id), BIUS_CMD_SENT);
	struct bius_tag *t = bius_id_to_tag(q->dev, id);
	u64 word;

	if (!t)
		return ERR_PTR(-ENOENT);
	if (bius_id_queue(id) != q->index) {
		word = atomic64_read(&t->state);
		if (bius_word_seq(word) == bius_id_seq(id) &&
		    bius_word_state(word) != BIUS_CMD_IDLE)
			return ERR_PTR(-EXDEV);
		return ERR_PTR(-ENOENT);
	}
	/* acquire: pairs with the release of the word's SENT */
	if (!bius_word_transition(&t->state, sent, BIUS_CMD_COMPLETING))
		return ERR_PTR(-ENOENT);
	return READ_ONCE(t->rq);
}
