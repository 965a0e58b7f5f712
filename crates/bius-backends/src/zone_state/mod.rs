//! [`ZoneStateFile`]: the sidecar file that keeps the zone states of a
//! zoned file device (a [`bius::zone::DeferredZoned`] over a file) across
//! daemon restarts and power losses.
//!
//! # Format
//!
//! Little-endian.  A 64-byte header:
//!
//! | bytes  | field |
//! | ------ | ----- |
//! | 0..8   | magic `BIUSZONE` |
//! | 8..12  | version, 2 |
//! | 12..16 | logical block size in bytes |
//! | 16..24 | device size in bytes |
//! | 24..32 | zone size in sectors |
//! | 32..40 | zone capacity in sectors |
//! | 40..44 | conventional zones |
//! | 44..48 | zones |
//! | 48..64 | boot id of the acknowledged states (`/proc/sys/kernel/random/boot_id`, 16 bytes; 0: unknown) |
//!
//! then, per zone, two 16-byte records: the *acknowledged* state (written
//! after the zone's data write completed, not synced), then the *durable*
//! one (written after the data was synced, then synced).  A record is the
//! write pointer (u64, sectors; all ones for none), the condition (u8,
//! `BLK_ZONE_COND_*`) and
//! where the zone's data ends ([`ZoneRecord::data_end`]), as the sectors
//! from it to the write pointer, or to the end of the zone's capacity if
//! that comes first (u56: 7 bytes; 0 but in a finished, read-only or
//! offline zone).  The file is exactly 64 + 32 × zones bytes long.
//!
//! The file speaks sectors; [`ZoneStateHeader`] and the [`ZoneRecord`]s
//! read from and written to it speak bytes, as the zone API does.
//!
//! Version 1 had 7 zero bytes instead of the data end: the same as data
//! ending at the write pointer (or capacity end), which is what version 1
//! meant.  Such a file is read, and its header made version 2 at once
//! (before any record is written that version 1 would refuse).
//!
//! Opened in the boot that wrote the acknowledged states (a daemon crash,
//! kill or upgrade: the page cache survived), the file gives those;
//! opened in another boot (power loss, reboot), the durable ones, which
//! then become the acknowledged ones too.

mod format;
#[cfg(test)]
mod tests;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bius::zone::{ZoneGeometry, ZoneJournal, ZoneRecord, ZoneSet};
use bius::Errno;
use nix::fcntl::{Flock, FlockArg};

pub use format::ZoneStateHeader;
use format::{record_offset, BootId, HEADER_LEN, RECORD_LEN};

/// Why a zone state file cannot be used.  Every kind but
/// [`ZoneStateError::Io`] and [`ZoneStateError::InUse`] is `EINVAL`
/// ([`ZoneStateError::errno`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZoneStateError {
    /// Reading, writing or creating the file failed.
    #[error("zone state file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Another process has the file open as a zone state file (`EBUSY`).
    #[error("zone state file {path}: in use by another process (another daemon of the disk?)")]
    InUse {
        /// The file.
        path: PathBuf,
    },
    /// The file is shorter or longer than its header says.
    #[error("zone state file {path}: {len} bytes long, {expected} expected (truncated?)")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The length its header (or the header alone) needs.
        expected: u64,
    },
    /// A field holds a value no zone state file has.
    #[error("zone state file {path}: {field}: {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The field.
        field: String,
        /// What is wrong with it.
        why: String,
    },
    /// The file describes another geometry than the device's.
    #[error("zone state file {path}: {field} is {stored}, the device's is {given}")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// What the file says.
        stored: u64,
        /// What the device has.
        given: u64,
    },
}

impl ZoneStateError {
    /// The errno: the I/O error's, `EBUSY` for a file in use, `EINVAL` for
    /// the others.
    pub fn errno(&self) -> Errno {
        match self {
            ZoneStateError::Io { source, .. } => {
                Errno::from_raw(source.raw_os_error().unwrap_or(Errno::EIO as i32))
            }
            ZoneStateError::InUse { .. } => Errno::EBUSY,
            _ => Errno::EINVAL,
        }
    }
}

/// The zone state file of a zoned file device: a
/// [`ZoneJournal`] (see the [module
/// documentation](self) for the format).  [`ZonedFile`](crate::ZonedFile)
/// puts a zoned file device together as below.
///
/// ```no_run
/// use bius::zone::{DeferredZoned, ZoneGeometry};
/// use bius_backends::file_engine::EngineKind;
/// use bius_backends::{DeferredFile, File, FileOptions, ZoneStateFile};
///
/// let file = File::open("/var/lib/zoned.img", FileOptions::default())?;
/// let geometry = ZoneGeometry::new(file.size(), 64 << 20)?;
/// let (journal, records) =
///     ZoneStateFile::open("/var/lib/zoned.img.zones", &geometry, 4096)?;
/// let disk = DeferredFile::new(file, EngineKind::Auto, 64)?;
/// let zoned = DeferredZoned::with_journal(disk, geometry, journal, &records)?;
/// // The disk's size is the geometry's.
/// let device = bius::DeviceBuilder::default()
///     .logical_block_size(4096)
///     .create_deferred(zoned)?;
/// device.run_until_signal()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ZoneStateFile {
    file: Flock<File>,
    path: PathBuf,
    /// Per zone, the byte where its writable bytes end (to encode data
    /// ends).
    capacity_ends: Box<[u64]>,
}

impl ZoneStateFile {
    /// Opens the zone state file at `path` for a device of `geometry` with
    /// blocks of `block_size` bytes, creating it (every zone empty) if
    /// there is none; returns it with the zone states to start from (see
    /// the [module documentation](self)).  A file of another geometry, or
    /// malformed, is refused, and so is one that another process holds
    /// for more than [`LOCK_WAIT`] (a daemon that leaves its device to
    /// recovery lets go of it only as it exits): the file is locked
    /// (`flock`) while the value lives.
    pub fn open(
        path: impl AsRef<Path>,
        geometry: &ZoneGeometry,
        block_size: u32,
    ) -> Result<(Self, Vec<ZoneRecord>), ZoneStateError> {
        let boot = BootId::current();
        Self::open_at_boot(path.as_ref(), geometry, block_size, boot, LOCK_WAIT)
    }

    /// The header of the zone state file at `path`, checked: e.g. to take
    /// a device's geometry from it.
    pub fn header(path: impl AsRef<Path>) -> Result<ZoneStateHeader, ZoneStateError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| io_error(path, source))?;
        ZoneStateHeader::parse(path, &bytes)
    }

    /// [`ZoneStateFile::open`] as if booted as `boot`, waiting up to
    /// `lock_wait` for the lock.
    fn open_at_boot(
        path: &Path,
        geometry: &ZoneGeometry,
        block_size: u32,
        boot: BootId,
        lock_wait: Duration,
    ) -> Result<(Self, Vec<ZoneRecord>), ZoneStateError> {
        let io = |source| io_error(path, source);
        let fresh = ZoneSet::new(*geometry);
        let header = ZoneStateHeader::of(geometry, block_size);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        let file = lock(path, file, lock_wait)?;
        let capacity_ends = fresh.report(0, usize::MAX);
        let state = ZoneStateFile {
            file,
            path: path.to_owned(),
            capacity_ends: capacity_ends
                .iter()
                .map(|zone| zone.start + zone.capacity)
                .collect(),
        };
        let bytes = std::fs::read(path).map_err(io)?;
        if bytes.is_empty() {
            let records = fresh.records();
            state.write_all(&header, &records, boot)?;
            return Ok((state, records));
        }
        let stored = ZoneStateHeader::parse(path, &bytes)?;
        stored.check(path, &header)?;
        let same_boot = boot.known() && format::boot_of(&bytes) == boot;
        let records = format::records(path, &bytes, !same_boot, &state.capacity_ends)?;
        if let Err(err) = ZoneSet::with_records(*geometry, &records) {
            return Err(ZoneStateError::Malformed {
                path: path.to_owned(),
                field: format!(
                    "{} records",
                    if same_boot { "acknowledged" } else { "durable" }
                ),
                why: err.to_string(),
            });
        }
        if !same_boot {
            state.write_all(&header, &records, boot)?;
        } else if format::is_older(&bytes) {
            state.write_header(&header, boot)?;
        }
        Ok((state, records))
    }

    /// Writes the whole file: `records` as both states, synced, then the
    /// header with `boot`, synced (a crash between leaves the old boot id,
    /// whose states are no longer acknowledged ones: the durable ones are
    /// used).
    fn write_all(
        &self,
        header: &ZoneStateHeader,
        records: &[ZoneRecord],
        boot: BootId,
    ) -> Result<(), ZoneStateError> {
        let io = |source| io_error(&self.path, source);
        let mut body = Vec::with_capacity(records.len() * 2 * RECORD_LEN);
        for (record, &capacity_end) in records.iter().zip(&self.capacity_ends) {
            let bytes = format::encode_record(record, capacity_end);
            body.extend_from_slice(&bytes);
            body.extend_from_slice(&bytes);
        }
        let len = (HEADER_LEN + body.len()) as u64;
        self.file.set_len(len).map_err(io)?;
        self.file
            .write_all_at(&body, HEADER_LEN as u64)
            .map_err(io)?;
        self.file.sync_data().map_err(io)?;
        self.write_header(header, boot)
    }

    /// Writes `header` with `boot`, this program's version, synced.
    fn write_header(&self, header: &ZoneStateHeader, boot: BootId) -> Result<(), ZoneStateError> {
        let io = |source| io_error(&self.path, source);
        self.file
            .write_all_at(&header.encode(boot), 0)
            .map_err(io)?;
        self.file.sync_data().map_err(io)
    }

    /// The bytes of zone `index`'s `record`.
    fn encode(&self, index: u32, record: &ZoneRecord) -> [u8; RECORD_LEN] {
        format::encode_record(record, self.capacity_ends[index as usize])
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How long [`ZoneStateFile::open`] waits for another process to let go
/// of the file.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// `file` (at `path`) locked, once no other process holds it, waiting up
/// to `wait`.
fn lock(path: &Path, mut file: File, wait: Duration) -> Result<Flock<File>, ZoneStateError> {
    let deadline = Instant::now() + wait;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => return Ok(locked),
            Err((back, Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                file = back;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err((_, Errno::EWOULDBLOCK)) => {
                return Err(ZoneStateError::InUse {
                    path: path.to_owned(),
                })
            }
            Err((_, errno)) => return Err(io_error(path, errno.into())),
        }
    }
}

fn io_error(path: &Path, source: io::Error) -> ZoneStateError {
    ZoneStateError::Io {
        path: path.to_owned(),
        source,
    }
}

impl ZoneJournal for ZoneStateFile {
    fn acknowledged(&self, index: u32, record: ZoneRecord) -> io::Result<()> {
        let bytes = self.encode(index, &record);
        self.file.write_all_at(&bytes, record_offset(index, false))
    }

    fn durable(&self, records: &[(u32, ZoneRecord)]) -> io::Result<()> {
        for (index, record) in records {
            let bytes = self.encode(*index, record);
            self.file
                .write_all_at(&bytes, record_offset(*index, true))?;
        }
        self.file.sync_data()
    }
}
