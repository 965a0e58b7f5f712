//! `PR_SET_IO_FLUSHER` for the threads that serve a device: the marks the
//! builder takes for its workers, and [`IoFlusherScope`] for a backend's
//! own threads.

use nix::errno::Errno;

use crate::kernel::IoFlusherMark;

/// Marks the calling thread as an I/O flusher until the mark is dropped,
/// or logs why it cannot.
pub(super) fn mark_io_flusher() -> Option<IoFlusherMark> {
    IoFlusherMark::set()
        .inspect_err(|errno| {
            log::warn!("cannot mark the queue threads as I/O flushers (PR_SET_IO_FLUSHER): {errno}; under memory pressure the device may deadlock in reclaim")
        })
        .ok()
}

/// The calling thread marked as an I/O flusher (`PR_SET_IO_FLUSHER`) while
/// this lives, and so every thread it starts meanwhile (they keep the
/// mark): for a backend that starts threads of its own which do the
/// device's I/O (an io_uring engine, a socket reader), made while it lives.
/// Dropping it restores the thread's previous mark.  See
/// [`DeviceBuilder::io_flusher`](crate::DeviceBuilder::io_flusher) for why.
///
/// ```no_run
/// let disk = {
///     let _flusher = bius::IoFlusherScope::enter()?;
///     std::thread::spawn(|| { /* the backend's I/O thread: marked */ })
/// };
/// # Ok::<(), bius::Errno>(())
/// ```
#[derive(Debug)]
pub struct IoFlusherScope {
    /// Restores the previous mark when dropped.
    _mark: IoFlusherMark,
}

impl IoFlusherScope {
    /// Marks the calling thread; needs `CAP_SYS_RESOURCE` (else `EPERM`).
    pub fn enter() -> Result<Self, Errno> {
        IoFlusherMark::set().map(|mark| IoFlusherScope { _mark: mark })
    }
}
