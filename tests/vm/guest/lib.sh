# shellcheck shell=bash
# Helpers for the guest-side tests (each test: `source /bius/lib.sh`).
# A test is a bash script that exits 0 on success; it runs in a scratch
# directory under /tmp with a time limit from its "# timeout: N" line.
set -euo pipefail

# step WHAT: a step's heading, with the seconds since the test started
step() { printf '== [%4d s] %s\n' "$SECONDS" "$*"; }
fail() { echo "FAIL: $*"; exit 1; }
info() { echo "   $*"; }

# test_klog: what the kernel logged since the test started.  Hold it in a
# variable and grep that: `dmesg | grep -q` under pipefail fails whenever
# grep stops reading before dmesg is done, a match or not.
KLOG_TEST0=$(dmesg | wc -l) || KLOG_TEST0=0
test_klog() { dmesg | tail -n +$((KLOG_TEST0 + 1)); }

# now: seconds since boot with a fraction, for durations
now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b - a}'; }

# kernel_at_least MAJOR MINOR: is the guest kernel MAJOR.MINOR or newer?
# (the tests' one version test, for behaviour that really differs)
kernel_at_least() {
	local v
	v=$(uname -r)
	v=${v%%-*}
	[[ $(printf '%s\n' "$1.$2" "$v" | sort -V | head -n 1) == "$1.$2" ]]
}

# queue_threads PID: "TID N" for each queue thread bius-qN of daemon PID
queue_threads() {
	local task comm
	for task in /proc/"$1"/task/*; do
		comm=$(<"$task/comm")
		[[ $comm == bius-q* ]] && echo "${task##*/} ${comm#bius-q}"
	done
	return 0
}

# kernel_param NAME DEFAULT: the number N of the kernel parameter
# biusvm.NAME=N (a test's knob, BIUS_VM_APPEND="biusvm.NAME=N"), else DEFAULT
kernel_param() {
	local v
	v=$(sed -n "s/.*biusvm\.$1=\([0-9]*\).*/\1/p" /proc/cmdline)
	echo "${v:-$2}"
}

# SLOW: how many times slower than Debian's this kernel is (init passes
# vm-test.sh's biusvm.slow as BIUS_VM_SLOW: 5 on a debug kernel); the waits
# below are scaled by it
SLOW=${BIUS_VM_SLOW:-1}

# volume_mib MIB: a data-heavy test's device size, MIB on Debian's kernels
# and a third of it (at least 16) on a slow kernel: a debug kernel's run
# looks for KASAN, lockdep and other reports, which come from the same code
# paths whatever the volume, while its KASAN-checked copies make each MiB
# 5-10 times dearer
volume_mib() {
	local mib=$1
	((SLOW > 1)) && mib=$((mib / 3 > 16 ? mib / 3 : 16))
	echo "$mib"
}

# wait_until SECONDS CMD...: poll CMD every 0.1 s for SECONDS times SLOW;
# 1 if it never succeeded
wait_until() {
	local limit=$(($1 * SLOW)) i
	shift
	for ((i = 0; i < limit * 10; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	"$@"
}

# require_artifact NAME: fail clearly if the host did not put NAME in the VM
require_artifact() {
	local line
	line=$(grep "^$1 " /bius/MISSING || true)
	[[ -z $line ]] || fail "missing from the VM image, so this test cannot run: $line"
}

# require_bius: bius.ko loaded (modprobe) and biusctl present
require_bius() {
	if [[ -e /bius/MOCK ]]; then	# bench self-test (vm-test.sh -m)
		info "MOCK: biusctl is a null_blk/loop stand-in, not BIUS"
		[[ -d /sys/module/null_blk ]] || modprobe null_blk nr_devices=0
		modprobe loop
		mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
		return 0
	fi
	require_artifact bius.ko
	require_artifact biusctl
	if [[ ! -d /sys/module/bius ]]; then
		modprobe bius || fail "modprobe bius failed"
	fi
	wait_until 5 test -c /dev/bius || fail "/dev/bius did not appear after loading bius.ko"
}

# bius_launch [create args...]: start `biusctl create ARGS` in the
# background (with the assignments of the array BIUS_ENV, if set, in its
# environment) and wait (30 s at most) for the /dev line it prints once the
# disk is live (times SLOW).  Sets BIUS_PID, BIUS_DEV (/dev/biusN), BIUS_NAME (biusN),
# BIUS_ERR (its stderr); on failure returns 1 with the reason in BIUS_WHY.
bius_launch() { daemon_launch biusctl create "$@"; }

# daemon_launch PROGRAM [ARGS...]: bius_launch for any daemon that prints
# its disk's /dev path once live and serves it until a signal (biusctl
# create, the examples of crates/bius/examples).
daemon_launch() {
	local out i line rc=0
	out=$(mktemp /tmp/daemon-out.XXXXXX)
	BIUS_ERR=${out/out/err} BIUS_WHY=
	# (a background job of a non-interactive shell inherits SIGINT ignored:
	# restore it, the daemon must stop on SIGINT)
	env --default-signal=INT,QUIT ${BIUS_ENV[@]+"${BIUS_ENV[@]}"} "$@" \
		>"$out" 2>"$BIUS_ERR" &
	BIUS_PID=$!
	# complete line = non-empty file whose last byte is a newline
	for ((i = 0; i < 300 * SLOW; i++)); do
		[[ -s $out && -z $(tail -c 1 "$out") ]] && break
		if ! kill -0 "$BIUS_PID" 2>/dev/null; then
			wait "$BIUS_PID" || rc=$?
			BIUS_WHY="$* exited (status $rc) without printing its device"
			return 1
		fi
		sleep 0.1
	done
	line=$(head -n 1 "$out")
	if [[ ! $line =~ ^/dev/[A-Za-z0-9_-]+$ ]]; then
		BIUS_WHY="$*: expected one line /dev/<disk> on stdout within $((30 * SLOW)) s, got '$line'"
	elif ! wait_until 5 test -b "$line"; then
		BIUS_WHY="$line is not a block device"
	fi
	if [[ -n $BIUS_WHY ]]; then
		kill "$BIUS_PID" 2>/dev/null
		return 1
	fi
	BIUS_DEV=$line
	BIUS_NAME=${line#/dev/}
}

# bius_start [create args...]: bius_launch, and fail the test if it fails.
bius_start() { daemon_start biusctl create "$@"; }

# daemon_start PROGRAM [ARGS...]: daemon_launch, and fail the test if it fails.
daemon_start() {
	info "$*"
	daemon_launch "$@" || {
		sed "s/^/   $(basename "$1"): /" "$BIUS_ERR"
		fail "$BIUS_WHY"
	}
	[[ -d /sys/block/$BIUS_NAME ]] || fail "/sys/block/$BIUS_NAME does not exist"
	info "daemon pid $BIUS_PID serves $BIUS_DEV ($(blockdev --getsize64 "$BIUS_DEV") bytes)"
}

# bius_stop [-s SIG] PID [DISK]: signal the daemon (default SIGTERM), which
# must exit 0 within 30 s; then /sys/block/DISK must be gone.
# task_stacks PID: each thread of PID, its state and kernel stack (what a
# daemon that does not stop is waiting for)
task_stacks() {
	local t
	for t in /proc/"$1"/task/*; do
		echo "thread ${t##*/}: $(awk '/^State:/ {print $2, $3}' "$t/status" 2>/dev/null) $(cat "$t/comm" 2>/dev/null)"
		sed 's/^/    /' "$t/stack" 2>/dev/null
	done
}

bius_stop() {
	local sig=TERM rc=0
	if [[ $1 == -s ]]; then sig=$2; shift 2; fi
	local pid=$1 disk=${2:-}
	kill -"$sig" "$pid" || fail "daemon $pid is not running"
	wait_until 30 eval "! kill -0 $pid 2>/dev/null" || {
		task_stacks "$pid"
		fail "daemon $pid still running 30 s after SIG$sig"
	}
	wait "$pid" || rc=$?
	[[ $rc -eq 0 ]] || fail "daemon $pid exited with status $rc after SIG$sig (expected 0)"
	if [[ -e /bius/MOCK && $disk == loop* ]]; then
		info "MOCK: loop devices outlive their use; not checking that $disk is gone"
	elif [[ -n $disk ]]; then
		wait_until 10 test ! -e "/sys/block/$disk" || fail "/sys/block/$disk still exists after the daemon exited"
	fi
}

# usage_error WHAT ARGS...: biusctl ARGS must exit 2 with one stderr line
# 'biusctl: error: ...' containing WHAT, and no errno
usage_error() {
	local what=$1 rc=0 err
	shift
	err=$(timeout 20 biusctl "$@" 2>&1 >/dev/null) || rc=$?
	info "biusctl $* -> $rc: $err"
	[[ $rc -eq 2 ]] || fail "biusctl $*: exit status $rc, expected 2"
	[[ $(wc -l <<<"$err") -eq 1 ]] || fail "biusctl $*: not one line on stderr: $err"
	[[ $err == "biusctl: error: "* ]] || fail "biusctl $*: no 'biusctl: error: ' prefix: $err"
	[[ $err == *"$what"* ]] || fail "biusctl $*: the message does not name '$what': $err"
	[[ $err != *"(E"[A-Z]*")"* ]] || fail "biusctl $*: a usage error with an errno: $err"
}

# run_fio LOG FIO-ARGS...: run fio; fail unless it exits 0 and every job
# reports err=0.  Prints the per-job lines and totals.
run_fio() {
	local log=$1 rc=0
	shift
	fio --output="$log" "$@" || rc=$?
	grep -E 'err=|^ +(READ|WRITE):|verify:|error' "$log" | sed 's/^/   fio: /' || true
	[[ $rc -eq 0 ]] || fail "fio exited with status $rc"
	grep -q 'err=' "$log" || fail "fio printed no job results"
	! grep -E 'err= *[1-9]' "$log" >/dev/null || fail "fio jobs reported errors"
}

# disk_count DISK STAT_EXPR: STAT_EXPR, an awk expression over the fields
# of /sys/block/DISK/stat ('$1 + $5': reads and writes completed)
disk_count() { awk "{print $2}" "/sys/block/$1/stat"; }

# io_flowing FIO_PID FIO_OUT DISK STAT_EXPR WHAT: fio (FIO_PID, its output
# in FIO_OUT) has started on DISK (disk_count STAT_EXPR, counting WHAT,
# past 100 within 30 s: fio takes seconds to start on a slow kernel) and
# is still doing I/O (more WHAT within the next second)
io_flowing() {
	local fio_pid=$1 out=$2 disk=$3 stat_expr=$4 what=$5 a b
	wait_until 30 eval '(($(disk_count "$disk" "$stat_expr") > 100))' \
		|| fail "fio's $what did not start on /dev/$disk within $((30 * SLOW)) s ($(disk_count "$disk" "$stat_expr"))"
	a=$(disk_count "$disk" "$stat_expr")
	sleep 1
	b=$(disk_count "$disk" "$stat_expr")
	kill -0 "$fio_pid" 2>/dev/null || { cat "$out"; fail "fio ended before the kill"; }
	[[ $b -gt $a ]] || fail "no $what flowing through /dev/$disk before the kill ($a -> $b)"
	info "$((b - a)) $what completed in the last second"
}

# kill_daemon_under_fio FIO_PID STAT_EXPR WHAT ERR_RE: fio (FIO_PID, its
# output in fio.txt) runs on the disk bius_start started.  Checks that I/O
# flows (STAT_EXPR: awk expression over /sys/block/X/stat counting WHAT),
# kill -9s the daemon, then requires fio to exit non-zero within
# FIO_END_LIMIT s reporting an error that matches ERR_RE, the disk to vanish
# within GONE_LIMIT s, no task in D state and no device in biusctl list.
kill_daemon_under_fio() {
	local fio_pid=$1 stat_expr=$2 what=$3 err_re=$4
	local dev=$BIUS_DEV disk=$BIUS_NAME daemon=$BIUS_PID t rc=0 out stuck

	io_flowing "$fio_pid" fio.txt "$disk" "$stat_expr" "$what"

	step "kill -9 the daemon (pid $daemon)"
	t=$(now)
	kill -KILL "$daemon"
	if ! wait_until "$FIO_END_LIMIT" eval "! kill -0 $fio_pid 2>/dev/null"; then
		ps -eo pid,stat,wchan:32,comm | awk 'NR == 1 || $2 ~ /D/' | sed 's/^/   /'
		kill -KILL "$fio_pid" 2>/dev/null
		fail "fio still running $FIO_END_LIMIT s after the daemon was killed"
	fi
	wait "$fio_pid" || rc=$?
	info "fio ended $(elapsed "$t") s after the kill, status $rc"
	grep -E 'err=|error' fio.txt | sed 's/^/   fio: /' || true
	[[ $rc -ne 0 ]] || fail "fio succeeded although its disk died under it"
	grep -Eq "$err_re" fio.txt || fail "fio reported no error matching /$err_re/"
	wait "$daemon" 2>/dev/null || true

	step "the disk disappears, nothing is left"
	wait_until "$GONE_LIMIT" test ! -e "/sys/block/$disk" || fail "/sys/block/$disk still exists"
	[[ ! -e $dev ]] || wait_until 5 test ! -e "$dev" || fail "$dev still exists"
	stuck=$(stuck_tasks)
	[[ -z $stuck ]] || fail "processes stuck in D state: $stuck"
	out=$(biusctl list) || fail "biusctl list failed"
	printf '%s\n' "$out" | sed 's/^/   list: /'
	[[ $(printf '%s\n' "$out" | wc -l) -eq 1 ]] || fail "biusctl list shows devices after the daemon died"
}

# stuck_tasks: the tasks in D state (uninterruptible), "STAT PID WCHAN COMM"
# a line; nothing if none
stuck_tasks() { ps -eo stat,pid,wchan:32,comm | awk '$1 ~ /^D/'; }

# rmmod_bius: unload bius.ko, which must work once no device exists
rmmod_bius() {
	step "rmmod bius"
	if [[ -e /bius/MOCK ]]; then
		[[ -z $(ls /run/biusmock) ]] || fail "MOCK: devices left: $(ls /run/biusmock)"
		info "MOCK: no module to remove"
		return 0
	fi
	wait_until 10 eval '[[ $(biusctl list | wc -l) -le 1 ]]' \
		|| fail "bius devices still present: $(biusctl list)"
	rmmod bius || fail "rmmod bius failed ($(cat /sys/module/bius/refcnt 2>/dev/null) references)"
	[[ ! -d /sys/module/bius ]] || fail "bius still loaded after rmmod"
}

# make_tree DIR MANIFEST SMALL STEP SIZE...: a tree of random files to
# copy onto a file system: DIR/f<SIZE> for each SIZE, SMALL files
# DIR/small/s<i> of i*STEP bytes, and MANIFEST, the sha256 of every file
# in DIR (also those already there) by path relative to DIR
make_tree() {
	local dir=$1 manifest=$2 small=$3 bytes=$4 s i
	shift 4
	mkdir -p "$dir"
	if ((small > 0)); then mkdir -p "$dir/small"; fi
	for s in "$@"; do head -c "$s" /dev/urandom >"$dir/f$s"; done
	for ((i = 1; i <= small; i++)); do head -c $((i * bytes)) /dev/urandom >"$dir/small/s$i"; done
	(cd "$dir" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$manifest"
}

# check_tree DIR MANIFEST WHEN: every file of MANIFEST is in DIR with its
# checksum, else fail "checksums differ WHEN"
check_tree() {
	(cd "$1" && sha256sum --quiet -c "$2") || fail "checksums differ $3"
}
