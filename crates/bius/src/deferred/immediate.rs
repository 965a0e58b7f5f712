//! [`Immediate`]: a synchronous [`BlockDevice`] as a [`DeferredDevice`].

use super::{DeferredDevice, Io};
use crate::block::{BlockDevice, Capabilities};
use crate::worker::serve::replayed;
use crate::zone::ZoneGeometry;

/// A synchronous [`BlockDevice`] served as a [`DeferredDevice`]: each
/// request is served as it is submitted, on the queue's worker thread, and
/// completed with the device's answer.
///
/// It is how a wrapper written for deferred devices wraps a synchronous
/// one (a [`DeferredZoned`](crate::zone::DeferredZoned) over a RAM disk, a
/// cache in front of a file), and how the framework serves a synchronous
/// device with a [`latency`](crate::DeviceBuilder::latency) or a
/// [`model`](crate::DeviceBuilder::model).  The device keeps its
/// capabilities and zones; a zoned device's write sent again after a
/// recovery is judged by its zone report, as the framework judges it for
/// a `BlockDevice` served directly.  A panic in the device fails the
/// request with `EIO`, as for any deferred device.
///
/// ```
/// use bius::deferred::Immediate;
/// use bius::loopback::{Loopback, Submission};
/// use bius::{BlockDevice, DeviceBuilder, IoError, Reply};
///
/// struct Sink;
///
/// impl BlockDevice for Sink {
///     fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
///         buf.fill(7);
///         Ok(())
///     }
///     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
///         Ok(())
///     }
/// }
///
/// let mut kernel = Loopback::new(&DeviceBuilder::new(1 << 20)).unwrap();
/// kernel.start_deferred(Immediate::new(Sink)).unwrap();
/// assert_eq!(kernel.run(0, Submission::write(0, vec![1; 512])), Ok(Reply::Done));
/// assert_eq!(kernel.read(0, 0, 512), Ok(vec![7; 512]));
/// kernel.stop().unwrap();
/// ```
#[derive(Debug)]
pub struct Immediate<D> {
    device: D,
    /// The device is zoned: its replayed writes are judged.
    zoned: bool,
}

impl<D: BlockDevice> Immediate<D> {
    /// `device`, served as it is submitted.
    pub fn new(device: D) -> Self {
        let zoned = device.zones().is_some();
        Immediate { device, zoned }
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }
}

impl<D: BlockDevice> DeferredDevice for Immediate<D> {
    fn capabilities(&self) -> Capabilities {
        self.device.capabilities()
    }

    fn zones(&self) -> Option<ZoneGeometry> {
        self.device.zones()
    }

    fn submit(&self, mut io: Io) {
        let replayed = (self.zoned && io.is_replay())
            .then(|| replayed(&self.device, io.command()))
            .flatten();
        let result = replayed.unwrap_or_else(|| self.device.handle(io.request()));
        io.complete(result);
    }
}
