//! The kernel's NVMe target (nvmet) as its configfs tree
//! (`/sys/kernel/config/nvmet`) shows it: the subsystems with their
//! namespaces, the ports and the links between them; creating an export
//! there (undone step by step if a step fails) and removing it.
//!
//! The layout is Linux's `drivers/nvme/target/configfs.c` (6.1 and
//! 6.12): `subsystems/NQN/` (with the default groups `namespaces/` and
//! `allowed_hosts/`, attribute `attr_allow_any_host`),
//! `subsystems/NQN/namespaces/NSID/` (`device_path`, `enable`),
//! `ports/ID/` (`addr_trtype`, `addr_adrfam`, `addr_traddr`,
//! `addr_trsvcid`, default groups `subsystems/`, `referrals/`), and a
//! port serves a subsystem through a symbolic link
//! `ports/ID/subsystems/NQN -> subsystems/NQN`; the first link enables
//! the port (a TCP port then listens).  Removing a group (`rmdir`) takes
//! its default groups with it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{NvmeError, Transport};

/// The namespace id of an export: its subsystem has one namespace.
pub const NSID: u32 = 1;

/// The address every TCP export listens on: this host only.
pub const LOOPBACK: &str = "127.0.0.1";

/// The operations on configfs that nvmet's tree needs: the kernel's
/// (`Kernel`), or a stand-in in the tests.
pub trait Tree {
    /// `mkdir`: makes a group.
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// `rmdir`: removes a group and its default groups.
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// Writes an attribute.
    fn write(&self, path: &Path, value: &str) -> io::Result<()>;
    /// Reads an attribute.
    fn read(&self, path: &Path) -> io::Result<String>;
    /// Makes the symbolic link `link` to `target`.
    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()>;
    /// Removes the symbolic link `link`.
    fn unlink(&self, link: &Path) -> io::Result<()>;
    /// The names in a directory (empty if it does not exist).
    fn entries(&self, dir: &Path) -> io::Result<Vec<String>>;
}

/// The kernel's configfs.
pub struct Kernel;

impl Tree for Kernel {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        fs::write(path, value)
    }
    fn read(&self, path: &Path) -> io::Result<String> {
        fs::read_to_string(path).map(|text| text.trim_end_matches('\n').to_string())
    }
    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        std::os::unix::fs::symlink(target, link)
    }
    fn unlink(&self, link: &Path) -> io::Result<()> {
        fs::remove_file(link)
    }
    fn entries(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = match fs::read_dir(dir) {
            Ok(entries) => entries
                .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect::<io::Result<Vec<_>>>()?,
            Err(err) if err.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(err) => return Err(err),
        };
        names.sort();
        Ok(names)
    }
}

/// A port: how a host reaches the subsystems linked to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    /// The transport.
    pub transport: Transport,
    /// For TCP: the port number on [`LOOPBACK`].
    pub tcp_port: Option<u16>,
}

/// A port of the tree: its id, address and linked subsystems.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Its directory's name.
    pub id: String,
    /// `addr_trtype`.
    pub trtype: String,
    /// `addr_traddr`.
    pub traddr: String,
    /// `addr_trsvcid`.
    pub trsvcid: String,
    /// The NQNs of the subsystems it serves.
    pub subsystems: Vec<String>,
}

impl Port {
    /// Whether it is the port `spec` asks for.
    fn is(&self, spec: &PortSpec) -> bool {
        match spec.transport {
            Transport::Loop => self.trtype == "loop",
            Transport::Tcp => {
                self.trtype == "tcp"
                    && self.traddr == LOOPBACK
                    && Some(self.trsvcid.as_str())
                        == spec.tcp_port.map(|p| p.to_string()).as_deref()
            }
        }
    }
}

/// One step done, and how to undo it.
enum Undo {
    Rmdir(PathBuf),
    Disable(PathBuf),
    Unlink(PathBuf),
}

/// nvmet's configfs tree at a root (`/sys/kernel/config/nvmet`).
pub struct Nvmet<T: Tree> {
    tree: T,
    root: PathBuf,
}

impl<T: Tree> Nvmet<T> {
    /// The tree at `root`.
    pub fn new(tree: T, root: impl Into<PathBuf>) -> Self {
        Nvmet {
            tree,
            root: root.into(),
        }
    }

    /// The path of `rel` in the tree.
    fn at(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root.join(rel)
    }

    /// An error of the step on `path`.
    fn failed(path: &Path) -> impl FnOnce(io::Error) -> NvmeError + '_ {
        move |err| NvmeError::Configfs(path.to_path_buf(), err)
    }

    /// The NQNs of the subsystems, each with the device paths of its
    /// namespaces.
    pub fn subsystems(&self) -> Result<Vec<(String, Vec<String>)>, NvmeError> {
        let dir = self.at("subsystems");
        let nqns = self.tree.entries(&dir).map_err(Self::failed(&dir))?;
        nqns.into_iter()
            .map(|nqn| {
                let namespaces = self.at(format!("subsystems/{nqn}/namespaces"));
                let ids = self
                    .tree
                    .entries(&namespaces)
                    .map_err(Self::failed(&namespaces))?;
                let paths = ids
                    .iter()
                    .map(|id| {
                        let attr = namespaces.join(id).join("device_path");
                        self.tree.read(&attr).map_err(Self::failed(&attr))
                    })
                    .collect::<Result<_, _>>()?;
                Ok((nqn, paths))
            })
            .collect()
    }

    /// The ports.
    pub fn ports(&self) -> Result<Vec<Port>, NvmeError> {
        let dir = self.at("ports");
        let ids = self.tree.entries(&dir).map_err(Self::failed(&dir))?;
        ids.into_iter()
            .map(|id| {
                let attr = |name: &str| {
                    let path = dir.join(&id).join(name);
                    self.tree.read(&path).map_err(Self::failed(&path))
                };
                let subsystems = dir.join(&id).join("subsystems");
                Ok(Port {
                    trtype: attr("addr_trtype")?,
                    traddr: attr("addr_traddr")?,
                    trsvcid: attr("addr_trsvcid")?,
                    subsystems: self
                        .tree
                        .entries(&subsystems)
                        .map_err(Self::failed(&subsystems))?,
                    id,
                })
            })
            .collect()
    }

    /// Creates subsystem `nqn` with namespace [`NSID`] on `device` and
    /// serves it on the port of `spec` (one already there, or a new one):
    /// all of it, or, if a step fails, nothing (the steps done are
    /// undone).  Returns the port's id.
    pub fn create(&self, nqn: &str, device: &Path, spec: &PortSpec) -> Result<String, NvmeError> {
        let mut done = Vec::new();
        let result = self.create_steps(nqn, device, spec, &mut done);
        if result.is_err() {
            self.undo(done);
        }
        result
    }

    fn create_steps(
        &self,
        nqn: &str,
        device: &Path,
        spec: &PortSpec,
        done: &mut Vec<Undo>,
    ) -> Result<String, NvmeError> {
        let subsys = self.at(format!("subsystems/{nqn}"));
        self.tree.mkdir(&subsys).map_err(|err| match err.kind() {
            io::ErrorKind::AlreadyExists => NvmeError::NqnTaken(nqn.into()),
            _ => NvmeError::Configfs(subsys.clone(), err),
        })?;
        done.push(Undo::Rmdir(subsys.clone()));
        self.set(&subsys.join("attr_allow_any_host"), "1")?;
        let ns = subsys.join(format!("namespaces/{NSID}"));
        self.tree.mkdir(&ns).map_err(Self::failed(&ns))?;
        done.push(Undo::Rmdir(ns.clone()));
        self.set(&ns.join("device_path"), &device.to_string_lossy())?;
        let enable = ns.join("enable");
        self.tree
            .write(&enable, "1")
            .map_err(|err| NvmeError::Enable(device.to_path_buf(), err))?;
        done.push(Undo::Disable(enable));

        let port = match self.ports()?.into_iter().find(|port| port.is(spec)) {
            Some(port) => self.at(format!("ports/{}", port.id)),
            None => {
                let port = self.at(format!("ports/{}", self.free_port_id()?));
                self.tree.mkdir(&port).map_err(Self::failed(&port))?;
                done.push(Undo::Rmdir(port.clone()));
                self.set(&port.join("addr_trtype"), spec.transport.name())?;
                if let Some(tcp_port) = spec.tcp_port {
                    self.set(&port.join("addr_adrfam"), "ipv4")?;
                    self.set(&port.join("addr_traddr"), LOOPBACK)?;
                    self.set(&port.join("addr_trsvcid"), &tcp_port.to_string())?;
                }
                port
            }
        };
        let link = port.join("subsystems").join(nqn);
        self.tree
            .symlink(&subsys, &link)
            .map_err(|err| NvmeError::Port(port.clone(), err))?;
        done.push(Undo::Unlink(link));
        Ok(port
            .file_name()
            .map(|id| id.to_string_lossy().into_owned())
            .unwrap_or_default())
    }

    /// Writes an attribute; a failure names it.
    fn set(&self, path: &Path, value: &str) -> Result<(), NvmeError> {
        self.tree.write(path, value).map_err(Self::failed(path))
    }

    /// The smallest port id not in use (nvmet takes 0 to 65535).
    fn free_port_id(&self) -> Result<u16, NvmeError> {
        let dir = self.at("ports");
        let used = self.tree.entries(&dir).map_err(Self::failed(&dir))?;
        (1..=u16::MAX)
            .find(|id| !used.contains(&id.to_string()))
            .ok_or_else(|| {
                NvmeError::Configfs(
                    dir,
                    io::Error::from_raw_os_error(bius::Errno::ENOSPC as i32),
                )
            })
    }

    /// Undoes steps, the last first; a step that cannot be undone is
    /// logged, and the others are still undone.
    fn undo(&self, done: Vec<Undo>) {
        for step in done.into_iter().rev() {
            let (what, result, path) = match step {
                Undo::Rmdir(path) => ("rmdir", self.tree.rmdir(&path), path),
                Undo::Disable(path) => ("disable", self.tree.write(&path, "0"), path),
                Undo::Unlink(path) => ("unlink", self.tree.unlink(&path), path),
            };
            if let Err(err) = result {
                log::warn!("cannot undo ({what}) {}: {err}", path.display());
            }
        }
    }

    /// Removes subsystem `nqn`: its links from the ports (and the ports
    /// then serving nothing), its namespaces and itself.
    pub fn remove(&self, nqn: &str) -> Result<(), NvmeError> {
        for port in self.ports()? {
            if !port.subsystems.iter().any(|s| s == nqn) {
                continue;
            }
            let dir = self.at(format!("ports/{}", port.id));
            let link = dir.join("subsystems").join(nqn);
            self.tree.unlink(&link).map_err(Self::failed(&link))?;
            let referrals = dir.join("referrals");
            let idle = port.subsystems.len() == 1
                && self
                    .tree
                    .entries(&referrals)
                    .map_err(Self::failed(&referrals))?
                    .is_empty();
            if idle {
                self.tree.rmdir(&dir).map_err(Self::failed(&dir))?;
            }
        }
        let subsys = self.at(format!("subsystems/{nqn}"));
        let namespaces = subsys.join("namespaces");
        for id in self
            .tree
            .entries(&namespaces)
            .map_err(Self::failed(&namespaces))?
        {
            let ns = namespaces.join(id);
            self.set(&ns.join("enable"), "0")?;
            self.tree.rmdir(&ns).map_err(Self::failed(&ns))?;
        }
        self.tree.rmdir(&subsys).map_err(Self::failed(&subsys))
    }
}
