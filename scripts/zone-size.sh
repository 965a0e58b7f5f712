#!/bin/bash
# The zone-size study: RocksDB on F2FS on a zoned disk, for
# zone sizes 64, 128 and 256 MiB, on a zoned BIUS ramdisk and on a zoned
# null_blk of the same geometry, in one VM boot; then the table and the
# figures (write amplification of RocksDB and F2FS, zones by fill, space
# amplification) on the host.
#
#   bash scripts/zone-size.sh [-n] [KEY=VALUE...]
#
#   -n   do not build bius.ko and biusctl first (use what is there)
#   KEY=VALUE  guest knobs (benches/studies/guest/zone-size.sh):
#        zones=64,128,256 (MiB) devices=bius,nullb space_mb=2048 ovp=10
#        dev_mb=0 (0: sized for space_mb) conv_zones=2
#        keys=N (load; default 400000) ops=N (mix; default keys) sync_kb=1024
#        value=1000 key_size=16 fill=filluniquerandom|fillrandom|fillseq
#        queues=N rocks_scale=4 trace=1 (trace BIUS's requests: then also the
#        figures of benches/tools/biusplot.py, zone-size-trace-*.png)
#        fs=f2fs|zenfs|f2fs,zenfs (default f2fs; zenfs: RocksDB on ZenFS on
#        the raw disk, with the binaries of ZENFS_BIN_DIR)
#
# Environment: BIUS_VM_MEM (guest RAM, default here 6G), BIUS_KVER as for
# scripts/vm-test.sh, CARGO_TARGET_DIR (where biusctl is built; default
# target), ZENFS_BIN_DIR (ZenFS's db_bench and zenfs, for fs=zenfs; default
# /work/zenfs-build/bin, made by scripts/build-zenfs.sh).  Needs
# db_bench on the host (apt install rocksdb-tools): it goes into the VM
# with its shared libraries.
#
# Results: build/zone-size/<run>/ (console.log, zone-size.log, zs/ with the
# raw counters per run), build/zone-size/latest -> it; the report
# (zone-size.md, zone-size.json, zone-size-*.png) is written there and,
# for a run without knobs (but trace=1) that completed, copied to
# benches/results/, which whoever runs it commits.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../tests/vm/boot.sh"

build=1 knobs=()
while getopts nh opt; do
	case $opt in
	n) build=0 ;;
	*) sed -n '2,31s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
knobs+=("$@")
export BIUS_VM_MEM=${BIUS_VM_MEM:-6G}
biusctl_bin=${CARGO_TARGET_DIR:-$BIUS_ROOT/target}/release/biusctl

for tool in gnuplot python3 db_bench; do
	command -v "$tool" >/dev/null || die "$tool missing (scripts/setup.sh; db_bench: apt install rocksdb-tools)"
done
kver=$(bius_kver) || die "no kernel with both /boot/vmlinuz-<ver> and /lib/modules/<ver>/build: run scripts/setup.sh"

[[ $build == 1 ]] && vm_build_release "$kver" zone-size
[[ -x $biusctl_bin ]] || die "$biusctl_bin: no such executable"

zenfs_bin=${ZENFS_BIN_DIR:-/work/zenfs-build/bin}
zenfs=0
for kv in "${knobs[@]}"; do [[ $kv == fs=*zenfs* ]] && zenfs=1; done
if [[ $zenfs == 1 ]]; then
	[[ -x $zenfs_bin/db_bench && -x $zenfs_bin/zenfs ]] \
		|| die "fs=zenfs: no db_bench and zenfs in $zenfs_bin (ZENFS_BIN_DIR): build them with scripts/build-zenfs.sh"
	zenfs_bin=$(readlink -f "$zenfs_bin")
	knobs+=("zenfs_bin=$zenfs_bin")
fi

vm_new_run zone-size 10
extras=(--bin db_bench --biusctl "$biusctl_bin"
	--file "$BIUS_ROOT/benches/studies/guest/zone-size.sh:/bius/tests/zone-size.sh")
# (ZenFS's db_bench at its own path, not shadowing Debian's db_bench)
[[ $zenfs == 1 ]] && extras+=(--bin "$zenfs_bin/db_bench" --bin "$zenfs_bin/zenfs")
initrd=$(vm_build_initramfs "$kver" "$work" "${extras[@]}")
[[ -s $work/root/bius/MISSING ]] && { log "zone-size: MISSING in the VM:"; sed 's/^/zone-size:   /' "$work/root/bius/MISSING" >&2; }

limit=$(sed -n 's/^# timeout: *\([0-9]*\).*/\1/p' "$BIUS_ROOT/benches/studies/guest/zone-size.sh")
limit=$((limit + 120))
append=(biusvm.mode=test biusvm.tests=zone-size biusvm.verbose=0)
for kv in "${knobs[@]}"; do
	[[ $kv == *=* ]] || die "expected KEY=VALUE, got '$kv'"
	append+=("biusbench.$kv")
done
{
	echo "main $(git -C "$BIUS_ROOT" rev-parse --short HEAD)$(git -C "$BIUS_ROOT" diff --quiet -- driver crates benches/studies || echo ' (+ uncommitted changes)')"
	echo "biusctl $biusctl_bin $(md5sum <"$biusctl_bin" | cut -c1-12)"
	echo "vm_mem $BIUS_VM_MEM"
	echo "knobs ${knobs[*]:-(defaults)}"
} >"$res/build.txt"
log "zone-size: results in $res; knobs: ${knobs[*]:-(defaults)}; host load: $(cut -d' ' -f1-3 /proc/loadavg)"
uptime >"$res/host-load-before.txt"
t0=$SECONDS
vm_boot "$kver" "$initrd" "$res" "$limit" "${append[@]}" | grep --line-buffered -E '^(BIUS-|bius-vm)' || true
echo "vm_seconds $((SECONDS - t0))" >>"$res/build.txt"
uptime >"$res/host-load-after.txt"
log "zone-size: VM ran $((SECONDS - t0)) s; host load after: $(cut -d' ' -f1-3 /proc/loadavg)"

[[ -s $res/zs/runs.txt ]] || { tail -n 30 "$res/zone-size.log" 2>/dev/null >&2; die "no runs in $res/zs (see $res/console.log)"; }
grep -q '^BIUS-TEST zone-size PASS' "$res/console.log" \
	|| log "zone-size: WARNING: not every run completed (see $res/zone-size.log); reporting those that did"
python3 "$BIUS_ROOT/benches/studies/report_zone_size.py" "$res" || die "report_zone_size.py failed"
(cd "$res" && gnuplot zone-size.gp) || die "gnuplot zone-size.gp failed"
# BIUS's own figures, from its traces and statistics (trace=1)
mapfile -t traced < <(ls "$res"/zs/bius-z*/trace.bin 2>/dev/null | sort -V)
if [[ ${#traced[@]} -gt 0 ]]; then
	py=python3
	python3 -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
	plot() { "$py" "$BIUS_ROOT/benches/tools/biusplot.py" "$@" || die "biusplot.py $1 failed"; }
	first=${traced[0]} labels=() stats=()
	for t in "${traced[@]}"; do
		z=$(basename "$(dirname "$t")")
		labels+=("${z#bius-z} MiB zones")
		stats+=("$(dirname "$t")/end.stats.json")
	done
	plot lba "$first" -o "$res/zone-size-trace-lba.png" \
		--title "RocksDB on F2FS, $(basename "$(dirname "$first")" | sed 's/bius-z//') MiB zones: requests over time"
	plot latency "${traced[@]}" --ops read,write --label "${labels[@]}" -o "$res/zone-size-trace-latency.png" \
		--title "RocksDB on F2FS on a zoned BIUS ramdisk: service time in the daemon"
	plot fill "${stats[@]}" --which now --label "${labels[@]}" -o "$res/zone-size-trace-fill.png" \
		--title "Zones by fill at the end (biusctl stats)"
fi
log "zone-size: table $res/zone-size.md, plots $res/zone-size-*.png"
full=1
for kv in "${knobs[@]}"; do [[ $kv == trace=1 ]] || full=0; done
if [[ $full == 1 ]] && grep -q '^BIUS-TEST zone-size PASS' "$res/console.log"; then
	cp "$res/zone-size.md" "$res/zone-size.json" "$res"/zone-size-*.png "$BIUS_ROOT/benches/results/"
	log "zone-size: copied to benches/results/"
else
	log "zone-size: knobs given or a run failed: not copied to benches/results/"
fi
