#!/bin/bash
# Build and install a debug guest kernel for the VM bench.
#
#   scripts/debug-kernel.sh 6.1|6.12
#
# Builds Debian's own linux-source-<series> (installed with apt-get when
# missing) from `defconfig` + `kvm_guest.config` + scripts/debug-kernel.config
# (KASAN, lockdep, debugobjects, kmemleak, UBSAN, fault injection, and what
# tests/vm needs), checks every option of the fragment made it into .config,
# and installs the result the way Debian's kernels are: /boot/vmlinuz-VER,
# /boot/System.map-VER, /boot/config-VER, /lib/modules/VER with its `build`
# link to the build tree in build/debug-kernel/VER/linux (which must stay:
# `make -C driver KVER=VER` builds against it).  VER is
# <upstream version>-bius-debug, e.g. 6.12.117-bius-debug; the last line
# printed (stdout) is VER.  Boot it with BIUS_KVER=VER scripts/vm-test.sh; the
# default kernel (bius_kver) never picks it.
#
# A finished build of the same source package version and fragment is
# reused: then the script only reinstalls (seconds).  The build runs under
# `nice -n 19 make -j2` (BIUS_KERNEL_JOBS overrides -j).  Must run as root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

series=${1:-}
[[ $# -eq 1 && $series =~ ^6\.(1|12)$ ]] || die "usage: $0 6.1|6.12"
[[ $(id -u) -eq 0 ]] || die "debug-kernel.sh installs packages and kernels: run it as root"

fragment=$BIUS_ROOT/scripts/debug-kernel.config
[[ -r $fragment ]] || die "no config fragment $fragment"
tag=-bius-debug
jobs=${BIUS_KERNEL_JOBS:-2}

# --- packages: the source and the kernel's build dependencies -------------
pkg=linux-source-$series
need=()
for p in "$pkg" gcc make flex bison bc libelf-dev libssl-dev xz-utils kmod cpio; do
	[[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] || need+=("$p")
done
if [[ ${#need[@]} -gt 0 ]]; then
	log "debug-kernel: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >&2 || die "apt-get install ${need[*]} failed"
fi
srcver=$(dpkg-query -W -f='${Version}' "$pkg")
tarball=$(compgen -G "/usr/src/$pkg.tar.*" | head -1 || true)
[[ -n $tarball ]] || die "$pkg $srcver installed no /usr/src/$pkg.tar.*"

# 6.12.117-1~deb12u1 -> 6.12.117 (checked against the tree's Makefile below)
upstream=${srcver%%-*}
kver=$upstream$tag
dir=$BIUS_BUILD/debug-kernel/$kver
tree=$dir/linux
fraghash=$(sha256sum "$fragment" | cut -d' ' -f1)
stamp="source=$pkg $srcver
fragment=$fraghash"
mkdir -p "$dir"

# one run per version at a time (a second one waits)
exec 9>"$dir/.lock"
flock 9

# install: as Debian's packages lay a kernel out, from the finished build
install_kernel() {
	local mods=$dir/staging/lib/modules/$kver
	[[ -d $mods/kernel ]] || die "no installed modules in $mods"
	log "debug-kernel: installing /boot/vmlinuz-$kver and /lib/modules/$kver"
	cp "$tree/arch/x86/boot/bzImage" "/boot/vmlinuz-$kver.tmp"
	mv "/boot/vmlinuz-$kver.tmp" "/boot/vmlinuz-$kver"
	cp "$tree/System.map" "/boot/System.map-$kver"
	cp "$tree/.config" "/boot/config-$kver"
	rm -rf "/lib/modules/$kver"
	cp -a "$mods" "/lib/modules/$kver"
	rm -f "/lib/modules/$kver/build" "/lib/modules/$kver/source"
	ln -s "$tree" "/lib/modules/$kver/build"
	depmod "$kver"
}

if [[ -f $dir/DONE && $(cat "$dir/DONE") == "$stamp" && -f $tree/arch/x86/boot/bzImage ]]; then
	log "debug-kernel: $kver already built from $pkg $srcver with this fragment ($dir)"
	install_kernel
	printf '%s\n' "$kver"
	exit 0
fi
rm -f "$dir/DONE"

# --- source -----------------------------------------------------------------
if [[ ! -f $tree/.bius-source || $(cat "$tree/.bius-source") != "$pkg $srcver" ]]; then
	log "debug-kernel: extracting $tarball into $tree"
	rm -rf "${tree:?}" "${dir:?}/$pkg"
	tar -xf "$tarball" -C "$dir"
	mv "$dir/$pkg" "$tree"
	echo "$pkg $srcver" >"$tree/.bius-source"
fi
unset LOCALVERSION	# the release comes from the fragment alone
mk() { nice -n 19 make -C "$tree" -j"$jobs" "$@"; }
v=$(make -s -C "$tree" kernelversion)
[[ $v == "$upstream" ]] || die "$tarball is kernel $v, expected $upstream from the package version $srcver"

# --- configuration ----------------------------------------------------------
log "debug-kernel: configuring (defconfig + kvm_guest.config + $(basename "$fragment"))"
mk -s defconfig >&2
mk -s kvm_guest.config >&2
(cd "$tree" && scripts/kconfig/merge_config.sh -m -O . .config "$fragment" >"$dir/merge_config.log" 2>&1) \
	|| die "merge_config.sh failed (see $dir/merge_config.log)"
mk -s olddefconfig >&2
# every line of the fragment must hold after olddefconfig
while IFS= read -r line; do
	if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
		opt=${BASH_REMATCH[1]}
		got=$(grep -E "^(# )?${opt}[= ]" "$tree/.config" || true)
		[[ $got == "$line" ]] || die "config option $opt: the fragment wants '$line', .config has '${got:-nothing}' (a missing dependency?)"
	elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
		opt=${BASH_REMATCH[1]}
		got=$(grep -E "^$opt=" "$tree/.config" || true)
		[[ -z $got ]] || die "config option $opt: the fragment wants it unset, .config has '$got' (selected by another option?)"
	fi
done <"$fragment"
mk -s syncconfig >&2	# include/config/auto.conf, which kernelrelease reads
rel=$(make -s -C "$tree" kernelrelease)
[[ $rel == "$kver" ]] || die "the tree's kernel release is '$rel', expected '$kver'"

# --- build ------------------------------------------------------------------
log "debug-kernel: building $kver (nice -n 19 make -j$jobs; log: $dir/build.log)"
t0=$SECONDS
mk >"$dir/build.log" 2>&1 || { tail -n 30 "$dir/build.log" >&2; die "kernel build failed (see $dir/build.log)"; }
rm -rf "$dir/staging"
mk -s modules_install INSTALL_MOD_PATH="$dir/staging" >>"$dir/build.log" 2>&1 \
	|| { tail -n 30 "$dir/build.log" >&2; die "modules_install failed (see $dir/build.log)"; }
secs=$((SECONDS - t0))
log "debug-kernel: built $kver in $((secs / 60)) min $((secs % 60)) s"
echo "$kver $secs s $(date -u +%FT%TZ)" >>"$dir/build-times"
printf '%s\n' "$stamp" >"$dir/DONE"

install_kernel
printf '%s\n' "$kver"
