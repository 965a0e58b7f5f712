//! Async block devices on tokio (the `tokio` cargo feature):
//! [`AsyncBlockDevice`], served by [`TokioDevice`] with one task per
//! request.
//!
//! The framework's core knows no executor: a [`DeferredDevice`] receives
//! each request as an [`Io`] and completes it from any thread.
//! [`TokioDevice`] is such a device: it spawns each request as a task on
//! the runtime it is given, where the [`AsyncBlockDevice`]'s `async`
//! methods run, so up to the queue depth of requests per queue wait at
//! once (on timers, sockets, other tasks) without a thread each.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use bius::tokio::{AsyncBlockDevice, TokioDevice};
//! use bius::{DeviceBuilder, IoError};
//!
//! /// Zeroes, 80 µs after being asked: a flash read, modelled.
//! struct SlowZeroes;
//!
//! impl AsyncBlockDevice for SlowZeroes {
//!     async fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
//!         tokio::time::sleep(Duration::from_micros(80)).await;
//!         buf.fill(0);
//!         Ok(())
//!     }
//!
//!     async fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
//!         Ok(())
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), bius::Error> {
//!     let device = TokioDevice::new(SlowZeroes, tokio::runtime::Handle::current());
//!     let disk = DeviceBuilder::new(1 << 30).queue_depth(64).create_deferred(device)?;
//!     // (run_until_signal blocks: off the runtime's threads)
//!     tokio::task::spawn_blocking(move || disk.run_until_signal()).await.unwrap()
//! }
//! ```

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;

use ::tokio::runtime::{Handle, RuntimeFlavor};

use crate::block::{zero_chunks, Capabilities};
use crate::deferred::{DeferredDevice, Io};
use crate::error::IoError;
use crate::request::{Reply, Request};
use crate::zone::{Zone, ZoneGeometry};

/// A block device with `async` methods, for [`TokioDevice`]: the async
/// twin of [`BlockDevice`](crate::BlockDevice), with the same methods, the
/// same defaults and the same zones.
///
/// As for `BlockDevice`, every method takes `&self`: many requests are
/// served at once.  A method that panics fails its request with `EIO`.
/// The futures must be `Send`: tasks move between the runtime's threads.
/// A device whose [`zones`](AsyncBlockDevice::zones) returns a geometry is
/// zoned and serves the zone methods too (see
/// [Zoned devices](crate::BlockDevice#zoned-devices)); a conventional one
/// never sees a zone request.
pub trait AsyncBlockDevice: Send + Sync + 'static {
    /// What the device supports; called once, when it is created.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The zone geometry of a zoned device, `None` (the default) for a
    /// conventional one.  Called when the device is created.
    fn zones(&self) -> Option<ZoneGeometry> {
        None
    }

    /// Fills `buf` with the data at `offset`.
    fn read(&self, offset: u64, buf: &mut [u8])
        -> impl Future<Output = Result<(), IoError>> + Send;

    /// Stores `data` at `offset`; with `fua` durably before it returns.
    fn write(
        &self,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> impl Future<Output = Result<(), IoError>> + Send;

    /// Makes every completed write durable.  The default does nothing.
    fn flush(&self) -> impl Future<Output = Result<(), IoError>> + Send {
        async { Ok(()) }
    }

    /// Discards a range.  The default refuses with
    /// [`IoError::Unsupported`].
    fn discard(&self, offset: u64, len: u64) -> impl Future<Output = Result<(), IoError>> + Send {
        let _ = (offset, len);
        async { Err(IoError::Unsupported) }
    }

    /// Makes a range read as zeroes.  The default writes zero-filled chunks
    /// through [`AsyncBlockDevice::write`], as `BlockDevice`'s does.
    fn write_zeroes(
        &self,
        offset: u64,
        len: u64,
        unmap: bool,
    ) -> impl Future<Output = Result<(), IoError>> + Send {
        let _ = unmap;
        async move {
            for (pos, zeroes) in zero_chunks(offset, len)? {
                self.write(pos, zeroes, false).await?;
            }
            Ok(())
        }
    }

    /// Up to `max_zones` zones, from the one containing byte `offset` on.
    /// The default refuses with [`IoError::Unsupported`], as every zone
    /// method's does.
    fn report_zones(
        &self,
        offset: u64,
        max_zones: usize,
    ) -> impl Future<Output = Result<Vec<Zone>, IoError>> + Send {
        let _ = (offset, max_zones);
        async { Err(IoError::Unsupported) }
    }

    /// Opens the zone starting at byte `offset` explicitly.
    fn zone_open(&self, offset: u64) -> impl Future<Output = Result<(), IoError>> + Send {
        let _ = offset;
        async { Err(IoError::Unsupported) }
    }

    /// Closes the zone starting at byte `offset`.
    fn zone_close(&self, offset: u64) -> impl Future<Output = Result<(), IoError>> + Send {
        let _ = offset;
        async { Err(IoError::Unsupported) }
    }

    /// Finishes the zone starting at byte `offset`.
    fn zone_finish(&self, offset: u64) -> impl Future<Output = Result<(), IoError>> + Send {
        let _ = offset;
        async { Err(IoError::Unsupported) }
    }

    /// Resets the zone starting at byte `offset`.
    fn zone_reset(&self, offset: u64) -> impl Future<Output = Result<(), IoError>> + Send {
        let _ = offset;
        async { Err(IoError::Unsupported) }
    }

    /// Resets every sequential zone that is not empty, read-only or
    /// offline.
    fn zone_reset_all(&self) -> impl Future<Output = Result<(), IoError>> + Send {
        async { Err(IoError::Unsupported) }
    }

    /// Writes `data` at the write pointer of the zone starting at byte
    /// `offset` (with `fua` durably); the byte offset where it landed.
    fn zone_append(
        &self,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> impl Future<Output = Result<u64, IoError>> + Send {
        let _ = (offset, data, fua);
        async { Err(IoError::Unsupported) }
    }

    /// Serves one request by calling the method for its kind.  Override
    /// it only to see every request in one place.
    fn handle(&self, request: Request<'_>) -> impl Future<Output = Result<Reply, IoError>> + Send {
        async move {
            let done = |result: Result<(), IoError>| result.map(|()| Reply::Done);
            match request {
                Request::Read { offset, buf } => done(self.read(offset, buf).await),
                Request::Write { offset, data, fua } => done(self.write(offset, data, fua).await),
                Request::Flush => done(self.flush().await),
                Request::Discard { offset, len } => done(self.discard(offset, len).await),
                Request::WriteZeroes { offset, len, unmap } => {
                    done(self.write_zeroes(offset, len, unmap).await)
                }
                Request::ReportZones { offset, max_zones } => {
                    self.report_zones(offset, max_zones).await.map(Reply::Zones)
                }
                Request::ZoneOpen { offset } => done(self.zone_open(offset).await),
                Request::ZoneClose { offset } => done(self.zone_close(offset).await),
                Request::ZoneFinish { offset } => done(self.zone_finish(offset).await),
                Request::ZoneReset { offset } => done(self.zone_reset(offset).await),
                Request::ZoneResetAll => done(self.zone_reset_all().await),
                Request::ZoneAppend { offset, data, fua } => self
                    .zone_append(offset, data, fua)
                    .await
                    .map(Reply::Appended),
            }
        }
    }
}

/// Serves an [`AsyncBlockDevice`] on a tokio runtime: a [`DeferredDevice`]
/// that spawns each request as a task, with the device's capabilities and
/// zones.
///
/// If the runtime shuts down with requests in flight, their tasks are
/// dropped and the requests fail with `EIO`.
///
/// A current-thread runtime (`#[tokio::test]`'s default) runs its tasks
/// only while its one thread awaits: a call that blocks that thread
/// (`Loopback::run`, a ticket's `wait`, `DeviceBuilder::create_deferred`
/// waiting for a zoned disk's reports) would wait forever for requests
/// that can never be served.  Made on such a runtime's thread, with its
/// handle, the device makes those calls on that thread panic with a
/// message instead.  Use `#[tokio::test(flavor = "multi_thread")]`, or
/// make the blocking calls in `tokio::task::spawn_blocking`.
pub struct TokioDevice<D> {
    device: Arc<D>,
    runtime: Handle,
}

impl<D: AsyncBlockDevice> TokioDevice<D> {
    /// `device`, served by tasks spawned on `runtime`.
    pub fn new(device: D, runtime: Handle) -> Self {
        if runtime.runtime_flavor() == RuntimeFlavor::CurrentThread && in_current_thread_runtime() {
            SERVED_BY_THIS_THREAD.set(true);
        }
        TokioDevice {
            device: Arc::new(device),
            runtime,
        }
    }

    /// The device.
    pub fn device(&self) -> &Arc<D> {
        &self.device
    }
}

impl<D: AsyncBlockDevice> DeferredDevice for TokioDevice<D> {
    fn capabilities(&self) -> Capabilities {
        self.device.capabilities()
    }

    fn zones(&self) -> Option<ZoneGeometry> {
        self.device.zones()
    }

    fn submit(&self, io: Io) {
        self.runtime.spawn(serve(Arc::clone(&self.device), io));
    }
}

/// One request's task.
async fn serve<D: AsyncBlockDevice>(device: Arc<D>, mut io: Io) {
    let result = device.handle(io.request()).await;
    io.complete(result);
}

thread_local! {
    /// A [`TokioDevice`] was made on this thread with the handle of the
    /// current-thread runtime this thread drives.
    static SERVED_BY_THIS_THREAD: Cell<bool> = const { Cell::new(false) };
}

fn in_current_thread_runtime() -> bool {
    Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::CurrentThread)
}

/// Panics if `what`, about to block this thread, would deadlock: this
/// thread drives a current-thread runtime that serves a [`TokioDevice`].
pub(crate) fn check_blocking(what: &str) {
    if SERVED_BY_THIS_THREAD.get() && in_current_thread_runtime() {
        panic!(
            "{what} would block the one thread of the current-thread tokio runtime \
             that serves a TokioDevice (#[tokio::test]'s default), whose requests \
             could then never run: use #[tokio::test(flavor = \"multi_thread\")], \
             or call it in tokio::task::spawn_blocking"
        );
    }
}
