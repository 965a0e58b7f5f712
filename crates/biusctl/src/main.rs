//! `biusctl`: create, recover, list, inspect, detach from and destroy
//! BIUS block devices; show the zones of zoned block devices; inject
//! faults into zoned RAM disks; export block devices as NVMe namespaces.

// The doc comments of `cli` are the help text clap prints, not rustdoc.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod cli;
mod config;
mod create;
mod detach;
mod docs;
mod error;
mod fault;
mod logger;
mod model;
mod nvme;
mod output;
mod recover;
mod stats;
mod systemd;
mod trace;
mod usage;
mod values;
mod version;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bius::control_socket::{ClientError, ControlClient, Fault};
use bius::zone::{disk_zones, DiskZonesError};
use bius::{DeviceInfo, Errno};
use clap::Parser;

use cli::{Cli, Command, ExportService, UnexportService};
use error::CliError;
use output::DeviceReport;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage::exit(err),
    };
    logger::init(cli.verbose);
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`biusctl zones | head`): like cat, stop
        // quietly; the shell sees SIGPIPE's status.
        Err(CliError::Stdout(err)) if err.kind() == io::ErrorKind::BrokenPipe => {
            ExitCode::from(128 + 13)
        }
        Err(err) => {
            eprintln!("{}", err.report());
            ExitCode::from(err.exit_status())
        }
    }
}

fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Create(args) => {
            let (args, backend) = create::settings(*args)?;
            create::create(args, backend)
        }
        Command::Recover(args) => recover::recover(*args),
        Command::Detach { device } => detach::run(&device),
        Command::List { json } => list(json),
        Command::Info { json, device } => info(&device, json),
        Command::Model { command } => model::run(command),
        Command::Export {
            service: ExportService::Nvme(args),
        } => export_nvme(args),
        Command::Unexport {
            service: UnexportService::Nvme { device },
        } => {
            let path = disk_path(&device)?;
            Ok(nvme::System::kernel().unexport(&path, &device)?)
        }
        Command::Zones { json, device } => zones(&device, json),
        Command::Stats {
            json,
            zones,
            reset,
            watch,
            device,
        } => {
            let options = stats::StatsOptions {
                json,
                zones,
                reset,
                watch,
            };
            stats::run(&daemon_disk(&device)?, options)
        }
        Command::Trace {
            output: Some(file),
            format,
            duration,
            device,
            ..
        } => {
            let format = trace::FormatArg::of(format, &file);
            trace::run(&daemon_disk(&device)?, &file, format, duration)
        }
        Command::Trace { device, .. } => trace::stop(&daemon_disk(&device)?),
        Command::Fault {
            read_only,
            offline,
            write_error,
            clear_write_error,
            device,
        } => {
            // clap lets exactly one through.
            let fault = read_only
                .map(|zone| Fault::ReadOnly { zone })
                .or(offline.map(|zone| Fault::Offline { zone }))
                .or(write_error.map(|offset| Fault::WriteError { offset }))
                .or(clear_write_error.map(|offset| Fault::ClearWriteError { offset }))
                .expect("one fault");
            inject(&device, fault)
        }
        Command::Destroy {
            force,
            all: true,
            device: _,
        } => destroy_all(force),
        Command::Destroy { force, device, .. } => {
            // clap requires a device without --all.
            let device = device.expect("a device");
            Ok(destroy(resolve(&device)?, force)?)
        }
        Command::Version { json } => {
            let versions = version::Versions::probe(Path::new("/"));
            let mut stdout = io::stdout().lock();
            match json {
                true => output::write_json(&mut stdout, &versions),
                false => versions.write_text(&mut stdout),
            }
            .map_err(CliError::Stdout)
        }
        Command::Completions { shell } => docs::completions(shell, &mut io::stdout().lock()),
        Command::Manpages { dir } => docs::manpages(&dir),
    }
}

fn list(json: bool) -> Result<(), CliError> {
    let devices: Vec<DeviceReport> = bius::list_devices()?.iter().map(Into::into).collect();
    let mut stdout = io::stdout().lock();
    match json {
        true => output::write_json(&mut stdout, &devices),
        false => output::write_list(&mut stdout, &devices),
    }
    .map_err(CliError::Stdout)
}

fn info(device: &str, json: bool) -> Result<(), CliError> {
    let mut report = DeviceReport::from(&bius::device_info(resolve(device)?)?);
    report.model = report.disk.as_deref().and_then(model::query);
    report.nvme = report.path.as_deref().map_or_else(Vec::new, |path| {
        let path = Path::new(path);
        nvme::System::kernel()
            .exported(path)
            .inspect_err(|err| log::warn!("no NVMe export information: {err}"))
            .unwrap_or_default()
    });
    let mut stdout = io::stdout().lock();
    match json {
        true => output::write_json(&mut stdout, &report),
        false => output::write_info(&mut stdout, &report),
    }
    .map_err(CliError::Stdout)
}

/// `biusctl export nvme`: prints the namespace's block and character
/// devices, a line each.
fn export_nvme(args: cli::NvmeExportArgs) -> Result<(), CliError> {
    if let Some(nqn) = &args.nqn {
        nvme::check_nqn(nqn).map_err(|reason| CliError::Invalid {
            option: "--nqn",
            value: nqn.clone(),
            reason,
        })?;
    }
    if args.port.is_some() && args.transport == Some(nvme::Transport::Loop) {
        return Err(CliError::Invalid {
            option: "--port",
            value: args.port.unwrap_or_default().to_string(),
            reason: "a TCP port, not with --transport loop".into(),
        });
    }
    let options = nvme::ExportOptions {
        transport: args.transport,
        nqn: args.nqn,
        port: args.port,
    };
    let path = disk_path(&args.device)?;
    let export = nvme::System::kernel().export(&path, &args.device, &options)?;
    let mut stdout = io::stdout().lock();
    [export.block, export.char]
        .iter()
        .flatten()
        .try_for_each(|dev| writeln!(stdout, "{dev}"))
        .map_err(CliError::Stdout)
}

fn zones(device: &str, json: bool) -> Result<(), CliError> {
    let path = disk_path(device)?;
    let zones = disk_zones(&path).map_err(|err| match err {
        DiskZonesError::NotZoned => CliError::NotZoned(device.into()),
        DiskZonesError::Open(Errno::ENOENT) => CliError::NoDisk(device.into()),
        err => CliError::DiskZones(path.display().to_string(), err),
    })?;
    let zones = output::zone_reports(&zones);
    let mut stdout = io::stdout().lock();
    match json {
        true => output::write_json(&mut stdout, &zones),
        false => output::write_zones(&mut stdout, &zones),
    }
    .map_err(CliError::Stdout)
}

fn inject(device: &str, fault: Fault) -> Result<(), CliError> {
    let path = disk_path(device)?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .ok_or_else(|| CliError::NoDisk(device.into()))?;
    let injected = ControlClient::connect_disk(&name).and_then(|mut client| client.fault(fault));
    let report = match injected {
        Ok(report) => report,
        Err(err @ ClientError::NoDaemon { .. }) => {
            // Say why there is no daemon, if it can be told.
            let zoned = Path::new("/sys/block").join(&name).join("queue/zoned");
            return Err(match std::fs::read_to_string(zoned) {
                Ok(model) if model.trim() == "none" => CliError::NotZoned(device.into()),
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    CliError::NoDisk(device.into())
                }
                _ => CliError::Daemon(err),
            });
        }
        Err(err) => return Err(CliError::Daemon(err)),
    };
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{report}").map_err(CliError::Stdout)
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

/// Destroys device `id`; by force (`--force`) even while its disk is open.
fn destroy(id: u32, force: bool) -> Result<(), bius::Error> {
    match force {
        true => bius::destroy_device_force(id),
        false => bius::destroy_device(id),
    }
}

/// Destroys every device, reporting each failure on standard error.
fn destroy_all(force: bool) -> Result<(), CliError> {
    let failures: Vec<Errno> = bius::list_devices()?
        .iter()
        .filter_map(|dev| match destroy(dev.id, force) {
            // Gone meanwhile: nothing to destroy.
            Ok(()) | Err(bius::Error::NoSuchDevice { .. }) => None,
            Err(err) => {
                let name = match dev.disk_name.as_str() {
                    "" => dev.id.to_string(),
                    name => name.to_string(),
                };
                // The framework's message ends with the errno.
                eprintln!("biusctl: error: {name}: {err}");
                Some(err.errno())
            }
        })
        .collect();
    match failures.first() {
        None => Ok(()),
        Some(&errno) => Err(CliError::NotAllDestroyed {
            failed: failures.len(),
            errno,
        }),
    }
}

/// The disk name of the bius device given by id, disk name or path:
/// whose daemon's socket to talk to.
fn daemon_disk(device: &str) -> Result<String, CliError> {
    let info = bius::device_info(resolve(device)?)?;
    match info.disk_name.as_str() {
        "" => Err(CliError::NoDisk(device.into())),
        name => Ok(name.into()),
    }
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
