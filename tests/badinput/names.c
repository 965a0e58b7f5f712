// SPDX-License-Identifier: GPL-2.0
/*
 * Device names that collide: an unnamed CREATE while a device is named
 * bius<N> for the id it would get, and CREATEs racing the removal of a
 * disk whose partition has the name they ask for.
 */

#include "badinput.h"

/* Wait until no device has id @id any more (its last fd is closed). */
static int wait_id_free(int ctl, uint32_t id, long ms)
{
	struct bius_device_info info;
	long end = now_ms() + ms;

	while (get_info(ctl, id, &info) == 0) {
		if (now_ms() > end)
			return 0;
		sleep_ms(20);
	}
	return errno == ENODEV;
}

/*
 * A device named bius<K> whose own id is K - 1: the next unnamed CREATE,
 * whose id is K, moves on to the next id whose name is free.
 */
static void check_unnamed_after_bius_name(void)
{
	struct bius_device_params probe, a, b;
	struct bius_device_info info;
	int ctl = ctl_open(), pctl = ctl_open(), r;
	char want[BIUS_NAME_LEN];

	params_default(&probe, "bi-probe");
	if (ioctl(pctl, BIUS_IOC_CREATE_DEVICE, &probe)) {
		not_ok("names: probe", "CREATE: %s", strerror(errno));
		goto out;
	}
	/* the lowest free id, free again once the probe is gone */
	do_destroy(pctl, probe.dev_id, 0);
	close(pctl);
	pctl = -1;
	if (!wait_id_free(ctl, probe.dev_id, 5000)) {
		not_ok("names: probe", "id %u still in use", probe.dev_id);
		goto out;
	}
	params_default(&a, NULL);
	snprintf(a.name, sizeof(a.name), "bius%u", probe.dev_id + 1);
	if (ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &a)) {
		not_ok("names: a device named bius<id + 1>", "CREATE: %s",
		       strerror(errno));
		goto out;
	}
	if (a.dev_id != probe.dev_id)
		printf("# names: %s got id %u, not %u (ids in use meanwhile)\n",
		       a.name, a.dev_id, probe.dev_id);
	params_default(&b, NULL);
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &b);
	if (r == 0 && get_info(ctl, b.dev_id, &info))
		r = -1;
	snprintf(want, sizeof(want), "bius%u", b.dev_id);
	expect_true("names: an unnamed CREATE skips an id whose name is taken",
		    r == 0 && b.dev_id != probe.dev_id + 1 &&
		    !strcmp(info.params.name, want),
		    "r=%d (%s) id %u name %s", r, r ? strerror(errno) : "",
		    b.dev_id, r ? "" : info.params.name);
	if (r == 0)
		do_destroy(ctl, b.dev_id, 0);
	do_destroy(ctl, a.dev_id, 0);
out:
	if (pctl >= 0)
		close(pctl);
	close(ctl);
}

/* An MBR with one partition, sectors 2048..6143, at the start of @mem. */
static void write_mbr(unsigned char *mem)
{
	unsigned char *e = mem + 446;
	uint32_t start = 2048, count = 4096;

	memset(mem, 0, 512);
	e[4] = 0x83;
	memcpy(e + 8, &start, 4);
	memcpy(e + 12, &count, 4);
	mem[510] = 0x55;
	mem[511] = 0xaa;
}

struct creator {
	const char *name;
	atomic_int stop;
	int created;		/* CREATEs that won the name */
	int refused;		/* ... that found it taken */
	int other;		/* ... that failed otherwise */
	pthread_t thread;
};

static void *create_loop(void *arg)
{
	struct creator *c = arg;
	struct bius_device_params p;
	int ctl = ctl_open();

	while (!c->stop) {
		params_default(&p, c->name);
		if (ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p) == 0) {
			c->created++;
			do_destroy(ctl, p.dev_id, 0);
		} else if (errno == EEXIST) {
			c->refused++;
		} else {
			c->other++;
		}
	}
	close(ctl);
	return NULL;
}

/*
 * A disk with a partition goes away while CREATEs ask for the partition's
 * name: each one is refused while the partition is there and may win it
 * after, and none hangs (the lookup's reference to the partition may be
 * the last one, and its release frees the BIUS disk, which takes the
 * registry lock: it must not be dropped with that lock held).
 */
static void check_partition_name_race(unsigned int rounds)
{
	struct creator c = { .name = "bi-part1" };
	struct bius_device_params p;
	unsigned int i, seen = 0;
	struct tdev d;
	struct stat st;

	watchdog("partition name race", 30 + 5 * rounds);
	for (i = 0; i < rounds; i++) {
		params_default(&p, "bi-part");
		p.logical_block_size = 512;
		if (tdev_create(&d, &p, NULL, "names: partitioned device")) {
			tdev_free(&d);
			break;
		}
		write_mbr(d.mem);
		if (tdev_wait_live(&d, "names: partitioned device is live")) {
			tdev_force_down(&d);
			tdev_free(&d);
			break;
		}
		seen += stat("/sys/class/block/bi-part1", &st) == 0;
		c.stop = 0;
		pthread_create(&c.thread, NULL, create_loop, &c);
		sleep_ms(5);
		tdev_destroy_served(&d, d.ctl, "names: DESTROY the partitioned device");
		tdev_free(&d);
		sleep_ms(i % 4);
		c.stop = 1;
		pthread_join(c.thread, NULL);
	}
	expect_true("names: the partition bi-part1 appeared", i == rounds &&
		    seen == rounds, "%u of %u rounds", seen, i);
	expect_true("names: CREATE of a partition's name during its removal",
		    c.refused > 0 && c.other == 0,
		    "%d refused, %d won, %d other errors", c.refused, c.created,
		    c.other);
}

void check_names(void)
{
	watchdog("names", 60);
	check_unnamed_after_bius_name();
	check_partition_name_race(8);
}
