// SPDX-License-Identifier: GPL-2.0
/*
 * bius_badinput: CREATE_DEVICE parameter refusals, the basic ioctl
 * refusals, CAP_SYS_ADMIN, duplicate and squatted names and the connection
 * rules of a device not yet live.
 */

#include "badinput.h"

/* ---- the checks --------------------------------------------------------- */

static const char *const create_cases[] = {
	"create: size 0",
	"create: size not a multiple of lbs",
	"create: lbs 1000",
	"create: lbs 8192",
	"create: lbs 256",
	"create: pbs 3000",
	"create: pbs below lbs",
	"create: pbs 128K",
	"create: queues 0",
	"create: queues 65",
	"create: depth 0",
	"create: depth 4097",
	"create: max_io 16M",
	"create: max_io below lbs",
	"create: max_io not a multiple of lbs",
	"create: unknown feature bit 40",
	"create: zoned without a zone size",
	"create: unknown transfer_mode",
	"create: map_threshold in copy mode",
	"create: reserved[1] non-zero",
	"create: abi_version 0",
	"create: abi_version 2",
	"create: name with space",
	"create: name with slash",
	"create: unterminated name",
	"create: poll_usecs above BIUS_MAX_POLL_USECS",
	"create: recover_timeout_ms above BIUS_MAX_RECOVER_TIMEOUT_MS",
	"create: reserved0 non-zero",
	"create: poll queues = queues (none left for the default map)",
	"create: poll queues above queues",
	"create: poll queues with 1 queue",
	"create: size above BIUS_MAX_SIZE",
	"create: size 2^64 - 4096",
	"create: timeout_ms above BIUS_MAX_TIMEOUT_MS",
	"create: timeout_ms 2^32 - 1",
	"create: zones of 2 blocks, more than BIUS_MAX_ZONES of them",
};

/* Make create_cases[i] out of valid parameters. */
static void create_case(unsigned int i, struct bius_device_params *p)
{
	switch (i) {
	case 0: p->size = 0; break;
	case 1: p->size = 4 * MiB + 512; break;
	case 2: p->logical_block_size = 1000; break;
	case 3: p->logical_block_size = 8192; break;
	case 4: p->logical_block_size = 256; break;
	case 5: p->physical_block_size = 3000; break;
	case 6: p->physical_block_size = 512; break;
	case 7: p->physical_block_size = 128 * KiB; break;
	case 8: p->nr_hw_queues = 0; break;
	case 9: p->nr_hw_queues = BIUS_MAX_HW_QUEUES + 1; break;
	case 10: p->queue_depth = 0; break;
	case 11: p->queue_depth = BIUS_MAX_QUEUE_DEPTH + 1; break;
	case 12: p->max_io_bytes = 16 * MiB; break;
	case 13: p->max_io_bytes = 2048; break;
	case 14: p->max_io_bytes = 64 * KiB + 512; break;
	case 15: p->features = 1ULL << 40; break;
	case 16: p->features = 1ULL << 6; break;
	case 17: p->transfer_mode = 7; break;
	case 18: p->map_threshold = 4096; break;
	case 19: p->reserved[1] = 1; break;
	case 20: p->abi_version = 0; break;
	case 21: p->abi_version = BIUS_ABI_VERSION + 1; break;
	case 22: strcpy(p->name, "a b"); break;
	case 23: strcpy(p->name, "a/b"); break;
	case 24: memset(p->name, 'x', BIUS_NAME_LEN); break;
	case 25: p->poll_usecs = BIUS_MAX_POLL_USECS + 1; break;
	case 26: p->recover_timeout_ms = BIUS_MAX_RECOVER_TIMEOUT_MS + 1; break;
	case 27: p->reserved0 = 1; break;
	case 28: p->nr_hw_queues = 2; p->nr_poll_queues = 2; break;
	case 29: p->nr_hw_queues = 2; p->nr_poll_queues = 3; break;
	case 30: p->nr_poll_queues = 1; break;
	case 31: p->size = BIUS_MAX_SIZE + 4096; break;
	case 32: p->size = -4096ULL; break;
	case 33: p->timeout_ms = BIUS_MAX_TIMEOUT_MS + 1; break;
	case 34: p->timeout_ms = UINT32_MAX; break;
	case 35:
		p->features = BIUS_FEATURE_ZONED;
		p->zoned.zone_size = 8 * KiB;
		p->size = (BIUS_MAX_ZONES + 1ULL) * 8 * KiB;
		break;
	}
}

void check_create_refusals(int ctl)
{
	struct bius_device_params p;
	unsigned int i;
	int r;

	for (i = 0; i < sizeof(create_cases) / sizeof(create_cases[0]); i++) {
		current_check = create_cases[i];
		params_default(&p, NULL);
		create_case(i, &p);
		r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
		expect_errno(create_cases[i], r, errno, EINVAL);
		if (r == 0)
			do_destroy(ctl, p.dev_id, BIUS_DESTROY_FORCE);
	}
}

void check_basics(int ctl)
{
	struct bius_device_info info;
	struct stat st;
	char buf[64];
	int r;

	r = stat(CTL_PATH, &st);
	expect_true("control node is mode 0600", r == 0 &&
		    (st.st_mode & 0777) == 0600, "mode %o",
		    r ? 0 : st.st_mode & 0777);
	r = ioctl(ctl, _IO(BIUS_IOC_MAGIC, 0x7f));
	expect_errno("unknown ioctl", r, errno, ENOTTY);
	r = get_info(ctl, 0x7ffffff0, &info);
	expect_errno("GET_INFO unknown device", r, errno, ENODEV);
	r = do_destroy(ctl, 0x7ffffff0, 0);
	expect_errno("DESTROY unknown device", r, errno, ENODEV);
	r = do_connect(ctl, 0x7ffffff0, 0);
	expect_errno("CONNECT unknown device", r, errno, ENODEV);
	r = read(ctl, buf, sizeof(buf));
	expect_errno("read on unconnected fd", r, errno, ENOTCONN);
	memset(buf, 0, sizeof(buf));
	r = write(ctl, buf, CMP);
	expect_errno("write on unconnected fd", r, errno, ENOTCONN);
}

void check_capability(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		struct bius_device_params p;
		int fd = open(CTL_PATH, O_RDWR);

		params_default(&p, NULL);
		if (fd < 0 || drop_sys_admin())
			_exit(2);
		if (ioctl(fd, BIUS_IOC_CREATE_DEVICE, &p) == 0)
			_exit(3);
		_exit(errno == EPERM ? 0 : 4);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		not_ok("CREATE without CAP_SYS_ADMIN", "fork failed");
	else
		expect_true("CREATE without CAP_SYS_ADMIN", WIFEXITED(status) &&
			    WEXITSTATUS(status) == 0, "child status %d",
			    status);
}

void check_duplicate_name(int ctl)
{
	struct bius_device_params p, q;
	int r;

	params_default(&p, "bi-dup_1");
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
	if (r) {
		not_ok("create: duplicate name", "first create: %s",
		       strerror(errno));
		return;
	}
	params_default(&q, "bi-dup_1");
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &q);
	expect_errno("create: duplicate name", r, errno, EEXIST);
	if (r == 0)
		do_destroy(ctl, q.dev_id, 0);
	r = do_destroy(ctl, p.dev_id, 0);
	expect_true("destroy of a CREATED device", r == 0, "%s",
		    strerror(errno));
}

/*
 * The name of another block device (a disk or partition not BIUS's, e.g.
 * the ram disk badinput.sh loads) is refused, with no trace in the kernel
 * log of a second disk of that name.
 */
void check_squatted_name(int ctl)
{
	struct bius_device_params p;
	struct dirent *e;
	DIR *dir = opendir("/sys/class/block");
	int r;

	params_default(&p, NULL);
	while (dir && (e = readdir(dir)))
		if (e->d_name[0] != '.' && strncmp(e->d_name, "bi", 2) &&
		    strlen(e->d_name) < BIUS_NAME_LEN)
			break;
	if (!dir || !e) {
		/* its wrapper (badinput.sh) loads brd for one */
		skip("create: the name of another block device",
		     "no block device but BIUS's in /sys/class/block");
		if (dir)
			closedir(dir);
		return;
	}
	memcpy(p.name, e->d_name, strlen(e->d_name) + 1);
	closedir(dir);
	r = ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p);
	expect_errno("create: the name of another block device", r, errno,
		     EEXIST);
	if (r == 0)
		do_destroy(ctl, p.dev_id, BIUS_DESTROY_FORCE);
}

/* Connection rules, GET_INFO and LIST_DEVICES on a device not yet live. */
void check_connect_rules(void)
{
	struct bius_device_params p;
	struct bius_device_info info;
	struct bius_device_list list;
	uint32_t ids[64];
	int ctl = ctl_open(), a, b, r, found = 0;
	unsigned char buf[256];
	uint32_t i, id;

	watchdog("connect rules", 60);
	params_default(&p, NULL);
	p.nr_hw_queues = 2;
	p.physical_block_size = 0;
	p.max_io_bytes = 0;
	if (ioctl(ctl, BIUS_IOC_CREATE_DEVICE, &p)) {
		not_ok("connect rules", "create: %s", strerror(errno));
		close(ctl);
		return;
	}
	id = p.dev_id;
	a = open(CTL_PATH, O_RDWR);
	b = open(CTL_PATH, O_RDWR);

	r = do_connect(a, id, 2);
	expect_errno("CONNECT queue out of range", r, errno, EINVAL);
	r = do_connect(a, id, 0);
	expect_true("CONNECT queue 0", r == 0, "%s", strerror(errno));
	r = do_connect(b, id, 0);
	expect_errno("CONNECT same queue twice", r, errno, EBUSY);
	r = do_connect(a, id, 1);
	expect_errno("CONNECT an fd twice", r, errno, EISCONN);
	r = read(a, buf, HDR - 1);
	expect_errno("read buffer smaller than a header", r, errno, EINVAL);
	fcntl(a, F_SETFL, O_NONBLOCK);
	r = read(a, buf, sizeof(buf));
	expect_errno("O_NONBLOCK read with nothing queued", r, errno, EAGAIN);
	fcntl(a, F_SETFL, 0);
	memset(buf, 0, sizeof(buf));
	r = write(a, buf, 10);
	expect_errno("truncated completion record", r, errno, EINVAL);

	r = get_info(ctl, id, &info);
	expect_true("GET_INFO of a CREATED device", r == 0 &&
		    info.dev_id == id && info.state == BIUS_STATE_CREATED &&
		    info.nr_connected == 1 && info.disk_name[0] == 0 &&
		    info.owner_pid == getpid() &&
		    info.params.size == p.size &&
		    info.params.logical_block_size == 4096 &&
		    info.params.physical_block_size == 4096 &&
		    info.params.nr_hw_queues == 2 &&
		    info.params.queue_depth == 16 &&
		    info.params.max_io_bytes == BIUS_DEFAULT_MAX_IO_BYTES &&
		    info.params.timeout_ms == BIUS_DEFAULT_TIMEOUT_MS &&
		    info.params.dev_id == id,
		    "r=%d state=%u nr_connected=%u pid=%d name=%s pbs=%u max_io=%u timeout=%u",
		    r, info.state, info.nr_connected, info.owner_pid,
		    info.params.name, info.params.physical_block_size,
		    info.params.max_io_bytes, info.params.timeout_ms);
	{
		char want[BIUS_NAME_LEN];

		snprintf(want, sizeof(want), "bius%u", id);
		expect_true("default name is bius<id>",
			    !strcmp(info.params.name, want), "name '%s'",
			    info.params.name);
	}

	memset(&list, 0, sizeof(list));
	list.capacity = 64;
	list.ids = (uintptr_t)ids;
	r = ioctl(ctl, BIUS_IOC_LIST_DEVICES, &list);
	for (i = 0; r == 0 && i < list.count && i < 64; i++)
		found |= ids[i] == id;
	expect_true("LIST_DEVICES lists the device", r == 0 && found &&
		    list.count >= 1, "r=%d count=%u found=%d", r, list.count,
		    found);
	memset(&list, 0, sizeof(list));
	r = ioctl(ctl, BIUS_IOC_LIST_DEVICES, &list);
	expect_true("LIST_DEVICES with capacity 0 counts", r == 0 &&
		    list.count >= 1, "r=%d count=%u", r, list.count);

	r = do_destroy(ctl, id, 0);
	expect_true("DESTROY a CREATED device with a connection", r == 0,
		    "%s", strerror(errno));
	r = read(a, buf, sizeof(buf));
	expect_true("read after DESTROY is end of file", r == 0,
		    "r=%d errno=%s", r, strerror(errno));
	{
		struct pollfd pfd = { .fd = a, .events = POLLIN };

		r = poll(&pfd, 1, 0);
		expect_true("poll after DESTROY reports EPOLLHUP", r == 1 &&
			    (pfd.revents & POLLHUP), "r=%d revents=%x", r,
			    pfd.revents);
	}
	r = write(a, buf, CMP);
	expect_errno("write after DESTROY", r, errno, ENODEV);
	r = state_of(ctl, id);
	expect_true("destroyed device is DEAD while fds are open",
		    r == BIUS_STATE_DEAD, "state %d", r);
	r = do_connect(b, id, 1);
	expect_errno("CONNECT to a destroyed device", r, errno, ENODEV);
	r = do_destroy(ctl, id, 0);
	expect_errno("DESTROY a destroyed device", r, errno, ENODEV);
	close(a);
	close(b);
	close(ctl);
	ctl = ctl_open();
	r = get_info(ctl, id, &info);
	expect_errno("GET_INFO of a destroyed device", r, errno, ENODEV);
	r = do_connect(ctl, id, 0);
	expect_errno("CONNECT to a freed device", r, errno, ENODEV);
	close(ctl);
}
