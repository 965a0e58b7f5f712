//! Writes of a [`ZoneSet`] whose data a store holds only once it completes
//! them, later ([`DeferredZoned`](super::DeferredZoned)):
//! [`ZoneSet::begin_write`] and [`ZoneSet::begin_append`] accept one, and
//! [`ZoneSet::end_write`] takes what the store did.  The rule is that of
//! [`ZoneSet::write`]: the write pointer moves once the data is stored, by
//! what was stored, so a write the store fails leaves it (and the data
//! end) where it was.
//!
//! Several writes of a zone may be in flight, each accepted where the one
//! before it ends; the write pointer follows them as they complete, up to
//! the first still in flight.  A write that fails stops the zone there:
//! the writes after it fail as they complete (they are no longer at the
//! write pointer), and the zone takes writes from where its data ends
//! again once none is in flight.  (One of them that completed before the
//! failed one did was answered already: its data is then past the write
//! pointer and never read, as on a drive that took writes out of order.)

use std::sync::atomic::Ordering;

use super::set::ZoneSet;
use super::{check_aligned, replay_applied, ZoneError};
use crate::error::IoError;

/// A write of a sequential zone accepted and not stored yet, to end with
/// [`ZoneSet::end_write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PendingWrite {
    index: usize,
    /// Where its data goes.
    offset: u64,
    len: u64,
    /// The first injected write error in it: the bytes before it are
    /// stored, and the write fails.
    fault: Option<u64>,
    ticket: u64,
}

impl PendingWrite {
    /// Where its data goes.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Its zone's index.
    pub(crate) fn zone(&self) -> u32 {
        self.index as u32
    }
}

/// What to do with a write [`ZoneSet::begin_write`] accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accepted {
    /// A write sent again after a recovery that was applied already:
    /// nothing to store.
    Applied,
    /// Store it; a sequential zone's write then ends with
    /// [`ZoneSet::end_write`].
    Store(Option<PendingWrite>),
}

impl ZoneSet {
    /// Accepts a write of `len` bytes at `offset` (`replay`: sent again
    /// after a recovery, judged as [`ZoneSet::write_replayed`] does) whose
    /// data a store holds only once it completes.  A conventional zone's
    /// write is only checked (and fails at an injected write error, with
    /// nothing stored).
    pub(crate) fn begin_write(
        &self,
        offset: u64,
        len: u64,
        replay: bool,
    ) -> Result<Accepted, ZoneError> {
        check_aligned(offset, len)?;
        let index = self.index_of(offset)?;
        if replay && replay_applied(&self.describe(index, &self.lock(index)), offset, len)? {
            return Ok(Accepted::Applied);
        }
        if self.is_conventional(index) {
            let zone_end = self.start_of(index) + self.geometry().zone_size();
            if offset.checked_add(len).is_none_or(|end| end > zone_end) {
                return Err(ZoneError::CrossesZoneBoundary);
            }
            if let Some(bad) = self.fault_in(offset, len) {
                return Err(ZoneError::InjectedFault { offset: bad });
            }
            return Ok(Accepted::Store(None));
        }
        self.begin(index, Some(offset), len)
            .map(|write| Accepted::Store(Some(write)))
    }

    /// Accepts an append of `len` bytes to the zone starting at byte
    /// `zone_start`, as [`ZoneSet::append`] checks it: it goes to
    /// [`PendingWrite::offset`].
    pub(crate) fn begin_append(
        &self,
        zone_start: u64,
        len: u64,
    ) -> Result<PendingWrite, ZoneError> {
        let index = self.check_append(zone_start, len)?;
        self.begin(index, None, len)
    }

    fn begin(&self, index: usize, at: Option<u64>, len: u64) -> Result<PendingWrite, ZoneError> {
        let mut state = self.lock(index);
        let offset = self.accept(index, &mut state, at, len)?;
        let fault = self.fault_in(offset, len);
        if fault == Some(offset) {
            // (nothing to store: as `ZoneSet::write`, at once)
            return Err(ZoneError::InjectedFault { offset });
        }
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        state.in_flight.insert((offset, ticket), offset + len);
        state.accepted = offset + len;
        Ok(PendingWrite {
            index,
            offset,
            len,
            fault,
            ticket,
        })
    }

    /// The store completed `write` with `result`: the write pointer moves
    /// over what it stored (nothing if it failed; up to an injected write
    /// error), once the writes before it are stored too.  The write's own
    /// outcome: the store's error, [`ZoneError::InjectedFault`],
    /// [`ZoneError::NotAtWritePointer`] behind a failed write (or after
    /// its zone was reset, finished or made read-only or offline while it
    /// was in flight), or success.
    pub(crate) fn end_write(
        &self,
        write: PendingWrite,
        result: Result<(), IoError>,
    ) -> Result<(), ZoneError> {
        let mut state = self.lock(write.index);
        let behind = |at: u64| ZoneError::NotAtWritePointer { write_pointer: at };
        if state
            .in_flight
            .remove(&(write.offset, write.ticket))
            .is_none()
        {
            return Err(behind(state.write_pointer));
        }
        if let Some(at) = state.failed.filter(|&at| write.offset >= at) {
            self.settle(write.index, &mut state);
            return Err(behind(at));
        }
        let (stored, outcome) = match (result, write.fault) {
            (Err(err), _) => (0, Err(ZoneError::Io(err))),
            (Ok(()), Some(bad)) => (
                bad - write.offset,
                Err(ZoneError::InjectedFault { offset: bad }),
            ),
            (Ok(()), None) => (write.len, Ok(())),
        };
        if stored < write.len {
            let at = write.offset + stored;
            state.failed = Some(state.failed.map_or(at, |failed| failed.min(at)));
        }
        self.settle(write.index, &mut state);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::{ZoneCondition, ZoneGeometry};

    const K: u64 = 1024;

    /// Four sequential zones of 8 KiB.
    fn zones() -> ZoneSet {
        ZoneSet::new(ZoneGeometry::new(32 * K, 8 * K).unwrap())
    }

    fn begin(zones: &ZoneSet, offset: u64, len: u64) -> PendingWrite {
        match zones.begin_write(offset, len, false) {
            Ok(Accepted::Store(Some(write))) => write,
            other => panic!("{other:?}"),
        }
    }

    fn write_pointer(zones: &ZoneSet, offset: u64) -> u64 {
        zones.report(offset, 1)[0].write_pointer
    }

    #[test]
    fn the_write_pointer_follows_the_stored_writes_in_order() {
        let zones = zones();
        let first = begin(&zones, 0, K);
        let second = begin(&zones, K, K);
        // Accepted past the writes in flight, stored nowhere yet.
        assert_eq!(first.offset(), 0);
        assert_eq!(write_pointer(&zones, 0), 0);
        assert_eq!(zones.end_write(second, Ok(())), Ok(()));
        assert_eq!(write_pointer(&zones, 0), 0);
        assert_eq!(zones.end_write(first, Ok(())), Ok(()));
        assert_eq!(write_pointer(&zones, 0), 2 * K);
        // An append lands where the writes in flight end.
        let third = begin(&zones, 2 * K, K);
        let append = zones.begin_append(0, K).unwrap();
        assert_eq!(append.offset(), 3 * K);
        zones.end_write(third, Ok(())).unwrap();
        zones.end_write(append, Ok(())).unwrap();
        assert_eq!(write_pointer(&zones, 0), 4 * K);
    }

    #[test]
    fn a_failed_write_stops_the_zone_until_its_writes_are_done() {
        let zones = zones();
        let first = begin(&zones, 0, K);
        let second = begin(&zones, K, K);
        assert_eq!(
            zones.end_write(first, Err(IoError::Io)),
            Err(ZoneError::Io(IoError::Io))
        );
        // Not at the write pointer any more, whatever the store did.
        assert_eq!(
            zones.end_write(second, Ok(())),
            Err(ZoneError::NotAtWritePointer { write_pointer: 0 })
        );
        let zone = zones.report(0, 1)[0];
        assert_eq!(
            (zone.condition, zone.write_pointer),
            (ZoneCondition::ImplicitOpen, 0)
        );
        // Writes go on from the write pointer.
        let again = begin(&zones, 0, K);
        zones.end_write(again, Ok(())).unwrap();
        assert_eq!(write_pointer(&zones, 0), K);
    }

    #[test]
    fn an_injected_fault_stores_the_bytes_before_it() {
        let zones = zones();
        zones.inject_write_error(8 * K + 1536).unwrap();
        let write = begin(&zones, 8 * K, 4 * K);
        assert_eq!(
            zones.end_write(write, Ok(())),
            Err(ZoneError::InjectedFault {
                offset: 8 * K + 1536
            })
        );
        assert_eq!(write_pointer(&zones, 8 * K), 8 * K + 1536);
        // At the bad sector nothing is begun.
        assert_eq!(
            zones.begin_write(8 * K + 1536, K, false),
            Err(ZoneError::InjectedFault {
                offset: 8 * K + 1536
            })
        );
    }

    #[test]
    fn zone_management_forgets_the_writes_in_flight() {
        let zones = zones();
        let write = begin(&zones, 16 * K, K);
        // Closed, not empty: a write is in flight.
        zones.close(16 * K).unwrap();
        assert_eq!(zones.report(16 * K, 1)[0].condition, ZoneCondition::Closed);
        zones.reset(16 * K, |_, _| Ok(())).unwrap();
        assert_eq!(
            zones.end_write(write, Ok(())),
            Err(ZoneError::NotAtWritePointer {
                write_pointer: 16 * K
            })
        );
        let zone = zones.report(16 * K, 1)[0];
        assert_eq!(
            (zone.condition, zone.write_pointer),
            (ZoneCondition::Empty, 16 * K)
        );
    }
}
