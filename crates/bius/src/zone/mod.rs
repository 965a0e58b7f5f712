//! Zoned block devices (host-managed ZBC/ZNS): zone descriptors, the
//! [`ZoneGeometry`], the zone state machine [`ZoneSet`], and [`Zoned`]
//! and [`DeferredZoned`], which make any conventional [`BlockDevice`] or
//! [`DeferredDevice`] zoned.
//!
//! [`BlockDevice`]: crate::BlockDevice
//! [`DeferredDevice`]: crate::DeferredDevice
//!
//! A device of any kind is zoned when its `zones()` returns a geometry
//! ([`BlockDevice::zones`](crate::BlockDevice::zones),
//! [`DeferredDevice::zones`](crate::DeferredDevice::zones),
//! `tokio::AsyncBlockDevice::zones`): it is then created as a
//! host-managed zoned disk of the geometry's size, and serves the zone
//! requests of [`Request`](crate::Request) as well.
//!
//! The semantics are those of Linux's zoned `null_blk`: leading
//! conventional zones, then sequential-write-required zones written only
//! at their write pointer, with the same open/active resource limits, the
//! same no-op successes and the same errnos (see [`ZoneError`]).
//!
//! Every position and length here is in bytes, as in every request: the
//! [`ZoneGeometry`], the zone state machine [`ZoneSet`] and its data
//! closures, the zone descriptors ([`Zone`], [`ZoneRecord`], [`ReadSpan`])
//! and the [`ZoneError`]s.  Positions and lengths of data are whole
//! 512-byte sectors (else [`ZoneError::Unaligned`]); the kernel's
//! `struct blk_zone` counts sectors, and the framework converts where it
//! meets the kernel.
//!
//! Where this module differs from `null_blk` (v6.1), and why:
//! - an invalid [`ZoneGeometry`] is an error, never silently adjusted
//!   (`null_blk` lowers too many conventional zones to all but one);
//! - the checks the block layer makes before `null_blk` sees a request are
//!   made here too: a zone append must name a zone start and fit in
//!   `max_append`, a write must not cross into the next zone;
//! - a read may span zones, each part judged against its own zone;
//! - a write reaching an injected error stores the bytes before it and
//!   moves the write pointer there (as `null_blk` does with
//!   `badblocks_partial_io`, from Linux 6.14); errors stay until cleared;
//! - making a zone read-only or offline gives back its resources directly
//!   (`null_blk` finishes it first, which can close another zone, or fail
//!   at the limits and leave a counter too high);
//! - an implicitly open zone busy in another thread is not closed to make
//!   room (see [`ZoneSet`]).

use std::fmt;

use crate::abi::SECTOR_SIZE;
use crate::error::{Errno, IoError};
use crate::op::Op;

mod deferred;
mod disk;
mod geometry;
mod journal;
pub(crate) mod layout;
mod pending;
mod persist;
mod progress;
mod serve;
mod set;
mod span;
mod state;
#[cfg(test)]
mod tests;

pub use deferred::DeferredZoned;
pub use disk::{disk_zones, DiskZonesError};
pub(crate) use geometry::ZoneExtent;
pub use geometry::{ZoneGeometry, ZoneGeometryError};
pub use journal::{ZoneJournal, ZoneRecord, ZoneRestoreError};
pub use serve::Zoned;
pub use set::ZoneSet;
pub use span::ReadSpan;
pub use state::ActiveZones;

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

impl ZoneType {
    /// The type's name in machine output, `snake_case` and stable across
    /// versions: `conventional`, `seq_write_required`,
    /// `seq_write_preferred`.  [`Display`](fmt::Display) prints it.
    pub fn name(self) -> &'static str {
        match self {
            ZoneType::Conventional => "conventional",
            ZoneType::SequentialWriteRequired => "seq_write_required",
            ZoneType::SequentialWritePreferred => "seq_write_preferred",
        }
    }

    /// The name blkzone(8) prints: `CONVENTIONAL`, `SEQ_WRITE_REQUIRED`,
    /// `SEQ_WRITE_PREFERRED`.  Only for output that mirrors the kernel's
    /// zone reports (`biusctl zones`), as
    /// [`ZoneCondition::kernel_name`].
    pub fn kernel_name(self) -> &'static str {
        match self {
            ZoneType::Conventional => "CONVENTIONAL",
            ZoneType::SequentialWriteRequired => "SEQ_WRITE_REQUIRED",
            ZoneType::SequentialWritePreferred => "SEQ_WRITE_PREFERRED",
        }
    }
}

/// The type's [`name`](ZoneType::name): `seq_write_required`, ...
impl fmt::Display for ZoneType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

    /// The condition's name in machine output (statistics, JSON, traces,
    /// biusctl), `snake_case` and stable across versions:
    /// `not_write_pointer`, `empty`, `implicit_open`, `explicit_open`,
    /// `closed`, `read_only`, `full`, `offline`.  [`Display`](fmt::Display)
    /// prints it.
    pub fn name(self) -> &'static str {
        match self {
            ZoneCondition::NotWritePointer => "not_write_pointer",
            ZoneCondition::Empty => "empty",
            ZoneCondition::ImplicitOpen => "implicit_open",
            ZoneCondition::ExplicitOpen => "explicit_open",
            ZoneCondition::Closed => "closed",
            ZoneCondition::ReadOnly => "read_only",
            ZoneCondition::Full => "full",
            ZoneCondition::Offline => "offline",
        }
    }

    /// The kernel's name of the condition (`blk_zone_cond_str()`, as
    /// blkzone(8) prints it): `NOT_WP`, `EMPTY`, `IMP_OPEN`, `EXP_OPEN`,
    /// `CLOSED`, `READONLY`, `FULL`, `OFFLINE`.  Only for output that
    /// mirrors the kernel's zone reports (`biusctl zones`); everything
    /// else names a condition by [`ZoneCondition::name`].
    pub fn kernel_name(self) -> &'static str {
        match self {
            ZoneCondition::NotWritePointer => "NOT_WP",
            ZoneCondition::Empty => "EMPTY",
            ZoneCondition::ImplicitOpen => "IMP_OPEN",
            ZoneCondition::ExplicitOpen => "EXP_OPEN",
            ZoneCondition::Closed => "CLOSED",
            ZoneCondition::ReadOnly => "READONLY",
            ZoneCondition::Full => "FULL",
            ZoneCondition::Offline => "OFFLINE",
        }
    }

    /// The condition named `name` ([`ZoneCondition::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        (0..=u8::MAX)
            .filter_map(ZoneCondition::from_raw)
            .find(|condition| condition.name() == name)
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

/// The condition's [`name`](ZoneCondition::name): `implicit_open`, ...
impl fmt::Display for ZoneCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One zone, as a zone report describes it (the kernel's `struct blk_zone`,
/// in bytes instead of sectors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Zone {
    /// First byte.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// Writable bytes from the start (at most `len`).
    pub capacity: u64,
    /// The byte a write must start at: `start + len` for a conventional
    /// zone, `u64::MAX` for a read-only or offline one.
    pub write_pointer: u64,
    /// Conventional or sequential.
    pub zone_type: ZoneType,
    /// The condition.
    pub condition: ZoneCondition,
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
        /// The range's first byte.
        offset: u64,
    },
    /// An offset or length is not a whole number of 512-byte sectors.
    Unaligned,
    /// A write to a conventional zone goes into the next zone.
    CrossesZoneBoundary,
    /// A zone append does not name the start of a zone.
    NotZoneStart,
    /// A zone append is longer than the geometry's `max_append`.
    AppendTooLarge {
        /// The largest append, in bytes.
        max: u64,
    },
    /// The operation is not allowed in the zone's condition (conventional
    /// zones have [`ZoneCondition::NotWritePointer`]).
    InvalidCondition {
        /// What was asked ([`Op::Read`], [`Op::Write`], [`Op::ZoneAppend`],
        /// [`Op::ZoneOpen`], [`Op::ZoneClose`], [`Op::ZoneFinish`] or
        /// [`Op::ZoneReset`]).
        op: Op,
        /// The zone's condition.
        condition: ZoneCondition,
    },
    /// A write does not start at the write pointer.
    NotAtWritePointer {
        /// Where the zone's write pointer is, in bytes.
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
    /// A write reached a sector with an injected write error; the bytes
    /// before it were written.
    InjectedFault {
        /// The bad sector's first byte.
        offset: u64,
    },
    /// The backend's data transfer failed.
    Io(IoError),
    /// A request sent again after a recovery (`BIUS_REQ_REPLAY`) cannot be
    /// told applied or not: an append, or a write whose zone's write
    /// pointer is neither at its start nor past its end.
    Replayed {
        /// What was replayed: [`Op::Write`] or [`Op::ZoneAppend`].
        op: Op,
    },
    /// Fault injection on a conventional zone: only sequential zones take
    /// faults.
    ConventionalZone,
}

impl fmt::Display for ZoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneError::OutOfRange { offset } => {
                write!(
                    f,
                    "range from byte {offset} goes past the end of the device"
                )
            }
            ZoneError::Unaligned => f.write_str("offset or length is not a multiple of 512"),
            ZoneError::CrossesZoneBoundary => f.write_str("write crosses a zone boundary"),
            ZoneError::NotZoneStart => f.write_str("zone append not at the start of a zone"),
            ZoneError::AppendTooLarge { max } => {
                write!(f, "zone append larger than {max} bytes")
            }
            ZoneError::InvalidCondition { op, condition } => {
                write!(f, "{op} not allowed on a zone in condition {condition}")
            }
            ZoneError::NotAtWritePointer { write_pointer } => {
                write!(f, "write not at the write pointer (byte {write_pointer})")
            }
            ZoneError::BeyondCapacity => f.write_str("write goes past the zone capacity"),
            ZoneError::OpenResource => f.write_str("too many open zones"),
            ZoneError::ActiveResource => f.write_str("too many active zones"),
            ZoneError::InjectedFault { offset } => {
                write!(f, "injected write error at byte {offset}")
            }
            ZoneError::Io(err) => err.fmt(f),
            ZoneError::Replayed { op } => {
                write!(f, "replayed {op} may or may not have been applied")
            }
            ZoneError::ConventionalZone => {
                f.write_str("a conventional zone takes no faults (only sequential zones do)")
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
            ZoneError::OpenResource => IoError::from(Errno::ETOOMANYREFS),
            ZoneError::ActiveResource => IoError::from(Errno::EOVERFLOW),
            ZoneError::Unaligned => IoError::InvalidArgument,
            ZoneError::Io(err) => err,
            _ => IoError::Io,
        }
    }
}

/// Whether `offset` and `len` are whole sectors, as the data of a zoned
/// request must be: else [`ZoneError::Unaligned`].
pub(crate) fn check_aligned(offset: u64, len: u64) -> Result<(), ZoneError> {
    match (offset | len).is_multiple_of(SECTOR_SIZE) {
        true => Ok(()),
        false => Err(ZoneError::Unaligned),
    }
}

/// Whether a write of `len` bytes at `offset` sent again after a recovery
/// (`BIUS_REQ_REPLAY`) was applied, judged by its `zone` now: in a
/// conventional zone it is applied again (`Ok(false)`); in a sequential
/// zone it was applied if the write pointer is at or past its end
/// (`Ok(true)`), is applied now if the write pointer is at its start
/// (`Ok(false)`), and fails with [`ZoneError::Replayed`] otherwise.
pub(crate) fn replay_applied(zone: &Zone, offset: u64, len: u64) -> Result<bool, ZoneError> {
    if zone.zone_type == ZoneType::Conventional || offset == zone.write_pointer {
        return Ok(false);
    }
    let end = offset.saturating_add(len);
    if zone.condition.has_write_pointer()
        && end <= zone.start + zone.len
        && end <= zone.write_pointer
    {
        return Ok(true);
    }
    Err(ZoneError::Replayed { op: Op::Write })
}
