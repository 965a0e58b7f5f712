//! [`ZonedRamDisk`]: a zoned RAM disk, like a memory-backed zoned
//! `null_blk`: a [`RamDisk`] zoned by [`Zoned`].

use bius::zone::{ZoneGeometry, Zoned};

use crate::ramdisk::{RamDisk, DEFAULT_CHUNK_SIZE};

/// A zoned RAM disk (host-managed) in anonymous memory
/// ([`RamDisk::zoned`]).
///
/// The zones follow [`Zoned`]'s [`ZoneSet`](bius::zone::ZoneSet): writes to
/// sequential zones only at the write pointer, reads past it return
/// [`FILL_PATTERN`](bius::zone::FILL_PATTERN).  The data lives in lazily
/// mapped chunks as in a [`RamDisk`], chunks no larger than a zone, so
/// that a zone reset frees the zone's memory.  As on zoned `null_blk`,
/// there is neither discard nor write-zeroes.
pub type ZonedRamDisk = Zoned<RamDisk>;

impl RamDisk {
    /// A zoned RAM disk of `geometry`, all zones empty.
    ///
    /// ```
    /// use bius::BlockDevice;
    /// use bius::zone::ZoneGeometry;
    /// use bius_backends::RamDisk;
    ///
    /// let disk = RamDisk::zoned(ZoneGeometry::new(4 << 20, 1 << 20)?);
    /// assert_eq!(disk.zone_append(1 << 20, &[1; 4096], false), Ok(1 << 20));
    /// assert_eq!(disk.inner().allocated_bytes(), 1 << 20);
    /// # Ok::<(), bius::zone::ZoneGeometryError>(())
    /// ```
    pub fn zoned(geometry: ZoneGeometry) -> ZonedRamDisk {
        let chunk_size = geometry.zone_size().min(DEFAULT_CHUNK_SIZE as u64) as usize;
        Zoned::new(
            RamDisk::with_chunk_size(geometry.size(), chunk_size),
            geometry,
        )
    }
}

#[cfg(test)]
mod tests {
    use bius::zone::{ZoneCondition, FILL_PATTERN};
    use bius::{BlockDevice, Errno, IoError};

    use super::*;

    /// 8 KiB zones of 6 KiB capacity: zone 0 conventional, zones 1..4
    /// sequential, at most 2 open.
    const ZONE: u64 = 8192;

    fn disk() -> ZonedRamDisk {
        let geometry = ZoneGeometry::new(4 * ZONE, ZONE)
            .and_then(|g| g.with_zone_capacity(6 << 10))
            .and_then(|g| g.with_conventional_zones(1))
            .unwrap()
            .with_max_open(2);
        RamDisk::zoned(geometry)
    }

    fn read(disk: &ZonedRamDisk, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0xee; len];
        disk.read(offset, &mut buf).unwrap();
        buf
    }

    fn errno(result: Result<impl Sized, IoError>) -> Errno {
        result.map(drop).unwrap_err().errno()
    }

    fn condition(disk: &ZonedRamDisk, offset: u64) -> ZoneCondition {
        disk.report_zones(offset, 1).unwrap()[0].condition
    }

    #[test]
    fn reads_past_the_write_pointer_return_the_fill_pattern() {
        let disk = disk();
        // Unwritten conventional space reads as zeroes.
        assert_eq!(read(&disk, 0, 1024), vec![0; 1024]);
        disk.write(ZONE, &[1; 1024], false).unwrap();
        let zone = read(&disk, ZONE, ZONE as usize);
        assert_eq!(zone[..1024], [1; 1024]);
        assert!(zone[1024..].iter().all(|&b| b == FILL_PATTERN));
        // Across zones: conventional data, then zone 1.
        disk.write(ZONE - 512, &[2; 512], false).unwrap();
        let across = read(&disk, ZONE - 512, 1536);
        assert_eq!(across[..512], [2; 512]);
        assert_eq!(across[512..], [1; 1024]);
    }

    #[test]
    fn writes_follow_the_write_pointer() {
        let disk = disk();
        assert_eq!(errno(disk.write(ZONE + 512, &[1; 512], false)), Errno::EIO);
        disk.write(ZONE, &[1; 512], false).unwrap();
        disk.write(ZONE + 512, &[2; 512], false).unwrap();
        assert_eq!(errno(disk.write(ZONE, &[3; 512], false)), Errno::EIO);
        assert_eq!(errno(disk.write(ZONE, &[3; 100], false)), Errno::EINVAL);
        // Past the capacity.
        assert_eq!(
            errno(disk.write(ZONE + 1024, &[3; 6144], false)),
            Errno::EIO
        );
        assert_eq!(condition(&disk, ZONE), ZoneCondition::ImplicitOpen);
        // Conventional zones are written anywhere.
        disk.write(4096, &[4; 512], false).unwrap();
        disk.write(0, &[4; 512], false).unwrap();
        assert_eq!(read(&disk, 4096, 512), vec![4; 512]);
    }

    #[test]
    fn appends_land_at_the_write_pointer() {
        let disk = disk();
        assert_eq!(disk.zone_append(2 * ZONE, &[1; 1024], false), Ok(2 * ZONE));
        assert_eq!(
            disk.zone_append(2 * ZONE, &[2; 512], false),
            Ok(2 * ZONE + 1024)
        );
        assert_eq!(read(&disk, 2 * ZONE + 1024, 512), vec![2; 512]);
        assert_eq!(
            errno(disk.zone_append(2 * ZONE + 512, &[2; 512], false)),
            Errno::EIO
        );
        assert_eq!(errno(disk.zone_append(0, &[2; 512], false)), Errno::EIO);
        // Filling to the capacity makes the zone full.
        disk.zone_append(2 * ZONE, &[3; 4608], false).unwrap();
        assert_eq!(condition(&disk, 2 * ZONE), ZoneCondition::Full);
    }

    #[test]
    fn resets_free_the_zone_memory() {
        let disk = disk();
        disk.write(0, &[9; 512], false).unwrap();
        disk.write(ZONE, &[1; 512], false).unwrap();
        disk.write(2 * ZONE, &[2; 512], false).unwrap();
        assert_eq!(disk.inner().allocated_bytes(), 3 * ZONE);
        disk.zone_reset(ZONE).unwrap();
        assert_eq!(disk.inner().allocated_bytes(), 2 * ZONE);
        assert!(read(&disk, ZONE, 512).iter().all(|&b| b == FILL_PATTERN));
        // The freed zone is writable again from its start.
        disk.write(ZONE, &[3; 512], false).unwrap();
        disk.zone_reset_all().unwrap();
        // Only the conventional zone keeps memory.
        assert_eq!(disk.inner().allocated_bytes(), ZONE);
        assert_eq!(read(&disk, 0, 512), vec![9; 512]);
    }

    #[test]
    fn finishing_exposes_unwritten_space_as_zeroes() {
        let disk = disk();
        disk.write(ZONE, &[1; 512], false).unwrap();
        disk.zone_finish(ZONE).unwrap();
        let zone = read(&disk, ZONE, ZONE as usize);
        assert_eq!(zone[..512], [1; 512]);
        assert!(zone[512..].iter().all(|&b| b == 0));
        assert_eq!(errno(disk.write(ZONE + 512, &[1; 512], false)), Errno::EIO);
    }

    #[test]
    fn zone_operations_report_the_errnos_of_null_blk() {
        let disk = disk();
        disk.zone_open(ZONE).unwrap();
        disk.zone_open(2 * ZONE).unwrap();
        assert_eq!(errno(disk.zone_open(3 * ZONE)), Errno::ETOOMANYREFS);
        assert_eq!(
            errno(disk.write(3 * ZONE, &[1; 512], false)),
            Errno::ETOOMANYREFS
        );
        disk.zone_close(ZONE).unwrap();
        assert_eq!(condition(&disk, ZONE), ZoneCondition::Empty);
        assert_eq!(errno(disk.zone_close(ZONE)), Errno::EIO);
        assert_eq!(errno(disk.zone_open(0)), Errno::EIO);
        assert_eq!(errno(disk.discard(ZONE, ZONE)), Errno::EOPNOTSUPP);
        assert_eq!(
            errno(disk.write_zeroes(ZONE, ZONE, true)),
            Errno::EOPNOTSUPP
        );
        assert!(!disk.capabilities().discard && !disk.capabilities().write_zeroes);
        assert_eq!(disk.zone_set().geometry().max_open(), 2);
        assert_eq!(disk.report_zones(0, 10).unwrap().len(), 4);
    }

    #[test]
    fn injected_faults_reach_the_data() {
        let disk = disk();
        let zones = disk.zone_set();
        zones.inject_write_error(ZONE + 1024).unwrap();
        assert_eq!(errno(disk.write(ZONE, &[1; 2048], false)), Errno::EIO);
        let zone = read(&disk, ZONE, 2048);
        assert_eq!(zone[..1024], [1; 1024]);
        assert!(zone[1024..].iter().all(|&b| b == FILL_PATTERN));

        let discard = |offset, len| disk.inner().discard(offset, len);
        zones.set_read_only(ZONE, discard).unwrap();
        assert_eq!(read(&disk, ZONE, 1024), vec![1; 1024]);
        assert_eq!(errno(disk.zone_reset(ZONE)), Errno::EIO);
        zones.set_offline(ZONE, discard).unwrap();
        let mut buf = [0; 512];
        assert_eq!(errno(disk.read(ZONE, &mut buf)), Errno::EIO);
        // Offline again: back to empty, memory freed.
        zones.set_offline(ZONE, discard).unwrap();
        assert_eq!(condition(&disk, ZONE), ZoneCondition::Empty);
        assert_eq!(disk.inner().allocated_bytes(), 0);
    }

    #[test]
    fn a_shared_disk_is_a_zoned_device_too() {
        fn fill<D: BlockDevice>(device: &D) -> Result<u64, IoError> {
            device.zone_open(ZONE)?;
            device.zone_append(ZONE, &[5; 512], false)
        }
        let shared = std::sync::Arc::new(disk());
        assert_eq!(fill(&shared), Ok(ZONE));
        assert_eq!(shared.zones(), disk().zones());
        shared.zone_finish(ZONE).unwrap();
        shared.zone_close(2 * ZONE).unwrap_err();
        shared.zone_reset_all().unwrap();
        shared.zone_reset(ZONE).unwrap();
        assert_eq!(shared.report_zones(ZONE, 1).unwrap()[0].write_pointer, ZONE);
    }

    #[test]
    fn concurrent_appends_keep_their_data() {
        let disk = RamDisk::zoned(ZoneGeometry::new(1 << 20, 1 << 20).unwrap());
        let landed: Vec<Vec<(u64, u8)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (1..=4u8)
                .map(|t| {
                    let disk = &disk;
                    s.spawn(move || {
                        (0..32)
                            .map(|_| (disk.zone_append(0, &[t; 4096], false).unwrap(), t))
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut offsets: Vec<u64> = landed.iter().flatten().map(|&(at, _)| at).collect();
        offsets.sort_unstable();
        assert_eq!(offsets, (0..128).map(|i| i * 4096).collect::<Vec<_>>());
        for &(at, t) in landed.iter().flatten() {
            assert_eq!(read(&disk, at, 4096), vec![t; 4096]);
        }
    }
}
