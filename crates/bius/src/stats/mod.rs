//! Statistics and traces of a device's requests, kept by the framework for
//! every device and backend.
//!
//! Each queue's worker counts every request it serves: per [`Op`], the
//! requests, their bytes, failures and a histogram of service times (from
//! the worker receiving the request to its completion going back to the
//! kernel).  Of every completion that had a due time (a latency, a model)
//! it records how late it went back ([`Lateness`]).  On a zoned device it also follows every zone: bytes written,
//! appends, opens, closes, finishes and resets, the condition and write
//! pointer, and how full each zone was when it was reset or finished — the
//! figures a study of zone use needs ([`ZonedStats`]).  The counts are kept
//! before a completion goes to the kernel, so that after the I/O of a
//! workload has completed, [`StatsSnapshot::kernel`] equals what
//! `/sys/block/NAME/stat` says of the same requests.
//!
//! A trace ([`Statistics::start_trace`]) writes a record of every request
//! to a file, in CSV or binary (the formats are in [`TraceRecord`]'s
//! module documentation, [`trace`]).
//!
//! ```
//! use bius::loopback::Loopback;
//! use bius::{BlockDevice, DeviceBuilder, IoError, Op};
//!
//! struct Zeroes;
//!
//! impl BlockDevice for Zeroes {
//!     fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
//!         buf.fill(0);
//!         Ok(())
//!     }
//!     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
//!         Ok(())
//!     }
//! }
//!
//! let mut kernel = Loopback::new(&DeviceBuilder::new(1 << 20)).unwrap();
//! kernel.start(Zeroes).unwrap();
//! kernel.read(0, 0, 4096).unwrap();
//! let stats = kernel.statistics().snapshot();
//! assert_eq!(stats.op(Op::Read).count, 1);
//! assert_eq!(stats.kernel.read_sectors, 8);
//! kernel.stop().unwrap();
//! ```

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::IoError;
use crate::op::Op;
use crate::request::Reply;
use crate::worker::Header;
use crate::zone::layout::ZoneLayout;

mod ops;
pub mod trace;
mod zones;

pub use ops::{KernelCounts, LatencySummary, Lateness, OpStats};
pub use trace::{
    TraceError, TraceFormat, TraceRecord, TraceSummary, TRACE_MAGIC, TRACE_RECORD_SIZE,
};
#[cfg(feature = "control-socket")]
pub(crate) use zones::condition_name;
pub use zones::{ZoneEvents, ZoneStats, ZonedStats, FILL_BUCKETS};

use ops::QueueTable;
use trace::Tracer;
use zones::ZoneTracker;

/// A device's statistics at one moment: a [`Statistics::snapshot`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct StatsSnapshot {
    /// Whether the device keeps statistics
    /// ([`DeviceBuilder::statistics`](crate::DeviceBuilder::statistics));
    /// if not, everything else is zero.
    pub enabled: bool,
    /// Time since the device started or the statistics were reset.
    #[cfg_attr(feature = "serde", serde(rename = "elapsed_s", with = "seconds"))]
    pub elapsed: Duration,
    /// Per operation, indexed by op code ([`StatsSnapshot::op`]).
    #[cfg_attr(feature = "serde", serde(with = "ops_by_name"))]
    pub ops: [OpStats; 12],
    /// The same requests as `/sys/block/NAME/stat` counts them.
    pub kernel: KernelCounts,
    /// How late the timed completions went back, every queue's.
    #[cfg_attr(feature = "serde", serde(default))]
    pub lateness: Lateness,
    /// The zones of a zoned device.
    pub zoned: Option<ZonedStats>,
    /// The running or last trace.
    pub trace: TraceSummary,
}

impl StatsSnapshot {
    /// The statistics of one operation.
    pub fn op(&self, op: Op) -> &OpStats {
        &self.ops[op as usize]
    }
}

/// [`StatsSnapshot::elapsed`] as seconds, a float.
#[cfg(feature = "serde")]
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        elapsed: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(elapsed.as_secs_f64())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Duration::try_from_secs_f64(seconds).map_err(serde::de::Error::custom)
    }
}

/// [`StatsSnapshot::ops`] as a map from [`Op::name`] to its statistics; an op
/// missing is zero, a name this crate does not know is left out.
#[cfg(feature = "serde")]
mod ops_by_name {
    use std::collections::HashMap;

    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::{Op, OpStats};

    pub(super) fn serialize<S: Serializer>(
        ops: &[OpStats; 12],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(ops.len()))?;
        for (op, stats) in Op::ALL.iter().zip(ops) {
            map.serialize_entry(op.name(), stats)?;
        }
        map.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<[OpStats; 12], D::Error> {
        let mut by_name = HashMap::<String, OpStats>::deserialize(deserializer)?;
        Ok(Op::ALL.map(|op| by_name.remove(op.name()).unwrap_or_default()))
    }
}

/// The statistics of a running device (cheap to clone: a handle).  Get it
/// from [`Device::statistics`](crate::Device::statistics) (or a loopback's);
/// it stays valid after the device has stopped.
#[derive(Clone)]
pub struct Statistics(Arc<Recorder>);

impl std::fmt::Debug for Statistics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Statistics")
            .field("queues", &self.0.queues.len())
            .field("zoned", &self.0.zones.is_some())
            .finish()
    }
}

/// Statistics that no device records into: all zero, for tests of code
/// that reports statistics.
impl Default for Statistics {
    fn default() -> Self {
        Statistics::new(1, None, true)
    }
}

impl Statistics {
    /// Statistics for `queues` queues of a device zoned with `layout`, if
    /// it is; kept only if `enabled`.
    pub(crate) fn new(queues: u32, layout: Option<&ZoneLayout>, enabled: bool) -> Self {
        Statistics(Arc::new(Recorder {
            enabled,
            queues: (0..queues.max(1)).map(|_| QueueTable::new()).collect(),
            zones: layout.map(ZoneTracker::new),
            since: Mutex::new(Instant::now()),
            tracer: Tracer::default(),
        }))
    }

    /// The statistics now, without each zone's
    /// ([`ZonedStats::per_zone`] is empty).
    pub fn snapshot(&self) -> StatsSnapshot {
        self.0.snapshot(false)
    }

    /// The statistics now, with each zone's ([`ZonedStats::per_zone`]; what
    /// a control socket's stats request with `per_zone` answers).
    pub fn snapshot_per_zone(&self) -> StatsSnapshot {
        self.0.snapshot(true)
    }

    /// Starts counting again from zero.  The zones' conditions and write
    /// pointers stay; a trace goes on.
    pub fn reset(&self) {
        let recorder = &self.0;
        *recorder
            .since
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        for queue in &recorder.queues {
            queue.reset();
        }
        if let Some(zones) = &recorder.zones {
            zones.reset_counts();
        }
    }

    /// Starts writing a record of every request into a new file at `path`
    /// (replacing one there).  One trace runs at a time.
    pub fn start_trace(&self, path: &Path, format: TraceFormat) -> Result<(), TraceError> {
        if !self.0.enabled {
            return Err(TraceError::Disabled);
        }
        self.0.tracer.start(path, format)
    }

    /// Stops the trace and waits until its file is written; its summary
    /// (that of the last trace if none runs).
    pub fn stop_trace(&self) -> TraceSummary {
        self.0.tracer.stop()
    }

    /// The worker's end: what a queue's worker records through.
    pub(crate) fn recorder(&self) -> Arc<Recorder> {
        Arc::clone(&self.0)
    }
}

/// What the workers record into.
pub(crate) struct Recorder {
    enabled: bool,
    queues: Vec<QueueTable>,
    zones: Option<ZoneTracker>,
    since: Mutex<Instant>,
    tracer: Tracer,
}

impl Recorder {
    /// Counts a request that queue `queue` received at `arrived` and is
    /// about to complete with `result`, at or after `due` if it had a due
    /// time.
    pub(crate) fn complete(
        &self,
        queue: u32,
        hdr: &Header,
        result: &Result<Reply, IoError>,
        arrived: Instant,
        due: Option<Instant>,
    ) {
        if !self.enabled {
            return;
        }
        let op = hdr.op;
        let now = Instant::now();
        let latency = now.saturating_duration_since(arrived);
        let late = due.map(|due| now.saturating_duration_since(due));
        let len = if ops::has_bytes(op) {
            u64::from(hdr.raw.len)
        } else {
            0
        };
        let table = &self.queues[queue as usize % self.queues.len()];
        table.record(op, len, result.is_err(), latency, late);
        let offset = hdr.offset();
        if let (Some(zones), Ok(reply)) = (&self.zones, result) {
            match reply {
                Reply::Zones(reported) => zones.reported(reported),
                Reply::Appended(at) => zones.succeeded(op, *at, len),
                Reply::Done => zones.succeeded(op, offset, len),
            }
        }
        self.tracer.record(arrived, |time_ns| TraceRecord {
            time_ns,
            queue: queue as u16,
            op,
            offset: if matches!(op, Op::Flush | Op::ZoneResetAll) {
                0
            } else {
                offset
            },
            len: len as u32,
            latency_ns: latency.as_nanos() as u64,
            result: result
                .as_ref()
                .map_or_else(|err| -(err.errno() as i32), |_| 0),
        });
    }

    fn snapshot(&self, per_zone: bool) -> StatsSnapshot {
        let since = *self.since.lock().unwrap_or_else(PoisonError::into_inner);
        let (ops, lateness) = ops::sum(&self.queues);
        StatsSnapshot {
            enabled: self.enabled,
            elapsed: since.elapsed(),
            kernel: KernelCounts::of(&ops),
            ops,
            lateness,
            zoned: self.zones.as_ref().map(|zones| zones.snapshot(per_zone)),
            trace: self.tracer.summary(),
        }
    }
}
