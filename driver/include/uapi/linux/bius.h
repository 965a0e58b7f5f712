/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * BIUS - Block device In UserSpace: the user/kernel ABI.
 *
 * This header is the single definition of the ABI.  The kernel module
 * includes it and the Rust crate bius-sys generates its bindings from it.
 *
 * Overview
 * --------
 * A daemon opens the misc device /dev/bius and issues BIUS_IOC_CREATE_DEVICE
 * with struct bius_device_params; the kernel answers with a device id.  Then
 * one file descriptor per hardware queue (each a separate open of /dev/bius,
 * normally one per worker thread) issues BIUS_IOC_CONNECT for its queue.  Once
 * every queue is connected the kernel adds the disk (asynchronously: poll
 * BIUS_IOC_GET_INFO until state is BIUS_STATE_LIVE to learn when it is up).
 *
 * Request stream (read() on a connected fd)
 * -----------------------------------------
 * read() returns a byte stream of records.  Each record is a
 * struct bius_request header, followed by hdr.nr_segments struct
 * bius_segment records (mapped requests only, see "Data window"; never
 * split from the header), followed, for BIUS_OP_WRITE and
 * BIUS_OP_ZONE_APPEND only and unless BIUS_REQ_MAPPED is set, by exactly
 * hdr.len bytes of write payload (none with BIUS_REQ_NO_DATA either).
 * One read() may return several records.
 * A payload that does not fit in the caller's buffer is continued by the
 * next read() calls (which then return only payload bytes until that
 * payload is complete); a header is never split.  The buffer given to read()
 * must hold at least one header (else EINVAL).  read() blocks until a
 * request is available unless the fd is O_NONBLOCK (then EAGAIN); poll()
 * reports EPOLLIN when read() would return data.  read() returns 0 (end of
 * file) once the device has been stopped and no request will ever come.
 * If a request times out while its payload is partly delivered, the rest
 * of the payload still comes, as zero bytes, so that the stream stays
 * framed; its completion is then refused (ENOENT).
 *
 * Completion stream (write() on a connected fd)
 * ---------------------------------------------
 * write() takes one or more records, each a struct bius_completion followed
 * by exactly comp.len payload bytes.  comp.len must be hdr.len for a
 * successful BIUS_OP_READ that is neither mapped (see "Data window" below)
 * nor BIUS_REQ_NO_DATA (see "No data"),
 * the reported bytes for a successful
 * BIUS_OP_REPORT_ZONES, and 0 in every other case.  A record may not be
 * split across write() calls.  Records are processed in order; if record k
 * is refused, write() returns the byte count of the records before it, or,
 * if k is the first, -1 with errno:
 *   EINVAL  malformed record (truncated, wrong payload length, result not
 *           0 and not a negated errno, sector set for other than a
 *           successful ZONE_APPEND, a reported zone or an append sector
 *           that the checks under BIUS_OP_REPORT_ZONES refuse)
 *   EXDEV   the id belongs to another hardware queue
 *   ENOENT  unknown id: never issued, already completed, or timed out
 *   ENOTCONN the fd is not connected;  ENODEV the device is stopped
 *
 * Request ids are unique 64-bit values chosen by the kernel; user space
 * must treat them as opaque.
 *
 * Completing and fetching in one call (BIUS_IOC_COMPLETE_FETCH)
 * --------------------------------------------------------------
 * ioctl(fd, BIUS_IOC_COMPLETE_FETCH, &cf) on a connected fd is a write()
 * of the cf.completions_len bytes at cf.completions followed by a read()
 * into the cf.requests_len bytes at cf.requests, in one system call (one
 * user/kernel crossing instead of two): the records and their rules are
 * the two streams' above.  It returns what that read() returns (bytes of
 * the request stream, 0 at end of file) and sets cf.completed to the
 * bytes of completion records taken, whatever the outcome.  With
 * cf.completions_len 0 it is exactly read().  Otherwise, if a completion
 * record is refused (the write() errnos above, or EFAULT), the call fails
 * with that errno without reading, cf.completed the bytes of the records
 * before it (taken, as a short write() count tells).  The read honours
 * O_NONBLOCK (EAGAIN) and the device's poll_usecs as read() does.  A
 * signal while the read waits ends the call with EINTR once completions
 * were taken (cf.completed tells so; they cannot be taken again, so the
 * call is never restarted), else as it ends read().  So does a completion
 * that leaves the kernel work to do on the calling thread's way back to
 * user space (ending a request released the last reference to a file,
 * such as an AIO's whose fd was closed while it was in flight: the disk
 * is closed then): the read does not wait, and the call ends with EINTR
 * if no request is there.  Refused before
 * anything is taken (cf.completed 0): EFAULT the argument cannot be read
 * and written, or a buffer is not user memory; EINVAL flags or reserved
 * not zero, or cf.requests_len less than one request header; ENOTCONN
 * the fd is not connected; EBADF the fd is not open for both reading and
 * writing.  A module older than the call fails it with ENOTTY: use
 * write() and read() then.
 *
 * Data window (BIUS_TRANSFER_MAP and BIUS_TRANSFER_SELECTIVE)
 * -----------------------------------------------------------
 * In these modes the data of READ, WRITE and ZONE_APPEND requests can
 * travel through a window instead of the streams.  A connected fd may be
 * mmap()ed once: MAP_SHARED, PROT_READ | PROT_WRITE, offset 0, exactly
 * info.map_window_bytes long (BIUS_IOC_GET_INFO).  The window has one slot
 * of info.map_slot_bytes per tag of the queue (queue_depth slots; a slot
 * is BIUS_MAP_SLOT_BYTES(max_io_bytes, page size): max_io_bytes rounded
 * up to whole pages, plus one page).  Refusals: ENOTCONN (fd not
 * connected), EINVAL (device in copy mode, offset not 0, wrong length, not
 * MAP_SHARED, or not both readable and writable), EBUSY (this fd was
 * mapped before), ENOMEM.
 *
 * A request whose data is in the window ("mapped") has BIUS_REQ_MAPPED in
 * hdr.flags.  If hdr.nr_segments is 0, its hdr.len data bytes are
 * contiguous at hdr.window_offset in the window, inside the request's
 * slot.  Otherwise the data is in 2..BIUS_MAP_MAX_SEGMENTS pieces
 * inside the slot, in the order of the data, each described by one of the
 * hdr.nr_segments struct bius_segment records that follow the header in
 * the stream (hdr.window_offset is then the first one's): the kernel lays
 * out a request whose buffer segments are not aligned to each other (e.g.
 * an O_DIRECT readv of several buffers at different page offsets) so that
 * every whole page of the buffer is mapped, not copied, and gives the
 * daemon the list.  Only READ and WRITE are ever segmented.  A request
 * whose segment records would not fit in the rest of the read() buffer is
 * sent as in copy mode.  No payload follows a mapped
 * WRITE or ZONE_APPEND in the request stream, and a successful mapped READ
 * completes with comp.len 0: the daemon has written the data into the
 * window.  The kernel maps the pages of the I/O buffer itself (no copy)
 * from the read() that returns the header until the completion is
 * accepted; then the range is unmapped again (the TLB is flushed for that
 * range only).  If the request times out or the device stops first, the
 * range maps a scratch page instead (shared by such ranges, zero at first;
 * what the daemon writes there goes nowhere) until the tag's next mapped
 * request, so that a daemon still working on it does not fault.  A mapped
 * READ's buffer shows its previous contents until the daemon writes it
 * (the caller's buffer, or a new page-cache page).  WRITE and
 * ZONE_APPEND data is mapped read-only: writing it raises SIGBUS.  Every
 * page of the window not mapped for an outstanding request (idle) shows
 * the zero page, read-only: it reads as zeroes, and writing it raises
 * SIGBUS.  A page of the window that the data does not cover whole (a
 * buffer segment starting or ending inside a page) is a spare page
 * instead: the kernel zeroes it and copies the data in (WRITE,
 * ZONE_APPEND: at read()) or out (READ: at a successful completion), so
 * that the daemon never sees or changes memory outside the request's
 * data.  The window has BIUS_MAP_SPARE_PAGES spare pages per slot, shared
 * by its requests; a request takes at most 2 * BIUS_MAP_MAX_SEGMENTS.  A
 * request that would need more spare pages than that or than are free,
 * more segments, or more room than its slot, one read() while the
 * daemon's address space is being changed (mmap(), munmap(), a thread's
 * start: read() does not wait for its mmap_lock), and every request while
 * the window is not mapped, is sent as in copy mode (no BIUS_REQ_MAPPED,
 * hdr.window_offset 0): daemons handle both.  In
 * BIUS_TRANSFER_SELECTIVE only requests of at least map_threshold bytes are
 * mapped.  REPORT_ZONES always uses the streams.
 *
 * No data (BIUS_FEATURE_NO_DATA)
 * ------------------------------
 * A device that keeps no data (a null device, a timing model without
 * storage) asks for none to move: every READ, WRITE and ZONE_APPEND
 * request then has BIUS_REQ_NO_DATA in hdr.flags, no payload follows it in
 * the request stream, none of it is mapped (whatever transfer_mode says),
 * and a successful READ completes with comp.len 0, leaving the caller's
 * buffer as it was (as null_blk does without memory_backed).  The daemon
 * sees only where the data would be (sector, len).
 *
 * Lifecycle
 * ---------
 * A device's state (BIUS_STATE_*, GET_INFO) moves only along these arrows,
 * each one function of the driver (bius_dev.c):
 *
 *   CREATED    -> LIVE        every queue connected, zones read, disk added
 *   LIVE       -> RECOVERING  daemon lost, with recover_timeout_ms set
 *   RECOVERING -> LIVE        RECOVER_DEVICE, then every queue connected
 *                             again and (zoned) every zone read again
 *   CREATED, LIVE, RECOVERING -> STOPPING
 *                             DESTROY_DEVICE; daemon lost without
 *                             recovery; recovery timeout; failed add
 *   STOPPING   -> DEAD        disk removed; gone when its last fd closes
 *
 * "Daemon lost" is the close of the fd that created (or recovered) the
 * device or of any fd connected to one of its queues, e.g. because the
 * daemon died.  Without recovery every queued and in-flight request then
 * fails with an I/O error, the disk is removed, and read() on the remaining
 * connections returns 0.
 * A graceful DESTROY first removes the disk while the queues are still
 * served (so dirty data is flushed through the daemon), then ends the
 * connections; a RECOVERING device whose queues are not all connected
 * again has no daemon to serve it, so DESTROY fails its held requests at
 * once.  Requests not completed within timeout_ms fail with a timeout
 * error.
 *
 * Recovery (recover_timeout_ms > 0)
 * ---------------------------------
 * When such a device loses its daemon while LIVE, it becomes RECOVERING
 * and keeps its disk: nothing fails, new requests wait in the block layer,
 * and the requests the daemon held are taken back: queued ones as they
 * were, ones already read (in flight) to be sent again with
 * BIUS_REQ_REPLAY.  The other fds of the lost daemon are disconnected:
 * read() returns 0, write() fails with ENODEV, poll() reports EPOLLHUP,
 * and their windows keep mapping scratch pages.  A new daemon then issues
 * BIUS_IOC_RECOVER_DEVICE with the parameters it serves the device with
 * (dev_id the device): they must describe the same device, every field
 * equal to what GET_INFO reports once defaults are applied, except name
 * (may be "") and poll_usecs (the new daemon's applies).  That fd becomes the device's owner; then one
 * fd per queue CONNECTs and may mmap a window again, exactly as after
 * CREATE_DEVICE.  Once every queue is connected the held requests go out
 * to the new daemon, replayed ones first, and the kernel then reads every
 * zone of a zoned device again; once that report passes the zone checks
 * the device is LIVE.  Until then GET_INFO says RECOVERING although the
 * new daemon serves I/O (the zone report itself may be among the held
 * requests, so the zone check cannot gate them); a report the checks
 * refuse ends the device (STOPPING), and what the new daemon completed
 * before stands.  If the recovering fd or a new connection is closed
 * before LIVE, the device waits for another RECOVER_DEVICE.
 * The recovery timeout runs from the loss of the daemon to LIVE, whatever
 * happens between; when it ends the device is STOPPING, as without
 * recovery.  It is at most BIUS_MAX_RECOVER_TIMEOUT_MS.  A request may
 * wait up to timeout_ms for its daemon, then be held for a recovery and
 * replayed, once per recovery: a task waiting on it (write-back) trips the
 * kernel's hung-task warning (120 s by default) when timeout_ms plus
 * recover_timeout_ms, or a chain of recoveries, outlasts it.
 * RECOVER_DEVICE refusals: EPERM without CAP_SYS_ADMIN; ENODEV no such
 * device, or it is STOPPING or DEAD; EBUSY the device is not RECOVERING
 * (CREATED or LIVE), or another fd's recovery of it is under way; EINVAL
 * the parameters are malformed or describe another device; EISCONN this fd
 * is connected to a queue.
 * A replayed request may or may not have been applied by the lost daemon.
 * READ, FLUSH, DISCARD, WRITE_ZEROES and WRITE outside sequential zones do
 * the same when applied twice.  A replayed WRITE to a sequential zone was
 * applied if the zone's write pointer is past its end (then it succeeds
 * without being applied again), is applied if the write pointer is at its
 * start, and fails with -EIO otherwise; a replayed ZONE_APPEND cannot be
 * told from a new one and fails with -EIO (the bius framework does both).
 * A daemon is replaced on purpose the same way: it stops and closes its fds
 * (the device waits), and its successor recovers the device.
 *
 * Poll queues (nr_poll_queues > 0)
 * --------------------------------
 * Of the nr_hw_queues hardware queues, the last nr_poll_queues form the
 * block layer's poll map (HCTX_TYPE_POLL) and the others its default map.
 * Only polled I/O goes to a poll queue: io_uring with IORING_SETUP_IOPOLL
 * (fio --hipri) on O_DIRECT files, whose submitter spins for its
 * completions instead of sleeping on them; the disk then shows
 * queue/io_poll 1.  The daemon serves a poll queue exactly as the others
 * (CONNECT, read(), write(), the data window, recovery).  Only the end of
 * a request differs: a completion that write() accepts for a request of a
 * poll queue is not ended there but put on the queue's done list, and the
 * submitter's poll takes it off the list and ends it (in its own context,
 * in batches).  write() takes such a completion as any other: refusals
 * and the accounting are the same, and a second completion for the id
 * is refused (ENOENT).  A completed request waits on the done list for its
 * poller only: if the device stops or dies meanwhile it ends with its
 * daemon's result, and a recovery leaves it there (it is not replayed);
 * if no one polls it within timeout_ms it ends, from the timeout
 * handler, with its daemon's result too.
 */
#ifndef _UAPI_LINUX_BIUS_H
#define _UAPI_LINUX_BIUS_H

#include <linux/blkzoned.h>
#include <linux/ioctl.h>
#include <linux/types.h>

/* Version of this ABI; struct bius_device_params.abi_version must match. */
#define BIUS_ABI_VERSION	1

/* Length of device names, including the terminating NUL. */
#define BIUS_NAME_LEN		32

/* Limits of struct bius_device_params. */
#define BIUS_MAX_HW_QUEUES	64
#define BIUS_MAX_QUEUE_DEPTH	4096
#define BIUS_MAX_IO_BYTES	(8U << 20)
#define BIUS_DEFAULT_MAX_IO_BYTES (1U << 20)
#define BIUS_DEFAULT_TIMEOUT_MS	30000
/*
 * A request not completed within timeout_ms fails; at most 90 s, so that a
 * task waiting for a stuck daemon's I/O never trips the kernel's hung-task
 * warning (120 s by default), as for recovery.
 */
#define BIUS_MAX_TIMEOUT_MS	90000
#define BIUS_MAX_RECOVER_TIMEOUT_MS 90000	/* see "Recovery" */
/*
 * The largest device: 4 EiB, far beyond any real one, and small enough that
 * no byte offset plus length overflows a signed 64-bit file offset.
 */
#define BIUS_MAX_SIZE		(1ULL << 62)

/* struct bius_device_params.features */
#define BIUS_FEATURE_WRITE_CACHE	(1ULL << 0) /* volatile cache: FLUSH */
#define BIUS_FEATURE_FUA		(1ULL << 1) /* forced unit access */
#define BIUS_FEATURE_DISCARD		(1ULL << 2)
#define BIUS_FEATURE_WRITE_ZEROES	(1ULL << 3)
#define BIUS_FEATURE_READ_ONLY		(1ULL << 4)
#define BIUS_FEATURE_ROTATIONAL		(1ULL << 5)
#define BIUS_FEATURE_ZONED		(1ULL << 6) /* host-managed, see below */
#define BIUS_FEATURE_NO_DATA		(1ULL << 7) /* see "No data" */
#define BIUS_FEATURE_ZONE_APPEND_EMULATED (1ULL << 8) /* zoned, see below */
#define BIUS_FEATURES_ALL		((1ULL << 9) - 1)

/* struct bius_device_params.transfer_mode, see "Data window" above */
#define BIUS_TRANSFER_COPY	0	/* payload travels through read()/write() */
#define BIUS_TRANSFER_MAP	1	/* data mapped into the window */
#define BIUS_TRANSFER_SELECTIVE	2	/* mapped if len >= map_threshold */
#define BIUS_DEFAULT_MAP_THRESHOLD (128U << 10)

/*
 * struct bius_device_params.poll_usecs: a read() that finds no request
 * busy-waits up to this long for one before it sleeps, while its thread
 * is the only runnable task on its CPU.  It saves the sleep and wake-up
 * (two context switches) per request when requests follow each other
 * closely, at the price of CPU time spent waiting.
 */
#define BIUS_MAX_POLL_USECS	1000

/*
 * Spare pages of a data window per slot (shared by the window's requests),
 * for window pages the data does not cover whole.
 */
#define BIUS_MAP_SPARE_PAGES	2

/* Most pieces the data of a mapped request comes in (struct bius_segment). */
#define BIUS_MAP_MAX_SEGMENTS	16

/* Bytes of one window slot for a page size of ps bytes. */
#define BIUS_MAP_SLOT_BYTES(max_io_bytes, ps) \
	((((max_io_bytes) + (ps) - 1) / (ps) + 1) * (ps))

/*
 * Zone geometry of a BIUS_FEATURE_ZONED device (all zero otherwise).
 * The device is host managed: nr_conv_zones leading conventional zones,
 * then sequential-write-required zones; the last zone may be smaller if
 * size is not a multiple of zone_size.  Limits follow null_blk: a limit
 * of at least the number of sequential zones means "no limit", and
 * max_open_zones is lowered to max_active_zones.  Sizes are multiples of
 * logical_block_size.  A device has at most BIUS_MAX_ZONES zones: the
 * block layer keeps per-zone bitmaps in one allocation each, which must
 * stay far below the largest the page allocator serves (4 MiB, 2^25
 * zones).  GET_INFO reports the values with the defaults applied and the
 * limits normalised.
 *
 * BIUS_FEATURE_ZONE_APPEND_EMULATED (with BIUS_FEATURE_ZONED only): the
 * device takes no ZONE_APPEND requests.  The kernel's zone write plugging
 * turns every zone append into a WRITE at the zone's write pointer and
 * completes the append with that sector, so the daemon sees only WRITEs
 * (one at a time per zone); a ZONE_APPEND that reaches the driver anyway
 * fails with BLK_STS_NOTSUPP.  max_append_bytes must be 0 and stays 0
 * (GET_INFO reports 0; the disk's queue/zone_append_max_bytes then shows
 * the block layer's limit for emulated appends, the zone size or the
 * largest I/O if smaller).  Needs Linux 6.10 or newer: on older kernels
 * CREATE_DEVICE refuses it with EOPNOTSUPP.
 */
#define BIUS_MAX_ZONES		(1U << 22)

struct bius_zoned_params {
	__u64 zone_size;		/* bytes, power of two, >= 2 blocks, */
					/* <= size, < 2 TiB */
	__u64 zone_capacity;		/* bytes, <= zone_size; 0 = zone_size */
	__u32 nr_conv_zones;		/* < number of zones */
	__u32 max_open_zones;		/* 0 = no limit */
	__u32 max_active_zones;		/* 0 = no limit */
	__u32 max_append_bytes;		/* <= max_io_bytes, <= zone_size; */
					/* 0 = the smaller of the two; */
					/* 0 with ZONE_APPEND_EMULATED */
};

/*
 * Parameters of CREATE_DEVICE.  Zero means "default" where a default is
 * named.  Reserved fields must be zero.  GET_INFO reports them with the
 * defaults applied.  Every queue must be connected, but blk-mq uses at most
 * one hardware queue per possible CPU: queues beyond that never receive
 * requests.  The name is the disk's: CREATE_DEVICE fails with EEXIST if a
 * BIUS device that is not DEAD or any other block device (a disk or a
 * partition, e.g. "sda" or "loop0") has it.
 */
struct bius_device_params {
	__u32 abi_version;		/* in: BIUS_ABI_VERSION */
	__u32 dev_id;			/* out: id of the new device */
	__u64 size;			/* bytes, multiple of logical_block_size, */
					/* <= BIUS_MAX_SIZE */
	__u32 logical_block_size;	/* 512..4096, power of two */
	__u32 physical_block_size;	/* 0 = logical; >= logical, pow2, <= 64K */
	__u32 nr_hw_queues;		/* 1..BIUS_MAX_HW_QUEUES */
	__u32 queue_depth;		/* 1..BIUS_MAX_QUEUE_DEPTH */
	__u32 max_io_bytes;		/* 0 = default; multiple of lbs, */
					/* page size..BIUS_MAX_IO_BYTES */
	__u32 timeout_ms;		/* 0 = BIUS_DEFAULT_TIMEOUT_MS; */
					/* <= BIUS_MAX_TIMEOUT_MS */
	__u64 features;			/* BIUS_FEATURE_* */
	__u32 transfer_mode;		/* BIUS_TRANSFER_* */
	__u32 map_threshold;		/* SELECTIVE: bytes, <= max_io_bytes; */
					/* 0 = BIUS_DEFAULT_MAP_THRESHOLD or */
					/* max_io_bytes if smaller; else 0 */
	char name[BIUS_NAME_LEN];	/* "" = "bius<dev_id>"; [A-Za-z0-9_-] */
	struct bius_zoned_params zoned;	/* with BIUS_FEATURE_ZONED only */
	__u32 poll_usecs;		/* read() busy-waits up to this long */
					/* for a request before sleeping; */
					/* 0 = never; <= BIUS_MAX_POLL_USECS */
	__u32 recover_timeout_ms;	/* 0 = no recovery: the disk dies */
					/* with its daemon; else at most */
					/* BIUS_MAX_RECOVER_TIMEOUT_MS */
	__u32 nr_poll_queues;		/* the last ones of nr_hw_queues, */
					/* polled: see "Poll queues"; */
					/* 0 = none; < nr_hw_queues */
	__u32 reserved0;
	__u64 reserved[2];
};

/* BIUS_IOC_CONNECT: bind this fd to one hardware queue of a device. */
struct bius_connect {
	__u32 dev_id;
	__u32 queue;			/* 0..nr_hw_queues-1 */
	__u64 reserved;
};

/* BIUS_IOC_DESTROY_DEVICE */
/*
 * Remove even if the disk is open.  The removal is still graceful: the
 * daemon serves the disk's last I/O (held requests complete, not fail).
 * A daemon that no longer serves is ended by killing it: its requests then
 * fail at once (see "Recovery").  A removal waits for a daemon only while
 * it answers: once a request times out during a removal (forced or not),
 * the rest of the disk's I/O fails at once.
 */
#define BIUS_DESTROY_FORCE	(1U << 0)

struct bius_destroy {
	__u32 dev_id;
	__u32 flags;			/* BIUS_DESTROY_* */
};

/* struct bius_device_info.state */
#define BIUS_STATE_CREATED	0	/* waiting for all queues to connect */
#define BIUS_STATE_LIVE		1	/* disk added and serving */
#define BIUS_STATE_STOPPING	2	/* being removed */
#define BIUS_STATE_DEAD		3	/* removed; waiting for fds to close */
#define BIUS_STATE_RECOVERING	4	/* daemon lost; disk kept, I/O held */
					/* until RECOVER_DEVICE or timeout */

/* BIUS_IOC_GET_INFO: in: dev_id; out: everything else. */
struct bius_device_info {
	__u32 dev_id;
	__u32 state;			/* BIUS_STATE_* */
	__u32 nr_connected;		/* queues connected */
	__s32 owner_pid;		/* tgid of the creating process */
	char disk_name[BIUS_NAME_LEN];	/* "" until the disk is added */
	struct bius_device_params params;
	__u64 map_window_bytes;		/* size of the window to mmap; */
					/* 0 in copy mode */
	__u32 map_slot_bytes;		/* bytes per tag in the window */
	__u32 reserved0;
	__u64 mapped_requests;		/* sent mapped, since creation */
	__u64 segmented_requests;	/* of those, with a segment list */
};

/*
 * BIUS_IOC_LIST_DEVICES: in: capacity and ids (user pointer to
 * __u32[capacity]); out: count = number of devices (may exceed capacity:
 * only the first capacity ids are written).
 */
struct bius_device_list {
	__u32 capacity;
	__u32 count;
	__u64 ids;
};

/* struct bius_request.op */
#define BIUS_OP_READ		0
#define BIUS_OP_WRITE		1
#define BIUS_OP_FLUSH		2
#define BIUS_OP_DISCARD		3
#define BIUS_OP_WRITE_ZEROES	4
/*
 * Zoned devices only.  REPORT_ZONES: sector is the start of the first
 * zone to report (never past the last zone), len the room (bytes, a
 * multiple of sizeof(struct blk_zone)); a successful completion carries
 * len = n * sizeof(struct blk_zone) bytes of struct blk_zone
 * (<linux/blkzoned.h>, sectors), the 1 <= n <= room consecutive zones from
 * that one on; the kernel asks again for the rest.  Each zone must be
 * exactly as the geometry says: start, len (the zone size, the last zone
 * maybe less), type (CONVENTIONAL for the first nr_conv_zones, then
 * SEQWRITE_REQ), capacity (len for a conventional zone, else the smaller
 * of zone_capacity and len); cond NOT_WP for a conventional zone, else
 * one of EMPTY, IMP_OPEN, EXP_OPEN, CLOSED, FULL, READONLY, OFFLINE; wp
 * the zone start if EMPTY, below start + capacity if open or closed, and
 * for a zone without one (NOT_WP, FULL, READONLY, OFFLINE) inside
 * start..start + len or all ones; reserved bytes zero.  The kernel sends
 * it while it adds the disk (the disk goes live only after the daemon has
 * reported every zone) and for BLKREPORTZONE.
 * ZONE_OPEN/CLOSE/FINISH/RESET: sector is the zone start, len 0.
 * ZONE_RESET_ALL: sector 0, len 0.  ZONE_APPEND: sector is the zone start
 * and a payload follows as for WRITE; a successful completion gives in
 * comp.sector the first sector written, a multiple of the logical block
 * size with the data inside the zone's capacity.  Zone errors are
 * returned as -ETOOMANYREFS (open resources exceeded), -EOVERFLOW (active
 * resources exceeded) or -EIO (invalid zone state or write position), so
 * that user space sees what it sees on null_blk.
 */
#define BIUS_OP_REPORT_ZONES	5
#define BIUS_OP_ZONE_OPEN	6
#define BIUS_OP_ZONE_CLOSE	7
#define BIUS_OP_ZONE_FINISH	8
#define BIUS_OP_ZONE_APPEND	9
#define BIUS_OP_ZONE_RESET	10
#define BIUS_OP_ZONE_RESET_ALL	11

/* struct bius_request.flags */
#define BIUS_REQ_FUA		(1U << 0) /* WRITE, ZONE_APPEND: durable */
					  /* before completion */
#define BIUS_REQ_NOUNMAP	(1U << 1) /* WRITE_ZEROES: keep space allocated */
#define BIUS_REQ_MAPPED		(1U << 2) /* data at window_offset in the */
					  /* window, not in the streams */
#define BIUS_REQ_REPLAY		(1U << 3) /* sent before to a daemon that */
					  /* was lost: see "Recovery" */
#define BIUS_REQ_NO_DATA	(1U << 4) /* READ, WRITE, ZONE_APPEND of a */
					  /* BIUS_FEATURE_NO_DATA device: */
					  /* no data travels, see "No data" */

/* One request, as read() returns it. */
struct bius_request {
	__u64 id;			/* opaque, unique while outstanding */
	__u64 sector;			/* start, in 512-byte sectors */
	__u32 len;			/* bytes (0 for FLUSH) */
	__u8 op;			/* BIUS_OP_* */
	__u8 nr_segments;		/* struct bius_segment records that */
					/* follow: 0, or 2..MAX_SEGMENTS */
	__u16 flags;			/* BIUS_REQ_* */
	__u64 window_offset;		/* BIUS_REQ_MAPPED: where the data is */
					/* (its first segment) in the window; */
					/* else 0 */
};

/*
 * One piece of the data of a mapped request with hdr.nr_segments > 0; the
 * pieces' lengths add up to hdr.len.
 */
struct bius_segment {
	__u64 window_offset;		/* inside the request's slot */
	__u32 len;			/* bytes, > 0, a multiple of 512 */
	__u32 reserved;			/* 0 */
};

/*
 * One completion, as write() takes it; comp.len payload bytes follow.  A
 * result ends the I/O with the errno a disk gives for it: EIO, EOPNOTSUPP,
 * ETIMEDOUT, ENOSPC, ENOLINK, EREMOTEIO, ENODATA, EILSEQ and ENODEV as
 * themselves, EINVAL too where the kernel has BLK_STS_INVAL (6.12; EIO on
 * 6.1), ETOOMANYREFS and EOVERFLOW on a zoned device, EAGAIN for I/O
 * submitted not to wait (RWF_NOWAIT); any other errno as EIO.
 */
struct bius_completion {
	__u64 id;			/* from struct bius_request */
	__s32 result;			/* 0 or -errno (see above) */
	__u32 len;			/* payload bytes following */
	__u64 sector;			/* ZONE_APPEND: where the data went; */
					/* else 0 */
};

/* BIUS_IOC_COMPLETE_FETCH, see "Completing and fetching in one call". */
struct bius_complete_fetch {
	__u64 completions;		/* user pointer: completion records */
	__u32 completions_len;		/* bytes at completions; may be 0 */
	__u32 flags;			/* 0 */
	__u64 requests;			/* user pointer: room for requests */
	__u32 requests_len;		/* bytes; >= one struct bius_request */
	__u32 completed;		/* out: completion bytes taken */
	__u64 reserved;			/* 0 */
};

#define BIUS_IOC_MAGIC		0xB1

#define BIUS_IOC_CREATE_DEVICE	_IOWR(BIUS_IOC_MAGIC, 0x00, struct bius_device_params)
#define BIUS_IOC_DESTROY_DEVICE	_IOW(BIUS_IOC_MAGIC, 0x01, struct bius_destroy)
#define BIUS_IOC_CONNECT	_IOW(BIUS_IOC_MAGIC, 0x02, struct bius_connect)
#define BIUS_IOC_GET_INFO	_IOWR(BIUS_IOC_MAGIC, 0x03, struct bius_device_info)
#define BIUS_IOC_LIST_DEVICES	_IOWR(BIUS_IOC_MAGIC, 0x04, struct bius_device_list)
#define BIUS_IOC_RECOVER_DEVICE	_IOW(BIUS_IOC_MAGIC, 0x05, struct bius_device_params)
#define BIUS_IOC_COMPLETE_FETCH	_IOWR(BIUS_IOC_MAGIC, 0x06, struct bius_complete_fetch)

#endif /* _UAPI_LINUX_BIUS_H */
