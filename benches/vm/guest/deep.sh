# shellcheck shell=bash
# The deep suite of the VM benchmark (sourced by bench.sh): io_uring at
# depth, 2 jobs each on its half of the device, 4 KiB random read and
# write at QD 32 and 128, 128 KiB sequential read and write at QD 32, and
# QD1 4 KiB random read with io_uring (and with psync, the classic suite's
# lat, when classic does not run), on the floor (null_blk-nodata, made
# here) and on the devices of the classic suite (classic.sh) named in
# DEEP_SET.

DEEP_SET="brd bius-ram-default bius-null bius-zero ublk-ram ublk-null ublk-null-nodata"
# (and A/B variants of bius-null and ublk-null-nodata, made only when
# only= names them)
DEEP_SET+=" bius-null-poll0 bius-null-inherit ublk-null-batch ublk-null-nodata-batch"

DEEP_JOBS=(deep-randread-qd32 deep-randread-qd128 deep-randwrite-qd32 deep-randwrite-qd128
	deep-read128k-qd32 deep-write128k-qd32 deep-lat-qd1)
H=$((SIZE / 2))
two=(--numjobs=2 --size="$H" --offset_increment="$H")

# deep_devices: the suite's own devices, after classic_devices
deep_devices() {
	suite deep || return 0
	# the floor, the kernel alone: null_blk keeping no data (its default,
	# as the suite's yardstick measures; memory_backed=1 copies each
	# request under one lock for the whole disk), the queues and depth of
	# the BIUS and ublk devices (after the classic null_blk: its module's
	# nr_devices=1 is what makes /dev/nullb0); first in the suite
	local nbdev
	if wanted null_blk-nodata; then
		if nbdev=$(nullb_configfs nullbnodata size="$SIZE_MB" memory_backed=0 submit_queues="$QUEUES" \
			hw_queue_depth=128); then
			add_dev null_blk-nodata "$nbdev" && DEEP=(null_blk-nodata "${DEEP[@]}") \
				&& NOPREFILL[null_blk-nodata]=1
		else
			say "SKIP null_blk-nodata: null_blk by configfs failed"
		fi
	fi
	# bius-ram-default copying every request's data (--transfer copy)
	# instead of mapping those of 128 KiB and more, to weigh the mapping at
	# depth (only when named in only=)
	if [[ $BIUS_OK == 1 ]] && named bius-ram-default-copy; then
		NOPOLL=1 start_bius bius-ram-default-copy ramdisk --size "${SIZE_MB}M" --transfer copy \
			&& DEEP+=(bius-ram-default-copy)
	fi
}

# deep_lat: whether the suite runs the psync QD1 job too (the classic
# suite does not run)
deep_lat() { ! suite classic; }

# deep_count: the runs of one repetition
deep_count() {
	local n=${#DEEP_JOBS[@]}
	deep_lat && n=$((n + 1))
	echo $((n * ${#DEEP[@]}))
}

# run_deep DEV JOB REP: one of DEEP_JOBS
run_deep() {
	local job=${2#deep-} rw bs=4k qd
	if [[ $job == lat-qd1 ]]; then
		ENGINE=io_uring run_job "$1" "$2" "$3" "${lat[@]}" --iodepth=1
		return
	fi
	rw=${job%-qd*} qd=${job##*-qd}
	case $rw in
	read128k | write128k) rw=${rw%128k} bs=128k ;;
	esac
	ENGINE=io_uring run_job "$1" "$2" "$3" "${two[@]}" --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--lat_percentiles=1
}

# deep_runs REP: every job of DEEP_JOBS on every device, then psync QD1
deep_runs() {
	local rep=$1 job d
	for job in "${DEEP_JOBS[@]}"; do
		for d in "${DEEP[@]}"; do
			run_deep "$d" "$job" "$rep"
		done
	done
	if deep_lat; then
		for d in "${DEEP[@]}"; do
			run_job "$d" lat "$rep" "${lat[@]}"
		done
	fi
}
