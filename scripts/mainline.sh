#!/bin/bash
# BIUS on "mainline": the newest kernel Debian ships (unstable's
# linux-image-amd64), in one command:
#
#   1 a Debian unstable chroot, build/mainline/sid (debootstrap, minbase,
#     plus that kernel, its headers and the compiler they were built with);
#     made once, refreshed (apt-get update + full-upgrade) when it is older
#     than a day or with -r
#   2 that kernel made bootable by the VM bench: /boot/vmlinuz-VER and
#     /lib/modules/VER on this host, without a `build` link, so that
#     bius_kver never picks it: the normal suite keeps its kernel; modules
#     in a compression the host's kmod cannot read are decompressed; a
#     mainline kernel installed so before (and since replaced) is removed
#   3 bius.ko built in the chroot against that kernel's headers, out of the
#     tree in build/mainline/driver (driver/bius.ko stays as it is); any
#     warning fails it, so does a vermagic other than VER
#   4 the VM tests on that kernel with that bius.ko (scripts/vm-test.sh with
#     BIUS_KVER and BIUS_KO); biusctl and bius_badinput built as usual
#     (bius_fuzz and the examples when those tests are named)
#
#   scripts/mainline.sh [-r] [-b] [TEST...]
#
#   -r     refresh the chroot now, whatever its age
#   -b     build only (steps 1-3), no VM
#   TEST   VM tests, names or glob patterns as for scripts/vm-test.sh
#          (default: its whole default suite, as CI runs it on 6.1 and 6.12)
#
# Environment: BIUS_MAINLINE_MIRROR (Debian mirror, default
# http://deb.debian.org/debian), BIUS_MAINLINE_DECOMPRESS=1 (decompress the
# modules even if the host's kmod reads them), BIUS_VM_TIMEOUT (hard limit
# on the VM in seconds, default 3600 here).  Needs root.  On a 2-core
# host about 22 minutes cold (2-5 of them for the chroot) and 20 warm,
# nearly all of it the VM tests, whose time follows the host's load.
# Logs: build/mainline/*.log.  The last line names the kernel and the
# verdict, e.g. "mainline 7.2.13+deb14-amd64: PASS (34 passed, 0 failed)".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The chroot's packages: the kernel, its headers (they pull the compiler
# and linux-kbuild they need) and what building a module takes.
CHROOT_PKGS=(linux-image-amd64 linux-headers-amd64 gcc make kmod libc6-dev)
MIRROR=${BIUS_MAINLINE_MIRROR:-http://deb.debian.org/debian}

usage() { sed -n '/^set -euo/q; 2,$s/^# \{0,1\}//p' "$0"; exit 2; }
refresh=0 build_only=0
while getopts rbh opt; do
	case $opt in
	r) refresh=1 ;;
	b) build_only=1 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
tests=("$@")
[[ ${#tests[@]} -gt 0 ]] || mapfile -t tests < <(bash "$BIUS_ROOT/scripts/vm-test.sh" -l)

[[ $(id -u) -eq 0 ]] || die "mainline.sh needs root (debootstrap, chroot, a kernel into /boot and /lib/modules)"
cd "$BIUS_ROOT"
export PATH="$HOME/.cargo/bin:$PATH" CARGO_TERM_COLOR=never

dir=$BIUS_BUILD/mainline
root=$dir/sid			# the chroot
stamp=$dir/sid.ready		# the chroot is complete; mtime: last refresh
drv=$dir/driver			# the driver's copy, built in the chroot
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock -n 9 || die "another scripts/mainline.sh is running (lock $dir/.lock)"

T0=$SECONDS
kver="" verdict=""
on_exit() {
	local failed_step=$STEP
	step_times mainline.sh
	log "mainline.sh: $((SECONDS - T0)) s in all"
	# the verdict is the last line
	if [[ -n $verdict ]]; then
		echo "$verdict"
	else
		echo "mainline ${kver:-(kernel unknown)}: FAIL (in step '$failed_step', after $((SECONDS - T0)) s)"
	fi
}
trap on_exit EXIT

# in_chroot CMD...: run CMD in the chroot with its own /proc, /sys and
# /dev/pts and the driver's copy at /bius/driver, all mounted in a private
# mount namespace: they go away with it, however the command ends.
in_chroot() {
	mkdir -p "$drv" "$root/bius/driver"
	unshare --mount --propagation private -- /bin/sh -ec '
		root=$1 drv=$2
		shift 2
		mount -t proc proc "$root/proc"
		mount -t sysfs -o ro sysfs "$root/sys"
		mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
		mount --bind "$drv" "$root/bius/driver"
		exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"' \
		sh "$root" "$drv" "$@"
}

# logged NAME CMD...: CMD's output to $dir/NAME.log; on failure show its
# end and die
logged() {
	local name=$1
	shift
	if ! "$@" >"$dir/$name.log" 2>&1; then
		tail -n 25 "$dir/$name.log" | sed 's/^/  /' >&2
		die "$name failed: $* (log: $dir/$name.log)"
	fi
}

chroot_install() {
	logged apt-install in_chroot apt-get install -y "${CHROOT_PKGS[@]}"
}

# --- 1 the Debian unstable chroot ------------------------------------------
run_step "1/4 Debian unstable chroot ($root)"
if ! command -v debootstrap >/dev/null; then
	log "mainline: installing debootstrap"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq debootstrap >&2 \
		|| { apt-get update -qq && apt-get install -y -qq debootstrap >&2; } \
		|| die "cannot install debootstrap (apt-get install debootstrap)"
fi
if [[ ! -f $stamp ]]; then
	# never remove a tree something is mounted in (in_chroot's mounts live
	# in their own namespace: this only guards against other tools)
	if findmnt -rn -o TARGET | grep -q "^$dir/"; then
		die "something is mounted under $dir: unmount it first"
	fi
	rm -rf "$root" "$root.tmp"
	log "mainline: debootstrap sid from $MIRROR (a few minutes)"
	logged debootstrap debootstrap --variant=minbase sid "$root.tmp" "$MIRROR"
	# The archive may serve a snapshot whose Release is past its
	# Valid-Until date; this chroot only builds a module.
	cat >"$root.tmp/etc/apt/apt.conf.d/99bius" <<-'EOF'
		Acquire::Check-Valid-Until "false";
		APT::Install-Recommends "false";
		Dpkg::Use-Pty "0";
	EOF
	mv "$root.tmp" "$root"
	log "mainline: installing ${CHROOT_PKGS[*]} in the chroot"
	logged apt-update in_chroot apt-get update
	chroot_install
	touch "$stamp"
elif [[ $refresh -eq 1 || -n $(find "$stamp" -mmin +1440) ]]; then
	log "mainline: refreshing the chroot (apt-get update, full-upgrade)"
	if in_chroot apt-get update >"$dir/apt-update.log" 2>&1; then
		logged apt-upgrade in_chroot apt-get full-upgrade -y
		chroot_install
		logged apt-autoremove in_chroot apt-get autoremove -y --purge
		touch "$stamp"
	else
		tail -n 5 "$dir/apt-update.log" | sed 's/^/  /' >&2
		log "mainline: WARNING: apt-get update failed (log: $dir/apt-update.log): testing the chroot as it is"
	fi
else
	log "mainline: chroot refreshed $((($(date +%s) - $(stat -c %Y "$stamp")) / 60)) minutes ago (-r refreshes it now)"
fi

# the kernel linux-image-amd64 depends on, e.g. linux-image-7.2.13+deb14-amd64
kver=$(in_chroot dpkg-query -W -f='${Depends}' linux-image-amd64 \
	| grep -o 'linux-image-[0-9][^ ,]*' | head -1 || true)
kver=${kver#linux-image-}
[[ -n $kver ]] || die "cannot tell the kernel of the chroot's linux-image-amd64"
pkgver=$(in_chroot dpkg-query -W -f='${Version}' "linux-image-$kver")
[[ -r $root/boot/vmlinuz-$kver ]] || die "no $root/boot/vmlinuz-$kver"
[[ -f $root/lib/modules/$kver/modules.order ]] || die "no modules in $root/lib/modules/$kver"
in_chroot test -f "/lib/modules/$kver/build/Makefile" \
	|| die "no kernel headers for $kver in the chroot (linux-headers-$kver)"
log "mainline: kernel $kver (linux-image-$kver $pkgver), compiler: $(in_chroot sh -c 'cc --version | head -1')"

# --- 2 the kernel on the host, for the VM bench --------------------------------
run_step "2/4 $kver on the host (/boot, /lib/modules)"
mod=/lib/modules/$kver
marker=.bius-mainline		# in /lib/modules/VER: installed by this script
want="linux-image-$kver $pkgver"
if [[ -e $mod && ! -f $mod/$marker ]]; then
	die "$mod exists and was not installed by mainline.sh: remove it (or its package) first"
fi
# kmod_reads BASE: the host's kmod resolves and reads $kver's modules
# staged under BASE/lib/modules ("" for /)
kmod_reads() {
	local base=${1:-/}
	modprobe -d "$base" -S "$kver" --show-depends f2fs >/dev/null 2>&1 \
		&& [[ $(modinfo -b "$base" -k "$kver" -F vermagic f2fs 2>/dev/null | awk '{print $1}') == "$kver" ]]
}
installed=$(cat "$mod/$marker" 2>/dev/null || true)
if [[ ${installed%% (*} == "$want" && -r /boot/vmlinuz-$kver && ! -e $mod/build ]] \
	&& [[ ${BIUS_MAINLINE_DECOMPRESS:-0} != 1 || $installed == *"(decompressed)" ]] \
	&& kmod_reads; then
	log "mainline: $kver is installed already"
else
	stage=$dir/stage
	rm -rf "$stage"
	mkdir -p "$stage/lib/modules"
	cp -a "$root$mod" "$stage/lib/modules/"
	rm -f "$stage$mod/build" "$stage$mod/source"	# never bius_kver's default
	depmod -b "$stage" "$kver" || die "the host's depmod fails on $kver's modules"
	if [[ ${BIUS_MAINLINE_DECOMPRESS:-0} == 1 ]] || ! kmod_reads "$stage"; then
		log "mainline: decompressing $kver's modules (for the host's kmod, $(kmod --version | head -1))"
		n=0
		while IFS= read -r -d '' f; do
			case $f in
			*.ko.xz) xz -d "$f" ;;
			*.ko.zst) zstd -q -d --rm "$f" ;;
			*.ko.gz) gzip -d "$f" ;;
			esac || die "cannot decompress $f"
			n=$((n + 1))
		done < <(find "$stage$mod" \( -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz' \) -print0)
		log "mainline: $n modules decompressed"
		depmod -b "$stage" "$kver" || die "the host's depmod fails on $kver's modules"
		kmod_reads "$stage" || die "the host's kmod cannot read $kver's modules (modprobe -S $kver --show-depends f2fs, modinfo)"
		want+=" (decompressed)"
	fi
	echo "$want" >"$stage$mod/$marker"
	rm -rf "$mod"
	mv "$stage$mod" "$mod"
	install -m 0644 "$root/boot/vmlinuz-$kver" "/boot/vmlinuz-$kver"
	rm -rf "$stage"
	kmod_reads || die "the host's kmod cannot read $mod"
	log "mainline: installed /boot/vmlinuz-$kver and $mod (no build link)"
fi
# mainline kernels this script installed before, since replaced
for m in /lib/modules/*/"$marker"; do
	[[ -f $m ]] || continue
	old=$(basename "$(dirname "$m")")
	[[ $old == "$kver" ]] && continue
	log "mainline: removing the replaced $old (/boot/vmlinuz-$old, /lib/modules/$old)"
	rm -rf "/lib/modules/$old" "/boot/vmlinuz-$old"
done
default=$(bius_kver || true)
[[ $default != "$kver" ]] || die "bius_kver now picks $kver: it must not be the default kernel"

# --- 3 bius.ko for it, built in the chroot --------------------------------------
run_step "3/4 bius.ko for $kver (in the chroot)"
rm -rf "$drv"
mkdir -p "$drv"
# the driver's sources as they are in the work tree (tracked or new, not
# ignored), as scripts/checkpatch.sh takes them
git ls-files -z --cached --others --exclude-standard -- driver \
	| tar --null -T - -cf - | tar -xf - -C "$drv" --strip-components=1
[[ -f $drv/Makefile && -f $drv/Kbuild ]] || die "copying driver/ to $drv failed"
make -s -C driver version >"$drv/VERSION" || die "make -C driver version failed"
set +e
in_chroot make -C /bius/driver KVER="$kver" 2>&1 | tee "$dir/driver-build.log"
rc=${PIPESTATUS[0]}
set -e
[[ $rc -eq 0 ]] || die "building bius.ko for $kver failed (log: $dir/driver-build.log)"
[[ -f $drv/bius.ko ]] || die "the build made no $drv/bius.ko"
if grep -Ei 'warning:' "$dir/driver-build.log"; then
	die "the driver build printed warnings (above; log: $dir/driver-build.log)"
fi
vermagic=$(modinfo -F vermagic "$drv/bius.ko" | awk '{print $1}')
[[ $vermagic == "$kver" ]] || die "$drv/bius.ko is built for '$vermagic', not $kver"
log "mainline: $drv/bius.ko ($(modinfo -F vermagic "$drv/bius.ko"))"

if [[ $build_only -eq 1 ]]; then
	finish_step
	verdict="mainline $kver: BUILT (bius.ko without warnings; no VM tests, -b)"
	exit 0
fi

# --- 4 the VM tests on it ----------------------------------------------------------
run_step "4/4 VM tests on $kver: ${tests[*]}"
nice -n 10 cargo build -q --release -p biusctl || die "cargo build --release -p biusctl failed"
nice -n 10 make -s -C tests/badinput || die "make -C tests/badinput failed"
# wanted NAME: whether NAME is among the tests asked for (names or glob
# patterns, as vm-test.sh takes them)
wanted() {
	local pat
	for pat in "${tests[@]}"; do
		# shellcheck disable=SC2053 # a glob pattern, on purpose
		[[ $1 == $pat ]] && return 0
	done
	return 1
}
if wanted fuzz; then
	nice -n 10 make -s -C tests/fuzz || die "make -C tests/fuzz failed"
fi
if wanted examples; then
	nice -n 10 cargo build -q --release -p bius --all-features --examples \
		|| die "cargo build --release -p bius --examples failed"
fi
# vm-test.sh caps its hard limit on the VM at 2700 s, which the whole suite
# can pass on a busy machine (each test has its own limit in the guest)
set +e
BIUS_VM_TIMEOUT=${BIUS_VM_TIMEOUT:-3600} BIUS_KVER=$kver BIUS_KO=$drv/bius.ko \
	bash scripts/vm-test.sh "${tests[@]}" 2>&1 | tee "$dir/vm.log"
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$dir/vm.log" | tail -n 1 || true)
results=$(sed -n 's/^  logs: //p' "$dir/vm.log" | tail -n 1)
finish_step
if [[ $rc -eq 0 ]]; then
	verdict="mainline $kver: PASS (${summary:-?})"
else
	verdict="mainline $kver: FAIL (${summary:-the VM run failed}; logs: ${results:-$dir/vm.log})"
fi
exit "$rc"
