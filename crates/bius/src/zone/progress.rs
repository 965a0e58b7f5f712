//! [`Progress`]: what a [`ZoneJournal`] was told of each zone, and which
//! of it is durable.
//!
//! A journal must never record a write pointer past data whose write has
//! not completed.  The zone's write pointer is that already (the
//! [`ZoneSet`](super::ZoneSet) moves it over a write once the write is
//! stored, in order); writes completing out of order may acknowledge
//! their zone in another order than its write pointer moved, so a write's
//! acknowledgement never takes a record back ([`Progress::written`]).
//!
//! A zone is dirty from its acknowledgement until a flush started after it
//! has made it durable.  Flushes may overlap: each one takes a
//! [`Snapshot`] of every dirty zone (not only those changed since the last
//! flush began, which that flush may not have made durable yet), and
//! snapshots are made durable one at a time, a zone's record only if no
//! later snapshot has made it durable already.

use std::collections::BTreeSet;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::journal::{ZoneJournal, ZoneRecord};

/// What was last recorded of one zone.
#[derive(Debug)]
struct Tracked {
    /// What the journal has acknowledged.
    record: ZoneRecord,
}

/// The acknowledged state of every zone and the zones whose acknowledged
/// state is not durable yet.
#[derive(Debug)]
pub(crate) struct Progress {
    zones: Box<[Mutex<Tracked>]>,
    /// Zones acknowledged since their state was last made durable.
    dirty: Mutex<BTreeSet<u32>>,
    /// The generation of the next snapshot.
    generation: AtomicU64,
    /// Per zone, the generation of the snapshot that made it durable last;
    /// held while a snapshot is made durable.
    durable: Mutex<Box<[u64]>>,
}

/// The states of the dirty zones at one moment: a flush started after it
/// makes their data durable.
#[derive(Debug)]
pub(crate) struct Snapshot {
    generation: u64,
    records: Vec<(u32, ZoneRecord)>,
}

fn acquire<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Progress {
    /// The zones as `records` say, all durable.
    pub(crate) fn new(records: &[ZoneRecord]) -> Self {
        let zones = records
            .iter()
            .map(|&record| Mutex::new(Tracked { record }))
            .collect();
        Progress {
            zones,
            dirty: Mutex::new(BTreeSet::new()),
            generation: AtomicU64::new(1),
            durable: Mutex::new(vec![0; records.len()].into()),
        }
    }

    /// A write of zone `index` completed (stored or not) and the zone is
    /// now `record`: acknowledges it in `journal` if its write pointer
    /// moved past the one recorded.  (Two writes of a zone completing on
    /// two threads may get here in the other order: the later record is
    /// then the one kept.)
    pub(crate) fn written(
        &self,
        index: u32,
        record: ZoneRecord,
        journal: &dyn ZoneJournal,
    ) -> io::Result<()> {
        let mut zone = acquire(&self.zones[index as usize]);
        if record.write_pointer <= zone.record.write_pointer {
            return Ok(());
        }
        self.acknowledge(index, &mut zone, record, journal)
    }

    /// Zone `index` is now `record` (after a zone management operation,
    /// with no write of it in flight): acknowledges it in `journal` if it
    /// changed, and returns it then.
    pub(crate) fn set(
        &self,
        index: u32,
        record: ZoneRecord,
        journal: &dyn ZoneJournal,
    ) -> io::Result<Option<(u32, ZoneRecord)>> {
        let mut tracked = acquire(&self.zones[index as usize]);
        if tracked.record == record {
            return Ok(None);
        }
        self.acknowledge(index, &mut tracked, record, journal)?;
        Ok(Some((index, record)))
    }

    /// Makes `records`, just acknowledged, durable at once: states whose
    /// data need no flush (a reset's: a write pointer moving back never
    /// covers data that is not there).
    pub(crate) fn make_durable_now(
        &self,
        records: Vec<(u32, ZoneRecord)>,
        journal: &dyn ZoneJournal,
    ) -> io::Result<()> {
        let snapshot = Snapshot {
            generation: self.generation.fetch_add(1, Ordering::SeqCst),
            records,
        };
        self.make_durable(&snapshot, journal)
    }

    fn acknowledge(
        &self,
        index: u32,
        zone: &mut Tracked,
        record: ZoneRecord,
        journal: &dyn ZoneJournal,
    ) -> io::Result<()> {
        journal.acknowledged(index, record)?;
        zone.record = record;
        acquire(&self.dirty).insert(index);
        Ok(())
    }

    /// The acknowledged states not durable yet, now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let generation = self.generation.fetch_add(1, Ordering::SeqCst);
        let dirty = acquire(&self.dirty).clone();
        let records = dirty
            .into_iter()
            .map(|index| (index, acquire(&self.zones[index as usize]).record))
            .collect();
        Snapshot {
            generation,
            records,
        }
    }

    /// The data of `snapshot` is durable: makes its states durable in
    /// `journal` (those no later snapshot has made durable), and the zones
    /// unchanged since clean.
    pub(crate) fn make_durable(
        &self,
        snapshot: &Snapshot,
        journal: &dyn ZoneJournal,
    ) -> io::Result<()> {
        let mut durable = acquire(&self.durable);
        let newer: Vec<_> = snapshot
            .records
            .iter()
            .copied()
            .filter(|&(index, _)| durable[index as usize] < snapshot.generation)
            .collect();
        if newer.is_empty() {
            return Ok(());
        }
        journal.durable(&newer)?;
        let mut dirty = acquire(&self.dirty);
        for &(index, record) in &newer {
            durable[index as usize] = snapshot.generation;
            if acquire(&self.zones[index as usize]).record == record {
                dirty.remove(&index);
            }
        }
        Ok(())
    }
}
