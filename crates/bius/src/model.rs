//! [`DeviceModel`]: when the hardware a device emulates would answer each
//! request, for [`DeviceBuilder::model`](crate::DeviceBuilder::model).

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use crate::latency::Latency;
use crate::request::Command;

/// A timing model of the hardware a device emulates: it says when each
/// request would complete, and the device's workers hold the completion
/// until then (in `poll()`; no thread sleeps).
///
/// It sees every request of every queue as it arrives, before the device
/// serves it, in arrival order per queue; the queues call it from their
/// own threads, so state it keeps (busy flash dies, a write buffer, an
/// FTL) is behind a lock of its own.  The data are the backend's business:
/// a model only keeps time.  The `bius-model` crate has models of SSDs,
/// ZNS SSDs, SMR disks and NVM; a model of one's own is a few lines:
///
/// ```
/// use std::sync::Mutex;
/// use std::time::{Duration, Instant};
///
/// use bius::{DeviceModel, Command};
///
/// /// One actuator: requests are served one at a time, 4 ms each.
/// struct OneAtATime(Mutex<Option<Instant>>);
///
/// impl DeviceModel for OneAtATime {
///     fn completion(&self, command: Command, arrived: Instant) -> Option<Instant> {
///         let mut busy_until = self.0.lock().unwrap();
///         let start = busy_until.map_or(arrived, |busy| busy.max(arrived));
///         let done = start + Duration::from_millis(4);
///         *busy_until = Some(done);
///         Some(done)
///     }
/// }
///
/// let builder = bius::DeviceBuilder::new(1 << 30).model(OneAtATime(Mutex::new(None)));
/// assert!(builder.get_model().is_some());
/// ```
///
/// A panic in [`completion`](DeviceModel::completion) is caught on the
/// queue's worker thread: the request it was timing fails with `EIO` (the
/// panic is logged) without reaching the device, and the queue serves on,
/// asking the model about the requests after it as before.  A lock the
/// panic poisoned stays poisoned: calls that unwrap it panic in turn, each
/// failing its request.
pub trait DeviceModel: Send + Sync + 'static {
    /// When `command`, arriving at `arrived`, completes; `None` (or a time
    /// already past) for as soon as the device has served it.
    fn completion(&self, command: Command, arrived: Instant) -> Option<Instant>;
}

impl<M: DeviceModel + ?Sized> DeviceModel for Arc<M> {
    fn completion(&self, command: Command, arrived: Instant) -> Option<Instant> {
        (**self).completion(command, arrived)
    }
}

/// When a device's requests complete at the earliest: the builder's added
/// latency and its model, the later of the two counting.
#[derive(Clone, Default)]
pub(crate) struct Timing {
    pub(crate) latency: Option<Latency>,
    pub(crate) model: Option<Arc<dyn DeviceModel>>,
}

impl Timing {
    /// Whether requests complete as soon as they are served.
    pub(crate) fn is_immediate(&self) -> bool {
        self.latency.is_none() && self.model.is_none()
    }

    /// When `command`, arriving now, completes at the earliest, if later
    /// than when it is served.
    pub(crate) fn due(&self, command: Command) -> Option<Instant> {
        if self.is_immediate() {
            return None;
        }
        let arrived = Instant::now();
        let added = self
            .latency
            .and_then(|latency| latency.of(command))
            .map(|delay| arrived + delay);
        let modelled = self
            .model
            .as_ref()
            .and_then(|model| model.completion(command, arrived));
        added.max(modelled)
    }
}

impl fmt::Debug for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timing")
            .field("latency", &self.latency)
            .field("model", &self.model.as_ref().map(|_| "DeviceModel"))
            .finish()
    }
}
