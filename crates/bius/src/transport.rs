//! The seam between the worker loop and whatever plays the kernel.

use std::io;

/// The byte streams of one connected hardware queue, as `bius.h` defines
/// them: `read` yields request records, `write` takes completion records.
///
/// Implemented by the kernel's file descriptor and by the in-process
/// [`loopback`](crate::loopback).
pub(crate) trait Transport: Send + 'static {
    /// Reads request records (and payload continuations); 0 means the
    /// device has stopped.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;

    /// Writes whole completion records; returns the bytes of the records
    /// accepted before the first refused one, or the refusal's errno if
    /// the first one is refused.
    fn write(&mut self, records: &[u8]) -> io::Result<usize>;
}
