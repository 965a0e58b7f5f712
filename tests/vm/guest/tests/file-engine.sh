#!/bin/bash
# timeout: 240
# The file backend's engines, many requests in flight (biusctl create file
# --engine uring|threads), on a 64 MiB image in an ext4 on brd (tmpfs has
# no O_DIRECT): buffered with io_uring, O_DIRECT with 4096-byte blocks
# with io_uring and with the thread pool.  Each: fio random writes at QD 32
# verified (crc32c), a pattern written by dd; after a graceful stop both
# are in the image, and the kernel's loop device (--direct-io=on) on the
# same image reads the same bytes (sha256) and passes fio's verify_only of
# the same job.  Then --zoned --zone-size 4M over the image with io_uring:
# blkzone report shows 16 empty zones, fio --zonemode=zbd random and
# sequential writes verify, and the sequentially written data is in the
# image after the stop.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius
T0=$(now)
step() { echo "== [$(elapsed "$T0") s] $*"; }	# (lib.sh's, timed)

MiB=$((1 << 20))
IMG=/mnt/fe/disk.img
sum() { sha256sum | cut -d' ' -f1; }
# region FILE OFFSET LEN: sha256 of LEN bytes of FILE at OFFSET (MiB units), direct
region() { dd if="$1" bs=1M skip=$(($2 / MiB)) count=$(($3 / MiB)) iflag=direct status=none | sum; }
new_image() {
	rm -f "$IMG"
	truncate -s $((64 * MiB)) "$IMG"
}

step "ext4 on brd (128 MiB) for the image"
modprobe brd rd_nr=1 rd_size=131072 max_part=0
wait_until 5 test -b /dev/ram0 || fail "/dev/ram0 missing"
mkfs.ext4 -q -F /dev/ram0
mkdir -p /mnt/fe
mount -t ext4 /dev/ram0 /mnt/fe
modprobe loop

# the fio job: random writes of 4-64 KiB at QD 32 over 16 MiB at 8 MiB
job=(--name=engine --direct=1 --ioengine=libaio --iodepth=32 --rw=randwrite
	--bsrange=4k-64k --offset=8M --size=16M --verify=crc32c --verify_fatal=1)

# round LABEL CREATE-ARGS...: one engine (CREATE-ARGS end with the image)
round() {
	local label=$1 fio_sum pat_sum loopdev t0 tr
	shift
	tr=$(now)
	step "$label: fio verify at QD 32"
	new_image
	bius_start --queues 2 --name fe "$@"
	[[ $(blockdev --getsize64 "$BIUS_DEV") -eq $((64 * MiB)) ]] || fail "device size != image size"
	t0=$(now)
	run_fio "$label.txt" --filename="$BIUS_DEV" "${job[@]}"
	info "$(elapsed "$t0") s"
	step "$label: 4 MiB pattern at 48 MiB (dd, direct), stop gracefully"
	head -c $((4 * MiB)) /dev/urandom >pattern
	pat_sum=$(sum <pattern)
	dd if=pattern of="$BIUS_DEV" bs=64k seek=$((48 * MiB / 65536)) oflag=direct status=none || fail "dd write failed"
	fio_sum=$(region "$BIUS_DEV" $((8 * MiB)) $((16 * MiB)))
	bius_stop "$BIUS_PID" "$BIUS_NAME"

	step "$label: the image holds what was written"
	echo 3 >/proc/sys/vm/drop_caches
	[[ $(stat -c %s "$IMG") -eq $((64 * MiB)) ]] || fail "image size changed: $(stat -c %s "$IMG")"
	[[ $(region "$IMG" $((48 * MiB)) $((4 * MiB))) == "$pat_sum" ]] || fail "the dd pattern is not in the image"
	[[ $(region "$IMG" $((8 * MiB)) $((16 * MiB))) == "$fio_sum" ]] || fail "fio's region of the image differs from what the device read"

	step "$label: the loop device (direct I/O) on the image reads the same"
	loopdev=$(losetup --direct-io=on -f --show "$IMG") || fail "losetup --direct-io=on failed"
	[[ $(cat "/sys/block/${loopdev#/dev/}/loop/dio") == 1 ]] || info "note: $loopdev does not do direct I/O"
	[[ $(region "$loopdev" $((8 * MiB)) $((16 * MiB))) == "$fio_sum" ]] || fail "$loopdev reads fio's region differently"
	[[ $(region "$loopdev" $((48 * MiB)) $((4 * MiB))) == "$pat_sum" ]] || fail "$loopdev reads the dd pattern differently"
	run_fio "$label-loop.txt" --filename="$loopdev" "${job[@]}" --verify_only
	losetup -d "$loopdev"
	info "$label: $(elapsed "$tr") s in all"
}

round uring file --engine uring "$IMG"
round uring-direct --block-size 4096 file --direct --engine uring "$IMG"
round threads-direct --block-size 4096 file --direct --engine threads "$IMG"

step "zoned: --zoned --zone-size 4M file --engine uring"
new_image
bius_start --zoned --zone-size 4M --queues 2 --name fe-zoned file --engine uring "$IMG"
sched=/sys/block/$BIUS_NAME/queue/scheduler
grep -q '\[mq-deadline\]' "$sched" || echo mq-deadline >"$sched" || fail "cannot select mq-deadline ($(cat "$sched"))"
zones=$(blkzone report "$BIUS_DEV" | grep -cE 'zcond: *1\(') || true
info "blkzone report: $(blkzone report "$BIUS_DEV" | wc -l) zones, $zones empty"
[[ $zones -eq 16 ]] || fail "expected 16 empty zones of 4 MiB, blkzone report shows $zones"
zbd=(--filename="$BIUS_DEV" --direct=1 --zonemode=zbd --max_open_zones=8 --offset=0
	--size=32M --offset_increment=32M --numjobs=2 --verify=crc32c --verify_fatal=1 --group_reporting)
t0=$(now)
run_fio zrand.txt --name=zrand --rw=randwrite --bsrange=4k-64k --ioengine=libaio --iodepth=4 \
	--io_size=8M "${zbd[@]}"
info "$(elapsed "$t0") s"
blkzone reset "$BIUS_DEV" || fail "blkzone reset failed"
t0=$(now)
run_fio zseq.txt --name=zseq --rw=write --bs=128k --ioengine=psync "${zbd[@]}"
full=$(blkzone report "$BIUS_DEV" | grep -c 'zcond:14') || true
info "$(elapsed "$t0") s; $full zones full"
[[ $full -eq 16 ]] || fail "expected the 16 zones full after writing 64 MiB sequentially, $full are"
zones_agree "$BIUS_DEV"
dev_sum=$(region "$BIUS_DEV" 0 $((64 * MiB)))
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo 3 >/proc/sys/vm/drop_caches
[[ $(region "$IMG" 0 $((64 * MiB))) == "$dev_sum" ]] || fail "the zoned device's data is not in the image"

umount /mnt/fe
rmmod brd
echo "file-engine: OK"
