//! The export's configfs steps against a stand-in for nvmet's configfs
//! tree: what a mkdir makes (default groups, attributes), what nvmet
//! refuses, and that a failure midway leaves the tree as it was.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::target::{Nvmet, PortSpec, Tree, NSID};
use super::*;

/// nvmet's configfs as far as an export uses it, in memory: directories,
/// attributes and links under a root.
struct FakeNvmet {
    root: PathBuf,
    dirs: RefCell<BTreeSet<PathBuf>>,
    /// Default groups: removed with their parent, never by themselves.
    defaults: RefCell<BTreeSet<PathBuf>>,
    attrs: RefCell<BTreeMap<PathBuf, String>>,
    links: RefCell<BTreeMap<PathBuf, PathBuf>>,
    /// A path whose step fails with `EIO` (a mkdir, write or link).
    fail: RefCell<Option<PathBuf>>,
    /// Device paths whose namespace nvmet will not enable (`EINVAL`).
    refuse: RefCell<BTreeSet<String>>,
}

fn err(errno: Errno) -> io::Error {
    io::Error::from_raw_os_error(errno as i32)
}

impl FakeNvmet {
    fn new(root: &Path) -> Self {
        let fake = FakeNvmet {
            root: root.into(),
            dirs: Default::default(),
            defaults: Default::default(),
            attrs: Default::default(),
            links: Default::default(),
            fail: Default::default(),
            refuse: Default::default(),
        };
        for dir in ["", "subsystems", "ports", "hosts"] {
            fake.add_default(&root.join(dir));
        }
        fake
    }

    fn add_default(&self, path: &Path) {
        self.dirs.borrow_mut().insert(path.into());
        self.defaults.borrow_mut().insert(path.into());
    }

    fn fails(&self, path: &Path) -> io::Result<()> {
        match self.fail.borrow().as_deref() == Some(path) {
            true => Err(err(Errno::EIO)),
            false => Ok(()),
        }
    }

    /// Everything under the root but the top-level default groups: what
    /// an export made and did not remove.
    fn made(&self) -> Vec<PathBuf> {
        let top = ["subsystems", "ports", "hosts"].map(|d| self.root.join(d));
        let dirs = self.dirs.borrow();
        let links = self.links.borrow();
        dirs.iter()
            .chain(links.keys())
            .filter(|p| **p != self.root && !top.contains(p))
            .cloned()
            .collect()
    }
}

impl Tree for &FakeNvmet {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        self.fails(path)?;
        let parent = path.parent().unwrap();
        if !self.dirs.borrow().contains(parent) {
            return Err(err(Errno::ENOENT));
        }
        if self.dirs.borrow().contains(path) {
            return Err(err(Errno::EEXIST));
        }
        self.dirs.borrow_mut().insert(path.into());
        let kind = parent.file_name().unwrap().to_str().unwrap();
        let (groups, attrs): (&[&str], &[&str]) = match kind {
            "subsystems" if parent.parent() == Some(&self.root) => {
                (&["namespaces", "allowed_hosts"], &["attr_allow_any_host"])
            }
            "namespaces" => (&[], &["device_path", "enable"]),
            "ports" => (
                &["subsystems", "referrals"],
                &["addr_trtype", "addr_adrfam", "addr_traddr", "addr_trsvcid"],
            ),
            _ => return Err(err(Errno::EPERM)),
        };
        for group in groups {
            self.add_default(&path.join(group));
        }
        for attr in attrs {
            self.attrs
                .borrow_mut()
                .insert(path.join(attr), String::new());
        }
        Ok(())
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        if self.defaults.borrow().contains(path) {
            return Err(err(Errno::EPERM));
        }
        let defaults = self.defaults.borrow().clone();
        let busy = self
            .dirs
            .borrow()
            .iter()
            .chain(self.links.borrow().keys())
            .any(|p| p.starts_with(path) && p != path && !defaults.contains(p));
        if busy {
            return Err(err(Errno::ENOTEMPTY));
        }
        if self
            .attrs
            .borrow()
            .get(&path.join("enable"))
            .map(String::as_str)
            == Some("1")
        {
            // nvmet disables a namespace on rmdir; the stand-in wants it
            // disabled first, as `remove` does.
            return Err(err(Errno::EBUSY));
        }
        self.dirs.borrow_mut().retain(|p| !p.starts_with(path));
        self.defaults.borrow_mut().retain(|p| !p.starts_with(path));
        self.attrs.borrow_mut().retain(|p, _| !p.starts_with(path));
        Ok(())
    }

    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        self.fails(path)?;
        if !self.attrs.borrow().contains_key(path) {
            return Err(err(Errno::ENOENT));
        }
        if path.ends_with("enable") && value == "1" {
            let device = self.attrs.borrow()[&path.with_file_name("device_path")].clone();
            if self.refuse.borrow().contains(&device) {
                return Err(err(Errno::EINVAL));
            }
        }
        self.attrs.borrow_mut().insert(path.into(), value.into());
        Ok(())
    }

    fn read(&self, path: &Path) -> io::Result<String> {
        self.attrs
            .borrow()
            .get(path)
            .cloned()
            .ok_or(err(Errno::ENOENT))
    }

    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        self.fails(link)?;
        if !self.dirs.borrow().contains(target)
            || !self.dirs.borrow().contains(link.parent().unwrap())
        {
            return Err(err(Errno::ENOENT));
        }
        self.links.borrow_mut().insert(link.into(), target.into());
        Ok(())
    }

    fn unlink(&self, link: &Path) -> io::Result<()> {
        self.links
            .borrow_mut()
            .remove(link)
            .map(|_| ())
            .ok_or(err(Errno::ENOENT))
    }

    fn entries(&self, dir: &Path) -> io::Result<Vec<String>> {
        let dirs = self.dirs.borrow();
        let links = self.links.borrow();
        let names = dirs
            .iter()
            .chain(links.keys())
            .filter(|p| p.parent() == Some(dir))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned());
        Ok(names.collect::<BTreeSet<_>>().into_iter().collect())
    }
}

const TCP: PortSpec = PortSpec {
    transport: Transport::Tcp,
    tcp_port: Some(4420),
};
const LOOP: PortSpec = PortSpec {
    transport: Transport::Loop,
    tcp_port: None,
};

fn nvmet(fake: &FakeNvmet) -> Nvmet<&FakeNvmet> {
    Nvmet::new(fake, fake.root.clone())
}

#[test]
fn an_export_is_a_subsystem_a_namespace_and_a_linked_port() {
    let fake = FakeNvmet::new(Path::new("/cfg"));
    let nvmet = nvmet(&fake);
    let port = nvmet
        .create("nqn.a", Path::new("/dev/bius0"), &TCP)
        .unwrap();
    assert_eq!(port, "1");
    let attr = |p: &str| fake.attrs.borrow()[Path::new(p)].clone();
    assert_eq!(attr("/cfg/subsystems/nqn.a/attr_allow_any_host"), "1");
    let ns = format!("/cfg/subsystems/nqn.a/namespaces/{NSID}");
    assert_eq!(attr(&format!("{ns}/device_path")), "/dev/bius0");
    assert_eq!(attr(&format!("{ns}/enable")), "1");
    assert_eq!(attr("/cfg/ports/1/addr_trtype"), "tcp");
    assert_eq!(attr("/cfg/ports/1/addr_adrfam"), "ipv4");
    assert_eq!(attr("/cfg/ports/1/addr_traddr"), "127.0.0.1");
    assert_eq!(attr("/cfg/ports/1/addr_trsvcid"), "4420");
    assert_eq!(
        fake.links.borrow()[Path::new("/cfg/ports/1/subsystems/nqn.a")],
        Path::new("/cfg/subsystems/nqn.a")
    );
    assert_eq!(
        nvmet.subsystems().unwrap(),
        vec![("nqn.a".to_string(), vec!["/dev/bius0".to_string()])]
    );

    // a second export over the same transport shares the port
    assert_eq!(
        nvmet
            .create("nqn.b", Path::new("/dev/bius1"), &TCP)
            .unwrap(),
        "1"
    );
    // another transport gets its own
    assert_eq!(
        nvmet
            .create("nqn.c", Path::new("/dev/bius2"), &LOOP)
            .unwrap(),
        "2"
    );
    assert_eq!(
        fake.attrs.borrow()[Path::new("/cfg/ports/2/addr_trsvcid")],
        ""
    );

    // removing one export keeps the port the other needs
    nvmet.remove("nqn.a").unwrap();
    assert_eq!(
        nvmet.ports().unwrap()[0].subsystems,
        vec!["nqn.b".to_string()]
    );
    nvmet.remove("nqn.b").unwrap();
    nvmet.remove("nqn.c").unwrap();
    assert!(fake.made().is_empty(), "left behind: {:?}", fake.made());
}

#[test]
fn a_failure_at_any_step_leaves_nothing_behind() {
    let steps = [
        "subsystems/nqn.a",
        "subsystems/nqn.a/attr_allow_any_host",
        "subsystems/nqn.a/namespaces/1",
        "subsystems/nqn.a/namespaces/1/device_path",
        "subsystems/nqn.a/namespaces/1/enable",
        "ports/1",
        "ports/1/addr_trtype",
        "ports/1/addr_traddr",
        "ports/1/addr_trsvcid",
        "ports/1/subsystems/nqn.a",
    ];
    for step in steps {
        let fake = FakeNvmet::new(Path::new("/cfg"));
        *fake.fail.borrow_mut() = Some(Path::new("/cfg").join(step));
        let err = nvmet(&fake)
            .create("nqn.a", Path::new("/dev/bius0"), &TCP)
            .unwrap_err();
        assert_eq!(err.errno(), Errno::EIO, "{step}: {err}");
        assert!(fake.made().is_empty(), "{step}: left {:?}", fake.made());
    }
}

#[test]
fn what_nvmet_will_not_enable_is_undone_and_said() {
    let fake = FakeNvmet::new(Path::new("/cfg"));
    fake.refuse.borrow_mut().insert("/dev/sdz".into());
    let err = nvmet(&fake)
        .create("nqn.z", Path::new("/dev/sdz"), &LOOP)
        .unwrap_err();
    assert!(matches!(err, NvmeError::Enable(..)), "{err}");
    assert_eq!(err.errno(), Errno::EINVAL);
    assert!(err.to_string().contains("dmesg"), "{err}");
    assert!(fake.made().is_empty(), "left {:?}", fake.made());
}

#[test]
fn a_taken_nqn_is_refused_and_the_other_export_kept() {
    let fake = FakeNvmet::new(Path::new("/cfg"));
    let nvmet = nvmet(&fake);
    nvmet
        .create("nqn.a", Path::new("/dev/bius0"), &LOOP)
        .unwrap();
    let before = fake.made();
    let err = nvmet
        .create("nqn.a", Path::new("/dev/bius1"), &LOOP)
        .unwrap_err();
    assert!(matches!(err, NvmeError::NqnTaken(_)), "{err}");
    assert_eq!(err.errno(), Errno::EEXIST);
    assert_eq!(fake.made(), before);
}

/// A system of the stand-in tree and a host in `dir`.
fn system<'a>(fake: &'a FakeNvmet, dir: &Path) -> System<&'a FakeNvmet> {
    fs::create_dir_all(dir.join("dev")).unwrap();
    System {
        nvmet: Nvmet::new(fake, fake.root.clone()),
        nvmet_root: fake.root.clone(),
        host: Host {
            sys: dir.join("sys"),
            dev: dir.join("dev"),
        },
        modprobe: |_| Ok(()),
    }
}

#[test]
fn unexport_deletes_the_controller_and_the_subsystem() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeNvmet::new(Path::new("/cfg"));
    let system = system(&fake, dir.path());
    let disk = dir.path().join("dev/bius0");
    fs::write(&disk, "").unwrap();
    let err = system.unexport(&disk, "bius0").unwrap_err();
    assert_eq!(err.to_string(), "bius0 is not exported");
    assert_eq!(err.errno(), Errno::ENOENT);

    system.nvmet.create("nqn.a", &disk, &TCP).unwrap();
    let ctrl = dir.path().join("sys/class/nvme/nvme3");
    fs::create_dir_all(ctrl.join("nvme2c3n1")).unwrap();
    fs::write(ctrl.join("subsysnqn"), "nqn.a\n").unwrap();
    let exported = system.exported(&disk).unwrap();
    let dev = |name: &str| Some(dir.path().join("dev").join(name).display().to_string());
    assert_eq!(
        exported,
        vec![ExportReport {
            nqn: "nqn.a".into(),
            transport: "tcp".into(),
            address: Some("127.0.0.1:4420".into()),
            controller: Some("nvme3".into()),
            block: dev("nvme2n1"),
            char: dev("ng2n1"),
        }]
    );

    system.unexport(&disk, "bius0").unwrap();
    assert_eq!(
        fs::read_to_string(ctrl.join("delete_controller")).unwrap(),
        "1"
    );
    assert!(fake.made().is_empty(), "left {:?}", fake.made());
}

#[test]
fn the_fabrics_options_name_the_subsystem_and_its_address() {
    assert_eq!(
        fabrics_options("nqn.a", &TCP),
        "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn=nqn.a"
    );
    assert_eq!(fabrics_options("nqn.b", &LOOP), "transport=loop,nqn=nqn.b");
}

#[test]
fn an_nqn_fits_configfs_and_the_fabrics_options() {
    assert!(check_nqn("nqn.2025-01.bius:zns0").is_ok());
    for bad in [
        "",
        "a,b",
        "a/b",
        "a b",
        "x=y",
        "nqn.2014-08.org.nvmexpress.discovery",
    ] {
        assert!(check_nqn(bad).is_err(), "{bad:?}");
    }
    assert!(check_nqn(&"n".repeat(224)).is_err());
}

#[test]
fn each_error_has_its_errno() {
    let refused = NvmeError::Refused {
        device: "zns0".into(),
        refusal: Refusal::ConventionalZones(1),
    };
    assert_eq!(
        refused.to_string(),
        "the NVMe target cannot export zns0: it has 1 conventional zone(s), and ZNS has none (create it with --conv-zones 0)"
    );
    assert_eq!(refused.errno(), Errno::EINVAL);
    let module = NvmeError::Module {
        module: "nvme-loop",
        reason: "modprobe: FATAL: Module nvme-loop not found".into(),
    };
    assert_eq!(module.errno(), Errno::ENOENT);
    let timeout = NvmeError::NoNamespace {
        controller: "nvme1".into(),
        secs: 30,
    };
    assert_eq!(timeout.errno(), Errno::ETIMEDOUT);
    let connect = NvmeError::Connect("transport=tcp".into(), err(Errno::ECONNREFUSED));
    assert_eq!(connect.errno(), Errno::ECONNREFUSED);
}
