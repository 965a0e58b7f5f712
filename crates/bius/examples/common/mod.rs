//! What the examples share: the options every example takes (`--name`,
//! `--queues`, with clap) and serving the device until Ctrl-C; their sizes
//! are read by `bius::size::parse` (`64M`, `1.5G`).  Copy this file along
//! with the example you start from.

use std::fmt::Display;
use std::process::ExitCode;

use bius::{Device, DeviceBuilder};
use clap::error::ErrorKind;
use clap::CommandFactory;

/// The options every example takes.
#[derive(Debug, clap::Args)]
pub struct DiskArgs {
    /// The disk is /dev/NAME [default: the example's name].
    #[arg(long)]
    pub name: Option<String>,
    /// Hardware queues, one worker thread each.
    #[arg(long, default_value_t = 2)]
    pub queues: u32,
}

impl DiskArgs {
    /// `builder` with these options, the disk named `default_name` unless
    /// `--name` says otherwise.
    pub fn apply(&self, builder: DeviceBuilder, default_name: &str) -> DeviceBuilder {
        builder
            .name(self.name.as_deref().unwrap_or(default_name))
            .queues(self.queues)
    }
}

/// Exits as clap does on a bad option (the message, a usage hint, status
/// 2), for what only the example itself can find wrong.
#[allow(dead_code, reason = "memdisk finds nothing wrong that clap does not")]
pub fn usage_error<Options: CommandFactory>(message: impl Display) -> ! {
    Options::command()
        .error(ErrorKind::ValueValidation, message)
        .exit()
}

/// Serves a device just created until SIGINT or SIGTERM: prints its path
/// (`/dev/NAME`, one line on stdout) once the disk is live, then lets the
/// framework remove it gracefully on the signal.  Errors go to stderr and
/// make the exit status 1.
pub fn serve(created: Result<Device, bius::Error>) -> ExitCode {
    let served = created.and_then(|device| {
        println!("{}", device.path().display());
        device.run_until_signal()
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
