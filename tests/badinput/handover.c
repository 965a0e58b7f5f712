// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: daemons handing a device over, and daemons lost at the
 * awkward moments of it: an owner's close racing another daemon's
 * RECOVER_DEVICE, a daemon lost while its device stops, a recovering
 * daemon lost while the kernel re-reads the zones from it (or failing
 * that re-read), a daemon lost while one of its threads is stuck in a page
 * fault in read(), or in write() taking a completion's payload.
 */

#include "badinput.h"

#define HO_TIMEOUT_MS	30000
#define HO_DEVS		6
#define HO_ROUNDS	3

struct recover_race {
	uint32_t id;
	struct bius_device_params p;
	int fd;			/* the fd that recovers */
	int ret;		/* 0 once RECOVER_DEVICE succeeded */
	int err;
	pthread_t thread;
};

/* Try RECOVER_DEVICE until it succeeds or 10 s pass. */
static void *recover_until_owned(void *arg)
{
	struct recover_race *r = arg;
	long end = now_ms() + 10000;

	do {
		r->ret = recover(r->fd, &r->p);
		r->err = errno;
	} while (r->ret && (r->err == EBUSY) && now_ms() < end);
	return NULL;
}

/* Bring up a recoverable device and lose its daemon: RECOVERING, no owner. */
static int up_and_lose(struct tdev *d, const char *name, const char *check)
{
	struct bius_device_params p;

	params_default(&p, name);
	p.size = 1 * MiB;
	p.recover_timeout_ms = HO_TIMEOUT_MS;
	if (tdev_up(d, &p, check))
		return -1;
	tdev_close_fds(d);
	return state_of(d->ctl, d->id) == BIUS_STATE_RECOVERING ? 0 : -1;
}

/*
 * One fd recovers several held devices and is closed while another fd
 * keeps trying to recover the last of them: the second fd gets it only
 * once the first has let it go, and keeps it (it can connect its queues
 * and bring it back).
 */
static void owner_close_round(int round)
{
	struct tdev d[HO_DEVS];
	struct bius_device_info info;
	struct recover_race rr = { .fd = -1 };
	char name[BIUS_NAME_LEN], check[96];
	int a, i, n = 0, r = -1;

	snprintf(check, sizeof(check), "owner close vs RECOVER, round %d",
		 round);
	for (; n < HO_DEVS; n++) {
		snprintf(name, sizeof(name), "bi-ho%d", n);
		if (up_and_lose(&d[n], name, check)) {
			not_ok(check, "device %d not held", n);
			n++;
			goto out;
		}
	}
	a = ctl_open();
	for (i = 0; i < HO_DEVS; i++) {
		if (get_info(d[i].ctl, d[i].id, &info) || recover(a, &info.params)) {
			not_ok(check, "RECOVER %d: %s", i, strerror(errno));
			close(a);
			goto out;
		}
	}
	rr.p = info.params;	/* the last device's */
	rr.fd = ctl_open();
	rr.ret = -1;
	if (pthread_create(&rr.thread, NULL, recover_until_owned, &rr)) {
		not_ok(check, "pthread_create");
		close(a);
		goto out;
	}
	sleep_ms(20);
	close(a);
	pthread_join(rr.thread, NULL);
	r = rr.ret ? -1 : reconnect(&d[HO_DEVS - 1]);
	expect_true(check, r == 0, "recover %d (%s), connect: %s", rr.ret,
		    strerror(rr.err), strerror(errno));
	if (!r)
		r = serve_until_live(&d[HO_DEVS - 1], NULL, 0, 10000);
out:
	for (i = 0; i < n; i++) {
		if (i == HO_DEVS - 1 && !r) {
			tdev_destroy_served(&d[i], rr.fd, "owner close: destroy");
		} else {
			do_destroy(d[i].ctl, d[i].id, BIUS_DESTROY_FORCE);
			tdev_join(&d[i], 10000);
		}
		tdev_free(&d[i]);
	}
	if (rr.fd >= 0)
		close(rr.fd);
}

void check_owner_handover(void)
{
	int round;

	watchdog("owner handover", 60 * HO_ROUNDS);
	for (round = 0; round < HO_ROUNDS; round++)
		owner_close_round(round);
}

struct destroy_job {
	int ctl;
	uint32_t id;
	int ret;
	atomic_int done;
	pthread_t thread;
};

static void *destroy_forced(void *arg)
{
	struct destroy_job *j = arg;

	j->ret = do_destroy(j->ctl, j->id, BIUS_DESTROY_FORCE) ? errno : 0;
	j->done = 1;
	return NULL;
}

/*
 * A daemon lost while its device is STOPPING (DESTROY, then the daemon is
 * killed, as a service manager's stop timeout does): the request it held
 * fails at once, not after the request timeout, and DESTROY returns.
 */
void check_lost_while_stopping(void)
{
	struct bius_device_params p;
	unsigned char *buf = xalloc(64 * KiB), *rd = xalloc(4096);
	struct destroy_job dj = { 0 };
	struct io_job job;
	unsigned int qi;
	struct tdev d;
	long t0, end;
	ssize_t n;
	int fd;

	watchdog("lost while stopping", 60);
	params_default(&p, "bi-stoplost");
	p.timeout_ms = 20000;
	if (tdev_up(&d, &p, "lost while stopping: device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	io_start(&job, fd, 0, rd, 4096, 0, -1);
	n = wait_requests(&d, buf, 64 * KiB, &qi, 5000);
	if (fd < 0 || n != HDR) {
		not_ok("lost while stopping: a read in flight", "fd %d, n %zd",
		       fd, n);
		tdev_force_down(&d);
		goto out_close;
	}
	dj.ctl = ctl_open();
	dj.id = d.id;
	pthread_create(&dj.thread, NULL, destroy_forced, &dj);
	end = now_ms() + 5000;
	while (state_of(d.ctl, d.id) != BIUS_STATE_STOPPING && now_ms() < end)
		sleep_ms(10);
	expect_true("lost while stopping: DESTROY waits for the daemon",
		    state_of(d.ctl, d.id) == BIUS_STATE_STOPPING && !dj.done,
		    "state %d, destroy done %d", state_of(d.ctl, d.id),
		    (int)dj.done);
	t0 = now_ms();
	tdev_close_fds(&d);
	io_wait(&job, 15000);
	end = now_ms() + 15000;
	while (!dj.done && now_ms() < end)
		sleep_ms(10);
	expect_true("lost while stopping: its request fails at once, DESTROY returns",
		    job.done && job.ret < 0 && job.err == EIO && dj.done &&
		    !dj.ret && now_ms() - t0 < 5000,
		    "read %zd (%s), destroy done %d (%s) after %ld ms (request timeout 20000)",
		    job.ret, strerror(job.err), (int)dj.done, strerror(dj.ret),
		    now_ms() - t0);
	pthread_join(dj.thread, NULL);
	close(dj.ctl);
out_close:
	if (fd >= 0)
		close(fd);
out:
	tdev_free(&d);
	free(buf);
	free(rd);
}

/* A zoned recoverable device, its zones and its parameters. */
struct zrec {
	struct tdev d;
	struct zmodel zm;
	struct bius_device_info info;
};

/* Bring up @z, a zoned recoverable device named @name: 0 once LIVE. */
static int zrec_up(struct zrec *z, const char *name, const char *check)
{
	struct bius_device_params p;

	params_zoned(&p, name);
	p.recover_timeout_ms = HO_TIMEOUT_MS;
	zm_init(&z->zm, &p);
	return tdev_create(&z->d, &p, &z->zm, check) ||
	       tdev_wait_live(&z->d, check) ||
	       get_info(z->d.ctl, z->d.id, &z->info);
}

/*
 * Lose @z's daemon and recover it on a new fd (*@ctl): 0 once the new
 * connections are asked for the zones, the report's header in @hdr and
 * its queue in @qi.
 */
static int zrec_rereading(struct zrec *z, int *ctl, struct bius_request *hdr,
			  unsigned int *qi)
{
	tdev_close_fds(&z->d);
	*ctl = ctl_open();
	if (recover(*ctl, &z->info.params) || reconnect(&z->d) ||
	    wait_requests(&z->d, (unsigned char *)hdr, HDR, qi, 5000) != HDR)
		return -1;
	return hdr->op == BIUS_OP_REPORT_ZONES ? 0 : -1;
}

/*
 * A zoned device's recovering daemon is lost while the kernel re-reads
 * the zones from it: a third daemon recovers it, answers the zone report
 * and the device is LIVE again, long before the recovery timeout.
 */
void check_zoned_recovery_lost(void)
{
	struct bius_request hdr = { 0 };
	struct zrec z;
	unsigned int qi;
	int ctl2, ctl3, r;
	long t0;

	watchdog("zoned recovery, recoverer lost", 90);
	if (zrec_up(&z, "bi-zrec3", "zoned recoverer lost: device comes up"))
		goto out_destroy;
	r = zrec_rereading(&z, &ctl2, &hdr, &qi);
	expect_true("zoned recoverer lost: the new daemon is asked for the zones",
		    r == 0, "op %u: %s", hdr.op, strerror(errno));
	tdev_close_fds(&z.d);
	close(ctl2);

	t0 = now_ms();
	ctl3 = ctl_open();
	r = recover(ctl3, &z.info.params);
	expect_true("zoned recoverer lost: a third daemon recovers it", r == 0,
		    "%s", strerror(errno));
	r = r || reconnect(&z.d) || serve_until_live(&z.d, NULL, 0, 10000);
	expect_true("zoned recoverer lost: LIVE again before the recovery timeout",
		    r == 0, "state %d after %ld ms (recovery timeout %d ms)",
		    state_of(z.d.ctl, z.d.id), now_ms() - t0, HO_TIMEOUT_MS);
	if (!r) {
		tdev_destroy_served(&z.d, ctl3, "zoned recoverer lost: destroy");
		close(ctl3);
		goto out;
	}
	close(ctl3);
out_destroy:
	tdev_force_down(&z.d);
out:
	tdev_free(&z.d);
}

struct stuck_read {
	int fd;
	void *buf;
	ssize_t ret;
	atomic_int done;
	pthread_t thread;
};

static void *read_into(void *arg)
{
	struct stuck_read *s = arg;

	s->ret = read(s->fd, s->buf, 64 * KiB);
	s->done = 1;
	return NULL;
}

struct lister {
	int ret;
	atomic_int done;
	pthread_t thread;
};

static void *list_devices(void *arg)
{
	struct bius_device_list l = { 0 };
	struct lister *li = arg;
	int ctl = ctl_open();

	li->ret = ioctl(ctl, BIUS_IOC_LIST_DEVICES, &l);
	close(ctl);
	li->done = 1;
	return NULL;
}

/* A buffer whose pages only userfaultfd provides, and that never does. */
static void *uffd_buffer(int *uffd)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	void *buf;

	*uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (*uffd < 0)
		return NULL;
	buf = mmap(NULL, 64 * KiB, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg.range.start = (unsigned long)buf;
	reg.range.len = 64 * KiB;
	if (buf == MAP_FAILED || ioctl(*uffd, UFFDIO_API, &api) ||
	    ioctl(*uffd, UFFDIO_REGISTER, &reg)) {
		close(*uffd);
		return NULL;
	}
	return buf;
}

/*
 * A daemon thread's read() stuck in a page fault on its buffer (here one
 * userfaultfd never serves) holds no lock: the loss of the daemon's owner
 * fd completes and every other BIUS ioctl answers meanwhile; the read
 * ends once its page comes.
 */
void check_stuck_reader(void)
{
	struct bius_device_params p;
	struct uffdio_range wake;
	struct uffdio_zeropage zp;
	struct stuck_read sr = { 0 };
	struct closer cl = { 0 };
	struct lister li = { 0 };
	unsigned char *rd = xalloc(4096);
	struct io_job job;
	struct tdev d;
	int uffd, fd;

	watchdog("stuck reader", 60);
	sr.buf = uffd_buffer(&uffd);
	if (!sr.buf) {
		skip("stuck reader", "no userfaultfd");
		free(rd);
		return;
	}
	params_default(&p, "bi-stuck");
	p.recover_timeout_ms = HO_TIMEOUT_MS;
	if (tdev_up(&d, &p, "stuck reader: device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	io_start(&job, fd, 0, rd, 4096, 0, -1);
	sleep_ms(200);	/* the request is pending */
	sr.fd = d.srv[0].fd;
	pthread_create(&sr.thread, NULL, read_into, &sr);
	sleep_ms(200);	/* the read is in its fault */
	cl.fd = d.ctl;
	d.ctl = -1;
	pthread_create(&cl.thread, NULL, close_fd, &cl);
	expect_true("stuck reader: the owner's loss completes",
		    wait_flag(&cl.done, 3000) && !sr.done, "close done %d, read done %d",
		    (int)cl.done, (int)sr.done);
	pthread_create(&li.thread, NULL, list_devices, &li);
	expect_true("stuck reader: LIST_DEVICES answers meanwhile",
		    wait_flag(&li.done, 3000) && li.ret == 0, "done %d, ret %d",
		    (int)li.done, li.ret);

	zp.range.start = (unsigned long)sr.buf;
	zp.range.len = 64 * KiB;
	zp.mode = 0;
	wake.start = zp.range.start;
	wake.len = zp.range.len;
	if (ioctl(uffd, UFFDIO_ZEROPAGE, &zp))
		ioctl(uffd, UFFDIO_WAKE, &wake);
	expect_true("stuck reader: the read ends once its page comes",
		    wait_flag(&sr.done, 5000), "read still stuck");
	pthread_join(cl.thread, NULL);
	pthread_join(li.thread, NULL);
	if (sr.done)
		pthread_join(sr.thread, NULL);
	d.ctl = ctl_open();
	do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	io_wait(&job, 5000);
	if (fd >= 0)
		close(fd);
out:
	tdev_free(&d);
	close(uffd);
	munmap(sr.buf, 64 * KiB);
	free(rd);
}

/* A completion whose payload sits in pages only userfaultfd provides. */
struct stuck_write {
	int fd;
	struct iovec iov[2];	/* the record, its payload */
	ssize_t ret;
	int err;
	atomic_int done;
	pthread_t thread;
};

static void *write_stuck(void *arg)
{
	struct stuck_write *sw = arg;

	sw->ret = writev(sw->fd, sw->iov, 2);
	sw->err = errno;
	sw->done = 1;
	return NULL;
}

/*
 * A daemon lost while one of its threads is inside write(), completing a
 * READ whose payload then faults (EFAULT: the page is unmapped while the
 * copy waits for it): the completion is refused, and the request is the
 * daemon's again after the loss took back everything else it had.  It
 * must go to the next daemon as a replay, not wait for its timeout.
 */
void check_stranded_completion(void)
{
	const char *check = "stranded completion: the READ goes to the next daemon";
	struct bius_device_params p;
	struct bius_device_info info;
	struct bius_completion c = { .result = 0, .len = 4096 };
	struct bius_request hdr;
	struct stuck_write sw = { .fd = -1 };
	struct closer cl = { 0 };
	struct uffdio_range wake;
	unsigned char *rd = xalloc(4096), *payload;
	struct io_job job;
	struct tdev d;
	unsigned int qi;
	int uffd, fd, r = -1;

	watchdog("stranded completion", 60);
	payload = uffd_buffer(&uffd);
	if (!payload) {
		skip("stranded completion", "no userfaultfd");
		free(rd);
		return;
	}
	params_default(&p, "bi-strand");
	p.nr_hw_queues = 1;
	p.timeout_ms = 20000;
	p.recover_timeout_ms = HO_TIMEOUT_MS;
	if (tdev_up(&d, &p, "stranded completion: device comes up"))
		goto out;
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	io_start(&job, fd, 0, rd, 4096, 0, -1);
	if (wait_requests(&d, (unsigned char *)&hdr, HDR, &qi, 5000) != HDR ||
	    hdr.op != BIUS_OP_READ) {
		not_ok(check, "no READ request: %s", strerror(errno));
		goto down;
	}
	c.id = hdr.id;
	sw.fd = d.srv[qi].fd;
	sw.iov[0] = (struct iovec){ &c, CMP };
	sw.iov[1] = (struct iovec){ payload, 4096 };
	pthread_create(&sw.thread, NULL, write_stuck, &sw);
	sleep_ms(200);	/* the completion is in its fault */
	cl.fd = d.ctl;
	d.ctl = -1;
	pthread_create(&cl.thread, NULL, close_fd, &cl);
	wait_flag(&cl.done, 3000);
	/* the payload goes away: the copy fails, the completion is refused */
	munmap(payload, 64 * KiB);
	payload = NULL;
	wake.start = (unsigned long)sw.iov[1].iov_base;
	wake.len = 64 * KiB;
	ioctl(uffd, UFFDIO_WAKE, &wake);
	expect_true("stranded completion: the lost daemon's write() is refused",
		    wait_flag(&sw.done, 5000) && sw.ret < 0 && sw.err == EFAULT,
		    "done %d, write %zd (%s)", (int)sw.done, sw.ret,
		    strerror(sw.err));
	d.ctl = ctl_open();
	tdev_close_fds(&d);
	r = get_info(d.ctl, d.id, &info) || recover(d.ctl, &info.params) ||
	    reconnect(&d) ? -1 : serve_until_live(&d, &job, 1, 5000);
	expect_true(check, r == 0 && job.ret == 4096,
		    "recover/serve %d, read %zd (%s)%s", r, job.ret,
		    strerror(job.err), job.done ? "" : " (still waiting)");
down:
	if (r)
		do_destroy(d.ctl, d.id, BIUS_DESTROY_FORCE);
	io_wait(&job, 25000);
	if (fd >= 0)
		close(fd);
	if (r)
		tdev_join(&d, 10000);
	else
		tdev_destroy_served(&d, d.ctl, "stranded completion: destroy");
	if (cl.thread)
		pthread_join(cl.thread, NULL);
	if (sw.thread)
		pthread_join(sw.thread, NULL);
out:
	tdev_free(&d);
	close(uffd);
	if (payload)
		munmap(payload, 64 * KiB);
	free(rd);
}

/*
 * A recovering daemon that fails the zone re-read ends the device, with
 * data left dirty in the page cache of a conventional zone (written back
 * and failed while the disk goes, with no kernel warning: 6.10 and later
 * free the disk's zone write plugs when a re-read fails).
 */
void check_zoned_recovery_failed(void)
{
	unsigned char *buf = xalloc(64 * KiB);
	struct bius_request hdr = { 0 };
	struct zrec z;
	unsigned int qi;
	int ctl2 = -1, fd, r, state;
	long end;

	watchdog("zoned recovery, re-read failed", 60);
	if (zrec_up(&z, "bi-zrecfail", "zoned re-read failed: device comes up")) {
		tdev_force_down(&z.d);
		goto out;
	}
	fd = disk_open(z.d.name, O_RDWR);
	fill_pattern(buf, 64 * KiB, 7);
	r = fd < 0 || pwrite(fd, buf, 64 * KiB, 0) != 64 * KiB;	/* conventional */
	r = r || zrec_rereading(&z, &ctl2, &hdr, &qi);
	r = r ? -1 : send_completion(z.d.srv[qi].fd, hdr.id, -EIO, NULL, 0);
	expect_true("zoned re-read failed: the new daemon fails the zone report",
		    r == CMP, "op %u, r %d: %s", hdr.op, r, strerror(errno));
	end = now_ms() + 10000;
	while ((state = state_of(z.d.ctl, z.d.id)) != BIUS_STATE_DEAD &&
	       state != -ENODEV && now_ms() < end)
		sleep_ms(20);
	expect_true("zoned re-read failed: the device ends",
		    state == BIUS_STATE_DEAD || state == -ENODEV, "state %d",
		    state);
	if (state != BIUS_STATE_DEAD && state != -ENODEV)
		tdev_force_down(&z.d);
	if (fd >= 0)
		close(fd);
	if (ctl2 >= 0)
		close(ctl2);
out:
	tdev_free(&z.d);
	free(buf);
}
