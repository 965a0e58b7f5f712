//! Ready-made [`bius::BlockDevice`]s: [`RamDisk`] (lazily allocated
//! anonymous memory), [`ZonedRamDisk`] (the same, zoned, as a
//! [`bius::ZonedDevice`]), [`Null`] (no storage, for overhead measurements)
//! and [`File`] (a regular file or an existing block device); [`nbd`], the
//! client engine of a device stored on a remote NBD server.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod chunks;
mod file;
pub mod nbd;
mod null;
mod ramdisk;
mod zoned_ramdisk;

pub use file::{File, FileOptions};
pub use null::Null;
pub use ramdisk::RamDisk;
pub use zoned_ramdisk::ZonedRamDisk;
