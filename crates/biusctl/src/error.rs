//! Why a command failed, and the exit status that says so.

use std::io;
use std::path::PathBuf;

use bius::zone::DiskZonesError;
use bius::{ControlOp, Errno};

/// Exit status of a runtime failure.
pub const EXIT_FAILURE: u8 = 1;
/// Exit status of an invalid command line or config file.
pub const EXIT_USAGE: u8 = 2;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An option's value is invalid, alone or with the others.
    #[error("{option} {value}: {reason}")]
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
    #[error(
        "no backend: name one (ramdisk, null, file PATH, nbd ADDRESS), or `backend` in the --config file"
    )]
    NoBackend,
    /// The config file could not be read.
    #[error("cannot read {0}")]
    ReadConfig(PathBuf, io::Error),
    /// The config file is not valid: where, and why.
    #[error("{0}: {1}")]
    Config(PathBuf, String),
    /// From the bius framework.
    #[error("{0}{hint}", hint = dmesg_hint(.0))]
    Bius(bius::Error),
    /// No device has this id, name or path.
    #[error("no bius device {0}")]
    UnknownDevice(String),
    /// The backing file could not be opened.
    #[error("cannot open {0}")]
    OpenFile(PathBuf, io::Error),
    /// The backing file is smaller than one block.
    #[error("{0} is smaller than one block")]
    FileTooSmall(PathBuf),
    /// The NBD server could not be reached, or refused the export.
    #[error("{0}")]
    Nbd(bius_backends::nbd::NbdError),
    /// Standard output is gone.
    #[error("cannot write to standard output")]
    Stdout(io::Error),
    /// The manual pages could not be written.
    #[error("cannot write manual pages into {0}")]
    WriteManpages(PathBuf, io::Error),
    /// No disk has this name or path.
    #[error("no disk {0}")]
    NoDisk(String),
    /// The disk is not zoned.
    #[error("{0} is not a zoned block device")]
    NotZoned(String),
    /// Reading a disk's zones failed.
    #[error("{0}: {1}")]
    DiskZones(String, DiskZonesError),
    /// A request to a device's daemon (statistics, trace, fault) failed.
    #[error("{0}")]
    Daemon(bius::control_socket::ClientError),
    /// A trace ended early: its file, the records written, and why.
    // (the errno follows in the report)
    #[error(
        "the trace into {file} stopped after {records} records: {}",
        without_os_error(reason)
    )]
    TraceFailed {
        /// The trace file.
        file: String,
        /// Records written before the failure.
        records: u64,
        /// The writer's error.
        reason: String,
    },
    /// A device model's value is invalid (the parameter, and why).
    #[error("{0}")]
    Model(bius_model::ProfileError),
    /// A zoned file's zone state file cannot be used.
    #[error("{0}")]
    ZoneState(bius_backends::ZoneStateError),
    /// `export nvme` or `unexport nvme` failed.
    #[error("{0}")]
    Nvme(crate::nvme::NvmeError),
    /// `detach`: the device did not become recovering in time.
    #[error("{device} did not detach: it is still {state} (see its daemon's log)")]
    NotDetached {
        /// The device as given.
        device: String,
        /// Its state when the wait ended.
        state: bius::DeviceState,
    },
    /// `destroy --all`: some devices remain (each failure was reported).
    #[error("{failed} device(s) could not be destroyed")]
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
            CliError::Nvme(err) => err.errno(),
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

/// Where to look when the kernel refused to create or recover a device.
fn dmesg_hint(err: &bius::Error) -> &'static str {
    match err {
        bius::Error::Kernel {
            op: ControlOp::Create | ControlOp::Recover,
            ..
        } => "; see 'dmesg' for the kernel's reason",
        _ => "",
    }
}

/// A trace writer's error text without its `(os error N)`.
fn without_os_error(reason: &str) -> &str {
    reason.split(" (os error").next().unwrap_or(reason)
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

impl From<crate::nvme::NvmeError> for CliError {
    fn from(err: crate::nvme::NvmeError) -> Self {
        CliError::Nvme(err)
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
