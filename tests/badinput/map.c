// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: map mode: the parameters, mmap() rules and data window
 * of a map-mode device, its segments, and unmapping at the end of a request.
 */

#include "badinput.h"

/* ---- map mode: the data window ------------------------------------------- */

static sigjmp_buf probe_env;
static volatile sig_atomic_t probe_signal;

static void probe_handler(int sig)
{
	probe_signal = sig;
	siglongjmp(probe_env, 1);
}

/*
 * Touch one byte at @p (read it, or with @write write it back): 0 if that
 * worked, else the signal it raised (SIGBUS, SIGSEGV).
 */
static int probe(volatile unsigned char *p, int write)
{
	struct sigaction sa = { .sa_handler = probe_handler }, bus, segv;
	int sig = 0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &bus);
	sigaction(SIGSEGV, &sa, &segv);
	if (sigsetjmp(probe_env, 1) == 0) {
		unsigned char v = p[0];

		if (write)
			p[0] = v;
	} else {
		sig = probe_signal;
	}
	sigaction(SIGBUS, &bus, NULL);
	sigaction(SIGSEGV, &segv, NULL);
	return sig;
}

static const char *sig_name(int sig)
{
	return sig == SIGBUS ? "SIGBUS" : sig == SIGSEGV ? "SIGSEGV" :
	       sig ? "a signal" : "no fault";
}

static int all_bytes(const unsigned char *p, size_t len, unsigned char v)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* mmap the window of a connected queue: 0, or -1 with errno. */
int srv_map(struct srv *s, size_t len)
{
	void *w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);

	if (w == MAP_FAILED)
		return -1;
	s->win = w;
	s->win_len = len;
	return 0;
}

static void params_map(struct bius_device_params *p, const char *name,
		       uint32_t mode, uint32_t threshold)
{
	params_default(p, name);
	p->logical_block_size = 512;
	p->queue_depth = 4;
	p->transfer_mode = mode;
	p->map_threshold = threshold;
}

static void check_map_params(int ctl)
{
	struct bius_device_params p;
	struct bius_device_info info;
	size_t slot = BIUS_MAP_SLOT_BYTES(128 * KiB, page_size());
	int r, fd;
	void *w;

	params_map(&p, "bi-mp", BIUS_TRANSFER_MAP, 4096);
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
	expect_errno("map: map_threshold with TRANSFER_MAP", r, errno, EINVAL);
	params_map(&p, "bi-mp", BIUS_TRANSFER_SELECTIVE, 256 * KiB);
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
	expect_errno("map: map_threshold above max_io_bytes", r, errno,
		     EINVAL);
	params_map(&p, "bi-mp", 3, 0);
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
	expect_errno("map: transfer_mode 3", r, errno, EINVAL);

	/* SELECTIVE, default threshold: min(128 KiB, max_io_bytes) */
	params_map(&p, "bi-mp", BIUS_TRANSFER_SELECTIVE, 0);
	p.max_io_bytes = 64 * KiB;
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
	if (r == 0)
		r = get_info(ctl, p.dev_id, &info);
	expect_true("map: selective default threshold, window size in GET_INFO",
		    r == 0 && info.params.map_threshold == 64 * KiB &&
		    info.map_slot_bytes ==
		    BIUS_MAP_SLOT_BYTES(64 * KiB, page_size()) &&
		    info.map_window_bytes == 4ULL * info.map_slot_bytes,
		    "r=%d threshold=%u slot=%u window=%llu", r,
		    info.params.map_threshold, info.map_slot_bytes,
		    (unsigned long long)info.map_window_bytes);
	if (r == 0)
		do_destroy(ctl, p.dev_id, BIUS_DESTROY_FORCE);

	fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);
	w = mmap(NULL, 4 * slot, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	expect_errno("map: mmap of an unconnected fd", w == MAP_FAILED ? -1 : 0,
		     errno, ENOTCONN);
	if (w != MAP_FAILED)
		munmap(w, 4 * slot);
	close(fd);

	/* a copy-mode device has no window */
	params_map(&p, "bi-mp", BIUS_TRANSFER_COPY, 0);
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
	fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);
	if (r == 0)
		r = do_connect(fd, p.dev_id, 0);
	if (r == 0)
		r = get_info(ctl, p.dev_id, &info);
	w = r ? MAP_FAILED : mmap(NULL, 4 * slot, PROT_READ | PROT_WRITE,
				  MAP_SHARED, fd, 0);
	expect_true("map: copy mode has no window (GET_INFO 0, mmap EINVAL)",
		    r == 0 && !info.map_window_bytes && !info.map_slot_bytes &&
		    w == MAP_FAILED && errno == EINVAL, "r=%d window=%llu %s",
		    r, (unsigned long long)info.map_window_bytes,
		    strerror(errno));
	if (w != MAP_FAILED)
		munmap(w, 4 * slot);
	close(fd);
	do_destroy(ctl, p.dev_id, BIUS_DESTROY_FORCE);
}

/* The mmap() rules on a connected map-mode fd @fd, window @len bytes. */
static void check_map_mmap_rules(int fd, size_t len)
{
	size_t ps = page_size();
	void *w;

	w = mmap(NULL, len - ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	expect_errno("map: mmap shorter than the window", w == MAP_FAILED ? -1 : 0,
		     errno, EINVAL);
	w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, ps);
	expect_errno("map: mmap at offset 1 page", w == MAP_FAILED ? -1 : 0,
		     errno, EINVAL);
	w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	expect_errno("map: mmap MAP_PRIVATE", w == MAP_FAILED ? -1 : 0, errno,
		     EINVAL);
	w = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	expect_errno("map: mmap read-only", w == MAP_FAILED ? -1 : 0, errno,
		     EINVAL);
}

/* The rules of a mapped window @w of @len bytes (mapped once already). */
static void check_map_vma_rules(int fd, unsigned char *w, size_t len)
{
	size_t ps = page_size();
	void *w2;
	int r;

	w2 = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	expect_errno("map: second mmap of the fd", w2 == MAP_FAILED ? -1 : 0,
		     errno, EBUSY);
	r = munmap(w + ps, ps);
	expect_errno("map: partial munmap of the window", r, errno, EINVAL);
	r = mprotect(w, len, PROT_READ);
	expect_errno("map: mprotect of the window", r, errno, EACCES);
	expect_true("map: idle window pages read as zeroes (first, last page)",
		    !probe(w, 0) && !probe(w + len - 1, 0) &&
		    all_bytes(w, ps, 0) && all_bytes(w + len - ps, ps, 0),
		    "%s / %s", sig_name(probe(w, 0)),
		    sig_name(probe(w + len - 1, 0)));
	expect_true("map: writing idle window pages raises SIGBUS (zero page, unmapped)",
		    probe(w + 17, 1) == SIGBUS && probe(w + 5 * ps + 17, 1) == SIGBUS,
		    "%s / %s", sig_name(probe(w + 17, 1)),
		    sig_name(probe(w + 5 * ps + 17, 1)));
}

/*
 * The range @off..@off + @len of window @w after its request ended: reads
 * as zeroes, writing raises SIGBUS.
 */
static int window_idle(unsigned char *w, uint64_t off, size_t len)
{
	return !probe(w + off, 0) && all_bytes(w + off, len, 0) &&
	       probe(w + off, 1) == SIGBUS && probe(w + off + len - 1, 1) == SIGBUS;
}

/* Next request of queue 0 of @d: its header in @hdr; returns read()'s n. */
static ssize_t next_request(struct tdev *d, unsigned char *buf, size_t len,
			    struct bius_request *hdr)
{
	unsigned int qi;
	ssize_t n = wait_requests(d, buf, len, &qi, 5000);

	memset(hdr, 0, sizeof(*hdr));
	if (n >= (ssize_t)HDR)
		memcpy(hdr, buf, HDR);
	return n;
}

static int mapped_in_slot(const struct bius_request *h, size_t slot,
			  uint32_t depth)
{
	return (h->flags & BIUS_REQ_MAPPED) && h->window_offset / slot < depth &&
	       h->window_offset % slot + h->len <= slot;
}

/*
 * Data through the window, served by hand: aligned and misaligned buffers,
 * spare pages, read-only write payloads, unmapping at completion, the copy
 * fallback for fragmented buffers and small requests.
 */
static void check_map_data(void)
{
	struct bius_device_params p;
	struct bius_device_info info;
	size_t ps = page_size(), slot, len;
	unsigned char *buf = xalloc(256 * KiB), *io = xalloc(64 * KiB);
	unsigned char *want = xalloc(64 * KiB), *w;
	struct bius_request h;
	struct io_job job;
	struct tdev d;
	ssize_t n, r;
	int fd = -1, ok1;

	watchdog("map: data", 120);
	params_map(&p, "bi-map", BIUS_TRANSFER_SELECTIVE, 1024);
	if (tdev_create(&d, &p, NULL, "map: device comes up"))
		goto out;
	if (get_info(d.ctl, d.id, &info)) {
		not_ok("map: device comes up", "GET_INFO: %s", strerror(errno));
		goto out_destroy;
	}
	slot = info.map_slot_bytes;
	len = info.map_window_bytes;
	check_map_mmap_rules(d.srv[0].fd, len);
	if (srv_map(&d.srv[0], len)) {
		not_ok("map: mmap the window", "%s", strerror(errno));
		goto out_destroy;
	}
	ok("map: mmap the window");
	w = d.srv[0].win;
	check_map_vma_rules(d.srv[0].fd, w, len);
	if (tdev_wait_live(&d, "map: device comes up"))
		goto out_destroy;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("map: device comes up", "open: %s", strerror(errno));
		goto out_destroy;
	}
	ok("map: device comes up");

	/* an aligned read: the daemon writes the data into the window */
	io_start(&job, fd, 0, io, 8192, 64 * KiB, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	ok1 = n == HDR && h.op == BIUS_OP_READ && h.len == 8192 &&
	      mapped_in_slot(&h, slot, 4) && h.window_offset % ps == 0;
	expect_true("map: aligned read is mapped, page aligned, no payload", ok1,
		    "n=%zd op=%u len=%u flags=%#x off=%llu", n, h.op, h.len,
		    h.flags, (unsigned long long)h.window_offset);
	if (!ok1)
		goto out_destroy;
	expect_true("map: a mapped read's buffer is writable",
		    !probe(w + h.window_offset, 1) &&
		    !probe(w + h.window_offset + 8191, 1), "%s",
		    sig_name(probe(w + h.window_offset + 8191, 1)));
	fill_pattern(want, 8192, 21);
	memcpy(w + h.window_offset, want, 8192);
	r = send_completion(d.srv[0].fd, h.id, 0, want, 8192);
	expect_errno("map: mapped read completion with a payload", r, errno,
		     EINVAL);
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	expect_true("map: mapped read completes without payload; data arrives",
		    r == CMP && io_wait(&job, 5000) && job.ret == 8192 &&
		    !memcmp(io, want, 8192), "r=%zd ret=%zd", r, job.ret);
	expect_true("map: completed read's range is idle again (zeroes, SIGBUS on write)",
		    window_idle(w, h.window_offset, 8192), "%s",
		    sig_name(probe(w + h.window_offset, 1)));

	/* an aligned write: read-only in the window */
	fill_pattern(io, 8192, 22);
	io_start(&job, fd, 1, io, 8192, 128 * KiB, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	ok1 = n == HDR && h.op == BIUS_OP_WRITE && mapped_in_slot(&h, slot, 4);
	expect_true("map: aligned write is mapped, no payload in the stream",
		    ok1 && !memcmp(w + h.window_offset, io, 8192),
		    "n=%zd op=%u flags=%#x", n, h.op, h.flags);
	if (!ok1)
		goto out_destroy;
	expect_true("map: a mapped write's data is read-only (SIGBUS)",
		    probe(w + h.window_offset + 100, 1) == SIGBUS &&
		    !memcmp(w + h.window_offset, io, 8192), "%s",
		    sig_name(probe(w + h.window_offset + 100, 1)));
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	expect_true("map: mapped write completes; then its range is idle again",
		    r == CMP && io_wait(&job, 5000) && job.ret == 8192 &&
		    window_idle(w, h.window_offset, 8192), "r=%zd ret=%zd",
		    r, job.ret);

	/* a misaligned write inside one page: a spare page, no neighbours */
	memset(io, 0xa5, 3 * ps);
	fill_pattern(io + 512, 1024, 23);
	io_start(&job, fd, 1, io + 512, 1024, 192 * KiB, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	ok1 = n == HDR && mapped_in_slot(&h, slot, 4) &&
	      h.window_offset % ps == 512;
	expect_true("map: misaligned write lands at its offset in the page", ok1,
		    "n=%zd flags=%#x off=%llu", n, h.flags,
		    (unsigned long long)h.window_offset);
	if (!ok1)
		goto out_destroy;
	expect_true("map: partly covered page shows the data, zeroes around it",
		    !memcmp(w + h.window_offset, io + 512, 1024) &&
		    all_bytes(w + h.window_offset - 512, 512, 0) &&
		    all_bytes(w + h.window_offset + 1024, ps - 1536, 0),
		    "neighbouring bytes of the buffer are visible");
	memset(io + 512, 0x3c, 1024);	/* the writer's own business */
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	ok1 = io_wait(&job, 5000);
	expect_true("map: misaligned write completes", r == CMP && ok1 &&
		    job.ret == 1024, "r=%zd done=%d ret=%zd", r, ok1, job.ret);
	expect_true("map: a completed write copies nothing back to its buffer",
		    all_bytes(io + 512, 1024, 0x3c), "spare page copied back");

	/* a misaligned read over three pages: the daemon scribbles outside */
	memset(io, 0xa5, 4 * ps);
	io_start(&job, fd, 0, io + 512, 2 * ps, 256 * KiB, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	ok1 = n == HDR && h.op == BIUS_OP_READ && h.len == 2 * ps &&
	      mapped_in_slot(&h, slot, 4) && h.window_offset % ps == 512;
	expect_true("map: misaligned read over 3 pages is mapped", ok1,
		    "n=%zd len=%u flags=%#x off=%llu", n, h.len, h.flags,
		    (unsigned long long)h.window_offset);
	if (!ok1)
		goto out_destroy;
	expect_true("map: its spare pages start zeroed",
		    all_bytes(w + h.window_offset - 512, 512, 0) &&
		    all_bytes(w + h.window_offset + 2 * ps, ps - 512, 0),
		    "the reader's buffer is visible around the data");
	fill_pattern(want, 2 * ps, 24);
	memcpy(w + h.window_offset, want, 2 * ps);
	memset(w + h.window_offset - 512, 0xee, 512);
	memset(w + h.window_offset + 2 * ps, 0xee, ps - 512);
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	expect_true("map: misaligned read: data arrives, bytes around it kept",
		    r == CMP && io_wait(&job, 5000) && job.ret == (ssize_t)(2 * ps) &&
		    !memcmp(io + 512, want, 2 * ps) && all_bytes(io, 512, 0xa5) &&
		    all_bytes(io + 512 + 2 * ps, ps - 512, 0xa5),
		    "r=%zd ret=%zd data %s, head %s, tail %s", r, job.ret,
		    memcmp(io + 512, want, 2 * ps) ? "wrong" : "ok",
		    all_bytes(io, 512, 0xa5) ? "kept" : "overwritten",
		    all_bytes(io + 512 + 2 * ps, ps - 512, 0xa5) ? "kept" :
		    "overwritten");

	/* buffers not ending at page ends: one segment, three spare pages */
	{
		struct iovec iov[4];
		unsigned int i;

		for (i = 0; i < 4; i++) {
			iov[i].iov_base = io + i * ps + 1024;
			iov[i].iov_len = 2048;
		}
		memset(io, 0, 4 * ps);
		io_start_iov(&job, fd, 0, iov, 4, 320 * KiB, -1);
		n = next_request(&d, buf, 64 * KiB, &h);
		ok1 = n == HDR && h.op == BIUS_OP_READ && h.len == 8192 &&
		      mapped_in_slot(&h, slot, 4) && !h.nr_segments &&
		      h.window_offset % ps == 1024;
		expect_true("map: 4 buffers inside pages: one piece, spare pages",
			    ok1, "n=%zd len=%u flags=%#x segs=%u", n, h.len,
			    h.flags, h.nr_segments);
		if (!ok1)
			goto out_destroy;
		fill_pattern(want, 8192, 25);
		memcpy(w + h.window_offset, want, 8192);
		r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
		ok1 = r == CMP && io_wait(&job, 5000) && job.ret == 8192;
		for (i = 0; ok1 && i < 4; i++)
			ok1 = !memcmp(io + i * ps + 1024, want + i * 2048, 2048) &&
			      all_bytes(io + i * ps, 1024, 0) &&
			      all_bytes(io + i * ps + 3072, 1024, 0);
		expect_true("map: its data arrives in the 4 buffers, nothing else",
			    ok1, "r=%zd ret=%zd", r, job.ret);
	}

	/* below the threshold: copied */
	io_start(&job, fd, 0, io, 512, 0, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	expect_true("map: request below the selective threshold is copied",
		    n == HDR && h.len == 512 && !(h.flags & BIUS_REQ_MAPPED),
		    "n=%zd len=%u flags=%#x", n, h.len, h.flags);
	r = send_completion(d.srv[0].fd, h.id, 0, d.mem, 512);
	expect_true("map: copied small read completes", r == CMP + 512 &&
		    io_wait(&job, 5000) && job.ret == 512, "r=%zd", r);

	/* a graceful destroy with the window still mapped */
	close(fd);
	fd = -1;
	tdev_serve_in_threads(&d);
	r = do_destroy(d.ctl, d.id, 0);
	expect_true("map: graceful destroy with the window mapped", r == 0 &&
		    tdev_join(&d, 10000), "%s", strerror(errno));
	goto out;

out_destroy:
	if (fd >= 0)
		close(fd);
	tdev_force_down(&d);
out:
	tdev_free(&d);
	free(buf);
	free(io);
	free(want);
}

/*
 * The request record at @buf (read() returned @n bytes) with its segment
 * records in @seg: 1 if it is a mapped request of @len bytes in @nsegs
 * pieces at @off[i]/@lens[i] from its slot's start @slot_base.
 */
static int segments_are(const unsigned char *buf, ssize_t n,
			const struct bius_request *h, size_t slot,
			struct bius_segment *seg, unsigned int nsegs,
			const uint32_t *off, const uint32_t *lens,
			uint64_t *slot_base)
{
	unsigned int i;

	if (n != (ssize_t)(HDR + nsegs * sizeof(*seg)) ||
	    !(h->flags & BIUS_REQ_MAPPED) || h->nr_segments != nsegs)
		return 0;
	memcpy(seg, buf + HDR, nsegs * sizeof(*seg));
	*slot_base = seg[0].window_offset / slot * slot;
	if (h->window_offset != seg[0].window_offset)
		return 0;
	for (i = 0; i < nsegs; i++)
		if (seg[i].window_offset != *slot_base + off[i] ||
		    seg[i].len != lens[i] || seg[i].reserved)
			return 0;
	return 1;
}

/*
 * Requests whose buffer segments do not line up come as segment lists:
 * whole buffer pages mapped, partial ones in spare pages, nothing around
 * them visible; the pool of spare pages and the read buffer's room limit
 * them, and past those limits they are copied.
 */
static void check_map_segments(void)
{
	/* 3 buffers: p0 tail + p1, p3 tail + p4, p6 head (ps 4096) */
	static const uint32_t boff[3] = { 3584, 3 * 4096 + 2048, 6 * 4096 };
	static const uint32_t blen[3] = { 4608, 6144, 1024 };
	/* in the slot: 2 pieces, the second starting at p3's offset */
	static const uint32_t soff[2] = { 3584, 2 * 4096 + 2048 };
	static const uint32_t slen[2] = { 4608, 7168 };
	struct bius_segment seg[BIUS_MAP_MAX_SEGMENTS];
	struct bius_device_params p;
	struct bius_device_info info;
	unsigned char *buf = xalloc(64 * KiB), *io = xalloc(96 * KiB);
	unsigned char *want = xalloc(64 * KiB), *w;
	struct iovec iov[IO_MAX_IOV];
	struct bius_request h;
	struct io_job job;
	uint64_t base = 0;
	unsigned int i;
	size_t at;
	struct tdev d;
	ssize_t n, r;
	int fd = -1, ok1;

	if (page_size() != 4096) {
		skip("map: segment lists", "page size is not 4 KiB");
		goto free;
	}
	watchdog("map: segment lists", 90);
	params_map(&p, "bi-seg", BIUS_TRANSFER_MAP, 0);
	if (tdev_up(&d, &p, "map: segment device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0 || get_info(d.ctl, d.id, &info) ||
	    srv_map(&d.srv[0], info.map_window_bytes)) {
		not_ok("map: segment device comes up", "%s", strerror(errno));
		goto out_destroy;
	}
	ok("map: segment device comes up");
	w = d.srv[0].win;
	for (i = 0; i < 3; i++) {
		iov[i].iov_base = io + boff[i];
		iov[i].iov_len = blen[i];
	}

	/* a write: 2 pieces, the whole buffer pages mapped read-only */
	memset(io, 0xa5, 8 * 4096);
	fill_pattern(want, 11776, 31);
	for (i = 0, at = 0; i < 3; at += blen[i], i++)
		memcpy(io + boff[i], want + at, blen[i]);
	io_start_iov(&job, fd, 1, iov, 3, 64 * KiB, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	ok1 = h.op == BIUS_OP_WRITE && h.len == 11776 &&
	      segments_are(buf, n, &h, info.map_slot_bytes, seg, 2, soff, slen,
			   &base);
	expect_true("map: write from 3 unaligned buffers comes as 2 segments",
		    ok1, "n=%zd op=%u len=%u flags=%#x segs=%u", n, h.op, h.len,
		    h.flags, h.nr_segments);
	if (!ok1)
		goto out_destroy;
	expect_true("map: the segments hold the data, zeroes around them",
		    !memcmp(w + seg[0].window_offset, want, 4608) &&
		    !memcmp(w + seg[1].window_offset, want + 4608, 7168) &&
		    all_bytes(w + base, 3584, 0) &&
		    all_bytes(w + base + 2 * 4096, 2048, 0) &&
		    all_bytes(w + base + 4 * 4096 + 1024, 3072, 0),
		    "the window shows other bytes");
	expect_true("map: the segments' whole pages are read-only",
		    probe(w + base + 4096, 1) == SIGBUS &&
		    probe(w + base + 3 * 4096, 1) == SIGBUS, "%s",
		    sig_name(probe(w + base + 4096, 1)));
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	expect_true("map: segmented write completes; its range is idle again",
		    r == CMP && io_wait(&job, 5000) && job.ret == 11776 &&
		    window_idle(w, base, 5 * 4096), "r=%zd ret=%zd", r, job.ret);

	/* a read of the same shape: whole pages are the reader's own */
	memset(io, 0xa5, 8 * 4096);
	io_start_iov(&job, fd, 0, iov, 3, 64 * KiB, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	ok1 = h.op == BIUS_OP_READ &&
	      segments_are(buf, n, &h, info.map_slot_bytes, seg, 2, soff, slen,
			   &base);
	expect_true("map: read into 3 unaligned buffers comes as 2 segments",
		    ok1, "n=%zd op=%u flags=%#x segs=%u", n, h.op, h.flags,
		    h.nr_segments);
	if (!ok1)
		goto out_destroy;
	fill_pattern(want, 11776, 32);
	memcpy(w + seg[0].window_offset, want, 4608);
	memcpy(w + seg[1].window_offset, want + 4608, 7168);
	memset(w + base, 0xee, 3584);
	memset(w + base + 2 * 4096, 0xee, 2048);
	memset(w + base + 4 * 4096 + 1024, 0xee, 3072);
	expect_true("map: a whole page is mapped (data there before completion), a partial one is not",
		    !memcmp(io + 4096, want + 512, 4096) &&
		    all_bytes(io + 3584, 512, 0xa5), "whole page %s, partial %s",
		    memcmp(io + 4096, want + 512, 4096) ? "not there" : "there",
		    all_bytes(io + 3584, 512, 0xa5) ? "untouched" : "written");
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	ok1 = r == CMP && io_wait(&job, 5000) && job.ret == 11776;
	for (i = 0, at = 0; ok1 && i < 3; at += blen[i], i++)
		ok1 = !memcmp(io + boff[i], want + at, blen[i]);
	expect_true("map: segmented read: data arrives, bytes around it kept",
		    ok1 && all_bytes(io, 3584, 0xa5) &&
		    all_bytes(io + 2 * 4096, 4096 + 2048, 0xa5) &&
		    all_bytes(io + 5 * 4096, 4096, 0xa5) &&
		    all_bytes(io + 6 * 4096 + 1024, 3072, 0xa5),
		    "ret=%zd", job.ret);

	/* the same read with room for one segment record only: copied */
	io_start_iov(&job, fd, 0, iov, 3, 64 * KiB, -1);
	n = next_request(&d, buf, HDR + sizeof(seg[0]), &h);
	expect_true("map: no room for the segment records: copied",
		    n == HDR && h.op == BIUS_OP_READ &&
		    !(h.flags & BIUS_REQ_MAPPED) && !h.nr_segments,
		    "n=%zd flags=%#x segs=%u", n, h.flags, h.nr_segments);
	r = send_completion(d.srv[0].fd, h.id, 0, d.mem, 11776);
	expect_true("map: the copied read completes", r == CMP + 11776 &&
		    io_wait(&job, 5000) && job.ret == 11776, "r=%zd", r);

	/*
	 * 512 bytes at the end of each of n pages: n pieces and spare pages;
	 * the pool has 2 per tag (8): 8 fit (so every earlier request gave
	 * its spare pages back), 9 do not.
	 */
	for (i = 0; i < 9; i++) {
		iov[i].iov_base = io + (2 * i) * 4096 + 3584;
		iov[i].iov_len = 512;
	}
	io_start_iov(&job, fd, 0, iov, 8, 0, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	ok1 = n == (ssize_t)(HDR + 8 * sizeof(seg[0])) && h.nr_segments == 8 &&
	      (h.flags & BIUS_REQ_MAPPED);
	expect_true("map: 8 pieces use the whole spare pool: mapped", ok1,
		    "n=%zd flags=%#x segs=%u", n, h.flags, h.nr_segments);
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	io_wait(&job, 5000);
	io_start_iov(&job, fd, 0, iov, 9, 0, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	expect_true("map: 9 pieces need more spare pages than the pool: copied",
		    n == HDR && !(h.flags & BIUS_REQ_MAPPED) && !h.nr_segments,
		    "n=%zd flags=%#x segs=%u", n, h.flags, h.nr_segments);
	r = send_completion(d.srv[0].fd, h.id, 0, d.mem, 9 * 512);
	expect_true("map: the copied 9-piece read completes",
		    r == CMP + 9 * 512 && io_wait(&job, 5000) &&
		    job.ret == 9 * 512, "r=%zd ret=%zd", r, job.ret);
	r = get_info(d.ctl, d.id, &info);
	expect_true("map: GET_INFO counts 3 mapped requests, all segmented",
		    r == 0 && info.mapped_requests == 3 &&
		    info.segmented_requests == 3, "r=%zd mapped=%llu segmented=%llu",
		    r, (unsigned long long)info.mapped_requests,
		    (unsigned long long)info.segmented_requests);

out_destroy:
	if (fd >= 0)
		close(fd);
	tdev_force_down(&d);
out:
	tdev_free(&d);
free:
	free(buf);
	free(io);
	free(want);
}

/* A daemon thread still reading an aborted request's range. */
struct reader {
	volatile unsigned char *p;
	atomic_int stop;
	pthread_t thread;
};

static void *reader_run(void *arg)
{
	struct reader *rd = arg;

	while (!rd->stop)
		(void)rd->p[0];
	return NULL;
}

/*
 * A mapped request that times out, or whose device dies, is unmapped
 * before it ends; no window means copying.
 */
static void check_map_end(void)
{
	struct bius_device_params p;
	struct bius_device_info info;
	unsigned char *buf = xalloc(64 * KiB), *io = xalloc(64 * KiB), *w;
	struct bius_request h;
	struct reader rd = { 0 };
	struct io_job job;
	struct tdev d;
	ssize_t n, r;
	int fd = -1, ok1;

	watchdog("map: timeout and death", 90);
	params_map(&p, "bi-mapend", BIUS_TRANSFER_MAP, 0);
	p.timeout_ms = 1000;
	if (tdev_up(&d, &p, "map: device without a window comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0 || get_info(d.ctl, d.id, &info)) {
		not_ok("map: device without a window comes up", "%s",
		       strerror(errno));
		goto out_destroy;
	}
	ok("map: device without a window comes up");

	io_start(&job, fd, 0, io, 4096, 0, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	expect_true("map: without a window requests are copied",
		    n == HDR && !(h.flags & BIUS_REQ_MAPPED), "n=%zd flags=%#x",
		    n, h.flags);
	r = send_completion(d.srv[0].fd, h.id, 0, d.mem, 4096);
	io_wait(&job, 5000);

	if (srv_map(&d.srv[0], info.map_window_bytes)) {
		not_ok("map: mmap the window of a live device", "%s",
		       strerror(errno));
		goto out_destroy;
	}
	ok("map: mmap the window of a live device");
	w = d.srv[0].win;

	/* delivered, never answered: times out, its buffer out of reach */
	memset(io, 0x5a, 16384);
	io_start(&job, fd, 0, io, 16384, 4096, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	expect_true("map: request mapped once the window is",
		    n == HDR && (h.flags & BIUS_REQ_MAPPED) &&
		    !probe(w + h.window_offset, 1), "n=%zd flags=%#x", n,
		    h.flags);
	/* read on through the timeout: faults then map the sink page too */
	rd.p = w + h.window_offset;
	rd.stop = pthread_create(&rd.thread, NULL, reader_run, &rd) != 0;
	ok1 = io_wait(&job, 10000);
	if (!rd.stop) {
		rd.stop = 1;
		pthread_join(rd.thread, NULL);
	}
	expect_true("map: unanswered mapped request times out",
		    ok1 && job.ret < 0, "done=%d ret=%zd", ok1, job.ret);
	/* a daemon still at work must not fault: the sink page */
	ok1 = !probe(w + h.window_offset, 1) &&
	      !probe(w + h.window_offset + 12288, 1);
	if (ok1)
		memset(w + h.window_offset, 0xee, 16384);
	expect_true("map: timed-out range maps a sink page, not the buffer",
		    ok1 && all_bytes(io, 16384, 0x5a), "%s, buffer %s",
		    sig_name(probe(w + h.window_offset, 1)),
		    all_bytes(io, 16384, 0x5a) ? "kept" : "changed");
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	expect_errno("map: late completion of the timed-out request", r, errno,
		     ENOENT);
	/* the tag's next request finds its own data there again */
	fill_pattern(io, 16384, 31);
	io_start(&job, fd, 1, io, 16384, 4096, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	ok1 = n == HDR && (h.flags & BIUS_REQ_MAPPED) &&
	      !memcmp(w + h.window_offset, io, 16384);
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	expect_true("map: next request of a sunk slot shows its own data",
		    ok1 && r == CMP && io_wait(&job, 5000) && job.ret == 16384,
		    "n=%zd flags=%#x r=%zd", n, h.flags, r);

	/* in flight when the device dies (its creator's fd is closed) */
	io_start(&job, fd, 1, io, 8192, 8192, -1);
	n = next_request(&d, buf, 64 * KiB, &h);
	expect_true("map: write in flight is mapped",
		    n == HDR && (h.flags & BIUS_REQ_MAPPED) &&
		    !probe(w + h.window_offset, 0), "n=%zd flags=%#x", n,
		    h.flags);
	close(d.ctl);
	d.ctl = -1;
	expect_true("map: device death fails the mapped request",
		    io_wait(&job, 10000) && job.ret < 0, "ret=%zd", job.ret);
	expect_true("map: and takes its data out of the window (sink page)",
		    !probe(w + h.window_offset, 0) &&
		    memcmp(w + h.window_offset, io, 8192), "%s",
		    sig_name(probe(w + h.window_offset, 0)));
	n = read(d.srv[0].fd, buf, 64 * KiB);
	expect_true("map: queue reads end of file with the window mapped",
		    n == 0, "n=%zd", n);
	close(fd);
	goto out;

out_destroy:
	if (fd >= 0)
		close(fd);
	if (d.ctl >= 0)
		do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
out:
	tdev_free(&d);
	free(buf);
	free(io);
}

void check_map(void)
{
	int ctl = ctl_open();

	watchdog("map: parameters", 60);
	check_map_params(ctl);
	close(ctl);
	check_map_data();
	check_map_segments();
	check_map_end();
	check_map_unmap_race();
}
