//! What the kernel's NVMe target cannot export, found before anything is
//! created: the facts of a block device that decide it (from sysfs and
//! its zone report), and the refusal they give.
//!
//! The rules are those of Linux's `drivers/nvme/target` (6.1 and 6.12
//! alike) and of the NVMe host driver that must take the namespace back:
//! - `io-cmd-bdev.c`, `nvmet_bdev_ns_enable`: the device is opened for
//!   reading and writing (nvmet has no read-only namespace); a zoned one
//!   must pass `nvmet_bdev_zns_enable` or the namespace is not enabled
//!   (`EINVAL`, nothing but a line in the kernel log says why).
//! - `zns.c`, `nvmet_bdev_zns_enable`: ZNS has no conventional zones (the
//!   device is refused if its report has one), and no smaller last zone
//!   (the capacity must be a multiple of the zone size).  The zone append
//!   limit becomes the controller's ZASL, a power of two of 4 KiB units
//!   (`nvmet_zasl`): below 4 KiB it is garbage.
//! - host `zns.c`, `nvme_zone_parse_entry`: only sequential-write-required
//!   zones; a host-aware disk's sequential-write-preferred zones would
//!   make the namespace unusable.
//!
//! Emulated zone append is no obstacle: on 6.10 and newer the block layer
//! reports an emulating disk's limit as its largest I/O
//! (`queue_limits_max_zone_append_sectors`) and writes nvmet's appends at
//! the write pointer (zone write plugging); older kernels have no such
//! disk.  Zone sizes are powers of two on every zoned disk, as ZNS on
//! Linux wants; the open and active limits pass through.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use bius::zone::{disk_zones, ZoneType};

use super::NvmeError;

/// The smallest zone append limit nvmet can advertise: one 4 KiB unit.
pub const MIN_ZONE_APPEND: u64 = 4096;

/// What decides whether nvmet can export a block device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskFacts {
    /// The disk's name (`bius0`).
    pub name: String,
    /// Read-only (`/sys/class/block/NAME/ro`).
    pub read_only: bool,
    /// Size in 512-byte sectors.
    pub sectors: u64,
    /// The zone facts; `None` for a conventional device.
    pub zoned: Option<ZonedFacts>,
}

/// The zone facts of a zoned device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZonedFacts {
    /// `host-managed` or `host-aware` (`queue/zoned`).
    pub model: String,
    /// Zone size in 512-byte sectors (`queue/chunk_sectors`).
    pub zone_sectors: u64,
    /// The largest zone append in bytes (`queue/zone_append_max_bytes`).
    pub max_append: u64,
    /// Conventional zones in the zone report.
    pub conventional: usize,
    /// Sequential-write-preferred zones in the zone report.
    pub preferred: usize,
}

/// Why nvmet cannot export a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The disk is read-only: nvmet opens it for writing.
    ReadOnly,
    /// ZNS defines no conventional zones.
    ConventionalZones(usize),
    /// Host-aware zones (sequential write preferred): ZNS has none.
    PreferredZones(usize),
    /// The last zone is smaller than the others.
    RuntZone {
        /// Size in sectors.
        sectors: u64,
        /// Zone size in sectors.
        zone_sectors: u64,
    },
    /// A zone append limit below 4 KiB, which ZASL cannot say.
    SmallAppend(u64),
}

impl Refusal {
    /// The errno the refusal carries.
    pub fn errno(&self) -> bius::Errno {
        match self {
            Refusal::ReadOnly => bius::Errno::EROFS,
            _ => bius::Errno::EINVAL,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::ReadOnly => write!(
                f,
                "it is read-only, and the NVMe target opens its devices for writing"
            ),
            Refusal::ConventionalZones(n) => write!(
                f,
                "it has {n} conventional zone(s), and ZNS has none (create it with --conv-zones 0)"
            ),
            Refusal::PreferredZones(n) => write!(
                f,
                "it has {n} sequential-write-preferred (host-aware) zone(s), and ZNS has none"
            ),
            Refusal::RuntZone {
                sectors,
                zone_sectors,
            } => write!(
                f,
                "its last zone is smaller than the others ({} bytes is not a multiple of the {}-byte zone size), and ZNS has no smaller zone",
                sectors * 512,
                zone_sectors * 512
            ),
            Refusal::SmallAppend(bytes) => write!(
                f,
                "its zone append limit ({bytes} bytes) is below the 4096 bytes an NVMe controller can advertise"
            ),
        }
    }
}

impl DiskFacts {
    /// Why nvmet cannot export the device, if it cannot.
    pub fn refusal(&self) -> Option<Refusal> {
        if self.read_only {
            return Some(Refusal::ReadOnly);
        }
        let zoned = self.zoned.as_ref()?;
        if zoned.conventional > 0 {
            return Some(Refusal::ConventionalZones(zoned.conventional));
        }
        if zoned.preferred > 0 || zoned.model == "host-aware" {
            return Some(Refusal::PreferredZones(zoned.preferred));
        }
        if zoned.zone_sectors == 0 || !self.sectors.is_multiple_of(zoned.zone_sectors) {
            return Some(Refusal::RuntZone {
                sectors: self.sectors,
                zone_sectors: zoned.zone_sectors,
            });
        }
        if zoned.max_append < MIN_ZONE_APPEND {
            return Some(Refusal::SmallAppend(zoned.max_append));
        }
        None
    }

    /// Reads the facts of the block device at `device` from sysfs under
    /// `sys` (`/sys`) and, if zoned, from its zone report.
    pub fn read(sys: &Path, device: &Path) -> Result<DiskFacts, NvmeError> {
        let dir = sysfs_dir(sys, device)?;
        let name = dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A partition's queue is its disk's.
        let queue = match dir.join("partition").exists() {
            true => dir.join("../queue"),
            false => dir.join("queue"),
        };
        let attr = |path: PathBuf| {
            fs::read_to_string(&path)
                .map(|text| text.trim().to_string())
                .map_err(|err| NvmeError::Sysfs(path, err))
        };
        let number = |path: PathBuf| {
            let text = attr(path.clone())?;
            text.parse::<u64>().map_err(|_| {
                NvmeError::Sysfs(path, io::Error::new(io::ErrorKind::InvalidData, text))
            })
        };
        let model = attr(queue.join("zoned"))?;
        let zoned = match model.as_str() {
            "none" => None,
            _ => {
                let zones = disk_zones(device)
                    .map_err(|err| NvmeError::Zones(device.display().to_string(), err))?;
                let count = |kind| zones.iter().filter(|z| z.zone_type == kind).count();
                Some(ZonedFacts {
                    zone_sectors: number(queue.join("chunk_sectors"))?,
                    max_append: number(queue.join("zone_append_max_bytes"))?,
                    conventional: count(ZoneType::Conventional),
                    preferred: count(ZoneType::SequentialWritePreferred),
                    model,
                })
            }
        };
        Ok(DiskFacts {
            name,
            read_only: number(dir.join("ro"))? != 0,
            sectors: number(dir.join("size"))?,
            zoned,
        })
    }
}

/// The sysfs directory of the block device at `device`: its name under
/// `/dev` (after symbolic links) is the kernel's.
fn sysfs_dir(sys: &Path, device: &Path) -> Result<PathBuf, NvmeError> {
    use std::os::unix::fs::FileTypeExt;

    let metadata =
        fs::metadata(device).map_err(|err| NvmeError::Open(device.to_path_buf(), err))?;
    if !metadata.file_type().is_block_device() {
        return Err(NvmeError::NotBlock(device.to_path_buf()));
    }
    let real = fs::canonicalize(device).map_err(|err| NvmeError::Open(device.into(), err))?;
    let name = real
        .file_name()
        .ok_or_else(|| NvmeError::NotBlock(device.to_path_buf()))?;
    let dir = sys.join("class/block").join(name);
    fs::canonicalize(&dir).map_err(|err| NvmeError::Sysfs(dir, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zns(sectors: u64) -> DiskFacts {
        DiskFacts {
            name: "bius0".into(),
            read_only: false,
            sectors,
            zoned: Some(ZonedFacts {
                model: "host-managed".into(),
                zone_sectors: 1 << 17,
                max_append: 1 << 20,
                conventional: 0,
                preferred: 0,
            }),
        }
    }

    #[test]
    fn a_conventional_disk_and_a_zns_like_one_are_exported() {
        let mut disk = zns(16 << 17);
        assert_eq!(disk.refusal(), None);
        disk.zoned = None;
        disk.sectors = 12345;
        assert_eq!(disk.refusal(), None);
    }

    #[test]
    fn what_nvmet_refuses_is_refused_with_its_reason() {
        let mut disk = zns(16 << 17);
        disk.zoned.as_mut().unwrap().conventional = 2;
        let refusal = disk.refusal().unwrap();
        assert_eq!(refusal, Refusal::ConventionalZones(2));
        assert!(refusal.to_string().contains("2 conventional zone(s)"));
        assert_eq!(refusal.errno(), bius::Errno::EINVAL);

        let disk = zns((16 << 17) + 8);
        assert!(matches!(disk.refusal(), Some(Refusal::RuntZone { .. })));

        let mut disk = zns(16 << 17);
        disk.zoned.as_mut().unwrap().max_append = 2048;
        assert_eq!(disk.refusal(), Some(Refusal::SmallAppend(2048)));

        let mut disk = zns(16 << 17);
        disk.zoned.as_mut().unwrap().model = "host-aware".into();
        assert_eq!(disk.refusal(), Some(Refusal::PreferredZones(0)));

        let mut disk = zns(16 << 17);
        disk.read_only = true;
        assert_eq!(disk.refusal().unwrap().errno(), bius::Errno::EROFS);
    }

    #[test]
    fn no_block_device_no_facts() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        fs::write(&file, b"x").unwrap();
        assert!(matches!(
            DiskFacts::read(dir.path(), &file),
            Err(NvmeError::NotBlock(_))
        ));
        assert!(matches!(
            DiskFacts::read(dir.path(), &dir.path().join("missing")),
            Err(NvmeError::Open(..))
        ));
    }
}
