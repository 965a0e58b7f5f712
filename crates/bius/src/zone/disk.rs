//! [`disk_zones`]: the zone report of any zoned block device.

use std::fmt;
use std::fs::File;
use std::path::Path;

use super::Zone;
use crate::error::errno_of;
use crate::error::Errno;
use crate::{abi, kernel};

/// Why the zones of a disk could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiskZonesError {
    /// The disk could not be opened.
    Open(Errno),
    /// It is not a zoned block device (`BLKREPORTZONE` fails with
    /// `ENOTTY`).
    NotZoned,
    /// `BLKREPORTZONE` failed.
    Report(Errno),
    /// A descriptor has a zone type or condition this crate does not know.
    UnknownZone {
        /// Its first byte.
        start: u64,
        /// Its `BLK_ZONE_TYPE_*`.
        zone_type: u8,
        /// Its `BLK_ZONE_COND_*`.
        condition: u8,
    },
}

impl DiskZonesError {
    /// The errno that best describes this error.
    pub fn errno(&self) -> Errno {
        match self {
            DiskZonesError::Open(errno) | DiskZonesError::Report(errno) => *errno,
            DiskZonesError::NotZoned => Errno::ENOTTY,
            DiskZonesError::UnknownZone { .. } => Errno::EPROTO,
        }
    }
}

impl fmt::Display for DiskZonesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiskZonesError::Open(_) => f.write_str("cannot open the disk"),
            DiskZonesError::NotZoned => f.write_str("not a zoned block device"),
            DiskZonesError::Report(_) => f.write_str("reading the zones (BLKREPORTZONE) failed"),
            DiskZonesError::UnknownZone {
                start,
                zone_type,
                condition,
            } => write!(
                f,
                "zone at byte {start} has an unknown type ({zone_type}) or condition ({condition})"
            ),
        }
    }
}

impl std::error::Error for DiskZonesError {}

/// Every zone of the zoned block device at `path`, read with the
/// `BLKREPORTZONE` ioctl: works on any zoned disk (a BIUS one, a zoned
/// `null_blk`, an SMR drive), and needs only read access.
///
/// ```no_run
/// for zone in bius::zone::disk_zones("/dev/nullb0")? {
///     println!("{} +{} {} {}", zone.start, zone.len, zone.zone_type, zone.condition);
/// }
/// # Ok::<(), bius::zone::DiskZonesError>(())
/// ```
pub fn disk_zones(path: impl AsRef<Path>) -> Result<Vec<Zone>, DiskZonesError> {
    let disk = File::open(path).map_err(|err| DiskZonesError::Open(errno_of(&err)))?;
    let mut zones = Vec::new();
    // (BLKREPORTZONE speaks sectors: converted by abi::zone_of)
    let mut sector = 0;
    loop {
        let batch = kernel::report_zones(&disk, sector).map_err(|errno| match errno {
            Errno::ENOTTY => DiskZonesError::NotZoned,
            errno => DiskZonesError::Report(errno),
        })?;
        let Some(last) = batch.last() else {
            return Ok(zones);
        };
        sector = last.start.saturating_add(last.len.max(1));
        for raw in &batch {
            zones.push(abi::zone_of(raw).ok_or(DiskZonesError::UnknownZone {
                start: raw.start.saturating_mul(abi::SECTOR_SIZE),
                zone_type: raw.type_,
                condition: raw.cond,
            })?);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_zoned_block_devices_have_zones() {
        assert_eq!(disk_zones("/dev/null"), Err(DiskZonesError::NotZoned));
        assert_eq!(
            disk_zones("/nonexistent/disk"),
            Err(DiskZonesError::Open(Errno::ENOENT))
        );
        assert_eq!(DiskZonesError::NotZoned.errno(), Errno::ENOTTY);
    }
}
