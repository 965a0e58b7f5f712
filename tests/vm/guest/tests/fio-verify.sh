#!/bin/bash
# timeout: 300
# Data integrity through BIUS ramdisks with 2 queues: the fio crc32c verify
# workload (4 jobs, mixed random read/write, direct psync + libaio QD16 and
# buffered, block sizes up to 1 MiB), then a second direct verify-only pass
# of what reached the device; with 512-byte blocks, and with 4096-byte
# blocks and the queue threads busy-waiting for requests (--poll-us).
source /bius/lib.sh
require_bius

# verify_disk SIZE_MIB BLOCK_SIZE POLL_USECS
verify_disk() {
	local mib=$1 bs=$2 poll=$3 t out
	step "create a $mib MiB ramdisk with 2 queues, $bs-byte blocks, --poll-us $poll"
	bius_start --size "${mib}M" --queues 2 --block-size "$bs" --poll-us "$poll" \
		--name "fioverify$bs" ramdisk
	out=$(biusctl info "$BIUS_NAME") || fail "biusctl info $BIUS_NAME failed"
	grep -qx "poll_us: $poll" <<<"$out" \
		|| fail "biusctl info does not show poll_us $poll: $(tr '\n' ' ' <<<"$out")"
	[[ $(cat "/sys/block/$BIUS_NAME/queue/logical_block_size") == "$bs" ]] \
		|| fail "logical block size is not $bs"
	[[ $(blockdev --getsize64 "$BIUS_DEV") == $((mib << 20)) ]] || fail "size is not $mib MiB"
	[[ $(ls "/sys/block/$BIUS_NAME/mq" | wc -l) == 2 ]] \
		|| fail "expected 2 hardware queues in /sys/block/$BIUS_NAME/mq"

	step "fio: mixed random read/write, direct + buffered, $bs B..1 MiB, crc32c verify"
	t=$(now)
	DEV=$BIUS_DEV MINBS=$bs run_fio "fio-$bs-pass1.txt" /bius/fio/verify.fio
	info "pass 1: $(elapsed "$t") s"

	step "fio: verify again what reached the device (page cache dropped, direct reads)"
	blockdev --flushbufs "$BIUS_DEV"
	echo 3 >/proc/sys/vm/drop_caches
	t=$(now)
	DEV=$BIUS_DEV MINBS=$bs run_fio "fio-$bs-pass2.txt" --verify_only=1 --direct=1 /bius/fio/verify.fio
	info "pass 2: $(elapsed "$t") s"

	step "stop the daemon (SIGTERM)"
	bius_stop "$BIUS_PID" "$BIUS_NAME"
}

verify_disk "$(volume_mib 128)" 512 0
verify_disk "$(volume_mib 64)" 4096 200
echo "fio-verify: OK"
