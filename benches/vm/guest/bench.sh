#!/bin/bash
# timeout: 7200
# Guest side of scripts/bench.sh (installed as /bius/tests/bench.sh and run
# by the test VM's init as the test "bench").  Suites (knob suites=, all by
# default), all devices alive at once; the repetition loop is the outermost
# so that drift of a noisy host spreads over all devices alike:
#   classic   the same psync jobs, one device after the other, against brd,
#             null_blk, BIUS (ramdisk in every transfer mode biusctl offers,
#             and with biusctl's defaults, bius-ram-default, and, only
#             when named in only=, the same without the combined completion
#             and fetch, bius-ram-default-split; null), ublk
#             (ublk-ram: a libublk RAM server; ublk-null: rublk's null
#             target; ublk-null-nodata: the same with user copy, where
#             ublk_drv has it; when /usr/bin/rublk is there: ublk_drv is
#             /bius/ublk/ublk_drv.ko if bench.sh built one, else the
#             kernel's own module) and an nbdkit RAM disk over NBD; with
#             /usr/bin/biusctl-baseline
#             (BIUS_BENCH_BASELINE) also the ramdisks of that older
#             biusctl, bius-ram-<mode>@base.  Polled I/O: QD1 random read
#             with io_uring, interrupt-style and --hipri, on null_blk
#             (poll_queues=1) and bius-ram-poll (biusctl's defaults with
#             one more queue, a poll queue: --poll-queues 1)
#   inflight  one queue: a ramdisk with --latency read=10ms (bius-q1-lat10ms)
#             and a plain one (bius-q1-ram), libaio 4 KiB randread at
#             iodepth 1 and 32; the kernel's own 10 ms device for
#             reference: null_blk (configfs) irqmode=2 completion_nsec=10ms,
#             one queue (null_blk-lat10ms)
#   file      one prefilled image on ext4 on brd (/dev/ram1) served by the
#             loop driver with direct I/O (loop-dio) and by biusctl create
#             file --direct --engine uring|threads|sync (bius-file-<engine>)
#   nbd       nbd.ko + nbd-client (nbd) and biusctl create nbd (bius-nbd),
#             each on its own nbdkit memory server
#   file and nbd: libaio 4 KiB randread and randwrite at iodepth 1 and 32.
#   zoned     one zoned geometry (SIZE_MB, zones of ZONE_MB, no conventional
#             zones, no open/active limit) on zoned null_blk (configfs,
#             null_blk-zoned), a zoned BIUS ramdisk (bius-zoned) and rublk's
#             zoned RAM target (ublk-zoned; ublk zoned needs Linux >= 6.6:
#             skipped before), the same scheduler on all three (none from
#             6.10 on, zone write plugging; mq-deadline before); psync,
#             --zonemode=zbd, 4 jobs each on its quarter: 128 KiB sequential
#             write (zseqwrite), then every zone finished and 4 KiB random
#             read (zrandread)
#   deep      io_uring at depth, 2 jobs each on its half of the device:
#             4 KiB random read and write at QD 32 and 128, 128 KiB
#             sequential read and write at QD 32, and QD1 4 KiB random
#             read with io_uring (and with psync: the classic suite's lat,
#             run here when classic is not), on null_blk-nodata (the
#             floor: null_blk without data), brd, BIUS (bius-ram-default,
#             bius-null, bius-zero) and ublk (ublk-ram, ublk-null,
#             ublk-null-nodata): but the floor, the devices of the classic
#             suite by those names
#   models    (not in the default set) every device model of biusctl and a
#             custom one against its own numbers, one device at a time:
#             see /bius/bench/models.sh (benches/vm/guest/models.sh)
#
# Results: /results/bench/ (9p): meta.txt, devices.txt, runs.txt (one line
# per fio run: rep job device file), fio/<device>/<job>-r<rep>.json and
# .proc (counters of the run: system-wide context switches, CPU ticks, and
# for daemons their threads' context switches, CPU time and read()/write()
# calls).  Progress lines on the console: BIUS-BENCH ...
#
# Kernel command line knobs (dotted, see init): biusbench.runtime=SECONDS
# biusbench.ramp=SECONDS biusbench.reps=N biusbench.size=MiB
# biusbench.queues=N biusbench.modes=copy,map (default: every mode that
# `biusctl create --help` lists) biusbench.sweep=4k,16k,...
# biusbench.only=dev1,dev2 (device names, for quick runs)
# biusbench.suites=classic,deep,inflight,file,nbd,zoned,models (default:
# all but models; the models suite's own knobs are in models.sh)
# biusbench.zone_size=MiB (the zoned suite's zone size; default 16: 16
# zones of a 256 MiB device)
# biusbench.inflight_runtime=SECONDS (runtime of the 10 ms device's jobs;
# default 8: about 800 I/Os at QD1)
# biusbench.poll=USECS (biusctl create --poll-us for the BIUS devices;
# default 200)
# biusbench.perf=1 (each run under `perf record -a`, flat profile kept as
# <run>.perf.txt; needs perf in the initramfs: scripts/bench.sh -p)
# biusbench.trace=1 (an ftrace window of 0.5 s in each run, after the
# ramp: syscalls of fio, block and bius request events, scheduler
# switches and wake-ups; kept as <run>.trace.txt for benches/vm/timeline.py)
# biusbench.tunables=T|none (GLIBC_TUNABLES for every user-space server,
# BIUS daemons and nbdkit alike; default: no `rep movsb` in memcpy and no
# `rep stosb` in memset, which TCG emulates a byte at a time: 0.5 GB/s
# against 3.4 GB/s for vector copies, see benches/README.md)
source /bius/lib.sh
source /bius/bench/models.sh
set +e	# a failing run or device is recorded and skipped, not fatal
set -u

RUNTIME=3 RAMP=1 REPS=3 SIZE_MB=256 QUEUES=$(nproc) MODES="" ONLY="" TUNABLES=glibc.cpu.x86_rep_movsb_threshold=4294967295:glibc.cpu.x86_rep_stosb_threshold=4294967295 PERF=0 TRACE=0 POLL=200
SUITES="classic deep inflight file nbd zoned" INF_RUNTIME=8 INF_LATENCY=10ms ZONE_MB=16
SWEEP="4k 16k 64k 256k 1m 4m"
for w in $(cat /proc/cmdline); do
	case $w in
	biusbench.runtime=*) RUNTIME=${w#*=} ;;
	biusbench.ramp=*) RAMP=${w#*=} ;;
	biusbench.reps=*) REPS=${w#*=} ;;
	biusbench.size=*) SIZE_MB=${w#*=} ;;
	biusbench.queues=*) QUEUES=${w#*=} ;;
	biusbench.modes=*) MODES=${w#*=}; MODES=${MODES//,/ } ;;
	biusbench.sweep=*) SWEEP=${w#*=}; SWEEP=${SWEEP//,/ } ;;
	biusbench.only=*) ONLY=${w#*=}; ONLY=${ONLY//,/ } ;;
	biusbench.tunables=*) TUNABLES=${w#*=}; [[ $TUNABLES == none ]] && TUNABLES="" ;;
	biusbench.perf=*) PERF=${w#*=} ;;
	biusbench.trace=*) TRACE=${w#*=} ;;
	biusbench.poll=*) POLL=${w#*=} ;;
	biusbench.suites=*) SUITES=${w#*=}; SUITES=${SUITES//,/ } ;;
	biusbench.inflight_runtime=*) INF_RUNTIME=${w#*=} ;;
	biusbench.zone_size=*) ZONE_MB=${w#*=} ;;
	esac
done
SIZE=$((SIZE_MB << 20))
INF_MB=$((SIZE_MB < 64 ? SIZE_MB : 64))	# the in-flight devices: 64 MiB at most
BASE=/usr/bin/biusctl-baseline
OUT=/results/bench
mkdir -p "$OUT/fio"
: >"$OUT/runs.txt"
: >"$OUT/devices.txt"

say() { echo "BIUS-BENCH $*" >/dev/console; echo "== $*"; }
suite() { [[ " $SUITES " == *" $1 "* ]]; }

# --- transfer modes --------------------------------------------------------
help=$(biusctl create --help 2>&1)
if [[ $help == *--transfer* ]]; then
	transfer_flag=1
	if [[ -z $MODES ]]; then
		for m in copy map selective; do
			grep -A6 -- '--transfer' <<<"$help" | grep -qw "$m" && MODES+="$m "
		done
	fi
else
	transfer_flag=0
	MODES=copy
fi
MODES=$(echo $MODES)
[[ -n $MODES ]] || MODES=copy
# the baseline biusctl: which of the modes it has, and --poll-us
BASE_MODES="" base_transfer=0 base_poll=0
if [[ -x $BASE ]] && suite classic; then
	bhelp=$($BASE create --help 2>&1)
	[[ $bhelp == *--poll-us* ]] && base_poll=1
	if [[ $bhelp == *--transfer* ]]; then
		base_transfer=1
		for m in $MODES; do
			grep -A6 -- '--transfer' <<<"$bhelp" | grep -qw "$m" && BASE_MODES+="$m "
		done
	else
		BASE_MODES=copy
	fi
	BASE_MODES=$(echo $BASE_MODES)
fi

{
	echo "kernel $(uname -r)"
	echo "cpus $(nproc)"
	echo "mem_kb $(awk '/MemTotal/{print $2}' /proc/meminfo)"
	echo "fio $(fio --version)"
	echo "runtime $RUNTIME"
	echo "ramp $RAMP"
	echo "reps $REPS"
	echo "size_mb $SIZE_MB"
	echo "bius_queues $QUEUES"
	echo "transfer_flag $transfer_flag"
	echo "modes $MODES"
	echo "sweep $SWEEP"
	echo "glibc_tunables ${TUNABLES:-none}"
	echo "perf $PERF"
	echo "trace $TRACE"
	echo "poll_us ${POLL:-0}"
	echo "suites $SUITES"
	echo "inflight_runtime $INF_RUNTIME"
	echo "inflight_latency $INF_LATENCY"
	echo "inflight_size_mb $INF_MB"
	echo "zone_mb $ZONE_MB"
	if [[ -x $BASE ]]; then
		echo "baseline_md5 $(md5sum <$BASE | cut -c1-12)"
		echo "baseline_modes $BASE_MODES"
	fi
	echo "started_uptime $(cut -d' ' -f1 /proc/uptime)"
} >"$OUT/meta.txt"
# how fast this VM copies and fills memory, by method (the tuned lines:
# the glibc tunables the servers run with)
if command -v memprobe >/dev/null; then
	{
		memprobe
		[[ -n $TUNABLES ]] && GLIBC_TUNABLES=$TUNABLES memprobe \
			| sed -n 's/^memprobe \(glibc-mem[a-z]*\) /memprobe \1-tuned /p'
	} >"$OUT/memprobe.txt" 2>&1
fi
say "suites: $SUITES; modes: $MODES${BASE_MODES:+ (baseline: $BASE_MODES)}; runtime ${RUNTIME}s+${RAMP}s ramp; $REPS reps; ${SIZE_MB} MiB devices; BIUS queues $QUEUES"

# --- devices ---------------------------------------------------------------
# DEV[name]=/dev/x, PID[name]=the process that serves it (BIUS daemon,
# nbdkit; its counters go into the cost table), SWEEPDEV: devices that run
# the block-size sweep; the devices of each suite: CLASSIC, INFLIGHT,
# FILEDEV, NBDDEV (nbd is in both CLASSIC and NBDDEV), ZONEDDEV; POLLDEV:
# classic devices with poll queues (the polled QD1 jobs); DEEP: the deep
# suite's (those of DEEP_SET that were made); NOPREFILL: devices
# prefilled otherwise (the file suite's image); SERVER[name]: a server to
# stop after the device's daemon (bius-nbd's nbdkit)
declare -A DEV=() PID=() NOPREFILL=() SERVER=()
ORDER=() SWEEPDEV=() CLASSIC=() DEEP=() INFLIGHT=() FILEDEV=() NBDDEV=() POLLDEV=() ZONEDDEV=()
DEEP_SET="brd bius-ram-default bius-null bius-zero ublk-ram ublk-null ublk-null-nodata"
# (and A/B variants of bius-null and ublk-null-nodata, made only when
# only= names them)
DEEP_SET+=" bius-null-poll0 bius-null-inherit ublk-null-batch ublk-null-nodata-batch"
wanted() { [[ -z $ONLY || " $ONLY " == *" $1 "* ]]; }
in_deep_set() { [[ " $DEEP_SET " == *" $1 "* ]]; }
# want_classic NAME: a device of the classic suite wanted, for that suite
# or (one of DEEP_SET) for the deep one
want_classic() { wanted "$1" && { suite classic || { suite deep && in_deep_set "$1"; }; }; }
# into_suites NAME: a classic device made: into the classic suite and, one
# of DEEP_SET, into the deep suite, as they run
into_suites() {
	suite classic && CLASSIC+=("$1")
	suite deep && in_deep_set "$1" && DEEP+=("$1")
	return 0
}
add_dev() {	# add_dev NAME PATH [PID]
	DEV[$1]=$2
	[[ -n ${3:-} ]] && PID[$1]=$3
	ORDER+=("$1")
	mkdir -p "$OUT/fio/$1"
	echo "$1 $2 ${3:-}" >>"$OUT/devices.txt"
	say "device $1 = $2${3:+ (daemon pid $3)}"
}

# nullb_configfs NAME ATTR=VALUE...: a null_blk disk made by configfs,
# its attributes written in the order given (the module's parameters are
# the defaults of those not given), then powered on; prints its /dev path
nullb_configfs() {
	local nb=/sys/kernel/config/nullb/$1 dev=$1 kv
	shift
	{ [[ -d /sys/module/null_blk ]] || modprobe null_blk nr_devices=0; } \
		&& { [[ -d /sys/module/configfs ]] || modprobe configfs; } \
		&& { mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config; } \
		&& mkdir "$nb" || return 1
	for kv in "$@" power=1; do
		echo "${kv#*=}" >"$nb/${kv%%=*}" || return 1
	done
	[[ -d /sys/block/$dev ]] || dev=nullb$(cat "$nb/index")
	wait_until 5 test -b "/dev/$dev" && echo "/dev/$dev"
}

# start_bius NAME ARGS...: $BIUSCTL (default biusctl) create ARGS in the
# background (lib.sh's bius_launch) with --poll-us POLL (unless NOPOLL=1)
# and the assignment EXTRA_ENV (if set) in its environment;
# the device is skipped if it is not live within 30 s
start_bius() {
	local name=$1
	shift
	# shellcheck disable=SC2034 # read by lib.sh's daemon_launch
	BIUS_ENV=(${TUNABLES:+"GLIBC_TUNABLES=$TUNABLES"} ${EXTRA_ENV:+"$EXTRA_ENV"})
	[[ ${NOPOLL:-0} == 1 ]] || set -- "$@" ${POLL:+--poll-us "$POLL"}
	if ! daemon_launch "${BIUSCTL:-biusctl}" create "$@"; then
		say "SKIP $name: $BIUS_WHY: $(tail -n 3 "$BIUS_ERR" | tr '\n' ' ')"
		return 1
	fi
	add_dev "$name" "$BIUS_DEV" "$BIUS_PID"
	[[ $name == bius-ram-* && $name != bius-ram-default* && $name != bius-ram-poll ]] \
		&& SWEEPDEV+=("$name")
	return 0
}

# pin_queues PID: each queue thread (bius-qN) of daemon PID on vCPU N
# modulo the vCPUs
pin_queues() {
	local tid queue
	while read -r tid queue; do
		taskset -pc "$((queue % $(nproc)))" "$tid" >/dev/null || return 1
	done < <(queue_threads "$1")
}
# batch_daemon NAME: every thread of device NAME's daemon under SCHED_BATCH
batch_daemon() {
	chrt -a -b -p 0 "${PID[$1]}" >/dev/null
}
# has_user_copy: whether ublk_drv offers UBLK_F_USER_COPY (6.1's does not)
has_user_copy() {
	rublk features 2>/dev/null | grep -qw USER_COPY
}

# start_nbdkit SOCKET LOG: an nbdkit memory disk of SIZE_MB on a Unix
# socket, in the background (NBDKIT_PID); 1 if the socket does not appear
start_nbdkit() {
	env ${TUNABLES:+GLIBC_TUNABLES=$TUNABLES} nbdkit --foreground --unix "$1" --exit-with-parent memory "${SIZE_MB}M" \
		>"$2" 2>&1 &
	NBDKIT_PID=$!
	wait_until 10 test -S "$1"
}

# ublk_load: ublk_drv loaded once: /bius/ublk/ublk_drv.ko when bench.sh
# built one (6.1), else the kernel's own module (6.12); 1 without rublk
# (the bench's ublk=0) or when it does not load
UBLK_LOADED=""
ublk_load() {
	if [[ -z $UBLK_LOADED ]]; then
		UBLK_LOADED=0
		if ! command -v rublk >/dev/null; then
			:
		elif [[ -e /bius/ublk/ublk_drv.ko ]]; then
			insmod /bius/ublk/ublk_drv.ko && wait_until 5 test -c /dev/ublk-control && UBLK_LOADED=1
			echo "ublk_drv /bius/ublk/ublk_drv.ko (built by the bench)" >>"$OUT/meta.txt"
		else
			modprobe ublk_drv && wait_until 5 test -c /dev/ublk-control && UBLK_LOADED=1
			echo "ublk_drv $(modinfo -F filename ublk_drv 2>/dev/null) (the kernel's own)" >>"$OUT/meta.txt"
		fi
		[[ $UBLK_LOADED == 1 ]] || { command -v rublk >/dev/null && say "SKIP ublk: ublk_drv did not load"; }
	fi
	[[ $UBLK_LOADED == 1 ]]
}

# start_rublk NAME TARGET ARGS...: rublk add TARGET --foreground ARGS in
# the background, with the memcpy tunables; rublk prints no path: the new
# /dev/ublkbN is its disk; 1 (device skipped) if none appears within 30 s
start_rublk() {
	local name=$1 target=$2 before dev d pid
	shift 2
	before=" $(echo /dev/ublkb*) "
	env ${TUNABLES:+GLIBC_TUNABLES=$TUNABLES} rublk add "$target" --foreground --quiet "$@" \
		>"/tmp/$name.log" 2>&1 &
	pid=$!
	wait_until 30 eval '[[ " $(echo /dev/ublkb*) " != "$before" ]] || ! kill -0 $pid 2>/dev/null'
	dev=""
	for d in /dev/ublkb*; do [[ $before == *" $d "* ]] || dev=$d; done
	if [[ -b $dev ]]; then
		add_dev "$name" "$dev" "$pid"
		return 0
	fi
	say "SKIP $name: rublk: $(tr '\n' ' ' <"/tmp/$name.log")"
	kill "$pid" 2>/dev/null
	return 1
}

# brd: /dev/ram0 for the classic suite, /dev/ram1 holds the file suite's
# ext4 (room for an image of SIZE_MB)
use_file=0
suite file && { wanted loop-dio || wanted bius-file-uring || wanted bius-file-threads || wanted bius-file-sync; } \
	&& use_file=1
if want_classic brd || [[ $use_file == 1 ]]; then
	rd_mb=$SIZE_MB
	[[ $use_file == 1 ]] && rd_mb=$((SIZE_MB + SIZE_MB / 16 + 48))
	if modprobe brd rd_nr=2 rd_size=$((rd_mb * 1024)) max_part=0; then
		want_classic brd && add_dev brd /dev/ram0 && { ! suite classic || SWEEPDEV+=(brd); } && into_suites brd
	else
		say "SKIP brd: modprobe brd failed"
		use_file=0
	fi
fi
if want_classic null_blk; then
	# gb is whole GiB; the jobs use the first SIZE bytes only; one poll
	# queue (6.1's default, said here) for the polled QD1 jobs
	modprobe null_blk nr_devices=1 gb=$(((SIZE_MB + 1023) / 1024)) memory_backed=1 poll_queues=1 \
		&& wait_until 5 test -b /dev/nullb0 && add_dev null_blk /dev/nullb0 && into_suites null_blk \
		&& { ! suite classic || POLLDEV+=(null_blk); }
fi
# the deep suite's floor, the kernel alone: null_blk keeping no data (its
# default, as the deep suite's yardstick measures; memory_backed=1 copies
# each request under one lock for the whole disk), the queues and depth of
# the BIUS and ublk devices (after the classic null_blk: its module's
# nr_devices=1 is what makes /dev/nullb0)
if suite deep && wanted null_blk-nodata; then
	if nbdev=$(nullb_configfs nullbnodata size="$SIZE_MB" memory_backed=0 submit_queues="$QUEUES" \
		hw_queue_depth=128); then
		add_dev null_blk-nodata "$nbdev" && DEEP+=(null_blk-nodata) && NOPREFILL[null_blk-nodata]=1
	else
		say "SKIP null_blk-nodata: null_blk by configfs failed"
	fi
fi
BIUS_OK=0
# (only bius.ko and biusctl matter here, not the test tools and examples)
if missing=$(grep -E '^(bius\.ko|biusctl) ' /bius/MISSING 2>/dev/null); then
	say "SKIP bius: $(tr '\n' ' ' <<<"$missing")"
else
	modprobe bius && wait_until 5 test -c /dev/bius && BIUS_OK=1
fi
if [[ $BIUS_OK == 1 ]] && { suite classic || suite deep; }; then
	for m in $MODES; do
		if suite classic && wanted "bius-ram-$m"; then
			args=(ramdisk --size "${SIZE_MB}M" --queues "$QUEUES")
			[[ $transfer_flag == 1 ]] && args+=(--transfer "$m")
			start_bius "bius-ram-$m" "${args[@]}" && CLASSIC+=("bius-ram-$m")
		fi
		# the same with the baseline biusctl, right after it in the tables
		if suite classic && [[ " $BASE_MODES " == *" $m "* ]] && wanted "bius-ram-$m@base"; then
			args=(ramdisk --size "${SIZE_MB}M" --queues "$QUEUES")
			[[ $base_transfer == 1 ]] && args+=(--transfer "$m")
			NOPOLL=$((1 - base_poll)) BIUSCTL=$BASE start_bius "bius-ram-$m@base" "${args[@]}" \
				&& CLASSIC+=("bius-ram-$m@base")
		fi
	done
	# what a user gets without flags
	if want_classic bius-ram-default; then
		NOPOLL=1 start_bius bius-ram-default ramdisk --size "${SIZE_MB}M" \
			&& into_suites bius-ram-default
	fi
	# the same copying every request's data (--transfer copy) instead of
	# mapping those of 128 KiB and more, to weigh the mapping at depth
	# (only when named in only=)
	if suite deep && [[ " $ONLY " == *" bius-ram-default-copy "* ]]; then
		NOPOLL=1 start_bius bius-ram-default-copy ramdisk --size "${SIZE_MB}M" --transfer copy \
			&& DEEP+=(bius-ram-default-copy)
	fi
	# the same completing with write() and fetching with read() instead of
	# BIUS_IOC_COMPLETE_FETCH, to weigh that call (only when named in only=)
	if suite classic && [[ " $ONLY " == *" bius-ram-default-split "* ]]; then
		EXTRA_ENV=BIUS_NO_COMPLETE_FETCH=1 NOPOLL=1 start_bius bius-ram-default-split ramdisk \
			--size "${SIZE_MB}M" && CLASSIC+=(bius-ram-default-split)
	fi
	# the same with one more queue, a poll queue: polled I/O (io_uring
	# --hipri) goes there, the rest to as many queues as bius-ram-default's
	if suite classic && wanted bius-ram-poll && [[ $(biusctl create --help 2>&1) == *--poll-queues* ]]; then
		NOPOLL=1 start_bius bius-ram-poll ramdisk --size "${SIZE_MB}M" --poll-queues 1 \
			&& POLLDEV+=(bius-ram-poll)
	fi
	# the same with queue N's thread pinned to vCPU N, the one blk-mq maps
	# to hardware queue N (only when named in only=)
	if suite classic && [[ " $ONLY " == *" bius-ram-pinned "* ]]; then
		NOPOLL=1 start_bius bius-ram-pinned ramdisk --size "${SIZE_MB}M" \
			&& pin_queues "$BIUS_PID" && CLASSIC+=(bius-ram-pinned)
	fi
	if want_classic bius-null; then
		start_bius bius-null null --size "${SIZE_MB}M" --queues "$QUEUES" && into_suites bius-null
	fi
	# no storage, but the data moves (selective transfer: the defaults)
	if want_classic bius-zero; then
		start_bius bius-zero zero --size "${SIZE_MB}M" --queues "$QUEUES" && into_suites bius-zero
	fi
	# bius-null without the busy-wait of its read() (--poll-us 0), to
	# weigh that spin's CPU against its latency (only when named in only=)
	if [[ " $ONLY " == *" bius-null-poll0 "* ]]; then
		NOPOLL=1 start_bius bius-null-poll0 null --size "${SIZE_MB}M" --queues "$QUEUES" \
			--poll-us 0 && into_suites bius-null-poll0
	fi
	# bius-null with its queue threads under the daemon's own policy
	# (--sched inherit: SCHED_OTHER, whose woken thread preempts fio at
	# once) instead of SCHED_BATCH, to weigh the scheduler's part in the
	# daemon's wake-ups (only when named in only=)
	if [[ " $ONLY " == *" bius-null-inherit "* ]]; then
		start_bius bius-null-inherit null --size "${SIZE_MB}M" --queues "$QUEUES" \
			--sched inherit && into_suites bius-null-inherit
	fi
	# the cost of the statistics: the fastest backend without them
	if suite classic && wanted bius-null-nostats; then
		start_bius bius-null-nostats null --size "${SIZE_MB}M" --queues "$QUEUES" --no-stats \
			&& CLASSIC+=(bius-null-nostats)
	fi
fi
# ublk (scripts/bench-ublk.sh built it; the bench's ublk=0 leaves it out):
# the ublk RAM server (benches/tools/ublk-ram, libublk) and rublk's null
# target, with the queues, depth and memcpy tunables of the BIUS daemons
if { want_classic ublk-ram || want_classic ublk-null || want_classic ublk-null-nodata \
	|| [[ " $ONLY " == *" ublk-null-batch "* || " $ONLY " == *" ublk-null-nodata-batch "* ]]; } \
	&& ublk_load; then
	# shellcheck disable=SC2034 # read by lib.sh's daemon_launch
	BIUS_ENV=(${TUNABLES:+"GLIBC_TUNABLES=$TUNABLES"})
	if want_classic ublk-ram; then
		if daemon_launch ublk-ram --size-mib "$SIZE_MB" --queues "$QUEUES" --depth 128; then
			add_dev ublk-ram "$BIUS_DEV" "$BIUS_PID" && into_suites ublk-ram
		else
			say "SKIP ublk-ram: $BIUS_WHY: $(tail -n 3 "$BIUS_ERR" | tr '\n' ' ')"
		fi
	fi
	if want_classic ublk-null; then
		start_rublk ublk-null null --queue "$QUEUES" --depth 128 && into_suites ublk-null
	fi
	# the same with user copy: the kernel copies nothing to the server (which
	# ignores the data), bius-null's peer; ublk_drv without USER_COPY (6.1's)
	# would drop the flag and copy, so only where the driver offers it
	if want_classic ublk-null-nodata; then
		if has_user_copy; then
			start_rublk ublk-null-nodata null --queue "$QUEUES" --depth 128 --user-copy \
				&& into_suites ublk-null-nodata
		else
			say "SKIP ublk-null-nodata: this ublk_drv has no USER_COPY"
		fi
	fi
	# both with every thread of rublk under SCHED_BATCH, as BIUS's queue
	# threads are by default: is the scheduler all of the difference?
	# (only when named in only=)
	if [[ " $ONLY " == *" ublk-null-batch "* ]]; then
		start_rublk ublk-null-batch null --queue "$QUEUES" --depth 128 \
			&& batch_daemon ublk-null-batch && into_suites ublk-null-batch
	fi
	if [[ " $ONLY " == *" ublk-null-nodata-batch "* ]] && has_user_copy; then
		start_rublk ublk-null-nodata-batch null --queue "$QUEUES" --depth 128 --user-copy \
			&& batch_daemon ublk-null-nodata-batch && into_suites ublk-null-nodata-batch
	fi
fi
if [[ $BIUS_OK == 1 ]] && suite inflight; then
	if wanted bius-q1-lat10ms; then
		start_bius bius-q1-lat10ms ramdisk --size "${INF_MB}M" --queues 1 --depth 64 \
			--latency "read=$INF_LATENCY" && INFLIGHT+=(bius-q1-lat10ms)
	fi
	if wanted bius-q1-ram; then
		start_bius bius-q1-ram ramdisk --size "${INF_MB}M" --queues 1 --depth 64 \
			&& INFLIGHT+=(bius-q1-ram)
	fi
fi
if suite inflight && wanted null_blk-lat10ms; then
	# null_blk completing each request from a timer, INF_LATENCY after it
	# arrives: what the guest's timers and wake-ups cost by themselves
	if nbdev=$(nullb_configfs nullblat size="$INF_MB" memory_backed=0 submit_queues=1 \
		hw_queue_depth=64 irqmode=2 completion_nsec="${INF_LATENCY%ms}000000"); then
		add_dev null_blk-lat10ms "$nbdev" && INFLIGHT+=(null_blk-lat10ms) \
			&& NOPREFILL[null_blk-lat10ms]=1
	else
		say "SKIP null_blk-lat10ms: null_blk by configfs failed"
	fi
fi
if [[ $use_file == 1 ]]; then
	IMG=/mnt/bench-ext4/disk.img
	t0=$EPOCHREALTIME
	if mkfs.ext4 -q -F -b 4096 -i 1048576 -E lazy_itable_init=0,lazy_journal_init=0 /dev/ram1 \
		&& mkdir -p /mnt/bench-ext4 && mount -t ext4 -o noatime /dev/ram1 /mnt/bench-ext4 \
		&& fio --name=prefill --filename="$IMG" --ioengine=psync --direct=1 --rw=write --bs=1m \
			--size="$SIZE" --output=/dev/null >/dev/null 2>&1; then
		say "file suite: $IMG on ext4 on /dev/ram1, $(stat -c %s "$IMG") bytes, prefilled in $(elapsed "$t0") s"
	else
		say "SKIP file suite: ext4 on /dev/ram1 or its image failed"
		use_file=0
	fi
fi
if [[ $use_file == 1 ]] && wanted loop-dio; then
	if modprobe loop && loopdev=$(losetup --direct-io=on --show -f "$IMG" 2>/tmp/losetup.err); then
		dio=$(cat "/sys/block/${loopdev#/dev/}/loop/dio" 2>/dev/null)
		[[ $dio == 1 ]] || say "WARNING loop-dio: $loopdev has dio=$dio (buffered)"
		add_dev loop-dio "$loopdev" && FILEDEV+=(loop-dio) && NOPREFILL[loop-dio]=1
	else
		say "SKIP loop-dio: $(tr '\n' ' ' </tmp/losetup.err)"
	fi
fi
if [[ $use_file == 1 && $BIUS_OK == 1 ]]; then
	for e in uring threads sync; do
		wanted "bius-file-$e" || continue
		start_bius "bius-file-$e" file --direct --engine "$e" "$IMG" --queues "$QUEUES" \
			&& FILEDEV+=("bius-file-$e") && NOPREFILL[bius-file-$e]=1
	done
fi
if wanted nbd && { suite classic || suite nbd; }; then
	if modprobe nbd nbds_max=1 max_part=0; then
		sock=/tmp/nbdkit.sock
		start_nbdkit "$sock" /tmp/nbdkit.log
		nbdpid=$NBDKIT_PID
		if nbd-client -unix "$sock" /dev/nbd0 -b 4096 >/tmp/nbd-client.log 2>&1 \
			&& wait_until 10 eval '[[ $(blockdev --getsize64 /dev/nbd0 2>/dev/null || echo 0) -gt 0 ]]'; then
			add_dev nbd /dev/nbd0 "$nbdpid"
			suite classic && CLASSIC+=(nbd)
			suite nbd && NBDDEV+=(nbd)
		else
			say "SKIP nbd: nbd-client: $(tr '\n' ' ' </tmp/nbd-client.log) nbdkit: $(tr '\n' ' ' </tmp/nbdkit.log)"
		fi
	else
		say "SKIP nbd: modprobe nbd failed"
	fi
fi
if [[ $BIUS_OK == 1 ]] && suite nbd && wanted bius-nbd; then
	sock=/tmp/nbdkit-bius.sock
	if start_nbdkit "$sock" /tmp/nbdkit-bius.log; then
		SERVER[bius-nbd]=$NBDKIT_PID
		start_bius bius-nbd nbd "unix:$sock" --queues "$QUEUES" && NBDDEV+=(bius-nbd)
	else
		say "SKIP bius-nbd: nbdkit: $(tr '\n' ' ' </tmp/nbdkit-bius.log)"
	fi
fi
# zoned: one geometry on all three, the same scheduler on all three (zone
# write plugging keeps zoned writes in order under any scheduler from 6.10
# on; before, mq-deadline did)
ZSCHED=mq-deadline
kernel_at_least 6 10 && ZSCHED=none
# zoned_dev NAME: a zoned device made: its scheduler, into the suite
zoned_dev() {
	local disk=${DEV[$1]#/dev/}
	echo "$ZSCHED" >"/sys/block/$disk/queue/scheduler" \
		|| say "WARNING $1: cannot set scheduler $ZSCHED ($(cat "/sys/block/$disk/queue/scheduler"))"
	ZONEDDEV+=("$1")
}
if suite zoned && ((SIZE_MB % (4 * ZONE_MB) != 0)); then
	say "SKIP zoned: size=$SIZE_MB MiB is not 4 whole quarters of zones of $ZONE_MB MiB"
elif suite zoned; then
	if wanted null_blk-zoned; then
		if nbdev=$(nullb_configfs nullbzoned size="$SIZE_MB" memory_backed=1 submit_queues="$QUEUES" \
			poll_queues=0 hw_queue_depth=128 zoned=1 zone_size="$ZONE_MB" zone_nr_conv=0); then
			add_dev null_blk-zoned "$nbdev" && zoned_dev null_blk-zoned
		else
			say "SKIP null_blk-zoned: zoned null_blk by configfs failed"
		fi
	fi
	if [[ $BIUS_OK == 1 ]] && wanted bius-zoned; then
		start_bius bius-zoned ramdisk --size "${SIZE_MB}M" --queues "$QUEUES" --zoned \
			--zone-size "${ZONE_MB}M" && zoned_dev bius-zoned
	fi
	if ! wanted ublk-zoned || ! command -v rublk >/dev/null; then
		:
	elif ! kernel_at_least 6 6; then
		say "SKIP ublk-zoned: ublk's zoned devices need Linux 6.6, this is $(uname -r)"
		echo "zoned_ublk_skipped ublk zoned needs Linux >= 6.6" >>"$OUT/meta.txt"
	elif ublk_load; then
		start_rublk ublk-zoned zoned --queue "$QUEUES" --depth 128 --size "${SIZE_MB}MiB" \
			--zone-size "${ZONE_MB}MiB" --conv-zones 0 && zoned_dev ublk-zoned
	fi
fi
[[ ${#ORDER[@]} -gt 0 ]] || suite models || fail "no device to benchmark"
{
	echo "sweep_devices ${SWEEPDEV[*]}"
	echo "suite_classic ${CLASSIC[*]}"
	echo "suite_deep ${DEEP[*]}"
	echo "suite_inflight ${INFLIGHT[*]}"
	echo "suite_file ${FILEDEV[*]}"
	echo "suite_nbd ${NBDDEV[*]}"
	echo "poll_devices ${POLLDEV[*]}"
	echo "suite_zoned ${ZONEDDEV[*]}"
	echo "zoned_scheduler $ZSCHED"
} >>"$OUT/meta.txt"
for d in "${ORDER[@]}"; do
	echo "dev $d $(cat /sys/block/"$(basename "${DEV[$d]}")"/queue/scheduler 2>/dev/null | tr ' ' '_') \
max_sectors_kb=$(cat /sys/block/"$(basename "${DEV[$d]}")"/queue/max_sectors_kb 2>/dev/null)" >>"$OUT/meta.txt"
done
# the zoned devices' geometry, to show that it is the same on all three
for d in "${ZONEDDEV[@]}"; do
	q=/sys/block/${DEV[$d]#/dev/}/queue
	echo "zoned_dev:$d$(for a in nr_zones chunk_sectors max_open_zones max_active_zones \
		zone_append_max_bytes logical_block_size nr_requests; do
		printf ' %s=%s' "$a" "$(cat "$q/$a" 2>/dev/null)"
	done) hw_queues=$(ls -d "$q"/../mq/*/ 2>/dev/null | wc -l)" >>"$OUT/meta.txt"
done

# --- counters around a run -------------------------------------------------
# counters PID DEV: one line of key=value: the disk's completed reads and
# writes (/sys/block/X/stat), system-wide context switches and CPU ticks
# (USER_HZ), the daemon's threads' voluntary/involuntary switches and
# utime and stime ticks, its read()/write() calls (/proc/PID/io)
counters() {	# one awk for all: a process costs ~0.1 s under TCG
	local pid=$1 dev=$2
	local files=("/sys/block/$(basename "$dev")/stat" /proc/stat)
	[[ -n $pid && -d /proc/$pid ]] \
		&& files+=(/proc/"$pid"/task/*/status /proc/"$pid"/task/*/stat /proc/"$pid"/io)
	awk '
	FILENAME ~ /^\/sys\/block/ && FNR == 1 { rd = $1; wr = $5 }
	FILENAME == "/proc/stat" && $1 == "ctxt" { ctxt = $2 }
	FILENAME == "/proc/stat" && $1 == "cpu" { user = $2 + $3; sys = $4 + $7 + $8; idle = $5 + $6 }
	FILENAME ~ /\/status$/ && $1 == "voluntary_ctxt_switches:" { vol += $2 }
	FILENAME ~ /\/status$/ && $1 == "nonvoluntary_ctxt_switches:" { inv += $2 }
	FILENAME ~ /\/task\/[0-9]+\/stat$/ { uticks += $14; sticks += $15 }
	FILENAME ~ /\/io$/ && $1 == "syscr:" { syscr = $2 }
	FILENAME ~ /\/io$/ && $1 == "syscw:" { syscw = $2 }
	END {
		printf "rd_ios=%d wr_ios=%d ctxt=%d user=%d sys=%d idle=%d ", rd, wr, ctxt, user, sys, idle
		printf "d_vol=%d d_inv=%d d_ticks=%d d_uticks=%d d_sticks=%d d_syscr=%d d_syscw=%d\n", \
			vol, inv, uticks + sticks, uticks, sticks, syscr, syscw
	}' "${files[@]}" 2>/dev/null
}

# --- ftrace (trace=1) -------------------------------------------------------
TRACEFS=/sys/kernel/tracing
TRACE_EVENTS="syscalls/sys_enter_pread64 syscalls/sys_exit_pread64
syscalls/sys_enter_pwrite64 syscalls/sys_exit_pwrite64 block/block_rq_issue
block/block_rq_complete bius/bius_fetch bius/bius_complete sched/sched_switch
sched/sched_waking sched/sched_wakeup"
trace_setup() {
	local e
	mountpoint -q $TRACEFS || mount -t tracefs nodev $TRACEFS || return 1
	echo 0 >$TRACEFS/tracing_on
	echo 16384 >$TRACEFS/buffer_size_kb
	for e in $TRACE_EVENTS; do
		echo 1 >"$TRACEFS/events/$e/enable" || say "trace: no event $e"
	done
	: >$TRACEFS/trace
}
# trace_window: tracing on for 0.5 s once fio is past its start-up and ramp
trace_window() {
	sleep $((RAMP + 1))
	echo 1 >$TRACEFS/tracing_on
	sleep 0.5
	echo 0 >$TRACEFS/tracing_on
}
if [[ $TRACE == 1 ]] && ! trace_setup; then
	say "ERROR trace=1: cannot mount tracefs; tracing off"
	TRACE=0
fi

# run_job DEV-NAME JOB REP FIO-ARGS...: with ENGINE (fio ioengine, default
# psync) and JOB_RUNTIME (default RUNTIME) from the caller's environment
run_job() {
	local name=$1 job=$2 rep=$3 dev=${DEV[$1]} f perf=() tpid
	local engine=${ENGINE:-psync} runtime=${JOB_RUNTIME:-$RUNTIME}
	shift 3
	f=$OUT/fio/$name/$job-r$rep
	# (recording starts after fio's start-up and ramp)
	[[ $PERF == 1 ]] && perf=(perf record -a -e cpu-clock -F 4999 -q -o /tmp/perf.data
		-D $(((RAMP + 1) * 1000)) --)
	{
		echo "before $(counters "${PID[$name]:-}" "$dev")"
		echo "uptime_before $(cut -d' ' -f1 /proc/uptime)"
	} >"$f.proc"
	if [[ $TRACE == 1 ]]; then
		trace_window &
		tpid=$!
	fi
	if "${perf[@]}" fio --name="$job" --filename="$dev" --ioengine="$engine" --direct=1 \
		--time_based --runtime="$runtime" --ramp_time="$RAMP" \
		--group_reporting --norandommap --randrepeat=0 \
		--output-format=json --output="$f.json" "$@" >"$f.err" 2>&1; then
		echo "$rep $job $name $name/$job-r$rep" >>"$OUT/runs.txt"
	else
		say "ERROR fio $job on $name (rep $rep): $(tail -n 2 "$f.err" | tr '\n' ' ')"
	fi
	{
		echo "after $(counters "${PID[$name]:-}" "$dev")"
		echo "uptime_after $(cut -d' ' -f1 /proc/uptime)"
	} >>"$f.proc"
	[[ -s $f.err ]] || rm -f "$f.err"
	if [[ $TRACE == 1 ]]; then
		wait "$tpid"
		grep -v '^#' $TRACEFS/trace >"$f.trace.txt"
		: >$TRACEFS/trace
	fi
	if [[ $PERF == 1 ]]; then
		{
			perf report -i /tmp/perf.data --stdio --no-children --sort comm,dso,sym \
				--percent-limit 0.3 2>&1
			perf report -i /tmp/perf.data --stdio --no-children --sort comm \
				2>&1
		} | grep -v '^$' >"$f.perf.txt"
		rm -f /tmp/perf.data
	fi
}

# 4 jobs each on its own quarter of the device
Q=$((SIZE / 4))
four=(--numjobs=4 --size="$Q" --offset_increment="$Q")
declare -A JOBS=(
	[seqread]="--rw=read --bs=256k"
	[seqwrite]="--rw=write --bs=256k"
	[randread]="--rw=randread --bs=4k"
	[randwrite]="--rw=randwrite --bs=4k"
)
JOB_ORDER=(seqread seqwrite randread randwrite)
# the in-flight, file and nbd suites: libaio, one job, queue depth 1 and 32
AIO_JOBS=(randread-qd1 randread-qd32 randwrite-qd1 randwrite-qd32)
# run_aio DEV JOB REP SIZE: one of AIO_JOBS (JOB_RUNTIME as for run_job)
run_aio() {
	local rw=${2%-qd*} qd=${2##*-qd}
	ENGINE=libaio run_job "$1" "$2" "$3" --numjobs=1 --size="$4" --rw="$rw" --bs=4k \
		--iodepth="$qd" --lat_percentiles=1
}

# the deep suite: io_uring, 2 jobs each on its half of the device (deep-*),
# and QD1 4 KiB random read with io_uring (deep-lat-qd1); every run with
# its latency percentiles
DEEP_JOBS=(deep-randread-qd32 deep-randread-qd128 deep-randwrite-qd32 deep-randwrite-qd128
	deep-read128k-qd32 deep-write128k-qd32 deep-lat-qd1)
H=$((SIZE / 2))
two=(--numjobs=2 --size="$H" --offset_increment="$H")
# run_deep DEV JOB REP: one of DEEP_JOBS
run_deep() {
	local job=${2#deep-} rw bs=4k qd
	if [[ $job == lat-qd1 ]]; then
		ENGINE=io_uring run_job "$1" "$2" "$3" --numjobs=1 --size="$SIZE" --rw=randread --bs=4k \
			--iodepth=1 --lat_percentiles=1
		return
	fi
	rw=${job%-qd*} qd=${job##*-qd}
	case $rw in
	read128k | write128k) rw=${rw%128k} bs=128k ;;
	esac
	ENGINE=io_uring run_job "$1" "$2" "$3" "${two[@]}" --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--lat_percentiles=1
}

# --- prefill ---------------------------------------------------------------
for d in "${ORDER[@]}"; do
	[[ -n ${NOPREFILL[$d]:-} ]] && continue
	size=$SIZE zbd=()
	[[ " ${INFLIGHT[*]} " == *" $d "* ]] && size=$((INF_MB << 20))
	[[ " ${ZONEDDEV[*]} " == *" $d "* ]] && zbd=(--zonemode=zbd)
	t0=$EPOCHREALTIME
	fio --name=prefill --filename="${DEV[$d]}" --ioengine=psync --direct=1 "${zbd[@]}" \
		--rw=write --bs=1m --size="$size" --output=/dev/null >/dev/null 2>&1 \
		|| say "ERROR prefill of $d failed"
	say "prefilled $d in $(elapsed "$t0") s"
done
# (all devices at once must fit in the guest's RAM: scripts/bench.sh boots it
# with BIUS_VM_MEM, 5G by default)
memfree=$(awk '/MemAvailable/{print int($2 / 1024)}' /proc/meminfo)
echo "mem_available_mb_after_prefill $memfree" >>"$OUT/meta.txt"
say "memory available after prefill: $memfree MiB"

# --- the runs --------------------------------------------------------------
n_classic=${#CLASSIC[@]}
# (the deep suite runs the psync QD1 job, lat, itself when classic does not)
deep_lat=0
suite classic || deep_lat=1
total=$(((${#JOB_ORDER[@]} + 2) * n_classic + (${#DEEP_JOBS[@]} + deep_lat) * ${#DEEP[@]} + 2 * ${#POLLDEV[@]} + $(echo $SWEEP | wc -w) * ${#SWEEPDEV[@]}
	+ 2 * ${#INFLIGHT[@]} + ${#AIO_JOBS[@]} * (${#FILEDEV[@]} + ${#NBDDEV[@]}) + 2 * ${#ZONEDDEV[@]}))
say "$REPS reps x $total runs"
for ((rep = 1; rep <= REPS; rep++)); do
	t0=$EPOCHREALTIME
	# classic: psync, 4 jobs, then QD1 latency, then the block-size sweep
	for job in "${JOB_ORDER[@]}"; do
		for d in "${CLASSIC[@]}"; do
			# shellcheck disable=SC2086
			run_job "$d" "$job" "$rep" "${four[@]}" ${JOBS[$job]}
		done
	done
	for d in "${CLASSIC[@]}"; do
		run_job "$d" lat "$rep" --numjobs=1 --size="$SIZE" --rw=randread --bs=4k --lat_percentiles=1
	done
	# the same on one vCPU (fio and the daemon's threads on CPU 0): no
	# cross-CPU wake-up, which under TCG means no IPI to an idle vCPU
	for d in "${CLASSIC[@]}"; do
		[[ -n ${PID[$d]:-} ]] && taskset -ap 1 "${PID[$d]}" >/dev/null
		run_job "$d" lat1cpu "$rep" --numjobs=1 --size="$SIZE" --rw=randread --bs=4k \
			--lat_percentiles=1 --cpus_allowed=0
		[[ -n ${PID[$d]:-} ]] && taskset -ap "$(printf %x $(((1 << $(nproc)) - 1)))" "${PID[$d]}" >/dev/null
		[[ $d == bius-ram-pinned ]] && pin_queues "${PID[$d]}"
	done
	# polled I/O: QD1 random read with io_uring, interrupt-style, then
	# polled (IOPOLL: fio spins for each completion), on the same device
	for d in "${POLLDEV[@]}"; do
		ENGINE=io_uring run_job "$d" laturing "$rep" --numjobs=1 --size="$SIZE" --rw=randread \
			--bs=4k --iodepth=1 --lat_percentiles=1
		ENGINE=io_uring run_job "$d" lathipri "$rep" --numjobs=1 --size="$SIZE" --rw=randread \
			--bs=4k --iodepth=1 --lat_percentiles=1 --hipri=1
	done
	for bs in $SWEEP; do
		for d in "${SWEEPDEV[@]}"; do
			run_job "$d" "sweep-$bs" "$rep" "${four[@]}" --rw=read --bs="$bs"
		done
	done
	# deep: io_uring at depth, then QD1 (psync too, if classic did not)
	for job in "${DEEP_JOBS[@]}"; do
		for d in "${DEEP[@]}"; do
			run_deep "$d" "$job" "$rep"
		done
	done
	if [[ $deep_lat == 1 ]]; then
		for d in "${DEEP[@]}"; do
			run_job "$d" lat "$rep" --numjobs=1 --size="$SIZE" --rw=randread --bs=4k --lat_percentiles=1
		done
	fi
	# inflight: random reads at QD1 and QD32 on one queue; the device
	# whose reads take 10 ms runs INF_RUNTIME
	for job in randread-qd1 randread-qd32; do
		for d in "${INFLIGHT[@]}"; do
			rt=$RUNTIME
			[[ $d == *-lat10ms ]] && rt=$INF_RUNTIME
			JOB_RUNTIME=$rt run_aio "$d" "$job" "$rep" "$((INF_MB << 20))"
		done
	done
	# file, nbd: the same image / kind of server behind every device
	for job in "${AIO_JOBS[@]}"; do
		for d in "${FILEDEV[@]}" "${NBDDEV[@]}"; do
			run_aio "$d" "$job" "$rep" "$SIZE"
		done
	done
	# zoned: 128 KiB sequential writes (fio resets a full zone before it
	# writes it again), then every zone finished, so that all of it is
	# below the write pointer, and 4 KiB random reads
	for d in "${ZONEDDEV[@]}"; do
		run_job "$d" zseqwrite "$rep" "${four[@]}" --zonemode=zbd --rw=write --bs=128k
	done
	for d in "${ZONEDDEV[@]}"; do
		blkzone finish "${DEV[$d]}" || say "ERROR blkzone finish of $d failed"
		run_job "$d" zrandread "$rep" "${four[@]}" --zonemode=zbd --rw=randread --bs=4k
	done
	say "rep $rep/$REPS done in $(elapsed "$t0") s"
done
# models: devices of their own, made and stopped one after the other
suite models && models_suite
echo "ended_uptime $(cut -d' ' -f1 /proc/uptime)" >>"$OUT/meta.txt"

# --- teardown --------------------------------------------------------------
for d in "${ORDER[@]}"; do
	case $d in
	bius-*)
		kill -TERM "${PID[$d]}"
		wait_until 30 eval "! kill -0 ${PID[$d]} 2>/dev/null" || say "ERROR $d: daemon still running"
		;;
	nbd)
		nbd-client -d /dev/nbd0 >/dev/null 2>&1
		kill "${PID[$d]}" 2>/dev/null
		;;
	ublk-*)	# (the disk stays, without its server, until poweroff)
		kill -KILL "${PID[$d]}" 2>/dev/null
		;;
	loop-dio)
		losetup -d "${DEV[$d]}" || say "ERROR losetup -d ${DEV[$d]} failed"
		;;
	esac
	[[ -n ${SERVER[$d]:-} ]] && kill "${SERVER[$d]}" 2>/dev/null
done
mountpoint -q /mnt/bench-ext4 && { umount /mnt/bench-ext4 || say "ERROR umount /mnt/bench-ext4 failed"; }
for nb in nullblat nullbzoned nullbnodata; do
	[[ -d /sys/kernel/config/nullb/$nb ]] \
		&& { echo 0 >"/sys/kernel/config/nullb/$nb/power"; rmdir "/sys/kernel/config/nullb/$nb"; }
done
wait 2>/dev/null
say "done"
exit 0
