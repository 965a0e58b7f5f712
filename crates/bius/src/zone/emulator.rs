//! [`ZoneEmulator`]: a host-managed zoned device made of any conventional
//! [`DeferredDevice`] (a remote store, a file): the zones live here, the
//! data there.

use std::sync::Arc;

use super::set::ZoneSet;
use super::{ZoneError, ZoneGeometry, ZoneGeometryError, FILL_PATTERN, SECTOR_SHIFT};
use crate::block::Capabilities;
use crate::deferred::{DeferredDevice, Io, IoCommand};
use crate::error::IoError;
use crate::zone::request::ZoneReply;

/// Zones in front of a conventional [`DeferredDevice`]: the zone state
/// machine ([`ZoneSet`], the rules and errnos of zoned null_blk) is kept
/// here, and the data goes to `inner` with many requests in flight.
///
/// A write is checked against its zone's write pointer, which moves past it
/// as it is submitted; the data then goes to `inner`.  An append becomes a
/// write at the write pointer and completes with its sector.  Reads go to
/// `inner` too; the part of a sequential zone beyond its write pointer
/// reads as [`FILL_PATTERN`], as on [`ZonedRamDisk`].  A reset discards the
/// zone's data in `inner` if it can discard (a reset of all zones discards
/// nothing: what it leaves reads as the fill pattern all the same).  Reports and the other zone
/// operations are answered here, at once.  The framework submits a zone's
/// management only once its writes in flight have completed, so `inner`
/// sees a reset's discard after the writes before it and before the ones
/// after it.
///
/// A write that `inner` fails leaves its zone's write pointer past it, as a
/// device's failed write does; the error reaches the kernel.
///
/// [`ZonedRamDisk`]: https://docs.rs/bius-backends/latest/bius_backends/struct.ZonedRamDisk.html
///
/// ```no_run
/// use bius::zone::{ZoneEmulator, ZoneGeometry};
/// use bius::{DeferredDevice, DeviceBuilder};
///
/// fn zoned(store: impl DeferredDevice, size: u64) -> Result<(), Box<dyn std::error::Error>> {
///     // 64 MiB zones, the first 4 conventional.
///     let geometry = ZoneGeometry {
///         conventional_zones: 4,
///         ..ZoneGeometry::new(size >> 9, 64 << 11)
///     };
///     let device = DeviceBuilder::new(size).create_deferred(ZoneEmulator::new(store, geometry)?)?;
///     device.run_until_signal()?;
///     Ok(())
/// }
/// ```
pub struct ZoneEmulator<D> {
    inner: D,
    zones: Arc<ZoneSet>,
    discard: bool,
}

impl<D: DeferredDevice> ZoneEmulator<D> {
    /// Zones of `geometry` over `inner`, all empty.
    pub fn new(inner: D, geometry: ZoneGeometry) -> Result<Self, ZoneGeometryError> {
        let discard = inner.capabilities().discard;
        Ok(ZoneEmulator {
            inner,
            zones: Arc::new(ZoneSet::new(geometry)?),
            discard,
        })
    }

    /// The zones, e.g. to inject faults ([`ZoneSet::set_offline`], ...).
    pub fn zones(&self) -> &Arc<ZoneSet> {
        &self.zones
    }

    /// Checks a write against its zone and moves the write pointer.
    fn write(&self, offset: u64, len: usize) -> Result<(), ZoneError> {
        let (sector, sectors) = super::to_sectors(offset, len as u64)?;
        self.zones.write(sector, sectors, |_, _| Ok(()))
    }

    /// Where an append lands: the write pointer, moved past it.
    fn append(&self, offset: u64, len: usize) -> Result<u64, ZoneError> {
        let (sector, sectors) = super::to_sectors(offset, len as u64)?;
        self.zones.append(sector, sectors, |_, _| Ok(()))
    }

    /// The bytes of a read of `len` at `offset` beyond their zones' write
    /// pointers, from the first such byte on (a read crossing into a zone
    /// with data after one without, where the kernel allows it, is rare:
    /// the range then ends at the read's end).
    fn unwritten(
        &self,
        offset: u64,
        len: usize,
    ) -> Result<Option<std::ops::Range<usize>>, ZoneError> {
        let (sector, sectors) = super::to_sectors(offset, len as u64)?;
        let mut first = None;
        self.zones.read(sector, sectors, |span| {
            if span.written < span.sectors && first.is_none() {
                first = Some(((span.sector - sector + span.written) << SECTOR_SHIFT) as usize);
            }
            Ok(())
        })?;
        Ok(first.map(|start| start..len))
    }

    /// Sends `io` to the inner device as `command`, answered with `reply`.
    fn forward(&self, mut io: Io, command: IoCommand, reply: Option<ZoneReply>) {
        io.redirect(command, reply);
        self.inner.submit(io);
    }

    /// Resets the zone at `offset`, and discards its data if `inner` can.
    fn reset(&self, io: Io, offset: u64) {
        let mut zone = None;
        let reset = self.zones.reset(offset >> SECTOR_SHIFT, |start, sectors| {
            zone = Some((start << SECTOR_SHIFT, sectors << SECTOR_SHIFT));
            Ok(())
        });
        match (reset, zone) {
            (Ok(()), Some((offset, len))) if self.discard => {
                self.forward(io, IoCommand::Discard { offset, len }, None);
            }
            (result, _) => io.complete(result.map_err(IoError::from)),
        }
    }
}

impl<D: DeferredDevice> DeferredDevice for ZoneEmulator<D> {
    fn capabilities(&self) -> Capabilities {
        // Zoned: no discard or write-zeroes of arbitrary ranges.
        Capabilities {
            discard: false,
            write_zeroes: false,
            ..self.inner.capabilities()
        }
    }

    fn zone_geometry(&self) -> Option<ZoneGeometry> {
        Some(*self.zones.geometry())
    }

    fn submit(&self, mut io: Io) {
        match io.command() {
            IoCommand::Read { offset, len } => match self.unwritten(offset, len) {
                Ok(unwritten) => {
                    if let Some(range) = unwritten {
                        io.fill_on_success(range, FILL_PATTERN);
                    }
                    self.inner.submit(io);
                }
                Err(err) => io.complete(Err(err.into())),
            },
            IoCommand::Write { offset, len, .. } => match self.write(offset, len) {
                Ok(()) => self.inner.submit(io),
                Err(err) => io.complete(Err(err.into())),
            },
            IoCommand::ZoneAppend { offset, len, fua } => match self.append(offset, len) {
                Ok(sector) => {
                    let write = IoCommand::Write {
                        offset: sector << SECTOR_SHIFT,
                        len,
                        fua,
                    };
                    self.forward(io, write, Some(ZoneReply::Appended(sector)));
                }
                Err(err) => io.complete(Err(err.into())),
            },
            IoCommand::Flush => self.inner.submit(io),
            IoCommand::ReportZones { offset, max_zones } => {
                let zones = self.zones.report(offset >> SECTOR_SHIFT, max_zones);
                io.complete_zone(Ok(ZoneReply::Zones(zones)));
            }
            IoCommand::ZoneOpen { offset } => {
                io.complete(self.zones.open(offset >> SECTOR_SHIFT).map_err(Into::into))
            }
            IoCommand::ZoneClose { offset } => {
                io.complete(self.zones.close(offset >> SECTOR_SHIFT).map_err(Into::into))
            }
            IoCommand::ZoneFinish { offset } => io.complete(
                self.zones
                    .finish(offset >> SECTOR_SHIFT)
                    .map_err(Into::into),
            ),
            IoCommand::ZoneReset { offset } => self.reset(io, offset),
            IoCommand::ZoneResetAll => {
                let result = self.zones.reset_all(|_, _| Ok(()));
                io.complete(result.map_err(Into::into));
            }
            _ => io.complete(Err(IoError::Unsupported)),
        }
    }
}
