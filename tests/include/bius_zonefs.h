/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The zonefs super block, for the test programs that format zonefs
 * themselves (tests/badinput, tests/vm/tools/bius_mkzonefs): Debian
 * bookworm does not package zonefs-tools.  Layout: struct zonefs_super of
 * the kernel's fs/zonefs/zonefs.h, little endian, 4096 bytes, at sector 0
 * of the first (conventional) zone.
 */
#ifndef BIUS_TESTS_ZONEFS_H
#define BIUS_TESTS_ZONEFS_H

#include <stddef.h>
#include <stdint.h>

#define ZONEFS_MAGIC 0x5a4f4653u	/* "ZOFS", <linux/magic.h> */
#define ZONEFS_SUPER_SIZE 4096

struct zonefs_sb {
	uint32_t magic;
	uint32_t crc;
	char label[64];
	uint8_t uuid[16];
	uint64_t features;
	uint32_t uid;
	uint32_t gid;
	uint32_t perm;
	uint8_t reserved[3988];
} __attribute__((packed));

_Static_assert(sizeof(struct zonefs_sb) == ZONEFS_SUPER_SIZE, "zonefs super block size");

/*
 * zonefs_sb_crc: the checksum the kernel's zonefs_read_super() verifies,
 * in CPU byte order: the reflected CRC-32 (polynomial 0xEDB88320) of the
 * whole block with crc zeroed, seeded with ~0 and not inverted at the end
 * (the kernel's crc32(~0, ...)).  sb->crc must be 0 when it is called.
 */
static inline uint32_t zonefs_sb_crc(const struct zonefs_sb *sb)
{
	const uint8_t *p = (const uint8_t *)sb;
	size_t n = sizeof(*sb);
	uint32_t crc = ~0u;
	int k;

	while (n--) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xEDB88320u & -(crc & 1));
	}
	return crc;
}

#endif /* BIUS_TESTS_ZONEFS_H */
