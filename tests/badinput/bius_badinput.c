// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: every refusal of the BIUS driver, plus the protocol and
 * lifecycle rules, checked from user space inside a VM after `insmod
 * bius.ko`.  Each check prints "ok - <name>" or "not ok - <name>: <why>";
 * the last line is "N passed, M failed" and the exit status is 0 only if
 * M is 0.  A watchdog turns a hang into a failed check.
 *
 * The program serves its devices itself: small in-memory disks, served by
 * threads or by the main thread when a check needs to control the stream.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/bius.h>

#include "bius_zonefs.h"

#define CTL_PATH	"/dev/bius"
#define KiB		1024u
#define MiB		(1024u * 1024u)
#define MAX_QUEUES	4
#define HDR		sizeof(struct bius_request)
#define CMP		sizeof(struct bius_completion)

static int passed, failed;
static const char *volatile current_check = "start";

static void ok(const char *name)
{
	printf("ok - %s\n", name);
	fflush(stdout);
	passed++;
}

static void __attribute__((format(printf, 2, 3)))
not_ok(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("not ok - %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	failed++;
}

/* A check that a call failed with errno @want (ret is -1/errno style). */
static void expect_errno(const char *name, int ret, int err, int want)
{
	if (ret == -1 && err == want)
		ok(name);
	else if (ret == -1)
		not_ok(name, "errno %d (%s), expected %s", err, strerror(err),
		       strerror(want));
	else
		not_ok(name, "succeeded (%d), expected %s", ret,
		       strerror(want));
}

static void expect_true(const char *name, int cond, const char *fmt, ...)
{
	va_list ap;
	char why[256];

	if (cond) {
		ok(name);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	not_ok(name, "%s", why);
}

static void summary_and_exit(void)
{
	printf("%d passed, %d failed\n", passed, failed);
	fflush(stdout);
	exit(failed ? 1 : 0);
}

static void on_alarm(int sig)
{
	char buf[256];
	int n;

	(void)sig;
	n = snprintf(buf, sizeof(buf),
		     "not ok - watchdog: hung during '%s'\n%d passed, %d failed\n",
		     current_check, passed, failed + 1);
	if (write(1, buf, n) < 0)
		_exit(2);
	_exit(1);
}

static void watchdog(const char *phase, unsigned int seconds)
{
	current_check = phase;
	alarm(seconds);
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- ioctl wrappers: return 0 or -1 with errno ------------------------- */

static int ctl_open(void)
{
	int fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		printf("not ok - open %s: %s\n", CTL_PATH, strerror(errno));
		failed++;
		summary_and_exit();
	}
	return fd;
}

static void params_default(struct bius_device_params *p, const char *name)
{
	memset(p, 0, sizeof(*p));
	p->abi_version = BIUS_ABI_VERSION;
	p->size = 4 * MiB;
	p->logical_block_size = 4096;
	p->nr_hw_queues = 1;
	p->queue_depth = 16;
	p->max_io_bytes = 128 * KiB;
	if (name)
		snprintf(p->name, sizeof(p->name), "%s", name);
}

static int get_info(int ctl, uint32_t id, struct bius_device_info *info)
{
	memset(info, 0, sizeof(*info));
	info->dev_id = id;
	return ioctl(ctl, BIUS_IOC_GET_INFO, info);
}

static int do_connect(int fd, uint32_t id, uint32_t queue)
{
	struct bius_connect c = { .dev_id = id, .queue = queue };

	return ioctl(fd, BIUS_IOC_CONNECT, &c);
}

static int do_destroy(int ctl, uint32_t id, uint32_t flags)
{
	struct bius_destroy d = { .dev_id = id, .flags = flags };

	return ioctl(ctl, BIUS_IOC_DESTROY_DEVICE, &d);
}

static int state_of(int ctl, uint32_t id)
{
	struct bius_device_info info;

	if (get_info(ctl, id, &info))
		return -errno;
	return info.state;
}

static int sysfs_exists(const char *name)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "/sys/block/%s", name);
	return stat(path, &st) == 0;
}

static long sysfs_long(const char *name, const char *attr)
{
	char path[160];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/block/%s/%s", name, attr);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static int sysfs_read(const char *name, const char *attr, char *buf,
		      size_t size)
{
	char path[160];
	FILE *f;

	buf[0] = 0;
	snprintf(path, sizeof(path), "/sys/block/%s/%s", name, attr);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, size, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int sysfs_is(const char *name, const char *attr, const char *want)
{
	char buf[64];

	return !sysfs_read(name, attr, buf, sizeof(buf)) && !strcmp(buf, want);
}

/* Open the disk, creating its node if devtmpfs is not there. */
static int disk_open(const char *name, int flags)
{
	char path[96], sys[128];
	unsigned int maj, min;
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "/dev/%s", name);
	fd = open(path, flags | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	snprintf(sys, sizeof(sys), "/sys/block/%s/dev", name);
	f = fopen(sys, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%u:%u", &maj, &min) != 2) {
		fclose(f);
		errno = ENODEV;
		return -1;
	}
	fclose(f);
	if (mknod(path, S_IFBLK | 0600, makedev(maj, min)) && errno != EEXIST)
		return -1;
	return open(path, flags | O_CLOEXEC);
}

static void *xalloc(size_t size)
{
	void *p;

	if (posix_memalign(&p, 4096, size)) {
		printf("not ok - out of memory\n");
		failed++;
		summary_and_exit();
	}
	memset(p, 0, size);
	return p;
}

static void fill_pattern(unsigned char *buf, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 9)) ^ seed);
}

/* ---- a served in-memory disk -------------------------------------------- */

#define ZM_MAX_ZONES	64

/* The zones of a zoned test device, shared by its queues. */
struct zmodel {
	pthread_mutex_t lock;
	unsigned int nr;
	uint64_t zone_sectors;
	struct blk_zone z[ZM_MAX_ZONES];
	int inject;		/* the next zone operation fails with this */
	int last_op;		/* last zone operation: BIUS_OP_*, -1 none */
	uint64_t last_sector;
	int reports;		/* REPORT_ZONES served */
	int appends;		/* ZONE_APPENDs completed successfully */
	int append_probe;	/* first send the next append's bad sectors */
	int probe_err[3];	/* their write() errnos, 0 if accepted */
};

struct srv {
	int fd;			/* connected queue fd */
	int index;
	unsigned char *mem;	/* shared by the queues of a device */
	uint64_t size;
	unsigned char *rbuf;
	size_t rsize;
	unsigned char *wbuf;
	size_t wsize, wlen;
	struct bius_request cur;	/* write whose payload is arriving */
	uint32_t cur_off;
	uint64_t cur_dst;	/* where its payload goes (sector) */
	int in_payload;
	atomic_int served;
	atomic_int protocol_errors;
	pthread_t thread;
	int running;
	int delay_pct;		/* race mode: delay this % of batches */
	int delay_max_ms;
	atomic_int stop;	/* race mode: close the fd and end */
	unsigned int seed;
	struct zmodel *zm;	/* zoned devices only */
	unsigned char *win;	/* map modes: the mmap()ed data window */
	size_t win_len;
};

struct tdev {
	int ctl;
	uint32_t id;
	char name[BIUS_NAME_LEN];
	unsigned int nq;
	unsigned char *mem;
	uint64_t size;
	struct zmodel *zm;	/* zoned devices only */
	struct srv srv[MAX_QUEUES];
};

static int srv_flush(struct srv *s)
{
	size_t off = 0;

	while (off < s->wlen) {
		ssize_t n = write(s->fd, s->wbuf + off, s->wlen - off);

		if (n < 0) {
			s->protocol_errors++;
			s->wlen = 0;
			return -1;
		}
		off += n;
	}
	s->wlen = 0;
	return 0;
}

static void srv_complete_at(struct srv *s, uint64_t id, int result,
			    uint64_t sector, const void *payload, uint32_t len)
{
	struct bius_completion c = { .id = id, .result = result, .len = len,
				     .sector = sector };

	if (s->wlen + CMP + len > s->wsize)
		srv_flush(s);
	memcpy(s->wbuf + s->wlen, &c, CMP);
	s->wlen += CMP;
	if (len)
		memcpy(s->wbuf + s->wlen, payload, len);
	s->wlen += len;
	s->served++;
}

static void srv_complete(struct srv *s, uint64_t id, int result,
			 const void *payload, uint32_t len)
{
	srv_complete_at(s, id, result, 0, payload, len);
}

/* ---- the zone model (a few null_blk rules, no resource limits) --------- */

static void zm_init(struct zmodel *zm, const struct bius_device_params *p)
{
	uint64_t end = p->size / 512, zs = p->zoned.zone_size / 512;
	unsigned int i;

	memset(zm, 0, sizeof(*zm));
	pthread_mutex_init(&zm->lock, NULL);
	zm->zone_sectors = zs;
	zm->last_op = -1;
	for (i = 0; i < ZM_MAX_ZONES && i * zs < end; i++) {
		struct blk_zone *z = &zm->z[i];

		z->start = i * zs;
		z->len = end - z->start < zs ? end - z->start : zs;
		if (i < p->zoned.nr_conv_zones) {
			z->type = BLK_ZONE_TYPE_CONVENTIONAL;
			z->cond = BLK_ZONE_COND_NOT_WP;
			z->capacity = z->len;
			z->wp = z->start + z->len;
		} else {
			z->type = BLK_ZONE_TYPE_SEQWRITE_REQ;
			z->cond = BLK_ZONE_COND_EMPTY;
			z->capacity = p->zoned.zone_capacity / 512;
			if (z->capacity > z->len)
				z->capacity = z->len;
			z->wp = z->start;
		}
	}
	zm->nr = i;
}

static struct blk_zone *zm_zone(struct zmodel *zm, uint64_t sector)
{
	uint64_t i = sector / zm->zone_sectors;

	return i < zm->nr ? &zm->z[i] : NULL;
}

static int zm_seq(const struct blk_zone *z)
{
	return z && z->type == BLK_ZONE_TYPE_SEQWRITE_REQ;
}

static void zm_reset(struct blk_zone *z)
{
	z->cond = BLK_ZONE_COND_EMPTY;
	z->wp = z->start;
}

/* A zone operation; the caller holds zm->lock. */
static int zm_op(struct zmodel *zm, const struct bius_request *r)
{
	struct blk_zone *z = zm_zone(zm, r->sector);
	unsigned int i;

	zm->last_op = r->op;
	zm->last_sector = r->sector;
	if (zm->inject) {
		int res = zm->inject;

		zm->inject = 0;
		return res;
	}
	if (r->op == BIUS_OP_ZONE_RESET_ALL) {
		for (i = 0; i < zm->nr; i++)
			if (zm_seq(&zm->z[i]))
				zm_reset(&zm->z[i]);
		return 0;
	}
	if (!zm_seq(z) || z->start != r->sector || r->len)
		return -EIO;
	switch (r->op) {
	case BIUS_OP_ZONE_OPEN:
		if (z->cond == BLK_ZONE_COND_FULL)
			return -EIO;
		z->cond = BLK_ZONE_COND_EXP_OPEN;
		break;
	case BIUS_OP_ZONE_CLOSE:
		if (z->cond == BLK_ZONE_COND_IMP_OPEN ||
		    z->cond == BLK_ZONE_COND_EXP_OPEN)
			z->cond = z->wp == z->start ? BLK_ZONE_COND_EMPTY :
						      BLK_ZONE_COND_CLOSED;
		break;
	case BIUS_OP_ZONE_FINISH:
		z->cond = BLK_ZONE_COND_FULL;
		z->wp = z->start + z->len;
		break;
	case BIUS_OP_ZONE_RESET:
		zm_reset(z);
		break;
	default:
		return -EOPNOTSUPP;
	}
	return 0;
}

/* A write to a sequential zone must land at its write pointer. */
static int zm_write(struct zmodel *zm, const struct bius_request *r)
{
	struct blk_zone *z = zm_zone(zm, r->sector);
	uint64_t n = r->len / 512;

	if (!zm_seq(z))
		return 0;
	if (r->sector != z->wp || z->cond == BLK_ZONE_COND_FULL ||
	    z->wp + n > z->start + z->capacity)
		return -EIO;
	z->wp += n;
	if (z->wp == z->start + z->capacity)
		z->cond = BLK_ZONE_COND_FULL;
	else if (z->cond != BLK_ZONE_COND_EXP_OPEN)
		z->cond = BLK_ZONE_COND_IMP_OPEN;
	return 0;
}

/* Where a zone append will land (its zone's write pointer). */
static uint64_t zm_append_dst(struct zmodel *zm, const struct bius_request *r)
{
	struct blk_zone *z;
	uint64_t dst;

	pthread_mutex_lock(&zm->lock);
	z = zm_zone(zm, r->sector);
	dst = z ? z->wp : r->sector;
	pthread_mutex_unlock(&zm->lock);
	return dst;
}

/* A zone append; the caller holds zm->lock.  Returns the landing sector. */
static int zm_append(struct zmodel *zm, const struct bius_request *r,
		     uint64_t *sector)
{
	struct blk_zone *z = zm_zone(zm, r->sector);
	struct bius_request w = *r;

	if (!zm_seq(z) || z->start != r->sector)
		return -EIO;
	*sector = w.sector = z->wp;
	return zm_write(zm, &w);
}

/* Bad append completions first: each must be refused with EINVAL. */
static void srv_append_probe(struct srv *s, const struct bius_request *r,
			     uint64_t sector)
{
	struct zmodel *zm = s->zm;
	struct blk_zone *z = zm_zone(zm, r->sector);
	uint64_t bad[3] = {
		z->start + z->len,			/* past the zone */
		sector + 1,				/* not block aligned */
		z->start + z->capacity - 8,		/* data past capacity */
	};
	struct bius_completion c = { .id = r->id };
	unsigned int i;

	srv_flush(s);
	for (i = 0; i < 3; i++) {
		c.sector = bad[i];
		zm->probe_err[i] = write(s->fd, &c, CMP) < 0 ? errno : 0;
	}
	zm->append_probe = 0;
}

static void srv_zoned_request(struct srv *s, const struct bius_request *r)
{
	struct zmodel *zm = s->zm;
	struct blk_zone *z;
	unsigned int first, n;
	int res = 0;

	pthread_mutex_lock(&zm->lock);
	switch (r->op) {
	case BIUS_OP_REPORT_ZONES:
		z = zm_zone(zm, r->sector);
		if (!z) {
			res = -EIO;
			break;
		}
		first = z - zm->z;
		n = r->len / sizeof(*z);
		if (n > zm->nr - first)
			n = zm->nr - first;
		zm->reports++;
		srv_complete(s, r->id, 0, z, n * sizeof(*z));
		pthread_mutex_unlock(&zm->lock);
		return;
	case BIUS_OP_WRITE:
		res = zm_write(zm, r);
		break;
	case BIUS_OP_ZONE_APPEND: {
		uint64_t sector = 0;

		res = zm_append(zm, r, &sector);
		if (!res && zm->append_probe)
			srv_append_probe(s, r, sector);
		if (!res)
			zm->appends++;
		pthread_mutex_unlock(&zm->lock);
		srv_complete_at(s, r->id, res, res ? 0 : sector, NULL, 0);
		return;
	}
	default:
		res = zm_op(zm, r);
	}
	pthread_mutex_unlock(&zm->lock);
	srv_complete(s, r->id, res, NULL, 0);
}

static int srv_in_range(struct srv *s, const struct bius_request *r)
{
	uint64_t off = r->sector * 512;

	return off <= s->size && r->len <= s->size - off;
}

static void srv_request(struct srv *s, const struct bius_request *r)
{
	uint64_t off = r->sector * 512;

	if (s->zm && (r->op == BIUS_OP_WRITE ||
		      r->op >= BIUS_OP_REPORT_ZONES)) {
		srv_zoned_request(s, r);
		return;
	}
	if (r->op != BIUS_OP_FLUSH && !srv_in_range(s, r)) {
		srv_complete(s, r->id, -EIO, NULL, 0);
		return;
	}
	switch (r->op) {
	case BIUS_OP_READ:
		if (r->flags & BIUS_REQ_MAPPED) {
			memcpy(s->win + r->window_offset, s->mem + off, r->len);
			srv_complete(s, r->id, 0, NULL, 0);
			break;
		}
		srv_complete(s, r->id, 0, s->mem + off, r->len);
		break;
	case BIUS_OP_WRITE:	/* the payload was copied on arrival */
	case BIUS_OP_FLUSH:
		srv_complete(s, r->id, 0, NULL, 0);
		break;
	case BIUS_OP_DISCARD:
	case BIUS_OP_WRITE_ZEROES:
		memset(s->mem + off, 0, r->len);
		srv_complete(s, r->id, 0, NULL, 0);
		break;
	default:
		srv_complete(s, r->id, -EOPNOTSUPP, NULL, 0);
	}
}

/* Consume one read() chunk of the request stream. */
static void srv_consume(struct srv *s, const unsigned char *p, size_t n)
{
	while (n) {
		if (s->in_payload) {
			uint32_t want = s->cur.len - s->cur_off;
			uint32_t take = n < want ? n : want;

			if (s->cur_dst <= s->size / 512 &&
			    s->cur.len <= s->size - s->cur_dst * 512)
				memcpy(s->mem + s->cur_dst * 512 + s->cur_off,
				       p, take);
			s->cur_off += take;
			p += take;
			n -= take;
			if (s->cur_off == s->cur.len) {
				s->in_payload = 0;
				srv_request(s, &s->cur);
			}
			continue;
		}
		if (n < HDR) {	/* a header is never split */
			s->protocol_errors++;
			return;
		}
		memcpy(&s->cur, p, HDR);
		p += HDR;
		n -= HDR;
		if (s->cur.flags & BIUS_REQ_MAPPED) {
			if (s->cur.op == BIUS_OP_WRITE && srv_in_range(s, &s->cur))
				memcpy(s->mem + s->cur.sector * 512,
				       s->win + s->cur.window_offset,
				       s->cur.len);
			srv_request(s, &s->cur);
		} else if ((s->cur.op == BIUS_OP_WRITE ||
			    s->cur.op == BIUS_OP_ZONE_APPEND) && s->cur.len) {
			s->in_payload = 1;
			s->cur_off = 0;
			s->cur_dst = s->cur.sector;
			if (s->cur.op == BIUS_OP_ZONE_APPEND && s->zm)
				s->cur_dst = zm_append_dst(s->zm, &s->cur);
		} else {
			srv_request(s, &s->cur);
		}
	}
}

/* Serve what is there now; returns read()'s result. */
static ssize_t srv_serve_once(struct srv *s)
{
	ssize_t n = read(s->fd, s->rbuf, s->rsize);

	if (n > 0) {
		srv_consume(s, s->rbuf, n);
		if (s->delay_pct && (int)(rand_r(&s->seed) % 100) < s->delay_pct)
			sleep_ms(rand_r(&s->seed) % (s->delay_max_ms + 1));
		srv_flush(s);
	}
	return n;
}

static void *srv_thread(void *arg)
{
	struct srv *s = arg;
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };

	for (;;) {
		ssize_t n;

		if (s->stop) {
			close(s->fd);
			s->fd = -1;
			break;
		}
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		if (pfd.revents & POLLHUP)
			break;
		n = srv_serve_once(s);
		if (n == 0)
			break;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			break;
	}
	return NULL;
}

static void srv_init(struct srv *s, struct tdev *d, int index)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->index = index;
	s->mem = d->mem;
	s->size = d->size;
	s->zm = d->zm;
	s->rsize = 2 * MiB;
	s->rbuf = xalloc(s->rsize);
	s->wsize = 2 * MiB;
	s->wbuf = xalloc(s->wsize);
}

static void srv_start_thread(struct srv *s)
{
	if (pthread_create(&s->thread, NULL, srv_thread, s) == 0)
		s->running = 1;
}

/* Wait for the server threads to end (they get EOF when the device dies). */
static int tdev_join(struct tdev *d, long timeout_ms)
{
	long end = now_ms() + timeout_ms;
	unsigned int i;
	int all = 1;

	for (i = 0; i < d->nq; i++) {
		struct srv *s = &d->srv[i];

		if (!s->running)
			continue;
		while (pthread_tryjoin_np(s->thread, NULL) == EBUSY) {
			if (now_ms() > end) {
				all = 0;
				break;
			}
			sleep_ms(10);
		}
		if (all)
			s->running = 0;
	}
	return all;
}

static void tdev_close_fds(struct tdev *d)
{
	unsigned int i;

	for (i = 0; i < d->nq; i++) {
		if (d->srv[i].win)
			munmap(d->srv[i].win, d->srv[i].win_len);
		d->srv[i].win = NULL;
		if (d->srv[i].fd >= 0)
			close(d->srv[i].fd);
		d->srv[i].fd = -1;
	}
}

static void tdev_free(struct tdev *d)
{
	unsigned int i;

	tdev_close_fds(d);
	if (d->ctl >= 0)
		close(d->ctl);
	d->ctl = -1;
	for (i = 0; i < d->nq; i++) {
		free(d->srv[i].rbuf);
		free(d->srv[i].wbuf);
		d->srv[i].rbuf = NULL;
		d->srv[i].wbuf = NULL;
	}
	free(d->mem);
	d->mem = NULL;
}

/* Create and connect every queue; @zm: the zones of a zoned device. */
static int tdev_create(struct tdev *d, struct bius_device_params *p,
		       struct zmodel *zm, const char *check)
{
	unsigned int i;

	memset(d, 0, sizeof(*d));
	d->ctl = ctl_open();
	d->nq = p->nr_hw_queues;
	d->size = p->size;
	d->mem = xalloc(p->size);
	d->zm = zm;
	for (i = 0; i < d->nq; i++)
		srv_init(&d->srv[i], d, i);

	if (ioctl(d->ctl, BIUS_IOC_CREATE_DEVICE, p)) {
		not_ok(check, "CREATE_DEVICE: %s", strerror(errno));
		return -1;
	}
	d->id = p->dev_id;
	for (i = 0; i < d->nq; i++) {
		d->srv[i].fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);
		if (d->srv[i].fd < 0 || do_connect(d->srv[i].fd, d->id, i)) {
			not_ok(check, "CONNECT %u: %s", i, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Serve from this thread until the device is LIVE. */
static int tdev_wait_live(struct tdev *d, const char *check)
{
	struct bius_device_info info;
	struct pollfd pfd[MAX_QUEUES];
	long end;
	unsigned int i;

	for (i = 0; i < d->nq; i++) {
		pfd[i].fd = d->srv[i].fd;
		pfd[i].events = POLLIN;
	}

	end = now_ms() + 20000;
	while (now_ms() < end) {
		if (get_info(d->ctl, d->id, &info)) {
			not_ok(check, "GET_INFO: %s", strerror(errno));
			return -1;
		}
		if (info.state == BIUS_STATE_LIVE) {
			snprintf(d->name, sizeof(d->name), "%s",
				 info.disk_name);
			return 0;
		}
		if (info.state != BIUS_STATE_CREATED) {
			not_ok(check, "device went to state %u", info.state);
			return -1;
		}
		if (poll(pfd, d->nq, 20) > 0)
			for (i = 0; i < d->nq; i++)
				if (pfd[i].revents & POLLIN)
					srv_serve_once(&d->srv[i]);
	}
	not_ok(check, "device not LIVE after 20 s");
	return -1;
}

/* Create, connect every queue, serve from this thread until LIVE. */
static int tdev_up(struct tdev *d, struct bius_device_params *p,
		   const char *check)
{
	if (tdev_create(d, p, NULL, check))
		return -1;
	return tdev_wait_live(d, check);
}

static void tdev_serve_in_threads(struct tdev *d)
{
	unsigned int i;

	for (i = 0; i < d->nq; i++)
		srv_start_thread(&d->srv[i]);
}

/* ---- I/O from another thread -------------------------------------------- */

#define IO_MAX_IOV	16

struct io_job {
	int fd;
	int write;
	struct iovec iov[IO_MAX_IOV];	/* the buffer */
	int iovcnt;
	off_t off;
	int cpu;		/* -1: any */
	ssize_t ret;
	int err;
	atomic_int done;
	pthread_t thread;
};

static void *io_thread(void *arg)
{
	struct io_job *j = arg;

	if (j->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(j->cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	if (j->write)
		j->ret = pwritev(j->fd, j->iov, j->iovcnt, j->off);
	else
		j->ret = preadv(j->fd, j->iov, j->iovcnt, j->off);
	j->err = errno;
	j->done = 1;
	return NULL;
}

/* Start preadv()/pwritev() of the @iovcnt buffers @iov in a thread. */
static void io_start_iov(struct io_job *j, int fd, int write,
			 const struct iovec *iov, int iovcnt, off_t off,
			 int cpu)
{
	memset(j, 0, sizeof(*j));
	j->fd = fd;
	j->write = write;
	memcpy(j->iov, iov, iovcnt * sizeof(*iov));
	j->iovcnt = iovcnt;
	j->off = off;
	j->cpu = cpu;
	if (pthread_create(&j->thread, NULL, io_thread, j)) {
		j->ret = -1;
		j->err = errno;
		j->done = 2;
	}
}

static void io_start(struct io_job *j, int fd, int write, void *buf,
		     size_t len, off_t off, int cpu)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	io_start_iov(j, fd, write, &iov, 1, off, cpu);
}

/* 1 if the job finished within @ms (and was joined). */
static int io_wait(struct io_job *j, long ms)
{
	long end = now_ms() + ms;

	if (j->done == 2)
		return 1;
	while (!j->done) {
		if (now_ms() > end)
			return 0;
		sleep_ms(5);
	}
	pthread_join(j->thread, NULL);
	return 1;
}

/* Read requests from any queue of @d until one arrives (main thread). */
static ssize_t wait_requests(struct tdev *d, unsigned char *buf, size_t len,
			     unsigned int *queue, long ms)
{
	struct pollfd pfd[MAX_QUEUES];
	long end = now_ms() + ms;
	unsigned int i;

	for (i = 0; i < d->nq; i++) {
		pfd[i].fd = d->srv[i].fd;
		pfd[i].events = POLLIN;
	}
	while (now_ms() < end) {
		if (poll(pfd, d->nq, 50) <= 0)
			continue;
		for (i = 0; i < d->nq; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			*queue = i;
			return read(pfd[i].fd, buf, len);
		}
	}
	errno = ETIMEDOUT;
	return -1;
}

static ssize_t send_completion_sector(int fd, uint64_t id, int result,
				      uint64_t sector, const void *payload,
				      uint32_t len)
{
	unsigned char rec[CMP + 64 * KiB];
	struct bius_completion c = { .id = id, .result = result, .len = len,
				     .sector = sector };

	memcpy(rec, &c, CMP);
	if (len)
		memcpy(rec + CMP, payload, len);
	return write(fd, rec, CMP + len);
}

static ssize_t send_completion(int fd, uint64_t id, int result,
			       const void *payload, uint32_t len)
{
	return send_completion_sector(fd, id, result, 0, payload, len);
}

/* ---- the checks --------------------------------------------------------- */

static const char *const create_cases[] = {
	"create: size 0",
	"create: size not a multiple of lbs",
	"create: lbs 1000",
	"create: lbs 8192",
	"create: lbs 256",
	"create: pbs 3000",
	"create: pbs below lbs",
	"create: pbs 128K",
	"create: queues 0",
	"create: queues 65",
	"create: depth 0",
	"create: depth 4097",
	"create: max_io 16M",
	"create: max_io below lbs",
	"create: max_io not a multiple of lbs",
	"create: unknown feature bit 40",
	"create: zoned without a zone size",
	"create: unknown transfer_mode",
	"create: map_threshold in copy mode",
	"create: reserved[2] non-zero",
	"create: abi_version 0",
	"create: abi_version 2",
	"create: name with space",
	"create: name with slash",
	"create: unterminated name",
	"create: poll_usecs above BIUS_MAX_POLL_USECS",
	"create: reserved0 non-zero",
};

/* Make create_cases[i] out of valid parameters. */
static void create_case(unsigned int i, struct bius_device_params *p)
{
	switch (i) {
	case 0: p->size = 0; break;
	case 1: p->size = 4 * MiB + 512; break;
	case 2: p->logical_block_size = 1000; break;
	case 3: p->logical_block_size = 8192; break;
	case 4: p->logical_block_size = 256; break;
	case 5: p->physical_block_size = 3000; break;
	case 6: p->physical_block_size = 512; break;
	case 7: p->physical_block_size = 128 * KiB; break;
	case 8: p->nr_hw_queues = 0; break;
	case 9: p->nr_hw_queues = BIUS_MAX_HW_QUEUES + 1; break;
	case 10: p->queue_depth = 0; break;
	case 11: p->queue_depth = BIUS_MAX_QUEUE_DEPTH + 1; break;
	case 12: p->max_io_bytes = 16 * MiB; break;
	case 13: p->max_io_bytes = 2048; break;
	case 14: p->max_io_bytes = 64 * KiB + 512; break;
	case 15: p->features = 1ULL << 40; break;
	case 16: p->features = 1ULL << 6; break;
	case 17: p->transfer_mode = 7; break;
	case 18: p->map_threshold = 4096; break;
	case 19: p->reserved[2] = 1; break;
	case 20: p->abi_version = 0; break;
	case 21: p->abi_version = BIUS_ABI_VERSION + 1; break;
	case 22: strcpy(p->name, "a b"); break;
	case 23: strcpy(p->name, "a/b"); break;
	case 24: memset(p->name, 'x', BIUS_NAME_LEN); break;
	case 25: p->poll_usecs = BIUS_MAX_POLL_USECS + 1; break;
	case 26: p->reserved0 = 1; break;
	}
}

static void check_create_refusals(int ctl)
{
	struct bius_device_params p;
	unsigned int i;
	int r;

	for (i = 0; i < sizeof(create_cases) / sizeof(create_cases[0]); i++) {
		current_check = create_cases[i];
		params_default(&p, NULL);
		create_case(i, &p);
		r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
		expect_errno(create_cases[i], r, errno, EINVAL);
		if (r == 0)
			do_destroy(ctl, p.dev_id, BIUS_DESTROY_FORCE);
	}
}

static void check_basics(int ctl)
{
	struct bius_device_info info;
	struct stat st;
	char buf[64];
	int r;

	r = stat(CTL_PATH, &st);
	expect_true("control node is mode 0600", r == 0 &&
		    (st.st_mode & 0777) == 0600, "mode %o",
		    r ? 0 : st.st_mode & 0777);
	r = ioctl(ctl, _IO(BIUS_IOC_MAGIC, 0x7f));
	expect_errno("unknown ioctl", r, errno, ENOTTY);
	r = get_info(ctl, 0x7ffffff0, &info);
	expect_errno("GET_INFO unknown device", r, errno, ENODEV);
	r = do_destroy(ctl, 0x7ffffff0, 0);
	expect_errno("DESTROY unknown device", r, errno, ENODEV);
	r = do_connect(ctl, 0x7ffffff0, 0);
	expect_errno("CONNECT unknown device", r, errno, ENODEV);
	r = read(ctl, buf, sizeof(buf));
	expect_errno("read on unconnected fd", r, errno, ENOTCONN);
	memset(buf, 0, sizeof(buf));
	r = write(ctl, buf, CMP);
	expect_errno("write on unconnected fd", r, errno, ENOTCONN);
}

static int drop_sys_admin(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return -1;
	data[0].effective &= ~(1u << CAP_SYS_ADMIN);
	return syscall(SYS_capset, &hdr, data);
}

static void check_capability(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		struct bius_device_params p;
		int fd = open(CTL_PATH, O_RDWR);

		params_default(&p, NULL);
		if (fd < 0 || drop_sys_admin())
			_exit(2);
		if (ioctl(fd, BIUS_IOC_CREATE_DEVICE, &p) == 0)
			_exit(3);
		_exit(errno == EPERM ? 0 : 4);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		not_ok("CREATE without CAP_SYS_ADMIN", "fork failed");
	else
		expect_true("CREATE without CAP_SYS_ADMIN", WIFEXITED(status) &&
			    WEXITSTATUS(status) == 0, "child status %d",
			    status);
}

static void check_duplicate_name(int ctl)
{
	struct bius_device_params p, q;
	int r;

	params_default(&p, "bi-dup_1");
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
	if (r) {
		not_ok("create: duplicate name", "first create: %s",
		       strerror(errno));
		return;
	}
	params_default(&q, "bi-dup_1");
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &q);
	expect_errno("create: duplicate name", r, errno, EEXIST);
	if (r == 0)
		do_destroy(ctl, q.dev_id, 0);
	r = do_destroy(ctl, p.dev_id, 0);
	expect_true("destroy of a CREATED device", r == 0, "%s",
		    strerror(errno));
}

/* Connection rules, GET_INFO and LIST_DEVICES on a device not yet live. */
static void check_connect_rules(void)
{
	struct bius_device_params p;
	struct bius_device_info info;
	struct bius_device_list list;
	uint32_t ids[64];
	int ctl = ctl_open(), a, b, r, found = 0;
	unsigned char buf[256];
	uint32_t i, id;

	watchdog("connect rules", 60);
	params_default(&p, NULL);
	p.nr_hw_queues = 2;
	p.physical_block_size = 0;
	p.max_io_bytes = 0;
	if (ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p)) {
		not_ok("connect rules", "create: %s", strerror(errno));
		close(ctl);
		return;
	}
	id = p.dev_id;
	a = open(CTL_PATH, O_RDWR);
	b = open(CTL_PATH, O_RDWR);

	r = do_connect(a, id, 2);
	expect_errno("CONNECT queue out of range", r, errno, EINVAL);
	r = do_connect(a, id, 0);
	expect_true("CONNECT queue 0", r == 0, "%s", strerror(errno));
	r = do_connect(b, id, 0);
	expect_errno("CONNECT same queue twice", r, errno, EBUSY);
	r = do_connect(a, id, 1);
	expect_errno("CONNECT an fd twice", r, errno, EISCONN);
	r = read(a, buf, HDR - 1);
	expect_errno("read buffer smaller than a header", r, errno, EINVAL);
	fcntl(a, F_SETFL, O_NONBLOCK);
	r = read(a, buf, sizeof(buf));
	expect_errno("O_NONBLOCK read with nothing queued", r, errno, EAGAIN);
	fcntl(a, F_SETFL, 0);
	memset(buf, 0, sizeof(buf));
	r = write(a, buf, 10);
	expect_errno("truncated completion record", r, errno, EINVAL);

	r = get_info(ctl, id, &info);
	expect_true("GET_INFO of a CREATED device", r == 0 &&
		    info.dev_id == id && info.state == BIUS_STATE_CREATED &&
		    info.nr_connected == 1 && info.disk_name[0] == 0 &&
		    info.owner_pid == getpid() &&
		    info.params.size == p.size &&
		    info.params.logical_block_size == 4096 &&
		    info.params.physical_block_size == 4096 &&
		    info.params.nr_hw_queues == 2 &&
		    info.params.queue_depth == 16 &&
		    info.params.max_io_bytes == BIUS_DEFAULT_MAX_IO_BYTES &&
		    info.params.timeout_ms == BIUS_DEFAULT_TIMEOUT_MS &&
		    info.params.dev_id == id,
		    "r=%d state=%u nr_connected=%u pid=%d name=%s pbs=%u max_io=%u timeout=%u",
		    r, info.state, info.nr_connected, info.owner_pid,
		    info.params.name, info.params.physical_block_size,
		    info.params.max_io_bytes, info.params.timeout_ms);
	{
		char want[BIUS_NAME_LEN];

		snprintf(want, sizeof(want), "bius%u", id);
		expect_true("default name is bius<id>",
			    !strcmp(info.params.name, want), "name '%s'",
			    info.params.name);
	}

	memset(&list, 0, sizeof(list));
	list.capacity = 64;
	list.ids = (uintptr_t)ids;
	r = ioctl(ctl, BIUS_IOC_LIST_DEVICES, &list);
	for (i = 0; r == 0 && i < list.count && i < 64; i++)
		found |= ids[i] == id;
	expect_true("LIST_DEVICES lists the device", r == 0 && found &&
		    list.count >= 1, "r=%d count=%u found=%d", r, list.count,
		    found);
	memset(&list, 0, sizeof(list));
	r = ioctl(ctl, BIUS_IOC_LIST_DEVICES, &list);
	expect_true("LIST_DEVICES with capacity 0 counts", r == 0 &&
		    list.count >= 1, "r=%d count=%u", r, list.count);

	r = do_destroy(ctl, id, 0);
	expect_true("DESTROY a CREATED device with a connection", r == 0,
		    "%s", strerror(errno));
	r = read(a, buf, sizeof(buf));
	expect_true("read after DESTROY is end of file", r == 0,
		    "r=%d errno=%s", r, strerror(errno));
	{
		struct pollfd pfd = { .fd = a, .events = POLLIN };

		r = poll(&pfd, 1, 0);
		expect_true("poll after DESTROY reports EPOLLHUP", r == 1 &&
			    (pfd.revents & POLLHUP), "r=%d revents=%x", r,
			    pfd.revents);
	}
	r = write(a, buf, CMP);
	expect_errno("write after DESTROY", r, errno, ENODEV);
	r = state_of(ctl, id);
	expect_true("destroyed device is DEAD while fds are open",
		    r == BIUS_STATE_DEAD, "state %d", r);
	r = do_connect(b, id, 1);
	expect_errno("CONNECT to a destroyed device", r, errno, ENODEV);
	r = do_destroy(ctl, id, 0);
	expect_errno("DESTROY a destroyed device", r, errno, ENODEV);
	close(a);
	close(b);
	close(ctl);
	ctl = ctl_open();
	r = get_info(ctl, id, &info);
	expect_errno("GET_INFO of a destroyed device", r, errno, ENODEV);
	r = do_connect(ctl, id, 0);
	expect_errno("CONNECT to a freed device", r, errno, ENODEV);
	close(ctl);
}

/* Round trip through a disk served by threads; graceful destroy. */
static void check_live_roundtrip(void)
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
	do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	tdev_join(&d, 10000);
out:
	tdev_free(&d);
	free(wbuf);
	free(rbuf);
}

/* The other feature bits: read-only, rotational, write zeroes. */
static void check_features(void)
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
		    sysfs_long(d.name, "queue/write_zeroes_max_bytes") > 0,
		    "ro/rotational/write_cache/block sizes/discard/write_zeroes wrong");
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
static void check_protocol(void)
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

	/* An error result reaches the reader. */
	io_start(&job[0], fd, 0, io, 4096, 0, 0);
	n = wait_requests(&d, buf, 2 * MiB, &qi, 5000);
	memcpy(&hdr[0], buf, HDR);
	r = n == HDR ? send_completion(d.srv[qi].fd, hdr[0].id, -EIO, NULL,
				       0) : -1;
	expect_true("error completion fails the I/O with EIO", r == CMP &&
		    io_wait(&job[0], 5000) && job[0].ret < 0 &&
		    job[0].err == EIO, "r=%zd io=%zd err=%d", r, job[0].ret,
		    job[0].err);

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

static void check_timeout(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(64 * KiB), *io = xalloc(64 * KiB);
	struct bius_request hdr;
	struct io_job job;
	unsigned int qi;
	struct tdev d;
	long t0;
	ssize_t n, r;
	int fd;

	watchdog("timeout", 90);
	params_default(&p, "bi-tmo");
	p.timeout_ms = 1000;
	p.size = 1 * MiB;
	if (tdev_up(&d, &p, "timeout device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("timeout device comes up", "open: %s", strerror(errno));
		goto out_destroy;
	}
	ok("timeout device comes up");

	/* delivered but never answered */
	t0 = now_ms();
	io_start(&job, fd, 0, io, 4096, 0, -1);
	n = wait_requests(&d, buf, 64 * KiB, &qi, 5000);
	memcpy(&hdr, buf, HDR);
	expect_true("unanswered request fails within seconds",
		    n == HDR && io_wait(&job, 10000) && job.ret < 0,
		    "n=%zd ret=%zd done=%d", n, job.ret, (int)job.done);
	printf("# timed out after %ld ms with errno %d (%s)\n",
	       now_ms() - t0, job.err, strerror(job.err));
	r = send_completion(d.srv[qi].fd, hdr.id, 0, io, 4096);
	expect_errno("late completion after timeout", r, errno, ENOENT);

	/* never even read */
	io_start(&job, fd, 0, io, 4096, 4096, -1);
	expect_true("unread request fails within seconds",
		    io_wait(&job, 10000) && job.ret < 0, "ret=%zd", job.ret);
	fcntl(d.srv[0].fd, F_SETFL, O_NONBLOCK);
	r = read(d.srv[0].fd, buf, 64 * KiB);
	expect_errno("timed-out request is no longer queued", r, errno,
		     EAGAIN);

	/* a write left half delivered: the rest comes as zeroes */
	fill_pattern(io, 64 * KiB, 11);
	io_start(&job, fd, 1, io, 64 * KiB, 0, -1);
	fcntl(d.srv[0].fd, F_SETFL, 0);
	n = wait_requests(&d, buf, 4096, &qi, 5000);
	memcpy(&hdr, buf, HDR);
	expect_true("partly delivered request times out",
		    n == 4096 && hdr.op == BIUS_OP_WRITE &&
		    hdr.len == 64 * KiB && io_wait(&job, 10000) && job.ret < 0,
		    "n=%zd op=%u len=%u ret=%zd", n, hdr.op, hdr.len, job.ret);
	{
		size_t rest = 0, zero = 1, i;

		fcntl(d.srv[0].fd, F_SETFL, O_NONBLOCK);
		while ((r = read(d.srv[0].fd, buf, 16 * KiB)) > 0) {
			for (i = 0; i < (size_t)r; i++)
				zero &= buf[i] == 0;
			rest += r;
		}
		expect_true("its payload is completed with zeroes",
			    rest == 64 * KiB - (4096 - HDR) && zero &&
			    r < 0 && errno == EAGAIN,
			    "got %zu bytes (want %zu), zero=%zu, last r=%zd",
			    rest, (size_t)(64 * KiB - (4096 - HDR)), zero, r);
		fcntl(d.srv[0].fd, F_SETFL, 0);
	}
	r = send_completion(d.srv[0].fd, hdr.id, 0, NULL, 0);
	expect_errno("completion of the timed-out partial request", r, errno,
		     ENOENT);
	close(fd);
out_destroy:
	/* the daemon side is not served here: force it */
	do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
out:
	tdev_free(&d);
	free(buf);
	free(io);
}

/* Closing a queue fd of a live device kills it. */
static void check_kill_on_close(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(64 * KiB), *io = xalloc(64 * KiB);
	struct io_job job, job2;
	struct pollfd pfd;
	unsigned int qi;
	struct tdev d;
	long t0, end;
	ssize_t n;
	int fd, r;

	watchdog("kill on close", 90);
	params_default(&p, "bi-kill");
	p.nr_hw_queues = 2;
	p.size = 1 * MiB;
	if (tdev_up(&d, &p, "kill device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("kill device comes up", "open: %s", strerror(errno));
		do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
		goto out;
	}
	ok("kill device comes up");

	io_start(&job, fd, 0, io, 4096, 0, 0);
	n = wait_requests(&d, buf, 64 * KiB, &qi, 5000);
	io_start(&job2, fd, 0, io + 8192, 4096, 8192, 1);
	sleep_ms(200);
	t0 = now_ms();
	close(d.srv[qi].fd);
	d.srv[qi].fd = -1;
	expect_true("in-flight I/O fails with EIO when a queue fd closes",
		    n == HDR && io_wait(&job, 10000) && job.ret < 0 &&
		    job.err == EIO, "n=%zd ret=%zd err=%d after %ld ms", n,
		    job.ret, job.err, now_ms() - t0);
	expect_true("queued I/O fails too", io_wait(&job2, 10000) &&
		    job2.ret < 0, "ret=%zd", job2.ret);
	pfd.fd = d.srv[qi ^ 1].fd;
	pfd.events = POLLIN;
	r = poll(&pfd, 1, 5000);
	n = read(d.srv[qi ^ 1].fd, buf, 64 * KiB);
	expect_true("the other queue sees EPOLLHUP and end of file",
		    r == 1 && (pfd.revents & POLLHUP) && n == 0,
		    "poll=%d revents=%x read=%zd", r, pfd.revents, n);
	end = now_ms() + 10000;
	while (sysfs_exists(d.name) && now_ms() < end)
		sleep_ms(20);
	expect_true("disk removed after a queue fd closed",
		    !sysfs_exists(d.name), "/sys/block/%s still there",
		    d.name);
	n = pread(fd, io, 4096, 0);
	expect_true("new I/O on the dead disk fails", n <= 0, "n=%zd", n);
	close(fd);
	end = now_ms() + 5000;
	while (state_of(d.ctl, d.id) != BIUS_STATE_DEAD && now_ms() < end)
		sleep_ms(20);
	r = state_of(d.ctl, d.id);
	expect_true("killed device is DEAD", r == BIUS_STATE_DEAD,
		    "state %d", r);
	r = do_destroy(d.ctl, d.id, 0);
	expect_errno("DESTROY of a killed device", r, errno, ENODEV);
	{
		uint32_t id = d.id;
		int ctl;

		tdev_free(&d);
		ctl = ctl_open();
		r = state_of(ctl, id);
		expect_true("killed device freed once all fds closed",
			    r == -ENODEV, "state %d", r);
		close(ctl);
	}
out:
	tdev_free(&d);
	free(buf);
	free(io);
}

/* ---- zoned devices ------------------------------------------------------ */

/* 8 zones of 512 KiB (the last 256 KiB), 2 conventional, capacity 384 KiB. */
static void params_zoned(struct bius_device_params *p, const char *name)
{
	params_default(p, name);
	p->size = 4 * MiB - 256 * KiB;
	p->features = BIUS_FEATURE_ZONED;
	p->zoned.zone_size = 512 * KiB;
	p->zoned.zone_capacity = 384 * KiB;
	p->zoned.nr_conv_zones = 2;
	p->zoned.max_open_zones = 3;
	p->zoned.max_active_zones = 4;
	p->zoned.max_append_bytes = 64 * KiB;
}

static const char *const zoned_create_cases[] = {
	"zoned create: zone_size 0",
	"zoned create: zone_size not a power of two",
	"zoned create: zone_size not a multiple of lbs",
	"zoned create: zone_size of one block",
	"zoned create: zone_size larger than the device",
	"zoned create: zone_capacity above zone_size",
	"zoned create: zone_capacity not a multiple of lbs",
	"zoned create: nr_conv_zones = number of zones",
	"zoned create: max_append_bytes above max_io_bytes",
	"zoned create: max_append_bytes not a multiple of lbs",
	"zoned create: zoned parameters without the feature",
};

static void zoned_create_case(unsigned int i, struct bius_device_params *p)
{
	struct bius_zoned_params *z = &p->zoned;

	switch (i) {
	case 0: z->zone_size = 0; break;
	case 1: z->zone_size = 768 * KiB; break;
	case 2: z->zone_size = 2048; break;
	case 3: z->zone_size = 4096; z->zone_capacity = 0; break;
	case 4: z->zone_size = 8 * MiB; break;
	case 5: z->zone_capacity = 1 * MiB; break;
	case 6: z->zone_capacity = 384 * KiB + 512; break;
	case 7: z->nr_conv_zones = 8; break;
	case 8: z->max_append_bytes = 256 * KiB; break;
	case 9: z->max_append_bytes = 64 * KiB + 512; break;
	case 10: p->features = 0; break;
	}
}

/* Create, check GET_INFO's normalised zoned parameters, destroy. */
static void zoned_normalised(int ctl, const char *name,
			     struct bius_device_params *p,
			     const struct bius_zoned_params *want)
{
	struct bius_device_info info;
	const struct bius_zoned_params *got = &info.params.zoned;
	int r;

	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, p);
	if (r) {
		not_ok(name, "CREATE_DEVICE: %s", strerror(errno));
		return;
	}
	r = get_info(ctl, p->dev_id, &info);
	expect_true(name, r == 0 && !memcmp(got, want, sizeof(*want)),
		    "r=%d size %llu cap %llu conv %u open %u active %u append %u",
		    r, (unsigned long long)got->zone_size,
		    (unsigned long long)got->zone_capacity, got->nr_conv_zones,
		    got->max_open_zones, got->max_active_zones,
		    got->max_append_bytes);
	do_destroy(ctl, p->dev_id, BIUS_DESTROY_FORCE);
}

static void check_zoned_create(int ctl)
{
	struct bius_device_params p;
	struct bius_zoned_params want;
	unsigned int i;
	int r;

	for (i = 0; i < sizeof(zoned_create_cases) /
		    sizeof(zoned_create_cases[0]); i++) {
		current_check = zoned_create_cases[i];
		params_zoned(&p, NULL);
		zoned_create_case(i, &p);
		r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
		expect_errno(zoned_create_cases[i], r, errno, EINVAL);
		if (r == 0)
			do_destroy(ctl, p.dev_id, BIUS_DESTROY_FORCE);
	}

	/* 6 sequential zones: limits of 6 or more are none */
	params_zoned(&p, "bi-znorm");
	p.zoned.zone_capacity = 0;
	p.zoned.max_append_bytes = 0;
	p.zoned.max_open_zones = 6;
	p.zoned.max_active_zones = 0;
	want = p.zoned;
	want.zone_capacity = 512 * KiB;
	want.max_append_bytes = 128 * KiB;	/* max_io_bytes */
	want.max_open_zones = 0;
	zoned_normalised(ctl, "zoned create: defaults, open limit >= seq zones is none",
			 &p, &want);
	params_zoned(&p, "bi-znorm");
	p.zoned.max_open_zones = 5;
	p.zoned.max_active_zones = 4;
	want = p.zoned;
	want.max_open_zones = 4;
	zoned_normalised(ctl, "zoned create: max_open lowered to max_active",
			 &p, &want);
	params_zoned(&p, "bi-znorm");
	p.zoned.max_open_zones = 0;
	p.zoned.max_active_zones = 6;
	want = p.zoned;
	want.max_active_zones = 0;
	zoned_normalised(ctl, "zoned create: active limit >= seq zones is none",
			 &p, &want);
	params_zoned(&p, "bi-znorm");
	p.features |= BIUS_FEATURE_READ_ONLY;
	zoned_normalised(ctl, "zoned create: read-only zoned accepted", &p,
			 &p.zoned);
}

static int zone_same(const struct blk_zone *a, const struct blk_zone *b)
{
	return a->start == b->start && a->len == b->len &&
	       a->capacity == b->capacity && a->wp == b->wp &&
	       a->cond == b->cond && a->type == b->type;
}

struct zreport {
	struct blk_zone_report rep;
	struct blk_zone z[ZM_MAX_ZONES];
};

/* BLKREPORTZONE from @sector for @nr zones: the model's zones @first..? */
static void check_report(const char *name, int fd, struct zmodel *zm,
			 uint64_t sector, unsigned int nr, unsigned int first,
			 unsigned int want)
{
	struct zreport zr;
	unsigned int i, bad = ~0u;
	int r;

	memset(&zr, 0, sizeof(zr));
	zr.rep.sector = sector;
	zr.rep.nr_zones = nr;
	r = ioctl(fd, BLKREPORTZONE, &zr);
	pthread_mutex_lock(&zm->lock);
	for (i = 0; r == 0 && i < want && i < zr.rep.nr_zones; i++)
		if (!zone_same(&zr.z[i], &zm->z[first + i]) && bad == ~0u)
			bad = i;
	pthread_mutex_unlock(&zm->lock);
	expect_true(name, r == 0 && zr.rep.nr_zones == want && bad == ~0u &&
		    (zr.rep.flags & BLK_ZONE_REP_CAPACITY),
		    "r=%d (%s) nr_zones=%u want %u, first differing zone %d",
		    r, strerror(errno), zr.rep.nr_zones, want, (int)bad);
}

static int zone_ioctl(int fd, unsigned long cmd, uint64_t sector,
		      uint64_t nr_sectors)
{
	struct blk_zone_range range = { .sector = sector,
					 .nr_sectors = nr_sectors };

	return ioctl(fd, cmd, &range);
}

/* A zone management ioctl reaches the daemon as @op for @sector. */
static void check_zone_op(const char *name, int fd, struct zmodel *zm,
			  unsigned long cmd, uint64_t sector, uint64_t nr,
			  int op, uint64_t want_sector)
{
	int r, last_op;
	uint64_t last_sector;

	pthread_mutex_lock(&zm->lock);
	zm->last_op = -1;
	pthread_mutex_unlock(&zm->lock);
	r = zone_ioctl(fd, cmd, sector, nr);
	pthread_mutex_lock(&zm->lock);
	last_op = zm->last_op;
	last_sector = zm->last_sector;
	pthread_mutex_unlock(&zm->lock);
	expect_true(name, r == 0 && last_op == op &&
		    last_sector == want_sector,
		    "r=%d (%s) op=%d (want %d) sector=%llu (want %llu)", r,
		    strerror(errno), last_op, op,
		    (unsigned long long)last_sector,
		    (unsigned long long)want_sector);
}

/* The daemon's zone error reaches the ioctl caller as the same errno. */
static void check_zone_error(const char *name, int fd, struct zmodel *zm,
			     uint64_t sector, uint64_t nr, int err)
{
	int r;

	pthread_mutex_lock(&zm->lock);
	zm->inject = -err;
	pthread_mutex_unlock(&zm->lock);
	r = zone_ioctl(fd, BLKOPENZONE, sector, nr);
	expect_errno(name, r, errno, err);
	pthread_mutex_lock(&zm->lock);
	zm->inject = 0;
	pthread_mutex_unlock(&zm->lock);
}

/*
 * Bring-up: the first request is REPORT_ZONES and the disk is not added
 * before it is answered; wrong answers are refused; a short answer makes
 * the kernel ask for the rest.  Returns 0 once LIVE.
 */
static int zoned_bring_up(struct tdev *d, struct zmodel *zm,
			  const struct bius_device_params *p)
{
	struct blk_zone z[ZM_MAX_ZONES + 1], t[4];
	uint64_t zs = zm->zone_sectors;
	unsigned char buf[4 * KiB];
	struct bius_request hdr;
	unsigned int qi;
	ssize_t n, r;
	int fd;

	n = wait_requests(d, buf, sizeof(buf), &qi, 5000);
	memcpy(&hdr, buf, HDR);
	expect_true("zoned: REPORT_ZONES comes first, for every zone",
		    n == HDR && hdr.op == BIUS_OP_REPORT_ZONES &&
		    hdr.sector == 0 && hdr.len == zm->nr * sizeof(z[0]),
		    "n=%zd op=%u sector=%llu len=%u", n, hdr.op,
		    (unsigned long long)hdr.sector, hdr.len);
	if (n != HDR || hdr.op != BIUS_OP_REPORT_ZONES)
		return -1;
	sleep_ms(300);
	expect_true("zoned: disk not added before the zones are reported",
		    state_of(d->ctl, d->id) == BIUS_STATE_CREATED &&
		    !sysfs_exists(p->name), "state %d",
		    state_of(d->ctl, d->id));

	fd = d->srv[qi].fd;
	memcpy(z, zm->z, zm->nr * sizeof(z[0]));
	r = send_completion(fd, hdr.id, 0, z, 100);
	expect_errno("zoned: REPORT_ZONES payload not whole zones", r, errno,
		     EINVAL);
	r = send_completion(fd, hdr.id, 0, NULL, 0);
	expect_errno("zoned: REPORT_ZONES success without zones", r, errno,
		     EINVAL);
	z[zm->nr] = z[zm->nr - 1];
	z[zm->nr].start += zs;
	r = send_completion(fd, hdr.id, 0, z, (zm->nr + 1) * sizeof(z[0]));
	expect_errno("zoned: REPORT_ZONES with more zones than asked", r,
		     errno, EINVAL);
	r = send_completion(fd, hdr.id, 0, &z[1], 2 * sizeof(z[0]));
	expect_errno("zoned: REPORT_ZONES from the wrong zone", r, errno,
		     EINVAL);
	t[0] = z[0];
	t[1] = z[2];
	r = send_completion(fd, hdr.id, 0, t, 2 * sizeof(t[0]));
	expect_errno("zoned: REPORT_ZONES with a non-consecutive zone", r,
		     errno, EINVAL);
	memcpy(t, z, sizeof(t));
	t[2].capacity = t[2].len + 8;
	r = send_completion(fd, hdr.id, 0, t, sizeof(t));
	expect_errno("zoned: REPORT_ZONES with capacity above len", r, errno,
		     EINVAL);
	memcpy(t, z, sizeof(t));
	t[3].type = BLK_ZONE_TYPE_CONVENTIONAL;
	t[3].cond = BLK_ZONE_COND_NOT_WP;
	r = send_completion(fd, hdr.id, 0, t, sizeof(t));
	expect_errno("zoned: REPORT_ZONES with a wrong zone type", r, errno,
		     EINVAL);
	memcpy(t, z, sizeof(t));
	t[2].wp = t[2].start + t[2].len + 8;
	t[2].cond = BLK_ZONE_COND_IMP_OPEN;
	r = send_completion(fd, hdr.id, 0, t, sizeof(t));
	expect_errno("zoned: REPORT_ZONES with the wp outside the zone", r,
		     errno, EINVAL);
	memcpy(t, z, sizeof(t));
	t[2].cond = 0x42;
	r = send_completion(fd, hdr.id, 0, t, sizeof(t));
	expect_errno("zoned: REPORT_ZONES with an unknown condition", r,
		     errno, EINVAL);
	r = send_completion_sector(fd, hdr.id, 0, 8, z, 3 * sizeof(z[0]));
	expect_errno("zoned: sector set in a REPORT_ZONES completion", r,
		     errno, EINVAL);
	expect_true("zoned: refused reports leave the device waiting",
		    state_of(d->ctl, d->id) == BIUS_STATE_CREATED, "state %d",
		    state_of(d->ctl, d->id));

	r = send_completion(fd, hdr.id, 0, z, 3 * sizeof(z[0]));
	expect_true("zoned: a report of fewer zones than asked is accepted",
		    r == (ssize_t)(CMP + 3 * sizeof(z[0])), "r=%zd (%s)", r,
		    strerror(errno));
	n = wait_requests(d, buf, sizeof(buf), &qi, 5000);
	memcpy(&hdr, buf, HDR);
	expect_true("zoned: then the kernel asks for the rest",
		    n == HDR && hdr.op == BIUS_OP_REPORT_ZONES &&
		    hdr.sector == 3 * zs &&
		    hdr.len == (zm->nr - 3) * sizeof(z[0]),
		    "n=%zd op=%u sector=%llu len=%u", n, hdr.op,
		    (unsigned long long)hdr.sector, hdr.len);
	if (n != HDR)
		return -1;
	srv_request(&d->srv[qi], &hdr);
	srv_flush(&d->srv[qi]);
	return tdev_wait_live(d, "zoned device comes up");
}

static void check_zoned_live(struct tdev *d, struct zmodel *zm,
			     const struct bius_device_params *p)
{
	const uint64_t zs = zm->zone_sectors, cap = p->size / 512;
	unsigned char *io = xalloc(64 * KiB);
	struct bius_device_info info;
	char sched[128];
	ssize_t n;
	int fd, r;

	sysfs_read(d->name, "queue/scheduler", sched, sizeof(sched));
	expect_true("zoned: sysfs zoned, chunk_sectors, nr_zones, limits",
		    sysfs_is(d->name, "queue/zoned", "host-managed") &&
		    sysfs_long(d->name, "queue/chunk_sectors") == (long)zs &&
		    sysfs_long(d->name, "queue/nr_zones") == (long)zm->nr &&
		    sysfs_long(d->name, "queue/max_open_zones") == 3 &&
		    sysfs_long(d->name, "queue/max_active_zones") == 4 &&
		    sysfs_long(d->name, "queue/zone_append_max_bytes") ==
		    64 * KiB, "chunk %ld nr_zones %ld open %ld active %ld append %ld",
		    sysfs_long(d->name, "queue/chunk_sectors"),
		    sysfs_long(d->name, "queue/nr_zones"),
		    sysfs_long(d->name, "queue/max_open_zones"),
		    sysfs_long(d->name, "queue/max_active_zones"),
		    sysfs_long(d->name, "queue/zone_append_max_bytes"));
	expect_true("zoned: mq-deadline is the scheduler",
		    strstr(sched, "[mq-deadline]") != NULL, "'%s'", sched);
	r = get_info(d->ctl, d->id, &info);
	expect_true("zoned: GET_INFO reports the zoned parameters",
		    r == 0 && !memcmp(&info.params.zoned, &p->zoned,
				      sizeof(p->zoned)) &&
		    (info.params.features & BIUS_FEATURE_ZONED), "r=%d", r);

	fd = disk_open(d->name, O_RDWR | O_DIRECT);
	if (fd < 0) {
		not_ok("zoned: open the disk", "%s", strerror(errno));
		free(io);
		return;
	}
	check_report("zoned: BLKREPORTZONE returns the daemon's zones", fd,
		     zm, 0, ZM_MAX_ZONES, 0, zm->nr);
	check_report("zoned: BLKREPORTZONE from inside a zone, 2 zones", fd,
		     zm, 3 * zs + 8, 2, 3, 2);

	fill_pattern(io, 8 * KiB, 21);
	n = pwrite(fd, io, 8 * KiB, 2 * zs * 512);
	expect_true("zoned: write at the write pointer", n == 8 * KiB,
		    "n=%zd (%s)", n, strerror(errno));
	check_report("zoned: the write moved the reported write pointer", fd,
		     zm, 2 * zs, 1, 2, 1);
	n = pwrite(fd, io, 4 * KiB, 2 * zs * 512 + 64 * KiB);
	expect_true("zoned: write off the write pointer fails with EIO",
		    n < 0 && errno == EIO, "n=%zd (%s)", n, strerror(errno));

	check_zone_op("zoned: BLKOPENZONE reaches the daemon", fd, zm,
		      BLKOPENZONE, 3 * zs, zs, BIUS_OP_ZONE_OPEN, 3 * zs);
	check_zone_op("zoned: BLKCLOSEZONE reaches the daemon", fd, zm,
		      BLKCLOSEZONE, 3 * zs, zs, BIUS_OP_ZONE_CLOSE, 3 * zs);
	check_zone_op("zoned: BLKFINISHZONE reaches the daemon", fd, zm,
		      BLKFINISHZONE, 4 * zs, zs, BIUS_OP_ZONE_FINISH, 4 * zs);
	check_zone_op("zoned: BLKRESETZONE reaches the daemon", fd, zm,
		      BLKRESETZONE, 4 * zs, zs, BIUS_OP_ZONE_RESET, 4 * zs);
	check_zone_op("zoned: BLKRESETZONE of the disk is RESET_ALL", fd, zm,
		      BLKRESETZONE, 0, cap, BIUS_OP_ZONE_RESET_ALL, 0);
	check_report("zoned: reported zones after the zone operations", fd,
		     zm, 0, ZM_MAX_ZONES, 0, zm->nr);
	check_zone_error("zoned: -ETOOMANYREFS reaches the caller", fd, zm,
			 5 * zs, zs, ETOOMANYREFS);
	check_zone_error("zoned: -EOVERFLOW reaches the caller", fd, zm,
			 5 * zs, zs, EOVERFLOW);
	check_zone_error("zoned: -EIO reaches the caller", fd, zm, 5 * zs, zs,
			 EIO);
	close(fd);
	free(io);
}

static void check_zoned(void)
{
	struct bius_device_params p;
	struct zmodel zm;
	struct tdev d;
	int r;

	watchdog("zoned", 120);
	params_zoned(&p, "bi-zoned");
	zm_init(&zm, &p);
	if (tdev_create(&d, &p, &zm, "zoned device created"))
		goto out;
	if (zoned_bring_up(&d, &zm, &p))
		goto destroy;
	ok("zoned device comes up");
	tdev_serve_in_threads(&d);
	check_zoned_live(&d, &zm, &p);
	r = do_destroy(d.ctl, d.id, 0);
	expect_true("zoned: destroy", r == 0, "%s", strerror(errno));
	expect_true("zoned: server threads see end of file",
		    tdev_join(&d, 10000), "still reading after 10 s");
	goto out;
destroy:
	do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	tdev_join(&d, 10000);
out:
	tdev_free(&d);
}

/* Wait until the device is DEAD (or gone); its state. */
static int wait_dead(int ctl, uint32_t id, long ms)
{
	long end = now_ms() + ms;
	int st;

	while ((st = state_of(ctl, id)) >= 0 && st != BIUS_STATE_DEAD &&
	       now_ms() < end)
		sleep_ms(20);
	return st;
}

struct ioctl_job {
	int fd;
	unsigned long cmd;
	void *arg;
	int ret, err;
	atomic_int done;
	pthread_t thread;
};

static void *ioctl_thread(void *arg)
{
	struct ioctl_job *j = arg;

	j->ret = ioctl(j->fd, j->cmd, j->arg);
	j->err = errno;
	j->done = 1;
	return NULL;
}

/* Daemon death or silence while a REPORT_ZONES is outstanding. */
static void check_zoned_death(void)
{
	struct bius_device_params p;
	unsigned char buf[4 * KiB];
	struct bius_request hdr;
	struct ioctl_job job;
	struct zmodel zm;
	struct zreport zr;
	unsigned int qi;
	struct tdev d;
	long t0;
	ssize_t n;
	int st, fd;

	watchdog("zoned death", 90);
	params_zoned(&p, "bi-zdie");
	zm_init(&zm, &p);
	if (tdev_create(&d, &p, &zm, "zoned: daemon killed at bring-up"))
		goto out1;
	n = wait_requests(&d, buf, sizeof(buf), &qi, 5000);
	memcpy(&hdr, buf, HDR);
	close(d.srv[qi].fd);
	d.srv[qi].fd = -1;
	st = wait_dead(d.ctl, d.id, 10000);
	expect_true("zoned: daemon killed while REPORT_ZONES is outstanding at bring-up",
		    n == HDR && hdr.op == BIUS_OP_REPORT_ZONES &&
		    st == BIUS_STATE_DEAD && !sysfs_exists(p.name),
		    "n=%zd op=%u state=%d", n, hdr.op, st);
out1:
	tdev_free(&d);

	params_zoned(&p, "bi-zsilent");
	p.timeout_ms = 1000;
	if (tdev_create(&d, &p, &zm, "zoned: silent daemon at bring-up"))
		goto out2;
	n = wait_requests(&d, buf, sizeof(buf), &qi, 5000);
	memcpy(&hdr, buf, HDR);
	t0 = now_ms();
	st = wait_dead(d.ctl, d.id, 15000);
	expect_true("zoned: unanswered REPORT_ZONES at bring-up kills the device",
		    n == HDR && hdr.op == BIUS_OP_REPORT_ZONES &&
		    st == BIUS_STATE_DEAD && !sysfs_exists(p.name),
		    "n=%zd op=%u state=%d after %ld ms", n, hdr.op, st,
		    now_ms() - t0);
	n = read(d.srv[qi].fd, buf, sizeof(buf));
	expect_true("zoned: ... and its queue reads end of file", n == 0,
		    "n=%zd (%s)", n, strerror(errno));
out2:
	tdev_free(&d);

	params_zoned(&p, "bi-zkill");
	zm_init(&zm, &p);
	if (tdev_create(&d, &p, &zm, "zoned: daemon killed during BLKREPORTZONE") ||
	    tdev_wait_live(&d, "zoned: daemon killed during BLKREPORTZONE"))
		goto out3;
	fd = disk_open(d.name, O_RDONLY);
	memset(&zr, 0, sizeof(zr));
	zr.rep.nr_zones = ZM_MAX_ZONES;
	memset(&job, 0, sizeof(job));
	job.fd = fd;
	job.cmd = BLKREPORTZONE;
	job.arg = &zr;
	if (fd < 0 || pthread_create(&job.thread, NULL, ioctl_thread, &job)) {
		not_ok("zoned: daemon killed during BLKREPORTZONE", "fd=%d",
		       fd);
		goto out3;
	}
	n = wait_requests(&d, buf, sizeof(buf), &qi, 5000);
	memcpy(&hdr, buf, HDR);
	tdev_close_fds(&d);
	t0 = now_ms();
	while (!job.done && now_ms() - t0 < 10000)
		sleep_ms(10);
	if (job.done)
		pthread_join(job.thread, NULL);
	expect_true("zoned: daemon killed during BLKREPORTZONE fails it with EIO",
		    n == HDR && hdr.op == BIUS_OP_REPORT_ZONES && job.done &&
		    job.ret < 0 && job.err == EIO, "n=%zd op=%u done=%d ret=%d (%s)",
		    n, hdr.op, (int)job.done, job.ret, strerror(job.err));
	close(fd);
	st = wait_dead(d.ctl, d.id, 10000);
	expect_true("zoned: ... and the device dies", st == BIUS_STATE_DEAD,
		    "state %d", st);
out3:
	tdev_free(&d);
}

/*
 * ZONE_APPEND from user space: zonefs turns a synchronous O_DIRECT write
 * of a sequential zone file into a zone append and checks that it landed
 * at the write pointer.  No mkzonefs: the superblock (struct zonefs_sb of
 * tests/include/bius_zonefs.h) is written here.
 */
static int zonefs_format(const char *name)
{
	struct zonefs_sb *sb = xalloc(ZONEFS_SUPER_SIZE);
	ssize_t n;
	int fd, i;

	sb->magic = ZONEFS_MAGIC;
	snprintf(sb->label, sizeof(sb->label), "bius");
	for (i = 0; i < 16; i++)
		sb->uuid[i] = (uint8_t)(i * 37 + 11);
	sb->perm = 0640;
	sb->crc = zonefs_sb_crc(sb);
	fd = disk_open(name, O_RDWR | O_DIRECT);
	n = fd < 0 ? -1 : pwrite(fd, sb, ZONEFS_SUPER_SIZE, 0);
	if (fd >= 0)
		close(fd);
	free(sb);
	return n == ZONEFS_SUPER_SIZE ? 0 : -1;
}

static void check_zoned_append(void)
{
	const char *mnt = "/tmp/bi-zonefs";
	unsigned char *io = xalloc(64 * KiB), *rd = xalloc(64 * KiB);
	struct bius_device_params p;
	char dev[64], file[96];
	struct zmodel zm;
	struct stat st;
	struct tdev d;
	uint64_t zs;
	ssize_t n;
	int fd, r, err, appended;

	watchdog("zoned append", 90);
	params_zoned(&p, "bi-zappend");
	zm_init(&zm, &p);
	zs = zm.zone_sectors;
	if (tdev_create(&d, &p, &zm, "zoned append device comes up") ||
	    tdev_wait_live(&d, "zoned append device comes up"))
		goto out;
	tdev_serve_in_threads(&d);
	r = zonefs_format(d.name);
	expect_true("zoned append: zonefs superblock written", r == 0, "%s",
		    strerror(errno));
	snprintf(dev, sizeof(dev), "/dev/%s", d.name);
	mkdir(mnt, 0700);
	r = mount(dev, mnt, "zonefs", 0, NULL);
	if (r && errno == ENODEV) {
		printf("ok - zoned append: zonefs # SKIP zonefs is not in this kernel\n");
		passed++;
		goto destroy;
	}
	expect_true("zoned append: zonefs mounts", r == 0, "%s",
		    strerror(errno));
	if (r)
		goto destroy;

	/* the first append: bad completions first, then the right one */
	snprintf(file, sizeof(file), "%s/seq/0", mnt);
	fd = open(file, O_WRONLY | O_DIRECT);
	fill_pattern(io, 16 * KiB, 31);
	pthread_mutex_lock(&zm.lock);
	zm.append_probe = 1;
	pthread_mutex_unlock(&zm.lock);
	n = fd < 0 ? -1 : pwrite(fd, io, 8 * KiB, 0);
	err = errno;
	pthread_mutex_lock(&zm.lock);
	appended = zm.appends;
	if (appended) {
		expect_true("zoned append: a zonefs O_DIRECT write reaches the daemon as ZONE_APPEND with its payload",
			    zm.appends == 1 && zm.z[2].wp == 2 * zs + 16 &&
			    !memcmp(d.mem + 2 * zs * 512, io, 8 * KiB),
			    "appends=%d wp=%llu", zm.appends,
			    (unsigned long long)zm.z[2].wp);
		expect_true("zoned append: sectors outside the zone, unaligned or past its capacity are refused",
			    zm.probe_err[0] == EINVAL &&
			    zm.probe_err[1] == EINVAL &&
			    zm.probe_err[2] == EINVAL, "errnos %d %d %d",
			    zm.probe_err[0], zm.probe_err[1],
			    zm.probe_err[2]);
	} else {
		printf("ok - zoned append: ZONE_APPEND completions # SKIP this kernel's zonefs writes sequential files with WRITE\n");
		passed++;
	}
	zm.append_probe = 0;
	pthread_mutex_unlock(&zm.lock);
	if (n < 0 && err == EIO && appended) {
		/*
		 * Debian's 6.1 zonefs advances its write pointer before a
		 * synchronous append and then compares the landing sector
		 * with the advanced one: zoned null_blk fails the same way.
		 */
		printf("ok - zoned append: zonefs sees the landing sector # SKIP this kernel's zonefs fails synchronous appends with EIO (zoned null_blk too)\n");
		passed++;
		if (fd >= 0)
			close(fd);
		goto umount;
	}
	expect_true("zoned append: zonefs sequential file write succeeds",
		    n == 8 * KiB, "fd=%d n=%zd (%s)", fd, n, strerror(err));
	n = fd < 0 ? -1 : pwrite(fd, io + 8 * KiB, 8 * KiB, 8 * KiB);
	pthread_mutex_lock(&zm.lock);
	expect_true("zoned append: the next write lands at the write pointer",
		    n == 8 * KiB && zm.appends == (appended ? 2 : 0) &&
		    zm.z[2].wp == 2 * zs + 32, "n=%zd (%s) appends=%d",
		    n, strerror(errno), zm.appends);
	pthread_mutex_unlock(&zm.lock);
	if (fd >= 0)
		close(fd);
	fd = open(file, O_RDONLY | O_DIRECT);
	n = fd < 0 ? -1 : pread(fd, rd, 16 * KiB, 0);
	r = stat(file, &st);
	expect_true("zoned append: the file reads back what was appended",
		    n == 16 * KiB && !memcmp(rd, io, 16 * KiB) && r == 0 &&
		    st.st_size == 16 * KiB, "n=%zd size=%lld", n,
		    (long long)st.st_size);
	if (fd >= 0)
		close(fd);
umount:
	r = umount(mnt);
	expect_true("zoned append: zonefs unmounts", r == 0, "%s",
		    strerror(errno));
destroy:
	r = do_destroy(d.ctl, d.id, 0);
	expect_true("zoned append: destroy", r == 0, "%s", strerror(errno));
	tdev_join(&d, 10000);
out:
	tdev_free(&d);
	free(io);
	free(rd);
}

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
static int srv_map(struct srv *s, size_t len)
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
	r = send_completion(d.srv[0].fd, h.id, 0, NULL, 0);
	ok1 = io_wait(&job, 5000);
	expect_true("map: misaligned write completes", r == CMP && ok1 &&
		    job.ret == 1024, "r=%zd done=%d ret=%zd", r, ok1, job.ret);

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
	do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	tdev_join(&d, 10000);
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
		ok("map: segment lists (skipped: page size is not 4 KiB)");
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
	do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	tdev_join(&d, 10000);
out:
	tdev_free(&d);
free:
	free(buf);
	free(io);
	free(want);
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
	ok1 = io_wait(&job, 10000);
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

static void check_map(void)
{
	int ctl = ctl_open();

	watchdog("map: parameters", 60);
	check_map_params(ctl);
	close(ctl);
	check_map_data();
	check_map_segments();
	check_map_end();
}

/* Closing the creating fd kills the device too. */
static void check_owner_close(void)
{
	struct bius_device_params p;
	unsigned char buf[256];
	int ctl = ctl_open(), q = open(CTL_PATH, O_RDWR), r;
	ssize_t n;

	watchdog("owner close", 30);
	params_default(&p, "bi-own");
	if (ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p) ||
	    do_connect(q, p.dev_id, 0)) {
		not_ok("closing the creating fd kills the device", "%s",
		       strerror(errno));
		close(ctl);
		close(q);
		return;
	}
	/* The device is LIVE-bound now; partition scan needs serving: do not
	 * serve, close the owner instead.
	 */
	close(ctl);
	n = read(q, buf, sizeof(buf));
	while (n > 0)
		n = read(q, buf, sizeof(buf));
	expect_true("closing the creating fd kills the device", n == 0,
		    "read returned %zd (%s)", n, strerror(errno));
	close(q);
	ctl = ctl_open();
	r = 0;
	{
		long end = now_ms() + 5000;

		while ((r = state_of(ctl, p.dev_id)) != -ENODEV &&
		       now_ms() < end)
			sleep_ms(20);
	}
	expect_true("killed device is freed", r == -ENODEV, "state %d", r);
	close(ctl);
}

/* ---- race mode: teardown while I/O, timeouts and completions race -------- */

enum race_end {
	RACE_KILL_DAEMON,	/* kill -9 of the daemon process */
	RACE_DAEMON_DESTROY,	/* the daemon's main thread: DESTROY FORCE */
	RACE_CLOSE_QUEUE,	/* a daemon thread closes its queue fd */
	RACE_OTHER_DESTROY,	/* another process: DESTROY, EBUSY then FORCE */
	RACE_ENDS
};

static const char *const race_end_names[] = {
	"kill -9 daemon", "daemon DESTROY FORCE", "queue fd closed",
	"DESTROY from another process",
};

struct race_io {
	char path[64];
	atomic_int *stop;
	unsigned int seed;
	long ios, errors;
	pthread_t thread;
};

static void *race_io_thread(void *arg)
{
	struct race_io *r = arg;
	unsigned char *buf = xalloc(128 * KiB);
	int fd = open(r->path, O_RDWR | O_DIRECT);

	while (fd >= 0 && !*r->stop) {
		size_t len = 4096 * (1 + rand_r(&r->seed) % 32);
		off_t off = 4096 * (off_t)(rand_r(&r->seed) % (2048 - 32));
		ssize_t n = rand_r(&r->seed) % 2 ? pwrite(fd, buf, len, off) :
			    pread(fd, buf, len, off);

		r->ios++;
		if (n != (ssize_t)len) {
			r->errors++;
			if (n == 0 || errno == ENXIO || errno == ENODEV)
				break;
			sleep_ms(5);
		}
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* The daemon: serve until told how to end; reports the disk name. */
static void race_daemon(int cmd_fd, int report_fd, unsigned int seed,
			uint32_t timeout_ms)
{
	struct bius_device_params p;
	struct tdev d;
	unsigned int i;
	char cmd = 0;

	params_default(&p, NULL);
	p.nr_hw_queues = 2;
	p.size = 8 * MiB;
	p.queue_depth = 32;
	p.timeout_ms = timeout_ms;
	p.features = BIUS_FEATURE_WRITE_CACHE;
	if (tdev_up(&d, &p, "race daemon"))
		_exit(1);
	for (i = 0; i < d.nq; i++) {
		d.srv[i].seed = seed + i;
		d.srv[i].delay_pct = timeout_ms < 2000 ? 10 : 0;
		d.srv[i].delay_max_ms = timeout_ms + 500;
	}
	tdev_serve_in_threads(&d);
	if (write(report_fd, d.name, sizeof(d.name)) != sizeof(d.name))
		_exit(1);
	if (read(cmd_fd, &cmd, 1) != 1)
		_exit(1);
	if (cmd == 'd') {
		do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	} else if (cmd == 'c') {
		d.srv[0].stop = 1;
	}
	tdev_join(&d, 30000);
	_exit(0);
}

static int dev_listed(uint32_t id)
{
	uint32_t ids[256];
	struct bius_device_list l = { .capacity = 256, .ids = (uintptr_t)ids };
	int ctl = ctl_open(), found = 0;
	unsigned int i;

	if (ioctl(ctl, BIUS_IOC_LIST_DEVICES, &l) == 0)
		for (i = 0; i < l.count && i < 256; i++)
			found |= ids[i] == id;
	close(ctl);
	return found;
}

static void race_round(unsigned int round, unsigned int seed)
{
	enum race_end end = seed % RACE_ENDS;
	uint32_t timeout_ms = (seed / RACE_ENDS) % 2 ? 1000 : 0;
	struct race_io io[4];
	char check[128], name[BIUS_NAME_LEN];
	int cmd[2], rep[2], status, ctl, r;
	atomic_int stop = 0;
	struct bius_device_info info;
	uint32_t id = 0;
	long t_end;
	unsigned int i;
	pid_t pid;

	snprintf(check, sizeof(check), "race %u: %s%s", round,
		 race_end_names[end], timeout_ms ? ", 1 s timeout" : "");
	watchdog(check, 120);
	if (pipe(cmd) || pipe(rep)) {
		not_ok(check, "pipe: %s", strerror(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		close(cmd[1]);
		close(rep[0]);
		race_daemon(cmd[0], rep[1], seed, timeout_ms);
	}
	close(cmd[0]);
	close(rep[1]);
	if (pid < 0 || read(rep[0], name, sizeof(name)) != sizeof(name)) {
		not_ok(check, "daemon did not come up");
		goto out;
	}
	ctl = ctl_open();
	{
		uint32_t ids[256];
		struct bius_device_list l = { .capacity = 256,
					      .ids = (uintptr_t)ids };

		if (ioctl(ctl, BIUS_IOC_LIST_DEVICES, &l) == 0)
			for (i = 0; i < l.count && i < 256; i++)
				if (!get_info(ctl, ids[i], &info) &&
				    !strcmp(info.disk_name, name))
					id = ids[i];
	}
	for (i = 0; i < 4; i++) {
		snprintf(io[i].path, sizeof(io[i].path), "/dev/%s", name);
		io[i].stop = &stop;
		io[i].seed = seed * 7 + i;
		io[i].ios = io[i].errors = 0;
		pthread_create(&io[i].thread, NULL, race_io_thread, &io[i]);
	}
	sleep_ms(300 + seed % 1200);

	switch (end) {
	case RACE_KILL_DAEMON:
		kill(pid, SIGKILL);
		break;
	case RACE_DAEMON_DESTROY:
		r = write(cmd[1], "d", 1);
		break;
	case RACE_CLOSE_QUEUE:
		r = write(cmd[1], "c", 1);
		break;
	case RACE_OTHER_DESTROY:
		r = do_destroy(ctl, id, 0);
		if (!(r == -1 && errno == EBUSY))
			not_ok(check, "DESTROY with the disk open: r=%d %s", r,
			       strerror(errno));
		r = do_destroy(ctl, id, BIUS_DESTROY_FORCE);
		if (r)
			not_ok(check, "DESTROY FORCE: %s", strerror(errno));
		break;
	default:
		break;
	}
	(void)r;
	stop = 1;
	t_end = now_ms() + 60000;
	for (i = 0; i < 4; i++) {
		while (pthread_tryjoin_np(io[i].thread, NULL) == EBUSY &&
		       now_ms() < t_end)
			sleep_ms(10);
	}
	if (now_ms() >= t_end) {
		not_ok(check, "I/O threads stuck for 60 s");
		goto out_ctl;
	}
	if (end != RACE_KILL_DAEMON)
		r = write(cmd[1], "x", 1);
	t_end = now_ms() + 30000;
	while (waitpid(pid, &status, WNOHANG) == 0 && now_ms() < t_end)
		sleep_ms(10);
	if (now_ms() >= t_end) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		not_ok(check, "daemon did not exit within 30 s");
		goto out_ctl;
	}
	t_end = now_ms() + 10000;
	while ((sysfs_exists(name) || dev_listed(id)) && now_ms() < t_end)
		sleep_ms(20);
	expect_true(check, !sysfs_exists(name) && !dev_listed(id),
		    "disk %s %s, device %u %s", name,
		    sysfs_exists(name) ? "still there" : "gone", id,
		    dev_listed(id) ? "still listed" : "freed");
	printf("# %s: %ld I/Os, %ld errors\n", check,
	       io[0].ios + io[1].ios + io[2].ios + io[3].ios,
	       io[0].errors + io[1].errors + io[2].errors + io[3].errors);
out_ctl:
	close(ctl);
out:
	close(cmd[1]);
	close(rep[0]);
}

static void check_races(unsigned int rounds, unsigned int seed)
{
	unsigned int i;

	for (i = 0; i < rounds; i++)
		race_round(i, seed + i);
}

static void check_no_leftovers(uint32_t before)
{
	struct bius_device_list l = { 0 };
	int ctl = ctl_open(), r;
	long end = now_ms() + 10000;

	do {
		r = ioctl(ctl, BIUS_IOC_LIST_DEVICES, &l);
		if (r || l.count <= before)
			break;
		sleep_ms(50);
	} while (now_ms() < end);
	expect_true("no devices left behind", r == 0 && l.count == before,
		    "%u devices, %u before the tests", l.count, before);
	close(ctl);
}

int main(int argc, char **argv)
{
	struct bius_device_list l = { 0 };
	unsigned int rounds = 8, seed = (unsigned int)time(NULL);
	int ctl, only_race = 0, zonefs_append = 0, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--zonefs-append")) {
			zonefs_append = 1;
		} else if (!strcmp(argv[i], "--race") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
			only_race = 1;
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			seed = strtoul(argv[++i], NULL, 0);
		} else {
			fprintf(stderr,
				"usage: %s [--race ROUNDS] [--seed N] [--zonefs-append]\n"
				"  default: every check, then 8 race rounds\n"
				"  --race: only ROUNDS race rounds\n"
				"  --zonefs-append: also ZONE_APPEND through zonefs\n"
				"    (not by default: Debian's 6.1 zonefs fails its\n"
				"    own landing-sector check and logs a WARNING,\n"
				"    on zoned null_blk as well)\n",
				argv[0]);
			return 2;
		}
	}

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	printf("# seed %u\n", seed);

	watchdog("basics", 60);
	ctl = ctl_open();
	if (ioctl(ctl, BIUS_IOC_LIST_DEVICES, &l))
		l.count = 0;
	if (!only_race) {
		check_basics(ctl);
		check_create_refusals(ctl);
		check_duplicate_name(ctl);
		check_capability();
		check_zoned_create(ctl);
	}
	close(ctl);

	if (!only_race) {
		check_connect_rules();
		check_live_roundtrip();
		check_features();
		check_protocol();
		check_timeout();
		check_kill_on_close();
		check_owner_close();
		check_zoned();
		if (zonefs_append)
			check_zoned_append();
		check_zoned_death();
		check_map();
	}
	check_races(rounds, seed);
	check_no_leftovers(l.count);

	alarm(0);
	summary_and_exit();
	return 0;
}
