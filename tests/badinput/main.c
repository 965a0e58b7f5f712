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
 * main.c: the options and the order of the checks (create.c, protocol.c,
 * fetch.c, lifecycle.c, zoned.c, map.c, race.c); common.c, server.c and zmodel.c
 * hold what they share (badinput.h).
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
		check_poll_queues();
		check_polled_lifecycle();
		check_protocol();
		check_no_data();
		check_complete_fetch();
		check_timeout();
		check_kill_on_close();
		check_owner_close();
		check_recovery();
		check_recovery_timeout();
		check_recovery_destroy();
		check_zoned_recovery();
		check_map_recovery();
		check_zoned();
		check_zoned_append_emulated();
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
