// SPDX-License-Identifier: GPL-2.0
/*
 * The served in-memory disk of bius_badinput: the request stream, its
 * completions, the server threads and the creation, bring-up and teardown
 * of a test device.
 */

#include "badinput.h"

/* ---- a served in-memory disk -------------------------------------------- */

int srv_flush(struct srv *s)
{
	size_t off = 0;

	while (off < s->wlen) {
		ssize_t n = write(s->fd, s->wbuf + off, s->wlen - off);

		if (n < 0) {
			s->protocol_errors++;
			s->wlen = 0;
			return -1;
		}
		off += n;
	}
	s->wlen = 0;
	return 0;
}

void srv_complete_at(struct srv *s, uint64_t id, int result,
		     uint64_t sector, const void *payload, uint32_t len)
{
	struct bius_completion c = { .id = id, .result = result, .len = len,
				     .sector = sector };

	if (s->wlen + CMP + len > s->wsize)
		srv_flush(s);
	memcpy(s->wbuf + s->wlen, &c, CMP);
	s->wlen += CMP;
	if (len)
		memcpy(s->wbuf + s->wlen, payload, len);
	s->wlen += len;
	s->served++;
}

void srv_complete(struct srv *s, uint64_t id, int result,
		  const void *payload, uint32_t len)
{
	srv_complete_at(s, id, result, 0, payload, len);
}

static int srv_in_range(struct srv *s, const struct bius_request *r)
{
	uint64_t off = r->sector * 512;

	return off <= s->size && r->len <= s->size - off;
}

void srv_request(struct srv *s, const struct bius_request *r)
{
	uint64_t off = r->sector * 512;

	if (s->zm && (r->op == BIUS_OP_WRITE ||
		      r->op >= BIUS_OP_REPORT_ZONES)) {
		srv_zoned_request(s, r);
		return;
	}
	if (r->op != BIUS_OP_FLUSH && !srv_in_range(s, r)) {
		srv_complete(s, r->id, -EIO, NULL, 0);
		return;
	}
	switch (r->op) {
	case BIUS_OP_READ:
		if (r->flags & BIUS_REQ_NO_DATA) {
			srv_complete(s, r->id, 0, NULL, 0);
			break;
		}
		if (r->flags & BIUS_REQ_MAPPED) {
			memcpy(s->win + r->window_offset, s->mem + off, r->len);
			srv_complete(s, r->id, 0, NULL, 0);
			break;
		}
		srv_complete(s, r->id, 0, s->mem + off, r->len);
		break;
	case BIUS_OP_WRITE:	/* the payload was copied on arrival */
	case BIUS_OP_FLUSH:
		srv_complete(s, r->id, 0, NULL, 0);
		break;
	case BIUS_OP_DISCARD:
	case BIUS_OP_WRITE_ZEROES:
		memset(s->mem + off, 0, r->len);
		srv_complete(s, r->id, 0, NULL, 0);
		break;
	default:
		srv_complete(s, r->id, -EOPNOTSUPP, NULL, 0);
	}
}

/* Consume one read() chunk of the request stream. */
static void srv_consume(struct srv *s, const unsigned char *p, size_t n)
{
	while (n) {
		if (s->in_payload) {
			uint32_t want = s->cur.len - s->cur_off;
			uint32_t take = n < want ? n : want;

			if (s->cur_dst <= s->size / 512 &&
			    s->cur.len <= s->size - s->cur_dst * 512)
				memcpy(s->mem + s->cur_dst * 512 + s->cur_off,
				       p, take);
			s->cur_off += take;
			p += take;
			n -= take;
			if (s->cur_off == s->cur.len) {
				s->in_payload = 0;
				srv_request(s, &s->cur);
			}
			continue;
		}
		if (n < HDR) {	/* a header is never split */
			s->protocol_errors++;
			return;
		}
		memcpy(&s->cur, p, HDR);
		p += HDR;
		n -= HDR;
		if (s->cur.flags & BIUS_REQ_REPLAY)
			s->replays++;
		if (s->cur.flags & BIUS_REQ_NO_DATA) {
			srv_request(s, &s->cur);
		} else if (s->cur.flags & BIUS_REQ_MAPPED) {
			if (s->cur.op == BIUS_OP_WRITE && srv_in_range(s, &s->cur))
				memcpy(s->mem + s->cur.sector * 512,
				       s->win + s->cur.window_offset,
				       s->cur.len);
			srv_request(s, &s->cur);
		} else if ((s->cur.op == BIUS_OP_WRITE ||
			    s->cur.op == BIUS_OP_ZONE_APPEND) && s->cur.len) {
			s->in_payload = 1;
			s->cur_off = 0;
			s->cur_dst = s->cur.sector;
			if (s->cur.op == BIUS_OP_ZONE_APPEND && s->zm)
				s->cur_dst = zm_append_dst(s->zm, &s->cur);
		} else {
			srv_request(s, &s->cur);
		}
	}
}

/* Serve what is there now; returns read()'s result. */
ssize_t srv_serve_once(struct srv *s)
{
	ssize_t n = read(s->fd, s->rbuf, s->rsize);

	if (n > 0) {
		srv_consume(s, s->rbuf, n);
		if (s->delay_pct && (int)(rand_r(&s->seed) % 100) < s->delay_pct)
			sleep_ms(rand_r(&s->seed) % (s->delay_max_ms + 1));
		srv_flush(s);
	}
	return n;
}

static void *srv_thread(void *arg)
{
	struct srv *s = arg;
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };

	for (;;) {
		ssize_t n;

		if (s->stop) {
			close(s->fd);
			s->fd = -1;
			break;
		}
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		if (pfd.revents & POLLHUP)
			break;
		n = srv_serve_once(s);
		if (n == 0)
			break;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			break;
	}
	return NULL;
}

static void srv_init(struct srv *s, struct tdev *d, int index)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->index = index;
	s->mem = d->mem;
	s->size = d->size;
	s->zm = d->zm;
	s->rsize = 2 * MiB;
	s->rbuf = xalloc(s->rsize);
	s->wsize = 2 * MiB;
	s->wbuf = xalloc(s->wsize);
}

static void srv_start_thread(struct srv *s)
{
	if (pthread_create(&s->thread, NULL, srv_thread, s) == 0)
		s->running = 1;
}

/* Wait for the server threads to end (they get EOF when the device dies). */
int tdev_join(struct tdev *d, long timeout_ms)
{
	long end = now_ms() + timeout_ms;
	unsigned int i;
	int all = 1;

	for (i = 0; i < d->nq; i++) {
		struct srv *s = &d->srv[i];

		if (!s->running)
			continue;
		while (pthread_tryjoin_np(s->thread, NULL) == EBUSY) {
			if (now_ms() > end) {
				all = 0;
				break;
			}
			sleep_ms(10);
		}
		if (all)
			s->running = 0;
	}
	return all;
}

void tdev_close_fds(struct tdev *d)
{
	unsigned int i;

	for (i = 0; i < d->nq; i++) {
		if (d->srv[i].win)
			munmap(d->srv[i].win, d->srv[i].win_len);
		d->srv[i].win = NULL;
		if (d->srv[i].fd >= 0)
			close(d->srv[i].fd);
		d->srv[i].fd = -1;
	}
}

void tdev_free(struct tdev *d)
{
	unsigned int i;

	tdev_close_fds(d);
	if (d->ctl >= 0)
		close(d->ctl);
	d->ctl = -1;
	for (i = 0; i < d->nq; i++) {
		free(d->srv[i].rbuf);
		free(d->srv[i].wbuf);
		d->srv[i].rbuf = NULL;
		d->srv[i].wbuf = NULL;
	}
	free(d->mem);
	d->mem = NULL;
}

/* Create and connect every queue; @zm: the zones of a zoned device. */
int tdev_create(struct tdev *d, struct bius_device_params *p,
		struct zmodel *zm, const char *check)
{
	unsigned int i;

	memset(d, 0, sizeof(*d));
	d->ctl = ctl_open();
	d->nq = p->nr_hw_queues;
	d->size = p->size;
	d->mem = xalloc(p->size);
	d->zm = zm;
	for (i = 0; i < d->nq; i++)
		srv_init(&d->srv[i], d, i);

	if (ioctl(d->ctl, BIUS_IOC_CREATE_DEVICE, p)) {
		not_ok(check, "CREATE_DEVICE: %s", strerror(errno));
		return -1;
	}
	d->id = p->dev_id;
	for (i = 0; i < d->nq; i++) {
		d->srv[i].fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);
		if (d->srv[i].fd < 0 || do_connect(d->srv[i].fd, d->id, i)) {
			not_ok(check, "CONNECT %u: %s", i, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Serve from this thread until the device is LIVE. */
int tdev_wait_live(struct tdev *d, const char *check)
{
	struct bius_device_info info;
	struct pollfd pfd[MAX_QUEUES];
	long end;
	unsigned int i;

	for (i = 0; i < d->nq; i++) {
		pfd[i].fd = d->srv[i].fd;
		pfd[i].events = POLLIN;
	}

	end = now_ms() + 20000;
	while (now_ms() < end) {
		if (get_info(d->ctl, d->id, &info)) {
			not_ok(check, "GET_INFO: %s", strerror(errno));
			return -1;
		}
		if (info.state == BIUS_STATE_LIVE) {
			snprintf(d->name, sizeof(d->name), "%s",
				 info.disk_name);
			return 0;
		}
		if (info.state != BIUS_STATE_CREATED) {
			not_ok(check, "device went to state %u", info.state);
			return -1;
		}
		if (poll(pfd, d->nq, 20) > 0)
			for (i = 0; i < d->nq; i++)
				if (pfd[i].revents & POLLIN)
					srv_serve_once(&d->srv[i]);
	}
	not_ok(check, "device not LIVE after 20 s");
	return -1;
}

/* Create, connect every queue, serve from this thread until LIVE. */
int tdev_up(struct tdev *d, struct bius_device_params *p,
	    const char *check)
{
	if (tdev_create(d, p, NULL, check))
		return -1;
	return tdev_wait_live(d, check);
}

void tdev_serve_in_threads(struct tdev *d)
{
	unsigned int i;

	for (i = 0; i < d->nq; i++)
		srv_start_thread(&d->srv[i]);
}

/* Serve @d from its threads, DESTROY it through @ctl (the check @check)
 * and wait for the threads to see the end.
 */
void tdev_destroy_served(struct tdev *d, int ctl, const char *check)
{
	int r;

	tdev_serve_in_threads(d);
	r = do_destroy(ctl, d->id, 0);
	expect_true(check, r == 0, "%s", strerror(errno));
	tdev_join(d, 10000);
}

/* A failed check left @d up: force it down, unserved. */
void tdev_force_down(struct tdev *d)
{
	do_destroy(d->ctl, d->id, BIUS_DESTROY_FORCE);
	tdev_join(d, 10000);
}
