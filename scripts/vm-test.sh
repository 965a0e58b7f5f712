#!/bin/bash
# Run the BIUS integration tests in a QEMU VM (TCG).
#
#   scripts/vm-test.sh [-v] [-l] [TEST...]
#
#   TEST  test names or glob patterns ('fio*') of tests/vm/guest/tests/<name>.sh;
#         default: all, in the order of ALL_TESTS below.
#   -v    stream every test's output to the console (default: only the
#         BIUS-TEST markers, and the tail of a failing test's log)
#   -l    list the tests and exit
#   -m    bench self-test: replace bius.ko + biusctl by a null_blk/loop mock
#         (tests/vm/selftest/biusctl-mock) to check the tests' own logic
#
# Environment: BIUS_KVER (guest kernel, a release or a series, 6.12: its
# newest installed release; default: newest with image + build tree),
# BIUS_KO (the bius.ko to test, default: driver/bius.ko; built for
# BIUS_KVER, e.g. scripts/mainline.sh's), BIUS_VM_TIMEOUT (hard limit on
# the VM run in seconds, default: the sum of the tests' own limits + 120,
# at most 2700, times BIUS_VM_SLOW), BIUS_VM_SLOW (how much slower the
# guest kernel is: every limit, here and in the guest, is multiplied by it;
# default 5 for a *-bius-debug kernel, else 1), BIUS_VM_APPEND (more kernel
# parameters, e.g. a test's biusvm.kill_rounds=30).
#
# Results: build/vm-results/<run>/ (console.log, <test>.log, dmesg.txt (the
# kernel log, streamed as it is written: kept if the guest hangs),
# results.txt), build/vm-results/latest -> the last run.  The verdict comes
# from the guest's own results and end marker, never from QEMU's status.
# Exit status 0 only if every test passed and the guest reached its end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../tests/vm/boot.sh"

# Default order: bench self-test first; the tests ending with `rmmod bius`
# last.
ALL_TESTS=(brd-smoke fio-verify ext4 file-backend transfer-modes badinput fuzz zoned-parity
	zoned-ops zoned-fio zoned-f2fs zoned-zonefs zoned-btrfs zoned-append-emulated zoned-fault zoned-kill
	deferred nbd nbd-hostile file-engine zoned-file-restart models nvme-export stats examples cli module-info
	recovery zoned-recovery-f2fs lifecycle daemon-kill kill-loop poll-queues)

verbose=0
while getopts vlmh opt; do
	case $opt in
	v) verbose=1 ;;
	m) export BIUS_VM_MOCK=1 ;;
	l) printf '%s\n' "${ALL_TESTS[@]}"; exit 0 ;;	# (the default set)
	*) sed -n '2,28s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

# every test file, in the default order first
known=("${ALL_TESTS[@]}")
for f in "$VM_DIR"/guest/tests/*.sh; do
	t=$(basename "$f" .sh)
	[[ " ${known[*]} " == *" $t "* ]] || known+=("$t")
done
tests=()
[[ $# -gt 0 ]] || set -- "${ALL_TESTS[@]}"
for pat in "$@"; do	# names or glob patterns, e.g. 'fio*'
	n=0
	for t in "${known[@]}"; do
		# shellcheck disable=SC2053
		[[ $t == $pat ]] && { tests+=("$t"); n=$((n + 1)); }
	done
	[[ $n -gt 0 ]] || die "no test matches '$pat' (tests: ${known[*]})"
done
kver=$(bius_kver) || die "no kernel with both /boot/vmlinuz-<ver> and /lib/modules/<ver>/build: run scripts/setup.sh"
slow=$(vm_slow "$kver")
# every limit times $slow: (at most 2700 s, unless one test alone needs
# more; the whole default suite takes 1500-2000 s on Debian's kernels)
limit=120 cap=2700
for t in "${tests[@]}"; do
	f="$VM_DIR/guest/tests/$t.sh"
	l=$(sed -n 's/^# timeout: *\([0-9]*\).*/\1/p' "$f" | head -1)
	limit=$((limit + ${l:-300} + 15))
	((${l:-300} + 120 <= cap)) || cap=$((${l:-300} + 120))
done
((limit <= cap)) || limit=$cap
limit=${BIUS_VM_TIMEOUT:-$((limit * slow))}
log "bench: guest kernel $kver (time limits x$slow); tests: ${tests[*]}"

vm_new_run vm-results 30	# keep the results of the last 30 runs

# nbdkit with its memory plugin, the NBD server of the nbd test (as
# scripts/bench.sh adds it); without it that test fails, saying so
extras=()
if plugindir=$(nbdkit --dump-config 2>/dev/null | sed -n 's/^plugindir=//p') \
	&& [[ -f $plugindir/nbdkit-memory-plugin.so ]]; then
	extras+=(--bin nbdkit --bin "$plugindir/nbdkit-memory-plugin.so")
else
	log "bench: WARNING: no nbdkit (with its memory plugin) on the host: the nbd test will FAIL (run scripts/setup.sh)"
fi
# another bius.ko than driver/bius.ko (mkinitramfs.sh checks its vermagic)
if [[ -n ${BIUS_KO:-} ]]; then
	[[ -f $BIUS_KO ]] || die "BIUS_KO=$BIUS_KO: no such file"
	extras+=(--ko "$(realpath "$BIUS_KO")")
	log "bench: bius.ko: $BIUS_KO"
fi
# fio's own zoned suite, for zoned-zbd-suite (not in the default list)
if [[ " ${tests[*]} " == *" zoned-zbd-suite "* ]]; then
	if zbd=$(vm_fio_zbd); then
		extras+=(--file "$zbd/test-zbd-support:/opt/fio/t/zbd/test-zbd-support"
			--file "$zbd/functions:/opt/fio/t/zbd/functions")
	else
		log "bench: WARNING: no fio t/zbd suite: zoned-zbd-suite will FAIL"
	fi
fi
initrd=$(vm_build_initramfs "$kver" "$work" ${extras[@]+"${extras[@]}"})
if [[ -s $work/root/bius/MISSING ]]; then
	log "bench: WARNING: BIUS artefacts missing from the VM; the tests that need them will FAIL:"
	sed 's/^/bench:   /' "$work/root/bius/MISSING" >&2
fi

t0=$SECONDS
qrc=0
vm_boot "$kver" "$initrd" "$res" "$limit" \
	biusvm.mode=test "biusvm.tests=$(IFS=,; echo "${tests[*]}")" "biusvm.verbose=$verbose" \
	"biusvm.slow=$slow" ${BIUS_VM_APPEND:-} || qrc=$?
vm_time=$((SECONDS - t0))

# --- verdict ----------------------------------------------------------------
# Per test: the guest's results.txt if it made it through 9p, else the
# console markers (they survive a guest that dies before exporting).
declare -A status=() dur=()
src="$res/results.txt"
[[ -s $src ]] || src=/dev/null
while read -r name st d; do
	status[$name]=$st dur[$name]=$d
done < <(cat "$src"; sed -n 's/^BIUS-TEST \([^ ]*\) \(PASS\|FAIL\) \([0-9.]*\)s$/\1 \2 \3/p' "$res/console.log")
started=$(sed -n 's/^BIUS-TEST \([^ ]*\) START$/\1/p' "$res/console.log")

ended=0
grep -q '^BIUS-END [0-9]* [0-9]*$' "$res/console.log" && ended=1
[[ -s $res/END ]] && ended=1

passed=0 failed=0
echo
echo "==== VM test summary (run $run, kernel $kver, VM ${vm_time} s) ===="
checks=(kernel-log)	# the guest's checks after the tests; kmemleak where the kernel has it
[[ -z ${status[kmemleak]:-} ]] || checks+=(kmemleak)
for t in "${tests[@]}" "${checks[@]}"; do
	st=${status[$t]:-}
	if [[ -z $st ]]; then
		if grep -qx "$t" <<<"$started"; then
			st=FAIL note="(started, never finished: VM died or hung)"
		else
			st=FAIL note="(never ran)"
		fi
	else
		note="(${dur[$t]} s)"
	fi
	printf '  %-14s %s %s\n' "$t" "$st" "$note"
	if [[ $st == FAIL && -f $res/$t.log ]]; then
		{ grep -m 3 -E '^(FAIL|KERNEL):' "$res/$t.log"; grep -m 1 '^TRACE:' "$res/$t.log"; } | sed 's/^/      /' || true
	fi
	if [[ $st == PASS ]]; then ((++passed)); else ((++failed)); fi
done
if [[ $ended -eq 0 ]]; then
	echo "  the guest never reached its end marker (QEMU status $qrc; see $res/console.log)"
	grep -E 'Kernel panic|BUG:|Oops|BIUS-BENCH-ERROR' "$res/console.log" | head -20 | sed 's/^/  console: /' || true
	# The console shows a report's first line only (loglevel=3); its stacks
	# are in the kernel log the guest streamed out, or, if the guest could
	# no longer stream it, in the log a panic replays on the console (a soft
	# lockup panics the guest, see guest/init): print the first report.
	report='BUG:|WARNING:|Oops|INFO: task|rcu: .*[Ss]tall'
	{
		if grep -qE "$report" "$res/dmesg.txt" 2>/dev/null; then
			cat "$res/dmesg.txt"
		else
			sed -n '/Kernel panic - not syncing/,$p' "$res/console.log"
		fi
	} | grep -m 1 -A 80 -E "$report" | sed 's/^/  kernel: /' || true
fi
# the figures tests print for the record ("RESULT <test>: ...")
for t in "${tests[@]}"; do
	grep -h '^RESULT ' "$res/$t.log" 2>/dev/null | sed 's/^/  /' || true
done
echo "  logs: $res"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $ended -eq 1 ]]
