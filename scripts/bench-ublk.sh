#!/bin/bash
# ublk for the VM bench, built at bench time into build/ublk/<kver>/ and
# never committed: the ublk RAM server of benches/tools/ublk-ram (libublk
# from crates.io) and rublk (crates.io: its null and zoned targets); and
# the driver: a kernel whose module tree has ublk_drv (Debian's 6.12:
# CONFIG_BLK_DEV_UBLK=m) uses that module, nothing is built (bench.sh puts
# it into the initramfs, the guest loads it with modprobe); for one without
# it (Debian's 6.1 does not build ublk, CONFIG_BLK_DEV_UBLK is not set),
# ublk_drv.ko out of tree from Debian's kernel source (the kernel's own GPL
# source, linux-source-<series>).
#
#   scripts/bench-ublk.sh KVER      prints the directory holding ublk-ram,
#                                   bin/rublk and, when built, ublk_drv.ko
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUBLK_VERSION=0.2.15
kver=${1:?usage: bench-ublk.sh KVER}
out=$BIUS_BUILD/ublk/$kver
target=$BIUS_BUILD/ublk/target
mkdir -p "$out"

if modprobe -S "$kver" --show-depends ublk_drv >/dev/null 2>&1; then
	log "bench-ublk: ublk_drv: Debian's module of $kver (nothing to build)"
	rm -f "$out/ublk_drv.ko"
elif [[ ! -s $out/ublk_drv.ko ]]; then
	kseries=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$kver")
	tarball=$(ls /usr/src/linux-source-"$kseries".tar.* 2>/dev/null | head -1 || true)
	[[ -n $tarball ]] || die "no /usr/src/linux-source-$kseries.tar.* (scripts/setup.sh installs it)"
	src=$out/src
	rm -rf "$src" && mkdir -p "$src"
	tar -xf "$tarball" -C "$src" --strip-components=3 "linux-source-$kseries/drivers/block/ublk_drv.c" \
		|| die "no drivers/block/ublk_drv.c in $tarball"
	echo 'obj-m := ublk_drv.o' >"$src/Kbuild"
	log "bench-ublk: building ublk_drv.ko for $kver from $tarball"
	make -C "/lib/modules/$kver/build" M="$src" modules >"$out/ublk_drv.log" 2>&1 \
		|| { tail -n 20 "$out/ublk_drv.log" >&2; die "building ublk_drv.ko failed (log: $out/ublk_drv.log)"; }
	cp "$src/ublk_drv.ko" "$out/ublk_drv.ko"
fi

log "bench-ublk: building the ublk RAM server (benches/tools/ublk-ram)"
CARGO_TARGET_DIR=$target cargo build -q --release --manifest-path "$BIUS_ROOT/benches/tools/ublk-ram/Cargo.toml" \
	|| die "building benches/tools/ublk-ram failed"
cp "$target/release/ublk-ram" "$out/ublk-ram"

if [[ ! -x $out/bin/rublk ]]; then
	log "bench-ublk: installing rublk $RUBLK_VERSION from crates.io"
	CARGO_TARGET_DIR=$target cargo install -q --locked --no-default-features \
		--version "$RUBLK_VERSION" --root "$out" rublk || die "installing rublk $RUBLK_VERSION failed"
fi
echo "$out"
