/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The inside of a daemon's queue, shared by serve.c (the streams and the
 * data) and lies.c (the lies, and the window's mmap()/munmap()).
 */
#ifndef BIUS_FUZZ_SERVE_H
#define BIUS_FUZZ_SERVE_H

#include "fuzz.h"

struct queue {
	struct slot *s;
	int fd, index;
	struct stats *st;
	uint32_t epoch;			/* the daemon's: see struct slot */
	struct rng rng;
	int use_cf;			/* COMPLETE_FETCH, not read()/write() */
	unsigned int lie_pct;		/* lie in this % of completions */
	unsigned char *win;		/* the mmap()ed window, or NULL */
	size_t win_len;
	int mapped_once;
	unsigned char *rbuf, *wbuf, *pay;
	size_t rsize, wsize, wlen;
	struct bius_request cur;	/* the request being taken */
	struct bius_segment seg[BIUS_MAP_MAX_SEGMENTS];
	uint32_t pay_off, pay_len;	/* its payload so far, in pay */
	unsigned char rep[MAX_ZONES * sizeof(struct blk_zone)];
	pthread_t thread;
	int running, done;
};

/* serve.c */
void queue_flush(struct queue *q);
void queue_put(struct queue *q, uint64_t id, int result, uint64_t sector,
	       const void *payload, uint32_t len);

/* lies.c */
void lie_or_put(struct queue *q, const struct bius_request *r, int result,
		uint64_t sector, const void *payload, uint32_t len);
void window_map(struct queue *q);
void window_churn(struct queue *q);

/* holes.c */
ssize_t edge_fetch(struct queue *q);

#endif /* BIUS_FUZZ_SERVE_H */
