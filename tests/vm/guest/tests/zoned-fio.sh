#!/bin/bash
# timeout: 300
# fio --zonemode=zbd on a zoned BIUS ramdisk (256 MiB, 4 MiB zones of
# 3 MiB capacity, 4 conventional, max open 8, max active 10): sequential
# and random direct writes by 4 jobs each, verified with crc32c; no errors,
# and the zones left consistent (blkzone and biusctl zones agree).
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius

step "create the zoned ramdisk"
bius_start --zoned --size 256M --zone-size 4M --zone-capacity 3M --conv-zones 4 \
	--max-open 8 --max-active 10 --queues 2 --name zfio ramdisk
sched=/sys/block/$BIUS_NAME/queue/scheduler
grep -q '\[mq-deadline\]' "$sched" || echo mq-deadline >"$sched" || fail "cannot select mq-deadline ($(cat "$sched"))"
info "scheduler: $(cat "$sched")"

# 60 sequential zones from 16 MiB on: 4 regions of 60 MiB (15 zones), one per job
common=(--filename="$BIUS_DEV" --direct=1 --zonemode=zbd --max_open_zones=8
	--offset=16M --size=60M --offset_increment=60M --numjobs=4
	--verify=crc32c --verify_fatal=1 --group_reporting)

step "sequential writes: 4 jobs, psync, 128 KiB, whole regions, then verify"
blkzone reset "$BIUS_DEV" || fail "blkzone reset failed"
t0=$(now)
run_fio seq.txt --name=seq --rw=write --bs=128k --ioengine=psync "${common[@]}"
info "$(elapsed "$t0") s"
zones_agree "$BIUS_DEV"
full=$(blkzone report "$BIUS_DEV" | grep -c 'zcond:14') || true
info "$full zones full"
[[ $full -eq 60 ]] || fail "expected the 60 sequential zones full after the sequential run, $full are"

step "random writes: 4 jobs, libaio QD 4, 4-64 KiB, 16 MiB per job, then verify"
blkzone reset "$BIUS_DEV" || fail "blkzone reset failed"
t0=$(now)
run_fio rand.txt --name=rand --rw=randwrite --bsrange=4k-64k --ioengine=libaio \
	--iodepth=4 --io_size=16M "${common[@]}"
info "$(elapsed "$t0") s"
zones_agree "$BIUS_DEV"
zcond_counts "$BIUS_DEV"

step "sequential writes with resets: 2 jobs, 128 KiB, 24 MiB each over 12 MiB of zones (fio resets full zones)"
t0=$(now)
run_fio wrap.txt --name=wrap --rw=write --bs=128k --ioengine=psync --filename="$BIUS_DEV" \
	--direct=1 --zonemode=zbd --max_open_zones=4 --offset=16M --size=16M --offset_increment=16M \
	--io_size=24M --numjobs=2 --verify=crc32c --verify_fatal=1 --group_reporting
info "$(elapsed "$t0") s"
zones_agree "$BIUS_DEV"

step "stop the daemon"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "zoned-fio: OK"
