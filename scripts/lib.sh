# shellcheck shell=bash
# Common helpers for the BIUS host-side scripts (sourced, not executed).

BIUS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIUS_BUILD="$BIUS_ROOT/build"

log()  { printf '%s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }
section() { printf '\n==== %s ====\n' "$*"; }

# The kernel the VM boots: the newest version that has both a bootable image
# and a module build tree; `make -C driver KVER=$(bius_kver)` builds bius.ko for it.
# Override with BIUS_KVER.
bius_kver() {
	if [[ -n "${BIUS_KVER:-}" ]]; then
		printf '%s\n' "$BIUS_KVER"
		return
	fi
	local v best=""
	for v in $(ls -1 /lib/modules 2>/dev/null | sort -V); do
		[[ -r /boot/vmlinuz-$v && -d /lib/modules/$v/build ]] && best=$v
	done
	[[ -n "$best" ]] || return 1
	printf '%s\n' "$best"
}
