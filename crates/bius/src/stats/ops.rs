//! Requests by operation ([`Op`]): what the kernel counts of each, and the
//! per-queue table of counts, bytes, errors and service times, and of how
//! late timed completions went back ([`Lateness`]).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::op::Op;

/// Whether a request's length counts as bytes: data (reads, writes,
/// appends) or a range (discard, write zeroes), as opposed to none (flush,
/// zone management) or a report's room.
pub(crate) fn has_bytes(op: Op) -> bool {
    op.has_data() || matches!(op, Op::Discard | Op::WriteZeroes)
}

/// The group of `/sys/block/NAME/stat` that counts `op`, as the kernel
/// sorts requests: discards apart, flushes apart, and every other op by
/// its direction (`op_is_write()`: the odd op numbers, so that every zone
/// operation counts as a write).  Zone reports are driver-internal
/// passthrough requests, not counted.
fn kernel_group(op: Op) -> Option<KernelGroup> {
    Some(match op {
        Op::Read => KernelGroup::Read,
        Op::ZoneOpen
        | Op::ZoneFinish
        | Op::Write
        | Op::WriteZeroes
        | Op::ZoneClose
        | Op::ZoneReset
        | Op::ZoneResetAll
        | Op::ZoneAppend => KernelGroup::Write,
        Op::Discard => KernelGroup::Discard,
        Op::Flush => KernelGroup::Flush,
        Op::ReportZones => return None,
    })
}

enum KernelGroup {
    Read,
    Write,
    Discard,
    Flush,
}

/// The requests of one operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OpStats {
    /// Requests served (successfully or not).
    pub count: u64,
    /// Their bytes: the data of reads, writes and appends, the range of
    /// discards and write-zeroes, none for the others.
    pub bytes: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Their service time in the daemon.
    pub latency_ns: LatencySummary,
}

/// Service times, in nanoseconds: from the worker receiving a request to
/// its completion going to the kernel (queueing in the daemon and any
/// modelled latency included).  Percentiles are within 1%.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LatencySummary {
    /// Mean.
    pub mean: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Longest.
    pub max: u64,
}

/// How late the completions that had a due time went to the kernel: a
/// device's [`latency`](crate::DeviceBuilder::latency), its
/// [`model`](crate::DeviceModel) or its own
/// [`Io::delay_until`](crate::Io::delay_until) set the time, the worker
/// wrote the completion this long after it (from the due time to the
/// worker handing the completion to the kernel, in the same turn of its
/// loop as its write).  What the kernel then takes to end the request and
/// wake its submitter is not in it.  A completion whose device answered
/// after its due time counts as late by that much too.
///
/// ```
/// let lateness = bius::stats::Lateness::default();
/// assert_eq!((lateness.count, lateness.ns.p99), (0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Lateness {
    /// Completions that had a due time.
    pub count: u64,
    /// How late they were, in nanoseconds (never early; on time to the
    /// nanosecond counts as 1).
    pub ns: LatencySummary,
}

/// The requests as `/sys/block/NAME/stat` counts them: I/Os and sectors by
/// group, as the kernel sorts requests (discards apart, flushes apart,
/// every other operation by its direction, zone reports not at all;
/// failed requests count too, as in the kernel).  After the same requests, these are the
/// kernel's figures exactly, provided the daemon served every request the
/// kernel completed (none timed out or failed by a dying daemon).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct KernelCounts {
    /// Reads.
    pub read_ios: u64,
    /// Sectors read.
    pub read_sectors: u64,
    /// Writes, write-zeroes and every zone operation but reports (appends,
    /// opens, closes, finishes, resets).
    pub write_ios: u64,
    /// Sectors written (appends' and write-zeroes' included).
    pub write_sectors: u64,
    /// Discards.
    pub discard_ios: u64,
    /// Sectors discarded.
    pub discard_sectors: u64,
    /// Flushes.
    pub flush_ios: u64,
}

impl KernelCounts {
    /// The counts of `ops` (indexed by op code).
    pub(crate) fn of(ops: &[OpStats; 12]) -> Self {
        let mut counts = KernelCounts::default();
        for (op, stats) in Op::ALL.iter().zip(ops) {
            let sectors = stats.bytes / 512;
            let (ios, secs) = match kernel_group(*op) {
                Some(KernelGroup::Read) => (&mut counts.read_ios, &mut counts.read_sectors),
                Some(KernelGroup::Write) => (&mut counts.write_ios, &mut counts.write_sectors),
                Some(KernelGroup::Discard) => {
                    (&mut counts.discard_ios, &mut counts.discard_sectors)
                }
                Some(KernelGroup::Flush) => {
                    counts.flush_ios += stats.count;
                    continue;
                }
                None => continue,
            };
            *ios += stats.count;
            *secs += sectors;
        }
        counts
    }
}

/// Longest time the histograms hold (longer ones count as this).
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// A histogram of times in ns (service times, lateness); made at the
/// first one.
#[derive(Clone, Default)]
struct Times(Option<Histogram<u64>>);

impl Times {
    fn record(&mut self, time: Duration) {
        let ns = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
        self.0
            .get_or_insert_with(new_histogram)
            .saturating_record(ns.clamp(1, MAX_LATENCY_NS));
    }

    fn add_to(&self, total: &mut Times) {
        if let Some(times) = &self.0 {
            let sum = total.0.get_or_insert_with(new_histogram);
            // Same bounds: adding cannot fail.
            let _ = sum.add(times);
        }
    }

    fn count(&self) -> u64 {
        self.0.as_ref().map_or(0, Histogram::len)
    }

    fn summary(&self) -> LatencySummary {
        self.0
            .as_ref()
            .map_or_else(LatencySummary::default, |h| LatencySummary {
                mean: h.mean().round() as u64,
                p50: h.value_at_quantile(0.5),
                p90: h.value_at_quantile(0.9),
                p99: h.value_at_quantile(0.99),
                p999: h.value_at_quantile(0.999),
                max: h.max(),
            })
    }
}

/// One operation's counters in a queue's table.
#[derive(Clone)]
struct OpCounters {
    count: u64,
    bytes: u64,
    errors: u64,
    /// Service times.
    latency: Times,
}

impl OpCounters {
    const EMPTY: OpCounters = OpCounters {
        count: 0,
        bytes: 0,
        errors: 0,
        latency: Times(None),
    };

    fn record(&mut self, bytes: u64, failed: bool, latency: Duration) {
        self.count += 1;
        self.bytes += bytes;
        self.errors += u64::from(failed);
        self.latency.record(latency);
    }

    fn add_to(&self, total: &mut OpCounters) {
        total.count += self.count;
        total.bytes += self.bytes;
        total.errors += self.errors;
        self.latency.add_to(&mut total.latency);
    }

    fn summary(&self) -> OpStats {
        OpStats {
            count: self.count,
            bytes: self.bytes,
            errors: self.errors,
            latency_ns: self.latency.summary(),
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    // Two significant digits from 1 ns to an hour: ~36 KiB.
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 2).expect("valid histogram bounds")
}

/// A queue's counters: per operation, and the lateness of its timed
/// completions.
#[derive(Clone)]
struct QueueCounters {
    ops: [OpCounters; 12],
    lateness: Times,
}

impl QueueCounters {
    const EMPTY: QueueCounters = QueueCounters {
        ops: [OpCounters::EMPTY; 12],
        lateness: Times(None),
    };
}

/// The counters of one hardware queue's requests.  Only its worker
/// records; readers lock it briefly to add it up.
pub(crate) struct QueueTable(Mutex<QueueCounters>);

impl QueueTable {
    pub(crate) fn new() -> Self {
        QueueTable(Mutex::new(QueueCounters::EMPTY))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueCounters> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a request of `op` with `bytes`, failed or not, served in
    /// `latency`, and completed `late` after its due time if it had one.
    pub(crate) fn record(
        &self,
        op: Op,
        bytes: u64,
        failed: bool,
        latency: Duration,
        late: Option<Duration>,
    ) {
        let mut counters = self.lock();
        counters.ops[op as usize].record(bytes, failed, latency);
        if let Some(late) = late {
            counters.lateness.record(late);
        }
    }

    pub(crate) fn reset(&self) {
        *self.lock() = QueueCounters::EMPTY;
    }
}

/// The per-operation statistics of all `queues`, added up, and the
/// lateness of their timed completions.
pub(crate) fn sum(queues: &[QueueTable]) -> ([OpStats; 12], Lateness) {
    let mut total = QueueCounters::EMPTY;
    for queue in queues {
        let table = queue.lock();
        for (counters, sum) in table.ops.iter().zip(total.ops.iter_mut()) {
            counters.add_to(sum);
        }
        table.lateness.add_to(&mut total.lateness);
    }
    let lateness = Lateness {
        count: total.lateness.count(),
        ns: total.lateness.summary(),
    };
    (total.ops.map(|counters| counters.summary()), lateness)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_add_up_and_group_as_the_kernel() {
        let queues = [QueueTable::new(), QueueTable::new()];
        let ms = Duration::from_millis;
        queues[0].record(Op::Read, 4096, false, ms(1), Some(ms(2)));
        queues[1].record(Op::Read, 8192, true, ms(3), Some(ms(4)));
        queues[1].record(Op::ZoneReset, 0, false, ms(2), None);
        queues[0].record(Op::ZoneFinish, 0, false, ms(2), None);
        queues[0].record(Op::ZoneAppend, 512, false, ms(2), None);
        queues[0].record(Op::Discard, 1 << 20, false, ms(2), None);
        queues[0].record(Op::Flush, 0, false, ms(2), None);
        queues[0].record(Op::ReportZones, 0, false, ms(2), None);
        let (ops, lateness) = sum(&queues);
        assert_eq!(lateness.count, 2);
        assert!(lateness.ns.p50.abs_diff(2_000_000) <= 20_000);
        assert!(lateness.ns.max.abs_diff(4_000_000) <= 40_000);
        let read = ops[Op::Read as usize];
        assert_eq!((read.count, read.bytes, read.errors), (2, 12288, 1));
        assert!(read.latency_ns.p50.abs_diff(1_000_000) <= 10_000);
        assert!(read.latency_ns.max.abs_diff(3_000_000) <= 30_000);
        assert!(read.latency_ns.mean.abs_diff(2_000_000) <= 20_000);
        assert_eq!(
            KernelCounts::of(&ops),
            KernelCounts {
                read_ios: 2,
                read_sectors: 24,
                write_ios: 3,
                write_sectors: 1,
                discard_ios: 1,
                discard_sectors: 2048,
                flush_ios: 1,
            }
        );
        queues[1].reset();
        let (ops, lateness) = sum(&queues);
        assert_eq!((ops[Op::Read as usize].count, lateness.count), (1, 1));
    }
}
