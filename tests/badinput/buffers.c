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

/* A device with one I/O pending, for the fault cases. */
struct pending {
	struct tdev d;
	int fd;			/* the disk */
	struct io_job job;	/* the I/O */
	const char *what;	/* "copy" or "mapped" */
};

/* End what pending_up() brings up; the I/O ends too. */
static void pending_down(struct pending *pd)
{
	if (pd->fd >= 0)
		close(pd->fd);
	tdev_destroy_served(&pd->d, pd->d.ctl, "buffer faults: DESTROY");
	io_wait(&pd->job, 5000);
}

/*
 * Bring up a device (@map: in map mode, with its window mmap()ed), start
 * one O_DIRECT I/O of @len bytes at @buf (@write or a read) and wait
 * until its request is queued; then the fault cases.  0 if all went so,
 * else the failure is reported and @pd is down.
 */
static int pending_up(struct pending *pd, const char *name, int map,
		      int write, void *buf, size_t len)
{
	struct pollfd pfd;
	struct bius_device_params p;
	struct bius_device_info info;

	pd->what = map ? "mapped" : "copy";
	pd->fd = -1;
	params_default(&p, name);
	if (map)
		p.transfer_mode = BIUS_TRANSFER_MAP;
	if (tdev_up(&pd->d, &p, "buffer faults: device comes up"))
		return -1;
	if (map && (get_info(pd->d.ctl, pd->d.id, &info) ||
		    srv_map(&pd->d.srv[0], info.map_window_bytes))) {
		not_ok("buffer faults: mapped window", "%s", strerror(errno));
		tdev_force_down(&pd->d);
		return -1;
	}
	pd->fd = disk_open(pd->d.name, O_RDWR | O_DIRECT);
	io_start(&pd->job, pd->fd, write, buf, len, 0, -1);
	pfd.fd = pd->d.srv[0].fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 3000) != 1 || !(pfd.revents & POLLIN)) {
		not_ok("buffer faults: a request is pending", "%s: none came",
		       pd->what);
		pending_down(pd);
		return -1;
	}
	fault_cases(&pd->d, pd->what);
	return 0;
}

/*
 * One copy-mode WRITE pending: the bad buffers fail, then a buffer never
 * touched (no page in memory) gets the header and the whole payload in one
 * read(), and the request is served.
 */
static void check_fault_copy(void)
{
	const size_t len = 64 * KiB;
	unsigned char *wr = xalloc(len), *fresh;
	struct pending pd;
	struct srv *s = &pd.d.srv[0];
	ssize_t r;

	watchdog("buffer faults (copy)", 60);
	fill_pattern(wr, len, 7);
	if (pending_up(&pd, "bi-fault", 0, 1, wr, len))
		goto out;
	fresh = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r = fresh == MAP_FAILED ? -1 : read(s->fd, fresh, 2 * len);
	expect_true("buffer faults: a buffer not in memory takes the whole request",
		    r == (ssize_t)(HDR + len), "read %zd (want %zu): %s", r,
		    HDR + len, strerror(errno));
	if (r == (ssize_t)(HDR + len)) {
		struct bius_request *rq = (struct bius_request *)fresh;

		memcpy(pd.d.mem + rq->sector * 512, fresh + HDR, len);
		srv_complete(s, rq->id, 0, NULL, 0);
		srv_flush(s);
	}
	if (fresh != MAP_FAILED)
		munmap(fresh, 2 * len);
	expect_true("buffer faults: the WRITE completes",
		    io_wait(&pd.job, 5000) && pd.job.ret == (ssize_t)len &&
		    !memcmp(pd.d.mem, wr, len), "ret %zd", pd.job.ret);
	pending_down(&pd);
out:
	tdev_free(&pd.d);
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
	unsigned char *rd = xalloc(len), buf[4096];
	struct bius_request *rq = (struct bius_request *)buf;
	struct pending pd;
	struct srv *s = &pd.d.srv[0];
	ssize_t r;

	watchdog("buffer faults (mapped)", 60);
	if (pending_up(&pd, "bi-faultm", 1, 0, rd, len))
		goto out;
	fill_pattern(pd.d.mem, len, 9);
	r = read(s->fd, buf, sizeof(buf));
	expect_true("buffer faults: the READ comes mapped after the faults",
		    r == HDR && rq->op == BIUS_OP_READ &&
		    (rq->flags & BIUS_REQ_MAPPED), "read %zd, flags %x", r,
		    r > 0 ? rq->flags : 0);
	if (r == HDR && (rq->flags & BIUS_REQ_MAPPED)) {
		memcpy(s->win + rq->window_offset, pd.d.mem, len);
		srv_complete(s, rq->id, 0, NULL, 0);
		srv_flush(s);
	}
	expect_true("buffer faults: the mapped READ completes with its data",
		    io_wait(&pd.job, 5000) && pd.job.ret == (ssize_t)len &&
		    !memcmp(rd, pd.d.mem, len), "ret %zd", pd.job.ret);
	pending_down(&pd);
out:
	tdev_free(&pd.d);
	free(rd);
}

void check_buffer_faults(void)
{
	check_fault_copy();
	check_fault_mapped();
}
