//! The kernel transport: file descriptors of `/dev/bius` and the ioctls on
//! them, and `BLKREPORTZONE` on zoned block devices.  This is the only
//! module of the crate with `unsafe` code (allowed where it is declared, in
//! `lib.rs`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;

use bius_sys::{
    bius_connect, bius_destroy, bius_device_info, bius_device_list, bius_device_params, blk_zone,
    blk_zone_report, BlkZoneReport,
};
use nix::errno::Errno;

use crate::error::errno_of;
use crate::transport::Transport;

/// Path of the BIUS control device.
pub(crate) const CONTROL_PATH: &str = "/dev/bius";

/// An open, not yet connected, file descriptor of `/dev/bius`.
pub(crate) struct Control {
    file: File,
}

impl Control {
    /// Opens `/dev/bius` for reading and writing.
    pub(crate) fn open() -> Result<Self, Errno> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(CONTROL_PATH)
            .map_err(|err| errno_of(&err))?;
        Ok(Control { file })
    }

    /// `BIUS_IOC_CREATE_DEVICE`; on success `params.dev_id` is set.
    pub(crate) fn create(&self, params: &mut bius_device_params) -> Result<(), Errno> {
        // SAFETY: the fd is open, and `params` is a valid, exclusively
        // borrowed struct of the type the ioctl number encodes.
        unsafe { bius_sys::ioctl::create_device(self.file.as_raw_fd(), params) }.map(drop)
    }

    /// `BIUS_IOC_DESTROY_DEVICE` with `BIUS_DESTROY_*` flags.
    pub(crate) fn destroy(&self, dev_id: u32, flags: u32) -> Result<(), Errno> {
        let arg = bius_destroy { dev_id, flags };
        // SAFETY: the fd is open and `arg` is a valid struct of the type the
        // ioctl number encodes; the kernel only reads it.
        unsafe { bius_sys::ioctl::destroy_device(self.file.as_raw_fd(), &arg) }.map(drop)
    }

    /// `BIUS_IOC_GET_INFO` of device `dev_id`.
    pub(crate) fn info(&self, dev_id: u32) -> Result<bius_device_info, Errno> {
        let mut info = bius_device_info {
            dev_id,
            ..Default::default()
        };
        // SAFETY: the fd is open and `info` is a valid, exclusively borrowed
        // struct of the type the ioctl number encodes.
        unsafe { bius_sys::ioctl::get_info(self.file.as_raw_fd(), &mut info) }?;
        Ok(info)
    }

    /// `BIUS_IOC_LIST_DEVICES`: the ids of all devices.
    pub(crate) fn list(&self) -> Result<Vec<u32>, Errno> {
        let mut ids = vec![0u32; 64];
        loop {
            let mut list = bius_device_list {
                capacity: u32::try_from(ids.len()).unwrap_or(u32::MAX),
                count: 0,
                ids: ids.as_mut_ptr() as u64,
            };
            // SAFETY: the fd is open, `list` is a valid struct of the type the
            // ioctl number encodes, and `list.ids` points to `capacity`
            // writable u32s that outlive the call.
            unsafe { bius_sys::ioctl::list_devices(self.file.as_raw_fd(), &mut list) }?;
            let count = list.count as usize;
            if count <= ids.len() {
                ids.truncate(count);
                return Ok(ids);
            }
            ids.resize(count, 0);
        }
    }

    /// `BIUS_IOC_CONNECT`: binds this fd to queue `queue` of `dev_id`.
    pub(crate) fn connect(self, dev_id: u32, queue: u32) -> Result<KernelQueue, Errno> {
        let arg = bius_connect {
            dev_id,
            queue,
            reserved: 0,
        };
        // SAFETY: the fd is open and `arg` is a valid struct of the type the
        // ioctl number encodes; the kernel only reads it.
        unsafe { bius_sys::ioctl::connect(self.file.as_raw_fd(), &arg) }?;
        Ok(KernelQueue { file: self.file })
    }
}

/// A file descriptor connected to one hardware queue.
pub(crate) struct KernelQueue {
    file: File,
}

impl Transport for KernelQueue {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }

    fn write(&mut self, records: &[u8]) -> io::Result<usize> {
        self.file.write(records)
    }
}

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
