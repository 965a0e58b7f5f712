# shellcheck shell=bash
# The zoned suite of the VM benchmark (sourced by bench.sh): one zoned
# geometry (SIZE_MB, zones of ZONE_MB, no conventional zones, no
# open/active limit) on zoned null_blk (configfs, null_blk-zoned), a zoned
# BIUS ramdisk (bius-zoned) and rublk's zoned RAM target (ublk-zoned; ublk
# zoned needs Linux >= 6.6: skipped before), the same scheduler on all
# three; psync, --zonemode=zbd, 4 jobs each on its quarter: 128 KiB
# sequential write (zseqwrite), then every zone finished and 4 KiB random
# read (zrandread).

# the same scheduler on all three (zone write plugging keeps zoned writes
# in order under any scheduler from 6.10 on; before, mq-deadline did)
ZSCHED=mq-deadline
kernel_at_least 6 10 && ZSCHED=none

# zoned_dev NAME: a zoned device made: its scheduler, into the suite
zoned_dev() {
	local disk=${DEV[$1]#/dev/}
	echo "$ZSCHED" >"/sys/block/$disk/queue/scheduler" \
		|| say "WARNING $1: cannot set scheduler $ZSCHED ($(cat "/sys/block/$disk/queue/scheduler"))"
	ZONEDDEV+=("$1")
}

# zoned_devices: the suite's devices
zoned_devices() {
	suite zoned || return 0
	local nbdev
	if ((SIZE_MB % (4 * ZONE_MB) != 0)); then
		say "SKIP zoned: size=$SIZE_MB MiB is not 4 whole quarters of zones of $ZONE_MB MiB"
		return 0
	fi
	if wanted null_blk-zoned; then
		if nbdev=$(nullb_configfs nullbzoned size="$SIZE_MB" memory_backed=1 submit_queues="$QUEUES" \
			poll_queues=0 hw_queue_depth=128 zoned=1 zone_size="$ZONE_MB" zone_nr_conv=0); then
			add_dev null_blk-zoned "$nbdev" && zoned_dev null_blk-zoned
		else
			say "SKIP null_blk-zoned: zoned null_blk by configfs failed"
		fi
	fi
	if [[ $BIUS_OK == 1 ]] && wanted bius-zoned; then
		start_bius bius-zoned ramdisk --size "${SIZE_MB}M" --queues "$QUEUES" --zoned \
			--zone-size "${ZONE_MB}M" && zoned_dev bius-zoned
	fi
	if ! wanted ublk-zoned || ! command -v rublk >/dev/null; then
		:
	elif ! kernel_at_least 6 6; then
		say "SKIP ublk-zoned: ublk's zoned devices need Linux 6.6, this is $(uname -r)"
		echo "zoned_ublk_skipped ublk zoned needs Linux >= 6.6" >>"$OUT/meta.txt"
	elif ublk_load; then
		start_rublk ublk-zoned zoned --queue "$QUEUES" --depth 128 --size "${SIZE_MB}MiB" \
			--zone-size "${ZONE_MB}MiB" --conv-zones 0 && zoned_dev ublk-zoned
	fi
}

# zoned_count: the runs of one repetition
zoned_count() {
	echo $((2 * ${#ZONEDDEV[@]}))
}

# zoned_runs REP: 128 KiB sequential writes (fio resets a full zone
# before it writes it again), then every zone finished, so that all of it
# is below the write pointer, and 4 KiB random reads
zoned_runs() {
	local rep=$1 d
	for d in "${ZONEDDEV[@]}"; do
		run_job "$d" zseqwrite "$rep" "${four[@]}" --zonemode=zbd --rw=write --bs=128k
	done
	for d in "${ZONEDDEV[@]}"; do
		blkzone finish "${DEV[$d]}" || say "ERROR blkzone finish of $d failed"
		run_job "$d" zrandread "$rep" "${four[@]}" --zonemode=zbd --rw=randread --bs=4k
	done
}
