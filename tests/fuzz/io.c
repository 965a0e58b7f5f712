// SPDX-License-Identifier: GPL-2.0
/*
 * The I/O role of bius_fuzz: on the disks of the pool, O_DIRECT writes
 * read back and compared (the lower half of a disk, a block per worker:
 * the data must be what was written unless the daemon lied meanwhile),
 * buffered I/O with fsync, discards and zero-outs (the upper half),
 * polled io_uring (IORING_SETUP_IOPOLL), the zone ioctls and writes at
 * a write pointer, BLKRRPART and I/O scheduler switches.
 */

#include "fuzz.h"
#include "bius_uring.h"

/* A disk of the pool, opened with @flags; the fd, or -1. */
static int pick_disk(struct worker *w, struct slot **sp, int flags,
		     uint32_t *gen)
{
	struct slot *s = slot_pick(&w->rng, 1);

	*sp = s;
	if (!s)
		return -1;
	return note(w->st, disk_open(s, flags, gen));
}

/* A random block of the upper half (shared by every worker). */
static uint64_t upper_block(struct worker *w, const struct slot *s)
{
	uint64_t half = s->p.size / 2 / BLK;

	return half + rng_below(&w->rng, half);
}

#define POISON	0xa5	/* the read buffer's bytes before a read */

/* What a verify read brought instead of the data written. */
static const char *misread(const unsigned char *got, uint64_t blocks)
{
	uint64_t word = *(const uint64_t *)got;
	unsigned int i, poison = 0, zero = 0;

	for (i = 0; i < BLK; i++) {
		poison += got[i] == POISON;
		zero += !got[i];
	}
	if (poison == BLK)
		return "the read left the buffer as it was";
	if (zero == BLK)
		return "zeroes";
	if (poison)
		return "partly the buffer as it was";
	if (word && word < blocks)
		return "another block's data";
	return "other data";
}

/* Write a block of this worker's, read it back: the same data. */
static void verify_block(struct worker *w, struct slot *s, int fd,
			 uint32_t gen)
{
	uint64_t n, blk, lies, *tag = (uint64_t *)w->buf;
	unsigned int i;

	n = s->p.size / 2 / BLK / MAX_PROCS;
	blk = 1 + w->index + (uint64_t)rng_below(&w->rng, n ? n : 1) * MAX_PROCS;
	for (i = 0; i < BLK / 8; i++)
		tag[i] = rng_next(&w->rng);
	tag[0] = blk;
	memset(w->buf2, POISON, BLK);
	lies = __atomic_load_n(&s->lies, __ATOMIC_SEQ_CST);
	if (note(w->st, pwrite(fd, w->buf, BLK, blk * BLK)) != BLK ||
	    note(w->st, pread(fd, w->buf2, BLK, blk * BLK)) != BLK ||
	    lies != __atomic_load_n(&s->lies, __ATOMIC_SEQ_CST) ||
	    gen != __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST) ||
	    (s->p.features & (BIUS_FEATURE_NO_DATA | BIUS_FEATURE_ZONED)) ||
	    strncmp(s->p.name, "fz", 2))	/* a name used once */
		return;
	if (memcmp(w->buf, w->buf2, BLK))
		broken("device %u (%s): block %llu read back other data than written: %s (first word %#llx; transfer mode %u, features %#llx, %u queues, %u polled, depth %u, max I/O %u)",
		       s->dev_id, s->disk, (unsigned long long)blk,
		       misread(w->buf2, s->p.size / BLK),
		       (unsigned long long)((uint64_t *)w->buf2)[0],
		       s->p.transfer_mode, (unsigned long long)s->p.features,
		       s->p.nr_hw_queues, s->p.nr_poll_queues,
		       s->p.queue_depth, s->p.max_io_bytes);
	else
		count(w->st, F_VERIFIED);
}

int act_io_verify(struct worker *w)
{
	struct slot *s;
	uint32_t gen;
	int fd = pick_disk(w, &s, O_RDWR | O_DIRECT, &gen), i;

	if (fd < 0)
		return -1;
	for (i = 0; i < 4; i++)
		verify_block(w, s, fd, gen);
	close(fd);
	return 0;
}

/* Buffered reads and writes, fsync, discard and zero-out (upper half). */
int act_io_buffered(struct worker *w)
{
	struct slot *s;
	uint32_t gen;
	uint64_t range[2];
	int fd = pick_disk(w, &s, O_RDWR, &gen), i;

	if (fd < 0)
		return -1;
	for (i = 0; i < 4; i++) {
		off_t off = upper_block(w, s) * BLK;
		size_t len = (1 + rng_below(&w->rng, IO_BUF / 512)) * 512;

		if (rng_pct(&w->rng, 50))
			note(w->st, pwrite(fd, w->buf, len, off));
		else
			note(w->st, pread(fd, w->buf, len, off));
	}
	range[0] = upper_block(w, s) * BLK;
	range[1] = BLK * (1 + rng_below(&w->rng, 4));
	if (range[0] + range[1] > s->p.size)
		range[1] = BLK;
	switch (rng_below(&w->rng, 4)) {
	case 0:
		note(w->st, fsync(fd));
		break;
	case 1:
		note(w->st, ioctl(fd, BLKDISCARD, range));
		break;
	case 2:
		note(w->st, ioctl(fd, BLKZEROOUT, range));
		break;
	}
	close(fd);
	return 0;
}

/* A polled (IOPOLL) read or write: it ends, whatever the device does. */
int act_io_uring(struct worker *w)
{
	struct ring ring;
	struct slot *s;
	uint32_t gen;
	int fd = pick_disk(w, &s, O_RDWR | O_DIRECT, &gen), res, op;

	if (fd < 0)
		return -1;
	if (note(w->st, ring_init(&ring, IORING_SETUP_IOPOLL))) {
		close(fd);
		return -1;
	}
	op = rng_pct(&w->rng, 50) ? IORING_OP_READ : IORING_OP_WRITE;
	if (note(w->st, ring_rw(&ring, op, fd, w->buf2, BLK,
				upper_block(w, s) * BLK)) == 1) {
		if (ring_reap(&ring, WATCHDOG_S * 1000 / 2, &res))
			broken("polled %s on %s did not end in %d s",
			       op == IORING_OP_READ ? "read" : "write",
			       s->disk, WATCHDOG_S / 2);
		else if (res < 0)
			note(w->st, (errno = -res, -1));
		else
			count(w->st, F_POLLED);
	}
	ring_exit(&ring);
	close(fd);
	return 0;
}

/* BLKREPORTZONE, a zone operation, or a write at a write pointer. */
int act_io_zones(struct worker *w)
{
	static const unsigned long ops[] = { BLKRESETZONE, BLKOPENZONE,
					     BLKCLOSEZONE, BLKFINISHZONE };
	struct {
		struct blk_zone_report h;
		struct blk_zone z[8];
	} rep;
	struct blk_zone_range range;
	struct blk_zone *z;
	struct slot *s;
	uint32_t gen;
	uint64_t zs;
	int fd = pick_disk(w, &s, O_RDWR | O_DIRECT, &gen);

	if (fd < 0)
		return -1;
	zs = s->p.zoned.zone_size / 512;
	memset(&rep, 0, sizeof(rep));
	rep.h.sector = zs ? rng_below(&w->rng, s->p.size / 512 / zs) * zs : 0;
	rep.h.nr_zones = 1 + rng_below(&w->rng, 8);
	if (note(w->st, ioctl(fd, BLKREPORTZONE, &rep)) || !rep.h.nr_zones)
		goto out;
	z = &rep.z[rng_below(&w->rng, rep.h.nr_zones)];
	count(w->st, F_ZONE_OPS);
	if (rng_pct(&w->rng, 50)) {
		range.sector = z->start;
		range.nr_sectors = rng_pct(&w->rng, 10) ? s->p.size / 512 :
			z->len;
		note(w->st, ioctl(fd, ops[rng_below(&w->rng, 4)], &range));
	} else if (z->wp + BLK / 512 <= z->start + z->capacity) {
		note(w->st, pwrite(fd, w->buf, BLK, z->wp * 512));
	}
out:
	close(fd);
	return 0;
}

int act_io_rrpart(struct worker *w)
{
	struct slot *s;
	uint32_t gen;
	int fd = pick_disk(w, &s, O_RDONLY, &gen);

	if (fd < 0)
		return -1;
	note(w->st, ioctl(fd, BLKRRPART, 0));
	close(fd);
	return 0;
}

int act_io_sched(struct worker *w)
{
	static const char *const sched[] = { "none", "mq-deadline", "kyber",
					     "bfq" };
	struct slot *s = slot_pick(&w->rng, 1);
	char path[96], name[BIUS_NAME_LEN];
	const char *want;
	int fd;

	if (!s)
		return -1;
	memcpy(name, s->disk, sizeof(name));
	name[sizeof(name) - 1] = 0;
	snprintf(path, sizeof(path), "/sys/block/%s/queue/scheduler", name);
	fd = note(w->st, open(path, O_WRONLY | O_CLOEXEC));
	if (fd < 0)
		return -1;
	want = sched[rng_below(&w->rng, 4)];
	if (note(w->st, write(fd, want, strlen(want))) > 0)
		count(w->st, F_SCHED);
	close(fd);
	return 0;
}
