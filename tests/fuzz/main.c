// SPDX-License-Identifier: GPL-2.0
/*
 * bius_fuzz: drives /dev/bius as a fuzzer would, but knowing the protocol.
 *
 *   bius_fuzz --seed S --seconds N [--procs P] [--trace]
 *
 * The parent forks P workers (default 4); worker i has the role
 * i % 4 -> daemon, I/O, chaos, I/O and its own PRNG from (S, i), and runs
 * actions drawn by weight from the table below until N seconds have
 * passed (daemon.c, io.c, chaos.c).  The same seed gives every worker the
 * same sequence of actions and choices; what the kernel does between them
 * depends on timing.  The parent watches for a worker stuck in one action
 * (WATCHDOG_S), then forces every device down and prints the figures.
 * Exit status: 0; 1 if an invariant of the ABI was broken or a worker
 * hung (both said on a line of their own); 2 on bad usage.  --trace
 * prints a line "T SECONDS wI #N ACTION" as each action starts; SECONDS
 * of CLOCK_MONOTONIC, the clock of the kernel log's time stamps.
 */

#include "fuzz.h"

const struct action actions[] = {
	/* name            function            daemon  I/O  chaos */
	{ "daemon-start",   act_daemon_start,   { 30, 0, 0 } },
	{ "daemon-recover", act_daemon_recover, { 30, 0, 0 } },
	{ "reap",           act_reap,           { 20, 0, 0 } },
	{ "io-verify",      act_io_verify,      { 0, 30, 0 } },
	{ "io-buffered",    act_io_buffered,    { 0, 20, 0 } },
	{ "io-uring",       act_io_uring,       { 0, 15, 0 } },
	{ "io-zones",       act_io_zones,       { 0, 15, 0 } },
	{ "io-rrpart",      act_io_rrpart,      { 0, 3, 0 } },
	{ "io-sched",       act_io_sched,       { 0, 3, 0 } },
	{ "io-mbr",         act_io_mbr,         { 0, 2, 0 } },
	{ "kill",           act_kill,           { 0, 0, 3 } },
	{ "destroy",        act_destroy,        { 0, 0, 2 } },
	{ "info",           act_info,           { 0, 0, 20 } },
	{ "bad-create",     act_bad_create,     { 0, 0, 10 } },
	{ "bad-recover",    act_bad_recover,    { 0, 0, 10 } },
	{ "bad-connect",    act_bad_connect,    { 0, 0, 10 } },
	{ "unconnected",    act_unconnected,    { 0, 0, 10 } },
	{ "bad-pointers",   act_bad_pointers,   { 0, 0, 10 } },
	{ "bad-names",      act_bad_names,      { 0, 0, 5 } },
};
const unsigned int nr_actions = sizeof(actions) / sizeof(actions[0]);

static const char *const figure_name[F_NR] = {
	"created", "recovered", "kills", "daemon_deaths", "destroys", "lies",
	"lies_refused", "completions", "verified", "requests", "replays",
	"polled", "zone_ops", "sched_switches", "edge_fetches", "name_collisions",
	"mmap_lock_holds"
};

static int trace;

static int pick(struct worker *w)
{
	unsigned int i, total = 0, x;

	for (i = 0; i < nr_actions; i++)
		total += actions[i].weight[w->role];
	x = rng_below(&w->rng, total);
	for (i = 0; i < nr_actions; i++) {
		if (x < actions[i].weight[w->role])
			return i;
		x -= actions[i].weight[w->role];
	}
	return 0;
}

static void worker_main(int index, uint64_t seed)
{
	static const enum role roles[4] = { R_DAEMON, R_IO, R_CHAOS, R_IO };
	struct beat *b = &sh->beat[index];
	struct worker w = { .index = index, .role = roles[index % 4] };
	int a;

	rng_seed(&w.rng, seed, index);
	w.st = &sh->st[index];
	if (posix_memalign((void **)&w.buf, BLK, IO_BUF) ||
	    posix_memalign((void **)&w.buf2, BLK, IO_BUF))
		_exit(2);
	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED)) {
		a = pick(&w);
		b->trace[b->n % TRACE_LEN] = a;
		b->since_ms = bius_now_ms();
		__atomic_store_n(&b->action, a, __ATOMIC_RELEASE);
		if (trace)
			printf("T %ld.%03ld w%d #%llu %s\n", b->since_ms / 1000,
			       b->since_ms % 1000, index,
			       (unsigned long long)b->n, actions[a].name);
		b->n++;
		w.st->ops[a]++;
		if (actions[a].fn(&w) < 0)
			w.st->fails[a]++;
		__atomic_store_n(&b->action, -1, __ATOMIC_RELEASE);
		bius_sleep_ms(rng_below(&w.rng, w.role == R_IO ? 5 : 50));
	}
	reap_kids(&w, 1);
	_exit(0);
}

/* Say what a worker is doing, with its last actions and kernel stack. */
static void post_mortem(int i)
{
	struct beat *b = &sh->beat[i];
	char path[64], buf[4096];
	unsigned int k;
	ssize_t n;
	int fd;

	printf("  worker %d (pid %d): action %s for %ld ms; last actions:", i,
	       b->pid, b->action >= 0 ? actions[b->action].name : "(none)",
	       bius_now_ms() - b->since_ms);
	for (k = b->n > TRACE_LEN ? b->n - TRACE_LEN : 0; k < b->n; k++)
		printf(" %s", actions[b->trace[k % TRACE_LEN]].name);
	printf("\n");
	snprintf(path, sizeof(path), "/proc/%d/stack", b->pid);
	fd = open(path, O_RDONLY);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n > 0) {
		buf[n] = 0;
		printf("%s", buf);
	}
	if (fd >= 0)
		close(fd);
}

/* Until @end_ms, or a hang; returns the hung worker, or -1. */
static int watch(int procs, long end_ms)
{
	int i;

	while (bius_now_ms() < end_ms) {
		bius_sleep_ms(500);
		for (i = 0; i < procs; i++)
			if (sh->beat[i].action >= 0 &&
			    bius_now_ms() - sh->beat[i].since_ms > WATCHDOG_S * 1000L)
				return i;
	}
	return -1;
}

/* Every worker ends within the watchdog's time; else the first hung one. */
static int wait_workers(int procs)
{
	long end = bius_now_ms() + WATCHDOG_S * 1000L;
	int i, left = procs;

	while (left && bius_now_ms() < end) {
		for (i = 0; i < procs; i++)
			if (sh->beat[i].pid > 0 &&
			    waitpid(sh->beat[i].pid, NULL, WNOHANG) > 0) {
				sh->beat[i].pid = 0;
				left--;
			}
		bius_sleep_ms(50);
	}
	for (i = 0; i < procs; i++)
		if (sh->beat[i].pid > 0)
			return i;
	return -1;
}

/* Kill the daemons, force every device down, wait until none is left. */
static int cleanup(void)
{
	struct bius_device_list l = { 0 };
	uint32_t ids[64];
	long end = bius_now_ms() + 30000;
	unsigned int i;
	int ctl = open(CTL_PATH, O_RDWR | O_CLOEXEC);

	for (i = 0; i < NR_SLOTS; i++)
		if (sh->slot[i].daemon > 0)
			kill(sh->slot[i].daemon, SIGKILL);
	if (ctl < 0)
		return -1;
	do {
		l.capacity = 64;
		l.ids = (uintptr_t)ids;
		if (ioctl(ctl, BIUS_IOC_LIST_DEVICES, &l) || !l.count)
			break;
		for (i = 0; i < l.count && i < 64; i++) {
			struct bius_destroy d = { .dev_id = ids[i],
						  .flags = BIUS_DESTROY_FORCE };

			ioctl(ctl, BIUS_IOC_DESTROY_DEVICE, &d);
		}
		bius_sleep_ms(100);
	} while (bius_now_ms() < end);
	close(ctl);
	return l.count;
}

static void summary(uint64_t seed, int seconds, int procs)
{
	struct stats t;
	unsigned int a, i;
	int p;

	memset(&t, 0, sizeof(t));
	for (p = 0; p < procs; p++) {
		for (a = 0; a < nr_actions; a++) {
			t.ops[a] += sh->st[p].ops[a];
			t.fails[a] += sh->st[p].fails[a];
		}
		for (i = 0; i < NR_ERRNO; i++)
			t.err[i] += sh->st[p].err[i];
		for (i = 0; i < F_NR; i++)
			t.fig[i] += sh->st[p].fig[i];
	}
	printf("SUMMARY seed %llu seconds %d procs %d:",
	       (unsigned long long)seed, seconds, procs);
	for (a = 0, i = 0; a < nr_actions; a++)
		i += t.ops[a];
	printf(" operations %u", i);
	for (i = 0; i < F_NR; i++)
		printf(" %s %llu", figure_name[i], (unsigned long long)t.fig[i]);
	printf(" broken %d\n", sh->broken);
	for (a = 0; a < nr_actions; a++)
		printf("  action %-15s %8llu (%llu without effect)\n",
		       actions[a].name, (unsigned long long)t.ops[a],
		       (unsigned long long)t.fails[a]);
	for (i = 0; i < NR_ERRNO; i++)
		if (t.err[i])
			printf("  errno %-15s %8llu\n", i ? strerrorname_np(i) : "?",
			       (unsigned long long)t.err[i]);
}

static int usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s --seed S --seconds N [--procs P] [--trace]\n"
		"  P workers (1..%d, default 4) of roles daemon, I/O, chaos, I/O,\n"
		"  ... for N seconds, seeded by S; --trace prints every action\n"
		"  (\"T SECONDS wI #N ACTION\", SECONDS as in the kernel log)\n",
		argv0, MAX_PROCS);
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t seed = 0;
	int seconds = 0, procs = 4, i, hung, left;
	long t0;

	for (i = 1; i + 1 < argc || (i < argc && !strcmp(argv[i], "--trace")); i++) {
		if (!strcmp(argv[i], "--trace"))
			trace = 1;
		else if (!strcmp(argv[i], "--seed"))
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--procs"))
			procs = atoi(argv[++i]);
		else
			return usage(argv[0]);
	}
	if (i != argc || seconds <= 0 || procs < 1 || procs > MAX_PROCS)
		return usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	printf("bius_fuzz: seed %llu seconds %d procs %d\n",
	       (unsigned long long)seed, seconds, procs);
	shared_init();
	for (i = 0; i < procs; i++) {
		pid_t pid;

		sh->beat[i].action = -1;
		pid = fork();
		if (pid == 0)
			worker_main(i, seed);
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		sh->beat[i].pid = pid;
	}
	t0 = bius_now_ms();
	hung = watch(procs, t0 + seconds * 1000L);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_SEQ_CST);
	printf("bius_fuzz: stopping at %ld ms\n", bius_now_ms() - t0);
	if (hung < 0)
		hung = wait_workers(procs);
	printf("bius_fuzz: workers ended at %ld ms\n", bius_now_ms() - t0);
	if (hung >= 0) {
		printf("HUNG: worker %d stuck in one action for over %d s\n",
		       hung, WATCHDOG_S);
		for (i = 0; i < procs; i++)
			post_mortem(i);
	}
	left = cleanup();
	printf("bius_fuzz: devices gone at %ld ms\n", bius_now_ms() - t0);
	if (left)
		printf("HUNG: %d devices still listed 30 s after the end\n",
		       left);
	summary(seed, seconds, procs);
	if (sh->broken)
		printf("FIRST BROKEN: %s\n", sh->first_broken);
	return sh->broken || hung >= 0 || left ? 1 : 0;
}
