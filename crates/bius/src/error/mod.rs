//! Typed errors: [`IoError`] for one request (`io.rs`), [`Error`] for the
//! control path.

use std::fmt;

pub use nix::errno::Errno;

mod io;

pub(crate) use io::errno_of;
pub use io::{IoError, OtherErrno};

use crate::control::info::DeviceState;
use crate::limits::{
    MAX_IO_SIZE, MAX_LOGICAL_BLOCK_SIZE, MAX_NAME_LEN, MAX_PHYSICAL_BLOCK_SIZE, MAX_POLL_TIME,
    MAX_QUEUES, MAX_QUEUE_DEPTH, MAX_RECOVER_TIMEOUT, MAX_SIZE, MAX_TIMEOUT, MAX_ZONES,
    MAX_ZONE_SIZE, MIN_BLOCK_SIZE,
};
use crate::size;

/// A device parameter that failed validation; its message is the rule,
/// with the [limits](crate::limits) it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Parameter {
    /// Size zero, not a multiple of the logical block size, or over
    /// [`MAX_SIZE`].
    #[error(
        "size must be a non-zero multiple of the logical block size, at most {} (BIUS_MAX_SIZE)",
        size::format(MAX_SIZE)
    )]
    Size,
    /// Logical block size not a power of two from [`MIN_BLOCK_SIZE`] to
    /// [`MAX_LOGICAL_BLOCK_SIZE`].
    #[error(
        "logical block size must be a power of two from {MIN_BLOCK_SIZE} to {MAX_LOGICAL_BLOCK_SIZE}"
    )]
    LogicalBlockSize,
    /// Physical block size not a power of two from the logical one to
    /// [`MAX_PHYSICAL_BLOCK_SIZE`].
    #[error(
        "physical block size must be a power of two from the logical block size to {MAX_PHYSICAL_BLOCK_SIZE}"
    )]
    PhysicalBlockSize,
    /// Number of hardware queues outside 1..=[`MAX_QUEUES`].
    #[error("number of queues must be from 1 to {MAX_QUEUES}")]
    Queues,
    /// Queue depth outside 1..=[`MAX_QUEUE_DEPTH`].
    #[error("queue depth must be from 1 to {MAX_QUEUE_DEPTH}")]
    QueueDepth,
    /// Largest I/O not a multiple of the logical block size from the page
    /// size to [`MAX_IO_SIZE`].
    #[error(
        "max I/O size must be a multiple of the logical block size, from the page size to {}",
        size::format(MAX_IO_SIZE.into())
    )]
    MaxIoSize,
    /// Request timeout under 1 ms or over [`MAX_TIMEOUT`].
    #[error(
        "timeout must be from 1 ms to {} s (BIUS_MAX_TIMEOUT_MS)",
        MAX_TIMEOUT.as_secs()
    )]
    Timeout,
    /// Name longer than [`MAX_NAME_LEN`], or with characters other than
    /// `[A-Za-z0-9_-]`.
    #[error("name must be at most {MAX_NAME_LEN} characters of [A-Za-z0-9_-]")]
    Name,
    /// A zoned device and a builder with a size: a zoned device's size is
    /// its geometry's.
    #[error(
        "a zoned device's size is its zone geometry's: build it without a size \
         (DeviceBuilder::default())"
    )]
    ZonedSize,
    /// Zones larger than [`MAX_ZONE_SIZE`].
    #[error("zone size must be at most {}", size::format(MAX_ZONE_SIZE))]
    ZoneSize,
    /// More than [`MAX_ZONES`] zones.
    #[error("a device has at most {MAX_ZONES} zones (BIUS_MAX_ZONES): use larger zones")]
    ZoneCount,
    /// Zones smaller than two logical blocks, or a zone capacity or largest
    /// zone append that is not a multiple of the logical block size.
    #[error(
        "zones must be at least two logical blocks, and zone capacity and largest zone append multiples of the logical block size"
    )]
    ZoneAlignment,
    /// A selective transfer threshold larger than the largest I/O.
    #[error("the selective transfer threshold must not exceed the max I/O size")]
    MapThreshold,
    /// A busy-wait time over [`MAX_POLL_TIME`].
    #[error("poll time must be at most {} µs", MAX_POLL_TIME.as_micros())]
    PollTime,
    /// An added latency is not below the request timeout.
    #[error("an added latency must be below the request timeout")]
    Latency,
    /// A recovery timeout under 1 ms or over [`MAX_RECOVER_TIMEOUT`].
    #[error(
        "recovery timeout must be from 1 ms to {} s (BIUS_MAX_RECOVER_TIMEOUT_MS)",
        MAX_RECOVER_TIMEOUT.as_secs()
    )]
    RecoverTimeout,
    /// As many poll queues as queues or more: at least one queue must be
    /// left for I/O that is not polled.
    #[error("poll queues must be fewer than the queues (one is left for I/O that is not polled)")]
    PollQueues,
    /// A largest zone append (other than the default, the zone size) set
    /// on a device whose zone appends the kernel emulates ([`DeviceBuilder::emulate_zone_append`]), which takes none.
    ///
    /// [`DeviceBuilder::emulate_zone_append`]: crate::DeviceBuilder::emulate_zone_append
    #[error(
        "a device with emulated zone append takes no zone appends: leave the largest zone append at 0"
    )]
    EmulatedAppend,
}

/// A control operation on `/dev/bius`, named in [`Error::Kernel`],
/// [`Error::PermissionDenied`] and [`Error::NoSuchDevice`].
///
/// Its `Display` is the operation as a gerund ("creating the device"), the
/// start of an [`Error`]'s message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlOp {
    /// open() of `/dev/bius`.
    Open,
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
    /// `BIUS_IOC_RECOVER_DEVICE`.
    Recover,
    /// Stopping the workers and leaving the device to recovery
    /// ([`Device::detach`](crate::Device::detach)).
    Detach,
}

impl fmt::Display for ControlOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ControlOp::Open => "opening /dev/bius",
            ControlOp::Create => "creating the device",
            ControlOp::Connect => "connecting a queue",
            ControlOp::Destroy => "destroying the device",
            ControlOp::GetInfo => "querying the device",
            ControlOp::List => "listing devices",
            ControlOp::Transfer => "exchanging requests with the kernel",
            ControlOp::MapWindow => "mapping a queue's data window",
            ControlOp::Recover => "recovering the device",
            ControlOp::Detach => "detaching from the device",
        })
    }
}

/// Errors of the control path: creating, querying and stopping devices.
///
/// The `Display` message is one line, complete on its own: what was being
/// done, what went wrong, and the errno that [`Error::errno`] returns, in
/// parentheses at the end.  [`source`](std::error::Error::source) is
/// therefore `None`: no variant wraps an error whose message is not
/// already part of its own (an errno is kept as an [`Errno`]).
///
/// ```
/// use bius::{ControlOp, Errno, Error};
///
/// let err = Error::Kernel { op: ControlOp::Create, errno: Errno::EINVAL };
/// assert_eq!(
///     err.to_string(),
///     "creating the device: the kernel refused the parameters (EINVAL)"
/// );
/// assert_eq!(err.errno(), Errno::EINVAL);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// `/dev/bius` does not exist: the kernel module is not loaded.
    ModuleNotLoaded(Errno),
    /// Not allowed to open `/dev/bius` ([`ControlOp::Open`]) or to perform
    /// the operation.
    PermissionDenied {
        /// What was being done.
        op: ControlOp,
        /// `EACCES` or `EPERM`.
        errno: Errno,
    },
    /// `/dev/bius` exists but could not be opened.
    Open(Errno),
    /// A parameter is invalid (checked before asking the kernel).
    InvalidParameter(Parameter),
    /// No device with this id.
    NoSuchDevice {
        /// What was being done.
        op: ControlOp,
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
        state: DeviceState,
        /// Why, where the library knows: a queue's error, or what the
        /// loopback found wrong in a zone report.  (What the kernel
        /// refused it says in its log, `dmesg`.)
        cause: Option<String>,
    },
    /// The kernel refused an operation, or an operation on a queue failed.
    Kernel {
        /// What was being done.
        op: ControlOp,
        /// The errno the kernel (or the failed system call) returned.
        errno: Errno,
    },
    /// A queue's request stream broke the protocol of `bius.h`.
    Protocol {
        /// The hardware queue.
        queue: u32,
    },
    /// A parameter of a recovery differs from the device's (as `GET_INFO`
    /// reports it, defaults applied): the kernel would refuse it with
    /// `EINVAL`.
    Mismatch {
        /// The device id.
        id: u32,
        /// The parameter, named as in `struct bius_device_params`
        /// (`size`, `logical_block_size`, `features`, `zone_size`, ...).
        field: &'static str,
        /// Its value on the device.
        device: String,
        /// Its value in the parameters given.
        given: String,
    },
    /// A recovery was refused because the device is not waiting for one:
    /// it is live (its daemon runs), or another process is recovering it.
    RecoverBusy {
        /// The device id.
        id: u32,
        /// Its state when it was asked, if known: `Created` or `Live` if
        /// it has a daemon, `Recovering` if another recovery is under
        /// way.
        state: Option<DeviceState>,
    },
    /// The device has no recovery timeout: without its daemon it dies, so
    /// it cannot be detached from (`EINVAL`).
    NoRecovery {
        /// The device id.
        id: u32,
    },
    /// A system resource (a thread, a signal handler) could not be set up,
    /// or a worker thread ended by a panic (`EIO`).
    System(Errno),
}

impl Error {
    /// The errno that best describes this error.
    pub fn errno(&self) -> Errno {
        match self {
            Error::ModuleNotLoaded(errno) | Error::Open(errno) | Error::System(errno) => *errno,
            Error::PermissionDenied { errno, .. }
            | Error::NoSuchDevice { errno, .. }
            | Error::Kernel { errno, .. } => *errno,
            Error::InvalidParameter(_) | Error::Mismatch { .. } | Error::NoRecovery { .. } => {
                Errno::EINVAL
            }
            Error::RecoverBusy { .. } => Errno::EBUSY,
            Error::NameTaken => Errno::EEXIST,
            Error::Busy { .. } => Errno::EBUSY,
            Error::NotLive { .. } => Errno::ETIMEDOUT,
            Error::Protocol { .. } => Errno::EPROTO,
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
            Errno::EACCES | Errno::EPERM => Error::PermissionDenied {
                op: ControlOp::Open,
                errno,
            },
            other => Error::Open(other),
        }
    }

    /// Classifies a failed control operation on device `id`.
    pub(crate) fn from_kernel(op: ControlOp, id: u32, errno: Errno) -> Self {
        match errno {
            Errno::EACCES | Errno::EPERM => Error::PermissionDenied { op, errno },
            Errno::ENOENT | Errno::ENODEV if op != ControlOp::Create => {
                Error::NoSuchDevice { op, id, errno }
            }
            Errno::EEXIST if op == ControlOp::Create => Error::NameTaken,
            Errno::EBUSY if op == ControlOp::Destroy => Error::Busy { id },
            Errno::EBUSY if op == ControlOp::Recover => Error::RecoverBusy { id, state: None },
            _ => Error::Kernel { op, errno },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ModuleNotLoaded(_) => write!(
                f,
                "{}: the bius kernel module is not loaded, try modprobe bius",
                ControlOp::Open
            ),
            Error::PermissionDenied { op, .. } => write!(f, "{op}: permission denied"),
            Error::Open(errno) => write!(f, "{}: {}", ControlOp::Open, errno.desc()),
            Error::InvalidParameter(param) => write!(f, "invalid parameter: {param}"),
            Error::NoSuchDevice {
                op: op @ ControlOp::Recover,
                id,
                ..
            } => write!(f, "{op}: no bius device with id {id}, or it is being removed"),
            Error::NoSuchDevice { op, id, .. } => {
                write!(f, "{op}: no bius device with id {id}")
            }
            Error::NameTaken => write!(
                f,
                "{}: a disk with this name already exists",
                ControlOp::Create
            ),
            Error::Busy { id } => write!(
                f,
                "{}: device {id} is busy: its disk is open, close it or force the stop",
                ControlOp::Destroy
            ),
            Error::NotLive { id, state, cause } => {
                // (only a recovery waits in that state)
                let op = match state {
                    DeviceState::Recovering => ControlOp::Recover,
                    _ => ControlOp::Create,
                };
                write!(
                    f,
                    "{op}: device {id} did not become live, it was last seen {state}"
                )?;
                match cause {
                    Some(cause) => write!(f, ": {cause}"),
                    None if *state == DeviceState::Dead => {
                        f.write_str(" (the kernel's log, dmesg, says why)")
                    }
                    None => Ok(()),
                }
            }
            Error::Kernel {
                op: op @ (ControlOp::Create | ControlOp::Recover),
                errno: Errno::EINVAL,
            } => write!(f, "{op}: the kernel refused the parameters"),
            Error::Kernel {
                op: op @ (ControlOp::Create | ControlOp::Recover),
                errno: Errno::EOPNOTSUPP,
            } => write!(
                f,
                "{op}: the running kernel cannot serve what the parameters ask for (emulated zone append needs Linux 6.10 or newer)"
            ),
            Error::Mismatch {
                id,
                field,
                device,
                given,
            } => write!(
                f,
                "{}: device {id} has {field} {device}, the parameters give {given}",
                ControlOp::Recover
            ),
            Error::RecoverBusy { id, state } => {
                let op = ControlOp::Recover;
                match state {
                    Some(DeviceState::Recovering) => write!(
                        f,
                        "{op}: device {id} is being recovered by another process"
                    ),
                    Some(state) => write!(
                        f,
                        "{op}: device {id} is {state}: its daemon runs, only a device that lost it can be recovered"
                    ),
                    None => write!(
                        f,
                        "{op}: device {id} is live, or being recovered by another process"
                    ),
                }
            }
            Error::NoRecovery { id } => write!(
                f,
                "{}: device {id} has no recovery timeout, it would die without its daemon; stop it instead",
                ControlOp::Detach
            ),
            Error::Kernel { op, errno } => write!(f, "{op}: {}", errno.desc()),
            Error::Protocol { queue } => write!(
                f,
                "{}: malformed request stream on queue {queue}",
                ControlOp::Transfer
            ),
            Error::System(errno) => write!(
                f,
                "setting up or running the worker threads: {}",
                errno.desc()
            ),
        }?;
        write!(f, " ({:?})", self.errno())
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of each variant, with the message it displays.
    fn cases() -> Vec<(Error, &'static str)> {
        vec![
            (
                Error::from_open(Errno::ENOENT),
                "opening /dev/bius: the bius kernel module is not loaded, try modprobe bius (ENOENT)",
            ),
            (
                Error::from_open(Errno::EACCES),
                "opening /dev/bius: permission denied (EACCES)",
            ),
            (
                Error::from_open(Errno::EMFILE),
                "opening /dev/bius: Too many open files (EMFILE)",
            ),
            (
                Error::InvalidParameter(Parameter::Queues),
                "invalid parameter: number of queues must be from 1 to 64 (EINVAL)",
            ),
            (
                Error::from_kernel(ControlOp::Destroy, 7, Errno::EPERM),
                "destroying the device: permission denied (EPERM)",
            ),
            (
                Error::from_kernel(ControlOp::GetInfo, 7, Errno::ENOENT),
                "querying the device: no bius device with id 7 (ENOENT)",
            ),
            (
                Error::from_kernel(ControlOp::Create, 0, Errno::EEXIST),
                "creating the device: a disk with this name already exists (EEXIST)",
            ),
            (
                Error::from_kernel(ControlOp::Destroy, 7, Errno::EBUSY),
                "destroying the device: device 7 is busy: its disk is open, \
                 close it or force the stop (EBUSY)",
            ),
            (
                Error::NotLive {
                    id: 7,
                    state: DeviceState::Created,
                    cause: None,
                },
                "creating the device: device 7 did not become live, it was last seen created (ETIMEDOUT)",
            ),
            (
                Error::NotLive {
                    id: 7,
                    state: DeviceState::Recovering,
                    cause: None,
                },
                "recovering the device: device 7 did not become live, it was last seen recovering (ETIMEDOUT)",
            ),
            (
                Error::NotLive {
                    id: 7,
                    state: DeviceState::Dead,
                    cause: None,
                },
                "creating the device: device 7 did not become live, it was last seen dead \
                 (the kernel's log, dmesg, says why) (ETIMEDOUT)",
            ),
            (
                Error::NotLive {
                    id: 0,
                    state: DeviceState::Dead,
                    cause: Some("the kernel refused its zones: capacity is not the zone's".into()),
                },
                "creating the device: device 0 did not become live, it was last seen dead: \
                 the kernel refused its zones: capacity is not the zone's (ETIMEDOUT)",
            ),
            (
                Error::from_kernel(ControlOp::Create, 0, Errno::EINVAL),
                "creating the device: the kernel refused the parameters (EINVAL)",
            ),
            (
                Error::from_kernel(ControlOp::Connect, 7, Errno::EBUSY),
                "connecting a queue: Device or resource busy (EBUSY)",
            ),
            (
                Error::Mismatch {
                    id: 7,
                    field: "size",
                    device: "1073741824".into(),
                    given: "2147483648".into(),
                },
                "recovering the device: device 7 has size 1073741824, the parameters give 2147483648 (EINVAL)",
            ),
            (
                Error::from_kernel(ControlOp::Recover, 7, Errno::EBUSY),
                "recovering the device: device 7 is live, or being recovered by another process (EBUSY)",
            ),
            (
                Error::RecoverBusy {
                    id: 7,
                    state: Some(DeviceState::Live),
                },
                "recovering the device: device 7 is live: its daemon runs, only a device that lost it can be recovered (EBUSY)",
            ),
            (
                Error::RecoverBusy {
                    id: 7,
                    state: Some(DeviceState::Recovering),
                },
                "recovering the device: device 7 is being recovered by another process (EBUSY)",
            ),
            (
                Error::from_kernel(ControlOp::Recover, 7, Errno::ENODEV),
                "recovering the device: no bius device with id 7, or it is being removed (ENODEV)",
            ),
            (
                Error::from_kernel(ControlOp::Recover, 7, Errno::EPERM),
                "recovering the device: permission denied (EPERM)",
            ),
            (
                Error::from_kernel(ControlOp::Recover, 7, Errno::EINVAL),
                "recovering the device: the kernel refused the parameters (EINVAL)",
            ),
            (
                Error::NoRecovery { id: 7 },
                "detaching from the device: device 7 has no recovery timeout, it would die without its daemon; stop it instead (EINVAL)",
            ),
            (
                Error::InvalidParameter(Parameter::RecoverTimeout),
                "invalid parameter: recovery timeout must be from 1 ms to 90 s (BIUS_MAX_RECOVER_TIMEOUT_MS) (EINVAL)",
            ),
            (
                Error::InvalidParameter(Parameter::PollQueues),
                "invalid parameter: poll queues must be fewer than the queues (one is left for I/O that is not polled) (EINVAL)",
            ),
            (
                Error::InvalidParameter(Parameter::EmulatedAppend),
                "invalid parameter: a device with emulated zone append takes no zone appends: leave the largest zone append at 0 (EINVAL)",
            ),
            (
                Error::Kernel {
                    op: ControlOp::Create,
                    errno: Errno::EOPNOTSUPP,
                },
                "creating the device: the running kernel cannot serve what the parameters ask for (emulated zone append needs Linux 6.10 or newer) (EOPNOTSUPP)",
            ),
            (
                Error::Protocol { queue: 3 },
                "exchanging requests with the kernel: malformed request stream on queue 3 (EPROTO)",
            ),
            (
                Error::from_io(std::io::Error::from_raw_os_error(Errno::ENOMEM as i32)),
                "setting up or running the worker threads: Out of memory (ENOMEM)",
            ),
        ]
    }

    #[test]
    fn display_says_what_failed_and_the_errno() {
        for (err, message) in cases() {
            assert_eq!(err.to_string(), message, "{err:?}");
            assert!(
                message.ends_with(&format!(" ({:?})", err.errno())),
                "{err:?}"
            );
        }
    }

    #[test]
    fn the_message_is_complete_without_a_source() {
        for (err, _) in cases() {
            assert!(std::error::Error::source(&err).is_none(), "{err:?}");
        }
    }

    #[test]
    fn open_failures_are_classified() {
        assert_eq!(
            Error::from_open(Errno::ENODEV),
            Error::ModuleNotLoaded(Errno::ENODEV)
        );
        assert_eq!(
            Error::from_open(Errno::EPERM),
            Error::PermissionDenied {
                op: ControlOp::Open,
                errno: Errno::EPERM
            }
        );
        assert_eq!(Error::from_open(Errno::EIO), Error::Open(Errno::EIO));
    }

    #[test]
    fn kernel_failures_are_classified_by_operation() {
        // ENOENT names a missing device except when creating one.
        assert_eq!(
            Error::from_kernel(ControlOp::Create, 0, Errno::ENOENT),
            Error::Kernel {
                op: ControlOp::Create,
                errno: Errno::ENOENT
            }
        );
        assert_eq!(
            Error::from_kernel(ControlOp::Connect, 4, Errno::ENODEV),
            Error::NoSuchDevice {
                op: ControlOp::Connect,
                id: 4,
                errno: Errno::ENODEV
            }
        );
        // EEXIST and EBUSY mean a taken name and an open disk only where
        // the kernel returns them for that reason.
        assert_eq!(
            Error::from_kernel(ControlOp::Connect, 4, Errno::EEXIST),
            Error::Kernel {
                op: ControlOp::Connect,
                errno: Errno::EEXIST
            }
        );
        assert_eq!(
            Error::from_kernel(ControlOp::Connect, 4, Errno::EBUSY),
            Error::Kernel {
                op: ControlOp::Connect,
                errno: Errno::EBUSY
            }
        );
    }

    #[test]
    fn each_parameter_says_its_rule() {
        for (param, rule) in [
            (
                Parameter::Size,
                "size must be a non-zero multiple of the logical block size, at most 4E (BIUS_MAX_SIZE)",
            ),
            (
                Parameter::LogicalBlockSize,
                "logical block size must be a power of two from 512 to 4096",
            ),
            (
                Parameter::PhysicalBlockSize,
                "physical block size must be a power of two from the logical block size to 65536",
            ),
            (Parameter::Queues, "number of queues must be from 1 to 64"),
            (Parameter::QueueDepth, "queue depth must be from 1 to 4096"),
            (
                Parameter::MaxIoSize,
                "max I/O size must be a multiple of the logical block size, from the page size to 8M",
            ),
            (
                Parameter::Timeout,
                "timeout must be from 1 ms to 90 s (BIUS_MAX_TIMEOUT_MS)",
            ),
            (
                Parameter::Name,
                "name must be at most 31 characters of [A-Za-z0-9_-]",
            ),
            (
                Parameter::ZonedSize,
                "a zoned device's size is its zone geometry's: build it without a size \
                 (DeviceBuilder::default())",
            ),
            (Parameter::ZoneSize, "zone size must be at most 1T"),
            (
                Parameter::ZoneCount,
                "a device has at most 4194304 zones (BIUS_MAX_ZONES): use larger zones",
            ),
            (
                Parameter::ZoneAlignment,
                "zones must be at least two logical blocks, and zone capacity and largest zone append multiples of the logical block size",
            ),
            (
                Parameter::MapThreshold,
                "the selective transfer threshold must not exceed the max I/O size",
            ),
            (Parameter::PollTime, "poll time must be at most 1000 µs"),
            (
                Parameter::Latency,
                "an added latency must be below the request timeout",
            ),
            (
                Parameter::RecoverTimeout,
                "recovery timeout must be from 1 ms to 90 s (BIUS_MAX_RECOVER_TIMEOUT_MS)",
            ),
            (
                Parameter::PollQueues,
                "poll queues must be fewer than the queues (one is left for I/O that is not polled)",
            ),
            (
                Parameter::EmulatedAppend,
                "a device with emulated zone append takes no zone appends: leave the largest zone append at 0",
            ),
        ] {
            assert_eq!(param.to_string(), rule, "{param:?}");
        }
    }
}
