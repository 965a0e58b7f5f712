//! [`DeviceModel`]: when the hardware a device emulates would answer each
//! request, for [`DeviceBuilder::model`](crate::DeviceBuilder::model).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::IoError;
use crate::latency::Latency;
use crate::request::{Command, Reply};

/// A timing model of the hardware a device emulates: it says when each
/// request would complete, and the device's workers hold the completion
/// until then (in `poll()`; no thread sleeps).
///
/// # When it is called
///
/// The framework calls [`served`](DeviceModel::served) once for every
/// request the device served, with the result the kernel will get: after
/// the device has answered it (a synchronous device's return, a deferred
/// device's [`Io::complete`](crate::Io::complete)) and before the
/// completion goes to the kernel, on the worker thread of the request's
/// queue.  Each queue calls it in the order its device's answers come:
/// for a synchronous device, the order the requests arrived, except that a
/// zone's open, close, finish or reset waits for the zone's writes before
/// it (and is priced after them).  The queues call it from their own
/// threads, so state the model keeps (busy flash dies, a write buffer, an
/// FTL) is behind a lock of its own.  [`completion`](DeviceModel::completion)
/// is called only by `served`'s default.
///
/// A request the framework refuses before the device sees it (malformed,
/// out of the device's limits, a zone request to a conventional device)
/// is not shown to the model and completes at once.  A request the device
/// refuses is: the model decides what the refusal costs.  A real drive
/// refuses an invalid command (a write off a zone's write pointer, into a
/// full zone, an open beyond its open-zone limit) as it parses it, before
/// any media access: a refusal costs the command's fixed overhead, no
/// media time, and leaves the modelled media as it was (the `bius-model`
/// models price them so).
///
/// The completion goes to the kernel at the latest of: when the device
/// answered, the model's time, the builder's
/// [`latency`](crate::DeviceBuilder::latency) after the arrival, and the
/// device's own [`Io::delay_until`](crate::Io::delay_until).
///
/// The data are the backend's business: a model only keeps time, and
/// learns the state it needs (a zone's write pointer, where an append
/// landed) from the results.  The `bius-model` crate has models of SSDs,
/// ZNS SSDs, SMR disks and NVM.
///
/// # Writing one
///
/// A model that charges the same whatever the device answers implements
/// [`completion`](DeviceModel::completion):
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
/// One that prices a request by its result implements
/// [`served`](DeviceModel::served):
///
/// ```
/// use std::sync::Mutex;
/// use std::time::{Duration, Instant};
///
/// use bius::{Command, DeviceModel, IoError, Reply};
///
/// /// One zone's worth of flash: a write programs for 1 ms, once the
/// /// previous program is done; a refused one costs 10 µs of firmware.
/// #[derive(Default)]
/// struct OneDie {
///     busy_until: Mutex<Option<Instant>>,
/// }
///
/// impl DeviceModel for OneDie {
///     fn served(
///         &self,
///         command: Command,
///         arrived: Instant,
///         result: &Result<Reply, IoError>,
///     ) -> Option<Instant> {
///         if result.is_err() {
///             return Some(arrived + Duration::from_micros(10));
///         }
///         if !matches!(command, Command::Write { .. } | Command::ZoneAppend { .. }) {
///             return None;
///         }
///         let mut busy_until = self.busy_until.lock().unwrap();
///         let start = busy_until.map_or(arrived, |busy| busy.max(arrived));
///         *busy_until = Some(start + Duration::from_millis(1));
///         *busy_until
///     }
/// }
///
/// let model = OneDie::default();
/// let now = Instant::now();
/// let write = Command::Write { offset: 0, len: 4096, fua: false };
/// let refused = model.served(write, now, &Err(IoError::Io));
/// assert_eq!(refused, Some(now + Duration::from_micros(10)));
/// // The refusal left the die free.
/// assert_eq!(model.served(write, now, &Ok(Reply::Done)), Some(now + Duration::from_millis(1)));
/// ```
///
/// # Panics
///
/// A panic in the model is caught on the queue's worker thread and
/// logged: the request fails with `EIO` (the device has served it: a
/// failed write's data may or may not be stored, as on any disk), untimed
/// by the model, and the queue serves on, asking the model about the
/// requests after it as before.  A lock the panic poisoned stays
/// poisoned: calls that unwrap it panic in turn, each failing its
/// request.
pub trait DeviceModel: Send + Sync + 'static {
    /// When `command`, arriving at `arrived`, completes, whatever the
    /// device answered; `None` (or a time already past) for as soon as
    /// the device has served it.  What [`served`](DeviceModel::served)
    /// asks by default; by default `None`.
    fn completion(&self, command: Command, arrived: Instant) -> Option<Instant> {
        let _ = (command, arrived);
        None
    }

    /// When `command`, arriving at `arrived`, completes, now that the
    /// device has served it with `result`: a zone append's
    /// [`Reply::Appended`] says where its data landed, `Ok` of a zone
    /// reset or finish that the zone is now empty or full, an error that
    /// the device refused the request (its errno:
    /// [`IoError::errno`]).  `None` (or a time already past) for as soon
    /// as the device has served it.  The one method the framework calls
    /// (see [When it is called](DeviceModel#when-it-is-called)); by
    /// default [`completion`](DeviceModel::completion), the result
    /// unheeded.
    fn served(
        &self,
        command: Command,
        arrived: Instant,
        result: &Result<Reply, IoError>,
    ) -> Option<Instant> {
        let _ = result;
        self.completion(command, arrived)
    }
}

impl<M: DeviceModel + ?Sized> DeviceModel for Arc<M> {
    fn completion(&self, command: Command, arrived: Instant) -> Option<Instant> {
        (**self).completion(command, arrived)
    }

    fn served(
        &self,
        command: Command,
        arrived: Instant,
        result: &Result<Reply, IoError>,
    ) -> Option<Instant> {
        (**self).served(command, arrived, result)
    }
}

/// When a device's requests complete at the earliest: the builder's added
/// latency and its model, the later of the two counting; and how early
/// its workers may wake to poll for a completion about to be due.
#[derive(Clone, Default)]
pub(crate) struct Timing {
    pub(crate) latency: Option<Latency>,
    pub(crate) model: Option<Arc<dyn DeviceModel>>,
    /// The most a worker wakes before a due time and polls until it: the
    /// builder's [`poll_time`](crate::DeviceBuilder::poll_time).
    pub(crate) spin: Duration,
}

impl Timing {
    /// Whether requests complete as soon as they are served.
    pub(crate) fn is_immediate(&self) -> bool {
        self.latency.is_none() && self.model.is_none()
    }

    /// When `command`, arriving at `arrived`, completes at the earliest by
    /// the added latency (known on arrival).
    pub(crate) fn delayed(&self, command: Command, arrived: Instant) -> Option<Instant> {
        let delay = self.latency?.of(command)?;
        Some(arrived + delay)
    }

    /// When `command`, arriving at `arrived` and served with `result`,
    /// completes at the earliest by the model (user code: the caller
    /// guards it against panics).
    pub(crate) fn modelled(
        &self,
        command: Command,
        arrived: Instant,
        result: &Result<Reply, IoError>,
    ) -> Option<Instant> {
        self.model.as_ref()?.served(command, arrived, result)
    }
}

impl fmt::Debug for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timing")
            .field("latency", &self.latency)
            .field("model", &self.model.as_ref().map(|_| "DeviceModel"))
            .field("spin", &self.spin)
            .finish()
    }
}
