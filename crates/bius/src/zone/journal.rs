//! [`ZoneJournal`]: where a [`DeferredZoned`](super::DeferredZoned) keeps its
//! zone states, so that a restarted daemon finds the zones it left.

use std::fmt;
use std::io;

use super::ZoneCondition;

/// The state of one zone as a [`ZoneJournal`] keeps it.
///
/// Implicitly open zones are kept as [`ZoneCondition::Closed`] (or
/// [`ZoneCondition::Empty`] with nothing written), as a drive's power cycle
/// leaves them: the device may close an implicitly open zone at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZoneRecord {
    /// The condition.
    pub condition: ZoneCondition,
    /// The write pointer, in bytes (see [`Zone`](super::Zone)).
    pub write_pointer: u64,
    /// Where the data written since the zone's last reset ends, in
    /// bytes: the write pointer, except in a zone finished (where the
    /// write pointer was before the finish) or read-only or offline
    /// (where it was before); a conventional zone's end.  Between it and
    /// the write pointer the zone reads as zeroes, never as what the
    /// store holds there (see [`ReadSpan`](super::ReadSpan)).
    pub data_end: u64,
}

/// Keeps the zone states of a [`DeferredZoned`](super::DeferredZoned)
/// across daemon restarts (see
/// [`DeferredZoned::with_journal`](super::DeferredZoned::with_journal)).
///
/// Two states per zone: the *acknowledged* one, whose data has been
/// written (completed by the inner device) but may not be durable yet,
/// and the *durable* one, whose data the inner device has made durable (a
/// flush).  A journal reopened after a daemon crash should use the
/// acknowledged states (the data is in the page cache of the same boot),
/// after a power loss the durable ones.  A write pointer never covers data
/// whose write has not completed.
pub trait ZoneJournal: Send + Sync + 'static {
    /// Zone `index` is now `record`; called before the request that made
    /// it so completes.  It need not be durable.
    fn acknowledged(&self, index: u32, record: ZoneRecord) -> io::Result<()>;

    /// The inner device has made durable the data of these zones' states
    /// (acknowledged before the flush started): make the states durable
    /// too before returning.  Never called with no records, nor with two
    /// sets at once.
    fn durable(&self, records: &[(u32, ZoneRecord)]) -> io::Result<()>;
}

impl<J: ZoneJournal + ?Sized> ZoneJournal for std::sync::Arc<J> {
    fn acknowledged(&self, index: u32, record: ZoneRecord) -> io::Result<()> {
        (**self).acknowledged(index, record)
    }
    fn durable(&self, records: &[(u32, ZoneRecord)]) -> io::Result<()> {
        (**self).durable(records)
    }
}

/// Why zone states cannot be restored ([`ZoneSet::with_records`]).
///
/// [`ZoneSet::with_records`]: super::ZoneSet::with_records
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZoneRestoreError {
    /// Not one record per zone.
    ZoneCount {
        /// Zones of the geometry.
        expected: u64,
        /// Records given.
        found: u64,
    },
    /// A record the kernel would refuse in a zone report.
    Record {
        /// The zone number.
        zone: u64,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl fmt::Display for ZoneRestoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneRestoreError::ZoneCount { expected, found } => {
                write!(f, "{found} zone states for {expected} zones")
            }
            ZoneRestoreError::Record { zone, why } => write!(f, "zone {zone}: {why}"),
        }
    }
}

impl std::error::Error for ZoneRestoreError {}
