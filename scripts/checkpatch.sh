#!/bin/bash
# Kernel coding style of the driver: checkpatch.pl (from Debian's kernel
# source, extracted by scripts/setup.sh) on every driver source file.
#
#   scripts/checkpatch.sh [FILE...]     (default: the driver's .c/.h files,
#                                        tracked or new, not gitignored)
#
# Fails on any ERROR or WARNING.  Flags: --no-tree (out-of-tree module),
# no --strict (CHECK-level nits are not the kernel's bar for drivers/block),
# LINUX_VERSION_CODE ignored: an out-of-tree module supporting several
# kernels needs version checks (kept in its compat header), where
# CONSTANT_COMPARISON is ignored too: it misfires on the standard idiom
# `LINUX_VERSION_CODE >= KERNEL_VERSION(x, y, z)`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cp="$BIUS_BUILD/checkpatch/checkpatch.pl"
[[ -f $cp ]] || die "$cp missing: run scripts/setup.sh"
cd "$BIUS_ROOT"
if [[ $# -gt 0 ]]; then
	files=("$@")
else
	# the sources, not generated files (*.mod.c is gitignored)
	mapfile -t files < <(git ls-files --cached --others --exclude-standard \
		'driver/*.c' 'driver/*.h' | sort -u)
fi
[[ ${#files[@]} -gt 0 ]] || die "no driver sources found"
checkpatch() {	# checkpatch IGNORE-TYPES FILE...
	local ignore=$1
	shift
	perl "$cp" --no-tree --file --terse --show-types --max-line-length=100 \
		--ignore "$ignore" --summary-file "$@"
}
compat=() other=()
for f in "${files[@]}"; do
	if [[ $f == *compat.h ]]; then compat+=("$f"); else other+=("$f"); fi
done
log "checkpatch: ${files[*]}"
ok=1
base=LINUX_VERSION_CODE,FILE_PATH_CHANGES
[[ ${#other[@]} -eq 0 ]] || checkpatch "$base" "${other[@]}" || ok=0
[[ ${#compat[@]} -eq 0 ]] || checkpatch "$base,CONSTANT_COMPARISON" "${compat[@]}" || ok=0
[[ $ok -eq 1 ]] || die "checkpatch found errors or warnings (see above)"
log "checkpatch: clean"
