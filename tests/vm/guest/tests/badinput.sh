#!/bin/bash
# timeout: 240
# The driver's bad-input test program (tests/badinput): malformed ioctls,
# requests and completions must be refused cleanly.  BADINPUT_ARGS (a
# kernel parameter, e.g. BIUS_VM_APPEND=BADINPUT_ARGS=--only=stuck_reader)
# passes options to bius_badinput.
source /bius/lib.sh
require_artifact bius.ko
require_artifact bius_badinput
[[ -d /sys/module/bius ]] || modprobe bius || fail "modprobe bius failed"
wait_until 5 test -c /dev/bius || fail "/dev/bius did not appear"

step "bius_badinput"
rc=0
# a block device that is not BIUS's, whose name CREATE_DEVICE must refuse
brd=0
if [[ ! -e /sys/class/block/ram0 ]]; then
	modprobe brd rd_nr=1 rd_size=1024 || fail "modprobe brd failed"
	brd=1
fi
args=${BADINPUT_ARGS:-}
# shellcheck disable=SC2086 # options, split on purpose
bius_badinput ${args//=/ } 2>&1 | tee badinput.out || rc=${PIPESTATUS[0]}
((brd == 0)) || rmmod brd
[[ $rc -eq 0 ]] || fail "bius_badinput exited with status $rc"
grep -Eq '^[0-9]+ passed, 0 failed$' badinput.out \
	|| fail "bius_badinput did not print 'N passed, 0 failed'"
echo "badinput: OK"
