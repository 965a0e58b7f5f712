//! Device models: `biusctl create --model NAME | --model-file FILE` with
//! overrides, `biusctl model list|show`, and the model's report on the
//! daemon's control socket (`biusctl info` shows the model in force and
//! what it counted).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bius::control_socket::{ClientError, ControlClient};
use bius::size;
use bius_model::{quantity, Bandwidth, Kind, MediaStats, Model, Profile, ProfileError};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};

use crate::cli::CreateArgs;
use crate::error::CliError;
use crate::values::Bytes;

/// The model options of `biusctl create`; in a config file, a `[model]`
/// table with `name` or `file`, `set` (a list of `KEY=VALUE`),
/// `time_scale`, `bandwidth` and `units`.
#[derive(Debug, Clone, Default, PartialEq, Args, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Model")]
pub struct ModelArgs {
    /// Time every request as this device would: nvme-ssd, xg6, zns-ssd,
    /// smr-hdd or nvm (`biusctl model list`); zns-ssd and smr-hdd are
    /// zoned (with --zoned; they give the zone geometry, which the zone
    /// options change).  The backend keeps the data.
    #[arg(long, value_name = "NAME")]
    #[serde(rename = "name")]
    pub model: Option<String>,
    /// Time requests with the model of a TOML file (the keys `biusctl
    /// model show NAME` prints).
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    #[serde(rename = "file")]
    pub model_file: Option<PathBuf>,
    /// Set one of the model's values, KEY as in the model file, dotted
    /// (flash.channels=4, ftl.over_provisioning=0.28); repeatable.  With
    /// a model, --latency sets its operation times (read, write: the NAND
    /// or NVM access; flush, discard; zone: reset and finish).
    #[arg(long, value_name = "KEY=VALUE")]
    #[serde(rename = "set", default)]
    pub model_set: Vec<String>,
    /// Run the model N times slower than real time, every ratio kept, to
    /// watch a model that is faster than the machine [default: 1].
    #[arg(long, value_name = "N")]
    pub time_scale: Option<f64>,
    /// The model's bandwidths: KIND=RATE[,KIND=RATE...], KIND read or
    /// write (the host link each way), host (both) or channel (each flash
    /// channel), RATE a size a second (3GB and 800MB are 1000-based, 1G
    /// and 1GiB 1024-based; a trailing /s is allowed).
    #[arg(long, value_name = "SPEC")]
    pub bandwidth: Option<String>,
    /// The model's parallel units: flash dies (channels × dies per
    /// channel) or NVM units.
    #[arg(long, value_name = "N")]
    pub units: Option<u32>,
    /// The profile these options resolve to ([`resolve`]).
    #[arg(skip)]
    #[serde(skip)]
    pub resolved: Option<Profile>,
}

impl ModelArgs {
    /// The command line's options over the config file's (`set`: the
    /// file's first).
    pub fn merge(command_line: ModelArgs, file: ModelArgs) -> ModelArgs {
        let named = command_line.model.is_some() || command_line.model_file.is_some();
        ModelArgs {
            model: if named {
                command_line.model
            } else {
                file.model
            },
            model_file: if named {
                command_line.model_file
            } else {
                file.model_file
            },
            model_set: file
                .model_set
                .into_iter()
                .chain(command_line.model_set)
                .collect(),
            time_scale: command_line.time_scale.or(file.time_scale),
            bandwidth: command_line.bandwidth.or(file.bandwidth),
            units: command_line.units.or(file.units),
            resolved: None,
        }
    }

    /// The first option that needs a model, if given without one.
    fn orphan_option(&self) -> Option<&'static str> {
        [
            ("--model-set", !self.model_set.is_empty()),
            ("--time-scale", self.time_scale.is_some()),
            ("--bandwidth", self.bandwidth.is_some()),
            ("--units", self.units.is_some()),
        ]
        .into_iter()
        .find_map(|(option, given)| given.then_some(option))
    }
}

/// The profile of `name` (built in) or `file`, with `sets` applied.
pub fn load(name: Option<&str>, file: Option<&Path>, sets: &[String]) -> Result<Profile, CliError> {
    let mut profile = match (name, file) {
        (_, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|err| CliError::ReadConfig(path.into(), err))?;
            Profile::from_toml(&text, &path.display().to_string())?
        }
        (Some(name), None) => Profile::built_in(name)?,
        (None, None) => return Err(ProfileError::new("--model", "no model named").into()),
    };
    for assignment in sets {
        let (key, value) = assignment.split_once('=').ok_or_else(|| {
            ProfileError::new("--model-set", format!("`{assignment}` is not KEY=VALUE"))
        })?;
        profile.set(key.trim(), value.trim())?;
    }
    Ok(profile)
}

/// Resolves the model of `biusctl create`'s options, if they name one,
/// into `args.model.resolved`: its profile with every override applied.
/// The options are adjusted to it: a zoned model's geometry fills the
/// zone options not given (and those given change it), and --latency is
/// the model's (not added on top of it).
pub fn resolve(args: &mut CreateArgs) -> Result<(), CliError> {
    args.model.resolved = resolve_profile(args)?;
    Ok(())
}

/// The model with its overrides, of a device of `size` bytes.
pub fn new_model(args: &CreateArgs, size: u64) -> Result<Option<Arc<Model>>, CliError> {
    let Some(profile) = &args.model.resolved else {
        return Ok(None);
    };
    Ok(Some(Arc::new(Model::new(profile.clone(), size)?)))
}

fn resolve_profile(args: &mut CreateArgs) -> Result<Option<Profile>, CliError> {
    let options = args.model.clone();
    if options.model.is_none() && options.model_file.is_none() {
        return match options.orphan_option() {
            Some(option) => Err(CliError::Invalid {
                option,
                value: "without a model".into(),
                reason: "needs --model or --model-file".into(),
            }),
            None => Ok(None),
        };
    }
    let mut profile = load(
        options.model.as_deref(),
        options.model_file.as_deref(),
        &options.model_set,
    )?;
    if let Some(scale) = options.time_scale {
        profile.set_time_scale(scale)?;
    }
    if let Some(spec) = options.bandwidth.clone() {
        set_bandwidths(&mut profile, &spec)?;
    }
    if let Some(units) = options.units {
        profile
            .set_units(units)
            .map_err(|err| as_option(err, "units", "--units"))?;
    }
    if let Some(latency) = args.latency.take() {
        profile.set_latencies(&latency.0).map_err(|err| {
            let err = as_option(err, "latency", "--latency");
            let name = &profile.name;
            ProfileError::new(
                err.parameter,
                format!("{} (its values: biusctl model show {name})", err.reason),
            )
        })?;
    }
    match (profile.is_zoned(), args.zones.zoned) {
        (true, true) => apply_zone_options(&mut profile, args)?,
        (false, false) => {}
        (zoned, _) => {
            return Err(CliError::Invalid {
                option: "--model",
                value: profile.name.clone(),
                reason: if zoned {
                    "a zoned model: add --zoned".into()
                } else {
                    "a conventional model: not with --zoned".into()
                },
            })
        }
    }
    Ok(Some(profile))
}

/// `--bandwidth KIND=RATE,...` into the profile.
fn set_bandwidths(profile: &mut Profile, spec: &str) -> Result<(), CliError> {
    let refuse = |reason: String| ProfileError::new("--bandwidth", reason);
    for part in spec
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        let (kind, rate) = part
            .split_once('=')
            .ok_or_else(|| refuse(format!("`{part}` is not KIND=RATE")))?;
        let bandwidths: &[Bandwidth] = match kind.trim() {
            "read" => &[Bandwidth::Read],
            "write" => &[Bandwidth::Write],
            "host" => &[Bandwidth::Read, Bandwidth::Write],
            "channel" => &[Bandwidth::Channel],
            other => {
                return Err(refuse(format!(
                    "unknown kind `{other}` (read, write, host or channel)"
                ))
                .into())
            }
        };
        let bytes_per_second = quantity::parse_bandwidth(rate).map_err(refuse)?;
        for &bandwidth in bandwidths {
            profile.set_bandwidth(bandwidth, bytes_per_second)?;
        }
    }
    Ok(())
}

/// A setter's refusal of the value an option gave it (the setter names
/// it `own`), named as the option; a refusal naming a key of the profile
/// stays as it is.
fn as_option(err: ProfileError, own: &str, option: &str) -> ProfileError {
    if err.parameter == own {
        ProfileError::new(option, err.reason)
    } else {
        err
    }
}

/// A zoned model's geometry and the zone options: each given option sets
/// the model's value, each one not given takes it.  The values are set
/// together, so that a smaller zone can come with a smaller capacity.
fn apply_zone_options(profile: &mut Profile, args: &mut CreateArgs) -> Result<(), CliError> {
    let mut zones = profile.zones.clone().expect("a zoned profile has [zones]");
    zones.size = args.zones.zone_size.map_or(zones.size, |size| size.0);
    zones.capacity = args
        .zones
        .zone_capacity
        .map_or(zones.capacity, |capacity| capacity.0);
    zones.conventional = args.zones.conv_zones.unwrap_or(zones.conventional);
    zones.max_open = args.zones.max_open.unwrap_or(zones.max_open);
    zones.max_active = args.zones.max_active.unwrap_or(zones.max_active);
    profile.set_zones(zones.clone())?;
    args.zones.zone_size = Some(Bytes(zones.size));
    args.zones.zone_capacity = Some(Bytes(zones.writable()));
    args.zones.conv_zones = Some(zones.conventional);
    args.zones.max_open = Some(zones.max_open);
    args.zones.max_active = Some(zones.max_active);
    Ok(())
}

/// `biusctl model ...`.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// The built-in models: name, kind and what each models.
    List {
        /// One JSON array of {name, kind, description, source}.
        #[arg(long)]
        json: bool,
    },
    /// A model's values as TOML, the format of --model-file (a file to
    /// start from), or as JSON.
    Show {
        /// A built-in model.
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        name: Option<String>,
        /// A model file.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// Set a value first, as --model-set does; repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// One JSON object instead of TOML.
        #[arg(long)]
        json: bool,
    },
}

/// A built-in model, as `biusctl model list --json` lists it.
#[derive(Debug, Serialize)]
struct Listed {
    name: String,
    kind: Kind,
    description: String,
    source: String,
}

/// Runs `biusctl model ...`.
pub fn run(command: ModelCommand) -> Result<(), CliError> {
    let mut stdout = io::stdout().lock();
    let written = match command {
        ModelCommand::List { json } => {
            let models = Profile::built_in_names()
                .map(|name| {
                    Profile::built_in(name).map(|profile| Listed {
                        name: profile.name,
                        kind: profile.kind,
                        description: profile.description,
                        source: profile.source,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if json {
                crate::output::write_json(&mut stdout, &models)
            } else {
                models.iter().try_for_each(|model| {
                    writeln!(
                        stdout,
                        "{:<9} {:<4} {}",
                        model.name,
                        format!("{:?}", model.kind).to_lowercase(),
                        model.description
                    )
                })
            }
        }
        ModelCommand::Show {
            name,
            file,
            set,
            json,
        } => {
            let profile = load(name.as_deref(), file.as_deref(), &set)?;
            if json {
                crate::output::write_json(&mut stdout, &profile)
            } else {
                stdout.write_all(profile.to_toml().as_bytes())
            }
        }
    };
    written.map_err(CliError::Stdout)
}

/// The model and its counts, as the daemon reports them.
#[derive(Debug, Serialize, Deserialize)]
pub struct ModelReport {
    /// The profile in force.
    pub profile: Profile,
    /// What the model counted.
    pub stats: StatsReport,
}

/// [`MediaStats`] and the write amplification.
#[derive(Debug, Serialize, Deserialize)]
pub struct StatsReport {
    pub host_bytes_written: u64,
    pub media_bytes_written: u64,
    pub gc_bytes_moved: u64,
    pub erases: u64,
    pub buffer_stalls: u64,
    /// Null before any write.
    pub write_amplification: Option<f64>,
}

impl From<MediaStats> for StatsReport {
    fn from(stats: MediaStats) -> Self {
        StatsReport {
            host_bytes_written: stats.host_bytes_written,
            media_bytes_written: stats.media_bytes_written,
            gc_bytes_moved: stats.gc_bytes_moved,
            erases: stats.erases,
            buffer_stalls: stats.buffer_stalls,
            write_amplification: stats.write_amplification(),
        }
    }
}

/// The `key: value` lines of `biusctl info` for a model.
pub fn info_lines(report: &ModelReport) -> Vec<(&'static str, String)> {
    let profile = &report.profile;
    let stats = &report.stats;
    let bytes = |value: u64| format!("{value} ({})", size::format(value));
    vec![
        (
            "model",
            format!("{}: {}", profile.name, profile.description),
        ),
        ("model_source", profile.source.clone()),
        ("model_time_scale", profile.time_scale.to_string()),
        ("host_bytes_written", bytes(stats.host_bytes_written)),
        ("media_bytes_written", bytes(stats.media_bytes_written)),
        ("gc_bytes_moved", bytes(stats.gc_bytes_moved)),
        ("erases", stats.erases.to_string()),
        ("buffer_stalls", stats.buffer_stalls.to_string()),
        (
            "write_amplification",
            stats
                .write_amplification
                .map_or("-".into(), |waf| format!("{waf:.3}")),
        ),
    ]
}

/// What the daemon reports of its model on its control socket.
pub fn report(model: &Model) -> ModelReport {
    ModelReport {
        profile: model.profile().clone(),
        stats: model.stats().into(),
    }
}

/// The control socket request a `biusctl create` daemon answers with its
/// model's [`ModelReport`] (an extension of the protocol).
pub const MODEL_REQUEST: &str = "model";

/// The model of the daemon serving `disk`, if it has one.
pub fn query(disk: &str) -> Option<ModelReport> {
    let asked = ControlClient::connect_disk(disk)
        .and_then(|mut client| client.extension(MODEL_REQUEST, ()));
    match asked {
        Ok(report) => Some(report),
        Err(ClientError::NoDaemon { .. } | ClientError::Refused(_)) => None,
        Err(err) => {
            log::warn!("{disk}: the daemon's model report: {err}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::create_args;

    fn resolved(args: &[&str]) -> Result<(Option<Profile>, CreateArgs), CliError> {
        let mut args = create_args(args);
        resolve(&mut args).map(|()| (args.model.resolved.clone(), args))
    }

    #[test]
    fn no_model_without_the_options() {
        assert!(resolved(&["ramdisk"]).unwrap().0.is_none());
        let err = resolved(&["--units", "4", "ramdisk"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--units without a model: needs --model or --model-file"
        );
    }

    #[test]
    fn overrides_reach_the_profile() {
        let (profile, args) = resolved(&[
            "--model",
            "nvme-ssd",
            "--latency",
            "read=80us,flush=1ms",
            "--bandwidth",
            "write=1G,channel=400MB",
            "--units",
            "4",
            "--time-scale",
            "100",
            "--model-set",
            "ftl.over_provisioning=0.28",
            "ramdisk",
        ])
        .unwrap();
        let profile = profile.unwrap();
        let flash = profile.flash.as_ref().unwrap();
        assert_eq!((flash.read_4k, flash.read_page), (80_000, 80_000));
        assert_eq!(profile.host.flush, 1_000_000);
        // One size convention: a bare G is 1024-based, MB 1000-based.
        assert_eq!(profile.host.write_bandwidth, 1 << 30);
        assert_eq!(flash.channel_bandwidth, 400_000_000);
        assert_eq!((flash.channels, flash.dies_per_channel), (4, 1));
        assert_eq!(profile.time_scale, 100.0);
        assert_eq!(profile.ftl.as_ref().unwrap().over_provisioning, 0.28);
        // The latency is the model's, not added on top.
        assert!(args.latency.is_none());
    }

    #[test]
    fn a_zoned_model_gives_the_zone_options() {
        let (profile, args) = resolved(&[
            "--zoned",
            "--model",
            "zns-ssd",
            "--max-open",
            "4",
            "ramdisk",
        ])
        .unwrap();
        let zones = profile.unwrap().zones.unwrap();
        assert_eq!(zones.max_open, 4);
        assert_eq!(args.zones.max_open, Some(4));
        assert_eq!(args.zones.zone_size.map(|b| b.0), Some(zones.size));
        assert_eq!(
            args.zones.zone_capacity.map(|b| b.0),
            Some(zones.writable())
        );
    }

    #[test]
    fn a_zone_size_reaches_a_zoned_model_in_biusctls_units() {
        for zone_size in ["64M", "64MiB", "64m"] {
            let (profile, args) = resolved(&[
                "--zoned",
                "--zone-size",
                zone_size,
                "--model",
                "zns-ssd",
                "ramdisk",
            ])
            .unwrap_or_else(|err| panic!("--zone-size {zone_size}: {err}"));
            assert_eq!(
                profile.unwrap().zones.unwrap().size,
                64 << 20,
                "{zone_size}"
            );
            assert_eq!(
                args.zones.zone_size.map(|b| b.0),
                Some(64 << 20),
                "{zone_size}"
            );
        }
    }

    #[test]
    fn zone_options_change_the_model_together() {
        let (profile, args) = resolved(&[
            "--zoned",
            "--zone-size",
            "32M",
            "--zone-capacity",
            "16M",
            "--max-open",
            "20",
            "--max-active",
            "20",
            "--model",
            "zns-ssd",
            "ramdisk",
        ])
        .unwrap();
        let zones = profile.unwrap().zones.unwrap();
        assert_eq!((zones.size, zones.capacity), (32 << 20, 16 << 20));
        assert_eq!((zones.max_open, zones.max_active), (20, 20));
        assert_eq!(args.zones.zone_capacity.map(|b| b.0), Some(16 << 20));
    }

    #[test]
    fn refusals_of_an_options_value_name_the_option() {
        let error = |args: &[&str]| resolved(args).unwrap_err().to_string();
        assert_eq!(
            error(&["--model", "nvm", "--units", "0", "ramdisk"]),
            "--units: must be at least 1 (is 0)"
        );
        assert_eq!(
            error(&["--model", "nvm", "--latency", "zone=1ms", "ramdisk"]),
            "--latency: the nvm model has no zone time (its values: biusctl model show nvm)"
        );
        assert!(
            error(&["--model", "nvm", "--bandwidth", "read=3X", "ramdisk"])
                .starts_with("--bandwidth: `3X` is not a bandwidth")
        );
        assert_eq!(
            error(&["--model", "nvm", "--bandwidth", "channel=1G", "ramdisk"]),
            "flash.channel_bandwidth: the nvm model has no flash channels"
        );
    }

    #[test]
    fn nonsense_is_refused_naming_the_parameter() {
        let error = |args: &[&str]| resolved(args).unwrap_err().to_string();
        assert_eq!(
            error(&["--model", "floppy", "ramdisk"]),
            "--model: no built-in model `floppy` (known: nvme-ssd, xg6, zns-ssd, smr-hdd, nvm)"
        );
        assert!(error(&["--model", "zns-ssd", "ramdisk"]).contains("add --zoned"));
        assert!(error(&["--zoned", "--model", "nvme-ssd", "ramdisk"]).contains("conventional"));
        assert!(error(&["--model", "nvm", "--units", "0", "ramdisk"]).starts_with("--units"));
        assert!(
            error(&["--model", "nvm", "--bandwidth", "read=0", "ramdisk"])
                .starts_with("host.read_bandwidth: must be at least 1")
        );
        assert!(
            error(&["--model", "nvm", "--model-set", "nvm.colour=1", "ramdisk"]).contains("colour")
        );
        assert!(error(&[
            "--zoned",
            "--model",
            "zns-ssd",
            "--max-open",
            "99",
            "ramdisk"
        ])
        .starts_with("zones.max_open"));
        assert!(
            error(&["--model", "nvm", "--latency", "zone=1ms", "ramdisk"]).starts_with("--latency")
        );
    }
}
