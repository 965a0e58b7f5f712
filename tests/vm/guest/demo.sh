#!/bin/bash
# The demo (scripts/demo.sh): a BIUS ramdisk served by biusctl, used as a
# normal disk, then torn down; every command is shown on the console.
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
run lsblk
run rmmod bius
echo
echo "BIUS-DEMO OK"
