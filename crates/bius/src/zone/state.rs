//! [`ZoneState`]: the mutable part of one zone of a
//! [`ZoneSet`](super::ZoneSet).

use std::collections::BTreeMap;

use super::ZoneCondition;

/// The mutable part of one zone, behind the zone's lock.
///
/// The write pointer is where the stored data ends: a write moves it once
/// its data is stored, by what was stored.  A write to a store that
/// completes later (`ZoneSet::begin_write`, in `pending.rs`) is accepted
/// first, and the next write must start after it; the write pointer
/// follows the writes as they are stored, in order.
#[derive(Debug)]
pub(super) struct ZoneState {
    pub(super) write_pointer: u64,
    /// See [`ZoneRecord::data_end`](super::ZoneRecord::data_end).
    pub(super) data_end: u64,
    pub(super) condition: ZoneCondition,
    /// Where the next write must start: the write pointer, or the end of
    /// the writes in flight.
    pub(super) accepted: u64,
    /// The writes accepted and not stored yet: (start, ticket) to end.
    pub(super) in_flight: BTreeMap<(u64, u64), u64>,
    /// Where the data of a write that failed with writes after it in
    /// flight ends: the write pointer goes no further, and those writes
    /// fail as they complete; `accepted` comes back here once none is in
    /// flight.
    pub(super) failed: Option<u64>,
}

impl ZoneState {
    pub(super) fn new(write_pointer: u64, condition: ZoneCondition) -> Self {
        ZoneState {
            write_pointer,
            data_end: write_pointer,
            condition,
            accepted: write_pointer,
            in_flight: BTreeMap::new(),
            failed: None,
        }
    }

    /// The write pointer put at `write_pointer` by zone management or
    /// fault injection: writes still in flight are forgotten (they fail
    /// as they complete).
    pub(super) fn place(&mut self, write_pointer: u64) {
        self.write_pointer = write_pointer;
        self.accepted = write_pointer;
        self.in_flight.clear();
        self.failed = None;
    }
}
