#!/bin/bash
# timeout: 600
# The ABI fuzzer (tests/fuzz, bius_fuzz): first the seeds of its corpus
# (tests/fuzz/corpus: "SEED SECONDS NOTE" lines, each once the seed of a
# kernel report), then one run of biusvm.fuzz_seconds=N seconds (default
# 60) with the seed biusvm.fuzz_seed=S (default: a new one, printed so
# that a failure can be replayed: BIUS_VM_APPEND="biusvm.fuzz_seed=S
# biusvm.fuzz_seconds=N" scripts/vm-test.sh fuzz).  Every run must exit 0 (no
# invariant of the ABI broken, no worker hung) and leave the kernel log
# clean; the harness checks the log again after the test.  The limit (x5
# on a debug kernel) leaves room for a 30-minute run there.
source /bius/lib.sh
source /bius/klog.sh
require_artifact bius.ko
require_artifact bius_fuzz
[[ -d /sys/module/bius ]] || modprobe bius || fail "modprobe bius failed"
wait_until 5 test -c /dev/bius || fail "/dev/bius did not appear"

SEED=$(kernel_param fuzz_seed "$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')")
SECS=$(kernel_param fuzz_seconds 60)
KLOG_SEEN=$(dmesg | wc -l)

# actions_before SECONDS: the workers' last actions before that time
actions_before() {
	awk -v t="$1" '/^T / && $2 <= t' fuzz.out | tail -n 40 | sed 's/^T /   action at /'
}

# blocked_watch: once a hung task is reported, every blocked task's stack
# (sysrq-w) into the kernel log, so that the report shows who holds what
# the hung one waits for; in the background until killed.
blocked_watch() {
	local from
	from=$(dmesg | wc -l)
	echo 1 >/proc/sys/kernel/sysrq
	until dmesg | tail -n +"$from" | grep 'blocked for more than' >/dev/null; do
		sleep 1
	done
	echo w >/proc/sysrq-trigger
}

# fuzz SEED SECONDS WHAT: one run; its kernel log must stay clean
fuzz() {
	local rc=0 t watch
	step "bius_fuzz --seed $1 --seconds $2 ($3)"
	blocked_watch &
	watch=$!
	bius_fuzz --seed "$1" --seconds "$2" --trace >fuzz.out 2>&1 || rc=$?
	kill "$watch" 2>/dev/null || true
	wait "$watch" 2>/dev/null || true
	grep -Ev '^(T |  (action|errno) )' fuzz.out || true
	grep -E '^  (action|errno) ' fuzz.out | sed 's/^/   /'
	if ! klog_check "bius_fuzz seed $1" >klog.out; then
		grep -E '^(FAIL|KERNEL|TRACE)' klog.out
		t=$(sed -n 's/^KERNEL: \[ *\([0-9.]*\)\].*/\1/p' klog.out | head -n 1)
		echo "the workers' last actions before the first report (at $t s):"
		actions_before "$t"
		fail "kernel report with seed $1 ($2 s)"
	fi
	if [[ $rc -ne 0 ]]; then
		cp fuzz.out "/results/fuzz-$1.out"	# the whole trace, on the host
		t=$(sed -n 's/^INVARIANT BROKEN (pid [0-9]*, at \([0-9.]*\)).*/\1/p' fuzz.out | head -n 1)
		if [[ -n $t ]]; then
			echo "the workers' last actions before the first broken invariant (at $t s):"
			actions_before "$t"
		fi
		fail "bius_fuzz --seed $1 --seconds $2 exited with status $rc (its output: fuzz-$1.out in the results)"
	fi
	echo "RESULT fuzz: $(sed -n 's/^SUMMARY //p' fuzz.out)"
}

while read -r seed secs note; do
	[[ $seed =~ ^[0-9]+$ ]] && fuzz "$seed" "$secs" "corpus: $note"
done </bius/fuzz-corpus
fuzz "$SEED" "$SECS" "this run's seed"
