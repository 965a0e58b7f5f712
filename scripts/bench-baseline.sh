#!/bin/bash
# The VM benchmark with a baseline: biusctl built from an earlier commit
# runs the ramdisk devices of every transfer mode next to the current build,
# in the same boot and the same repetition loop (devices bius-ram-<mode>@base;
# report.py's table "Baseline" gives new/old per job).
#
#   scripts/bench-baseline.sh [-b] REV [bench.sh options and knobs...]
#
#   -b   only build the baseline biusctl and print its path
#
# REV is built (cargo build --release -p biusctl) in a temporary git
# worktree of this repository with its own target directory,
# build/baseline/target (kept: cargo reuses it for the next revision); the
# binary is cached as build/baseline/biusctl-<commit> and the worktree
# removed.  Then scripts/bench.sh runs with BIUS_BENCH_BASELINE set to it
# (e.g. `scripts/bench-baseline.sh bdfd5e8 -q only=bius-ram-copy`).
# The old biusctl must speak the ABI of the current bius.ko.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build_only=0
if [[ ${1:-} == -b ]]; then
	build_only=1
	shift
fi
[[ $# -ge 1 && $1 != -* ]] || { sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 2; }
rev=$1
shift
commit=$(git -C "$BIUS_ROOT" rev-parse --verify --quiet "$rev^{commit}") || die "$rev: no such commit"
base=$BIUS_BUILD/baseline
bin=$base/biusctl-$commit
if [[ ! -x $bin ]]; then
	mkdir -p "$base"
	tree=$base/tree-$commit-$$
	# shellcheck disable=SC2064 # expanded now, on purpose
	trap "git -C '$BIUS_ROOT' worktree remove --force '$tree' 2>/dev/null || rm -rf '$tree'; git -C '$BIUS_ROOT' worktree prune" EXIT
	log "bench-baseline: building biusctl of $rev (${commit:0:12}) in $tree"
	git -C "$BIUS_ROOT" worktree add --detach --quiet "$tree" "$commit" || die "git worktree add failed"
	t0=$SECONDS
	(cd "$tree" && CARGO_TARGET_DIR=$base/target nice -n 10 cargo build -q --release -p biusctl) \
		|| die "cargo build of $rev failed"
	cp "$base/target/release/biusctl" "$bin.tmp"
	mv "$bin.tmp" "$bin"
	log "bench-baseline: built in $((SECONDS - t0)) s: $bin"
	git -C "$BIUS_ROOT" worktree remove --force "$tree"
	trap - EXIT
fi
if [[ $build_only == 1 ]]; then
	printf '%s\n' "$bin"
	exit 0
fi
export BIUS_BENCH_BASELINE=$bin BIUS_BENCH_BASELINE_REV="$rev (${commit:0:12})"
exec "$BIUS_ROOT/scripts/bench.sh" "$@"
