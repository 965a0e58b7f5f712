//! [`Submission`]: a request as the loopback sends it (a [`Command`] and the
//! payload of a write or append), and why one cannot be sent
//! ([`SubmitError`]).

use std::fmt;

use bius_sys::bius_request;
use nix::errno::Errno;

use crate::abi::{SECTOR_SIZE, ZONE_SIZE};
use crate::error::IoError;
use crate::op::Op;
use crate::request::Command;

use super::rules::NotSent;

/// A request for the loopback to send, as the kernel sends one: a
/// [`Command`], offsets and lengths in bytes, with the payload of a write
/// or zone append.  A bare command converts into one (`From<Command>`);
/// [`Submission::write`] and [`Submission::append`] take their payload.
///
/// ```
/// use bius::loopback::Submission;
/// use bius::Command;
///
/// let write = Submission::write(4096, vec![1; 512]).fua();
/// assert_eq!(
///     write.command(),
///     Some(Command::Write { offset: 4096, len: 512, fua: true })
/// );
/// let read = Submission::from(Command::Read { offset: 0, len: 4096 });
/// assert_eq!(read.payload(), &[] as &[u8]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    kind: Kind,
    payload: Vec<u8>,
    replay: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Command(Command),
    /// A header with an arbitrary op code, as a newer kernel might send.
    Raw {
        op: u8,
        sector: u64,
        len: u32,
    },
}

impl Submission {
    /// `command` with `payload`: the data of a write or append (as long as
    /// the command says), empty for other commands (else
    /// [`Loopback::submit`](super::Loopback::submit) refuses it).
    pub fn new(command: Command, payload: Vec<u8>) -> Self {
        Submission {
            kind: Kind::Command(command),
            payload,
            replay: false,
        }
    }

    /// A write of `data` at `offset`, without forced unit access.
    pub fn write(offset: u64, data: Vec<u8>) -> Self {
        let len = data.len() as u64;
        let fua = false;
        Submission::new(Command::Write { offset, len, fua }, data)
    }

    /// An append of `data` to the zone starting at `offset`, without
    /// forced unit access.
    pub fn append(offset: u64, data: Vec<u8>) -> Self {
        let len = data.len() as u64;
        let fua = false;
        Submission::new(Command::ZoneAppend { offset, len, fua }, data)
    }

    /// The same with forced unit access, if it is a write or an append.
    pub fn fua(mut self) -> Self {
        if let Kind::Command(Command::Write { fua, .. } | Command::ZoneAppend { fua, .. }) =
            &mut self.kind
        {
            *fua = true;
        }
        self
    }

    /// The same, sent again (`BIUS_REQ_REPLAY`), as the kernel does after
    /// a recovery with the requests the lost daemon had read.
    pub fn replayed(mut self) -> Self {
        self.replay = true;
        self
    }

    /// A payload-less request with an arbitrary `bius_request.op` code,
    /// first sector and length, as a newer kernel might send (a request
    /// the worker must refuse), or as no kernel sends (a zone report whose
    /// room is no whole number of descriptors, say).
    pub fn raw(op: u8, sector: u64, len: u32) -> Self {
        Submission {
            kind: Kind::Raw { op, sector, len },
            payload: Vec::new(),
            replay: false,
        }
    }

    /// The command; `None` for a [raw](Submission::raw) request.
    pub fn command(&self) -> Option<Command> {
        match self.kind {
            Kind::Command(command) => Some(command),
            Kind::Raw { .. } => None,
        }
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The request header (with id `id`), its operation (`None` for a raw
    /// op code no version knows) and its payload.
    pub(super) fn encode(
        self,
        id: u64,
    ) -> Result<(bius_request, Option<Op>, Vec<u8>), SubmitError> {
        let replay = if self.replay {
            bius_sys::BIUS_REQ_REPLAY
        } else {
            0
        };
        let command = match self.kind {
            Kind::Raw { op, sector, len } => {
                let hdr = bius_request {
                    id,
                    sector,
                    len,
                    op,
                    flags: replay as u16,
                    ..Default::default()
                };
                return Ok((hdr, Op::from_raw(op), self.payload));
            }
            Kind::Command(command) => command,
        };
        let payload_len = if command.op().has_payload() {
            command.data_len()
        } else {
            0
        };
        if self.payload.len() as u64 != payload_len {
            return Err(SubmitError::PayloadLength {
                op: command.op(),
                expected: payload_len,
                payload: self.payload.len(),
            });
        }
        let (offset, len, flags) = match command {
            Command::Read { offset, len } | Command::Discard { offset, len } => (offset, len, 0),
            Command::Write { offset, len, fua } | Command::ZoneAppend { offset, len, fua } => {
                (offset, len, fua_flag(fua))
            }
            Command::WriteZeroes { offset, len, unmap } => {
                let flags = if unmap { 0 } else { bius_sys::BIUS_REQ_NOUNMAP };
                (offset, len, flags)
            }
            Command::ReportZones { offset, max_zones } => {
                let room = (max_zones as u64).saturating_mul(ZONE_SIZE as u64);
                (offset, room, 0)
            }
            Command::ZoneOpen { offset }
            | Command::ZoneClose { offset }
            | Command::ZoneFinish { offset }
            | Command::ZoneReset { offset } => (offset, 0, 0),
            Command::Flush | Command::ZoneResetAll => (0, 0, 0),
        };
        if !offset.is_multiple_of(SECTOR_SIZE) {
            return Err(SubmitError::Unaligned { offset });
        }
        let len = u32::try_from(len).map_err(|_| SubmitError::TooLong { len })?;
        let hdr = bius_request {
            id,
            sector: offset / SECTOR_SIZE,
            len,
            op: command.op().raw(),
            flags: (flags | replay) as u16,
            ..Default::default()
        };
        Ok((hdr, Some(command.op()), self.payload))
    }
}

/// `BIUS_REQ_FUA` if `fua`.
fn fua_flag(fua: bool) -> u32 {
    if fua {
        bius_sys::BIUS_REQ_FUA
    } else {
        0
    }
}

impl From<Command> for Submission {
    /// The command without payload (what every command but a write or an
    /// append has).
    fn from(command: Command) -> Self {
        Submission::new(command, Vec::new())
    }
}

/// Why the loopback cannot send a request: it is no request the kernel
/// could send.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// The hardware queue does not exist (the loopback has `queues` of
    /// them; the default is one per CPU, see
    /// [`DeviceBuilder::default_queues`](crate::DeviceBuilder::default_queues)).
    NoSuchQueue {
        /// The queue asked for.
        queue: u32,
        /// How many queues there are.
        queues: u32,
    },
    /// An offset is not a whole number of 512-byte sectors.
    Unaligned {
        /// The offset, in bytes.
        offset: u64,
    },
    /// The payload is not what the request carries: a write's or append's
    /// length in bytes, none for the other operations.
    PayloadLength {
        /// The operation.
        op: Op,
        /// The bytes it carries.
        expected: u64,
        /// The bytes given.
        payload: usize,
    },
    /// A length the request record cannot carry (4 GiB or more).
    TooLong {
        /// The length, in bytes.
        len: u64,
    },
    /// A request the kernel never sends this device: it breaks a rule of
    /// the device's limits and capabilities ([`NotSent`] says which).
    /// Known once the device has started; a request queued before is
    /// checked then, and fails with the [`IoError`] of this error.
    NotSent {
        /// The operation.
        op: Op,
        /// The rule it breaks.
        why: NotSent,
    },
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::NoSuchQueue { queue, queues } => {
                write!(f, "no hardware queue {queue}: the loopback has {queues}")
            }
            SubmitError::Unaligned { offset } => {
                write!(f, "offset {offset} bytes is not a multiple of 512 bytes")
            }
            SubmitError::PayloadLength {
                op,
                expected,
                payload,
            } => write!(
                f,
                "a {op} carries {expected} bytes of payload, not {payload}"
            ),
            SubmitError::TooLong { len } => {
                write!(f, "length {len} bytes does not fit a request (below 4 GiB)")
            }
            SubmitError::NotSent { op, why } => {
                write!(f, "the kernel never sends this {op}: {why}")
            }
        }
    }
}

impl std::error::Error for SubmitError {}

/// What [`Loopback::run`](super::Loopback::run) fails with when it cannot
/// send the request: `ENXIO` for a queue that does not exist; for a
/// request the kernel never sends, the errno the block layer fails it with
/// where it does (`EIO` past the end of the disk and for a zone append it
/// cannot take, `EOPNOTSUPP` for an operation the device does not offer,
/// `EROFS` for a change to a read-only disk), `EINVAL` where it would
/// split, strip or complete the request instead; `EINVAL` for the rest.
impl From<SubmitError> for IoError {
    fn from(err: SubmitError) -> Self {
        let SubmitError::NotSent { op, why } = err else {
            return match err {
                SubmitError::NoSuchQueue { .. } => IoError::from(Errno::ENXIO),
                _ => IoError::InvalidArgument,
            };
        };
        match why {
            NotSent::PastEnd { .. } => IoError::Io,
            NotSent::TooLarge { .. } | NotSent::NotZoneStart { .. } if op == Op::ZoneAppend => {
                IoError::Io
            }
            NotSent::Needs(_) | NotSent::NotZoned | NotSent::AppendEmulated => IoError::Unsupported,
            NotSent::ReadOnly => IoError::ReadOnly,
            _ => IoError::InvalidArgument,
        }
    }
}
