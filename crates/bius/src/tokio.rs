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

use std::future::Future;
use std::sync::Arc;

use ::tokio::runtime::Handle;

use crate::block::Capabilities;
use crate::deferred::{DeferredDevice, Io};
use crate::error::IoError;
use crate::request::Request;

/// A block device with `async` methods, for [`TokioDevice`].
///
/// As for [`BlockDevice`](crate::BlockDevice), every method takes `&self`:
/// many requests are served at once.  A method that panics fails its
/// request with `EIO`.  The futures must be `Send`: tasks move between the
/// runtime's threads.
pub trait AsyncBlockDevice: Send + Sync + 'static {
    /// What the device supports; called once, when it is created.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
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

    /// Makes a range read as zeroes.  The default refuses with
    /// [`IoError::Unsupported`] (announce
    /// [`Capabilities::write_zeroes`] only with an implementation).
    fn write_zeroes(
        &self,
        offset: u64,
        len: u64,
        unmap: bool,
    ) -> impl Future<Output = Result<(), IoError>> + Send {
        let _ = (offset, len, unmap);
        async { Err(IoError::Unsupported) }
    }
}

/// Serves an [`AsyncBlockDevice`] on a tokio runtime: a [`DeferredDevice`]
/// that spawns each request as a task.  Zone requests fail with
/// `EOPNOTSUPP` (a zoned device implements [`DeferredDevice`] itself).
///
/// If the runtime shuts down with requests in flight, their tasks are
/// dropped and the requests fail with `EIO`.
pub struct TokioDevice<D> {
    device: Arc<D>,
    runtime: Handle,
}

impl<D: AsyncBlockDevice> TokioDevice<D> {
    /// `device`, served by tasks spawned on `runtime`.
    pub fn new(device: D, runtime: Handle) -> Self {
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

    fn submit(&self, io: Io) {
        self.runtime.spawn(serve(Arc::clone(&self.device), io));
    }
}

/// One request's task.
async fn serve<D: AsyncBlockDevice>(device: Arc<D>, mut io: Io) {
    let result = match io.request() {
        Request::Read { offset, buf } => device.read(offset, buf).await,
        Request::Write { offset, data, fua } => device.write(offset, data, fua).await,
        Request::Flush => device.flush().await,
        Request::Discard { offset, len } => device.discard(offset, len).await,
        Request::WriteZeroes { offset, len, unmap } => {
            device.write_zeroes(offset, len, unmap).await
        }
        _ => Err(IoError::Unsupported),
    };
    io.complete_done(result);
}
