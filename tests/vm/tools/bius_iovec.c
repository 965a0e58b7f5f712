// SPDX-License-Identifier: GPL-2.0
/*
 * bius_iovec: data integrity of O_DIRECT vectored I/O whose buffer pieces
 * are not aligned to each other (what the map transfer modes pass to the
 * daemon as a segment list), for the transfer-modes VM test.
 *
 *   bius_iovec [-r ROUNDS] [-m MAX_IO] [-p MAX_PIECES] [-s SEED] [-v] DEVICE
 *
 * DEVICE is a block device, or a file on a file system that supports
 * O_DIRECT; its data is overwritten.  Each round picks a random range of it
 * (aligned to its logical block size, at most MAX_IO bytes) and
 *  - writes it with one pwritev() of 2..MAX_PIECES pieces, each in its own
 *    page-aligned region of the buffer (a guard page between regions),
 *    starting at a multiple of 512 bytes within its page (not all at 0;
 *    some where the previous piece ended, i.e. aligned to it), of random
 *    lengths (mostly up to 4 pages, a few much larger, and one write in 32
 *    of half MAX_IO or more), and checks that the write left the buffer
 *    unchanged;
 *  - reads it back with one preadv() into a differently shaped random list
 *    of pieces, and checks the data and that no byte of the buffer outside
 *    the pieces changed (the buffer is poisoned first);
 *  - reads it again with one plain page-aligned pread() and checks it.
 * Every 512-byte sector of the data is distinguishable: a magic, the seed,
 * the round and its device sector, then pseudo-random bytes derived from
 * them.  After the last round every sector written is read again (aligned
 * preads of up to MAX_IO bytes) and checked against the round that wrote
 * it last.
 *
 * Exit status: 0 all data matched; 1 an I/O error, short count or mismatch
 * (printed with the round, the device offset, the shapes of the pieces and
 * the first differing byte); 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SECTOR		512
#define MAGIC		0x3156494f53554942ull	/* "BIUSIOV1" little endian */
#define MAX_PIECES	256
#define SMALL_PAGES	4	/* most pieces are at most this long */
#define POISON		0x5a	/* read buffer bytes outside the pieces */
#define WFILL		0xc3	/* write buffer bytes outside the pieces */
#define GOLDEN		0x9e3779b97f4a7c15ull

struct piece {
	size_t pgoff;		/* offset of the data in its first page */
	size_t len;		/* bytes, a multiple of the block size */
	size_t bufoff;		/* offset of the data in the buffer */
};

/* An I/O's list of pieces and where they are in its buffer. */
struct shape {
	unsigned int n;
	unsigned int joints;	/* pieces not aligned to the previous one */
	size_t total;		/* bytes, the sum of the lengths */
	size_t extent;		/* buffer bytes the regions take */
	struct piece p[MAX_PIECES];
	struct iovec iov[MAX_PIECES];
};

static const char *dev;
static size_t page, unit;	/* page size, logical block size */
static uint64_t seed, rng;

static void die(const char *what)
{
	fprintf(stderr, "bius_iovec: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t mix(uint64_t x)		/* splitmix64's finaliser */
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t n)		/* [0, n), n > 0 */
{
	rng += GOLDEN;
	return mix(rng) % n;
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* The 512 bytes that round writes to the device's 512-byte sector number sector. */
static void fill_sector(uint8_t *dst, uint32_t round, uint64_t sector)
{
	uint64_t w[SECTOR / 8], s = mix(seed ^ mix(round ^ mix(sector + 1)));
	unsigned int i;

	w[0] = MAGIC;
	w[1] = seed;
	w[2] = round;
	w[3] = sector;
	for (i = 4; i < SECTOR / 8; i++)
		w[i] = mix(s += GOLDEN);
	memcpy(dst, w, SECTOR);
}

/* What a 512-byte sector holds, for the mismatch reports. */
static void describe(char *buf, size_t size, const uint8_t *sec)
{
	uint64_t w[4];
	size_t i;

	memcpy(w, sec, sizeof(w));
	if (w[0] == MAGIC) {
		snprintf(buf, size, "round %" PRIu64 "'s data for device sector %" PRIu64 "%s",
			 w[2], w[3], w[1] == seed ? "" : " of another seed");
		return;
	}
	for (i = 1; i < SECTOR && sec[i] == sec[0]; i++)
		;
	if (i == SECTOR)
		snprintf(buf, size, "512 bytes of 0x%02x", sec[0]);
	else
		snprintf(buf, size, "no pattern header (starts %02x %02x %02x %02x)",
			 sec[0], sec[1], sec[2], sec[3]);
}

static void print_shape(const char *what, const struct shape *sh)
{
	unsigned int i;

	fprintf(stderr, "   %s: %u piece(s), in-page offset+length:", what, sh->n);
	for (i = 0; i < sh->n; i++)
		fprintf(stderr, " %zu+%zu", sh->p[i].pgoff, sh->p[i].len);
	fprintf(stderr, "\n");
}

/* Offset in the data of the first byte where buf's pieces differ from want, or -1. */
static ssize_t first_diff(const struct shape *sh, const uint8_t *buf, const uint8_t *want)
{
	size_t done = 0, k;
	unsigned int i;

	for (i = 0; i < sh->n; i++) {
		const uint8_t *p = buf + sh->p[i].bufoff;

		if (memcmp(p, want + done, sh->p[i].len)) {
			for (k = 0; p[k] == want[done + k]; k++)
				;
			return done + k;
		}
		done += sh->p[i].len;
	}
	return -1;
}

/*
 * Report that data byte idx of buf (shape sh, named shname), for device
 * offset devoff, differs from want; print the shapes given, exit 1.
 */
static void mismatch(const char *ctx, uint64_t devoff, const struct shape *sh,
		     const char *shname, const uint8_t *buf, const uint8_t *want,
		     size_t idx, const struct shape *wsh)
{
	size_t off = idx, sec;
	unsigned int i = 0;
	const uint8_t *got;
	char g[128], e[128];

	while (off >= sh->p[i].len)
		off -= sh->p[i++].len;
	got = buf + sh->p[i].bufoff + off;
	/* pieces are whole sectors: the sector is contiguous in the piece */
	sec = off % SECTOR;
	describe(g, sizeof(g), got - sec);
	describe(e, sizeof(e), want + idx - sec);
	fprintf(stderr, "bius_iovec: %s: %s of %zu bytes at device offset %" PRIu64
		": first difference at byte %zu (device offset %" PRIu64
		", piece %u byte %zu): 0x%02x, expected 0x%02x\n"
		"   that sector holds %s; expected %s\n",
		dev, ctx, sh->total, devoff, idx, devoff + idx, i, off, *got, want[idx], g, e);
	if (wsh)
		print_shape("written from", wsh);
	print_shape(shname, sh);
	exit(1);
}

/* Fail unless an I/O returned ret == the shape's total. */
static void check_count(const char *ctx, ssize_t ret, uint64_t devoff, const struct shape *sh)
{
	if (ret == (ssize_t)sh->total)
		return;
	if (ret < 0)
		fprintf(stderr, "bius_iovec: %s: %s of %zu bytes at device offset %" PRIu64 ": %s\n",
			dev, ctx, sh->total, devoff, strerror(errno));
	else
		fprintf(stderr, "bius_iovec: %s: %s of %zu bytes at device offset %" PRIu64
			": short count %zd\n", dev, ctx, sh->total, devoff, ret);
	print_shape("pieces", sh);
	exit(1);
}

/* Fail if a byte of buf outside sh's pieces is not POISON any more. */
static void check_gaps(const char *ctx, uint64_t devoff, const struct shape *sh, const uint8_t *buf)
{
	size_t pos = 0, end;
	unsigned int i;

	for (i = 0; i <= sh->n; i++) {
		end = i < sh->n ? sh->p[i].bufoff : sh->extent;
		for (; pos < end; pos++) {
			if (buf[pos] == POISON)
				continue;
			fprintf(stderr, "bius_iovec: %s: %s of %zu bytes at device offset %" PRIu64
				": changed its buffer outside the pieces: buffer byte %zu (page %zu + %zu, %s piece %u) is 0x%02x, was 0x%02x\n",
				dev, ctx, sh->total, devoff, pos, pos / page, pos % page,
				i < sh->n ? "before" : "after", i < sh->n ? i : i - 1,
				buf[pos], POISON);
			print_shape("read into", sh);
			exit(1);
		}
		if (i < sh->n)
			pos = sh->p[i].bufoff + sh->p[i].len;
	}
}

/*
 * Place sh's pieces (lengths set) in a buffer: each in its own page-aligned
 * region after a guard page, at a 512-byte multiple within its first page:
 * where the previous piece ended (aligned to it), at 0 or anywhere; never
 * all at 0.
 */
static void layout(struct shape *sh)
{
	size_t slots = page / SECTOR, prev_end = 0, cur = page;
	unsigned int i, nonzero = 0;
	struct piece *p;

	for (i = 0; i < sh->n; i++) {
		uint64_t r = rnd(8);

		p = &sh->p[i];
		if (i && r < 2)
			p->pgoff = prev_end;
		else if (r == 2)
			p->pgoff = 0;
		else
			p->pgoff = rnd(slots) * SECTOR;
		prev_end = (p->pgoff + p->len) % page;
		nonzero += p->pgoff != 0;
	}
	if (!nonzero)
		sh->p[rnd(sh->n)].pgoff = (1 + rnd(slots - 1)) * SECTOR;

	sh->joints = 0;
	sh->total = 0;
	for (i = 0; i < sh->n; i++) {
		p = &sh->p[i];
		if (i && p->pgoff != (p[-1].pgoff + p[-1].len) % page)
			sh->joints++;
		p->bufoff = cur + p->pgoff;
		cur = (p->bufoff + p->len + page - 1) / page * page + page;
		sh->iov[i].iov_len = p->len;
		sh->total += p->len;
	}
	sh->extent = cur;
}

static void set_base(struct shape *sh, uint8_t *buf)
{
	unsigned int i;

	for (i = 0; i < sh->n; i++)
		sh->iov[i].iov_base = buf + sh->p[i].bufoff;
}

/*
 * Lengths of a write: 2..max_pieces pieces, budget blocks at most: most
 * pieces are small, one in 16 up to budget / 8; one write in 32 is big, its
 * n pieces of budget / (2 n) .. budget / n blocks each.
 */
static void write_lengths(struct shape *sh, size_t budget, unsigned int max_pieces)
{
	size_t small = SMALL_PAGES * page / unit, used = 0, cap, lo, avail;
	int big = !rnd(32);
	unsigned int i;

	sh->n = 2 + rnd(max_pieces - 1);
	if (sh->n > budget)
		sh->n = budget;
	if (!small)
		small = 1;
	for (i = 0; i < sh->n; i++) {
		avail = budget - used - (sh->n - 1 - i);
		lo = 1;
		if (big) {
			cap = budget / sh->n;
			lo = cap / 2 ? cap / 2 : 1;
		} else if (!rnd(16)) {
			cap = budget / 8;
		} else {
			cap = small;
		}
		cap = min_size(cap ? cap : 1, avail);	/* avail >= 1 */
		lo = min_size(lo, cap);
		sh->p[i].len = (lo + rnd(cap - lo + 1)) * unit;
		used += sh->p[i].len / unit;
	}
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/* Lengths of a read of 2 or more blocks: split at random block boundaries. */
static void split_lengths(struct shape *sh, size_t blocks, unsigned int max_pieces)
{
	size_t cut[MAX_PIECES + 1], prev = 0;
	unsigned int k, i, n = 0;

	k = 1 + rnd(min_size(max_pieces, blocks) - 1);	/* cuts */
	for (i = 0; i < k; i++)
		cut[i] = 1 + rnd(blocks - 1);
	qsort(cut, k, sizeof(cut[0]), cmp_size);
	cut[k] = blocks;
	for (i = 0; i <= k; i++) {
		if (cut[i] == prev)
			continue;
		sh->p[n++].len = (cut[i] - prev) * unit;
		prev = cut[i];
	}
	sh->n = n;
}

static int same_shape(const struct shape *a, const struct shape *b)
{
	unsigned int i;

	if (a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++)
		if (a->p[i].pgoff != b->p[i].pgoff || a->p[i].len != b->p[i].len)
			return 0;
	return 1;
}

static int parse_size(const char *s, unsigned long long *v)
{
	const char *units = "KMG";
	unsigned int shift = 0;
	char *end, *u;

	errno = 0;
	*v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		return -1;
	u = *end ? strchr(units, *end & ~0x20) : NULL;	/* K, k, M, ... */
	if (u) {
		shift = 10 * (u - units + 1);
		end++;
	}
	if (*end || *v > ULLONG_MAX >> shift)
		return -1;
	*v <<= shift;
	return 0;
}

static void bad_usage(void)
{
	fprintf(stderr,
		"usage: bius_iovec [OPTIONS] DEVICE\n"
		"Writes random ranges of DEVICE (a block device, or a file on a file system\n"
		"that supports O_DIRECT) with O_DIRECT pwritev() of pieces at different\n"
		"512-byte offsets within their pages, reads them back with preadv() into\n"
		"differently shaped pieces and with pread(), and checks every byte; then\n"
		"checks everything written once more.  DESTROYS the data on DEVICE.\n"
		"  -r, --rounds N        rounds (default 100)\n"
		"  -m, --max-io BYTES    largest I/O, K/M/G suffixes (default 1M)\n"
		"  -p, --max-pieces N    pieces per I/O, 2..%d (default 8)\n"
		"  -s, --seed S          seed of the shapes and the data (default: time, pid)\n"
		"  -v, --verbose         print every round's offset and shapes\n"
		"Exit status: 0 data intact, 1 error or mismatch, 2 usage.\n", MAX_PIECES);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rounds", required_argument, NULL, 'r' },
		{ "max-io", required_argument, NULL, 'm' },
		{ "max-pieces", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 's' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static struct shape ws, rs, flat;
	unsigned long long rounds = 100, max_io = 1 << 20, max_pieces = 8, v;
	unsigned long long written = 0, wpieces = 0, wjoints = 0, rpieces = 0, rjoints = 0;
	unsigned long long checked = 0, final_reads = 0;
	uint64_t size, nsec, s, e, devoff;
	uint8_t *wbuf, *rbuf, *want;
	uint32_t *last, round;
	size_t bufsize, budget, k;
	int fd, opt, verbose = 0, have_seed = 0;
	unsigned int lbs;
	struct stat st;
	ssize_t ret, idx;
	char ctx[64];

	while ((opt = getopt_long(argc, argv, "r:m:p:s:vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			if (parse_size(optarg, &rounds) || !rounds || rounds >= UINT32_MAX)
				bad_usage();
			break;
		case 'm':
			if (parse_size(optarg, &max_io) || max_io > (1ull << 30))
				bad_usage();
			break;
		case 'p':
			if (parse_size(optarg, &max_pieces) || max_pieces < 2 ||
			    max_pieces > MAX_PIECES)
				bad_usage();
			break;
		case 's':
			if (parse_size(optarg, &v))
				bad_usage();
			seed = v;
			have_seed = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			bad_usage();
		}
	}
	if (optind != argc - 1)
		bad_usage();
	dev = argv[optind];
	if (!have_seed)
		seed = mix((uint64_t)time(NULL) << 20 ^ getpid()) % 1000000000;
	rng = mix(seed);

	fd = open(dev, O_RDWR | O_DIRECT | O_EXCL);
	if (fd < 0)
		die(dev);
	if (fstat(fd, &st) < 0)
		die(dev);
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, &size) < 0)
			die("BLKGETSIZE64");
		if (ioctl(fd, BLKSSZGET, &lbs) < 0)
			die("BLKSSZGET");
		unit = lbs;
	} else if (S_ISREG(st.st_mode)) {
		size = st.st_size;
		unit = SECTOR;
	} else {
		fprintf(stderr, "bius_iovec: %s: not a block device or a regular file\n", dev);
		return 1;
	}
	page = sysconf(_SC_PAGESIZE);
	size -= size % unit;
	if (unit < SECTOR || unit % SECTOR || max_io % unit || max_io < 2 * unit ||
	    size < 2 * unit) {
		fprintf(stderr, "bius_iovec: %s: %" PRIu64 " bytes in blocks of %zu: need 2 blocks or more, and a max-io of 2 blocks or more, a multiple of the block size (%llu)\n",
			dev, size, unit, max_io);
		return 1;
	}
	budget = min_size(max_io, size) / unit;
	nsec = size / SECTOR;

	/* regions: a guard page, then per piece at most len + 2 pages + a guard page */
	bufsize = max_io + (3 * max_pieces + 1) * page;
	if (posix_memalign((void **)&wbuf, page, bufsize) ||
	    posix_memalign((void **)&rbuf, page, bufsize))
		die("posix_memalign");
	want = malloc(max_io);
	last = calloc(nsec, sizeof(*last));	/* round that wrote each sector last */
	if (!want || !last)
		die("malloc");
	printf("bius_iovec: %s: %" PRIu64 " bytes, blocks of %zu, pages of %zu; seed %" PRIu64
	       ", %llu rounds of at most %llu bytes in 2..%llu pieces\n",
	       dev, size, unit, page, seed, rounds, max_io, max_pieces);
	fflush(stdout);

	for (round = 1; round <= rounds; round++) {
		write_lengths(&ws, budget, max_pieces);
		layout(&ws);
		set_base(&ws, wbuf);
		devoff = rnd(size / unit - ws.total / unit + 1) * unit;
		for (k = 0; k < ws.total / SECTOR; k++)
			fill_sector(want + k * SECTOR, round, devoff / SECTOR + k);
		memset(wbuf, WFILL, ws.extent);
		for (k = 0, s = 0; k < ws.n; s += ws.p[k].len, k++)
			memcpy(ws.iov[k].iov_base, want + s, ws.p[k].len);

		do {
			split_lengths(&rs, ws.total / unit, max_pieces);
			layout(&rs);
		} while (same_shape(&ws, &rs));
		set_base(&rs, rbuf);
		if (verbose) {
			printf("round %u: %zu bytes at device offset %" PRIu64 "\n", round, ws.total, devoff);
			fflush(stdout);
			print_shape("write", &ws);
			print_shape("read", &rs);
		}

		snprintf(ctx, sizeof(ctx), "round %u: pwritev", round);
		ret = pwritev(fd, ws.iov, ws.n, devoff);
		check_count(ctx, ret, devoff, &ws);
		idx = first_diff(&ws, wbuf, want);
		if (idx >= 0) {
			snprintf(ctx, sizeof(ctx), "round %u: the buffer after pwritev", round);
			mismatch(ctx, devoff, &ws, "written from", wbuf, want, idx, NULL);
		}

		snprintf(ctx, sizeof(ctx), "round %u: preadv", round);
		memset(rbuf, POISON, rs.extent);
		ret = preadv(fd, rs.iov, rs.n, devoff);
		check_count(ctx, ret, devoff, &rs);
		idx = first_diff(&rs, rbuf, want);
		if (idx >= 0)
			mismatch(ctx, devoff, &rs, "read into", rbuf, want, idx, &ws);
		check_gaps(ctx, devoff, &rs, rbuf);

		snprintf(ctx, sizeof(ctx), "round %u: pread", round);
		flat.n = 1;
		flat.p[0] = (struct piece){ .len = ws.total };
		flat.total = flat.extent = ws.total;
		memset(rbuf, POISON, ws.total);
		ret = pread(fd, rbuf, ws.total, devoff);
		check_count(ctx, ret, devoff, &flat);
		idx = first_diff(&flat, rbuf, want);
		if (idx >= 0)
			mismatch(ctx, devoff, &flat, "read into", rbuf, want, idx, &ws);

		for (k = 0; k < ws.total / SECTOR; k++)
			last[devoff / SECTOR + k] = round;
		written += ws.total;
		wpieces += ws.n;
		wjoints += ws.joints;
		rpieces += rs.n;
		rjoints += rs.joints;
	}

	/* every sector written, against the round that wrote it last */
	if (fsync(fd) < 0)
		die("fsync");
	for (s = 0; s < nsec; s = e) {
		if (!last[s]) {
			e = s + 1;
			continue;
		}
		for (e = s; e < nsec && last[e] && (e - s) * SECTOR < max_io; e++)
			fill_sector(want + (e - s) * SECTOR, last[e], e);
		flat.n = 1;
		flat.p[0] = (struct piece){ .len = (e - s) * SECTOR };
		flat.total = flat.extent = (e - s) * SECTOR;
		memset(rbuf, POISON, flat.total);
		ret = pread(fd, rbuf, flat.total, s * SECTOR);
		check_count("final check: pread", ret, s * SECTOR, &flat);
		idx = first_diff(&flat, rbuf, want);
		if (idx >= 0) {
			snprintf(ctx, sizeof(ctx), "final check (sector last written in round %u): pread",
				 last[s + idx / SECTOR]);
			mismatch(ctx, s * SECTOR, &flat, "read into", rbuf, want, idx, NULL);
		}
		checked += flat.total;
		final_reads++;
	}
	if (close(fd) < 0)
		die("close");

	printf("bius_iovec: %s: OK: %llu rounds (seed %" PRIu64 "): %llu bytes written from %llu pieces (%llu not aligned to the previous one), read back into %llu pieces (%llu not aligned) and by plain pread; final check of %llu bytes in %llu preads\n",
	       dev, rounds, seed, written, wpieces, wjoints, rpieces, rjoints, checked, final_reads);
	return 0;
}
