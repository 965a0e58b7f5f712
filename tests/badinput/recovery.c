// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: recovery.  A device with recover_timeout_ms keeps its
 * disk when its daemon is lost: I/O waits, the lost fds go stale, a new
 * daemon recovers it (RECOVER_DEVICE and its refusals, CONNECT again),
 * requests the lost daemon held come back as replays; the timeout and
 * DESTROY end a held device.
 */

#include "badinput.h"

#define REC_TIMEOUT_MS	30000

/* Serve @d until @jobs are done and the device is LIVE; 0 if they are. */
int serve_until_live(struct tdev *d, struct io_job *jobs, unsigned int njobs,
		     long ms)
{
	struct pollfd pfd[MAX_QUEUES];
	long end = now_ms() + ms;
	unsigned int i, done;

	for (i = 0; i < d->nq; i++) {
		d->srv[i].in_payload = 0;	/* a new stream */
		pfd[i].fd = d->srv[i].fd;
		pfd[i].events = POLLIN;
	}
	while (now_ms() < end) {
		for (i = 0, done = 0; i < njobs; i++)
			done += jobs[i].done;
		if (done == njobs && state_of(d->ctl, d->id) == BIUS_STATE_LIVE)
			return 0;
		if (poll(pfd, d->nq, 20) > 0)
			for (i = 0; i < d->nq; i++)
				if (pfd[i].revents & POLLIN)
					srv_serve_once(&d->srv[i]);
	}
	return -1;
}

int recover(int fd, const struct bius_device_params *p)
{
	struct bius_device_params q = *p;

	return ioctl(fd, BIUS_IOC_RECOVER_DEVICE, &q);
}

/* Connect every queue of @d on new fds; 0 if all could be. */
int reconnect(struct tdev *d)
{
	unsigned int i;

	for (i = 0; i < d->nq; i++) {
		d->srv[i].fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);
		if (d->srv[i].fd < 0 || do_connect(d->srv[i].fd, d->id, i))
			return -1;
	}
	return 0;
}

/* RECOVER_DEVICE refusals on the held device @d with parameters @p. */
static void check_recover_refusals(const struct bius_device_params *p)
{
	struct bius_device_params bad;
	int ctl = ctl_open(), status = 0, r;
	pid_t pid;

	bad = *p;
	bad.size *= 2;
	r = recover(ctl, &bad);
	expect_errno("recover: another size", r, errno, EINVAL);
	bad = *p;
	bad.logical_block_size = 512;
	bad.physical_block_size = 512;
	r = recover(ctl, &bad);
	expect_errno("recover: another block size", r, errno, EINVAL);
	bad = *p;
	bad.nr_hw_queues = 1;
	r = recover(ctl, &bad);
	expect_errno("recover: another queue count", r, errno, EINVAL);
	bad = *p;
	bad.nr_poll_queues = 1;
	r = recover(ctl, &bad);
	expect_errno("recover: another poll queue count", r, errno, EINVAL);
	bad = *p;
	bad.features |= BIUS_FEATURE_ZONED;
	r = recover(ctl, &bad);
	expect_errno("recover: zoned parameters for a conventional device", r,
		     errno, EINVAL);
	bad = *p;
	bad.reserved[1] = 1;
	r = recover(ctl, &bad);
	expect_errno("recover: malformed parameters", r, errno, EINVAL);
	bad = *p;
	snprintf(bad.name, sizeof(bad.name), "bi-other");
	r = recover(ctl, &bad);
	expect_errno("recover: another name", r, errno, EINVAL);
	bad = *p;
	bad.dev_id = 0x7ffffff0;
	r = recover(ctl, &bad);
	expect_errno("recover: unknown device", r, errno, ENODEV);
	close(ctl);

	pid = fork();
	if (pid == 0) {
		int fd = open(CTL_PATH, O_RDWR);

		if (fd < 0 || drop_sys_admin())
			_exit(2);
		if (recover(fd, p) == 0)
			_exit(3);
		_exit(errno == EPERM ? 0 : 4);
	}
	expect_true("recover without CAP_SYS_ADMIN", pid > 0 &&
		    waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		    WEXITSTATUS(status) == 0, "child status %d", status);
}

/* The fd of a lost daemon: end of file, no completions, EPOLLHUP. */
static void check_stale_fd(int fd, const char *when)
{
	unsigned char buf[256];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char name[96];
	ssize_t n;
	int r;

	r = poll(&pfd, 1, 2000);
	n = read(fd, buf, sizeof(buf));
	snprintf(name, sizeof(name), "%s: lost fd sees EPOLLHUP and EOF",
		 when);
	expect_true(name, r == 1 && (pfd.revents & POLLHUP) && n == 0,
		    "poll=%d revents=%x read=%zd", r, pfd.revents, n);
	r = send_completion(fd, 1, 0, NULL, 0);
	snprintf(name, sizeof(name), "%s: lost fd cannot complete", when);
	expect_errno(name, r, errno, ENODEV);
}

/* A held device: state, disk kept, I/O waiting. */
static void check_held(struct tdev *d, struct io_job *jobs, unsigned int n,
		       const char *when)
{
	char name[96];
	unsigned int i, done = 0;
	int state;

	sleep_ms(500);
	state = state_of(d->ctl, d->id);
	for (i = 0; i < n; i++)
		done += jobs[i].done;
	snprintf(name, sizeof(name), "%s: RECOVERING, disk kept, I/O waits",
		 when);
	expect_true(name, state == BIUS_STATE_RECOVERING &&
		    sysfs_exists(d->name) && !done,
		    "state %d, disk %d, %u of %u I/Os done", state,
		    sysfs_exists(d->name), done, n);
}

void check_recovery(void)
{
	struct bius_device_params p;
	struct bius_device_info info;
	unsigned char *buf = xalloc(64 * KiB), *io = xalloc(64 * KiB);
	unsigned char *rd = xalloc(64 * KiB);
	struct io_job jobs[2], wr;
	unsigned int qi, i, replays = 0;
	int fd, old, ctl2, ctl3, r;
	struct tdev d;
	ssize_t n;

	watchdog("recovery", 150);
	params_default(&p, "bi-rec");
	p.nr_hw_queues = 2;
	p.size = 1 * MiB;
	p.recover_timeout_ms = REC_TIMEOUT_MS;
	if (tdev_up(&d, &p, "recoverable device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	fill_pattern(io, 64 * KiB, 21);
	io_start(&wr, fd, 1, io, 64 * KiB, 0, -1);
	if (fd < 0 || serve_until_live(&d, &wr, 1, 10000) || wr.ret != 64 * KiB) {
		not_ok("recoverable device comes up", "fd %d, write %zd (%s)",
		       fd, wr.ret, strerror(wr.err));
		goto out_destroy;
	}
	ok("recoverable device comes up");
	r = recover(d.ctl, &p);
	expect_errno("recover a live device", r, errno, EBUSY);

	/* a read in flight at the loss, then a write queued after it */
	io_start(&jobs[0], fd, 0, rd, 64 * KiB, 0, -1);
	n = wait_requests(&d, buf, 64 * KiB, &qi, 5000);
	close(d.srv[qi].fd);
	d.srv[qi].fd = -1;
	old = d.srv[qi ^ 1].fd;
	d.srv[qi ^ 1].fd = -1;
	io_start(&jobs[1], fd, 1, io, 4096, 128 * KiB, -1);
	expect_true("a read is in flight at the loss", n == HDR, "n=%zd", n);
	check_held(&d, jobs, 2, "queue fd closed");
	check_stale_fd(old, "held");

	if (get_info(d.ctl, d.id, &info)) {
		not_ok("recover", "GET_INFO: %s", strerror(errno));
		goto out_destroy;
	}
	p = info.params;
	p.name[0] = '\0';
	p.poll_usecs = 50;	/* may differ */
	check_recover_refusals(&p);

	/* a new daemon recovers, connects one queue and is lost too */
	ctl2 = ctl_open();
	r = recover(ctl2, &p);
	expect_true("recover the held device", r == 0, "%s", strerror(errno));
	ctl3 = ctl_open();
	r = recover(ctl3, &p);
	expect_errno("recover twice at once", r, errno, EBUSY);
	d.srv[0].fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);
	r = do_connect(d.srv[0].fd, d.id, 0);
	expect_true("connect a queue of the recovered device", r == 0, "%s",
		    strerror(errno));
	r = recover(d.srv[0].fd, &p);
	expect_errno("recover on a connected fd", r, errno, EISCONN);
	close(ctl2);
	check_held(&d, jobs, 2, "recovering daemon lost");
	check_stale_fd(d.srv[0].fd, "recovering daemon lost");
	close(d.srv[0].fd);
	d.srv[0].fd = -1;

	/* the third daemon brings it back */
	r = recover(ctl3, &p);
	expect_true("recover again after a lost recovery", r == 0, "%s",
		    strerror(errno));
	r = reconnect(&d);
	expect_true("connect every queue again", r == 0, "%s",
		    strerror(errno));
	r = serve_until_live(&d, jobs, 2, 20000);
	for (i = 0; i < d.nq; i++)
		replays += d.srv[i].replays;
	expect_true("held I/O completes after recovery, device LIVE",
		    r == 0 && jobs[0].ret == 64 * KiB && jobs[1].ret == 4096,
		    "read %zd (%s), write %zd (%s), state %d", jobs[0].ret,
		    strerror(jobs[0].err), jobs[1].ret, strerror(jobs[1].err),
		    state_of(d.ctl, d.id));
	r = get_info(d.ctl, d.id, &info);
	expect_true("the new daemon's poll_usecs applies",
		    r == 0 && info.params.poll_usecs == 50, "poll_usecs %u",
		    info.params.poll_usecs);
	expect_true("the in-flight read came back as a replay",
		    replays == 1, "%u replays", replays);
	expect_true("data written before the loss reads back",
		    !memcmp(rd, io, 64 * KiB), "mismatch");
	n = read(old, buf, 64 * KiB);
	expect_true("the lost fd stays stale after recovery", n == 0,
		    "read %zd", n);
	close(old);
	r = recover(ctl3, &p);
	expect_errno("recover a recovered device", r, errno, EBUSY);

	close(fd);
	tdev_destroy_served(&d, ctl3, "destroy the recovered device");
	close(ctl3);
	goto out;
out_destroy:
	tdev_force_down(&d);
out:
	tdev_free(&d);
	free(buf);
	free(io);
	free(rd);
}

void check_recovery_timeout(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(64 * KiB), *rd = xalloc(8192);
	struct io_job jobs[2];
	unsigned int qi;
	struct tdev d;
	long t0, end, held;
	int fd, r;

	watchdog("recovery timeout", 60);
	params_default(&p, "bi-rectmo");
	p.size = 1 * MiB;
	p.recover_timeout_ms = 2000;
	if (tdev_up(&d, &p, "recovery timeout: device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("recovery timeout: device comes up", "%s",
		       strerror(errno));
		do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
		goto out;
	}
	io_start(&jobs[0], fd, 0, rd, 4096, 0, -1);
	wait_requests(&d, buf, 64 * KiB, &qi, 5000);
	t0 = now_ms();
	tdev_close_fds(&d);
	close(d.ctl);
	d.ctl = ctl_open();
	io_start(&jobs[1], fd, 0, rd + 4096, 4096, 8192, -1);
	check_held(&d, jobs, 2, "daemon died");
	r = io_wait(&jobs[0], 10000) && io_wait(&jobs[1], 10000);
	held = now_ms() - t0;
	printf("# held I/O failed after %ld ms (timeout 2000 ms)\n", held);
	expect_true("held I/O fails with EIO at the recovery timeout",
		    r && jobs[0].ret < 0 && jobs[0].err == EIO &&
		    jobs[1].ret < 0 && jobs[1].err == EIO && held >= 1500 &&
		    held < 8000, "ret %zd/%zd errno %d/%d after %ld ms",
		    jobs[0].ret, jobs[1].ret, jobs[0].err, jobs[1].err, held);
	end = now_ms() + 10000;
	while (sysfs_exists(d.name) && now_ms() < end)
		sleep_ms(20);
	expect_true("the disk goes after the recovery timeout",
		    !sysfs_exists(d.name), "/sys/block/%s still there",
		    d.name);
	close(fd);
	end = now_ms() + 5000;
	while ((r = state_of(d.ctl, d.id)) != -ENODEV && now_ms() < end)
		sleep_ms(20);
	expect_true("the timed-out device is freed", r == -ENODEV,
		    "state %d", r);
out:
	tdev_free(&d);
	free(buf);
	free(rd);
}

void check_recovery_destroy(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(64 * KiB), *rd = xalloc(4096);
	struct io_job job;
	unsigned int qi;
	struct tdev d;
	long t0;
	int fd, r;

	watchdog("recovery destroy", 60);
	params_default(&p, "bi-recdes");
	p.size = 1 * MiB;
	p.recover_timeout_ms = REC_TIMEOUT_MS;
	if (tdev_up(&d, &p, "destroy while held: device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("destroy while held: device comes up", "%s",
		       strerror(errno));
		do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
		goto out;
	}
	io_start(&job, fd, 0, rd, 4096, 0, -1);
	wait_requests(&d, buf, 64 * KiB, &qi, 5000);
	/* the queue fd goes, the creating fd stays: it is no owner now */
	tdev_close_fds(&d);
	check_held(&d, &job, 1, "destroy while held");
	r = do_destroy(d.ctl, d.id, 0);
	expect_errno("destroy of a held device with its disk open", r, errno,
		     EBUSY);
	t0 = now_ms();
	r = do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	expect_true("forced destroy of a held device fails its I/O at once",
		    r == 0 && io_wait(&job, 5000) && job.ret < 0 &&
		    job.err == EIO && now_ms() - t0 < 5000,
		    "destroy %d, ret %zd errno %d after %ld ms", r, job.ret,
		    job.err, now_ms() - t0);
	close(fd);
out:
	tdev_free(&d);
	free(buf);
	free(rd);
}

void check_zoned_recovery(void)
{
	struct bius_device_params p, bad;
	struct bius_device_info info;
	struct zmodel zm;
	struct tdev d;
	int ctl, r, reports;

	watchdog("zoned recovery", 90);
	params_zoned(&p, "bi-zrec");
	p.recover_timeout_ms = REC_TIMEOUT_MS;
	zm_init(&zm, &p);
	if (tdev_create(&d, &p, &zm, "zoned recovery: device comes up") ||
	    tdev_wait_live(&d, "zoned recovery: device comes up"))
		goto out_destroy;
	ok("zoned recovery: device comes up");
	reports = zm.reports;

	tdev_close_fds(&d);
	check_held(&d, NULL, 0, "zoned daemon lost");
	if (get_info(d.ctl, d.id, &info)) {
		not_ok("zoned recovery", "GET_INFO: %s", strerror(errno));
		goto out_destroy;
	}
	ctl = ctl_open();
	bad = info.params;
	bad.zoned.zone_size *= 2;
	r = recover(ctl, &bad);
	expect_errno("recover: another zone size", r, errno, EINVAL);
	bad = info.params;
	bad.zoned.nr_conv_zones = 1;
	r = recover(ctl, &bad);
	expect_errno("recover: other conventional zones", r, errno, EINVAL);
	r = recover(ctl, &info.params);
	expect_true("recover the zoned device", r == 0, "%s", strerror(errno));
	r = reconnect(&d) || serve_until_live(&d, NULL, 0, 20000);
	expect_true("zoned device LIVE again, its zones read again",
		    r == 0 && zm.reports > reports, "r=%d, %d reports before, %d after",
		    r, reports, zm.reports);
	tdev_destroy_served(&d, ctl, "zoned recovery: destroy");
	close(ctl);
	goto out;
out_destroy:
	tdev_force_down(&d);
out:
	tdev_free(&d);
}

#define MAP_ROUNDS	16

/* MemAvailable of the guest in KiB, or -1. */
static long mem_available_kib(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	long kib = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

/* mmap() of a queue's window, started @delay_us after go. */
struct map_racer {
	struct srv *s;
	size_t len;
	long delay_us;
	atomic_int go;
	int ret;
	pthread_t thread;
};

static void *map_racer(void *arg)
{
	struct map_racer *m = arg;

	while (!m->go)
		;
	usleep(m->delay_us);
	m->ret = srv_map(m->s, m->len);
	return NULL;
}

static int wait_live(struct tdev *d, long ms)
{
	long end = now_ms() + ms;

	while (state_of(d->ctl, d->id) != BIUS_STATE_LIVE)
		if (now_ms() > end)
			return -1;
		else
			sleep_ms(5);
	return 0;
}

/*
 * Lose the daemon by closing queue @lost's fd (its window unmapped) while
 * queue @lost ^ 1, with no window yet, mmap()s one @delay_us later; recover
 * on a new control fd (*@ctl) and map queue @lost ^ 1 anew (*@map_err: 0 or
 * the errno).  Returns 0, or the errno of the step that failed; *@close_us:
 * how long the close took.
 */
static int lose_and_remap(struct tdev *d, unsigned int lost,
			  const struct bius_device_params *p, int *ctl,
			  long delay_us, long *close_us, int *map_err)
{
	struct srv *racing = &d->srv[lost ^ 1];
	struct map_racer m = { .s = racing, .len = d->srv[0].win_len,
			       .delay_us = delay_us };
	long t;

	*map_err = 0;
	if (pthread_create(&m.thread, NULL, map_racer, &m))
		return errno;
	if (d->srv[lost].win)
		munmap(d->srv[lost].win, m.len);
	d->srv[lost].win = NULL;
	t = now_us();
	m.go = 1;
	close(d->srv[lost].fd);
	*close_us = now_us() - t;
	pthread_join(m.thread, NULL);
	d->srv[lost].fd = -1;
	tdev_close_fds(d);	/* and the window the racer may have got */
	close(*ctl);
	*ctl = ctl_open();
	if (recover(*ctl, p) || reconnect(d))
		return errno;
	*map_err = srv_map(racing, m.len) ? errno : 0;
	return wait_live(d, 5000) ? ETIMEDOUT : 0;
}

/*
 * Lost again and again, each loss racing an mmap() of the other queue's
 * window: the new daemon can always map that queue (a window the loss
 * retired is never installed after), and the windows the lost daemons
 * unmapped are freed, not kept until DESTROY.
 */
static void check_map_recovery_rounds(void)
{
	struct bius_device_params p;
	struct bius_device_info info;
	long before = -1, grown, window_kib, close_us = 20000;
	unsigned int i, lost, busy = 0;
	int ctl = -1, r = 0, map_err;
	struct tdev d;

	watchdog("map recovery rounds", 120);
	params_default(&p, "bi-maprounds");
	p.size = 1 * MiB;
	p.nr_hw_queues = 2;
	p.queue_depth = 2048;
	p.transfer_mode = BIUS_TRANSFER_MAP;
	p.recover_timeout_ms = REC_TIMEOUT_MS;
	if (tdev_create(&d, &p, NULL, "map recovery rounds: device comes up") ||
	    get_info(d.ctl, d.id, &info) ||
	    srv_map(&d.srv[0], info.map_window_bytes) ||
	    tdev_wait_live(&d, "map recovery rounds: device comes up")) {
		tdev_force_down(&d);
		tdev_free(&d);
		return;
	}
	d.srv[1].win_len = info.map_window_bytes;	/* for both queues */
	ctl = dup(d.ctl);
	window_kib = (long)p.queue_depth * BIUS_MAP_SPARE_PAGES *
		     (sysconf(_SC_PAGESIZE) / 1024);
	for (i = 0; i < MAP_ROUNDS && !r; i++) {
		lost = !d.srv[0].win;
		r = lose_and_remap(&d, lost, &info.params, &ctl,
				   close_us * i / MAP_ROUNDS, &close_us,
				   &map_err);
		busy += map_err != 0;
		if (!i)
			before = mem_available_kib();
	}
	expect_true("map recovery rounds: lost and recovered", r == 0,
		    "round %u: %s", i - 1, strerror(r));
	expect_true("map recovery rounds: mmap() racing a loss never keeps the new daemon's window out",
		    !busy, "the new daemon could not map in %u of %u rounds",
		    busy, i);
	grown = before - mem_available_kib();
	expect_true("map recovery rounds: unmapped windows of lost daemons are freed",
		    before > 0 && grown < 2 * window_kib,
		    "%ld KiB more in use after %u rounds (a window: %ld KiB)",
		    grown, i - 1, window_kib);
	tdev_destroy_served(&d, ctl, "map recovery rounds: destroy");
	close(ctl);
	tdev_free(&d);
}

/* Map mode: the lost daemon's window is retired, the new one maps anew. */
void check_map_recovery(void)
{
	struct bius_device_params p;
	struct bius_device_info info;
	unsigned char *buf = xalloc(64 * KiB), *io = xalloc(64 * KiB);
	unsigned char *rd = xalloc(64 * KiB), *old_win;
	struct bius_request hdr;
	struct io_job job;
	unsigned int qi;
	struct tdev d;
	int ctl, old_fd, r;
	void *w;
	ssize_t n;

	watchdog("map recovery", 90);
	params_default(&p, "bi-maprec");
	p.size = 1 * MiB;
	p.nr_hw_queues = 2;
	p.transfer_mode = BIUS_TRANSFER_MAP;
	p.recover_timeout_ms = REC_TIMEOUT_MS;
	if (tdev_create(&d, &p, NULL, "map recovery: device comes up") ||
	    get_info(d.ctl, d.id, &info) ||
	    srv_map(&d.srv[0], info.map_window_bytes) ||
	    srv_map(&d.srv[1], info.map_window_bytes) ||
	    tdev_wait_live(&d, "map recovery: device comes up"))
		goto out_destroy;
	r = disk_open(d.name, O_RDWR | O_DIRECT);
	fill_pattern(io, 64 * KiB, 33);
	io_start(&job, r, 1, io, 64 * KiB, 0, -1);
	if (r < 0 || serve_until_live(&d, &job, 1, 10000) || job.ret != 64 * KiB) {
		not_ok("map recovery: device comes up", "write %zd", job.ret);
		goto out_destroy;
	}
	ok("map recovery: device comes up");

	io_start(&job, r, 0, rd, 64 * KiB, 0, -1);
	n = wait_requests(&d, buf, 64 * KiB, &qi, 5000);
	memcpy(&hdr, buf, HDR);
	expect_true("map recovery: a mapped read in flight at the loss",
		    n == HDR && (hdr.flags & BIUS_REQ_MAPPED), "n=%zd flags=%x",
		    n, hdr.flags);
	/* the other queue is lost; this one's fd and window go stale */
	old_fd = d.srv[qi].fd;
	old_win = d.srv[qi].win;
	d.srv[qi].fd = -1;
	d.srv[qi].win = NULL;
	munmap(d.srv[qi ^ 1].win, info.map_window_bytes);
	d.srv[qi ^ 1].win = NULL;
	close(d.srv[qi ^ 1].fd);
	d.srv[qi ^ 1].fd = -1;
	r = state_of(d.ctl, d.id);
	expect_true("map recovery: held", r == BIUS_STATE_RECOVERING,
		    "state %d", r);
	/* the stale daemon may still be writing its read's range: no fault */
	memset(old_win + hdr.window_offset, 0xa5, hdr.len);
	ok("map recovery: the stale window can still be written");
	w = mmap(NULL, info.map_window_bytes, PROT_READ | PROT_WRITE,
		 MAP_SHARED, old_fd, 0);
	expect_errno("map recovery: mmap on a stale fd",
		     w == MAP_FAILED ? -1 : 0, errno, ENODEV);

	ctl = ctl_open();
	r = recover(ctl, &info.params);
	expect_true("map recovery: recover", r == 0, "%s", strerror(errno));
	r = reconnect(&d) || srv_map(&d.srv[0], info.map_window_bytes) ||
	    srv_map(&d.srv[1], info.map_window_bytes);
	expect_true("map recovery: the new connection maps a new window",
		    r == 0, "%s", strerror(errno));
	r = serve_until_live(&d, &job, 1, 20000);
	expect_true("map recovery: the held read completes with the data",
		    r == 0 && job.ret == 64 * KiB && !memcmp(rd, io, 64 * KiB) &&
		    d.srv[0].replays + d.srv[1].replays == 1,
		    "ret %zd, %d replays", job.ret,
		    (int)(d.srv[0].replays + d.srv[1].replays));
	munmap(old_win, info.map_window_bytes);
	close(old_fd);
	close(job.fd);
	tdev_destroy_served(&d, ctl, "map recovery: destroy");
	close(ctl);
	check_map_recovery_rounds();
	goto out;
out_destroy:
	tdev_force_down(&d);
out:
	tdev_free(&d);
	free(buf);
	free(io);
	free(rd);
}
