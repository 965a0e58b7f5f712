#!/bin/bash
# The published crates package and build from their packages alone.
#
#   scripts/package-check.sh [CARGO-PACKAGE-OPTION...]   (e.g. --no-verify)
#
# cargo package for bius-sys, bius, bius-backends, bius-model and biusctl in one run:
# cargo resolves the unpublished workspace dependencies (bius-sys for bius,
# ...) against the crates it has just packaged, and verifies each package by
# building it from its .crate file.  Needs the crates.io index (network).
# --allow-dirty: what is checked is the packages' content, not whether the
# work tree is committed.
#
# Then, in the .crate files: README.md, LICENSE-MIT and LICENSE-APACHE in
# each; bius-sys's include/linux/bius.h a regular file identical to the
# driver's uapi header (in the repository it is a symbolic link to it) with
# its license, LICENSE-GPL-2.0; no file over 512 KiB, no package over 1 MiB.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BIUS_ROOT"
export PATH="$HOME/.cargo/bin:$PATH"

crates=(bius-sys bius bius-backends bius-model biusctl)
header=driver/include/uapi/linux/bius.h
max_file=$((512 * 1024)) max_crate=$((1024 * 1024))

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
[[ -n $version ]] || die "no workspace version in Cargo.toml"

# cargo (1.95) treats the packages it verifies the others against (bius-sys
# for bius, ...; a local registry overlay) as registry crates: immutable.  It
# unpacks them into $CARGO_HOME/registry/src/-<hash>/ once, and builds them
# once, so a later run would verify biusctl against the bius of the first.
# Hence a target directory of its own, where every bius* unit is one of
# these and is removed, and the unpacked copies removed too.  The registry
# dependencies stay built there: a first run builds them all (~2 min).
target=$BIUS_BUILD/package-target
for c in "${crates[@]}"; do
	rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$c-$version"
done
rm -rf "$target"/package "$target"/debug/{.fingerprint,build,deps,incremental}/{bius,libbius}*

t0=$SECONDS
CARGO_TARGET_DIR=$target cargo package --allow-dirty "${crates[@]/#/--package=}" "$@"
log "package-check: cargo package took $((SECONDS - t0)) s"

for c in "${crates[@]}"; do
	crate=$target/package/$c-$version.crate
	[[ -f $crate ]] || die "$crate missing"
	size=$(stat -c %s "$crate")
	((size <= max_crate)) || die "$crate is $size bytes (limit $max_crate)"
	listing=$(tar -tvzf "$crate")
	for f in README.md LICENSE-MIT LICENSE-APACHE; do
		grep -q " $c-$version/$f\$" <<<"$listing" || die "$crate lacks $f"
	done
	awk -v max=$max_file '$3 > max { print; bad = 1 } END { exit bad }' \
		<<<"$listing" || die "$crate holds files over $max_file bytes (above)"
	log "package-check: $c-$version.crate: $(wc -l <<<"$listing") files, $size bytes"
done

crate=$target/package/bius-sys-$version.crate
tar -tvzf "$crate" bius-sys-$version/include/linux/bius.h | grep -q '^-' ||
	die "$crate: include/linux/bius.h is missing or not a regular file"
tar -xzOf "$crate" bius-sys-$version/include/linux/bius.h | cmp -s - "$header" ||
	die "$crate: include/linux/bius.h differs from $header"
tar -tzf "$crate" bius-sys-$version/LICENSE-GPL-2.0 >/dev/null ||
	die "$crate lacks LICENSE-GPL-2.0 (the header's license)"

log "package-check: all ${#crates[@]} packages OK in $((SECONDS - t0)) s"
