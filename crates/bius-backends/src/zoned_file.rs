//! [`ZonedFile`]: a persistent zoned disk over a file or block device,
//! its zones emulated ([`DeferredZoned`]) over an [`DeferredFile`] and their
//! states kept in a [`ZoneStateFile`], so that a daemon restart or a power
//! loss finds the zones (and the data) it left.

use std::io;
use std::path::{Path, PathBuf};

use bius::zone::{DeferredZoned, ZoneGeometry};

use crate::file_engine::EngineKind;
use crate::zone_state::{ZoneStateError, ZoneStateFile, ZoneStateHeader};
use crate::{DeferredFile, File, FileOptions};

/// Why a zoned file could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ZonedFileError {
    /// The data is not in a regular file (a block device), so its zone
    /// state file cannot go next to it: it must be named
    /// ([`ZonedFile::zone_state`]).
    #[error(
        "{} is not a regular file: name the zone state file (it must outlive a reboot)",
        path.display()
    )]
    NoZoneStateFile {
        /// The data's path.
        path: PathBuf,
    },
    /// The data file could not be created, opened or served.
    #[error("{}: {source}", path.display())]
    File {
        /// Its path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The data file is smaller than the geometry's device.
    #[error("{} holds {size} bytes, the device needs {needed}", path.display())]
    TooSmall {
        /// Its path.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The device's size in bytes.
        needed: u64,
    },
    /// The zone state file cannot be used, or holds states the zones
    /// refuse.
    #[error("{0}")]
    ZoneState(#[source] ZoneStateError),
}

/// A persistent zoned disk: the data in a regular file or a block device,
/// served with many requests in flight ([`DeferredFile`]), the zones
/// emulated over it, their states in a zone state file (by default
/// `PATH.zones` next to a regular file).  The first open creates what is
/// missing (the data file at the device's size, the zone state file with
/// every zone empty); the next ones find the zones as they were left, and
/// refuse another geometry.
///
/// ```no_run
/// use bius::zone::ZoneGeometry;
/// use bius_backends::ZonedFile;
///
/// let zoned = ZonedFile::new("/var/lib/zoned.img");
/// // The geometry stored by the last run, else 1 GiB of 64 MiB zones.
/// let (geometry, block_size) = match zoned.stored()? {
///     Some(stored) => (stored.geometry()?, stored.block_size),
///     None => (ZoneGeometry::new(1 << 30, 64 << 20)?, 4096),
/// };
/// // The disk's size is the geometry's.
/// let device = bius::DeviceBuilder::default()
///     .logical_block_size(block_size)
///     .create_deferred(zoned.open(&geometry, block_size)?)?;
/// device.run_until_signal()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ZonedFile {
    path: PathBuf,
    zone_state: Option<PathBuf>,
    options: FileOptions,
    engine: EngineKind,
    depth: u32,
}

impl ZonedFile {
    /// The zoned disk whose data is at `path`, read and written through
    /// the page cache by an engine of [`EngineKind::Auto`] with up to 128
    /// requests in flight (a device's default queue depth).
    pub fn new(path: impl Into<PathBuf>) -> ZonedFile {
        ZonedFile {
            path: path.into(),
            zone_state: None,
            options: FileOptions::default(),
            engine: EngineKind::Auto,
            depth: 128,
        }
    }

    /// Keeps the zone states in `path` (needed for a block device).
    pub fn zone_state(mut self, path: impl Into<PathBuf>) -> ZonedFile {
        self.zone_state = Some(path.into());
        self
    }

    /// Opens the data as `options` say (`O_DIRECT`, read-only).
    pub fn file_options(mut self, options: FileOptions) -> ZonedFile {
        self.options = options;
        self
    }

    /// Serves the data through an engine of `kind` with up to `depth`
    /// requests in flight (the device's queue depth).
    pub fn engine(mut self, kind: EngineKind, depth: u32) -> ZonedFile {
        self.engine = kind;
        self.depth = depth;
        self
    }

    /// The data's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the zone states are kept: as given, or `PATH.zones` next to a
    /// regular file (or one not created yet).  A block device has no
    /// default: a file next to its node would be on /dev, which a reboot
    /// empties.
    pub fn zone_state_path(&self) -> Result<PathBuf, ZonedFileError> {
        if let Some(state) = &self.zone_state {
            return Ok(state.clone());
        }
        let is_file = std::fs::metadata(&self.path).map_or(true, |meta| meta.is_file());
        if !is_file {
            return Err(ZonedFileError::NoZoneStateFile {
                path: self.path.clone(),
            });
        }
        let mut state = self.path.as_os_str().to_owned();
        state.push(".zones");
        Ok(state.into())
    }

    /// The geometry and block size that the zone state file records, if
    /// there is one yet: what to open the disk with again (a geometry with
    /// limits, `max_open` and the like, which the file does not keep).
    pub fn stored(&self) -> Result<Option<ZoneStateHeader>, ZonedFileError> {
        let state = self.zone_state_path()?;
        if std::fs::metadata(&state).map_or(true, |meta| meta.len() == 0) {
            return Ok(None);
        }
        ZoneStateFile::header(&state)
            .map(Some)
            .map_err(ZonedFileError::ZoneState)
    }

    /// The size of the data in bytes (a block device's too), or `None`
    /// if there is no file yet ([`ZonedFile::open`] creates it).
    pub fn data_size(&self) -> Result<Option<u64>, ZonedFileError> {
        match File::open(&self.path, self.options) {
            Ok(file) => Ok(Some(file.size())),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(self.file_error(source)),
        }
    }

    /// The zoned disk of `geometry` with blocks of `block_size` bytes,
    /// ready to serve with
    /// [`DeviceBuilder::create_deferred`](bius::DeviceBuilder::create_deferred):
    /// the data file created at the device's size if there is none, the
    /// zone states taken from the zone state file (created, every zone
    /// empty, if there is none), which then keeps them.  A zone state file
    /// of another geometry or block size is refused.
    pub fn open(
        &self,
        geometry: &ZoneGeometry,
        block_size: u32,
    ) -> Result<DeferredZoned<DeferredFile>, ZonedFileError> {
        let state = self.zone_state_path()?;
        let needed = geometry.size();
        self.create_missing(needed)?;
        let file = File::open(&self.path, self.options).map_err(|err| self.file_error(err))?;
        if file.size() < needed {
            return Err(ZonedFileError::TooSmall {
                path: self.path.clone(),
                size: file.size(),
                needed,
            });
        }
        let (journal, records) =
            ZoneStateFile::open(&state, geometry, block_size).map_err(ZonedFileError::ZoneState)?;
        let disk =
            DeferredFile::new(file, self.engine, self.depth).map_err(|err| self.file_error(err))?;
        log::info!("{}: {:?} engine", self.path.display(), disk.engine_kind());
        log::info!("zone states in {}", state.display());
        DeferredZoned::with_journal(disk, *geometry, journal, &records).map_err(|err| {
            // (the zone state file checked its records already)
            ZonedFileError::ZoneState(ZoneStateError::Malformed {
                path: state,
                field: "records".into(),
                why: err.to_string(),
            })
        })
    }

    /// Creates the data file with `size` bytes if there is none (a zoned
    /// file starts empty).
    fn create_missing(&self, size: u64) -> Result<(), ZonedFileError> {
        if self.path.exists() {
            return Ok(());
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.path)
            .map_err(|err| self.file_error(err))?;
        file.set_len(size).map_err(|err| self.file_error(err))
    }

    fn file_error(&self, source: io::Error) -> ZonedFileError {
        ZonedFileError::File {
            path: self.path.clone(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 16 zones of 1 MiB, 768 KiB writable, the first two conventional.
    fn geometry() -> ZoneGeometry {
        ZoneGeometry::new(16 << 20, 1 << 20)
            .unwrap()
            .with_zone_capacity(768 << 10)
            .unwrap()
            .with_conventional_zones(2)
            .unwrap()
    }

    #[test]
    fn a_regular_file_keeps_its_zones_next_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("zoned.img");
        let zoned = ZonedFile::new(&data);
        assert_eq!(
            zoned.zone_state_path().unwrap(),
            dir.path().join("zoned.img.zones")
        );
        let named = dir.path().join("elsewhere");
        let elsewhere = ZonedFile::new(&data).zone_state(&named);
        assert_eq!(elsewhere.zone_state_path().unwrap(), named);
        let err = ZonedFile::new("/dev/null").zone_state_path().unwrap_err();
        assert!(matches!(err, ZonedFileError::NoZoneStateFile { .. }));
    }

    #[test]
    fn the_first_open_creates_and_the_next_finds_the_geometry() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("zoned.img");
        let zoned = ZonedFile::new(&data).engine(EngineKind::Threads, 4);
        assert!(zoned.stored().unwrap().is_none());
        assert_eq!(zoned.data_size().unwrap(), None);
        drop(zoned.open(&geometry(), 4096).unwrap());
        assert_eq!(zoned.data_size().unwrap(), Some(16 << 20));
        let stored = zoned.stored().unwrap().unwrap();
        assert_eq!(stored.geometry(), Ok(geometry()));
        assert_eq!(stored.block_size, 4096);
        // Another geometry, or block size, is refused.
        let err = zoned.open(&geometry(), 512).err().expect("refused");
        assert!(matches!(err, ZonedFileError::ZoneState(_)), "{err}");
        let bigger = ZoneGeometry::new(32 << 20, 1 << 20).unwrap();
        let err = zoned.open(&bigger, 4096).err().expect("refused");
        assert!(matches!(err, ZonedFileError::TooSmall { .. }), "{err}");
        assert!(zoned.open(&geometry(), 4096).is_ok());
    }
}
