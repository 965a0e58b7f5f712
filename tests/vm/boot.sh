# shellcheck shell=bash
# Host side of the QEMU bench: build the initramfs and boot the VM
# (sourced by scripts/vm-test.sh, scripts/demo.sh, scripts/bench.sh and
# scripts/zone-size.sh).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

VM_DIR="$BIUS_ROOT/tests/vm"

# vm_new_run DIR KEEP [PREFIX]: a new run: sets run (PREFIX<date>-<pid>),
# res ($BIUS_BUILD/DIR/$run, its results) and work ($BIUS_BUILD/vm/$run
# under DIR's name, the initramfs staging, removed at exit); DIR/latest
# points to it unless there is a PREFIX; only the newest KEEP runs of
# DIR/PREFIX are kept
vm_new_run() {
	local dir=$BIUS_BUILD/$1 keep=$2 prefix=${3:-}
	run=$prefix$(date +%Y%m%d-%H%M%S)-$$
	res=$dir/$run
	work=$BIUS_BUILD/vm/$1-$run
	mkdir -p "$res" "$work"
	# shellcheck disable=SC2064 # $work is expanded now, on purpose
	trap "rm -rf '$work'" EXIT
	[[ -n $prefix ]] || ln -sfn "$run" "$dir/latest"
	ls -1d "$dir/$prefix"2*/ 2>/dev/null | head -n -"$keep" | xargs -r rm -rf
}

# vm_slow KVER: how many times slower than Debian's kernels the guest runs
# KVER under TCG, the one factor applied to every time limit of a run (the
# VM's hard limit here, each test's own limit and waits in the guest, where
# vm-test.sh passes it as biusvm.slow=K): BIUS_VM_SLOW if set, else 5 for a
# debug kernel of scripts/debug-kernel.sh (KASAN, lockdep: 4-5x), else 1
vm_slow() {
	if [[ -n ${BIUS_VM_SLOW:-} ]]; then
		[[ $BIUS_VM_SLOW =~ ^[1-9][0-9]*$ ]] || die "BIUS_VM_SLOW=$BIUS_VM_SLOW: not a positive integer"
		echo "$BIUS_VM_SLOW"
	elif [[ $1 == *-bius-debug ]]; then
		echo 5
	else
		echo 1
	fi
}

# vm_build_release KVER WHO: build bius.ko for KVER and the release biusctl
# (for the benches; WHO prefixes the log line)
vm_build_release() {
	log "$2: building bius.ko and biusctl (release)"
	make -s -C "$BIUS_ROOT/driver" KVER="$1" >&2 || die "make -C driver KVER=$1 failed"
	(cd "$BIUS_ROOT" && cargo build -q --release -p biusctl) || die "cargo build --release -p biusctl failed"
}

# vm_build_initramfs KVER DIR [OPTION...]: build DIR/initramfs.cpio.gz
# (staging in DIR/root, so concurrent runs do not collide), print its path;
# OPTIONs go to mkinitramfs.sh (--bin, --module, --file, --ko, --biusctl)
vm_build_initramfs() {
	local kver=$1 out="$2/initramfs.cpio.gz" t0=$SECONDS
	shift 2
	bash "$VM_DIR/mkinitramfs.sh" "$@" "$kver" "$out" >&2 || die "building the initramfs failed"
	log "bench: initramfs built in $((SECONDS - t0)) s"
	printf '%s\n' "$out"
}

# vm_boot KVER INITRD RESULTS-DIR TIMEOUT-SECONDS APPEND...
# Boot the VM under TCG; the serial console goes to stdout and to
# RESULTS-DIR/console.log, RESULTS-DIR is the guest's /results (9p).
# Returns QEMU's status, or 124 when the hard timeout killed it.  QEMU's
# status says nothing about the tests (a guest panic also exits 0).
# Guest RAM: BIUS_VM_MEM (default 3G); CPU model: BIUS_VM_CPU (QEMU's
# -cpu, default max).
vm_boot() {
	local kver=$1 initrd=$2 res=$3 limit=$4
	shift 4
	local kernel=/boot/vmlinuz-$kver
	[[ -r $kernel ]] || die "no kernel image $kernel"
	command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing (run scripts/setup.sh)"
	mkdir -p "$res"
	# A KASAN kernel runs with 4-level page tables: with LA57, an interrupt
	# in identify_cpu() (which clears the CPU's feature bits, LA57 too,
	# before it reads them again) is reported as a "wild-memory-access" of
	# the irq descriptor, KASAN then taking the 5-level direct map for a
	# 4-level one (6.12.117-bius-debug, in cpu_detect(), 4 ms into boot).
	local cpu=${BIUS_VM_CPU:-max}
	[[ $kver == *-bius-debug ]] && cpu+=,la57=off
	local qemu=(qemu-system-x86_64 -nodefaults -no-user-config
		-accel tcg,thread=multi,tb-size=256 -cpu "$cpu" -smp 2 -m "${BIUS_VM_MEM:-3G}"
		-kernel "$kernel" -initrd "$initrd"
		-append "console=ttyS0 quiet loglevel=3 panic=-1 log_buf_len=16M $*"
		-display none -no-reboot -monitor none -serial stdio
		-virtfs "local,path=$res,mount_tag=results,security_model=none,id=results")
	log "bench: booting $kernel (TCG, 2 vCPUs, ${BIUS_VM_MEM:-3G} RAM; hard timeout ${limit} s)"
	local rc
	# stdin from /dev/null: QEMU must not put a terminal in raw mode;
	# -k: QEMU ignoring SIGTERM gets SIGKILL.
	{
		timeout -k 10 "$limit" "${qemu[@]}" </dev/null 2>&1
		echo $? >"$res/.qemu-status"
	} | sed -u 's/\r$//' | tee "$res/console.log"
	rc=$(cat "$res/.qemu-status")
	[[ $rc -eq 124 || $rc -eq 137 ]] && { log "bench: VM killed after the hard timeout of $limit s"; rc=124; }
	return "$rc"
}

# vm_fio_zbd: fio's zoned test suite (t/zbd) of the fio release installed
# here, from Debian's source package (Debian does not package the suite):
# downloaded once into build/fio-zbd/; prints the t/zbd directory.
vm_fio_zbd() {
	local version dir tarball url
	version=$(fio --version | sed -n 's/^fio-\([0-9.]*\).*/\1/p')
	[[ -n $version ]] || { echo "vm_fio_zbd: cannot tell the version of fio" >&2; return 1; }
	dir="$BIUS_BUILD/fio-zbd/fio-$version/t/zbd"
	if [[ ! -x $dir/test-zbd-support ]]; then
		tarball="fio_$version.orig.tar.gz"
		url="http://deb.debian.org/debian/pool/main/f/fio/$tarball"
		mkdir -p "$BIUS_BUILD/fio-zbd"
		curl -sSfL --retry 2 -o "$BIUS_BUILD/fio-zbd/$tarball" "$url" \
			|| { echo "vm_fio_zbd: cannot download $url" >&2; return 1; }
		tar -xzf "$BIUS_BUILD/fio-zbd/$tarball" -C "$BIUS_BUILD/fio-zbd" "fio-$version/t/zbd" \
			|| { echo "vm_fio_zbd: $tarball has no t/zbd" >&2; return 1; }
	fi
	echo "$dir"
}
