#!/bin/bash
# timeout: 300
# Zone append emulated by the block layer (biusctl create --zoned
# --emulate-append, BIUS_FEATURE_ZONE_APPEND_EMULATED; 6.10+ zone write
# plugging): beside a zoned null_blk of the same geometry with
# zone_append_max_sectors=0, both show the same zone_append_max_bytes; btrfs
# (which writes its data by zone append) and fio --zonemode=zbd verify on
# the BIUS disk, whose daemon then has served writes and no ZONE_APPEND.
# Before 6.10 the disk is refused with EOPNOTSUPP and a clear error.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius

geometry=(--zoned --size 256M --zone-size 4M --zone-capacity 3M --max-open 14 --max-active 14)

if ! kernel_at_least 6 10; then
	step "$(uname -r) has no zone append emulation: create is refused"
	if bius_launch "${geometry[@]}" --emulate-append --name zemul ramdisk; then
		fail "a disk with emulated zone append was created on $(uname -r)"
	fi
	sed 's/^/   biusctl: /' "$BIUS_ERR"
	grep -q 'EOPNOTSUPP' "$BIUS_ERR" || fail "the error does not name EOPNOTSUPP"
	grep -q 'emulated zone append needs Linux 6.10' "$BIUS_ERR" || fail "the error does not say why"
	klog=$(test_klog)
	grep -q 'BIUS_FEATURE_ZONE_APPEND_EMULATED needs Linux 6.10' <<<"$klog" \
		|| fail "no kernel log line names the reason"
	echo "zoned-append-emulated: OK (refused before 6.10)"
	exit 0
fi
modprobe btrfs || fail "modprobe btrfs failed"
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T || fail "cannot mount tracefs"

step "a zoned ramdisk with emulated appends and a zoned null_blk with zone_append_max_sectors=0"
bius_start "${geometry[@]}" --emulate-append --queues 2 --name zemul ramdisk
majmin=$(tr : , <"/sys/block/$BIUS_NAME/dev")	# as the trace prints it
d=/sys/kernel/config/nullb/zemulnb
mkdir -p /sys/kernel/config 2>/dev/null || true
[[ -d /sys/module/null_blk ]] || modprobe null_blk nr_devices=0 || fail "modprobe null_blk failed"
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
mkdir "$d" || fail "mkdir $d failed"
for kv in size=256 blocksize=512 memory_backed=1 zoned=1 zone_size=4 zone_capacity=3 \
	zone_nr_conv=0 zone_max_open=14 zone_max_active=14 max_sectors=2048 zone_append_max_sectors=0; do
	echo "${kv#*=}" >"$d/${kv%%=*}" || fail "null_blk: $kv refused"
done
echo 1 >"$d/power" || fail "null_blk: power on failed"
nb=zemulnb
[[ -d /sys/block/$nb ]] || nb=nullb$(cat "$d/index")
wait_until 5 test -b "/dev/$nb" || fail "/dev/$nb did not appear"
ours=$(cat "/sys/block/$BIUS_NAME/queue/zone_append_max_bytes")
theirs=$(cat "/sys/block/$nb/queue/zone_append_max_bytes")
info "zone_append_max_bytes: BIUS $ours, null_blk $theirs"
[[ $ours == "$theirs" ]] || fail "zone_append_max_bytes differs: BIUS $ours, null_blk $theirs"
for a in zoned chunk_sectors nr_zones max_open_zones max_active_zones max_hw_sectors_kb; do
	[[ $(cat "/sys/block/$BIUS_NAME/queue/$a") == $(cat "/sys/block/$nb/queue/$a") ]] \
		|| fail "queue/$a differs: BIUS $(cat "/sys/block/$BIUS_NAME/queue/$a"), null_blk $(cat "/sys/block/$nb/queue/$a")"
done
dmesg | grep -E "null_blk: .*(emulated|native) zone append" | tail -n 1 | sed 's/^/   kernel: /' || true
biusctl info --json "$BIUS_NAME" >info.json
jq -e '.zoned.append_emulated == true and .zoned.max_append == 0' info.json >/dev/null \
	|| fail "biusctl info does not report the emulated append: $(jq -c .zoned info.json)"
biusctl info "$BIUS_NAME" | grep -E '^(max_append|features):' | sed 's/^/   info: /'
grep -q '^max_append: emulated' <<<"$(biusctl info "$BIUS_NAME")" || fail "biusctl info does not show max_append: emulated"
echo 0 >"$d/power"
rmdir "$d"

step "mkfs.btrfs -O zoned, mount, write, scrub, remount, verify"
mkfs.btrfs -f -O zoned -d single -m single -L zemul "$BIUS_DEV" >mkfs.txt 2>&1 || { cat mkfs.txt; fail "mkfs.btrfs failed"; }
mkdir -p /mnt/zemul
mount -t btrfs "$BIUS_DEV" /mnt/zemul || fail "mount failed"
src=/tmp/zemul-src
make_tree "$src" /tmp/zemul.sha256 40 677 0 1 4095 4096 65537 1048576 3145728 8388608
echo >$T/trace
echo 1 >$T/events/block/block_bio_queue/enable
echo 1 >$T/tracing_on
cp -a "$src/." /mnt/zemul/
head -c $((4 << 20)) /dev/urandom >/tmp/zemul-direct
dd if=/tmp/zemul-direct of=/mnt/zemul/direct bs=1M oflag=direct status=none || fail "direct write failed"
sync
echo 0 >$T/tracing_on
echo 0 >$T/events/block/block_bio_queue/enable
# btrfs's data bios are zone appends (op "N", "ZA" since 6.17) when they
# are queued; the block layer makes them writes before the driver sees them
appends=$(grep -c "block_bio_queue: $majmin \(N\|ZA\)[A-Z]* [0-9]* + [1-9]" $T/trace) || true
info "zone append bios queued by btrfs: $appends"
[[ $appends -gt 0 ]] || fail "btrfs queued no zone append to $BIUS_DEV"
check_tree /mnt/zemul /tmp/zemul.sha256 "right after writing"
btrfs scrub start -B /mnt/zemul >scrub.txt 2>&1 || { cat scrub.txt; fail "btrfs scrub failed"; }
grep -Ei 'error|summary|status' scrub.txt | sed 's/^/   scrub: /' || true
grep -Eiq 'no errors found|error summary: *no errors' scrub.txt || { cat scrub.txt; fail "btrfs scrub found errors"; }
zones_agree "$BIUS_DEV"
umount /mnt/zemul || fail "umount failed"
btrfs check --readonly "$BIUS_DEV" >check.txt 2>&1 || { cat check.txt; fail "btrfs check found problems"; }
echo 3 >/proc/sys/vm/drop_caches
mount -t btrfs "$BIUS_DEV" /mnt/zemul || fail "remount failed"
check_tree /mnt/zemul /tmp/zemul.sha256 "after remount"
cmp /tmp/zemul-direct /mnt/zemul/direct || fail "the direct-I/O file differs after remount"
umount /mnt/zemul || fail "umount failed"

step "the daemon served writes, and no zone append"
biusctl stats --json "$BIUS_NAME" >stats.json
writes=$(jq -r '.ops.write.count' stats.json)
appends=$(jq -r '.ops.zone_append.count' stats.json)
info "daemon statistics: $writes writes ($(jq -r '.ops.write.bytes' stats.json) bytes), $appends zone appends"
[[ $writes -gt 0 ]] || fail "the daemon served no write"
[[ $appends -eq 0 ]] || fail "the daemon served $appends zone appends"

step "fio --zonemode=zbd, write and verify"
blkzone reset "$BIUS_DEV" || fail "blkzone reset failed"
run_fio fio.txt --name=zemul --filename="$BIUS_DEV" --direct=1 --zonemode=zbd --max_open_zones=8 \
	--rw=write --bs=64k --ioengine=libaio --iodepth=4 --size=64M --verify=crc32c --do_verify=1
appends=$(biusctl stats --json "$BIUS_NAME" | jq -r '.ops.zone_append.count')
[[ $appends -eq 0 ]] || fail "the daemon served $appends zone appends after fio"

step "stop the daemon"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "zoned-append-emulated: OK"
