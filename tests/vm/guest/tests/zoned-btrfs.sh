#!/bin/bash
# timeout: 300
# btrfs on a zoned BIUS ramdisk (mkfs.btrfs -O zoned): btrfs writes its
# data with ZONE_APPEND and checks where each append landed, so this is the
# end-to-end test of zone appends (zonefs's own append path fails on the
# 6.1 kernel on null_blk too, see zoned-zonefs).  Files written (buffered
# and direct), read back, btrfs check clean, remount, verify.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius
modprobe btrfs || fail "modprobe btrfs failed"
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T || fail "cannot mount tracefs"

step "create a zoned ramdisk: 256 MiB, 4 MiB zones of 3 MiB capacity, max active 14, max append 256 KiB"
bius_start --zoned --size 256M --zone-size 4M --zone-capacity 3M --max-open 14 --max-active 14 \
	--max-append 256K --queues 2 --name zbtrfs ramdisk
majmin=$(tr : , <"/sys/block/$BIUS_NAME/dev")	# as the trace prints it

step "mkfs.btrfs -O zoned, mount"
mkfs.btrfs -f -O zoned -d single -m single -L zbtrfs "$BIUS_DEV" >mkfs.txt 2>&1 || { cat mkfs.txt; fail "mkfs.btrfs failed"; }
grep -Ei 'zone|features|block group|Devices' mkfs.txt | sed 's/^/   mkfs: /'
mkdir -p /mnt/btrfs
mount -t btrfs "$BIUS_DEV" /mnt/btrfs || fail "mount failed"

step "write files (buffered, 0 B .. 8 MiB; one direct 4 MiB), trace the device's requests"
echo >$T/trace
echo 1 >$T/events/block/block_rq_complete/enable
echo 1 >$T/tracing_on
src=/tmp/btrfs-src
make_tree "$src" /tmp/btrfs.sha256 60 677 0 1 4095 4096 65537 1048576 3145728 8388608
cp -a "$src/." /mnt/btrfs/
head -c $((4 << 20)) /dev/urandom >/tmp/direct
dd if=/tmp/direct of=/mnt/btrfs/direct bs=1M oflag=direct status=none || fail "direct write failed"
sync
echo 0 >$T/tracing_on
echo 0 >$T/events/block/block_rq_complete/enable
# zone appends show as op "N" with a length ("ZA" since 6.17, which names
# the zone operations); count those of this disk
appends=$(grep -c "block_rq_complete: $majmin \(N\|ZA\)[A-Z]* () [0-9]* + [1-9]" $T/trace) || true
writes=$(grep -c "block_rq_complete: $majmin W[A-Z]* () [0-9]* + [1-9]" $T/trace) || true
info "requests completed: $appends zone appends, $writes writes"
[[ $appends -gt 0 ]] || fail "btrfs issued no zone append to $BIUS_DEV"
check_tree /mnt/btrfs /tmp/btrfs.sha256 "right after writing"
cmp /tmp/direct /mnt/btrfs/direct || fail "the direct-I/O file differs"
zones_agree "$BIUS_DEV"
zcond_counts "$BIUS_DEV"

step "umount, btrfs check"
umount /mnt/btrfs || fail "umount failed"
btrfs check --readonly "$BIUS_DEV" >check.txt 2>&1 || { cat check.txt; fail "btrfs check found problems"; }
tail -n 3 check.txt | sed 's/^/   check: /'

step "drop caches, remount, verify, delete, overwrite"
echo 3 >/proc/sys/vm/drop_caches
mount -t btrfs "$BIUS_DEV" /mnt/btrfs || fail "remount failed"
check_tree /mnt/btrfs /tmp/btrfs.sha256 "after remount"
cmp /tmp/direct /mnt/btrfs/direct || fail "the direct-I/O file differs after remount"
rm -rf /mnt/btrfs/small
dd if=/tmp/direct of=/mnt/btrfs/f8388608 bs=1M conv=notrunc status=none || fail "overwrite failed"
sync
cmp <(head -c $((4 << 20)) /tmp/direct) <(head -c $((4 << 20)) /mnt/btrfs/f8388608) || fail "the overwritten part differs"
umount /mnt/btrfs || fail "umount failed"
btrfs check --readonly "$BIUS_DEV" >check2.txt 2>&1 || { cat check2.txt; fail "second btrfs check found problems"; }

step "stop the daemon"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "zoned-btrfs: OK"
