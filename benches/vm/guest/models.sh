# shellcheck shell=bash
# The models suite of the VM benchmark (sourced by bench.sh, which runs
# models_suite with suites=models): every built-in device model
# (`biusctl create --model NAME`) and a custom one (--model-file: NVM of 4
# units and 2 ms accesses) measured with fio against its own numbers, one
# device at a time (created, measured, stopped), with the time scale each
# measurement needs (device time runs SCALE times slower than real time,
# so that the model and not TCG is the limit).  BIUS's own overhead comes
# from the same boot: ramdisks of the same queue set-up without a model,
# plain (ovh-ram) and with --latency read=5ms,write=5ms (ovh-lat5ms: the
# same deferred completion the models use), and a zoned one with
# --latency zone=50ms (ovh-zoned-lat50ms).  How late completions reach
# the kernel (group precision): a ramdisk with --latency read=10ms at the
# bench's poll time (prec-lat10ms: the worker spins before a due time up
# to that long) and with --poll-us 0 (prec-lat10ms-poll0: no spin), and
# the kernel's own 10 ms device, null_blk (configfs) irqmode=2
# completion_nsec=10ms (null_blk-prec-lat10ms), at QD1 and QD8.
#
# Results in /results/bench/models/ (benches/vm/report_models.py reads
# them): bench.sh's devices.txt, runs.txt and fio/<device>/<job>-r1.json
# (run_job), and per device info/<device>.json (`biusctl info --json`
# once the device is live: the resolved profile and its time scale),
# info/<device>.end.json (after its runs: the model's statistics) and
# stats/<device>.json (after its runs: `biusctl stats --json`, with the
# lateness of its completions), for the precision devices
# stats/<device>-<job>.json (the statistics of that run alone); the
# fio logs of some runs (<job>_clat.1.log, _bw.1.log, _iops.1.log); for
# the FTL runs waf/<device>.txt (`uptime JSON` every 2 s); for the zoned
# devices zoneop/<device>-<test>.txt (benches/vm/tools/zoneop.c).
#
# Knobs: biusbench.models=ovh,precision,nvm,custom,nvme-ssd,buffer,ftl,zns-ssd,xg6,smr-hdd
# (the groups to run; default all), biusbench.model_runtime=SECONDS (fio
# runs, default 3), biusbench.waf_runtime=SECONDS (each FTL run, default 120),
# biusbench.flash_scale=N (time scale of the flash models' sweeps, default 1000).

MODEL_GROUPS="ovh precision nvm custom nvme-ssd buffer ftl zns-ssd xg6 smr-hdd"
MODEL_RUNTIME=3 WAF_RUNTIME=120 FLASH_SCALE=1000
for w in $(cat /proc/cmdline); do
	case $w in
	biusbench.models=*) MODEL_GROUPS=${w#*=}; MODEL_GROUPS=${MODEL_GROUPS//,/ } ;;
	biusbench.model_runtime=*) MODEL_RUNTIME=${w#*=} ;;
	biusbench.waf_runtime=*) WAF_RUNTIME=${w#*=} ;;
	biusbench.flash_scale=*) FLASH_SCALE=${w#*=} ;;
	esac
done
DEPTHS="1 2 4 8 16 32 64"
PRE_MB=8	# the preconditioned area the flash reads stay in

model_group() { [[ " $MODEL_GROUPS " == *" $1 "* ]]; }

# model_dev NAME CREATE-ARGS...: a BIUS device of one queue (depth 256)
# from start_bius, its `biusctl info --json` kept; 1 if it failed
model_dev() {
	local name=$1
	shift
	start_bius "$name" --queues 1 --depth 256 "$@" || return 1
	echo "$name $*" >>"$OUT/args.txt"
	biusctl info --json "${DEV[$name]}" >"$OUT/info/$name.json" 2>&1 \
		|| say "ERROR biusctl info --json ${DEV[$name]} failed"
}

# model_stop NAME: its statistics kept, the daemon stopped, the device
# out of bench.sh's ORDER (the final teardown has nothing left to stop)
model_stop() {
	local name=$1 pid=${PID[$1]} d keep=()
	biusctl info --json "${DEV[$name]}" >"$OUT/info/$name.end.json" 2>&1
	biusctl stats --json "${DEV[$name]}" >"$OUT/stats/$name.json" 2>&1
	kill -TERM "$pid"
	wait_until 30 eval "! kill -0 $pid 2>/dev/null" || say "ERROR $name: daemon still running"
	for d in "${ORDER[@]}"; do
		[[ $d == "$name" ]] || keep+=("$d")
	done
	ORDER=(${keep[@]+"${keep[@]}"})
}

# precondition NAME MiB [FIO-ARGS...]: write the first MiB sequentially
# (1 MiB requests, 4 in flight), so that reads find written pages
precondition() {
	local name=$1 mb=$2 t0=$EPOCHREALTIME
	shift 2
	fio --name=precondition --filename="${DEV[$name]}" --ioengine=libaio --direct=1 \
		--rw=write --bs=1m --iodepth=4 --io_size="${mb}M" "$@" --output=/dev/null \
		>"$OUT/fio/$name/precondition.err" 2>&1 \
		|| say "ERROR precondition of $name: $(tail -n 2 "$OUT/fio/$name/precondition.err" | tr '\n' ' ')"
	say "$name: $mb MiB preconditioned in $(elapsed "$t0") s"
}

# aio NAME JOB [FIO-ARGS...]: one libaio run of MODEL_RUNTIME (run_job)
aio() {
	local name=$1 job=$2
	shift 2
	ENGINE=libaio JOB_RUNTIME=${JOB_RUNTIME:-$MODEL_RUNTIME} run_job "$name" "$job" 1 --numjobs=1 "$@"
}

# sweep NAME SIZE-ARGS...: 4 KiB random reads at each of DEPTHS (the
# QD1 run with a per-I/O latency log).  Beyond depth 32 a read waits
# behind the others for a good part of a second at these scales: the runs
# and their ramps grow with the depth (depth 256: 8x), so that the burst
# of the first reads is past and many latencies fit in the run
sweep() {
	local name=$1 d log rt
	shift
	for d in $DEPTHS; do
		log=()
		[[ $d == 1 ]] && log=(--write_lat_log="$OUT/fio/$name/rr-qd1" --log_avg_msec=0)
		rt=$((MODEL_RUNTIME * (d > 32 ? d / 32 : 1)))
		RAMP=$((RAMP > rt / 3 ? RAMP : rt / 3)) JOB_RUNTIME=${JOB_RUNTIME:-$rt} \
			aio "$name" "rr-qd$d" --rw=randread --bs=4k --iodepth="$d" "$@" "${log[@]}"
	done
}

# qd1_write NAME SIZE-ARGS...: 4 KiB random writes, one at a time (RW=write:
# sequential ones, as a zone takes them)
qd1_write() {
	local name=$1
	shift
	aio "$name" rw-qd1 --rw="${RW:-randwrite}" --bs=4k --iodepth=1 "$@" \
		--write_lat_log="$OUT/fio/$name/rw-qd1" --log_avg_msec=0
}

# seq NAME RW DEPTH SIZE-ARGS...: 128 KiB sequential reads or writes
seq_bw() {
	local name=$1 rw=$2 depth=$3
	shift 3
	aio "$name" "seq$rw" --rw="$rw" --bs=128k --iodepth="$depth" "$@"
}

# --- BIUS's own overhead, no model -----------------------------------------
models_overhead() {
	if model_dev ovh-ram ramdisk --size 64M; then
		precondition ovh-ram "$PRE_MB"
		aio ovh-ram rr-qd1 --rw=randread --bs=4k --iodepth=1 --size="${PRE_MB}M"
		qd1_write ovh-ram --size="${PRE_MB}M"
		model_stop ovh-ram
	fi
	if model_dev ovh-lat5ms ramdisk --size 64M --latency read=5ms,write=5ms; then
		DEPTHS="1 4 16 64" sweep ovh-lat5ms --size="${PRE_MB}M"
		qd1_write ovh-lat5ms --size="${PRE_MB}M"
		model_stop ovh-lat5ms
	fi
	if model_dev ovh-zoned-lat50ms ramdisk --size 1G --zoned --zone-size 64M --latency zone=50ms; then
		zone_times ovh-zoned-lat50ms
		model_stop ovh-zoned-lat50ms
	fi
}

# --- completion-time precision: BIUS's 10 ms against null_blk's ------------
# precision_runs NAME: 4 KiB random reads at QD1 and QD8 for 8 s each
# (about 800 I/Os at QD1), a BIUS device's statistics reset before each
# run and kept after it (stats/NAME-JOB.json: the lateness of that run)
precision_runs() {
	local name=$1 d
	for d in 1 8; do
		[[ -n ${PID[$name]:-} ]] && biusctl stats --reset "${DEV[$name]}" >/dev/null 2>&1
		JOB_RUNTIME=8 aio "$name" "rr-qd$d" --rw=randread --bs=4k --iodepth="$d" --size=32M
		[[ -n ${PID[$name]:-} ]] && biusctl stats --json "${DEV[$name]}" \
			>"$OUT/stats/$name-rr-qd$d.json" 2>&1
	done
}

models_precision() {
	local nb=/sys/kernel/config/nullb/nullbprec nbname loaded=0 ref=null_blk-prec-lat10ms
	if model_dev prec-lat10ms ramdisk --size 64M --latency read=10ms; then
		precision_runs prec-lat10ms
		model_stop prec-lat10ms
	fi
	if NOPOLL=1 model_dev prec-lat10ms-poll0 ramdisk --size 64M --latency read=10ms --poll-us 0; then
		precision_runs prec-lat10ms-poll0
		model_stop prec-lat10ms-poll0
	fi
	# null_blk completing each read from a timer 10 ms after it arrives
	# (configfs, so that the zoned group's modprobe with parameters still
	# finds it unloaded: unloaded again if loaded here)
	[[ -d /sys/module/null_blk ]] || loaded=1
	if { [[ $loaded == 0 ]] || modprobe null_blk nr_devices=0; } \
		&& { [[ -d /sys/module/configfs ]] || modprobe configfs; } \
		&& { mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config; } \
		&& mkdir "$nb" && echo 64 >"$nb/size" && echo 0 >"$nb/memory_backed" \
		&& echo 1 >"$nb/submit_queues" && echo 64 >"$nb/hw_queue_depth" \
		&& echo 2 >"$nb/irqmode" && echo 10000000 >"$nb/completion_nsec" \
		&& echo 1 >"$nb/power"; then
		nbname=nullbprec
		[[ -d /sys/block/$nbname ]] || nbname=nullb$(cat "$nb/index")
		if wait_until 5 test -b "/dev/$nbname"; then
			# (not in bench.sh's ORDER: gone before its teardown)
			# shellcheck disable=SC2004 # DEV: bench.sh's associative array
			DEV[$ref]=/dev/$nbname
			echo "$ref /dev/$nbname" >>"$OUT/devices.txt"
			mkdir -p "$OUT/fio/$ref"
			precision_runs "$ref"
		else
			say "SKIP $ref: /dev/$nbname did not appear"
		fi
	else
		say "SKIP $ref: null_blk by configfs failed"
	fi
	if [[ -d $nb ]]; then
		echo 0 >"$nb/power"
		rmdir "$nb"
	fi
	if [[ $loaded == 1 ]]; then
		rmmod null_blk || say "ERROR rmmod null_blk failed"
	fi
}

# --- NVM: the built-in one and a custom one --------------------------------
models_nvm() {
	model_dev nvm ramdisk --size 64M --model nvm --time-scale 4000 || return 0
	sweep nvm --size="${PRE_MB}M"
	qd1_write nvm --size="${PRE_MB}M"
	seq_bw nvm read 16 --size="${PRE_MB}M"
	seq_bw nvm write 16 --size="${PRE_MB}M"
	model_stop nvm
}

models_custom() {
	cat >"$OUT/custom.toml" <<-'EOF'
		# The models suite's own model: NVM of 4 units and 2 ms accesses,
		# so random 4 KiB reads flatten at depth 4 (2000 IOPS at scale 1).
		name = "custom"
		description = "4 units of 2 ms accesses of 4 KiB, 1 GB/s links"
		source = "benches/vm/guest/models.sh"
		kind = "nvm"

		[host]
		read_bandwidth = "1GB/s"
		write_bandwidth = "1GB/s"

		[nvm]
		read = "2ms"
		write = "2ms"
		access_size = "4KiB"
		units = 4
	EOF
	model_dev custom ramdisk --size 64M --model-file "$OUT/custom.toml" --time-scale 10 || return 0
	sweep custom --size="${PRE_MB}M"
	qd1_write custom --size="${PRE_MB}M"
	model_stop custom
}

# --- the conventional SSD ---------------------------------------------------
models_nvme() {
	# QD1 read latency at 300x (19 ms) with every I/O's latency: the CDF
	if model_dev nvme-ssd-qd1 ramdisk --size 64M --model nvme-ssd --time-scale 300; then
		precondition nvme-ssd-qd1 "$PRE_MB"
		JOB_RUNTIME=$((2 * MODEL_RUNTIME)) DEPTHS=1 sweep nvme-ssd-qd1 --size="${PRE_MB}M"
		model_stop nvme-ssd-qd1
	fi
	write_qd1_dev nvme-ssd
	# the rest at 1000x: 391 k IOPS at most is 391 here
	model_dev nvme-ssd ramdisk --size 64M --model nvme-ssd --time-scale "$FLASH_SCALE" || return 0
	precondition nvme-ssd "$PRE_MB"
	# (random reads queue on dies chosen at random: IOPS near the die limit
	# only far beyond its 25 reads in flight)
	DEPTHS="$DEPTHS 128 256" sweep nvme-ssd --size="${PRE_MB}M"
	seq_bw nvme-ssd read 16 --size="${PRE_MB}M"
	# past the write buffer (a few MiB at buffer speed) before measuring
	RAMP=4 JOB_RUNTIME=5 seq_bw nvme-ssd write 16 --offset=16M --size=48M
	model_stop nvme-ssd
}

# write_qd1_dev PROFILE [CREATE-ARGS]: QD1 4 KiB writes at 3000x (a flash
# write into the buffer takes microseconds: 17 ms here), sequential ones in
# zone 1 of a zoned profile
write_qd1_dev() {
	local name=$1-qd1w
	model_dev "$name" ramdisk --model "$1" --time-scale 3000 "${@:2}" --size 1G || return 0
	if [[ $* == *--zoned* ]]; then
		RW=write qd1_write "$name" --zonemode=zbd --offset=64M --size=64M
	else
		qd1_write "$name" --size=64M
	fi
	model_stop "$name"
}

# the write buffer made visible: programs 4x slower and a buffer of 8 MiB,
# 32 KiB writes 16 deep from an empty device, bandwidth every 250 ms
models_buffer() {
	model_dev nvme-ssd-buffer ramdisk --size 64M --model nvme-ssd --time-scale 500 \
		--model-set flash.program=740us --model-set flash.write_buffer=8MiB || return 0
	RAMP=0 JOB_RUNTIME=16 aio nvme-ssd-buffer buffer --rw=write --bs=32k --iodepth=16 --size=64M \
		--write_bw_log="$OUT/fio/nvme-ssd-buffer/buffer" --log_avg_msec=250
	model_stop nvme-ssd-buffer
}

# the FTL: a full 256 MiB device under 4 KiB random writes, at each
# over-provisioning; the scale puts the predicted steady state near 1600
# IOPS, so that a run writes the device about twice
models_ftl() {
	local op scale name sampler
	for op in 0.07:50 0.28:150; do
		scale=${op#*:} op=${op%:*} name=nvme-ssd-op$op
		model_dev "$name" ramdisk --size 256M --model nvme-ssd --time-scale "$scale" \
			--model-set ftl.over_provisioning="$op" || continue
		precondition "$name" 256
		waf_sampler "${DEV[$name]}" >"$OUT/waf/$name.txt" &
		sampler=$!
		RAMP=0 JOB_RUNTIME=$WAF_RUNTIME aio "$name" waf --rw=randwrite --bs=4k --iodepth=16 \
			--size=256M --write_iops_log="$OUT/fio/$name/waf" --log_avg_msec=1000
		kill "$sampler"
		wait "$sampler" 2>/dev/null
		model_stop "$name"
	done
}

# waf_sampler DEV: `uptime biusctl-info-json` every 2 s until killed
waf_sampler() {
	while :; do
		echo "$(cut -d' ' -f1 /proc/uptime) $(biusctl info --json "$1" 2>/dev/null | tr -d '\n')"
		sleep 2
	done
}

# --- zoned: ZNS SSD, null_blk for its limits, SMR disk ---------------------
# zone_times NAME [write]: finish (empty -> full) and reset of zones 2-4,
# timed; with `write`, 4 KiB written into each zone first (a ZNS model's
# finish then pads the rest of the zone)
zone_times() {
	local z ops=()
	for z in 2 3 4; do
		[[ ${2:-} == write ]] && ops+=(write "$z")
		ops+=(finish "$z" reset "$z")
	done
	zoneop "${DEV[$1]}" "${ops[@]}" >"$OUT/zoneop/$1-times.txt" 2>&1 || say "ERROR zoneop on $1 failed"
}

# zone_limits NAME ZONES: 4 KiB into each of ZONES zones in turn (opened
# implicitly), all reset, then each opened explicitly: where the open and
# active limits stop it, with which errno
zone_limits() {
	local dev=${DEV[$1]} n=$2 z ops=()
	for ((z = 0; z < n; z++)); do ops+=(write "$z"); done
	zoneop "$dev" "${ops[@]}" >"$OUT/zoneop/$1-implicit.txt" 2>&1
	blkzone reset "$dev"
	ops=()
	for ((z = 0; z < n; z++)); do ops+=(open "$z"); done
	zoneop "$dev" "${ops[@]}" >"$OUT/zoneop/$1-explicit.txt" 2>&1
	blkzone reset "$dev"
}

models_zns() {
	local dev zbd=(--zonemode=zbd)
	if model_dev zns-ssd ramdisk --size 1G --zoned --model zns-ssd --time-scale "$FLASH_SCALE"; then
		dev=$(basename "${DEV[zns-ssd]}")
		echo mq-deadline >"/sys/block/$dev/queue/scheduler" 2>/dev/null
		# 12 MiB: 4 stripes of 96 KiB over the zone's 32 dies, every die
		# holding as much; 43 reads in flight at the modelled peak
		precondition zns-ssd 12 "${zbd[@]}" --size=64M
		DEPTHS="$DEPTHS 128 256" sweep zns-ssd "${zbd[@]}" --size=64M
		seq_bw zns-ssd read 16 "${zbd[@]}" --size=64M
		# (8 writes of 128 KiB a second at 1000x: 15 s for a hundred); a
		# 6 s ramp, so that the zone buffer (6 MiB) is full before fio
		# measures: its fill at host speed is not the zone's rate
		RAMP=6 JOB_RUNTIME=15 seq_bw zns-ssd write 4 "${zbd[@]}" --offset=128M --size=128M
		model_stop zns-ssd
	fi
	write_qd1_dev zns-ssd --zoned
	# zone management at 100x (reset 163 ms; a finish pads 33.5 MiB: 2.9 s);
	# the limits
	if model_dev zns-ssd-zones ramdisk --size 1G --zoned --model zns-ssd --time-scale 100; then
		zone_times zns-ssd-zones write
		zone_limits zns-ssd-zones 16
		model_stop zns-ssd-zones
	fi
	# the kernel's zoned null_blk with the same limits, for the errno (its
	# module parameters: only if no other suite has loaded it)
	if [[ -d /sys/module/null_blk ]]; then
		say "SKIP null_blk-zoned: null_blk is already loaded"
	elif modprobe null_blk nr_devices=1 gb=1 zoned=1 zone_size=64 zone_nr_conv=0 \
		zone_max_open=14 zone_max_active=14 memory_backed=1 && wait_until 5 test -b /dev/nullb0; then
		DEV[null_blk-zoned]=/dev/nullb0
		echo "null_blk-zoned /dev/nullb0" >>"$OUT/devices.txt"
		zone_limits null_blk-zoned 16
		rmmod null_blk
	else
		say "SKIP null_blk-zoned: modprobe null_blk zoned=1 failed"
	fi
}

# the Kioxia XG6 profile, on the workloads its reference measurements ran
# (benches/criterion/accuracy/xg6.toml, fio QD32: the rows name these jobs in `vm`)
models_xg6() {
	model_dev xg6 ramdisk --size 256M --model xg6 --time-scale "$FLASH_SCALE" || return 0
	precondition xg6 64
	DEPTHS="1 32" sweep xg6 --size=64M
	seq_bw xg6 read 32 --size=64M
	# past the 4 MiB write buffer before measuring
	RAMP=4 JOB_RUNTIME=5 seq_bw xg6 write 32 --offset=64M --size=192M
	model_stop xg6
}

models_hdd() {
	local zbd=(--zonemode=zbd --read_beyond_wp=1) dev
	# 10x: a QD1 read (11.6 ms) is 116 ms, BIUS's overhead a percent of it;
	# runs of 20 s for a hundred reads or more each
	model_dev smr-hdd ramdisk --size 4G --zoned --model smr-hdd --max-open 8 --time-scale 10 || return 0
	dev=$(basename "${DEV[smr-hdd]}")
	# The model serves requests in the order they come (a drive's own
	# reordering by rotational position needs requests it has not seen):
	# mq-deadline's sorted order makes near neighbours that just missed
	# their sector wait a turn.  The random reads go in random order, as
	# the prediction assumes, with no elevator; the writes with it.
	echo none >"/sys/block/$dev/queue/scheduler" || say "ERROR $dev: no scheduler none"
	JOB_RUNTIME=20 DEPTHS="1 4 16" sweep smr-hdd "${zbd[@]}"
	echo mq-deadline >"/sys/block/$dev/queue/scheduler"
	# (4 GiB: 15 sequential zones of 256 MiB, room for 8 open ones, not the
	# profile's 128); random writes: only the conventional zone takes them
	JOB_RUNTIME=20 qd1_write smr-hdd "${zbd[@]}" --size=256M
	# at the outer edge: the conventional zone
	seq_bw smr-hdd read 4 "${zbd[@]}" --size=256M
	model_stop smr-hdd
}

models_suite() {
	local out=$OUT t0=$EPOCHREALTIME
	OUT=$OUT/models
	mkdir -p "$OUT/fio" "$OUT/info" "$OUT/stats" "$OUT/waf" "$OUT/zoneop"
	: >"$OUT/runs.txt"
	: >"$OUT/devices.txt"
	: >"$OUT/args.txt"
	{
		echo "groups $MODEL_GROUPS"
		echo "runtime $MODEL_RUNTIME"
		echo "ramp $RAMP"
		echo "waf_runtime $WAF_RUNTIME"
		echo "precondition_mb $PRE_MB"
		echo "poll_us ${POLL:-0}"
		echo "fio $(fio --version)"
	} >"$OUT/meta.txt"
	biusctl model list --json >"$OUT/model-list.json" 2>&1
	say "models: groups $MODEL_GROUPS; fio runs of ${MODEL_RUNTIME}s+${RAMP}s ramp"
	model_group ovh && models_overhead
	model_group precision && models_precision
	model_group nvm && models_nvm
	model_group custom && models_custom
	model_group nvme-ssd && models_nvme
	model_group buffer && models_buffer
	model_group ftl && models_ftl
	model_group zns-ssd && models_zns
	model_group xg6 && models_xg6
	model_group smr-hdd && models_hdd
	echo "elapsed_s $(elapsed "$t0")" >>"$OUT/meta.txt"
	say "models: done in $(elapsed "$t0") s"
	OUT=$out
}
