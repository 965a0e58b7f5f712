#!/bin/bash
# timeout: 150
# biusctl fault on a zoned BIUS ramdisk: zones made read-only and offline
# show up in the next zone report (blkzone, biusctl zones), writes to them
# fail with EIO (reads too when offline, not when read-only), a write
# reaching an injected write error fails and leaves the write pointer at
# the bad sector with the sectors before it stored; each fault clears.
source /bius/lib.sh
source /bius/zoned-lib.sh
require_bius

ZS=8192	# sectors per zone (4 MiB)
step "create a zoned ramdisk: 64 MiB, 4 MiB zones, 2 conventional"
bius_start --zoned --size 64M --zone-size 4M --conv-zones 2 --queues 2 --name zfault ramdisk
DEV=$BIUS_DEV
head -c $((1 << 20)) /dev/urandom >/tmp/pattern

r() { dd if="$DEV" bs=$(($2 * 512)) count=1 skip=$(($1 * 512)) iflag=direct,skip_bytes status=none; }
# expect_eio WHAT CMD...: CMD must fail with EIO
expect_eio() {
	local what=$1
	shift
	if "$@" 2>/tmp/err >/dev/null; then fail "$what succeeded"; fi
	grep -q 'Input/output error' /tmp/err || fail "$what failed, but not with EIO: $(cat /tmp/err)"
	info "$what: $(tr '\n' ' ' </tmp/err)"
}
# zcond_blk ZONE: the condition number blkzone reports for a zone
zcond_blk() { zones_blkzone "$DEV" | sed -n "$(($1 + 1))p" | awk '{print $5}'; }
zwp() { zones_blkzone "$DEV" | sed -n "$(($1 + 1))p" | awk '{print $4}'; }
fault() {
	local out
	out=$(biusctl fault "$DEV" "$@" 2>&1) || fail "biusctl fault $* failed: $out"
	info "biusctl fault $*: $out"
}

step "read-only zone 4 (written, implicitly open)"
w $((4 * ZS)) 64 || fail "write to zone 4 failed"
fault --read-only 4
[[ $(zcond_blk 4) == 13 ]] || fail "zone 4 is not read-only in blkzone report (cond $(zcond_blk 4))"
[[ $(zcond "$DEV" 4) == READONLY ]] || fail "biusctl zones says $(zcond "$DEV" 4) for zone 4"
blkzone report -o $((4 * ZS)) -c 1 "$DEV" | sed 's/^/   /'
zones_agree "$DEV"
expect_eio "write at zone 4's old write pointer" w $((4 * ZS + 64)) 8
expect_eio "write at zone 4's start" w $((4 * ZS)) 8
expect_eio "reset of read-only zone 4" blkzone reset -o $((4 * ZS)) -c 1 "$DEV"
expect_eio "open of read-only zone 4" blkzone open -o $((4 * ZS)) -c 1 "$DEV"
cmp <(head -c $((64 * 512)) /tmp/pattern) <(r $((4 * ZS)) 64) || fail "zone 4's data is not readable as written"

step "offline zone 5 (empty)"
fault --offline 5
[[ $(zcond_blk 5) == 15 ]] || fail "zone 5 is not offline in blkzone report (cond $(zcond_blk 5))"
[[ $(zcond "$DEV" 5) == OFFLINE ]] || fail "biusctl zones says $(zcond "$DEV" 5) for zone 5"
zones_agree "$DEV"
expect_eio "write to offline zone 5" w $((5 * ZS)) 8
expect_eio "read of offline zone 5" r $((5 * ZS)) 8
expect_eio "finish of offline zone 5" blkzone finish -o $((5 * ZS)) -c 1 "$DEV"

step "reset all zones leaves the read-only and offline zones alone"
w $((6 * ZS)) 8 || fail "write to zone 6 failed"
blkzone reset "$DEV" || fail "blkzone reset (all) failed"
[[ $(zcond_blk 4) == 13 && $(zcond_blk 5) == 15 && $(zcond_blk 6) == 1 ]] \
	|| fail "after reset all: zone 4 cond $(zcond_blk 4), zone 5 $(zcond_blk 5), zone 6 $(zcond_blk 6) (expected 13, 15, 1)"

step "clearing: the same fault again makes the zone empty and usable"
fault --read-only 4
fault --offline 5
[[ $(zcond "$DEV" 4) == EMPTY && $(zcond "$DEV" 5) == EMPTY ]] || fail "zones 4, 5 are $(zcond "$DEV" 4), $(zcond "$DEV" 5) after clearing"
w $((4 * ZS)) 8 || fail "write to zone 4 after clearing failed"
w $((5 * ZS)) 8 || fail "write to zone 5 after clearing failed"
cmp <(head -c 4096 /tmp/pattern) <(r $((5 * ZS)) 8) || fail "zone 5's data differs after clearing"

step "write error at sector zone 6 + 16"
bad=$((6 * ZS + 16))
fault --write-error "$bad"
expect_eio "write of 32 sectors across the bad sector" w $((6 * ZS)) 32
[[ $(zwp 6) == 16 ]] || fail "zone 6's write pointer is $(zwp 6) after the failed write, expected 16 (the bad sector)"
cmp <(head -c $((16 * 512)) /tmp/pattern) <(r $((6 * ZS)) 16) || fail "the sectors before the bad one were not stored"
expect_eio "write at the bad sector" w "$bad" 8
[[ $(zwp 6) == 16 ]] || fail "zone 6's write pointer moved to $(zwp 6)"
fault --clear-write-error "$bad"
w "$bad" 8 || fail "write at the bad sector after clearing failed"
[[ $(zwp 6) == 24 ]] || fail "zone 6's write pointer is $(zwp 6), expected 24"
zones_agree "$DEV"

step "write error at a zone start"
fault --write-error $((7 * ZS))
expect_eio "write at zone 7's start" w $((7 * ZS)) 8
# (as on null_blk, the zone opened before the data transfer failed)
[[ $(zwp 7) == 0 ]] || fail "zone 7's write pointer moved to $(zwp 7) although its first sector failed"
[[ $(zcond_blk 7) == 1 || $(zcond_blk 7) == 2 ]] || fail "zone 7 is neither empty nor implicitly open after the failed write (cond $(zcond_blk 7))"
fault --clear-write-error $((7 * ZS))
w $((7 * ZS)) 8 || fail "write to zone 7 after clearing failed"

step "refusals: conventional zone, zone out of range, non-zoned name"
if out=$(biusctl fault "$DEV" --read-only 0 2>&1); then fail "read-only on conventional zone 0 accepted: $out"; fi
info "conventional: $out"
if out=$(biusctl fault "$DEV" --offline 1000 2>&1); then fail "offline zone 1000 accepted: $out"; fi
info "out of range: $out"

step "stop the daemon"
bius_stop "$BIUS_PID" "$BIUS_NAME"
[[ ! -e /run/bius/$BIUS_NAME.sock ]] || fail "the fault socket is left behind"
echo "zoned-fault: OK"
