// SPDX-License-Identifier: GPL-2.0
/*
 * The shared helpers of bius_fuzz: the PRNG, counters, broken
 * invariants, the memory shared by every process, picking a slot, and the
 * two calls every role makes (GET_INFO, opening a slot's disk).
 */

#include <stdarg.h>

#include "fuzz.h"

struct shared *sh;

void rng_seed(struct rng *r, uint64_t seed, uint64_t stream)
{
	/* splitmix64 of (seed, stream): independent streams, never 0 */
	uint64_t z = seed + (stream + 1) * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	r->s = (z ^ (z >> 31)) | 1;
}

uint64_t rng_next(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dull;
}

uint32_t rng_below(struct rng *r, uint32_t n)
{
	return n ? (uint32_t)(rng_next(r) >> 32) % n : 0;
}

int rng_pct(struct rng *r, unsigned int pct)
{
	return rng_below(r, 100) < pct;
}

void count(struct stats *st, enum figure f)
{
	__atomic_fetch_add(&st->fig[f], 1, __ATOMIC_RELAXED);
}

/* Count the errno of a failed call (ret < 0); returns @ret. */
int note(struct stats *st, int ret)
{
	int e = errno;

	if (ret < 0)
		__atomic_fetch_add(&st->err[e > 0 && e < NR_ERRNO ? e : 0], 1,
				   __ATOMIC_RELAXED);
	errno = e;
	return ret;
}

/* An invariant of the ABI is broken: say so now, fail the run at the end. */
void broken(const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	long now;
	int kmsg;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	now = bius_now_ms();
	printf("INVARIANT BROKEN (pid %d, at %ld.%03ld): %s\n", getpid(),
	       now / 1000, now % 1000, msg);
	fflush(stdout);
	/* in the kernel log too, where the driver's own lines are */
	kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (kmsg >= 0) {
		dprintf(kmsg, "bius_fuzz: INVARIANT BROKEN (pid %d): %s\n",
			getpid(), msg);
		close(kmsg);
	}
	if (__atomic_fetch_add(&sh->broken, 1, __ATOMIC_SEQ_CST) == 0)
		snprintf(sh->first_broken, sizeof(sh->first_broken), "%s", msg);
}

/* A call that the ABI says must fail (@ret 0 or more) did not. */
void must_fail(struct stats *st, const char *what, int ret)
{
	if (note(st, ret) >= 0)
		broken("%s succeeded (%d), the ABI says it must fail", what,
		       ret);
}

static void robust_mutex(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/* The shared memory: mapped before the workers fork, so at one address. */
void shared_init(void)
{
	unsigned char *mem;
	int i;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	mem = mmap(NULL, (size_t)NR_SLOTS * SLOT_BYTES, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (sh == MAP_FAILED || mem == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	memset(sh, 0, sizeof(*sh));
	robust_mutex(&sh->pool_lock);
	for (i = 0; i < NR_SLOTS; i++) {
		robust_mutex(&sh->slot[i].lock);
		sh->slot[i].mem = mem + (size_t)i * SLOT_BYTES;
	}
}

/* A random slot with a device (and a disk name if @want_disk), or NULL. */
struct slot *slot_pick(struct rng *r, int want_disk)
{
	unsigned int i, first = rng_below(r, NR_SLOTS);

	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *s = &sh->slot[(first + i) % NR_SLOTS];

		if (s->live && (!want_disk || s->disk[0]))
			return s;
	}
	return NULL;
}

int get_info(int fd, uint32_t id, struct bius_device_info *info)
{
	memset(info, 0, sizeof(*info));
	info->dev_id = id;
	return ioctl(fd, BIUS_IOC_GET_INFO, info);
}

/*
 * Open the slot's disk, by name: a disk is named once (daemon.c), and only
 * devtmpfs makes the node, so a node never leads to another disk.  Its
 * generation in *gen (the slot has that disk while s->gen is still *gen).
 */
int disk_open(const struct slot *s, int flags, uint32_t *gen)
{
	char path[BIUS_NAME_LEN + 8];

	*gen = __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST);
	snprintf(path, sizeof(path), "/dev/%.*s", BIUS_NAME_LEN - 1, s->disk);
	if (__atomic_load_n(&s->gen, __ATOMIC_SEQ_CST) != *gen ||
	    !path[5]) {
		errno = ENXIO;
		return -1;
	}
	return open(path, flags | O_CLOEXEC);
}
