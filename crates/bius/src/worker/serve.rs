//! How a worker calls its device: the [`Serve`] adaptors of conventional
//! and zoned devices, the checks of a zoned device's replies, and
//! [`guarded`], the panic guard of every call a worker makes to user code.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::abi::SECTOR_SIZE;
use crate::block::BlockDevice;
use crate::deferred::{IoCommand, IoRequest};
use crate::error::IoError;
use crate::zone::layout::ZoneLayout;
use crate::zone::request::{ZoneReply, ZoneRequest};
use crate::zone::{replay_applied, ZonedDevice};

/// Whose code a worker calls: the device's or its model's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Callee {
    /// The device ([`BlockDevice`], [`ZonedDevice`] or
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
/// a panic in it is caught, logged, and fails the request with `EIO`; the
/// queue serves on.  Every call a worker makes to a device or a model for
/// a request goes through here.
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

/// How a worker calls its device: block requests through
/// [`BlockDevice::handle`], zone requests through
/// [`ZonedDevice::handle_zone`] or, on a conventional device, not at all.
/// A block request's success is [`ZoneReply::Done`].
pub(crate) trait Serve: Send + Sync + 'static {
    /// Serves a request.
    fn serve(&self, request: IoRequest<'_>) -> Result<ZoneReply, IoError>;

    /// The outcome of `command`, sent again after a recovery
    /// (`BIUS_REQ_REPLAY`), if it must not be served again; `None`: serve
    /// it.  Only a zoned device's writes and appends care.
    fn replayed(&self, _command: IoCommand) -> Option<Result<ZoneReply, IoError>> {
        None
    }
}

/// A conventional device: zone requests fail with `EOPNOTSUPP`.
pub(crate) struct Conventional<D>(pub(crate) D);

impl<D: BlockDevice> Serve for Conventional<D> {
    fn serve(&self, request: IoRequest<'_>) -> Result<ZoneReply, IoError> {
        match request {
            IoRequest::Block(request) => self.0.handle(request).map(|()| ZoneReply::Done),
            IoRequest::Zone(_) => Err(IoError::Unsupported),
        }
    }
}

/// A zoned device, with the zones the kernel knows: a report or an append
/// sector the driver would refuse fails with `EIO` instead (logged), and
/// an append to a device whose appends the kernel emulates (which the
/// driver refuses before it gets here) with `EOPNOTSUPP`, unseen by the
/// device.
pub(crate) struct Zoned<D> {
    pub(crate) device: D,
    pub(crate) layout: ZoneLayout,
}

impl<D: ZonedDevice> Serve for Zoned<D> {
    fn serve(&self, request: IoRequest<'_>) -> Result<ZoneReply, IoError> {
        let request = match request {
            IoRequest::Block(request) => {
                return self.device.handle(request).map(|()| ZoneReply::Done)
            }
            IoRequest::Zone(request) => request,
        };
        if self.layout.append_emulated() && matches!(request, ZoneRequest::Append { .. }) {
            return Err(IoError::Unsupported);
        }
        let asked = match &request {
            ZoneRequest::ReportZones { offset, .. } => Some((*offset, None)),
            ZoneRequest::Append { offset, data, .. } => Some((*offset, Some(data.len() as u64))),
            _ => None,
        };
        let reply = self.device.handle_zone(request)?;
        match asked {
            Some((offset, len)) => check_zone_reply(&self.layout, offset, len, reply),
            None => Ok(reply),
        }
    }

    /// A replayed append fails with `EIO`; a replayed write is judged by
    /// its zone as the device reports it (see [`ZoneSet::write_replayed`]).
    ///
    /// [`ZoneSet::write_replayed`]: crate::zone::ZoneSet::write_replayed
    fn replayed(&self, command: IoCommand) -> Option<Result<ZoneReply, IoError>> {
        let (offset, len) = match command {
            IoCommand::ZoneAppend { .. } => return Some(Err(IoError::Io)),
            IoCommand::Write { offset, len, .. } => (offset, len as u64),
            _ => return None,
        };
        let zone = match self.device.report_zones(offset, 1) {
            Ok(zones) => *zones.first()?,
            Err(err) => return Some(Err(err)),
        };
        match replay_applied(&zone, offset / SECTOR_SIZE, len / SECTOR_SIZE) {
            Ok(true) => Some(Ok(ZoneReply::Done)),
            Ok(false) => None,
            Err(err) => Some(Err(err.into())),
        }
    }
}

/// `reply` if the driver accepts it as the answer to a report of the zones
/// from byte `offset` (`len` `None`) or to an append of `len` bytes to the
/// zone at `offset`; else `EIO` (logged).
pub(crate) fn check_zone_reply(
    layout: &ZoneLayout,
    offset: u64,
    len: Option<u64>,
    reply: ZoneReply,
) -> Result<ZoneReply, IoError> {
    let problem = match (&reply, len) {
        (ZoneReply::Zones(zones), None) => layout
            .report_problem(offset / SECTOR_SIZE, zones)
            .map(|(index, why)| format!("reported zone {index} wrongly: {why}")),
        (ZoneReply::Appended(sector), Some(len))
            if !layout.append_ok(offset / SECTOR_SIZE, len, *sector) =>
        {
            Some(format!(
                "appended {len} bytes to the zone at byte {offset} at sector {sector}"
            ))
        }
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
