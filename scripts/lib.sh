# shellcheck shell=bash
# Common helpers for the BIUS host-side scripts (sourced, not executed).

BIUS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIUS_BUILD="$BIUS_ROOT/build"

log()  { printf '%s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }
section() { printf '\n==== %s ====\n' "$*"; }

# Timed steps: run_step NAME ends the step before (if any) and starts NAME;
# step_times WHO ends the last one and prints each step's time;
# STEP is the step under way ("" once ended).
STEP="" STEP_T0=0 STEP_TIMES=()
finish_step() {
	[[ -n $STEP ]] || return 0
	STEP_TIMES+=("$(printf '%-44s %4d s' "$STEP" $((SECONDS - STEP_T0)))")
	STEP=""
}
run_step() { finish_step; STEP=$1; STEP_T0=$SECONDS; section "$1"; }
step_times() {
	finish_step
	log ""
	log "$1: step times:"
	printf '  %s\n' "${STEP_TIMES[@]}" >&2
}

# bius_kernels [debug]: every kernel the VM can boot and the driver build
# for (a bootable image and a module build tree), oldest first; the debug
# kernels of scripts/debug-kernel.sh (*-bius-debug) apart: they are never a
# default.  With "debug": those debug kernels only.
bius_kernels() {
	local v debug=${1:-}
	for v in $(ls -1 /lib/modules 2>/dev/null | sort -V); do
		[[ -r /boot/vmlinuz-$v && -d /lib/modules/$v/build ]] || continue
		if [[ $v == *-bius-debug ]]; then [[ -n $debug ]] && echo "$v"
		else [[ -z $debug ]] && echo "$v"; fi
	done
	return 0
}

# bius_kver_word WORD: the kernel WORD of BIUS_KVER names: a release
# (6.12.118+deb12-amd64) as it is, a series (6.12) its newest installed
# release (bius_newest); fails naming a series with none
bius_kver_word() {
	local v=$1
	if [[ $1 =~ ^[0-9]+\.[0-9]+$ ]]; then
		v=$(bius_newest "$1")
		[[ -n $v ]] || { log "no $1 kernel with image + headers: run scripts/setup.sh"; return 1; }
	fi
	printf '%s\n' "$v"
}

# The kernel the VM boots: BIUS_KVER (a release or a series, as for
# bius_kver_word), else the newest of bius_kernels;
# `make -C driver KVER=$(bius_kver)` builds bius.ko for it.
bius_kver() {
	if [[ -n "${BIUS_KVER:-}" ]]; then
		bius_kver_word "$BIUS_KVER"
		return
	fi
	local best
	best=$(bius_kernels | tail -n 1)
	[[ -n "$best" ]] || return 1
	printf '%s\n' "$best"
}

# The kernel series BIUS supports; scripts/setup.sh installs the newest
# Debian release of each, and scripts/test.sh runs the VM suite on each.
BIUS_SERIES=(6.1 6.12)

# bius_kvers [SERIES...]: the kernels scripts/test.sh tests: the words of
# BIUS_KVER if it is set (one kernel, or several separated by spaces),
# else the newest release of each SERIES (default: BIUS_SERIES) that has
# an image and a module build tree (debug kernels apart); each word as for
# bius_kver_word, which fails naming a series with no such kernel.
bius_kvers() {
	local w
	if [[ -n "${BIUS_KVER:-}" ]]; then
		set -- $BIUS_KVER
	elif [[ $# -eq 0 ]]; then
		set -- "${BIUS_SERIES[@]}"
	fi
	for w in "$@"; do
		bius_kver_word "$w" || return 1
	done
}

# bius_newest SERIES [debug]: the newest of `bius_kernels [debug]` in
# SERIES (e.g. 6.12), nothing if none
bius_newest() {
	local v
	bius_kernels "${2:-}" | while read -r v; do [[ $v != "$1".* ]] || echo "$v"; done | tail -n 1
}

# vm_total LOG: each kernel's "N passed, M failed" line of LOG (the
# summaries of scripts/vm-test.sh), then their sum
vm_total() {
	grep -E '^(==== VM test summary|[0-9]+ passed, [0-9]+ failed$)' "$1" \
		| sed -E 's/^==== VM test summary \(run [^,]*, kernel ([^,]*),.*/\1:/' | paste -d' ' - - \
		| sed 's/^/  /' >&2
	grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" \
		| awk '{p += $1; f += $3} END {if (NR) printf "%d passed, %d failed\n", p, f}'
}

# The book's builder (docs/, scripts/book.sh): mdBook at this version,
# built by scripts/setup.sh into build/tools (no serve/watch: only `build`)
BIUS_MDBOOK_VERSION=0.5.4
BIUS_MDBOOK="$BIUS_BUILD/tools/bin/mdbook"
