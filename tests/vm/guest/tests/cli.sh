#!/bin/bash
# timeout: 300
# biusctl as a tool: version/list/info --json (parsed with jq), sizes as
# users write them (exact bytes by blockdev), usage errors (exit 2, one
# line naming the option), create --config with flags overriding it,
# destroy --all (a busy device fails it, --force removes it), and systemd
# readiness: READY=1 on NOTIFY_SOCKET only once the disk exists, STOPPING=1
# on SIGTERM.
source /bius/lib.sh
require_bius
require_artifact notify_listen

# json_is JSON FILTER EXPECTED: jq -r FILTER of JSON must be EXPECTED
json_is() {
	local got
	got=$(jq -r "$2" <<<"$1") || fail "not JSON, or jq '$2' failed: $1"
	[[ $got == "$3" ]] || fail "jq '$2' is '$got', expected '$3' in: $1"
}
# wait_gone PID: the daemon must exit within 10 s
wait_gone() {
	wait_until 10 eval "! kill -0 $1 2>/dev/null" || fail "daemon $1 still running 10 s after its device was destroyed"
	wait "$1" || true
}

step "version --json"
out=$(biusctl version --json) || fail "biusctl version --json failed"
info "$(jq -c . <<<"$out")"
json_is "$out" '.abi | type' number
json_is "$out" '.biusctl | type' string
json_is "$out" '.library == .biusctl' true
json_is "$out" '.module | type' object
if [[ -r /sys/module/bius/version ]]; then
	json_is "$out" .module.version "$(cat /sys/module/bius/version)"
fi
if [[ -r /sys/class/misc/bius/abi_version ]]; then
	json_is "$out" .module.abi "$(cat /sys/class/misc/bius/abi_version)"
	json_is "$out" '.module.abi == .abi' true
fi
grep -q '^module: ' <<<"$(biusctl version)" || fail "biusctl version prints no module line"
grep -q '^biusctl ' <<<"$(biusctl --version)" || fail "biusctl --version prints no version"

step "sizes: 1.5G, 64MiB, 1GB exact; 100MB is not whole blocks"
for spec in 1.5G:1610612736 64MiB:67108864 1GB:1000000000; do
	bius_start --size "${spec%%:*}" null
	got=$(blockdev --getsize64 "$BIUS_DEV")
	[[ $got -eq ${spec#*:} ]] || fail "--size ${spec%%:*}: $got bytes, expected ${spec#*:}"
	bius_stop "$BIUS_PID" "$BIUS_NAME"
done
usage_error "--size 100000000" create --size 100MB null

step "usage errors: exit 2, one line naming the option"
usage_error "--queues 0" create --queues 0 ramdisk
usage_error "--depth 5000" create -d 5000 ramdisk
usage_error "--size 12X" create --size 12X ramdisk
usage_error "--size 1.3K" create --size 1.3K ramdisk
usage_error "--poll-us 2000" create --poll-us 2000 ramdisk
usage_error "--block-size 1000" create --block-size 1000 ramdisk
usage_error "--max-open" create --max-open 3 ramdisk
usage_error "--zoned" create --zoned null
usage_error "tip: a similar subcommand exists: 'ramdisk'" create ramdsk
usage_error "no backend" create --size 16M
usage_error "--all" destroy --all bius0
[[ -z $(biusctl list --json | jq '.[]') ]] || fail "a failed create left a device behind"

step "list and info --json"
bius_start -s 32M -q 2 -d 64 -n cli-a -r -t selective=64K ramdisk
a_pid=$BIUS_PID
bius_start -s 16M -n cli-b -z --zone-size 4M ramdisk
b_pid=$BIUS_PID
out=$(biusctl list --json) || fail "biusctl list --json failed"
json_is "$out" length 2
json_is "$out" '[.[].disk] | sort | join(",")' cli-a,cli-b
json_is "$out" '.[] | select(.disk == "cli-a") | .size' 33554432
json_is "$out" '.[] | select(.disk == "cli-a") | .owner_pid' "$a_pid"
out=$(biusctl info --json cli-a) || fail "biusctl info --json failed"
info "$(jq -c . <<<"$out")"
json_is "$out" .path /dev/cli-a
json_is "$out" .state live
json_is "$out" .queues 2
json_is "$out" .queue_depth 64
json_is "$out" .transfer_mode selective=64K
json_is "$out" .zoned null
json_is "$out" '.features | index("read_only") != null' true
out=$(biusctl info --json /dev/cli-b) || fail "biusctl info --json /dev/cli-b failed"
json_is "$out" .size 16777216
json_is "$out" .zoned.zone_size 4194304
out=$(biusctl zones --json cli-b) || fail "biusctl zones --json failed"
json_is "$out" length 4
json_is "$out" '.[0] | [.zone, .start, .len, .wp, .cond] | map(tostring) | join(" ")' "0 0 8192 0 EMPTY"

step "destroy --all: a busy device fails it (exit 1), --force removes it"
exec 3<"/dev/cli-a"
rc=0
err=$(biusctl destroy --all 2>&1) || rc=$?
info "destroy --all with cli-a open -> $rc: $err"
[[ $rc -eq 1 ]] || fail "destroy --all with an open disk: exit status $rc, expected 1"
grep -q '^biusctl: error: cli-a: .*(EBUSY)$' <<<"$err" || fail "destroy --all did not report cli-a busy: $err"
wait_gone "$b_pid"
json_is "$(biusctl list --json)" '[.[].disk] | join(",")' cli-a
biusctl destroy --all --force || fail "destroy --all --force failed"
exec 3<&-
wait_gone "$a_pid"
json_is "$(biusctl list --json)" length 0

step "create --config, flags override the file"
cat >dev.toml <<'TOML'
size = "48M"
queues = 2
name = "cli-cfg"
transfer = "map"
backend = "null"
TOML
bius_start --config dev.toml -q 3
[[ $BIUS_DEV == /dev/cli-cfg ]] || fail "--config: the disk is $BIUS_DEV, expected /dev/cli-cfg"
out=$(biusctl info --json cli-cfg)
json_is "$out" .size 50331648
json_is "$out" .queues 3
json_is "$out" .transfer_mode map
bius_stop "$BIUS_PID" "$BIUS_NAME"
printf 'size = "16M"\nqueues = 0\nbackend = "null"\n' >bad.toml
usage_error "bad.toml: line 2 (queues = 0): must be 1 to 64" create --config bad.toml
printf 'size = "16M"\nsise = 1\n' >bad.toml
usage_error "unknown field" create --config bad.toml

step "systemd readiness: READY=1 once the disk exists, STOPPING=1 on SIGTERM"
notify_listen "$PWD/notify.sock" /sys/block/cli-ready >notify.log 2>&1 &
listener=$!
wait_until 5 test -S notify.sock || fail "notify_listen did not bind its socket"
BIUS_ENV=(NOTIFY_SOCKET="$PWD/notify.sock")
bius_start -s 16M -n cli-ready ramdisk
BIUS_ENV=()
wait_until 5 grep -q '^READY=1$' notify.log || fail "no READY=1: $(cat notify.log)"
sed 's/^/   notify: /' notify.log
grep -q '^exists /sys/block/cli-ready: yes$' notify.log || fail "READY=1 came before the disk existed"
! grep -q ': no$' notify.log || fail "a notification came before the disk existed"
grep -q "^STATUS=serving /dev/cli-ready$" notify.log || fail "no STATUS=serving /dev/cli-ready"
grep -q "^MAINPID=$BIUS_PID$" notify.log || fail "no MAINPID=$BIUS_PID"
bius_stop "$BIUS_PID" "$BIUS_NAME"
wait_until 5 grep -q '^STOPPING=1$' notify.log || fail "no STOPPING=1 after SIGTERM: $(cat notify.log)"
[[ $(grep -c '^READY=1$' notify.log) -eq 1 ]] || fail "READY=1 sent more than once"
kill "$listener"

step "completions and manual pages"
grep -q -- --zone-size <<<"$(biusctl completions bash)" || fail "bash completion lacks --zone-size"
mkdir man && biusctl manpages man || fail "biusctl manpages failed"
for page in biusctl.1 biusctl-create.1 biusctl-version.1; do
	[[ -s man/$page ]] || fail "biusctl manpages wrote no $page"
done
