#!/bin/bash
# timeout: 2400
# Guest side of scripts/bench.sh (installed as /bius/tests/bench.sh and run
# by the test VM's init as the test "bench").  Runs the same fio jobs, one
# device after the other, against brd, null_blk, BIUS (ramdisk in every
# transfer mode biusctl offers, null) and an nbdkit RAM disk over NBD, all
# alive at once; the repetition loop is the outermost so that drift of a
# noisy host spreads over all devices alike.
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
# biusbench.poll=USECS (biusctl create --poll-us for the BIUS devices;
# default 200)
# biusbench.perf=1 (each run under `perf record -a`, flat profile kept as
# <run>.perf.txt; needs perf in the initramfs: scripts/bench.sh -p)
# biusbench.trace=1 (an ftrace window of 0.5 s in each run, after the
# ramp: syscalls of fio, block and bius request events, scheduler
# switches and wake-ups; kept as <run>.trace.txt for benches/vm/timeline.py)
# biusbench.tunables=T|none (GLIBC_TUNABLES for every user-space server,
# BIUS daemons and nbdkit alike; default: no `rep movsb` in memcpy, which
# TCG emulates a byte at a time: 0.5 GB/s against 3.4 GB/s for vector
# copies, see benches/README.md)
source /bius/lib.sh
set +e	# a failing run or device is recorded and skipped, not fatal
set -u

RUNTIME=3 RAMP=1 REPS=3 SIZE_MB=256 QUEUES=$(nproc) MODES="" ONLY="" TUNABLES=glibc.cpu.x86_rep_movsb_threshold=4294967295 PERF=0 TRACE=0 POLL=200
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
	esac
done
SIZE=$((SIZE_MB << 20))
OUT=/results/bench
mkdir -p "$OUT/fio"
: >"$OUT/runs.txt"
: >"$OUT/devices.txt"

say() { echo "BIUS-BENCH $*" >/dev/console; echo "== $*"; }

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
	echo "started_uptime $(cut -d' ' -f1 /proc/uptime)"
} >"$OUT/meta.txt"
# how fast this VM copies memory, by method (the tuned line: the glibc
# tunables the servers run with)
if command -v memprobe >/dev/null; then
	{
		memprobe
		[[ -n $TUNABLES ]] && GLIBC_TUNABLES=$TUNABLES memprobe \
			| sed -n 's/^memprobe glibc-memcpy /memprobe glibc-memcpy-tuned /p'
	} >"$OUT/memprobe.txt" 2>&1
fi
say "modes: $MODES; runtime ${RUNTIME}s+${RAMP}s ramp; $REPS reps; ${SIZE_MB} MiB devices; BIUS queues $QUEUES"

# --- devices ---------------------------------------------------------------
# DEV[name]=/dev/x, PID[name]=daemon pid (BIUS, nbdkit), SWEEPDEV: devices
# that run the block-size sweep
declare -A DEV=() PID=()
ORDER=() SWEEPDEV=()
wanted() { [[ -z $ONLY || " $ONLY " == *" $1 "* ]]; }
add_dev() {	# add_dev NAME PATH [PID]
	DEV[$1]=$2
	[[ -n ${3:-} ]] && PID[$1]=$3
	ORDER+=("$1")
	mkdir -p "$OUT/fio/$1"
	echo "$1 $2 ${3:-}" >>"$OUT/devices.txt"
	say "device $1 = $2${3:+ (daemon pid $3)}"
}

# start_bius NAME ARGS...: biusctl create ARGS in the background (lib.sh's
# bius_launch); the device is skipped if it is not live within 30 s
start_bius() {
	local name=$1
	shift
	BIUS_ENV=(${TUNABLES:+"GLIBC_TUNABLES=$TUNABLES"})
	if ! bius_launch "$@" ${POLL:+--poll-us "$POLL"}; then
		say "SKIP $name: $BIUS_WHY: $(tail -n 3 "$BIUS_ERR" | tr '\n' ' ')"
		return 1
	fi
	add_dev "$name" "$BIUS_DEV" "$BIUS_PID"
	[[ $name == bius-ram-* ]] && SWEEPDEV+=("$name")
	return 0
}

if wanted brd; then
	modprobe brd rd_nr=1 rd_size=$((SIZE_MB * 1024)) max_part=0 \
		&& add_dev brd /dev/ram0 && SWEEPDEV+=(brd)
fi
if wanted null_blk; then
	# gb is whole GiB; the jobs use the first SIZE bytes only
	modprobe null_blk nr_devices=1 gb=$(((SIZE_MB + 1023) / 1024)) memory_backed=1 \
		&& wait_until 5 test -b /dev/nullb0 && add_dev null_blk /dev/nullb0
fi
if [[ -e /bius/MISSING && -s /bius/MISSING ]]; then
	say "SKIP bius: $(tr '\n' ' ' </bius/MISSING)"
else
	modprobe bius && wait_until 5 test -c /dev/bius
	for m in $MODES; do
		wanted "bius-ram-$m" || continue
		args=(ramdisk --size "${SIZE_MB}M" --queues "$QUEUES")
		[[ $transfer_flag == 1 ]] && args+=(--transfer "$m")
		start_bius "bius-ram-$m" "${args[@]}"
	done
	if wanted bius-null; then
		args=(null --size "${SIZE_MB}M" --queues "$QUEUES")
		start_bius bius-null "${args[@]}"
	fi
fi
if wanted nbd; then
	if modprobe nbd nbds_max=1 max_part=0; then
		sock=/tmp/nbdkit.sock
		env ${TUNABLES:+GLIBC_TUNABLES=$TUNABLES} nbdkit --foreground --unix "$sock" --exit-with-parent memory "${SIZE_MB}M" \
			>/tmp/nbdkit.log 2>&1 &
		nbdpid=$!
		wait_until 10 test -S "$sock"
		if nbd-client -unix "$sock" /dev/nbd0 -b 4096 >/tmp/nbd-client.log 2>&1 \
			&& wait_until 10 eval '[[ $(blockdev --getsize64 /dev/nbd0 2>/dev/null || echo 0) -gt 0 ]]'; then
			add_dev nbd /dev/nbd0 "$nbdpid"
		else
			say "SKIP nbd: nbd-client: $(tr '\n' ' ' </tmp/nbd-client.log) nbdkit: $(tr '\n' ' ' </tmp/nbdkit.log)"
		fi
	else
		say "SKIP nbd: modprobe nbd failed"
	fi
fi
[[ ${#ORDER[@]} -gt 0 ]] || fail "no device to benchmark"
echo "sweep_devices ${SWEEPDEV[*]}" >>"$OUT/meta.txt"
for d in "${ORDER[@]}"; do
	echo "dev $d $(cat /sys/block/"$(basename "${DEV[$d]}")"/queue/scheduler 2>/dev/null | tr ' ' '_') \
max_sectors_kb=$(cat /sys/block/"$(basename "${DEV[$d]}")"/queue/max_sectors_kb 2>/dev/null)" >>"$OUT/meta.txt"
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

# run_job DEV-NAME JOB REP FIO-ARGS...
run_job() {
	local name=$1 job=$2 rep=$3 dev=${DEV[$1]} f perf=() tpid
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
	if "${perf[@]}" fio --name="$job" --filename="$dev" --ioengine=psync --direct=1 \
		--time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
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

# --- prefill ---------------------------------------------------------------
for d in "${ORDER[@]}"; do
	t0=$EPOCHREALTIME
	fio --name=prefill --filename="${DEV[$d]}" --ioengine=psync --direct=1 \
		--rw=write --bs=1m --size="$SIZE" --output=/dev/null >/dev/null 2>&1 \
		|| say "ERROR prefill of $d failed"
	say "prefilled $d in $(elapsed "$t0") s"
done

# --- the runs --------------------------------------------------------------
total=$(((${#JOB_ORDER[@]} + 2) * ${#ORDER[@]} + $(echo $SWEEP | wc -w) * ${#SWEEPDEV[@]}))
say "$REPS reps x $total runs"
for ((rep = 1; rep <= REPS; rep++)); do
	t0=$EPOCHREALTIME
	for job in "${JOB_ORDER[@]}"; do
		for d in "${ORDER[@]}"; do
			# shellcheck disable=SC2086
			run_job "$d" "$job" "$rep" "${four[@]}" ${JOBS[$job]}
		done
	done
	for d in "${ORDER[@]}"; do
		run_job "$d" lat "$rep" --numjobs=1 --size="$SIZE" --rw=randread --bs=4k --lat_percentiles=1
	done
	# the same on one vCPU (fio and the daemon's threads on CPU 0): no
	# cross-CPU wake-up, which under TCG means no IPI to an idle vCPU
	for d in "${ORDER[@]}"; do
		[[ -n ${PID[$d]:-} ]] && taskset -ap 1 "${PID[$d]}" >/dev/null
		run_job "$d" lat1cpu "$rep" --numjobs=1 --size="$SIZE" --rw=randread --bs=4k \
			--lat_percentiles=1 --cpus_allowed=0
		[[ -n ${PID[$d]:-} ]] && taskset -ap "$(printf %x $(((1 << $(nproc)) - 1)))" "${PID[$d]}" >/dev/null
	done
	for bs in $SWEEP; do
		for d in "${SWEEPDEV[@]}"; do
			run_job "$d" "sweep-$bs" "$rep" "${four[@]}" --rw=read --bs="$bs"
		done
	done
	say "rep $rep/$REPS done in $(elapsed "$t0") s"
done
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
	esac
done
wait 2>/dev/null
say "done"
exit 0
