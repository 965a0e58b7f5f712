// SPDX-License-Identifier: GPL-2.0
/*
 * zoneop: zone operations on a zoned block device, each one timed, for the
 * models suite of the VM benchmark (zone reset and finish latency of a
 * device model; which errno a device's open and active zone limits give).
 *
 *   zoneop DEV OP ZONE [OP ZONE...]
 *
 * OP: write (4 KiB at the zone's write pointer, O_DIRECT), open, close,
 * finish or reset; ZONE: a zone index (0 = first zone).  One line per
 * operation, in order, whatever its outcome:
 *   "zoneop OP ZONE ok NANOSECONDS" or "zoneop OP ZONE err ERRNO NAME NANOSECONDS"
 * Exits 0 unless DEV cannot be used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/blkzoned.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

/* the write pointer of the zone starting at `start`, in sectors */
static int write_pointer(int fd, uint64_t start, uint64_t *wp)
{
	struct {
		struct blk_zone_report report;
		struct blk_zone zone;
	} r;

	memset(&r, 0, sizeof(r));
	r.report.sector = start;
	r.report.nr_zones = 1;
	if (ioctl(fd, BLKREPORTZONE, &r) < 0)
		return -1;
	if (r.report.nr_zones < 1) {
		errno = ERANGE;
		return -1;
	}
	*wp = r.zone.wp;
	return 0;
}

static int do_write(int fd, uint64_t start, void *buf)
{
	uint64_t wp;

	if (write_pointer(fd, start, &wp) < 0)
		return -1;
	return pwrite(fd, buf, 4096, (off_t)(wp * 512)) == 4096 ? 0 : -1;
}

static unsigned long op_ioctl(const char *op)
{
	if (!strcmp(op, "open"))
		return BLKOPENZONE;
	if (!strcmp(op, "close"))
		return BLKCLOSEZONE;
	if (!strcmp(op, "finish"))
		return BLKFINISHZONE;
	if (!strcmp(op, "reset"))
		return BLKRESETZONE;
	return 0;
}

int main(int argc, char **argv)
{
	uint32_t zone_sectors = 0;
	void *buf;
	int fd, i;

	if (argc < 4 || argc % 2) {
		fprintf(stderr, "usage: zoneop DEV OP ZONE [OP ZONE...]\n"
				"OP: write, open, close, finish, reset\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0 || ioctl(fd, BLKGETZONESZ, &zone_sectors) < 0 || !zone_sectors) {
		fprintf(stderr, "zoneop: %s: not a zoned block device: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (posix_memalign(&buf, 4096, 4096))
		return 1;
	memset(buf, 0x5a, 4096);
	for (i = 2; i + 1 < argc; i += 2) {
		const char *op = argv[i];
		uint64_t start = strtoull(argv[i + 1], NULL, 0) * zone_sectors, t0, t1;
		struct blk_zone_range range = { .sector = start, .nr_sectors = zone_sectors };
		unsigned long request = op_ioctl(op);
		int rc, err;

		if (!request && strcmp(op, "write")) {
			fprintf(stderr, "zoneop: unknown operation %s\n", op);
			return 2;
		}
		t0 = now_ns();
		rc = request ? ioctl(fd, request, &range) : do_write(fd, start, buf);
		err = errno;
		t1 = now_ns();
		if (rc == 0)
			printf("zoneop %s %s ok %llu\n", op, argv[i + 1], (unsigned long long)(t1 - t0));
		else
			printf("zoneop %s %s err %d %s %llu\n", op, argv[i + 1], err,
			       strerrorname_np(err) ?: "?", (unsigned long long)(t1 - t0));
		fflush(stdout);
	}
	close(fd);
	return 0;
}
