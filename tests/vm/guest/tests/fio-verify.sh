#!/bin/bash
# timeout: 240
# Data integrity through a BIUS ramdisk with 2 queues: the fio crc32c verify
# workload (4 jobs, mixed random read/write, direct and buffered, 512 B to
# 1 MiB), then a second direct verify-only pass of what reached the device.
source /bius/lib.sh
require_bius

step "create a 64 MiB ramdisk with 2 queues, 512-byte blocks"
bius_start --size 64M --queues 2 --block-size 512 --name fioverify ramdisk
[[ $(cat "/sys/block/$BIUS_NAME/queue/logical_block_size") == 512 ]] \
	|| fail "logical block size is not 512"
[[ $(blockdev --getsize64 "$BIUS_DEV") == $((64 << 20)) ]] || fail "size is not 64 MiB"
[[ $(ls "/sys/block/$BIUS_NAME/mq" | wc -l) == 2 ]] || fail "expected 2 hardware queues in /sys/block/$BIUS_NAME/mq"

step "fio: mixed random read/write, direct + buffered, 512 B..1 MiB, crc32c verify"
t=$(now)
DEV=$BIUS_DEV run_fio fio-pass1.txt /bius/fio/verify.fio
info "pass 1: $(elapsed "$t") s"

step "fio: verify again what reached the device (page cache dropped, direct reads)"
blockdev --flushbufs "$BIUS_DEV"
echo 3 >/proc/sys/vm/drop_caches
t=$(now)
DEV=$BIUS_DEV run_fio fio-pass2.txt --verify_only=1 --direct=1 /bius/fio/verify.fio
info "pass 2: $(elapsed "$t") s"

step "stop the daemon (SIGTERM)"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "fio-verify: OK"
