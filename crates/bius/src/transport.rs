//! The seam between the worker loop and whatever plays the kernel.

use std::io;
use std::sync::Arc;
use std::time::Instant;

pub(crate) use crate::kernel::{SharedBytes, WindowRange};

/// The byte streams of one connected hardware queue, as `bius.h` defines
/// them: [`fetch`](Transport::fetch) yields request records (`read()`),
/// [`complete`](Transport::complete) takes completion records (`write()`).
///
/// Implemented by the kernel's file descriptor and by the in-process
/// [`loopback`](crate::loopback).
pub(crate) trait Transport: Send + 'static {
    /// Fetches request records (and payload continuations), as `read()`
    /// does; 0 means the device has stopped.  After
    /// [`Transport::defer`], `WouldBlock` when there is nothing to fetch.
    fn fetch(&mut self, buf: &mut [u8]) -> io::Result<usize>;

    /// Completes requests: writes whole completion records, as `write()`
    /// does; returns the bytes of the records accepted before the first
    /// refused one, or the refusal's errno if the first one is refused.
    fn complete(&mut self, records: &[u8]) -> io::Result<usize>;

    /// Completes `records`, then, if every one was taken, fetches into
    /// `buf`: one `BIUS_IOC_COMPLETE_FETCH` (a single user/kernel crossing)
    /// where the transport has it, else [`complete_then_fetch`].
    fn complete_and_fetch(&mut self, records: &[u8], buf: &mut [u8]) -> Exchange {
        complete_then_fetch(self, records, buf)
    }

    /// The data of an outstanding mapped request (`BIUS_REQ_MAPPED`), or
    /// of one piece of it: `len` bytes at `offset` in the queue's data
    /// window, a read's buffer or the data of a write or zone append (which
    /// the kernel maps read-only).  `None` if there is no window or the
    /// range is outside it.  Never asked for a lent range.
    fn window(&mut self, offset: u64, len: usize) -> Option<SharedBytes<'_>> {
        let _ = (offset, len);
        None
    }

    /// The range of an outstanding mapped request's data in the window, to
    /// be used from any thread until the request is completed (see
    /// [`WindowRange`]); `None` where the transport cannot lend it (the
    /// worker then copies the data, as for a segmented request).
    fn lend(&mut self, offset: u64, len: usize) -> Option<WindowRange> {
        let _ = (offset, len);
        None
    }

    /// Prepares the queue for deferred completion: [`Transport::fetch`]
    /// no longer blocks, and the returned [`Wakeup`] ends a
    /// [`Transport::wait`] from any thread.
    fn defer(&mut self) -> io::Result<Arc<dyn Wakeup>>;

    /// Blocks until a request can be fetched (`true`), or the wakeup was
    /// rung (the ring is consumed) or `deadline` came (`false`): never
    /// before it, and as soon after it as the system's timers allow (no
    /// timer slack on the transport's side).  A stopped device counts as
    /// a request to fetch (the end of the stream).
    fn wait(&mut self, deadline: Option<Instant>) -> io::Result<bool>;
}

/// What a [`Transport::complete_and_fetch`] did.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// Bytes of the completion records taken.
    pub(crate) completed: usize,
    /// What the fetch returned if every record was taken; else the
    /// refusal of the first record not taken, and nothing was fetched.
    pub(crate) fetched: io::Result<usize>,
}

/// [`Transport::complete_and_fetch`] as two calls: [`Transport::complete`]
/// until every record is taken (a short count stops before a refused
/// record: completing again from there reports the refusal), then
/// [`Transport::fetch`].
pub(crate) fn complete_then_fetch<T: Transport + ?Sized>(
    transport: &mut T,
    records: &[u8],
    buf: &mut [u8],
) -> Exchange {
    let mut completed = 0;
    while completed < records.len() {
        match transport.complete(&records[completed..]) {
            Ok(n) if n > 0 => completed += n,
            Ok(_) => {
                return Exchange {
                    completed,
                    fetched: Err(nix::errno::Errno::EIO.into()),
                }
            }
            Err(err) => {
                return Exchange {
                    completed,
                    fetched: Err(err),
                }
            }
        }
    }
    Exchange {
        completed,
        fetched: transport.fetch(buf),
    }
}

/// Ends a [`Transport::wait`]; rings are not counted.
pub(crate) trait Wakeup: Send + Sync {
    /// Wakes the waiting worker, or the next wait if none is waiting.
    fn ring(&self);
}

/// The byte range `offset..offset + len` if it lies inside `size` bytes.
pub(crate) fn window_range(offset: u64, len: usize, size: usize) -> Option<std::ops::Range<usize>> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(len)?;
    (end <= size).then_some(start..end)
}
