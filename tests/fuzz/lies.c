// SPDX-License-Identifier: GPL-2.0
/*
 * The lies of a bius_fuzz daemon, and its window's mmap()/munmap().
 * A lie the ABI lets through (any errno, other data for a READ) is
 * counted in the slot, so the I/O role does not check data across it;
 * a lie the ABI refuses (wrong id, a second completion, wrong size, bad
 * result, a sector where none belongs, a split record, an impossible zone
 * or append sector) is sent alone and must fail; then the honest
 * completion follows.  Some daemons complete late (past the request
 * timeout) or die with requests in hand.
 */

#include "serve.h"

enum lie {
	L_ERRNO, L_GARBAGE, L_DUP, L_BADID, L_BADLEN, L_BADRES, L_SECTOR,
	L_SPLIT, L_ZONE, L_APPEND, L_LATE, L_EXIT, L_NR
};

static const char *const lie_name[L_NR] = {
	"errno", "garbage", "second completion", "unknown id", "wrong size",
	"bad result", "sector", "split record", "impossible zone",
	"bad append sector", "late", "exit"
};

/* Build a record in the (flushed, so free) batch buffer. */
static struct bius_completion *record(struct queue *q, uint64_t id,
				      int result, uint64_t sector,
				      const void *payload, uint32_t len)
{
	struct bius_completion *c = (void *)q->wbuf;

	queue_flush(q);
	c->id = id;
	c->result = result;
	c->len = len;
	c->sector = sector;
	if (len)
		memmove(q->wbuf + CMP, payload, len);
	return c;
}

/* Send the record built in the batch buffer (@bytes of it): must fail. */
static void refused_lie(struct queue *q, enum lie l, size_t bytes)
{
	ssize_t n = write(q->fd, q->wbuf, bytes);

	count(q->st, F_LIES);
	if (n >= 0) {
		broken("lie '%s' accepted (%zd of %zu bytes)", lie_name[l], n,
		       bytes);
		return;
	}
	note(q->st, -1);
	count(q->st, F_LIES_REFUSED);
}

static void lie_zone(struct queue *q, struct blk_zone *z)
{
	switch (rng_below(&q->rng, 4)) {
	case 0:
		z->type = z->type == BLK_ZONE_TYPE_CONVENTIONAL ?
			  BLK_ZONE_TYPE_SEQWRITE_REQ :
			  BLK_ZONE_TYPE_CONVENTIONAL;
		break;
	case 1:
		z->start += 8;
		break;
	case 2:
		z->cond = 0x5;		/* no such condition */
		break;
	default:
		z->reserved[0] = 1;
	}
}

/* A lie the ABI refuses (if it fits this completion); 1 if told. */
static int refusable(struct queue *q, enum lie l,
		     const struct bius_request *r, int result,
		     uint64_t sector, const void *payload, uint32_t len)
{
	struct bius_completion *c;
	uint32_t bad;

	switch (l) {
	case L_DUP:
		queue_put(q, r->id, result, sector, payload, len);
		record(q, r->id, result, sector, payload, len);
		refused_lie(q, l, CMP + len);
		return 1;
	case L_BADID:
		record(q, r->id ^ (1ull << 63), result, sector, payload, len);
		break;
	case L_BADLEN:
		bad = r->op == BIUS_OP_REPORT_ZONES ? len + 1 :
		      len && !result ? len - 512 : 512;
		record(q, r->id, result, sector, q->s->mem, bad);
		refused_lie(q, l, CMP + bad);
		return 0;
	case L_BADRES:
		record(q, r->id, rng_pct(&q->rng, 50) ?
		       1 + (int)rng_below(&q->rng, 100) :
		       -4096 - (int)rng_below(&q->rng, 100), 0, NULL, 0);
		len = 0;
		break;
	case L_SECTOR:
		if (r->op == BIUS_OP_ZONE_APPEND && !result)
			return 0;
		record(q, r->id, result, 8, payload, len);
		break;
	case L_SPLIT:
		record(q, r->id, result, sector, payload, len);
		refused_lie(q, l, CMP / 2);
		return 0;
	case L_ZONE:
		if (r->op != BIUS_OP_REPORT_ZONES || result || !len)
			return 0;
		c = record(q, r->id, result, sector, payload, len);
		lie_zone(q, (struct blk_zone *)(c + 1) +
			 rng_below(&q->rng, len / sizeof(struct blk_zone)));
		break;
	case L_APPEND:
		if (r->op != BIUS_OP_ZONE_APPEND || result)
			return 0;
		record(q, r->id, 0, rng_pct(&q->rng, 50) ? ~7ull :
		       r->sector + q->s->p.zoned.zone_size / 512, NULL, 0);
		break;
	default:
		return 0;
	}
	refused_lie(q, l, CMP + len);
	return 0;
}

/* A lie the ABI lets through, or one that is no record; 1 if told. */
static int accepted(struct queue *q, enum lie l,
		    const struct bius_request *r, int result, uint32_t len)
{
	unsigned int i;

	switch (l) {
	case L_ERRNO:
		if (r->op != BIUS_OP_READ && r->op != BIUS_OP_REPORT_ZONES)
			__atomic_fetch_add(&q->s->lies, 1, __ATOMIC_SEQ_CST);
		queue_put(q, r->id, -1 - (int)rng_below(&q->rng, 133), 0,
			  NULL, 0);
		break;
	case L_GARBAGE:
		if (r->op != BIUS_OP_READ || result || !len)
			return 0;
		__atomic_fetch_add(&q->s->lies, 1, __ATOMIC_SEQ_CST);
		for (i = 0; i < len; i++)
			q->pay[i] = rng_next(&q->rng);
		queue_put(q, r->id, 0, 0, q->pay, len);
		break;
	case L_LATE:
		queue_flush(q);
		bius_sleep_ms(q->s->p.timeout_ms + rng_below(&q->rng, 500));
		return 0;
	case L_EXIT:
		queue_flush(q);
		count(q->st, F_DAEMON_DEATHS);
		_exit(0);
	default:
		return 0;
	}
	count(q->st, F_LIES);
	return 1;
}

/* Complete @r: honestly, or after a lie, or with a lie. */
void lie_or_put(struct queue *q, const struct bius_request *r, int result,
		uint64_t sector, const void *payload, uint32_t len)
{
	enum lie l;

	if (result)
		len = 0;
	if (q->lie_pct && rng_pct(&q->rng, q->lie_pct)) {
		l = rng_below(&q->rng, L_NR);
		if (accepted(q, l, r, result, len) ||
		    refusable(q, l, r, result, sector, payload, len))
			return;
	}
	queue_put(q, r->id, result, sector, payload, len);
}

/* mmap() the window, after a wrong attempt now and then. */
void window_map(struct queue *q)
{
	struct bius_device_info info;
	void *w;

	if (note(q->st, get_info(q->fd, q->s->dev_id, &info)) ||
	    !info.map_window_bytes)
		return;
	if (rng_pct(&q->rng, 20)) {
		w = mmap(NULL, info.map_window_bytes + 4096,
			 PROT_READ | PROT_WRITE, MAP_SHARED, q->fd, 0);
		must_fail(q->st, "mmap of a window of the wrong size",
			  w == MAP_FAILED ? -1 : 0);
		if (w != MAP_FAILED)
			munmap(w, info.map_window_bytes + 4096);
	}
	w = mmap(NULL, info.map_window_bytes, PROT_READ | PROT_WRITE,
		 MAP_SHARED, q->fd, 0);
	if (note(q->st, w == MAP_FAILED ? -1 : 0))
		return;
	q->win = w;
	q->win_len = info.map_window_bytes;
	q->mapped_once = 1;
}

/* Between batches, now and then: munmap() the window; a second mmap()
 * of this fd must then fail.
 */
void window_churn(struct queue *q)
{
	void *w;

	if (!q->win || !rng_pct(&q->rng, 2))
		return;
	munmap(q->win, q->win_len);
	q->win = NULL;
	w = mmap(NULL, q->win_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		 q->fd, 0);
	must_fail(q->st, "a second mmap() of a queue fd",
		  w == MAP_FAILED ? -1 : 0);
	if (w != MAP_FAILED)
		q->win = w;
}
