# shellcheck shell=bash
# The VM benchmark's devices (sourced by bench.sh): making each kind of
# disk the suites measure (null_blk by configfs, a BIUS daemon, an nbdkit
# server, ublk's driver and rublk) and entering it into the tables
# (add_dev), which devices a run wants (only=), and brd, which two suites
# share.

wanted() { [[ -z $ONLY || " $ONLY " == *" $1 "* ]]; }
# named NAME: a device made only when only= names it (an A/B variant)
named() { [[ " $ONLY " == *" $1 "* ]]; }
in_deep_set() { [[ " $DEEP_SET " == *" $1 "* ]]; }
# want_classic NAME: a device of the classic suite wanted, for that suite
# or (one of DEEP_SET) for the deep one
want_classic() { wanted "$1" && { suite classic || { suite deep && in_deep_set "$1"; }; }; }
# into_suites NAME: a classic device made: into the classic suite and, one
# of DEEP_SET, into the deep suite, as they run
into_suites() {
	suite classic && CLASSIC+=("$1")
	suite deep && in_deep_set "$1" && DEEP+=("$1")
	return 0
}
add_dev() {	# add_dev NAME PATH [PID]
	DEV[$1]=$2
	[[ -n ${3:-} ]] && PID[$1]=$3
	ORDER+=("$1")
	mkdir -p "$OUT/fio/$1"
	echo "$1 $2 ${3:-}" >>"$OUT/devices.txt"
	say "device $1 = $2${3:+ (daemon pid $3)}"
}

# file_wanted: whether the file suite runs with a device of its own
file_wanted() {
	suite file && { wanted loop-dio || wanted bius-file-uring || wanted bius-file-threads \
		|| wanted bius-file-sync; }
}
# brd_load: brd loaded once, two disks: /dev/ram0 for the classic suite,
# /dev/ram1 for the file suite's ext4 (room for an image of SIZE_MB when
# that suite runs); 1 if it does not load
BRD_LOADED=""
brd_load() {
	local rd_mb=$SIZE_MB
	if [[ -z $BRD_LOADED ]]; then
		file_wanted && rd_mb=$((SIZE_MB + SIZE_MB / 16 + 48))
		BRD_LOADED=0
		modprobe brd rd_nr=2 rd_size=$((rd_mb * 1024)) max_part=0 && BRD_LOADED=1
		[[ $BRD_LOADED == 1 ]] || say "SKIP brd: modprobe brd failed"
	fi
	[[ $BRD_LOADED == 1 ]]
}

# nullb_configfs NAME ATTR=VALUE...: a null_blk disk made by configfs,
# its attributes written in the order given (the module's parameters are
# the defaults of those not given), then powered on; prints its /dev path
nullb_configfs() {
	local nb=/sys/kernel/config/nullb/$1 dev=$1 kv
	shift
	{ [[ -d /sys/module/null_blk ]] || modprobe null_blk nr_devices=0; } \
		&& { [[ -d /sys/module/configfs ]] || modprobe configfs; } \
		&& { mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config; } \
		&& mkdir "$nb" || return 1
	for kv in "$@" power=1; do
		echo "${kv#*=}" >"$nb/${kv%%=*}" || return 1
	done
	[[ -d /sys/block/$dev ]] || dev=nullb$(cat "$nb/index")
	wait_until 5 test -b "/dev/$dev" && echo "/dev/$dev"
}

# start_bius NAME ARGS...: $BIUSCTL (default biusctl) create ARGS in the
# background (lib.sh's bius_launch) with --poll-us POLL (unless NOPOLL=1)
# and the assignment EXTRA_ENV (if set) in its environment;
# the device is skipped if it is not live within 30 s
start_bius() {
	local name=$1
	shift
	# shellcheck disable=SC2034 # read by lib.sh's daemon_launch
	BIUS_ENV=(${TUNABLES:+"GLIBC_TUNABLES=$TUNABLES"} ${EXTRA_ENV:+"$EXTRA_ENV"})
	[[ ${NOPOLL:-0} == 1 ]] || set -- "$@" ${POLL:+--poll-us "$POLL"}
	if ! daemon_launch "${BIUSCTL:-biusctl}" create "$@"; then
		say "SKIP $name: $BIUS_WHY: $(tail -n 3 "$BIUS_ERR" | tr '\n' ' ')"
		return 1
	fi
	add_dev "$name" "$BIUS_DEV" "$BIUS_PID"
	[[ $name == bius-ram-* && $name != bius-ram-default* && $name != bius-ram-poll ]] \
		&& SWEEPDEV+=("$name")
	return 0
}

# pin_queues PID: each queue thread (bius-qN) of daemon PID on vCPU N
# modulo the vCPUs
pin_queues() {
	local tid queue
	while read -r tid queue; do
		taskset -pc "$((queue % $(nproc)))" "$tid" >/dev/null || return 1
	done < <(queue_threads "$1")
}
# batch_daemon NAME: every thread of device NAME's daemon under SCHED_BATCH
batch_daemon() {
	chrt -a -b -p 0 "${PID[$1]}" >/dev/null
}
# has_user_copy: whether ublk_drv offers UBLK_F_USER_COPY (6.1's does not)
has_user_copy() {
	rublk features 2>/dev/null | grep -qw USER_COPY
}

# start_nbdkit SOCKET LOG: an nbdkit memory disk of SIZE_MB on a Unix
# socket, in the background (NBDKIT_PID); 1 if the socket does not appear
start_nbdkit() {
	env ${TUNABLES:+GLIBC_TUNABLES=$TUNABLES} nbdkit --foreground --unix "$1" --exit-with-parent memory "${SIZE_MB}M" \
		>"$2" 2>&1 &
	NBDKIT_PID=$!
	wait_until 10 test -S "$1"
}

# ublk_load: ublk_drv loaded once: /bius/ublk/ublk_drv.ko when bench.sh
# built one (6.1), else the kernel's own module (6.12); 1 without rublk
# (the bench's ublk=0) or when it does not load
UBLK_LOADED=""
ublk_load() {
	if [[ -z $UBLK_LOADED ]]; then
		UBLK_LOADED=0
		if ! command -v rublk >/dev/null; then
			:
		elif [[ -e /bius/ublk/ublk_drv.ko ]]; then
			insmod /bius/ublk/ublk_drv.ko && wait_until 5 test -c /dev/ublk-control && UBLK_LOADED=1
			echo "ublk_drv /bius/ublk/ublk_drv.ko (built by the bench)" >>"$OUT/meta.txt"
		else
			modprobe ublk_drv && wait_until 5 test -c /dev/ublk-control && UBLK_LOADED=1
			echo "ublk_drv $(modinfo -F filename ublk_drv 2>/dev/null) (the kernel's own)" >>"$OUT/meta.txt"
		fi
		[[ $UBLK_LOADED == 1 ]] || { command -v rublk >/dev/null && say "SKIP ublk: ublk_drv did not load"; }
	fi
	[[ $UBLK_LOADED == 1 ]]
}

# start_rublk NAME TARGET ARGS...: rublk add TARGET --foreground ARGS in
# the background, with the memcpy tunables; rublk prints no path: the new
# /dev/ublkbN is its disk; 1 (device skipped) if none appears within 30 s
start_rublk() {
	local name=$1 target=$2 before dev d pid
	shift 2
	before=" $(echo /dev/ublkb*) "
	env ${TUNABLES:+GLIBC_TUNABLES=$TUNABLES} rublk add "$target" --foreground --quiet "$@" \
		>"/tmp/$name.log" 2>&1 &
	pid=$!
	wait_until 30 eval '[[ " $(echo /dev/ublkb*) " != "$before" ]] || ! kill -0 $pid 2>/dev/null'
	dev=""
	for d in /dev/ublkb*; do [[ $before == *" $d "* ]] || dev=$d; done
	if [[ -b $dev ]]; then
		add_dev "$name" "$dev" "$pid"
		return 0
	fi
	say "SKIP $name: rublk: $(tr '\n' ' ' <"/tmp/$name.log")"
	kill "$pid" 2>/dev/null
	return 1
}
