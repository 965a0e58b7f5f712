#!/bin/bash
# Build RocksDB's db_bench with the ZenFS plugin, and ZenFS's `zenfs`
# utility, from source, for the zone-size study on ZenFS.  See
# benches/studies/zenfs.md.
#
#   bash scripts/build-zenfs.sh [-j N] [BUILD_DIR]
#
#   BUILD_DIR   where the sources are checked out and built (default
#               /work/zenfs-build; outside the repository): BUILD_DIR/rocksdb
#               (RocksDB with ZenFS in plugin/zenfs), BUILD_DIR/install
#               (librocksdb.a, headers, rocksdb.pc: what the zenfs utility
#               links against), BUILD_DIR/bin/{db_bench,zenfs} (the result)
#   -j N        make's jobs (default 1); the build runs under nice -n 19
#
# Environment:
#   ROCKSDB_GIT  RocksDB's git repository (default: the fetched snapshot
#                /work/.mirror/facebook+rocksdb/repo if there, else
#                https://github.com/facebook/rocksdb.git)
#   ROCKSDB_REF  the RocksDB release (default v9.10.0: the last release
#                before ZenFS's last commit, 2025-01-21, "fix compile error
#                on latest RocksDB"; ZenFS's README: "RocksDB v6.19.3 or
#                later")
#   ZENFS_GIT    ZenFS's git repository (default: the fetched snapshot
#                /work/.mirror/westerndigitalcorporation+zenfs/repo if
#                there, else https://github.com/westerndigitalcorporation/zenfs.git)
#   ZENFS_REF    default 919c2ebbcdc170525a9abffb8b61a3795b1e6ae5 (master,
#                v2.1.0-65-g919c2eb); needs its tags: the version ZenFS
#                writes in its superblock comes from `git describe`
#
# Needs (Debian bookworm): apt install build-essential pkg-config
#   libzbd-dev libgflags-dev libsnappy-dev libzstd-dev liblz4-dev
#   zlib1g-dev libbz2-dev
# Takes about an hour and a half of one core (353 C++ files; see zenfs.md).
set -euo pipefail

jobs=1
while getopts j:h opt; do
	case $opt in
	j) jobs=$OPTARG ;;
	*) sed -n '2,33s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
B=$(realpath -m "${1:-/work/zenfs-build}")

mirror() { [[ -d $1 ]] && echo "$1" || echo "$2"; }
ROCKSDB_GIT=${ROCKSDB_GIT:-$(mirror /work/.mirror/facebook+rocksdb/repo https://github.com/facebook/rocksdb.git)}
ROCKSDB_REF=${ROCKSDB_REF:-v9.10.0}
ZENFS_GIT=${ZENFS_GIT:-$(mirror /work/.mirror/westerndigitalcorporation+zenfs/repo https://github.com/westerndigitalcorporation/zenfs.git)}
ZENFS_REF=${ZENFS_REF:-919c2ebbcdc170525a9abffb8b61a3795b1e6ae5}

log() { echo "build-zenfs: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

for p in libzbd-dev libgflags-dev libsnappy-dev libzstd-dev liblz4-dev zlib1g-dev libbz2-dev pkg-config; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
		|| die "$p missing: apt install libzbd-dev libgflags-dev libsnappy-dev libzstd-dev liblz4-dev zlib1g-dev libbz2-dev pkg-config"
done

mkdir -p "$B"
R=$B/rocksdb
if [[ ! -d $R/.git ]]; then
	log "RocksDB $ROCKSDB_REF from $ROCKSDB_GIT"
	git clone -q --no-checkout "$ROCKSDB_GIT" "$R"
fi
git -C "$R" checkout -q "$ROCKSDB_REF"
if [[ ! -d $R/plugin/zenfs/.git ]]; then
	log "ZenFS $ZENFS_REF from $ZENFS_GIT"
	git clone -q "$ZENFS_GIT" "$R/plugin/zenfs"
fi
git -C "$R/plugin/zenfs" checkout -q "$ZENFS_REF"
log "RocksDB $(git -C "$R" describe --tags), ZenFS $(git -C "$R/plugin/zenfs" describe --abbrev=7 --dirty)"

# DEBUG_LEVEL=0: optimised (-O2), no assertions; PORTABLE=1: no -march=native
# (the binaries run in a VM); DISABLE_WARNING_AS_ERROR: gcc 12 vs -Werror.
mk=(nice -n 19 make -C "$R" -j"$jobs" DEBUG_LEVEL=0 ROCKSDB_PLUGINS=zenfs PORTABLE=1
	DISABLE_WARNING_AS_ERROR=1 PREFIX="$B/install")
t0=$SECONDS
log "make db_bench (librocksdb.a with ZenFS, then db_bench)"
"${mk[@]}" db_bench
log "make install-static (librocksdb.a, headers, rocksdb.pc into $B/install)"
"${mk[@]}" install-static
log "zenfs utility"
PKG_CONFIG_PATH=$B/install/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} \
	nice -n 19 make -C "$R/plugin/zenfs/util" zenfs
# unstripped (-g) they are 282 and 242 MB; stripped 8.5 and 7.3 MB (for the
# initramfs), the debug info kept in bin/*.dbg
mkdir -p "$B/bin"
for f in "$R/db_bench" "$R/plugin/zenfs/util/zenfs"; do
	n=$(basename "$f")
	objcopy --only-keep-debug "$f" "$B/bin/$n.dbg"
	strip -o "$B/bin/$n" "$f"
	objcopy --add-gnu-debuglink="$B/bin/$n.dbg" "$B/bin/$n"
done
log "built in $((SECONDS - t0)) s: $B/bin/db_bench $B/bin/zenfs ($(ldd "$B/bin/db_bench" | grep -c '=>') shared libraries)"
"$B/bin/zenfs" --version 2>&1 | sed 's/^/build-zenfs: zenfs: /' >&2 || true
