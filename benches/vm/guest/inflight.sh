# shellcheck shell=bash
# The in-flight suite of the VM benchmark (sourced by bench.sh): one
# queue, a ramdisk whose reads take INF_LATENCY (--latency read=10ms,
# bius-q1-lat10ms) and a plain one (bius-q1-ram), libaio 4 KiB random
# read at iodepth 1 and 32: how many requests a queue keeps in flight; the
# kernel's own 10 ms device for reference: null_blk (configfs) irqmode=2
# completion_nsec=10ms, one queue (null_blk-lat10ms).  The devices are of
# INF_MB, 64 MiB at most.

# inflight_devices: the suite's devices
inflight_devices() {
	suite inflight || return 0
	local nbdev
	if [[ $BIUS_OK == 1 ]] && wanted bius-q1-lat10ms; then
		start_bius bius-q1-lat10ms ramdisk --size "${INF_MB}M" --queues 1 --depth 64 \
			--latency "read=$INF_LATENCY" && INFLIGHT+=(bius-q1-lat10ms)
	fi
	if [[ $BIUS_OK == 1 ]] && wanted bius-q1-ram; then
		start_bius bius-q1-ram ramdisk --size "${INF_MB}M" --queues 1 --depth 64 \
			&& INFLIGHT+=(bius-q1-ram)
	fi
	if wanted null_blk-lat10ms; then
		# null_blk completing each request from a timer, INF_LATENCY after
		# it arrives: what the guest's timers and wake-ups cost by themselves
		if nbdev=$(nullb_configfs nullblat size="$INF_MB" memory_backed=0 submit_queues=1 \
			hw_queue_depth=64 irqmode=2 completion_nsec="${INF_LATENCY%ms}000000"); then
			add_dev null_blk-lat10ms "$nbdev" && INFLIGHT+=(null_blk-lat10ms) \
				&& NOPREFILL[null_blk-lat10ms]=1
		else
			say "SKIP null_blk-lat10ms: null_blk by configfs failed"
		fi
	fi
}

# inflight_count: the runs of one repetition
inflight_count() {
	echo $((2 * ${#INFLIGHT[@]}))
}

# inflight_runs REP: random reads at QD1 and QD32 on one queue; the
# devices whose reads take 10 ms run INF_RUNTIME
inflight_runs() {
	local rep=$1 job d rt
	for job in randread-qd1 randread-qd32; do
		for d in "${INFLIGHT[@]}"; do
			rt=$RUNTIME
			[[ $d == *-lat10ms ]] && rt=$INF_RUNTIME
			JOB_RUNTIME=$rt run_aio "$d" "$job" "$rep" "$((INF_MB << 20))"
		done
	done
}
