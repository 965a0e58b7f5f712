//! `prctl(PR_SET_IO_FLUSHER)`: a thread that serves a block device marked
//! so that its memory allocations do not wait on the I/O it serves.

use nix::errno::Errno;

/// `PR_SET_IO_FLUSHER` and `PR_GET_IO_FLUSHER` of `<linux/prctl.h>`
/// (Linux 5.6), which the libc crate does not define for Linux.
const PR_SET_IO_FLUSHER: nix::libc::c_int = 57;
const PR_GET_IO_FLUSHER: nix::libc::c_int = 58;

/// The calling thread marked as an I/O flusher (`PR_SET_IO_FLUSHER`) for
/// as long as this lives: its memory allocations do not recurse into I/O
/// reclaim, and it is throttled only against the device it writes to.
/// Threads it spawns meanwhile inherit the mark and keep it; dropping the
/// guard restores the calling thread's own previous mark.
#[derive(Debug)]
pub(crate) struct IoFlusherMark {
    previous: nix::libc::c_int,
}

impl IoFlusherMark {
    /// Marks the calling thread; needs `CAP_SYS_RESOURCE` (else `EPERM`).
    pub(crate) fn set() -> Result<Self, Errno> {
        // SAFETY: prctl with integer arguments only; PR_GET_IO_FLUSHER
        // reads no memory and returns the mark.
        let previous = Errno::result(unsafe { nix::libc::prctl(PR_GET_IO_FLUSHER, 0, 0, 0, 0) })?;
        set_io_flusher(1)?;
        Ok(IoFlusherMark { previous })
    }
}

impl Drop for IoFlusherMark {
    fn drop(&mut self) {
        if let Err(errno) = set_io_flusher(self.previous) {
            log::warn!("restoring this thread's PR_SET_IO_FLUSHER mark: {errno}");
        }
    }
}

fn set_io_flusher(mark: nix::libc::c_int) -> Result<(), Errno> {
    // SAFETY: prctl with integer arguments only; it touches no memory of
    // ours.  The kernel takes the value as an unsigned long.
    Errno::result(unsafe {
        nix::libc::prctl(PR_SET_IO_FLUSHER, mark as nix::libc::c_ulong, 0, 0, 0)
    })
    .map(drop)
}
