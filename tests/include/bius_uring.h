/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A bare io_uring through the raw system calls (no liburing), for the test
 * programs that submit polled I/O (tests/badinput, tests/fuzz): set up a
 * ring, submit one read or write, reap one completion with a time limit.
 */
#ifndef BIUS_TESTS_URING_H
#define BIUS_TESTS_URING_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/io_uring.h>

#include "bius_clock.h"

struct ring {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array;
	unsigned int *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	void *sq_map, *cq_map;
	size_t sq_len, cq_len, sqes_len;
};

static inline void *ring_map(int fd, size_t len, off_t off)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, fd, off);

	return p == MAP_FAILED ? NULL : p;
}

static inline void ring_exit(struct ring *r)
{
	if (r->sqes)
		munmap(r->sqes, r->sqes_len);
	if (r->cq_map)
		munmap(r->cq_map, r->cq_len);
	if (r->sq_map)
		munmap(r->sq_map, r->sq_len);
	if (r->fd >= 0)
		close(r->fd);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

/* A ring of 4 entries set up with @flags (IORING_SETUP_*); 0, or -1. */
static inline int ring_init(struct ring *r, unsigned int flags)
{
	struct io_uring_params p;
	char *sq, *cq;

	memset(r, 0, sizeof(*r));
	memset(&p, 0, sizeof(p));
	p.flags = flags;
	r->fd = syscall(__NR_io_uring_setup, 4, &p);
	if (r->fd < 0)
		return -1;
	r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	r->sq_map = ring_map(r->fd, r->sq_len, IORING_OFF_SQ_RING);
	r->cq_map = ring_map(r->fd, r->cq_len, IORING_OFF_CQ_RING);
	r->sqes = ring_map(r->fd, r->sqes_len, IORING_OFF_SQES);
	if (!r->sq_map || !r->cq_map || !r->sqes) {
		ring_exit(r);
		return -1;
	}
	sq = r->sq_map;
	cq = r->cq_map;
	r->sq_tail = (unsigned int *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned int *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned int *)(sq + p.sq_off.array);
	r->cq_head = (unsigned int *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned int *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned int *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/*
 * Submit one @opcode (IORING_OP_READ or IORING_OP_WRITE) of @len bytes at
 * @off of @fd; 1 if submitted.
 */
static inline int ring_rw(struct ring *r, int opcode, int fd, void *buf,
			  unsigned int len, uint64_t off)
{
	unsigned int tail = *r->sq_tail, idx = tail & *r->sq_mask;
	struct io_uring_sqe *sqe = &r->sqes[idx];

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = opcode;
	sqe->fd = fd;
	sqe->addr = (uintptr_t)buf;
	sqe->len = len;
	sqe->off = off;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	return syscall(__NR_io_uring_enter, r->fd, 1, 0, 0, NULL, 0);
}

/*
 * Poll for a completion up to @ms; its result in *res.  0, or -1 if none
 * came (errno ETIMEDOUT).
 */
static inline int ring_reap(struct ring *r, long ms, int *res)
{
	long end = bius_now_ms() + ms;
	unsigned int head;

	do {
		head = *r->cq_head;
		if (head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
			*res = r->cqes[head & *r->cq_mask].res;
			__atomic_store_n(r->cq_head, head + 1,
					 __ATOMIC_RELEASE);
			return 0;
		}
		syscall(__NR_io_uring_enter, r->fd, 0, 0,
			IORING_ENTER_GETEVENTS, NULL, 0);
	} while (bius_now_ms() < end);
	errno = ETIMEDOUT;
	return -1;
}

#endif /* BIUS_TESTS_URING_H */
