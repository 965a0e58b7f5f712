//! `biusctl version`: what biusctl was built with, and the kernel module
//! that is loaded.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

/// Where the loaded module shows its version (`MODULE_VERSION`).
const MODULE_VERSION: &str = "/sys/module/bius/version";
/// Where the loaded module shows the ABI it speaks (an attribute of the
/// misc device /dev/bius).
const MODULE_ABI: &str = "/sys/class/misc/bius/abi_version";
/// Present while the module is loaded.
const MODULE_DIR: &str = "/sys/module/bius";

/// The versions, as `version --json` prints them.
#[derive(Debug, Serialize)]
pub struct Versions {
    /// biusctl's version.
    pub biusctl: &'static str,
    /// The bius library's version.
    pub library: &'static str,
    /// The ABI biusctl was built for (`BIUS_ABI_VERSION` of bius.h).
    pub abi: u32,
    /// The loaded kernel module; null when it is not loaded.
    pub module: Option<Module>,
}

/// The loaded kernel module; a value it does not show is null.
#[derive(Debug, Serialize)]
pub struct Module {
    pub version: Option<String>,
    pub abi: Option<u32>,
}

impl Versions {
    /// The versions, with the module as the files under `sys` (normally
    /// `/`) show it.
    pub fn probe(root: &Path) -> Versions {
        let read = |path: &str| {
            fs::read_to_string(root.join(path.trim_start_matches('/')))
                .ok()
                .map(|text| text.trim().to_string())
        };
        let module = root
            .join(MODULE_DIR.trim_start_matches('/'))
            .is_dir()
            .then(|| Module {
                version: read(MODULE_VERSION),
                abi: read(MODULE_ABI).and_then(|abi| abi.parse().ok()),
            });
        Versions {
            biusctl: env!("CARGO_PKG_VERSION"),
            library: bius::VERSION,
            abi: bius::ABI_VERSION,
            module,
        }
    }

    /// The `key: value` lines.
    pub fn write_text(&self, out: &mut impl Write) -> io::Result<()> {
        let unknown = || "unknown".to_string();
        let (module, module_abi) = match &self.module {
            None => ("not loaded".to_string(), "not loaded".to_string()),
            Some(module) => (
                module.version.clone().unwrap_or_else(unknown),
                module.abi.map_or_else(unknown, |abi| abi.to_string()),
            ),
        };
        writeln!(out, "biusctl: {}", self.biusctl)?;
        writeln!(out, "library: {}", self.library)?;
        writeln!(out, "abi: {}", self.abi)?;
        writeln!(out, "module: {module}")?;
        writeln!(out, "module_abi: {module_abi}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(versions: &Versions) -> String {
        let mut out = Vec::new();
        versions.write_text(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn module_not_loaded() {
        let root = std::env::temp_dir().join(format!("biusctl-version-{}", std::process::id()));
        let versions = Versions::probe(&root);
        assert!(versions.module.is_none());
        let abi = bius::ABI_VERSION;
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            text(&versions),
            format!(
                "biusctl: {version}\nlibrary: {version}\nabi: {abi}\nmodule: not loaded\nmodule_abi: not loaded\n"
            )
        );
        assert_eq!(
            serde_json::to_value(&versions).unwrap(),
            json!({"biusctl": version, "library": version, "abi": abi, "module": null})
        );
    }

    #[test]
    fn module_loaded() {
        let root = std::env::temp_dir().join(format!("biusctl-loaded-{}", std::process::id()));
        fs::create_dir_all(root.join("sys/module/bius")).unwrap();
        fs::create_dir_all(root.join("sys/class/misc/bius")).unwrap();
        fs::write(root.join("sys/module/bius/version"), "0.1.0\n").unwrap();
        let versions = Versions::probe(&root);
        assert!(text(&versions).ends_with("module: 0.1.0\nmodule_abi: unknown\n"));
        fs::write(root.join("sys/class/misc/bius/abi_version"), "1\n").unwrap();
        let versions = Versions::probe(&root);
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            serde_json::to_value(&versions).unwrap()["module"],
            json!({"version": "0.1.0", "abi": 1})
        );
    }
}
