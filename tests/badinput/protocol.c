// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: the live round trip through a disk served by threads,
 * the feature bits, the request/completion stream with its refused
 * completions, and a device that moves no data.
 */

#include "badinput.h"

/* Round trip through a disk served by threads; graceful destroy. */
void check_live_roundtrip(void)
{
	struct bius_device_params p;
	struct bius_device_info info;
	unsigned char *wbuf = xalloc(256 * KiB), *rbuf = xalloc(256 * KiB);
	struct tdev d;
	int fd, r;
	ssize_t n;

	watchdog("live round trip", 90);
	params_default(&p, "bi-live");
	p.features = BIUS_FEATURE_WRITE_CACHE | BIUS_FEATURE_FUA |
		     BIUS_FEATURE_DISCARD;
	/* the queue thread busy-waits for requests: all below holds so */
	p.poll_usecs = BIUS_MAX_POLL_USECS;
	if (tdev_up(&d, &p, "live device comes up"))
		goto out;
	ok("live device comes up");
	tdev_serve_in_threads(&d);

	r = get_info(d.ctl, d.id, &info);
	expect_true("GET_INFO of a LIVE device", r == 0 &&
		    info.state == BIUS_STATE_LIVE && info.nr_connected == 1 &&
		    !strcmp(info.disk_name, "bi-live") &&
		    info.params.poll_usecs == BIUS_MAX_POLL_USECS,
		    "state=%u disk=%s poll_usecs=%u", info.state,
		    info.disk_name, info.params.poll_usecs);
	expect_true("sysfs size and block size",
		    sysfs_long(d.name, "size") == (long)(p.size / 512) &&
		    sysfs_long(d.name, "queue/logical_block_size") == 4096 &&
		    sysfs_long(d.name, "queue/max_hw_sectors_kb") == 128,
		    "size=%ld lbs=%ld max_hw_kb=%ld",
		    sysfs_long(d.name, "size"),
		    sysfs_long(d.name, "queue/logical_block_size"),
		    sysfs_long(d.name, "queue/max_hw_sectors_kb"));

	expect_true("sysfs: write back cache, FUA, discard, non-rotational",
		    sysfs_is(d.name, "queue/write_cache", "write back") &&
		    sysfs_is(d.name, "queue/fua", "1") &&
		    sysfs_is(d.name, "queue/rotational", "0") &&
		    sysfs_is(d.name, "ro", "0") &&
		    sysfs_long(d.name, "queue/discard_max_hw_bytes") > 0 &&
		    sysfs_long(d.name, "queue/write_zeroes_max_bytes") == 0,
		    "write_cache/fua/rotational/ro/discard/write_zeroes wrong");

	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("O_DIRECT write+read round trip", "open /dev/%s: %s",
		       d.name, strerror(errno));
		goto destroy;
	}
	fill_pattern(wbuf, 256 * KiB, 1);
	n = pwrite(fd, wbuf, 256 * KiB, 1 * MiB);
	if (n == (ssize_t)(256 * KiB))
		n = pread(fd, rbuf, 256 * KiB, 1 * MiB);
	expect_true("O_DIRECT write+read round trip",
		    n == (ssize_t)(256 * KiB) &&
		    !memcmp(wbuf, rbuf, 256 * KiB) &&
		    !memcmp(d.mem + MiB, wbuf, 256 * KiB),
		    "n=%zd (%s)", n, strerror(errno));
	r = fsync(fd);
	expect_true("fsync (FLUSH) succeeds", r == 0, "%s", strerror(errno));
	{
		uint64_t range[2] = { 1 * MiB, 64 * KiB };

		r = ioctl(fd, BLKDISCARD, range);
		n = pread(fd, rbuf, 64 * KiB, 1 * MiB);
		expect_true("discard reaches the daemon", r == 0 &&
			    n == (ssize_t)(64 * KiB) && rbuf[0] == 0 &&
			    rbuf[64 * KiB - 1] == 0 && d.mem[MiB] == 0,
			    "r=%d n=%zd (%s)", r, n, strerror(errno));
	}

	r = do_destroy(d.ctl, d.id, 0);
	expect_errno("DESTROY with the disk open", r, errno, EBUSY);
	close(fd);

	/* Dirty page cache must reach the daemon on a forced destroy. */
	fd = disk_open(d.name, O_RDWR);
	fill_pattern(wbuf, 64 * KiB, 9);
	n = fd < 0 ? -1 : pwrite(fd, wbuf, 64 * KiB, 2 * MiB);
	r = do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	expect_true("DESTROY FORCE with the disk open", r == 0, "%s",
		    strerror(errno));
	expect_true("forced destroy flushes dirty data through the daemon",
		    n == (ssize_t)(64 * KiB) &&
		    !memcmp(d.mem + 2 * MiB, wbuf, 64 * KiB),
		    "n=%zd, data %s", n,
		    memcmp(d.mem + 2 * MiB, wbuf, 64 * KiB) ? "lost" : "ok");
	if (fd >= 0) {
		n = pread(fd, rbuf, 4096, 0);
		expect_true("I/O on a removed disk fails", n < 0 ||
			    n == 0, "n=%zd", n);
		close(fd);
	}
	expect_true("server threads see end of file", tdev_join(&d, 10000),
		    "still reading after 10 s");
	expect_true("sysfs entry gone after destroy", !sysfs_exists(d.name),
		    "/sys/block/%s still there", d.name);
	goto out;

destroy:
	tdev_force_down(&d);
out:
	tdev_free(&d);
	free(wbuf);
	free(rbuf);
}

/* The other feature bits: read-only, rotational, write zeroes. */
void check_features(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(4096);
	struct tdev d;
	ssize_t n;
	int fd, r;

	watchdog("features", 60);
	params_default(&p, "bi-feat");
	p.features = BIUS_FEATURE_READ_ONLY | BIUS_FEATURE_ROTATIONAL |
		     BIUS_FEATURE_WRITE_ZEROES;
	p.logical_block_size = 512;
	p.physical_block_size = 4096;
	if (tdev_up(&d, &p, "feature device comes up"))
		goto out;
	tdev_serve_in_threads(&d);
	expect_true("sysfs: read-only, rotational, write through, write zeroes",
		    sysfs_is(d.name, "ro", "1") &&
		    sysfs_is(d.name, "queue/rotational", "1") &&
		    sysfs_is(d.name, "queue/write_cache", "write through") &&
		    sysfs_long(d.name, "queue/logical_block_size") == 512 &&
		    sysfs_long(d.name, "queue/physical_block_size") == 4096 &&
		    sysfs_long(d.name, "queue/discard_max_hw_bytes") == 0 &&
		    sysfs_long(d.name, "queue/write_zeroes_max_bytes") > 0 &&
		    sysfs_is(d.name, "queue/io_poll", "0"),
		    "ro/rotational/write_cache/block sizes/discard/write_zeroes/io_poll wrong");
	fd = disk_open(d.name, O_RDONLY | O_DIRECT);
	n = fd < 0 ? -1 : pread(fd, buf, 4096, 0);
	expect_true("read from a read-only device", n == 4096, "n=%zd (%s)",
		    n, strerror(errno));
	if (fd >= 0)
		close(fd);
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	n = fd < 0 ? -1 : pwrite(fd, buf, 4096, 0);
	expect_true("read-only device refuses writes", n < 0 &&
		    (errno == EPERM || errno == EROFS || errno == EACCES),
		    "fd=%d n=%zd (%s)", fd, n, strerror(errno));
	if (fd >= 0)
		close(fd);
	r = do_destroy(d.ctl, d.id, 0);
	expect_true("destroy of the feature device", r == 0, "%s",
		    strerror(errno));
	tdev_join(&d, 10000);
out:
	tdev_free(&d);
	free(buf);
}

/* Stream details and refused completions; the main thread serves. */
/*
 * A daemon's error result reaches the reader as the errno a disk gives;
 * the errnos of the block layer's own machinery (dm requeue, resource
 * retries, nowait, reservations, zone resources on a conventional disk)
 * and any other one come as EIO.
 */
static void check_error_results(struct tdev *d, int fd, unsigned char *buf,
				unsigned char *io)
{
	static const struct {
		int result, want;
	} t[] = {
		{ -EIO, EIO }, { -ENOSPC, ENOSPC }, { -ENODATA, ENODATA },
		{ -EOPNOTSUPP, EOPNOTSUPP }, { -EILSEQ, EILSEQ },
		{ -EREMCHG, EIO }, { -EAGAIN, EIO }, { -ENOMEM, EIO },
		{ -EBUSY, EIO }, { -EBADE, EIO }, { -ETOOMANYREFS, EIO },
		{ -EOVERFLOW, EIO }, { -EPERM, EIO }, { -ENOENT, EIO },
	};
	struct bius_request hdr;
	struct io_job job;
	char name[96];
	unsigned int i, qi;
	ssize_t n, r;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		io_start(&job, fd, 0, io, 4096, 0, 0);
		n = wait_requests(d, buf, 2 * MiB, &qi, 5000);
		memcpy(&hdr, buf, HDR);
		r = n == HDR ? send_completion(d->srv[qi].fd, hdr.id,
					       t[i].result, NULL, 0) : -1;
		snprintf(name, sizeof(name),
			 "error completion %s fails the read with %s",
			 strerrorname_np(-t[i].result),
			 strerrorname_np(t[i].want));
		expect_true(name, r == CMP && io_wait(&job, 5000) &&
			    job.ret < 0 && job.err == t[i].want,
			    "r=%zd io=%zd errno %s", r, job.ret,
			    strerrorname_np(job.err));
	}
}

void check_protocol(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(2 * MiB), *io = xalloc(4 * 64 * KiB);
	unsigned char *pat = xalloc(64 * KiB);
	struct bius_request hdr[8] = { 0 };
	struct io_job job[4];
	unsigned int qi, got, i;
	struct tdev d;
	ssize_t n, r;
	uint64_t id;
	size_t payload;
	int fd = -1;

	watchdog("protocol", 120);
	params_default(&p, "bi-proto");
	p.nr_hw_queues = 2;
	p.max_io_bytes = 64 * KiB;
	p.size = 1 * MiB;
	if (tdev_up(&d, &p, "protocol device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("protocol device comes up", "open: %s", strerror(errno));
		goto out_destroy;
	}
	ok("protocol device comes up");

	/* A 64 KiB write read through a 4 KiB buffer. */
	fill_pattern(io, 64 * KiB, 3);
	io_start(&job[0], fd, 1, io, 64 * KiB, 0, 0);
	n = wait_requests(&d, buf, 4096, &qi, 5000);
	payload = 0;
	if (n >= (ssize_t)HDR) {
		memcpy(&hdr[0], buf, HDR);
		memcpy(pat, buf + HDR, n - HDR);
		payload = n - HDR;
		while (payload < hdr[0].len) {
			r = read(d.srv[qi].fd, buf, 4096);
			if (r <= 0)
				break;
			memcpy(pat + payload, buf, r);
			payload += r;
		}
	}
	expect_true("large write payload arrives across several reads",
		    n == 4096 && hdr[0].op == BIUS_OP_WRITE &&
		    hdr[0].len == 64 * KiB && hdr[0].sector == 0 &&
		    payload == 64 * KiB && !memcmp(pat, io, 64 * KiB),
		    "n=%zd op=%u len=%u payload=%zu", n, hdr[0].op,
		    hdr[0].len, payload);
	id = hdr[0].id;
	r = send_completion(d.srv[qi].fd, id, 0, NULL, 0);
	expect_true("write completion accepted", r == CMP && io_wait(&job[0],
		    5000) && job[0].ret == (ssize_t)(64 * KiB),
		    "r=%zd io=%zd", r, job[0].ret);
	memcpy(d.mem, io, 64 * KiB);
	r = send_completion(d.srv[qi].fd, id, 0, NULL, 0);
	expect_errno("double completion", r, errno, ENOENT);

	/* A read: refused completions first, then the right one. */
	io_start(&job[0], fd, 0, io, 4096, 8192, 0);
	n = wait_requests(&d, buf, 2 * MiB, &qi, 5000);
	memcpy(&hdr[0], buf, HDR);
	expect_true("read request header", n == HDR &&
		    hdr[0].op == BIUS_OP_READ && hdr[0].len == 4096 &&
		    hdr[0].sector == 16 && !hdr[0].flags && !hdr[0].nr_segments &&
		    !hdr[0].window_offset, "n=%zd op=%u len=%u sector=%llu", n,
		    hdr[0].op, hdr[0].len, (unsigned long long)hdr[0].sector);
	id = hdr[0].id;
	r = send_completion(d.srv[qi].fd, id ^ 0x5a00000000ULL, 0, pat, 4096);
	expect_errno("completion with an unknown id", r, errno, ENOENT);
	r = send_completion(d.srv[qi].fd, (id & ~0xffffULL) | 0xfff0, 0, pat,
			    4096);
	expect_errno("completion with an out-of-range tag", r, errno, ENOENT);
	r = send_completion(d.srv[qi ^ 1].fd, id, 0, pat, 4096);
	expect_errno("completion on another queue's fd", r, errno, EXDEV);
	r = send_completion(d.srv[qi].fd, id, 0, NULL, 0);
	expect_errno("read completion without payload", r, errno, EINVAL);
	r = send_completion(d.srv[qi].fd, id, 0, pat, 512);
	expect_errno("read completion with short payload", r, errno, EINVAL);
	r = send_completion(d.srv[qi].fd, id, -EIO, pat, 4096);
	expect_errno("failed completion with payload", r, errno, EINVAL);
	r = send_completion(d.srv[qi].fd, id, 1, NULL, 0);
	expect_errno("positive result", r, errno, EINVAL);
	r = send_completion(d.srv[qi].fd, id, -5000, NULL, 0);
	expect_errno("result below -4095", r, errno, EINVAL);
	{
		struct bius_completion c = { .id = id, .len = 4096,
					     .sector = 1 };

		memcpy(buf, &c, CMP);
		r = write(d.srv[qi].fd, buf, CMP + 4096);
		expect_errno("read completion with a sector set", r, errno, EINVAL);
		c.sector = 0;
		memcpy(buf, &c, CMP);
		r = write(d.srv[qi].fd, buf, CMP + 100);
		expect_errno("record with truncated payload", r, errno, EINVAL);
	}
	fill_pattern(pat, 4096, 5);
	r = send_completion(d.srv[qi].fd, id, 0, pat, 4096);
	expect_true("read completion delivers data", r == CMP + 4096 &&
		    io_wait(&job[0], 5000) && job[0].ret == 4096 &&
		    !memcmp(io, pat, 4096), "r=%zd io=%zd", r, job[0].ret);

	check_error_results(&d, fd, buf, io);

	/* Several requests in one read, several completions in one write. */
	for (i = 0; i < 4; i++)
		io_start(&job[i], fd, 0, io + i * 64 * KiB, 4096,
			 (off_t)(i + 1) * 64 * KiB, 0);
	sleep_ms(500);
	got = 0;
	n = 0;
	{
		ssize_t most = 0;
		long end = now_ms() + 5000;

		while (got < 4 && now_ms() < end) {
			unsigned int q2;

			r = wait_requests(&d, buf, 2 * MiB, &q2, 1000);
			if (r <= 0 || r % HDR)
				break;
			if (got && q2 != qi)
				break;
			qi = q2;
			if (got + r / HDR > 8)
				break;
			memcpy(&hdr[got], buf, r);
			got += r / HDR;
			if (r > most)
				most = r;
		}
		n = most;
	}
	expect_true("several headers in one read", got == 4 && n > (ssize_t)HDR,
		    "got %u requests, largest read %zd bytes", got, n);
	if (got == 4) {
		size_t len = 0;

		for (i = 0; i < 4; i++) {
			struct bius_completion c = { .id = hdr[i].id,
						     .len = 4096 };

			memcpy(buf + len, &c, CMP);
			memcpy(buf + len + CMP, d.mem + hdr[i].sector * 512,
			       4096);
			len += CMP + 4096;
		}
		r = write(d.srv[qi].fd, buf, len);
		expect_true("several completions in one write",
			    r == (ssize_t)len, "r=%zd of %zu (%s)", r, len,
			    strerror(errno));
	} else {
		not_ok("several completions in one write", "no requests");
	}
	for (i = 0; i < 4; i++)
		if (!io_wait(&job[i], 5000))
			not_ok("several completions in one write",
			       "I/O %u still pending", i);

	/* A refused record after good ones: the good ones count. */
	io_start(&job[0], fd, 0, io, 4096, 0, 0);
	n = wait_requests(&d, buf, 2 * MiB, &qi, 5000);
	memcpy(&hdr[0], buf, HDR);
	if (n == HDR) {
		struct bius_completion c = { .id = hdr[0].id,
					     .result = -EIO };

		memcpy(buf, &c, CMP);		/* accepted */
		memcpy(buf + CMP, &c, CMP);	/* a duplicate: refused */
		r = write(d.srv[qi].fd, buf, 2 * CMP);
		expect_true("partial write returns the accepted bytes",
			    r == CMP && io_wait(&job[0], 5000) &&
			    job[0].err == EIO, "r=%zd (%s)", r,
			    strerror(errno));
	} else {
		not_ok("partial write returns the accepted bytes",
		       "no request (n=%zd)", n);
	}
	io_wait(&job[0], 5000);

out_destroy:
	if (fd >= 0)
		close(fd);
	r = do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	expect_true("destroy of the protocol device", r == 0, "%s",
		    strerror(errno));
out:
	tdev_free(&d);
	free(buf);
	free(io);
	free(pat);
}

/*
 * BIUS_FEATURE_NO_DATA (in map mode, which it overrides): no payload in
 * either stream, a read completion with data refused, the reader's buffer
 * left as it was; the main thread serves.
 */
void check_no_data(void)
{
	const uint16_t no_data = BIUS_REQ_NO_DATA;
	struct bius_device_params p;
	unsigned char *buf = xalloc(2 * MiB), *io = xalloc(64 * KiB);
	unsigned char *pat = xalloc(64 * KiB);
	struct bius_request hdr = { 0 };
	struct io_job job;
	unsigned int qi;
	struct tdev d;
	ssize_t n, r;
	int fd = -1;

	watchdog("no data", 60);
	params_default(&p, "bi-nodata");
	p.features = BIUS_FEATURE_NO_DATA;
	p.transfer_mode = BIUS_TRANSFER_MAP;
	p.max_io_bytes = 64 * KiB;
	p.size = 1 * MiB;
	if (tdev_up(&d, &p, "no-data device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("no-data device comes up", "open: %s", strerror(errno));
		goto out_destroy;
	}
	ok("no-data device comes up");

	fill_pattern(io, 64 * KiB, 3);
	io_start(&job, fd, 1, io, 64 * KiB, 0, 0);
	n = wait_requests(&d, buf, 2 * MiB, &qi, 5000);
	memcpy(&hdr, buf, HDR);
	expect_true("no-data write: a header without payload",
		    n == HDR && hdr.op == BIUS_OP_WRITE &&
		    hdr.len == 64 * KiB && hdr.flags == no_data,
		    "n=%zd op=%u len=%u flags=%#x", n, hdr.op, hdr.len,
		    hdr.flags);
	r = n == HDR ? send_completion(d.srv[qi].fd, hdr.id, 0, NULL, 0) : -1;
	expect_true("no-data write completes without payload", r == CMP &&
		    io_wait(&job, 5000) && job.ret == (ssize_t)(64 * KiB),
		    "r=%zd io=%zd", r, job.ret);

	memset(io, 0xcd, 4096);
	io_start(&job, fd, 0, io, 4096, 8192, 0);
	n = wait_requests(&d, buf, 2 * MiB, &qi, 5000);
	memcpy(&hdr, buf, HDR);
	expect_true("no-data read: flagged, not mapped",
		    n == HDR && hdr.op == BIUS_OP_READ && hdr.len == 4096 &&
		    hdr.flags == no_data && !hdr.window_offset,
		    "n=%zd op=%u len=%u flags=%#x", n, hdr.op, hdr.len,
		    hdr.flags);
	memset(pat, 0xee, 4096);
	r = send_completion(d.srv[qi].fd, hdr.id, 0, pat, 4096);
	expect_errno("no-data read completion with data", r, errno, EINVAL);
	r = send_completion(d.srv[qi].fd, hdr.id, 0, NULL, 0);
	expect_true("no-data read leaves the buffer as it was",
		    r == CMP && io_wait(&job, 5000) && job.ret == 4096 &&
		    io[0] == 0xcd && io[4095] == 0xcd,
		    "r=%zd io=%zd byte0=%#x", r, job.ret, io[0]);

out_destroy:
	if (fd >= 0)
		close(fd);
	r = do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	expect_true("destroy of the no-data device", r == 0, "%s",
		    strerror(errno));
out:
	tdev_free(&d);
	free(buf);
	free(io);
	free(pat);
}
