//! What a device is asked and what it answers: a [`Command`] (an operation
//! with its offsets and lengths), a [`Request`] (a command with its data),
//! and the [`Reply`] of a success.  Offsets and lengths are in bytes.

use std::fmt;

use crate::op::Op;
use crate::zone::Zone;

/// What a request asks for, without its data: an [`Op`] with its offsets
/// and lengths, all in bytes.  Each variant is the [`Request`] of the
/// same name, its data replaced by its length (`len`); the fields mean
/// what the request's do.
///
/// A [`DeferredDevice`](crate::DeferredDevice) reads it from
/// [`Io::command`](crate::Io::command), a
/// [`DeviceModel`](crate::DeviceModel) times it; [`Request`] is the same
/// with the data.  New kinds may be added in later versions: answer
/// unknown ones with [`IoError::Unsupported`](crate::IoError::Unsupported).
///
/// ```
/// use bius::{Command, Op};
///
/// let write = Command::Write { offset: 4096, len: 512, fua: false };
/// assert_eq!(write.op(), Op::Write);
/// assert_eq!(write.data_len(), 512);
/// assert_eq!(Command::Flush.data_len(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[allow(
    missing_docs,
    reason = "the fields are the Request's, documented there"
)]
pub enum Command {
    /// A [`Request::Read`] of `len` bytes.
    Read { offset: u64, len: u64 },
    /// A [`Request::Write`] of `len` bytes.
    Write { offset: u64, len: u64, fua: bool },
    /// A [`Request::Flush`].
    Flush,
    /// A [`Request::Discard`].
    Discard { offset: u64, len: u64 },
    /// A [`Request::WriteZeroes`].
    WriteZeroes { offset: u64, len: u64, unmap: bool },
    /// A [`Request::ReportZones`].
    ReportZones { offset: u64, max_zones: usize },
    /// A [`Request::ZoneOpen`].
    ZoneOpen { offset: u64 },
    /// A [`Request::ZoneClose`].
    ZoneClose { offset: u64 },
    /// A [`Request::ZoneFinish`].
    ZoneFinish { offset: u64 },
    /// A [`Request::ZoneReset`].
    ZoneReset { offset: u64 },
    /// A [`Request::ZoneResetAll`].
    ZoneResetAll,
    /// A [`Request::ZoneAppend`] of `len` bytes.
    ZoneAppend { offset: u64, len: u64, fua: bool },
}

impl Command {
    /// The operation.
    pub fn op(&self) -> Op {
        match self {
            Command::Read { .. } => Op::Read,
            Command::Write { .. } => Op::Write,
            Command::Flush => Op::Flush,
            Command::Discard { .. } => Op::Discard,
            Command::WriteZeroes { .. } => Op::WriteZeroes,
            Command::ReportZones { .. } => Op::ReportZones,
            Command::ZoneOpen { .. } => Op::ZoneOpen,
            Command::ZoneClose { .. } => Op::ZoneClose,
            Command::ZoneFinish { .. } => Op::ZoneFinish,
            Command::ZoneReset { .. } => Op::ZoneReset,
            Command::ZoneResetAll => Op::ZoneResetAll,
            Command::ZoneAppend { .. } => Op::ZoneAppend,
        }
    }

    /// The bytes of data the request moves: a read's, a write's or an
    /// append's length; 0 for the others.
    pub fn data_len(&self) -> u64 {
        match *self {
            Command::Read { len, .. }
            | Command::Write { len, .. }
            | Command::ZoneAppend { len, .. } => len,
            _ => 0,
        }
    }

    /// The request with its data: a read's buffer `buf`, a write's or
    /// append's `data` (each as long as the command says).
    pub(crate) fn request<'a>(self, data: &'a [u8], buf: &'a mut [u8]) -> Request<'a> {
        match self {
            Command::Read { offset, .. } => Request::Read { offset, buf },
            Command::Write { offset, fua, .. } => Request::Write { offset, data, fua },
            Command::Flush => Request::Flush,
            Command::Discard { offset, len } => Request::Discard { offset, len },
            Command::WriteZeroes { offset, len, unmap } => {
                Request::WriteZeroes { offset, len, unmap }
            }
            Command::ReportZones { offset, max_zones } => {
                Request::ReportZones { offset, max_zones }
            }
            Command::ZoneOpen { offset } => Request::ZoneOpen { offset },
            Command::ZoneClose { offset } => Request::ZoneClose { offset },
            Command::ZoneFinish { offset } => Request::ZoneFinish { offset },
            Command::ZoneReset { offset } => Request::ZoneReset { offset },
            Command::ZoneResetAll => Request::ZoneResetAll,
            Command::ZoneAppend { offset, fua, .. } => Request::ZoneAppend { offset, data, fua },
        }
    }
}

/// One request with its data, offsets and lengths in bytes: what
/// [`BlockDevice::handle`](crate::BlockDevice::handle) serves, and what
/// [`Io::request`](crate::Io::request) lends.
///
/// New kinds of requests may be added in later versions; a device that
/// matches on requests should answer unknown ones with
/// [`IoError::Unsupported`](crate::IoError::Unsupported).  A conventional
/// device answers the zone requests so too.
///
/// # Requests past the end
///
/// The framework checks every request against the device before the device
/// sees it: a range that does not lie on the device (or a read or write
/// longer than the largest I/O) fails with `EIO`, and a zone operation
/// must name a byte on the device.  A device may rely on it.
///
/// # Requests in pieces
///
/// The kernel may pass the data of a read or write in several pieces: a
/// mapped request (see [`TransferMode`](crate::TransferMode)) whose buffer
/// is made of pieces not aligned to each other, such as an `O_DIRECT`
/// `readv` of buffers at different page offsets, comes as a segmented
/// request.  Such a request reaches a
/// [`BlockDevice`](crate::BlockDevice) as one [`Request::Read`] or
/// [`Request::Write`] (one `read` or `write` call) per piece, in order, at
/// consecutive offsets, each piece a multiple of 512 bytes long (`fua` is
/// the request's, on every piece).  The kernel's request completes once
/// every piece is served; it fails with the error of the first piece that
/// fails, and the pieces after that one are not served.
#[non_exhaustive]
pub enum Request<'a> {
    /// Fill `buf` (entirely) with the data at `offset`.  A read whose data
    /// comes in pieces is one `Read` per piece (see
    /// [Requests in pieces](Request#requests-in-pieces)).
    Read {
        /// Byte offset on the device.
        offset: u64,
        /// Where the data goes; its length is the request length.
        buf: &'a mut [u8],
    },
    /// Store `data` at `offset`.  A write whose data comes in pieces is
    /// one `Write` per piece (see
    /// [Requests in pieces](Request#requests-in-pieces)).
    Write {
        /// Byte offset on the device.
        offset: u64,
        /// The data to store; its length is the request length.
        data: &'a [u8],
        /// Forced unit access: the data must be durable on completion.
        fua: bool,
    },
    /// Make every completed write durable.
    Flush,
    /// The range's contents are no longer needed.
    Discard {
        /// Byte offset on the device.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
    /// Make the range read as zeroes.
    WriteZeroes {
        /// Byte offset on the device.
        offset: u64,
        /// Length in bytes.
        len: u64,
        /// The device may deallocate the range (false: keep it allocated).
        unmap: bool,
    },
    /// Report up to `max_zones` (at least 1) zones, from the one
    /// containing byte `offset` on; none past the last zone.  A success is
    /// [`Reply::Zones`].
    ReportZones {
        /// Byte offset inside the first zone to report.
        offset: u64,
        /// Most zones the reply may hold.
        max_zones: usize,
    },
    /// Open the zone starting at `offset` explicitly.
    ZoneOpen {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Close the zone starting at `offset`.
    ZoneClose {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Finish the zone starting at `offset`.
    ZoneFinish {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Reset the zone starting at `offset`.
    ZoneReset {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Reset every sequential zone.
    ZoneResetAll,
    /// Write `data` at the write pointer of the zone starting at `offset`.
    /// A success is [`Reply::Appended`].
    ZoneAppend {
        /// Byte offset of the zone start.
        offset: u64,
        /// The data; its length is the request length.
        data: &'a [u8],
        /// Forced unit access: the data must be durable on completion.
        fua: bool,
    },
}

impl Request<'_> {
    /// The operation.
    pub fn op(&self) -> Op {
        self.command().op()
    }

    /// The request without its data.
    ///
    /// ```
    /// use bius::{Command, Request};
    ///
    /// let mut buf = [0; 1024];
    /// let read = Request::Read { offset: 512, buf: &mut buf };
    /// assert_eq!(read.command(), Command::Read { offset: 512, len: 1024 });
    /// ```
    pub fn command(&self) -> Command {
        let len = |bytes: &[u8]| bytes.len() as u64;
        match self {
            Request::Read { offset, buf } => Command::Read {
                offset: *offset,
                len: len(buf),
            },
            Request::Write { offset, data, fua } => Command::Write {
                offset: *offset,
                len: len(data),
                fua: *fua,
            },
            Request::Flush => Command::Flush,
            Request::Discard { offset, len } => Command::Discard {
                offset: *offset,
                len: *len,
            },
            Request::WriteZeroes { offset, len, unmap } => Command::WriteZeroes {
                offset: *offset,
                len: *len,
                unmap: *unmap,
            },
            Request::ReportZones { offset, max_zones } => Command::ReportZones {
                offset: *offset,
                max_zones: *max_zones,
            },
            Request::ZoneOpen { offset } => Command::ZoneOpen { offset: *offset },
            Request::ZoneClose { offset } => Command::ZoneClose { offset: *offset },
            Request::ZoneFinish { offset } => Command::ZoneFinish { offset: *offset },
            Request::ZoneReset { offset } => Command::ZoneReset { offset: *offset },
            Request::ZoneResetAll => Command::ZoneResetAll,
            Request::ZoneAppend { offset, data, fua } => Command::ZoneAppend {
                offset: *offset,
                len: len(data),
                fua: *fua,
            },
        }
    }
}

/// The request's [command](Request::command): its data shows as lengths.
impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.command().fmt(f)
    }
}

/// What a successful request completes with.
///
/// A [`Request::ReportZones`] succeeds with [`Reply::Zones`], a
/// [`Request::ZoneAppend`] with [`Reply::Appended`], every other request
/// with [`Reply::Done`]; a reply that does not fit its request fails it
/// with `EIO` (logged).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reply {
    /// The request is done: the success of every request but zone reports
    /// and appends (a read's data is in its buffer).
    Done,
    /// The zones of a [`Request::ReportZones`], in order.
    Zones(Vec<Zone>),
    /// The byte offset where a [`Request::ZoneAppend`]'s data landed.
    Appended(u64),
}
