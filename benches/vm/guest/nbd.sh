# shellcheck shell=bash
# The nbd suite of the VM benchmark (sourced by bench.sh): the kernel's
# NBD client, nbd.ko with nbd-client (nbd, also a device of the classic
# suite), and biusctl create nbd (bius-nbd), each on its own nbdkit memory
# server; libaio 4 KiB random read and write at iodepth 1 and 32
# (AIO_JOBS).

# nbd_devices: the suite's devices (nbd also for the classic suite)
nbd_devices() {
	local sock nbdpid
	if wanted nbd && { suite classic || suite nbd; }; then
		if modprobe nbd nbds_max=1 max_part=0; then
			sock=/tmp/nbdkit.sock
			start_nbdkit "$sock" /tmp/nbdkit.log
			nbdpid=$NBDKIT_PID
			if nbd-client -unix "$sock" /dev/nbd0 -b 4096 >/tmp/nbd-client.log 2>&1 \
				&& wait_until 10 eval '[[ $(blockdev --getsize64 /dev/nbd0 2>/dev/null || echo 0) -gt 0 ]]'; then
				add_dev nbd /dev/nbd0 "$nbdpid"
				suite classic && CLASSIC+=(nbd)
				suite nbd && NBDDEV+=(nbd)
			else
				say "SKIP nbd: nbd-client: $(tr '\n' ' ' </tmp/nbd-client.log) nbdkit: $(tr '\n' ' ' </tmp/nbdkit.log)"
			fi
		else
			say "SKIP nbd: modprobe nbd failed"
		fi
	fi
	if [[ $BIUS_OK == 1 ]] && suite nbd && wanted bius-nbd; then
		sock=/tmp/nbdkit-bius.sock
		if start_nbdkit "$sock" /tmp/nbdkit-bius.log; then
			SERVER[bius-nbd]=$NBDKIT_PID
			start_bius bius-nbd nbd "unix:$sock" --queues "$QUEUES" && NBDDEV+=(bius-nbd)
		else
			say "SKIP bius-nbd: nbdkit: $(tr '\n' ' ' </tmp/nbdkit-bius.log)"
		fi
	fi
	return 0
}

# nbd_count: the runs of one repetition
nbd_count() {
	echo $((${#AIO_JOBS[@]} * ${#NBDDEV[@]}))
}

# nbd_runs REP: every job of AIO_JOBS on every device
nbd_runs() {
	aio_runs "$1" "${NBDDEV[@]}"
}
