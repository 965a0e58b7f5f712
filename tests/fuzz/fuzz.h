/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the files of bius_fuzz share: the pool of device slots and the
 * counters in memory shared by every process, the PRNG, the action table
 * and the roles' entry points.
 */
#ifndef BIUS_FUZZ_H
#define BIUS_FUZZ_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/blkzoned.h>
#include <linux/fs.h>
#include <linux/bius.h>

#include "bius_clock.h"

#define CTL_PATH	"/dev/bius"
#define KiB		1024u
#define MiB		(1024u * 1024u)
#define NR_SLOTS	4		/* devices at most at a time */
#define SLOT_BYTES	(16 * MiB)	/* largest device */
#define MAX_ZONES	64
#define MAX_PROCS	16
#define MAX_QUEUES	3
#define MAX_IO		(256 * KiB)	/* largest max_io_bytes */
#define BLK		4096u		/* I/O unit of the I/O role */
#define IO_BUF		(64 * KiB)	/* its buffers */
#define HDR		sizeof(struct bius_request)
#define CMP		sizeof(struct bius_completion)
#define WATCHDOG_S	90		/* one action may take this long */
#define TRACE_LEN	16		/* last actions kept per worker */

/* One xorshift64* PRNG per process, derived from (seed, worker, ...). */
struct rng {
	uint64_t s;
};

/* A device of the pool and what its daemons share across processes. */
struct slot {
	pthread_mutex_t lock;		/* robust, process-shared: zones, */
					/* mem's stores, epoch */
	int claimed;			/* a daemon serves or will serve it */
	int live;			/* a device exists for it */
	uint32_t dev_id;
	pid_t daemon;			/* serving process, 0 if none */
	uint32_t gen;			/* bumped at every CREATE */
	uint64_t lies;			/* data-changing lies so far */
	uint32_t epoch;			/* bumped when a daemon takes the */
					/* device (CREATE, RECOVER): a lost */
					/* daemon still alive stores nothing */
	struct bius_device_params p;	/* as GET_INFO reports them */
	char disk[BIUS_NAME_LEN];	/* "" until LIVE */
	unsigned int nr_zones;
	struct blk_zone z[MAX_ZONES];
	unsigned char *mem;		/* SLOT_BYTES of data */
};

/* Counters: per action, per errno, and the figures of the summary. */
enum figure {
	F_CREATED, F_RECOVERED, F_KILLS, F_DAEMON_DEATHS, F_DESTROYS,
	F_LIES, F_LIES_REFUSED, F_SERVED, F_VERIFIED, F_REQUESTS_SEEN,
	F_REPLAYS, F_POLLED, F_ZONE_OPS, F_SCHED, F_EDGES, F_NAMES, F_HOLDS,
	F_NR
};

#define NR_ERRNO	134
#define MAX_ACTIONS	32

struct stats {
	uint64_t ops[MAX_ACTIONS], fails[MAX_ACTIONS];
	uint64_t err[NR_ERRNO];
	uint64_t fig[F_NR];
};

/* What a worker is doing, for the watchdog and the post-mortem. */
struct beat {
	pid_t pid;
	int action;			/* index in the table, -1 idle */
	long since_ms;
	uint64_t n;			/* actions started */
	int trace[TRACE_LEN];		/* the last actions, a ring */
};

struct shared {
	pthread_mutex_t pool_lock;	/* claims of slots */
	int stop;			/* past the deadline: finish up */
	int broken;			/* invariants broken */
	char first_broken[400];
	struct slot slot[NR_SLOTS];
	struct stats st[MAX_PROCS];
	struct beat beat[MAX_PROCS];
};

enum role { R_DAEMON, R_IO, R_CHAOS, R_NR };

struct worker;
typedef int (*action_fn)(struct worker *w);

struct action {
	const char *name;
	action_fn fn;
	unsigned int weight[R_NR];
};

struct worker {
	int index;
	enum role role;
	struct rng rng;
	struct stats *st;
	pid_t kids[NR_SLOTS];		/* the daemon it started, per slot */
	unsigned char *buf, *buf2;	/* IO_BUF bytes, BLK-aligned */
};

extern struct shared *sh;
extern const struct action actions[];
extern const unsigned int nr_actions;

/* common.c */
void rng_seed(struct rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(struct rng *r);
uint32_t rng_below(struct rng *r, uint32_t n);
int rng_pct(struct rng *r, unsigned int pct);
void count(struct stats *st, enum figure f);
int note(struct stats *st, int ret);
void broken(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void must_fail(struct stats *st, const char *what, int ret);
void shared_init(void);
struct slot *slot_pick(struct rng *r, int want_disk);
int get_info(int fd, uint32_t id, struct bius_device_info *info);
int disk_open(const struct slot *s, int flags, uint32_t *gen);

/* holes.c: a daemon thread that holds its mmap_lock on its own disk */
struct holder;
struct holder *holder_start(struct slot *s, struct stats *st, uint64_t seed);
void holder_stop(struct holder *h);

/* daemon.c: the serving process of a slot */
void daemon_main(struct slot *s, int recover, uint64_t seed, int widx);

/* serve.c: one queue of a daemon */
struct queue;
struct queue *queue_new(struct slot *s, int fd, int index,
			struct stats *st, uint64_t seed, uint32_t epoch);
void queue_start(struct queue *q);
int queue_join(struct queue *q, long ms);

/* zones.c: the zone model of a slot */
void zones_init(struct slot *s);
int zones_handle(struct slot *s, const struct bius_request *r,
		 uint32_t epoch, uint64_t *append_sector);
uint32_t zones_report(struct slot *s, const struct bius_request *r,
		      unsigned char *out);
void slot_lock(struct slot *s);
void slot_unlock(struct slot *s);

/* roles: daemon.c (start, recover, reap), io.c, chaos.c */
int act_daemon_start(struct worker *w);
int act_daemon_recover(struct worker *w);
int act_reap(struct worker *w);
int act_io_verify(struct worker *w);
int act_io_buffered(struct worker *w);
int act_io_uring(struct worker *w);
int act_io_zones(struct worker *w);
int act_io_rrpart(struct worker *w);
int act_io_sched(struct worker *w);
int act_kill(struct worker *w);
int act_destroy(struct worker *w);
int act_info(struct worker *w);
int act_bad_create(struct worker *w);
int act_bad_recover(struct worker *w);
int act_bad_connect(struct worker *w);
int act_unconnected(struct worker *w);
/* holes.c */
int act_bad_pointers(struct worker *w);
int act_bad_names(struct worker *w);
int act_io_mbr(struct worker *w);
void reap_kids(struct worker *w, int block);

#endif /* BIUS_FUZZ_H */
