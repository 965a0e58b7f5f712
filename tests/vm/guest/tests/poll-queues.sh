#!/bin/bash
# timeout: 420
# Poll queues (--poll-queues), what blktests block/007 ("classic and hybrid
# IO polling") does, on BIUS: the disk polls (queue/io_poll 1, its last
# hardware queue of type poll in blk-mq's debugfs); fio with io_uring
# --hipri (random read, then a crc32c verify-write) in classic
# (io_poll_delay -1) and hybrid (0) polling, its requests on the poll queue;
# pvsync2 --hipri (which 6.1 serves without polling); QD1 latency with and
# without polling; a kill -9 of the daemon under polled I/O (EIO, nothing
# hangs); a recovery under polled I/O (fio verifies every block).
#
# Evidence that completions come through the poll path: the driver's
# tracepoints, counted per queue by hist triggers: bius_complete (write()
# applied a completion) and bius_polled (blk_mq_ops.poll ended the
# request); on the poll queue (1) every completion must be ended by a poll
# and no request may time out.
source /bius/lib.sh
require_bius

NAME=polldev
IMG=/tmp/poll.img
DBG=/sys/kernel/debug/block
T=/sys/kernel/tracing
RECOVER_LIMIT=20	# seconds from a kill to a recovered, LIVE device
FIO_END_LIMIT=15	# seconds from the kill to fio's exit
GONE_LIMIT=10		# seconds from fio's exit to the disk's removal

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
mountpoint -q $T || mount -t tracefs nodev $T || fail "cannot mount tracefs"
for ev in bius_complete bius_polled; do
	echo 'hist:keys=queue' >"$T/events/bius/$ev/trigger" || fail "no hist trigger on $ev"
done

state_of() { biusctl info "$1" --json | jq -r .state; }

# count EVENT QUEUE: bius_EVENT tracepoint hits on QUEUE so far (all devices)
count() {
	awk -v q="$2" '$1 == "{" && $2 == "queue:" && $3 == q { n = $6 } END { print n + 0 }' \
		"$T/events/bius/bius_$1/hist"
}

# counts: "COMPLETE0 POLLED0 COMPLETE1 POLLED1" so far
counts() { echo "$(count complete 0) $(count polled 0) $(count complete 1) $(count polled 1)"; }

# hipri_fio LOG ARGS...: a polled fio job (io_uring, IOPOLL) on the disk
hipri_fio() {
	local log=$1
	shift
	run_fio "$log" --name=hipri --filename="/dev/$NAME" --direct=1 \
		--ioengine=io_uring --hipri=1 --bs=4k "$@"
}

# polled LOG WHAT ARGS...: hipri_fio whose requests must all have gone to
# the poll queue 1, each ended by a poll (the default queue 0 takes hardly
# any: fio's own flushes and the like)
polled() {
	local log=$1 what=$2 c0 p0 c1 p1 b0 q0 b1 q1 t
	shift 2
	read -r b0 q0 b1 q1 < <(counts)
	t=$(now)
	hipri_fio "$log" "$@"
	read -r c0 p0 c1 p1 < <(counts)
	c0=$((c0 - b0)) p0=$((p0 - q0)) c1=$((c1 - b1)) p1=$((p1 - q1))
	info "$what, $(elapsed "$t") s: poll queue $c1 completed, $p1 ended by poll; default queue $c0 completed, $p0 by poll"
	grep -E 'IOPS=|clat \(' "$log" | head -2 | sed 's/^/   fio: /' || true
	[[ $c1 -gt 1000 ]] || fail "$what: only $c1 requests completed on the poll queue"
	[[ $p1 -eq $c1 ]] || fail "$what: $c1 completions on the poll queue, $p1 ended by poll"
	[[ $p0 -eq 0 ]] || fail "$what: $p0 requests of the default queue ended by poll"
	[[ $c0 -lt $((c1 / 100 + 10)) ]] || fail "$what: $c0 requests went to the default queue"
}

step "a 64 MiB ramdisk with 2 queues, 1 of them polled"
bius_start --size 64M --queues 2 --poll-queues 1 --name "$NAME" ramdisk
[[ $(biusctl info "$NAME" --json | jq .poll_queues) == 1 ]] || fail "biusctl info does not report 1 poll queue"
biusctl info "$NAME" | grep -E '^(queues|poll_queues):' | sed 's/^/   info: /'
[[ $(cat "/sys/block/$NAME/queue/io_poll") == 1 ]] || fail "queue/io_poll is not 1"
[[ $(cat "$DBG/$NAME/hctx0/type") == default ]] || fail "hctx0 is $(cat "$DBG/$NAME/hctx0/type"), not default"
[[ $(cat "$DBG/$NAME/hctx1/type") == poll ]] || fail "hctx1 is $(cat "$DBG/$NAME/hctx1/type"), not poll"
info "io_poll 1; hctx0 default, hctx1 poll"

# Hybrid polling (io_poll_delay >= 0) is gone from newer kernels, whose
# io_poll_delay reads -1 whatever is written (6.12): classic polling only.
delays="-1 0"
echo 0 >"/sys/block/$NAME/queue/io_poll_delay"
if [[ $(cat "/sys/block/$NAME/queue/io_poll_delay") == -1 ]]; then
	delays=-1
	info "this kernel has no hybrid polling (io_poll_delay stays -1): classic only"
fi
for delay in $delays; do
	kind=classic
	[[ $delay == -1 ]] || kind=hybrid
	step "$kind polling (io_poll_delay $delay): io_uring --hipri random read, then verify-write"
	echo "$delay" >"/sys/block/$NAME/queue/io_poll_delay"
	[[ $(cat "/sys/block/$NAME/queue/io_poll_delay") == "$delay" ]] \
		|| fail "io_poll_delay reads $(cat "/sys/block/$NAME/queue/io_poll_delay"), not $delay"
	polled "read-$kind.txt" "$kind randread" --rw=randread --size=32M \
		--iodepth=4 --time_based --runtime=4
	polled "verify-$kind.txt" "$kind verify-write" --rw=randwrite --size=16M \
		--iodepth=8 --verify=crc32c --do_verify=1 --verify_fatal=1
done
echo -1 >"/sys/block/$NAME/queue/io_poll_delay"

step "pvsync2 --hipri: 6.1 serves synchronous direct I/O without polling"
c1=$(count complete 1)
run_fio pvsync2.txt --name=pvsync2 --filename="/dev/$NAME" --direct=1 \
	--ioengine=pvsync2 --hipri=1 --bs=4k --rw=randwrite --size=8M \
	--verify=crc32c --do_verify=1 --verify_fatal=1
# (block/fops.c: only the async path sets REQ_POLLED)
[[ $(count complete 1) -eq $c1 ]] || fail "pvsync2 --hipri reached the poll queue: 6.1 was expected not to poll it"
info "verified; all of it on the default queue"

step "QD1 4K random read latency, the same disk: interrupt-style, then polled"
run_fio qd1-irq.txt --name=qd1 --filename="/dev/$NAME" --direct=1 --ioengine=io_uring \
	--rw=randread --bs=4k --iodepth=1 --size=32M --time_based --runtime=3
hipri_fio qd1-hipri.txt --rw=randread --iodepth=1 --size=32M --time_based --runtime=3
for f in qd1-irq qd1-hipri; do
	info "$f: $(grep -Eo 'clat \([un]sec\): min=[^,]*, max=[^,]*, avg= *[0-9.]+' "$f.txt" | head -1)"
done
# mean clat in µs of a fio log (fio prints nsec or usec)
clat_us() {
	awk '/ clat \(nsec\)/ { sub(/.*avg= */, ""); print $0 / 1000; exit }
		/ clat \(usec\)/ { sub(/.*avg= */, ""); print $0 + 0; exit }' "$1"
}
qd1_irq=$(clat_us qd1-irq.txt) qd1_hipri=$(clat_us qd1-hipri.txt)
bius_stop "$BIUS_PID" "$NAME"

step "kill -9 of the daemon under polled I/O"
bius_start --size 64M --queues 2 --poll-queues 1 --name "$NAME" ramdisk
fio --name=load --filename="/dev/$NAME" --direct=1 --ioengine=io_uring --hipri=1 \
	--iodepth=8 --rw=randrw --bs=4k --numjobs=2 --time_based --runtime=120 \
	--group_reporting --output=fio.txt &
fio_pid=$!
# (kill_daemon_under_fio waits until the I/O flows: no fixed sleep)
kill_daemon_under_fio "$fio_pid" '$1 + $5' I/Os 'err= *5|Input/output error'

step "recovery under polled I/O: file-backed, --recover-timeout 30, kill -9, biusctl recover"
truncate -s 128M "$IMG"
bius_start --recover-timeout 30 --queues 2 --poll-queues 1 --name "$NAME" file "$IMG"
fio --name=verify --filename="/dev/$NAME" --direct=1 --ioengine=io_uring --hipri=1 \
	--iodepth=8 --rw=randwrite --bs=4k --size=32M --numjobs=2 --offset_increment=64M \
	--verify=crc32c --do_verify=1 --verify_fatal=1 --group_reporting --output=rec.txt &
fio_pid=$!
p1=$(count polled 1)
wait_until 30 eval '[[ $(count polled 1) -gt $((p1 + 500)) ]]' || fail "no polled I/O flowing before the kill"
t=$(now)
kill -KILL "$BIUS_PID"
wait "$BIUS_PID" 2>/dev/null || true
[[ $(state_of "$NAME") == recovering ]] || fail "device is $(state_of "$NAME") after the kill, not recovering"
daemon_launch biusctl recover "$NAME" file "$IMG" || {
	sed 's/^/   biusctl: /' "$BIUS_ERR"
	fail "$BIUS_WHY"
}
wait_until "$RECOVER_LIMIT" eval '[[ $(state_of $NAME) == live ]]' \
	|| fail "device not live $RECOVER_LIMIT s after biusctl recover"
info "recovered $(elapsed "$t") s after the kill"
[[ $(biusctl info "$NAME" --json | jq .poll_queues) == 1 ]] || fail "the recovered device lost its poll queue"
rc=0
wait "$fio_pid" || rc=$?
grep -E 'err=|verify|error' rec.txt | sed 's/^/   fio: /' || true
[[ $rc -eq 0 ]] || fail "fio exited with status $rc across the recovery"
! grep -Eiq 'verify failed|bad magic|crc32c' rec.txt || fail "fio found corrupt blocks"
bius_stop "$BIUS_PID" "$NAME"

stuck=$(ps -eo stat,pid,comm | awk '$1 ~ /^D/')
[[ -z $stuck ]] || fail "processes stuck in D state: $stuck"
timeouts=$(test_klog | grep -E "bius: $NAME: request [0-9a-f]+ timed out" || true)
if [[ -n $timeouts ]]; then
	sed 's/^/   dmesg: /' <<<"$timeouts"
	fail "requests timed out: a completion was not polled"
fi
info "in all: $(count polled 1) requests ended by poll on queue 1, $(count complete 1) completed there"
echo "RESULT poll-queues: QD1 4K randread io_uring ${qd1_irq} us interrupt-style, ${qd1_hipri} us polled (mean clat); $(count polled 1) of $(count complete 1) completions on the poll queue ended by poll"
for ev in bius_complete bius_polled; do
	echo '!hist:keys=queue' >"$T/events/bius/$ev/trigger"
done
rmmod_bius
echo "poll-queues: OK"
