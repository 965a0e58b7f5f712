//! Command-line errors: one line on standard error, exit status 2.

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::error::EXIT_USAGE;

/// Reports a failed parse of the command line and says how to exit:
/// --help and --version print and exit 0, a bare `biusctl` prints the help
/// and exits 2, every other error is one line and exits 2.
pub fn exit(err: clap::Error) -> ExitCode {
    if !err.use_stderr() || err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        err.exit()
    }
    eprintln!("biusctl: error: {}", one_line(&err));
    ExitCode::from(EXIT_USAGE)
}

/// The error in one line: `--queues 0: must be 1 to 64` for a refused
/// value, else clap's message, with the lists it announces and its tips
/// ("a similar subcommand exists: 'ramdisk'").
pub fn one_line(err: &clap::Error) -> String {
    if err.kind() == ErrorKind::ValueValidation {
        if let (Some(ContextValue::String(arg)), Some(ContextValue::String(value)), Some(why)) = (
            err.get(ContextKind::InvalidArg),
            err.get(ContextKind::InvalidValue),
            std::error::Error::source(err),
        ) {
            // "--queues <N>": the option, without its value name.
            let option = arg.split_whitespace().next().unwrap_or(arg);
            return format!("{option} {value}: {why}");
        }
    }
    let rendered = err.render().to_string();
    let mut lines = rendered.lines().map(str::trim).filter(|line| {
        !(line.is_empty() || line.starts_with("Usage:") || line.starts_with("For more information"))
    });
    let first = lines.next().unwrap_or_default();
    let mut message = first.strip_prefix("error: ").unwrap_or(first).to_string();
    for line in lines {
        let separator = if message.ends_with(':') { " " } else { "; " };
        message = format!("{message}{separator}{line}");
    }
    // What needs the missing argument shows in the usage clap builds
    // ("biusctl create --zoned --max-open <N>").
    if err.kind() == ErrorKind::MissingRequiredArgument {
        if let Some(usage) = err.get(ContextKind::Usage) {
            let usage = usage.to_string();
            let usage = usage.trim().trim_start_matches("Usage: ");
            message = format!("{message} (usage: {usage})");
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    fn message(args: &[&str]) -> String {
        let err = Cli::try_parse_from(["biusctl"].iter().chain(args)).unwrap_err();
        one_line(&err)
    }

    #[test]
    fn values_are_named_with_their_option() {
        assert_eq!(
            message(&["create", "--queues", "0", "ramdisk"]),
            "--queues 0: must be 1 to 64"
        );
        assert_eq!(
            message(&["create", "-d", "5000", "ramdisk"]),
            "--depth 5000: must be 1 to 4096"
        );
        assert!(message(&["create", "--size", "12X", "ramdisk"])
            .starts_with("--size 12X: not a size ("));
        assert_eq!(
            message(&["create", "ramdisk", "--poll-us=2000"]),
            "--poll-us 2000: must be 0 to 1000"
        );
    }

    #[test]
    fn tips_survive() {
        assert_eq!(
            message(&["create", "ramdsk"]),
            "unrecognized subcommand 'ramdsk'; tip: a similar subcommand exists: 'ramdisk'"
        );
        assert_eq!(
            message(&["create", "--queue", "2", "ramdisk"]),
            "unexpected argument '--queue' found; tip: a similar argument exists: '--queues'"
        );
    }

    #[test]
    fn zone_options_without_zoned_name_the_option() {
        assert_eq!(
            message(&["create", "--max-open", "3", "ramdisk"]),
            "the following required arguments were not provided: --zoned \
             (usage: biusctl create --zoned --max-open <N>)"
        );
        assert_eq!(
            message(&["completions", "tcsh"]),
            "invalid value 'tcsh' for '<SHELL>'; [possible values: bash, elvish, fish, \
             powershell, zsh]; tip: a similar value exists: 'zsh'"
        );
    }
}
