#!/bin/bash
# timeout: 180
# zonefs on a zoned BIUS ramdisk, formatted by bius_mkzonefs (zonefs-tools
# is not packaged in Debian 12): mount, one file per zone with the zone's
# capacity as its limit, conventional file data, zone management through
# the file system (truncate to the capacity = FINISH, to 0 = RESET,
# -o explicit-open: open = OPEN, close = CLOSE), all kept over a remount.
#
# Data writes to sequential files, on 6.10 and later only (6.12 here).
# 6.1's zonefs turns a synchronous direct write into a ZONE_APPEND, which
# fails on a zoned null_blk exactly as on BIUS ("zonefs WARNING: Corrupted
# write pointer 16384 for zone at 16384" for the first append of an empty
# zone, which landed correctly, then the fs goes read-only): a kernel
# problem, not BIUS's.  6.12's zonefs writes them as WRITEs at the write
# pointer (its source has no ZONE_APPEND left).  Zone appends are tested
# end to end by zoned-btrfs on every kernel.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius
require_artifact bius_mkzonefs
modprobe zonefs || fail "modprobe zonefs failed"

ZS=8192	# sectors per zone (4 MiB); capacity 3 MiB
CAP=$((3 << 20))
step "create a zoned ramdisk: 64 MiB, 4 MiB zones of 3 MiB capacity, 2 conventional, max open 4, 4 KiB blocks"
bius_start --zoned --size 64M --zone-size 4M --zone-capacity 3M --conv-zones 2 --max-open 4 \
	--block-size 4096 --queues 2 --name zzonefs ramdisk

step "dirty some zones, then format with bius_mkzonefs"
dd if=/dev/urandom of="$BIUS_DEV" bs=64k count=3 seek=$((3 * 64)) oflag=direct status=none || fail "write to zone 3 failed"
blkzone open -o $((4 * ZS)) -c 1 "$BIUS_DEV" || fail "open zone 4 failed"
bius_mkzonefs -L biustest "$BIUS_DEV" || fail "bius_mkzonefs failed"
n=$(blkzone report "$BIUS_DEV" | grep -vc 'zcond: *1(em)') || true
[[ $n -eq 2 ]] || { blkzone report "$BIUS_DEV"; fail "after formatting, $n zones are not empty (expected the 2 conventional ones)"; }

step "mount zonefs"
mkdir -p /mnt/zonefs
mount -t zonefs "$BIUS_DEV" /mnt/zonefs || fail "mount -t zonefs failed"
nfiles() { find "$1" -mindepth 1 -maxdepth 1 -type f | wc -l; }
info "cnv: $(nfiles /mnt/zonefs/cnv) file(s), seq: $(nfiles /mnt/zonefs/seq) files"
[[ $(nfiles /mnt/zonefs/cnv) -eq 1 ]] || fail "expected 1 conventional file (zone 1; zone 0 holds the super block)"
[[ $(nfiles /mnt/zonefs/seq) -eq 14 ]] || fail "expected 14 sequential zone files"
[[ $(stat -c %s /mnt/zonefs/cnv/0) -eq $((4 << 20)) ]] || fail "cnv/0 is $(stat -c %s /mnt/zonefs/cnv/0) bytes, expected the zone size"
for f in /mnt/zonefs/seq/*; do
	[[ $(stat -c %s "$f") -eq 0 ]] || fail "$f is not empty"
done
grep zonefs /proc/mounts | sed 's/^/   /'

step "conventional file cnv/0: direct and buffered writes, read back"
head -c $((1 << 20)) /dev/urandom >/tmp/c0
dd if=/tmp/c0 of=/mnt/zonefs/cnv/0 bs=64k seek=3 oflag=direct conv=notrunc status=none || fail "direct write to cnv/0 failed"
dd if=/tmp/c0 of=/mnt/zonefs/cnv/0 bs=64k seek=32 conv=notrunc,fsync status=none || fail "buffered write to cnv/0 failed"
cmp /tmp/c0 <(dd if=/mnt/zonefs/cnv/0 bs=64k skip=3 count=16 iflag=direct status=none) || fail "cnv/0 direct data differs"
cmp /tmp/c0 <(dd if=/mnt/zonefs/cnv/0 bs=64k skip=32 count=16 status=none) || fail "cnv/0 buffered data differs"
# and on the disk: zone 1 starts at 4 MiB
cmp /tmp/c0 <(dd if="$BIUS_DEV" bs=64k skip=$((64 + 3)) count=16 iflag=direct status=none) || fail "cnv/0's data is not in zone 1 on the disk"

step "zone management through files: truncate to the capacity finishes, to 0 resets"
truncate -s "$CAP" /mnt/zonefs/seq/1 || fail "truncate seq/1 to its capacity failed"
[[ $(zcond "$BIUS_DEV" 3) == FULL ]] || fail "zone 3 is $(zcond "$BIUS_DEV" 3) after truncating seq/1 to its capacity"
[[ $(stat -c %s /mnt/zonefs/seq/1) -eq $CAP ]] || fail "seq/1 is $(stat -c %s /mnt/zonefs/seq/1) bytes"
truncate -s "$CAP" /mnt/zonefs/seq/2 || fail "truncate seq/2 failed"
truncate -s 0 /mnt/zonefs/seq/2 || fail "truncate seq/2 to 0 failed"
[[ $(zcond "$BIUS_DEV" 4) == EMPTY ]] || fail "zone 4 is $(zcond "$BIUS_DEV" 4) after truncating seq/2 to 0"
if truncate -s 4096 /mnt/zonefs/seq/3 2>/dev/null; then fail "truncating seq/3 to 4096 bytes (not 0, not the capacity) succeeded"; fi

if kernel_at_least 6 10; then
	step "sequential file seq/6 (zone 8): synchronous direct appending writes"
	head -c $((1 << 20)) /dev/urandom >/tmp/s6
	dd if=/tmp/s6 of=/mnt/zonefs/seq/6 bs=64k oflag=direct,append conv=notrunc status=none \
		|| fail "direct appending writes to seq/6 failed"
	[[ $(stat -c %s /mnt/zonefs/seq/6) -eq $((1 << 20)) ]] || fail "seq/6 is $(stat -c %s /mnt/zonefs/seq/6) bytes, expected 1 MiB"
	cmp /tmp/s6 <(dd if=/mnt/zonefs/seq/6 bs=64k iflag=direct status=none) || fail "seq/6's data differs"
	cmp /tmp/s6 <(dd if="$BIUS_DEV" bs=64k skip=$((8 * 64)) count=16 iflag=direct status=none) \
		|| fail "seq/6's data is not at the start of zone 8 on the disk"
	[[ $(zcond "$BIUS_DEV" 8) == IMP_OPEN ]] || fail "zone 8 is $(zcond "$BIUS_DEV" 8) after the appends"
	info "1 MiB appended to seq/6 by 64 KiB direct writes: read back, at zone 8's start"
else
	info "data writes to sequential files are not tested before 6.10 (see the header)"
fi

step "remount -o explicit-open: opening a sequential file for writing opens its zone"
umount /mnt/zonefs || fail "umount failed"
mount -t zonefs -o explicit-open "$BIUS_DEV" /mnt/zonefs || fail "mount -o explicit-open failed"
exec 3>>/mnt/zonefs/seq/5
c=$(zcond "$BIUS_DEV" 7)
exec 3>&-
[[ $c == EXP_OPEN ]] || fail "zone 7 is $c while seq/5 is open for writing (explicit-open)"
# shellcheck disable=SC2016 # (eval expands it)
wait_until 5 eval '[[ $(zcond "$BIUS_DEV" 7) == EMPTY ]]' || fail "zone 7 is $(zcond "$BIUS_DEV" 7) after closing seq/5 (expected EMPTY: nothing written)"
info "zone 7: EXP_OPEN while open, EMPTY after close"

step "remount, verify"
umount /mnt/zonefs || fail "umount failed"
echo 3 >/proc/sys/vm/drop_caches
mount -t zonefs "$BIUS_DEV" /mnt/zonefs || fail "remount failed"
[[ $(stat -c %s /mnt/zonefs/seq/1) -eq $CAP ]] || fail "seq/1 is $(stat -c %s /mnt/zonefs/seq/1) bytes after remount"
[[ $(stat -c %s /mnt/zonefs/seq/2) -eq 0 ]] || fail "seq/2 is not empty after remount"
if kernel_at_least 6 10; then
	cmp /tmp/s6 /mnt/zonefs/seq/6 || fail "seq/6's data differs after remount"
fi
cmp /tmp/c0 <(dd if=/mnt/zonefs/cnv/0 bs=64k skip=3 count=16 iflag=direct status=none) || fail "cnv/0 data differs after remount"
umount /mnt/zonefs || fail "umount failed"
zones_agree "$BIUS_DEV"

step "stop the daemon"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "zoned-zonefs: OK"
