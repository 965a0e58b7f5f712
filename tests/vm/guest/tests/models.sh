#!/bin/bash
# timeout: 420
# Device models (biusctl create --model): every built-in profile times a
# working disk, and the model in force is what `biusctl info` reports.
# (a) `biusctl model list` names the four profiles; `model show` prints a
# model file that --model-file takes back.  (b) nvm at --time-scale 2000
# (5 us reads -> 10 ms): fio 4k randread at QD 1, no read sooner than the
# model's 10 ms, and fio verify at QD 8.  (c) nvme-ssd, 64 MiB, real
# time: written full, then 4k random overwrites twice its size; info
# --json reports a write amplification above 1.5 and garbage collection
# (its accuracy is the bench's business), and the data verify.  (d)
# zns-ssd with --max-open 2 --max-active 4, 50 ms resets and 80 ms
# finishes: its zone geometry reaches the kernel (scaled ZN540: zone
# capacity below the zone size); a write needing a third open zone fails
# with ETOOMANYREFS, opening a fifth active zone with EOVERFLOW; a reset
# takes at least 50 ms and a finish 80 ms; written data read back.  (e)
# smr-hdd: zoned with a conventional zone; random reads at QD 1 average
# above 2 ms (seek and rotation), data read back.  (f) nonsense models
# exit 2 with one line naming the parameter, and leave no device.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius

# info_json: biusctl info --json of the running disk
info_json() { biusctl info --json "$BIUS_NAME"; }
# model_is FILTER EXPECTED: jq -r FILTER of info --json must be EXPECTED
model_is() {
	local got
	got=$(info_json | jq -r "$1") || fail "biusctl info --json | jq '$1' failed"
	[[ $got == "$2" ]] || fail "info --json $1 is '$got', expected '$2'"
}
# ms_of CMD...: run CMD (must succeed), print how long it took in ms
ms_of() {
	local t0=$EPOCHREALTIME
	"$@" || fail "$* failed"
	awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%d", (b - a) * 1000}'
}

step "(a) model list and show; show's output is a model file"
list=$(biusctl model list)
info "$list"
for name in nvme-ssd zns-ssd smr-hdd nvm; do
	grep -q "^$name " <<<"$list" || fail "biusctl model list does not list $name"
done
biusctl model show nvm --set nvm.units=3 >nvm.toml || fail "biusctl model show nvm failed"
grep -q '^units = 3$' nvm.toml || fail "model show --set did not set nvm.units: $(cat nvm.toml)"

step "(b) nvm from its model file, --time-scale 2000: 4k randread at QD 1, fio verify at QD 8"
bius_start --model-file nvm.toml --time-scale 2000 --size 64M --name mnvm ramdisk
model_is .model.profile.name nvm
model_is .model.profile.nvm.units 3
model_is .model.profile.time_scale 2000
fio --name=qd1 --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth=1 --rw=randread \
	--bs=4k --number_ios=50 --size=64M --output-format=json --output=nvm.json \
	|| fail "fio randread on the nvm model failed"
min=$(jq '.jobs[0].read.lat_ns.min | floor' nvm.json)
mean=$(jq '.jobs[0].read.lat_ns.mean | floor' nvm.json)
info "QD 1 read latency: min $min ns, mean $mean ns (model: 5 us x 2000 = 10 ms, plus the link)"
[[ $min -ge 10000000 ]] || fail "a read completed after $min ns, sooner than the model's 10 ms"
run_fio nvm-verify.txt --name=verify --filename="$BIUS_DEV" --direct=1 --ioengine=libaio \
	--iodepth=8 --rw=randwrite --bs=4k --size=1M --verify=crc32c --verify_fatal=1
bius_stop "$BIUS_PID" "$BIUS_NAME"

step "(c) nvme-ssd, 64 MiB: full, then random overwrites; write amplification and GC reported"
bius_start --model nvme-ssd --size 64M --queues 2 --name mssd ramdisk
model_is .model.profile.name nvme-ssd
dd if=/dev/zero of="$BIUS_DEV" bs=1M count=64 oflag=direct status=none || fail "filling the disk failed"
run_fio ssd-rand.txt --name=overwrite --filename="$BIUS_DEV" --direct=1 --ioengine=libaio \
	--iodepth=16 --rw=randwrite --bs=4k --size=64M --io_size=128M --randrepeat=0
run_fio ssd-verify.txt --name=verify --filename="$BIUS_DEV" --direct=1 --ioengine=libaio \
	--iodepth=8 --rw=randwrite --bs=4k --size=4M --verify=crc32c --verify_fatal=1
stats=$(info_json | jq -c .model.stats)
info "model stats: $stats"
biusctl info "$BIUS_NAME" | grep -E '^(model|write_amplification|gc_bytes_moved|erases)' | sed 's/^/   info: /'
awk -v w="$(jq .write_amplification <<<"$stats")" 'BEGIN{exit !(w > 1.5)}' \
	|| fail "write amplification $(jq .write_amplification <<<"$stats") after random overwrites of a full disk, expected > 1.5"
[[ $(jq .gc_bytes_moved <<<"$stats") -gt 0 ]] || fail "no garbage collection reported: $stats"
[[ $(jq .erases <<<"$stats") -gt 0 ]] || fail "no erases reported: $stats"
bius_stop "$BIUS_PID" "$BIUS_NAME"

step "(d) zns-ssd: geometry, open/active limits, reset and finish times"
bius_start --zoned --model zns-ssd --size 1G --max-open 2 --max-active 4 \
	--model-set zones.reset=50ms --model-set zones.finish=80ms --name mzns ramdisk
DEV=$BIUS_DEV
model_is .zoned.zone_size $((64 << 20))
model_is .zoned.zone_capacity $((67 << 19))
model_is .zoned.max_open 2
model_is .model.profile.zones.max_active 4
ZS=$((64 << 11))	# zone size in sectors
head -c $((1 << 20)) /dev/urandom >/tmp/pattern
# zwrite ZONE: 64 KiB at the zone's start; prints the errno name on failure
zwrite() {
	local err
	err=$(w $(($1 * ZS)) 128 2>&1) && return 0
	case $err in
	*"Too many references"*) echo ETOOMANYREFS ;;
	*"Value too large"*) echo EOVERFLOW ;;
	*) echo "other: $err" ;;
	esac
	return 1
}
blkzone open -o 0 -c 1 "$DEV" && blkzone open -o $ZS -c 1 "$DEV" || fail "opening zones 0 and 1 failed"
got=$(zwrite 2) && fail "a write to a third zone with two open succeeded (max open 2)"
[[ $got == ETOOMANYREFS ]] || fail "a write beyond the open limit failed with $got, expected ETOOMANYREFS"
info "write to zone 2 with zones 0 and 1 open: $got"
zone_after_failed_write "$DEV" $((2 * ZS))
# four active zones, none open: 0 and 1 written and closed, 2 and 3 too
for zone in 0 1; do zwrite $zone >/dev/null || fail "a write to open zone $zone failed"; done
blkzone close -o 0 -c 2 "$DEV" || fail "closing zones 0 and 1 failed"
for zone in 2 3; do zwrite $zone >/dev/null || fail "a write to zone $zone (2 of 2 open) failed"; done
blkzone close -o $((2 * ZS)) -c 2 "$DEV" || fail "closing zones 2 and 3 failed"
got=$(blkzone open -o $((4 * ZS)) -c 1 "$DEV" 2>&1) && fail "opening a fifth active zone succeeded (max active 4)"
[[ $got == *"Value too large"* ]] || fail "opening a fifth active zone: '$got', expected EOVERFLOW"
info "open zone 4 with 4 active: EOVERFLOW"
cmp <(dd if="$DEV" bs=64K count=1 skip=$((2 * ZS * 512)) iflag=direct,skip_bytes status=none) \
	<(head -c 65536 /tmp/pattern) || fail "zone 2's data do not read back"
reset_ms=$(ms_of blkzone reset -o 0 -c 1 "$DEV")
finish_ms=$(ms_of blkzone finish -o $((2 * ZS)) -c 1 "$DEV")
info "reset of zone 0: $reset_ms ms (model 50 ms); finish of zone 2: $finish_ms ms (model 80 ms)"
[[ $reset_ms -ge 50 ]] || fail "a zone reset took $reset_ms ms, less than the model's 50 ms"
[[ $finish_ms -ge 80 ]] || fail "a zone finish took $finish_ms ms, less than the model's 80 ms"
bius_stop "$BIUS_PID" "$BIUS_NAME"

step "(e) smr-hdd, 4 GiB: zoned with a conventional zone; random reads seek and rotate"
bius_start --zoned --model smr-hdd --size 4G --name msmr ramdisk
DEV=$BIUS_DEV
model_is .model.profile.kind hdd
[[ $(info_json | jq .zoned.conv_zones) -ge 1 ]] || fail "no conventional zone: $(info_json | jq -c .zoned)"
zsize=$(info_json | jq .zoned.zone_size)
w $((zsize / 512)) 128 || fail "a write at the first sequential zone's start failed"
cmp <(dd if="$DEV" bs=64K count=1 skip="$zsize" iflag=direct,skip_bytes status=none) \
	<(head -c 65536 /tmp/pattern) || fail "the sequential zone's data do not read back"
fio --name=seek --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth=1 --rw=randread \
	--bs=4k --number_ios=40 --size=4G --output-format=json --output=hdd.json \
	|| fail "fio randread on the smr-hdd model failed"
mean=$(jq '.jobs[0].read.clat_ns.mean | floor' hdd.json)
info "QD 1 random read over 4 GiB: mean $mean ns"
[[ $mean -ge 2000000 ]] || fail "random reads averaged $mean ns: no seek or rotation"
bius_stop "$BIUS_PID" "$BIUS_NAME"

step "(f) nonsense models: exit 2, one line naming the parameter, no device left"
echo 'colour = "blue"' >>nvm.toml
usage_error "--model: no built-in model" create --model floppy ramdisk
usage_error "colour" create --model-file nvm.toml ramdisk
usage_error "--units" create --model nvm --units 0 ramdisk
usage_error "host.read_bandwidth" create --model nvm --bandwidth read=0 ramdisk
usage_error "nvm.read" create --model nvm --model-set nvm.read=-1us ramdisk
usage_error "flash.dies_per_channel" create --model nvme-ssd --model-set flash.dies_per_channel=0 ramdisk
usage_error "zones.max_open" create --zoned --model zns-ssd --size 512M ramdisk
usage_error "add --zoned" create --model zns-ssd ramdisk
usage_error "--time-scale" create --time-scale 10 ramdisk
[[ -z $(biusctl list --json | jq '.[]') ]] || fail "a rejected create left a device behind: $(biusctl list)"
