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

#include "badinput.h"
#include "bius_uring.h"

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

	if (ring_rw(r, IORING_OP_READ, fd, io, 4096, off) != 1)
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
	if (fd < 0 || ring_init(&ring, IORING_SETUP_IOPOLL)) {
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
	r = ring_rw(&ring, IORING_OP_READ, fd, io, 4096, 0);
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
