# shellcheck shell=bash
# The classic suite of the VM benchmark (sourced by bench.sh): the same
# psync jobs, one device after the other, against brd, null_blk, BIUS
# ramdisks in every transfer mode (and the A/B variants only= names),
# bius-null, bius-zero and ublk; QD1 latency, also on one vCPU; polled
# QD1 reads on the devices with a poll queue; the block-size sweep.  Its
# devices are also those of the deep suite by the names of DEEP_SET
# (deep.sh), which is why classic_devices runs for either suite.

# classic_bius: the BIUS devices of the classic suite (and the deep one's
# of DEEP_SET)
classic_bius() {
	local m args
	for m in $MODES; do
		if suite classic && wanted "bius-ram-$m"; then
			args=(ramdisk --size "${SIZE_MB}M" --queues "$QUEUES")
			[[ $transfer_flag == 1 ]] && args+=(--transfer "$m")
			start_bius "bius-ram-$m" "${args[@]}" && CLASSIC+=("bius-ram-$m")
		fi
		# the same with the baseline biusctl, right after it in the tables
		if suite classic && [[ " $BASE_MODES " == *" $m "* ]] && wanted "bius-ram-$m@base"; then
			args=(ramdisk --size "${SIZE_MB}M" --queues "$QUEUES")
			[[ $base_transfer == 1 ]] && args+=(--transfer "$m")
			NOPOLL=$((1 - base_poll)) BIUSCTL=$BASE start_bius "bius-ram-$m@base" "${args[@]}" \
				&& CLASSIC+=("bius-ram-$m@base")
		fi
	done
	# what a user gets without flags
	if want_classic bius-ram-default; then
		NOPOLL=1 start_bius bius-ram-default ramdisk --size "${SIZE_MB}M" \
			&& into_suites bius-ram-default
	fi
	# the same completing with write() and fetching with read() instead of
	# BIUS_IOC_COMPLETE_FETCH, to weigh that call (only when named in only=)
	if suite classic && named bius-ram-default-split; then
		EXTRA_ENV=BIUS_NO_COMPLETE_FETCH=1 NOPOLL=1 start_bius bius-ram-default-split ramdisk \
			--size "${SIZE_MB}M" && CLASSIC+=(bius-ram-default-split)
	fi
	# the same with one more queue, a poll queue: polled I/O (io_uring
	# --hipri) goes there, the rest to as many queues as bius-ram-default's
	if suite classic && wanted bius-ram-poll && [[ $(biusctl create --help 2>&1) == *--poll-queues* ]]; then
		NOPOLL=1 start_bius bius-ram-poll ramdisk --size "${SIZE_MB}M" --poll-queues 1 \
			&& POLLDEV+=(bius-ram-poll)
	fi
	# the same with queue N's thread pinned to vCPU N, the one blk-mq maps
	# to hardware queue N (only when named in only=)
	if suite classic && named bius-ram-pinned; then
		NOPOLL=1 start_bius bius-ram-pinned ramdisk --size "${SIZE_MB}M" \
			&& pin_queues "$BIUS_PID" && CLASSIC+=(bius-ram-pinned)
	fi
	if want_classic bius-null; then
		start_bius bius-null null --size "${SIZE_MB}M" --queues "$QUEUES" && into_suites bius-null
	fi
	# no storage, but the data moves (selective transfer: the defaults)
	if want_classic bius-zero; then
		start_bius bius-zero zero --size "${SIZE_MB}M" --queues "$QUEUES" && into_suites bius-zero
	fi
	# bius-null without the busy-wait of its read() (--poll-us 0), to
	# weigh that spin's CPU against its latency (only when named in only=)
	if named bius-null-poll0; then
		NOPOLL=1 start_bius bius-null-poll0 null --size "${SIZE_MB}M" --queues "$QUEUES" \
			--poll-us 0 && into_suites bius-null-poll0
	fi
	# bius-null with its queue threads under the daemon's own policy
	# (--sched inherit: SCHED_OTHER, whose woken thread preempts fio at
	# once) instead of SCHED_BATCH, to weigh the scheduler's part in the
	# daemon's wake-ups (only when named in only=)
	if named bius-null-inherit; then
		start_bius bius-null-inherit null --size "${SIZE_MB}M" --queues "$QUEUES" \
			--sched inherit && into_suites bius-null-inherit
	fi
	# the cost of the statistics: the fastest backend without them
	if suite classic && wanted bius-null-nostats; then
		start_bius bius-null-nostats null --size "${SIZE_MB}M" --queues "$QUEUES" --no-stats \
			&& CLASSIC+=(bius-null-nostats)
	fi
}

# classic_ublk: ublk (scripts/bench-ublk.sh built it; the bench's ublk=0
# leaves it out): the ublk RAM server (benches/tools/ublk-ram, libublk) and
# rublk's null target, with the queues, depth and memcpy tunables of the
# BIUS daemons
classic_ublk() {
	{ want_classic ublk-ram || want_classic ublk-null || want_classic ublk-null-nodata \
		|| named ublk-null-batch || named ublk-null-nodata-batch; } && ublk_load || return 0
	# shellcheck disable=SC2034 # read by lib.sh's daemon_launch
	BIUS_ENV=(${TUNABLES:+"GLIBC_TUNABLES=$TUNABLES"})
	if want_classic ublk-ram; then
		if daemon_launch ublk-ram --size-mib "$SIZE_MB" --queues "$QUEUES" --depth 128; then
			add_dev ublk-ram "$BIUS_DEV" "$BIUS_PID" && into_suites ublk-ram
		else
			say "SKIP ublk-ram: $BIUS_WHY: $(tail -n 3 "$BIUS_ERR" | tr '\n' ' ')"
		fi
	fi
	if want_classic ublk-null; then
		start_rublk ublk-null null --queue "$QUEUES" --depth 128 && into_suites ublk-null
	fi
	# the same with user copy: the kernel copies nothing to the server (which
	# ignores the data), bius-null's peer; ublk_drv without USER_COPY (6.1's)
	# would drop the flag and copy, so only where the driver offers it
	if want_classic ublk-null-nodata; then
		if has_user_copy; then
			start_rublk ublk-null-nodata null --queue "$QUEUES" --depth 128 --user-copy \
				&& into_suites ublk-null-nodata
		else
			say "SKIP ublk-null-nodata: this ublk_drv has no USER_COPY"
		fi
	fi
	# both with every thread of rublk under SCHED_BATCH, as BIUS's queue
	# threads are by default: is the scheduler all of the difference?
	# (only when named in only=)
	if named ublk-null-batch; then
		start_rublk ublk-null-batch null --queue "$QUEUES" --depth 128 \
			&& batch_daemon ublk-null-batch && into_suites ublk-null-batch
	fi
	if named ublk-null-nodata-batch && has_user_copy; then
		start_rublk ublk-null-nodata-batch null --queue "$QUEUES" --depth 128 --user-copy \
			&& batch_daemon ublk-null-nodata-batch && into_suites ublk-null-nodata-batch
	fi
}

# classic_devices: the classic suite's devices (nbd.sh adds the kernel's
# NBD client to them)
classic_devices() {
	{ suite classic || suite deep; } || return 0
	if want_classic brd && brd_load; then
		add_dev brd /dev/ram0 && { ! suite classic || SWEEPDEV+=(brd); } && into_suites brd
	fi
	if want_classic null_blk; then
		# gb is whole GiB; the jobs use the first SIZE bytes only; one poll
		# queue (6.1's default, said here) for the polled QD1 jobs
		modprobe null_blk nr_devices=1 gb=$(((SIZE_MB + 1023) / 1024)) memory_backed=1 poll_queues=1 \
			&& wait_until 5 test -b /dev/nullb0 && add_dev null_blk /dev/nullb0 && into_suites null_blk \
			&& { ! suite classic || POLLDEV+=(null_blk); }
	fi
	[[ $BIUS_OK == 1 ]] && classic_bius
	classic_ublk
}

# classic_count: the runs of one repetition
classic_count() {
	echo $(((${#JOB_ORDER[@]} + 2) * ${#CLASSIC[@]} + 2 * ${#POLLDEV[@]} \
		+ $(wc -w <<<"$SWEEP") * ${#SWEEPDEV[@]}))
}

# classic_runs REP: psync, 4 jobs, then QD1 latency (also on one vCPU),
# polled QD1, then the block-size sweep
classic_runs() {
	local rep=$1 job d bs
	for job in "${JOB_ORDER[@]}"; do
		for d in "${CLASSIC[@]}"; do
			# shellcheck disable=SC2086
			run_job "$d" "$job" "$rep" "${four[@]}" ${JOBS[$job]}
		done
	done
	for d in "${CLASSIC[@]}"; do
		run_job "$d" lat "$rep" "${lat[@]}"
	done
	# the same on one vCPU (fio and the daemon's threads on CPU 0): no
	# cross-CPU wake-up, which under TCG means no IPI to an idle vCPU
	for d in "${CLASSIC[@]}"; do
		[[ -n ${PID[$d]:-} ]] && taskset -ap 1 "${PID[$d]}" >/dev/null
		run_job "$d" lat1cpu "$rep" "${lat[@]}" --cpus_allowed=0
		[[ -n ${PID[$d]:-} ]] && taskset -ap "$(printf %x $(((1 << $(nproc)) - 1)))" "${PID[$d]}" >/dev/null
		[[ $d == bius-ram-pinned ]] && pin_queues "${PID[$d]}"
	done
	# polled I/O: QD1 random read with io_uring, interrupt-style, then
	# polled (IOPOLL: fio spins for each completion), on the same device
	for d in "${POLLDEV[@]}"; do
		ENGINE=io_uring run_job "$d" laturing "$rep" "${lat[@]}" --iodepth=1
		ENGINE=io_uring run_job "$d" lathipri "$rep" "${lat[@]}" --iodepth=1 --hipri=1
	done
	for bs in $SWEEP; do
		for d in "${SWEEPDEV[@]}"; do
			run_job "$d" "sweep-$bs" "$rep" "${four[@]}" --rw=read --bs="$bs"
		done
	done
}
