// SPDX-License-Identifier: GPL-2.0
/*
 * The shared helpers of bius_badinput: the check reports (ok, not_ok,
 * expect_*), the watchdog, clocks, ioctl wrappers, sysfs and disk nodes,
 * buffers, I/O from another thread and raw completions.
 */

#include "badinput.h"
#include "bius_clock.h"

int passed, failed, skipped;
const char *volatile current_check = "start";

void ok(const char *name)
{
	printf("ok - %s\n", name);
	fflush(stdout);
	passed++;
}

/* A check this kernel or machine cannot make, and why (a TAP SKIP). */
void skip(const char *name, const char *why)
{
	printf("ok - %s # SKIP %s\n", name, why);
	fflush(stdout);
	skipped++;
}

void __attribute__((format(printf, 2, 3)))
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
void expect_errno(const char *name, int ret, int err, int want)
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

void expect_true(const char *name, int cond, const char *fmt, ...)
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

void summary_and_exit(void)
{
	if (skipped)
		printf("# %d skipped (above: # SKIP)\n", skipped);
	printf("%d passed, %d failed\n", passed, failed);
	fflush(stdout);
	exit(failed ? 1 : 0);
}

void on_alarm(int sig)
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

void watchdog(const char *phase, unsigned int seconds)
{
	current_check = phase;
	alarm(seconds);
}

long now_ms(void)
{
	return bius_now_ms();
}

void sleep_ms(long ms)
{
	bius_sleep_ms(ms);
}

/* ---- ioctl wrappers: return 0 or -1 with errno ------------------------- */

int ctl_open(void)
{
	int fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		printf("not ok - open %s: %s\n", CTL_PATH, strerror(errno));
		failed++;
		summary_and_exit();
	}
	return fd;
}

void params_default(struct bius_device_params *p, const char *name)
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

/* Whether the running kernel (uname) is major.minor or newer. */
int kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return 0;
	return ma > major || (ma == major && mi >= minor);
}

/* Give up CAP_SYS_ADMIN (in a child that tests a refusal). */
int drop_sys_admin(void)
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

int get_info(int ctl, uint32_t id, struct bius_device_info *info)
{
	memset(info, 0, sizeof(*info));
	info->dev_id = id;
	return ioctl(ctl, BIUS_IOC_GET_INFO, info);
}

int do_connect(int fd, uint32_t id, uint32_t queue)
{
	struct bius_connect c = { .dev_id = id, .queue = queue };

	return ioctl(fd, BIUS_IOC_CONNECT, &c);
}

int do_destroy(int ctl, uint32_t id, uint32_t flags)
{
	struct bius_destroy d = { .dev_id = id, .flags = flags };

	return ioctl(ctl, BIUS_IOC_DESTROY_DEVICE, &d);
}

int state_of(int ctl, uint32_t id)
{
	struct bius_device_info info;

	if (get_info(ctl, id, &info))
		return -errno;
	return info.state;
}

int sysfs_exists(const char *name)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "/sys/block/%s", name);
	return stat(path, &st) == 0;
}

long sysfs_long(const char *name, const char *attr)
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

int sysfs_read(const char *name, const char *attr, char *buf,
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

int sysfs_is(const char *name, const char *attr, const char *want)
{
	char buf[64];

	return !sysfs_read(name, attr, buf, sizeof(buf)) && !strcmp(buf, want);
}

/* Open the disk, creating its node if devtmpfs is not there. */
int disk_open(const char *name, int flags)
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

void *xalloc(size_t size)
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

void fill_pattern(unsigned char *buf, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 9)) ^ seed);
}

/* ---- I/O from another thread -------------------------------------------- */

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
void io_start_iov(struct io_job *j, int fd, int write,
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

void io_start(struct io_job *j, int fd, int write, void *buf,
	      size_t len, off_t off, int cpu)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	io_start_iov(j, fd, write, &iov, 1, off, cpu);
}

/* 1 if the job finished within @ms (and was joined). */
int io_wait(struct io_job *j, long ms)
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
ssize_t wait_requests(struct tdev *d, unsigned char *buf, size_t len,
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

ssize_t send_completion_sector(int fd, uint64_t id, int result,
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

ssize_t send_completion(int fd, uint64_t id, int result,
			const void *payload, uint32_t len)
{
	return send_completion_sector(fd, id, result, 0, payload, len);
}

/* 1 if *@flag is set within @ms. */
int wait_flag(atomic_int *flag, long ms)
{
	long end = now_ms() + ms;

	while (!*flag && now_ms() < end)
		sleep_ms(10);
	return *flag;
}

/* A thread's close() of c->fd, which may block: c->done once it returned. */
void *close_fd(void *arg)
{
	struct closer *c = arg;

	close(c->fd);
	c->done = 1;
	return NULL;
}
