#!/bin/bash
# timeout: 3300
# Guest side of scripts/zone-size.sh (installed as
# /bius/tests/zone-size.sh, run by the test VM's init as the test
# "zone-size"): the zone-size study.  For each zone size and each device
# (a zoned BIUS ramdisk, a zoned null_blk of the same geometry), one at a
# time: the device, F2FS on it (mkfs.f2fs -m: metadata in the
# conventional zones), RocksDB's db_bench on it, a YCSB-A-like load
# (fillrandom of KEYS keys, VALUE-byte values) then a 50% read / 50%
# update mix (readrandomwriterandom --readwritepercent=50, OPS
# operations), counters taken around each phase, the zones at the end;
# then the file system is unmounted and the device removed (its memory
# freed) before the next.  With biusbench.fs=zenfs the same on ZenFS
# instead of F2FS: `zenfs mkfs` on the raw disk, ZenFS's db_bench
# (RocksDB 9.10.0 with ZenFS, scripts/build-zenfs.sh) with
# --fs_uri=zenfs://dev:<disk>.
#
# Results: /results/zs/ (9p): meta.txt, runs.txt (one line per run:
# DEVICE ZONE_MB DIR STATUS FS), and per run <device>-z<zone MiB>/
# (ZenFS: zenfs-<device>-z<zone MiB>/):
#   args.txt              how the device was made
#   mkfs.txt              mkfs.f2fs's output (its overprovision and
#                         reserved sections), or zenfs mkfs's
#   <tag>.stat            /sys/block/<disk>/stat at each point: created,
#                         mounted (after mkfs and mount), loaded (after
#                         the load and sync), end (after the mix and sync),
#                         umounted
#   <tag>.stats.json      the same points from `biusctl stats --json`
#                         (BIUS only, when this biusctl has `stats`;
#                         end.stats.json with --zones)
#   <tag>.f2fs            /sys/fs/f2fs/<disk>/ counters (lifetime_write_kbytes)
#   <tag>.f2fs-status     /sys/kernel/debug/f2fs/status (segments, GC)
#   load.txt, mix.txt     db_bench's output (--statistics: its tickers)
#   end.zones.txt         `blkzone report` after the mix (the zone fill)
#   end.du                live data: the database's files, bytes
#                         (ZenFS: the sum of `zenfs list`'s sizes, its
#                         listing in end.ls, `zenfs df` in df.txt)
#   <tag>.mem             the guest's free memory, page cache, dirty pages
#   times.txt             seconds each phase took
# Progress lines on the console: BIUS-BENCH ...
#
# Kernel command line knobs (dotted, see init): biusbench.zones=64,128,256
# (zone sizes, MiB) biusbench.devices=bius,nullb biusbench.space_mb=MiB
# (the sequential zones F2FS has beyond the sections it reserves for its
# cleaner, the same for every zone size, a multiple of each; it keeps ovp%
# of them too and gives its files the rest: the device is sized for it,
# see dev_size; default 2048) biusbench.ovp=PCT
# (mkfs.f2fs -o, default 10, what mkfs picks itself for these sizes)
# biusbench.dev_mb=MiB (instead: one device size for every zone size; F2FS's
# space then shrinks as the zones grow) biusbench.conv_zones=N
# (conventional zones at the start, default 2: mkfs.f2fs -m needs two, the
# superblock's and its metadata's; more would add conventional sections to
# F2FS's main area, more space with smaller zones)
# biusbench.keys=N (keys of the load) biusbench.ops=N (operations of the
# mix; default: keys) biusbench.value=BYTES biusbench.key_size=BYTES
# biusbench.queues=N (BIUS queues; default nproc)
# biusbench.fill=filluniquerandom|fillrandom|fillseq (the load; default
# each key once in random order, as YCSB's load) biusbench.sync_kb=KiB
# (RocksDB's bytes_per_sync and wal_bytes_per_sync, default 1024: files
# are written back as they grow, as in production set-ups, instead of
# when the page cache chooses: a WAL deleted before its writeback never
# reaches the disk) biusbench.rocks_scale=N (RocksDB's
# memtable, SST file and level-1 sizes are its defaults, 64, 64 and 256
# MiB, divided by N: the LSM tree of a data set N times larger; default 4)
# biusbench.trace=1 (each BIUS run traces every request, `biusctl create
# --trace`, into its directory as trace.bin; default 0)
# biusbench.fs=f2fs|zenfs|f2fs,zenfs (default f2fs) biusbench.zenfs_bin=DIR
# (where ZenFS's db_bench and zenfs are in the image; the host sets it).
# For ZenFS: no conventional zones (it uses only sequential ones) and the
# device is SPACE_MB plus its 3 metadata zones, at least 32 zones (its
# minimum): see dev_size.
source /bius/lib.sh
source /bius/zoned-lib.sh
set +e	# a failing run is recorded and skipped, not fatal
set -u

ZONES="64 128 256" DEVICES="bius nullb" DEV_MB=0 SPACE_MB=2048 OVP=10 CONV=2 KEYS=400000 OPS=""
VALUE=1000 KEY_SIZE=16 QUEUES=$(nproc) FILL=filluniquerandom ROCKS_SCALE=4 SYNC_KB=1024 TRACE=0
FSS=f2fs ZENFS_BIN=/work/zenfs-build/bin
for w in $(cat /proc/cmdline); do
	case $w in
	biusbench.zones=*) ZONES=${w#*=}; ZONES=${ZONES//,/ } ;;
	biusbench.devices=*) DEVICES=${w#*=}; DEVICES=${DEVICES//,/ } ;;
	biusbench.dev_mb=*) DEV_MB=${w#*=} ;;
	biusbench.space_mb=*) SPACE_MB=${w#*=} ;;
	biusbench.ovp=*) OVP=${w#*=} ;;
	biusbench.sync_kb=*) SYNC_KB=${w#*=} ;;
	biusbench.conv_zones=*) CONV=${w#*=} ;;
	biusbench.keys=*) KEYS=${w#*=} ;;
	biusbench.ops=*) OPS=${w#*=} ;;
	biusbench.value=*) VALUE=${w#*=} ;;
	biusbench.key_size=*) KEY_SIZE=${w#*=} ;;
	biusbench.queues=*) QUEUES=${w#*=} ;;
	biusbench.fill=*) FILL=${w#*=} ;;
	biusbench.rocks_scale=*) ROCKS_SCALE=${w#*=} ;;
	biusbench.trace=*) TRACE=${w#*=} ;;
	biusbench.fs=*) FSS=${w#*=}; FSS=${FSS//,/ } ;;
	biusbench.zenfs_bin=*) ZENFS_BIN=${w#*=} ;;
	esac
done
OPS=${OPS:-$KEYS}
MIB=$((1 << 20))
OUT=/results/zs
MNT=/mnt/zs
mkdir -p "$OUT" "$MNT"
: >"$OUT/runs.txt"

say() { echo "BIUS-BENCH $*" >/dev/console; echo "== $*"; }
# (zoned-lib's nullb_zoned calls fail(), which must not end the study)
fail() { echo "ERROR: $*"; return 1; }

modprobe f2fs || say "ERROR modprobe f2fs failed"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
modprobe bius 2>/dev/null
has_stats=0
biusctl stats --help >/dev/null 2>&1 && has_stats=1

{
	echo "kernel $(uname -r)"
	echo "cpus $(nproc)"
	echo "mem_kb $(awk '/MemTotal/{print $2}' /proc/meminfo)"
	echo "zones_mb $ZONES"
	echo "devices $DEVICES"
	echo "dev_mb $DEV_MB"
	echo "space_mb $SPACE_MB"
	echo "ovp $OVP"
	echo "sync_kb $SYNC_KB"
	echo "conv_zones $CONV"
	echo "keys $KEYS"
	echo "ops $OPS"
	echo "value $VALUE"
	echo "key_size $KEY_SIZE"
	echo "fill $FILL"
	echo "rocks_scale $ROCKS_SCALE"
	echo "bius_queues $QUEUES"
	echo "biusctl_stats $has_stats"
	echo "trace $TRACE"
	echo "fs $FSS"
	echo "db_bench $(db_bench --version 2>&1 | head -1)"
	echo "mkfs.f2fs $(mkfs.f2fs -V 2>&1 | head -1)"
	if [[ " $FSS " == *" zenfs "* ]]; then
		echo "db_bench_zenfs $("$ZENFS_BIN/db_bench" --version 2>&1 | head -1)"
		echo "zenfs $("$ZENFS_BIN/zenfs" --version 2>&1 | grep -m1 -i version)"
	fi
	echo "started_uptime $(cut -d' ' -f1 /proc/uptime)"
} >"$OUT/meta.txt"
say "file systems $FSS; zone sizes $ZONES MiB; devices $DEVICES; $( ((DEV_MB)) && echo "${DEV_MB} MiB" || echo "F2FS space ${SPACE_MB} MiB"), $CONV conventional zones; $FILL $KEYS keys of ${KEY_SIZE}+${VALUE} B, then $OPS ops 50% reads 50% updates; RocksDB sizes / $ROCKS_SCALE; biusctl stats: $has_stats"

# stat_ios: the I/O and sector counts of a /sys/block/X/stat line
stat_ios() { awk '{print $1, $3, $5, $7, $12, $14, $16}'; }

# snap DIR TAG DISK BIUS(0|1) [--zones]: the device's counters now
snap() {
	local dir=$1 tag=$2 disk=$3 bius=$4
	shift 4
	local i a b
	grep -E '^(MemAvailable|Cached|Dirty):' /proc/meminfo >"$dir/$tag.mem"
	# (with BIUS's own counters: read the kernel's before and after them,
	# again while an I/O of F2FS's background work slipped in between)
	for ((i = 0; i < 5; i++)); do
		a=$(cat "/sys/block/$disk/stat")
		[[ $bius == 1 && $has_stats == 1 ]] || break
		biusctl stats "$disk" --json "$@" >"$dir/$tag.stats.json" 2>"$dir/$tag.stats.err" \
			|| say "ERROR biusctl stats $disk --json failed: $(head -c 200 "$dir/$tag.stats.err")"
		b=$(cat "/sys/block/$disk/stat")
		[[ $(stat_ios <<<"$a") != "$(stat_ios <<<"$b")" ]] || break
		sleep 0.5
	done
	echo "$a" >"$dir/$tag.stat"
	if [[ -d /sys/fs/f2fs/$disk ]]; then
		for f in lifetime_write_kbytes current_reserved_blocks unusable; do
			[[ -r /sys/fs/f2fs/$disk/$f ]] && echo "$f $(cat "/sys/fs/f2fs/$disk/$f")"
		done >"$dir/$tag.f2fs"
		cat /sys/kernel/debug/f2fs/status >"$dir/$tag.f2fs-status" 2>/dev/null
	fi
}

# db_bench_run DIR NAME ARGS...: db_bench on $MNT/db (ZenFS: ZenFS's
# db_bench on /db in ZenFS on $DISK), its output in DIR/NAME.txt; 1 if it
# failed
db_bench_run() {
	local dir=$1 name=$2 rc=0 db=(db_bench --db="$MNT/db")
	shift 2
	[[ $FS == zenfs ]] && db=("$ZENFS_BIN/db_bench" --fs_uri="zenfs://dev:$DISK" --db=/db)
	echo "${db[*]} $*" >"$dir/$name.txt"
	"${db[@]}" --key_size="$KEY_SIZE" --value_size="$VALUE" \
		--compression_type=none --statistics=1 --seed=1 --threads=1 \
		--bytes_per_sync=$((SYNC_KB * 1024)) --wal_bytes_per_sync=$((SYNC_KB * 1024)) \
		--write_buffer_size=$((64 * MIB / ROCKS_SCALE)) --target_file_size_base=$((64 * MIB / ROCKS_SCALE)) \
		--max_bytes_for_level_base=$((256 * MIB / ROCKS_SCALE)) "$@" \
		>>"$dir/$name.txt" 2>&1 || rc=$?
	[[ $rc == 0 ]] || say "ERROR db_bench $name exited with $rc: $(tail -n 3 "$dir/$name.txt" | tr '\n' ' ')"
	return $rc
}

# dev_size ZONE_MB: the device's MiB: DEV_MB, or CONV conventional zones
# plus the sections mkfs.f2fs reserves for its cleaner, 2 * (100 / OVP + 1)
# + 6 (28 at 10%: a count, whatever their size), plus SPACE_MB; for ZenFS
# SPACE_MB plus its 3 metadata zones, at least 32 zones
dev_size() {
	((DEV_MB)) && { echo "$DEV_MB"; return; }
	awk -v m="$SPACE_MB" -v z="$1" -v o="$OVP" -v c="$CONV" -v fs="$FS" 'BEGIN {
		r = 2 * (100 / o + 1) + 6; r = (r == int(r)) ? r : int(r) + 1
		s = m / z; s = (s == int(s)) ? s : int(s) + 1
		if (fs == "zenfs") { n = s + 3; print (n < 32 ? 32 : n) * z; exit }
		print (c + r + s) * z }'
}

# make_dev KIND ZONE_MB DIR: the device; sets DISK, DEVP, DAEMON (BIUS's pid)
make_dev() {
	local kind=$1 z=$2 dir=$3 conv=$CONV dev_mb
	[[ $FS == zenfs ]] && conv=0
	dev_mb=$(dev_size "$z")
	DISK="" DEVP="" DAEMON=""
	case $kind in
	bius)
		local args=(--zoned --size "${dev_mb}M" --zone-size "${z}M" --conv-zones "$conv"
			--queues "$QUEUES" --name "zs-bius-z$z" ramdisk)
		# (into the guest's RAM, copied to DIR when the daemon has ended)
		[[ $TRACE == 1 ]] && args=(--trace "/tmp/zs-bius-z$z.bin" "${args[@]}")
		echo "biusctl create ${args[*]}" >"$dir/args.txt"
		bius_launch "${args[@]}" || { say "ERROR $BIUS_WHY: $(head -c 300 "$BIUS_ERR")"; return 1; }
		DISK=$BIUS_NAME DEVP=$BIUS_DEV DAEMON=$BIUS_PID ;;
	nullb)
		echo "null_blk configfs size=$dev_mb zone_size=$z zone_capacity=$z zone_nr_conv=$conv memory_backed=1" >"$dir/args.txt"
		nullb_zoned "zs-nullb-z$z" "$dev_mb" "$z" "$z" "$conv" 0 0 || return 1
		DISK=$NULLB_NAME DEVP=$NULLB_DEV ;;
	*) say "ERROR unknown device kind $kind"; return 1 ;;
	esac
}

drop_dev() {
	local kind=$1 z=$2 dir=$3
	case $kind in
	bius)
		kill -TERM "$DAEMON"
		wait_until 60 eval "! kill -0 $DAEMON 2>/dev/null" || say "ERROR BIUS daemon $DAEMON still running"
		wait "$DAEMON" 2>/dev/null
		if [[ -f /tmp/zs-bius-z$z.bin ]]; then
			mv "/tmp/zs-bius-z$z.bin" "$dir/trace.bin" || say "ERROR keeping the trace failed"
		fi ;;
	nullb) nullb_remove "zs-nullb-z$z" ;;
	esac
}

# fs_make DIR: the file system on $DEVP (F2FS: mkfs.f2fs and mount on
# $MNT; ZenFS: zenfs mkfs, its aux_path in /tmp); sets st on failure
fs_make() {
	local dir=$1
	if [[ $FS == zenfs ]]; then
		echo mq-deadline >"/sys/block/$DISK/queue/scheduler"
		rm -rf "/tmp/zenfs-aux-$DISK"
		if ! "$ZENFS_BIN/zenfs" mkfs --zbd="$DISK" --aux_path="/tmp/zenfs-aux-$DISK" --force >"$dir/mkfs.txt" 2>&1; then
			say "ERROR zenfs mkfs failed: $(tail -n 3 "$dir/mkfs.txt" | tr '\n' ' ')"
			st=mkfs
		fi
	elif ! mkfs.f2fs -f -m -o "$OVP" -l zs "$DEVP" >"$dir/mkfs.txt" 2>&1; then
		say "ERROR mkfs.f2fs -m failed: $(grep -i error "$dir/mkfs.txt" | head -3 | tr '\n' ' ')"
		st=mkfs
	elif ! mount -t f2fs "$DEVP" "$MNT"; then
		say "ERROR mount failed"
		st=mount
	fi
}

# fs_df DIR: the file system's free space, appended to DIR/df.txt
fs_df() {
	if [[ $FS == zenfs ]]; then
		"$ZENFS_BIN/zenfs" df --zbd="$DISK" >>"$1/df.txt" 2>&1
	else
		df -B1 "$MNT" >>"$1/df.txt"
	fi
}

# fs_live DIR: the database's files (DIR/end.ls) and their bytes (DIR/end.du)
fs_live() {
	local dir=$1
	if [[ $FS == zenfs ]]; then
		"$ZENFS_BIN/zenfs" list --zbd="$DISK" --path=/db >"$dir/end.ls" 2>&1
		awk '$1 ~ /^[0-9]+$/ {s += $1} END {print s + 0}' "$dir/end.ls" >"$dir/end.du"
	else
		du -s --apparent-size -B1 "$MNT/db" | cut -f1 >"$dir/end.du"
		ls -l "$MNT/db" >"$dir/end.ls"
	fi
}

# study KIND ZONE_MB: one run (of file system $FS)
study() {
	local kind=$1 z=$2 dir="$OUT/$1-z$2" t0 t st=ok bius=0
	[[ $FS == f2fs ]] || dir="$OUT/$FS-$1-z$2"
	[[ $kind == bius ]] && bius=1
	mkdir -p "$dir"
	: >"$dir/times.txt"
	t0=$EPOCHREALTIME
	make_dev "$kind" "$z" "$dir" || { echo "$kind $z $(basename "$dir") nodev $FS" >>"$OUT/runs.txt"; return; }
	say "$FS $kind z${z}M: $DEVP ($(blockdev --getsize64 "$DEVP") bytes, $(cat "/sys/block/$DISK/queue/nr_zones") zones)"
	echo "disk $DISK" >>"$dir/args.txt"
	snap "$dir" created "$DISK" $bius
	t=$EPOCHREALTIME
	fs_make "$dir"
	echo "mkfs $(elapsed "$t")" >>"$dir/times.txt"
	if [[ $st == ok ]]; then
		: >"$dir/df.txt"
		fs_df "$dir"
		sync
		snap "$dir" mounted "$DISK" $bius
		t=$EPOCHREALTIME
		db_bench_run "$dir" load --benchmarks="$FILL,waitforcompaction,stats" --num="$KEYS" || st=load
		sync
		echo "load $(elapsed "$t")" >>"$dir/times.txt"
		say "$FS $kind z${z}M: load $(elapsed "$t") s: $(grep -m1 "^$FILL " "$dir/load.txt" | cut -c1-90)"
		snap "$dir" loaded "$DISK" $bius
	fi
	if [[ $st == ok ]]; then
		t=$EPOCHREALTIME
		db_bench_run "$dir" mix --benchmarks=readrandomwriterandom,waitforcompaction,stats \
			--use_existing_db=1 --num="$KEYS" --reads="$OPS" --readwritepercent=50 || st=mix
		sync
		echo "mix $(elapsed "$t")" >>"$dir/times.txt"
		say "$FS $kind z${z}M: mix $(elapsed "$t") s: $(grep -m1 '^readrandomwriterandom ' "$dir/mix.txt" | cut -c1-90)"
	fi
	if [[ $st != mkfs && $st != mount ]]; then
		snap "$dir" end "$DISK" $bius --zones
		blkzone report "$DEVP" >"$dir/end.zones.txt"
		fs_live "$dir"
		fs_df "$dir"
		[[ $FS == zenfs ]] || umount "$MNT" || say "ERROR umount failed"
		snap "$dir" umounted "$DISK" $bius
	fi
	drop_dev "$kind" "$z" "$dir"
	echo "total $(elapsed "$t0")" >>"$dir/times.txt"
	echo "$kind $z $(basename "$dir") $st $FS" >>"$OUT/runs.txt"
	say "$FS $kind z${z}M: $st in $(elapsed "$t0") s"
}

for FS in $FSS; do
	for z in $ZONES; do
		for kind in $DEVICES; do
			study "$kind" "$z"
		done
	done
done
echo "ended_uptime $(cut -d' ' -f1 /proc/uptime)" >>"$OUT/meta.txt"
say "done"
# the test fails when a run did not complete
! awk '$4 != "ok" {bad = 1} END {exit !bad}' "$OUT/runs.txt"
