// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: poll queues.  A device with poll queues reports them and
 * serves I/O that is not polled as ever; polled reads (a bare io_uring
 * with IORING_SETUP_IOPOLL, no liburing) go to the poll queue, and a
 * request the daemon completed but no one polled yet is neither lost nor
 * ended twice: polled, it ends with its data; past the request timeout it
 * ends with the daemon's result, not a timeout; when the daemon dies it
 * ends with the daemon's result, not EIO; a second completion for it is
 * refused (ENOENT).
 */

#include <linux/io_uring.h>

#include "badinput.h"

/* ---- a bare io_uring with IOPOLL ----------------------------------------- */

struct ring {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array;
	unsigned int *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	void *sq_map, *cq_map;
	size_t sq_len, cq_len, sqes_len;
};

static void *ring_map(int fd, size_t len, off_t off)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, fd, off);

	return p == MAP_FAILED ? NULL : p;
}

static void ring_exit(struct ring *r)
{
	if (r->sqes)
		munmap(r->sqes, r->sqes_len);
	if (r->cq_map)
		munmap(r->cq_map, r->cq_len);
	if (r->sq_map)
		munmap(r->sq_map, r->sq_len);
	if (r->fd >= 0)
		close(r->fd);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

/* An IOPOLL ring of 4 entries; 0, or -1 with errno. */
static int ring_init(struct ring *r)
{
	struct io_uring_params p;
	char *sq, *cq;

	memset(r, 0, sizeof(*r));
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_IOPOLL;
	r->fd = syscall(__NR_io_uring_setup, 4, &p);
	if (r->fd < 0)
		return -1;
	r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	r->sq_map = ring_map(r->fd, r->sq_len, IORING_OFF_SQ_RING);
	r->cq_map = ring_map(r->fd, r->cq_len, IORING_OFF_CQ_RING);
	r->sqes = ring_map(r->fd, r->sqes_len, IORING_OFF_SQES);
	if (!r->sq_map || !r->cq_map || !r->sqes) {
		ring_exit(r);
		return -1;
	}
	sq = r->sq_map;
	cq = r->cq_map;
	r->sq_tail = (unsigned int *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned int *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned int *)(sq + p.sq_off.array);
	r->cq_head = (unsigned int *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned int *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned int *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/* Submit a read of @len bytes at @off of @fd (O_DIRECT); 1 if submitted. */
static int ring_read(struct ring *r, int fd, void *buf, unsigned int len,
		     uint64_t off)
{
	unsigned int tail = *r->sq_tail, idx = tail & *r->sq_mask;
	struct io_uring_sqe *sqe = &r->sqes[idx];

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_READ;
	sqe->fd = fd;
	sqe->addr = (uintptr_t)buf;
	sqe->len = len;
	sqe->off = off;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	return syscall(__NR_io_uring_enter, r->fd, 1, 0, 0, NULL, 0);
}

/*
 * Poll for a completion up to @ms; its result in *res.  0, or -1 if none
 * came (errno ETIMEDOUT).
 */
static int ring_reap(struct ring *r, long ms, int *res)
{
	long end = now_ms() + ms;
	unsigned int head;

	do {
		head = *r->cq_head;
		if (head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
			*res = r->cqes[head & *r->cq_mask].res;
			__atomic_store_n(r->cq_head, head + 1,
					 __ATOMIC_RELEASE);
			return 0;
		}
		syscall(__NR_io_uring_enter, r->fd, 0, 0,
			IORING_ENTER_GETEVENTS, NULL, 0);
	} while (now_ms() < end);
	errno = ETIMEDOUT;
	return -1;
}

/* ---- the checks ----------------------------------------------------------- */

/*
 * A device with poll queues: GET_INFO reports them, the disk polls, and
 * I/O that is not polled goes to the default queue as ever.
 */
void check_poll_queues(void)
{
	struct bius_device_params p;
	struct bius_device_info info;
	unsigned char *buf = xalloc(64 * KiB), *rd = xalloc(64 * KiB);
	struct tdev d;
	ssize_t n = -1, m = -1;
	int fd, r;

	watchdog("poll queues", 60);
	params_default(&p, "bi-poll");
	p.nr_hw_queues = 3;
	p.nr_poll_queues = 2;
	if (tdev_up(&d, &p, "device with poll queues comes up"))
		goto out;
	tdev_serve_in_threads(&d);
	r = get_info(d.ctl, d.id, &info);
	expect_true("GET_INFO reports the poll queues", r == 0 &&
		    info.params.nr_poll_queues == 2 &&
		    info.params.nr_hw_queues == 3 && !info.params.reserved0,
		    "r=%d nr_poll_queues=%u", r, info.params.nr_poll_queues);
	expect_true("sysfs: io_poll 1 with poll queues",
		    sysfs_is(d.name, "queue/io_poll", "1"), "io_poll is not 1");
	fill_pattern(buf, 64 * KiB, 17);
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd >= 0) {
		n = pwrite(fd, buf, 64 * KiB, 0);
		m = pread(fd, rd, 64 * KiB, 0);
		close(fd);
	}
	expect_true("I/O that is not polled, on a device with poll queues",
		    n == 64 * KiB && m == 64 * KiB && !memcmp(buf, rd, 64 * KiB),
		    "fd=%d write %zd read %zd", fd, n, m);
	r = do_destroy(d.ctl, d.id, 0);
	expect_true("destroy of the poll queue device", r == 0, "%s",
		    strerror(errno));
	tdev_join(&d, 10000);
out:
	tdev_free(&d);
	free(buf);
	free(rd);
}

/*
 * Submit a polled 4 KiB read at @off and answer it from the daemon side
 * with @pattern (without polling); 0 if it reached the poll queue (1) and
 * the completion was accepted.
 */
static int polled_read_answered(struct tdev *d, struct ring *r, int fd,
				void *io, uint64_t off, uint32_t pattern,
				uint64_t *id)
{
	unsigned char hdrbuf[HDR], data[4096];
	struct bius_request hdr;
	unsigned int qi = 0;
	ssize_t n;

	if (ring_read(r, fd, io, 4096, off) != 1)
		return -1;
	n = wait_requests(d, hdrbuf, HDR, &qi, 5000);
	if (n != HDR || qi != 1)
		return -1;
	memcpy(&hdr, hdrbuf, HDR);
	*id = hdr.id;
	fill_pattern(data, sizeof(data), pattern);
	return send_completion(d->srv[qi].fd, hdr.id, 0, data, 4096) ==
	       (ssize_t)(CMP + 4096) ? 0 : -1;
}

/* Does @io hold the 4 KiB of @pattern? */
static int holds(const void *io, uint32_t pattern)
{
	unsigned char want[4096];

	fill_pattern(want, sizeof(want), pattern);
	return !memcmp(io, want, sizeof(want));
}

void check_polled_lifecycle(void)
{
	struct bius_device_params p;
	unsigned char *io = xalloc(4096), *data = xalloc(4096);
	struct ring ring = { .fd = -1 };
	struct tdev d;
	uint64_t id = 0;
	int fd = -1, res = 0, ok1, r;
	long t0;

	watchdog("polled lifecycle", 90);
	params_default(&p, "bi-polled");
	p.nr_hw_queues = 2;
	p.nr_poll_queues = 1;
	p.timeout_ms = 1000;
	p.size = 1 * MiB;
	if (tdev_up(&d, &p, "polled device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDONLY | O_DIRECT);
	if (fd < 0 || ring_init(&ring)) {
		not_ok("polled device comes up", "open/io_uring_setup: %s",
		       strerror(errno));
		goto out_destroy;
	}
	ok("polled device comes up");

	/* completed, then polled: its data */
	ok1 = !polled_read_answered(&d, &ring, fd, io, 0, 31, &id);
	r = ring_reap(&ring, 5000, &res);
	expect_true("a polled read goes to the poll queue and ends when polled",
		    ok1 && r == 0 && res == 4096 && holds(io, 31),
		    "answered %d reap %d res %d", ok1, r, res);
	r = send_completion(d.srv[1].fd, id, 0, data, 4096);
	expect_errno("second completion of a polled request", r, errno,
		     ENOENT);

	/* completed, not polled until well past the request timeout */
	ok1 = !polled_read_answered(&d, &ring, fd, io, 4096, 32, &id);
	r = send_completion(d.srv[1].fd, id, 0, data, 4096);
	expect_errno("completion of a request waiting for its poller", r,
		     errno, ENOENT);
	t0 = now_ms();
	sleep_ms(3 * p.timeout_ms);
	r = ring_reap(&ring, 5000, &res);
	expect_true("a completed request not polled past the timeout ends with the daemon's result",
		    ok1 && r == 0 && res == 4096 && holds(io, 32),
		    "answered %d reap %d res %d after %ld ms", ok1, r, res,
		    now_ms() - t0);

	/* completed, not polled, then the daemon dies */
	ok1 = !polled_read_answered(&d, &ring, fd, io, 8192, 33, &id);
	tdev_close_fds(&d);
	r = ring_reap(&ring, 5000, &res);
	expect_true("a completed request not polled when the daemon dies ends with the daemon's result",
		    ok1 && r == 0 && res == 4096 && holds(io, 33),
		    "answered %d reap %d res %d", ok1, r, res);

	/* and a polled read on the dead disk (capacity 0: end of file) */
	r = ring_read(&ring, fd, io, 4096, 0);
	ok1 = r == 1 && !ring_reap(&ring, 5000, &res);
	expect_true("a polled read on a dead disk reads nothing",
		    (r == 1 && ok1 && res <= 0) || r < 0,
		    "submit %d reap %d res %d", r, ok1, res);
	goto out;

out_destroy:
	tdev_force_down(&d);
out:
	ring_exit(&ring);
	if (fd >= 0)
		close(fd);
	tdev_free(&d);
	free(io);
	free(data);
}
