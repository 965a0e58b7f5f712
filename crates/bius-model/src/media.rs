//! [`Media`]: the part of a model that knows the hardware, and what it
//! counts.

use bius::{Command, IoError, Reply};
use serde::Serialize;

use crate::time::Nanos;

/// The hardware side of a [`Model`](crate::Model): given each request the
/// device answered, with its answer, and the device time it arrived at,
/// says when it completes, keeping the state that decides it (busy dies, a
/// buffer, an FTL, the head's place, how far each zone is written).
///
/// Called under the model's lock, one request at a time, in the order the
/// device answered them across all queues (see
/// [`DeviceModel`](bius::DeviceModel#when-it-is-called)); device time never
/// goes backwards.  The media learns the device's state from the answers
/// (where an append landed, that a zone was reset) instead of guessing
/// it.  A new kind of device is a new `Media` (see the crate's
/// documentation for a worked example).
pub trait Media: Send {
    /// When `command`, arriving at device time `now`, completes (not
    /// before `now`), the device having carried it out with `reply`: a
    /// zone append's [`Reply::Appended`] is where its data landed; a zone
    /// reset or finish left its zone empty or full.
    fn serve(&mut self, command: Command, reply: &Reply, now: Nanos) -> Nanos;

    /// When `command`, arriving at device time `now`, completes (not
    /// before `now`), the device having refused it with `error` (a write
    /// off a zone's write pointer or into a full zone, an open beyond the
    /// open-zone limit, ...).  A drive refuses a command as it parses it,
    /// before any media access: a refusal takes the command's fixed
    /// overhead and leaves the media as it was.  By default at once
    /// (`now`): a media with a fixed time per command adds it.
    fn refuse(&mut self, command: Command, error: IoError, now: Nanos) -> Nanos {
        let _ = (command, error);
        now
    }

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
