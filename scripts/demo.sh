#!/bin/bash
# The BIUS demo: builds what it uses (bius.ko and biusctl) if needed, boots
# the test VM (QEMU, TCG) and shows, live, a BIUS ramdisk created, listed,
# formatted with ext4, mounted, written and torn down, then a zoned one with
# F2FS on it.  Run scripts/setup.sh first; nothing else needs to be built.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../tests/vm/boot.sh"
cd "$BIUS_ROOT"
export PATH="$HOME/.cargo/bin:$PATH"

kver=$(bius_kver) || die "no kernel with image + headers: run scripts/setup.sh"
section "building bius.ko and biusctl"
make -s -C driver KVER="$kver" || die "make -C driver KVER=$kver failed"
cargo build -q --release -p biusctl || die "cargo build --release -p biusctl failed"

section "building the VM image"
vm_new_run vm-results 5 demo-	# keep 5
initrd=$(vm_build_initramfs "$kver" "$work")
# the demo needs bius.ko and biusctl; the test tools may be missing
if needed=$(grep -E '^(bius\.ko|biusctl) ' "$work/root/bius/MISSING"); then
	die "not in the VM image: $needed"
fi

section "booting the VM (about 10 s to the first command)"
vm_boot "$kver" "$initrd" "$res" 300 biusvm.mode=demo || true
echo
if grep -q '^BIUS-DEMO OK' "$res/console.log"; then
	echo "demo: OK (console log: $res/console.log)"
else
	die "the demo did not complete (console log: $res/console.log)"
fi
