//! Why a command failed, and the exit status that says so.

use std::fmt;
use std::io;
use std::path::PathBuf;

use bius::zone::DiskZonesError;
use bius::{ControlOp, Errno};

use crate::socket;

/// Exit status of a runtime failure.
pub const EXIT_FAILURE: u8 = 1;
/// Exit status of an invalid command line or config file.
pub const EXIT_USAGE: u8 = 2;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// An option's value is invalid, alone or with the others.
    Invalid {
        /// The long option, e.g. `--zone-size`.
        option: &'static str,
        /// Its value as given (or its default).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `biusctl create` without a backend, on the command line or in the
    /// config file.
    NoBackend,
    /// The config file could not be read.
    ReadConfig(PathBuf, io::Error),
    /// The config file is not valid: where, and why.
    Config(PathBuf, String),
    /// From the bius framework.
    Bius(bius::Error),
    /// No device has this id, name or path.
    UnknownDevice(String),
    /// The backing file could not be opened.
    OpenFile(PathBuf, io::Error),
    /// The backing file is smaller than one block.
    FileTooSmall(PathBuf),
    /// The NBD server could not be reached, or refused the export.
    Nbd(bius_backends::nbd::NbdError),
    /// Standard output is gone.
    Stdout(io::Error),
    /// The manual pages could not be written.
    WriteManpages(PathBuf, io::Error),
    /// No disk has this name or path.
    NoDisk(String),
    /// The disk is not zoned.
    NotZoned(String),
    /// Reading a disk's zones failed.
    DiskZones(String, DiskZonesError),
    /// A request to a device's daemon (statistics, trace, fault) failed.
    Daemon(socket::SendError),
    /// A trace ended early: its file, the records written, and why.
    TraceFailed {
        /// The trace file.
        file: String,
        /// Records written before the failure.
        records: u64,
        /// The writer's error.
        reason: String,
    },
    /// A device model's value is invalid (the parameter, and why).
    Model(bius_model::ProfileError),
    /// A zoned file's zone state file cannot be used.
    ZoneState(bius_backends::ZoneStateError),
    /// `detach`: the device did not become recovering in time.
    NotDetached {
        /// The device as given.
        device: String,
        /// Its state when the wait ended.
        state: bius::DeviceState,
    },
    /// `destroy --all`: some devices remain (each failure was reported).
    NotAllDestroyed {
        /// How many could not be destroyed.
        failed: usize,
        /// The errno of the first failure.
        errno: Errno,
    },
}

impl CliError {
    /// Whether the command line or the config file is at fault: nothing
    /// was done, and no errno applies.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            CliError::Invalid { .. }
                | CliError::NoBackend
                | CliError::Config(..)
                | CliError::Model(_)
        )
    }

    /// The exit status: [`EXIT_USAGE`] or [`EXIT_FAILURE`].
    pub fn exit_status(&self) -> u8 {
        if self.is_usage() {
            EXIT_USAGE
        } else {
            EXIT_FAILURE
        }
    }

    /// The errno of a runtime failure.
    pub fn errno(&self) -> Errno {
        let of_io = |err: &io::Error| err.raw_os_error().map_or(Errno::EIO, Errno::from_raw);
        match self {
            CliError::Invalid { .. } | CliError::NoBackend | CliError::Config(..) => Errno::EINVAL,
            CliError::Bius(err) => err.errno(),
            CliError::UnknownDevice(_) | CliError::NoDisk(_) => Errno::ENOENT,
            CliError::ReadConfig(_, err)
            | CliError::OpenFile(_, err)
            | CliError::Stdout(err)
            | CliError::WriteManpages(_, err) => of_io(err),
            CliError::FileTooSmall(_) => Errno::EINVAL,
            CliError::Nbd(err) => err.errno(),
            CliError::NotZoned(_) => Errno::ENOTTY,
            CliError::DiskZones(_, err) => err.errno(),
            CliError::Daemon(err) => err.errno(),
            CliError::TraceFailed { reason, .. } => trace_errno(reason),
            CliError::Model(_) => Errno::EINVAL,
            CliError::ZoneState(err) => err.errno(),
            CliError::NotAllDestroyed { errno, .. } => *errno,
            CliError::NotDetached { .. } => Errno::ETIMEDOUT,
        }
    }

    /// The line `biusctl: error: ...` for standard error: runtime failures
    /// end with their errno, usage errors do not.
    pub fn report(&self) -> String {
        match self {
            // The framework's messages end with their errno.
            CliError::Bius(_) => format!("biusctl: error: {self}"),
            _ if self.is_usage() => format!("biusctl: error: {self}"),
            _ => format!("biusctl: error: {self} ({:?})", self.errno()),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Invalid {
                option,
                value,
                reason,
            } => write!(f, "{option} {value}: {reason}"),
            CliError::NoBackend => f.write_str(
                "no backend: name one (ramdisk, null, file PATH, nbd ADDRESS), or `backend` in the --config file",
            ),
            CliError::ReadConfig(path, _) => write!(f, "cannot read {}", path.display()),
            CliError::Config(path, why) => write!(f, "{}: {why}", path.display()),
            CliError::Bius(
                err @ bius::Error::Kernel {
                    op: ControlOp::Create | ControlOp::Recover,
                    ..
                },
            ) => write!(f, "{err}; see 'dmesg' for the kernel's reason"),
            CliError::Bius(err) => err.fmt(f),
            CliError::UnknownDevice(dev) => write!(f, "no bius device {dev}"),
            CliError::OpenFile(path, _) => write!(f, "cannot open {}", path.display()),
            CliError::FileTooSmall(path) => {
                write!(f, "{} is smaller than one block", path.display())
            }
            CliError::Nbd(err) => err.fmt(f),
            CliError::Stdout(_) => f.write_str("cannot write to standard output"),
            CliError::WriteManpages(dir, _) => {
                write!(f, "cannot write manual pages into {}", dir.display())
            }
            CliError::NoDisk(dev) => write!(f, "no disk {dev}"),
            CliError::NotZoned(dev) => write!(f, "{dev} is not a zoned block device"),
            CliError::DiskZones(dev, err) => write!(f, "{dev}: {err}"),
            CliError::Daemon(err) => err.fmt(f),
            CliError::TraceFailed {
                file,
                records,
                reason,
            } => {
                // The errno follows in the report.
                let reason = reason.split(" (os error").next().unwrap_or(reason);
                write!(
                    f,
                    "the trace into {file} stopped after {records} records: {reason}"
                )
            }
            CliError::Model(err) => err.fmt(f),
            CliError::ZoneState(err) => err.fmt(f),
            CliError::NotAllDestroyed { failed, .. } => {
                write!(f, "{failed} device(s) could not be destroyed")
            }
            CliError::NotDetached { device, state } => write!(
                f,
                "{device} did not detach: it is still {state} (see its daemon's log)"
            ),
        }
    }
}

/// The errno of a trace writer's error text (`... (os error N)`).
fn trace_errno(reason: &str) -> Errno {
    reason
        .rsplit_once("(os error ")
        .and_then(|(_, n)| n.trim_end_matches(')').parse().ok())
        .map_or(Errno::EIO, Errno::from_raw)
}

impl From<bius_model::ProfileError> for CliError {
    fn from(err: bius_model::ProfileError) -> Self {
        CliError::Model(err)
    }
}

impl From<bius::Error> for CliError {
    fn from(err: bius::Error) -> Self {
        CliError::Bius(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_have_no_errno_and_exit_2() {
        let err = CliError::Invalid {
            option: "--zone-size",
            value: "48M".into(),
            reason: "zone size must be a power of two".into(),
        };
        assert_eq!(
            err.report(),
            "biusctl: error: --zone-size 48M: zone size must be a power of two"
        );
        assert_eq!(err.exit_status(), EXIT_USAGE);
        assert_eq!(CliError::NoBackend.exit_status(), EXIT_USAGE);
    }

    #[test]
    fn runtime_errors_carry_their_errno_and_exit_1() {
        let err = CliError::Bius(bius::Error::ModuleNotLoaded(Errno::ENOENT));
        assert!(err.report().contains("modprobe bius"), "{}", err.report());
        assert!(err.report().ends_with(" (ENOENT)"), "{}", err.report());
        assert_eq!(err.exit_status(), EXIT_FAILURE);
        let err = CliError::Bius(bius::Error::Kernel {
            op: ControlOp::Create,
            errno: Errno::EINVAL,
        });
        let report = err.report();
        assert!(report.starts_with("biusctl: error: "), "{report}");
        assert!(
            report.ends_with("(EINVAL); see 'dmesg' for the kernel's reason"),
            "{report}"
        );
        let err = CliError::NotAllDestroyed {
            failed: 2,
            errno: Errno::EBUSY,
        };
        assert_eq!(
            err.report(),
            "biusctl: error: 2 device(s) could not be destroyed (EBUSY)"
        );
        let err = CliError::TraceFailed {
            file: "/full/t.bin".into(),
            records: 7,
            reason: "No space left on device (os error 28)".into(),
        };
        assert_eq!(err.exit_status(), EXIT_FAILURE);
        assert!(err.report().ends_with(" (ENOSPC)"), "{}", err.report());
        let err = CliError::NotDetached {
            device: "data".into(),
            state: bius::DeviceState::Live,
        };
        assert_eq!(
            err.report(),
            "biusctl: error: data did not detach: it is still live (see its daemon's log) (ETIMEDOUT)"
        );
        let err = CliError::Bius(bius::Error::Kernel {
            op: ControlOp::Recover,
            errno: Errno::EINVAL,
        });
        assert!(err
            .report()
            .ends_with("see 'dmesg' for the kernel's reason"));
        let err = CliError::UnknownDevice("bius9".into());
        assert_eq!(
            err.report(),
            "biusctl: error: no bius device bius9 (ENOENT)"
        );
    }

    #[test]
    fn each_error_says_what_failed() {
        let enospc = || io::Error::from_raw_os_error(Errno::ENOSPC as i32);
        for (err, message) in [
            (
                CliError::Invalid {
                    option: "--queues",
                    value: "0".into(),
                    reason: "must be 1 to 64".into(),
                },
                "--queues 0: must be 1 to 64",
            ),
            (
                CliError::NoBackend,
                "no backend: name one (ramdisk, null, file PATH, nbd ADDRESS), or `backend` in the --config file",
            ),
            (
                CliError::ReadConfig("/etc/bius/x.toml".into(), enospc()),
                "cannot read /etc/bius/x.toml",
            ),
            (
                CliError::Config("/etc/bius/x.toml".into(), "line 2: bad".into()),
                "/etc/bius/x.toml: line 2: bad",
            ),
            (
                CliError::Bius(bius::Error::Kernel {
                    op: ControlOp::Connect,
                    errno: Errno::EBUSY,
                }),
                "connecting a queue: Device or resource busy (EBUSY)",
            ),
            (
                CliError::Bius(bius::Error::Kernel {
                    op: ControlOp::Create,
                    errno: Errno::EINVAL,
                }),
                "creating the device: the kernel refused the parameters (EINVAL); see 'dmesg' for the kernel's reason",
            ),
            (CliError::UnknownDevice("x".into()), "no bius device x"),
            (
                CliError::OpenFile("/srv/d.img".into(), enospc()),
                "cannot open /srv/d.img",
            ),
            (
                CliError::FileTooSmall("/srv/d.img".into()),
                "/srv/d.img is smaller than one block",
            ),
            (
                CliError::Nbd(bius_backends::nbd::NbdError::ReadOnly),
                "NBD export is read-only",
            ),
            (
                CliError::Stdout(enospc()),
                "cannot write to standard output",
            ),
            (
                CliError::WriteManpages("/tmp/man".into(), enospc()),
                "cannot write manual pages into /tmp/man",
            ),
            (CliError::NoDisk("x".into()), "no disk x"),
            (
                CliError::NotZoned("bius0".into()),
                "bius0 is not a zoned block device",
            ),
            (
                CliError::DiskZones("/dev/bius0".into(), DiskZonesError::NotZoned),
                "/dev/bius0: not a zoned block device",
            ),
            (
                CliError::TraceFailed {
                    file: "/full/t.bin".into(),
                    records: 7,
                    reason: "No space left on device (os error 28)".into(),
                },
                "the trace into /full/t.bin stopped after 7 records: No space left on device",
            ),
            (
                CliError::Model(bius_model::ProfileError::new("units", "must be 1 or more")),
                "units: must be 1 or more",
            ),
            (
                CliError::ZoneState(bius_backends::ZoneStateError::InUse {
                    path: "/srv/d.zones".into(),
                }),
                "zone state file /srv/d.zones: in use by another process (another daemon of the disk?)",
            ),
            (
                CliError::NotDetached {
                    device: "data".into(),
                    state: bius::DeviceState::Live,
                },
                "data did not detach: it is still live (see its daemon's log)",
            ),
            (
                CliError::NotAllDestroyed {
                    failed: 2,
                    errno: Errno::EBUSY,
                },
                "2 device(s) could not be destroyed",
            ),
        ] {
            assert_eq!(err.to_string(), message, "{err:?}");
        }
    }
}
