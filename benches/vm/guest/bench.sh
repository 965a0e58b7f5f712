#!/bin/bash
# timeout: 7200
# Guest side of scripts/bench.sh (installed as /bius/tests/bench.sh and run
# by the test VM's init as the test "bench"), with one file a suite in
# /bius/bench/ (benches/vm/guest/<suite>.sh), each making its devices
# (<suite>_devices) and running its jobs (<suite>_runs REP), and two they
# share: devices.sh (how each kind of disk is made, which devices a run
# wants) and fio.sh (one fio run with its counters, the shared job shapes).
# Suites (knob suites=, all by default), all devices alive at once; the
# repetition loop is the outermost so that drift of a noisy host spreads
# over all devices alike:
#   classic   the same psync jobs, one device after the other, against brd,
#             null_blk, BIUS (ramdisk in every transfer mode biusctl offers,
#             and with biusctl's defaults, bius-ram-default; null, zero),
#             ublk (ublk-ram: a libublk RAM server; ublk-null: rublk's null
#             target; ublk-null-nodata: the same with user copy, where
#             ublk_drv has it; when /usr/bin/rublk is there: ublk_drv is
#             /bius/ublk/ublk_drv.ko if bench.sh built one, else the
#             kernel's own module) and an nbdkit RAM disk over NBD; with
#             /usr/bin/biusctl-baseline (BIUS_BENCH_BASELINE) also the
#             ramdisks of that older biusctl, bius-ram-<mode>@base; polled
#             QD1 reads on null_blk and bius-ram-poll (classic.sh)
#   inflight  one queue, a ramdisk whose reads take 10 ms against a plain
#             one and null_blk's 10 ms device, libaio at QD 1 and 32
#             (inflight.sh)
#   file      one prefilled image on ext4 on brd served by loop with direct
#             I/O and by biusctl create file --direct --engine
#             uring|threads|sync (file.sh)
#   nbd       nbd.ko + nbd-client and biusctl create nbd, each on its own
#             nbdkit memory server (nbd.sh)
#   file and nbd: libaio 4 KiB randread and randwrite at iodepth 1 and 32.
#   zoned     one zoned geometry on zoned null_blk, a zoned BIUS ramdisk and
#             rublk's zoned RAM target, psync --zonemode=zbd: sequential
#             write, then random read (zoned.sh)
#   deep      io_uring at depth and QD1 on the floor (null_blk-nodata) and
#             the devices of the classic suite of DEEP_SET (deep.sh)
#   models    (not in the default set) every device model of biusctl and a
#             custom one against its own numbers, one device at a time
#             (models.sh)
#
# Results: /results/bench/ (9p): meta.txt, devices.txt, runs.txt (one line
# per fio run: rep job device file), fio/<device>/<job>-r<rep>.json and
# .proc (counters of the run: system-wide context switches, CPU ticks, and
# for daemons their threads' context switches, CPU time and read()/write()
# calls).  Progress lines on the console: BIUS-BENCH ...
#
# Kernel command line knobs (dotted, see init): biusbench.runtime=SECONDS
# biusbench.ramp=SECONDS biusbench.reps=N biusbench.size=MiB
# biusbench.queues=N biusbench.modes=copy,map (default: every mode that
# `biusctl create --help` lists) biusbench.sweep=4k,16k,...
# biusbench.only=dev1,dev2 (device names, for quick runs)
# biusbench.suites=classic,deep,inflight,file,nbd,zoned,models (default:
# all but models; the models suite's own knobs are in models.sh)
# biusbench.zone_size=MiB (the zoned suite's zone size; default 16: 16
# zones of a 256 MiB device)
# biusbench.inflight_runtime=SECONDS (runtime of the 10 ms device's jobs;
# default 8: about 800 I/Os at QD1)
# biusbench.poll=USECS (biusctl create --poll-us for the BIUS devices;
# default 200)
# biusbench.perf=1 (each run under `perf record -a`, flat profile kept as
# <run>.perf.txt; needs perf in the initramfs: scripts/bench.sh -p)
# biusbench.trace=1 (an ftrace window of 0.5 s in each run, after the
# ramp: syscalls of fio, block and bius request events, scheduler
# switches and wake-ups; kept as <run>.trace.txt for benches/vm/timeline.py)
# biusbench.tunables=T|none (GLIBC_TUNABLES for every user-space server,
# BIUS daemons and nbdkit alike; default: no `rep movsb` in memcpy and no
# `rep stosb` in memset, which TCG emulates a byte at a time: 0.5 GB/s
# against 3.4 GB/s for vector copies, see benches/README.md)
source /bius/lib.sh
source /bius/bench/models.sh
set +e	# a failing run or device is recorded and skipped, not fatal
set -u

RUNTIME=3 RAMP=1 REPS=3 SIZE_MB=256 QUEUES=$(nproc) MODES="" ONLY="" TUNABLES=glibc.cpu.x86_rep_movsb_threshold=4294967295:glibc.cpu.x86_rep_stosb_threshold=4294967295 PERF=0 TRACE=0 POLL=200
SUITES="classic deep inflight file nbd zoned" INF_RUNTIME=8 INF_LATENCY=10ms ZONE_MB=16
SWEEP="4k 16k 64k 256k 1m 4m"
for w in $(cat /proc/cmdline); do
	case $w in
	biusbench.runtime=*) RUNTIME=${w#*=} ;;
	biusbench.ramp=*) RAMP=${w#*=} ;;
	biusbench.reps=*) REPS=${w#*=} ;;
	biusbench.size=*) SIZE_MB=${w#*=} ;;
	biusbench.queues=*) QUEUES=${w#*=} ;;
	biusbench.modes=*) MODES=${w#*=}; MODES=${MODES//,/ } ;;
	biusbench.sweep=*) SWEEP=${w#*=}; SWEEP=${SWEEP//,/ } ;;
	biusbench.only=*) ONLY=${w#*=}; ONLY=${ONLY//,/ } ;;
	biusbench.tunables=*) TUNABLES=${w#*=}; [[ $TUNABLES == none ]] && TUNABLES="" ;;
	biusbench.perf=*) PERF=${w#*=} ;;
	biusbench.trace=*) TRACE=${w#*=} ;;
	biusbench.poll=*) POLL=${w#*=} ;;
	biusbench.suites=*) SUITES=${w#*=}; SUITES=${SUITES//,/ } ;;
	biusbench.inflight_runtime=*) INF_RUNTIME=${w#*=} ;;
	biusbench.zone_size=*) ZONE_MB=${w#*=} ;;
	esac
done
SIZE=$((SIZE_MB << 20))
INF_MB=$((SIZE_MB < 64 ? SIZE_MB : 64))	# the in-flight devices: 64 MiB at most
BASE=/usr/bin/biusctl-baseline
OUT=/results/bench
mkdir -p "$OUT/fio"
: >"$OUT/runs.txt"
: >"$OUT/devices.txt"

say() { echo "BIUS-BENCH $*" >/dev/console; echo "== $*"; }
suite() { [[ " $SUITES " == *" $1 "* ]]; }

# --- transfer modes --------------------------------------------------------
help=$(biusctl create --help 2>&1)
if [[ $help == *--transfer* ]]; then
	transfer_flag=1
	if [[ -z $MODES ]]; then
		for m in copy map selective; do
			grep -A6 -- '--transfer' <<<"$help" | grep -qw "$m" && MODES+="$m "
		done
	fi
else
	transfer_flag=0
	MODES=copy
fi
MODES=$(echo $MODES)
[[ -n $MODES ]] || MODES=copy
# the baseline biusctl: which of the modes it has, and --poll-us
BASE_MODES="" base_transfer=0 base_poll=0
if [[ -x $BASE ]] && suite classic; then
	bhelp=$($BASE create --help 2>&1)
	[[ $bhelp == *--poll-us* ]] && base_poll=1
	if [[ $bhelp == *--transfer* ]]; then
		base_transfer=1
		for m in $MODES; do
			grep -A6 -- '--transfer' <<<"$bhelp" | grep -qw "$m" && BASE_MODES+="$m "
		done
	else
		BASE_MODES=copy
	fi
	BASE_MODES=$(echo $BASE_MODES)
fi

{
	echo "kernel $(uname -r)"
	echo "cpus $(nproc)"
	echo "mem_kb $(awk '/MemTotal/{print $2}' /proc/meminfo)"
	echo "fio $(fio --version)"
	echo "runtime $RUNTIME"
	echo "ramp $RAMP"
	echo "reps $REPS"
	echo "size_mb $SIZE_MB"
	echo "bius_queues $QUEUES"
	echo "transfer_flag $transfer_flag"
	echo "modes $MODES"
	echo "sweep $SWEEP"
	echo "glibc_tunables ${TUNABLES:-none}"
	echo "perf $PERF"
	echo "trace $TRACE"
	echo "poll_us ${POLL:-0}"
	echo "suites $SUITES"
	echo "inflight_runtime $INF_RUNTIME"
	echo "inflight_latency $INF_LATENCY"
	echo "inflight_size_mb $INF_MB"
	echo "zone_mb $ZONE_MB"
	if [[ -x $BASE ]]; then
		echo "baseline_md5 $(md5sum <$BASE | cut -c1-12)"
		echo "baseline_modes $BASE_MODES"
	fi
	echo "started_uptime $(cut -d' ' -f1 /proc/uptime)"
} >"$OUT/meta.txt"
# how fast this VM copies and fills memory, by method (the tuned lines:
# the glibc tunables the servers run with)
if command -v memprobe >/dev/null; then
	{
		memprobe
		[[ -n $TUNABLES ]] && GLIBC_TUNABLES=$TUNABLES memprobe \
			| sed -n 's/^memprobe \(glibc-mem[a-z]*\) /memprobe \1-tuned /p'
	} >"$OUT/memprobe.txt" 2>&1
fi
say "suites: $SUITES; modes: $MODES${BASE_MODES:+ (baseline: $BASE_MODES)}; runtime ${RUNTIME}s+${RAMP}s ramp; $REPS reps; ${SIZE_MB} MiB devices; BIUS queues $QUEUES"

# --- devices ---------------------------------------------------------------
# DEV[name]=/dev/x, PID[name]=the process that serves it (BIUS daemon,
# nbdkit; its counters go into the cost table), SWEEPDEV: devices that run
# the block-size sweep; the devices of each suite: CLASSIC, INFLIGHT,
# FILEDEV, NBDDEV (nbd is in both CLASSIC and NBDDEV), ZONEDDEV; POLLDEV:
# classic devices with poll queues (the polled QD1 jobs); DEEP: the deep
# suite's (those of DEEP_SET that were made); NOPREFILL: devices
# prefilled otherwise (the file suite's image); SERVER[name]: a server to
# stop after the device's daemon (bius-nbd's nbdkit)
declare -A DEV=() PID=() NOPREFILL=() SERVER=()
ORDER=() SWEEPDEV=() CLASSIC=() DEEP=() INFLIGHT=() FILEDEV=() NBDDEV=() POLLDEV=() ZONEDDEV=()
BIUS_OK=0
# (only bius.ko and biusctl matter here, not the test tools and examples)
if missing=$(grep -E '^(bius\.ko|biusctl) ' /bius/MISSING 2>/dev/null); then
	say "SKIP bius: $(tr '\n' ' ' <<<"$missing")"
else
	modprobe bius && wait_until 5 test -c /dev/bius && BIUS_OK=1
fi
# the suites in the order they run
SUITE_FILES="classic deep inflight file nbd zoned"
source /bius/bench/devices.sh
source /bius/bench/fio.sh
for s in $SUITE_FILES; do
	# shellcheck disable=SC1090 # one file a suite, beside devices.sh
	source "/bius/bench/$s.sh"
done
for s in $SUITE_FILES; do
	"${s}_devices"
done
[[ ${#ORDER[@]} -gt 0 ]] || suite models || fail "no device to benchmark"
{
	echo "sweep_devices ${SWEEPDEV[*]}"
	echo "suite_classic ${CLASSIC[*]}"
	echo "suite_deep ${DEEP[*]}"
	echo "suite_inflight ${INFLIGHT[*]}"
	echo "suite_file ${FILEDEV[*]}"
	echo "suite_nbd ${NBDDEV[*]}"
	echo "poll_devices ${POLLDEV[*]}"
	echo "suite_zoned ${ZONEDDEV[*]}"
	echo "zoned_scheduler $ZSCHED"
} >>"$OUT/meta.txt"
for d in "${ORDER[@]}"; do
	echo "dev $d $(cat /sys/block/"$(basename "${DEV[$d]}")"/queue/scheduler 2>/dev/null | tr ' ' '_') \
max_sectors_kb=$(cat /sys/block/"$(basename "${DEV[$d]}")"/queue/max_sectors_kb 2>/dev/null)" >>"$OUT/meta.txt"
done
# the zoned devices' geometry, to show that it is the same on all three
for d in "${ZONEDDEV[@]}"; do
	q=/sys/block/${DEV[$d]#/dev/}/queue
	echo "zoned_dev:$d$(for a in nr_zones chunk_sectors max_open_zones max_active_zones \
		zone_append_max_bytes logical_block_size nr_requests; do
		printf ' %s=%s' "$a" "$(cat "$q/$a" 2>/dev/null)"
	done) hw_queues=$(ls -d "$q"/../mq/*/ 2>/dev/null | wc -l)" >>"$OUT/meta.txt"
done

# --- prefill ---------------------------------------------------------------
for d in "${ORDER[@]}"; do
	[[ -n ${NOPREFILL[$d]:-} ]] && continue
	size=$SIZE zbd=()
	[[ " ${INFLIGHT[*]} " == *" $d "* ]] && size=$((INF_MB << 20))
	[[ " ${ZONEDDEV[*]} " == *" $d "* ]] && zbd=(--zonemode=zbd)
	t0=$EPOCHREALTIME
	fio --name=prefill --filename="${DEV[$d]}" --ioengine=psync --direct=1 "${zbd[@]}" \
		--rw=write --bs=1m --size="$size" --output=/dev/null >/dev/null 2>&1 \
		|| say "ERROR prefill of $d failed"
	say "prefilled $d in $(elapsed "$t0") s"
done
# (all devices at once must fit in the guest's RAM: scripts/bench.sh boots it
# with BIUS_VM_MEM, 5G by default)
memfree=$(awk '/MemAvailable/{print int($2 / 1024)}' /proc/meminfo)
echo "mem_available_mb_after_prefill $memfree" >>"$OUT/meta.txt"
say "memory available after prefill: $memfree MiB"

# --- the runs --------------------------------------------------------------
total=0
for s in $SUITE_FILES; do
	total=$((total + $("${s}_count")))
done
say "$REPS reps x $total runs"
for ((rep = 1; rep <= REPS; rep++)); do
	t0=$EPOCHREALTIME
	for s in $SUITE_FILES; do
		"${s}_runs" "$rep"
	done
	say "rep $rep/$REPS done in $(elapsed "$t0") s"
done
# models: devices of their own, made and stopped one after the other
suite models && models_suite
echo "ended_uptime $(cut -d' ' -f1 /proc/uptime)" >>"$OUT/meta.txt"

# --- teardown --------------------------------------------------------------
for d in "${ORDER[@]}"; do
	case $d in
	bius-*)
		kill -TERM "${PID[$d]}"
		wait_until 30 eval "! kill -0 ${PID[$d]} 2>/dev/null" || say "ERROR $d: daemon still running"
		;;
	nbd)
		nbd-client -d /dev/nbd0 >/dev/null 2>&1
		kill "${PID[$d]}" 2>/dev/null
		;;
	ublk-*)	# (the disk stays, without its server, until poweroff)
		kill -KILL "${PID[$d]}" 2>/dev/null
		;;
	loop-dio)
		losetup -d "${DEV[$d]}" || say "ERROR losetup -d ${DEV[$d]} failed"
		;;
	esac
	[[ -n ${SERVER[$d]:-} ]] && kill "${SERVER[$d]}" 2>/dev/null
done
mountpoint -q /mnt/bench-ext4 && { umount /mnt/bench-ext4 || say "ERROR umount /mnt/bench-ext4 failed"; }
for nb in nullblat nullbzoned nullbnodata; do
	[[ -d /sys/kernel/config/nullb/$nb ]] \
		&& { echo 0 >"/sys/kernel/config/nullb/$nb/power"; rmdir "/sys/kernel/config/nullb/$nb"; }
done
wait 2>/dev/null
say "done"
exit 0
