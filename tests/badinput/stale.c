// SPDX-License-Identifier: GPL-2.0
/*
 * Completions that name requests the daemon does not hold, sent while the
 * requests a tag pointed to are freed under them: the I/O scheduler is
 * switched back and forth (its requests are freed each time) under load,
 * then the disk is removed, while a thread completes every tag with
 * random sequence numbers.  Each such completion is refused (ENOENT), the
 * real I/O succeeds, and the kernel (KASAN on the debug kernels) finds no
 * access to freed memory.
 */

#include "badinput.h"

struct loader {
	int fd;
	int write;
	atomic_int stop;
	int done, errors;
	pthread_t thread;
};

static void *load_loop(void *arg)
{
	struct loader *l = arg;
	unsigned char *buf = aligned_alloc(4096, 4096);
	unsigned int seed = l->write + 1;

	memset(buf, 0x5a, 4096);
	while (!l->stop && buf) {
		off_t off = (off_t)(rand_r(&seed) % 1024) * 4096;
		ssize_t r = l->write ? pwrite(l->fd, buf, 4096, off) :
				       pread(l->fd, buf, 4096, off);

		if (r == 4096)
			l->done++;
		else
			l->errors++;
	}
	free(buf);
	return NULL;
}

struct spammer {
	int fd;
	uint32_t depth;
	atomic_int stop;
	int sent, enoent, accepted, other;
	pthread_t thread;
};

static void *spam_loop(void *arg)
{
	struct spammer *s = arg;
	unsigned int seed = 42;
	uint32_t tag;

	while (!s->stop) {
		for (tag = 0; tag < s->depth && !s->stop; tag++) {
			struct bius_completion c = { 0 };
			uint64_t seq = rand_r(&seed) | 1u << 31;

			c.id = seq << 32 | tag;
			s->sent++;
			if (write(s->fd, &c, sizeof(c)) == sizeof(c))
				s->accepted++;
			else if (errno == ENOENT)
				s->enoent++;
			else if (errno != ENODEV)
				s->other++;
		}
	}
	return NULL;
}

static void set_scheduler(const char *disk, const char *sched)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/sys/block/%s/queue/scheduler", disk);
	fd = open(path, O_WRONLY);
	if (fd >= 0) {
		if (write(fd, sched, strlen(sched)) < 0)
			printf("# scheduler %s: %s\n", sched, strerror(errno));
		close(fd);
	}
}

void check_stale_completions(void)
{
	struct loader ld[2] = { { 0 } };
	struct spammer sp = { 0 };
	struct bius_device_params p;
	struct tdev d;
	unsigned int i, switches = 0;
	long end;
	int fd, r;

	watchdog("stale completions", 90);
	params_default(&p, "bi-stale");
	if (tdev_up(&d, &p, "stale completions: device comes up"))
		goto out;
	tdev_serve_in_threads(&d);
	fd = disk_open(d.name, O_RDWR | O_DIRECT);
	for (i = 0; i < 2; i++) {
		ld[i].fd = fd;
		ld[i].write = i;
		pthread_create(&ld[i].thread, NULL, load_loop, &ld[i]);
	}
	sp.fd = d.srv[0].fd;
	sp.depth = p.queue_depth;
	pthread_create(&sp.thread, NULL, spam_loop, &sp);
	end = now_ms() + 4000;
	while (now_ms() < end) {
		set_scheduler(d.name, switches % 2 ? "none" : "mq-deadline");
		switches++;
		sleep_ms(20);
	}
	for (i = 0; i < 2; i++) {
		ld[i].stop = 1;
		pthread_join(ld[i].thread, NULL);
	}
	close(fd);
	set_scheduler(d.name, "mq-deadline");
	/* del_gendisk() frees the scheduler's requests: still spamming */
	r = do_destroy(d.ctl, d.id, 0);
	expect_true("stale completions: DESTROY while they come", r == 0,
		    "%s", strerror(errno));
	sp.stop = 1;
	pthread_join(sp.thread, NULL);
	tdev_join(&d, 10000);
	printf("# stale completions: %u scheduler switches, %d + %d I/Os, %d completions sent\n",
	       switches, ld[0].done, ld[1].done, sp.sent);
	expect_true("stale completions: the I/O under switches succeeds",
		    ld[0].done > 0 && ld[1].done > 0 && !ld[0].errors &&
		    !ld[1].errors, "%d/%d done, %d/%d errors", ld[0].done,
		    ld[1].done, ld[0].errors, ld[1].errors);
	expect_true("stale completions: each one is refused with ENOENT",
		    sp.enoent > 0 && !sp.accepted && !sp.other,
		    "%d ENOENT, %d accepted, %d other errors", sp.enoent,
		    sp.accepted, sp.other);
out:
	tdev_free(&d);
}
