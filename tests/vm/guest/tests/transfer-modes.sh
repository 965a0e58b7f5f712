#!/bin/bash
# timeout: 900
# Every transfer mode (copy, map, selective with the default and a 16 KiB
# threshold): fio crc32c verify from 512 B to 4 MiB requests (max-io 4M),
# aligned and misaligned buffers, buffered I/O and several jobs, a second
# verify-only pass after dropping the page cache; bius_iovec: O_DIRECT
# pwritev/preadv whose 2..8 buffer pieces start at different 512-byte
# offsets in their pages (a segment list in the map modes: biusctl info
# must count segmented requests), read back into differently cut pieces
# and by pread, every byte checked, then up to 24 pieces (more than a
# segment list may have); ext4 mkfs + files + fsck on each mode.  The null
# backend (BIUS_FEATURE_NO_DATA) moves no data in copy and map mode: a read
# leaves the caller's buffer as it was (bius_untouched), nothing is mapped,
# fio runs.  (Copy against map speed is the bench's: scripts/bench.sh.)
source /bius/lib.sh
require_bius
require_artifact bius_iovec
require_artifact bius_untouched

# start_mode MODE NAME BACKEND...: a 2-queue device with 4 MiB requests
start_mode() {
	local mode=$1 name=$2
	shift 2
	bius_start --size "$(volume_mib 96)M" --queues 2 --max-io 4M --transfer "$mode" --name "$name" "$@"
	if [[ -e /bius/MOCK ]]; then
		info "MOCK: no transfer modes, no window to check"
		return 0
	fi
	# the block layer caps requests at 1280 KiB unless told otherwise
	echo 4096 >"/sys/block/$BIUS_NAME/queue/max_sectors_kb" \
		|| fail "cannot raise max_sectors_kb to 4096"
	local out
	out=$(biusctl info "$name") || fail "biusctl info $name failed"
	grep -E '^ *(transfer_mode|window_size)' <<<"$out" | sed 's/^ */   info: /'
	case $mode in
	copy) grep -Eq '^ *window_size: +0$' <<<"$out" || fail "copy mode has a window" ;;
	*) grep -Eq '^ *window_size: +[1-9]' <<<"$out" || fail "$mode mode has no window" ;;
	esac
	local want=$mode
	[[ $mode == selective ]] && want=selective=128K
	grep -Eq "^ *transfer_mode: +$want\$" <<<"$out" || fail "info does not report transfer_mode $want"
}

# iovec ARGS...: bius_iovec ARGS on the device, its output indented
iovec() {
	bius_iovec "$@" "$BIUS_DEV" 2>&1 | sed 's/^/   /' || fail "bius_iovec $* $BIUS_DEV failed"
}

# check_counters MODE NAME: the map modes sent segment lists, copy nothing mapped
check_counters() {
	local mode=$1 name=$2 out mapped segmented
	[[ -e /bius/MOCK ]] && return 0
	out=$(biusctl info "$name") || fail "biusctl info $name failed"
	mapped=$(sed -n 's/^ *mapped_requests: *//p' <<<"$out")
	segmented=$(sed -n 's/^ *segmented_requests: *//p' <<<"$out")
	info "mapped requests: $mapped, of them with a segment list: $segmented"
	case $mode in
	copy) [[ $mapped == 0 ]] || fail "copy mode mapped $mapped requests" ;;
	*) ((segmented > 0)) || fail "$mode: no request came as a segment list ($mapped mapped)" ;;
	esac
}

verify_mode() {
	local mode=$1 name=$2 t
	step "[$mode] fio verify: 512 B..4 MiB, aligned/misaligned direct, buffered, libaio"
	start_mode "$mode" "$name" ramdisk
	t=$(now)
	DEV=$BIUS_DEV MINBS=512 run_fio "fio-$name-1.txt" /bius/fio/transfer.fio
	info "pass 1: $(elapsed "$t") s"
	blockdev --flushbufs "$BIUS_DEV"
	echo 3 >/proc/sys/vm/drop_caches
	t=$(now)
	DEV=$BIUS_DEV MINBS=512 run_fio "fio-$name-2.txt" --verify_only=1 --direct=1 /bius/fio/transfer.fio
	info "pass 2 (verify only, direct): $(elapsed "$t") s"

	# (random shapes and data from fixed seeds: the same requests every run)
	step "[$mode] bius_iovec: O_DIRECT pwritev/preadv of pieces at different page offsets"
	t=$(now)
	iovec --rounds 200 --max-io 4M --seed 1
	iovec --rounds 30 --max-io 4M --max-pieces 24 --seed 2
	info "bius_iovec: $(elapsed "$t") s"
	check_counters "$mode" "$name"

	step "[$mode] ext4: mkfs, files, fsck, remount, compare"
	mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$BIUS_DEV" || fail "mkfs.ext4 failed"
	mkdir -p /mnt/t
	mount -t ext4 "$BIUS_DEV" /mnt/t || fail "mount failed"
	cp -a /tmp/tm-src/. /mnt/t/
	sync
	umount /mnt/t || fail "umount failed"
	e2fsck -fn "$BIUS_DEV" >e2fsck.txt 2>&1 || { cat e2fsck.txt; fail "e2fsck found problems"; }
	echo 3 >/proc/sys/vm/drop_caches
	mount -t ext4 "$BIUS_DEV" /mnt/t || fail "remount failed"
	check_tree /mnt/t /tmp/tm.sha256 "after remount"
	umount /mnt/t || fail "umount failed"
	bius_stop "$BIUS_PID" "$BIUS_NAME"
}

step "source files for ext4 (0 B .. 9 MiB)"
make_tree /tmp/tm-src /tmp/tm.sha256 50 331 0 1 511 4097 65536 1048577 5242880 9437184

verify_mode copy tm-copy
verify_mode map tm-map
verify_mode selective tm-sel
verify_mode selective=16K tm-sel16k

# no_data MODE: the null backend moves no data in MODE
no_data() {
	local mode=$1 out
	step "[$mode] null backend: no data moves"
	start_mode "$mode" "tm-null" null
	[[ -e /bius/MOCK ]] && { bius_stop "$BIUS_PID" "$BIUS_NAME"; return 0; }
	out=$(biusctl info tm-null) || fail "biusctl info tm-null failed"
	grep -Eq '^ *features:.*no_data' <<<"$out" || fail "info does not report no_data"
	out=$(bius_untouched "$BIUS_DEV") || { echo "$out"; fail "a read on the null device changed the buffer"; }
	sed 's/^/   /' <<<"$out"
	DEV=$BIUS_DEV run_fio "fio-null-$mode.txt" --name=n --filename="$BIUS_DEV" --direct=1 \
		--ioengine=libaio --iodepth=8 --rw=randrw --bsrange=4k-1m --size=64M --io_size=128M
	out=$(biusctl info tm-null) || fail "biusctl info tm-null failed"
	grep -Eq '^ *mapped_requests: +0$' <<<"$out" || fail "the null device mapped requests"
	bius_stop "$BIUS_PID" "$BIUS_NAME"
}

no_data copy
no_data map

echo "transfer-modes: OK"
