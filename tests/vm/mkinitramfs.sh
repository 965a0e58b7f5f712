#!/bin/bash
# Build the test VM's initramfs.
#
#   tests/vm/mkinitramfs.sh [OPTION...] KVER OUTPUT.cpio.gz
#                                        (stages in OUTPUT's dir/root)
#
# Contents: busybox-static (fallback applets), host binaries with their full
# ldd closure (incl. the loader), kernel modules for KVER with dependencies
# resolved by the host's kmod, and, when built, bius.ko, biusctl,
# bius_badinput, bius_fuzz (and its corpus), the tools of tests/vm/tools
# and the examples of crates/bius; plus the guest side of the bench
# (tests/vm/guest).
# Missing BIUS artefacts are listed in /bius/MISSING so the tests that need
# them fail with a clear message.
#
# Options (each may be repeated; scripts/bench.sh adds what only it needs):
#   --bin NAME|PATH  a host binary with its ldd closure, at its own path; a
#                    NAME is looked up in /usr/sbin:/usr/bin:/sbin:/bin, then
#                    $PATH, and is reachable in the guest by that name
#   --module NAME    a kernel module of KVER, with its dependencies
#   --file SRC:DEST  the host file SRC as DEST in the image (copied after
#                    the guest side, so it may add to or replace /bius/...)
#   --ko PATH        this bius.ko instead of driver/bius.ko
#   --biusctl PATH   this biusctl instead of target/release/biusctl
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

usage="usage: $0 [--bin NAME|PATH] [--module NAME] [--file SRC:DEST] [--ko PATH] [--biusctl PATH]... KVER OUTPUT.cpio.gz"
extra_bins=() extra_modules=() extra_files=() ko_opt="" biusctl_opt="" args=()
while [[ $# -gt 0 ]]; do
	case $1 in
	--bin | --module | --file | --ko | --biusctl)
		[[ $# -ge 2 ]] || die "$usage"
		case $1 in
		--bin) extra_bins+=("$2") ;;
		--module) extra_modules+=("$2") ;;
		--file)
			[[ $2 == ?*:/?* ]] || die "--file wants SRC:/DEST, got '$2'"
			extra_files+=("$2") ;;
		--ko) ko_opt=$2 ;;
		--biusctl) biusctl_opt=$2 ;;
		esac
		shift 2 ;;
	-*) die "$usage" ;;
	*) args+=("$1"); shift ;;
	esac
done
[[ ${#args[@]} -eq 2 ]] || die "$usage"
kver=${args[0]} out=${args[1]}
moddir=/lib/modules/$kver
[[ -d $moddir/kernel ]] || die "no modules for kernel $kver in $moddir"

root="$(dirname "$out")/root"	# staging dir, next to the output
rm -rf "$root"
mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,proc,sys,dev,tmp,run,mnt,results,root,var/tmp}
# merged /usr, as on the host, so library paths printed by ldd just work
ln -s usr/bin "$root/bin"
ln -s usr/sbin "$root/sbin"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"

# --- binaries -------------------------------------------------------------
declare -A copied=()
copy_file() {	# copy $1 (following symlinks) to the same path in $root
	local src=$1 dst="$root$1"
	[[ -n ${copied[$src]:-} ]] && return 0
	copied[$src]=1
	mkdir -p "$(dirname "$dst")"
	cp -L "$src" "$dst"
}
copy_with_libs() {	# a binary plus every shared object ldd lists, loader included
	copy_file "$1"
	copy_libs "$1"
}
copy_libs() {
	local bin=$1 word
	# ldd prints "lib => /path (0x..)" and "/lib64/ld-linux-x86-64.so.2 (0x..)";
	# every word starting with / is a file to copy (no regex: see vm-notes).
	for word in $(ldd "$bin" 2>/dev/null || true); do
		[[ $word == /* && -e $word ]] && copy_file "$word"
	done
	return 0
}

# Host tools the tests use; real binaries, not busybox applets, because
# their options and output are what the tests parse.
TOOLS=(bash fio mkfs.ext4 mke2fs e2fsck dumpe2fs mkfs.f2fs fsck.f2fs mkfs.btrfs btrfs blkzone blkdiscard blockdev lsblk
	findmnt losetup mount umount dmesg cmp sha256sum md5sum dd timeout stat
	truncate head tail cat cp mv rm ln ls mkdir sort uniq wc tr cut seq sleep
	date sync grep sed awk tee xargs od df du env kill pgrep pkill ps sysctl
	kmod nproc uname id printf test mktemp basename dirname readlink realpath
	touch chmod find diff flock mountpoint jq nvme chrt)
for t in "${TOOLS[@]}"; do
	p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin type -P "$t" || true)
	[[ -n $p && $p == /* ]] || die "host tool '$t' not found (run scripts/setup.sh)"
	p=$(readlink -f "$p")
	copy_with_libs "$p"
	# keep the name the tool was asked by (e.g. mkfs.ext4 -> mke2fs)
	[[ -e $root/usr/bin/$t ]] || ln -s "$p" "$root/usr/bin/$t"
done
# extra binaries (--bin); a NAME not found in /usr/bin or /usr/sbin of the
# image gets a link /usr/bin/NAME
for b in "${extra_bins[@]}"; do
	p=$b
	if [[ $b != */* ]]; then
		p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH type -P "$b") || die "host binary '$b' not found"
		p=$(readlink -f "$p")
	fi
	[[ -f $p ]] || die "no file $p (--bin $b)"
	copy_with_libs "$p"
	[[ $b == */* || -e $root/usr/bin/$b || -e $root/usr/sbin/$b ]] || ln -s "$p" "$root/usr/bin/$b"
done
for t in modprobe insmod rmmod lsmod modinfo depmod; do
	ln -sf /usr/bin/kmod "$root/usr/sbin/$t"
done
copy_file /etc/mke2fs.conf
[[ -e /etc/e2fsck.conf ]] && copy_file /etc/e2fsck.conf

# busybox for everything else (poweroff, ...); never shadows a real binary
cp /bin/busybox "$root/usr/bin/busybox"
for a in $(/bin/busybox --list); do
	[[ -e $root/usr/bin/$a || -e $root/usr/sbin/$a ]] || ln -s busybox "$root/usr/bin/$a"
done
echo "root:x:0:0:root:/root:/bin/bash" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"

# --- kernel modules -------------------------------------------------------
MODULES=(virtio_pci 9pnet_virtio 9p brd null_blk loop ext4 f2fs btrfs configfs zonefs
	"${extra_modules[@]}")
for m in "${MODULES[@]}"; do
	# modprobe prints "insmod /path/x.ko [opts]" for each module in load order
	while read -r verb path _; do
		[[ $verb == insmod ]] && copy_file "$path"
	done < <(modprobe -S "$kver" --show-depends "$m" 2>/dev/null) || true
	modprobe -S "$kver" --show-depends "$m" >/dev/null 2>&1 \
		|| die "module $m not available for $kver"
done
# the NVMe target and fabrics host (nvme-export), where KVER has them:
# Debian's 6.1 has no nvme-loop, and the test uses what there is
for m in nvmet nvmet-tcp nvme-tcp nvme-loop; do
	while read -r verb path _; do
		[[ $verb == insmod ]] && copy_file "$path"
	done < <(modprobe -S "$kver" --show-depends "$m" 2>/dev/null) || true
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
	copy_file "$moddir/$f"
done

missing=()
ko=${ko_opt:-$BIUS_ROOT/driver/bius.ko}
if [[ -f $ko ]]; then
	vm=$(modinfo -F vermagic "$ko" | awk '{print $1}')
	if [[ $vm != "$kver" ]]; then
		log "mkinitramfs: WARNING: $ko is built for '$vm', the VM boots $kver: not included"
		missing+=("bius.ko (built for $vm, VM kernel is $kver: rebuild with make -C driver KVER=$kver)")
	else
		mkdir -p "$root$moddir/extra"
		cp "$ko" "$root$moddir/extra/bius.ko"
		# and the in-tree modules bius.ko depends on, if any
		for m in $(modinfo -F depends "$ko" | tr ',' ' '); do
			while read -r verb path _; do
				[[ $verb == insmod ]] && copy_file "$path"
			done < <(modprobe -S "$kver" --show-depends "$m")
		done
	fi
else
	missing+=("bius.ko (build it: make -C driver KVER=$kver)")
fi
depmod -b "$root" "$kver"

# --- BIUS user-space binaries ---------------------------------------------
add_bin() {	# add_bin PATH HOW-TO-BUILD [NAME]: as /usr/bin/NAME (PATH's name)
	local name=${3:-$(basename "$1")}
	if [[ -x $1 ]]; then
		cp "$1" "$root/usr/bin/$name"
		copy_libs "$1"
	else
		missing+=("$name (build it: $2)")
	fi
}
if [[ ${BIUS_VM_MOCK:-0} == 1 ]]; then
	# bench self-test only: a null_blk/loop stand-in for bius.ko + biusctl
	cp "$BIUS_ROOT/tests/vm/selftest/biusctl-mock" "$root/usr/bin/biusctl"
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | grep -v '^bius.ko ')
	mkdir -p "$root/bius" && echo "biusctl is a null_blk/loop mock" >"$root/bius/MOCK"
else
	add_bin "${biusctl_opt:-$BIUS_ROOT/target/release/biusctl}" "cargo build --release -p biusctl" biusctl
fi
add_bin "$BIUS_ROOT/tests/badinput/bius_badinput" "make -C tests/badinput"
add_bin "$BIUS_ROOT/tests/fuzz/bius_fuzz" "make -C tests/fuzz"
# the test tools (tests/vm/tools, one per .c file): small, built here if need be
make -s -C "$BIUS_ROOT/tests/vm/tools" >&2 || true
for src in "$BIUS_ROOT"/tests/vm/tools/*.c; do
	add_bin "${src%.c}" "make -C tests/vm/tools"
done
# the examples of crates/bius (one per .rs file), as their own names
for src in "$BIUS_ROOT"/crates/bius/examples/*.rs; do
	add_bin "$BIUS_ROOT/target/release/examples/$(basename "$src" .rs)" \
		"cargo build --release -p bius --all-features --examples"
done

# --- the guest side of the bench ------------------------------------------
mkdir -p "$root/bius"
[[ ${BIUS_VM_MOCK:-0} == 1 ]] || rm -f "$root/bius/MOCK"
cp -r "$BIUS_ROOT/tests/vm/guest/." "$root/bius/"
mv "$root/bius/init" "$root/init"
cp "$BIUS_ROOT/tests/fuzz/corpus" "$root/bius/fuzz-corpus"
chmod +x "$root/init"
for f in "${extra_files[@]}"; do	# --file SRC:DEST (DEST has no colon)
	mkdir -p "$(dirname "$root${f##*:}")"
	cp "${f%:*}" "$root${f##*:}" || die "--file $f: cannot copy ${f%:*}"
done
printf '%s\n' "${missing[@]}" >"$root/bius/MISSING"
[[ ${#missing[@]} -eq 0 ]] && : >"$root/bius/MISSING"
echo "$kver" >"$root/bius/KVER"

mkdir -p "$(dirname "$out")"
(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) \
	| gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
for m in "${missing[@]}"; do log "mkinitramfs: MISSING: $m"; done
log "mkinitramfs: $out ($(du -h "$out" | cut -f1))"
