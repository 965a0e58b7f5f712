/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BIUS tracepoints (events/bius/ in tracefs): when the daemon takes a
 * request with read(), when its completion is applied by write(), and,
 * on a poll queue, when the submitter's poll ends it.
 * With the block layer's block_rq_issue and block_rq_complete they split
 * a request's time in the driver into waiting for the daemon and the
 * daemon's own work (benches/vm/timeline.py reads them).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM bius

#if !defined(_BIUS_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _BIUS_TRACE_H

#include <linux/blk-mq.h>
#include <linux/tracepoint.h>

#include <linux/bius.h>

#include "bius_drv.h"

#define bius_op_name(op) __print_symbolic(op,				\
	{ BIUS_OP_READ, "read" }, { BIUS_OP_WRITE, "write" },		\
	{ BIUS_OP_FLUSH, "flush" }, { BIUS_OP_DISCARD, "discard" },	\
	{ BIUS_OP_WRITE_ZEROES, "write_zeroes" },			\
	{ BIUS_OP_REPORT_ZONES, "report_zones" },			\
	{ BIUS_OP_ZONE_OPEN, "zone_open" },				\
	{ BIUS_OP_ZONE_CLOSE, "zone_close" },				\
	{ BIUS_OP_ZONE_FINISH, "zone_finish" },				\
	{ BIUS_OP_ZONE_APPEND, "zone_append" },				\
	{ BIUS_OP_ZONE_RESET, "zone_reset" },				\
	{ BIUS_OP_ZONE_RESET_ALL, "zone_reset_all" })

/* A request as the daemon sees it, and the result it gave (0 until then). */
DECLARE_EVENT_CLASS(bius_rq,
	TP_PROTO(struct request *rq, u16 queue, int result),
	TP_ARGS(rq, queue, result),
	TP_STRUCT__entry(
		__field(dev_t, dev)
		__field(sector_t, sector)
		__field(u32, len)
		__field(int, result)
		__field(u16, queue)
		__field(u16, tag)
		__field(u8, op)
		__field(bool, mapped)
	),
	TP_fast_assign(
		__entry->dev = disk_devt(rq->q->disk);
		__entry->sector = blk_rq_pos(rq);
		__entry->len = blk_rq_bytes(rq);
		__entry->result = result;
		__entry->queue = queue;
		__entry->tag = rq->tag;
		__entry->op = ((struct bius_cmd *)blk_mq_rq_to_pdu(rq))->op;
		__entry->mapped = ((struct bius_cmd *)blk_mq_rq_to_pdu(rq))->mapped;
	),
	TP_printk("%d,%d queue=%u tag=%u op=%s sector=%llu len=%u mapped=%d result=%d",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->queue,
		  __entry->tag, bius_op_name(__entry->op),
		  (unsigned long long)__entry->sector, __entry->len,
		  __entry->mapped, __entry->result)
);

/* read() has taken the request (its header is out). */
DEFINE_EVENT(bius_rq, bius_fetch,
	TP_PROTO(struct request *rq, u16 queue, int result),
	TP_ARGS(rq, queue, result)
);

/*
 * write() has applied the request's completion; it ends next, or on a
 * poll queue when it is polled (bius_polled).
 */
DEFINE_EVENT(bius_rq, bius_complete,
	TP_PROTO(struct request *rq, u16 queue, int result),
	TP_ARGS(rq, queue, result)
);

/* blk_mq_ops.poll ends the request, completed before, of a poll queue. */
DEFINE_EVENT(bius_rq, bius_polled,
	TP_PROTO(struct request *rq, u16 queue, int result),
	TP_ARGS(rq, queue, result)
);

#endif /* _BIUS_TRACE_H */

/* This part must be outside the include guard. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE bius_trace
#include <trace/define_trace.h>
