#!/bin/bash
# timeout: 240
# Device lifecycle: create/destroy cycles (SIGTERM), the request
# tracepoints, an idle daemon that does not wake up by itself, queue
# threads marked as I/O flushers and under SCHED_BATCH (SCHED_OTHER with
# --sched inherit), SIGHUP ignored, `biusctl
# destroy` from another process (by id, name and path), destroy while
# mounted (refused without --force), a read-only disk, several named
# devices at once with list/info checked, CLI errors, and finally rmmod
# bius.
source /bius/lib.sh
require_bius

# list_rows: the rows of `biusctl list` (header checked and dropped)
list_rows() {
	local out
	out=$(biusctl list) || fail "biusctl list failed"
	read -r -a hdr <<<"$(head -n 1 <<<"$out")"
	[[ "${hdr[*]}" == "ID NAME STATE QUEUES SIZE PID RECOVER" ]] \
		|| fail "biusctl list header is '${hdr[*]}', expected 'ID NAME STATE QUEUES SIZE PID RECOVER'"
	tail -n +2 <<<"$out"
}
# expect_error CMD...: CMD must fail with one 'biusctl: error: ...' line on stderr
expect_error() {
	local rc=0 err
	err=$("$@" 2>&1 >/dev/null) || rc=$?
	[[ $rc -ne 0 ]] || fail "'$*' succeeded, expected an error"
	grep -q '^biusctl: error: ' <<<"$err" || fail "'$*' printed no 'biusctl: error:' line: $err"
	info "'$*' -> status $rc: $err"
}
# wait_exit PID: the daemon must exit within 10 s (its status is printed)
wait_exit() {
	local rc=0
	wait_until 10 eval "! kill -0 $1 2>/dev/null" || fail "daemon $1 still running 10 s after its device was destroyed"
	wait "$1" || rc=$?
	[[ $rc -lt 128 ]] || fail "daemon $1 died from signal $((rc - 128))"
	info "daemon $1 exited with status $rc"
}

step "3 create/write/SIGTERM cycles"
for i in 1 2 3; do
	bius_start --size 16M ramdisk
	dd if=/dev/urandom of="$BIUS_DEV" bs=64k count=16 oflag=direct status=none || fail "write failed"
	bius_stop "$BIUS_PID" "$BIUS_NAME"
done

step "tracepoints: bius_fetch and bius_complete name each request"
if [[ -e /bius/MOCK ]]; then
	info "MOCK: no BIUS tracepoints"
else
	T=/sys/kernel/tracing
	mountpoint -q $T || mount -t tracefs nodev $T || fail "cannot mount tracefs"
	bius_start --size 16M --transfer map ramdisk
	echo 0 >$T/tracing_on
	: >$T/trace
	echo 1 >$T/events/bius/enable
	echo 1 >$T/tracing_on
	dd if=/dev/urandom of="$BIUS_DEV" bs=4k seek=100 count=1 oflag=direct status=none \
		|| fail "write failed"
	dd if="$BIUS_DEV" of=/dev/null bs=64k skip=25 count=1 iflag=direct status=none \
		|| fail "read failed"
	echo 0 >$T/tracing_on
	echo 0 >$T/events/bius/enable
	events=$(grep -v '^#' $T/trace)
	read -r major minor < <(stat -c '%t %T' "$BIUS_DEV")
	dev=$(printf '%d,%d' "0x$major" "0x$minor")
	for want in "bius_fetch: $dev queue=[0-9]* tag=[0-9]* op=write sector=800 len=4096 mapped=1 result=0" \
		"bius_complete: $dev queue=[0-9]* tag=[0-9]* op=write sector=800 len=4096 mapped=1 result=0" \
		"bius_fetch: $dev queue=[0-9]* tag=[0-9]* op=read sector=3200 len=65536 mapped=1 result=0" \
		"bius_complete: $dev queue=[0-9]* tag=[0-9]* op=read sector=3200 len=65536 mapped=1 result=0"; do
		grep -q "$want" <<<"$events" || {
			echo "$events" | sed 's/^/   trace: /'
			fail "no trace line matching '$want'"
		}
	done
	info "$(grep -c bius_ <<<"$events") bius events for one 4 KiB write and one 64 KiB read"
	bius_stop "$BIUS_PID" "$BIUS_NAME"
fi

step "an idle daemon sleeps: its threads do not wake up by themselves"
bius_start --size 16M --queues 2 ramdisk
switches() {	# voluntary + involuntary context switches of all its threads
	cat /proc/"$BIUS_PID"/task/*/status | awk '/ctxt_switches:/ {n += $2} END {print n}'
}
before=$(switches)
sleep 3
woke=$(($(switches) - before))
info "the daemon's threads switched $woke times in 3 s of idleness"
# (a thread that polled every 20 ms would switch 150 times)
[[ -e /bius/MOCK || $woke -le 10 ]] || fail "an idle daemon's threads switched $woke times in 3 s: something polls"

# queue_policies PID: the scheduling policy (field 41 of the thread's stat:
# 0 SCHED_OTHER, 3 SCHED_BATCH) of each queue thread of daemon PID
queue_policies() {
	local tid _
	while read -r tid _; do
		awk '{print $41}' "/proc/$1/task/$tid/stat"
	done < <(queue_threads "$1")
}

step "the queue threads are I/O flushers (PR_SET_IO_FLUSHER) under SCHED_BATCH; SIGHUP leaves the disk alone"
if [[ -e /bius/MOCK ]]; then
	info "MOCK: no BIUS daemon threads"
else
	# task flags: field 9 of /proc/PID/task/TID/stat (comm has no spaces
	# here); PF_MEMALLOC_NOIO 0x80000 and PF_LOCAL_THROTTLE 0x100000 (6.1)
	n=0
	while read -r tid queue; do
		flags=$(awk '{print $9}' "/proc/$BIUS_PID/task/$tid/stat")
		info "bius-q$queue (tid $tid): flags $(printf '%#x' "$flags")"
		((flags & 0x80000 && flags & 0x100000)) || fail "queue thread $tid is not marked as an I/O flusher"
		n=$((n + 1))
	done < <(queue_threads "$BIUS_PID")
	[[ $n -eq 2 ]] || fail "found $n queue threads (bius-q*), expected 2"
	flags=$(awk '{print $9}' "/proc/$BIUS_PID/stat")
	((!(flags & 0x80000))) || fail "the daemon's main thread kept the I/O flusher mark"
	policies=$(queue_policies "$BIUS_PID" | sort -u | xargs)
	[[ $policies == 3 ]] || fail "queue threads' policies '$policies', expected 3 (SCHED_BATCH)"
	policy=$(awk '{print $41}' "/proc/$BIUS_PID/stat")
	[[ $policy == 0 ]] || fail "the daemon's main thread has policy $policy, expected 0 (SCHED_OTHER)"
fi
kill -HUP "$BIUS_PID"
sleep 1
kill -0 "$BIUS_PID" 2>/dev/null || fail "the daemon died of SIGHUP"
[[ -e /sys/block/$BIUS_NAME ]] || fail "the disk vanished after SIGHUP"
dd if="$BIUS_DEV" of=/dev/null bs=64k count=4 iflag=direct status=none || fail "reading after SIGHUP failed"
bius_stop "$BIUS_PID" "$BIUS_NAME"

step "--sched inherit: the queue threads keep the daemon's SCHED_OTHER"
bius_start --size 16M --queues 2 --sched inherit null
if [[ -e /bius/MOCK ]]; then
	info "MOCK: no BIUS daemon threads"
else
	policies=$(queue_policies "$BIUS_PID" | sort | xargs)
	[[ $policies == "0 0" ]] || fail "queue threads' policies '$policies', expected '0 0' (SCHED_OTHER)"
fi
bius_stop "$BIUS_PID" "$BIUS_NAME"

step "biusctl destroy from another process: by /dev path, by name, by id"
for how in path name id; do
	bius_start --size 16M --name "lc-$how" ramdisk
	case $how in
	path) target=$BIUS_DEV ;;
	name) target=lc-$how ;;
	id) target=$(list_rows | awk -v n="lc-$how" '$2 == n {print $1}')
		[[ $target =~ ^[0-9]+$ ]] || fail "no id for lc-$how in biusctl list" ;;
	esac
	biusctl destroy "$target" || fail "biusctl destroy $target failed"
	wait_exit "$BIUS_PID"
	wait_until 10 test ! -e "/sys/block/$BIUS_NAME" || fail "/sys/block/$BIUS_NAME still exists after destroy"
done

step "destroy while mounted: refused without --force, done with --force"
bius_start --size 64M --name lc-mounted ramdisk
mkfs.ext4 -q -F "$BIUS_DEV" || fail "mkfs.ext4 failed"
mkdir -p /mnt/lc
mount -t ext4 "$BIUS_DEV" /mnt/lc || fail "mount failed"
expect_error biusctl destroy lc-mounted
[[ -e /sys/block/$BIUS_NAME ]] || fail "the disk vanished although destroy was refused"
echo still-works >/mnt/lc/f && sync || fail "the filesystem stopped working after a refused destroy"
biusctl destroy --force lc-mounted || fail "biusctl destroy --force failed"
wait_exit "$BIUS_PID"
wait_until 10 test ! -e "/sys/block/$BIUS_NAME" || fail "/sys/block/$BIUS_NAME still exists after destroy --force"
umount /mnt/lc 2>/dev/null || umount -l /mnt/lc || fail "cannot unmount the filesystem of the removed disk"

step "--read-only: the disk is read-only, reads work, writes fail"
bius_start --size 16M --read-only --name lc-ro ramdisk
[[ $(cat "/sys/block/$BIUS_NAME/ro") == 1 ]] || fail "/sys/block/$BIUS_NAME/ro is not 1"
[[ $(blockdev --getro "$BIUS_DEV") == 1 ]] || fail "blockdev --getro $BIUS_DEV is not 1"
dd if="$BIUS_DEV" of=/dev/null bs=64k count=16 iflag=direct status=none || fail "reading the read-only disk failed"
if dd if=/dev/zero of="$BIUS_DEV" bs=4k count=1 oflag=direct status=none 2>/dev/null; then
	fail "writing to the read-only disk succeeded"
fi
bius_stop "$BIUS_PID" "$BIUS_NAME"

# (queues <= the VM's 2 CPUs: blk-mq caps hardware queues at nr_cpu_ids)
step "three named devices at once; list and info"
declare -A pid=() dev=()
for spec in lc-a:16M:1 lc-b:32M:2 lc-c:48M:1; do
	IFS=: read -r n s q <<<"$spec"
	bius_start --size "$s" --queues "$q" --name "$n" ramdisk
	pid[$n]=$BIUS_PID dev[$n]=$BIUS_DEV
	[[ $(blockdev --getsize64 "$BIUS_DEV") == $((${s%M} << 20)) ]] || fail "$n: wrong size"
	[[ $(ls "/sys/block/$BIUS_NAME/mq" | wc -l) == "$q" ]] || fail "$n: expected $q hardware queues"
done
rows=$(list_rows)
printf '%s\n' "$rows" | sed 's/^/   list: /'
[[ $(wc -l <<<"$rows") -eq 3 ]] || fail "biusctl list shows $(wc -l <<<"$rows") rows, expected 3"
for spec in lc-a:1 lc-b:2 lc-c:1; do
	IFS=: read -r n q <<<"$spec"
	read -r -a r <<<"$(awk -v n="$n" '$2 == n' <<<"$rows")"
	[[ ${#r[@]} -eq 7 ]] || fail "no (or a malformed) list row for $n"
	[[ ${r[6]} == - ]] || fail "$n: RECOVER is '${r[6]}', expected - (no recovery)"
	[[ ${r[0]} =~ ^[0-9]+$ ]] || fail "$n: ID '${r[0]}' is not a number"
	[[ ${r[2]^^} == LIVE ]] || fail "$n: STATE is '${r[2]}', expected LIVE"
	[[ ${r[3]} == "$q" ]] || fail "$n: QUEUES is '${r[3]}', expected $q"
	[[ ${r[5]} == "${pid[$n]}" ]] || fail "$n: PID is '${r[5]}', expected ${pid[$n]}"
	out=$(biusctl info "$n") || fail "biusctl info $n failed"
	grep -q -- "$n" <<<"$out" || fail "biusctl info $n does not mention the name"
	grep -q -- "${dev[$n]#/dev/}" <<<"$out" || fail "biusctl info $n does not mention the disk ${dev[$n]}"
	out2=$(biusctl info "${dev[$n]}") || fail "biusctl info ${dev[$n]} failed"
	[[ $out2 == "$out" ]] || fail "biusctl info by name and by path differ for $n"
done
biusctl info lc-b | sed 's/^/   info: /'

step "CLI errors"
# (create would serve forever if it wrongly succeeded: bound it)
expect_error timeout 20 biusctl create --size 16M --name lc-b ramdisk
expect_error biusctl info no-such-device
expect_error biusctl destroy no-such-device
expect_error timeout 20 biusctl create --size 16M --block-size 1000 ramdisk
expect_error timeout 20 biusctl create --size 16M no-such-backend
[[ $(list_rows | wc -l) -eq 3 ]] || fail "failed commands changed the device list"

step "stop them in another order: b (SIGTERM), c (destroy), a (SIGINT)"
bius_stop "${pid[lc-b]}" "${dev[lc-b]#/dev/}"
[[ $(list_rows | awk '{print $2}' | sort | tr '\n' ' ') == "lc-a lc-c " ]] || fail "list after stopping lc-b: $(list_rows)"
biusctl destroy lc-c || fail "destroy lc-c failed"
wait_exit "${pid[lc-c]}"
bius_stop -s INT "${pid[lc-a]}" "${dev[lc-a]#/dev/}"
[[ -z $(list_rows) ]] || fail "devices left: $(list_rows)"

rmmod_bius
echo "lifecycle: OK"
