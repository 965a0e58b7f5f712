// SPDX-License-Identifier: GPL-2.0
/*
 * A daemon thread that holds its mmap_lock while it waits for the disk's
 * I/O, with a mmap() queued behind it, which blocks every later reader of
 * that lock: the driver must never wait for it to end a mapped request.
 * The holder reads /proc/self/mem over a mapping of the disk (GUP without
 * FOLL_UNLOCKABLE keeps the lock through the fault's read, on every kernel;
 * io_uring's buffer registration did the same on 6.1).  A mapped READ the
 * daemon holds then ends each of three ways: the daemon completes it; it
 * times out; the daemon is lost (its owner fd closed) and a new one, in
 * another process, recovers the device and serves the replays.  Each time
 * the request, the locked read and the mmap() all finish, the reads with
 * their data.  Before the driver zapped windows without the mmap_lock, the
 * completion's write() and the timeout blocked, and the owner's close()
 * did, under the registry lock before the second review.
 */

#include "badinput.h"

#define ML_DIRECT	(64 * KiB)	/* the O_DIRECT read's offset */
#define ML_LOCKED	(256 * KiB)	/* the locked read's page of the disk */
#define ML_TIMEOUT_MS	3000

enum ml_end { ML_COMPLETE, ML_TIMEOUT, ML_RECOVER };

static const char *const ml_names[] = {
	[ML_COMPLETE] = "completed",
	[ML_TIMEOUT] = "timed out",
	[ML_RECOVER] = "recovered",
};

/* A thread that waits for go, does its one thing, then sets done. */
struct ml_thread {
	atomic_int go, done;
	int fd;
	void *addr;
	unsigned char *buf;	/* the locked read's, touched beforehand */
	ssize_t ret;
	int err;
	pthread_t thread;
};

/*
 * Touch the stack a thread will use while the mmap() is queued: a fault
 * on a new stack page needs the mmap_lock too (on 6.1).
 */
static void touch_stack(void)
{
	unsigned char pad[64 * KiB];

	memset(pad, 0, sizeof(pad));
	__asm__ volatile("" : : "r"(pad) : "memory");
}

static void ml_wait_go(struct ml_thread *t)
{
	touch_stack();
	while (!t->go)
		sleep_ms(1);
}

/* Read the disk's page through /proc/self/mem: GUP with the lock held. */
static void *ml_locked_read(void *arg)
{
	struct ml_thread *t = arg;

	ml_wait_go(t);
	t->ret = pread(t->fd, t->buf, 4096, (off_t)(uintptr_t)t->addr);
	t->err = errno;
	t->done = 1;
	return NULL;
}

/* mmap(): a writer of the mmap_lock, queued behind the holder. */
static void *ml_mapper(void *arg)
{
	struct ml_thread *t = arg;
	void *p;

	ml_wait_go(t);
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	t->ret = p == MAP_FAILED ? -1 : 0;
	t->err = errno;
	if (p != MAP_FAILED)
		munmap(p, 4096);
	t->done = 1;
	return NULL;
}

static void *ml_closer(void *arg)
{
	struct ml_thread *t = arg;

	ml_wait_go(t);
	t->ret = close(t->fd);
	t->done = 1;
	return NULL;
}

static int ml_start(struct ml_thread *t, void *(*fn)(void *))
{
	return pthread_create(&t->thread, NULL, fn, t);
}

/*
 * The new daemon: waits for a byte on @go, recovers @d with @p on a
 * control fd of its own, serves it (by copy: it maps no window) until
 * @go's EOF, then destroys it.  Exit status 0 if all of that worked.
 */
static void ml_new_daemon(struct tdev *d, const struct bius_device_params *p,
			  int go)
{
	char c;
	int ctl;

	if (read(go, &c, 1) != 1)
		_exit(2);
	ctl = ctl_open();
	if (recover(ctl, p) || reconnect(d))
		_exit(3);
	tdev_serve_in_threads(d);
	while (read(go, &c, 1) > 0)
		;
	if (do_destroy(ctl, d->id, 0))
		_exit(4);
	tdev_join(d, 10000);
	_exit(0);
}

/* Serve the mapped (or copied) READ @h from the device's memory. */
static void ml_complete(struct tdev *d, const struct bius_request *h)
{
	struct srv *s = &d->srv[0];
	const unsigned char *data = d->mem + h->sector * 512;

	if (h->flags & BIUS_REQ_MAPPED) {
		memcpy(s->win + h->window_offset, data, h->len);
		srv_complete(s, h->id, 0, NULL, 0);
	} else {
		srv_complete(s, h->id, 0, data, h->len);
	}
	srv_flush(s);
}

struct ml_round {
	struct tdev d;
	struct bius_device_info info;
	struct ml_thread reader, mapper, closer;
	struct io_job job;
	unsigned char *direct, *locked;
	struct bius_request h1, h2;
	int bfd, dfd, memfd, go[2];
	void *area;
	pid_t child;
};

/* Device up, its data in place, every thread and the child made. */
static int ml_setup(struct ml_round *m, enum ml_end end, const char *check)
{
	struct bius_device_params p;

	params_default(&p, "bi-mmaplock");
	p.size = 1 * MiB;
	p.queue_depth = 4;
	p.transfer_mode = BIUS_TRANSFER_MAP;
	p.timeout_ms = end == ML_TIMEOUT ? ML_TIMEOUT_MS : 60000;
	p.recover_timeout_ms = end == ML_RECOVER ? 30000 : 0;
	if (tdev_create(&m->d, &p, NULL, check) ||
	    get_info(m->d.ctl, m->d.id, &m->info) ||
	    srv_map(&m->d.srv[0], m->info.map_window_bytes) ||
	    tdev_wait_live(&m->d, check))
		return -1;
	fill_pattern(m->d.mem + ML_DIRECT, 4096, 11);
	fill_pattern(m->d.mem + ML_LOCKED, 4096, 12);
	m->direct = aligned_alloc(4096, 4096);
	m->locked = xalloc(4096);
	memset(m->direct, 0, 4096);
	m->bfd = disk_open(m->d.name, O_RDONLY);
	m->dfd = disk_open(m->d.name, O_RDONLY | O_DIRECT);
	m->memfd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	m->area = mmap(NULL, 4096, PROT_READ, MAP_SHARED, m->bfd, ML_LOCKED);
	if (m->bfd < 0 || m->dfd < 0 || m->memfd < 0 || m->area == MAP_FAILED) {
		not_ok(check, "disk, /proc/self/mem or mmap: %s",
		       strerror(errno));
		return -1;
	}
	madvise(m->area, 4096, MADV_RANDOM);	/* one page, no readahead */
	m->reader.fd = m->memfd;
	m->reader.addr = m->area;
	m->reader.buf = m->locked;
	m->closer.fd = m->d.ctl;
	if (ml_start(&m->reader, ml_locked_read) ||
	    ml_start(&m->mapper, ml_mapper) ||
	    (end == ML_RECOVER && ml_start(&m->closer, ml_closer))) {
		not_ok(check, "pthread_create: %s", strerror(errno));
		return -1;
	}
	if (end == ML_RECOVER) {
		if (pipe(m->go))
			return -1;
		m->child = fork();
		if (m->child == 0) {
			/* the lost daemon's fds are the parent's alone */
			close(m->go[1]);
			close(m->d.ctl);
			close(m->d.srv[0].fd);
			m->d.srv[0].fd = -1;
			m->d.srv[0].win = NULL;	/* VM_DONTCOPY */
			/* and DESTROY refuses a disk still open */
			munmap(m->area, 4096);
			close(m->bfd);
			close(m->dfd);
			ml_new_daemon(&m->d, &m->info.params, m->go[0]);
		}
		close(m->go[0]);
	}
	return 0;
}

/*
 * The daemon holds a mapped READ (h1), the holder's read is in the queue
 * too (h2), and the mmap() is queued behind the holder.
 */
static int ml_lock_up(struct ml_round *m, const char *check)
{
	ssize_t n;

	io_start(&m->job, m->dfd, 0, m->direct, 4096, ML_DIRECT, -1);
	n = wait_requests(&m->d, m->d.srv[0].rbuf, m->d.srv[0].rsize,
			  &(unsigned int){ 0 }, 5000);
	if (n >= (ssize_t)HDR)
		memcpy(&m->h1, m->d.srv[0].rbuf, HDR);
	if (n != HDR || !(m->h1.flags & BIUS_REQ_MAPPED)) {
		not_ok(check, "the O_DIRECT READ: read %zd, flags %x", n,
		       m->h1.flags);
		return -1;
	}
	touch_stack();
	m->reader.go = 1;
	n = wait_requests(&m->d, m->d.srv[0].rbuf, m->d.srv[0].rsize,
			  &(unsigned int){ 0 }, 5000);
	if (n >= (ssize_t)HDR)
		memcpy(&m->h2, m->d.srv[0].rbuf, HDR);
	if (n < (ssize_t)HDR || m->h2.sector != ML_LOCKED / 512) {
		not_ok(check, "the locked read's READ: read %zd, sector %llu",
		       n, (unsigned long long)m->h2.sector);
		return -1;
	}
	m->mapper.go = 1;
	sleep_ms(300);
	if (m->mapper.done || m->reader.done) {
		not_ok(check, "the mmap_lock is not held: mmap() %s, read %s",
		       m->mapper.done ? "done" : "waits",
		       m->reader.done ? "done" : "waits");
		return -1;
	}
	return 0;
}

/* How the round ends: 0, or -1 if its step did not return. */
static int ml_end_round(struct ml_round *m, enum ml_end end,
			const char *check)
{
	switch (end) {
	case ML_COMPLETE:
		/* a stuck write() here is the watchdog's to report */
		ml_complete(&m->d, &m->h1);
		ml_complete(&m->d, &m->h2);
		return 0;
	case ML_TIMEOUT:
		return 0;
	case ML_RECOVER:
		m->closer.go = 1;
		if (!wait_flag(&m->closer.done, 3000)) {
			not_ok(check, "the owner's close() blocks");
			return -1;
		}
		m->d.ctl = -1;
		return write(m->go[1], "g", 1) == 1 ? 0 : -1;
	}
	return -1;
}

static void ml_check(struct ml_round *m, enum ml_end end, const char *check)
{
	long wait = end == ML_TIMEOUT ? 3 * ML_TIMEOUT_MS + 5000 : 15000;
	int done = io_wait(&m->job, wait) && wait_flag(&m->reader.done, wait) &&
		   wait_flag(&m->mapper.done, 5000);
	const unsigned char *mem = m->d.mem;
	int fine;

	if (end == ML_TIMEOUT)
		fine = m->job.ret < 0 && m->reader.ret < 0;
	else
		fine = m->job.ret == 4096 &&
		       !memcmp(m->direct, mem + ML_DIRECT, 4096) &&
		       m->reader.ret == 4096 &&
		       !memcmp(m->locked, mem + ML_LOCKED, 4096);
	expect_true(check, done && fine && m->mapper.ret == 0,
		    "%s: O_DIRECT read %zd (%s), locked read %zd (%s), mmap() %zd",
		    done ? "all returned" : "still blocked", m->job.ret,
		    strerror(m->job.err), m->reader.ret,
		    strerror(m->reader.err), m->mapper.ret);
	if (done && end == ML_TIMEOUT) {
		ssize_t r = send_completion(m->d.srv[0].fd, m->h1.id, 0, NULL, 0);

		expect_errno("mmap_lock holder (timed out): the daemon's late completion is refused",
			     r, errno, ENOENT);
	}
}

static void ml_teardown(struct ml_round *m, enum ml_end end,
			const char *check)
{
	int status = -1;

	pthread_join(m->reader.thread, NULL);
	pthread_join(m->mapper.thread, NULL);
	/* the disk closed first: DESTROY refuses an open disk */
	munmap(m->area, 4096);
	close(m->bfd);
	close(m->dfd);
	close(m->memfd);
	if (end == ML_RECOVER) {
		pthread_join(m->closer.thread, NULL);
		close(m->go[1]);
		waitpid(m->child, &status, 0);
		expect_true(check, WIFEXITED(status) && !WEXITSTATUS(status),
			    "the new daemon's status %#x", status);
	} else {
		tdev_destroy_served(&m->d, m->d.ctl, check);
	}
}

static void ml_round(enum ml_end end)
{
	struct ml_round m = { .bfd = -1, .dfd = -1, .memfd = -1,
			      .area = MAP_FAILED };
	char check[128];

	snprintf(check, sizeof(check), "mmap_lock holder (%s): setup",
		 ml_names[end]);
	watchdog(check, 90);
	if (ml_setup(&m, end, check) || ml_lock_up(&m, check)) {
		tdev_force_down(&m.d);
		summary_and_exit();	/* threads blocked: no way back */
	}
	snprintf(check, sizeof(check),
		 "mmap_lock holder (%s): the request, the locked read and the mmap() finish",
		 ml_names[end]);
	current_check = check;
	if (ml_end_round(&m, end, check))
		summary_and_exit();
	ml_check(&m, end, check);
	snprintf(check, sizeof(check), "mmap_lock holder (%s): teardown",
		 ml_names[end]);
	current_check = check;
	ml_teardown(&m, end, check);
	free(m.direct);
	free(m.locked);
	tdev_free(&m.d);
}

void check_mmap_lock_holder(void)
{
	ml_round(ML_COMPLETE);
	ml_round(ML_TIMEOUT);
	ml_round(ML_RECOVER);
}
