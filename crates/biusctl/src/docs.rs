//! Shell completions and manual pages, from the clap definitions.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::error::CliError;

/// Writes the completion script for `shell` to `out`.
pub fn completions(shell: Shell, out: &mut impl Write) -> Result<(), CliError> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "biusctl", &mut script);
    out.write_all(&script).map_err(CliError::Stdout)
}

/// Writes biusctl.1 and a page per command (biusctl-create.1, ...) into
/// `dir`.
pub fn manpages(dir: &Path) -> Result<(), CliError> {
    clap_mangen::generate_to(Cli::command(), dir)
        .map_err(|err| CliError::WriteManpages(dir.into(), err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_name_the_commands() {
        for shell in [
            Shell::Bash,
            Shell::Zsh,
            Shell::Fish,
            Shell::Elvish,
            Shell::PowerShell,
        ] {
            let mut script = Vec::new();
            completions(shell, &mut script).unwrap();
            let script = String::from_utf8(script).unwrap();
            assert!(
                script.contains("ramdisk") && script.contains("zone-size"),
                "{shell}"
            );
        }
    }

    #[test]
    fn a_page_per_command() {
        let dir = std::env::temp_dir().join(format!("biusctl-man-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        manpages(&dir).unwrap();
        for page in [
            "biusctl.1",
            "biusctl-create.1",
            "biusctl-recover.1",
            "biusctl-detach.1",
            "biusctl-destroy.1",
            "biusctl-version.1",
            "biusctl-export-nvme.1",
            "biusctl-unexport-nvme.1",
        ] {
            let text = std::fs::read_to_string(dir.join(page)).unwrap();
            assert!(text.starts_with(".ie"), "{page}");
        }
        let create = std::fs::read_to_string(dir.join("biusctl-create.1")).unwrap();
        assert!(create.contains("zone\\-size"));
        let recover = std::fs::read_to_string(dir.join("biusctl-recover.1")).unwrap();
        assert!(recover.contains("recover\\-timeout") && recover.contains("ramdisk"));
        let export = std::fs::read_to_string(dir.join("biusctl-export-nvme.1")).unwrap();
        assert!(export.contains("\\-\\-transport") && export.contains("conventional"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(manpages(&dir), Err(CliError::WriteManpages(..))));
    }
}
