# shellcheck shell=bash
# The VM benchmark's fio runs (sourced by bench.sh): run_job, one fio run
# of a device with its counters before and after (and a perf profile or
# an ftrace window when asked), and the job shapes more than one suite
# uses.

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
# QD1 4 KiB random read over the whole device (the classic and deep
# suites' lat; with --iodepth=1 and io_uring, the polled jobs)
lat=(--numjobs=1 --size="$SIZE" --rw=randread --bs=4k --lat_percentiles=1)
# the in-flight, file and nbd suites: libaio, one job, queue depth 1 and 32
AIO_JOBS=(randread-qd1 randread-qd32 randwrite-qd1 randwrite-qd32)
# run_aio DEV JOB REP SIZE: one of AIO_JOBS (JOB_RUNTIME as for run_job)
run_aio() {
	local rw=${2%-qd*} qd=${2##*-qd}
	ENGINE=libaio run_job "$1" "$2" "$3" --numjobs=1 --size="$4" --rw="$rw" --bs=4k \
		--iodepth="$qd" --lat_percentiles=1
}
# aio_runs REP DEV...: every job of AIO_JOBS on every DEV, the whole device
aio_runs() {
	local rep=$1 job d
	shift
	for job in "${AIO_JOBS[@]}"; do
		for d in "$@"; do
			run_aio "$d" "$job" "$rep" "$SIZE"
		done
	done
}
