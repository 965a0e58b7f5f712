//! [`ZoneSet::serve`], the one place that serves a [`Request`] against a
//! [`ZoneSet`] with the data in a conventional [`BlockDevice`], and
//! [`Zoned`], the zoned block device made of the two.

use super::set::ZoneSet;
use super::{Zone, ZoneGeometry};
use crate::block::{BlockDevice, Capabilities};
use crate::error::IoError;
use crate::request::{Reply, Request};

impl ZoneSet {
    /// Serves `request` on these zones, with the data in `store`, a
    /// conventional device whose byte offsets are the zoned device's.
    ///
    /// The zone rules are this set's: a write or append is checked against
    /// its zone, stored by `store.write` with the zone locked, and moves
    /// the write pointer once stored; a read fills what holds no data (see
    /// [`ReadSpan`](super::ReadSpan)) and reads the rest from `store`; a
    /// reset gives the zone's data back with `store.discard` (its failure
    /// is ignored: no read sees that data again anyway); a flush is
    /// `store.flush`; reports and the other zone operations are answered
    /// here.  Discard and write-zeroes, which zoned disks do not have, fail
    /// with `EOPNOTSUPP`.  A [`ZoneError`](super::ZoneError) becomes the
    /// errno a zoned `null_blk` answers.
    ///
    /// [`Zoned`] is the device made of a `ZoneSet` and a store; a device
    /// of one's own calls this from its
    /// [`handle`](BlockDevice::handle).
    pub fn serve<D: BlockDevice + ?Sized>(
        &self,
        store: &D,
        request: Request<'_>,
    ) -> Result<Reply, IoError> {
        let discard = |offset: u64, len: u64| {
            // (only the space: the zone reads as empty whatever happens)
            let _ = store.discard(offset, len);
            Ok(())
        };
        match request {
            Request::Read { offset, buf } => {
                self.read(offset, buf.len() as u64, |span| {
                    let out = &mut buf[(span.offset - offset) as usize..][..span.len as usize];
                    let written = span.fill_unwritten(out);
                    match written.is_empty() {
                        true => Ok(()),
                        false => store.read(span.offset, written),
                    }
                })?;
            }
            Request::Write { offset, data, fua } => {
                self.write(offset, data.len() as u64, |at, len| {
                    store.write(at, &data[..len as usize], fua)
                })?;
            }
            Request::ZoneAppend { offset, data, fua } => {
                let at = self.append(offset, data.len() as u64, |at, len| {
                    store.write(at, &data[..len as usize], fua)
                })?;
                return Ok(Reply::Appended(at));
            }
            Request::Flush => store.flush()?,
            Request::ReportZones { offset, max_zones } => {
                return Ok(Reply::Zones(self.report(offset, max_zones)));
            }
            Request::ZoneOpen { offset } => self.open(offset)?,
            Request::ZoneClose { offset } => self.close(offset)?,
            Request::ZoneFinish { offset } => self.finish(offset)?,
            Request::ZoneReset { offset } => self.reset(offset, discard)?,
            Request::ZoneResetAll => self.reset_all(discard)?,
            Request::Discard { .. } | Request::WriteZeroes { .. } => {
                return Err(IoError::Unsupported)
            }
        }
        Ok(Reply::Done)
    }
}

/// A zoned (host-managed) block device made of a conventional one: the
/// zones and their rules in a [`ZoneSet`] (those of zoned `null_blk`), the
/// data in `inner`, at the same byte offsets.  Every request is served by
/// [`ZoneSet::serve`].
///
/// `inner` is any [`BlockDevice`] used as a plain store: a write reaches it
/// only once its zone accepted it, with the zone locked (so a zone's writes
/// reach it one at a time, in write-pointer order); it is read only where
/// data was written since the zone's last reset; a zone reset discards the
/// zone in it if it can.  Its capabilities are the device's, less discard
/// and write-zeroes.  The device is served by the queues' workers like
/// any `BlockDevice`; for a deferred store with many requests in flight
/// (and zone states that outlive the daemon), see
/// [`DeferredZoned`](super::DeferredZoned).
///
/// ```
/// use std::sync::RwLock;
///
/// use bius::loopback::{Loopback, Submission};
/// use bius::zone::{ZoneGeometry, Zoned, FILL_PATTERN};
/// use bius::{BlockDevice, DeviceBuilder, IoError, Reply};
///
/// /// The data of the disk, in one buffer.
/// struct Memory(RwLock<Vec<u8>>);
///
/// impl BlockDevice for Memory {
///     fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
///         let data = self.0.read().map_err(|_| IoError::Io)?;
///         buf.copy_from_slice(&data[offset as usize..][..buf.len()]);
///         Ok(())
///     }
///     fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
///         let mut store = self.0.write().map_err(|_| IoError::Io)?;
///         store[offset as usize..][..data.len()].copy_from_slice(data);
///         Ok(())
///     }
/// }
///
/// // 4 MiB in 1 MiB zones, the first conventional, at most 2 open.
/// let geometry = ZoneGeometry::new(4 << 20, 1 << 20)?
///     .with_conventional_zones(1)?
///     .with_max_open(2);
/// let disk = Zoned::new(Memory(RwLock::new(vec![0; 4 << 20])), geometry);
/// assert_eq!(disk.zone_append(1 << 20, &[1; 4096], false), Ok(1 << 20));
/// disk.write((1 << 20) + 4096, &[2; 512], false)?;
/// assert!(disk.write(1 << 20, &[3; 512], false).is_err()); // not at the write pointer
/// let mut buf = [0; 1024];
/// disk.read((1 << 20) + 4096, &mut buf)?;
/// assert_eq!((buf[0], buf[512]), (2, FILL_PATTERN));
///
/// // Served as the kernel would serve it (a DeviceBuilder's create() too).
/// let mut kernel = Loopback::new(&DeviceBuilder::default()).unwrap();
/// kernel.start(disk).unwrap();
/// let append = Submission::append(2 << 20, vec![4; 512]);
/// assert_eq!(kernel.run(0, append), Ok(Reply::Appended(2 << 20)));
/// kernel.stop().unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Zoned<D> {
    zones: ZoneSet,
    inner: D,
}

impl<D: BlockDevice> Zoned<D> {
    /// Zones of `geometry`, all empty, over `inner` (at least the
    /// geometry's size).
    pub fn new(inner: D, geometry: ZoneGeometry) -> Self {
        Zoned {
            zones: ZoneSet::new(geometry),
            inner,
        }
    }

    /// The zones, e.g. to inject faults ([`ZoneSet::set_offline`], ...).
    pub fn zone_set(&self) -> &ZoneSet {
        &self.zones
    }

    /// The device holding the data.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

impl<D: BlockDevice> BlockDevice for Zoned<D> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities().zoned()
    }

    fn zones(&self) -> Option<ZoneGeometry> {
        Some(*self.zones.geometry())
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        self.handle(Request::Read { offset, buf }).map(drop)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        self.handle(Request::Write { offset, data, fua }).map(drop)
    }

    fn flush(&self) -> Result<(), IoError> {
        self.inner.flush()
    }

    fn discard(&self, _offset: u64, _len: u64) -> Result<(), IoError> {
        Err(IoError::Unsupported)
    }

    fn write_zeroes(&self, _offset: u64, _len: u64, _unmap: bool) -> Result<(), IoError> {
        Err(IoError::Unsupported)
    }

    fn report_zones(&self, offset: u64, max_zones: usize) -> Result<Vec<Zone>, IoError> {
        Ok(self.zones.report(offset, max_zones))
    }

    fn zone_open(&self, offset: u64) -> Result<(), IoError> {
        self.handle(Request::ZoneOpen { offset }).map(drop)
    }

    fn zone_close(&self, offset: u64) -> Result<(), IoError> {
        self.handle(Request::ZoneClose { offset }).map(drop)
    }

    fn zone_finish(&self, offset: u64) -> Result<(), IoError> {
        self.handle(Request::ZoneFinish { offset }).map(drop)
    }

    fn zone_reset(&self, offset: u64) -> Result<(), IoError> {
        self.handle(Request::ZoneReset { offset }).map(drop)
    }

    fn zone_reset_all(&self) -> Result<(), IoError> {
        self.handle(Request::ZoneResetAll).map(drop)
    }

    fn zone_append(&self, offset: u64, data: &[u8], fua: bool) -> Result<u64, IoError> {
        match self.handle(Request::ZoneAppend { offset, data, fua })? {
            Reply::Appended(at) => Ok(at),
            _ => Err(IoError::Io),
        }
    }

    fn handle(&self, request: Request<'_>) -> Result<Reply, IoError> {
        self.zones.serve(&self.inner, request)
    }
}
