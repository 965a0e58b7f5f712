#!/bin/bash
# The demo (scripts/demo.sh): a BIUS ramdisk served by biusctl, used as a
# normal disk, then torn down; then a zoned (host-managed) ramdisk with its
# zones, F2FS on it, and its teardown.  Every command is shown on the console.
source /bius/lib.sh
trap 'echo "BIUS-DEMO FAILED (line $LINENO)"' ERR
run() { echo; echo "demo# $*"; "$@"; }
cd /tmp

require_bius
echo
echo "demo# biusctl create --size 256M --queues 2 --name demo ramdisk &"
bius_start --size 256M --queues 2 --name demo ramdisk
echo "$BIUS_DEV   <- printed by biusctl once the disk is live (daemon pid $BIUS_PID)"
run lsblk "$BIUS_DEV"
run biusctl list
run biusctl info demo
run mkfs.ext4 -q "$BIUS_DEV"
run mkdir -p /mnt/demo
run mount "$BIUS_DEV" /mnt/demo
run dd if=/dev/urandom of=/mnt/demo/random.bin bs=1M count=32 status=none
echo; echo 'demo# echo "hello from user space" > /mnt/demo/hello.txt'
echo "hello from user space" >/mnt/demo/hello.txt
run sync
run ls -l /mnt/demo
run cat /mnt/demo/hello.txt
run df -h /mnt/demo
run sha256sum /mnt/demo/random.bin
run umount /mnt/demo
echo
echo "demo# kill -TERM $BIUS_PID    # stop the daemon: the disk goes away"
bius_stop "$BIUS_PID" "$BIUS_NAME"
run biusctl list

echo
# (F2FS wants room: 1 GiB of 64 MiB zones is too small for it)
echo "demo# biusctl create --zoned --size 4G --zone-size 64M --conv-zones 4 --name zns ramdisk &"
bius_start --zoned --size 4G --zone-size 64M --conv-zones 4 --name zns ramdisk
echo "$BIUS_DEV   <- a 4 GiB host-managed zoned disk: 4 conventional + 60 sequential zones of 64 MiB"
run cat /sys/block/zns/queue/zoned /sys/block/zns/queue/nr_zones
run blkzone report --count 6 "$BIUS_DEV"
run modprobe f2fs
run mkfs.f2fs -f -m "$BIUS_DEV"
run mkdir -p /mnt/zns
run mount -t f2fs "$BIUS_DEV" /mnt/zns
run dd if=/dev/urandom of=/mnt/zns/random.bin bs=1M count=96 status=none
run sync
echo; echo "demo# biusctl zones zns | head -12"
biusctl zones zns >zones.txt
head -12 zones.txt
run sha256sum /mnt/zns/random.bin
run umount /mnt/zns
echo
echo "demo# kill -TERM $BIUS_PID"
bius_stop "$BIUS_PID" "$BIUS_NAME"
run lsblk
run rmmod bius
echo
echo "BIUS-DEMO OK"
