//! How a worker calls its device: the [`Serve`] adaptors of conventional
//! and zoned devices.

use crate::abi::SECTOR_SIZE;
use crate::block::{BlockDevice, Request};
use crate::error::IoError;
use crate::zone::layout::ZoneLayout;
use crate::zone::request::{ZoneReply, ZoneRequest};
use crate::zone::ZonedDevice;

/// How a worker calls its device: block requests through
/// [`BlockDevice::handle`], zone requests through
/// [`ZonedDevice::handle_zone`] or, on a conventional device, not at all.
pub(crate) trait Serve: Send + Sync + 'static {
    /// Serves a block request.
    fn block(&self, request: Request<'_>) -> Result<(), IoError>;
    /// Serves a zone request.
    fn zone(&self, request: ZoneRequest<'_>) -> Result<ZoneReply, IoError>;
}

/// A conventional device: zone requests fail with `EOPNOTSUPP`.
pub(crate) struct Conventional<D>(pub(crate) D);

impl<D: BlockDevice> Serve for Conventional<D> {
    fn block(&self, request: Request<'_>) -> Result<(), IoError> {
        self.0.handle(request)
    }
    fn zone(&self, _request: ZoneRequest<'_>) -> Result<ZoneReply, IoError> {
        Err(IoError::Unsupported)
    }
}

/// A zoned device, with the zones the kernel knows: a report or an append
/// sector the driver would refuse fails with `EIO` instead (logged).
pub(crate) struct Zoned<D> {
    pub(crate) device: D,
    pub(crate) layout: ZoneLayout,
}

impl<D: ZonedDevice> Serve for Zoned<D> {
    fn block(&self, request: Request<'_>) -> Result<(), IoError> {
        self.device.handle(request)
    }

    fn zone(&self, request: ZoneRequest<'_>) -> Result<ZoneReply, IoError> {
        let asked = match &request {
            ZoneRequest::ReportZones { offset, .. } => Some((*offset, None)),
            ZoneRequest::Append { offset, data, .. } => Some((*offset, Some(data.len() as u64))),
            _ => None,
        };
        let reply = self.device.handle_zone(request)?;
        let problem = match (&reply, asked) {
            (ZoneReply::Zones(zones), Some((offset, None))) => self
                .layout
                .report_problem(offset / SECTOR_SIZE, zones)
                .map(|(index, why)| format!("reported zone {index} wrongly: {why}")),
            (ZoneReply::Appended(sector), Some((offset, Some(len))))
                if !self.layout.append_ok(offset / SECTOR_SIZE, len, *sector) =>
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
}
