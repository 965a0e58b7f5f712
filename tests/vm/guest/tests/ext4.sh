#!/bin/bash
# timeout: 240
# ext4 on a BIUS ramdisk: files of many sizes written, read back after a
# remount, e2fsck clean.
source /bius/lib.sh
require_bius

step "create a 128 MiB ramdisk"
bius_start --size 128M --queues 2 --name ext4test ramdisk

step "mkfs.ext4 + mount"
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$BIUS_DEV" || fail "mkfs.ext4 failed"
mkdir -p /mnt/t
mount -t ext4 "$BIUS_DEV" /mnt/t || fail "mount failed"

step "write files (0 B .. 16 MiB, plus 300 small files in nested directories)"
src=/tmp/ext4-src
for d in 1 2 3; do
	mkdir -p "$src/dir$d/sub"
	for i in $(seq 1 100); do
		head -c $((i * 97 + d)) /dev/urandom >"$src/dir$d/sub/s$i"
	done
done
make_tree "$src" /tmp/ext4.sha256 0 0 \
	0 1 511 512 4095 4096 4097 65536 100000 1048576 3145728 5242880 16777216
cp -a "$src/." /mnt/t/
sync
check_tree /mnt/t /tmp/ext4.sha256 "right after writing"
info "$(wc -l </tmp/ext4.sha256) files, $(du -sh /mnt/t | cut -f1)"
df -h /mnt/t | sed 's/^/   /'

step "umount, e2fsck -fn"
umount /mnt/t || fail "umount failed"
e2fsck -fn "$BIUS_DEV" || fail "e2fsck found problems"

step "drop caches, remount, compare checksums with the originals"
blockdev --flushbufs "$BIUS_DEV"
echo 3 >/proc/sys/vm/drop_caches
mount -t ext4 "$BIUS_DEV" /mnt/t || fail "remount failed"
check_tree /mnt/t /tmp/ext4.sha256 "after remount"
n=$(cd /mnt/t && find . -type f | wc -l)
[[ $n == $(wc -l </tmp/ext4.sha256) ]] || fail "file count $n differs after remount"

step "umount, stop the daemon"
umount /mnt/t || fail "umount failed"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "ext4: OK"
