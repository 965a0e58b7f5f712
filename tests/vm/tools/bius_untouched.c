// SPDX-License-Identifier: GPL-2.0
/*
 * bius_untouched: check that a device moves no data (BIUS_FEATURE_NO_DATA),
 * for the transfer-modes VM test.
 *
 *   bius_untouched DEVICE
 *
 * For each of 4 KiB and 256 KiB: O_DIRECT writes a buffer of 0xab bytes at
 * offset 0, then reads offset 0 into a buffer filled with 0xcd, which must
 * still hold only 0xcd: the kernel neither copied nor mapped data into it
 * (a copy or a mapping the daemon filled would change it).  Prints one
 * line per size.
 *
 * Exit status: 0 if every buffer was left as it was, 1 otherwise or if a
 * call fails.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Is @buf @len bytes of @byte?  Prints the first other byte if not. */
static int all_bytes(const unsigned char *buf, size_t len, int byte)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (buf[i] != byte) {
			printf("byte %zu is %#x, not %#x\n", i, buf[i], byte);
			return 0;
		}
	}
	return 1;
}

static int check(int fd, size_t len)
{
	unsigned char *buf;
	int ok;

	if (posix_memalign((void **)&buf, 4096, len)) {
		perror("bius_untouched: posix_memalign");
		return 0;
	}
	memset(buf, 0xab, len);
	if (pwrite(fd, buf, len, 0) != (ssize_t)len) {
		perror("bius_untouched: pwrite");
		free(buf);
		return 0;
	}
	memset(buf, 0xcd, len);
	if (pread(fd, buf, len, 0) != (ssize_t)len) {
		perror("bius_untouched: pread");
		free(buf);
		return 0;
	}
	ok = all_bytes(buf, len, 0xcd);
	printf("%zu-byte read: buffer %s\n", len, ok ? "untouched" : "changed");
	free(buf);
	return ok;
}

int main(int argc, char **argv)
{
	int fd, ok;

	if (argc != 2) {
		fprintf(stderr, "usage: bius_untouched DEVICE\n");
		return 1;
	}
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0) {
		perror("bius_untouched: open");
		return 1;
	}
	ok = check(fd, 4096) & check(fd, 256 << 10);
	close(fd);
	return ok ? 0 : 1;
}
