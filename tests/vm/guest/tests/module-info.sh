#!/bin/bash
# timeout: 60
# What a loaded bius.ko says about itself: its version in
# /sys/module/bius/version and `modinfo -F version bius` (MODULE_VERSION,
# the workspace version), the ABI it speaks in
# /sys/class/misc/bius/abi_version (read-only), the same two in its
# "loaded" kernel log line, the version against `biusctl --version` (both
# come from Cargo.toml) and /dev/bius root-only; then rmmod and a reload.
source /bius/lib.sh
[[ ! -e /bius/MOCK ]] || { info "MOCK: no bius.ko to inspect"; echo "module-info: OK"; exit 0; }
require_artifact bius.ko

semver='^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$'

step "modinfo (before loading)"
mod_ver=$(modinfo -F version bius) || fail "modinfo bius failed"
info "modinfo -F version bius: $mod_ver ($(modinfo -n bius))"
[[ $mod_ver =~ $semver ]] || fail "modinfo version '$mod_ver' is not a version"

step "load bius.ko"
if [[ -d /sys/module/bius ]]; then
	rmmod_bius
fi
modprobe bius || fail "modprobe bius failed"
wait_until 5 test -c /dev/bius || fail "/dev/bius did not appear after modprobe bius"

step "/sys/module/bius/version"
[[ -r /sys/module/bius/version ]] || fail "/sys/module/bius/version missing (no MODULE_VERSION?)"
sys_ver=$(</sys/module/bius/version)
info "version: $sys_ver"
[[ $sys_ver == "$mod_ver" ]] || fail "/sys/module/bius/version '$sys_ver' != modinfo '$mod_ver'"

step "/sys/class/misc/bius/abi_version"
abi_file=/sys/class/misc/bius/abi_version
[[ -f $abi_file ]] || fail "$abi_file missing"
abi=$(<"$abi_file")
info "abi_version: $abi"
[[ $abi =~ ^[1-9][0-9]*$ ]] || fail "abi_version '$abi' is not a positive integer"
mode=$(stat -c %a "$abi_file")
[[ $mode == 444 ]] || fail "$abi_file has mode $mode, expected 444 (read-only)"
if (echo 2 >"$abi_file") 2>/dev/null; then
	fail "writing $abi_file succeeded"
fi
[[ $(<"$abi_file") == "$abi" ]] || fail "abi_version changed after a write attempt"

step "the kernel log line agrees"
line=$(test_klog | grep -E 'bius: version .* loaded \(ABI [0-9]+\)' | tail -n 1) \
	|| fail "no 'bius: version ... loaded (ABI N)' line in the kernel log"
info "$line"
[[ $line == *"version $sys_ver loaded (ABI $abi)"* ]] \
	|| fail "kernel log says '$line', sysfs says version $sys_ver, ABI $abi"

step "/dev/bius is root-only"
dev_mode=$(stat -c '%a %u' /dev/bius)
info "/dev/bius: $dev_mode"
[[ $dev_mode == "600 0" ]] || fail "/dev/bius is '$dev_mode' (mode uid), expected '600 0'"

step "biusctl agrees (same workspace version)"
if ! grep -q '^biusctl ' /bius/MISSING 2>/dev/null && command -v biusctl >/dev/null; then
	ctl=$(biusctl --version) || fail "biusctl --version failed"
	info "biusctl --version: $ctl"
	[[ $ctl == "biusctl $sys_ver" ]] || fail "biusctl is '$ctl', bius.ko is $sys_ver"
	if out=$(biusctl version 2>&1); then
		printf '%s\n' "$out" | sed 's/^/   biusctl version: /'
		grep -qF "$sys_ver" <<<"$out" || fail "biusctl version does not show the module version $sys_ver"
	else
		info "biusctl has no 'version' subcommand yet: skipped"
	fi
else
	info "biusctl not in the VM image: skipped"
fi

step "rmmod and reload"
rmmod bius || fail "rmmod bius failed"
[[ ! -e $abi_file ]] || fail "$abi_file still there after rmmod"
modprobe bius || fail "modprobe bius failed the second time"
wait_until 5 test -f "$abi_file" || fail "$abi_file missing after reload"
[[ $(</sys/module/bius/version) == "$sys_ver" ]] || fail "version changed across reload"
rmmod bius || fail "rmmod bius failed"
echo "module-info: OK"
