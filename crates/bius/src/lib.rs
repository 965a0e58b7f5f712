//! Block devices implemented in user space, over the BIUS kernel module.
//!
//! Implement [`BlockDevice`] for your storage, describe the disk with a
//! [`DeviceBuilder`] and [`create`](DeviceBuilder::create) it: the kernel
//! adds `/dev/<name>`, and one worker thread per hardware queue turns the
//! kernel's requests into calls of your methods (concurrently, hence `&self`).
//!
//! ```no_run
//! use std::sync::RwLock;
//!
//! use bius::{BlockDevice, Capabilities, DeviceBuilder, IoError};
//!
//! /// A RAM disk behind one lock: simple, not fast.
//! struct Memory(RwLock<Vec<u8>>);
//!
//! impl Memory {
//!     fn range(offset: u64, len: usize) -> std::ops::Range<usize> {
//!         offset as usize..offset as usize + len
//!     }
//! }
//!
//! impl BlockDevice for Memory {
//!     fn capabilities(&self) -> Capabilities {
//!         Capabilities { discard: true, ..Capabilities::default() }
//!     }
//!
//!     fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
//!         let data = self.0.read().map_err(|_| IoError::Io)?;
//!         buf.copy_from_slice(&data[Self::range(offset, buf.len())]);
//!         Ok(())
//!     }
//!
//!     fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
//!         let mut store = self.0.write().map_err(|_| IoError::Io)?;
//!         store[Self::range(offset, data.len())].copy_from_slice(data);
//!         Ok(())
//!     }
//!
//!     fn discard(&self, offset: u64, len: u64) -> Result<(), IoError> {
//!         let mut store = self.0.write().map_err(|_| IoError::Io)?;
//!         store[Self::range(offset, len as usize)].fill(0);
//!         Ok(())
//!     }
//! }
//!
//! fn main() -> Result<(), bius::Error> {
//!     let size = 64 << 20;
//!     let device = DeviceBuilder::new(size)
//!         .queues(2)
//!         .name("memdisk")
//!         .create(Memory(RwLock::new(vec![0; size as usize])))?;
//!     println!("{}", device.path().display());
//!     device.run_until_signal()
//! }
//! ```
//!
//! Every offset and length the framework hands a device, or takes from it,
//! is in bytes: the requests ([`Request`], [`Command`], [`Reply`]), the
//! device traits, the builder, and the whole zone API (the
//! [`zone::ZoneGeometry`], the zone state machine [`zone::ZoneSet`], the
//! zone descriptors [`zone::Zone`] and [`zone::ZoneRecord`], the
//! [`zone::ZoneError`]s).  Sectors (512 bytes) exist only where the
//! kernel's structures have them, converted where the framework meets the
//! kernel.
//!
//! A device of any kind ([`BlockDevice`], [`DeferredDevice`],
//! `tokio::AsyncBlockDevice`) is zoned (host-managed) when its `zones()`
//! returns a [`zone::ZoneGeometry`]: [`DeviceBuilder::create`] (or
//! `create_deferred`) then creates a zoned disk of the geometry's size, and
//! the device serves the zone requests of [`Request`] too.  The [`zone`]
//! module has the zone state machine ([`zone::ZoneSet`]), [`zone::Zoned`]
//! and [`zone::DeferredZoned`], which make a zoned device of any
//! conventional one with it, and [`zone::disk_zones`] to read any zoned
//! disk's zones.
//!
//! Request data crosses the kernel boundary as the builder's
//! [`TransferMode`] says: copied through the request and completion
//! streams, or (map and selective modes) mapped by the kernel into each
//! queue's data window without a copy.  Backends see no difference: their
//! `&[u8]` and `&mut [u8]` are then the I/O buffers' own pages, valid for
//! the call.  (Those pages are memory shared with the I/O's owner: as with
//! any block driver, the owner leaves them alone until its I/O completes;
//! one that does not sees, or writes, torn data, nothing worse.)  One
//! thing only shows: a mapped request whose data the kernel
//! passes in several pieces (a buffer in pieces not aligned to each other,
//! e.g. an `O_DIRECT` `readv` of buffers at different page offsets)
//! reaches the device as one read or write call per piece, in order, at
//! consecutive offsets, each piece a multiple of 512 bytes; the request
//! completes when all pieces are served, and fails with the first failing
//! piece's error (see [`Request`]).
//!
//! Without the kernel module, the `loopback` module (behind the `loopback`
//! cargo feature) serves the same device through the same workers, in
//! process: that is how this crate is tested, and how a backend can be
//! (see [Testing your device](#testing-your-device)).
//!
//! Every device keeps statistics of the requests it serves, and can trace
//! them into a file ([`stats`]; [`Device::statistics`]).
//! The `control_socket` module (cargo feature `control-socket`) serves
//! them, with traces, faults and detach, on the daemon's control socket,
//! where `biusctl stats` and its other commands ask.
//!
//! Sizes as people write them (`64M`, `4GiB`, `100MB`) are read and
//! printed by [`size`], the one size convention of the project.
//!
//! Errors are typed: a request fails with an [`IoError`], which becomes the
//! errno the kernel sees; the control path fails with an [`Error`].
//!
//! # Testing your device
//!
//! The `loopback` module (cargo feature `loopback`, off by default: no
//! part of serving a device) plays the kernel in process: a test starts
//! its device on a `loopback::Loopback` made from the same
//! [`DeviceBuilder`], sends it requests and checks the answers, with no
//! kernel module and no root.  The device is served by the very workers
//! that serve `/dev/bius`; the zones of a zoned device are read first, as
//! the kernel does.  Enable the feature for the tests only:
//!
//! ```toml
//! [dev-dependencies]
//! bius = { version = "0.1", features = ["loopback"] }
//! ```
//!
//! A test of a device (here the `Memory` above; in `tests/`, or in a
//! `#[cfg(test)]` module, under `#[test]`):
//!
//! ```
//! # use std::sync::RwLock;
//! # use bius::{BlockDevice, IoError};
//! # struct Memory(RwLock<Vec<u8>>);
//! # impl BlockDevice for Memory {
//! #     fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
//! #         buf.copy_from_slice(&self.0.read().unwrap()[offset as usize..][..buf.len()]);
//! #         Ok(())
//! #     }
//! #     fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
//! #         self.0.write().unwrap()[offset as usize..][..data.len()].copy_from_slice(data);
//! #         Ok(())
//! #     }
//! # }
//! use bius::loopback::{Loopback, Submission};
//! use bius::{Command, DeviceBuilder, Reply};
//!
//! fn reads_back_what_it_wrote_on_every_queue() {
//!     let builder = DeviceBuilder::new(1 << 20).queues(2);
//!     let mut kernel = Loopback::new(&builder).unwrap();
//!     kernel.start(Memory(RwLock::new(vec![0; 1 << 20]))).unwrap();
//!     let write = Submission::write(4096, vec![7; 8192]);
//!     assert_eq!(kernel.run(0, write), Ok(Reply::Done));
//!     assert_eq!(kernel.read(1, 4096, 8192), Ok(vec![7; 8192]));
//!     // A request past the end never reaches the device.
//!     assert_eq!(kernel.read(1, 1 << 20, 512), Err(IoError::Io));
//!     // Many requests in flight: submit, then wait.
//!     let reads: Vec<_> = (0..8)
//!         .map(|i| kernel.submit(i % 2, Command::Read { offset: 4096, len: 512 }).unwrap())
//!         .collect();
//!     for read in reads {
//!         assert_eq!(read.wait_data(), Ok(vec![7; 512]));
//!     }
//!     kernel.stop().unwrap();
//! }
//! # reads_back_what_it_wrote_on_every_queue();
//! ```
//!
//! A [`DeferredDevice`] starts with `Loopback::start_deferred`; the
//! builder's [`TransferMode`], `Loopback::segments` and
//! `Loopback::read_limit` make the loopback pass data as the kernel does
//! in each of its ways, and `Loopback::statistics` gives the statistics.  The
//! examples of `crates/bius/examples/` each end with such tests.  The
//! loopback sends only what the kernel would: a request no kernel sends
//! the device is refused with `SubmitError::NotSent`, which names the rule.
//!
//! # Logging
//!
//! The crate logs through the [`log`](https://docs.rs/log) facade: what
//! went wrong in a queue, a refused completion, a device lost or
//! recovered.  Nothing is printed unless the program installs a logger
//! (`env_logger::init()`, then `RUST_LOG=bius=info`).  What makes a call
//! fail is in its error as well, never only in the log.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod abi;
mod block;
mod control;
#[cfg(feature = "control-socket")]
#[cfg_attr(docsrs, doc(cfg(feature = "control-socket")))]
pub mod control_socket;
pub mod deferred;
mod error;
#[allow(unsafe_code)]
mod kernel;
mod latency;
pub mod limits;
#[cfg(feature = "loopback")]
#[cfg_attr(docsrs, doc(cfg(feature = "loopback")))]
pub mod loopback;
mod model;
mod op;
mod request;
pub mod size;
pub mod stats;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod tokio;
mod transport;
mod worker;
pub mod zone;

pub use block::{write_zeroes_by_writing, BlockDevice, Capabilities};
pub use control::{
    destroy_device, destroy_device_force, device_info, list_devices, Detacher, Device,
    DeviceBuilder, DeviceInfo, DeviceState, IoFlusherScope, Scheduling, TransferMode, ZonedParams,
};
pub use deferred::{DeferredDevice, Io};
pub use error::{ControlOp, Errno, Error, IoError, OtherErrno, Parameter};
pub use latency::{Latency, LatencyError};
pub use model::DeviceModel;
pub use op::Op;
pub use request::{Command, Reply, Request};
pub use stats::Statistics;

/// This crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version of the kernel ABI this crate speaks (`BIUS_ABI_VERSION`):
/// a loaded module of another ABI refuses its devices.
pub const ABI_VERSION: u32 = bius_sys::BIUS_ABI_VERSION;

/// The Rust examples of the project's README, compiled as doc tests so that
/// they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The Rust blocks of the book's "Writing a device" pages, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/dev/writing.md")]
pub struct BookWritingDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/dev/testing.md")]
pub struct BookTestingDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/dev/deferred.md")]
pub struct BookDeferredDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/dev/zoned.md")]
pub struct BookZonedDoctests;
