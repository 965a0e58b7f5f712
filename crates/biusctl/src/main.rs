//! `biusctl`: create, list, inspect and destroy BIUS block devices; show
//! the zones of zoned block devices; inject faults into zoned RAM disks.

// The doc comments of `cli` are the help text clap prints, not rustdoc.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod cli;
mod fault;
mod size;

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bius::zone::{disk_zones, DiskZonesError};
use bius::{
    BlockDevice, Device, DeviceBuilder, DeviceInfo, Errno, TransferMode, Zone, ZoneGeometry,
    ZoneGeometryError,
};
use bius_backends::{File, FileOptions, Null, RamDisk, ZonedRamDisk};
use clap::error::ErrorKind;
use clap::Parser;

use cli::{Backend, Cli, Command, CreateArgs};
use fault::Fault;

/// Size of a RAM disk or null device without `--size`.
const DEFAULT_SIZE: u64 = 1 << 30;

/// Zone size of a zoned RAM disk without `--zone-size`.
const DEFAULT_ZONE_SIZE: u64 = 64 << 20;

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
    /// A zoned size option is not a whole number of sectors.
    NotSectors(&'static str, u64),
    /// The zone geometry is invalid.
    ZoneGeometry(ZoneGeometryError),
    /// No disk has this name or path.
    NoDisk(String),
    /// The disk is not zoned.
    NotZoned(String),
    /// Reading a disk's zones failed.
    DiskZones(String, DiskZonesError),
    /// Injecting a fault failed.
    Fault(fault::SendError),
}

impl CliError {
    fn errno(&self) -> Errno {
        let of_io = |err: &io::Error| err.raw_os_error().map_or(Errno::EIO, Errno::from_raw);
        match self {
            CliError::Bius(err) => err.errno(),
            CliError::UnknownDevice(_) => Errno::ENOENT,
            CliError::OpenFile(_, err) | CliError::Stdout(err) => of_io(err),
            CliError::SizeExceedsFile { .. }
            | CliError::FileTooSmall(_)
            | CliError::NotSectors(..)
            | CliError::ZoneGeometry(_) => Errno::EINVAL,
            CliError::NoDisk(_) => Errno::ENOENT,
            CliError::NotZoned(_) => Errno::ENOTTY,
            CliError::DiskZones(_, err) => err.errno(),
            CliError::Fault(fault::SendError::NoDaemon(_, err) | fault::SendError::Io(_, err)) => {
                of_io(err)
            }
            CliError::Fault(fault::SendError::Refused(_)) => Errno::EINVAL,
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
            CliError::NotSectors(what, bytes) => {
                write!(f, "{what} {bytes} is not a multiple of 512 bytes")
            }
            CliError::ZoneGeometry(err) => write!(f, "invalid zone geometry: {err}"),
            CliError::NoDisk(dev) => write!(f, "no disk {dev}"),
            CliError::NotZoned(dev) => write!(f, "{dev} is not a zoned block device"),
            CliError::DiskZones(dev, err) => write!(f, "{dev}: {err}"),
            CliError::Fault(err) => err.fmt(f),
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
            // One line, like every other error: clap's first line, with
            // the list it announces ("...not provided:") if it does.
            let message = err.render().to_string();
            let mut lines = message.lines();
            let first = lines.next().unwrap_or_default();
            let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
            if line.ends_with(':') {
                if let Some(next) = lines.next() {
                    line = format!("{line} {}", next.trim());
                }
            }
            return usage_error(&line);
        }
    };
    if let Command::Create(args) = &cli.command {
        if let Err(message) = args.check() {
            return usage_error(&message);
        }
    }
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
        Command::Zones { json, device } => zones(&device, json),
        Command::Fault {
            read_only,
            offline,
            write_error,
            clear_write_error,
            device,
        } => {
            // clap lets exactly one through.
            let fault = read_only
                .map(Fault::ReadOnly)
                .or(offline.map(Fault::Offline))
                .or(write_error.map(Fault::WriteError))
                .or(clear_write_error.map(Fault::ClearWriteError))
                .expect("one fault");
            inject(&device, fault)
        }
        Command::Destroy { force, device } => destroy(&device, force),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`biusctl zones | head`): like cat, stop
        // quietly; the shell sees SIGPIPE's status.
        Err(CliError::Stdout(err)) if err.kind() == io::ErrorKind::BrokenPipe => {
            ExitCode::from(128 + 13)
        }
        Err(err) => {
            eprintln!("biusctl: error: {err} ({})", err.errno());
            ExitCode::FAILURE
        }
    }
}

/// A usage error: one line, exit status 2.
fn usage_error(message: &str) -> ExitCode {
    eprintln!("biusctl: error: {message} ({})", Errno::EINVAL);
    ExitCode::from(2)
}

fn create(args: CreateArgs) -> Result<(), CliError> {
    let block_size = u64::from(args.block_size);
    match &args.backend {
        Backend::Ramdisk if args.zoned => {
            let size = args.size.unwrap_or(DEFAULT_SIZE);
            let geometry = zone_geometry(&args, size)?;
            let disk = Arc::new(ZonedRamDisk::new(geometry).map_err(CliError::ZoneGeometry)?);
            let device = builder(&args, size)?.create_zoned(Arc::clone(&disk))?;
            // Listening before the path is announced: whoever waits for it
            // can inject faults at once.
            let dir = Path::new(fault::SOCKET_DIR);
            let server = fault::Server::start(dir, device.disk_name(), disk)
                .inspect_err(|err| {
                    log::warn!(
                        "no fault injection: cannot listen on {}: {err}",
                        fault::socket_path(dir, device.disk_name()).display()
                    )
                })
                .ok();
            let result = run(device);
            drop(server);
            result
        }
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

/// The zone geometry of `biusctl create --zoned`, in sectors.
fn zone_geometry(args: &CreateArgs, size: u64) -> Result<ZoneGeometry, CliError> {
    let sectors = |what, bytes: u64| {
        if bytes.is_multiple_of(512) {
            Ok(bytes / 512)
        } else {
            Err(CliError::NotSectors(what, bytes))
        }
    };
    let zone_sectors = sectors("zone size", args.zone_size.unwrap_or(DEFAULT_ZONE_SIZE))?;
    let optional =
        |what, bytes: Option<u64>, default| bytes.map_or(Ok(default), |b| sectors(what, b));
    Ok(ZoneGeometry {
        zone_capacity: optional("zone capacity", args.zone_capacity, zone_sectors)?,
        conventional_zones: args.conv_zones.unwrap_or(0),
        max_open: args.max_open.unwrap_or(0),
        max_active: args.max_active.unwrap_or(0),
        max_append: optional("largest zone append", args.max_append, 0)?,
        ..ZoneGeometry::new(sectors("size", size)?, zone_sectors)
    })
}

/// Creates the device, announces its path and serves it until a signal.
fn serve<D: BlockDevice>(args: &CreateArgs, size: u64, device: D) -> Result<(), CliError> {
    run(builder(args, size)?.create(device)?)
}

/// The device parameters of `biusctl create`.
fn builder(args: &CreateArgs, size: u64) -> Result<DeviceBuilder, CliError> {
    let mut builder = DeviceBuilder::new(size)
        .logical_block_size(args.block_size)
        .queues(args.queues)
        .queue_depth(args.depth)
        .read_only(args.read_only)
        .transfer_mode(args.transfer)
        .poll_time(Duration::from_micros(args.poll_us));
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
    Ok(builder)
}

/// A transfer mode as `--transfer` takes it.
fn transfer_name(mode: Option<TransferMode>) -> String {
    match mode {
        Some(TransferMode::Selective { threshold }) => {
            format!("selective={}", size::format(threshold.into()))
        }
        Some(mode) => mode.to_string(),
        None => "unknown".into(),
    }
}

/// Announces the disk's path and serves it until a signal.
fn run(device: Device) -> Result<(), CliError> {
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{}", device.path().display())
        .and_then(|()| stdout.flush())
        .map_err(CliError::Stdout)?;
    drop(stdout);
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
        (info.zoned.is_some(), "zoned"),
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
        ("transfer_mode", transfer_name(info.transfer_mode)),
        ("window_size", info.window_size.to_string()),
        ("poll_us", info.poll_time.as_micros().to_string()),
        ("mapped_requests", info.mapped_requests.to_string()),
        ("segmented_requests", info.segmented_requests.to_string()),
    ];
    let bytes = |value: u64| format!("{value} ({})", size::format(value));
    let limit = |value: u32| match value {
        0 => "none".to_string(),
        n => n.to_string(),
    };
    let zoned = info.zoned.map(|z| {
        [
            ("zone_size", bytes(z.zone_size)),
            ("zone_capacity", bytes(z.zone_capacity)),
            ("conv_zones", z.conventional_zones.to_string()),
            ("max_open", limit(z.max_open)),
            ("max_active", limit(z.max_active)),
            ("max_append", bytes(z.max_append.into())),
        ]
    });
    let mut stdout = io::stdout().lock();
    lines
        .iter()
        .chain(zoned.iter().flatten())
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

fn zones(device: &str, json: bool) -> Result<(), CliError> {
    let path = disk_path(device)?;
    let zones = disk_zones(&path).map_err(|err| match err {
        DiskZonesError::NotZoned => CliError::NotZoned(device.into()),
        DiskZonesError::Open(Errno::ENOENT) => CliError::NoDisk(device.into()),
        err => CliError::DiskZones(path.display().to_string(), err),
    })?;
    let mut stdout = io::stdout().lock();
    let result = if json {
        write_json(&mut stdout, &zones)
    } else {
        write_table(&mut stdout, &zones)
    };
    result.map_err(CliError::Stdout)
}

/// The zones as a table, in sectors; WP relative to the zone start.
fn write_table(out: &mut impl Write, zones: &[Zone]) -> io::Result<()> {
    let row = |out: &mut dyn Write, cells: [&str; 7]| {
        writeln!(
            out,
            "{:>6} {:>12} {:>10} {:>10} {:>10}  {:<19} {}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]
        )
    };
    row(out, ["ZONE", "START", "LEN", "CAP", "WP", "TYPE", "COND"])?;
    for (index, zone) in zones.iter().enumerate() {
        let write_pointer = match zone.condition.has_write_pointer() {
            true => zone.write_pointer.saturating_sub(zone.start).to_string(),
            false => "-".into(),
        };
        row(
            out,
            [
                &index.to_string(),
                &zone.start.to_string(),
                &zone.len.to_string(),
                &zone.capacity.to_string(),
                &write_pointer,
                &zone.zone_type.to_string(),
                &zone.condition.to_string(),
            ],
        )?;
    }
    Ok(())
}

/// The zones as one JSON array; `wp` absolute, or null.
fn write_json(out: &mut impl Write, zones: &[Zone]) -> io::Result<()> {
    let objects: Vec<String> = zones
        .iter()
        .enumerate()
        .map(|(index, zone)| {
            let write_pointer = match zone.condition.has_write_pointer() {
                true => zone.write_pointer.to_string(),
                false => "null".into(),
            };
            format!(
                r#"  {{"zone": {index}, "start": {}, "len": {}, "capacity": {}, "wp": {write_pointer}, "type": "{}", "cond": "{}"}}"#,
                zone.start, zone.len, zone.capacity, zone.zone_type, zone.condition
            )
        })
        .collect();
    if objects.is_empty() {
        writeln!(out, "[]")
    } else {
        writeln!(out, "[\n{}\n]", objects.join(",\n"))
    }
}

fn inject(device: &str, fault: Fault) -> Result<(), CliError> {
    let path = disk_path(device)?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .ok_or_else(|| CliError::NoDisk(device.into()))?;
    let message = match fault::send(Path::new(fault::SOCKET_DIR), &name, fault) {
        Ok(message) => message,
        Err(err @ fault::SendError::NoDaemon(..)) => {
            // Say why there is no daemon, if it can be told.
            let zoned = Path::new("/sys/block").join(&name).join("queue/zoned");
            return Err(match std::fs::read_to_string(zoned) {
                Ok(model) if model.trim() == "none" => CliError::NotZoned(device.into()),
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    CliError::NoDisk(device.into())
                }
                _ => CliError::Fault(err),
            });
        }
        Err(err) => return Err(CliError::Fault(err)),
    };
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{message}").map_err(CliError::Stdout)
}

/// The path of a disk given by path (anything with a `/`), bius device
/// id, or name (`/dev/<name>`).
fn disk_path(device: &str) -> Result<PathBuf, CliError> {
    if device.contains('/') {
        return Ok(PathBuf::from(device));
    }
    if let Ok(id) = device.parse() {
        let info = bius::device_info(id)?;
        return info.path().ok_or_else(|| CliError::NoDisk(device.into()));
    }
    Ok(Path::new("/dev").join(device))
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

#[cfg(test)]
mod tests {
    use bius::{ZoneCondition, ZoneType};

    use super::*;

    fn zones() -> Vec<Zone> {
        let zone = |start, zone_type, condition, write_pointer| Zone {
            start,
            len: 131072,
            capacity: 131072,
            write_pointer,
            zone_type,
            condition,
        };
        vec![
            zone(
                0,
                ZoneType::Conventional,
                ZoneCondition::NotWritePointer,
                131072,
            ),
            zone(
                131072,
                ZoneType::SequentialWriteRequired,
                ZoneCondition::ImplicitOpen,
                131080,
            ),
            zone(
                262144,
                ZoneType::SequentialWriteRequired,
                ZoneCondition::Offline,
                u64::MAX,
            ),
        ]
    }

    fn text(write: impl Fn(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut out = Vec::new();
        write(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn zone_table() {
        let table = text(|out| write_table(out, &zones()));
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines,
            [
                "  ZONE        START        LEN        CAP         WP  TYPE                COND",
                "     0            0     131072     131072          -  CONVENTIONAL        NOT_WP",
                "     1       131072     131072     131072          8  SEQ_WRITE_REQUIRED  IMP_OPEN",
                "     2       262144     131072     131072          -  SEQ_WRITE_REQUIRED  OFFLINE",
            ]
        );
    }

    #[test]
    fn zone_json() {
        let json = text(|out| write_json(out, &zones()));
        assert_eq!(
            json,
            concat!(
                "[\n",
                r#"  {"zone": 0, "start": 0, "len": 131072, "capacity": 131072, "wp": null, "type": "CONVENTIONAL", "cond": "NOT_WP"},"#,
                "\n",
                r#"  {"zone": 1, "start": 131072, "len": 131072, "capacity": 131072, "wp": 131080, "type": "SEQ_WRITE_REQUIRED", "cond": "IMP_OPEN"},"#,
                "\n",
                r#"  {"zone": 2, "start": 262144, "len": 131072, "capacity": 131072, "wp": null, "type": "SEQ_WRITE_REQUIRED", "cond": "OFFLINE"}"#,
                "\n]\n"
            )
        );
        assert_eq!(text(|out| write_json(out, &[])), "[]\n");
    }

    #[test]
    fn zoned_geometry_from_the_options() {
        let args = |extra: &[&str]| {
            let argv = ["biusctl", "create", "--zoned"]
                .iter()
                .chain(extra)
                .chain(&["ramdisk"]);
            match Cli::try_parse_from(argv).unwrap().command {
                Command::Create(args) => args,
                other => panic!("not create: {other:?}"),
            }
        };
        let geometry = zone_geometry(&args(&[]), 1 << 30).unwrap();
        assert_eq!(geometry, ZoneGeometry::new(2 << 20, 128 << 10));
        let geometry = zone_geometry(
            &args(&[
                "--zone-size",
                "1M",
                "--zone-capacity",
                "768K",
                "--conv-zones",
                "1",
                "--max-open",
                "2",
                "--max-active",
                "3",
                "--max-append",
                "64K",
            ]),
            8 << 20,
        )
        .unwrap();
        assert_eq!(
            geometry,
            ZoneGeometry {
                zone_capacity: 1536,
                conventional_zones: 1,
                max_open: 2,
                max_active: 3,
                max_append: 128,
                ..ZoneGeometry::new(16384, 2048)
            }
        );
        let err = zone_geometry(&args(&["--zone-capacity", "1000"]), 1 << 30).unwrap_err();
        assert_eq!(
            err.to_string(),
            "zone capacity 1000 is not a multiple of 512 bytes"
        );
        let bad = zone_geometry(&args(&["--zone-size", "48M"]), 1 << 30).unwrap();
        let err = CliError::ZoneGeometry(ZonedRamDisk::new(bad).unwrap_err());
        assert_eq!(
            err.to_string(),
            "invalid zone geometry: zone size must be a power of two"
        );
    }
}
