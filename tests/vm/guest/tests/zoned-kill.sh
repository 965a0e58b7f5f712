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
dev=$BIUS_DEV disk=$BIUS_NAME daemon=$BIUS_PID

step "start fio: zbd sequential writes, 4 jobs x QD 4, 120 s (zones reset as they fill)"
fio --name=zload --filename="$dev" --direct=1 --zonemode=zbd --max_open_zones=8 \
	--ioengine=libaio --iodepth=4 --rw=write --bs=64k --offset=8M --size=120M \
	--numjobs=4 --time_based --runtime=120 --group_reporting --output=fio.txt &
fio_pid=$!
sleep 8
kill -0 "$fio_pid" 2>/dev/null || { cat fio.txt; fail "fio ended before the kill"; }
ios() { awk '{print $5}' "/sys/block/$disk/stat"; }
a=$(ios)
sleep 1
b=$(ios)
[[ $b -gt $a ]] || fail "no writes are flowing through $dev before the kill ($a -> $b)"
info "$((b - a)) writes completed in the last second"

step "kill -9 the daemon (pid $daemon)"
t=$(now)
kill -KILL "$daemon"
if ! wait_until "$FIO_END_LIMIT" eval "! kill -0 $fio_pid 2>/dev/null"; then
	ps -eo pid,stat,wchan:32,comm | awk 'NR == 1 || $2 ~ /D/' | sed 's/^/   /'
	kill -KILL "$fio_pid" 2>/dev/null
	fail "fio still running $FIO_END_LIMIT s after the daemon was killed"
fi
rc=0
wait "$fio_pid" || rc=$?
info "fio ended $(elapsed "$t") s after the kill, status $rc"
grep -E 'err=|error' fio.txt | sed 's/^/   fio: /' || true
[[ $rc -ne 0 ]] || fail "fio succeeded although its disk died under it"
grep -Eq 'err= *5|Input/output error|err= *[0-9]' fio.txt || fail "fio reported no error"
wait "$daemon" 2>/dev/null || true

step "the disk disappears, nothing is left"
wait_until "$GONE_LIMIT" test ! -e "/sys/block/$disk" || fail "/sys/block/$disk still exists"
[[ ! -e $dev ]] || wait_until 5 test ! -e "$dev" || fail "$dev still exists"
stuck=$(ps -eo stat,pid,comm | awk '$1 ~ /^D/')
[[ -z $stuck ]] || fail "processes stuck in D state: $stuck"
out=$(biusctl list) || fail "biusctl list failed"
printf '%s\n' "$out" | sed 's/^/   list: /'
[[ $(printf '%s\n' "$out" | wc -l) -eq 1 ]] || fail "biusctl list shows devices after the daemon died"

step "a new zoned disk of the same name starts and takes faults (stale socket replaced)"
bius_start --zoned --size 16M --zone-size 4M --conv-zones 1 --name zkill ramdisk
biusctl fault "$BIUS_DEV" --read-only 2 >/dev/null || fail "biusctl fault on the new disk failed"
[[ $(blkzone report -o 16384 -c 1 "$BIUS_DEV" | grep -c 'zcond:13') -eq 1 ]] || fail "zone 2 of the new disk is not read-only"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "zoned-kill: OK"
