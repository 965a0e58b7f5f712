#!/bin/bash
# timeout: 300
# The examples of crates/bius (target/release/examples/*), started as a
# user starts them and put to real use.  memdisk: fio verify, ext4 with
# files, e2fsck clean, remount; a discard of the whole disk gives all its
# memory back; biusctl stats and info reach its control socket.
# zoned_memdisk: blkzone and sysfs show the geometry asked
# for, fio --zonemode=zbd verify writes fill zones, a reset frees them.
# integrity: fio verify through it, the backing file holds the same data,
# a block corrupted in the file fails to read with EIO (its neighbours
# read), and heals when written again.  slow_memdisk (async, on tokio):
# fio verify with many requests in flight, no read faster than its latency,
# the IOPS at QD 1 and QD 16 printed.  Each stops on SIGTERM (status 0, its
# disk gone).
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius
for example in memdisk zoned_memdisk integrity slow_memdisk; do require_artifact "$example"; done

# sysfs_is DISK ATTR VALUE: /sys/block/DISK/queue/ATTR must read VALUE
sysfs_is() {
	local got
	got=$(cat "/sys/block/$1/queue/$2")
	[[ $got == "$3" ]] || fail "$1: queue/$2 is '$got', expected '$3'"
}

# zones_are WHEN [ZONE...]: blkzone report of $BIUS_DEV (as "start len cap
# wp cond type") shows the geometry of zoned_memdisk's step below: 2
# conventional zones, then 30 sequential zones of 6144 sectors capacity,
# full if listed, else empty
zones_are() {
	local when=$1 z
	shift
	for ((z = 0; z < 32; z++)); do
		if ((z < 2)); then
			echo "$((z * 8192)) 8192 8192 - 0 1"
		elif [[ " $* " == *" $z "* ]]; then
			echo "$((z * 8192)) 8192 6144 6144 14 2"
		else
			echo "$((z * 8192)) 8192 6144 0 1 2"
		fi
	done >zones.expected
	zones_blkzone "$BIUS_DEV" >zones.txt
	diff zones.expected zones.txt || fail "blkzone report $when: not the zones expected (diff above)"
}

# said_at_exit LINE: the stopped daemon's stderr must hold LINE
said_at_exit() {
	sed 's/^/   stderr: /' "$BIUS_ERR"
	grep -qxF "$1" "$BIUS_ERR" || fail "the daemon did not say '$1' at exit"
}

# read_block N: one direct read of 4 KiB block N of $BIUS_DEV
read_block() { dd if="$BIUS_DEV" of=/dev/null bs=4k count=1 skip="$1" iflag=direct status=none; }

step "memdisk: 128 MiB, 2 queues"
daemon_start memdisk --size 128M --name exmem --queues 2
[[ $(blockdev --getsize64 "$BIUS_DEV") -eq $((128 << 20)) ]] || fail "$BIUS_DEV is not 128 MiB"
[[ $(cat "/sys/block/$BIUS_NAME/queue/discard_max_bytes") -gt 0 ]] || fail "memdisk: no discard"
[[ $(cat "/sys/block/$BIUS_NAME/queue/write_zeroes_max_bytes") -gt 0 ]] || fail "memdisk: no write-zeroes"

step "memdisk: fio verify, 2 jobs, libaio QD 8, 512 B to 64 KiB (pieces of pages)"
run_fio mem.txt --name=mem --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth=8 \
	--rw=randwrite --bsrange=512-64k --size=24M --offset_increment=32M --numjobs=2 \
	--verify=crc32c --verify_fatal=1 --group_reporting

step "memdisk: ext4, files, e2fsck, remount"
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$BIUS_DEV" || fail "mkfs.ext4 failed"
mkdir -p /mnt/ex
mount -t ext4 "$BIUS_DEV" /mnt/ex || fail "mount failed"
make_tree /tmp/ex-src /tmp/ex.sha256 50 313 0 1 4097 65536 1048576 8388608
cp -a /tmp/ex-src/. /mnt/ex/
sync
check_tree /mnt/ex /tmp/ex.sha256 "right after writing"
umount /mnt/ex || fail "umount failed"
e2fsck -fn "$BIUS_DEV" || fail "e2fsck found problems"
echo 3 >/proc/sys/vm/drop_caches
mount -t ext4 "$BIUS_DEV" /mnt/ex || fail "remount failed"
check_tree /mnt/ex /tmp/ex.sha256 "after remount"
umount /mnt/ex || fail "umount failed"

step "memdisk: discard the whole disk: it reads as zeroes and holds no memory"
blkdiscard "$BIUS_DEV" || fail "blkdiscard failed"
cmp -n $((128 << 20)) "$BIUS_DEV" /dev/zero || fail "the discarded disk does not read as zeroes"

step "memdisk answers biusctl on its control socket, as every daemon on the bius crate does"
biusctl stats --json "$BIUS_NAME" >exmem-stats.json || fail "biusctl stats $BIUS_NAME failed"
grep -q '"write"' exmem-stats.json || fail "biusctl stats $BIUS_NAME: no write statistics"
biusctl info "$BIUS_NAME" >/dev/null || fail "biusctl info $BIUS_NAME failed"
bius_stop "$BIUS_PID" "$BIUS_NAME"
said_at_exit "memdisk: 0 KiB of pages held at exit"
[[ ! -e /run/bius/$BIUS_NAME.sock ]] || fail "memdisk left its control socket behind"

step "zoned_memdisk: 128 MiB, 4 MiB zones of 3 MiB, 2 conventional, max open 6, max active 8"
daemon_start zoned_memdisk --size 128M --zone-size 4M --zone-capacity 3M --conv-zones 2 \
	--max-open 6 --max-active 8 --name exzoned
sysfs_is "$BIUS_NAME" zoned host-managed
sysfs_is "$BIUS_NAME" nr_zones 32
sysfs_is "$BIUS_NAME" chunk_sectors 8192
sysfs_is "$BIUS_NAME" max_open_zones 6
sysfs_is "$BIUS_NAME" max_active_zones 8
sched=$(zoned_sched "$BIUS_NAME")
grep -q "\[$sched\]" "/sys/block/$BIUS_NAME/queue/scheduler" || fail "$sched is not selected"
zones_are "after start"

step "zoned_memdisk: fio --zonemode=zbd, 2 jobs, sequential 128 KiB writes over 6 zones each, verify"
run_fio zbd.txt --name=zbd --filename="$BIUS_DEV" --direct=1 --zonemode=zbd --max_open_zones=6 \
	--rw=write --bs=128k --ioengine=psync --offset=8M --size=24M --offset_increment=60M \
	--numjobs=2 --verify=crc32c --verify_fatal=1 --group_reporting
zones_are "after fio" 2 3 4 5 6 7 17 18 19 20 21 22

step "zoned_memdisk: zone 8 written at its write pointer only; past it reads the fill pattern 0xff"
head -c 4096 /dev/urandom >block
{ cat block; head -c 4096 /dev/zero | tr '\0' '\377'; } >expected
zone8=$((8 * 1024))	# in 4 KiB blocks
dd if=block of="$BIUS_DEV" bs=4k seek=$zone8 oflag=direct status=none || fail "write at the write pointer failed"
if dd if=block of="$BIUS_DEV" bs=4k seek=$((zone8 + 2)) oflag=direct status=none 2>dd.err; then
	fail "a write past the write pointer succeeded"
fi
grep -q 'Input/output error' dd.err || fail "a write past the write pointer failed without EIO: $(cat dd.err)"
dd if="$BIUS_DEV" of=got bs=4k count=2 skip=$zone8 iflag=direct status=none || fail "read of zone 8 failed"
cmp expected got || fail "zone 8 does not read as its data, then the fill pattern"

step "zoned_memdisk: reset every zone: the data is gone, so is its memory"
blkzone reset "$BIUS_DEV" || fail "blkzone reset failed"
zones_are "after the reset"
bius_stop "$BIUS_PID" "$BIUS_NAME"
said_at_exit "zoned_memdisk: 0 KiB of zone data held at exit"

step "integrity: in front of a 64 MiB file"
inner=/tmp/integrity.img
rm -f "$inner"
daemon_start integrity --file "$inner" --size 64M --name exinteg
[[ $(stat -c %s "$inner") -eq $((64 << 20)) ]] || fail "integrity did not make a 64 MiB $inner"
sysfs_is "$BIUS_NAME" logical_block_size 4096
sysfs_is "$BIUS_NAME" discard_max_bytes 0

step "integrity: fio verify, 2 jobs, libaio QD 8, 4 to 64 KiB"
run_fio integ.txt --name=integ --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth=8 \
	--rw=randwrite --bsrange=4k-64k --blockalign=4k --size=24M --offset_increment=32M \
	--numjobs=2 --verify=crc32c --verify_fatal=1 --group_reporting
cmp "$BIUS_DEV" "$inner" || fail "the disk and its backing file differ"

step "integrity: corrupt block 1000 in the file: reading it fails with EIO, its neighbours read"
dd if=/dev/urandom of="$BIUS_DEV" bs=4k count=3 seek=999 oflag=direct status=none || fail "write failed"
dd if=/dev/zero of="$inner" bs=1 count=16 seek=$((1000 * 4096 + 100)) conv=notrunc status=none
rc=0
read_block 1000 2>dd.err || rc=$?
sed 's/^/   dd: /' dd.err
[[ $rc -ne 0 ]] || fail "the corrupted block read without error"
grep -q 'Input/output error' dd.err || fail "the corrupted block failed without EIO"
read_block 999 || fail "block 999 next to the corrupted one does not read"
read_block 1001 || fail "block 1001 next to the corrupted one does not read"
grep -q 'block 1000 does not match its checksum' "$BIUS_ERR" || fail "integrity did not report block 1000"

step "integrity: writing the block again heals it"
dd if=/dev/urandom of="$BIUS_DEV" bs=4k count=1 seek=1000 oflag=direct status=none || fail "rewrite failed"
read_block 1000 || fail "block 1000 does not read after being written again"
bius_stop "$BIUS_PID" "$BIUS_NAME"
rm -f "$inner"

step "slow_memdisk: 64 MiB, reads take 5 ms, writes 1 ms, depth 32"
daemon_start slow_memdisk --size 64M --read-latency 5ms --write-latency 1ms --depth 32 --queues 1 --name exslow
run_fio slow.txt --name=slow --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth=16 \
	--rw=randwrite --bs=4k --size=4M --verify=crc32c --verify_fatal=1
# qd_iops QD: IOPS of 2 s of 4 KiB random reads at queue depth QD; the
# smallest total latency of the run in slowest.QD (ns)
qd_iops() {
	fio --name=qd --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth="$1" \
		--rw=randread --bs=4k --size=4M --runtime=2 --time_based --output-format=json >"qd$1.json" \
		|| fail "fio at QD $1 failed"
	jq -r '.jobs[0].read.lat_ns.min' "qd$1.json" >"slowest.$1"
	jq -r '.jobs[0].read.iops | floor' "qd$1.json"
}
qd1=$(qd_iops 1) qd16=$(qd_iops 16)
info "IOPS at QD 1: $qd1, at QD 16: $qd16; fastest reads: $(cat slowest.1) ns, $(cat slowest.16) ns"
for qd in 1 16; do
	(($(cat "slowest.$qd") >= 5000000)) || fail "a read at QD $qd took less than the 5 ms latency"
done
echo "RESULT examples: slow_memdisk (5 ms reads) QD1 $qd1 IOPS, QD16 $qd16 IOPS"
bius_stop "$BIUS_PID" "$BIUS_NAME"
echo "examples: OK"
