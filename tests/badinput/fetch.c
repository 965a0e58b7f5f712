// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: BIUS_IOC_COMPLETE_FETCH, write() then read() in one call:
 * its refusals, the completions it takes before it reads, and what it
 * reports (completed) when a completion is refused, when it would block
 * and when a signal ends it.
 */

#include "badinput.h"

#define BAD_KERNEL_PTR	0xffff800000000000ULL	/* never user memory */

/* ioctl(BIUS_IOC_COMPLETE_FETCH); *completed: what it reported (or ~0). */
static ssize_t complete_fetch(int fd, const void *comps, uint32_t comps_len,
			      void *reqs, uint32_t reqs_len,
			      uint32_t *completed)
{
	struct bius_complete_fetch cf = {
		.completions = (uintptr_t)comps,
		.completions_len = comps_len,
		.requests = (uintptr_t)reqs,
		.requests_len = reqs_len,
		.completed = ~0u,
	};
	int ret = ioctl(fd, BIUS_IOC_COMPLETE_FETCH, &cf);

	*completed = cf.completed;
	return ret;
}

/* A read completion record of @id with its 4 KiB payload @data, at @rec. */
static uint32_t read_completion(unsigned char *rec, uint64_t id,
				const unsigned char *data)
{
	struct bius_completion c = { .id = id, .len = 4096 };

	memcpy(rec, &c, CMP);
	memcpy(rec + CMP, data, 4096);
	return CMP + 4096;
}

static void on_usr1(int sig)
{
	(void)sig;
}

/*
 * Signals @target after 300 ms, first destroying device @id gracefully if
 * @ctl is set (its result in @destroy_err); then, if @job is set, starts
 * its I/O.
 */
struct kicker {
	pthread_t target;
	struct io_job *job;
	int fd;
	void *buf;
	int ctl;		/* -1: no destroy */
	uint32_t id;
	int destroy_err;	/* 0, or DESTROY's errno */
	pthread_t thread;
};

static void *kicker_run(void *arg)
{
	struct kicker *k = arg;

	sleep_ms(300);
	if (k->ctl >= 0)
		k->destroy_err = do_destroy(k->ctl, k->id, 0) ? errno : 0;
	pthread_kill(k->target, SIGUSR1);
	if (k->job) {
		sleep_ms(300);
		io_start(k->job, k->fd, 0, k->buf, 4096, 0, 0);
	}
	return NULL;
}

static void kick_start(struct kicker *k)
{
	k->target = pthread_self();
	pthread_create(&k->thread, NULL, kicker_run, k);
}

static void kick(struct kicker *k, struct io_job *job, int fd, void *buf)
{
	*k = (struct kicker){ .job = job, .fd = fd, .buf = buf, .ctl = -1 };
	kick_start(k);
}

/* kick(), destroying device @id through @ctl before the signal. */
static void kick_destroying(struct kicker *k, int ctl, uint32_t id)
{
	*k = (struct kicker){ .ctl = ctl, .id = id, .destroy_err = -1 };
	kick_start(k);
}

/* The refusals that come before anything is taken. */
static void check_cf_refusals(struct tdev *d, unsigned char *buf)
{
	struct bius_complete_fetch cf = { 0 };
	uint32_t done;
	int fd, r;

	fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);
	r = complete_fetch(fd, NULL, 0, buf, 4096, &done);
	expect_errno("COMPLETE_FETCH on an unconnected fd", r, errno,
		     ENOTCONN);
	close(fd);
	fd = open(CTL_PATH, O_RDONLY | O_CLOEXEC);
	r = complete_fetch(fd, NULL, 0, buf, 4096, &done);
	expect_errno("COMPLETE_FETCH on a read-only fd", r, errno, EBADF);
	close(fd);

	fd = d->srv[0].fd;
	r = ioctl(fd, BIUS_IOC_COMPLETE_FETCH, (void *)8);
	expect_errno("COMPLETE_FETCH with a bad argument pointer", r, errno,
		     EFAULT);
	cf.requests = (uintptr_t)buf;
	cf.requests_len = 4096;
	cf.flags = 1;
	r = ioctl(fd, BIUS_IOC_COMPLETE_FETCH, &cf);
	expect_errno("COMPLETE_FETCH with flags set", r, errno, EINVAL);
	cf.flags = 0;
	cf.reserved = 1;
	r = ioctl(fd, BIUS_IOC_COMPLETE_FETCH, &cf);
	expect_errno("COMPLETE_FETCH with reserved set", r, errno, EINVAL);
	r = complete_fetch(fd, NULL, 0, buf, HDR - 1, &done);
	expect_errno("COMPLETE_FETCH with room for less than a header", r,
		     errno, EINVAL);
	r = complete_fetch(fd, NULL, 0, (void *)BAD_KERNEL_PTR, 4096, &done);
	expect_true("COMPLETE_FETCH into a kernel address: EFAULT",
		    r == -1 && errno == EFAULT && done == 0,
		    "r=%d (%s) completed=%u", r, strerror(errno), done);
	r = complete_fetch(fd, (void *)BAD_KERNEL_PTR, CMP, buf, 4096, &done);
	expect_true("COMPLETE_FETCH of completions at a kernel address: EFAULT",
		    r == -1 && errno == EFAULT && done == 0,
		    "r=%d (%s) completed=%u", r, strerror(errno), done);
	r = complete_fetch(fd, (void *)8, CMP, buf, 4096, &done);
	expect_true("COMPLETE_FETCH of unmapped completions: EFAULT",
		    r == -1 && errno == EFAULT && done == 0,
		    "r=%d (%s) completed=%u", r, strerror(errno), done);
}

/* Completions taken, then a signal or O_NONBLOCK ends the read. */
static void check_cf_interrupted(struct tdev *d, int disk, unsigned char *buf,
				 unsigned char *io, unsigned char *pat)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	struct sigaction old;
	struct bius_request hdr;
	struct io_job job[2];
	struct kicker k;
	int fd = d->srv[0].fd, flags;
	uint32_t len, done;
	ssize_t r;

	sigaction(SIGUSR1, &sa, &old);
	io_start(&job[0], disk, 0, io, 4096, 8192, 0);
	r = complete_fetch(fd, NULL, 0, buf, 4096, &done);
	memcpy(&hdr, buf, HDR);
	len = read_completion(buf, hdr.id, pat);
	kick(&k, NULL, -1, NULL);
	r = r == (ssize_t)HDR ? complete_fetch(fd, buf, len, buf + len, 4096,
					      &done) : -1;
	pthread_join(k.thread, NULL);
	expect_true("a signal after completions were taken: EINTR, completed",
		    r == -1 && errno == EINTR && done == len &&
		    io_wait(&job[0], 5000) && job[0].ret == 4096,
		    "r=%zd (%s) completed=%u io=%zd", r, strerror(errno), done,
		    job[0].ret);

	/* No completions: restarted (SA_RESTART) as read() is. */
	kick(&k, &job[1], disk, io);
	r = complete_fetch(fd, NULL, 0, buf, 4096, &done);
	pthread_join(k.thread, NULL);
	memcpy(&hdr, buf, HDR);
	expect_true("a signal before anything was taken restarts the call",
		    r == (ssize_t)HDR && done == 0 && hdr.op == BIUS_OP_READ,
		    "r=%zd (%s) completed=%u", r, strerror(errno), done);
	sigaction(SIGUSR1, &old, NULL);

	flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	len = read_completion(buf, hdr.id, pat);
	r = complete_fetch(fd, buf, len, buf + len, 4096, &done);
	expect_true("O_NONBLOCK: completions taken, then EAGAIN",
		    r == -1 && errno == EAGAIN && done == len &&
		    io_wait(&job[1], 5000) && job[1].ret == 4096,
		    "r=%zd (%s) completed=%u io=%zd", r, strerror(errno), done,
		    job[1].ret);
	r = complete_fetch(fd, NULL, 0, buf, 4096, &done);
	expect_true("O_NONBLOCK, nothing to complete or fetch: EAGAIN",
		    r == -1 && errno == EAGAIN && done == 0,
		    "r=%zd (%s) completed=%u", r, strerror(errno), done);
	fcntl(fd, F_SETFL, flags);
}

/* The round trip, refused completions, and a stopped device. */
void check_complete_fetch(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(2 * MiB), *io = xalloc(4 * 4096);
	unsigned char *pat = xalloc(4096);
	struct bius_request hdr[2];
	struct io_job job[3];
	uint32_t len, done;
	struct tdev d;
	int disk = -1;
	ssize_t r;

	watchdog("complete fetch", 90);
	params_default(&p, "bi-cfetch");
	if (tdev_up(&d, &p, "complete-fetch device comes up"))
		goto out;
	disk = disk_open(d.name, O_RDWR | O_DIRECT);
	if (disk < 0) {
		not_ok("complete-fetch device comes up", "open: %s",
		       strerror(errno));
		goto out_destroy;
	}
	ok("complete-fetch device comes up");
	check_cf_refusals(&d, buf);

	/* Without completions it is read(). */
	io_start(&job[0], disk, 0, io, 4096, 0, 0);
	r = complete_fetch(d.srv[0].fd, NULL, 0, buf, 4096, &done);
	memcpy(&hdr[0], buf, HDR);
	expect_true("COMPLETE_FETCH without completions fetches a request",
		    r == (ssize_t)HDR && done == 0 &&
		    hdr[0].op == BIUS_OP_READ && hdr[0].len == 4096,
		    "r=%zd (%s) completed=%u op=%u", r, strerror(errno), done,
		    hdr[0].op);

	/* Complete that one and fetch the next in one call. */
	io_start(&job[1], disk, 0, io + 4096, 4096, 4096, 0);
	sleep_ms(200);
	fill_pattern(pat, 4096, 7);
	len = read_completion(buf, hdr[0].id, pat);
	r = complete_fetch(d.srv[0].fd, buf, len, buf + len, 4096, &done);
	memcpy(&hdr[1], buf + len, HDR);
	expect_true("COMPLETE_FETCH completes one request and fetches the next",
		    r == (ssize_t)HDR && done == len &&
		    hdr[1].op == BIUS_OP_READ && hdr[1].sector == 8 &&
		    io_wait(&job[0], 5000) && job[0].ret == 4096 &&
		    !memcmp(io, pat, 4096),
		    "r=%zd (%s) completed=%u sector=%llu io=%zd", r,
		    strerror(errno), done, (unsigned long long)hdr[1].sector,
		    job[0].ret);

	/* A refused record after a good one: no read, completed = good. */
	io_start(&job[2], disk, 0, io + 8192, 4096, 8192, 0);
	sleep_ms(200);
	len = read_completion(buf, hdr[1].id, pat);
	len += read_completion(buf + len, hdr[1].id, pat);
	r = complete_fetch(d.srv[0].fd, buf, len, buf + len, 4096, &done);
	expect_true("a refused completion: its errno, nothing read",
		    r == -1 && errno == ENOENT && done == CMP + 4096 &&
		    io_wait(&job[1], 5000) && job[1].ret == 4096,
		    "r=%zd (%s) completed=%u io=%zd", r, strerror(errno), done,
		    job[1].ret);
	r = read(d.srv[0].fd, buf, 4096);
	memcpy(&hdr[0], buf, HDR);
	expect_true("the request not fetched comes with the next read()",
		    r == (ssize_t)HDR && hdr[0].sector == 16,
		    "r=%zd (%s) sector=%llu", r, strerror(errno),
		    (unsigned long long)hdr[0].sector);
	len = read_completion(buf, hdr[0].id ^ 0x5a00000000ULL, pat);
	r = complete_fetch(d.srv[0].fd, buf, len, buf + len, 4096, &done);
	expect_true("an unknown id alone: ENOENT, nothing taken",
		    r == -1 && errno == ENOENT && done == 0,
		    "r=%zd (%s) completed=%u", r, strerror(errno), done);
	len = read_completion(buf, hdr[0].id, pat);
	r = send_completion(d.srv[0].fd, hdr[0].id, 0, pat, 4096);
	expect_true("write() still completes", r == (ssize_t)len &&
		    io_wait(&job[2], 5000) && job[2].ret == 4096,
		    "r=%zd (%s)", r, strerror(errno));

	check_cf_interrupted(&d, disk, buf, io, pat);

	close(disk);
	disk = -1;
	r = do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	expect_true("destroy of the complete-fetch device", r == 0, "%s",
		    strerror(errno));
	fcntl(d.srv[0].fd, F_SETFL, O_NONBLOCK);
	r = complete_fetch(d.srv[0].fd, NULL, 0, buf, 4096, &done);
	expect_true("COMPLETE_FETCH on a stopped device: end of file",
		    r == 0 && done == 0, "r=%zd (%s)", r, strerror(errno));
	len = read_completion(buf, hdr[0].id, pat);
	r = complete_fetch(d.srv[0].fd, buf, len, buf + len, 4096, &done);
	expect_true("completions on a stopped device: ENODEV, nothing taken",
		    r == -1 && errno == ENODEV && done == 0,
		    "r=%zd (%s) completed=%u", r, strerror(errno), done);
	goto out;

out_destroy:
	do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
out:
	if (disk >= 0)
		close(disk);
	tdev_free(&d);
	free(buf);
	free(io);
	free(pat);
}

/*
 * An AIO read whose fd is closed while it is in flight holds the only
 * reference to the disk's file; the completion of that read, in the
 * daemon's COMPLETE_FETCH, drops it, and the file's release (closing the
 * disk) is then task work of the daemon's thread, run on its way back to
 * user space.  Sleeping in the fetch kept the disk open until the next
 * request: a graceful DESTROY was refused with EBUSY (seen as a daemon
 * that would not stop on SIGTERM, transfer-modes on a debug kernel).
 */
void check_cf_last_fput(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	struct bius_device_params p;
	unsigned char *buf = xalloc(2 * 4096 + HDR), *io = xalloc(4096);
	unsigned char *pat = xalloc(4096);
	struct iocb cb = { .aio_lio_opcode = IOCB_CMD_PREAD };
	struct iocb *cbs[1] = { &cb };
	struct io_event ev = { 0 };
	struct timespec five = { .tv_sec = 5 };
	aio_context_t ctx = 0;
	struct bius_request hdr;
	struct kicker k;
	uint32_t len, done;
	struct tdev d;
	int disk;
	long n;
	ssize_t r;

	watchdog("last fput", 60);
	params_default(&p, "bi-lastfput");
	if (tdev_up(&d, &p, "last-fput device comes up"))
		goto out;
	disk = disk_open(d.name, O_RDONLY | O_DIRECT);
	if (disk < 0 || syscall(SYS_io_setup, 1, &ctx)) {
		not_ok("last-fput device comes up", "open or io_setup: %s",
		       strerror(errno));
		goto out_destroy;
	}
	cb.aio_fildes = disk;
	cb.aio_buf = (uintptr_t)io;
	cb.aio_nbytes = 4096;
	n = syscall(SYS_io_submit, ctx, 1, cbs);
	close(disk);		/* the AIO holds the only reference now */
	r = n == 1 ? complete_fetch(d.srv[0].fd, NULL, 0, buf, 4096, &done) : -1;
	memcpy(&hdr, buf, HDR);
	if (r != (ssize_t)HDR || hdr.op != BIUS_OP_READ) {
		not_ok("last-fput device comes up", "io_submit %ld, fetch %zd: %s",
		       n, r, strerror(errno));
		goto out_destroy;
	}
	ok("last-fput device comes up");

	fill_pattern(pat, 4096, 3);
	len = read_completion(buf, hdr.id, pat);
	sigaction(SIGUSR1, &sa, &old);
	kick_destroying(&k, d.ctl, d.id);
	r = complete_fetch(d.srv[0].fd, buf, len, buf + len, 4096, &done);
	expect_true("a completion that closes the disk ends COMPLETE_FETCH (EINTR)",
		    r == -1 && errno == EINTR && done == len,
		    "r=%zd (%s) completed=%u", r, strerror(errno), done);
	pthread_join(k.thread, NULL);
	sigaction(SIGUSR1, &old, NULL);
	n = syscall(SYS_io_getevents, ctx, 1, 1, &ev, &five);
	expect_true("the AIO read whose fd was closed completes",
		    n == 1 && ev.res == 4096 && !memcmp(io, pat, 4096),
		    "io_getevents %ld, res %lld", n, (long long)ev.res);
	expect_true("then the disk is closed: a graceful DESTROY succeeds",
		    k.destroy_err == 0, "DESTROY: %s", strerror(k.destroy_err));
	if (k.destroy_err == 0)
		goto out;

out_destroy:
	do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
out:
	if (ctx)
		syscall(SYS_io_destroy, ctx);
	tdev_free(&d);
	free(buf);
	free(io);
	free(pat);
}
