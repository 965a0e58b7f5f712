// SPDX-License-Identifier: GPL-2.0
/*
 * Daemon buffers the kernel cannot write: read() and COMPLETE_FETCH into a
 * buffer with a hole or a read-only page end with EFAULT at once (never a
 * busy loop in the kernel), the request stays queued for a good buffer,
 * and a buffer not yet in memory takes a whole request in one read().
 */

#include "badinput.h"

/* Two pages, the second a hole (@ro: read-only instead); NULL on failure. */
static unsigned char *two_pages(int ro)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, pg);
	if (ro ? mprotect(p + pg, pg, PROT_READ) : munmap(p + pg, pg)) {
		munmap(p, 2 * pg);
		return NULL;
	}
	return p;
}

/*
 * In a child, so that a read() the kernel keeps spinning can be killed:
 * read() (or COMPLETE_FETCH if @cf) of @len bytes into @buf on @fd must
 * fail with EFAULT within two seconds.
 */
static void expect_prompt_efault(const char *name, int fd, void *buf,
				 size_t len, int cf)
{
	long end = now_ms() + 2000;
	int status = 0;
	pid_t pid, w;

	pid = fork();
	if (pid == 0) {
		struct bius_complete_fetch c = { 0 };
		ssize_t r;

		alarm(0);
		c.requests = (uintptr_t)buf;
		c.requests_len = len;
		r = cf ? ioctl(fd, BIUS_IOC_COMPLETE_FETCH, &c) :
			 read(fd, buf, len);
		_exit(r < 0 && errno == EFAULT ? 0 : r < 0 ? 10 + errno % 100 : 1);
	}
	if (pid < 0) {
		not_ok(name, "fork: %s", strerror(errno));
		return;
	}
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < end)
		sleep_ms(10);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		not_ok(name, "still in the kernel after 2 s (killed)");
		return;
	}
	expect_true(name, WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "status %d (1: it read, 1x: errno x, not EFAULT)",
		    WEXITSTATUS(status));
}

/* The cases on a device with one request pending (@what names it). */
static void fault_cases(struct tdev *d, const char *what)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *hole = two_pages(0), *ro = two_pages(1);
	char name[128];
	int fd = d->srv[0].fd;

	if (!hole || !ro) {
		not_ok(what, "mmap: %s", strerror(errno));
		goto out;
	}
	snprintf(name, sizeof(name), "%s: read() into a header over a hole",
		 what);
	expect_prompt_efault(name, fd, hole + pg - 16, 64, 0);
	snprintf(name, sizeof(name), "%s: read() into a read-only page", what);
	expect_prompt_efault(name, fd, ro + pg - 16, 64, 0);
	snprintf(name, sizeof(name), "%s: COMPLETE_FETCH over a hole", what);
	expect_prompt_efault(name, fd, hole + pg - 16, 64, 1);
	snprintf(name, sizeof(name), "%s: COMPLETE_FETCH into read-only",
		 what);
	expect_prompt_efault(name, fd, ro + pg - 8, 4096, 1);
out:
	if (hole)
		munmap(hole, pg);
	if (ro)
		munmap(ro, 2 * pg);
}

/* Has @d's one queue a request to read within @ms? */
static int wait_readable(struct tdev *d, long ms)
{
	struct pollfd pfd = { .fd = d->srv[0].fd, .events = POLLIN };

	return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

/*
 * One copy-mode WRITE pending: the bad buffers fail, then a buffer never
 * touched (no page in memory) gets the header and the whole payload in one
 * read(), and the request is served.
 */
static void check_fault_copy(void)
{
	const size_t len = 64 * KiB;
	struct bius_device_params p;
	unsigned char *wr = xalloc(len), *fresh;
	struct io_job job;
	struct tdev d;
	ssize_t r;
	int fd;

	watchdog("buffer faults (copy)", 60);
	params_default(&p, "bi-fault");
	if (tdev_up(&d, &p, "buffer faults: device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	fill_pattern(wr, len, 7);
	io_start(&job, fd, 1, wr, len, 0, -1);
	if (!wait_readable(&d, 3000)) {
		not_ok("buffer faults: a WRITE is pending", "none came");
		goto down;
	}
	fault_cases(&d, "copy");
	fresh = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r = fresh == MAP_FAILED ? -1 : read(d.srv[0].fd, fresh, 2 * len);
	expect_true("buffer faults: a buffer not in memory takes the whole request",
		    r == (ssize_t)(HDR + len), "read %zd (want %zu): %s", r,
		    HDR + len, strerror(errno));
	if (r == (ssize_t)(HDR + len)) {
		struct bius_request *rq = (struct bius_request *)fresh;

		memcpy(d.mem + rq->sector * 512, fresh + HDR, len);
		srv_complete(&d.srv[0], rq->id, 0, NULL, 0);
		srv_flush(&d.srv[0]);
	}
	if (fresh != MAP_FAILED)
		munmap(fresh, 2 * len);
	expect_true("buffer faults: the WRITE completes",
		    io_wait(&job, 5000) && job.ret == (ssize_t)len &&
		    !memcmp(d.mem, wr, len), "ret %zd", job.ret);
down:
	if (fd >= 0)
		close(fd);
	tdev_destroy_served(&d, d.ctl, "buffer faults: DESTROY");
	io_wait(&job, 5000);
out:
	tdev_free(&d);
	free(wr);
}

/*
 * One mapped READ pending: the bad buffers fail after the request was
 * mapped for them (its mapping is undone outside the read() lock), and a
 * good read() then gets it mapped again and completes it.
 */
static void check_fault_mapped(void)
{
	const size_t len = 16 * KiB;
	struct bius_device_params p;
	struct bius_device_info info;
	struct bius_request *rq;
	unsigned char *rd = xalloc(len), buf[4096];
	struct io_job job;
	struct tdev d;
	ssize_t r;
	int fd = -1;

	watchdog("buffer faults (mapped)", 60);
	params_default(&p, "bi-faultm");
	p.transfer_mode = BIUS_TRANSFER_MAP;
	if (tdev_up(&d, &p, "buffer faults: mapped device comes up"))
		goto out;
	if (get_info(d.ctl, d.id, &info) ||
	    srv_map(&d.srv[0], info.map_window_bytes)) {
		not_ok("buffer faults: mapped window", "%s", strerror(errno));
		tdev_force_down(&d);
		goto out;
	}
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	fill_pattern(d.mem, len, 9);
	io_start(&job, fd, 0, rd, len, 0, -1);
	if (!wait_readable(&d, 3000)) {
		not_ok("buffer faults: a mapped READ is pending", "none came");
		goto down;
	}
	fault_cases(&d, "mapped");
	r = read(d.srv[0].fd, buf, sizeof(buf));
	rq = (struct bius_request *)buf;
	expect_true("buffer faults: the READ comes mapped after the faults",
		    r == HDR && rq->op == BIUS_OP_READ &&
		    (rq->flags & BIUS_REQ_MAPPED), "read %zd, flags %x", r,
		    r > 0 ? rq->flags : 0);
	if (r == HDR && (rq->flags & BIUS_REQ_MAPPED)) {
		memcpy(d.srv[0].win + rq->window_offset, d.mem, len);
		srv_complete(&d.srv[0], rq->id, 0, NULL, 0);
		srv_flush(&d.srv[0]);
	}
	expect_true("buffer faults: the mapped READ completes with its data",
		    io_wait(&job, 5000) && job.ret == (ssize_t)len &&
		    !memcmp(rd, d.mem, len), "ret %zd", job.ret);
down:
	if (fd >= 0)
		close(fd);
	tdev_destroy_served(&d, d.ctl, "buffer faults: mapped DESTROY");
	io_wait(&job, 5000);
out:
	tdev_free(&d);
	free(rd);
}

void check_buffer_faults(void)
{
	check_fault_copy();
	check_fault_mapped();
}
