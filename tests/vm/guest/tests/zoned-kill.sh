#!/bin/bash
# timeout: 150
# kill -9 of a zoned BIUS ramdisk's daemon while fio --zonemode=zbd writes
# to it: fio gets errors within seconds, nothing hangs, the disk goes away,
# biusctl list is empty.
source /bius/lib.sh
require_bius

FIO_END_LIMIT=15	# seconds from the kill to fio's exit
GONE_LIMIT=10		# seconds from fio's exit to the disk's removal

step "create a zoned ramdisk: 128 MiB, 4 MiB zones, 2 conventional, max open 8"
bius_start --zoned --size 128M --zone-size 4M --conv-zones 2 --max-open 8 --queues 2 --name zkill ramdisk
dev=$BIUS_DEV

step "start fio: zbd sequential writes, 4 jobs x QD 4, 120 s (zones reset as they fill)"
fio --name=zload --filename="$dev" --direct=1 --zonemode=zbd --max_open_zones=8 \
	--ioengine=libaio --iodepth=4 --rw=write --bs=64k --offset=8M --size=120M \
	--numjobs=4 --time_based --runtime=120 --group_reporting --output=fio.txt &
fio_pid=$!
# (kill_daemon_under_fio waits until the I/O flows: no fixed sleep)
kill_daemon_under_fio "$fio_pid" '$5' writes 'err= *[1-9]|Input/output error'

step "a new zoned disk of the same name starts and takes faults (stale socket replaced)"
bius_start --zoned --size 16M --zone-size 4M --conv-zones 1 --name zkill ramdisk
biusctl fault "$BIUS_DEV" --read-only 2 >/dev/null || fail "biusctl fault on the new disk failed"
[[ $(blkzone report -o 16384 -c 1 "$BIUS_DEV" | grep -c 'zcond:13') -eq 1 ]] || fail "zone 2 of the new disk is not read-only"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "zoned-kill: OK"
