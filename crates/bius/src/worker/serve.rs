//! How a worker calls its device: [`Served`], a synchronous device with its
//! zones, the judgement of replayed writes, the checks of a zoned device's
//! replies, and [`guarded`], the panic guard of every call a worker makes
//! to user code.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::block::BlockDevice;
use crate::error::IoError;
use crate::request::{Command, Reply, Request};
use crate::zone::layout::ZoneLayout;
use crate::zone::replay_applied;

/// Whose code a worker calls: the device's or its model's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Callee {
    /// The device ([`BlockDevice`] or
    /// [`DeferredDevice`](crate::DeferredDevice)).
    Device,
    /// The [`DeviceModel`](crate::DeviceModel).
    Model,
}

impl fmt::Display for Callee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Callee::Device => "device",
            Callee::Model => "device model",
        })
    }
}

/// Runs `call`, user code of `callee` for request `id` of queue `queue`:
/// a panic in it is caught, logged, and gives `EIO`, with which the
/// caller fails the request (a model's panic too, although its device has
/// served it); the queue serves on.  Every call a worker
/// makes to a device or a model for a request goes through here.
pub(crate) fn guarded<T>(
    callee: Callee,
    queue: u32,
    id: u64,
    call: impl FnOnce() -> Result<T, IoError>,
) -> Result<T, IoError> {
    catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|_| {
        log::error!("queue {queue}: the {callee} panicked on request {id:#x}; failing it with EIO");
        Err(IoError::Io)
    })
}

/// A synchronous device as its workers serve it, with the zones the
/// kernel knows if it is zoned: a conventional device sees no zone
/// request (`EOPNOTSUPP`); on a zoned one, a report or an append offset
/// the driver would refuse fails with `EIO` instead (logged), and an
/// append to a device whose appends the kernel emulates (which the driver
/// refuses before it gets here) with `EOPNOTSUPP`, unseen by the device.
pub(crate) struct Served<D> {
    pub(crate) device: D,
    pub(crate) layout: Option<ZoneLayout>,
}

impl<D: BlockDevice> Served<D> {
    /// Serves a request.
    pub(crate) fn serve(&self, request: Request<'_>) -> Result<Reply, IoError> {
        let Some(layout) = &self.layout else {
            if request.op().is_zone() {
                return Err(IoError::Unsupported);
            }
            return self.device.handle(request);
        };
        if layout.append_emulated() && matches!(request, Request::ZoneAppend { .. }) {
            return Err(IoError::Unsupported);
        }
        let asked = match request.command() {
            Command::ReportZones { offset, .. } => Some((offset, None)),
            Command::ZoneAppend { offset, len, .. } => Some((offset, Some(len))),
            _ => None,
        };
        let reply = self.device.handle(request)?;
        match asked {
            Some((offset, len)) => check_zone_reply(layout, offset, len, reply),
            None => Ok(reply),
        }
    }

    /// The outcome of `command`, sent again after a recovery
    /// (`BIUS_REQ_REPLAY`), if it must not be served again (see
    /// [`replayed`]); `None`: serve it.  Only a zoned device cares.
    pub(crate) fn replayed(&self, command: Command) -> Option<Result<Reply, IoError>> {
        self.layout.as_ref()?;
        replayed(&self.device, command)
    }
}

/// The outcome of `command`, sent again to the zoned `device` after a
/// recovery (`BIUS_REQ_REPLAY`), if it must not be served again; `None`:
/// serve it.  A replayed append fails with `EIO`; a replayed write is
/// judged by its zone as the device reports it (see
/// [`ZoneSet::write_replayed`]).
///
/// [`ZoneSet::write_replayed`]: crate::zone::ZoneSet::write_replayed
pub(crate) fn replayed<D: BlockDevice + ?Sized>(
    device: &D,
    command: Command,
) -> Option<Result<Reply, IoError>> {
    let (offset, len) = match command {
        Command::ZoneAppend { .. } => return Some(Err(IoError::Io)),
        Command::Write { offset, len, .. } => (offset, len),
        _ => return None,
    };
    let zone = match device.report_zones(offset, 1) {
        Ok(zones) => *zones.first()?,
        Err(err) => return Some(Err(err)),
    };
    match replay_applied(&zone, offset, len) {
        Ok(true) => Some(Ok(Reply::Done)),
        Ok(false) => None,
        Err(err) => Some(Err(err.into())),
    }
}

/// `reply` if the driver accepts it as the answer to a report of the zones
/// from byte `offset` (`len` `None`) or to an append of `len` bytes to the
/// zone at `offset`; else `EIO` (logged).
pub(crate) fn check_zone_reply(
    layout: &ZoneLayout,
    offset: u64,
    len: Option<u64>,
    reply: Reply,
) -> Result<Reply, IoError> {
    let problem = match (&reply, len) {
        (Reply::Zones(zones), None) => layout
            .report_problem(offset, zones)
            .map(|(index, why)| format!("reported zone {index} wrongly: {why}")),
        (Reply::Appended(at), Some(len)) if !layout.append_ok(offset, len, *at) => Some(format!(
            "appended {len} bytes to the zone at byte {offset} at byte {at}"
        )),
        _ => None,
    };
    match problem {
        Some(problem) => {
            log::error!("the zoned device {problem}; failing the request with EIO");
            Err(IoError::Io)
        }
        None => Ok(reply),
    }
}
