# shellcheck shell=bash
# Helpers of the zoned tests (tests/zoned-*.sh): a zoned null_blk as the
# reference, zone reports normalised for comparison.  Source after lib.sh.

# nullb_zoned NAME SIZE_MB ZONE_MB CAP_MB NR_CONV MAX_OPEN MAX_ACTIVE [BS]:
# create a memory-backed zoned null_blk through configfs; sets NULLB_DEV
# (/dev/NAME) and NULLB_NAME (NAME).
nullb_zoned() {
	local name=$1 d
	[[ -d /sys/module/null_blk ]] || modprobe null_blk nr_devices=0 || fail "modprobe null_blk failed"
	[[ -d /sys/module/configfs ]] || modprobe configfs
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
	d=/sys/kernel/config/nullb/$name
	mkdir "$d" || fail "mkdir $d failed"
	echo "$2" >"$d/size"
	echo "${8:-512}" >"$d/blocksize"
	echo 1 >"$d/memory_backed"
	echo 1 >"$d/zoned"
	echo "$3" >"$d/zone_size"
	echo "$4" >"$d/zone_capacity"
	echo "$5" >"$d/zone_nr_conv"
	echo "$6" >"$d/zone_max_open"
	echo "$7" >"$d/zone_max_active"
	# 1 MiB requests, as BIUS's default --max-io (null_blk's default is
	# 127 KiB, which also caps its zone_append_max_bytes)
	echo 2048 >"$d/max_sectors"
	echo 1 >"$d/power" || fail "null_blk $name: power on failed"
	# (null_blk names a configfs-made disk after its directory)
	NULLB_NAME=$name
	[[ -d /sys/block/$name ]] || NULLB_NAME=nullb$(cat "$d/index")
	NULLB_DEV=/dev/$NULLB_NAME
	wait_until 5 test -b "$NULLB_DEV" || fail "$NULLB_DEV did not appear"
	info "null_blk $name is $NULLB_DEV: ${2} MiB, zones ${3} MiB (cap ${4} MiB), $5 conventional, max open $6, max active $7"
}

# nullb_remove NAME
nullb_remove() {
	local d=/sys/kernel/config/nullb/$1
	echo 0 >"$d/power"
	rmdir "$d"
}

# zreport DEV: `blkzone report`, with the device name replaced by DEV
zreport() {
	blkzone report "$1" | sed "s|$1|DEV|g"
}

# zcond_counts DEV: "   zones: COUNT CONDITION" lines, from blkzone report
zcond_counts() {
	blkzone report "$1" | sed -n 's/.*zcond: *\([0-9]*\)(\([a-z]*\)).*/\2/p' | sort | uniq -c | sed 's/^/   zones: /'
}

# w SECTOR NR_SECTORS: one direct write of NR_SECTORS sectors of /tmp/pattern to $DEV
w() { dd if=/tmp/pattern of="$DEV" bs=$(($2 * 512)) count=1 seek=$(($1 * 512)) oflag=direct,seek_bytes status=none; }

# zoned_sched DISK: the scheduler the kernel gives the zoned DISK.  Before
# 6.10 zoned writes needed mq-deadline to stay in order, and the kernel
# chose it; since 6.10 zone write plugging orders them under any scheduler
# and a zoned disk gets the default of any disk: mq-deadline with one
# hardware queue, none with more.
zoned_sched() {
	if ! kernel_at_least 6 10 || [[ $(ls -d /sys/block/"$1"/mq/*/ | wc -l) -eq 1 ]]; then
		echo mq-deadline
	else
		echo none
	fi
}

# zone_after_failed_write DEV SECTOR: what a user must do after a write to
# the zone at SECTOR failed, before writing to it again.  Since 6.10 zone
# write plugging loses track of a zone's write pointer when a write to it
# fails, and fails every later write to it (EIO, the device never sees
# them) until the zone is reported, reset or finished; before 6.10 the
# kernel kept no write pointer.  A report of the zone re-reads it.
zone_after_failed_write() {
	blkzone report -o "$2" -c 1 "$1" >/dev/null || fail "blkzone report of the zone at $2 of $1 failed"
}

# zone_attrs DISK: the queue attributes that must match between a zoned
# null_blk and a zoned BIUS disk of the same geometry, one "name value" a line
zone_attrs() {
	local q=/sys/block/$1/queue a
	for a in zoned chunk_sectors nr_zones max_open_zones max_active_zones \
		zone_append_max_bytes logical_block_size physical_block_size; do
		echo "$a $(cat "$q/$a")"
	done
	# whether mq-deadline can be (and is) the scheduler
	echo "scheduler $(grep -o '\[[^]]*\]' "$q/scheduler")"
	echo "mq-deadline $(grep -c mq-deadline "$q/scheduler")"
}

# zcond DEV ZONE_INDEX: the condition name of one zone (from biusctl zones
# --json; works on any zoned disk)
zcond() {
	biusctl zones --json "$1" | jq -r --argjson i "$2" '.[] | select(.zone == $i) | .cond'
}

# zcond_num NAME / ztype_num NAME: the kernel's BLK_ZONE_COND_* and
# BLK_ZONE_TYPE_* value of biusctl's names
zcond_num() {
	case $1 in
	NOT_WP) echo 0 ;; EMPTY) echo 1 ;; IMP_OPEN) echo 2 ;; EXP_OPEN) echo 3 ;;
	CLOSED) echo 4 ;; READONLY) echo 13 ;; FULL) echo 14 ;; OFFLINE) echo 15 ;;
	*) echo "?$1" ;;
	esac
}
ztype_num() {
	case $1 in
	CONVENTIONAL) echo 1 ;; SEQ_WRITE_REQUIRED) echo 2 ;; SEQ_WRITE_PREFERRED) echo 3 ;;
	*) echo "?$1" ;;
	esac
}

# The zones of DEV as lines "start len cap wp cond type" (decimal sectors,
# wp relative to the zone start, "-" for conventional, read-only and
# offline zones, as biusctl shows them), from
# blkzone (zones_blkzone), biusctl zones --json (zones_json) and the
# biusctl zones table (zones_table).
zones_blkzone() {
	local s l c w z t
	blkzone report "$1" | sed -nE 's/.*start: 0x([0-9a-f]+), len 0x([0-9a-f]+), cap 0x([0-9a-f]+), wptr 0x([0-9a-f]+) .*zcond: *([0-9]+)\(.*type: *([0-9]+)\(.*/\1 \2 \3 \4 \5 \6/p' |
		while read -r s l c w z t; do
			case $z in 0 | 13 | 15) w=- ;; *) w=$((16#$w)) ;; esac
			echo "$((16#$s)) $((16#$l)) $((16#$c)) $w $z $t"
		done
}
zones_json() {
	local s l c w z t
	biusctl zones --json "$1" | jq -r '.[] | "\(.start) \(.len) \(.capacity) \(.wp) \(.type) \(.cond)"' |
		while read -r s l c w t z; do
			[[ $w == null ]] && w=- || w=$((w - s))
			echo "$s $l $c $w $(zcond_num "$z") $(ztype_num "$t")"
		done
}
zones_table() {
	local s l c w z t
	biusctl zones "$1" | tail -n +2 | while read -r _ s l c w t z; do
		echo "$s $l $c $w $(zcond_num "$z") $(ztype_num "$t")"
	done
}

# zones_agree DEV: blkzone, biusctl zones and biusctl zones --json must
# describe the same zones
zones_agree() {
	zones_blkzone "$1" >/tmp/zones.blkzone
	zones_json "$1" >/tmp/zones.json
	zones_table "$1" >/tmp/zones.table
	[[ -s /tmp/zones.blkzone ]] || fail "blkzone report $1 gave no zones"
	diff /tmp/zones.blkzone /tmp/zones.json || fail "$1: biusctl zones --json disagrees with blkzone report (diff above)"
	diff /tmp/zones.blkzone /tmp/zones.table || fail "$1: biusctl zones disagrees with blkzone report (diff above)"
}
