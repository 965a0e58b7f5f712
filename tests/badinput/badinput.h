/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the files of bius_badinput share: the includes, constants, the
 * served test device (struct srv, struct tdev) and its zone model, the
 * I/O thread job, and the helpers and checks defined in one file and
 * used in another (main.c runs the checks).
 */
#ifndef BADINPUT_H
#define BADINPUT_H

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/aio_abi.h>
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/userfaultfd.h>
#include <linux/bius.h>

#define CTL_PATH	"/dev/bius"
#define KiB		1024u
#define MiB		(1024u * 1024u)
#define MAX_QUEUES	4
#define HDR		sizeof(struct bius_request)
#define CMP		sizeof(struct bius_completion)

#define ZM_MAX_ZONES	64

/* The zones of a zoned test device, shared by its queues. */
struct zmodel {
	pthread_mutex_t lock;
	unsigned int nr;
	uint64_t zone_sectors;
	struct blk_zone z[ZM_MAX_ZONES];
	int inject;		/* the next zone operation fails with this */
	int last_op;		/* last zone operation: BIUS_OP_*, -1 none */
	uint64_t last_sector;
	int reports;		/* REPORT_ZONES served */
	int appends;		/* ZONE_APPENDs completed successfully */
	int append_probe;	/* first send the next append's bad sectors */
	int probe_err[3];	/* their write() errnos, 0 if accepted */
};

struct srv {
	int fd;			/* connected queue fd */
	int index;
	unsigned char *mem;	/* shared by the queues of a device */
	uint64_t size;
	unsigned char *rbuf;
	size_t rsize;
	unsigned char *wbuf;
	size_t wsize, wlen;
	struct bius_request cur;	/* write whose payload is arriving */
	uint32_t cur_off;
	uint64_t cur_dst;	/* where its payload goes (sector) */
	int in_payload;
	atomic_int served;
	atomic_int replays;	/* requests that came with BIUS_REQ_REPLAY */
	atomic_int protocol_errors;
	pthread_t thread;
	int running;
	int delay_pct;		/* race mode: delay this % of batches */
	int delay_max_ms;
	atomic_int stop;	/* race mode: close the fd and end */
	unsigned int seed;
	struct zmodel *zm;	/* zoned devices only */
	unsigned char *win;	/* map modes: the mmap()ed data window */
	size_t win_len;
};

struct tdev {
	int ctl;
	uint32_t id;
	char name[BIUS_NAME_LEN];
	unsigned int nq;
	unsigned char *mem;
	uint64_t size;
	struct zmodel *zm;	/* zoned devices only */
	struct srv srv[MAX_QUEUES];
};

#define IO_MAX_IOV	16

struct io_job {
	int fd;
	int write;
	struct iovec iov[IO_MAX_IOV];	/* the buffer */
	int iovcnt;
	off_t off;
	int cpu;		/* -1: any */
	ssize_t ret;
	int err;
	atomic_int done;
	pthread_t thread;
};

/* A close() in a thread of its own (close_fd()). */
struct closer {
	int fd;
	atomic_int done;
	pthread_t thread;
};

extern int passed, failed, skipped;
extern const char *volatile current_check;

/* common.c: reports, watchdog, ioctl wrappers, sysfs, I/O threads */
void ok(const char *name);
void skip(const char *name, const char *why);
void __attribute__((format(printf, 2, 3)))
not_ok(const char *name, const char *fmt, ...);
void expect_errno(const char *name, int ret, int err, int want);
void expect_true(const char *name, int cond, const char *fmt, ...);
void summary_and_exit(void);
void on_alarm(int sig);
void watchdog(const char *phase, unsigned int seconds);
long now_ms(void);
void sleep_ms(long ms);
int ctl_open(void);
void params_default(struct bius_device_params *p, const char *name);
int kernel_at_least(int major, int minor);
int drop_sys_admin(void);
int get_info(int ctl, uint32_t id, struct bius_device_info *info);
int do_connect(int fd, uint32_t id, uint32_t queue);
int do_destroy(int ctl, uint32_t id, uint32_t flags);
int state_of(int ctl, uint32_t id);
int sysfs_exists(const char *name);
long sysfs_long(const char *name, const char *attr);
int sysfs_read(const char *name, const char *attr, char *buf, size_t size);
int sysfs_is(const char *name, const char *attr, const char *want);
int disk_open(const char *name, int flags);
void *xalloc(size_t size);
void fill_pattern(unsigned char *buf, size_t len, uint32_t seed);
int wait_flag(atomic_int *flag, long ms);
void *close_fd(void *arg);
void io_start_iov(struct io_job *j, int fd, int write,
		  const struct iovec *iov, int iovcnt, off_t off,
		  int cpu);
void io_start(struct io_job *j, int fd, int write, void *buf,
	      size_t len, off_t off, int cpu);
int io_wait(struct io_job *j, long ms);
ssize_t wait_requests(struct tdev *d, unsigned char *buf, size_t len,
		      unsigned int *queue, long ms);
ssize_t send_completion_sector(int fd, uint64_t id, int result,
			       uint64_t sector, const void *payload,
			       uint32_t len);
ssize_t send_completion(int fd, uint64_t id, int result,
			const void *payload, uint32_t len);

/* server.c: the served in-memory disk */
int srv_flush(struct srv *s);
void srv_complete_at(struct srv *s, uint64_t id, int result,
		     uint64_t sector, const void *payload, uint32_t len);
void srv_complete(struct srv *s, uint64_t id, int result,
		  const void *payload, uint32_t len);
void srv_request(struct srv *s, const struct bius_request *r);
ssize_t srv_serve_once(struct srv *s);
int tdev_join(struct tdev *d, long timeout_ms);
void tdev_close_fds(struct tdev *d);
void tdev_free(struct tdev *d);
int tdev_create(struct tdev *d, struct bius_device_params *p,
		struct zmodel *zm, const char *check);
int tdev_wait_live(struct tdev *d, const char *check);
int tdev_up(struct tdev *d, struct bius_device_params *p, const char *check);
void tdev_serve_in_threads(struct tdev *d);
void tdev_destroy_served(struct tdev *d, int ctl, const char *check);
void tdev_force_down(struct tdev *d);

/* zmodel.c: the zone model */
void zm_init(struct zmodel *zm, const struct bius_device_params *p);
void params_zoned(struct bius_device_params *p, const char *name);
uint64_t zm_append_dst(struct zmodel *zm, const struct bius_request *r);
void srv_zoned_request(struct srv *s, const struct bius_request *r);

/* create.c: checks */
void check_create_refusals(int ctl);
void check_basics(int ctl);
void check_capability(void);
void check_duplicate_name(int ctl);
void check_squatted_name(int ctl);
void check_connect_rules(void);

/* protocol.c: checks */
void check_live_roundtrip(void);
void check_features(void);
void check_poll_queues(void);
void check_polled_lifecycle(void);
void check_protocol(void);
void check_no_data(void);

/* fetch.c: checks */
void check_complete_fetch(void);
void check_cf_last_fput(void);

/* lifecycle.c: checks */
void check_timeout(void);
void check_kill_on_close(void);
void check_dying_daemon_disk_open(void);
void check_destroy_stuck_daemon(void);
void check_owner_close(void);
void check_destroy_when_live(void);

/* zoned.c: checks */
void check_zoned_create(int ctl);
void check_zoned(void);
void check_zoned_death(void);
void check_zoned_append(void);
void check_zoned_append_emulated(void);

/* map.c: checks, and the window of a queue */
int srv_map(struct srv *s, size_t len);
void check_map(void);

/* mapunmap.c: checks (run by check_map()), a microsecond clock */
void check_map_unmap_race(void);
long now_us(void);

/* recovery.c: helpers and checks */
int serve_until_live(struct tdev *d, struct io_job *jobs, unsigned int njobs,
		     long ms);
int recover(int fd, const struct bius_device_params *p);
int reconnect(struct tdev *d);
void check_recovery(void);
void check_recovery_timeout(void);
void check_recovery_destroy(void);
void check_zoned_recovery(void);
void check_map_recovery(void);

/* mmaplock.c: checks */
void check_mmap_lock_holder(void);

/* handover.c: checks */
void check_owner_handover(void);
void check_lost_while_stopping(void);
void check_zoned_recovery_lost(void);
void check_stuck_reader(void);
void check_stranded_completion(void);
void check_zoned_recovery_failed(void);

/* buffers.c, names.c, stale.c: checks */
void check_buffer_faults(void);
void check_names(void);
void check_stale_completions(void);

/* race.c: checks */
void check_races(unsigned int rounds, unsigned int seed);

#endif /* BADINPUT_H */
