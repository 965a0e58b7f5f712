//! Ready-made [`bius::BlockDevice`]s: [`RamDisk`] (lazily allocated
//! anonymous memory), [`ZonedRamDisk`] (the same, zoned by
//! [`bius::zone::Zoned`]), [`Null`] and [`Zero`] (no storage, for overhead
//! measurements: without data and with it) and [`File`] (a regular file or an existing block device), served one
//! request at a time per queue; [`DeferredFile`], the same with many requests
//! in flight, through [`file_engine`] (io_uring or a pool of threads);
//! [`ZonedFile`], a zoned disk over such a file whose zones persist in a
//! zone state file ([`zone_state`]); [`nbd`], a device stored on a remote
//! NBD server.
//!
//! The crate is safe code except for the one module that talks to io_uring
//! (`file_engine/uring.rs`), which alone allows `unsafe`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod chunks;
mod deferred_file;
mod file;
pub mod file_engine;
mod io_thread;
pub mod nbd;
mod null;
mod ramdisk;
#[cfg(test)]
mod testing;
pub mod zone_state;
mod zoned_file;
mod zoned_ramdisk;

pub use deferred_file::DeferredFile;
pub use file::{File, FileOptions};
pub use null::{Null, Zero};
pub use ramdisk::RamDisk;
pub use zone_state::{ZoneStateError, ZoneStateFile, ZoneStateHeader};
pub use zoned_file::{ZonedFile, ZonedFileError};
pub use zoned_ramdisk::ZonedRamDisk;
