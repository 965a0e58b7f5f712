//! `biusctl`: create, list, inspect and destroy BIUS block devices.

// The doc comments of `cli` are the help text clap prints, not rustdoc.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod cli;
mod size;

use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bius::{BlockDevice, DeviceBuilder, DeviceInfo, Errno};
use bius_backends::{File, FileOptions, Null, RamDisk};
use clap::error::ErrorKind;
use clap::Parser;

use cli::{Backend, Cli, Command, CreateArgs};

/// Size of a RAM disk or null device without `--size`.
const DEFAULT_SIZE: u64 = 1 << 30;

/// Why a command failed.
#[derive(Debug)]
enum CliError {
    /// From the bius framework.
    Bius(bius::Error),
    /// No device has this id, name or path.
    UnknownDevice(String),
    /// The backing file could not be opened.
    OpenFile(PathBuf, io::Error),
    /// `--size` exceeds the backing file.
    SizeExceedsFile { size: u64, file_size: u64 },
    /// The backing file is smaller than one block.
    FileTooSmall(PathBuf),
    /// Standard output is gone.
    Stdout(io::Error),
}

impl CliError {
    fn errno(&self) -> Errno {
        let of_io = |err: &io::Error| err.raw_os_error().map_or(Errno::EIO, Errno::from_raw);
        match self {
            CliError::Bius(err) => err.errno(),
            CliError::UnknownDevice(_) => Errno::ENOENT,
            CliError::OpenFile(_, err) | CliError::Stdout(err) => of_io(err),
            CliError::SizeExceedsFile { .. } | CliError::FileTooSmall(_) => Errno::EINVAL,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Bius(err) => err.fmt(f),
            CliError::UnknownDevice(dev) => write!(f, "no bius device {dev}"),
            CliError::OpenFile(path, _) => write!(f, "cannot open {}", path.display()),
            CliError::SizeExceedsFile { size, file_size } => {
                write!(f, "size {size} exceeds the backing file's size {file_size}")
            }
            CliError::FileTooSmall(path) => {
                write!(f, "{} is smaller than one block", path.display())
            }
            CliError::Stdout(_) => f.write_str("cannot write to standard output"),
        }
    }
}

impl From<bius::Error> for CliError {
    fn from(err: bius::Error) -> Self {
        CliError::Bius(err)
    }
}

/// Diagnostics of the framework and of biusctl, on standard error.
struct StderrLogger {
    level: log::LevelFilter,
}

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let level = match record.level() {
                log::Level::Error => "error",
                log::Level::Warn => "warning",
                log::Level::Info => "info",
                log::Level::Debug => "debug",
                log::Level::Trace => "trace",
            };
            eprintln!("biusctl: {level}: {}", record.args());
        }
    }

    fn flush(&self) {}
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help, --version, and the help for a bare `biusctl`.
        Err(err)
            if !err.use_stderr()
                || err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            err.exit()
        }
        Err(err) => {
            // One line, like every other error: clap's first line.
            let message = err.render().to_string();
            let line = message.lines().next().unwrap_or_default();
            let line = line.strip_prefix("error: ").unwrap_or(line);
            eprintln!("biusctl: error: {line} ({})", Errno::EINVAL);
            return ExitCode::from(2);
        }
    };
    let level = match cli.verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        _ => log::LevelFilter::Debug,
    };
    if log::set_boxed_logger(Box::new(StderrLogger { level })).is_ok() {
        log::set_max_level(level);
    }
    let result = match cli.command {
        Command::Create(args) => create(args),
        Command::List => list(),
        Command::Info { device } => info(&device),
        Command::Destroy { force, device } => destroy(&device, force),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("biusctl: error: {err} ({})", err.errno());
            ExitCode::FAILURE
        }
    }
}

fn create(args: CreateArgs) -> Result<(), CliError> {
    let block_size = u64::from(args.block_size);
    match &args.backend {
        Backend::Ramdisk => {
            let size = args.size.unwrap_or(DEFAULT_SIZE);
            serve(&args, size, RamDisk::new(size))
        }
        Backend::Null => serve(&args, args.size.unwrap_or(DEFAULT_SIZE), Null),
        Backend::File { direct, path } => {
            let options = FileOptions {
                direct: *direct,
                read_only: args.read_only,
            };
            let file =
                File::open(path, options).map_err(|err| CliError::OpenFile(path.clone(), err))?;
            // Whole blocks only.
            let file_size = file.size() / block_size * block_size;
            if file_size == 0 {
                return Err(CliError::FileTooSmall(path.clone()));
            }
            let size = match args.size {
                Some(size) if size > file_size => {
                    return Err(CliError::SizeExceedsFile { size, file_size })
                }
                Some(size) => size,
                None => file_size,
            };
            serve(&args, size, file)
        }
    }
}

/// Creates the device, announces its path and serves it until a signal.
fn serve<D: BlockDevice>(args: &CreateArgs, size: u64, device: D) -> Result<(), CliError> {
    let mut builder = DeviceBuilder::new(size)
        .logical_block_size(args.block_size)
        .queues(args.queues)
        .queue_depth(args.depth)
        .read_only(args.read_only);
    if let Some(bytes) = args.physical_block_size {
        builder = builder.physical_block_size(bytes);
    }
    if let Some(bytes) = args.max_io {
        let bytes = u32::try_from(bytes)
            .map_err(|_| bius::Error::InvalidParameter(bius::Parameter::MaxIoSize))?;
        builder = builder.max_io_size(bytes);
    }
    if let Some(secs) = args.timeout {
        builder = builder.timeout(Duration::from_secs(secs));
    }
    if let Some(name) = &args.name {
        builder = builder.name(name.as_str());
    }
    let device = builder.create(device)?;
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{}", device.path().display())
        .and_then(|()| stdout.flush())
        .map_err(CliError::Stdout)?;
    log::info!(
        "serving {} (device {})",
        device.path().display(),
        device.id()
    );
    device.run_until_signal()?;
    Ok(())
}

fn list() -> Result<(), CliError> {
    let devices = bius::list_devices()?;
    let mut stdout = io::stdout().lock();
    let mut row = |cells: [&str; 6]| {
        writeln!(
            stdout,
            "{:<4} {:<16} {:<9} {:>6} {:>8} {:>8}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]
        )
    };
    let result = row(["ID", "NAME", "STATE", "QUEUES", "SIZE", "PID"]).and_then(|()| {
        devices.iter().try_for_each(|dev| {
            row([
                &dev.id.to_string(),
                if dev.disk_name.is_empty() {
                    "-"
                } else {
                    &dev.disk_name
                },
                &dev.state.to_string(),
                &dev.queues.to_string(),
                &size::format(dev.size),
                &dev.owner_pid.to_string(),
            ])
        })
    });
    result.map_err(CliError::Stdout)
}

fn info(device: &str) -> Result<(), CliError> {
    let info = bius::device_info(resolve(device)?)?;
    let caps = info.capabilities;
    let features: Vec<&str> = [
        (caps.write_cache, "write_cache"),
        (caps.fua, "fua"),
        (caps.discard, "discard"),
        (caps.write_zeroes, "write_zeroes"),
        (caps.read_only, "read_only"),
        (caps.rotational, "rotational"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    let lines = [
        ("id", info.id.to_string()),
        ("disk", or_dash(&info.disk_name)),
        (
            "path",
            info.path()
                .map_or_else(|| "-".into(), |p| p.display().to_string()),
        ),
        ("state", info.state.to_string()),
        ("owner_pid", info.owner_pid.to_string()),
        (
            "size",
            format!("{} ({})", info.size, size::format(info.size)),
        ),
        ("logical_block_size", info.logical_block_size.to_string()),
        ("physical_block_size", info.physical_block_size.to_string()),
        ("queues", info.queues.to_string()),
        ("connected_queues", info.connected_queues.to_string()),
        ("queue_depth", info.queue_depth.to_string()),
        ("max_io", info.max_io_size.to_string()),
        ("timeout_ms", info.timeout.as_millis().to_string()),
        ("features", or_dash(&features.join(","))),
        ("transfer_mode", info.transfer_mode.to_string()),
    ];
    let mut stdout = io::stdout().lock();
    lines
        .iter()
        .try_for_each(|(key, value)| writeln!(stdout, "{key}: {value}"))
        .map_err(CliError::Stdout)
}

fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        text.into()
    }
}

fn destroy(device: &str, force: bool) -> Result<(), CliError> {
    Ok(bius::destroy_device(resolve(device)?, force)?)
}

/// The id of a device given by id, disk name (`bius0`) or path (`/dev/bius0`).
fn resolve(device: &str) -> Result<u32, CliError> {
    if let Ok(id) = device.parse() {
        return Ok(id);
    }
    let name = device.strip_prefix("/dev/").unwrap_or(device);
    bius::list_devices()?
        .iter()
        .find(|info: &&DeviceInfo| info.disk_name == name)
        .map(|info| info.id)
        .ok_or_else(|| CliError::UnknownDevice(device.into()))
}
