#!/bin/bash
# timeout: 180
# kill -9 of the daemon under load: queued and in-flight I/O fails with EIO
# within seconds, nothing hangs, the disk disappears, bius.ko unloads.
source /bius/lib.sh
require_bius

FIO_END_LIMIT=15	# seconds from the kill to fio's exit
GONE_LIMIT=10		# seconds from fio's exit to the disk's removal

step "create a 64 MiB ramdisk with 2 queues"
bius_start --size 64M --queues 2 --name killme ramdisk
dev=$BIUS_DEV disk=$BIUS_NAME daemon=$BIUS_PID

step "start fio: direct randrw, 4 jobs x QD 4, 120 s"
fio --name=load --filename="$dev" --direct=1 --ioengine=libaio --iodepth=4 \
	--rw=randrw --bs=4k --numjobs=4 --time_based --runtime=120 \
	--group_reporting --output=fio.txt &
fio_pid=$!
sleep 8
kill -0 "$fio_pid" 2>/dev/null || { cat fio.txt; fail "fio ended before the kill"; }
ios() { awk '{print $1 + $5}' "/sys/block/$disk/stat"; }
a=$(ios)
sleep 1
b=$(ios)
[[ $b -gt $a ]] || fail "no I/O is flowing through $dev before the kill ($a -> $b)"
info "$((b - a)) I/Os completed in the last second"

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
grep -Eq 'err= *5|Input/output error' fio.txt || fail "fio did not report EIO"
wait "$daemon" 2>/dev/null || true

step "the disk disappears, nothing is left"
wait_until "$GONE_LIMIT" test ! -e "/sys/block/$disk" || fail "/sys/block/$disk still exists"
[[ ! -e $dev ]] || wait_until 5 test ! -e "$dev" || fail "$dev still exists"
stuck=$(ps -eo stat,pid,comm | awk '$1 ~ /^D/')
[[ -z $stuck ]] || fail "processes stuck in D state: $stuck"
out=$(biusctl list) || fail "biusctl list failed"
printf '%s\n' "$out" | sed 's/^/   list: /'
[[ $(printf '%s\n' "$out" | wc -l) -eq 1 ]] || fail "biusctl list shows devices after the daemon died"

rmmod_bius
echo "daemon-kill: OK"
