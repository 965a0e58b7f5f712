#!/bin/bash
# timeout: 3000
# fio's own zoned test suite, t/zbd/test-zbd-support of the fio release the
# VM runs (fetched from Debian's source package by vm-test.sh, as Debian does
# not package it), against zoned null_blk and against BIUS zoned disks of
# the same geometry (256 MiB in 2 MiB zones, 8 conventional) served three
# ways: the synchronous zoned ramdisk, the
# same with every request completed later (--latency write=20us: the
# deferred worker, the zone gate), and DeferredZoned over a file with many
# requests in flight (file --engine threads).  Every test case must end the
# same way (pass, skip or fail) on each BIUS disk as on null_blk.
#
# Not in the default list (17 minutes under TCG):
# scripts/vm-test.sh zoned-zbd-suite.  Progress lines "zbd DEVICE CASE STATUS"
# on the console.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius

ZBD=/opt/fio/t/zbd
[[ -x $ZBD/test-zbd-support ]] \
	|| fail "fio's t/zbd/test-zbd-support is not in the VM (scripts/vm-test.sh fetches it from Debian's fio source package; see its log)"
# (the suite runs the fio two directories up)
ln -sf /usr/bin/fio /opt/fio/fio

SIZE_MB=256 ZONE_MB=2 CONV=8

# suite NAME DEV: run the whole suite on DEV; NAME.results has one
# "NN STATUS" line per test case
suite() {
	local name=$1 dev=$2 t0
	t0=$(now)
	info "test-zbd-support $dev ($name)"
	# (progress on the console: the run is long)
	(cd "$ZBD" && ./test-zbd-support -r "$dev") 2>&1 | tee "$name.out" \
		| sed -n "s/^Running test \([0-9]*\) \.\.\. *\([A-Z]*\).*/zbd $name \1 \2/p" >/dev/console || true
	sed -n 's/^Running test \([0-9]*\) \.\.\. *\([A-Z]*\).*/\1 \2/p' "$name.out" >"$name.results"
	info "$name: $(cut -d' ' -f2 "$name.results" | sort | uniq -c | tr '\n' ' ')in $(elapsed "$t0") s"
	[[ -s $name.results ]] || { tail -n 20 "$name.out"; fail "$name: the suite ran no test case"; }
}

step "zoned null_blk: ${SIZE_MB} MiB, ${ZONE_MB} MiB zones, $CONV conventional"
nullb_zoned zbdref "$SIZE_MB" "$ZONE_MB" "$ZONE_MB" "$CONV" 0 0
suite null_blk "$NULLB_DEV"
nullb_remove zbdref

geometry=(--zoned --size "${SIZE_MB}M" --zone-size "${ZONE_MB}M" --conv-zones "$CONV" --queues 2)

step "BIUS zoned ramdisk"
bius_start "${geometry[@]}" ramdisk
suite bius-ramdisk "$BIUS_DEV"
bius_stop "$BIUS_PID" "$BIUS_NAME"

step "BIUS zoned ramdisk, completed later (--latency write=20us)"
bius_start "${geometry[@]}" --latency write=20us ramdisk
suite bius-deferred "$BIUS_DEV"
bius_stop "$BIUS_PID" "$BIUS_NAME"

step "BIUS DeferredZoned over a file (--engine threads)"
truncate -s "${SIZE_MB}M" /tmp/zbd.img
bius_start "${geometry[@]}" file --engine threads /tmp/zbd.img
suite bius-emulated "$BIUS_DEV"
bius_stop "$BIUS_PID" "$BIUS_NAME"
rm -f /tmp/zbd.img

step "every test case ends as on null_blk"
differs=0
for name in bius-ramdisk bius-deferred bius-emulated; do
	if ! diff null_blk.results "$name.results" >"$name.diff"; then
		differs=1
		info "$name differs from null_blk (< null_blk, > $name):"
		sed 's/^/      /' "$name.diff"
	fi
done
paste null_blk.results bius-ramdisk.results bius-deferred.results bius-emulated.results \
	| awk 'BEGIN { printf "   %-5s %-9s %-9s %-9s %-9s\n", "test", "null_blk", "ramdisk", "deferred", "emulated" }
		{ printf "   %-5s %-9s %-9s %-9s %-9s\n", $1, $2, $4, $6, $8 }'
for f in *.out; do
	grep -q "FAIL" "$f" && { info "failures of ${f%.out}:"; grep -B2 -A8 "FAIL" "$f" | head -n 60 | sed 's/^/      /'; }
done
grep -h "^RESULT\|tests passed" ./*.out | sed 's/^/   /' || true
echo "RESULT zoned-zbd-suite: null_blk $(cut -d' ' -f2 null_blk.results | sort | uniq -c | tr '\n' ' ')"
[[ $differs == 0 ]] || fail "fio's zbd suite ends differently on a BIUS disk than on zoned null_blk (see above)"
