# shellcheck shell=bash
# Kernel log checks for the guest (sourced by init).  The kernel is booted
# with log_buf_len=16M so the ring buffer never wraps during a run: each
# check looks at the lines added since the previous check.

# Lines that mean the kernel is in trouble: the first line of each report
# class (strings as 6.12 prints them; the debug kernel's too): oops, BUG
# (KASAN's "BUG: KASAN:", "BUG: sleeping function called", "BUG: soft
# lockup", "BUG: workqueue lockup"...), WARNING (lockdep's reports: circular,
# recursive, inconsistent, suspicious RCU usage, lock held when returning
# to user space...), lockdep's INFO lines, UBSAN, debugobjects (ODEBUG),
# list debugging, refcount, hung tasks, RCU stalls, kmemleak.  Not a bare
# "lockdep": the debug kernel's banner says "RCU lockdep checking is enabled".
KLOG_BAD='BUG:|kernel BUG at|WARNING:|Oops|general protection|DEBUG_LOCKS_WARN_ON|INFO: lockdep is turned off|INFO: trying to register non-static key|UBSAN:|KASAN:|ODEBUG:|list_(add|del) corruption|refcount_t:|blocked for more than|detected stalls? on CPU|[Kk]ernel panic|unreferenced object|suspected memory leaks?|Call Trace:'
KLOG_SEEN=0

dmesg_all() { dmesg; }

# klog_check NAME: print the kernel log lines added since the last check
# (as "klog: ..."); on trouble print the offending lines, return 1.
klog_check() {
	local name=$1 all new bad
	sleep 0.2
	all=$(dmesg)
	new=$(printf '%s\n' "$all" | tail -n +$((KLOG_SEEN + 1)))
	KLOG_SEEN=$(printf '%s\n' "$all" | wc -l)
	[[ -n $new ]] && printf '%s\n' "$new" | sed 's/^/klog: /'
	bad=$(printf '%s\n' "$new" | grep -E "$KLOG_BAD")
	if [[ -n $bad ]]; then
		echo "FAIL: kernel log problems during $name:"
		printf '%s\n' "$bad" | sed 's/^/KERNEL: /'
		printf '%s\n' "$new" | klog_chain
		return 1
	fi
	return 0
}

# klog_chain: the call chain of the first report on stdin as one line,
# innermost first ("TRACE: schedule < ... < bius_release < __fput"), so
# that a summary which shows a report's first lines shows where it was;
# frames the unwinder is unsure of ("? f+0x...") are left out.
klog_chain() {
	awk -v bad="$KLOG_BAD" '
		!seen && $0 ~ bad { seen = 1; next }
		seen && /Call Trace:|<TASK>|<\/TASK>/ { intrace = 1; next }
		seen && intrace && /\] +\? / { next }	# an unreliable frame
		seen && intrace {
			if (!match($0, /[A-Za-z_][A-Za-z0-9_.]*\+0x/)) { if (n) exit; next }
			f = substr($0, RSTART, RLENGTH - 3)
			chain = n++ ? chain " < " f : f
			if (n == 24) exit
		}
		END { if (n) print "TRACE: " chain }'
}

# dstate_check NAME: no task may stay in D state (uninterruptible) once a
# test is over: poll 5 s, then list the stuck tasks and return 1.
dstate() { ps -eo stat,pid,wchan:32,args | awk '$1 ~ /^D/'; }
dstate_check() {
	local i
	for ((i = 0; i < 25; i++)); do
		[[ -z $(dstate) ]] && return 0
		sleep 0.2
	done
	echo "FAIL: tasks in D state after $1:"
	dstate | sed 's/^/KERNEL: D-state: /'
	return 1
}

# kmemleak_check: on a kernel with kmemleak (the debug kernels; Debian's
# have none: return 2, nothing checked), scan twice (an object is reported
# once two scans found it unreferenced), list every suspected leak, and
# return 1 if one's allocation backtrace involves bius: a bius symbol, or a
# raw address, a module unloaded since (rmmod bius ends the suite).
KMEMLEAK=/sys/kernel/debug/kmemleak
kmemleak_check() {
	local leaks ours
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	[[ -e $KMEMLEAK ]] || return 2
	if ! { echo scan >"$KMEMLEAK" && sleep 6 && echo scan >"$KMEMLEAK"; }; then
		echo "FAIL: kmemleak cannot scan (disabled? $(dmesg | grep -m 1 'kmemleak:.*disabled'))"
		return 1
	fi
	leaks=$(cat "$KMEMLEAK")
	ours=$(printf '%s\n' "$leaks" | kmemleak_ours)
	echo "kmemleak: $(grep -c '^unreferenced object' <<<"$leaks") suspected leaks," \
		"$(grep -c '^unreferenced object' <<<"$ours") of them allocated by bius"
	[[ -n $leaks ]] && printf '%s\n' "$leaks" | sed 's/^/kmemleak: /'
	[[ -z $ours ]] && return 0
	echo "FAIL: kmemleak: memory allocated by bius was leaked:"
	printf '%s\n' "$ours" | sed 's/^/KERNEL: /'
	return 1
}

# kmemleak_ours: the reports of stdin (kmemleak's format) whose backtrace
# names bius or an address no symbol covers any more
kmemleak_ours() {
	awk 'function flush() { if (ours) printf "%s", block; block = ""; ours = 0 }
		/^unreferenced object/ { flush() }
		{ block = block $0 "\n" }
		/^ +\[<[0-9a-f]+>\] / && (/bius/ || / 0x[0-9a-f]+$/) { ours = 1 }
		END { flush() }'
}
