//! [`Persist`]: a [`DeferredZoned`](super::DeferredZoned)'s link to its
//! [`ZoneJournal`]: the zones of completed writes are acknowledged before
//! their requests complete, and flushes (and FUA writes, followed by a
//! flush of the inner device) make the acknowledged states durable.

use std::sync::Arc;

use super::journal::{ZoneJournal, ZoneRecord};
use super::progress::Progress;
use super::set::ZoneSet;
use crate::deferred::{DeferredDevice, Io};
use crate::error::IoError;
use crate::request::Command;

/// The journal, the completed prefixes and the inner device (to flush).
pub(crate) struct Persist<D> {
    pub(crate) journal: Arc<dyn ZoneJournal>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) inner: Arc<D>,
}

impl<D> Clone for Persist<D> {
    fn clone(&self) -> Self {
        Persist {
            journal: Arc::clone(&self.journal),
            progress: Arc::clone(&self.progress),
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<D: DeferredDevice> Persist<D> {
    /// Acknowledges zone `index` as `zones` has it now that one of its
    /// writes completed, if its write pointer moved (see
    /// [`Progress::written`]).
    pub(crate) fn written(&self, zones: &ZoneSet, index: u32) -> Result<(), IoError> {
        let record = zones.record(index as usize);
        Ok(self.progress.written(index, record, &*self.journal)?)
    }

    /// Flushes the inner device with `io`, then makes the states
    /// acknowledged before it durable; `io` completes after both.
    pub(crate) fn flush(&self, mut io: Io) {
        let snapshot = self.progress.snapshot();
        let this = self.clone();
        io.redirect(Command::Flush).expect("a flush has no data");
        io.on_complete(move |io, result| {
            let durable = result.and_then(|reply| {
                this.progress
                    .make_durable(&snapshot, &*this.journal)
                    .map(|()| reply)
                    .map_err(IoError::from)
            });
            drop(this);
            io.complete(durable);
        });
        self.inner.submit(io);
    }

    /// Acknowledges the zone containing byte `offset` as `zones` has it
    /// now, and after a reset makes it durable at once (before its data is
    /// discarded).
    pub(crate) fn record(&self, zones: &ZoneSet, offset: u64, reset: bool) -> Result<(), IoError> {
        let index = offset / zones.geometry().zone_size();
        if index >= zones.geometry().zone_count() {
            return Err(IoError::Io);
        }
        let record = zones.record(index as usize);
        let changed = self.progress.set(index as u32, record, &*self.journal)?;
        match changed {
            Some(record) if reset => self.durable_now(vec![record]),
            _ => Ok(()),
        }
    }

    /// Acknowledges every zone as `zones` has it after a reset of all
    /// zones, and makes them durable at once.
    pub(crate) fn record_reset_all(&self, zones: &ZoneSet) -> Result<(), IoError> {
        let mut changed = Vec::new();
        for (index, record) in zones.records().into_iter().enumerate() {
            changed.extend(self.progress.set(index as u32, record, &*self.journal)?);
        }
        self.durable_now(changed)
    }

    fn durable_now(&self, records: Vec<(u32, ZoneRecord)>) -> Result<(), IoError> {
        Ok(self.progress.make_durable_now(records, &*self.journal)?)
    }
}
