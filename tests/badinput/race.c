// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: race mode: device teardown (daemon killed, DESTROY,
 * queue fd closed) while I/O, timeouts and completions race.
 */

#include "badinput.h"

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
	atomic_int *opened;	/* threads that have the disk open */
	unsigned int seed;
	long ios, errors;
	pthread_t thread;
};

static void *race_io_thread(void *arg)
{
	struct race_io *r = arg;
	unsigned char *buf = xalloc(128 * KiB);
	int fd = open(r->path, O_RDWR | O_DIRECT);

	if (fd >= 0)
		atomic_fetch_add(r->opened, 1);
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
	atomic_int stop = 0, opened = 0;
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
		io[i].opened = &opened;
		io[i].seed = seed * 7 + i;
		io[i].ios = io[i].errors = 0;
		pthread_create(&io[i].thread, NULL, race_io_thread, &io[i]);
	}
	/* the disk must be open for the ends that expect it (EBUSY), however
	 * slowly the kernel runs (a debug kernel under TCG)
	 */
	t_end = now_ms() + 20000;
	while (opened < 4 && now_ms() < t_end)
		sleep_ms(10);
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

void check_races(unsigned int rounds, unsigned int seed)
{
	unsigned int i;

	for (i = 0; i < rounds; i++)
		race_round(i, seed + i);
}
