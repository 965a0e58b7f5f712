//! [`ZoneState`]: the mutable part of one zone of a
//! [`ZoneSet`](super::ZoneSet), and [`ActiveZones`], the counts of the
//! zones in the conditions that hold a resource.

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

/// The active zones of a [`ZoneSet`](super::ZoneSet): how many sequential zones are in
/// each condition that holds an open or active resource, against the
/// geometry's `max_open` and `max_active` limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActiveZones {
    /// Zones in [`ZoneCondition::ImplicitOpen`].
    pub implicit_open: u32,
    /// Zones in [`ZoneCondition::ExplicitOpen`].
    pub explicit_open: u32,
    /// Zones in [`ZoneCondition::Closed`].
    pub closed: u32,
}

impl ActiveZones {
    /// Open zones, against the `max_open` limit.
    pub fn open(&self) -> u32 {
        self.implicit_open + self.explicit_open
    }

    /// Open and closed zones, against the `max_active` limit.
    pub fn active(&self) -> u32 {
        self.open() + self.closed
    }

    /// The counter of `condition`, if it has one.
    fn of(&mut self, condition: ZoneCondition) -> Option<&mut u32> {
        match condition {
            ZoneCondition::ImplicitOpen => Some(&mut self.implicit_open),
            ZoneCondition::ExplicitOpen => Some(&mut self.explicit_open),
            ZoneCondition::Closed => Some(&mut self.closed),
            _ => None,
        }
    }
}

/// Sets `state` to `condition`, moving the zone between counters.
pub(super) fn set_condition(
    counts: &mut ActiveZones,
    state: &mut ZoneState,
    condition: ZoneCondition,
) {
    if let Some(count) = counts.of(state.condition) {
        *count -= 1;
    }
    if let Some(count) = counts.of(condition) {
        *count += 1;
    }
    state.condition = condition;
}
