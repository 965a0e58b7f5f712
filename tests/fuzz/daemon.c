// SPDX-License-Identifier: GPL-2.0
/*
 * The daemons of bius_fuzz: a process per device (or per recovery) that
 * creates it with random parameters, or recovers it, connects a thread
 * per queue (serve.c), and after a random lifetime destroys it
 * (gracefully or by force) or just dies; some die on purpose at a stage
 * of CREATE -> LIVE -> RECOVERING -> STOPPING.  The daemon role's actions
 * start them, start recoveries and reap them.
 */

#include "serve.h"

enum death { D_NONE, D_CREATED, D_CONNECTING, D_BRINGUP, D_LIVE, D_NR };
enum ending { E_DESTROY, E_FORCE, E_EXIT, E_CLOSE_ONE, E_NR };

static void params_random(struct rng *r, struct bius_device_params *p,
			  unsigned int slot)
{
	static const uint32_t io[] = { 4 * KiB, 64 * KiB, 128 * KiB, MAX_IO };
	struct bius_zoned_params *z = &p->zoned;

	memset(p, 0, sizeof(*p));
	p->abi_version = BIUS_ABI_VERSION;
	p->logical_block_size = rng_pct(r, 50) ? 512 : 4096;
	p->size = (4 + rng_below(r, 13)) * (uint64_t)MiB;
	p->nr_hw_queues = 1 + rng_below(r, MAX_QUEUES);
	if (p->nr_hw_queues > 1 && rng_pct(r, 40))
		p->nr_poll_queues = 1;
	p->queue_depth = 1 + rng_below(r, 32);
	p->max_io_bytes = io[rng_below(r, 4)];
	p->timeout_ms = 500 + rng_below(r, 1500);
	p->features = rng_next(r) & (BIUS_FEATURE_WRITE_CACHE |
		BIUS_FEATURE_FUA | BIUS_FEATURE_DISCARD |
		BIUS_FEATURE_WRITE_ZEROES | BIUS_FEATURE_ROTATIONAL);
	if (rng_pct(r, 8))
		p->features |= BIUS_FEATURE_NO_DATA;
	if (rng_pct(r, 4))
		p->features |= BIUS_FEATURE_READ_ONLY;
	p->transfer_mode = rng_below(r, 3);
	p->poll_usecs = rng_pct(r, 20) ? rng_below(r, 200) : 0;
	p->recover_timeout_ms = rng_pct(r, 60) ? 1000 + rng_below(r, 3000) : 0;
	/* a name never used again (the I/O role opens disks by name) */
	if (rng_pct(r, 80))
		snprintf(p->name, sizeof(p->name), "fz%ug%u", slot,
			 sh->slot[slot].gen + 1);
	if (!rng_pct(r, 30))
		return;
	p->features |= BIUS_FEATURE_ZONED;
	p->size = 16 * MiB;
	z->zone_size = (1 + rng_below(r, 2)) * MiB;
	z->zone_capacity = rng_pct(r, 30) ? z->zone_size / 2 : 0;
	z->nr_conv_zones = 1 + rng_below(r, 2);
	if (rng_pct(r, 25))
		p->features |= BIUS_FEATURE_ZONE_APPEND_EMULATED;
}

/* Serve until LIVE (the disk's name into the slot); 0, or -1. */
static int wait_live(int ctl, struct slot *s, enum death die,
		     struct rng *r)
{
	struct bius_device_info info;
	long end = bius_now_ms() + 15000;

	while (bius_now_ms() < end) {
		if (die == D_BRINGUP && rng_pct(r, 10))
			return -1;
		if (get_info(ctl, s->dev_id, &info))
			return -1;
		if (info.state == BIUS_STATE_LIVE) {
			memcpy(s->disk, info.disk_name, sizeof(s->disk));
			return 0;
		}
		if (info.state != BIUS_STATE_CREATED &&
		    info.state != BIUS_STATE_RECOVERING)
			return -1;
		bius_sleep_ms(10);
	}
	return -1;
}

/* This daemon now serves the slot's device: its epoch (see struct slot). */
static uint32_t take_over(struct slot *s)
{
	uint32_t epoch;

	slot_lock(s);
	epoch = ++s->epoch;
	slot_unlock(s);
	return epoch;
}

/*
 * CREATE (the slot gets the device) or RECOVER; the owner fd, or -1.
 * *@epoch: this daemon's.
 */
static int daemon_own(struct slot *s, int recover, struct rng *r,
		      struct stats *st, uint32_t *epoch)
{
	struct bius_device_params p = s->p;
	struct bius_device_info info;
	int ctl = open(CTL_PATH, O_RDWR | O_CLOEXEC);

	if (note(st, ctl) < 0)
		return -1;
	if (recover) {
		if (rng_pct(r, 20)) {
			p.queue_depth++;
			must_fail(st, "RECOVER_DEVICE with another queue_depth",
				  ioctl(ctl, BIUS_IOC_RECOVER_DEVICE, &p));
			p.queue_depth--;
		}
		if (note(st, ioctl(ctl, BIUS_IOC_RECOVER_DEVICE, &p)))
			goto fail;
		*epoch = take_over(s);
		count(st, F_RECOVERED);
		return ctl;
	}
	params_random(r, &p, s - sh->slot);
	if (note(st, ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p)) ||
	    note(st, get_info(ctl, p.dev_id, &info)))
		goto fail;
	count(st, F_CREATED);
	s->p = info.params;
	s->dev_id = p.dev_id;
	s->disk[0] = 0;
	__atomic_fetch_add(&s->gen, 1, __ATOMIC_SEQ_CST);
	*epoch = take_over(s);
	if (s->p.features & BIUS_FEATURE_ZONED)
		zones_init(s);
	__atomic_store_n(&s->live, 1, __ATOMIC_SEQ_CST);
	return ctl;
fail:
	close(ctl);
	return -1;
}

/* Connect and start a thread per queue; how many, or -1 on a death. */
static int daemon_connect(struct slot *s, struct queue **qs, uint32_t epoch,
			  enum death die, struct rng *r, struct stats *st)
{
	unsigned int i, n = s->p.nr_hw_queues;

	for (i = 0; i < n && i < MAX_QUEUES; i++) {
		struct bius_connect c = { .dev_id = s->dev_id, .queue = i };
		int fd = open(CTL_PATH, O_RDWR | O_CLOEXEC);

		if (die == D_CONNECTING && rng_pct(r, 50))
			return -1;
		if (note(st, fd) < 0)
			return i;
		if (note(st, ioctl(fd, BIUS_IOC_CONNECT, &c)) ||
		    !(qs[i] = queue_new(s, fd, i, st, rng_next(r), epoch))) {
			close(fd);
			return i;
		}
		queue_start(qs[i]);
	}
	return i;
}

/* Serve until the lifetime ends, the device stops or the run does. */
static void daemon_live(int ctl, struct slot *s, enum death die,
			struct rng *r, struct stats *st)
{
	struct bius_device_info info;
	long end = bius_now_ms() + 1000 + rng_below(r, 9000);
	struct holder *h = NULL;

	if (rng_pct(r, 20))
		h = holder_start(s, st, rng_next(r));
	while (bius_now_ms() < end && !__atomic_load_n(&sh->stop, __ATOMIC_RELAXED)) {
		if (get_info(ctl, s->dev_id, &info) ||
		    info.state != BIUS_STATE_LIVE)
			break;
		/* a death with the holder in the kernel */
		if (die == D_LIVE && rng_pct(r, 5))
			_exit(0);
		bius_sleep_ms(50);
	}
	holder_stop(h);
}

static void daemon_end(int ctl, struct slot *s, struct queue **qs, int nq,
		       struct rng *r, struct stats *st)
{
	struct bius_destroy d = { .dev_id = s->dev_id };
	enum ending e = rng_below(r, E_NR);
	int i;

	if (__atomic_load_n(&sh->stop, __ATOMIC_RELAXED))
		e = E_FORCE;
	switch (e) {
	case E_DESTROY:
		/* refused if the disk is open, say: then by force */
		if (!note(st, ioctl(ctl, BIUS_IOC_DESTROY_DEVICE, &d)))
			break;
		/* fall through */
	case E_FORCE:
		d.flags = BIUS_DESTROY_FORCE;
		note(st, ioctl(ctl, BIUS_IOC_DESTROY_DEVICE, &d));
		break;
	case E_CLOSE_ONE:
		if (nq > 0) {
			close(qs[0]->fd);	/* the daemon is lost */
			bius_sleep_ms(rng_below(r, 300));
		}
		/* fall through */
	default:
		count(st, F_DAEMON_DEATHS);
		_exit(0);
	}
	count(st, F_DESTROYS);
	for (i = 0; i < nq; i++)
		if (!queue_join(qs[i], 10000))
			broken("queue %d of device %u still served 10 s after its DESTROY",
			       i, s->dev_id);
}

/* The daemon process of slot @s (never returns). */
void daemon_main(struct slot *s, int recover, uint64_t seed, int widx)
{
	struct queue *qs[MAX_QUEUES] = { NULL };
	struct stats *st = &sh->st[widx];
	struct rng r;
	enum death die;
	uint32_t epoch;
	int ctl, nq;

	rng_seed(&r, seed, 0);
	die = rng_pct(&r, 75) ? D_NONE : 1 + rng_below(&r, D_NR - 1);
	ctl = daemon_own(s, recover, &r, st, &epoch);
	if (ctl < 0)
		_exit(1);
	s->daemon = getpid();
	if (die == D_CREATED)
		goto died;
	nq = daemon_connect(s, qs, epoch, die, &r, st);
	if (nq < 0)
		goto died;
	if (nq == (int)s->p.nr_hw_queues && wait_live(ctl, s, die, &r) == 0)
		daemon_live(ctl, s, die, &r, st);
	else if (die != D_NONE)
		goto died;
	daemon_end(ctl, s, qs, nq, &r, st);
	_exit(0);
died:
	count(st, F_DAEMON_DEATHS);
	_exit(0);
}

/* ---- the daemon role's actions -------------------------------------------- */

static void pool_lock(void)
{
	if (pthread_mutex_lock(&sh->pool_lock) == EOWNERDEAD)
		pthread_mutex_consistent(&sh->pool_lock);
}

/* The device of an unclaimed slot is gone: the slot is free again. */
static void slot_settle(struct slot *s)
{
	struct bius_device_info info;
	int ctl = open(CTL_PATH, O_RDWR | O_CLOEXEC);

	if (ctl < 0)
		return;
	if ((get_info(ctl, s->dev_id, &info) && errno == ENODEV) ||
	    (!get_info(ctl, s->dev_id, &info) &&
	     info.state == BIUS_STATE_DEAD)) {
		s->disk[0] = 0;
		s->live = 0;
	}
	close(ctl);
}

static int spawn(struct worker *w, struct slot *s, int recover)
{
	uint64_t seed = rng_next(&w->rng);
	pid_t pid = fork();

	if (pid == 0)
		daemon_main(s, recover, seed, w->index);
	if (pid < 0) {
		s->claimed = 0;
		return -1;
	}
	w->kids[s - sh->slot] = pid;
	return 0;
}

/* Reap this worker's dead daemons and release their slots. */
void reap_kids(struct worker *w, int block)
{
	unsigned int i;

	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *s = &sh->slot[i];

		if (!w->kids[i] ||
		    waitpid(w->kids[i], NULL, block ? 0 : WNOHANG) <= 0)
			continue;
		w->kids[i] = 0;
		s->daemon = 0;
		slot_settle(s);
		__atomic_store_n(&s->claimed, 0, __ATOMIC_SEQ_CST);
	}
}

int act_daemon_start(struct worker *w)
{
	struct slot *s = NULL;
	unsigned int i;

	reap_kids(w, 0);
	pool_lock();
	for (i = 0; i < NR_SLOTS && !s; i++)
		if (!sh->slot[i].claimed && !sh->slot[i].live)
			s = &sh->slot[i];
	if (s)
		s->claimed = 1;
	pthread_mutex_unlock(&sh->pool_lock);
	return s ? spawn(w, s, 0) : 0;
}

int act_daemon_recover(struct worker *w)
{
	struct bius_device_info info;
	struct slot *s = NULL;
	unsigned int i;
	int ctl = open(CTL_PATH, O_RDWR | O_CLOEXEC);

	if (note(w->st, ctl) < 0)
		return -1;
	pool_lock();
	for (i = 0; i < NR_SLOTS && !s; i++)
		if (!sh->slot[i].claimed && sh->slot[i].live &&
		    !get_info(ctl, sh->slot[i].dev_id, &info) &&
		    info.state == BIUS_STATE_RECOVERING)
			s = &sh->slot[i];
	if (s)
		s->claimed = 1;
	pthread_mutex_unlock(&sh->pool_lock);
	close(ctl);
	return s ? spawn(w, s, 1) : 0;
}

/* Settle the slots no daemon serves; force down a device left unserved. */
int act_reap(struct worker *w)
{
	struct bius_device_info info;
	unsigned int i;
	int ctl;

	reap_kids(w, 0);
	ctl = open(CTL_PATH, O_RDWR | O_CLOEXEC);
	if (note(w->st, ctl) < 0)
		return -1;
	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *s = &sh->slot[i];
		struct bius_destroy d = { .dev_id = s->dev_id,
					  .flags = BIUS_DESTROY_FORCE };

		if (s->claimed || !s->live)
			continue;
		slot_settle(s);
		if (s->live && !get_info(ctl, s->dev_id, &info) &&
		    (info.state == BIUS_STATE_LIVE ||
		     info.state == BIUS_STATE_CREATED))
			note(w->st, ioctl(ctl, BIUS_IOC_DESTROY_DEVICE, &d));
	}
	close(ctl);
	return 0;
}
