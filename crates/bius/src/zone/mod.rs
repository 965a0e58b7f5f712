//! Zoned block devices (host-managed ZBC/ZNS): zone descriptors, the
//! [`ZoneGeometry`], the zone state machine [`ZoneSet`] and the
//! [`ZonedDevice`] trait.
//!
//! The semantics are those of Linux's zoned `null_blk`: leading
//! conventional zones, then sequential-write-required zones written only
//! at their write pointer, with the same open/active resource limits, the
//! same no-op successes and the same errnos (see [`ZoneError`]).
//!
//! Positions and lengths are in 512-byte sectors, like the kernel's
//! `struct blk_zone`, except the byte offsets of [`ZonedDevice`], which
//! follow [`BlockDevice`].
//!
//! Where this module differs from `null_blk` (v6.1), and why:
//! - an invalid [`ZoneGeometry`] is an error, never silently adjusted
//!   (`null_blk` lowers too many conventional zones to all but one);
//! - the checks the block layer makes before `null_blk` sees a request are
//!   made here too: a zone append must name a zone start and fit in
//!   `max_append`, a write must not cross into the next zone;
//! - a read may span zones, each part judged against its own zone;
//! - a write reaching an injected error stores the sectors before it and
//!   moves the write pointer there (as `null_blk` does with
//!   `badblocks_partial_io`, from Linux 6.14); errors stay until cleared;
//! - making a zone read-only or offline gives back its resources directly
//!   (`null_blk` finishes it first, which can close another zone, or fail
//!   at the limits and leave a counter too high);
//! - an implicitly open zone busy in another thread is not closed to make
//!   room (see [`ZoneSet`]).

use std::fmt;

use crate::block::BlockDevice;
use crate::error::{Errno, IoError};
use crate::request::{Reply, Request};

mod disk;
mod emulator;
mod journal;
pub(crate) mod layout;
mod persist;
mod progress;
mod set;
mod span;
#[cfg(test)]
mod tests;

pub use disk::{disk_zones, DiskZonesError};
pub use emulator::ZoneEmulator;
pub use journal::{ZoneJournal, ZoneRecord, ZoneRestoreError};
pub use set::{ZoneCounts, ZoneSet};
pub use span::ReadSpan;

/// log2 of the sector size.
pub const SECTOR_SHIFT: u32 = 9;

/// The unit of every position and length in this module, in bytes.
pub const SECTOR_SIZE: u64 = 1 << SECTOR_SHIFT;

/// What every byte past a sequential zone's write pointer reads as (as on
/// a memory-backed `null_blk`).
pub const FILL_PATTERN: u8 = 0xff;

/// The kind of a zone; the values are the kernel's `BLK_ZONE_TYPE_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ZoneType {
    /// Written anywhere, like a conventional disk (`BLK_ZONE_TYPE_CONVENTIONAL`).
    Conventional = 0x1,
    /// Written only at the write pointer (`BLK_ZONE_TYPE_SEQWRITE_REQ`).
    SequentialWriteRequired = 0x2,
    /// Written preferably at the write pointer
    /// (`BLK_ZONE_TYPE_SEQWRITE_PREF`, host-aware disks): never in a
    /// [`ZoneSet`], but a disk's report may have it.
    SequentialWritePreferred = 0x3,
}

impl ZoneType {
    /// The type of a `BLK_ZONE_TYPE_*` value.
    pub fn from_raw(raw: u8) -> Option<Self> {
        [
            ZoneType::Conventional,
            ZoneType::SequentialWriteRequired,
            ZoneType::SequentialWritePreferred,
        ]
        .into_iter()
        .find(|&t| t as u8 == raw)
    }
}

/// The names blkzone(8) prints: `CONVENTIONAL`, `SEQ_WRITE_REQUIRED`,
/// `SEQ_WRITE_PREFERRED`.
impl fmt::Display for ZoneType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ZoneType::Conventional => "CONVENTIONAL",
            ZoneType::SequentialWriteRequired => "SEQ_WRITE_REQUIRED",
            ZoneType::SequentialWritePreferred => "SEQ_WRITE_PREFERRED",
        })
    }
}

/// The condition of a zone; the values are the kernel's `BLK_ZONE_COND_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ZoneCondition {
    /// A conventional zone, without write pointer (`BLK_ZONE_COND_NOT_WP`).
    NotWritePointer = 0x0,
    /// Nothing written, write pointer at the start (`BLK_ZONE_COND_EMPTY`).
    Empty = 0x1,
    /// Opened by a write (`BLK_ZONE_COND_IMP_OPEN`).
    ImplicitOpen = 0x2,
    /// Opened by an open operation (`BLK_ZONE_COND_EXP_OPEN`).
    ExplicitOpen = 0x3,
    /// Partly written, not open (`BLK_ZONE_COND_CLOSED`).
    Closed = 0x4,
    /// Readable only (`BLK_ZONE_COND_READONLY`).
    ReadOnly = 0xd,
    /// Written to its capacity, or finished (`BLK_ZONE_COND_FULL`).
    Full = 0xe,
    /// Neither readable nor writable (`BLK_ZONE_COND_OFFLINE`).
    Offline = 0xf,
}

impl ZoneCondition {
    /// The condition of a `BLK_ZONE_COND_*` value.
    pub fn from_raw(raw: u8) -> Option<Self> {
        [
            ZoneCondition::NotWritePointer,
            ZoneCondition::Empty,
            ZoneCondition::ImplicitOpen,
            ZoneCondition::ExplicitOpen,
            ZoneCondition::Closed,
            ZoneCondition::ReadOnly,
            ZoneCondition::Full,
            ZoneCondition::Offline,
        ]
        .into_iter()
        .find(|&c| c as u8 == raw)
    }

    /// Whether the zone's write pointer means something: false for
    /// conventional, read-only and offline zones.
    pub fn has_write_pointer(self) -> bool {
        !matches!(
            self,
            ZoneCondition::NotWritePointer | ZoneCondition::ReadOnly | ZoneCondition::Offline
        )
    }
}

/// The kernel's names (`blk_zone_cond_str()`): `NOT_WP`, `EMPTY`,
/// `IMP_OPEN`, `EXP_OPEN`, `CLOSED`, `READONLY`, `FULL`, `OFFLINE`.
impl fmt::Display for ZoneCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ZoneCondition::NotWritePointer => "NOT_WP",
            ZoneCondition::Empty => "EMPTY",
            ZoneCondition::ImplicitOpen => "IMP_OPEN",
            ZoneCondition::ExplicitOpen => "EXP_OPEN",
            ZoneCondition::Closed => "CLOSED",
            ZoneCondition::ReadOnly => "READONLY",
            ZoneCondition::Full => "FULL",
            ZoneCondition::Offline => "OFFLINE",
        })
    }
}

/// One zone, as a zone report describes it (the kernel's `struct blk_zone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Zone {
    /// First sector.
    pub start: u64,
    /// Length in sectors.
    pub len: u64,
    /// Writable sectors from the start (at most `len`).
    pub capacity: u64,
    /// The next sector a write must start at: `start + len` for a
    /// conventional zone, `u64::MAX` for a read-only or offline one.
    pub write_pointer: u64,
    /// Conventional or sequential.
    pub zone_type: ZoneType,
    /// The condition.
    pub condition: ZoneCondition,
}

/// The zone layout and limits of a zoned device, in sectors.
///
/// Start from [`ZoneGeometry::new`] and override fields with struct update
/// syntax; [`ZoneSet::new`] validates and normalises the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZoneGeometry {
    /// Device size.  The last zone is shorter (a runt) if this is not a
    /// multiple of the zone size.
    pub device_sectors: u64,
    /// Zone size: a power of two.
    pub zone_sectors: u64,
    /// Writable sectors of each zone, from 1 to the zone size (a runt
    /// zone's capacity is at most its length).
    pub zone_capacity: u64,
    /// How many zones, from the first, are conventional.  At least one zone
    /// must be sequential.
    pub conventional_zones: u32,
    /// Most zones open at once; 0 for no limit.  A limit of at least the
    /// number of sequential zones means no limit; it is lowered to
    /// `max_active` if that is smaller.
    pub max_open: u32,
    /// Most zones open or closed at once; 0 for no limit.  A limit of at
    /// least the number of sequential zones means no limit.
    pub max_active: u32,
    /// Largest zone append; 0 for the zone size, which is the most.
    pub max_append: u64,
}

impl ZoneGeometry {
    /// A device of `device_sectors` in zones of `zone_sectors`, all
    /// sequential, with full capacity and no limits.
    pub fn new(device_sectors: u64, zone_sectors: u64) -> Self {
        ZoneGeometry {
            device_sectors,
            zone_sectors,
            zone_capacity: zone_sectors,
            conventional_zones: 0,
            max_open: 0,
            max_active: 0,
            max_append: 0,
        }
    }

    /// Number of zones, the runt included (0 if the zone size is 0).
    pub fn zone_count(&self) -> u64 {
        if self.zone_sectors == 0 {
            return 0;
        }
        self.device_sectors.div_ceil(self.zone_sectors)
    }

    /// Number of sequential zones.
    pub fn sequential_zones(&self) -> u64 {
        self.zone_count()
            .saturating_sub(u64::from(self.conventional_zones))
    }

    /// Where zone `index` (below [`ZoneGeometry::zone_count`]) lies and how
    /// much of it is writable: a conventional zone all of it, a sequential
    /// one at most the zone capacity.
    pub(crate) fn zone_extent(&self, index: u64) -> ZoneExtent {
        let start = index * self.zone_sectors;
        let len = self.zone_sectors.min(self.device_sectors - start);
        let capacity = if index < u64::from(self.conventional_zones) {
            len
        } else {
            len.min(self.zone_capacity)
        };
        ZoneExtent {
            start,
            len,
            capacity,
        }
    }

    /// Checks the geometry and normalises the limits as `null_blk` does:
    /// `max_append` 0 becomes the zone size, a limit that cannot be reached
    /// becomes 0 (none), and `max_open` is lowered to `max_active`.
    pub fn normalized(self) -> Result<Self, ZoneGeometryError> {
        use ZoneGeometryError::*;
        if !self.zone_sectors.is_power_of_two() {
            return Err(ZoneSizeNotPowerOfTwo);
        }
        if self.zone_sectors > self.device_sectors {
            return Err(ZoneLargerThanDevice);
        }
        if self.zone_capacity == 0 {
            return Err(CapacityZero);
        }
        if self.zone_capacity > self.zone_sectors {
            return Err(CapacityLargerThanZone);
        }
        let zones = self.zone_count();
        if zones > u64::from(u32::MAX) {
            return Err(TooManyZones);
        }
        if u64::from(self.conventional_zones) >= zones {
            return Err(NoSequentialZone);
        }
        if self.max_append > self.zone_sectors {
            return Err(AppendLargerThanZone);
        }
        let sequential = self.sequential_zones();
        let mut geometry = self;
        if geometry.max_append == 0 {
            geometry.max_append = geometry.zone_sectors;
        }
        if u64::from(geometry.max_active) >= sequential {
            geometry.max_active = 0;
        }
        if geometry.max_active != 0 && geometry.max_open > geometry.max_active {
            geometry.max_open = geometry.max_active;
        } else if u64::from(geometry.max_open) >= sequential {
            geometry.max_open = 0;
        }
        Ok(geometry)
    }
}

/// Where a zone lies in a [`ZoneGeometry`] and how much of it is
/// writable, in sectors ([`ZoneGeometry::zone_extent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ZoneExtent {
    /// First sector.
    pub(crate) start: u64,
    /// Length: the zone size, less for a runt at the device end.
    pub(crate) len: u64,
    /// Writable sectors from the start.
    pub(crate) capacity: u64,
}

/// What is wrong with a [`ZoneGeometry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZoneGeometryError {
    /// The zone size is not a power of two (or is 0).
    ZoneSizeNotPowerOfTwo,
    /// The zone size is larger than the device.
    ZoneLargerThanDevice,
    /// The zone capacity is 0.
    CapacityZero,
    /// The zone capacity is larger than the zone size.
    CapacityLargerThanZone,
    /// More than `u32::MAX` zones.
    TooManyZones,
    /// Every zone would be conventional.
    NoSequentialZone,
    /// The largest zone append is larger than the zone size.
    AppendLargerThanZone,
}

impl fmt::Display for ZoneGeometryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ZoneGeometryError::ZoneSizeNotPowerOfTwo => "zone size must be a power of two",
            ZoneGeometryError::ZoneLargerThanDevice => {
                "zone size must not be larger than the device"
            }
            ZoneGeometryError::CapacityZero => "zone capacity must not be 0",
            ZoneGeometryError::CapacityLargerThanZone => {
                "zone capacity must not be larger than the zone size"
            }
            ZoneGeometryError::TooManyZones => "a device has at most u32::MAX zones",
            ZoneGeometryError::NoSequentialZone => {
                "there must be fewer conventional zones than zones"
            }
            ZoneGeometryError::AppendLargerThanZone => {
                "largest zone append must not be larger than the zone size"
            }
        })
    }
}

impl std::error::Error for ZoneGeometryError {}

/// An operation on a zone, named in [`ZoneError::InvalidCondition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZoneOp {
    /// A read.
    Read,
    /// A write at the write pointer.
    Write,
    /// A zone append.
    Append,
    /// An explicit open.
    Open,
    /// A close.
    Close,
    /// A finish.
    Finish,
    /// A reset.
    Reset,
    /// Making a zone read-only or offline (fault injection).
    InjectFault,
}

/// Why a zoned request failed.  As an [`IoError`] it becomes the errno
/// user space sees on a zoned `null_blk`: [`ZoneError::OpenResource`] is
/// `ETOOMANYREFS`, [`ZoneError::ActiveResource`] `EOVERFLOW`,
/// [`ZoneError::Unaligned`] `EINVAL`, [`ZoneError::Io`] its own errno, and
/// every other one `EIO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZoneError {
    /// The range goes past the end of the device.
    OutOfRange {
        /// The first sector of the range.
        sector: u64,
    },
    /// A byte offset or length is not a whole number of sectors.
    Unaligned,
    /// A write to a conventional zone goes into the next zone.
    CrossesZoneBoundary,
    /// A zone append does not name the start of a zone.
    NotZoneStart,
    /// A zone append is longer than the geometry's `max_append`.
    AppendTooLarge {
        /// The largest append, in sectors.
        max: u64,
    },
    /// The operation is not allowed in the zone's condition (conventional
    /// zones have [`ZoneCondition::NotWritePointer`]).
    InvalidCondition {
        /// What was asked.
        op: ZoneOp,
        /// The zone's condition.
        condition: ZoneCondition,
    },
    /// A write does not start at the write pointer.
    NotAtWritePointer {
        /// Where the zone's write pointer is.
        write_pointer: u64,
    },
    /// A write goes past the zone's capacity.
    BeyondCapacity,
    /// Opening the zone would exceed the open-zone limit
    /// (`BLK_STS_ZONE_OPEN_RESOURCE`).
    OpenResource,
    /// Opening the zone would exceed the active-zone limit
    /// (`BLK_STS_ZONE_ACTIVE_RESOURCE`).
    ActiveResource,
    /// A write reached a sector with an injected write error; the sectors
    /// before it were written.
    InjectedFault {
        /// The bad sector.
        sector: u64,
    },
    /// The backend's data transfer failed.
    Io(IoError),
    /// A request sent again after a recovery (`BIUS_REQ_REPLAY`) cannot be
    /// told applied or not: an append, or a write whose zone's write
    /// pointer is neither at its start nor past its end.
    Replayed {
        /// What was replayed.
        op: ZoneOp,
    },
}

impl fmt::Display for ZoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneError::OutOfRange { sector } => {
                write!(
                    f,
                    "range from sector {sector} goes past the end of the device"
                )
            }
            ZoneError::Unaligned => f.write_str("offset or length is not a multiple of 512"),
            ZoneError::CrossesZoneBoundary => f.write_str("write crosses a zone boundary"),
            ZoneError::NotZoneStart => f.write_str("zone append not at the start of a zone"),
            ZoneError::AppendTooLarge { max } => {
                write!(f, "zone append larger than {max} sectors")
            }
            ZoneError::InvalidCondition { op, condition } => {
                write!(f, "{op:?} not allowed on a zone in condition {condition:?}")
            }
            ZoneError::NotAtWritePointer { write_pointer } => {
                write!(f, "write not at the write pointer ({write_pointer})")
            }
            ZoneError::BeyondCapacity => f.write_str("write goes past the zone capacity"),
            ZoneError::OpenResource => f.write_str("too many open zones"),
            ZoneError::ActiveResource => f.write_str("too many active zones"),
            ZoneError::InjectedFault { sector } => {
                write!(f, "injected write error at sector {sector}")
            }
            ZoneError::Io(err) => err.fmt(f),
            ZoneError::Replayed { op } => {
                write!(f, "replayed {op:?} may or may not have been applied")
            }
        }
    }
}

impl std::error::Error for ZoneError {}

impl From<IoError> for ZoneError {
    fn from(err: IoError) -> Self {
        ZoneError::Io(err)
    }
}

impl From<ZoneError> for IoError {
    fn from(err: ZoneError) -> Self {
        match err {
            ZoneError::OpenResource => IoError::Errno(Errno::ETOOMANYREFS),
            ZoneError::ActiveResource => IoError::Errno(Errno::EOVERFLOW),
            ZoneError::Unaligned => IoError::InvalidArgument,
            ZoneError::Io(err) => err,
            _ => IoError::Io,
        }
    }
}

/// The sector range of the byte range `[offset, offset + len)`, which must
/// be sector-aligned: `(first sector, number of sectors)`.
pub fn to_sectors(offset: u64, len: u64) -> Result<(u64, u64), ZoneError> {
    if !(offset | len).is_multiple_of(SECTOR_SIZE) {
        return Err(ZoneError::Unaligned);
    }
    Ok((offset >> SECTOR_SHIFT, len >> SECTOR_SHIFT))
}

/// Whether a write of `sectors` at `sector` sent again after a recovery
/// (`BIUS_REQ_REPLAY`) was applied, judged by its `zone` now: in a
/// conventional zone it is applied again (`Ok(false)`); in a sequential
/// zone it was applied if the write pointer is at or past its end
/// (`Ok(true)`), is applied now if the write pointer is at its start
/// (`Ok(false)`), and fails with [`ZoneError::Replayed`] otherwise.
pub(crate) fn replay_applied(zone: &Zone, sector: u64, sectors: u64) -> Result<bool, ZoneError> {
    if zone.zone_type == ZoneType::Conventional || sector == zone.write_pointer {
        return Ok(false);
    }
    let end = sector.saturating_add(sectors);
    if zone.condition.has_write_pointer()
        && end <= zone.start + zone.len
        && end <= zone.write_pointer
    {
        return Ok(true);
    }
    Err(ZoneError::Replayed { op: ZoneOp::Write })
}

/// A zoned block device.
///
/// [`BlockDevice::read`] and [`BlockDevice::write`] follow the zone rules
/// (writes to sequential zones only at the write pointer; reads past it
/// return [`FILL_PATTERN`]); the zone operations are the methods below.
/// Byte offsets may point anywhere in the zone unless said otherwise.
/// [`ZoneSet`] implements the rules, leaving the data to the backend:
///
/// ```
/// use std::sync::RwLock;
///
/// use bius::zone::{self, ZoneGeometry, ZoneSet, ZonedDevice, SECTOR_SHIFT};
/// use bius::{BlockDevice, IoError};
///
/// /// A zoned RAM disk behind one lock: simple, not fast.
/// struct Zoned {
///     zones: ZoneSet,
///     data: RwLock<Vec<u8>>,
/// }
///
/// fn bytes(sector: u64, sectors: u64) -> std::ops::Range<usize> {
///     (sector << SECTOR_SHIFT) as usize..((sector + sectors) << SECTOR_SHIFT) as usize
/// }
///
/// impl Zoned {
///     fn store(&self, sector: u64, data: &[u8]) -> Result<(), IoError> {
///         let mut store = self.data.write().map_err(|_| IoError::Io)?;
///         store[bytes(sector, data.len() as u64 >> SECTOR_SHIFT)].copy_from_slice(data);
///         Ok(())
///     }
///
///     fn discard(&self, sector: u64, sectors: u64) -> Result<(), IoError> {
///         self.data.write().map_err(|_| IoError::Io)?[bytes(sector, sectors)].fill(0);
///         Ok(())
///     }
/// }
///
/// impl BlockDevice for Zoned {
///     fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
///         let (sector, sectors) = zone::to_sectors(offset, buf.len() as u64)?;
///         Ok(self.zones.read(sector, sectors, |span| {
///             let data = self.data.read().map_err(|_| IoError::Io)?;
///             let out = &mut buf[bytes(span.sector - sector, span.sectors)];
///             let written = span.fill_unwritten(out);
///             written.copy_from_slice(&data[bytes(span.sector, span.written)]);
///             Ok(())
///         })?)
///     }
///
///     fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
///         let (sector, sectors) = zone::to_sectors(offset, data.len() as u64)?;
///         Ok(self.zones.write(sector, sectors, |at, n| {
///             self.store(at, &data[bytes(0, n)])
///         })?)
///     }
/// }
///
/// impl ZonedDevice for Zoned {
///     fn geometry(&self) -> ZoneGeometry {
///         *self.zones.geometry()
///     }
///     fn report_zones(&self, offset: u64, max: usize) -> Result<Vec<zone::Zone>, IoError> {
///         Ok(self.zones.report(offset >> SECTOR_SHIFT, max))
///     }
///     fn zone_open(&self, offset: u64) -> Result<(), IoError> {
///         Ok(self.zones.open(offset >> SECTOR_SHIFT)?)
///     }
///     fn zone_close(&self, offset: u64) -> Result<(), IoError> {
///         Ok(self.zones.close(offset >> SECTOR_SHIFT)?)
///     }
///     fn zone_finish(&self, offset: u64) -> Result<(), IoError> {
///         Ok(self.zones.finish(offset >> SECTOR_SHIFT)?)
///     }
///     fn zone_reset(&self, offset: u64) -> Result<(), IoError> {
///         Ok(self.zones.reset(offset >> SECTOR_SHIFT, |s, n| self.discard(s, n))?)
///     }
///     fn zone_reset_all(&self) -> Result<(), IoError> {
///         Ok(self.zones.reset_all(|s, n| self.discard(s, n))?)
///     }
///     fn zone_append(&self, offset: u64, data: &[u8]) -> Result<u64, IoError> {
///         let (zone_start, sectors) = zone::to_sectors(offset, data.len() as u64)?;
///         Ok(self.zones.append(zone_start, sectors, |at, n| {
///             self.store(at, &data[bytes(0, n)])
///         })?)
///     }
/// }
///
/// // 4 MiB in 1 MiB zones, the first conventional, at most 2 open.
/// let geometry = ZoneGeometry {
///     conventional_zones: 1,
///     max_open: 2,
///     ..ZoneGeometry::new(8192, 2048)
/// };
/// let disk = Zoned {
///     zones: ZoneSet::new(geometry).unwrap(),
///     data: RwLock::new(vec![0; 4 << 20]),
/// };
/// assert_eq!(disk.zone_append(1 << 20, &[1; 4096]).unwrap(), 2048);
/// assert_eq!(disk.zone_append(1 << 20, &[2; 512]).unwrap(), 2056);
/// disk.write((1 << 20) + 4608, &[3; 512], false).unwrap();
/// assert!(disk.write(1 << 20, &[4; 512], false).is_err()); // not at the write pointer
/// let mut buf = [0; 1024];
/// disk.read((1 << 20) + 4608, &mut buf).unwrap();
/// assert_eq!(buf[..512], [3; 512]);
/// assert_eq!(buf[512..], [zone::FILL_PATTERN; 512]);
/// ```
///
/// A panic in a method is caught as for [`BlockDevice`]: the request fails
/// with `EIO` and the queue serves on.  That includes
/// [`report_zones`](ZonedDevice::report_zones) called to judge a write sent
/// again after a recovery: the write fails.
/// [`geometry`](ZonedDevice::geometry) is called once, when the device is
/// created, and a panic in it is not caught.
pub trait ZonedDevice: BlockDevice {
    /// The (normalised) zone geometry.  Called once, when the device is
    /// created.
    fn geometry(&self) -> ZoneGeometry;

    /// Up to `max` zones, from the one containing byte `offset` on; none
    /// past the last zone.
    fn report_zones(&self, offset: u64, max: usize) -> Result<Vec<Zone>, IoError>;

    /// Opens the zone explicitly.
    fn zone_open(&self, offset: u64) -> Result<(), IoError>;

    /// Closes the zone.
    fn zone_close(&self, offset: u64) -> Result<(), IoError>;

    /// Finishes the zone: full, write pointer at its end.
    fn zone_finish(&self, offset: u64) -> Result<(), IoError>;

    /// Resets the zone: empty, data discarded.
    fn zone_reset(&self, offset: u64) -> Result<(), IoError>;

    /// Resets every sequential zone that is not empty, read-only or offline.
    fn zone_reset_all(&self) -> Result<(), IoError>;

    /// Writes `data` at the write pointer of the zone starting at byte
    /// `offset`; returns the sector where the data landed.
    fn zone_append(&self, offset: u64, data: &[u8]) -> Result<u64, IoError>;

    /// Serves one request by calling the method for its kind; an append
    /// with forced unit access is followed by [`BlockDevice::flush`], and
    /// the other requests go to [`BlockDevice::handle`].  Override it only
    /// to see every zone request in one place.
    fn handle_zone(&self, request: Request<'_>) -> Result<Reply, IoError> {
        let done = |result: Result<(), IoError>| result.map(|()| Reply::Done);
        match request {
            Request::ReportZones { offset, max_zones } => {
                self.report_zones(offset, max_zones).map(Reply::Zones)
            }
            Request::ZoneOpen { offset } => done(self.zone_open(offset)),
            Request::ZoneClose { offset } => done(self.zone_close(offset)),
            Request::ZoneFinish { offset } => done(self.zone_finish(offset)),
            Request::ZoneReset { offset } => done(self.zone_reset(offset)),
            Request::ZoneResetAll => done(self.zone_reset_all()),
            Request::ZoneAppend { offset, data, fua } => {
                let sector = self.zone_append(offset, data)?;
                if fua {
                    self.flush()?;
                }
                Ok(Reply::Appended(sector << SECTOR_SHIFT))
            }
            request => self.handle(request),
        }
    }
}

impl<D: ZonedDevice + ?Sized> ZonedDevice for std::sync::Arc<D> {
    fn geometry(&self) -> ZoneGeometry {
        (**self).geometry()
    }
    fn report_zones(&self, offset: u64, max: usize) -> Result<Vec<Zone>, IoError> {
        (**self).report_zones(offset, max)
    }
    fn zone_open(&self, offset: u64) -> Result<(), IoError> {
        (**self).zone_open(offset)
    }
    fn zone_close(&self, offset: u64) -> Result<(), IoError> {
        (**self).zone_close(offset)
    }
    fn zone_finish(&self, offset: u64) -> Result<(), IoError> {
        (**self).zone_finish(offset)
    }
    fn zone_reset(&self, offset: u64) -> Result<(), IoError> {
        (**self).zone_reset(offset)
    }
    fn zone_reset_all(&self) -> Result<(), IoError> {
        (**self).zone_reset_all()
    }
    fn zone_append(&self, offset: u64, data: &[u8]) -> Result<u64, IoError> {
        (**self).zone_append(offset, data)
    }
    fn handle_zone(&self, request: Request<'_>) -> Result<Reply, IoError> {
        (**self).handle_zone(request)
    }
}
