//! `BLKREPORTZONE`: the zone descriptors of any zoned block device, which
//! [`zone::disk_zones`](crate::zone::disk_zones) reads.

use std::fs::File;
use std::os::fd::AsRawFd;

use bius_sys::{blk_zone, blk_zone_report, BlkZoneReport};
use nix::errno::Errno;

/// Zone descriptors asked for per `BLKREPORTZONE` call.
const REPORT_BATCH: usize = 128;

/// `BLKREPORTZONE` on an open block device: the descriptors of up to 128
/// zones from the one containing `sector` on (none past the last zone).
pub(crate) fn report_zones(disk: &File, sector: u64) -> Result<Vec<blk_zone>, Errno> {
    let mut buf = Box::<BlkZoneReport<REPORT_BATCH>>::default();
    buf.report.sector = sector;
    buf.report.nr_zones = REPORT_BATCH as u32;
    let arg = std::ptr::from_mut(&mut *buf).cast::<blk_zone_report>();
    // SAFETY: the fd is open, and `arg` points to a `blk_zone_report`
    // followed by room for `nr_zones` descriptors (`BlkZoneReport` is
    // repr(C), its layout checked in bius-sys), exclusively borrowed for the
    // call; the kernel writes at most `nr_zones` descriptors.
    unsafe { bius_sys::ioctl::report_zones(disk.as_raw_fd(), arg) }?;
    let filled = (buf.report.nr_zones as usize).min(REPORT_BATCH);
    Ok(buf.zones[..filled].to_vec())
}
