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
 *
 * main.c: the options and the order of the checks (create.c, names.c,
 * protocol.c, buffers.c, stale.c, fetch.c, lifecycle.c, recovery.c,
 * mmaplock.c, handover.c, zoned.c, map.c, poll.c, race.c); common.c,
 * server.c and zmodel.c hold what they share (badinput.h).
 */

#include "badinput.h"

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

/* The checks that take no control fd of their own, in their order. */
static const struct {
	const char *name;
	void (*run)(void);
} checks[] = {
	{ "connect_rules", check_connect_rules },
	{ "live_roundtrip", check_live_roundtrip },
	{ "features", check_features },
	{ "poll_queues", check_poll_queues },
	{ "polled_lifecycle", check_polled_lifecycle },
	{ "protocol", check_protocol },
	{ "no_data", check_no_data },
	{ "names", check_names },
	{ "buffer_faults", check_buffer_faults },
	{ "stale_completions", check_stale_completions },
	{ "complete_fetch", check_complete_fetch },
	{ "cf_last_fput", check_cf_last_fput },
	{ "timeout", check_timeout },
	{ "kill_on_close", check_kill_on_close },
	{ "dying_daemon_disk_open", check_dying_daemon_disk_open },
	{ "destroy_stuck_daemon", check_destroy_stuck_daemon },
	{ "owner_close", check_owner_close },
	{ "destroy_when_live", check_destroy_when_live },
	{ "recovery", check_recovery },
	{ "recovery_timeout", check_recovery_timeout },
	{ "recovery_destroy", check_recovery_destroy },
	{ "zoned_recovery", check_zoned_recovery },
	{ "map_recovery", check_map_recovery },
	{ "mmap_lock_holder", check_mmap_lock_holder },
	{ "owner_handover", check_owner_handover },
	{ "lost_while_stopping", check_lost_while_stopping },
	{ "zoned_recovery_lost", check_zoned_recovery_lost },
	{ "stuck_reader", check_stuck_reader },
	{ "stranded_completion", check_stranded_completion },
	{ "zoned_recovery_failed", check_zoned_recovery_failed },
	{ "zoned", check_zoned },
	{ "zoned_append_emulated", check_zoned_append_emulated },
	{ "zoned_append", check_zoned_append },	/* --zonefs-append */
	{ "zoned_death", check_zoned_death },
	{ "map", check_map },
};

/* Is @name in the comma-separated list @only (NULL: every check)? */
static int selected(const char *only, const char *name)
{
	size_t len = strlen(name);
	const char *p = only;

	if (!only)
		return 1;
	while ((p = strstr(p, name))) {
		if ((p == only || p[-1] == ',') && (!p[len] || p[len] == ','))
			return 1;
		p += len;
	}
	return 0;
}

static void usage(const char *prog)
{
	unsigned int i;

	fprintf(stderr,
		"usage: %s [--race ROUNDS] [--seed N] [--zonefs-append] [--only CHECK,...]\n"
		"  default: every check, then 8 race rounds\n"
		"  --race: only ROUNDS race rounds\n"
		"  --zonefs-append: also ZONE_APPEND through zonefs\n"
		"    (not by default: Debian's 6.1 zonefs fails its\n"
		"    own landing-sector check and logs a WARNING,\n"
		"    on zoned null_blk as well)\n"
		"  --only: only these checks (and no race rounds): create",
		prog);
	for (i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		fprintf(stderr, ",%s%s", i % 6 == 5 ? "\n    " : "",
			checks[i].name);
	fprintf(stderr, "\n");
}

int main(int argc, char **argv)
{
	struct bius_device_list l = { 0 };
	unsigned int rounds = 8, seed = (unsigned int)time(NULL), i;
	const char *only = NULL;
	int ctl, only_race = 0, zonefs_append = 0;

	for (i = 1; i < (unsigned int)argc; i++) {
		if (!strcmp(argv[i], "--zonefs-append")) {
			zonefs_append = 1;
		} else if (!strcmp(argv[i], "--race") && i + 1 < (unsigned int)argc) {
			rounds = atoi(argv[++i]);
			only_race = 1;
		} else if (!strcmp(argv[i], "--seed") && i + 1 < (unsigned int)argc) {
			seed = strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--only") && i + 1 < (unsigned int)argc) {
			only = argv[++i];
			rounds = 0;
		} else {
			usage(argv[0]);
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
	if (!only_race && selected(only, "create")) {
		check_basics(ctl);
		check_create_refusals(ctl);
		check_duplicate_name(ctl);
		check_squatted_name(ctl);
		check_capability();
		check_zoned_create(ctl);
	}
	close(ctl);

	for (i = 0; !only_race && i < sizeof(checks) / sizeof(checks[0]); i++)
		if (selected(only, checks[i].name) &&
		    (checks[i].run != check_zoned_append || zonefs_append))
			checks[i].run();
	if (rounds)
		check_races(rounds, seed);
	check_no_leftovers(l.count);

	alarm(0);
	summary_and_exit();
	return 0;
}
