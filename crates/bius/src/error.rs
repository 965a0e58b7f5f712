//! Typed errors: [`IoError`] for one request, [`Error`] for the control path.

use std::fmt;

pub use nix::errno::Errno;

/// Why one request failed.  The worker turns it into the negated errno of
/// the completion the kernel receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoError {
    /// A generic I/O error (`EIO`).
    Io,
    /// No space left on the backing store (`ENOSPC`).
    NoSpace,
    /// The operation is not supported by this device (`EOPNOTSUPP`).
    Unsupported,
    /// The request is malformed or out of range (`EINVAL`).
    InvalidArgument,
    /// The device or the backing store is read-only (`EROFS`).
    ReadOnly,
    /// Any other errno.
    Errno(Errno),
}

impl IoError {
    /// The errno reported to the kernel for this error.
    pub fn errno(self) -> Errno {
        match self {
            IoError::Io => Errno::EIO,
            IoError::NoSpace => Errno::ENOSPC,
            IoError::Unsupported => Errno::EOPNOTSUPP,
            IoError::InvalidArgument => Errno::EINVAL,
            IoError::ReadOnly => Errno::EROFS,
            IoError::Errno(errno) => errno,
        }
    }

    /// The error for an errno; the inverse of [`IoError::errno`].
    pub fn from_errno(errno: Errno) -> Self {
        match errno {
            Errno::EIO => IoError::Io,
            Errno::ENOSPC => IoError::NoSpace,
            Errno::EOPNOTSUPP => IoError::Unsupported,
            Errno::EINVAL => IoError::InvalidArgument,
            Errno::EROFS => IoError::ReadOnly,
            other => IoError::Errno(other),
        }
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "I/O request failed ({})", self.errno())
    }
}

impl std::error::Error for IoError {}

impl From<Errno> for IoError {
    fn from(errno: Errno) -> Self {
        IoError::from_errno(errno)
    }
}

/// An OS error keeps its errno; any other error becomes [`IoError::Io`].
impl From<std::io::Error> for IoError {
    fn from(err: std::io::Error) -> Self {
        IoError::from_errno(errno_of(&err))
    }
}

/// The errno of a standard library error (`EIO` if it has none).
pub(crate) fn errno_of(err: &std::io::Error) -> Errno {
    err.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
}

/// A device parameter that failed validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Parameter {
    /// Size zero, or not a multiple of the logical block size.
    Size,
    /// Logical block size not a power of two in 512..=4096.
    LogicalBlockSize,
    /// Physical block size not a power of two in logical..=65536.
    PhysicalBlockSize,
    /// Number of hardware queues outside 1..=64.
    Queues,
    /// Queue depth outside 1..=4096.
    QueueDepth,
    /// Largest I/O not a multiple of the logical block size from the page
    /// size to 8 MiB.
    MaxIoSize,
    /// Request timeout zero or longer than `u32::MAX` milliseconds.
    Timeout,
    /// Name too long, or with characters other than `[A-Za-z0-9_-]`.
    Name,
    /// A zoned device whose zone geometry does not cover exactly the
    /// device size.
    ZonedSize,
    /// Zones of 2 TiB or more.
    ZoneSize,
    /// Zones smaller than two logical blocks, or a zone capacity or largest
    /// zone append that is not a multiple of the logical block size.
    ZoneAlignment,
    /// A selective transfer threshold larger than the largest I/O.
    MapThreshold,
    /// A busy-wait time over 1 ms.
    PollTime,
}

impl fmt::Display for Parameter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Parameter::Size => "size must be a non-zero multiple of the logical block size",
            Parameter::LogicalBlockSize => {
                "logical block size must be a power of two from 512 to 4096"
            }
            Parameter::PhysicalBlockSize => {
                "physical block size must be a power of two from the logical block size to 65536"
            }
            Parameter::Queues => "number of queues must be from 1 to 64",
            Parameter::QueueDepth => "queue depth must be from 1 to 4096",
            Parameter::MaxIoSize => {
                "max I/O size must be a multiple of the logical block size, from the page size to 8 MiB"
            }
            Parameter::Timeout => "timeout must be from 1 ms to u32::MAX ms",
            Parameter::Name => "name must be at most 31 characters of [A-Za-z0-9_-]",
            Parameter::ZonedSize => "the zone geometry must cover exactly the device size",
            Parameter::ZoneSize => "zone size must be below 2 TiB",
            Parameter::ZoneAlignment => {
                "zones must be at least two logical blocks, and zone capacity and largest zone append multiples of the logical block size"
            }
            Parameter::MapThreshold => {
                "the selective transfer threshold must not exceed the max I/O size"
            }
            Parameter::PollTime => "poll time must be at most 1000 µs",
        })
    }
}

/// A control operation on `/dev/bius`, named in [`Error::Kernel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlOp {
    /// `BIUS_IOC_CREATE_DEVICE`.
    Create,
    /// `BIUS_IOC_CONNECT` of one queue.
    Connect,
    /// `BIUS_IOC_DESTROY_DEVICE`.
    Destroy,
    /// `BIUS_IOC_GET_INFO`.
    GetInfo,
    /// `BIUS_IOC_LIST_DEVICES`.
    List,
    /// read() or write() on a connected queue.
    Transfer,
    /// mmap() of a queue's data window (map and selective transfer modes).
    MapWindow,
}

impl fmt::Display for ControlOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ControlOp::Create => "creating the device",
            ControlOp::Connect => "connecting a queue",
            ControlOp::Destroy => "destroying the device",
            ControlOp::GetInfo => "querying the device",
            ControlOp::List => "listing devices",
            ControlOp::Transfer => "exchanging requests with the kernel",
            ControlOp::MapWindow => "mapping a queue's data window",
        })
    }
}

/// Errors of the control path: creating, querying and stopping devices.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// `/dev/bius` does not exist: the kernel module is not loaded.
    ModuleNotLoaded(Errno),
    /// Not allowed to open `/dev/bius` or to perform the operation.
    PermissionDenied(Errno),
    /// `/dev/bius` exists but could not be opened.
    Open(Errno),
    /// A parameter is invalid (checked before asking the kernel).
    InvalidParameter(Parameter),
    /// A zoned device's geometry is invalid (checked before asking the
    /// kernel).
    InvalidZoneGeometry(crate::ZoneGeometryError),
    /// No device with this id.
    NoSuchDevice {
        /// The device id asked for.
        id: u32,
        /// The errno the kernel returned.
        errno: Errno,
    },
    /// Another disk already has the requested name.
    NameTaken,
    /// The device's disk is open: a graceful stop is refused.
    Busy {
        /// The device id.
        id: u32,
    },
    /// The device did not become live in time.
    NotLive {
        /// The device id.
        id: u32,
        /// The state it was last seen in.
        state: crate::DeviceState,
    },
    /// The kernel refused an operation.
    Kernel {
        /// What was being done.
        op: ControlOp,
        /// The errno the kernel returned.
        errno: Errno,
    },
    /// A queue's request stream broke the protocol of `bius.h`.
    Protocol {
        /// The hardware queue.
        queue: u32,
    },
    /// A system resource (a thread, a signal handler) could not be set up.
    System(Errno),
}

impl Error {
    /// The errno that best describes this error.
    pub fn errno(&self) -> Errno {
        match self {
            Error::ModuleNotLoaded(errno) | Error::PermissionDenied(errno) | Error::Open(errno) => {
                *errno
            }
            Error::InvalidParameter(_) | Error::InvalidZoneGeometry(_) => Errno::EINVAL,
            Error::NoSuchDevice { errno, .. } | Error::Kernel { errno, .. } => *errno,
            Error::NameTaken => Errno::EEXIST,
            Error::Busy { .. } => Errno::EBUSY,
            Error::NotLive { .. } => Errno::ETIMEDOUT,
            Error::Protocol { .. } => Errno::EPROTO,
            Error::System(errno) => *errno,
        }
    }

    /// A failed system call of the library itself (threads, sockets,
    /// signal handlers): [`Error::System`] with its errno.
    pub(crate) fn from_io(err: std::io::Error) -> Self {
        Error::System(errno_of(&err))
    }

    /// Classifies a failure to open `/dev/bius`.
    pub(crate) fn from_open(errno: Errno) -> Self {
        match errno {
            Errno::ENOENT | Errno::ENODEV | Errno::ENXIO => Error::ModuleNotLoaded(errno),
            Errno::EACCES | Errno::EPERM => Error::PermissionDenied(errno),
            other => Error::Open(other),
        }
    }

    /// Classifies a failed control operation on device `id`.
    pub(crate) fn from_kernel(op: ControlOp, id: u32, errno: Errno) -> Self {
        match errno {
            Errno::EACCES | Errno::EPERM => Error::PermissionDenied(errno),
            Errno::ENOENT | Errno::ENODEV if op != ControlOp::Create => {
                Error::NoSuchDevice { id, errno }
            }
            Errno::EEXIST if op == ControlOp::Create => Error::NameTaken,
            Errno::EBUSY if op == ControlOp::Destroy => Error::Busy { id },
            _ => Error::Kernel { op, errno },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ModuleNotLoaded(_) => f.write_str(
                "cannot open /dev/bius: the bius kernel module is not loaded (modprobe bius)",
            ),
            Error::PermissionDenied(_) => f.write_str("permission denied on /dev/bius"),
            Error::Open(_) => f.write_str("cannot open /dev/bius"),
            Error::InvalidParameter(param) => write!(f, "invalid parameter: {param}"),
            Error::InvalidZoneGeometry(err) => write!(f, "invalid zone geometry: {err}"),
            Error::NoSuchDevice { id, .. } => write!(f, "no bius device with id {id}"),
            Error::NameTaken => f.write_str("a disk with this name already exists"),
            Error::Busy { id } => write!(
                f,
                "device {id} is busy: its disk is open (close it or force the stop)"
            ),
            Error::NotLive { id, state } => {
                write!(f, "device {id} did not become live (state: {state})")
            }
            Error::Kernel { op, .. } => write!(f, "{op} failed"),
            Error::Protocol { queue } => {
                write!(f, "queue {queue}: malformed request stream from the kernel")
            }
            Error::System(_) => f.write_str("cannot set up a thread or a signal handler"),
        }
    }
}

impl std::error::Error for Error {}
