//! `biusctl create`: the device from the options (and config file), served
//! in the foreground until a signal.

use std::fmt::Display;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bius::control_socket::{
    socket_path, ControlError, ControlExtension, ControlRequest, ControlSocket, DeviceTarget,
    Fault, FaultReport,
};
use bius::size;
use bius::stats::TraceError;
use bius::zone::{DeferredZoned, ZoneGeometry, ZoneGeometryError};
use bius::{BlockDevice, DeferredDevice, Device, DeviceBuilder, Errno, Parameter};
use bius_backends::file_engine::EngineKind;
use bius_backends::nbd::NbdDevice;
use bius_backends::{DeferredFile, File, FileOptions, Null, RamDisk, Zero, ZonedRamDisk};
use bius_model::Model;

use crate::cli::{Backend, CreateArgs, Engine};
use crate::error::CliError;
use crate::values::{Bytes, Transfer};
use crate::{config, fault, model, recover, systemd, trace};

mod zoned_file;

// The defaults of the device's parameters are the builder's
// (`DeviceBuilder::DEFAULT_*`, and what its getters return); these two
// are biusctl's own, which the builder has no default for.

/// Size of a RAM disk or null device without `--size` (biusctl's own: a
/// builder is always given a size, or a zone geometry).
const DEFAULT_SIZE: u64 = 1 << 30;

/// Zone size of a zoned RAM disk without `--zone-size` (biusctl's own: a
/// zone geometry is always given a zone size).
const DEFAULT_ZONE_SIZE: u64 = 64 << 20;

/// The options of the command line merged over those of `--config`, with
/// the backend they name.
pub fn settings(args: CreateArgs) -> Result<(CreateArgs, Backend), CliError> {
    checked(merged(args)?)
}

/// The options of the command line merged over those of `--config`.
pub fn merged(args: CreateArgs) -> Result<CreateArgs, CliError> {
    Ok(match &args.config {
        Some(path) => {
            let file = config::load(path)?;
            config::merge(args, file)
        }
        None => args,
    })
}

/// The merged options checked together, with the backend they name.
pub fn checked(args: CreateArgs) -> Result<(CreateArgs, Backend), CliError> {
    let backend = args.backend.clone().ok_or(CliError::NoBackend)?;
    let zonable = match &backend {
        Backend::Ramdisk | Backend::Nbd { .. } => true,
        Backend::File { engine, .. } => *engine != Engine::Sync,
        Backend::Null | Backend::Zero => false,
    };
    if args.zones.zoned && !zonable {
        return Err(CliError::Invalid {
            option: "--zoned",
            value: format!("with the {} backend", backend_name(&backend)),
            reason: "only the ramdisk, nbd and file (not --engine sync) backends can be zoned"
                .into(),
        });
    }
    if let (Some(state), false) = (
        &args.zones.zone_state,
        matches!(backend, Backend::File { .. }),
    ) {
        return Err(CliError::Invalid {
            option: "--zone-state",
            value: state.display().to_string(),
            reason: format!(
                "only a zoned file keeps its zones in a file, not the {} backend",
                backend_name(&backend)
            ),
        });
    }
    if !args.zones.zoned {
        if let Some(option) = zone_option_given(&args) {
            return Err(CliError::Invalid {
                option,
                value: "without --zoned".into(),
                reason: "zone options need a zoned disk (--zoned, or zoned = true)".into(),
            });
        }
    }
    let mut args = args;
    model::resolve(&mut args)?;
    Ok((args, backend))
}

/// Creates the device (or recovers it: `args.recover`) and serves it
/// until a signal.
pub fn create(args: CreateArgs, backend: Backend) -> Result<(), CliError> {
    let block_size = block_size(&args);
    let size = args.size.map(|s| s.0);
    match &backend {
        Backend::Ramdisk if args.zones.zoned => {
            let size = size.unwrap_or(DEFAULT_SIZE);
            let disk = Arc::new(RamDisk::zoned(zone_geometry(&args, size)?));
            let (builder, model) = builder(&args, size)?;
            let device = builder
                .create(Arc::clone(&disk))
                .map_err(|err| framework_error(&args, size, err))?;
            run(device, &args, Some(disk), model)
        }
        Backend::Ramdisk => {
            let size = size.unwrap_or(DEFAULT_SIZE);
            serve(&args, size, RamDisk::new(size))
        }
        Backend::Null => serve(&args, size.unwrap_or(DEFAULT_SIZE), Null),
        Backend::Zero => serve(&args, size.unwrap_or(DEFAULT_SIZE), Zero),
        Backend::File {
            direct,
            engine,
            path,
        } => {
            let options = FileOptions {
                direct: *direct,
                read_only: args.read_only,
            };
            let kind = match engine {
                Engine::Sync => None,
                // A buffered file is served from the page cache, where a
                // hand-off to another thread costs more than the I/O.
                Engine::Auto if !*direct && !args.zones.zoned => None,
                Engine::Auto => Some(EngineKind::Auto),
                Engine::Uring => Some(EngineKind::Uring),
                Engine::Threads => Some(EngineKind::Threads),
            };
            let depth = args
                .depth
                .map_or(DeviceBuilder::DEFAULT_QUEUE_DEPTH, |depth| depth.0);
            if let (true, Some(kind)) = (args.zones.zoned, kind) {
                let zoned = zoned_file::of(&args, path)
                    .file_options(options)
                    .engine(kind, depth);
                return zoned_file::serve(args, &zoned);
            }
            let file =
                File::open(path, options).map_err(|err| CliError::OpenFile(path.clone(), err))?;
            let size = within_file(size, file.size(), block_size, path)?;
            let Some(kind) = kind else {
                return serve(&args, size, file);
            };
            let disk = DeferredFile::new(file, kind, depth)
                .map_err(|err| CliError::OpenFile(path.clone(), err))?;
            log::info!("{}: {:?} engine", path.display(), disk.engine_kind());
            serve_deferred(&args, size, disk)
        }
        Backend::Nbd {
            export,
            connections,
            address,
        } => {
            let disk = NbdDevice::connect(&address.0, export, connections.0 as usize)
                .map_err(CliError::Nbd)?;
            let export_size = disk.size() / u64::from(block_size) * u64::from(block_size);
            let size = within("--size", size, export_size, "the export's size")?;
            let max_io = within(
                "--max-io",
                args.max_io.map(|b| b.0),
                disk.max_io_size().into(),
                "the server's largest request",
            )?;
            let args = CreateArgs {
                max_io: Some(Bytes(max_io)),
                ..args
            };
            serve_deferred(&args, size, disk)
        }
    }
}

/// Creates a device served with many requests in flight (zoned over
/// `disk` with --zoned), announces its path and serves it until a signal.
fn serve_deferred<D: DeferredDevice>(
    args: &CreateArgs,
    size: u64,
    disk: D,
) -> Result<(), CliError> {
    let (builder, model) = builder(args, size)?;
    let device = if args.zones.zoned {
        let geometry = zone_geometry(args, size)?;
        let zoned = DeferredZoned::new(disk, geometry);
        builder.create_deferred(zoned)
    } else {
        builder.create_deferred(disk)
    };
    run(
        device.map_err(|err| framework_error(args, size, err))?,
        args,
        None,
        model,
    )
}

/// The size of a device over a file of `file_size` bytes: `size` if
/// given (at most the file's), else the file's whole blocks.
fn within_file(
    size: Option<u64>,
    file_size: u64,
    block_size: u32,
    path: &Path,
) -> Result<u64, CliError> {
    let file_size = file_size / u64::from(block_size) * u64::from(block_size);
    if file_size == 0 {
        return Err(CliError::FileTooSmall(path.to_owned()));
    }
    match size {
        Some(size) if size > file_size => Err(CliError::Invalid {
            option: "--size",
            value: size::format(size),
            reason: format!("exceeds the size of {}, {file_size} bytes", path.display()),
        }),
        Some(size) => Ok(size),
        None => Ok(file_size),
    }
}

/// `value` of `option` if at most `limit` (`what`), or `limit` if not given.
fn within(
    option: &'static str,
    value: Option<u64>,
    limit: u64,
    what: &str,
) -> Result<u64, CliError> {
    match value {
        Some(value) if value > limit => Err(CliError::Invalid {
            option,
            value: size::format(value),
            reason: format!("exceeds {what}, {limit} bytes"),
        }),
        Some(value) => Ok(value),
        None => Ok(limit),
    }
}

/// The logical block size, given or default.
fn block_size(args: &CreateArgs) -> u32 {
    args.block_size
        .map_or(DeviceBuilder::DEFAULT_LOGICAL_BLOCK_SIZE, |b| b.0)
}

/// The zone size in bytes, given or default.
fn zone_size(args: &CreateArgs) -> u64 {
    args.zones.zone_size.map_or(DEFAULT_ZONE_SIZE, |b| b.0)
}

fn backend_name(backend: &Backend) -> &'static str {
    match backend {
        Backend::Ramdisk => "ramdisk",
        Backend::Null => "null",
        Backend::Zero => "zero",
        Backend::File { .. } => "file",
        Backend::Nbd { .. } => "nbd",
    }
}

/// The first zone option given, if any.
fn zone_option_given(args: &CreateArgs) -> Option<&'static str> {
    [
        ("--zone-size", args.zones.zone_size.is_some()),
        ("--zone-capacity", args.zones.zone_capacity.is_some()),
        ("--conv-zones", args.zones.conv_zones.is_some()),
        ("--max-open", args.zones.max_open.is_some()),
        ("--max-active", args.zones.max_active.is_some()),
        ("--max-append", args.zones.max_append.is_some()),
        ("--emulate-append", args.zones.emulate_append),
    ]
    .into_iter()
    .find_map(|(option, given)| given.then_some(option))
}

/// The zone geometry of `biusctl create --zoned` over `size` bytes; an
/// invalid one is named by the option that can fix it.
fn zone_geometry(args: &CreateArgs, size: u64) -> Result<ZoneGeometry, CliError> {
    let invalid = |option: &'static str, bytes: u64| {
        move |err: ZoneGeometryError| CliError::Invalid {
            option,
            value: size::format(bytes),
            reason: err.to_string(),
        }
    };
    let zone_size = zone_size(args);
    let geometry = ZoneGeometry::new(size, zone_size).map_err(|err| match err {
        ZoneGeometryError::DeviceSize { .. } => invalid("--size", size)(err),
        err => invalid("--zone-size", zone_size)(err),
    })?;
    let geometry = match args.zones.zone_capacity {
        Some(Bytes(bytes)) => geometry
            .with_zone_capacity(bytes)
            .map_err(invalid("--zone-capacity", bytes))?,
        None => geometry,
    };
    let conventional = args.zones.conv_zones.unwrap_or(0);
    let geometry = geometry
        .with_conventional_zones(conventional)
        .map_err(|err| CliError::Invalid {
            option: "--conv-zones",
            value: conventional.to_string(),
            reason: err.to_string(),
        })?;
    let geometry = match args.zones.max_append {
        Some(Bytes(bytes)) => geometry
            .with_max_append(bytes)
            .map_err(invalid("--max-append", bytes))?,
        None => geometry,
    };
    Ok(geometry
        .with_max_open(args.zones.max_open.unwrap_or(0))
        .with_max_active(args.zones.max_active.unwrap_or(0)))
}

/// A framework error; an invalid parameter is named by its option.
fn framework_error(args: &CreateArgs, size: u64, err: bius::Error) -> CliError {
    fn shown<T: Display>(value: Option<T>, default: &str) -> String {
        value.map_or_else(|| default.into(), |value| value.to_string())
    }
    let param = match err {
        bius::Error::InvalidParameter(param) => param,
        err @ bius::Error::Mismatch { .. } => return recover::mismatch(err),
        err => return CliError::Bius(err),
    };
    // What the device would have where no option was given.
    let defaults = DeviceBuilder::default().poll_queues(args.poll_queues.map_or(0, |n| n.0));
    let (option, value) = match param {
        Parameter::Size | Parameter::ZonedSize => ("--size", size::format(size)),
        Parameter::LogicalBlockSize => ("--block-size", block_size(args).to_string()),
        // (the default physical block size is the logical one)
        Parameter::PhysicalBlockSize => (
            "--physical-block-size",
            shown(args.physical_block_size, &block_size(args).to_string()),
        ),
        Parameter::Queues => (
            "--queues",
            shown(args.queues, &defaults.get_queues().to_string()),
        ),
        Parameter::PollQueues => (
            "--poll-queues",
            shown(args.poll_queues, &defaults.get_poll_queues().to_string()),
        ),
        Parameter::QueueDepth => (
            "--depth",
            shown(args.depth, &DeviceBuilder::DEFAULT_QUEUE_DEPTH.to_string()),
        ),
        Parameter::MaxIoSize => (
            "--max-io",
            shown(
                args.max_io,
                &size::format(defaults.get_max_io_size().into()),
            ),
        ),
        Parameter::Timeout => (
            "--timeout",
            shown(args.timeout, &defaults.get_timeout().as_secs().to_string()),
        ),
        Parameter::Name => ("--name", shown(args.name.as_ref(), "")),
        Parameter::ZoneSize | Parameter::ZoneAlignment | Parameter::ZoneCount => {
            ("--zone-size", size::format(zone_size(args)))
        }
        Parameter::MapThreshold => (
            "--transfer",
            shown(
                args.transfer,
                &Transfer(defaults.get_transfer_mode()).to_string(),
            ),
        ),
        Parameter::PollTime => (
            "--poll-us",
            shown(
                args.poll_us,
                &defaults.get_poll_time().as_micros().to_string(),
            ),
        ),
        Parameter::Latency => ("--latency", shown(args.latency, "")),
        Parameter::RecoverTimeout => ("--recover-timeout", shown(args.recover_timeout, "")),
        Parameter::EmulatedAppend => (
            "--emulate-append",
            format!("with max_append {}", shown(args.zones.max_append, "0")),
        ),
        _ => return CliError::Bius(bius::Error::InvalidParameter(param)),
    };
    CliError::Invalid {
        option,
        value,
        reason: param.to_string(),
    }
}

/// Creates the device, announces its path and serves it until a signal.
fn serve<D: BlockDevice>(args: &CreateArgs, size: u64, device: D) -> Result<(), CliError> {
    let (builder, model) = builder(args, size)?;
    let device = builder
        .create(device)
        .map_err(|err| framework_error(args, size, err))?;
    run(device, args, None, model)
}

/// The device parameters of `biusctl create` (or `recover`), and its
/// model if it has one.
fn builder(args: &CreateArgs, size: u64) -> Result<(DeviceBuilder, Option<Arc<Model>>), CliError> {
    let model = model::new_model(args, size)?;
    // (a zoned device's size is its geometry's)
    let sized = match args.zones.zoned {
        true => DeviceBuilder::default(),
        false => DeviceBuilder::new(size),
    };
    // (run() serves the control socket, with the faults and the model,
    // before the disk's path is announced)
    let mut builder = sized
        .logical_block_size(block_size(args))
        .read_only(args.read_only)
        .emulate_zone_append(args.zones.emulate_append)
        .statistics(!args.stats.no_stats)
        .control_socket(false);
    if let Some(queues) = args.queues {
        builder = builder.queues(queues.0);
    }
    if let Some(count) = args.poll_queues {
        builder = builder.poll_queues(count.0);
    }
    if let Some(depth) = args.depth {
        builder = builder.queue_depth(depth.0);
    }
    if let Some(transfer) = args.transfer {
        builder = builder.transfer_mode(transfer.0);
    }
    if let Some(usecs) = args.poll_us {
        builder = builder.poll_time(Duration::from_micros(usecs.0.into()));
    }
    if let Some(sched) = args.sched {
        builder = builder.scheduling(sched.0);
    }
    if let Some(latency) = args.latency {
        builder = builder.latency(latency.0);
    }
    if let Some(bytes) = args.physical_block_size {
        builder = builder.physical_block_size(bytes.0);
    }
    if let Some(bytes) = args.max_io {
        // Over 4 GiB: too large, as the framework then says.
        builder = builder.max_io_size(u32::try_from(bytes.0).unwrap_or(u32::MAX));
    }
    if let Some(secs) = args.timeout {
        builder = builder.timeout(Duration::from_secs(secs.0.into()));
    }
    if let Some(name) = &args.name {
        builder = builder.name(name.as_str());
    }
    if let Some(secs) = args.recover_timeout {
        builder = builder.recover_timeout(Duration::from_secs(secs.0.into()));
    }
    if let Some(id) = args.recover {
        builder = builder.recover(id);
    }
    if let Some(model) = &model {
        builder = builder.model(Arc::clone(model));
    }
    Ok((builder, model))
}

/// Announces the disk's path (and readiness to systemd) and serves it
/// until a signal, answering on the daemon's control socket: statistics
/// and traces, detach, faults for a zoned RAM disk, the model.  With
/// `--trace`, traces from before the path is announced until the end.
fn run(
    device: Device,
    args: &CreateArgs,
    faults: Option<Arc<ZonedRamDisk>>,
    model: Option<Arc<Model>>,
) -> Result<(), CliError> {
    let statistics = device.statistics();
    let target = DeviceTarget::new(&device)?;
    if let Some(file) = &args.stats.trace {
        let format = trace::FormatArg::of(args.stats.trace_format, file);
        statistics
            .start_trace(file, format.format())
            .map_err(|err| match err {
                TraceError::File(path, err) => CliError::OpenFile(path, err),
                err => CliError::Invalid {
                    option: "--trace",
                    value: file.display().to_string(),
                    reason: err.to_string(),
                },
            })?;
    }
    // Listening before the path is announced: whoever waits for it can
    // ask at once.
    let requests = DaemonRequests { faults, model };
    let socket = ControlSocket::bind(socket_path(device.disk_name()), target, requests)
        .inspect_err(|err| log::warn!("no statistics, traces, faults or model report: {err}"))
        .ok();
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
    systemd::ready(&device.path());
    let served = device.run_until_signal_with(systemd::stopping);
    drop(socket);
    trace::log_end(&statistics.stop_trace());
    Ok(served?)
}

/// What biusctl's daemon answers on its control socket beyond the
/// device's statistics, traces, info and detach: faults for a zoned RAM
/// disk, the model.
struct DaemonRequests {
    faults: Option<Arc<ZonedRamDisk>>,
    model: Option<Arc<Model>>,
}

impl ControlExtension for DaemonRequests {
    fn fault(&self, fault: Fault) -> Result<FaultReport, ControlError> {
        fault::inject(self.faults.as_deref(), fault)
    }

    /// `model` ([`model::MODEL_REQUEST`], which takes no body): the
    /// model's report.
    fn extension(
        &self,
        name: &str,
        _body: serde_json::Value,
    ) -> Result<serde_json::Value, ControlError> {
        let unsupported = || {
            ControlError::unsupported(&ControlRequest::Extension {
                name: name.into(),
                body: serde_json::Value::Null,
            })
        };
        let Some(model) = self.model.as_ref().filter(|_| name == model::MODEL_REQUEST) else {
            return Err(unsupported());
        };
        serde_json::to_value(model::report(model)).map_err(|err| {
            ControlError::failed(Errno::EIO, format!("cannot encode the model: {err}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::create_args;

    #[test]
    fn zoned_geometry_from_the_options() {
        let args = create_args(&["--zoned", "ramdisk"]);
        let geometry = zone_geometry(&args, 1 << 30).unwrap();
        assert_eq!(geometry, ZoneGeometry::new(1 << 30, 64 << 20).unwrap());
        let args = create_args(&[
            "--zoned",
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
            "ramdisk",
        ]);
        let expected = ZoneGeometry::new(8 << 20, 1 << 20)
            .and_then(|g| g.with_zone_capacity(768 << 10))
            .and_then(|g| g.with_conventional_zones(1))
            .and_then(|g| g.with_max_append(64 << 10))
            .unwrap()
            .with_max_open(2)
            .with_max_active(3);
        assert_eq!(zone_geometry(&args, 8 << 20).unwrap(), expected);
        let args = create_args(&["--zoned", "--zone-capacity", "1000", "ramdisk"]);
        let err = zone_geometry(&args, 1 << 30).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--zone-capacity 1000: zone capacity 1000 bytes is not a multiple of 512 bytes \
             from 512 bytes to the zone size (67108864 bytes)"
        );
        let args = create_args(&["--zoned", "--zone-size", "48M", "ramdisk"]);
        let err = zone_geometry(&args, 1 << 30).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--zone-size 48M: zone size 50331648 bytes is not a power of two of at least 512 bytes"
        );
        let args = create_args(&["--zoned", "--conv-zones", "16", "ramdisk"]);
        let err = zone_geometry(&args, 1 << 30).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--conv-zones 16: 16 conventional zones leave none of the 16 zones sequential"
        );
    }

    #[test]
    fn usage_errors_after_merging() {
        let err = settings(create_args(&[])).unwrap_err();
        assert!(matches!(err, CliError::NoBackend));
        let err = settings(create_args(&["--zoned", "null"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--zoned with the null backend: only the ramdisk, nbd and file (not --engine sync) backends can be zoned"
        );
        let err = settings(create_args(&["--zoned", "--zone-state", "z", "ramdisk"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--zone-state z: only a zoned file keeps its zones in a file, not the ramdisk backend"
        );
        let (args, backend) = settings(create_args(&["-s", "64M", "null"])).unwrap();
        assert_eq!(
            (args.size.map(|s| s.0), backend),
            (Some(64 << 20), Backend::Null)
        );
    }

    #[test]
    fn framework_errors_name_the_option() {
        let args = create_args(&["-b", "4096", "-s", "6K", "ramdisk"]);
        let err = framework_error(
            &args,
            6 << 10,
            bius::Error::InvalidParameter(Parameter::Size),
        );
        assert_eq!(
            err.to_string(),
            "--size 6K: size must be a non-zero multiple of the logical block size, at most 4E (BIUS_MAX_SIZE)"
        );
        assert_eq!(err.exit_status(), crate::error::EXIT_USAGE);
        let err = framework_error(
            &args,
            6 << 10,
            bius::Error::InvalidParameter(Parameter::Name),
        );
        assert_eq!(
            err.to_string(),
            "--name : name must be at most 31 characters of [A-Za-z0-9_-]"
        );
        let args = create_args(&["--poll-queues", "1", "ramdisk"]);
        let err = framework_error(
            &args,
            1 << 20,
            bius::Error::InvalidParameter(Parameter::PollQueues),
        );
        assert_eq!(
            err.to_string(),
            "--poll-queues 1: poll queues must be fewer than the queues (one is left for I/O that is not polled)"
        );
        let err = framework_error(&args, 1, bius::Error::NameTaken);
        assert_eq!(err.exit_status(), crate::error::EXIT_FAILURE);
    }

    #[test]
    fn framework_errors_show_the_builder_s_defaults() {
        // The option and value an invalid `param` is shown with.
        let shown = |args: &[&str], param| {
            let err = bius::Error::InvalidParameter(param);
            let text = framework_error(&create_args(args), 1 << 20, err).to_string();
            text.split_once(':').unwrap().0.to_string()
        };
        let cpus = DeviceBuilder::default_queues();
        assert_eq!(
            shown(&["ramdisk"], Parameter::Queues),
            format!("--queues {cpus}")
        );
        assert_eq!(
            shown(&["--poll-queues", "1", "ramdisk"], Parameter::Queues),
            format!("--queues {}", (cpus + 1).min(64))
        );
        assert_eq!(shown(&["ramdisk"], Parameter::QueueDepth), "--depth 128");
        assert_eq!(shown(&["ramdisk"], Parameter::MaxIoSize), "--max-io 1M");
        assert_eq!(shown(&["ramdisk"], Parameter::Timeout), "--timeout 30");
        assert_eq!(shown(&["ramdisk"], Parameter::PollTime), "--poll-us 200");
        assert_eq!(
            shown(&["ramdisk"], Parameter::MapThreshold),
            "--transfer selective"
        );
        assert_eq!(
            shown(&["ramdisk"], Parameter::PollQueues),
            "--poll-queues 0"
        );
    }
}
