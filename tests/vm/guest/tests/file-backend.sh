#!/bin/bash
# timeout: 300
# The file backend: data already in the backing file is readable through the
# device; data written through the device (direct, and buffered + sync)
# lands in the backing file, as checked after a graceful stop.  Twice: a
# file on tmpfs with 512-byte blocks, and `file --direct` on a file of an
# ext4 on brd (tmpfs has no O_DIRECT) with 4096-byte blocks, in copy and in
# map mode.
source /bius/lib.sh
require_bius

MiB=$((1 << 20))
pattern() { head -c "$2" /dev/urandom >"/tmp/$1"; }
sum() { sha256sum | cut -d' ' -f1; }
# region FILE OFFSET LEN: checksum of the bytes of FILE at OFFSET (4 KiB units)
region() { dd if="$1" bs=4096 skip=$(($2 / 4096)) count=$(($3 / 4096)) status=none | sum; }

# check_file IMG SECTOR-SIZE [--direct [TRANSFER-MODE]]
check_file() {
	local img=$1 sec=$2 direct=${3:-} transfer=${4:-copy} i
	step "backing file $img: 32 MiB, 1 MiB of known data at 5 MiB"
	rm -f "$img"
	truncate -s $((32 * MiB)) "$img"
	pattern pre $MiB
	dd if=/tmp/pre of="$img" bs=4096 seek=$((5 * MiB / 4096)) conv=notrunc status=none
	sync "$img"
	local pre_sum img_before
	pre_sum=$(sum </tmp/pre)
	img_before=$(sum <"$img")

	bius_start --block-size "$sec" --transfer "$transfer" file $direct "$img"
	[[ $(blockdev --getsize64 "$BIUS_DEV") == $((32 * MiB)) ]] \
		|| fail "device size $(blockdev --getsize64 "$BIUS_DEV") != backing file size"

	step "pre-existing data is readable through the device"
	[[ $(dd if="$BIUS_DEV" bs=4096 skip=$((5 * MiB / 4096)) count=256 iflag=direct status=none | sum) == "$pre_sum" ]] \
		|| fail "pre-existing data read through $BIUS_DEV differs (direct read)"
	[[ $(region "$BIUS_DEV" 0 $((32 * MiB))) == "$img_before" ]] \
		|| fail "whole device (buffered read) differs from the backing file"

	step "write 4 MiB at 8 MiB with O_DIRECT (64 KiB blocks)"
	pattern a $((4 * MiB))
	dd if=/tmp/a of="$BIUS_DEV" bs=64k seek=$((8 * MiB / 65536)) oflag=direct status=none || fail "direct write failed"

	step "write 3 MiB + 12 KiB at 16 MiB + 4 KiB, buffered + fsync"
	pattern b $((3 * MiB + 12288))
	dd if=/tmp/b of="$BIUS_DEV" bs=4096 seek=$(((16 * MiB + 4096) / 4096)) conv=fsync status=none || fail "buffered write failed"

	step "write single $sec-byte sectors at odd offsets (direct)"
	pattern c $((8 * sec))
	for i in 0 3 7; do
		dd if=/tmp/c of="$BIUS_DEV" bs="$sec" skip=$i seek=$((24 * MiB / sec + i * 3)) count=1 oflag=direct status=none \
			|| fail "$sec-byte direct write failed"
	done

	step "read back through the device (direct)"
	[[ $(dd if="$BIUS_DEV" bs=64k skip=$((8 * MiB / 65536)) count=64 iflag=direct status=none | sum) == "$(sum </tmp/a)" ]] \
		|| fail "direct-written data reads back differently"

	step "stop the daemon gracefully (SIGTERM)"
	bius_stop "$BIUS_PID" "$BIUS_NAME"

	step "the backing file holds what was written"
	echo 3 >/proc/sys/vm/drop_caches
	[[ $(stat -c %s "$img") == $((32 * MiB)) ]] || fail "backing file size changed: $(stat -c %s "$img")"
	[[ $(region "$img" $((8 * MiB)) $((4 * MiB))) == "$(sum </tmp/a)" ]] || fail "direct write not in the backing file"
	[[ $(region "$img" $((16 * MiB + 4096)) $((3 * MiB + 12288))) == "$(sum </tmp/b)" ]] || fail "buffered write not in the backing file"
	for i in 0 3 7; do
		cmp -s <(dd if=/tmp/c bs="$sec" skip=$i count=1 status=none) \
			<(dd if="$img" bs="$sec" skip=$((24 * MiB / sec + i * 3)) count=1 status=none) \
			|| fail "sector write $i not in the backing file"
	done
	[[ $(region "$img" $((5 * MiB)) $MiB) == "$pre_sum" ]] || fail "pre-existing data was modified"
	# everything else is untouched (zero, as truncate made it)
	cp "$img" /tmp/expect.img
	dd if=/dev/zero of=/tmp/expect.img bs=4096 seek=$((8 * MiB / 4096)) count=1024 conv=notrunc status=none
	dd if=/dev/zero of=/tmp/expect.img bs=4096 seek=$(((16 * MiB + 4096) / 4096)) count=$(((3 * MiB + 12288) / 4096)) conv=notrunc status=none
	dd if=/dev/zero of=/tmp/expect.img bs="$sec" seek=$((24 * MiB / sec)) count=32 conv=notrunc status=none
	dd if=/dev/zero of=/tmp/expect.img bs=4096 seek=$((5 * MiB / 4096)) count=256 conv=notrunc status=none
	[[ $(sum </tmp/expect.img) == $(head -c $((32 * MiB)) /dev/zero | sum) ]] \
		|| fail "bytes outside the written regions changed"
	rm -f /tmp/expect.img
}

check_file /tmp/backing.img 512	# /tmp is tmpfs

step "ext4 on brd for an O_DIRECT-capable backing file"
modprobe brd rd_nr=1 rd_size=131072 max_part=0
wait_until 5 test -b /dev/ram0 || fail "/dev/ram0 missing"
mkfs.ext4 -q -F /dev/ram0
mkdir -p /mnt/fb
mount -t ext4 /dev/ram0 /mnt/fb
check_file /mnt/fb/backing.img 4096 --direct
step "again in map mode: O_DIRECT cannot pin the mapped pages, the backend bounces"
check_file /mnt/fb/backing.img 4096 --direct map
umount /mnt/fb
rmmod brd
echo "file-backend: OK"
