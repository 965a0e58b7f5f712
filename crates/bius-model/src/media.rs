//! [`Media`]: the part of a model that knows the hardware, and what it
//! counts.

use bius::Command;
use serde::Serialize;

use crate::time::Nanos;

/// The hardware side of a [`Model`](crate::Model): given each request and
/// the device time it arrives at, says when it completes, keeping the
/// state that decides it (busy dies, a buffer, an FTL, the head's place).
///
/// Called under the model's lock, one request at a time, in arrival order
/// across all queues; device time never goes backwards.  A new kind of
/// device is a new `Media` (see the crate's documentation for a worked
/// example).
pub trait Media: Send {
    /// When `command`, arriving at device time `now`, completes (not
    /// before `now`).
    fn serve(&mut self, command: Command, now: Nanos) -> Nanos;

    /// What the media counted so far.
    fn stats(&self) -> MediaStats {
        MediaStats::default()
    }
}

/// What a model's media counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MediaStats {
    /// Bytes the host wrote.
    pub host_bytes_written: u64,
    /// Bytes written to the media: the host's, plus what garbage
    /// collection moved.
    pub media_bytes_written: u64,
    /// Bytes garbage collection moved.
    pub gc_bytes_moved: u64,
    /// Blocks erased (or zones reset).
    pub erases: u64,
    /// Writes that waited for room in a full write buffer.
    pub buffer_stalls: u64,
}

impl MediaStats {
    /// The device's write amplification: media bytes written per host
    /// byte written (`None` before any write).
    pub fn write_amplification(&self) -> Option<f64> {
        (self.host_bytes_written > 0)
            .then(|| self.media_bytes_written as f64 / self.host_bytes_written as f64)
    }
}
