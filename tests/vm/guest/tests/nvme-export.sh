#!/bin/bash
# timeout: 900
# biusctl export nvme: BIUS devices as namespaces of the kernel's NVMe
# target (nvmet), connected back to the guest over each transport the
# kernel has (nvme-loop: 6.12 and the debug kernels; NVMe/TCP on
# 127.0.0.1: 6.1 and 6.12, on a 6.1 debug kernel only if asked, see below).
# (a) per transport, a conventional ramdisk: data written through
# /dev/nvmeXnY read back on the BIUS disk and the other way round; info
# (and --json) shows the export; a second export is refused (EEXIST);
# unexport leaves nothing (configfs empty, no controller, no /dev node),
# a second one is refused (ENOENT).  (b) a --model zns-ssd device (4 KiB
# blocks, no conventional zone) is a ZNS namespace: nvme zns
# report-zones gives its zones (capacity below the size), blkzone sees
# the same zones through NVMe as on BIUS; zone-append lands at the write
# pointer and reads back on BIUS; reset-zone, finish-zone; a write off
# the write pointer fails with EIO through /dev/nvmeXnY as on the BIUS
# disk, and an NVMe passthrough write there fails too; after a report,
# a write at the write pointer through NVMe fails with EIO on 6.10-6.12
# with native multipath (the kernel's, see below), may land from 6.13
# (it does on 7.2) and lands otherwise, the zone's write pointer as it
# says; fio io_uring_cmd
# (zonemode=zbd, verify) on /dev/ngXnY.  On the second transport, the
# report and an append only.  (c) a zoned device with a conventional
# zone is refused (EINVAL), nothing made.  (d) 6.10+: a disk whose zone
# appends the kernel emulates is exported and takes an append.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius

NVMET=/sys/kernel/config/nvmet
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config

step "the transports of this kernel"
transports=()
modprobe -n -q nvme-loop && transports+=(loop)
modprobe -n -q nvmet-tcp && modprobe -n -q nvme-tcp && transports+=(tcp)
# A lockdep kernel reports nvmet-tcp's own circular dependency at the first
# tcp controller's teardown when its nvmet_tcp_install_queue() still
# flushes nvmet-wq from a work item (upstream "nvmet-tcp: avoid circular
# locking dependency on install_queue()"; 6.1.192 has the flush, 6.12 not).
# No BIUS frame is in it, but lockdep turns itself off after a first
# report, which would leave the rest of the boot unchecked.  There, with
# nvme-loop to export through, tcp is left to the production kernel's run;
# the kernel parameter biusvm.nvme_tcp=1 keeps it (the reproducer).
if [[ -e /proc/lockdep && ${#transports[@]} -eq 2 ]] && ! kernel_at_least 6 12 \
	&& ! grep -qw 'biusvm\.nvme_tcp=1' /proc/cmdline; then
	transports=(loop)
	info "lockdep kernel with nvmet-tcp's install_queue flush: tcp left out (biusvm.nvme_tcp=1 keeps it)"
fi
info "kernel $(uname -r): ${transports[*]:-none}"
[[ ${#transports[@]} -gt 0 ]] || fail "no NVMe target transport in the VM image (nvme-loop, or nvmet-tcp and nvme-tcp)"

# on the way out, whatever happened: no export outlives the test
exported=()
cleanup() {
	local d
	for d in "${exported[@]}"; do biusctl unexport nvme "$d" 2>/dev/null || true; done
}
trap cleanup EXIT

# export_nvme ARGS...: biusctl export nvme ARGS (the device last); sets
# NVME_BLK and NVME_CHR from its two lines
export_nvme() {
	local out lines
	info "biusctl export nvme $*"
	out=$(timeout $((90 * SLOW)) biusctl export nvme "$@" 2>export.err) || {
		sed 's/^/   biusctl: /' export.err
		test_klog | grep -i nvme | tail -n 20 | sed 's/^/   dmesg: /'
		fail "biusctl export nvme $* failed"
	}
	exported+=("${!#}")
	mapfile -t lines <<<"$out"
	NVME_BLK=${lines[0]:-} NVME_CHR=${lines[1]:-}
	[[ ${#lines[@]} -eq 2 ]] || fail "export printed '$out', expected two lines /dev/nvmeXnY and /dev/ngXnY"
	[[ -b $NVME_BLK && $NVME_BLK == /dev/nvme*n* ]] || fail "$NVME_BLK is not an NVMe block device"
	[[ -c $NVME_CHR && $NVME_CHR == /dev/ng*n* ]] || fail "$NVME_CHR is not an NVMe character device"
	info "namespace $NVME_BLK, $NVME_CHR ($(blockdev --getsize64 "$NVME_BLK") bytes, $(cat /sys/block/"${NVME_BLK#/dev/}"/queue/zoned))"
}

# nothing_left: no subsystem, port or controller of an export, no node
nothing_left() {
	local left
	left=$(find "$NVMET/subsystems" "$NVMET/ports" -mindepth 1 -maxdepth 1 2>/dev/null || true)
	[[ -z $left ]] || fail "configfs still holds: $left"
	left=$(grep -l '^nqn.2025-01.bius:' /sys/class/nvme/nvme*/subsysnqn 2>/dev/null || true)
	[[ -z $left ]] || fail "controllers still connected: $left"
	wait_until 5 test ! -e "$NVME_BLK" || fail "$NVME_BLK still exists"
	[[ ! -e $NVME_CHR ]] || fail "$NVME_CHR still exists"
}

# unexport_nvme DEVICE: biusctl unexport nvme, then nothing_left
unexport_nvme() {
	timeout $((60 * SLOW)) biusctl unexport nvme "$1" || fail "biusctl unexport nvme $1 failed"
	exported=("${exported[@]/$1/}")
	nothing_left
	info "unexported $1: configfs empty, no controller, $NVME_BLK and $NVME_CHR gone"
}

# refused ERRNO WHAT ARGS...: biusctl ARGS exits 1 with one line naming
# WHAT and ending with (ERRNO)
refused() {
	local errno=$1 what=$2 rc=0 err
	shift 2
	err=$(timeout $((60 * SLOW)) biusctl "$@" 2>&1 >/dev/null) || rc=$?
	info "biusctl $* -> $rc: $err"
	[[ $rc -eq 1 ]] || fail "biusctl $*: exit status $rc, expected 1"
	[[ $(wc -l <<<"$err") -eq 1 ]] || fail "biusctl $*: not one line: $err"
	[[ $err == *"$what"*"($errno)" ]] || fail "biusctl $*: expected '$what' and ($errno): $err"
}

head -c $((4 << 20)) /dev/urandom >/tmp/pattern

for t in "${transports[@]}"; do
	step "(a) $t: a conventional ramdisk as an NVMe namespace"
	bius_start --size 64M --queues 2 --name nconv ramdisk
	export_nvme --transport "$t" nconv
	dd if=/tmp/pattern of="$NVME_BLK" bs=1M count=2 oflag=direct status=none || fail "writing $NVME_BLK failed"
	cmp <(dd if="$BIUS_DEV" bs=1M count=2 iflag=direct status=none) <(head -c 2M /tmp/pattern) \
		|| fail "what was written through $NVME_BLK does not read back on $BIUS_DEV"
	dd if=/tmp/pattern of="$BIUS_DEV" bs=1M count=2 seek=8 oflag=direct status=none || fail "writing $BIUS_DEV failed"
	cmp <(dd if="$NVME_BLK" bs=1M count=2 skip=8 iflag=direct status=none) <(head -c 2M /tmp/pattern) \
		|| fail "what was written on $BIUS_DEV does not read back through $NVME_BLK"
	info "2 MiB each way read back"
	line=$(biusctl info nconv | grep '^nvme_export: ') || fail "biusctl info shows no nvme_export"
	info "info: $line"
	[[ $line == "nvme_export: nqn.2025-01.bius:nconv over $t"*": $NVME_BLK $NVME_CHR" ]] \
		|| fail "biusctl info shows no export over $t to $NVME_BLK"
	[[ $(biusctl info --json nconv | jq -r '.nvme[0] | "\(.transport) \(.block) \(.char)"') == "$t $NVME_BLK $NVME_CHR" ]] \
		|| fail "info --json: $(biusctl info --json nconv | jq -c .nvme)"
	refused EEXIST "exported already" export nvme --transport "$t" nconv
	unexport_nvme nconv
	refused ENOENT "is not exported" unexport nvme nconv
	bius_stop "$BIUS_PID" "$BIUS_NAME"
done

# ZNS on the first transport in full, on the others in brief
ZS=$((64 << 8))		# zns-ssd's 64 MiB zone in 4 KiB blocks
# nvme zns report-zones's FIELD (WP, Cap, State) of the zone at LBA
zfield() { nvme zns report-zones "$NVME_BLK" -s "$2" -d 1 | awk -v f="$1:" '{for (i = 1; i < NF; i++) if ($i == f) print $(i + 1)}'; }
# append LBA BYTES: nvme zns zone-append of BYTES of the pattern to the
# zone at LBA; prints the LBA (hex) where they landed
append() {
	head -c "$2" /tmp/pattern >append.bin
	nvme zns zone-append "$NVME_BLK" -s "$1" -z "$2" -d append.bin | sed -n 's/^Success appended data to LBA \([0-9a-f]*\)$/\1/p'
}
# ewrite DEV SECTOR: a 4 KiB direct write at SECTOR of DEV; "ok" or the error
ewrite() {
	local err
	err=$(dd if=/tmp/pattern of="$1" bs=4096 count=1 seek=$(($2 * 512)) oflag=direct,seek_bytes status=none 2>&1) && { echo ok; return; }
	case $err in
	*"Input/output error"*) echo EIO ;;
	*) echo "other: $err" ;;
	esac
}

for t in "${transports[@]}"; do
	step "(b) $t: a zns-ssd model as a ZNS namespace"
	bius_start --zoned --model zns-ssd --size 1G --block-size 4096 --queues 2 --name nzns ramdisk
	export_nvme --transport "$t" nzns
	[[ $(cat /sys/block/"${NVME_BLK#/dev/}"/queue/zoned) == host-managed ]] || fail "$NVME_BLK is not zoned"
	nvme zns id-ns "$NVME_BLK" | sed 's/^/   id-ns: /' | head -n 6
	report=$(nvme zns report-zones "$NVME_BLK") || fail "nvme zns report-zones failed"
	head -n 4 <<<"$report" | sed 's/^/   report: /'
	[[ $(sed -n 's/^nr_zones: //p' <<<"$report") -eq 16 ]] || fail "report-zones: not 16 zones"
	[[ $(zfield Cap 0) == 0x2180 ]] || fail "zone 0's capacity is $(zfield Cap 0), expected 0x2180 (33.5 MiB)"
	diff <(zreport "$BIUS_DEV") <(zreport "$NVME_BLK") || fail "blkzone reports differ between $BIUS_DEV and $NVME_BLK"
	info "16 zones of $ZS blocks, capacity 0x2180, the same on both disks"

	a=$(append 0 8192) b=$(append 0 4096)
	info "appends landed at LBA $a and $b"
	[[ $a == 0 && $b == 2 ]] || fail "appends landed at '$a' and '$b', expected 0 and 2"
	[[ $(zfield WP 0) == 0x3 ]] || fail "zone 0's write pointer is $(zfield WP 0), expected 0x3"
	cmp <(dd if="$BIUS_DEV" bs=4096 count=3 iflag=direct status=none) <(cat <(head -c 8192 /tmp/pattern) <(head -c 4096 /tmp/pattern)) \
		|| fail "the appended data do not read back on $BIUS_DEV"
	if [[ $t != "${transports[0]}" ]]; then
		unexport_nvme nzns
		bius_stop "$BIUS_PID" "$BIUS_NAME"
		continue
	fi

	nvme zns reset-zone "$NVME_BLK" -s 0 || fail "reset-zone failed"
	# (nvme-cli prints the state as the ZNS code: 0x10 empty, 0xe0 full;
	# the write pointer with %#x, so 0 for 0)
	[[ $(zfield WP 0) == 0 && $(zfield State 0) == 0x10 ]] || fail "after reset-zone: state $(zfield State 0) at $(zfield WP 0)"
	[[ $(append $ZS 4096) == $(printf %x $ZS) ]] || fail "an append to zone 1 did not land at its start"
	nvme zns finish-zone "$NVME_BLK" -s $ZS || fail "finish-zone failed"
	[[ $(zfield State $ZS) == 0xe0 ]] || fail "after finish-zone zone 1 is in state $(zfield State $ZS)"
	[[ $(blkzone report -o $((ZS * 8)) -c 1 "$BIUS_DEV") =~ zcond:\ *14\(fu\) ]] || fail "BIUS does not see zone 1 full"
	info "reset-zone: zone 0 empty; finish-zone: zone 1 full on both sides"

	# zone 2 written to 8 blocks; writes off the write pointer, then at it
	z2=$((2 * ZS * 8))	# zone 2's start in sectors
	[[ $(ewrite "$NVME_BLK" $z2) == ok ]] || fail "a write at zone 2's start failed"
	for dev in "$BIUS_DEV" "$NVME_BLK"; do
		got=$(ewrite "$dev" $((z2 + 64)))
		info "a write 8 blocks past zone 2's write pointer on $dev: $got"
		[[ $got == EIO ]] || fail "a write off the write pointer on $dev: $got, expected EIO"
		zone_after_failed_write "$dev" $z2
	done
	head -c 4096 /tmp/pattern >w.bin
	if nvme write "$NVME_BLK" -s $((2 * ZS + 16)) -c 0 -z 4096 -d w.bin >w.out 2>&1; then
		fail "an NVMe write off the write pointer succeeded: $(cat w.out)"
	fi
	info "an NVMe passthrough write off the write pointer: $(tr '\n' ' ' <w.out)"
	zone_after_failed_write "$BIUS_DEV" $z2
	# After a failed write, 6.10+ fails every write to the zone until its
	# write pointer is known again: a report of a plain zoned disk is
	# enough (zone_after_failed_write), but through NVMe with native
	# multipath it was not on 6.10-6.12.  The kernel's doing
	# (drivers/nvme/host, block/blk-zoned.c, 6.12): the zone write plugs
	# are the hidden path disk's (nvme0c0n1; the head disk only copies its
	# nr_zones), so the failed write marks that plug as needing its write
	# pointer, while a report of the head disk syncs the head's plugs,
	# which it has none of; a reset or finish through the head reaches the
	# path disk's plug.  On mainline (7.2.13) the write lands.  Either way
	# the zone must say what the write did:
	# one block more if it landed, as it was if it failed.
	zone_after_failed_write "$NVME_BLK" $z2
	mpath=$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null) || mpath=N
	got=$(ewrite "$NVME_BLK" $((z2 + 8)))
	info "after a report, a write at zone 2's write pointer on $NVME_BLK (multipath $mpath): $got"
	want=ok
	if kernel_at_least 6 10 && [[ $mpath == Y ]]; then
		want=EIO
		# (7.2.13 lets it land; which release between 6.13 and 7.2 changed
		# it is not known, so from 6.13 on either answer is the kernel's)
		kernel_at_least 6 13 && want='ok|EIO'
	fi
	[[ $got =~ ^($want)$ ]] || fail "a write at zone 2's write pointer after a report: $got, expected $want (multipath $mpath)"
	blocks=1
	[[ $got == ok ]] && blocks=2
	[[ $(zfield WP $((2 * ZS))) == $(printf %#x $((2 * ZS + blocks))) ]] \
		|| fail "after that write ($got), zone 2's write pointer is $(zfield WP $((2 * ZS))), expected $blocks block(s) in"
	# So the zone starts again, reset through the block layer, and takes
	# two writes at its write pointer.
	blkzone reset -o $z2 -c 1 "$NVME_BLK" || fail "blkzone reset of zone 2 on $NVME_BLK failed"
	for lba in 0 8; do
		got=$(ewrite "$NVME_BLK" $((z2 + lba)))
		[[ $got == ok ]] || fail "a write at zone 2's write pointer ($lba) failed after the reset: $got"
	done
	[[ $(zfield WP $((2 * ZS))) == $(printf %#x $((2 * ZS + 2))) ]] || fail "zone 2's write pointer is $(zfield WP $((2 * ZS)))"

	step "(b) $t: fio io_uring_cmd on $NVME_CHR, zonemode=zbd, verified"
	# (at depth 1: passthrough writes skip the block layer's zone write
	# plugging, so writes in flight together to one zone may reach the
	# device out of order, as on a real ZNS drive with several queues)
	run_fio fio-uring.txt --name=zns --filename="$NVME_CHR" --ioengine=io_uring_cmd --cmd_type=nvme \
		--zonemode=zbd --rw=write --bs=64k --iodepth=1 --offset=$((4 * 64))M --size=$((2 * 64))M \
		--io_size="$(volume_mib 24)M" --verify=crc32c --verify_fatal=1
	blkzone report -o $((4 * ZS * 8)) -c 2 "$BIUS_DEV" | sed 's/^/   zones: /'
	unexport_nvme nzns
	bius_stop "$BIUS_PID" "$BIUS_NAME"
done

step "(c) a zoned device with a conventional zone is refused, nothing made"
bius_start --zoned --size 256M --zone-size 64M --conv-zones 1 --name nconvz ramdisk
refused EINVAL "1 conventional zone(s)" export nvme nconvz
nothing_left
bius_stop "$BIUS_PID" "$BIUS_NAME"

if kernel_at_least 6 10; then
	step "(d) zone appends emulated by the kernel: exported, and an append lands"
	bius_start --zoned --emulate-append --size 256M --zone-size 64M --name nemu ramdisk
	export_nvme nemu
	[[ $(append 0 4096) == 0 ]] || fail "an append to an emulating disk did not land at LBA 0"
	cmp <(dd if="$BIUS_DEV" bs=4096 count=1 iflag=direct status=none) <(head -c 4096 /tmp/pattern) \
		|| fail "the appended data do not read back"
	unexport_nvme nemu
	bius_stop "$BIUS_PID" "$BIUS_NAME"
fi
echo "RESULT nvme-export: transports ${transports[*]}"
