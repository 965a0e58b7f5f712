//! `zoned_memdisk`: a host-managed zoned RAM disk, built on
//! [`bius::zone::ZoneSet`].
//!
//! What it teaches:
//! - a zoned device is a [`BlockDevice`] plus a [`ZonedDevice`]; it is
//!   started with [`bius::DeviceBuilder::create_zoned`], and the kernel
//!   reads its zones before the disk appears;
//! - [`ZoneSet`] keeps the zone rules (write pointers, conditions,
//!   open/active limits, zone append, the errnos of Linux's zoned
//!   `null_blk`), so the device only stores data.  `ZoneSet` calls the
//!   device's data closures with the zone locked, once a write is known
//!   to be valid, and moves the write pointer only if the data was stored;
//! - a data store shaped by the zone model: sequential zones are written
//!   only at their write pointer, so each zone's data is a `Vec` that
//!   grows at its end, and a zone reset frees it.  At exit the disk
//!   prints how much memory its zones still hold.
//!
//! Like an NVMe ZNS drive, zones may be writable for less than their
//! size (`--zone-capacity`), and few zones may be open or active at once.
//!
//! Run it (as root, with `bius.ko` loaded):
//!
//! ```sh
//! cargo run --release --example zoned_memdisk -- --size 256M --zone-size 4M \
//!     --zone-capacity 3M --conv-zones 4 --max-open 8 --max-active 12
//! # prints /dev/zoned0 once live: try blkzone report /dev/zoned0
//! ```

use std::process::ExitCode;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bius::zone::{self, Zone, ZoneGeometry, ZoneSet, ZonedDevice, SECTOR_SHIFT};
use bius::{BlockDevice, IoError};

mod common;
use common::DiskArgs;

/// A host-managed zoned RAM disk.
#[derive(Debug, clap::Parser)]
#[command(name = "zoned_memdisk")]
struct Options {
    /// Disk size: bytes, or with a unit (256M, 1.5G, 1GB).
    #[arg(long, value_parser = bius::size::parse, default_value = "256M")]
    size: u64,
    /// Zone size, a power of two.
    #[arg(long, value_parser = bius::size::parse, default_value = "4M")]
    zone_size: u64,
    /// Writable bytes of a zone, at most its size [default: the zone size].
    #[arg(long, value_parser = bius::size::parse)]
    zone_capacity: Option<u64>,
    /// Leading conventional zones.
    #[arg(long, default_value_t = 4)]
    conv_zones: u32,
    /// Most zones open at once, 0 for no limit.
    #[arg(long, default_value_t = 8)]
    max_open: u32,
    /// Most zones open or closed at once, 0 for no limit.
    #[arg(long, default_value_t = 12)]
    max_active: u32,
    #[command(flatten)]
    disk: DiskArgs,
}

/// Bytes in `sectors` sectors.
fn bytes(sectors: u64) -> usize {
    (sectors << SECTOR_SHIFT) as usize
}

/// A zoned RAM disk: the zone state machine from the framework, the data
/// in one growing buffer per zone.
struct ZonedMemDisk {
    zones: ZoneSet,
    /// The data of each zone, up to the highest byte written in it.
    data: Box<[RwLock<Vec<u8>>]>,
}

impl ZonedMemDisk {
    /// A disk of this geometry, every zone empty.
    fn new(geometry: ZoneGeometry) -> Result<Self, zone::ZoneGeometryError> {
        let zones = ZoneSet::new(geometry)?;
        let count = zones.geometry().zone_count();
        Ok(ZonedMemDisk {
            data: (0..count).map(|_| RwLock::default()).collect(),
            zones,
        })
    }

    /// The zone holding `sector`, and the byte offset of `sector` in it.
    fn locate(&self, sector: u64) -> (usize, usize) {
        let zone_sectors = self.zones.geometry().zone_sectors;
        let index = sector / zone_sectors;
        (index as usize, bytes(sector - index * zone_sectors))
    }

    /// Zone `index`'s data, for reading.  (Poisoned locks are taken over:
    /// a panicking request never leaves a buffer half-resized.)
    fn zone_data(&self, index: usize) -> RwLockReadGuard<'_, Vec<u8>> {
        self.data[index]
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Zone `index`'s data, for writing.
    fn zone_data_mut(&self, index: usize) -> RwLockWriteGuard<'_, Vec<u8>> {
        self.data[index]
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `data` at `sector`: the data closure of writes and appends.
    /// `ZoneSet` has checked that it lies in one zone; in a sequential
    /// zone it starts at the write pointer, so the buffer only grows at
    /// its end.
    fn store(&self, sector: u64, data: &[u8]) -> Result<(), IoError> {
        let (index, at) = self.locate(sector);
        let mut zone = self.zone_data_mut(index);
        if zone.len() < at + data.len() {
            zone.resize(at + data.len(), 0);
        }
        zone[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Drops a zone's data: the discard closure of zone resets.
    fn drop_zone(&self, sector: u64) -> Result<(), IoError> {
        *self.zone_data_mut(self.locate(sector).0) = Vec::new();
        Ok(())
    }

    /// Bytes of memory the zones' data take now.
    fn allocated_bytes(&self) -> u64 {
        (0..self.data.len())
            .map(|index| self.zone_data(index).capacity() as u64)
            .sum()
    }
}

impl BlockDevice for ZonedMemDisk {
    /// `ZoneSet` cuts the read into one span per zone, each knowing how
    /// much of it holds data (zeroes past the end of the zone's buffer: a
    /// conventional zone's unwritten part) and filling the rest: zeroes
    /// where a finish moved the write pointer, the fill pattern past it.
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let (first, sectors) = zone::to_sectors(offset, buf.len() as u64)?;
        self.zones.read(first, sectors, |span| {
            let out = &mut buf[bytes(span.sector - first)..][..bytes(span.sectors)];
            let written = span.fill_unwritten(out);
            let (index, at) = self.locate(span.sector);
            let zone = self.zone_data(index);
            let stored = zone.len().saturating_sub(at).min(written.len());
            written[..stored].copy_from_slice(&zone[at..at + stored]);
            written[stored..].fill(0);
            Ok(())
        })?;
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
        let (sector, sectors) = zone::to_sectors(offset, data.len() as u64)?;
        self.zones
            .write(sector, sectors, |at, n| self.store(at, &data[..bytes(n)]))?;
        Ok(())
    }

    /// Zoned disks have no write-zeroes (as on zoned `null_blk`); the
    /// default would write zeroes, which a sequential zone refuses anyway.
    fn write_zeroes(&self, _offset: u64, _len: u64, _unmap: bool) -> Result<(), IoError> {
        Err(IoError::Unsupported)
    }
}

/// Every zone operation is `ZoneSet`'s; the `?` turns a
/// [`zone::ZoneError`] into the errno the kernel expects.
impl ZonedDevice for ZonedMemDisk {
    fn geometry(&self) -> ZoneGeometry {
        *self.zones.geometry()
    }

    fn report_zones(&self, offset: u64, max: usize) -> Result<Vec<Zone>, IoError> {
        Ok(self.zones.report(offset >> SECTOR_SHIFT, max))
    }

    fn zone_open(&self, offset: u64) -> Result<(), IoError> {
        Ok(self.zones.open(offset >> SECTOR_SHIFT)?)
    }

    fn zone_close(&self, offset: u64) -> Result<(), IoError> {
        Ok(self.zones.close(offset >> SECTOR_SHIFT)?)
    }

    fn zone_finish(&self, offset: u64) -> Result<(), IoError> {
        Ok(self.zones.finish(offset >> SECTOR_SHIFT)?)
    }

    fn zone_reset(&self, offset: u64) -> Result<(), IoError> {
        let sector = offset >> SECTOR_SHIFT;
        Ok(self.zones.reset(sector, |start, _| self.drop_zone(start))?)
    }

    fn zone_reset_all(&self) -> Result<(), IoError> {
        Ok(self.zones.reset_all(|start, _| self.drop_zone(start))?)
    }

    /// Where the data lands is the zone's write pointer, which only
    /// `ZoneSet` knows: it passes the sector to the closure and returns it.
    fn zone_append(&self, offset: u64, data: &[u8]) -> Result<u64, IoError> {
        let (zone_start, sectors) = zone::to_sectors(offset, data.len() as u64)?;
        Ok(self.zones.append(zone_start, sectors, |at, n| {
            self.store(at, &data[..bytes(n)])
        })?)
    }
}

fn main() -> ExitCode {
    let options: Options = clap::Parser::parse();
    let (size, zone_size) = (options.size, options.zone_size);
    let capacity = options.zone_capacity.unwrap_or(zone_size);
    let geometry = ZoneGeometry {
        zone_capacity: capacity >> SECTOR_SHIFT,
        conventional_zones: options.conv_zones,
        max_open: options.max_open,
        max_active: options.max_active,
        ..ZoneGeometry::new(size >> SECTOR_SHIFT, zone_size >> SECTOR_SHIFT)
    };
    let builder = options.disk.builder(size, "zoned0");
    let disk = match ZonedMemDisk::new(geometry) {
        Ok(disk) => Arc::new(disk),
        Err(err) => common::usage_error::<Options>(format!("invalid zone geometry: {err}")),
    };
    let status = common::serve(builder.create_zoned(Arc::clone(&disk)));
    eprintln!(
        "zoned_memdisk: {} KiB of zone data held at exit",
        disk.allocated_bytes() >> 10
    );
    status
}

// Through the in-process loopback: `cargo test` enables its feature.
#[cfg(all(test, feature = "loopback"))]
mod tests {
    use bius::loopback::Loopback;
    use bius::zone::ZoneCondition;
    use bius::{DeviceBuilder, Errno};

    use super::*;

    /// 8 MiB in 1 MiB zones of 768 KiB: one conventional, at most 2 open.
    const ZONE: u64 = 1 << 20;

    fn disk() -> ZonedMemDisk {
        ZonedMemDisk::new(ZoneGeometry {
            zone_capacity: (768 << 10) >> SECTOR_SHIFT,
            conventional_zones: 1,
            max_open: 2,
            ..ZoneGeometry::new((8 * ZONE) >> SECTOR_SHIFT, ZONE >> SECTOR_SHIFT)
        })
        .unwrap()
    }

    fn read(disk: &ZonedMemDisk, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0xee; len];
        disk.read(offset, &mut buf).unwrap();
        buf
    }

    fn errno<T: std::fmt::Debug>(result: Result<T, IoError>) -> Errno {
        result.unwrap_err().errno()
    }

    #[test]
    fn sequential_zones_grow_at_the_write_pointer() {
        let disk = disk();
        disk.write(ZONE, &[1; 4096], false).unwrap();
        assert_eq!(disk.zone_append(ZONE, &[2; 512]), Ok(ZONE / 512 + 8));
        // Not at the write pointer: EIO, and nothing stored.
        assert_eq!(errno(disk.write(ZONE, &[3; 512], false)), Errno::EIO);
        let zone = read(&disk, ZONE, 8192);
        assert_eq!(zone[..4096], [1; 4096]);
        assert_eq!(zone[4096..4608], [2; 512]);
        assert!(zone[4608..].iter().all(|&b| b == zone::FILL_PATTERN));
        assert_eq!(disk.zone_data(1).len(), 4608);
        // The conventional zone is written anywhere; unwritten, it is zero.
        disk.write(8192, &[4; 512], false).unwrap();
        assert_eq!(read(&disk, 0, 512), vec![0; 512]);
        assert_eq!(read(&disk, 8192, 512), vec![4; 512]);
    }

    #[test]
    fn finish_exposes_zeroes_and_reset_frees_the_zone() {
        let disk = disk();
        disk.write(2 * ZONE, &[1; 512], false).unwrap();
        disk.zone_finish(2 * ZONE).unwrap();
        let zone = read(&disk, 2 * ZONE, ZONE as usize);
        assert_eq!(zone[..512], [1; 512]);
        assert!(zone[512..].iter().all(|&b| b == 0));
        assert!(disk.allocated_bytes() > 0);
        disk.zone_reset_all().unwrap();
        assert_eq!(disk.allocated_bytes(), 0);
        assert_eq!(read(&disk, 2 * ZONE, 512), vec![zone::FILL_PATTERN; 512]);
    }

    #[test]
    fn zone_limits_and_capacity_give_null_blk_errnos() {
        let disk = disk();
        disk.zone_open(ZONE).unwrap();
        disk.zone_open(2 * ZONE).unwrap();
        assert_eq!(errno(disk.zone_open(3 * ZONE)), Errno::ETOOMANYREFS);
        disk.zone_close(ZONE).unwrap();
        // Past the capacity of 768 KiB.
        let too_much = vec![5; (768 << 10) + 512];
        assert_eq!(errno(disk.zone_append(3 * ZONE, &too_much)), Errno::EIO);
        assert_eq!(errno(disk.write_zeroes(0, 512, false)), Errno::EOPNOTSUPP);
    }

    /// The disk served by the framework's workers with the in-process
    /// loopback kernel, which first reads every zone as `bius.ko` does:
    /// four queues append to one zone at once, and every append lands
    /// where its reply says.
    #[test]
    fn concurrent_appends_land_where_they_say() {
        let disk = Arc::new(disk());
        let mut kernel = Loopback::new(&DeviceBuilder::new(8 * ZONE).queues(4)).unwrap();
        kernel.start_zoned(Arc::clone(&disk)).unwrap();
        let landed: Vec<(u64, u8)> = std::thread::scope(|s| {
            let queues: Vec<_> = (0..4u8)
                .map(|queue| {
                    let kernel = &kernel;
                    s.spawn(move || {
                        (0..16)
                            .map(|_| {
                                let data = vec![queue + 1; 8192];
                                let at = kernel.zone_append(queue.into(), 4 * ZONE, data);
                                (at.unwrap(), queue + 1)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            queues.into_iter().flat_map(|q| q.join().unwrap()).collect()
        });
        for (at, byte) in landed {
            assert_eq!(kernel.read(0, at, 8192), Ok(vec![byte; 8192]));
        }
        let zone = &kernel.report_zones(0, 4 * ZONE, 1).unwrap()[0];
        assert_eq!(zone.condition, ZoneCondition::ImplicitOpen);
        assert_eq!(zone.write_pointer, ((4 * ZONE) >> SECTOR_SHIFT) + 64 * 16);
        kernel.stop().unwrap();
    }
}
