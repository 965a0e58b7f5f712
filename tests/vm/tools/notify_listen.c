// SPDX-License-Identifier: GPL-2.0
/*
 * notify_listen: a stand-in for systemd's notification socket, for the cli
 * VM test.
 *
 *   notify_listen SOCKET [FILE]
 *
 * Binds a Unix datagram socket at SOCKET (removing a stale one first) and
 * prints each datagram received, as it came (the sd_notify assignments,
 * one per line), followed by "exists FILE: yes" or "exists FILE: no" (was
 * FILE there when the datagram arrived?) if FILE is given, and a line
 * "--".  Output is flushed after each datagram.  Runs until killed.
 *
 * Exit status: 1 if the socket cannot be set up or a receive fails.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char buf[4096];
	struct stat st;
	ssize_t len;
	int fd;

	if (argc < 2 || argc > 3 || strlen(argv[1]) >= sizeof(addr.sun_path)) {
		fprintf(stderr, "usage: notify_listen SOCKET [FILE]\n");
		return 1;
	}
	strcpy(addr.sun_path, argv[1]);
	unlink(argv[1]);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("notify_listen: socket");
		return 1;
	}
	for (;;) {
		len = recv(fd, buf, sizeof(buf) - 1, 0);
		if (len < 0) {
			perror("notify_listen: recv");
			return 1;
		}
		buf[len] = '\0';
		fputs(buf, stdout);
		if (len > 0 && buf[len - 1] != '\n')
			putchar('\n');
		if (argc == 3)
			printf("exists %s: %s\n", argv[2],
			       stat(argv[2], &st) == 0 ? "yes" : "no");
		puts("--");
		fflush(stdout);
	}
}
