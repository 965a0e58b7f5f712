#!/bin/bash
# Install everything the BIUS build, checks and QEMU test bench need.
# Idempotent: when everything is present it only checks and returns quickly.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $(id -u) -eq 0 ]] || die "setup.sh installs packages: run it as root"

# Rust: rustup with the toolchain pinned in rust-toolchain.toml is expected to
# be present already; cargo resolves the pin from the repo root.
export PATH="$HOME/.cargo/bin:$PATH"
if ! (cd "$BIUS_ROOT" && cargo --version >/dev/null 2>&1); then
	die "cargo does not work in $BIUS_ROOT: install rustup (https://rustup.rs) and the toolchain pinned in rust-toolchain.toml"
fi
for c in fmt clippy; do
	(cd "$BIUS_ROOT" && cargo "$c" --version >/dev/null 2>&1) \
		|| die "cargo $c does not work: rustup component add $( [[ $c == fmt ]] && echo rustfmt || echo clippy)"
done
log "setup: $(cd "$BIUS_ROOT" && cargo --version)"

# The book's builder, mdBook (BIUS_MDBOOK_VERSION), into build/tools: built
# from crates.io (a few minutes) in the background while apt works.
mdbook_pid=""
if [[ ! -x $BIUS_MDBOOK ]] || [[ $("$BIUS_MDBOOK" --version) != "mdbook v$BIUS_MDBOOK_VERSION" ]]; then
	log "setup: building mdbook $BIUS_MDBOOK_VERSION into build/tools (in the background)"
	mkdir -p "$BIUS_BUILD"
	(cd "$BIUS_ROOT" && cargo install --quiet --locked --force --root "$BIUS_BUILD/tools" \
		--no-default-features --features search --version "$BIUS_MDBOOK_VERSION" mdbook) \
		>"$BIUS_BUILD/mdbook-install.log" 2>&1 &
	mdbook_pid=$!
fi

PKGS=(qemu-system-x86 busybox-static cpio fio e2fsprogs f2fs-tools btrfs-progs util-linux kmod
	procps coreutils libclang-dev clang nbdkit nbd-client make gcc perl xz-utils
	gnuplot-nox python3 python3-matplotlib dkms jq systemd udev nvme-cli linkchecker)
# dpkg-query prints "<pkg> installed" for installed ones; unknown ones error out.
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PKGS[@]}" 2>/dev/null || true)
missing=()
for p in "${PKGS[@]}"; do
	grep -qx "$p installed" <<<"$installed" || missing+=("$p")
done
# A kernel with image + headers of each supported series (BIUS_SERIES),
# installed by Debian's metapackages: bookworm's own (6.1) and its 6.12 LTS.
declare -A series_pkgs=(
	[6.1]="linux-image-amd64 linux-headers-amd64"
	[6.12]="linux-image-6.12-amd64 linux-headers-6.12-amd64"
)
for s in "${BIUS_SERIES[@]}"; do
	[[ -n ${series_pkgs[$s]:-} ]] || die "setup.sh does not know the packages of kernel series $s"
	if ! BIUS_KVER="" bius_kvers "$s" >/dev/null 2>&1; then
		read -ra pkgs <<<"${series_pkgs[$s]}"
		missing+=("${pkgs[@]}")
	fi
done

apt_updated=0
apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	if [[ $apt_updated -eq 0 ]]; then
		apt-get update -qq
		apt_updated=1
	fi
	apt-get install -y -qq --no-install-recommends "$@"
}

if [[ ${#missing[@]} -gt 0 ]]; then
	log "setup: installing: ${missing[*]}"
	apt_install "${missing[@]}"
fi
kvers=$(BIUS_KVER="" bius_kvers) || die "a supported kernel series has no /boot/vmlinuz-<ver> and /lib/modules/<ver>/build after the installation"
kver=$(bius_kver) || die "no kernel with both /boot/vmlinuz-<ver> and /lib/modules/<ver>/build"
log "setup: guest kernels $(echo $kvers) (default: $kver)"

# checkpatch.pl and its data files, from Debian's kernel source tarball,
# extracted once into build/checkpatch/.
cp_dir="$BIUS_BUILD/checkpatch"
cp_files=(checkpatch.pl spelling.txt const_structs.checkpatch)
have_cp=1
for f in "${cp_files[@]}"; do [[ -s $cp_dir/$f ]] || have_cp=0; done
if [[ $have_cp -eq 0 ]]; then
	kseries=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$kver")
	tarball=$(ls /usr/src/linux-source-"$kseries".tar.* 2>/dev/null | head -1 || true)
	if [[ -z $tarball ]]; then
		log "setup: installing linux-source-$kseries for checkpatch.pl"
		apt_install "linux-source-$kseries"
		tarball=$(ls /usr/src/linux-source-"$kseries".tar.* 2>/dev/null | head -1 || true)
		[[ -n $tarball ]] || die "linux-source-$kseries installed no /usr/src/linux-source-$kseries.tar.*"
	fi
	log "setup: extracting checkpatch from $tarball"
	tmp="$BIUS_BUILD/checkpatch.tmp"
	rm -rf "$tmp" && mkdir -p "$tmp"
	top=linux-source-$kseries
	tar -xf "$tarball" -C "$tmp" "${cp_files[@]/#/$top/scripts/}"
	for f in "${cp_files[@]}"; do
		[[ -s $tmp/$top/scripts/$f ]] || die "$f missing in $tarball"
	done
	rm -rf "$cp_dir" && mv "$tmp/$top/scripts" "$cp_dir" && rm -rf "$tmp"
fi
"$cp_dir/checkpatch.pl" --version >/dev/null 2>&1 || perl -c "$cp_dir/checkpatch.pl" >/dev/null 2>&1 \
	|| die "$cp_dir/checkpatch.pl does not run"

if [[ -n $mdbook_pid ]]; then
	wait "$mdbook_pid" || { tail -20 "$BIUS_BUILD/mdbook-install.log" >&2; die "cargo install mdbook failed (log: build/mdbook-install.log)"; }
fi
log "setup: $("$BIUS_MDBOOK" --version), $(linkchecker --version 2>/dev/null | head -1)"
log "setup: OK"
