#!/bin/bash
# timeout: 240
# A zoned file's zones outlive its daemon: zones written, opened and
# finished on a 64 MiB --zoned file, the daemon killed (kill -9, no
# recovery: the disk goes away) and a new one created on the same file
# without zone options; the zone state file gives the geometry, blkzone
# report shows the same zones (implicitly open ones closed) and the data
# reads back; writing goes on at the write pointers.  Then the same after
# a graceful stop; a second daemon on the file, or other zone options, are
# refused.  Then recovery (--recover-timeout): kill -9 under fio's zbd
# writes with crc32c verify and `biusctl recover` (replayed writes: fio sees
# no error, every block verifies), and a detach/recover hand-over.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius
[[ ! -e /bius/MOCK ]] || { info "MOCK: no zone state file"; echo "zoned-file-restart: OK"; exit 0; }

MiB=$((1 << 20))
IMG=$PWD/zoned.img
# report: the zones as blkzone reports them, implicitly open ones as closed
report() { zreport "$BIUS_DEV" | sed 's/zcond: *2(oi)/zcond: 4(cl)/'; }
region() { dd if="$BIUS_DEV" bs=1M count=20 iflag=direct status=none | sha256sum | cut -d' ' -f1; }
pattern() { head -c "$2" /dev/urandom >"$1"; }
# create_fails WHAT ARGS...: biusctl create ARGS must fail (status 1),
# saying WHAT
create_fails() {
	local what=$1 rc=0 err
	shift
	err=$(timeout 20 biusctl create "$@" 2>&1 >/dev/null) || rc=$?
	info "biusctl create $* -> $rc: $(tail -n1 <<<"$err")"
	[[ $rc -eq 1 && $err == *"$what"* ]] || fail "biusctl create $*: status $rc, not '$what': $err"
}

step "a new --zoned file: 64 MiB, 4 MiB zones, the first conventional"
bius_start --zoned -s 64M --zone-size 4M --conv-zones 1 --queues 2 --name zfr file "$IMG"
[[ -s $IMG.zones ]] || fail "no zone state file $IMG.zones"
pattern p1 $MiB
pattern p2 $((4 * MiB))
dd if=p1 of="$BIUS_DEV" bs=1M seek=1 oflag=direct status=none	# conventional zone
dd if=p1 of="$BIUS_DEV" bs=1M seek=4 oflag=direct status=none	# zone 1: 1 MiB
dd if=p2 of="$BIUS_DEV" bs=1M seek=8 oflag=direct status=none	# zone 2: full
blkzone open -o $((12 * MiB / 512)) -c 1 "$BIUS_DEV"		# zone 3: open
dd if=p1 of="$BIUS_DEV" bs=512K count=1 seek=32 oflag=direct status=none
blkzone finish -o $((16 * MiB / 512)) -c 1 "$BIUS_DEV"		# zone 4: finished
before=$(report)
sum=$(region)
zcond_counts "$BIUS_DEV"

step "kill -9 the daemon: the disk goes away"
kill -9 "$BIUS_PID"
wait "$BIUS_PID" || true
wait_until 10 test ! -e /sys/block/zfr || fail "/sys/block/zfr still exists after kill -9"

step "a new daemon on the same file, without zone options"
bius_start --zoned --queues 2 --name zfr file "$IMG"
[[ $(blockdev --getsize64 "$BIUS_DEV") -eq $((64 * MiB)) ]] || fail "the size is not the zone state file's"
after=$(report)
[[ $after == "$before" ]] || fail "the zones differ after the restart:$(diff <(echo "$before") <(echo "$after"))"
[[ $(region) == "$sum" ]] || fail "the data differs after the restart"
dd if=p1 of="$BIUS_DEV" bs=1M seek=5 oflag=direct status=none || fail "zone 1 does not take a write at its write pointer"
if dd if=p1 of="$BIUS_DEV" bs=1M seek=4 oflag=direct status=none 2>/dev/null; then
	fail "zone 1 took a write below its write pointer"
fi
zones_agree "$BIUS_DEV"
before=$(report)
sum=$(region)

step "a graceful stop and a restart"
bius_stop "$BIUS_PID" "$BIUS_NAME"
bius_start --zoned --queues 2 --name zfr file "$IMG"
[[ $(report) == "$before" ]] || fail "the zones differ after a graceful restart"
[[ $(region) == "$sum" ]] || fail "the data differs after a graceful restart"
create_fails "in use by another process" --zoned --name zfr2 file "$IMG"
bius_stop "$BIUS_PID" "$BIUS_NAME"
create_fails "zone size in bytes is 4194304, the device's is 8388608 (EINVAL)" --zoned --zone-size 8M --name zfr file "$IMG"

step "recovery: kill -9 under fio zbd writes with crc32c verify, biusctl recover"
rm -f "$IMG" "$IMG.zones"
bius_start --zoned -s 64M --zone-size 4M --conv-zones 1 --recover-timeout 30 --queues 2 --name zfr file "$IMG"
sched=/sys/block/zfr/queue/scheduler
grep -q '\[mq-deadline\]' "$sched" || echo mq-deadline >"$sched" || fail "cannot select mq-deadline"
fio --name=zv --filename="$BIUS_DEV" --direct=1 --zonemode=zbd --max_open_zones=4 \
	--ioengine=libaio --iodepth=4 --rw=write --bs=64k --offset=4M --size=48M --rate=8m \
	--verify=crc32c --do_verify=1 --verify_fatal=1 --output=zv.txt &
fio_pid=$!
wait_until 20 eval '[[ $(awk "{print \$5}" /sys/block/zfr/stat) -gt 64 ]]' || fail "fio does not write"
kill -KILL "$BIUS_PID"
wait "$BIUS_PID" 2>/dev/null || true
[[ $(biusctl info zfr --json | jq -r .state) == recovering ]] || fail "the device is not recovering"
daemon_start biusctl recover zfr file "$IMG"
rc=0
wait "$fio_pid" || rc=$?
grep -E 'err=|verify' zv.txt | sed 's/^/   fio: /' || true
[[ $rc -eq 0 ]] && grep -q 'err= *0' zv.txt || fail "fio failed across the recovery (status $rc)"
zones_agree "$BIUS_DEV"
before=$(report)

step "a graceful upgrade: detach, then recover at once (the zone state file changes hands)"
old=$BIUS_PID
biusctl detach zfr >/dev/null || fail "biusctl detach failed"
daemon_start biusctl recover zfr file "$IMG"
wait "$old" || fail "the detached daemon exited with status $?"
[[ $(report) == "$before" ]] || fail "the zones differ after detach and recover"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "zoned-file-restart: OK"
