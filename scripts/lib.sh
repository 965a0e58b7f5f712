# shellcheck shell=bash
# Common helpers for the BIUS host-side scripts (sourced, not executed).

BIUS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIUS_BUILD="$BIUS_ROOT/build"

log()  { printf '%s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }
section() { printf '\n==== %s ====\n' "$*"; }

# The kernel the VM boots: the newest version that has both a bootable image
# and a module build tree; `make -C driver KVER=$(bius_kver)` builds bius.ko for it.
# Debug kernels of scripts/debug-kernel.sh (*-bius-debug) are never the
# default: name one with BIUS_KVER.
bius_kver() {
	if [[ -n "${BIUS_KVER:-}" ]]; then
		printf '%s\n' "$BIUS_KVER"
		return
	fi
	local v best=""
	for v in $(ls -1 /lib/modules 2>/dev/null | sort -V); do
		[[ $v == *-bius-debug ]] && continue
		[[ -r /boot/vmlinuz-$v && -d /lib/modules/$v/build ]] && best=$v
	done
	[[ -n "$best" ]] || return 1
	printf '%s\n' "$best"
}

# The kernel series BIUS supports; scripts/setup.sh installs the newest
# Debian release of each, and scripts/test.sh runs the VM suite on each.
BIUS_SERIES=(6.1 6.12)

# bius_kvers [SERIES...]: the kernels scripts/test.sh tests: the words of
# BIUS_KVER if it is set (one version, or several separated by spaces),
# else the newest release of each SERIES (default: BIUS_SERIES) that has an
# image and a module build tree (debug kernels apart).  Fails naming a
# series with no such kernel.
bius_kvers() {
	if [[ -n "${BIUS_KVER:-}" ]]; then
		printf '%s\n' $BIUS_KVER
		return
	fi
	local s v best
	[[ $# -gt 0 ]] || set -- "${BIUS_SERIES[@]}"
	for s in "$@"; do
		best=""
		for v in $(ls -1 /lib/modules 2>/dev/null | sort -V); do
			[[ $v == "$s".* && $v != *-bius-debug ]] || continue
			[[ -r /boot/vmlinuz-$v && -d /lib/modules/$v/build ]] && best=$v
		done
		[[ -n $best ]] || { log "no $s kernel with image + headers: run scripts/setup.sh"; return 1; }
		printf '%s\n' "$best"
	done
}
