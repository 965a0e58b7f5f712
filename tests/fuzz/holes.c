// SPDX-License-Identifier: GPL-2.0
/*
 * The classes of bius_fuzz that the second kernel review taught it: user
 * pointers the kernel cannot write or read all of (a buffer whose first
 * bytes are followed by an inaccessible or a read-only page) for the
 * request and completion streams, COMPLETE_FETCH and the ioctls; device
 * names that collide with bius<N> and with partitions (the I/O role writes
 * partition tables for that); a daemon that holds its own mmap_lock while
 * it waits for its disk, with mmap()s queued behind it (the holder).
 * Scheduler switches and stale completions are io-sched's and the lies'
 * (unknown id).
 */

#include "serve.h"

/* A page with a page after it that cannot be written (@ro: read-only). */
static unsigned char *edge_page(int ro)
{
	static unsigned char *page[2];
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *p;

	if (page[ro])
		return page[ro];
	p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, pg);
	mprotect(p + pg, pg, ro ? PROT_READ : PROT_NONE);
	page[ro] = p;
	return p;
}

/*
 * @good accessible bytes, then a page that cannot be written (NULL if
 * none): inaccessible, or read-only unless the kernel is to read there
 * (@in: a read-only page is no edge to what the kernel reads).
 */
static void *edge(struct rng *r, unsigned int good, int in)
{
	unsigned char *p = edge_page(!in && rng_pct(r, 50));

	return p ? p + sysconf(_SC_PAGESIZE) - good : NULL;
}

/*
 * Daemon: read() (or COMPLETE_FETCH) with a request waiting, into a buffer
 * with fewer writable bytes than a header: EFAULT at once, or the bytes
 * of a payload that fit (copied to q->rbuf); a completion across such an
 * edge is refused.  The result as read() returns it, -2 for nothing to
 * consume.
 */
ssize_t edge_fetch(struct queue *q)
{
	struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
	unsigned int good = rng_below(&q->rng, HDR);
	unsigned char *buf = edge(&q->rng, good, 0);
	size_t len = HDR + rng_below(&q->rng, 4096);
	ssize_t n;

	if (!buf)
		return -2;
	must_fail(q->st, "a completion across an inaccessible page",
		  write(q->fd, edge(&q->rng, rng_below(&q->rng, CMP), 1), CMP));
	if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLIN))
		return -2;
	count(q->st, F_EDGES);
	if (q->use_cf) {
		struct bius_complete_fetch cf = {
			.requests = (uintptr_t)buf, .requests_len = len,
		};

		n = ioctl(q->fd, BIUS_IOC_COMPLETE_FETCH, &cf);
	} else {
		n = read(q->fd, buf, len);
	}
	if (n > (ssize_t)good)
		broken("a read() into %u writable bytes delivered %zd", good,
		       n);
	if (n > 0) {
		memcpy(q->rbuf, buf, n);
		return n;
	}
	if (n < 0 && errno == EFAULT) {
		note(q->st, -1);
		return -2;
	}
	return n;
}

/* Chaos: the ioctls' structures across an edge: each refused. */
int act_bad_pointers(struct worker *w)
{
	struct slot *s = slot_pick(&w->rng, 0);
	int ctl = note(w->st, open(CTL_PATH, O_RDWR | O_CLOEXEC));
	struct bius_device_list *l;
	struct bius_device_info *info;
	void *p;

	if (ctl < 0)
		return -1;
	/* GET_INFO: the id readable, the rest of the reply not writable */
	info = edge(&w->rng, 4 + rng_below(&w->rng, sizeof(*info) - 4), 0);
	if (info) {
		info->dev_id = s ? s->dev_id : 0;
		must_fail(w->st, "GET_INFO into a short buffer",
			  ioctl(ctl, BIUS_IOC_GET_INFO, info));
	}
	l = edge(&w->rng, sizeof(*l) + 8, 0);
	if (l) {
		l->capacity = 8;
		l->ids = (uintptr_t)((unsigned char *)l + sizeof(*l) + 4);
		l->count = 0;
		if (note(w->st, ioctl(ctl, BIUS_IOC_LIST_DEVICES, l)) == 0 &&
		    l->count > 1)
			broken("LIST_DEVICES wrote %u ids past a page it cannot write",
			       l->count);
	}
	p = edge(&w->rng, rng_below(&w->rng, sizeof(struct bius_device_params)), 1);
	must_fail(w->st, "CREATE from a short buffer",
		  ioctl(ctl, BIUS_IOC_CREATE_DEVICE, p));
	must_fail(w->st, "RECOVER from a short buffer",
		  ioctl(ctl, BIUS_IOC_RECOVER_DEVICE, p));
	p = edge(&w->rng, rng_below(&w->rng, sizeof(struct bius_complete_fetch)), 1);
	must_fail(w->st, "COMPLETE_FETCH from a short buffer",
		  ioctl(ctl, BIUS_IOC_COMPLETE_FETCH, p));
	close(ctl);
	return 0;
}

/*
 * Chaos: CREATE with the name of a device the pool may have (bius<N>) or
 * of a partition of one of its disks, then unnamed: a taken name is
 * EEXIST, an unnamed CREATE never is.  What it creates is closed (so
 * removed) at once.
 */
int act_bad_names(struct worker *w)
{
	struct slot *s = slot_pick(&w->rng, 1);
	struct bius_device_params p;
	int ctl = note(w->st, open(CTL_PATH, O_RDWR | O_CLOEXEC)), r;

	if (ctl < 0)
		return -1;
	memset(&p, 0, sizeof(p));
	p.abi_version = BIUS_ABI_VERSION;
	p.size = 1 * MiB;
	p.logical_block_size = 512;
	p.nr_hw_queues = 1;
	p.queue_depth = 4;
	if (s && rng_pct(&w->rng, 50))
		snprintf(p.name, sizeof(p.name), "%.24s%s1", s->disk,
			 s->disk[0] && s->disk[strlen(s->disk) - 1] >= '0' &&
			 s->disk[strlen(s->disk) - 1] <= '9' ? "p" : "");
	else
		snprintf(p.name, sizeof(p.name), "bius%u",
			 rng_below(&w->rng, 16));
	r = note(w->st, ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p));
	if (r < 0 && errno != EEXIST)
		broken("CREATE named %s failed with %s, not EEXIST", p.name,
		       strerror(errno));
	count(w->st, F_NAMES);
	p.name[0] = 0;
	r = note(w->st, ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p));
	if (r < 0 && errno == EEXIST)
		broken("an unnamed CREATE failed with EEXIST");
	close(ctl);
	return 0;
}

/*
 * I/O: a partition table (one partition) in block 0 of a disk that is not
 * zoned, and BLKRRPART, so that the disk has a partition to collide with.
 * Block 0 is no verify block (they start at 1).
 */
int act_io_mbr(struct worker *w)
{
	struct slot *s = slot_pick(&w->rng, 1);
	unsigned char *mbr = w->buf, *e = w->buf + 446;
	uint32_t start = 8, nr = 16, gen;
	int fd;

	if (!s || (s->p.features & (BIUS_FEATURE_ZONED |
				    BIUS_FEATURE_READ_ONLY)))
		return -1;
	fd = note(w->st, disk_open(s, O_RDWR | O_DIRECT, &gen));
	if (fd < 0)
		return -1;
	memset(mbr, 0, BLK);
	e[4] = 0x83;
	memcpy(e + 8, &start, 4);
	memcpy(e + 12, &nr, 4);
	mbr[510] = 0x55;
	mbr[511] = 0xaa;
	if (note(w->st, pwrite(fd, mbr, BLK, 0)) == BLK)
		note(w->st, ioctl(fd, BLKRRPART, 0));
	close(fd);
	return 0;
}

/*
 * Daemon: a thread that reads pages of the daemon's own disk through
 * /proc/self/mem over a mapping of it (GUP holds the mmap_lock through the
 * fault's read, which the daemon's queues serve), pages evicted first, and
 * one that mmap()s and munmap()s meanwhile (a writer queued behind it):
 * the queues go on serving, by copy when read() finds the lock taken, and
 * completions, timeouts, losses and recoveries never wait for that lock.
 */
struct holder {
	struct slot *s;
	struct stats *st;
	int bfd, memfd;
	unsigned char *map;
	size_t len;
	struct rng rng;
	int stop;
	pthread_t reader, mapper;
};

static void *holder_read(void *arg)
{
	struct holder *h = arg;
	static __thread unsigned char buf[4096];
	off_t off;

	while (!__atomic_load_n(&h->stop, __ATOMIC_RELAXED)) {
		off = (off_t)rng_below(&h->rng, h->len / 4096) * 4096;
		posix_fadvise(h->bfd, off, 4096, POSIX_FADV_DONTNEED);
		if (pread(h->memfd, buf, sizeof(buf),
			  (off_t)(uintptr_t)(h->map + off)) == sizeof(buf))
			count(h->st, F_HOLDS);
		bius_sleep_ms(rng_below(&h->rng, 20));
	}
	return NULL;
}

static void *holder_map(void *arg)
{
	struct holder *h = arg;
	void *p;

	while (!__atomic_load_n(&h->stop, __ATOMIC_RELAXED)) {
		p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		if (p != MAP_FAILED)
			munmap(p, 4096);
		bius_sleep_ms(1);
	}
	return NULL;
}

/* Start a holder on the LIVE disk of @s; NULL if it cannot be. */
struct holder *holder_start(struct slot *s, struct stats *st, uint64_t seed)
{
	struct holder *h = calloc(1, sizeof(*h));
	uint32_t gen;

	if (!h)
		return NULL;
	h->s = s;
	h->st = st;
	rng_seed(&h->rng, seed, 1);
	h->len = s->p.size < 16 * MiB ? s->p.size : 16 * MiB;
	h->bfd = note(st, disk_open(s, O_RDONLY, &gen));
	h->memfd = note(st, open("/proc/self/mem", O_RDONLY | O_CLOEXEC));
	h->map = h->bfd < 0 || h->len < 4096 ? MAP_FAILED :
		 mmap(NULL, h->len, PROT_READ, MAP_SHARED, h->bfd, 0);
	if (h->memfd < 0 || h->map == MAP_FAILED)
		goto fail;
	madvise(h->map, h->len, MADV_RANDOM);	/* a page per fault */
	if (pthread_create(&h->reader, NULL, holder_read, h))
		goto fail;
	if (pthread_create(&h->mapper, NULL, holder_map, h)) {
		h->stop = 1;
		pthread_join(h->reader, NULL);
		goto fail;
	}
	return h;
fail:
	if (h->map != MAP_FAILED && h->map)
		munmap(h->map, h->len);
	if (h->bfd >= 0)
		close(h->bfd);
	if (h->memfd >= 0)
		close(h->memfd);
	free(h);
	return NULL;
}

/*
 * Stop it: its read ends, served or failed, within a request timeout and
 * a recovery's (the device's) plus a margin, or the driver waits for the
 * lock it holds.
 */
void holder_stop(struct holder *h)
{
	const struct bius_device_params *p;
	long end;

	if (!h)
		return;
	__atomic_store_n(&h->stop, 1, __ATOMIC_RELAXED);
	p = &h->s->p;
	end = bius_now_ms() + (p->timeout_ms ? p->timeout_ms :
			       BIUS_DEFAULT_TIMEOUT_MS) +
	      p->recover_timeout_ms + 10000;
	while (pthread_tryjoin_np(h->reader, NULL) == EBUSY) {
		if (bius_now_ms() > end) {
			broken("a read of device %u's disk through /proc/self/mem (mmap_lock held) still waits after its request timeout",
			       h->s->dev_id);
			return;
		}
		bius_sleep_ms(10);
	}
	pthread_join(h->mapper, NULL);
	munmap(h->map, h->len);
	close(h->bfd);
	close(h->memfd);
	free(h);
}
