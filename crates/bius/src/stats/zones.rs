//! What happened to each zone of a zoned device, from the requests that
//! succeeded: writes, appends, opens, closes, finishes, resets, and the
//! conditions and write pointers the device reported.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::op::Op;
use crate::zone::layout::ZoneLayout;
use crate::zone::{Zone, ZoneCondition};

/// Buckets of the fill histograms: 0–10%, ..., 90–100% (a full zone is in
/// the last).
pub const FILL_BUCKETS: usize = 10;

/// One zone's history since the statistics started (or were reset), and
/// its state now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ZoneStats {
    /// Zone number, from 0.
    pub index: u64,
    /// First byte.
    pub start: u64,
    /// Its condition as the requests left it, or as the device last
    /// reported it (a report overrides what the requests implied).
    #[cfg_attr(feature = "serde", serde(with = "condition_name"))]
    pub condition: ZoneCondition,
    /// The write pointer, in bytes from the zone's start (0 for a
    /// conventional zone).
    pub write_pointer: u64,
    /// Bytes written by writes and appends that succeeded.
    pub bytes_written: u64,
    /// What was done to it.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub counts: ZoneEvents,
}

/// What was done to a zone, or to all zones: the zone events counted
/// since the statistics started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ZoneEvents {
    /// Appends that succeeded.
    pub appends: u64,
    /// Resets (a reset of all zones counts for each zone it emptied).
    pub resets: u64,
    /// Finishes.
    pub finishes: u64,
    /// Explicit opens of a zone not open explicitly yet.
    pub opens_explicit: u64,
    /// Writes or appends that found the zone empty or closed, and so
    /// opened it implicitly.
    pub opens_implicit: u64,
    /// Closes.
    pub closes: u64,
}

impl ZoneEvents {
    fn add(&mut self, other: &ZoneEvents) {
        self.appends += other.appends;
        self.resets += other.resets;
        self.finishes += other.finishes;
        self.opens_explicit += other.opens_explicit;
        self.opens_implicit += other.opens_implicit;
        self.closes += other.closes;
    }
}

/// A [`ZoneCondition`] as its [`name`](ZoneCondition::name).
#[cfg(feature = "serde")]
pub(crate) mod condition_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::zone::ZoneCondition;

    pub(crate) fn serialize<S: Serializer>(
        condition: &ZoneCondition,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(condition.name())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<ZoneCondition, D::Error> {
        let name = String::deserialize(deserializer)?;
        ZoneCondition::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("no zone condition `{name}`")))
    }
}

/// A zoned device's zones, summed up: what a study of zone use needs.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ZonedStats {
    /// Zone size in bytes.
    pub zone_bytes: u64,
    /// Writable bytes of a zone.
    pub zone_capacity: u64,
    /// Zones.
    pub zones: u64,
    /// Conventional zones (the first ones).
    pub conventional_zones: u64,
    /// Bytes of the writes and appends into sequential zones that
    /// succeeded.
    pub host_bytes_written: u64,
    /// What was done to the zones, all added up.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub counts: ZoneEvents,
    /// `host_bytes_written / resets`; `None` before the first reset.
    pub bytes_per_reset: Option<f64>,
    /// Resets by the zone's fill (write pointer / capacity) just before,
    /// in [`FILL_BUCKETS`] buckets of 10%.
    pub fill_at_reset: [u64; FILL_BUCKETS],
    /// Finishes by the zone's fill just before.
    pub fill_at_finish: [u64; FILL_BUCKETS],
    /// The sequential zones that are not empty, by their fill now.
    pub fill_now: [u64; FILL_BUCKETS],
    /// The sequential zones that are empty now.
    pub empty_zones: u64,
    /// The capacity of the sequential zones that are not empty: the space
    /// only a reset frees.
    pub held_bytes: u64,
    /// The sum of the sequential zones' write pointers.
    pub written_bytes_now: u64,
    /// Each zone (only from [`Statistics::snapshot_per_zone`](super::Statistics::snapshot_per_zone)).
    pub per_zone: Vec<ZoneStats>,
}

/// What a tracker keeps of one zone.
#[derive(Clone, Copy)]
struct Entry {
    condition: ZoneCondition,
    /// Bytes from the zone's start.
    write_pointer: u64,
    bytes_written: u64,
    counts: ZoneEvents,
}

struct State {
    zones: Vec<Entry>,
    fill_at_reset: [u64; FILL_BUCKETS],
    fill_at_finish: [u64; FILL_BUCKETS],
}

/// The zones of a zoned device, followed request by request.  One lock
/// guards them all: zone writes are ordered per zone by the kernel anyway.
pub(crate) struct ZoneTracker {
    zone_bytes: u64,
    capacity: u64,
    conventional: u64,
    state: Mutex<State>,
}

impl ZoneTracker {
    /// A tracker of `layout`'s zones, all empty (the kernel's first zone
    /// report tells their real state).
    pub(crate) fn new(layout: &ZoneLayout) -> Self {
        let geometry = layout.geometry();
        let conventional = u64::from(geometry.conventional_zones());
        let zones = (0..geometry.zone_count())
            .map(|index| Entry {
                condition: if index < conventional {
                    ZoneCondition::NotWritePointer
                } else {
                    ZoneCondition::Empty
                },
                write_pointer: 0,
                bytes_written: 0,
                counts: ZoneEvents::default(),
            })
            .collect();
        ZoneTracker {
            zone_bytes: geometry.zone_size(),
            capacity: geometry.zone_capacity(),
            conventional,
            state: Mutex::new(State {
                zones,
                fill_at_reset: [0; FILL_BUCKETS],
                fill_at_finish: [0; FILL_BUCKETS],
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The bucket of a write pointer.
    fn bucket(&self, write_pointer: u64) -> usize {
        let tenths = write_pointer.saturating_mul(10) / self.capacity.max(1);
        (tenths as usize).min(FILL_BUCKETS - 1)
    }

    /// The sequential zone at byte `offset`, if it is one.
    fn sequential(&self, offset: u64) -> Option<usize> {
        let index = offset / self.zone_bytes;
        (index >= self.conventional).then_some(index as usize)
    }

    /// Follows a successful request of `op` at byte `offset` (an append's
    /// landing place) of `len` bytes.
    pub(crate) fn succeeded(&self, op: Op, offset: u64, len: u64) {
        if op == Op::ZoneResetAll {
            let mut state = self.lock();
            for index in self.conventional as usize..state.zones.len() {
                if state.zones[index].condition != ZoneCondition::Empty {
                    self.reset(&mut state, index);
                }
            }
            return;
        }
        let Some(index) = self.sequential(offset) else {
            return;
        };
        let mut state = self.lock();
        if index >= state.zones.len() {
            return;
        }
        match op {
            Op::Write | Op::ZoneAppend => {
                let end = offset + len - index as u64 * self.zone_bytes;
                let zone = &mut state.zones[index];
                if matches!(zone.condition, ZoneCondition::Empty | ZoneCondition::Closed) {
                    zone.counts.opens_implicit += 1;
                    zone.condition = ZoneCondition::ImplicitOpen;
                }
                zone.bytes_written += len;
                zone.counts.appends += u64::from(op == Op::ZoneAppend);
                zone.write_pointer = zone.write_pointer.max(end);
                if zone.write_pointer >= self.capacity {
                    zone.condition = ZoneCondition::Full;
                }
            }
            Op::ZoneOpen => {
                let zone = &mut state.zones[index];
                if !matches!(
                    zone.condition,
                    ZoneCondition::ExplicitOpen | ZoneCondition::Full
                ) {
                    zone.counts.opens_explicit += 1;
                    zone.condition = ZoneCondition::ExplicitOpen;
                }
            }
            Op::ZoneClose => {
                let zone = &mut state.zones[index];
                zone.counts.closes += 1;
                if matches!(
                    zone.condition,
                    ZoneCondition::ImplicitOpen | ZoneCondition::ExplicitOpen
                ) {
                    zone.condition = if zone.write_pointer == 0 {
                        ZoneCondition::Empty
                    } else {
                        ZoneCondition::Closed
                    };
                }
            }
            Op::ZoneFinish => {
                let bucket = self.bucket(state.zones[index].write_pointer);
                state.fill_at_finish[bucket] += 1;
                let zone = &mut state.zones[index];
                zone.counts.finishes += 1;
                zone.condition = ZoneCondition::Full;
                zone.write_pointer = self.capacity;
            }
            Op::ZoneReset => self.reset(&mut state, index),
            _ => {}
        }
    }

    fn reset(&self, state: &mut State, index: usize) {
        let bucket = self.bucket(state.zones[index].write_pointer);
        state.fill_at_reset[bucket] += 1;
        let zone = &mut state.zones[index];
        zone.counts.resets += 1;
        zone.condition = ZoneCondition::Empty;
        zone.write_pointer = 0;
    }

    /// Takes the conditions and write pointers of reported zones.
    pub(crate) fn reported(&self, zones: &[Zone]) {
        let mut state = self.lock();
        for zone in zones {
            let start = zone.start;
            let index = (start / self.zone_bytes) as usize;
            let Some(entry) = state.zones.get_mut(index) else {
                continue;
            };
            entry.condition = zone.condition;
            entry.write_pointer = match zone.condition {
                ZoneCondition::NotWritePointer | ZoneCondition::Empty => 0,
                ZoneCondition::Full | ZoneCondition::ReadOnly | ZoneCondition::Offline => {
                    match zone.write_pointer {
                        u64::MAX => self.capacity,
                        wp => wp.saturating_sub(start).min(self.capacity),
                    }
                }
                _ => zone.write_pointer.saturating_sub(start),
            };
        }
    }

    /// Forgets the counts; the conditions and write pointers stay.
    pub(crate) fn reset_counts(&self) {
        let mut state = self.lock();
        for zone in &mut state.zones {
            zone.bytes_written = 0;
            zone.counts = ZoneEvents::default();
        }
        state.fill_at_reset = [0; FILL_BUCKETS];
        state.fill_at_finish = [0; FILL_BUCKETS];
    }

    /// The zones summed up, with each zone if `per_zone`.
    pub(crate) fn snapshot(&self, per_zone: bool) -> ZonedStats {
        let state = self.lock();
        let mut stats = ZonedStats {
            zone_bytes: self.zone_bytes,
            zone_capacity: self.capacity,
            zones: state.zones.len() as u64,
            conventional_zones: self.conventional,
            host_bytes_written: 0,
            counts: ZoneEvents::default(),
            bytes_per_reset: None,
            fill_at_reset: state.fill_at_reset,
            fill_at_finish: state.fill_at_finish,
            fill_now: [0; FILL_BUCKETS],
            empty_zones: 0,
            held_bytes: 0,
            written_bytes_now: 0,
            per_zone: Vec::new(),
        };
        for (index, zone) in state.zones.iter().enumerate() {
            if index as u64 >= self.conventional {
                stats.host_bytes_written += zone.bytes_written;
                stats.written_bytes_now += zone.write_pointer;
                if zone.condition == ZoneCondition::Empty {
                    stats.empty_zones += 1;
                } else {
                    stats.fill_now[self.bucket(zone.write_pointer)] += 1;
                    stats.held_bytes += self.capacity;
                }
            }
            stats.counts.add(&zone.counts);
            if per_zone {
                stats.per_zone.push(ZoneStats {
                    index: index as u64,
                    start: index as u64 * self.zone_bytes,
                    condition: zone.condition,
                    write_pointer: zone.write_pointer,
                    bytes_written: zone.bytes_written,
                    counts: zone.counts,
                });
            }
        }
        stats.bytes_per_reset = (stats.counts.resets > 0)
            .then(|| stats.host_bytes_written as f64 / stats.counts.resets as f64);
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::ZoneGeometry;

    const MIB: u64 = 1 << 20;

    /// 8 zones of 1 MiB (capacity 1000 KiB), the first conventional.
    fn tracker() -> ZoneTracker {
        let geometry = ZoneGeometry::new(8 * MIB, MIB)
            .unwrap()
            .with_zone_capacity(1000 << 10)
            .unwrap()
            .with_conventional_zones(1)
            .unwrap();
        ZoneTracker::new(&ZoneLayout::new(geometry, 512))
    }

    #[test]
    fn writes_opens_closes_finishes_and_resets_are_followed() {
        let zones = tracker();
        let cap = 2000 * 512;
        // A write into the conventional zone is no zone's business.
        zones.succeeded(Op::Write, 4096, 4096);
        zones.succeeded(Op::Write, MIB, 4096);
        zones.succeeded(Op::Write, MIB + 4096, 4096);
        zones.succeeded(Op::ZoneClose, MIB, 0);
        zones.succeeded(Op::ZoneAppend, MIB + 8192, cap / 2 - 8192);
        zones.succeeded(Op::ZoneOpen, 2 * MIB, 0);
        zones.succeeded(Op::ZoneOpen, 2 * MIB, 0);
        zones.succeeded(Op::ZoneClose, 2 * MIB, 0);
        zones.succeeded(Op::Write, 3 * MIB, cap);
        zones.succeeded(Op::ZoneFinish, 4 * MIB, 0);
        let stats = zones.snapshot(true);
        assert_eq!(stats.host_bytes_written, cap / 2 + cap);
        assert_eq!(stats.fill_at_finish[0], 1);
        let z1 = stats.per_zone[1];
        assert_eq!(z1.condition, ZoneCondition::ImplicitOpen);
        assert_eq!(z1.write_pointer, cap / 2);
        assert_eq!(
            (
                z1.counts.opens_implicit,
                z1.counts.closes,
                z1.counts.appends
            ),
            (2, 1, 1)
        );
        let z2 = stats.per_zone[2];
        assert_eq!(z2.condition, ZoneCondition::Empty);
        assert_eq!((z2.counts.opens_explicit, z2.counts.closes), (1, 1));
        assert_eq!(stats.per_zone[3].condition, ZoneCondition::Full);
        assert_eq!(stats.per_zone[4].write_pointer, cap);
        assert_eq!(stats.fill_now[5], 1);
        assert_eq!(stats.fill_now[9], 2);
        assert_eq!(stats.fill_now[0], 0);
        assert_eq!(stats.empty_zones, 4);
        assert_eq!(stats.held_bytes, 3 * cap);
        assert_eq!(stats.written_bytes_now, cap / 2 + 2 * cap);
        assert_eq!(stats.bytes_per_reset, None);

        zones.succeeded(Op::ZoneReset, MIB, 0);
        zones.succeeded(Op::ZoneResetAll, 0, 0);
        let stats = zones.snapshot(false);
        assert!(stats.per_zone.is_empty());
        assert_eq!(stats.counts.resets, 3);
        assert_eq!(stats.fill_at_reset[5], 1);
        assert_eq!(stats.fill_at_reset[9], 2);
        assert_eq!(stats.bytes_per_reset, Some((cap / 2 + cap) as f64 / 3.0));
        assert_eq!(stats.fill_now, [0; FILL_BUCKETS]);
        assert_eq!(stats.empty_zones, 7);
        assert_eq!(stats.held_bytes, 0);
    }

    #[test]
    fn a_report_overrides_and_a_reset_keeps_the_state() {
        let zones = tracker();
        let zone = |index: u64, condition, wp: u64| Zone {
            start: index * MIB,
            len: MIB,
            capacity: 2000 * 512,
            write_pointer: wp,
            zone_type: crate::zone::ZoneType::SequentialWriteRequired,
            condition,
        };
        zones.succeeded(Op::Write, 2 * MIB, 8192);
        zones.reported(&[
            zone(1, ZoneCondition::Closed, MIB + 4096),
            zone(2, ZoneCondition::Full, u64::MAX),
        ]);
        zones.reset_counts();
        let stats = zones.snapshot(true);
        assert_eq!(stats.host_bytes_written, 0);
        assert_eq!(stats.per_zone[1].condition, ZoneCondition::Closed);
        assert_eq!(stats.per_zone[1].write_pointer, 4096);
        assert_eq!(stats.per_zone[2].write_pointer, 2000 * 512);
        zones.succeeded(Op::Write, MIB + 4096, 4096);
        assert_eq!(zones.snapshot(true).per_zone[1].counts.opens_implicit, 1);
    }
}
