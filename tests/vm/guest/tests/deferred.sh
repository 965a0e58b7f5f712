#!/bin/bash
# timeout: 120
# biusctl create --latency: requests that complete later, from a timer, with
# many in flight per queue.  (a) a ramdisk with 1 queue of depth 64, reads
# delayed 10 ms and writes 2 ms: fio writes at QD 32 and verifies (crc32c);
# (b) reads delayed 10 ms: 4k random reads at QD 1 and QD 32; no errors,
# no read completes sooner than 10 ms after fio issued it (fio's total
# latency, from before io_submit, at least 10 ms for every read) and the
# mean completion latency at QD 1 is at least 10 ms; the IOPS of both and their ratio are
# printed on a "RESULT deferred:" line (informative: no speed is asserted);
# biusctl stats counts every read's lateness (due time to the daemon's
# write) and nothing else, printed on a "RESULT deferred:" line too;
# (c) a malformed --latency exits 2 with a one-line message naming it;
# (d) SIGTERM while 16 reads wait out a 1 s delay (fio QD 16, 8 s): the
# disk is open, so the daemon keeps serving; a second SIGTERM forces the
# stop: the kernel removes the disk while the queues are still served, so
# the held reads complete (no error), the daemon exits 0, the disk goes
# away, and fio ends on time without errors (its later reads see the
# removed disk's size 0: end of file) and nothing is left in D state.
source /bius/lib.sh
require_bius
T0=$(now)
step() { echo "== [$(elapsed "$T0") s] $*"; }	# (lib.sh's, timed)

DELAY_NS=10000000	# the read delay of (b), 10 ms

step "(a) --queues 1 --depth 64 --latency read=10ms,write=2ms ramdisk: fio verify at QD 32"
bius_start --queues 1 --depth 64 --latency read=10ms,write=2ms --size 64M --name deferred ramdisk
t0=$(now)
run_fio verify.txt --name=verify --filename="$BIUS_DEV" --direct=1 --ioengine=libaio \
	--iodepth=32 --rw=randwrite --bs=4k --size=16M --verify=crc32c --verify_fatal=1
info "$(elapsed "$t0") s"
bius_stop "$BIUS_PID" "$BIUS_NAME"

# randread QD: 4k random direct reads for 3 s; fio's JSON in qdQD.json
randread() {
	local qd=$1 rc=0
	fio --name="qd$qd" --filename="$BIUS_DEV" --direct=1 --ioengine=libaio \
		--iodepth="$qd" --rw=randread --bs=4k --time_based --runtime=3 \
		--clocksource=clock_gettime --output-format=json --output="qd$qd.json" || rc=$?
	[[ $rc -eq 0 ]] || { cat "qd$qd.json"; fail "fio randread at QD $qd exited with status $rc"; }
	[[ $(jq '[.jobs[].error] | add' "qd$qd.json") == 0 ]] || fail "fio randread at QD $qd reported errors"
	[[ $(jq '.jobs[0].read.total_ios' "qd$qd.json") -gt 0 ]] || fail "fio randread at QD $qd read nothing"
}
# field QD JQ-PATH: one value of .jobs[0].read (integer part)
field() { jq ".jobs[0].read.$2 | floor" "qd$1.json"; }

step "(b) --latency read=10ms: 4k randread at QD 1 and QD 32, 3 s each"
bius_start --queues 1 --depth 64 --latency read=10ms --size 64M --name deferred ramdisk
randread 1
randread 32
biusctl stats --json "$BIUS_NAME" >stats.json || fail "biusctl stats --json $BIUS_NAME failed"
bius_stop "$BIUS_PID" "$BIUS_NAME"
# every read had a due time (the kernel's own reads of the disk too), no
# other request
reads=$(jq .ops.read.count stats.json) late=$(jq .lateness.count stats.json)
[[ $reads -gt 0 && $late == "$reads" ]] \
	|| fail "biusctl stats: lateness counted $late completions, the device served $reads reads"
jq -r '.lateness.ns | "RESULT deferred: read=10ms, lateness of \($reads) reads (due time to the daemon'"'"'s write): p50 \(.p50 / 1000) us, p99 \(.p99 / 1000) us, max \(.max / 1000) us"' \
	--argjson reads "$reads" stats.json
iops1=$(jq '.jobs[0].read.iops' qd1.json)
iops32=$(jq '.jobs[0].read.iops' qd32.json)
for qd in 1 32; do
	info "QD $qd: $(field $qd total_ios) reads, $(field $qd iops) IOPS, latency (ns) total min $(field $qd lat_ns.min) mean $(field $qd lat_ns.mean), completion min $(field $qd clat_ns.min) mean $(field $qd clat_ns.mean) max $(field $qd clat_ns.max)"
done
awk -v a="$iops1" -v b="$iops32" -v l="$(jq '.jobs[0].read.clat_ns.mean' qd1.json)" 'BEGIN {
	printf "RESULT deferred: read=10ms, 4k randread: QD1 %.0f IOPS, QD32 %.0f IOPS, ratio QD32/QD1 %.1f; QD1 mean completion latency %.2f ms\n", a, b, b / a, l / 1e6 }'
# (the total latency, not the completion latency: fio's libaio engine
# stamps a batch's issue time once io_submit has returned, and the daemon
# may hold the first reads of the batch before that, so at QD 32 their
# completion latency can be below the delay they got)
for qd in 1 32; do
	[[ $(field $qd lat_ns.min) -ge $DELAY_NS ]] \
		|| fail "QD $qd: a read completed $(field $qd lat_ns.min) ns after fio issued it, sooner than the 10 ms delay"
done
[[ $(field 1 clat_ns.mean) -ge $DELAY_NS ]] || fail "QD 1: mean completion latency $(field 1 clat_ns.mean) ns < 10 ms"

step "(c) malformed --latency: exit 2, one line naming --latency"
for spec in read=-1 foo=1ms; do
	rc=0
	err=$(timeout 20 biusctl create --latency "$spec" --size 16M ramdisk 2>&1 >out.txt) || rc=$?
	info "--latency $spec -> $rc: $err"
	[[ $rc -eq 2 ]] || fail "--latency $spec: exit status $rc, expected 2"
	[[ ! -s out.txt ]] || fail "--latency $spec printed on stdout: $(cat out.txt)"
	[[ $(wc -l <<<"$err") -eq 1 ]] || fail "--latency $spec: not one line on stderr: $err"
	[[ $err == "biusctl: error: "*--latency* ]] || fail "--latency $spec: the message does not name --latency: $err"
done
[[ -z $(biusctl list --json | jq '.[]') ]] || fail "a rejected create left a device behind: $(biusctl list)"
step "(d) SIGTERM twice while 16 reads wait out a 1 s delay"
bius_start --queues 1 --depth 64 --latency read=1s --size 64M --name deferred ramdisk
fio --name=held --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth=16 \
	--rw=randread --bs=4k --time_based --runtime=8 --output-format=json --output=held.json 2>held.err &
fio_pid=$!
wait_until 10 eval '[[ $(awk "{print \$1 + \$2}" /sys/block/$BIUS_NAME/inflight) -ge 16 ]]' \
	|| fail "16 reads not in flight: $(cat "/sys/block/$BIUS_NAME/inflight")"
kill -TERM "$BIUS_PID"
sleep 1.5
kill -0 "$BIUS_PID" 2>/dev/null || fail "the daemon exited on SIGTERM although its disk is open"
kill -0 "$fio_pid" 2>/dev/null || { cat held.json held.err; fail "fio ended after the first SIGTERM"; }
grep -q 'busy' "$BIUS_ERR" || fail "the daemon did not say its disk is busy: $(cat "$BIUS_ERR")"
info "first SIGTERM: still serving; $(grep -m 1 busy "$BIUS_ERR")"
info "in flight (reads writes): $(cat "/sys/block/$BIUS_NAME/inflight")"
t=$(now)
bius_stop "$BIUS_PID" "$BIUS_NAME"
info "second SIGTERM: the daemon exited 0 and the disk went away after $(elapsed "$t") s"
wait_until 20 eval "! kill -0 $fio_pid 2>/dev/null" || fail "fio still running 20 s after the daemon stopped"
rc=0
wait "$fio_pid" || rc=$?
info "fio ended $(elapsed "$t") s after the second SIGTERM, status $rc; reads of data: $(jq '.jobs[0].read.io_bytes / 4096' held.json), errors: $(jq '.jobs[0].error' held.json)"
[[ $rc -eq 0 && $(jq '.jobs[0].error' held.json) == 0 ]] \
	|| fail "fio failed (status $rc): the held reads should have completed: $(cat held.err)"
[[ $(jq '.jobs[0].read.io_bytes' held.json) -ge $((32 * 4096)) ]] \
	|| fail "fewer than 32 reads completed (16 before the first SIGTERM, 16 held at the second)"

echo "deferred: OK"
