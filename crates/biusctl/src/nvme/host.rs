//! The host side of an export: the NVMe-over-Fabrics controller that
//! connects this host to the target's subsystem, and the namespace's
//! block and character devices it brings.
//!
//! A controller is made as nvme-cli's `nvme connect` makes it (libnvme's
//! `nvmf_add_ctrl`): one write of the options (`transport=tcp,traddr=...,
//! trsvcid=...,nqn=...`) to `/dev/nvme-fabrics`, and one read of the
//! answer `instance=N,cntlid=M` from the same file (Linux's
//! `drivers/nvme/host/fabrics.c`, `nvmf_dev_write`, `nvmf_dev_show`).
//! Doing it here spares biusctl a dependency on nvme-cli and on its
//! output, and gives the controller's instance with no guessing.  A
//! controller is deleted by writing to its `delete_controller` (host
//! `sysfs.c`), which returns once it is gone.
//!
//! The namespace's names (host `core.c`, `nvme_alloc_ns`, and
//! `multipath.c`): with native multipath (Debian's default, and what
//! nvmet's multi-controller subsystems get) the controller's sysfs
//! directory holds the hidden path disk `nvme<S>c<N>n<K>` and the
//! namespace is `/dev/nvme<S>n<K>` with its character device
//! `/dev/ng<S>n<K>` (S: the subsystem's instance); without it, the
//! controller's directory holds `nvme<X>n<K>` and `ng<N>n<K>`.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use super::NvmeError;

/// How often a wait looks.
const POLL: Duration = Duration::from_millis(50);

/// The host side: sysfs and `/dev`, at their roots.
pub struct Host {
    /// `/sys`.
    pub sys: PathBuf,
    /// `/dev`.
    pub dev: PathBuf,
}

/// A namespace's devices, as names under `/dev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// The block device (`nvme1n1`).
    pub block: String,
    /// The character device for passthrough (`ng1n1`).
    pub char: String,
}

impl Host {
    /// The host of this machine.
    pub fn new() -> Self {
        Host {
            sys: "/sys".into(),
            dev: "/dev".into(),
        }
    }

    /// The sysfs directory of controller `nvmeN`.
    fn controller(&self, instance: u32) -> PathBuf {
        self.sys.join(format!("class/nvme/nvme{instance}"))
    }

    /// Connects a controller with the fabrics `options`; returns its
    /// instance (N of `/dev/nvmeN`).
    pub fn connect(&self, options: &str) -> Result<u32, NvmeError> {
        let path = self.dev.join("nvme-fabrics");
        let failed = |err| NvmeError::Connect(options.into(), err);
        let mut fabrics = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(failed)?;
        // One write: the kernel parses what one write gives it.
        let written = fabrics.write(options.as_bytes()).map_err(failed)?;
        if written != options.len() {
            return Err(failed(io::Error::from(io::ErrorKind::WriteZero)));
        }
        let mut answer = String::new();
        fabrics.read_to_string(&mut answer).map_err(failed)?;
        instance_of(&answer)
            .ok_or_else(|| failed(io::Error::new(io::ErrorKind::InvalidData, answer)))
    }

    /// The instances of the controllers connected to subsystem `nqn`.
    pub fn controllers_of(&self, nqn: &str) -> Vec<u32> {
        let Ok(entries) = fs::read_dir(self.sys.join("class/nvme")) else {
            return Vec::new();
        };
        let mut found: Vec<u32> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let instance = name.strip_prefix("nvme")?.parse().ok()?;
                let subsysnqn = fs::read_to_string(entry.path().join("subsysnqn")).ok()?;
                (subsysnqn.trim() == nqn).then_some(instance)
            })
            .collect();
        found.sort();
        found
    }

    /// The namespace controller `nvmeN` shows, if it shows one yet.
    pub fn namespace(&self, instance: u32) -> Option<Namespace> {
        let names: Vec<String> = fs::read_dir(self.controller(instance))
            .ok()?
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.iter().find_map(|name| {
            let (head, k) = name.strip_prefix("nvme")?.split_once('n')?;
            k.parse::<u32>().ok()?;
            match head.split_once('c') {
                // the hidden path of a multipath namespace
                Some((subsys, _)) => Some(Namespace {
                    block: format!("nvme{subsys}n{k}"),
                    char: format!("ng{subsys}n{k}"),
                }),
                None => {
                    let char = format!("ng{instance}n{k}");
                    names.contains(&char).then(|| Namespace {
                        block: name.clone(),
                        char,
                    })
                }
            }
        })
    }

    /// Waits up to `limit` for controller `nvmeN`'s namespace and its
    /// device files.
    pub fn wait_namespace(&self, instance: u32, limit: Duration) -> Result<Namespace, NvmeError> {
        let start = Instant::now();
        loop {
            if let Some(ns) = self.namespace(instance) {
                if self.dev.join(&ns.block).exists() && self.dev.join(&ns.char).exists() {
                    return Ok(ns);
                }
            }
            if start.elapsed() >= limit {
                return Err(NvmeError::NoNamespace {
                    controller: format!("nvme{instance}"),
                    secs: limit.as_secs(),
                });
            }
            thread::sleep(POLL);
        }
    }

    /// Deletes controller `nvmeN` (gone already: done).
    pub fn disconnect(&self, instance: u32) -> Result<(), NvmeError> {
        let path = self.controller(instance).join("delete_controller");
        match fs::write(&path, "1") {
            Err(err) if err.kind() != io::ErrorKind::NotFound => {
                Err(NvmeError::Disconnect(format!("nvme{instance}"), err))
            }
            _ => Ok(()),
        }
    }

    /// The path of a name under `/dev`.
    pub fn dev_path(&self, name: &str) -> PathBuf {
        self.dev.join(name)
    }
}

/// N of the answer `instance=N,cntlid=M`; `None` for `instance=-1`, the
/// answer of no controller.
fn instance_of(answer: &str) -> Option<u32> {
    answer
        .trim()
        .split(',')
        .find_map(|field| field.strip_prefix("instance="))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().unwrap();
        let host = Host {
            sys: dir.path().join("sys"),
            dev: dir.path().join("dev"),
        };
        fs::create_dir_all(&host.dev).unwrap();
        (dir, host)
    }

    fn controller(host: &Host, instance: u32, nqn: &str, children: &[&str]) {
        let dir = host.controller(instance);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("subsysnqn"), format!("{nqn}\n")).unwrap();
        for child in children {
            fs::create_dir(dir.join(child)).unwrap();
        }
    }

    #[test]
    fn the_answer_of_nvme_fabrics_gives_the_instance() {
        assert_eq!(instance_of("instance=3,cntlid=1\n"), Some(3));
        assert_eq!(instance_of("instance=-1,cntlid=-1,transport=%s"), None);
        assert_eq!(instance_of(""), None);
    }

    #[test]
    fn a_multipath_namespace_is_named_after_its_subsystem() {
        let (_dir, host) = host();
        controller(&host, 2, "nqn.x", &["nvme1c2n1", "power"]);
        let ns = host.namespace(2).unwrap();
        assert_eq!(ns.block, "nvme1n1");
        assert_eq!(ns.char, "ng1n1");
        assert!(host.wait_namespace(2, Duration::ZERO).is_err());
        fs::write(host.dev.join("nvme1n1"), "").unwrap();
        fs::write(host.dev.join("ng1n1"), "").unwrap();
        assert_eq!(host.wait_namespace(2, Duration::ZERO).unwrap(), ns);
    }

    #[test]
    fn a_private_namespace_is_named_after_its_controller() {
        let (_dir, host) = host();
        controller(&host, 4, "nqn.y", &["nvme4n1"]);
        assert_eq!(host.namespace(4), None, "no character device yet");
        fs::create_dir(host.controller(4).join("ng4n1")).unwrap();
        let ns = host.namespace(4).unwrap();
        assert_eq!((ns.block.as_str(), ns.char.as_str()), ("nvme4n1", "ng4n1"));
    }

    #[test]
    fn controllers_are_found_by_their_subsystem() {
        let (_dir, host) = host();
        controller(&host, 0, "nqn.other", &[]);
        controller(&host, 3, "nqn.mine", &[]);
        controller(&host, 1, "nqn.mine", &[]);
        assert_eq!(host.controllers_of("nqn.mine"), vec![1, 3]);
        assert!(host.controllers_of("nqn.none").is_empty());
        let err = host.wait_namespace(1, Duration::ZERO).unwrap_err();
        assert!(err.to_string().contains("nvme1"), "{err}");
    }

    #[test]
    fn disconnecting_writes_delete_controller() {
        let (_dir, host) = host();
        controller(&host, 5, "nqn.z", &[]);
        host.disconnect(5).unwrap();
        let written = fs::read_to_string(host.controller(5).join("delete_controller"));
        assert_eq!(written.unwrap(), "1");
        // a controller gone already is disconnected
        host.disconnect(9).unwrap();
    }

    #[test]
    fn no_fabrics_device_no_connection() {
        let (_dir, host) = host();
        let err = host.connect("transport=loop,nqn=x").unwrap_err();
        assert!(matches!(err, NvmeError::Connect(..)));
    }
}
