//! `zoned_memdisk`: a host-managed zoned RAM disk, built on
//! [`bius::zone::Zoned`].
//!
//! What it teaches:
//! - a device is zoned when it has a zone geometry (its `zones()`); it is
//!   started with [`bius::DeviceBuilder::create`] like any other, from a
//!   builder without a size (the disk's size is the geometry's), and the
//!   kernel reads its zones before the disk appears;
//! - [`Zoned`] keeps the zone rules (write pointers, conditions,
//!   open/active limits, zone append, the errnos of Linux's zoned
//!   `null_blk`, in a [`bius::zone::ZoneSet`]), so the device only stores
//!   data: its store is a plain [`BlockDevice`] that `Zoned` writes only
//!   once a write is known to be valid, with the zone locked, reads only
//!   where data was written, and discards when a zone is reset;
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
//! # prints /dev/zoned_memdisk once live: try blkzone report /dev/zoned_memdisk
//! ```

use std::process::ExitCode;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bius::zone::{ZoneGeometry, ZoneGeometryError, Zoned};
use bius::{BlockDevice, DeviceBuilder, IoError};

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

impl Options {
    /// The zone geometry the options give.
    fn geometry(&self) -> Result<ZoneGeometry, ZoneGeometryError> {
        let capacity = self.zone_capacity.unwrap_or(self.zone_size);
        Ok(ZoneGeometry::new(self.size, self.zone_size)?
            .with_zone_capacity(capacity)?
            .with_conventional_zones(self.conv_zones)?
            .with_max_open(self.max_open)
            .with_max_active(self.max_active))
    }
}

/// The data of a zoned disk: one growing buffer per zone.
struct ZoneBuffers {
    zone_size: u64,
    /// The data of each zone, up to the highest byte written in it.
    zones: Box<[RwLock<Vec<u8>>]>,
}

impl ZoneBuffers {
    /// The buffers of `geometry`'s zones, all empty.
    fn new(geometry: &ZoneGeometry) -> Self {
        ZoneBuffers {
            zone_size: geometry.zone_size(),
            zones: (0..geometry.zone_count())
                .map(|_| RwLock::default())
                .collect(),
        }
    }

    /// The zone holding byte `offset`, and the offset in it.  (`Zoned`
    /// never passes a range that crosses zones.)
    fn locate(&self, offset: u64) -> (usize, usize) {
        let index = offset / self.zone_size;
        (index as usize, (offset - index * self.zone_size) as usize)
    }

    /// Zone `index`'s data, for reading.  (Poisoned locks are taken over:
    /// a panicking request never leaves a buffer half-resized.)
    fn zone_data(&self, index: usize) -> RwLockReadGuard<'_, Vec<u8>> {
        self.zones[index]
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Zone `index`'s data, for writing.
    fn zone_data_mut(&self, index: usize) -> RwLockWriteGuard<'_, Vec<u8>> {
        self.zones[index]
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes of memory the zones' data take now.
    fn allocated_bytes(&self) -> u64 {
        (0..self.zones.len())
            .map(|index| self.zone_data(index).capacity() as u64)
            .sum()
    }
}

/// The store as `Zoned` uses it: byte offsets of the disk.
impl BlockDevice for ZoneBuffers {
    /// The written part of one zone: zeroes past the end of its buffer (a
    /// conventional zone's unwritten part).
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let (index, at) = self.locate(offset);
        let zone = self.zone_data(index);
        let stored = zone.len().saturating_sub(at).min(buf.len());
        buf[..stored].copy_from_slice(&zone[at..at + stored]);
        buf[stored..].fill(0);
        Ok(())
    }

    /// In a sequential zone a write starts at the write pointer, so the
    /// buffer only grows at its end.
    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
        let (index, at) = self.locate(offset);
        let mut zone = self.zone_data_mut(index);
        if zone.len() < at + data.len() {
            zone.resize(at + data.len(), 0);
        }
        zone[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// A zone reset: its data is dropped.
    fn discard(&self, offset: u64, _len: u64) -> Result<(), IoError> {
        *self.zone_data_mut(self.locate(offset).0) = Vec::new();
        Ok(())
    }
}

/// The disk: the zone rules from the framework, the data in zone buffers.
type ZonedMemDisk = Zoned<ZoneBuffers>;

/// A disk of this geometry, every zone empty.
fn disk(geometry: ZoneGeometry) -> ZonedMemDisk {
    Zoned::new(ZoneBuffers::new(&geometry), geometry)
}

fn main() -> ExitCode {
    let options: Options = clap::Parser::parse();
    let geometry = match options.geometry() {
        Ok(geometry) => geometry,
        Err(err) => common::usage_error::<Options>(format!("invalid zone geometry: {err}")),
    };
    // The size is the geometry's: a builder without one.
    let builder = options
        .disk
        .apply(DeviceBuilder::default(), "zoned_memdisk");
    let disk = Arc::new(disk(geometry));
    let status = common::serve(builder.create(Arc::clone(&disk)));
    eprintln!(
        "zoned_memdisk: {} KiB of zone data held at exit",
        disk.inner().allocated_bytes() >> 10
    );
    status
}

// Through the in-process loopback: `cargo test` enables its feature.
#[cfg(test)]
mod tests {
    use bius::loopback::Loopback;
    use bius::zone::{ZoneCondition, FILL_PATTERN};
    use bius::Errno;

    use super::*;

    /// 8 MiB in 1 MiB zones of 768 KiB: one conventional, at most 2 open.
    const ZONE: u64 = 1 << 20;

    fn eight_zones() -> ZonedMemDisk {
        let geometry = ZoneGeometry::new(8 * ZONE, ZONE)
            .and_then(|g| g.with_zone_capacity(768 << 10))
            .and_then(|g| g.with_conventional_zones(1))
            .unwrap()
            .with_max_open(2);
        disk(geometry)
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
        let disk = eight_zones();
        disk.write(ZONE, &[1; 4096], false).unwrap();
        assert_eq!(disk.zone_append(ZONE, &[2; 512], false), Ok(ZONE + 4096));
        // Not at the write pointer: EIO, and nothing stored.
        assert_eq!(errno(disk.write(ZONE, &[3; 512], false)), Errno::EIO);
        let zone = read(&disk, ZONE, 8192);
        assert_eq!(zone[..4096], [1; 4096]);
        assert_eq!(zone[4096..4608], [2; 512]);
        assert!(zone[4608..].iter().all(|&b| b == FILL_PATTERN));
        assert_eq!(disk.inner().zone_data(1).len(), 4608);
        // The conventional zone is written anywhere; unwritten, it is zero.
        disk.write(8192, &[4; 512], false).unwrap();
        assert_eq!(read(&disk, 0, 512), vec![0; 512]);
        assert_eq!(read(&disk, 8192, 512), vec![4; 512]);
    }

    #[test]
    fn finish_exposes_zeroes_and_reset_frees_the_zone() {
        let disk = eight_zones();
        disk.write(2 * ZONE, &[1; 512], false).unwrap();
        disk.zone_finish(2 * ZONE).unwrap();
        let zone = read(&disk, 2 * ZONE, ZONE as usize);
        assert_eq!(zone[..512], [1; 512]);
        assert!(zone[512..].iter().all(|&b| b == 0));
        assert!(disk.inner().allocated_bytes() > 0);
        disk.zone_reset_all().unwrap();
        assert_eq!(disk.inner().allocated_bytes(), 0);
        assert_eq!(read(&disk, 2 * ZONE, 512), vec![FILL_PATTERN; 512]);
    }

    #[test]
    fn zone_limits_and_capacity_give_null_blk_errnos() {
        let disk = eight_zones();
        disk.zone_open(ZONE).unwrap();
        disk.zone_open(2 * ZONE).unwrap();
        assert_eq!(errno(disk.zone_open(3 * ZONE)), Errno::ETOOMANYREFS);
        disk.zone_close(ZONE).unwrap();
        // Past the capacity of 768 KiB.
        let too_much = vec![5; (768 << 10) + 512];
        assert_eq!(
            errno(disk.zone_append(3 * ZONE, &too_much, false)),
            Errno::EIO
        );
        assert_eq!(errno(disk.write_zeroes(0, 512, false)), Errno::EOPNOTSUPP);
    }

    /// The disk served by the framework's workers with the in-process
    /// loopback kernel, which first reads every zone as `bius.ko` does:
    /// four queues append to one zone at once, and every append lands
    /// where its reply says.
    #[test]
    fn concurrent_appends_land_where_they_say() {
        let disk = Arc::new(eight_zones());
        let mut kernel = Loopback::new(&DeviceBuilder::default().queues(4)).unwrap();
        kernel.start(Arc::clone(&disk)).unwrap();
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
        assert_eq!(zone.write_pointer, 4 * ZONE + 64 * 8192);
        kernel.stop().unwrap();
    }
}
