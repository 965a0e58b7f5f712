//! [`ZoneRequest`] and [`ZoneReply`]: the zone operations of a zoned
//! device as one request type, like [`Request`](crate::Request) for block
//! operations.

use std::fmt;

use super::Zone;

/// One zone request, with byte offsets: what
/// [`ZonedDevice::handle_zone`](super::ZonedDevice::handle_zone) serves.
///
/// Zone requests are kept out of [`Request`](crate::Request) on purpose:
/// a conventional [`BlockDevice`](crate::BlockDevice) never sees them (the
/// worker answers them with `EOPNOTSUPP` itself), and they complete with
/// results that block requests do not have (a [`ZoneReply`]).
///
/// New kinds of zone requests may be added in later versions; a device
/// that overrides `handle_zone` should answer unknown ones with
/// [`IoError::Unsupported`](crate::IoError::Unsupported).
#[non_exhaustive]
pub enum ZoneRequest<'a> {
    /// Report up to `max_zones` (at least 1) zones, from the one
    /// containing byte `offset` on; none past the last zone.
    ReportZones {
        /// Byte offset inside the first zone to report.
        offset: u64,
        /// Most zones the reply may hold.
        max_zones: usize,
    },
    /// Open the zone starting at `offset` explicitly.
    Open {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Close the zone starting at `offset`.
    Close {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Finish the zone starting at `offset`.
    Finish {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Reset the zone starting at `offset`.
    Reset {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Reset every sequential zone.
    ResetAll,
    /// Write `data` at the write pointer of the zone starting at `offset`.
    Append {
        /// Byte offset of the zone start.
        offset: u64,
        /// The data; its length is the request length.
        data: &'a [u8],
        /// Forced unit access: the data must be durable on completion.
        fua: bool,
    },
}

impl fmt::Debug for ZoneRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, offset) = match self {
            ZoneRequest::Open { offset } => ("Open", offset),
            ZoneRequest::Close { offset } => ("Close", offset),
            ZoneRequest::Finish { offset } => ("Finish", offset),
            ZoneRequest::Reset { offset } => ("Reset", offset),
            ZoneRequest::ReportZones { offset, max_zones } => {
                return f
                    .debug_struct("ReportZones")
                    .field("offset", offset)
                    .field("max_zones", max_zones)
                    .finish()
            }
            ZoneRequest::ResetAll => return f.write_str("ResetAll"),
            ZoneRequest::Append { offset, data, fua } => {
                return f
                    .debug_struct("Append")
                    .field("offset", offset)
                    .field("len", &data.len())
                    .field("fua", fua)
                    .finish()
            }
        };
        f.debug_struct(name).field("offset", offset).finish()
    }
}

/// What a successful [`ZoneRequest`] completes with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZoneReply {
    /// An open, close, finish, reset or reset-all is done.
    Done,
    /// The zones of a [`ZoneRequest::ReportZones`], in order.
    Zones(Vec<Zone>),
    /// The first sector a [`ZoneRequest::Append`]'s data landed at.
    Appended(u64),
}
