# shellcheck shell=bash
# Kernel log checks for the guest (sourced by init).  The kernel is booted
# with log_buf_len=16M so the ring buffer never wraps during a run: each
# check looks at the lines added since the previous check.

# Lines that mean the kernel is in trouble.
KLOG_BAD='BUG:|WARNING:|Oops|general protection|hung_task|blocked for more than|possible circular locking|possible recursive locking|lockdep|list_del corruption|list_add corruption|[Kk]ernel panic|UBSAN:|KASAN:|refcount_t:|soft lockup|rcu_sched self-detected|RCU stall|Call Trace:'
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
		return 1
	fi
	return 0
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
