#!/bin/bash
# timeout: 300
# F2FS on a recoverable zoned file (zone states in IMG.zones) across a
# crash: files written before and while the daemon is killed -9 are intact
# after `biusctl recover` and sync, fsck.f2fs is clean, and so after a
# remount; then malformed zone state files are refused with a clear error.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius
[[ ! -e /bius/MOCK ]] || { info "MOCK: no zone state file"; echo "zoned-recovery-f2fs: OK"; exit 0; }
modprobe f2fs || fail "modprobe f2fs failed"

IMG=$PWD/zf2fs.img
NAME=zrf2
MNT=/mnt/zrf2

step "a recoverable zoned file: 256 MiB, 4 MiB zones, 8 conventional, F2FS on it"
bius_start --zoned --size 256M --zone-size 4M --conv-zones 8 --max-open 8 --max-active 8 \
	--recover-timeout 30 --queues 2 --name "$NAME" file "$IMG"
mkfs.f2fs -f -m -l "$NAME" "$BIUS_DEV" >mkfs.txt 2>&1 || { cat mkfs.txt; fail "mkfs.f2fs -m failed"; }
mkdir -p "$MNT"
mount -t f2fs "$BIUS_DEV" "$MNT" || fail "mount failed"
make_tree "$MNT/before" "$PWD/before.sha256" 40 4096 1048576 4194304
sync

step "write files while the daemon is killed -9, then biusctl recover"
make_tree "$PWD/during-src" "$PWD/during.sha256" 60 8192 2097152
mkdir -p "$MNT/during"
writes=$(awk '{print $5}' "/sys/block/$NAME/stat")
(
	for ((i = 0; i < 4; i++)); do
		cp -a "$PWD/during-src/." "$MNT/during/" && sync || exit 1
	done
) &
writer=$!
wait_until 30 eval '[[ $(awk "{print \$5}" /sys/block/$NAME/stat) -gt $((writes + 50)) ]]' || fail "no writes reach the disk"
t=$(now)
kill -KILL "$BIUS_PID"
wait "$BIUS_PID" 2>/dev/null || true
[[ $(biusctl info "$NAME" --json | jq -r .state) == recovering ]] || fail "not recovering after kill -9"
daemon_start biusctl recover "$NAME" file "$IMG"
wait_until 20 eval '[[ $(biusctl info $NAME --json | jq -r .state) == live ]]' || fail "not live after recover"
info "F2FS waited $(elapsed "$t") s from the kill to the recovered disk"
wait "$writer" || fail "a write or sync of F2FS failed across the recovery"
sync
check_tree "$MNT/before" "$PWD/before.sha256" "(written before the crash)"
check_tree "$MNT/during" "$PWD/during.sha256" "(written during the crash)"
zones_agree "$BIUS_DEV"

step "umount, fsck.f2fs clean, remount, verify"
umount "$MNT" || fail "umount failed"
rc=0
fsck.f2fs -f "$BIUS_DEV" >fsck.txt 2>&1 || rc=$?
grep -E '\[FSCK\]' fsck.txt | sed 's/^/   fsck: /' || true
[[ $rc -eq 0 ]] && ! grep -q 'Fail' fsck.txt || { tail -30 fsck.txt; fail "fsck.f2fs is not clean after the recovery"; }
echo 3 >/proc/sys/vm/drop_caches
mount -t f2fs "$BIUS_DEV" "$MNT" || fail "remount failed"
check_tree "$MNT/before" "$PWD/before.sha256" "after a remount"
check_tree "$MNT/during" "$PWD/during.sha256" "after a remount"
umount "$MNT"
bius_stop "$BIUS_PID" "$NAME"

step "malformed zone state files are refused"
# create_refused WHAT STATE: create on IMG with zone state file STATE fails
# with status 1 and one line naming WHAT and EINVAL
create_refused() {
	local rc=0 err
	err=$(timeout 20 biusctl create --zoned --zone-state "$2" --name "$NAME" file "$IMG" 2>&1 >/dev/null) || rc=$?
	info "$1: $rc: $err"
	[[ $rc -eq 1 && $err == *"$2"* && $err == *EINVAL* ]] || fail "$1: status $rc, not a clear EINVAL naming $2: $err"
	[[ ! -e /sys/block/$NAME ]] || fail "$1: a disk was created"
}
cp "$IMG.zones" truncated.zones
truncate -s 100 truncated.zones
create_refused "a truncated file" truncated.zones
cp "$IMG.zones" magic.zones
printf 'NOTZONES' | dd of=magic.zones conv=notrunc status=none
create_refused "a wrong magic" magic.zones
cp "$IMG.zones" cond.zones
printf '\x63' | dd of=cond.zones bs=1 seek=$((64 + 9 * 32 + 8)) conv=notrunc status=none
create_refused "an unknown zone condition" cond.zones
bius_start --zoned --name "$NAME" file "$IMG"
bius_stop "$BIUS_PID" "$NAME"
echo "zoned-recovery-f2fs: OK"
