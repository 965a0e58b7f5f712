/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The clock of the test programs (tests/badinput, tests/fuzz and the
 * shared headers): milliseconds of CLOCK_MONOTONIC, and a sleep in them.
 */
#ifndef BIUS_TESTS_CLOCK_H
#define BIUS_TESTS_CLOCK_H

#include <time.h>

static inline long bius_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static inline void bius_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

#endif /* BIUS_TESTS_CLOCK_H */
