#!/bin/bash
# The VM benchmark: boot the test VM once and run the same fio jobs against
# brd, null_blk, BIUS (ramdisk in each transfer mode biusctl offers, null,
# null without statistics), ublk (a libublk RAM server and rublk's null
# target, built by scripts/bench-ublk.sh; ublk=0 leaves them out;
# ublk_drv: the guest kernel's own module when it has one, 6.12, else
# built from Debian's source, 6.1) and an nbdkit RAM disk over NBD (suite
# classic); requests in flight on one queue with 10 ms reads (inflight);
# one image file through loop and the file engines (file); nbd.ko against
# biusctl create nbd (nbd); one zoned geometry on zoned null_blk, BIUS and
# rublk's zoned target (zoned; ublk's needs Linux 6.6); io_uring at QD 32
# and 128 with 2 jobs, QD1 with io_uring and psync, and CPU per I/O on
# null_blk without data (the floor), brd, BIUS (defaults, null, zero) and
# ublk (RAM, null, null with user copy) (deep); every device
# model against its own numbers (models, only when named in suites=); then
# tabulate and plot on the host.
#
#   scripts/bench.sh [-n] [-q] [-p] [-t] [KEY=VALUE...]
#
#   -n   do not build bius.ko and biusctl first (use what is there)
#   -q   quick check: 1 rep of 1 s (2 s for the 10 ms device), small sweep
#        (tests the bench, not BIUS)
#   -p   profile: run every fio run under `perf record -a` (cpu-clock, the
#        only clock TCG has) and keep a flat profile per run, <run>.perf.txt
#        (the figures of a profiled run are lower: compare profiles, not
#        throughput)
#   -t   timeline: an ftrace window in every fio run (syscalls, block and
#        bius request events, task switches); benches/vm/timeline.py
#        writes timeline.md, the median time of each phase of a request
#        (tracing slows every path too)
#   KEY=VALUE  guest knobs: runtime=SECONDS ramp=SECONDS reps=N size=MiB
#        queues=N modes=copy,map,selective sweep=4k,64k,... only=brd,nbd,...
#        poll=USECS (biusctl --poll-us) tunables=GLIBC_TUNABLES|none (for
#        BIUS daemons and nbdkit) perf=1 (as -p, without adding perf)
#        trace=1 (as -t) suites=classic,deep,inflight,file,nbd,zoned,models
#        models=ovh,precision,nvm,custom,nvme-ssd,buffer,ftl,zns-ssd,xg6,smr-hdd (groups of
#        the models suite) model_runtime=SECONDS waf_runtime=SECONDS
#        flash_scale=N (time scale of the flash models' sweeps)
#        inflight_runtime=SECONDS (the 10 ms device's runs)
#        zone_size=MiB (the zoned suite's zones)
#        (defaults: runtime=3 ramp=1 reps=3 size=256 queues=nproc,
#        modes=every mode `biusctl create --help` lists, poll=200,
#        tunables: no `rep movsb` in glibc's memcpy, see benches/README.md,
#        suites: all but models, inflight_runtime=8, zone_size=16;
#        models: all groups, model_runtime=3, waf_runtime=120,
#        flash_scale=1000)
#
# Environment: BIUS_BENCH_KO, BIUS_BENCH_BIUSCTL: bench these bius.ko and
# biusctl instead of driver/bius.ko and $CARGO_TARGET_DIR/release/biusctl
# (CARGO_TARGET_DIR default: target) (e.g. another
# branch's build; implies -n; the results stay in build/bench-results, as
# do those of -q, -p and -t);
# BIUS_BENCH_BASELINE: an older biusctl (scripts/bench-baseline.sh REV
# builds one), put into the VM as /usr/bin/biusctl-baseline: the classic
# suite also runs the ramdisks of every mode it has, bius-ram-<mode>@base;
# BIUS_VM_MEM: guest RAM (default here 5G: all suites' devices at once);
# BIUS_VM_APPEND: more kernel parameters for the guest (e.g. tsc=reliable);
# BIUS_VM_CPU: the guest's CPU model, QEMU's -cpu (default max; e.g.
# max,-erms,-fsrm: the kernel then copies to and from user memory without
# rep movsb, which TCG emulates a byte at a time);
# BIUS_KVER as for scripts/vm-test.sh (the newest kernel by default:
# BIUS_KVER=6.1 for the published 6.1 run).
#
# Results: build/bench-results/<run>/ (console.log, bench.log, bench/
# with fio JSON per run and counters), build/bench-results/latest -> it;
# the summary (results.md, *.png, summary.json) is written there and copied
# to benches/results/ (latest.md, latest.json + PNGs), which whoever runs
# it commits (not for -q, -p, -t, another build or, on 6.1, a run
# restricted by suites=).  On another kernel than 6.1 the copies are named
# for its series, kernel-<series>.md, .json and kernel-<series>-*.png
# (BIUS_KVER=6.12: kernel-6.12.md), suites= or not, as
# long as the classic suite ran (suites=deep alone leaves them as they are).
# The deep suite's tables alone: deep.md, copied to benches/results/ as
# deep.md (kernel-<series>-deep.md on another kernel) whenever it ran,
# suites= or not (not for -q, -p, -t, only= or another build).
# The models suite: benches/vm/report_models.py writes models.md and
# models-*.png, copied to benches/results/ when every group ran (not for
# -q, another build or models=; kernel-<series>-models* on another kernel).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../tests/vm/boot.sh"

build=1 knobs=() profile=0 quick=0
while getopts nqpth opt; do
	case $opt in
	n) build=0 ;;
	p) profile=1 knobs+=(perf=1) ;;
	t) knobs+=(trace=1) ;;
	q) quick=1 knobs+=(runtime=1 ramp=0 reps=1 "sweep=4k,256k,4m" size=64 inflight_runtime=2) ;;
	*) sed -n '2,67s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
knobs+=("$@")
has_knob() { [[ " ${knobs[*]} " == *" $1 "* ]]; }
has_knob_key() { [[ " ${knobs[*]} " == *" $1="* ]]; }
export BIUS_VM_MEM=${BIUS_VM_MEM:-5G}
biusctl_bin=${BIUS_BENCH_BIUSCTL:-${CARGO_TARGET_DIR:-$BIUS_ROOT/target}/release/biusctl}
[[ -n ${BIUS_BENCH_KO:-}${BIUS_BENCH_BIUSCTL:-} ]] && build=0

for tool in gnuplot python3; do
	command -v "$tool" >/dev/null || die "$tool missing (run scripts/setup.sh)"
done
for tool in nbdkit nbd-client fio; do
	command -v "$tool" >/dev/null || PATH=/usr/sbin:$PATH command -v "$tool" >/dev/null \
		|| die "$tool missing (run scripts/setup.sh)"
done
kver=$(bius_kver) || die "no kernel with both /boot/vmlinuz-<ver> and /lib/modules/<ver>/build: run scripts/setup.sh"
# the name of the published results: latest (.md, .json, PNGs as they are)
# for 6.1, kernel-<series> (every file with that prefix) for another kernel
series=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$kver")
published=latest
[[ $series == 6.1 ]] || published=kernel-$series

[[ $build == 1 ]] && vm_build_release "$kver" bench

# publish FILE...: copy results into benches/results/: results.md and
# summary.json as latest.md and latest.json, the others by their own name;
# on another kernel than 6.1 latest becomes kernel-<series> and the others
# get that prefix (kernel-6.12-throughput.png), the links of .md files too
publish() {
	local f name out=$BIUS_ROOT/benches/results
	mkdir -p "$out"
	for f in "$@"; do
		case ${f##*/} in
		results.md) name=$published.md ;;
		summary.json) name=$published.json ;;
		*) name=${f##*/}; [[ $published == latest ]] || name=$published-$name ;;
		esac
		if [[ $name == *.md && $published != latest ]]; then
			sed -E "s/\]\(([A-Za-z0-9_.-]+\.png)\)/](${published}-\1)/g" "$f" >"$out/$name"
		else
			cp "$f" "$out/$name"
		fi
	done
}

vm_new_run bench-results 10

# The test VM's initramfs, plus what only the benchmark needs: nbdkit with
# its memory plugin, nbd-client, nbd.ko, memprobe, perf (-p), and the bench
# as the test "bench".
extras=(--bin nbdkit --bin nbd-client
	--bin /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-memory-plugin.so
	--module nbd
	--file "$BIUS_ROOT/benches/vm/guest/bench.sh:/bius/tests/bench.sh")
# (and the files it sources, one a suite: benches/vm/guest/*.sh)
for f in "$BIUS_ROOT"/benches/vm/guest/*.sh; do
	[[ $f == */bench.sh ]] || extras+=(--file "$f:/bius/bench/${f##*/}")
done
extras+=(--biusctl "$biusctl_bin")
for tool in memprobe zoneop; do
	gcc -O2 -Wall -Wextra -Werror -static -o "$work/$tool" \
		"$BIUS_ROOT/benches/vm/tools/$tool.c" || die "building $tool failed"
	extras+=(--file "$work/$tool:/usr/bin/$tool")
done
if [[ $profile == 1 ]]; then
	type -P perf >/dev/null || die "-p needs perf (apt install linux-perf)"
	extras+=(--bin perf)
fi
if [[ -n ${BIUS_BENCH_KO:-} ]]; then
	[[ $(modinfo -F vermagic "$BIUS_BENCH_KO" | awk '{print $1}') == "$kver" ]] \
		|| die "$BIUS_BENCH_KO is not built for $kver"
	extras+=(--ko "$BIUS_BENCH_KO")
fi
[[ -x $biusctl_bin ]] || die "$biusctl_bin: no such executable"
if [[ -n ${BIUS_BENCH_BASELINE:-} ]]; then
	[[ -x $BIUS_BENCH_BASELINE ]] || die "$BIUS_BENCH_BASELINE: no such executable"
	extras+=(--file "$BIUS_BENCH_BASELINE:/usr/bin/biusctl-baseline")
fi
# ublk, built here and never committed (scripts/bench-ublk.sh), unless
# ublk=0; the driver: the kernel's own module when it has one (6.12), else
# ublk_drv.ko built from Debian's source (6.1)
ublk_from=""
if ! has_knob ublk=0; then
	ublk=$("$BIUS_ROOT/scripts/bench-ublk.sh" "$kver") || die "building ublk failed (ublk=0 benches without it)"
	extras+=(--file "$ublk/ublk-ram:/usr/bin/ublk-ram" --file "$ublk/bin/rublk:/usr/bin/rublk")
	if [[ -s $ublk/ublk_drv.ko ]]; then
		extras+=(--file "$ublk/ublk_drv.ko:/bius/ublk/ublk_drv.ko")
		ublk_from="ublk_drv.ko built out of tree from Debian's linux-source-$series $(md5sum <"$ublk/ublk_drv.ko" | cut -c1-12)"
	else
		extras+=(--module ublk_drv)
		ublk_from="ublk_drv: Debian's module of $kver"
	fi
fi
initrd=$(vm_build_initramfs "$kver" "$work" "${extras[@]}")
root=$work/root
[[ -d $root/bius ]] || die "no initramfs staging directory $root"
[[ -s $root/bius/MISSING ]] && { log "bench: MISSING in the VM:"; sed 's/^/bench:   /' "$root/bius/MISSING" >&2; }

limit=$(sed -n 's/^# timeout: *\([0-9]*\).*/\1/p' "$BIUS_ROOT/benches/vm/guest/bench.sh")
limit=$((limit + 120))
append=(biusvm.mode=test biusvm.tests=bench biusvm.verbose=0)
for kv in "${knobs[@]}"; do
	[[ $kv == *=* ]] || die "expected KEY=VALUE, got '$kv'"
	append+=("biusbench.$kv")
done
# (more kernel parameters for the guest, as for scripts/vm-test.sh)
append+=(${BIUS_VM_APPEND:-})
{
	echo "main $(git -C "$BIUS_ROOT" rev-parse --short HEAD)$(git -C "$BIUS_ROOT" diff --quiet -- driver crates || echo ' (+ uncommitted changes)')"
	echo "bius.ko ${BIUS_BENCH_KO:-driver/bius.ko} $(md5sum <"${BIUS_BENCH_KO:-$BIUS_ROOT/driver/bius.ko}" | cut -c1-12)"
	echo "biusctl $biusctl_bin $(md5sum <"$biusctl_bin" | cut -c1-12)"
	[[ -z ${BIUS_BENCH_BASELINE:-} ]] \
		|| echo "baseline ${BIUS_BENCH_BASELINE_REV:-$BIUS_BENCH_BASELINE} $(md5sum <"$BIUS_BENCH_BASELINE" | cut -c1-12)"
	[[ -z $ublk_from ]] || echo "ublk $ublk_from"
	[[ -z ${BIUS_VM_CPU:-} ]] || echo "vm-cpu $BIUS_VM_CPU"
} >"$res/build.txt" 2>/dev/null || true
log "bench: results in $res; knobs: ${knobs[*]:-(defaults)}; host load: $(cut -d' ' -f1-3 /proc/loadavg)"
uptime >"$res/host-load-before.txt"
t0=$SECONDS
vm_boot "$kver" "$initrd" "$res" "$limit" "${append[@]}" | grep --line-buffered -E '^(BIUS-|bius-vm)' || true
uptime >"$res/host-load-after.txt"
log "bench: VM ran $((SECONDS - t0)) s; host load after: $(cut -d' ' -f1-3 /proc/loadavg)"

grep -q '^BIUS-TEST bench PASS' "$res/console.log" \
	|| { tail -n 30 "$res/bench.log" 2>/dev/null >&2; die "the benchmark did not complete (see $res/console.log, $res/bench.log)"; }
models=0
[[ -s $res/bench/models/runs.txt ]] && models=1
[[ -s $res/bench/runs.txt || $models == 1 ]] || die "no fio results in $res/bench"
if [[ $models == 1 ]]; then
	# the models alone against the real drives' measurements, for the
	# report's table of them (benches/criterion/accuracy/)
	(cd "$BIUS_ROOT" && nice -n 19 cargo run -q --release -p bius-benches --bin accuracy -- --json) \
		>"$res/accuracy.json" || log "bench: models: the accuracy binary failed: no table of the real drives"
	python3 "$BIUS_ROOT/benches/vm/report_models.py" "$res" || die "report_models.py failed"
	(cd "$res" && gnuplot models.gp) || die "gnuplot models.gp failed"
	log "bench: models: table $res/models.md, plots $res/models-*.png"
	if [[ -z ${BIUS_BENCH_KO:-}${BIUS_BENCH_BIUSCTL:-} && $quick == 0 ]] && ! has_knob_key models; then
		publish "$res/models.md" "$res"/models-*.png
		log "bench: models: copied to benches/results/"
	fi
fi
if has_knob trace=1; then
	python3 "$BIUS_ROOT/benches/vm/timeline.py" "$res" || die "timeline.py failed"
	log "bench: phases of a request: $res/timeline.md"
fi
[[ -s $res/bench/runs.txt ]] || exit 0

python3 "$BIUS_ROOT/benches/vm/report.py" "$res" || die "report.py failed"
(cd "$res" && gnuplot plots.gp) || die "gnuplot failed"
if [[ -s $res/deep.md && -z ${BIUS_BENCH_KO:-}${BIUS_BENCH_BIUSCTL:-} && $quick == 0 ]] \
	&& ! has_knob perf=1 && ! has_knob trace=1 && ! has_knob_key only; then
	publish "$res/deep.md"
	log "bench: deep: copied to benches/results/"
fi
if [[ -n ${BIUS_BENCH_KO:-}${BIUS_BENCH_BIUSCTL:-} || $quick == 1 ]] || has_knob perf=1 || has_knob trace=1 \
	|| { has_knob_key suites && [[ $published == latest ]]; } \
	|| ! grep -q '^suite_classic [^ ]' "$res/bench/meta.txt"; then
	log "bench: another build, or a quick, profiled, traced, suites= or no-classic run: not copied to benches/results; table $res/results.md, plots $res/*.png"
	exit 0
fi
publish "$res/results.md" "$res/summary.json" "$res"/*.png
log "bench: table benches/results/$published.md, plots, raw results $res"
