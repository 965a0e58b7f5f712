#!/bin/bash
# timeout: 900
# kill -9 of the daemon under load, round after round, at a random moment:
# conventional ramdisks under random read/write, zoned ones under fio
# --zonemode=zbd writes, and zoned ones at bring-up (within 1.5 s of the
# start: while biusctl creates, connects, answers the zone report or the
# partition scan; a 1 s request timeout and a wait past it, for any timer
# left behind), in turn.  (The bring-up window of the 6.12.95 oops, a kill
# with REPORT_ZONES outstanding, is too short to hit by chance here:
# badinput's "zoned: daemon killed at bring-up" hits it every time.)  Every round: fio ends with errors within seconds, the disk goes
# away, no task stays in D state, nothing is left listed.  Rounds: 10, or the kernel parameter biusvm.kill_rounds=N (the
# 30-round hunt that found a kworker stuck on 6.12.95:
# BIUS_VM_APPEND=biusvm.kill_rounds=30 scripts/vm-test.sh kill-loop).
source /bius/lib.sh
require_bius

ROUNDS=$(kernel_param kill_rounds 10)
FIO_END_LIMIT=15	# seconds from the kill to fio's exit
GONE_LIMIT=10		# seconds from fio's exit to the disk's removal
RANDOM=$$

# bringup_round N: a zoned daemon killed while it starts
bringup_round() {
	local n=$1 delay pid
	delay=$((RANDOM % 1500))
	biusctl create --zoned --size 64M --zone-size 4M --conv-zones 1 --timeout 1 \
		--name kloop ramdisk >/dev/null 2>&1 &
	pid=$!
	sleep "$((delay / 1000)).$(printf '%03d' $((delay % 1000)))"
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	wait_until "$GONE_LIMIT" eval '[[ $(biusctl list | wc -l) -eq 1 ]]' \
		|| fail "round $n (bring-up): devices left: $(biusctl list)"
	sleep 2.5	# past the 1 s request timeout (and the timer's rounding)
	if ! wait_until 5 eval '[[ -z $(stuck_tasks) ]]'; then
		stuck_tasks | sed 's/^/   D: /'
		fail "round $n (bring-up): tasks stuck in D state"
	fi
	info "round $n: zoned bring-up, killed after $delay ms"
}

# round N: one device, one load, one kill
round() {
	local n=$1 kind delay t rc=0 fio_pid
	if ((n % 3 == 0)); then
		bringup_round "$n"
		return
	elif ((n % 3 == 1)); then
		kind=zoned
		bius_start --zoned --size 64M --zone-size 4M --conv-zones 1 --max-open 6 \
			--queues 2 --name kloop ramdisk >/dev/null
		fio --name=zload --filename="$BIUS_DEV" --direct=1 --zonemode=zbd \
			--max_open_zones=6 --ioengine=libaio --iodepth=4 --rw=write --bs=64k \
			--offset=4M --size=60M --numjobs=3 --time_based --runtime=60 \
			--group_reporting --output=fio.txt &
	else
		kind=conventional
		bius_start --size 64M --queues 2 --name kloop ramdisk >/dev/null
		fio --name=load --filename="$BIUS_DEV" --direct=1 --ioengine=libaio \
			--iodepth=8 --rw=randrw --bs=4k --numjobs=3 --time_based --runtime=60 \
			--group_reporting --output=fio.txt &
	fi
	fio_pid=$!
	delay=$((500 + RANDOM % 2500))
	sleep "$((delay / 1000)).$(printf '%03d' $((delay % 1000)))"
	kill -0 "$fio_pid" 2>/dev/null || { cat fio.txt; fail "round $n: fio ended before the kill"; }
	t=$(now)
	kill -KILL "$BIUS_PID"
	if ! wait_until "$FIO_END_LIMIT" eval "! kill -0 $fio_pid 2>/dev/null"; then
		stuck_tasks | sed 's/^/   D: /'
		kill -KILL "$fio_pid" 2>/dev/null
		fail "round $n ($kind): fio still running $FIO_END_LIMIT s after the kill"
	fi
	wait "$fio_pid" || rc=$?
	wait "$BIUS_PID" 2>/dev/null || true
	[[ $rc -ne 0 ]] || fail "round $n ($kind): fio succeeded although its disk died under it"
	wait_until "$GONE_LIMIT" test ! -e "/sys/block/$BIUS_NAME" \
		|| fail "round $n ($kind): /sys/block/$BIUS_NAME still there $GONE_LIMIT s after fio ended"
	if ! wait_until 5 eval '[[ -z $(stuck_tasks) ]]'; then
		stuck_tasks | sed 's/^/   D: /'
		fail "round $n ($kind): tasks stuck in D state"
	fi
	[[ $(biusctl list | wc -l) -eq 1 ]] || fail "round $n ($kind): devices left: $(biusctl list)"
	info "round $n: $kind, killed after $delay ms, fio ended $(elapsed "$t") s later (status $rc)"
}

step "$ROUNDS rounds of kill -9: zoned and conventional under load, zoned at bring-up, in turn"
for ((i = 1; i <= ROUNDS; i++)); do
	round "$i"
done
echo "RESULT kill-loop: $ROUNDS rounds, no task stuck, every disk gone"
