// SPDX-License-Identifier: GPL-2.0
/*
 * bius_mkzonefs: a minimal zonefs formatter for the VM tests (Debian
 * bookworm does not package zonefs-tools).
 *
 *   bius_mkzonefs [-L LABEL] DEVICE
 *
 * Resets every sequential zone that is not empty, then writes the 4096-byte
 * zonefs super block (struct zonefs_sb and its checksum: tests/include/
 * bius_zonefs.h) at sector 0 of the first zone, which must be
 * conventional.  No feature flags: files get uid/gid 0 and mode 0640, one
 * file per zone.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/blkzoned.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "bius_zonefs.h"

static void die(const char *what)
{
	fprintf(stderr, "bius_mkzonefs: %s: %s\n", what, strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	const char *label = "bius", *dev;
	struct blk_zone_report *rep;
	unsigned int nr_zones = 0, nr_reset = 0, nr_seq = 0, i;
	unsigned long long sector = 0, size;
	struct zonefs_sb *sb;
	int fd, opt;

	while ((opt = getopt(argc, argv, "L:")) != -1) {
		if (opt != 'L')
			goto usage;
		label = optarg;
	}
	if (optind != argc - 1 || strlen(label) >= sizeof(sb->label))
		goto usage;
	dev = argv[optind];

	fd = open(dev, O_RDWR | O_EXCL | O_DIRECT);
	if (fd < 0)
		die(dev);
	if (ioctl(fd, BLKGETSIZE64, &size) < 0)
		die("BLKGETSIZE64");
	size >>= 9;
	rep = calloc(1, sizeof(*rep) + 64 * sizeof(struct blk_zone));
	if (!rep)
		die("calloc");

	while (sector < size) {
		rep->sector = sector;
		rep->nr_zones = 64;
		if (ioctl(fd, BLKREPORTZONE, rep) < 0)
			die("BLKREPORTZONE (not a zoned device?)");
		if (!rep->nr_zones)
			break;
		for (i = 0; i < rep->nr_zones; i++) {
			struct blk_zone *z = &rep->zones[i];

			if (nr_zones == 0 && z->type != BLK_ZONE_TYPE_CONVENTIONAL) {
				fprintf(stderr, "bius_mkzonefs: %s: the first zone must be conventional\n", dev);
				return 1;
			}
			if (z->type != BLK_ZONE_TYPE_CONVENTIONAL) {
				nr_seq++;
				if (z->cond != BLK_ZONE_COND_EMPTY) {
					struct blk_zone_range r = { z->start, z->len };

					if (ioctl(fd, BLKRESETZONE, &r) < 0)
						die("BLKRESETZONE");
					nr_reset++;
				}
			}
			nr_zones++;
			sector = z->start + z->len;
		}
	}

	if (posix_memalign((void **)&sb, ZONEFS_SUPER_SIZE, ZONEFS_SUPER_SIZE))
		die("posix_memalign");
	memset(sb, 0, ZONEFS_SUPER_SIZE);
	sb->magic = htole32(ZONEFS_MAGIC);
	strcpy(sb->label, label);
	{
		int r = open("/dev/urandom", O_RDONLY);

		if (r < 0 || read(r, sb->uuid, sizeof(sb->uuid)) != sizeof(sb->uuid))
			die("/dev/urandom");
		close(r);
	}
	sb->uuid[6] = (sb->uuid[6] & 0x0f) | 0x40;	/* version 4 */
	sb->uuid[8] = (sb->uuid[8] & 0x3f) | 0x80;
	sb->crc = htole32(zonefs_sb_crc(sb));

	if (pwrite(fd, sb, ZONEFS_SUPER_SIZE, 0) != ZONEFS_SUPER_SIZE)
		die("writing the super block");
	if (fsync(fd) < 0)
		die("fsync");
	printf("%s: %u zones (%u sequential, %u reset), super block crc 0x%08x\n",
	       dev, nr_zones, nr_seq, nr_reset, le32toh(sb->crc));
	return 0;
usage:
	fprintf(stderr, "usage: bius_mkzonefs [-L LABEL] DEVICE\n");
	return 2;
}
