// SPDX-License-Identifier: GPL-2.0
/*
 * nbd_hostile: an NBD server that negotiates correctly and then breaks the
 * protocol on purpose, for the VM test nbd-hostile.
 *
 *   nbd_hostile SOCKET MODE [SIZE]
 *
 * Listens on the unix socket SOCKET (serving one client at a time, until
 * killed), offers a fixed newstyle handshake with structured replies and
 * NBD_OPT_GO, an export of SIZE bytes (default 64 MiB) that reads as
 * zeroes, and answers every request until the first READ correctly.  The
 * first READ is answered as MODE says:
 *
 *   bad-magic     a simple reply with a wrong magic number
 *   wrong-handle  a simple reply for a handle never sent
 *   short-read    the reply header and half the data, then the socket closes
 *   oversize      a structured data chunk longer than the request
 *   error-length  a structured error chunk whose message overruns the chunk
 *
 * After misbehaving (but for short-read) it keeps the socket open and
 * silent, so that the client must notice by itself.
 */
#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define NBDMAGIC		0x4e42444d41474943ULL
#define IHAVEOPT		0x49484156454f5054ULL
#define REPLY_MAGIC_OPT		0x3e889045565a9ULL
#define REQUEST_MAGIC		0x25609513U
#define SIMPLE_REPLY_MAGIC	0x67446698U
#define STRUCTURED_REPLY_MAGIC	0x668e33efU

#define FLAG_FIXED_NEWSTYLE	1
#define FLAG_NO_ZEROES		2
#define OPT_EXPORT_NAME		1
#define OPT_GO			7
#define OPT_STRUCTURED_REPLY	8
#define REP_ACK			1
#define REP_INFO		3
#define REP_ERR_UNSUP		0x80000001U
#define INFO_EXPORT		0
#define TFLAG_HAS_FLAGS		1
#define TFLAG_SEND_FLUSH	4
#define CMD_READ		0
#define CMD_WRITE		1
#define CMD_DISC		2
#define REPLY_FLAG_DONE		1
#define REPLY_TYPE_OFFSET_DATA	1
#define REPLY_TYPE_ERROR	32769

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))

static const char *mode;
static uint64_t export_size = 64ULL << 20;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* 0 on success, -1 if the peer went away. */
static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= n;
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= n;
	}
	return 0;
}

static int put64(int fd, uint64_t v)
{
	v = htobe64(v);
	return write_all(fd, &v, 8);
}

static int put32(int fd, uint32_t v)
{
	v = htobe32(v);
	return write_all(fd, &v, 4);
}

static int put16(int fd, uint16_t v)
{
	v = htobe16(v);
	return write_all(fd, &v, 2);
}

static int option_reply(int fd, uint32_t opt, uint32_t type, uint32_t len)
{
	if (put64(fd, REPLY_MAGIC_OPT) || put32(fd, opt) || put32(fd, type))
		return -1;
	return put32(fd, len);
}

/* The export's size and flags, as NBD_INFO_EXPORT has them. */
static int send_export_info(int fd, uint32_t opt)
{
	if (option_reply(fd, opt, REP_INFO, 12) || put16(fd, INFO_EXPORT))
		return -1;
	if (put64(fd, export_size))
		return -1;
	return put16(fd, TFLAG_HAS_FLAGS | TFLAG_SEND_FLUSH);
}

/* The handshake; 1 if transmission starts, 0 if the client left. */
static int handshake(int fd, int *structured)
{
	uint32_t client_flags;

	if (put64(fd, NBDMAGIC) || put64(fd, IHAVEOPT) ||
	    put16(fd, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))
		return 0;
	if (read_all(fd, &client_flags, 4))
		return 0;
	for (;;) {
		uint64_t magic;
		uint32_t opt, len;
		char data[4096];

		if (read_all(fd, &magic, 8) || read_all(fd, &opt, 4) ||
		    read_all(fd, &len, 4))
			return 0;
		opt = be32toh(opt);
		len = be32toh(len);
		if (be64toh(magic) != IHAVEOPT || len > sizeof(data))
			return 0;
		if (read_all(fd, data, len))
			return 0;
		switch (opt) {
		case OPT_STRUCTURED_REPLY:
			*structured = 1;
			if (option_reply(fd, opt, REP_ACK, 0))
				return 0;
			break;
		case OPT_GO:
			if (send_export_info(fd, opt) ||
			    option_reply(fd, opt, REP_ACK, 0))
				return 0;
			return 1;
		case OPT_EXPORT_NAME:
			if (put64(fd, export_size) ||
			    put16(fd, TFLAG_HAS_FLAGS | TFLAG_SEND_FLUSH))
				return 0;
			return 1;
		default:
			if (option_reply(fd, opt, REP_ERR_UNSUP, 0))
				return 0;
		}
	}
}

static int simple_reply(int fd, uint32_t magic, uint64_t handle,
			uint32_t error)
{
	if (put32(fd, magic) || put32(fd, error))
		return -1;
	return write_all(fd, &handle, 8);	/* as the client sent it */
}

static int chunk_header(int fd, uint16_t flags, uint16_t type,
			uint64_t handle, uint32_t len)
{
	if (put32(fd, STRUCTURED_REPLY_MAGIC) || put16(fd, flags) ||
	    put16(fd, type) || write_all(fd, &handle, 8))
		return -1;
	return put32(fd, len);
}

/* A correct answer to a READ of len bytes at offset: zeroes. */
static int answer_read(int fd, int structured, uint64_t handle,
		       uint64_t offset, const char *zeroes, uint32_t len)
{
	if (!structured)
		return simple_reply(fd, SIMPLE_REPLY_MAGIC, handle, 0) ||
		       write_all(fd, zeroes, len);
	return chunk_header(fd, REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA,
			    handle, 8 + len) ||
	       put64(fd, offset) || write_all(fd, zeroes, len);
}

/* The broken answer to the first READ; 1 to close the socket after it. */
static int misbehave(int fd, int structured, uint64_t handle, uint64_t offset,
		     const char *zeroes, uint32_t len)
{
	if (!strcmp(mode, "bad-magic"))
		return simple_reply(fd, 0xdeadbeef, handle, 0) ? 1 : 0;
	if (!strcmp(mode, "wrong-handle"))
		return simple_reply(fd, SIMPLE_REPLY_MAGIC, handle ^ 0x5a5a, 0) ?
		       1 : 0;
	if (!strcmp(mode, "short-read")) {
		/* the header of the whole answer, half the data, the end */
		if (structured) {
			chunk_header(fd, REPLY_FLAG_DONE,
				     REPLY_TYPE_OFFSET_DATA, handle, 8 + len);
			put64(fd, offset);
		} else {
			simple_reply(fd, SIMPLE_REPLY_MAGIC, handle, 0);
		}
		write_all(fd, zeroes, len / 2);
		return 1;
	}
	if (!strcmp(mode, "oversize")) {
		chunk_header(fd, REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA,
			     handle, 8 + len + 4096);
		put64(fd, offset);
		return write_all(fd, zeroes, len) ? 1 : 0;
	}
	/* error-length: a message length beyond the chunk */
	chunk_header(fd, REPLY_FLAG_DONE, REPLY_TYPE_ERROR, handle, 6);
	put32(fd, 5);			/* EIO */
	put16(fd, 1000);		/* message bytes, more than remain */
	return 0;
}

static void serve(int fd)
{
	static char zeroes[32 << 20];
	int structured = 0, misbehaved = 0;

	if (!handshake(fd, &structured))
		return;
	for (;;) {
		uint32_t magic, len;
		uint16_t flags, type;
		uint64_t handle, offset;

		if (read_all(fd, &magic, 4) || read_all(fd, &flags, 2) ||
		    read_all(fd, &type, 2) || read_all(fd, &handle, 8) ||
		    read_all(fd, &offset, 8) || read_all(fd, &len, 4))
			return;
		type = be16toh(type);
		offset = be64toh(offset);
		len = be32toh(len);
		if (be32toh(magic) != REQUEST_MAGIC || len > sizeof(zeroes))
			return;
		if (type == CMD_DISC)
			return;
		if (type == CMD_WRITE && read_all(fd, zeroes, len))
			return;
		if (type == CMD_WRITE)
			memset(zeroes, 0, len);
		if (misbehaved)
			continue;	/* silent from now on */
		if (type != CMD_READ) {
			if (simple_reply(fd, SIMPLE_REPLY_MAGIC, handle, 0))
				return;
			continue;
		}
		if (!strcmp(mode, "none")) {
			if (answer_read(fd, structured, handle, offset, zeroes,
					len))
				return;
			continue;
		}
		misbehaved = 1;
		if (misbehave(fd, structured, handle, offset, zeroes, len))
			return;
	}
}

int main(int argc, char **argv)
{
	static const char *const modes[] = {
		"bad-magic", "wrong-handle", "short-read", "oversize",
		"error-length", "none",
	};
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	size_t i;
	int lfd;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s SOCKET MODE [SIZE]\n", argv[0]);
		return 2;
	}
	mode = argv[2];
	for (i = 0; i < ARRAY_SIZE(modes); i++)
		if (!strcmp(mode, modes[i]))
			break;
	if (i == ARRAY_SIZE(modes)) {
		fprintf(stderr, "%s: unknown mode %s\n", argv[0], mode);
		return 2;
	}
	if (argc == 4)
		export_size = strtoull(argv[3], NULL, 0);
	signal(SIGPIPE, SIG_IGN);
	if (strlen(argv[1]) >= sizeof(addr.sun_path)) {
		fprintf(stderr, "%s: socket path too long\n", argv[0]);
		return 2;
	}
	strcpy(addr.sun_path, argv[1]);
	unlink(argv[1]);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) || listen(lfd, 4))
		die(argv[1]);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			die("accept");
		}
		serve(fd);
		close(fd);
	}
}
