#!/bin/bash
# timeout: 180
# The driver's bad-input test program (tests/badinput): malformed ioctls,
# requests and completions must be refused cleanly.
source /bius/lib.sh
require_artifact bius.ko
require_artifact bius_badinput
[[ -d /sys/module/bius ]] || modprobe bius || fail "modprobe bius failed"
wait_until 5 test -c /dev/bius || fail "/dev/bius did not appear"

step "bius_badinput"
rc=0
bius_badinput 2>&1 | tee badinput.out || rc=${PIPESTATUS[0]}
[[ $rc -eq 0 ]] || fail "bius_badinput exited with status $rc"
grep -Eq '^[0-9]+ passed, 0 failed$' badinput.out \
	|| fail "bius_badinput did not print 'N passed, 0 failed'"
echo "badinput: OK"
