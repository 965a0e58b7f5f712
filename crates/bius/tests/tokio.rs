//! Async devices served on tokio through the loopback kernel: the defaults
//! they share with synchronous devices, and zones, their own or a
//! `DeferredZoned`'s.
#![cfg(all(feature = "loopback", feature = "tokio"))]

use bius::loopback::{Loopback, Submission};
use bius::tokio::{AsyncBlockDevice, TokioDevice};
use bius::zone::{DeferredZoned, Zone, ZoneGeometry, Zoned, FILL_PATTERN};
use bius::{BlockDevice, Capabilities, Command, DeviceBuilder, IoError, Reply};

const SIZE: u64 = 1 << 20;

mod memory;
use memory::Memory;

/// The memory, async.
impl AsyncBlockDevice for Memory {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write_zeroes: true,
            ..Capabilities::default()
        }
    }

    async fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        BlockDevice::read(self, offset, buf)
    }

    async fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        BlockDevice::write(self, offset, data, fua)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

fn geometry() -> ZoneGeometry {
    ZoneGeometry::new(SIZE, 256 << 10).unwrap()
}

#[test]
fn the_default_write_zeroes_writes_zeroes_as_a_block_devices_does() {
    let runtime = runtime();
    let mut kernel = Loopback::new(&DeviceBuilder::new(SIZE)).unwrap();
    let device = TokioDevice::new(Memory::new(SIZE, 0xee), runtime.handle().clone());
    kernel.start_deferred(device).unwrap();
    let zero = Command::WriteZeroes {
        offset: 4096,
        len: 100 << 10,
        unmap: true,
    };
    assert_eq!(kernel.run(0, zero), Ok(Reply::Done));
    let data = kernel.read(0, 0, 108 << 10).unwrap();
    assert!(data[..4096].iter().all(|&b| b == 0xee));
    assert!(data[4096..(104 << 10)].iter().all(|&b| b == 0));
    assert!(data[(104 << 10)..].iter().all(|&b| b == 0xee));
    kernel.stop().unwrap();
}

/// An async zoned device: the zones of a synchronous [`Zoned`] device,
/// answered from async methods.
struct AsyncZoned(Zoned<Memory>);

impl AsyncBlockDevice for AsyncZoned {
    fn zones(&self) -> Option<ZoneGeometry> {
        self.0.zones()
    }

    async fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        BlockDevice::read(&self.0, offset, buf)
    }

    async fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        BlockDevice::write(&self.0, offset, data, fua)
    }

    async fn report_zones(&self, offset: u64, max_zones: usize) -> Result<Vec<Zone>, IoError> {
        self.0.report_zones(offset, max_zones)
    }

    async fn zone_append(&self, offset: u64, data: &[u8], fua: bool) -> Result<u64, IoError> {
        self.0.zone_append(offset, data, fua)
    }
}

#[test]
fn an_async_device_with_zones_is_served_zoned() {
    let runtime = runtime();
    let device = AsyncZoned(Zoned::new(Memory::new(SIZE, 0xee), geometry()));
    let device = TokioDevice::new(device, runtime.handle().clone());
    let mut kernel = Loopback::new(&DeviceBuilder::default()).unwrap();
    kernel.start_deferred(device).unwrap();
    assert_eq!(
        kernel.zone_append(0, 256 << 10, vec![1; 4096]),
        Ok(256 << 10)
    );
    assert_eq!(kernel.report_zones(0, 0, 8).unwrap().len(), 4);
    // What it does not implement, the defaults refuse.
    assert_eq!(
        kernel.run(0, Command::ZoneOpen { offset: 0 }),
        Err(IoError::Unsupported)
    );
    kernel.stop().unwrap();
}

#[test]
fn deferred_zoned_zones_an_async_device() {
    let runtime = runtime();
    let device = TokioDevice::new(Memory::new(SIZE, 0xee), runtime.handle().clone());
    let mut kernel = Loopback::new(&DeviceBuilder::default()).unwrap();
    kernel
        .start_deferred(DeferredZoned::new(device, geometry()))
        .unwrap();
    let write = Submission::write(256 << 10, vec![2; 4096]);
    assert_eq!(kernel.run(0, write), Ok(Reply::Done));
    let data = kernel.read(0, 256 << 10, 8192).unwrap();
    assert_eq!(data[..4096], [2; 4096]);
    assert!(data[4096..].iter().all(|&b| b == FILL_PATTERN));
    kernel.stop().unwrap();
}

/// `#[tokio::test]`'s default runtime: one thread, which runs the tasks
/// only while it awaits.
fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A test on a current-thread runtime that blocks its thread on the
/// loopback would wait forever for the device's tasks: it panics, saying
/// why, instead.
#[test]
#[should_panic(expected = "would block the one thread of the current-thread tokio runtime")]
fn blocking_the_only_thread_of_the_serving_runtime_panics_with_a_message() {
    current_thread_runtime().block_on(async {
        let mut kernel = Loopback::new(&DeviceBuilder::new(SIZE)).unwrap();
        let device = TokioDevice::new(Memory::new(SIZE, 0), tokio::runtime::Handle::current());
        kernel.start_deferred(device).unwrap();
        let _ = kernel.read(0, 0, 512);
    });
}

/// The same runtime with the blocking call off its thread works.
#[test]
fn a_current_thread_runtime_serves_when_the_blocking_calls_are_elsewhere() {
    current_thread_runtime().block_on(async {
        let mut kernel = Loopback::new(&DeviceBuilder::new(SIZE)).unwrap();
        let device = TokioDevice::new(Memory::new(SIZE, 7), tokio::runtime::Handle::current());
        kernel.start_deferred(device).unwrap();
        let data = tokio::task::spawn_blocking(move || {
            let data = kernel.read(0, 0, 512);
            kernel.stop().unwrap();
            data
        })
        .await
        .unwrap();
        assert_eq!(data, Ok(vec![7; 512]));
    });
}
