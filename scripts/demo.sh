#!/bin/bash
# The BIUS demo: builds the driver and biusctl if needed, boots the test VM
# (QEMU, TCG) and shows, live, a BIUS ramdisk being created, listed, formatted
# with ext4, mounted, written, and torn down.  Run scripts/setup.sh first.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../tests/vm/lib.sh"
cd "$BIUS_ROOT"
export PATH="$HOME/.cargo/bin:$PATH"

kver=$(bius_kver) || die "no kernel with image + headers: run scripts/setup.sh"
section "building bius.ko and biusctl"
make -s -C driver || die "make -C driver failed"
cargo build -q --release -p biusctl || die "cargo build --release -p biusctl failed"

section "building the VM image"
vm_new_run vm-results 5 demo-	# keep 5
initrd=$(vm_build_initramfs "$kver" "$work")
[[ ! -s $work/root/bius/MISSING ]] || die "not in the VM image: $(cat "$work/root/bius/MISSING")"

section "booting the VM (about 10 s to the first command)"
vm_boot "$kver" "$initrd" "$res" 300 biusvm.mode=demo || true
echo
if grep -q '^BIUS-DEMO OK' "$res/console.log"; then
	echo "demo: OK (console log: $res/console.log)"
else
	die "the demo did not complete (console log: $res/console.log)"
fi
