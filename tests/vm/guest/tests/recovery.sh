#!/bin/bash
# timeout: 600
# Recovery of a file-backed device: kill -9 of the daemon under fio's
# crc32c verify workload (direct, then buffered), `biusctl recover`, and fio
# ends with no error and every block verified; a graceful upgrade (detach);
# kill/recover cycles under load (10, or the kernel parameter
# biusvm.recover_cycles=N); the recovery timeout (held I/O fails with EIO,
# the disk goes, no task hangs); refusals of `recover`.
source /bius/lib.sh
require_bius

IMG=/tmp/rec.img
NAME=rec
RECOVER_LIMIT=20	# seconds from a kill to a recovered, LIVE device
CYCLES=$(kernel_param recover_cycles 10)

state_of() { biusctl info "$1" --json | jq -r .state; }

# no_stuck_tasks: no process in D state
no_stuck_tasks() {
	local stuck
	stuck=$(ps -eo stat,pid,comm | awk '$1 ~ /^D/')
	[[ -z $stuck ]] || fail "processes stuck in D state: $stuck"
}

# flowing: I/O completes on the disk (its stat counters move)
flowing() {
	local a b
	a=$(disk_count "$NAME" '$1 + $5')
	sleep 0.5
	b=$(disk_count "$NAME" '$1 + $5')
	[[ $b -gt $a ]]
}

# kill_and_recover: kill -9 the daemon BIUS_PID, check the device waits,
# start `biusctl recover` (BIUS_PID becomes the new daemon); sets
# RECOVERED_S, the seconds from the kill to the recovered disk, and
# RECOVERED_HOW, where they went
kill_and_recover() {
	local t state reaped checked launched
	t=$(now)
	kill -KILL "$BIUS_PID"
	wait "$BIUS_PID" 2>/dev/null || true
	reaped=$(elapsed "$t")
	state=$(state_of "$NAME")
	[[ $state == recovering ]] || fail "device is $state after its daemon was killed, not recovering"
	[[ -b /dev/$NAME ]] || fail "/dev/$NAME went away with its daemon"
	checked=$(elapsed "$t")
	daemon_launch biusctl recover "$NAME" "$@" || {
		sed 's/^/   biusctl: /' "$BIUS_ERR"
		fail "$BIUS_WHY"
	}
	launched=$(elapsed "$t")
	wait_until "$RECOVER_LIMIT" eval '[[ $(state_of $NAME) == live ]]' \
		|| fail "device not live $RECOVER_LIMIT s after biusctl recover"
	RECOVERED_S=$(elapsed "$t")
	RECOVERED_HOW="reaped $reaped s, state checked $checked s, recover's line $launched s, live $RECOVERED_S s"
}

# fio_verify LOG DIRECT: the verify workload on /dev/$NAME in the background
fio_verify() {
	fio --name=verify --filename="/dev/$NAME" --direct="$2" --ioengine=libaio \
		--iodepth=8 --rw=randwrite --bs=4k --bssplit=4k/50:64k/40:256k/10 \
		--size=48M --numjobs=2 --offset_increment=64M --verify=crc32c \
		--do_verify=1 --verify_fatal=1 --end_fsync=1 --group_reporting \
		--output="$1" &
	FIO_PID=$!
}

# fio_ok LOG [STOPPED]: fio FIO_PID exits 0 (or, if we STOPPED it with
# SIGINT, 128) with err=0 and no verify error
fio_ok() {
	local rc=0 want=0
	[[ -z ${2:-} ]] || want=128
	wait "$FIO_PID" || rc=$?
	grep -E 'err=|verify|error' "$1" | sed 's/^/   fio: /' || true
	[[ $rc -eq $want ]] || fail "fio exited with status $rc"
	grep -q 'err= *0' "$1" || fail "fio reported an error"
	! grep -Eiq 'verify failed|bad magic|crc32c' "$1" || fail "fio found corrupt blocks"
}

truncate -s 256M "$IMG"

for direct in 1 0; do
	step "file-backed device with --recover-timeout 30, fio verify (direct=$direct)"
	bius_start --recover-timeout 30 --queues 2 --name "$NAME" file "$IMG"
	fio_verify "fio-$direct.txt" "$direct"
	wait_until 30 flowing || fail "no I/O flowing before the kill"
	step "kill -9 the daemon mid-run, then biusctl recover"
	kill_and_recover file "$IMG"
	info "recovered $RECOVERED_S s after the kill (fio waited that long)"
	fio_ok "fio-$direct.txt"
	step "every block verifies again from the device (page cache dropped)"
	echo 3 >/proc/sys/vm/drop_caches
	fio --name=verify --filename="/dev/$NAME" --direct=1 --ioengine=libaio \
		--iodepth=8 --rw=randwrite --bs=4k --bssplit=4k/50:64k/40:256k/10 \
		--size=48M --numjobs=2 --offset_increment=64M --verify=crc32c \
		--verify_only=1 --verify_fatal=1 --group_reporting --output="fio-$direct-again.txt" &
	FIO_PID=$!
	fio_ok "fio-$direct-again.txt"
	bius_stop "$BIUS_PID" "$NAME"
done

step "graceful upgrade: detach under load, recover, the file system does not notice"
bius_start --recover-timeout 30 --name "$NAME" file "$IMG"
mkfs.ext4 -q -F "/dev/$NAME"
mkdir -p /mnt/rec
mount "/dev/$NAME" /mnt/rec
make_tree /mnt/rec/before "$PWD/before.sha256" 20 4096 1048576 4194304
dd if=/dev/urandom of=/mnt/rec/during bs=64k count=400 status=none &
dd_pid=$!
old=$BIUS_PID
biusctl detach "$NAME" || fail "biusctl detach failed"
wait "$old" || fail "the detached daemon exited with status $?"
[[ $(state_of "$NAME") == recovering ]] || fail "not recovering after detach"
daemon_launch biusctl recover "$NAME" file "$IMG" || fail "$BIUS_WHY"
wait "$dd_pid" || fail "a write during the upgrade failed"
sync
check_tree /mnt/rec/before "$PWD/before.sha256" "after the upgrade"
sha_during=$(sha256sum </mnt/rec/during)
umount /mnt/rec
echo 3 >/proc/sys/vm/drop_caches
mount "/dev/$NAME" /mnt/rec
[[ $(sha256sum </mnt/rec/during) == "$sha_during" ]] || fail "the file written during the upgrade changed"
umount /mnt/rec
e2fsck -n -f "/dev/$NAME" >fsck.txt 2>&1 || { cat fsck.txt; fail "e2fsck found errors"; }
bius_stop "$BIUS_PID" "$NAME"

step "$CYCLES kill/recover cycles under a verifying fio load"
bius_start --recover-timeout 30 --queues 2 --name "$NAME" file "$IMG"
fio --name=cycles --filename="/dev/$NAME" --direct=1 --ioengine=libaio --iodepth=8 \
	--rw=randwrite --bs=4k --size=32M --numjobs=2 --offset_increment=64M \
	--verify=crc32c --verify_backlog=128 --verify_fatal=1 --time_based \
	--runtime=600 --group_reporting --output=fio-cycles.txt &
FIO_PID=$!
total=0
for ((i = 1; i <= CYCLES; i++)); do
	wait_until 30 flowing || fail "cycle $i: no I/O flowing"
	kill_and_recover file "$IMG"
	info "cycle $i: $RECOVERED_HOW"
	total=$(awk -v a="$total" -v b="$RECOVERED_S" 'BEGIN{print a + b}')
	kill -0 "$FIO_PID" 2>/dev/null || { cat fio-cycles.txt; fail "cycle $i: fio ended"; }
done
info "$CYCLES cycles, mean time from kill to live $(awk -v t="$total" -v n="$CYCLES" 'BEGIN{printf "%.2f", t / n}') s (with the test's own biusctl calls)"
# the kernel's side: from "daemon lost" to "recovered", every recovery so far
klog=$(test_klog)
info "the kernel held I/O (daemon lost to recovered, s): $(awk -v name="$NAME" '
	{ t = $0; sub(/^\[ */, "", t); sub(/\].*/, "", t) }
	$0 ~ "bius: " name ": daemon lost" { lost = t }
	$0 ~ "bius: " name ": recovered" && lost != "" { printf "%.2f ", t - lost; lost = "" }
' <<<"$klog")"
kill -INT "$FIO_PID"
fio_ok fio-cycles.txt stopped
no_stuck_tasks
bius_stop "$BIUS_PID" "$NAME"

step "refusals of biusctl recover"
bius_start --recover-timeout 30 --queues 2 --name "$NAME" file "$IMG"
out=$(biusctl recover "$NAME" file "$IMG" 2>&1) && fail "recover of a live device succeeded"
info "live: $out"
[[ $out == *EBUSY* ]] || fail "recover of a live device: no EBUSY: $out"
kill -KILL "$BIUS_PID"
wait "$BIUS_PID" 2>/dev/null || true
out=$(biusctl recover "$NAME" --queues 1 file "$IMG" 2>&1) && fail "recover with another queue count succeeded"
info "queues: $out"
[[ $out == *--queues* ]] || fail "recover with another queue count: the message does not name --queues: $out"
out=$(biusctl recover "$NAME" --size 128M file "$IMG" 2>&1) && fail "recover with another size succeeded"
info "size: $out"
[[ $out == *size* ]] || fail "recover with another size: the message does not name the size: $out"
daemon_launch biusctl recover "$NAME" file "$IMG" || fail "$BIUS_WHY"
first=$BIUS_PID
out=$(biusctl recover "$NAME" file "$IMG" 2>&1) && fail "a recover of the recovered device succeeded"
info "again: $out"
[[ $(state_of "$NAME") == live ]] || fail "not live after recover"
BIUS_PID=$first
bius_stop "$BIUS_PID" "$NAME"

step "the recovery timeout: no new daemon, held I/O fails with EIO, the disk goes"
# 3 s, times SLOW: on a debug kernel the kill and `biusctl list` alone can
# take longer than 3 s, and the window would close before it is looked at
bius_start --recover-timeout $((3 * SLOW)) --name "$NAME" file "$IMG"
fio --name=held --filename="/dev/$NAME" --direct=1 --ioengine=libaio --iodepth=4 \
	--rw=randread --bs=4k --time_based --runtime=120 --output=fio-held.txt &
FIO_PID=$!
wait_until 30 flowing || fail "no I/O flowing before the kill"
t=$(now)
kill -KILL "$BIUS_PID"
wait "$BIUS_PID" 2>/dev/null || true
biusctl list | sed 's/^/   list: /'
grep -q recovering <<<"$(biusctl list)" || fail "biusctl list does not show the device recovering"
wait_until 15 eval "! kill -0 $FIO_PID 2>/dev/null" || fail "fio still running $((15 * SLOW)) s after the kill (timeout $((3 * SLOW)) s)"
rc=0
wait "$FIO_PID" || rc=$?
info "fio ended $(elapsed "$t") s after the kill, status $rc"
[[ $rc -ne 0 ]] && grep -Eq 'Input/output error|err= *5' fio-held.txt || { cat fio-held.txt; fail "held I/O did not fail with EIO"; }
wait_until 10 test ! -e "/sys/block/$NAME" || fail "/sys/block/$NAME still exists after the timeout"
no_stuck_tasks
klog=$(test_klog)
! grep -q "blocked for more than" <<<"$klog" || fail "hung task warning"

step "destroy of a recovering device"
bius_start --recover-timeout 30 --name "$NAME" file "$IMG"
kill -KILL "$BIUS_PID"
wait "$BIUS_PID" 2>/dev/null || true
[[ $(state_of "$NAME") == recovering ]] || fail "not recovering"
! rmmod bius 2>/dev/null || fail "bius.ko unloaded under a recovering device"
biusctl destroy "$NAME" || fail "destroy of a recovering device failed"
wait_until 10 test ! -e "/sys/block/$NAME" || fail "/sys/block/$NAME still exists after destroy"

rmmod_bius
echo "recovery: OK"
