// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: device lifecycle checks: the request timeout, a device
 * killed by closing a queue fd or the creating fd, DESTROY as soon as LIVE.
 */

#include "badinput.h"

void check_timeout(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(64 * KiB), *io = xalloc(64 * KiB);
	struct bius_request hdr;
	struct io_job job;
	unsigned int qi;
	struct tdev d;
	long t0;
	ssize_t n, r;
	int fd;

	watchdog("timeout", 90);
	params_default(&p, "bi-tmo");
	p.timeout_ms = 1000;
	p.size = 1 * MiB;
	if (tdev_up(&d, &p, "timeout device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("timeout device comes up", "open: %s", strerror(errno));
		goto out_destroy;
	}
	ok("timeout device comes up");

	/* delivered but never answered */
	t0 = now_ms();
	io_start(&job, fd, 0, io, 4096, 0, -1);
	n = wait_requests(&d, buf, 64 * KiB, &qi, 5000);
	memcpy(&hdr, buf, HDR);
	expect_true("unanswered request fails within seconds",
		    n == HDR && io_wait(&job, 10000) && job.ret < 0,
		    "n=%zd ret=%zd done=%d", n, job.ret, (int)job.done);
	printf("# timed out after %ld ms with errno %d (%s)\n",
	       now_ms() - t0, job.err, strerror(job.err));
	r = send_completion(d.srv[qi].fd, hdr.id, 0, io, 4096);
	expect_errno("late completion after timeout", r, errno, ENOENT);

	/* never even read */
	io_start(&job, fd, 0, io, 4096, 4096, -1);
	expect_true("unread request fails within seconds",
		    io_wait(&job, 10000) && job.ret < 0, "ret=%zd", job.ret);
	fcntl(d.srv[0].fd, F_SETFL, O_NONBLOCK);
	r = read(d.srv[0].fd, buf, 64 * KiB);
	expect_errno("timed-out request is no longer queued", r, errno,
		     EAGAIN);

	/* a write left half delivered: the rest comes as zeroes */
	fill_pattern(io, 64 * KiB, 11);
	io_start(&job, fd, 1, io, 64 * KiB, 0, -1);
	fcntl(d.srv[0].fd, F_SETFL, 0);
	n = wait_requests(&d, buf, 4096, &qi, 5000);
	memcpy(&hdr, buf, HDR);
	expect_true("partly delivered request times out",
		    n == 4096 && hdr.op == BIUS_OP_WRITE &&
		    hdr.len == 64 * KiB && io_wait(&job, 10000) && job.ret < 0,
		    "n=%zd op=%u len=%u ret=%zd", n, hdr.op, hdr.len, job.ret);
	{
		size_t rest = 0, zero = 1, i;

		fcntl(d.srv[0].fd, F_SETFL, O_NONBLOCK);
		while ((r = read(d.srv[0].fd, buf, 16 * KiB)) > 0) {
			for (i = 0; i < (size_t)r; i++)
				zero &= buf[i] == 0;
			rest += r;
		}
		expect_true("its payload is completed with zeroes",
			    rest == 64 * KiB - (4096 - HDR) && zero &&
			    r < 0 && errno == EAGAIN,
			    "got %zu bytes (want %zu), zero=%zu, last r=%zd",
			    rest, (size_t)(64 * KiB - (4096 - HDR)), zero, r);
		fcntl(d.srv[0].fd, F_SETFL, 0);
	}
	r = send_completion(d.srv[0].fd, hdr.id, 0, NULL, 0);
	expect_errno("completion of the timed-out partial request", r, errno,
		     ENOENT);
	close(fd);
out_destroy:
	/* the daemon side is not served here: force it */
	do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
out:
	tdev_free(&d);
	free(buf);
	free(io);
}

/* Closing a queue fd of a live device kills it. */
void check_kill_on_close(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(64 * KiB), *io = xalloc(64 * KiB);
	struct io_job job, job2;
	struct pollfd pfd;
	unsigned int qi;
	struct tdev d;
	long t0, end;
	ssize_t n;
	int fd, r;

	watchdog("kill on close", 90);
	params_default(&p, "bi-kill");
	p.nr_hw_queues = 2;
	p.size = 1 * MiB;
	if (tdev_up(&d, &p, "kill device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("kill device comes up", "open: %s", strerror(errno));
		do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
		goto out;
	}
	ok("kill device comes up");

	io_start(&job, fd, 0, io, 4096, 0, 0);
	n = wait_requests(&d, buf, 64 * KiB, &qi, 5000);
	io_start(&job2, fd, 0, io + 8192, 4096, 8192, 1);
	sleep_ms(200);
	t0 = now_ms();
	close(d.srv[qi].fd);
	d.srv[qi].fd = -1;
	expect_true("in-flight I/O fails with EIO when a queue fd closes",
		    n == HDR && io_wait(&job, 10000) && job.ret < 0 &&
		    job.err == EIO, "n=%zd ret=%zd err=%d after %ld ms", n,
		    job.ret, job.err, now_ms() - t0);
	expect_true("queued I/O fails too", io_wait(&job2, 10000) &&
		    job2.ret < 0, "ret=%zd", job2.ret);
	pfd.fd = d.srv[qi ^ 1].fd;
	pfd.events = POLLIN;
	r = poll(&pfd, 1, 5000);
	n = read(d.srv[qi ^ 1].fd, buf, 64 * KiB);
	expect_true("the other queue sees EPOLLHUP and end of file",
		    r == 1 && (pfd.revents & POLLHUP) && n == 0,
		    "poll=%d revents=%x read=%zd", r, pfd.revents, n);
	end = now_ms() + 10000;
	while (sysfs_exists(d.name) && now_ms() < end)
		sleep_ms(20);
	expect_true("disk removed after a queue fd closed",
		    !sysfs_exists(d.name), "/sys/block/%s still there",
		    d.name);
	n = pread(fd, io, 4096, 0);
	expect_true("new I/O on the dead disk fails", n <= 0, "n=%zd", n);
	close(fd);
	end = now_ms() + 5000;
	while (state_of(d.ctl, d.id) != BIUS_STATE_DEAD && now_ms() < end)
		sleep_ms(20);
	r = state_of(d.ctl, d.id);
	expect_true("killed device is DEAD", r == BIUS_STATE_DEAD,
		    "state %d", r);
	r = do_destroy(d.ctl, d.id, 0);
	expect_errno("DESTROY of a killed device", r, errno, ENODEV);
	{
		uint32_t id = d.id;
		int ctl;

		tdev_free(&d);
		ctl = ctl_open();
		r = state_of(ctl, id);
		expect_true("killed device freed once all fds closed",
			    r == -ENODEV, "state %d", r);
		close(ctl);
	}
out:
	tdev_free(&d);
	free(buf);
	free(io);
}

/* Closing the creating fd kills the device too. */
void check_owner_close(void)
{
	struct bius_device_params p;
	unsigned char buf[256];
	int ctl = ctl_open(), q = open(CTL_PATH, O_RDWR), r;
	ssize_t n;

	watchdog("owner close", 30);
	params_default(&p, "bi-own");
	if (ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p) ||
	    do_connect(q, p.dev_id, 0)) {
		not_ok("closing the creating fd kills the device", "%s",
		       strerror(errno));
		close(ctl);
		close(q);
		return;
	}
	/* The device is LIVE-bound now; partition scan needs serving: do not
	 * serve, close the owner instead.
	 */
	close(ctl);
	n = read(q, buf, sizeof(buf));
	while (n > 0)
		n = read(q, buf, sizeof(buf));
	expect_true("closing the creating fd kills the device", n == 0,
		    "read returned %zd (%s)", n, strerror(errno));
	close(q);
	ctl = ctl_open();
	r = 0;
	{
		long end = now_ms() + 5000;

		while ((r = state_of(ctl, p.dev_id)) != -ENODEV &&
		       now_ms() < end)
			sleep_ms(20);
	}
	expect_true("killed device is freed", r == -ENODEV, "state %d", r);
	close(ctl);
}

/*
 * DESTROY right after the device is LIVE, nothing opened: never EBUSY.  On
 * 6.12 add_disk() scans the partitions through a file whose release, put
 * from a kworker, is only queued (delayed fput): the disk looked open.
 */
void check_destroy_when_live(void)
{
	struct bius_device_params p;
	unsigned int i, busy = 0;
	struct tdev d;
	int r;

	watchdog("destroy when live", 120);
	for (i = 0; i < 10; i++) {
		params_default(&p, "bi-atonce");
		if (tdev_up(&d, &p, "destroy when live: device comes up")) {
			tdev_force_down(&d);
			tdev_free(&d);
			return;
		}
		tdev_serve_in_threads(&d);
		r = do_destroy(d.ctl, d.id, 0);
		if (r && errno == EBUSY)
			busy++;
		if (r)
			do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
		tdev_join(&d, 10000);
		tdev_free(&d);
	}
	expect_true("destroy when live: never EBUSY with the disk closed",
		    busy == 0, "EBUSY in %u of 10 rounds", busy);
}

static void *rrpart_thread(void *arg)
{
	struct io_job *j = arg;

	j->ret = ioctl(j->fd, BLKRRPART, 0);
	j->err = errno;
	j->done = 1;
	return NULL;
}

/* The request timeout of the scanned disks, in ms. */
#define SCAN_TIMEOUT_MS 1000

/* A daemon serving nothing, its disk scanned (stuck_daemon_scanned()). */
struct scanned {
	pid_t daemon;		/* -1: it did not come up */
	int fd;			/* the disk, open here */
	uint32_t id;
	struct io_job scan;	/* the BLKRRPART */
};

/*
 * A daemon of a 1 MiB disk @name (in a child) that has its own disk open
 * and then serves nothing, and a partition scan (BLKRRPART) from here
 * whose reads wait for it, holding the disk's open_mutex.
 */
static void stuck_daemon_scanned(const char *name, const char *check,
				 struct scanned *s)
{
	struct { char name[BIUS_NAME_LEN]; uint32_t id; } up;
	struct bius_device_params p;
	int ready[2];

	memset(s, 0, sizeof(*s));
	s->daemon = -1;
	s->fd = -1;
	params_default(&p, name);
	p.size = 1 * MiB;
	p.timeout_ms = SCAN_TIMEOUT_MS;
	if (pipe(ready))
		return;
	s->daemon = fork();
	if (s->daemon == 0) {
		struct tdev d;

		close(ready[0]);
		if (tdev_up(&d, &p, check))
			_exit(1);
		memcpy(up.name, d.name, sizeof(up.name));
		up.id = d.id;
		/* opened last: released first */
		if (disk_open(d.name, O_RDONLY) < 0 ||
		    write(ready[1], &up, sizeof(up)) != sizeof(up))
			_exit(1);
		pause();	/* serves no more */
		_exit(0);
	}
	close(ready[1]);
	if (read(ready[0], &up, sizeof(up)) != sizeof(up) ||
	    (s->fd = disk_open(up.name, O_RDONLY)) < 0) {
		not_ok(check, "the daemon's device did not come up");
		goto fail;
	}
	s->scan.fd = s->fd;
	if (pthread_create(&s->scan.thread, NULL, rrpart_thread, &s->scan))
		goto fail;
	close(ready[0]);
	s->id = up.id;
	sleep_ms(300);	/* the scan's first read is with the daemon */
	return;
fail:
	kill(s->daemon, SIGKILL);
	waitpid(s->daemon, NULL, 0);
	s->daemon = -1;
	close(ready[0]);
}

/*
 * A daemon that has its own disk open dies while a partition scan holds
 * the disk's open_mutex and waits for the daemon's reads.  Its exit
 * releases the disk before its queue fds (files go in reverse order of
 * their fds), and that release waits for the open_mutex; the daemon gone,
 * the first read that times out loses it, so the rest fail at once: the
 * scan and the exit end within a few request timeouts, not one per read
 * of every partition parser.
 */
void check_dying_daemon_disk_open(void)
{
	const char *check = "a daemon dying with its disk open ends with its first timeout";
	struct scanned s;
	long t0, took = -1;

	watchdog("dying daemon with its disk open", 120);
	stuck_daemon_scanned("bi-dying", check, &s);
	if (s.daemon < 0)
		goto out;
	t0 = now_ms();
	kill(s.daemon, SIGKILL);
	if (waitpid(s.daemon, NULL, 0) == s.daemon)
		took = now_ms() - t0;
	expect_true(check, took >= 0 && took < 6 * SCAN_TIMEOUT_MS &&
		    io_wait(&s.scan, 6 * SCAN_TIMEOUT_MS),
		    "the daemon's exit took %ld ms (request timeout %u ms)",
		    took, SCAN_TIMEOUT_MS);
out:
	if (s.fd >= 0)
		close(s.fd);
}

/*
 * The same scan with the daemon alive but serving nothing, and a forced
 * DESTROY: the removal waits for the open_mutex the scan holds, and the
 * scan a timeout per read; once a request times out during the removal,
 * the rest fail at once, so DESTROY returns within a few request timeouts
 * (it took one per read of every partition parser, past the hung-task
 * timeout: found by bius_fuzz, seed 5, on 6.1).
 */
void check_destroy_stuck_daemon(void)
{
	const char *check = "a forced DESTROY of a disk whose daemon serves nothing ends with its first timeout";
	struct scanned s;
	int ctl = ctl_open(), r;
	long t0, took;

	watchdog("destroy with a stuck daemon", 120);
	stuck_daemon_scanned("bi-stuckd", check, &s);
	if (s.daemon < 0)
		goto out;
	t0 = now_ms();
	r = do_destroy(ctl, s.id, BIUS_DESTROY_FORCE);
	took = now_ms() - t0;
	expect_true(check, r == 0 && took < 4 * SCAN_TIMEOUT_MS &&
		    io_wait(&s.scan, 4 * SCAN_TIMEOUT_MS),
		    "DESTROY returned %d (%s) after %ld ms (request timeout %u ms)",
		    r, r ? strerror(errno) : "ok", took, SCAN_TIMEOUT_MS);
	kill(s.daemon, SIGKILL);
	waitpid(s.daemon, NULL, 0);
out:
	if (s.fd >= 0)
		close(s.fd);
	close(ctl);
}
