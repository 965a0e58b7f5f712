#!/bin/bash
# The VM suite on the debug kernels (KASAN, lockdep, ...): one command.
#
#   scripts/test-debug.sh [6.1|6.12|all] [BOOT...]     (default: all, every boot)
#   scripts/test-debug.sh -l                           (the boots, numbered)
#
# For each debug kernel of scripts/debug-kernel.sh installed (the newest
# <series>.*-bius-debug; a series without one is skipped, saying so):
# builds bius.ko against it from a copy of driver/ (in
# build/debug-kernel/driver-<kver>), then runs scripts/vm-test.sh's whole
# default suite, split into VM boots of at most BIUS_DEBUG_BOOT seconds of
# the tests' own limits (default 3000; vm-test.sh scales them by 5 on a debug
# kernel), and a last boot of the loops: kill-loop with
# BIUS_DEBUG_KILL_ROUNDS rounds (default 20), daemon-kill, recovery.  In
# every boot the guest fails a test on any KASAN, lockdep, UBSAN, ODEBUG,
# list, hung-task or stall report in the kernel log, and ends with a
# kmemleak scan.  Builds first what the VM needs (biusctl, the examples,
# tests/badinput, tests/fuzz).  BOOT...: only those boots, by number (the
# whole suite takes hours under TCG: it can be run a few boots at a time).
#
# Each boot's output goes to build/debug-results/<kver>/boot<N>.log, its
# first line the date and the commit of driver/ it ran.  Prints one line per
# kernel, "<kver>: N passed, M failed", and writes the summary of every
# boot on record to build/debug-results/<kver>.txt (a boot run on another
# driver commit than HEAD's is marked "stale").  Exit status 0 only if
# every test of the boots run passed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BIUS_ROOT"
export PATH="$HOME/.cargo/bin:$PATH" CARGO_TERM_COLOR=never

budget=${BIUS_DEBUG_BOOT:-3000}
rounds=${BIUS_DEBUG_KILL_ROUNDS:-20}
LOOPS=(kill-loop daemon-kill recovery)
out=$BIUS_BUILD/debug-results

usage="usage: $0 [6.1|6.12|all] [BOOT...] | -l"
list=0
series=("${BIUS_SERIES[@]}")
case ${1:-all} in
-l) list=1 ;;
all) ;;
6.1 | 6.12) series=("$1") ;;
*) die "$usage" ;;
esac
shift $(($# > 0))
for b in "$@"; do [[ $b =~ ^[1-9][0-9]*$ ]] || die "$usage"; done
# boots: the default suite in runs of at most $budget s of test limits,
# then the loops
boots=()
boot="" sum=0
for t in $(bash scripts/vm-test.sh -l); do
	l=$(sed -n 's/^# timeout: *\([0-9]*\).*/\1/p' "tests/vm/guest/tests/$t.sh" | head -1)
	if [[ -n $boot ]] && ((sum + ${l:-300} > budget)); then
		boots+=("$boot")
		boot="" sum=0
	fi
	boot+="${boot:+ }$t" sum=$((sum + ${l:-300}))
done
boots+=("$boot" loops)
if ((list)); then
	for i in "${!boots[@]}"; do echo "$((i + 1)): ${boots[i]}"; done
	exit 0
fi
picked=("$@")
[[ ${#picked[@]} -gt 0 ]] || mapfile -t picked < <(seq 1 ${#boots[@]})
for b in "${picked[@]}"; do ((b <= ${#boots[@]})) || die "no boot $b (there are ${#boots[@]}: $0 -l)"; done

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

log "test-debug: building biusctl, the examples, tests/badinput and tests/fuzz"
cargo build -q --release -p biusctl
cargo build -q --release -p bius --all-features --examples
make -s -C tests/badinput
make -s -C tests/fuzz

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

# driver_commit: the last commit that changed driver/
driver_commit() { git log -1 --format=%h -- driver; }

# run_boot KVER KO N: boot N on KVER, its output in $out/KVER/bootN.log
run_boot() {
	local kver=$1 ko=$2 n=$3 b=${boots[$3 - 1]} log=$out/$1/boot$3.log
	echo "boot $n on $(date -u '+%F %H:%M UTC'), driver $(driver_commit), commit $(git rev-parse --short HEAD)" >"$log"
	if [[ $b == loops ]]; then
		section "$kver: boot $n, the loops (${LOOPS[*]}, $rounds kill rounds)" | tee -a "$log"
		BIUS_KVER=$kver BIUS_KO=$ko BIUS_VM_APPEND="biusvm.kill_rounds=$rounds" \
			bash scripts/vm-test.sh "${LOOPS[@]}" 2>&1 | tee -a "$log"
	else
		section "$kver: boot $n: $b" | tee -a "$log"
		# shellcheck disable=SC2086 # $b: test names
		BIUS_KVER=$kver BIUS_KO=$ko bash scripts/vm-test.sh $b 2>&1 | tee -a "$log"
	fi
}

# summary KVER: every boot on record for KVER, into $out/KVER.txt (its
# second line the verdict); prints that line
summary() {
	local kver=$1 f head stale total logs=()
	mapfile -t logs < <(find "$out/$kver" -name 'boot*.log' | sort -V)
	{
		echo "scripts/test-debug.sh, summary of $(date -u '+%F %H:%M UTC'), driver $(driver_commit)"
		total=$(cat "${logs[@]}" /dev/null | grep -E '^[0-9]+ passed, [0-9]+ failed$' \
			| awk '{p += $1; f += $3} END {if (NR) printf "%d passed, %d failed", p, f}')
		echo "$kver: ${total:-no boot on record}, ${#logs[@]} of ${#boots[@]} boots"
		for f in "${logs[@]}"; do
			head=$(head -n 1 "$f")
			stale=
			[[ $head == *"driver $(driver_commit),"* ]] || stale=" (stale: driver changed since)"
			echo "$head$stale"
			grep -E '^(  [a-z0-9-]+ +(PASS|FAIL) |      (FAIL|KERNEL):|[0-9]+ passed, [0-9]+ failed$)' "$f"
		done
	} >"$out/$kver.txt"
	sed -n 2p "$out/$kver.txt"
}

# suite KVER: the picked boots on KVER
suite() {
	local kver=$1 ko n rc=0
	mkdir -p "$out/$kver"
	ko=$(build_ko "$kver" 2>&1 | tail -n 1) && [[ -f $ko ]] || return 1
	for n in "${picked[@]}"; do
		run_boot "$kver" "$ko" "$n" || rc=1
	done
	return "$rc"
}

mkdir -p "$out"
failed=0
for kver in "${kvers[@]}"; do
	suite "$kver" || failed=1
done
echo
for kver in "${kvers[@]}"; do summary "$kver"; done
exit "$failed"
