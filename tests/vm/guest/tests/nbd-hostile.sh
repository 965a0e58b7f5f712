#!/bin/bash
# timeout: 180
# The nbd backend against servers that break the protocol on purpose
# (tests/vm/tools/nbd_hostile: a correct handshake, then a wrong reply
# magic, a reply for a handle never sent, a reply cut short by the server
# closing, a data chunk longer than the request, an error chunk whose
# message overruns it): a read of the disk fails with EIO within seconds,
# the daemon names the problem in one log line and does not crash, and the
# disk is removed cleanly on SIGTERM.  The same tool answering correctly
# ("none") serves zeroes: the tool itself is sound.
source /bius/lib.sh
require_bius
require_artifact nbd_hostile

SOCK=/tmp/hostile.sock

# serve MODE: the hostile server on $SOCK, its pid in SERVER_PID
serve() {
	rm -f "$SOCK"
	nbd_hostile "$SOCK" "$1" $((64 << 20)) &
	SERVER_PID=$!
	wait_until 5 test -S "$SOCK" || fail "nbd_hostile $1 did not listen on $SOCK"
}

step "a correct answer: zeroes"
serve none
bius_start nbd "unix:$SOCK"
[[ $(dd if="$BIUS_DEV" bs=4096 count=1 iflag=direct status=none | tr -d '\0' | wc -c) == 0 ]] \
	|| fail "a read of the well-behaved server did not return zeroes"
bius_stop "$BIUS_PID" "$BIUS_NAME"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true

declare -A WHY=(
	[bad-magic]="magic"
	[wrong-handle]="cookie"
	[short-read]="end of|EOF|closed"
	[oversize]="more than the"
	[error-length]="message length"
)
for mode in bad-magic wrong-handle short-read oversize error-length; do
	step "$mode"
	serve "$mode"
	# The disk goes live even though the kernel's partition scan fails.
	bius_start nbd "unix:$SOCK"
	t0=$(now)
	if timeout 20 dd if="$BIUS_DEV" of=/dev/null bs=4096 count=1 skip=100 iflag=direct status=none 2>dd.err; then
		fail "$mode: a read succeeded"
	fi
	rc=$(elapsed "$t0")
	grep -q "Input/output error" dd.err || fail "$mode: the read failed otherwise: $(cat dd.err)"
	info "read failed with EIO after $rc s"
	awk -v t="$rc" 'BEGIN { exit !(t < 15) }' || fail "$mode: the read took $rc s to fail"
	kill -0 "$BIUS_PID" 2>/dev/null || fail "$mode: the daemon died"
	grep -E "NBD connection lost" "$BIUS_ERR" | sed 's/^/   biusctl: /'
	grep -E "NBD connection lost: .*(${WHY[$mode]})" "$BIUS_ERR" >/dev/null \
		|| fail "$mode: the daemon did not say what was wrong (expected /${WHY[$mode]}/): $(tail -n 3 "$BIUS_ERR")"
	[[ $(grep -c "NBD connection lost" "$BIUS_ERR") == 1 ]] || fail "$mode: the loss was logged more than once"
	# Later reads fail at once as well.
	! dd if="$BIUS_DEV" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>/dev/null \
		|| fail "$mode: a later read succeeded"
	bius_stop "$BIUS_PID" "$BIUS_NAME"
	kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
done

step "bad input: a socket with no server, no connections"
rc=0
biusctl create nbd unix:/tmp/nobody.sock 2>err.txt || rc=$?
[[ $rc == 1 ]] || fail "exit status $rc (expected 1) for a socket with no server"
[[ $(wc -l <err.txt) == 1 ]] && grep -q "ENOENT" err.txt || fail "unexpected message: $(cat err.txt)"
info "$(cat err.txt)"
rc=0
biusctl create nbd --connections 0 unix:/tmp/nobody.sock 2>err.txt || rc=$?
[[ $rc == 2 ]] && grep -q -- "--connections 0" err.txt || fail "--connections 0: status $rc, $(cat err.txt)"
info "$(head -n 1 err.txt)"
