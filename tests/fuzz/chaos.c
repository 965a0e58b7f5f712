// SPDX-License-Identifier: GPL-2.0
/*
 * The chaos role of bius_fuzz: kill -9 of serving daemons, DESTROY of any
 * device (graceful or forced) by a process that does not serve it, and
 * the ioctls, read(), write(), COMPLETE_FETCH, mmap() and poll() that the
 * ABI must refuse: malformed CREATE and RECOVER parameters, CONNECT to a
 * taken or missing queue, calls on a fd that is not connected.
 */

#include "fuzz.h"

static int ctl_open(struct worker *w)
{
	return note(w->st, open(CTL_PATH, O_RDWR | O_CLOEXEC));
}

/* A slot with a device into *sp, and a fresh fd; the fd, or -1. */
static int slot_ctl(struct worker *w, struct slot **sp)
{
	*sp = slot_pick(&w->rng, 0);
	return *sp ? ctl_open(w) : -1;
}

int act_kill(struct worker *w)
{
	struct slot *s = slot_pick(&w->rng, 0);
	pid_t pid = s ? s->daemon : 0;

	if (pid <= 0 || note(w->st, kill(pid, SIGKILL)))
		return -1;
	count(w->st, F_KILLS);
	return 0;
}

int act_destroy(struct worker *w)
{
	struct bius_destroy d = { .flags = rng_pct(&w->rng, 50) ?
					   BIUS_DESTROY_FORCE : 0 };
	struct slot *s;
	int ctl = slot_ctl(w, &s), r;

	if (ctl < 0)
		return -1;
	d.dev_id = s->dev_id;
	r = note(w->st, ioctl(ctl, BIUS_IOC_DESTROY_DEVICE, &d));
	if (!r)
		count(w->st, F_DESTROYS);
	close(ctl);
	return r;
}

/* GET_INFO and LIST_DEVICES, of devices that exist or not. */
int act_info(struct worker *w)
{
	struct bius_device_info info;
	struct bius_device_list l = { 0 };
	struct slot *s = slot_pick(&w->rng, 0);
	uint32_t ids[8];
	int ctl = ctl_open(w);

	if (ctl < 0)
		return -1;
	note(w->st, get_info(ctl, s && rng_pct(&w->rng, 80) ? s->dev_id :
			     rng_below(&w->rng, 1000), &info));
	l.capacity = rng_below(&w->rng, 9);
	l.ids = rng_pct(&w->rng, 10) ? 16 : (uintptr_t)ids;
	note(w->st, ioctl(ctl, BIUS_IOC_LIST_DEVICES, &l));
	must_fail(w->st, "an unknown ioctl",
		  ioctl(ctl, _IO(BIUS_IOC_MAGIC, 0x40 + rng_below(&w->rng, 8))));
	close(ctl);
	return 0;
}

/* One field of valid parameters made invalid. */
static void params_break(struct worker *w, struct bius_device_params *p)
{
	switch (rng_below(&w->rng, 10)) {
	case 0:
		p->abi_version++;
		break;
	case 1:
		p->logical_block_size = 1000;
		break;
	case 2:
		p->nr_hw_queues = rng_pct(&w->rng, 50) ? 0 :
				  BIUS_MAX_HW_QUEUES + 1;
		break;
	case 3:
		p->queue_depth = BIUS_MAX_QUEUE_DEPTH + 1;
		break;
	case 4:
		p->size = p->logical_block_size + 1;
		break;
	case 5:
		p->features = BIUS_FEATURES_ALL + 1;
		break;
	case 6:
		p->reserved[rng_below(&w->rng, 2)] = 1;
		break;
	case 7:
		p->recover_timeout_ms = BIUS_MAX_RECOVER_TIMEOUT_MS + 1;
		break;
	case 8:
		p->nr_poll_queues = p->nr_hw_queues;
		break;
	default:
		strcpy(p->name, "bad name!");
	}
}

int act_bad_create(struct worker *w)
{
	struct bius_device_params p = {
		.abi_version = BIUS_ABI_VERSION, .size = 4 * MiB,
		.logical_block_size = 512, .nr_hw_queues = 1,
		.queue_depth = 4,
	};
	struct bius_destroy d = { .flags = BIUS_DESTROY_FORCE };
	int ctl = ctl_open(w), r;

	if (ctl < 0)
		return -1;
	params_break(w, &p);
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
	must_fail(w->st, "CREATE_DEVICE with a broken parameter", r);
	if (r == 0) {
		d.dev_id = p.dev_id;
		ioctl(ctl, BIUS_IOC_DESTROY_DEVICE, &d);
	}
	close(ctl);
	return 0;
}

/* RECOVER_DEVICE with parameters that describe another device. */
int act_bad_recover(struct worker *w)
{
	struct bius_device_params p;
	struct slot *s;
	int ctl = slot_ctl(w, &s);

	if (ctl < 0)
		return -1;
	p = s->p;
	p.dev_id = s->dev_id;
	params_break(w, &p);
	must_fail(w->st, "RECOVER_DEVICE with a broken parameter",
		  ioctl(ctl, BIUS_IOC_RECOVER_DEVICE, &p));
	close(ctl);
	return 0;
}

/* CONNECT to a queue that does not exist, or to one that may be taken
 * (if it is not, this fd serves nothing and closing it loses the daemon).
 */
int act_bad_connect(struct worker *w)
{
	struct bius_device_info info;
	struct bius_connect c = { 0 };
	struct slot *s;
	uint32_t nq;
	int fd = slot_ctl(w, &s);

	if (fd < 0)
		return -1;
	/* the queues of this very device (the slot may change meanwhile) */
	c.dev_id = s->dev_id;
	if (note(w->st, get_info(fd, c.dev_id, &info))) {
		close(fd);
		return -1;
	}
	nq = info.params.nr_hw_queues;
	c.queue = rng_below(&w->rng, nq + 1);
	if (c.queue == nq || rng_pct(&w->rng, 20)) {
		c.reserved = c.queue < nq;
		must_fail(w->st, "CONNECT to no queue or with reserved set",
			  ioctl(fd, BIUS_IOC_CONNECT, &c));
	} else {
		note(w->st, ioctl(fd, BIUS_IOC_CONNECT, &c));
	}
	close(fd);
	return 0;
}

/* What a fd that is not connected must refuse. */
int act_unconnected(struct worker *w)
{
	unsigned char buf[HDR + CMP] = { 0 };
	struct bius_complete_fetch cf = {
		.requests = (uintptr_t)buf, .requests_len = HDR,
	};
	struct pollfd pfd = { .events = POLLIN | POLLOUT };
	void *m;
	int fd = ctl_open(w);

	if (fd < 0)
		return -1;
	must_fail(w->st, "read() of an unconnected fd", read(fd, buf, HDR));
	must_fail(w->st, "write() of an unconnected fd", write(fd, buf, CMP));
	must_fail(w->st, "COMPLETE_FETCH of an unconnected fd",
		  ioctl(fd, BIUS_IOC_COMPLETE_FETCH, &cf));
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	must_fail(w->st, "mmap() of an unconnected fd",
		  m == MAP_FAILED ? -1 : 0);
	if (m != MAP_FAILED)
		munmap(m, 4096);
	pfd.fd = fd;
	note(w->st, poll(&pfd, 1, 0));
	close(fd);
	return 0;
}
