#!/bin/bash
# timeout: 300
# biusctl create nbd: BIUS disks on exports of nbdkit's memory plugin
# (256 MiB).  (a) over a Unix socket: size from the server, fio writes at
# QD 32 and verifies (crc32c), and the data is still there through a new
# device on the same server; (b) over TCP on 127.0.0.1 with --connections
# 4 (4 established connections seen) and 2 queues: fio verify, then
# biusctl destroy; (c) --zoned --zone-size 4M over a fresh server: blkzone
# report shows 64 empty zones, fio --zonemode=zbd sequential (zones fill)
# and random writes verify, blkzone and biusctl zones agree; (d) the server
# killed (SIGKILL) under fio randrw: fio ends with I/O errors within 60 s,
# later I/O fails at once, the daemon stops on SIGTERM and the disk goes
# away (no task in D state: checked after the test); (e) bad input: an
# unreachable server exits 1 with the errno (ENOENT, ECONNREFUSED),
# --connections 0 exits 2 naming --connections.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius
T0=$(now)
step() { echo "== [$(elapsed "$T0") s] $*"; }	# (lib.sh's, timed)
command -v nbdkit >/dev/null \
	|| fail "nbdkit is not in the VM image: install nbdkit on the host (scripts/setup.sh); scripts/vm-test.sh adds it with its memory plugin"

MiB=$((1 << 20))
PORT=10809

# nbd_server NAME LISTEN-OPTION...: nbdkit's memory plugin (256 MiB)
# listening as the options say; sets NBD_PID once it accepts connections
# (nbdkit writes its pid file then); its output in NAME.log
nbd_server() {
	local name=$1
	shift
	rm -f "$name.pid"
	nbdkit --foreground --exit-with-parent -P "$PWD/$name.pid" "$@" memory 256M >"$name.log" 2>&1 &
	NBD_PID=$!
	wait_until 10 test -s "$name.pid" || { cat "$name.log"; fail "nbdkit $name not ready within 10 s"; }
	info "nbdkit $name (pid $NBD_PID): $*"
}
# nbd_stop PID: stop an nbdkit
nbd_stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
# check_size: the disk has the export's size
check_size() {
	[[ $(blockdev --getsize64 "$BIUS_DEV") -eq $((256 * MiB)) ]] \
		|| fail "$BIUS_DEV has $(blockdev --getsize64 "$BIUS_DEV") bytes, the export 256 MiB"
}
# established PORT: TCP connections established to 127.0.0.1:PORT (client side)
established() {
	awk -v p="$(printf ':%04X' "$1")" '$3 ~ p"$" && $4 == "01"' /proc/net/tcp | wc -l
}
sum() { sha256sum | cut -d' ' -f1; }

step "loopback network up"
ip link set lo up || fail "ip link set lo up failed"
grep -q 'inet 127.0.0.1' <<<"$(ip addr show lo)" || fail "lo has no 127.0.0.1: $(ip addr show lo)"

step "(a) nbd over a Unix socket: fio verify at QD 32"
nbd_server unix --unix "$PWD/unix.sock"
unix_pid=$NBD_PID
bius_start --queues 2 --name nbd-unix nbd "unix:$PWD/unix.sock"
check_size
t0=$(now)
run_fio a.txt --name=a --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth=32 \
	--rw=randwrite --bsrange=4k-128k --size=32M --verify=crc32c --verify_fatal=1
info "$(elapsed "$t0") s"
before=$(dd if="$BIUS_DEV" bs=1M count=32 iflag=direct status=none | sum)
bius_stop "$BIUS_PID" "$BIUS_NAME"
step "(a) a new device on the same server reads the same data"
bius_start --name nbd-unix nbd "unix:$PWD/unix.sock"
[[ $(dd if="$BIUS_DEV" bs=1M count=32 iflag=direct status=none | sum) == "$before" ]] \
	|| fail "the data written through the first device reads back differently through the second"
bius_stop "$BIUS_PID" "$BIUS_NAME"
nbd_stop "$unix_pid"

step "(b) nbd over TCP 127.0.0.1:$PORT, --connections 4, 2 queues: fio verify"
nbd_server tcp --ipaddr 127.0.0.1 --port "$PORT"
tcp_pid=$NBD_PID
bius_start --queues 2 --name nbd-tcp nbd --connections 4 "127.0.0.1:$PORT"
check_size
n=$(established "$PORT")
info "$n TCP connections established to port $PORT"
[[ $n -eq 4 ]] || fail "expected 4 connections to the server, $n are established"
t0=$(now)
run_fio b.txt --name=b --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth=32 \
	--rw=randwrite --bsrange=4k-128k --size=32M --offset_increment=32M --numjobs=2 \
	--verify=crc32c --verify_fatal=1 --group_reporting
info "$(elapsed "$t0") s"
step "(b) biusctl destroy stops the daemon"
biusctl destroy "$BIUS_NAME" || fail "biusctl destroy $BIUS_NAME failed"
wait_until 10 eval "! kill -0 $BIUS_PID 2>/dev/null" || fail "daemon still running 10 s after biusctl destroy"
wait "$BIUS_PID" || info "daemon exited with status $? after biusctl destroy"
wait_until 10 test ! -e "/sys/block/$BIUS_NAME" || fail "/sys/block/$BIUS_NAME still exists after biusctl destroy"
wait_until 10 eval '[[ $(established $PORT) -eq 0 ]]' || fail "connections to the server left open: $(established $PORT)"
nbd_stop "$tcp_pid"

step "(c) --zoned --zone-size 4M over a fresh server: blkzone report, fio zbd verify"
nbd_server zoned --unix "$PWD/zoned.sock"
zoned_pid=$NBD_PID
bius_start --zoned --zone-size 4M --queues 2 --name nbd-zoned nbd "unix:$PWD/zoned.sock"
check_size
sched=/sys/block/$BIUS_NAME/queue/scheduler
grep -q '\[mq-deadline\]' "$sched" || echo mq-deadline >"$sched" || fail "cannot select mq-deadline ($(cat "$sched"))"
zones=$(blkzone report "$BIUS_DEV" | grep -cE 'zcond: *1\(') || true
info "blkzone report: $(blkzone report "$BIUS_DEV" | wc -l) zones, $zones empty; $(head -1 <(blkzone report "$BIUS_DEV"))"
[[ $zones -eq 64 ]] || fail "expected 64 empty zones of 4 MiB, blkzone report shows $zones"
zbd=(--filename="$BIUS_DEV" --direct=1 --zonemode=zbd --max_open_zones=8 --offset=0
	--size=16M --offset_increment=32M --numjobs=2 --verify=crc32c --verify_fatal=1 --group_reporting)
t0=$(now)
run_fio c-seq.txt --name=seq --rw=write --bs=128k --ioengine=psync "${zbd[@]}"
full=$(blkzone report "$BIUS_DEV" | grep -c 'zcond:14') || true
info "$(elapsed "$t0") s; $full zones full"
[[ $full -eq 8 ]] || fail "expected 8 full zones after 2 x 16 MiB of sequential writes, $full are"
blkzone reset "$BIUS_DEV" || fail "blkzone reset failed"
t0=$(now)
run_fio c-rand.txt --name=rand --rw=randwrite --bsrange=4k-64k --ioengine=libaio --iodepth=4 \
	--io_size=8M "${zbd[@]}"
info "$(elapsed "$t0") s"
zcond_counts "$BIUS_DEV"
zones_agree "$BIUS_DEV"
bius_stop "$BIUS_PID" "$BIUS_NAME"
nbd_stop "$zoned_pid"

step "(d) the server killed under fio randrw"
nbd_server kill --unix "$PWD/kill.sock"
kill_pid=$NBD_PID
bius_start --queues 2 --name nbd-kill nbd "unix:$PWD/kill.sock"
fio --name=load --filename="$BIUS_DEV" --direct=1 --ioengine=libaio --iodepth=16 \
	--rw=randrw --bs=4k --numjobs=2 --time_based --runtime=120 \
	--group_reporting --output=d.txt 2>d.err &
fio_pid=$!
io_flowing "$fio_pid" d.txt "$BIUS_NAME" '$1 + $5' I/Os
info "kill -9 nbdkit (pid $kill_pid)"
t=$(now)
kill -KILL "$kill_pid"
if ! wait_until 60 eval "! kill -0 $fio_pid 2>/dev/null"; then
	ps -eo pid,stat,wchan:32,comm | awk 'NR == 1 || $2 ~ /D/' | sed 's/^/   /'
	kill -KILL "$fio_pid" 2>/dev/null
	fail "fio still running 60 s after the server was killed"
fi
rc=0
wait "$fio_pid" || rc=$?
info "fio ended $(elapsed "$t") s after the kill, status $rc"
grep -E 'err=|error' d.txt | sed 's/^/   fio: /' || true
info "fio: $(grep -c 'io_u error' d.err) I/O errors on stderr, the first: $(grep -m 1 'io_u error' d.err)"
[[ $rc -ne 0 ]] || fail "fio succeeded although the server died under it"
grep -Eq 'err= *5|Input/output error' d.txt || fail "fio reported no I/O error (EIO)"
step "(d) later I/O fails at once; the daemon stops on SIGTERM"
t=$(now)
! timeout 20 dd if="$BIUS_DEV" of=/dev/null bs=4k count=1 iflag=direct status=none 2>dd.err \
	|| fail "a read succeeded after the server died"
info "a read failed after $(elapsed "$t") s: $(cat dd.err)"
t=$(now)
kill -TERM "$BIUS_PID"
wait_until 30 eval "! kill -0 $BIUS_PID 2>/dev/null" || fail "daemon still running 30 s after SIGTERM"
rc=0
wait "$BIUS_PID" || rc=$?
info "daemon exited $(elapsed "$t") s after SIGTERM, status $rc; its stderr:"
sed 's/^/   biusctl: /' "$BIUS_ERR"
wait_until 10 test ! -e "/sys/block/$BIUS_NAME" || fail "/sys/block/$BIUS_NAME still exists after the daemon exited"
[[ -z $(biusctl list --json | jq '.[]') ]] || fail "biusctl list shows devices: $(biusctl list)"

step "(e) bad input"
# bad STATUS WHAT ARGS...: biusctl create ARGS exits STATUS with one line
# on stderr containing WHAT
bad() {
	local want=$1 what=$2 rc=0 err
	shift 2
	err=$(timeout 20 biusctl create "$@" 2>&1 >/dev/null) || rc=$?
	info "biusctl create $* -> $rc: $err"
	[[ $rc -eq $want ]] || fail "biusctl create $*: exit status $rc, expected $want"
	[[ $(wc -l <<<"$err") -eq 1 ]] || fail "biusctl create $*: not one line on stderr: $err"
	[[ $err == "biusctl: error: "*"$what"* ]] || fail "biusctl create $*: the message does not contain '$what': $err"
}
bad 1 ENOENT nbd unix:/nonexistent
bad 1 ECONNREFUSED nbd "127.0.0.1:$PORT"
bad 2 --connections nbd --connections 0 "unix:$PWD/unix.sock"
[[ -z $(biusctl list --json | jq '.[]') ]] || fail "a failed create left a device behind: $(biusctl list)"
echo "nbd: OK"
