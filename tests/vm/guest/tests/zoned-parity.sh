#!/bin/bash
# timeout: 120
# A zoned BIUS ramdisk and a zoned null_blk of the same geometry (4 MiB
# zones of 3 MiB capacity, 4 conventional zones, max open 4, max active 6)
# look the same to the kernel and user space: blkzone report and the zoned
# queue attributes match; biusctl zones (table and --json) agree with
# blkzone on both.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius

step "zoned null_blk and zoned BIUS ramdisk, 128 MiB each"
nullb_zoned parity 128 4 3 4 4 6
bius_start --zoned --size 128M --zone-size 4M --zone-capacity 3M --conv-zones 4 \
	--max-open 4 --max-active 6 --queues 2 --name zparity ramdisk

step "all queue attributes (information; max_hw_sectors etc. may differ)"
for a in /sys/block/"$NULLB_NAME"/queue/*; do
	[[ -f $a && -r $a ]] || continue
	n=$(basename "$a")
	x=$(tr '\n' ' ' <"$a" 2>/dev/null) || continue
	y=$(tr '\n' ' ' <"/sys/block/$BIUS_NAME/queue/$n" 2>/dev/null) || y="(missing)"
	[[ $x == "$y" ]] || info "differs: $n: null_blk '$x', bius '$y'"
done

step "zoned attributes must match"
zone_attrs "$NULLB_NAME" | sed 's/^/   null_blk: /'
zone_attrs "$NULLB_NAME" >/tmp/attrs.nullb
zone_attrs "$BIUS_NAME" >/tmp/attrs.bius
diff /tmp/attrs.nullb /tmp/attrs.bius || fail "zoned queue attributes differ (diff above: < null_blk, > bius)"
[[ $(grep '^zoned ' /tmp/attrs.bius) == "zoned host-managed" ]] || fail "not host-managed: $(grep '^zoned ' /tmp/attrs.bius)"
sched=$(zoned_sched "$BIUS_NAME")
[[ $(grep '^scheduler ' /tmp/attrs.bius) == "scheduler [$sched]" ]] \
	|| fail "the scheduler is not $sched: $(grep '^scheduler ' /tmp/attrs.bius)"
[[ $(blockdev --getsize64 "$NULLB_DEV") == $(blockdev --getsize64 "$BIUS_DEV") ]] || fail "sizes differ"

step "blkzone report must match"
zreport "$NULLB_DEV" >/tmp/report.nullb
zreport "$BIUS_DEV" >/tmp/report.bius
head -n 6 /tmp/report.bius | sed 's/^/   /'
[[ $(wc -l </tmp/report.bius) == 32 ]] || fail "expected 32 zones, blkzone reports $(wc -l </tmp/report.bius)"
diff /tmp/report.nullb /tmp/report.bius || fail "blkzone report differs (diff above: < null_blk, > bius)"
blkzone capacity "$BIUS_DEV" >/tmp/cap.bius || fail "blkzone capacity failed"
blkzone capacity "$NULLB_DEV" >/tmp/cap.nullb
diff <(sed "s|$NULLB_DEV|DEV|g" /tmp/cap.nullb) <(sed "s|$BIUS_DEV|DEV|g" /tmp/cap.bius) || fail "blkzone capacity differs"

step "biusctl zones and --json agree with blkzone (bius, null_blk, after writes)"
zones_agree "$BIUS_DEV"
zones_agree "$NULLB_DEV"
for d in "$BIUS_DEV" "$NULLB_DEV"; do	# some zones in other conditions
	dd if=/dev/zero of="$d" bs=4k count=2 seek=$((5 * 1024)) oflag=direct status=none || fail "write to zone 5 of $d failed"
	blkzone open -o $((6 * 8192)) -c 1 "$d" || fail "open zone 6 of $d failed"
	blkzone finish -o $((7 * 8192)) -c 1 "$d" || fail "finish zone 7 of $d failed"
	dd if=/dev/zero of="$d" bs=4k count=1 seek=$((8 * 1024)) oflag=direct status=none || fail "write to zone 8 of $d failed"
	blkzone close -o $((8 * 8192)) -c 1 "$d" || fail "close zone 8 of $d failed"
	zones_agree "$d"
done
zones_blkzone "$BIUS_DEV" | sed -n '5,10p' | sed 's/^/   start len cap wp cond type: /'
diff <(zreport "$NULLB_DEV") <(zreport "$BIUS_DEV") || fail "blkzone report differs after the same operations"
biusctl zones "$BIUS_DEV" >/tmp/zones.shown
head -n 10 /tmp/zones.shown | sed 's/^/   /'

step "teardown"
bius_stop "$BIUS_PID" "$BIUS_NAME"
nullb_remove parity
echo "zoned-parity: OK"
