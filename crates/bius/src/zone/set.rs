//! [`ZoneSet`]: the zone state machine of a zoned device.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, TryLockError};

use super::journal::{ZoneRecord, ZoneRestoreError};
use super::layout::ZoneLayout;
use super::span::ReadSpan;
use super::state::{set_condition, ActiveZones, ZoneState};
use super::{check_aligned, Zone, ZoneCondition, ZoneError, ZoneGeometry, ZoneType};
use crate::abi::SECTOR_SIZE;
use crate::error::IoError;
use crate::op::Op;

/// The zone resource counters, behind their own small lock (taken after a
/// zone lock, never before).
#[derive(Debug)]
struct Resources {
    counts: ActiveZones,
    /// Where the round-robin search for an implicitly open zone to close
    /// starts.
    next_implicit_close: usize,
}

/// The zones of a zoned device and their state machine, with the
/// semantics of Linux's zoned `null_blk`.
///
/// Each zone has its own lock, held while the backend transfers the zone's
/// data (through the closures the operations take), so that writes and
/// appends to one zone are serialized and a write pointer moves only once
/// the data is stored; a small second lock guards the open/active
/// counters.  Operations on different zones never wait for each other,
/// except for that counter lock.  Conventional zones are not locked.
///
/// One deliberate difference from `null_blk`: when an implicitly open zone
/// must be closed to open another, a zone that another thread is reading or
/// writing at that moment is passed over (`null_blk` would close it under
/// the writer's feet).  Sequentially the behaviour is identical.
///
/// Positions and lengths are in bytes, those of data whole 512-byte
/// sectors ([`ZoneError::Unaligned`] otherwise); data closures receive
/// `(offset, len)` in bytes.
#[derive(Debug)]
pub struct ZoneSet {
    geometry: ZoneGeometry,
    zone_shift: u32,
    zones: Box<[Mutex<ZoneState>]>,
    resources: Mutex<Resources>,
    write_faults: RwLock<BTreeSet<u64>>,
    /// The ticket of the next write in flight.
    pub(super) next_ticket: AtomicU64,
}

fn acquire<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ZoneSet {
    /// The zones of `geometry`, all empty.
    pub fn new(geometry: ZoneGeometry) -> Self {
        let zone_shift = geometry.zone_size().trailing_zeros();
        let conventional = geometry.conventional_zones() as usize;
        let zones = (0..geometry.zone_count() as usize)
            .map(|index| {
                let start = (index as u64) << zone_shift;
                Mutex::new(if index < conventional {
                    let end = start + geometry.zone_size();
                    ZoneState::new(end, ZoneCondition::NotWritePointer)
                } else {
                    ZoneState::new(start, ZoneCondition::Empty)
                })
            })
            .collect();
        ZoneSet {
            geometry,
            zone_shift,
            zones,
            resources: Mutex::new(Resources {
                counts: ActiveZones::default(),
                next_implicit_close: conventional,
            }),
            write_faults: RwLock::new(BTreeSet::new()),
            next_ticket: AtomicU64::new(0),
        }
    }

    /// The zones of `geometry` in the states `records` (one per zone, in
    /// order), as a [`ZoneJournal`](super::ZoneJournal) kept them.  A
    /// record the kernel would refuse in a zone report (a condition that
    /// is not the zone type's, a write pointer that is not the
    /// condition's or not a whole sector), or whose data end no zone has
    /// (see
    /// [`ZoneRecord::data_end`]), is an error; the open/active counters
    /// are counted from the records, which may exceed the limits: zones
    /// then open only once others close.
    pub fn with_records(
        geometry: ZoneGeometry,
        records: &[ZoneRecord],
    ) -> Result<Self, ZoneRestoreError> {
        let set = ZoneSet::new(geometry);
        if records.len() as u64 != set.geometry.zone_count() {
            return Err(ZoneRestoreError::ZoneCount {
                expected: set.geometry.zone_count(),
                found: records.len() as u64,
            });
        }
        let mut counts = ActiveZones::default();
        for (index, record) in records.iter().enumerate() {
            let mut state = set.lock(index);
            state.place(record.write_pointer);
            state.data_end = record.data_end;
            set_condition(&mut counts, &mut state, record.condition);
        }
        let layout = ZoneLayout::new(set.geometry, 512);
        if let Some((zone, why)) = layout.report_problem(0, &set.report(0, records.len())) {
            return Err(ZoneRestoreError::Record { zone, why });
        }
        let data_end_problem = records.iter().enumerate().find_map(|(index, record)| {
            let extent = set.geometry.zone_extent(index as u64);
            let last = record.write_pointer.min(extent.start + extent.capacity);
            let gap_allowed = matches!(
                record.condition,
                ZoneCondition::Full | ZoneCondition::ReadOnly | ZoneCondition::Offline
            );
            let ok = (extent.start..=last).contains(&record.data_end)
                && record.data_end.is_multiple_of(SECTOR_SIZE)
                && (gap_allowed || record.data_end == record.write_pointer);
            (!ok).then_some(index as u64)
        });
        if let Some(zone) = data_end_problem {
            let why = "data end is invalid for the write pointer and condition";
            return Err(ZoneRestoreError::Record { zone, why });
        }
        set.resources().counts = counts;
        Ok(set)
    }

    /// Every zone's state, as a [`ZoneJournal`](super::ZoneJournal) keeps
    /// it (implicitly open zones as closed, see [`ZoneRecord`]): what
    /// [`ZoneSet::with_records`] takes.
    pub fn records(&self) -> Vec<ZoneRecord> {
        (0..self.zones.len())
            .map(|index| self.record(index))
            .collect()
    }

    /// Zone `index`'s state as a journal keeps it (see
    /// [`ZoneSet::records`]).
    pub(crate) fn record(&self, index: usize) -> ZoneRecord {
        let state = self.lock(index);
        let zone = self.describe(index, &state);
        let condition = match zone.condition {
            ZoneCondition::ImplicitOpen if zone.write_pointer == zone.start => ZoneCondition::Empty,
            ZoneCondition::ImplicitOpen => ZoneCondition::Closed,
            condition => condition,
        };
        ZoneRecord {
            condition,
            write_pointer: zone.write_pointer,
            data_end: state.data_end,
        }
    }

    /// The normalised geometry.
    pub fn geometry(&self) -> &ZoneGeometry {
        &self.geometry
    }

    /// The active zones now.
    pub fn active_zones(&self) -> ActiveZones {
        self.resources().counts
    }

    /// Up to `max` zones, from the one containing byte `offset` (zone
    /// number `offset / zone size`) on; none past the last zone.
    pub fn report(&self, offset: u64, max: usize) -> Vec<Zone> {
        let first = usize::try_from(offset >> self.zone_shift).unwrap_or(usize::MAX);
        (first..self.zones.len())
            .take(max)
            .map(|index| self.describe(index, &self.lock(index)))
            .collect()
    }

    /// Writes `len` bytes at `offset` through `f`.  In a sequential zone
    /// the write must start at the write pointer and end within the
    /// capacity; it opens the zone implicitly if needed, and moves the
    /// write pointer past the data once `f` succeeded.
    pub fn write<F>(&self, offset: u64, len: u64, f: F) -> Result<(), ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        check_aligned(offset, len)?;
        let index = self.index_of(offset)?;
        if self.is_conventional(index) {
            let zone_end = self.start_of(index) + self.geometry.zone_size();
            if offset.checked_add(len).is_none_or(|end| end > zone_end) {
                return Err(ZoneError::CrossesZoneBoundary);
            }
            return self.transfer(offset, len, f).map_err(|(_, err)| err);
        }
        self.write_sequential(index, Some(offset), len, f).map(drop)
    }

    /// A write sent again after a recovery (`BIUS_REQ_REPLAY`), which the
    /// lost daemon may or may not have applied: in a conventional zone it
    /// is a [`ZoneSet::write`]; in a sequential zone it was applied if the
    /// write pointer is at or past its end (then it succeeds without `f`,
    /// and `Ok(false)` says so), is applied as a write if the write
    /// pointer is at its start (`Ok(true)`), and fails with
    /// [`ZoneError::Replayed`] otherwise.
    pub fn write_replayed<F>(&self, offset: u64, len: u64, f: F) -> Result<bool, ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        check_aligned(offset, len)?;
        let index = self.index_of(offset)?;
        let zone = self.describe(index, &self.lock(index));
        if super::replay_applied(&zone, offset, len)? {
            return Ok(false);
        }
        self.write(offset, len, f).map(|()| true)
    }

    /// Writes `len` bytes at the write pointer of the zone starting at
    /// byte `zone_start` through `f`, as [`ZoneSet::write`] does; returns
    /// the offset where the data landed.
    pub fn append<F>(&self, zone_start: u64, len: u64, f: F) -> Result<u64, ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        let index = self.check_append(zone_start, len)?;
        self.write_sequential(index, None, len, f)
    }

    /// The sequential zone an append of `len` bytes to the zone starting
    /// at byte `zone_start` goes to, if it may.
    pub(super) fn check_append(&self, zone_start: u64, len: u64) -> Result<usize, ZoneError> {
        check_aligned(zone_start, len)?;
        let index = self.index_of(zone_start)?;
        if zone_start != self.start_of(index) {
            return Err(ZoneError::NotZoneStart);
        }
        if len > self.geometry.max_append() {
            return Err(ZoneError::AppendTooLarge {
                max: self.geometry.max_append(),
            });
        }
        if self.is_conventional(index) {
            return Err(ZoneError::InvalidCondition {
                op: Op::ZoneAppend,
                condition: ZoneCondition::NotWritePointer,
            });
        }
        Ok(index)
    }

    /// Calls `f` for each zone's part of the `len` bytes at `offset`, in
    /// order, with a sequential zone locked: a [`ReadSpan`] tells how much
    /// of it holds data, and what the rest reads as.  Offline zones cannot
    /// be read.
    pub fn read<F>(&self, offset: u64, len: u64, mut f: F) -> Result<(), ZoneError>
    where
        F: FnMut(ReadSpan) -> Result<(), IoError>,
    {
        check_aligned(offset, len)?;
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= self.geometry.size())
            .ok_or(ZoneError::OutOfRange { offset })?;
        let mut pos = offset;
        while pos < end {
            let index = (pos >> self.zone_shift) as usize;
            let span_end = end.min(self.start_of(index) + self.geometry.zone_size());
            let mut span = ReadSpan {
                offset: pos,
                len: span_end - pos,
                written: span_end - pos,
                skipped: 0,
            };
            if self.is_conventional(index) {
                f(span)?;
            } else {
                let state = self.lock(index);
                if state.condition == ZoneCondition::Offline {
                    return Err(ZoneError::InvalidCondition {
                        op: Op::Read,
                        condition: ZoneCondition::Offline,
                    });
                }
                let below = |end: u64| end.saturating_sub(pos).min(span.len);
                span.written = below(state.data_end);
                span.skipped = below(state.write_pointer) - span.written;
                f(span)?;
            }
            pos = span_end;
        }
        Ok(())
    }

    /// Opens the zone containing byte `offset` explicitly.  Already
    /// explicitly open is a success; an empty or closed zone needs the
    /// resources.
    pub fn open(&self, offset: u64) -> Result<(), ZoneError> {
        let index = self.index_of(offset)?;
        let mut state = self.lock(index);
        let mut resources = self.resources();
        match state.condition {
            ZoneCondition::ExplicitOpen => return Ok(()),
            ZoneCondition::Empty | ZoneCondition::Closed => {
                self.check_resources(&mut resources, state.condition)?
            }
            ZoneCondition::ImplicitOpen => {}
            condition => return Err(invalid(Op::ZoneOpen, condition)),
        }
        set_condition(
            &mut resources.counts,
            &mut state,
            ZoneCondition::ExplicitOpen,
        );
        Ok(())
    }

    /// Closes the zone containing byte `offset`: closed, or empty if
    /// nothing was written.  Already closed is a success; empty or full is
    /// an error.
    pub fn close(&self, offset: u64) -> Result<(), ZoneError> {
        let index = self.index_of(offset)?;
        let mut state = self.lock(index);
        self.close_locked(index, &mut state, &mut self.resources().counts)
    }

    /// Finishes the zone containing byte `offset`: full, write pointer at
    /// the zone's end (start + length, past the capacity); the bytes it
    /// moves over read as zeroes (see [`ReadSpan`]).  Already full is a
    /// success; an empty or closed zone needs the resources.
    pub fn finish(&self, offset: u64) -> Result<(), ZoneError> {
        let index = self.index_of(offset)?;
        let mut state = self.lock(index);
        let mut resources = self.resources();
        match state.condition {
            ZoneCondition::Full => return Ok(()),
            ZoneCondition::Empty | ZoneCondition::Closed => {
                self.check_resources(&mut resources, state.condition)?
            }
            ZoneCondition::ImplicitOpen | ZoneCondition::ExplicitOpen => {}
            condition => return Err(invalid(Op::ZoneFinish, condition)),
        }
        set_condition(&mut resources.counts, &mut state, ZoneCondition::Full);
        state.place(self.end_of(index));
        Ok(())
    }

    /// Resets the zone containing byte `offset`: empty, and its data
    /// discarded by `discard(start, len)` (in bytes, with the zone locked);
    /// whatever `discard` does, no [`ReadSpan`] counts that data as
    /// written again.  Already empty is a success, with nothing discarded.
    pub fn reset<F>(&self, offset: u64, discard: F) -> Result<(), ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        let index = self.index_of(offset)?;
        let mut state = self.lock(index);
        self.reset_locked(index, &mut state, discard)
    }

    /// Resets every sequential zone that is not empty, read-only or
    /// offline.  Every such zone is reset even if a discard fails; the
    /// first failure is returned.
    pub fn reset_all<F>(&self, mut discard: F) -> Result<(), ZoneError>
    where
        F: FnMut(u64, u64) -> Result<(), IoError>,
    {
        let mut result = Ok(());
        for index in self.sequential() {
            let mut state = self.lock(index);
            if !matches!(
                state.condition,
                ZoneCondition::Empty | ZoneCondition::ReadOnly | ZoneCondition::Offline
            ) {
                let reset = self.reset_locked(index, &mut state, &mut discard);
                result = result.and(reset);
            }
        }
        result
    }

    /// Fault injection: makes the sequential zone containing byte
    /// `offset` read-only, giving back its open/active resources; its data
    /// stays readable (the rest of it reads as zeroes) and its write
    /// pointer becomes `u64::MAX`.  On a zone that is already read-only it
    /// undoes that: the zone becomes empty and `discard(start, len)` drops
    /// its data.
    pub fn set_read_only<F>(&self, offset: u64, discard: F) -> Result<(), ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        self.inject_condition(offset, ZoneCondition::ReadOnly, discard)
    }

    /// Fault injection: makes the sequential zone containing byte `offset`
    /// offline, as [`ZoneSet::set_read_only`] does read-only; an offline
    /// zone cannot even be read.
    pub fn set_offline<F>(&self, offset: u64, discard: F) -> Result<(), ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        self.inject_condition(offset, ZoneCondition::Offline, discard)
    }

    /// Fault injection: a write (or append) reaching the sector at byte
    /// `offset` (a whole sector) stores the bytes before it, moves the
    /// write pointer up to it and fails with [`ZoneError::InjectedFault`],
    /// until the error is cleared.
    pub fn inject_write_error(&self, offset: u64) -> Result<(), ZoneError> {
        check_aligned(offset, 0)?;
        self.index_of(offset)?;
        self.write_faults
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(offset);
        Ok(())
    }

    /// Removes an injected write error; false if there was none at byte
    /// `offset`.
    pub fn clear_write_error(&self, offset: u64) -> bool {
        self.write_faults
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&offset)
    }

    pub(super) fn lock(&self, index: usize) -> MutexGuard<'_, ZoneState> {
        acquire(&self.zones[index])
    }

    fn resources(&self) -> MutexGuard<'_, Resources> {
        acquire(&self.resources)
    }

    /// The zone containing byte `offset`, which must be on the device.
    pub(super) fn index_of(&self, offset: u64) -> Result<usize, ZoneError> {
        if offset >= self.geometry.size() {
            return Err(ZoneError::OutOfRange { offset });
        }
        Ok((offset >> self.zone_shift) as usize)
    }

    pub(super) fn is_conventional(&self, index: usize) -> bool {
        index < self.geometry.conventional_zones() as usize
    }

    /// Indices of the sequential zones.
    fn sequential(&self) -> std::ops::Range<usize> {
        self.geometry.conventional_zones() as usize..self.zones.len()
    }

    pub(super) fn start_of(&self, index: usize) -> u64 {
        (index as u64) << self.zone_shift
    }

    /// One past the last byte of zone `index` (the device end for a runt).
    fn end_of(&self, index: usize) -> u64 {
        (self.start_of(index) + self.geometry.zone_size()).min(self.geometry.size())
    }

    /// The descriptor of zone `index` in `state`.
    pub(super) fn describe(&self, index: usize, state: &ZoneState) -> Zone {
        let extent = self.geometry.zone_extent(index as u64);
        let zone_type = if self.is_conventional(index) {
            ZoneType::Conventional
        } else {
            ZoneType::SequentialWriteRequired
        };
        Zone {
            start: extent.start,
            len: extent.len,
            capacity: extent.capacity,
            write_pointer: state.write_pointer,
            zone_type,
            condition: state.condition,
        }
    }

    /// Calls `f` for the `len` bytes at `offset`, or for the part before
    /// the first injected write error in them; fails with the number of
    /// bytes `f` stored.
    fn transfer<F>(&self, offset: u64, len: u64, f: F) -> Result<(), (u64, ZoneError)>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        let fault = self.fault_in(offset, len);
        let stored = fault.map_or(len, |bad| bad - offset);
        if stored > 0 {
            f(offset, stored).map_err(|err| (0, ZoneError::Io(err)))?;
        }
        match fault {
            Some(bad) => Err((stored, ZoneError::InjectedFault { offset: bad })),
            None => Ok(()),
        }
    }

    /// The first injected write error in the `len` bytes at `offset`.
    pub(super) fn fault_in(&self, offset: u64, len: u64) -> Option<u64> {
        self.write_faults
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .range(offset..offset.saturating_add(len))
            .next()
            .copied()
    }

    /// A write or (without `at`) an append to sequential zone `index`,
    /// stored by `f` with the zone locked.
    fn write_sequential<F>(
        &self,
        index: usize,
        at: Option<u64>,
        len: u64,
        f: F,
    ) -> Result<u64, ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        let mut state = self.lock(index);
        let offset = self.accept(index, &mut state, at, len)?;
        let result = self.transfer(offset, len, f);
        // (nothing of the zone is in flight past `offset`, where the
        // zone's writes were accepted up to)
        state.accepted = offset
            + match result {
                Ok(()) => len,
                Err((stored, _)) => stored,
            };
        self.settle(index, &mut state);
        result.map(|()| offset).map_err(|(_, err)| err)
    }

    /// Where a write (at `at`) or an append (`None`) of `len` bytes to
    /// locked sequential zone `index` goes: at the write pointer, or past
    /// the writes in flight, and within the capacity, in a condition that
    /// takes writes.  Opens the zone implicitly if need be.
    pub(super) fn accept(
        &self,
        index: usize,
        state: &mut ZoneState,
        at: Option<u64>,
        len: u64,
    ) -> Result<u64, ZoneError> {
        let op = if at.is_some() {
            Op::Write
        } else {
            Op::ZoneAppend
        };
        let zone = self.describe(index, state);
        if matches!(
            zone.condition,
            ZoneCondition::Full | ZoneCondition::ReadOnly | ZoneCondition::Offline
        ) {
            return Err(invalid(op, zone.condition));
        }
        let offset = at.unwrap_or(state.accepted);
        if offset != state.accepted {
            return Err(ZoneError::NotAtWritePointer {
                write_pointer: state.accepted,
            });
        }
        let end = zone.start + zone.capacity;
        if offset.checked_add(len).is_none_or(|last| last > end) {
            return Err(ZoneError::BeyondCapacity);
        }
        if matches!(zone.condition, ZoneCondition::Empty | ZoneCondition::Closed) {
            let mut resources = self.resources();
            self.check_resources(&mut resources, zone.condition)?;
            set_condition(&mut resources.counts, state, ZoneCondition::ImplicitOpen);
        }
        Ok(offset)
    }

    /// Moves the write pointer of locked sequential zone `index` over what
    /// is stored: up to the first write in flight, or to where the writes
    /// were accepted (or the data of a failed one ends); the zone's data
    /// ends there, and the zone is full at its capacity.
    pub(super) fn settle(&self, index: usize, state: &mut ZoneState) {
        let stored = state.failed.unwrap_or(state.accepted);
        let in_flight = state.in_flight.first_key_value().map(|(&(at, _), _)| at);
        state.write_pointer = in_flight.map_or(stored, |at| at.min(stored));
        if state.in_flight.is_empty() {
            if let Some(at) = state.failed.take() {
                state.accepted = at;
            }
        }
        state.data_end = state.write_pointer;
        let extent = self.geometry.zone_extent(index as u64);
        if state.write_pointer == extent.start + extent.capacity {
            set_condition(&mut self.resources().counts, state, ZoneCondition::Full);
        }
    }

    /// Whether an empty or closed zone may open: an empty one needs an
    /// active resource, both need an open one, possibly by closing another
    /// implicitly open zone.
    fn check_resources(
        &self,
        resources: &mut Resources,
        condition: ZoneCondition,
    ) -> Result<(), ZoneError> {
        if condition == ZoneCondition::Empty {
            self.check_active(&resources.counts)?;
        }
        self.check_open(resources)
    }

    fn check_active(&self, counts: &ActiveZones) -> Result<(), ZoneError> {
        let max = self.geometry.max_active();
        if max == 0 || counts.active() < max {
            return Ok(());
        }
        Err(ZoneError::ActiveResource)
    }

    /// At the open limit, closes an implicitly open zone (round-robin),
    /// unless the active limit is reached too.
    fn check_open(&self, resources: &mut Resources) -> Result<(), ZoneError> {
        let max = self.geometry.max_open();
        let counts = &resources.counts;
        if max == 0 || counts.open() < max {
            return Ok(());
        }
        if counts.implicit_open > 0
            && self.check_active(counts).is_ok()
            && self.close_implicit_open(resources)
        {
            return Ok(());
        }
        Err(ZoneError::OpenResource)
    }

    /// Closes the next implicitly open zone in round-robin order; false if
    /// there is none to close.  Zones locked by someone else (the caller's
    /// own, or one being read or written) are passed over: waiting for them
    /// while holding the counter lock could deadlock.
    fn close_implicit_open(&self, resources: &mut Resources) -> bool {
        let zones = self.sequential();
        let mut next = resources.next_implicit_close;
        for _ in zones.clone() {
            let index = if zones.contains(&next) {
                next
            } else {
                zones.start
            };
            next = index + 1;
            let mut state = match self.zones[index].try_lock() {
                Ok(state) => state,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => continue,
            };
            if state.condition == ZoneCondition::ImplicitOpen {
                resources.next_implicit_close = next;
                return self
                    .close_locked(index, &mut state, &mut resources.counts)
                    .is_ok();
            }
        }
        false
    }

    /// Closes locked zone `index` (see [`ZoneSet::close`]).
    fn close_locked(
        &self,
        index: usize,
        state: &mut ZoneState,
        counts: &mut ActiveZones,
    ) -> Result<(), ZoneError> {
        match state.condition {
            ZoneCondition::Closed => return Ok(()),
            ZoneCondition::ImplicitOpen | ZoneCondition::ExplicitOpen => {}
            condition => return Err(invalid(Op::ZoneClose, condition)),
        }
        // (a zone with writes in flight is closed, even if none is stored)
        let condition = if state.accepted == self.start_of(index) {
            ZoneCondition::Empty
        } else {
            ZoneCondition::Closed
        };
        set_condition(counts, state, condition);
        Ok(())
    }

    /// Resets locked zone `index` (see [`ZoneSet::reset`]).
    fn reset_locked<F>(
        &self,
        index: usize,
        state: &mut ZoneState,
        discard: F,
    ) -> Result<(), ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        match state.condition {
            ZoneCondition::Empty => return Ok(()),
            ZoneCondition::ImplicitOpen
            | ZoneCondition::ExplicitOpen
            | ZoneCondition::Closed
            | ZoneCondition::Full => {}
            condition => return Err(invalid(Op::ZoneReset, condition)),
        }
        set_condition(&mut self.resources().counts, state, ZoneCondition::Empty);
        self.empty_locked(index, state, discard)
    }

    /// Puts the write pointer of locked zone `index` back to its start and
    /// discards the zone's data.
    fn empty_locked<F>(
        &self,
        index: usize,
        state: &mut ZoneState,
        discard: F,
    ) -> Result<(), ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        let start = self.start_of(index);
        state.place(start);
        state.data_end = start;
        discard(start, self.end_of(index) - start).map_err(ZoneError::Io)
    }

    /// Makes a sequential zone read-only or offline, or undoes it.
    fn inject_condition<F>(
        &self,
        offset: u64,
        condition: ZoneCondition,
        discard: F,
    ) -> Result<(), ZoneError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        let index = self.index_of(offset)?;
        if self.is_conventional(index) {
            return Err(ZoneError::ConventionalZone);
        }
        let mut state = self.lock(index);
        if state.condition == condition {
            state.condition = ZoneCondition::Empty;
            return self.empty_locked(index, &mut state, discard);
        }
        set_condition(&mut self.resources().counts, &mut state, condition);
        state.place(u64::MAX);
        Ok(())
    }
}

fn invalid(op: Op, condition: ZoneCondition) -> ZoneError {
    ZoneError::InvalidCondition { op, condition }
}
