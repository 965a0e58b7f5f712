#!/bin/bash
# timeout: 120
# Self-test of the bench: the fio data-integrity workload of fio-verify on
# the kernel's own RAM disk (brd), plus a kernel-log check.  If this fails,
# the bench (or the VM), not BIUS, is broken.
source /bius/lib.sh

step "load brd (one 64 MiB disk)"
modprobe brd rd_nr=1 rd_size=65536 max_part=0
wait_until 5 test -b /dev/ram0 || fail "/dev/ram0 missing"
info "/dev/ram0: $(blockdev --getsize64 /dev/ram0) bytes"

step "fio: mixed random read/write, direct + buffered, 512 B..1 MiB, crc32c verify"
t=$(now)
DEV=/dev/ram0 MINBS=512 run_fio fio-pass1.txt /bius/fio/verify.fio
info "pass 1: $(elapsed "$t") s"

step "fio: verify again what reached the device (page cache dropped, direct reads)"
blockdev --flushbufs /dev/ram0
echo 3 >/proc/sys/vm/drop_caches
t=$(now)
DEV=/dev/ram0 MINBS=512 run_fio fio-pass2.txt --verify_only=1 --direct=1 /bius/fio/verify.fio
info "pass 2: $(elapsed "$t") s"

step "unload brd"
rmmod brd || fail "rmmod brd failed"
echo "brd-smoke: OK"
