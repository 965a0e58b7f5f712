//! `biusctl export nvme` and `biusctl unexport nvme`: a block device as
//! the namespace of an NVMe subsystem of the kernel's NVMe target
//! (nvmet), connected back to this host over `nvme-loop` or TCP on
//! 127.0.0.1, so that NVMe software (nvme-cli, io_uring passthrough on
//! `/dev/ngXnY`, SPDK's and xNVMe's kernel paths) can drive it; a zoned
//! device becomes a ZNS namespace.
//!
//! What nvmet cannot export is refused before anything is made
//! ([`check`]); a failure midway undoes what was made; `unexport`
//! removes everything `export` made: the controller, the subsystem with
//! its namespace, the port if it serves nothing else.  The export lives
//! in the kernel (configfs), not in a biusctl process: it is found again
//! there by its namespace's device.

mod check;
mod host;
mod target;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bius::zone::DiskZonesError;
use bius::Errno;
use serde::Serialize;

use check::DiskFacts;
pub use check::Refusal;
use host::Host;
use target::{Kernel, Nvmet, PortSpec, Tree, LOOPBACK};

/// nvmet's configfs tree.
const NVMET: &str = "/sys/kernel/config/nvmet";

/// The TCP port of a TCP export by default: NVMe/TCP's I/O port.
pub const DEFAULT_TCP_PORT: u16 = 4420;

/// The subsystem NQN of an export by default: this and the disk's name.
pub const NQN_PREFIX: &str = "nqn.2025-01.bius:";

/// How long `export` waits for the namespace to appear on the host.
const NAMESPACE_WAIT: Duration = Duration::from_secs(30);

/// How the host reaches the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// nvme-loop: in the kernel, no network (Linux 6.12 of Debian; not
    /// in Debian's 6.1).
    Loop,
    /// NVMe/TCP on 127.0.0.1.
    Tcp,
}

impl Transport {
    /// Its name in nvmet's `addr_trtype` and in the fabrics options.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Loop => "loop",
            Transport::Tcp => "tcp",
        }
    }

    /// The kernel modules it needs, target and host side (their
    /// dependencies, nvmet and nvme-fabrics, come with them).
    fn modules(self) -> &'static [&'static str] {
        match self {
            Transport::Loop => &["nvme-loop"],
            Transport::Tcp => &["nvmet-tcp", "nvme-tcp"],
        }
    }
}

/// The options of `biusctl export nvme`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// The transport [default: loop if the kernel has nvme-loop, else tcp].
    pub transport: Option<Transport>,
    /// The subsystem's NQN [default: [`NQN_PREFIX`] and the disk's name].
    pub nqn: Option<String>,
    /// For TCP, the port [default: [`DEFAULT_TCP_PORT`]]; implies TCP.
    pub port: Option<u16>,
}

/// An export, as `export` prints it and `info` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportReport {
    /// The subsystem's NQN.
    pub nqn: String,
    /// `loop` or `tcp`.
    pub transport: String,
    /// For TCP, `127.0.0.1:PORT`.
    pub address: Option<String>,
    /// The host's controller (`nvme1`), null if none is connected.
    pub controller: Option<String>,
    /// The namespace's block device (`/dev/nvme1n1`).
    pub block: Option<String>,
    /// The namespace's character device (`/dev/ng1n1`).
    pub char: Option<String>,
}

/// Why an export or unexport failed.
#[derive(Debug, thiserror::Error)]
pub enum NvmeError {
    /// The device could not be opened.
    #[error("cannot open {0}")]
    Open(PathBuf, io::Error),
    /// The path is no block device.
    #[error("{0} is not a block device")]
    NotBlock(PathBuf),
    /// A sysfs attribute could not be read.
    #[error("cannot read {0}")]
    Sysfs(PathBuf, io::Error),
    /// The zones of a zoned device could not be read.
    #[error("{0}: {1}")]
    Zones(String, DiskZonesError),
    /// nvmet cannot export the device.
    #[error("the NVMe target cannot export {device}: {refusal}")]
    Refused {
        /// The device as given.
        device: String,
        /// Why.
        refusal: Refusal,
    },
    /// A kernel module could not be loaded.
    #[error("cannot load the kernel module {module}: {reason}")]
    Module {
        /// Its name.
        module: &'static str,
        /// What modprobe said.
        reason: String,
    },
    /// nvmet's configfs tree is missing.
    #[error("no {0}: is configfs mounted (mount -t configfs none /sys/kernel/config)?")]
    NoConfigfs(PathBuf),
    /// A step in configfs failed.
    #[error("cannot change {0}")]
    Configfs(PathBuf, io::Error),
    /// nvmet did not enable the namespace.
    #[error(
        "the NVMe target did not enable a namespace on {0}; see 'dmesg' for the kernel's reason"
    )]
    Enable(PathBuf, io::Error),
    /// nvmet did not serve the subsystem on the port.
    #[error("the NVMe target cannot serve on {0} (a TCP port in use?); see 'dmesg'")]
    Port(PathBuf, io::Error),
    /// The NQN names a subsystem already.
    #[error("an NVMe subsystem {0} exists already: choose another --nqn")]
    NqnTaken(String),
    /// The device is exported already.
    #[error("{device} is exported already, as {nqn}")]
    AlreadyExported {
        /// The device as given.
        device: String,
        /// Its subsystem.
        nqn: String,
    },
    /// `unexport` of a device that is not exported.
    #[error("{0} is not exported")]
    NotExported(String),
    /// The host could not connect: the options written, and why.
    #[error("cannot connect a controller to the NVMe target ({0}); see 'dmesg'")]
    Connect(String, io::Error),
    /// The controller showed no namespace in time.
    #[error("{controller} showed no namespace within {secs} s; see 'dmesg'")]
    NoNamespace {
        /// The controller (`nvme1`).
        controller: String,
        /// The wait.
        secs: u64,
    },
    /// A controller could not be deleted.
    #[error("cannot delete the controller {0}")]
    Disconnect(String, io::Error),
}

impl NvmeError {
    /// The errno of the failure.
    pub fn errno(&self) -> Errno {
        let of_io = |err: &io::Error| err.raw_os_error().map_or(Errno::EIO, Errno::from_raw);
        match self {
            NvmeError::Open(_, err)
            | NvmeError::Sysfs(_, err)
            | NvmeError::Configfs(_, err)
            | NvmeError::Enable(_, err)
            | NvmeError::Port(_, err)
            | NvmeError::Connect(_, err)
            | NvmeError::Disconnect(_, err) => of_io(err),
            NvmeError::NotBlock(_) => Errno::ENOTBLK,
            NvmeError::Zones(_, err) => err.errno(),
            NvmeError::Refused { refusal, .. } => refusal.errno(),
            NvmeError::Module { .. } | NvmeError::NoConfigfs(_) | NvmeError::NotExported(_) => {
                Errno::ENOENT
            }
            NvmeError::NqnTaken(_) | NvmeError::AlreadyExported { .. } => Errno::EEXIST,
            NvmeError::NoNamespace { .. } => Errno::ETIMEDOUT,
        }
    }
}

/// Whether `nqn` can name a subsystem: nvmet takes up to 223 bytes
/// (`NVMF_NQN_SIZE`) as a configfs directory name, and the fabrics
/// options are `key=value` pairs separated by commas.
pub fn check_nqn(nqn: &str) -> Result<(), String> {
    if nqn.is_empty() || nqn.len() > 223 {
        return Err("an NQN has 1 to 223 bytes".into());
    }
    if !nqn
        .bytes()
        .all(|b| b.is_ascii_graphic() && !b"/,=".contains(&b))
    {
        return Err("an NQN has printable ASCII characters, no space, '/', ',' or '='".into());
    }
    if nqn == "nqn.2014-08.org.nvmexpress.discovery" {
        return Err("that is the discovery subsystem's NQN".into());
    }
    Ok(())
}

/// The kernel side of exports: nvmet's tree, the host, and how modules
/// are loaded.
pub struct System<T: Tree> {
    nvmet: Nvmet<T>,
    nvmet_root: PathBuf,
    host: Host,
    modprobe: fn(&str) -> Result<(), String>,
}

impl System<Kernel> {
    /// This machine's.
    pub fn kernel() -> Self {
        System {
            nvmet: Nvmet::new(Kernel, NVMET),
            nvmet_root: NVMET.into(),
            host: Host::new(),
            modprobe,
        }
    }
}

/// Runs `modprobe NAME`; on failure, what it said.
fn modprobe(name: &str) -> Result<(), String> {
    let output = Command::new("modprobe")
        .arg(name)
        .output()
        .map_err(|err| format!("cannot run modprobe: {err}"))?;
    match output.status.success() {
        true => Ok(()),
        false => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let last = stderr.lines().last().unwrap_or("").trim();
            Err(match last {
                "" => format!("modprobe {name}: {}", output.status),
                line => line.to_string(),
            })
        }
    }
}

impl<T: Tree> System<T> {
    /// Exports the block device `device` (as given: `shown`); returns
    /// the export, its namespace on the host included.
    pub fn export(
        &self,
        device: &Path,
        shown: &str,
        options: &ExportOptions,
    ) -> Result<ExportReport, NvmeError> {
        let facts = DiskFacts::read(&self.host.sys, device)?;
        if let Some(refusal) = facts.refusal() {
            return Err(NvmeError::Refused {
                device: shown.into(),
                refusal,
            });
        }
        let transport = match (options.transport, options.port) {
            (Some(transport), _) => transport,
            (None, Some(_)) => Transport::Tcp,
            (None, None) => match (self.modprobe)("nvme-loop") {
                Ok(()) => Transport::Loop,
                Err(reason) => {
                    log::info!("no nvme-loop ({reason}): exporting over tcp");
                    Transport::Tcp
                }
            },
        };
        for &module in transport.modules() {
            (self.modprobe)(module).map_err(|reason| NvmeError::Module { module, reason })?;
        }
        if !self.nvmet_root.is_dir() {
            return Err(NvmeError::NoConfigfs(self.nvmet_root.clone()));
        }
        let device = std::fs::canonicalize(device)
            .map_err(|err| NvmeError::Open(device.to_path_buf(), err))?;
        if let Some((nqn, _)) = self.exports_of(&device)?.into_iter().next() {
            return Err(NvmeError::AlreadyExported {
                device: shown.into(),
                nqn,
            });
        }
        let nqn = match &options.nqn {
            Some(nqn) => nqn.clone(),
            None => format!("{NQN_PREFIX}{}", facts.name),
        };
        let spec = PortSpec {
            transport,
            tcp_port: (transport == Transport::Tcp)
                .then(|| options.port.unwrap_or(DEFAULT_TCP_PORT)),
        };
        self.nvmet.create(&nqn, &device, &spec)?;
        let connected = self
            .host
            .connect(&fabrics_options(&nqn, &spec))
            .and_then(|instance| {
                self.host
                    .wait_namespace(instance, NAMESPACE_WAIT)
                    .inspect_err(|_| self.disconnect_quietly(instance))
                    .map(|ns| (instance, ns))
            });
        let (instance, ns) = connected.inspect_err(|_| {
            if let Err(err) = self.nvmet.remove(&nqn) {
                log::warn!("cannot remove the NVMe subsystem {nqn}: {err}");
            }
        })?;
        Ok(ExportReport {
            nqn,
            transport: transport.name().into(),
            address: spec.tcp_port.map(|port| format!("{LOOPBACK}:{port}")),
            controller: Some(format!("nvme{instance}")),
            block: Some(self.host.dev_path(&ns.block).display().to_string()),
            char: Some(self.host.dev_path(&ns.char).display().to_string()),
        })
    }

    /// Deletes a controller, logging a failure (while undoing).
    fn disconnect_quietly(&self, instance: u32) {
        if let Err(err) = self.host.disconnect(instance) {
            log::warn!("{err}");
        }
    }

    /// Undoes every export of `device` (as given: `shown`).
    pub fn unexport(&self, device: &Path, shown: &str) -> Result<(), NvmeError> {
        let device = std::fs::canonicalize(device)
            .map_err(|err| NvmeError::Open(device.to_path_buf(), err))?;
        let exports = self.exports_of(&device)?;
        if exports.is_empty() {
            return Err(NvmeError::NotExported(shown.into()));
        }
        for (nqn, _) in exports {
            for instance in self.host.controllers_of(&nqn) {
                self.host.disconnect(instance)?;
            }
            self.nvmet.remove(&nqn)?;
        }
        Ok(())
    }

    /// The exports of `device` (a canonical path): none if nvmet is not
    /// loaded.
    pub fn exported(&self, device: &Path) -> Result<Vec<ExportReport>, NvmeError> {
        let ports = self.nvmet.ports()?;
        Ok(self
            .exports_of(device)?
            .into_iter()
            .map(|(nqn, _)| {
                let port = ports.iter().find(|p| p.subsystems.contains(&nqn));
                let instance = self.host.controllers_of(&nqn).into_iter().next();
                let ns = instance.and_then(|i| self.host.namespace(i));
                let dev = |name: &str| self.host.dev_path(name).display().to_string();
                ExportReport {
                    transport: port.map_or("none".into(), |p| p.trtype.clone()),
                    address: port
                        .filter(|p| p.trtype == "tcp")
                        .map(|p| format!("{}:{}", p.traddr, p.trsvcid)),
                    controller: instance.map(|i| format!("nvme{i}")),
                    block: ns.as_ref().map(|ns| dev(&ns.block)),
                    char: ns.as_ref().map(|ns| dev(&ns.char)),
                    nqn,
                }
            })
            .collect())
    }

    /// The subsystems with a namespace on `device` (a canonical path),
    /// with its namespaces' device paths.
    fn exports_of(&self, device: &Path) -> Result<Vec<(String, Vec<String>)>, NvmeError> {
        let mut subsystems = self.nvmet.subsystems()?;
        subsystems.retain(|(_, paths)| paths.iter().any(|p| same_device(Path::new(p), device)));
        Ok(subsystems)
    }
}

/// Whether two paths are the same device: the same path, or the same
/// device number.
fn same_device(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;

    a == b
        || match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.rdev() != 0 && a.rdev() == b.rdev(),
            _ => false,
        }
}

/// The options `/dev/nvme-fabrics` takes to connect to subsystem `nqn`
/// through the port of `spec` (host `fabrics.c`, `opt_tokens`).
fn fabrics_options(nqn: &str, spec: &PortSpec) -> String {
    match spec.tcp_port {
        Some(port) => format!("transport=tcp,traddr={LOOPBACK},trsvcid={port},nqn={nqn}"),
        None => format!("transport={},nqn={nqn}", spec.transport.name()),
    }
}
