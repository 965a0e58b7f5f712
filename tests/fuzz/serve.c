// SPDX-License-Identifier: GPL-2.0
/*
 * One queue of a bius_fuzz daemon, served from its own thread: the
 * request stream (read() or COMPLETE_FETCH, blocking or not, after poll()
 * or not), the data (streams, the mmap()ed window with its segments, or
 * none), the completions, and the lies (lies.c) told now and then.
 */

#include "fuzz.h"
#include "serve.h"

/* Check and take a refused completion record at @off of the batch. */
static size_t refused(struct queue *q, size_t off)
{
	const struct bius_completion *c = (void *)(q->wbuf + off);
	int e = errno;

	note(q->st, -1);
	if (e == EINVAL || e == EXDEV)
		broken("honest completion (id %#llx result %d len %u) refused: %s",
		       (unsigned long long)c->id, c->result, c->len,
		       strerror(e));
	return CMP + c->len;
}

/* Send the batch of completions; refusals are checked and skipped. */
void queue_flush(struct queue *q)
{
	size_t off = 0;

	while (off < q->wlen) {
		ssize_t n = write(q->fd, q->wbuf + off, q->wlen - off);

		if (n > 0)
			off += n;
		else if (errno == EINTR || errno == EAGAIN)
			continue;
		else if (errno == ENODEV || errno == ENOTCONN)
			break;
		else
			off += refused(q, off);
	}
	q->wlen = 0;
}

/* Append one honest completion to the batch. */
void queue_put(struct queue *q, uint64_t id, int result, uint64_t sector,
	       const void *payload, uint32_t len)
{
	struct bius_completion c = { .id = id, .result = result, .len = len,
				     .sector = sector };

	if (q->wlen + CMP + len > q->wsize)
		queue_flush(q);
	memcpy(q->wbuf + q->wlen, &c, CMP);
	if (len)
		memcpy(q->wbuf + q->wlen + CMP, payload, len);
	q->wlen += CMP + len;
	count(q->st, F_SERVED);
}

/* Copy between the slot's memory at @mem and the window's pieces of @r. */
static int window_copy(struct queue *q, const struct bius_request *r,
		       unsigned char *mem, int to_window)
{
	struct bius_segment one = { .window_offset = r->window_offset,
				    .len = r->len };
	const struct bius_segment *seg = r->nr_segments ? q->seg : &one;
	unsigned int i, n = r->nr_segments ? r->nr_segments : 1;

	for (i = 0; i < n; i++) {
		if (!q->win || seg[i].window_offset > q->win_len ||
		    seg[i].len > q->win_len - seg[i].window_offset) {
			broken("mapped request outside the window (%zu bytes): "
			       "offset %llu len %u", q->win ? q->win_len : 0,
			       (unsigned long long)seg[i].window_offset,
			       seg[i].len);
			return -EIO;
		}
		if (to_window)
			memcpy(q->win + seg[i].window_offset, mem, seg[i].len);
		else
			memcpy(mem, q->win + seg[i].window_offset, seg[i].len);
		mem += seg[i].len;
	}
	return 0;
}

/*
 * Store the data of a WRITE or ZONE_APPEND (or zeroes, for a DISCARD or
 * WRITE_ZEROES) at byte @off of the slot, unless another daemon has taken
 * the device over: a daemon is lost before it knows it, and the requests
 * it still serves then are replayed to the next one, whose stores must not
 * be overwritten by these late ones (-ENODEV).
 */
static int store(struct queue *q, const struct bius_request *r,
		 uint64_t off)
{
	unsigned char *mem = q->s->mem + off;
	int ret = 0;

	if (r->flags & BIUS_REQ_NO_DATA)
		return 0;
	slot_lock(q->s);
	if (q->s->epoch != q->epoch)
		ret = -ENODEV;
	else if (r->op == BIUS_OP_DISCARD || r->op == BIUS_OP_WRITE_ZEROES)
		memset(mem, 0, r->len);
	else if (r->flags & BIUS_REQ_MAPPED)
		ret = window_copy(q, r, mem, 0);
	else
		memcpy(mem, q->pay, r->len);
	slot_unlock(q->s);
	return ret;
}

static int in_range(const struct slot *s, uint64_t sector, uint32_t len)
{
	return sector <= s->p.size / 512 && len <= s->p.size - sector * 512;
}

static void serve_read(struct queue *q, const struct bius_request *r,
		       uint64_t off)
{
	int res;

	if (r->flags & BIUS_REQ_NO_DATA) {
		lie_or_put(q, r, 0, 0, NULL, 0);
	} else if (r->flags & BIUS_REQ_MAPPED) {
		res = window_copy(q, r, q->s->mem + off, 1);
		lie_or_put(q, r, res, 0, NULL, 0);
	} else {
		lie_or_put(q, r, 0, 0, q->s->mem + off, r->len);
	}
}

static void serve_zoned(struct queue *q, const struct bius_request *r)
{
	uint64_t sector = 0;
	uint32_t n;
	int res;

	if (r->op == BIUS_OP_REPORT_ZONES) {
		n = zones_report(q->s, r, q->rep);
		lie_or_put(q, r, n ? 0 : -EIO, 0, q->rep, n);
		return;
	}
	count(q->st, F_ZONE_OPS);
	res = zones_handle(q->s, r, q->epoch, &sector);
	if (res == 0 && r->op == BIUS_OP_WRITE)
		res = store(q, r, r->sector * 512);
	else if (res == 0 && r->op == BIUS_OP_ZONE_APPEND)
		res = store(q, r, sector * 512);
	if (r->op != BIUS_OP_ZONE_APPEND || res)
		sector = 0;
	lie_or_put(q, r, res < 0 ? res : 0, sector, NULL, 0);
}

/* One whole request (its payload, if any, in q->pay). */
static void serve(struct queue *q, const struct bius_request *r)
{
	uint64_t off = r->sector * 512;
	int zoned = q->s->p.features & BIUS_FEATURE_ZONED;

	if (zoned && (r->op == BIUS_OP_WRITE || r->op >= BIUS_OP_REPORT_ZONES)) {
		serve_zoned(q, r);
		return;
	}
	if (r->op != BIUS_OP_FLUSH && !in_range(q->s, r->sector, r->len)) {
		broken("request op %u past the end: sector %llu len %u",
		       r->op, (unsigned long long)r->sector, r->len);
		lie_or_put(q, r, -EIO, 0, NULL, 0);
		return;
	}
	switch (r->op) {
	case BIUS_OP_READ:
		serve_read(q, r, off);
		return;
	case BIUS_OP_WRITE:
		lie_or_put(q, r, store(q, r, off), 0, NULL, 0);
		return;
	case BIUS_OP_DISCARD:
	case BIUS_OP_WRITE_ZEROES:
		lie_or_put(q, r, store(q, r, off), 0, NULL, 0);
		return;
	case BIUS_OP_FLUSH:
		lie_or_put(q, r, 0, 0, NULL, 0);
		return;
	}
	lie_or_put(q, r, -EOPNOTSUPP, 0, NULL, 0);
}

/* A header (and its segment records) at @p; bytes used, 0 if malformed. */
static size_t take_header(struct queue *q, const unsigned char *p, size_t n)
{
	struct bius_request *r = &q->cur;
	size_t segs;

	if (n < HDR) {
		broken("a read() split a request header (%zu bytes left)", n);
		return 0;
	}
	memcpy(r, p, HDR);
	segs = r->nr_segments * sizeof(struct bius_segment);
	if (r->nr_segments == 1 || r->nr_segments > BIUS_MAP_MAX_SEGMENTS ||
	    (segs && !(r->flags & BIUS_REQ_MAPPED)) || n - HDR < segs) {
		broken("request with %u segment records (flags %#x, %zu bytes)",
		       r->nr_segments, r->flags, n - HDR);
		return 0;
	}
	if (r->op > BIUS_OP_ZONE_RESET_ALL ||
	    ((r->op == BIUS_OP_WRITE || r->op == BIUS_OP_ZONE_APPEND ||
	      r->op == BIUS_OP_READ) && r->len > q->s->p.max_io_bytes)) {
		broken("request op %u len %u (max_io_bytes %u)", r->op, r->len,
		       q->s->p.max_io_bytes);
		return 0;
	}
	memcpy(q->seg, p + HDR, segs);
	count(q->st, F_REQUESTS_SEEN);
	if (r->flags & BIUS_REQ_REPLAY)
		count(q->st, F_REPLAYS);
	return HDR + segs;
}

/* Consume one read() of the request stream; -1 if it cannot be parsed. */
static int consume(struct queue *q, const unsigned char *p, size_t n)
{
	const struct bius_request *r = &q->cur;

	while (n) {
		size_t used;

		if (q->pay_off < q->pay_len) {
			used = q->pay_len - q->pay_off;
			if (used > n)
				used = n;
			memcpy(q->pay + q->pay_off, p, used);
			q->pay_off += used;
			if (q->pay_off == q->pay_len)
				serve(q, r);
		} else {
			used = take_header(q, p, n);
			if (!used)
				return -1;
			q->pay_off = q->pay_len = 0;
			if ((r->op == BIUS_OP_WRITE ||
			     r->op == BIUS_OP_ZONE_APPEND) && r->len &&
			    !(r->flags & (BIUS_REQ_MAPPED | BIUS_REQ_NO_DATA)))
				q->pay_len = r->len;
			else
				serve(q, r);
		}
		p += used;
		n -= used;
	}
	return 0;
}

/*
 * COMPLETE_FETCH: the batch, then a read; as read() returns, or -2 if a
 * completion of the batch was refused (one of a request that timed out
 * meanwhile, say): the rest is sent by write(), and nothing fetched.
 */
static ssize_t fetch(struct queue *q)
{
	struct bius_complete_fetch cf = {
		.completions = (uintptr_t)q->wbuf,
		.completions_len = q->wlen,
		.requests = (uintptr_t)q->rbuf,
		.requests_len = q->rsize,
	};
	size_t off;
	int e;
	int r = ioctl(q->fd, BIUS_IOC_COMPLETE_FETCH, &cf);

	if (r >= 0 || cf.completed >= q->wlen ||
	    errno == EINTR || errno == EAGAIN) {
		q->wlen = 0;
		return r;
	}
	e = errno;
	/* EBADF: this daemon closed the fd to be lost (E_CLOSE_ONE) */
	if (e != ENODEV && e != ENOTCONN && e != EBADF) {
		/* the record at cf.completed was refused: the rest by write() */
		off = cf.completed + refused(q, cf.completed);
		memmove(q->wbuf, q->wbuf + off, q->wlen - off);
		q->wlen -= off;
		queue_flush(q);
		return -2;
	}
	q->wlen = 0;
	errno = e;
	return -1;
}

/* Wait for requests (or not) and fetch them; read()'s result. */
static ssize_t next_batch(struct queue *q)
{
	struct pollfd pfd = { .fd = q->fd, .events = POLLIN };

	if (!(q->use_cf && q->wlen) && rng_pct(&q->rng, 50)) {
		queue_flush(q);
		if (poll(&pfd, 1, 200) <= 0)
			return -2;
		if (pfd.revents & (POLLHUP | POLLERR))
			return 0;
	}
	if (!q->wlen && rng_pct(&q->rng, 2))
		return edge_fetch(q);
	if (q->use_cf)
		return fetch(q);
	queue_flush(q);
	return read(q->fd, q->rbuf, q->rsize);
}

static void *queue_thread(void *arg)
{
	struct queue *q = arg;
	ssize_t n;

	for (;;) {
		n = next_batch(q);
		if (n == -2)
			continue;
		if (n == 0)
			break;
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0 && errno != ENODEV && errno != ENOTCONN &&
		    errno != EBADF)
			broken("read() of a connected queue failed: %s",
			       strerror(errno));
		if (note(q->st, n) < 0 || consume(q, q->rbuf, n))
			break;
		if (!q->use_cf)
			queue_flush(q);
		window_churn(q);
	}
	queue_flush(q);
	__atomic_store_n(&q->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

struct queue *queue_new(struct slot *s, int fd, int index,
			struct stats *st, uint64_t seed, uint32_t epoch)
{
	struct queue *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->s = s;
	q->fd = fd;
	q->index = index;
	q->st = st;
	q->epoch = epoch;
	rng_seed(&q->rng, seed, index);
	q->use_cf = rng_pct(&q->rng, 50);
	q->lie_pct = rng_pct(&q->rng, 40) ? 0 : 1 + rng_below(&q->rng, 6);
	q->rsize = rng_pct(&q->rng, 20) ? HDR + 64 : 2 * MAX_IO;
	q->rbuf = malloc(q->rsize);
	q->wsize = 2 * MAX_IO;
	q->wbuf = malloc(q->wsize);
	q->pay = malloc(MAX_IO);
	if (!q->rbuf || !q->wbuf || !q->pay) {
		free(q->rbuf);
		free(q->wbuf);
		free(q->pay);
		free(q);
		return NULL;
	}
	if (rng_pct(&q->rng, 30))
		fcntl(fd, F_SETFL, O_NONBLOCK);
	if (s->p.transfer_mode != BIUS_TRANSFER_COPY && rng_pct(&q->rng, 80))
		window_map(q);
	return q;
}

void queue_start(struct queue *q)
{
	if (pthread_create(&q->thread, NULL, queue_thread, q))
		q->done = 1;
	else
		q->running = 1;
}

/* Wait up to @ms for the queue's thread to see the end; 1 if it did. */
int queue_join(struct queue *q, long ms)
{
	long end = bius_now_ms() + ms;

	while (q->running && !__atomic_load_n(&q->done, __ATOMIC_ACQUIRE)) {
		if (bius_now_ms() > end)
			return 0;
		bius_sleep_ms(10);
	}
	if (q->running)
		pthread_join(q->thread, NULL);
	q->running = 0;
	return 1;
}
