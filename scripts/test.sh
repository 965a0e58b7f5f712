#!/bin/bash
# THE test command: every check of the project, in order, failing fast.
#
#   scripts/test.sh [TEST...]     (TEST...: passed on to scripts/vm-test.sh)
#
# 1 cargo fmt --check   2 cargo clippy -D warnings   3 cargo test (with the
# README's and the book's Rust snippets), biusplot's tests   4 the book
# (scripts/book.sh: build, links)   5 make -C driver for each kernel (no
# warnings)   6 checkpatch   7 make -C tests/badinput tests/fuzz   8 cargo
# build --release: biusctl and the examples of crates/bius   9 install
# check: DKMS build, make install/uninstall, udev rule, systemd unit
# 10 cargo package of the published crates   11 VM integration tests
# (QEMU, TCG), on each kernel
# The kernels: the newest installed release of each supported series
# (BIUS_SERIES in scripts/lib.sh: 6.1 and 6.12), or BIUS_KVER (one kernel
# or a space-separated list, each a release or a series: 6.12 is its newest
# installed release).  Run scripts/setup.sh once first.  Ends with
# the VM suites' total, "N passed, M failed".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BIUS_ROOT"
export PATH="$HOME/.cargo/bin:$PATH" CARGO_TERM_COLOR=never
mkdir -p "$BIUS_BUILD"

T0=$SECONDS
kvers=$(bius_kvers) || die "run scripts/setup.sh"
mapfile -t kvers <<<"$kvers"
vmlog="$BIUS_BUILD/test-vm.log"	# every kernel's VM summary, in turn
rm -f "$vmlog"
on_exit() {
	local rc=$?
	local failed_step=$STEP
	step_times scripts/test.sh
	if [[ $rc -eq 0 ]]; then
		log "scripts/test.sh: all checks passed in $((SECONDS - T0)) s"
	else
		log "scripts/test.sh: FAILED in step '$failed_step' (after $((SECONDS - T0)) s)"
	fi
	# the VM suites' verdict, all kernels together, stays the last line
	[[ -f $vmlog ]] && vm_total "$vmlog"
	return 0
}
trap on_exit EXIT

run_step "1/11 cargo fmt --check"
cargo fmt --all -- --check

run_step "2/11 cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --all-features -- -D warnings

run_step "3/11 cargo test (unit + doc tests), the bench reports' unit tests"
cargo test --workspace --all-features
# benches/tools/biusplot.py needs matplotlib: Debian's python3 has it
# (setup.sh), a python3 earlier in PATH (pyenv, a venv) may not.
py=python3
if ! python3 -c 'import matplotlib' 2>/dev/null; then
	py=/usr/bin/python3
	"$py" -c 'import matplotlib' 2>/dev/null || die "no python3 with matplotlib: run scripts/setup.sh"
fi
"$py" -m unittest discover -s benches/tools -p 'test_*.py'
"$py" -m unittest discover -s benches/vm -p 'test_*.py'

run_step "4/11 the book: mdbook build, links checked"
bash scripts/book.sh

# Each kernel's bius.ko is kept in build/ko/<kver>/ for its VM suite; a
# build from clean (make clean first) shows every warning.
run_step "5/11 build the driver for ${kvers[*]} (warnings are errors)"
for kver in "${kvers[@]}"; do
	log "== driver for $kver"
	make -s -C driver KVER="$kver" clean
	make -C driver KVER="$kver" 2>&1 | tee "$BIUS_BUILD/driver-build.log"
	[[ -f driver/bius.ko ]] || die "make -C driver produced no driver/bius.ko"
	if grep -Ei 'warning:' "$BIUS_BUILD/driver-build.log"; then
		die "the driver build for $kver printed warnings (above; log: build/driver-build.log)"
	fi
	vermagic=$(modinfo -F vermagic driver/bius.ko | awk '{print $1}')
	[[ $vermagic == "$kver" ]] || die "driver/bius.ko is built for $vermagic, not $kver"
	mkdir -p "$BIUS_BUILD/ko/$kver"
	cp driver/bius.ko "$BIUS_BUILD/ko/$kver/bius.ko"
done

run_step "6/11 checkpatch (driver sources)"
bash scripts/checkpatch.sh

run_step "7/11 build tests/badinput and tests/fuzz"
for t in badinput/bius_badinput fuzz/bius_fuzz; do
	make -C "tests/${t%/*}"
	[[ -x tests/$t ]] || die "make -C tests/${t%/*} produced no tests/$t"
done

run_step "8/11 cargo build --release: biusctl and the examples"
cargo build --release -p biusctl
cargo build --release -p bius --all-features --examples
[[ -x target/release/biusctl ]] || die "no target/release/biusctl"

run_step "9/11 install check (DKMS build, make install/uninstall, udev, systemd)"
bash scripts/install-check.sh

run_step "10/11 cargo package (bius-sys, bius, bius-backends, bius-model, biusctl)"
bash scripts/package-check.sh

# every kernel's suite runs, even after one failed; the step fails after
vm_failed=()
for kver in "${kvers[@]}"; do
	run_step "11/11 VM integration tests on $kver"
	BIUS_KVER=$kver BIUS_KO=$BIUS_BUILD/ko/$kver/bius.ko bash scripts/vm-test.sh "$@" \
		| tee -a "$vmlog" || vm_failed+=("$kver")
done
[[ ${#vm_failed[@]} -eq 0 ]] || die "the VM suite failed on ${vm_failed[*]}"
