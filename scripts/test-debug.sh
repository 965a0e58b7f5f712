#!/bin/bash
# The VM suite on the debug kernels (KASAN, lockdep, ...): one command.
#
#   scripts/test-debug.sh [6.1|6.12|all]     (default: all)
#
# For each debug kernel of scripts/debug-kernel.sh installed (the newest
# <series>.*-bius-debug; a series without one is skipped, saying so):
# builds bius.ko against it from a copy of driver/ (in
# build/debug-kernel/driver-<kver>), then runs tests/vm/run.sh's whole
# default suite, split into VM boots of at most BIUS_DEBUG_BOOT seconds of
# the tests' own limits (default 3000; run.sh scales them by 5 on a debug
# kernel), and a last boot of the loops: kill-loop with
# BIUS_DEBUG_KILL_ROUNDS rounds (default 20), daemon-kill, recovery.  In
# every boot the guest fails a test on any KASAN, lockdep, UBSAN, ODEBUG,
# list, hung-task or stall report in the kernel log, and ends with a
# kmemleak scan.  Builds first what the VM needs (biusctl, the examples,
# tests/badinput).
#
# Prints one line per kernel, "<kver>: N passed, M failed (T s)", written
# with the date, the commit and each boot's summary to
# build/debug-results/<kver>.txt (the full output: <kver>.log).  Exit
# status 0 only if every test passed on every kernel.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BIUS_ROOT"
export PATH="$HOME/.cargo/bin:$PATH" CARGO_TERM_COLOR=never

budget=${BIUS_DEBUG_BOOT:-3000}
rounds=${BIUS_DEBUG_KILL_ROUNDS:-20}
LOOPS=(kill-loop daemon-kill recovery)
out=$BIUS_BUILD/debug-results

case ${1:-all} in
all) series=("${BIUS_SERIES[@]}") ;;
6.1 | 6.12) series=("$1") ;;
*) die "usage: $0 [6.1|6.12|all]" ;;
esac
kvers=()
for s in "${series[@]}"; do
	v=$(bius_newest "$s" debug)
	if [[ -n $v ]]; then
		kvers+=("$v")
	else
		log "test-debug: no $s debug kernel installed (scripts/debug-kernel.sh $s): skipped"
	fi
done
[[ ${#kvers[@]} -gt 0 ]] || die "no debug kernel installed: run scripts/debug-kernel.sh ${series[*]}"

# boots: the default suite in runs of at most $budget s of test limits
boots=()
boot="" sum=0
for t in $(bash tests/vm/run.sh -l); do
	l=$(sed -n 's/^# timeout: *\([0-9]*\).*/\1/p' "tests/vm/guest/tests/$t.sh" | head -1)
	if [[ -n $boot ]] && ((sum + ${l:-300} > budget)); then
		boots+=("$boot")
		boot="" sum=0
	fi
	boot+="${boot:+ }$t" sum=$((sum + ${l:-300}))
done
boots+=("$boot")

log "test-debug: building biusctl, the examples and tests/badinput"
cargo build -q --release -p biusctl
cargo build -q --release -p bius --all-features --examples
make -s -C tests/badinput

# build_ko KVER: bius.ko for KVER out of a copy of driver/; prints its path
build_ko() {
	local d=$BIUS_BUILD/debug-kernel/driver-$1
	rm -rf "$d" && cp -a driver "$d" && make -s -C driver version >"$d/VERSION" \
		&& make -s -C "$d" KVER="$1" clean >&2 && make -s -C "$d" KVER="$1" >&2 \
		|| { log "test-debug: building bius.ko for $1 failed"; return 1; }
	[[ $(modinfo -F vermagic "$d/bius.ko" | awk '{print $1}') == "$1" ]] \
		|| { log "test-debug: $d/bius.ko is not built for $1"; return 1; }
	echo "$d/bius.ko"
}

# suite KVER: every boot on KVER; the summary in $out/KVER.txt, whose
# second line is the verdict
suite() {
	local kver=$1 ko t0=$SECONDS rc=0 i=0 b total
	local log=$out/$kver.log
	: >"$log"
	ko=$(build_ko "$kver" 2>&1 | tee -a "$log" | tail -n 1) && [[ -f $ko ]] || rc=1
	[[ $rc -eq 0 ]] || set --	# no module: no boot, 1 failed
	[[ $rc -ne 0 ]] || set -- "${boots[@]}" loops
	for b in "$@"; do
		i=$((i + 1))
		if [[ $b == loops ]]; then
			section "$kver: boot $i, the loops (${LOOPS[*]}, $rounds kill rounds)" | tee -a "$log"
			BIUS_KVER=$kver BIUS_KO=$ko BIUS_VM_APPEND="biusvm.kill_rounds=$rounds" \
				bash tests/vm/run.sh "${LOOPS[@]}" 2>&1 | tee -a "$log" || rc=1
		else
			section "$kver: boot $i: $b" | tee -a "$log"
			# shellcheck disable=SC2086 # $b: test names
			BIUS_KVER=$kver BIUS_KO=$ko bash tests/vm/run.sh $b 2>&1 | tee -a "$log" || rc=1
		fi
	done
	total=$(vm_total "$log" 2>/dev/null || true)
	{
		echo "scripts/test-debug.sh on $(date -u '+%F %H:%M UTC'), commit $(git rev-parse --short HEAD)"
		echo "$kver: ${total:-0 passed, 1 failed} ($((SECONDS - t0)) s)"
		grep -E '^(==== VM test summary|  [a-z0-9-]+ +(PASS|FAIL) |      (FAIL|KERNEL):|[0-9]+ passed, [0-9]+ failed$)' "$log"
	} >"$out/$kver.txt"
	return "$rc"
}

mkdir -p "$out"
failed=0
for kver in "${kvers[@]}"; do
	suite "$kver" || failed=1
done
echo
for kver in "${kvers[@]}"; do sed -n 2p "$out/$kver.txt"; done
exit "$failed"
