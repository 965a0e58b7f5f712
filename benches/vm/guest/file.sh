# shellcheck shell=bash
# The file suite of the VM benchmark (sourced by bench.sh): one prefilled
# image on ext4 on brd (/dev/ram1) served by the loop driver with direct
# I/O (loop-dio) and by biusctl create file --direct --engine
# uring|threads|sync (bius-file-<engine>); libaio 4 KiB random read and
# write at iodepth 1 and 32 (AIO_JOBS).

IMG=/mnt/bench-ext4/disk.img

# file_image: the image, on a new ext4 on /dev/ram1, prefilled
file_image() {
	local t0=$EPOCHREALTIME
	if mkfs.ext4 -q -F -b 4096 -i 1048576 -E lazy_itable_init=0,lazy_journal_init=0 /dev/ram1 \
		&& mkdir -p /mnt/bench-ext4 && mount -t ext4 -o noatime /dev/ram1 /mnt/bench-ext4 \
		&& fio --name=prefill --filename="$IMG" --ioengine=psync --direct=1 --rw=write --bs=1m \
			--size="$SIZE" --output=/dev/null >/dev/null 2>&1; then
		say "file suite: $IMG on ext4 on /dev/ram1, $(stat -c %s "$IMG") bytes, prefilled in $(elapsed "$t0") s"
	else
		say "SKIP file suite: ext4 on /dev/ram1 or its image failed"
		return 1
	fi
}

# file_devices: the suite's devices, all on the one image
file_devices() {
	file_wanted && brd_load && file_image || return 0
	local loopdev dio e
	if wanted loop-dio; then
		if modprobe loop && loopdev=$(losetup --direct-io=on --show -f "$IMG" 2>/tmp/losetup.err); then
			dio=$(cat "/sys/block/${loopdev#/dev/}/loop/dio" 2>/dev/null)
			[[ $dio == 1 ]] || say "WARNING loop-dio: $loopdev has dio=$dio (buffered)"
			add_dev loop-dio "$loopdev" && FILEDEV+=(loop-dio) && NOPREFILL[loop-dio]=1
		else
			say "SKIP loop-dio: $(tr '\n' ' ' </tmp/losetup.err)"
		fi
	fi
	[[ $BIUS_OK == 1 ]] || return 0
	for e in uring threads sync; do
		wanted "bius-file-$e" || continue
		start_bius "bius-file-$e" file --direct --engine "$e" "$IMG" --queues "$QUEUES" \
			&& FILEDEV+=("bius-file-$e") && NOPREFILL[bius-file-$e]=1
	done
}

# file_count: the runs of one repetition
file_count() {
	echo $((${#AIO_JOBS[@]} * ${#FILEDEV[@]}))
}

# file_runs REP: every job of AIO_JOBS on every device
file_runs() {
	aio_runs "$1" "${FILEDEV[@]}"
}
