//! `sched_setscheduler(SCHED_BATCH)`: the scheduling policy of a thread
//! that serves a queue.

use nix::errno::Errno;
use nix::libc;

/// Puts the calling thread under `SCHED_BATCH`, at the nice value it has.
/// No privilege is needed to leave `SCHED_OTHER` for it.
pub(crate) fn set_batch() -> Result<(), Errno> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call, which
    // only reads it; pid 0 is the calling thread.
    Errno::result(unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) }).map(drop)
}

/// Whether the calling thread runs under `SCHED_BATCH`.
#[cfg(test)]
pub(crate) fn is_batch() -> Result<bool, Errno> {
    // SAFETY: takes and returns integers only; pid 0 is the calling thread.
    let policy = Errno::result(unsafe { libc::sched_getscheduler(0) })?;
    Ok(policy == libc::SCHED_BATCH)
}
