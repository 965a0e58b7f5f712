//! [`DeferredZoned`]: a host-managed zoned device made of any conventional
//! [`DeferredDevice`] (a remote store, a file): the zones live here, the
//! data there.
//!
//! # What a read of space without data returns
//!
//! A sector of a sequential zone holds data from its write until the
//! zone's next reset (single or of all zones).  A read of any other sector
//! never reaches the inner device: past the write pointer it reads as
//! [`FILL_PATTERN`](super::FILL_PATTERN) (`0xff`), below it (the sectors a
//! finish moved the write pointer over) as zeroes, as on a memory-backed
//! zoned `null_blk`, whose reset frees the zone's memory (see
//! [`ReadSpan`](super::ReadSpan)).  A read with no data at all completes
//! here.  So no byte written before a reset is read again, whatever the
//! inner device does with a discard, or whether it has one.
//!
//! That costs no I/O: each zone keeps, besides its write pointer, where
//! its data ends ([`ZoneRecord::data_end`]): the write pointer, except
//! that a finish leaves it where the write pointer was.  The alternatives
//! were dearer or not always there: writing zeroes over a zone at each
//! reset or finish (up to a zone of I/O each, and impossible without a
//! buffer or a write-zeroes of the inner device), or trusting a discard to
//! zero (a discard is a hint, many devices have none, and a reset of all
//! zones, one request, would need one per zone).  A reset still
//! discards the zone in the inner device if it can, only to give the space
//! back.
//!
//! Across a daemon restart, with a [`ZoneJournal`], the data end is kept
//! with the write pointer: a reset is made durable before it completes
//! (the zone then reads as unwritten before and after a restart), a finish
//! is kept as any other state, and a restarted daemon hides the same
//! sectors.  Without a journal every zone starts empty: nothing is read
//! from the inner device until written again.
//!
//! A write is data once the inner device has completed it: while it is in
//! flight its sectors are past the write pointer, and a write the inner
//! device fails never moves the write pointer (see [`DeferredZoned`]).

use std::sync::Arc;

use super::journal::{ZoneJournal, ZoneRecord, ZoneRestoreError};
use super::pending::{Accepted, PendingWrite};
use super::persist::Persist;
use super::progress::Progress;
use super::set::ZoneSet;
use super::{ZoneError, ZoneGeometry};
use crate::block::Capabilities;
use crate::deferred::{DeferredDevice, Io};
use crate::error::IoError;
use crate::op::Op;
use crate::request::Command;
use crate::request::Reply;

/// Zones in front of a conventional [`DeferredDevice`]: the zone state
/// machine ([`ZoneSet`], the rules and errnos of zoned null_blk) is kept
/// here, and the data goes to `inner` with many requests in flight.
///
/// Any kind of device can be `inner`: a [`DeferredDevice`] as it is, a
/// synchronous [`BlockDevice`](crate::BlockDevice) through
/// [`Immediate`](crate::deferred::Immediate) (served on the queue's worker
/// as it is submitted), an async one through `bius::tokio::TokioDevice`.
/// (A synchronous store without a journal can also be zoned by
/// [`Zoned`](super::Zoned), served by the plain workers.)
///
/// A write is checked against its zone's write pointer (or, with writes of
/// the zone in flight, where the last of them ends) and goes to `inner`;
/// the write pointer moves over it once `inner` has completed it, by what
/// was stored, as [`Zoned`](super::Zoned)'s does: a write that `inner`
/// fails leaves the zone's write pointer and data end where they were (the
/// error reaches the kernel), as on zoned `null_blk`, and the zone's
/// writes in flight behind it fail as they complete.  An append becomes a
/// write at the write pointer and completes with where it landed.  Reads of
/// data go to `inner`; a sequential zone's sectors not written since its
/// last reset read as [`FILL_PATTERN`](super::FILL_PATTERN) past its write
/// pointer and as zeroes below it (after a finish), as on [`ZonedRamDisk`],
/// without reaching `inner` (see [`ReadSpan`](super::ReadSpan)).  A reset
/// discards the zone's data in `inner` if it can discard, and succeeds
/// however the discard ends (a reset of all zones discards nothing): no
/// read sees that data again either way, nor after a restart with a
/// journal.  Reports and the other zone operations are answered here, at
/// once.  The framework submits a zone's management only once its writes
/// in flight have completed, so `inner` sees a reset's discard after the
/// writes before it and before the ones after it.
///
/// A write or append sent again after a recovery ([`Io::is_replay`]) is
/// judged by [`ZoneSet::write_replayed`]: skipped if already applied,
/// applied if its zone's write pointer is at its start, failed with `EIO`
/// otherwise; a replayed append always fails with `EIO`.
///
/// With a [`ZoneJournal`] ([`DeferredZoned::with_journal`]) the zone states
/// outlive the process: each completed write's zone is acknowledged to the
/// journal before the write completes (its completed prefix: never past a
/// write still in flight), zone management likewise, and a flush, or a FUA
/// write followed by a flush of `inner`, makes the states acknowledged
/// before it durable.  A reset is made durable at once, before its data is
/// discarded: a write pointer moving back never covers missing data.
///
/// [`ZonedRamDisk`]: https://docs.rs/bius-backends/latest/bius_backends/type.ZonedRamDisk.html
///
/// ```no_run
/// use bius::deferred::Immediate;
/// use bius::zone::{DeferredZoned, ZoneGeometry};
/// use bius::{BlockDevice, DeferredDevice, DeviceBuilder};
///
/// /// `store` zoned: 64 MiB zones, the first 4 conventional.
/// fn zoned<D: DeferredDevice>(store: D, size: u64) -> Result<DeferredZoned<D>, bius::zone::ZoneGeometryError> {
///     let geometry = ZoneGeometry::new(size, 64 << 20)?.with_conventional_zones(4)?;
///     Ok(DeferredZoned::new(store, geometry))
/// }
///
/// fn serve(store: impl BlockDevice, size: u64) -> Result<(), Box<dyn std::error::Error>> {
///     // A synchronous store, served as it is submitted; the disk has the
///     // geometry's size.
///     let device = DeviceBuilder::default().create_deferred(zoned(Immediate::new(store), size)?)?;
///     device.run_until_signal()?;
///     Ok(())
/// }
/// ```
pub struct DeferredZoned<D> {
    inner: Arc<D>,
    zones: Arc<ZoneSet>,
    discard: bool,
    persist: Option<Persist<D>>,
}

impl<D: DeferredDevice> DeferredZoned<D> {
    /// Zones of `geometry` over `inner` (a conventional device of at least
    /// the geometry's size), all empty.
    pub fn new(inner: D, geometry: ZoneGeometry) -> Self {
        let discard = inner.capabilities().discard;
        DeferredZoned {
            inner: Arc::new(inner),
            zones: Arc::new(ZoneSet::new(geometry)),
            discard,
            persist: None,
        }
    }

    /// Zones of `geometry` over `inner`, in the states `records` (one per
    /// zone, as `journal` kept them, see [`ZoneSet::with_records`]); from
    /// now on `journal` keeps them (see the type's documentation).
    ///
    /// ```
    /// use std::io;
    /// use std::sync::Mutex;
    ///
    /// use bius::zone::{DeferredZoned, ZoneGeometry, ZoneJournal, ZoneRecord, ZoneSet};
    /// use bius::{DeferredDevice, Io, IoError};
    ///
    /// /// Keeps the states in memory (a real journal writes a file).
    /// struct Remembered(Mutex<Vec<ZoneRecord>>);
    ///
    /// impl ZoneJournal for Remembered {
    ///     fn acknowledged(&self, index: u32, record: ZoneRecord) -> io::Result<()> {
    ///         self.0.lock().unwrap()[index as usize] = record;
    ///         Ok(())
    ///     }
    ///     fn durable(&self, _: &[(u32, ZoneRecord)]) -> io::Result<()> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// struct Nowhere;
    /// impl DeferredDevice for Nowhere {
    ///     fn submit(&self, io: Io) {
    ///         io.complete_done(Ok(()));
    ///     }
    /// }
    ///
    /// let geometry = ZoneGeometry::new(4 << 20, 1 << 20)?;
    /// let records = ZoneSet::new(geometry).records();
    /// let journal = Remembered(Mutex::new(records.clone()));
    /// let zoned = DeferredZoned::with_journal(Nowhere, geometry, journal, &records)?;
    /// assert_eq!(zoned.zone_set().records(), records);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_journal(
        inner: D,
        geometry: ZoneGeometry,
        journal: impl ZoneJournal,
        records: &[ZoneRecord],
    ) -> Result<Self, ZoneRestoreError> {
        let zones = ZoneSet::with_records(geometry, records)?;
        let progress = Progress::new(records);
        let discard = inner.capabilities().discard;
        let inner = Arc::new(inner);
        Ok(DeferredZoned {
            persist: Some(Persist {
                journal: Arc::new(journal),
                progress: Arc::new(progress),
                inner: Arc::clone(&inner),
            }),
            inner,
            zones: Arc::new(zones),
            discard,
        })
    }

    /// The zones, e.g. to inject faults ([`ZoneSet::set_offline`], ...).
    pub fn zone_set(&self) -> &Arc<ZoneSet> {
        &self.zones
    }

    /// Sends the write `io` of `write` to the inner device.  Once it
    /// completes, its zone takes what was stored
    /// ([`ZoneSet::end_write`]) and the journal the zone's state, and with
    /// `fua` a flush of the inner device makes that durable, before `io`
    /// completes.
    ///
    /// (The hook lets go of the journal and the inner device before it
    /// completes `io`: whoever sees the completion may drop the device and
    /// expect them gone, e.g. to open the journal again.)
    fn store(&self, mut io: Io, write: PendingWrite, fua: bool) {
        let zones = Arc::clone(&self.zones);
        let persist = self.persist.clone();
        io.on_complete(move |io, result| {
            let stored = zones.end_write(write, result.as_ref().map(drop).map_err(|err| *err));
            let mut result = result.and_then(|reply| stored.map(|()| reply).map_err(IoError::from));
            if let Some(persist) = &persist {
                let acknowledged = persist.written(&zones, write.zone());
                result = result.and_then(|reply| acknowledged.map(|()| reply));
            }
            drop(zones);
            match persist {
                Some(persist) if fua && result.is_ok() => persist.flush(io),
                persist => {
                    drop(persist);
                    io.complete(result);
                }
            }
        });
        self.inner.submit(io);
    }

    /// Completes zone management `io` after `result`, the zone containing
    /// byte `offset` (all zones: `None`) acknowledged to the journal.
    fn managed(&self, io: Io, result: Result<(), ZoneError>, offset: Option<u64>) {
        let result = result
            .map_err(IoError::from)
            .and_then(|()| match (&self.persist, offset) {
                (None, _) => Ok(()),
                (Some(persist), Some(offset)) => persist.record(&self.zones, offset, false),
                (Some(persist), None) => persist.record_reset_all(&self.zones),
            });
        io.complete_done(result);
    }

    /// Serves the read `io` of `len` bytes at `offset`: the parts without
    /// data are filled here (see the [module documentation](self)), the
    /// rest is read from `inner`, if there is any.
    fn read(&self, mut io: Io, offset: u64, len: u64) {
        let mut data = false;
        let spans = self.zones.read(offset, len, |span| {
            data |= span.written > 0;
            let byte_at = |at: u64| (span.offset - offset + at) as usize;
            for (range, byte) in span.unwritten() {
                if !range.is_empty() {
                    io.fill_on_success(byte_at(range.start)..byte_at(range.end), byte);
                }
            }
            Ok(())
        });
        match spans {
            Err(err) => io.complete_done(Err(err.into())),
            Ok(()) if data => self.inner.submit(io),
            Ok(()) => io.complete_done(Ok(())),
        }
    }

    /// Sends `io`, a reset of the zone of `len` bytes at `offset`, to the
    /// inner device as a discard of the zone, which only gives the space
    /// back: `io` succeeds however the discard ends.
    fn discard(&self, mut io: Io, offset: u64, len: u64) {
        let discard = Command::Discard { offset, len };
        io.redirect(discard).expect("a reset has no data");
        io.on_complete(move |io, result| {
            if let Err(err) = result {
                log::debug!("discard of the zone reset at byte {offset} failed: {err}");
            }
            io.complete_done(Ok(()));
        });
        self.inner.submit(io);
    }

    /// Resets the zone at `offset`, makes that durable, and discards its
    /// data if `inner` can.
    fn reset(&self, io: Io, offset: u64) {
        let mut zone = None;
        let reset = self.zones.reset(offset, |start, len| {
            zone = Some((start, len));
            Ok(())
        });
        match (reset, zone, &self.persist) {
            (Ok(()), _, Some(persist)) if persist.record(&self.zones, offset, true).is_err() => {
                io.complete_done(Err(IoError::Io))
            }
            (Ok(()), Some((offset, len)), _) if self.discard => self.discard(io, offset, len),
            (result, _, _) => io.complete_done(result.map_err(IoError::from)),
        }
    }
}

impl<D: DeferredDevice> DeferredDevice for DeferredZoned<D> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities().zoned()
    }

    fn zones(&self) -> Option<ZoneGeometry> {
        Some(*self.zones.geometry())
    }

    fn submit(&self, mut io: Io) {
        let replay = io.is_replay();
        match io.command() {
            Command::Read { offset, len } => self.read(io, offset, len),
            Command::Write { offset, len, fua } => {
                match self.zones.begin_write(offset, len, replay) {
                    Ok(Accepted::Store(Some(write))) => self.store(io, write, fua),
                    Ok(Accepted::Store(None)) => self.inner.submit(io),
                    Ok(Accepted::Applied) => io.complete_done(Ok(())),
                    Err(err) => io.complete_done(Err(err.into())),
                }
            }
            Command::ZoneAppend { offset, len, fua } => {
                let begun = match replay {
                    true => Err(ZoneError::Replayed { op: Op::ZoneAppend }),
                    false => self.zones.begin_append(offset, len),
                };
                match begun {
                    Ok(write) => {
                        let at = write.offset();
                        let command = Command::Write {
                            offset: at,
                            len,
                            fua,
                        };
                        io.redirect(command).expect("the append's data");
                        io.reply_on_success(Reply::Appended(at));
                        self.store(io, write, fua);
                    }
                    Err(err) => io.complete_done(Err(err.into())),
                }
            }
            Command::Flush => match &self.persist {
                Some(persist) => persist.flush(io),
                None => self.inner.submit(io),
            },
            Command::ReportZones { offset, max_zones } => {
                let zones = self.zones.report(offset, max_zones);
                io.complete(Ok(Reply::Zones(zones)));
            }
            Command::ZoneOpen { offset } => {
                let result = self.zones.open(offset);
                self.managed(io, result, Some(offset));
            }
            Command::ZoneClose { offset } => {
                let result = self.zones.close(offset);
                self.managed(io, result, Some(offset));
            }
            Command::ZoneFinish { offset } => {
                let result = self.zones.finish(offset);
                self.managed(io, result, Some(offset));
            }
            Command::ZoneReset { offset } => self.reset(io, offset),
            Command::ZoneResetAll => {
                let result = self.zones.reset_all(|_, _| Ok(()));
                self.managed(io, result, None);
            }
            _ => io.complete_done(Err(IoError::Unsupported)),
        }
    }
}
