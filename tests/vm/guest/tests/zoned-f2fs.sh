#!/bin/bash
# timeout: 300
# F2FS on a zoned BIUS ramdisk: mkfs.f2fs -m (metadata in the conventional
# zones), files written and read back, fsck.f2fs clean, remount, verify.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius
modprobe f2fs || fail "modprobe f2fs failed"

step "create a zoned ramdisk: 256 MiB, 4 MiB zones, 8 conventional, max open 8, max active 8"
bius_start --zoned --size 256M --zone-size 4M --conv-zones 8 --max-open 8 --max-active 8 \
	--queues 2 --name zf2fs ramdisk

step "mkfs.f2fs -m"
mkfs.f2fs -f -m -l zf2fs "$BIUS_DEV" >mkfs.txt 2>&1 || { cat mkfs.txt; fail "mkfs.f2fs -m failed"; }
grep -Ei 'zone|conventional|sequential|Info: (Host|.*zoned)|Format successful' mkfs.txt | sed 's/^/   mkfs: /'
mkdir -p /mnt/f2fs
mount -t f2fs "$BIUS_DEV" /mnt/f2fs || fail "mount failed"
grep f2fs /proc/mounts | sed 's/^/   /'

step "write files (0 B .. 8 MiB, 100 small files), check them"
src=/tmp/f2fs-src
make_tree "$src" /tmp/f2fs.sha256 100 331 0 1 4095 4096 65537 1048576 3145728 8388608
cp -a "$src/." /mnt/f2fs/
# and one file written with direct I/O, overwritten (out-of-place on zones)
dd if=/dev/urandom of=/tmp/direct bs=1M count=4 status=none
dd if=/tmp/direct of=/mnt/f2fs/direct bs=1M oflag=direct status=none || fail "direct write failed"
dd if=/tmp/direct of=/mnt/f2fs/direct bs=1M oflag=direct conv=notrunc status=none || fail "direct overwrite failed"
sync
check_tree /mnt/f2fs /tmp/f2fs.sha256 "right after writing"
cmp /tmp/direct /mnt/f2fs/direct || fail "the direct-I/O file differs"
df -h /mnt/f2fs | sed 's/^/   /'

step "umount, fsck.f2fs"
umount /mnt/f2fs || fail "umount failed"
rc=0
fsck.f2fs -f "$BIUS_DEV" >fsck.txt 2>&1 || rc=$?
grep -E '\[FSCK\]|Fail|rror|zone' fsck.txt | sed 's/^/   fsck: /' || true
[[ $rc -eq 0 ]] || fail "fsck.f2fs exited with status $rc"
! grep -q 'Fail' fsck.txt || fail "fsck.f2fs reports failures"

step "drop caches, remount, verify"
echo 3 >/proc/sys/vm/drop_caches
mount -t f2fs "$BIUS_DEV" /mnt/f2fs || fail "remount failed"
check_tree /mnt/f2fs /tmp/f2fs.sha256 "after remount"
cmp /tmp/direct /mnt/f2fs/direct || fail "the direct-I/O file differs after remount"
rm -rf /mnt/f2fs/small
sync
umount /mnt/f2fs || fail "umount failed"
fsck.f2fs -f "$BIUS_DEV" >fsck2.txt 2>&1 || { tail -20 fsck2.txt; fail "second fsck.f2fs failed"; }

step "stop the daemon"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "zoned-f2fs: OK"
