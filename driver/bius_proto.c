// SPDX-License-Identifier: GPL-2.0
/*
 * BIUS: the protocol on a connected file.  read() is the request stream,
 * write() the completion stream, BIUS_IOC_COMPLETE_FETCH the one then the
 * other in one call; see include/uapi/linux/bius.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/clock.h>
#include <linux/sched/stat.h>
#include <linux/task_work.h>
#include <linux/uaccess.h>
#include <linux/uio.h>

#include "bius_drv.h"

#define CREATE_TRACE_POINTS
#include "bius_trace.h"

static bool bius_nowait(struct kiocb *iocb)
{
	return (iocb->ki_filp->f_flags & O_NONBLOCK) ||
	       (iocb->ki_flags & IOCB_NOWAIT);
}

/* Would read() on @conn return something: a request or end of file? */
static bool bius_queue_readable(struct bius_queue *q, struct bius_conn *conn)
{
	return READ_ONCE(q->stopped) || bius_conn_stale(q, conn) ||
	       !list_empty(&q->pending);
}

/* A request record: its header and, if mapped in pieces, its segments. */
struct bius_record {
	struct bius_request hdr;
	struct bius_segment segs[BIUS_MAP_MAX_SEGMENTS];
};

/* Fill in the segment records of a request mapped in several pieces. */
static void bius_fill_segments(struct bius_record *rec, struct bius_cmd *cmd,
			       u64 slot)
{
	u32 i;

	if (cmd->nr_segs < 2)
		return;
	rec->hdr.nr_segments = cmd->nr_segs;
	for (i = 0; i < cmd->nr_segs; i++) {
		rec->segs[i].window_offset = slot + cmd->segs[i].off;
		rec->segs[i].len = cmd->segs[i].len;
		rec->segs[i].reserved = 0;
	}
}

/* Fill in @rec for @rq; returns its size. */
static size_t bius_fill_record(struct bius_record *rec, struct request *rq,
			       struct bius_queue *q)
{
	struct bius_request *hdr = &rec->hdr;
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	u64 word = atomic64_read(bius_rq_state(rq));
	u64 slot;

	memset(hdr, 0, sizeof(*hdr));
	hdr->id = bius_make_id(bius_word_seq(word), q->index, rq->tag);
	hdr->op = cmd->op;
	hdr->flags = cmd->flags;
	if (cmd->op == BIUS_OP_REPORT_ZONES) {
		hdr->sector = cmd->zone_sector;
		hdr->len = cmd->zone_room * sizeof(struct blk_zone);
	} else if (cmd->op != BIUS_OP_FLUSH) {
		hdr->sector = blk_rq_pos(rq);
		hdr->len = blk_rq_bytes(rq);
	}
	if (cmd->mapped) {
		slot = (u64)rq->tag * q->dev->map_slot_bytes;
		hdr->flags |= BIUS_REQ_MAPPED;
		hdr->window_offset = slot + cmd->segs[0].off;
		bius_fill_segments(rec, cmd, slot);
	}
	return sizeof(*hdr) + hdr->nr_segments * sizeof(rec->segs[0]);
}

/*
 * Deliver more of the write payload of q->xfer_rq (xfer_lock held).  When
 * the payload is complete the request becomes SENT.  Returns the bytes
 * copied, or -EFAULT if none could be.
 */
static ssize_t bius_send_payload(struct bius_queue *q, struct iov_iter *to)
{
	struct request *rq = q->xfer_rq;
	u32 skip = q->xfer_off;
	struct req_iterator iter;
	struct bio_vec bv;
	size_t copied = 0;
	bool fault = false;

	lockdep_assert_held(&q->xfer_lock);
	rq_for_each_segment(bv, rq, iter) {
		size_t n, done;

		if (skip >= bv.bv_len) {
			skip -= bv.bv_len;
			continue;
		}
		n = min_t(size_t, bv.bv_len - skip, iov_iter_count(to));
		if (!n)
			goto out;
		done = copy_page_to_iter(bv.bv_page, bv.bv_offset + skip, n, to);
		copied += done;
		skip = 0;
		if (done < n) {
			fault = true;
			goto out;
		}
	}
out:
	q->xfer_off += copied;
	if (q->xfer_off == blk_rq_bytes(rq)) {
		q->xfer_rq = NULL;
		bius_cmd_set_state(blk_mq_rq_to_pdu(rq), BIUS_CMD_SENT);
	}
	if (fault && !copied)
		return -EFAULT;
	return copied;
}

/* Deliver zeroes owed for a timed-out partly delivered payload. */
static ssize_t bius_send_pad(struct bius_queue *q, struct iov_iter *to)
{
	size_t n = min_t(size_t, q->xfer_pad, iov_iter_count(to));

	n = iov_iter_zero(n, to);
	if (!n)
		return -EFAULT;
	q->xfer_pad -= n;
	return n;
}

/*
 * Deliver one taken request: its header (and segments) and as much payload
 * as fits.  Returns the bytes delivered, or -EFAULT if the header could
 * not be (a request mapped for it is left mapped, for the caller to unmap
 * and give back once xfer_lock is dropped).
 */
static ssize_t bius_send_request(struct bius_queue *q, struct request *rq,
				 struct iov_iter *to)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	struct bius_record rec;
	size_t size;
	ssize_t ret;

	bius_map_rq(q, rq, iov_iter_count(to) - sizeof(rec.hdr));
	size = bius_fill_record(&rec, rq, q);
	if (copy_to_iter(&rec, size, to) != size)
		return -EFAULT;
	list_del_init(&cmd->node);
	trace_bius_fetch(rq, q->index, 0);
	if (cmd->mapped) {
		WRITE_ONCE(q->nr_mapped, q->nr_mapped + 1);
		if (rec.hdr.nr_segments)
			WRITE_ONCE(q->nr_segmented, q->nr_segmented + 1);
	}

	if (!bius_op_has_payload(cmd->op) || !rec.hdr.len || cmd->mapped ||
	    bius_cmd_no_data(cmd)) {
		bius_cmd_set_state(cmd, BIUS_CMD_SENT);
		return size;
	}

	q->xfer_rq = rq;
	q->xfer_off = 0;
	ret = bius_send_payload(q, to);
	/* A fault here leaves the payload for the next read(). */
	return size + max_t(ssize_t, ret, 0);
}

/*
 * One read() pass with xfer_lock held.  Returns the bytes delivered, 0 at
 * end of file, -EAGAIN if there is nothing to deliver yet, or -EFAULT.  A
 * request whose header faulted after it was mapped goes to *@unmap, still
 * taken (XFER), for the caller to unmap and give back without xfer_lock.
 */
static ssize_t bius_read_locked(struct bius_queue *q, struct bius_conn *conn,
				struct iov_iter *to, struct request **unmap)
{
	const size_t hdr_size = sizeof(struct bius_request);
	struct bius_cmd *cmd, *next;
	LIST_HEAD(batch);
	ssize_t done = 0, ret = -EAGAIN;

	lockdep_assert_held(&q->xfer_lock);
	if (READ_ONCE(q->stopped) || bius_conn_stale(q, conn))
		return 0;

	if (q->xfer_pad) {
		ret = bius_send_pad(q, to);
		if (ret < 0 || q->xfer_pad)
			return ret;
		done = ret;
		ret = -EAGAIN;
	} else if (q->xfer_rq) {
		ret = bius_send_payload(q, to);
		if (ret < 0 || q->xfer_rq)
			return ret;
		done = ret;
		ret = -EAGAIN;
	}

	while (iov_iter_count(to) >= hdr_size) {
		if (!bius_queue_take(q, &batch, iov_iter_count(to) / hdr_size))
			break;
		list_for_each_entry_safe(cmd, next, &batch, node) {
			if (iov_iter_count(to) < hdr_size)
				goto out;
			ret = bius_send_request(q, blk_mq_rq_from_pdu(cmd), to);
			if (ret < 0) {
				if (cmd->mapped) {
					list_del_init(&cmd->node);
					*unmap = blk_mq_rq_from_pdu(cmd);
				}
				goto out;
			}
			done += ret;
			ret = -EAGAIN;
			if (q->xfer_rq)
				goto out;
		}
	}
out:
	bius_queue_give_back(q, &batch);
	return done ? done : ret;
}

/*
 * Busy-wait up to the device's poll time for something to read, while
 * nothing else wants this CPU.  True if there is something.
 */
static bool bius_poll_readable(struct bius_queue *q, struct bius_conn *conn)
{
	u32 poll_usecs = q->dev->params.poll_usecs;
	u64 end;

	if (!poll_usecs)
		return false;
	end = local_clock() + (u64)poll_usecs * NSEC_PER_USEC;
	while (!bius_queue_readable(q, conn)) {
		if (need_resched() || !single_task_running() ||
		    signal_pending(current) || local_clock() > end)
			return false;
		cpu_relax();
	}
	return true;
}

/* Can @q's connection fetch into @to: -ENOTCONN, -EINVAL (no room), 0. */
static int bius_fetch_check(struct bius_queue *q, struct iov_iter *to)
{
	if (!q)
		return -ENOTCONN;
	if (iov_iter_count(to) < sizeof(struct bius_request))
		return -EINVAL;
	return 0;
}

/*
 * One read() pass, with xfer_lock held and page faults off: a user buffer
 * that is not in memory (swapped out, or served by userfaultfd) must never
 * keep xfer_lock, which the hold and death paths wait for under the
 * registry lock.  -EFAULT if nothing could be delivered, @to as it was.
 */
/*
 * The daemon is the process that reads the queue (xfer_lock held): keep
 * its mm for bius_conn_daemon_gone(); a process the fd was passed to, or
 * one that exec()ed, makes it its own by reading.
 */
static void bius_conn_note_reader(struct bius_conn *conn)
{
	struct mm_struct *old = conn->mm;

	if (likely(old == current->mm))
		return;
	mmgrab(current->mm);
	conn->mm = current->mm;
	mmdrop(old);
}

static ssize_t bius_read_faults_off(struct bius_queue *q,
				    struct bius_conn *conn, struct iov_iter *to)
{
	size_t count = iov_iter_count(to);
	struct request *unmap = NULL;
	ssize_t ret;

	if (mutex_lock_interruptible(&q->xfer_lock))
		return -ERESTARTSYS;
	bius_conn_note_reader(conn);
	pagefault_disable();
	ret = bius_read_locked(q, conn, to, &unmap);
	pagefault_enable();
	mutex_unlock(&q->xfer_lock);
	if (unmap) {
		LIST_HEAD(one);

		/* read() owns it (XFER): back to the head of the queue */
		bius_unmap_rq(unmap, BIUS_UNMAP_FAILED);
		list_add(&((struct bius_cmd *)blk_mq_rq_to_pdu(unmap))->node,
			 &one);
		bius_queue_give_back(q, &one);
	}
	if (ret == -EFAULT)
		iov_iter_revert(to, count - iov_iter_count(to));
	return ret;
}

/* How often one read() faults its buffer in before it gives up (-EFAULT). */
#define BIUS_FAULT_TRIES	4

/*
 * Fault in the start of @to without a lock: the room of one record and, as
 * far as it goes, of a payload after it, so that the next pass delivers a
 * whole request.  True if the whole room of the record is writable now
 * (read() then tries again); false if not: a hole or a read-only page, or
 * a fatal signal.
 */
static bool bius_fault_in(struct bius_queue *q, struct iov_iter *to)
{
	size_t rec = min(iov_iter_count(to), sizeof(struct bius_record));
	size_t n = min_t(size_t, iov_iter_count(to),
			 rec + q->dev->params.max_io_bytes);

	return n - fault_in_iov_iter_writeable(to, n) >= rec;
}

/*
 * read() on @conn into @to, not blocking if @nowait: the bytes delivered,
 * 0 at end of file, or a negative errno.
 */
static ssize_t bius_fetch(struct bius_conn *conn, struct iov_iter *to,
			  bool nowait)
{
	struct bius_queue *q = bius_conn_queue(conn);
	unsigned int faults = 0;
	ssize_t ret;

	ret = bius_fetch_check(q, to);
	if (ret)
		return ret;

	for (;;) {
		ret = bius_read_faults_off(q, conn, to);
		if (ret == -EFAULT) {
			/*
			 * Only a buffer made writable again counts: a page
			 * that a fault cannot bring (or another thread keeps
			 * taking away) ends the read, as do fatal signals.
			 */
			if (fatal_signal_pending(current))
				return -EINTR;
			if (++faults <= BIUS_FAULT_TRIES && bius_fault_in(q, to))
				continue;
			return -EFAULT;
		}
		if (ret != -EAGAIN || nowait)
			return ret;
		if (bius_poll_readable(q, conn))
			continue;
		if (wait_event_interruptible(q->wait,
					     bius_queue_readable(q, conn)))
			return -ERESTARTSYS;
	}
}

ssize_t bius_read_iter(struct kiocb *iocb, struct iov_iter *to)
{
	return bius_fetch(iocb->ki_filp->private_data, to, bius_nowait(iocb));
}

/* Copy the payload of a successful read completion into the bio pages. */
static int bius_recv_payload(struct request *rq, struct iov_iter *from)
{
	struct req_iterator iter;
	struct bio_vec bv;

	rq_for_each_segment(bv, rq, iter) {
		if (copy_page_from_iter(bv.bv_page, bv.bv_offset, bv.bv_len,
					from) != bv.bv_len)
			return -EFAULT;
	}
	return 0;
}

static bool bius_completion_valid(const struct bius_completion *c,
				  size_t avail)
{
	return c->result <= 0 && c->result >= -MAX_ERRNO && c->len <= avail;
}

/*
 * Check the completion @c of the claimed request @rq against it and take
 * its payload.  0, -EINVAL (wrong payload length, sector, or reported
 * zones) or -EFAULT.
 */
static int bius_recv_completion(struct request *rq,
				const struct bius_completion *c,
				struct iov_iter *from)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	bool ok = !c->result;
	bool read_payload = ok && cmd->op == BIUS_OP_READ && !cmd->mapped &&
			    !bius_cmd_no_data(cmd);

	if (c->sector && !(ok && cmd->op == BIUS_OP_ZONE_APPEND))
		return -EINVAL;
	if (ok && cmd->op == BIUS_OP_REPORT_ZONES)
		return bius_zoned_recv_report(rq, c->len, from);
	if (c->len != (read_payload ? blk_rq_bytes(rq) : 0))
		return -EINVAL;
	if (read_payload)
		return bius_recv_payload(rq, from);
	if (ok && cmd->op == BIUS_OP_ZONE_APPEND)
		return bius_zoned_end_append(rq, c->sector);
	return 0;
}

/*
 * Apply one completion record of @conn.  Returns its size or a negative
 * errno.
 */
static ssize_t bius_complete_one(struct bius_queue *q, struct bius_conn *conn,
				 struct iov_iter *from)
{
	struct bius_completion c;
	struct request *rq;
	int ret;

	if (iov_iter_count(from) < sizeof(c))
		return -EINVAL;
	if (copy_from_iter(&c, sizeof(c), from) != sizeof(c))
		return -EFAULT;
	if (!bius_completion_valid(&c, iov_iter_count(from)))
		return -EINVAL;

	rq = bius_queue_claim(q, c.id);
	if (IS_ERR(rq))
		return PTR_ERR(rq);

	ret = bius_recv_completion(rq, &c, from);
	if (ret) {
		bius_queue_unclaim(q, conn, rq);
		return ret;
	}
	trace_bius_complete(rq, q->index, c.result);
	bius_unmap_rq(rq, c.result ? BIUS_UNMAP_FAILED : BIUS_UNMAP_OK);
	bius_cmd_end_accepted(rq, bius_result_status(rq, c.result));
	return sizeof(c) + c.len;
}

/*
 * write() on @conn: takes the completion records of @from in order, up to
 * the first refused one.  *@taken: the bytes of the records taken.
 * Returns 0 if all were taken, else the refusal's errno.
 */
static int bius_complete(struct bius_conn *conn, struct iov_iter *from,
			 size_t *taken)
{
	struct bius_queue *q = bius_conn_queue(conn);
	ssize_t ret;

	*taken = 0;
	if (!q)
		return -ENOTCONN;
	if (READ_ONCE(q->stopped) || bius_conn_stale(q, conn))
		return -ENODEV;

	while (iov_iter_count(from)) {
		ret = bius_complete_one(q, conn, from);
		if (ret < 0)
			return ret;
		*taken += ret;
	}
	return 0;
}

ssize_t bius_write_iter(struct kiocb *iocb, struct iov_iter *from)
{
	size_t taken;
	int ret = bius_complete(iocb->ki_filp->private_data, from, &taken);

	return taken ? taken : ret;
}

/*
 * BIUS_IOC_COMPLETE_FETCH on @file: write() of @from, then, if every
 * record was taken, read() into @to.  *@taken: the completion bytes taken.
 * Returns what the read() returns, or the refusal of a completion; once
 * completions are taken a signal ends the call with -EINTR, as restarting
 * it would complete them again.
 *
 * Ending a request may leave work for this thread on its way back to user
 * space: when it held the last reference to a file (an AIO whose fd was
 * closed while it was in flight), fput() queues the file's release (the
 * disk's close) as task work of the current thread.  Sleeping for the
 * next request would keep that disk open, perhaps for good: the read does
 * not wait then, and ends the call with -EINTR as a signal would.
 */
ssize_t bius_complete_fetch(struct file *file, struct iov_iter *from,
			    struct iov_iter *to, size_t *taken)
{
	struct bius_conn *conn = file->private_data;
	bool nonblock = file->f_flags & O_NONBLOCK;
	bool parked_work;
	ssize_t ret;

	*taken = 0;
	ret = bius_fetch_check(bius_conn_queue(conn), to);
	if (ret)
		return ret;
	if (iov_iter_count(from)) {
		ret = bius_complete(conn, from, taken);
		if (ret)
			return ret;
	}
	parked_work = *taken && task_work_pending(current);
	ret = bius_fetch(conn, to, nonblock || parked_work);
	if ((ret == -ERESTARTSYS && *taken) ||
	    (ret == -EAGAIN && parked_work && !nonblock))
		return -EINTR;
	return ret;
}

__poll_t bius_poll(struct file *file, struct poll_table_struct *wait)
{
	struct bius_conn *conn = file->private_data;
	struct bius_queue *q = bius_conn_queue(conn);
	__poll_t mask = EPOLLOUT | EPOLLWRNORM;

	if (!q)
		return EPOLLERR;

	poll_wait(file, &q->wait, wait);
	if (READ_ONCE(q->stopped) || bius_conn_stale(q, conn))
		mask |= EPOLLHUP;
	else if (!list_empty(&q->pending) || READ_ONCE(q->xfer_rq) ||
		 READ_ONCE(q->xfer_pad))
		mask |= EPOLLIN | EPOLLRDNORM;
	return mask;
}
