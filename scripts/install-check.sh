#!/bin/bash
# Checks the installation paths of a real host, here, without changing the
# host (everything happens in a temporary directory, removed on exit):
#
#   1 DKMS: the tree `make install-dkms` installs (sources, uapi header,
#     generated dkms.conf and VERSION) passes `dkms add` and `dkms build`
#     for the VM's kernel (bius_kver), with dkms's own trees, and the signing
#     key it makes, in the temporary directory; the module's version,
#     vermagic and signature are checked, then `dkms remove --all`.  Nothing
#     under /usr/src, /var/lib/dkms, /lib/modules or /etc may change.
#   2 the udev rules parse (udevadm test in a private mount namespace).
#   3 `make install DESTDIR=...`: every expected file, the unit checked by
#     `systemd-analyze verify` against the staged biusctl, then `make
#     uninstall` leaves no file.  Needs target/release/biusctl (built here
#     if missing); when it lacks the `manpages`/`completions` subcommands,
#     make install must refuse clearly, and the unit is verified against
#     the built biusctl instead.
#   4 `make install-module DESTDIR=...` stages bius.ko under lib/modules.
#
#   scripts/install-check.sh          (as root: dkms wants root)
#
# Environment: BIUSCTL=PATH checks step 3 with that biusctl instead of
# target/release/biusctl.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BIUS_ROOT"
export PATH="$HOME/.cargo/bin:$PATH:/usr/sbin:/sbin"

kver=$(bius_kver) || die "no kernel with image + headers: run scripts/setup.sh"
ver=$(make --no-print-directory -s version)
[[ -n $ver ]] || die "make version printed nothing"
arch=$(uname -m)
for tool in dkms systemd-analyze udevadm unshare modinfo; do
	command -v "$tool" >/dev/null || die "$tool missing (run scripts/setup.sh)"
done

tmp=$(mktemp -d /tmp/bius-install-check.XXXXXX)
cleanup() {
	local rc=$?
	# dkms registered nothing outside $tmp; remove what is inside it first
	if [[ -d $tmp/dkms/bius ]]; then
		dkms remove "bius/$ver" --all --dkmstree "$tmp/dkms" --sourcetree "$tmp/src" \
			--installtree "$tmp/modules" >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
touch "$tmp/stamp"
watched=(/usr/src /var/lib/dkms "/lib/modules/$kver" /etc/dkms /etc/udev /etc/systemd /etc/bius)
# module_in DIR: the path of bius.ko in DIR, compressed as the kernel's own
# modules are where they are (dkms and modules_install do so: 6.12's
# bius.ko.xz); fails if there is none
module_in() {
	local f
	for f in "$1"/bius.ko{,.xz,.zst,.gz}; do
		[[ -f $f ]] && { echo "$f"; return 0; }
	done
	return 1
}

# changed_on_host: what changed under the watched host directories since the stamp
changed_on_host() {
	local d
	for d in "${watched[@]}"; do
		[[ -e $d ]] && find "$d" -newer "$tmp/stamp" -print
	done
	return 0
}

section "1 DKMS: add + build bius/$ver for $kver (trees in $tmp)"
src="$tmp/src/bius-$ver"
make --no-print-directory -s dkms-tree DKMS_TREE="$src"
log "DKMS source tree: $(cd "$src" && find . -type f | sort | tr '\n' ' ')"
[[ -f $src/include/uapi/linux/bius.h ]] || die "the DKMS tree lacks include/uapi/linux/bius.h"
grep -qx "PACKAGE_VERSION=\"$ver\"" "$src/dkms.conf" || die "dkms.conf: PACKAGE_VERSION is not \"$ver\""
! grep -q '@BIUS_VERSION@' "$src/dkms.conf" || die "dkms.conf still has @BIUS_VERSION@"
mkdir -p "$tmp/dkms" "$tmp/modules"
dk=(--dkmstree "$tmp/dkms" --sourcetree "$tmp/src" --installtree "$tmp/modules")
# dkms signs what it builds; its key would go to /var/lib/dkms: keep it here
export mok_signing_key="$tmp/mok.key" mok_certificate="$tmp/mok.pub"
dkms add "bius/$ver" "${dk[@]}"
if ! dkms build "bius/$ver" -k "$kver" "${dk[@]}"; then
	find "$tmp/dkms/bius/$ver" -name make.log -exec cat {} + >&2 || true
	die "dkms build failed"
fi
dkms status "${dk[@]}" bius
moddir="$tmp/dkms/bius/$ver/$kver/$arch/module"
ko=$(module_in "$moddir") || die "dkms build left no bius.ko (or a compressed one) in $moddir"
mv_ver=$(modinfo -F version "$ko")
[[ $mv_ver == "$ver" ]] || die "DKMS bius.ko has version '$mv_ver', expected $ver"
vm=$(modinfo -F vermagic "$ko" | awk '{print $1}')
[[ $vm == "$kver" ]] || die "DKMS bius.ko is built for $vm, expected $kver"
makelog=$(find "$tmp/dkms/bius/$ver" -name make.log | head -n 1)
[[ -n $makelog ]] || die "dkms kept no make.log"
if grep -Ei 'warning:' "$makelog"; then
	die "the DKMS build printed warnings (above)"
fi
signer=$(modinfo -F signer "$ko" || true)
if [[ -f $mok_signing_key ]]; then
	[[ -n $signer ]] || die "dkms made a signing key but bius.ko is not signed"
	log "signed by: $signer (a throwaway key, as dkms does with /var/lib/dkms/mok.key)"
else
	log "dkms did not sign (no sign-file for $kver)"
fi
dkms remove "bius/$ver" --all "${dk[@]}"
[[ ! -e $tmp/dkms/bius ]] || die "dkms remove --all left $tmp/dkms/bius"
log "dkms add/build/remove: OK (bius.ko $mv_ver for $vm)"

section "2 udev rules parse"
rules="$tmp/rules.d"
mkdir -p "$rules"
cp packaging/udev/60-bius.rules "$rules/"
# only our file, in a private mount namespace: the host's rules stay
out=$(unshare -m bash -c 'mount --bind "$1" /etc/udev/rules.d &&
	udevadm test --action=add /sys/class/mem/null 2>&1' _ "$rules") || true
grep -q 'Reading rules file: /etc/udev/rules.d/60-bius.rules' <<<"$out" \
	|| die "udevadm test did not read 60-bius.rules: $out"
if grep -E '^/etc/udev/rules.d/60-bius.rules:[0-9]+' <<<"$out"; then
	die "udevadm found problems in packaging/udev/60-bius.rules (above)"
fi
log "udev rules: no parse errors"

section "3 make install DESTDIR=... / make uninstall"
# verify_unit UNIT BIUSCTL: systemd-analyze verify of UNIT with its ExecStart
# pointing at BIUSCTL; any message fails
verify_unit() {
	local unit=$1 bin=$2 d="$tmp/verify" msg
	mkdir -p "$d"
	sed "s|^ExecStart=[^ ]*/biusctl |ExecStart=$bin |" "$unit" >"$d/bius@.service"
	grep -q "^ExecStart=$bin " "$d/bius@.service" || die "no ExecStart=.../biusctl line in $unit"
	msg=$(cd "$d" && systemd-analyze verify --man=no ./bius@.service 2>&1) \
		|| die "systemd-analyze verify $unit failed: $msg"
	[[ -z $msg ]] || die "systemd-analyze verify $unit: $msg"
	log "systemd-analyze verify $unit: clean"
}
biusctl=${BIUSCTL:-$BIUS_ROOT/target/release/biusctl}
if [[ -z ${BIUSCTL:-} ]]; then
	log "building target/release/biusctl"
	cargo build -q --release -p biusctl || die "cargo build --release -p biusctl failed"
fi
[[ -x $biusctl ]] || die "no biusctl at $biusctl"
export BIUSCTL=$biusctl	# for make install
dest="$tmp/dest"
mkdir -p "$dest"
has_gen=1
for sub in manpages completions; do
	"$biusctl" help "$sub" >/dev/null 2>&1 || has_gen=0
done
if [[ $has_gen == 0 ]]; then
	log "SKIPPED: $biusctl has no 'manpages'/'completions' subcommand yet,"
	log "so make install (which installs their output) must refuse; checking that"
	if err=$(make --no-print-directory install DESTDIR="$dest" 2>&1); then
		die "make install succeeded without biusctl manpages/completions"
	fi
	grep -q "has no '.*' subcommand" <<<"$err" || die "make install failed unclearly: $err"
	log "make install refused: $(grep "subcommand" <<<"$err" | head -n 1)"
	[[ -z $(find "$dest" -mindepth 1) ]] || die "the refused make install left files in DESTDIR"
	verify_unit packaging/systemd/bius@.service "$biusctl"
else
	prefix=/usr/local
	make --no-print-directory install DESTDIR="$dest" PREFIX="$prefix"
	expected=(
		"$prefix/bin/biusctl"
		"$prefix/share/man/man1/biusctl.1"
		"$prefix/share/bash-completion/completions/biusctl"
		"$prefix/share/zsh/site-functions/_biusctl"
		"$prefix/share/fish/vendor_completions.d/biusctl.fish"
		/etc/udev/rules.d/60-bius.rules
		/etc/systemd/system/bius@.service
		"$prefix/share/doc/bius/examples/modules-load.d/bius.conf"
		"$prefix/share/doc/bius/examples/modprobe.d/bius.conf"
		"$prefix/share/bius/installed-files"
	)
	if [[ -f packaging/example.toml ]]; then
		expected+=(/etc/bius/example.toml "$prefix/share/doc/bius/examples/example.toml")
	else
		log "(no packaging/example.toml yet: /etc/bius/example.toml not expected)"
	fi
	for f in "${expected[@]}"; do
		[[ -s $dest$f ]] || die "make install did not install $f"
	done
	[[ -x $dest$prefix/bin/biusctl ]] || die "$prefix/bin/biusctl is not executable"
	"$dest$prefix/bin/biusctl" --version >/dev/null
	grep -q "^ExecStart=$prefix/bin/biusctl create --config /etc/bius/%i.toml" \
		"$dest/etc/systemd/system/bius@.service" || die "the installed unit's ExecStart is not $prefix/bin/biusctl"
	bash -n "$dest$prefix/share/bash-completion/completions/biusctl" || die "the bash completion does not parse"
	man -l "$dest$prefix/share/man/man1/biusctl.1" >/dev/null 2>&1 || log "(man could not render biusctl.1; man-db missing?)"
	nman=$(find "$dest$prefix/share/man/man1" -name '*.1' | wc -l)
	log "installed: ${#expected[@]} checked files, $nman man pages, $(find "$dest" -type f | wc -l) files in all"
	# every installed file is in the manifest, and nothing else is there
	diff <(cd "$dest" && find . -type f | sed 's|^\.||' | sort) \
		<(sort "$dest$prefix/share/bius/installed-files") \
		|| die "files installed and the manifest differ (above)"
	verify_unit "$dest/etc/systemd/system/bius@.service" "$dest$prefix/bin/biusctl"
	make --no-print-directory uninstall DESTDIR="$dest" PREFIX="$prefix"
	left=$(find "$dest" ! -type d)
	[[ -z $left ]] || die "make uninstall left: $left"
	log "make uninstall: no file left ($(find "$dest" -mindepth 1 -type d | wc -l) empty standard directories stay)"
fi

section "4 make install-module DESTDIR=... (hosts without dkms)"
make --no-print-directory -s install-module KVER="$kver" DESTDIR="$tmp/modroot"
staged=$(module_in "$tmp/modroot/lib/modules/$kver/extra") \
	|| die "make install-module staged no bius.ko (or a compressed one) in $tmp/modroot/lib/modules/$kver/extra"
[[ $(modinfo -F version "$staged") == "$ver" ]] || die "staged $(basename "$staged") is not version $ver"
make --no-print-directory -s uninstall-module KVER="$kver" DESTDIR="$tmp/modroot"
[[ ! -e $staged ]] || die "make uninstall-module left $staged"
log "install-module / uninstall-module: OK"

section "the host is unchanged"
changed=$(changed_on_host)
[[ -z $changed ]] || die "changed on the host: $changed"
log "nothing changed under ${watched[*]}"
log "install-check: OK"
