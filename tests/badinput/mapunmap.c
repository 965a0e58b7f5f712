// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: map mode: munmap() of a data window racing the completion
 * of a read mapped in it.  munmap() takes the window out of the address
 * space before it zaps its PTEs; once the completion has returned, no
 * daemon thread may reach the request's pages through them any more.
 */

#include "badinput.h"

#define UNMAP_ROUNDS	40

static sigjmp_buf scribble_env;

static void scribble_fault(int sig)
{
	(void)sig;
	siglongjmp(scribble_env, 1);
}

/* A daemon thread writing on at a request's range until it faults. */
struct scribbler {
	volatile uint64_t *p;
	atomic_int started;
	pthread_t thread;
};

static void *scribble(void *arg)
{
	struct scribbler *s = arg;
	uint64_t n = 0;

	if (sigsetjmp(scribble_env, 1) == 0) {
		s->started = 1;
		for (;;)
			*s->p = ++n;
	}
	return NULL;
}

/* munmap() of the window in a thread, timed. */
struct unmapper {
	void *w;
	size_t len;
	atomic_int go;
	long us;
	pthread_t thread;
};

long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

static void *unmap_run(void *arg)
{
	struct unmapper *u = arg;
	long t;

	while (!u->go)
		;
	t = now_us();
	munmap(u->w, u->len);
	u->us = now_us() - t;
	return NULL;
}

/*
 * A mapped read of @io, its window's every page faulted in (so that
 * munmap() takes a while to zap them), a thread writing at its range;
 * complete it @delay_us into an munmap() of the window.  1 if the writer
 * still reached the buffer after the completion returned, 0 if not, -1
 * if the round could not be set up.  *@unmap_us: how long munmap() took.
 */
static int unmap_round(unsigned char *io, long delay_us, long *unmap_us)
{
	struct bius_device_params p;
	struct bius_device_info info;
	struct scribbler s = { 0 };
	struct unmapper u = { 0 };
	unsigned char buf[4096];
	struct bius_request h;
	struct io_job job;
	struct tdev d;
	size_t off, ps = (size_t)sysconf(_SC_PAGESIZE);
	unsigned int qi;
	uint64_t v;
	long t;
	int fd = -1, late = -1, tries;

	params_default(&p, "bi-unmap");
	p.logical_block_size = 512;
	p.queue_depth = 64;
	p.max_io_bytes = 1 * MiB;
	p.transfer_mode = BIUS_TRANSFER_MAP;
	if (tdev_up(&d, &p, "map unmap: device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0 || get_info(d.ctl, d.id, &info) ||
	    srv_map(&d.srv[0], info.map_window_bytes))
		goto out_down;
	for (off = 0; off < info.map_window_bytes; off += ps)
		(void)*(volatile unsigned char *)(d.srv[0].win + off);
	/*
	 * read() maps a request only if it gets the mmap_lock at once; the
	 * I/O thread's start (its stack is an mmap()) may hold it: such a
	 * read comes by copy, is served so, and the round tries again.
	 */
	for (tries = 0;; tries++) {
		io_start(&job, fd, 0, io, 4096, 0, -1);
		if (wait_requests(&d, buf, sizeof(buf), &qi, 5000) != HDR)
			goto out_job;
		memcpy(&h, buf, HDR);
		if ((h.flags & BIUS_REQ_MAPPED) || tries == 3)
			break;
		memset(buf, 0, 4096);
		send_completion(d.srv[0].fd, h.id, 0, buf, 4096);
		io_wait(&job, 5000);
	}
	if (!(h.flags & BIUS_REQ_MAPPED))
		goto out_job;

	s.p = (volatile uint64_t *)(d.srv[0].win + h.window_offset);
	u.w = d.srv[0].win;
	u.len = info.map_window_bytes;
	d.srv[0].win = NULL;
	if (pthread_create(&s.thread, NULL, scribble, &s))
		goto out_job;
	while (!s.started)
		;
	if (pthread_create(&u.thread, NULL, unmap_run, &u)) {
		munmap(u.w, u.len);
		pthread_join(s.thread, NULL);
		goto out_job;
	}
	u.go = 1;
	for (t = now_us(); now_us() - t < delay_us;)
		;
	send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	v = *(volatile uint64_t *)io;
	pthread_join(u.thread, NULL);
	*unmap_us = u.us;
	pthread_join(s.thread, NULL);
	late = *(volatile uint64_t *)io != v;
out_job:
	close(fd);
	fd = -1;
	tdev_force_down(&d);	/* fails the read if it is still pending */
	io_wait(&job, 10000);
	goto out;
out_down:
	tdev_force_down(&d);
out:
	if (fd >= 0)
		close(fd);
	tdev_free(&d);
	return late;
}

/*
 * Rounds that complete the read 0 to 2.85 ms into the munmap(), twice
 * over: no write through the window lands after the completion.  (Before
 * bius_unmap_range() waited for the munmap(), 5 rounds of 40 saw one on
 * 6.12.)
 */
void check_map_unmap_race(void)
{
	struct sigaction sa = { .sa_handler = scribble_fault }, bus, segv;
	unsigned char *io = xalloc(4096);
	long unmap_us = 0;
	unsigned int i, late = 0, done = 0;
	int r;

	watchdog("map: munmap racing a completion", 180);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &bus);
	sigaction(SIGSEGV, &sa, &segv);
	for (i = 0; i < UNMAP_ROUNDS; i++) {
		r = unmap_round(io, (i % 20) * 150, &unmap_us);
		late += r == 1;
		done += r >= 0;
	}
	sigaction(SIGBUS, &bus, NULL);
	sigaction(SIGSEGV, &segv, NULL);
	expect_true("map: munmap() racing a completion: rounds run",
		    done == UNMAP_ROUNDS, "%u of %u", done, UNMAP_ROUNDS);
	expect_true("map: munmap() racing a completion: no write lands after it",
		    !late, "in %u of %u rounds (munmap() took %ld us)", late,
		    done, unmap_us);
	free(io);
}
