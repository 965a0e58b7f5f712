//! An open `/dev/bius`, not yet connected to a queue, and the ioctls that
//! create, recover, destroy, describe and list devices.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;

use bius_sys::{
    bius_connect, bius_destroy, bius_device_info, bius_device_list, bius_device_params,
};
use nix::errno::Errno;

use super::queue::KernelQueue;
use crate::error::errno_of;

/// Path of the BIUS control device.
const CONTROL_PATH: &str = "/dev/bius";

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

    /// `BIUS_IOC_RECOVER_DEVICE`: this fd becomes the owner of the
    /// RECOVERING device `params.dev_id`, which `params` must describe.
    pub(crate) fn recover(&self, params: &bius_device_params) -> Result<(), Errno> {
        // SAFETY: the fd is open and `params` is a valid struct of the type
        // the ioctl number encodes; the kernel only reads it.
        unsafe { bius_sys::ioctl::recover_device(self.file.as_raw_fd(), params) }.map(drop)
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
        Ok(KernelQueue::new(self.file))
    }
}
