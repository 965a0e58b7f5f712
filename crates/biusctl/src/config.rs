//! `biusctl create --config FILE`: the device's settings from a TOML file.
//!
//! The file's keys are `create`'s long options with `_` for `-` (`size`,
//! `queues`, `poll_us`, `zone_size`, ...), parsed like them (sizes as
//! `"4G"` or a number of bytes), and `backend`: `"ramdisk"`, `"null"`,
//! `"zero"`, a `[backend.file]` table (`path`, `direct`, `engine`) or a
//! `[backend.nbd]` table (`address`, `export`, `connections`).  Unknown
//! keys are errors.  Options given on the command line override the file's.
//! `packaging/example.toml` documents every key.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cli::{Backend, CreateArgs, StatsArgs, ZoneArgs};
use crate::error::CliError;
use crate::model::ModelArgs;
use crate::trace::FormatArg;
use crate::values::{
    BlockSize, Bytes, Depth, LatencySpec, PhysicalBlockSize, PollQueues, PollUsecs, Queues,
    RecoverSecs, Sched, TimeoutSecs, Transfer,
};

/// The keys of a config file: those of [`CreateArgs`], flat (the zone and
/// statistics options beside the others, as on the command line), with
/// the model's in a `[model]` table.  Not [`CreateArgs`] itself, whose
/// option groups serde could only flatten by buffering the values, which
/// would lose where in the file a wrong value or key is.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    size: Option<Bytes>,
    queues: Option<Queues>,
    poll_queues: Option<PollQueues>,
    depth: Option<Depth>,
    block_size: Option<BlockSize>,
    physical_block_size: Option<PhysicalBlockSize>,
    max_io: Option<Bytes>,
    timeout: Option<TimeoutSecs>,
    name: Option<String>,
    recover_timeout: Option<RecoverSecs>,
    #[serde(default)]
    read_only: bool,
    transfer: Option<Transfer>,
    poll_us: Option<PollUsecs>,
    sched: Option<Sched>,
    latency: Option<LatencySpec>,
    #[serde(default)]
    zoned: bool,
    zone_state: Option<PathBuf>,
    zone_size: Option<Bytes>,
    zone_capacity: Option<Bytes>,
    conv_zones: Option<u32>,
    max_open: Option<u32>,
    max_active: Option<u32>,
    max_append: Option<Bytes>,
    #[serde(default)]
    emulate_append: bool,
    #[serde(default)]
    no_stats: bool,
    trace: Option<PathBuf>,
    trace_format: Option<FormatArg>,
    #[serde(default)]
    model: ModelArgs,
    backend: Option<Backend>,
}

/// Reads and parses the config file at `path`.
pub fn load(path: &Path) -> Result<ConfigFile, CliError> {
    let text =
        std::fs::read_to_string(path).map_err(|err| CliError::ReadConfig(path.into(), err))?;
    parse(&text).map_err(|why| CliError::Config(path.into(), why))
}

/// Parses a config file's text; the error says where and why.
fn parse(text: &str) -> Result<ConfigFile, String> {
    toml::from_str(text).map_err(|err| match err.span() {
        Some(span) => {
            let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
            let line = text[line_start..].lines().next().unwrap_or_default();
            let number = text[..span.start].matches('\n').count() + 1;
            format!("line {number} ({}): {}", line.trim(), err.message())
        }
        None => err.message().to_string(),
    })
}

/// The command line's options, with the file's where the command line has
/// none.
pub fn merge(command_line: CreateArgs, file: ConfigFile) -> CreateArgs {
    let (zones, stats) = (command_line.zones, command_line.stats);
    CreateArgs {
        config: command_line.config,
        size: command_line.size.or(file.size),
        queues: command_line.queues.or(file.queues),
        poll_queues: command_line.poll_queues.or(file.poll_queues),
        depth: command_line.depth.or(file.depth),
        block_size: command_line.block_size.or(file.block_size),
        physical_block_size: command_line
            .physical_block_size
            .or(file.physical_block_size),
        max_io: command_line.max_io.or(file.max_io),
        timeout: command_line.timeout.or(file.timeout),
        name: command_line.name.or(file.name),
        recover_timeout: command_line.recover_timeout.or(file.recover_timeout),
        read_only: command_line.read_only || file.read_only,
        transfer: command_line.transfer.or(file.transfer),
        poll_us: command_line.poll_us.or(file.poll_us),
        sched: command_line.sched.or(file.sched),
        latency: command_line.latency.or(file.latency),
        zones: ZoneArgs {
            zoned: zones.zoned || file.zoned,
            zone_state: zones.zone_state.or(file.zone_state),
            zone_size: zones.zone_size.or(file.zone_size),
            zone_capacity: zones.zone_capacity.or(file.zone_capacity),
            conv_zones: zones.conv_zones.or(file.conv_zones),
            max_open: zones.max_open.or(file.max_open),
            max_active: zones.max_active.or(file.max_active),
            max_append: zones.max_append.or(file.max_append),
            emulate_append: zones.emulate_append || file.emulate_append,
        },
        stats: StatsArgs {
            no_stats: stats.no_stats || file.no_stats,
            trace: stats.trace.or(file.trace),
            trace_format: stats.trace_format.or(file.trace_format),
        },
        model: ModelArgs::merge(command_line.model, file.model),
        backend: command_line.backend.or(file.backend),
        recover: command_line.recover,
    }
}

#[cfg(test)]
mod tests {
    use bius::TransferMode;

    use super::*;
    use crate::cli::{create_args, Cli, Engine};
    use crate::values::{PowerOfTwo, Ranged};

    const EXAMPLE: &str = include_str!("../../../packaging/example.toml");

    #[test]
    fn a_model_table_merges_under_the_command_line() {
        let file =
            parse("[model]\nname = \"nvme-ssd\"\nset = [\"flash.channels=4\"]\ntime_scale = 10\n")
                .unwrap();
        let line = create_args(&[
            "--model-set",
            "flash.dies_per_channel=1",
            "--time-scale",
            "100",
            "ramdisk",
        ]);
        let merged = merge(line, file).model;
        assert_eq!(merged.model.as_deref(), Some("nvme-ssd"));
        assert_eq!(
            merged.model_set,
            ["flash.channels=4", "flash.dies_per_channel=1"]
        );
        assert_eq!(merged.time_scale, Some(100.0));
        let line = create_args(&["--model", "nvm", "ramdisk"]);
        let file = parse("[model]\nfile = \"/etc/m.toml\"\n").unwrap();
        let merged = merge(line, file).model;
        assert_eq!(
            (merged.model.as_deref(), merged.model_file),
            (Some("nvm"), None)
        );
        assert!(parse("[model]\ncolour = 1\n")
            .unwrap_err()
            .contains("colour"));
    }

    #[test]
    fn the_example_parses() {
        let args = parse(EXAMPLE).unwrap();
        assert_eq!(args.size, Some(Bytes(4 << 30)));
        assert_eq!(args.queues, Some(Ranged(2)));
        assert_eq!(args.depth, Some(Ranged(128)));
        assert_eq!(args.block_size, Some(PowerOfTwo(512)));
        assert_eq!(args.physical_block_size, Some(PowerOfTwo(4096)));
        assert_eq!(args.max_io, Some(Bytes(1 << 20)));
        assert_eq!(args.timeout, Some(Ranged(30)));
        assert_eq!(args.name.as_deref(), Some("data0"));
        assert!(!args.read_only && !args.zoned);
        assert_eq!(
            args.transfer,
            Some(Transfer(TransferMode::Selective {
                threshold: 128 << 10
            }))
        );
        assert_eq!(args.poll_us, Some(Ranged(200)));
        assert_eq!(args.model, ModelArgs::default());
        assert_eq!(
            args.backend,
            Some(Backend::File {
                engine: Engine::Auto,
                direct: true,
                path: "/var/lib/bius/data0.img".into()
            })
        );
        // Every key of the example is there, commented out or not.
        let keys: Vec<&str> = EXAMPLE
            .lines()
            .filter_map(|line| line.trim_start_matches("# ").split_once(" = "))
            .map(|(key, _)| key)
            .collect();
        for key in [
            "size",
            "queues",
            "poll_queues",
            "depth",
            "block_size",
            "physical_block_size",
            "max_io",
            "timeout",
            "recover_timeout",
            "name",
            "read_only",
            "transfer",
            "poll_us",
            "sched",
            "zoned",
            "zone_state",
            "zone_size",
            "zone_capacity",
            "conv_zones",
            "max_open",
            "max_active",
            "max_append",
            "emulate_append",
            "backend",
            "path",
            "direct",
        ] {
            assert!(keys.contains(&key), "{key} is not in the example");
        }
    }

    #[test]
    fn backends_and_zones() {
        let args = parse("backend = \"null\"\n").unwrap();
        assert_eq!(args.backend, Some(Backend::Null));
        let args = parse(
            "size = 268435456\nzoned = true\nzone_size = \"32M\"\nmax_open = 4\nbackend = \"ramdisk\"\n",
        )
        .unwrap();
        assert_eq!(args.size, Some(Bytes(256 << 20)));
        assert!(args.zoned);
        assert_eq!(
            (args.zone_size, args.max_open),
            (Some(Bytes(32 << 20)), Some(4))
        );
        let args = parse("[backend.file]\npath = \"/dev/vdb\"\n").unwrap();
        assert_eq!(
            args.backend,
            Some(Backend::File {
                engine: Engine::Auto,
                direct: false,
                path: "/dev/vdb".into()
            })
        );
    }

    #[test]
    fn errors_say_where_and_why() {
        assert_eq!(
            parse("size = \"1G\"\nqueues = 0\n").unwrap_err(),
            "line 2 (queues = 0): must be 1 to 64"
        );
        let err = parse("size = \"12X\"\n").unwrap_err();
        assert!(
            err.starts_with("line 1 (size = \"12X\"): not a size ("),
            "{err}"
        );
        let err = parse("sise = \"1G\"\n").unwrap_err();
        assert!(
            err.starts_with("line 1 (sise = \"1G\"): unknown field `sise`"),
            "{err}"
        );
        let err = parse("backend = \"tape\"\n").unwrap_err();
        assert!(
            err.starts_with("line 1 (backend = \"tape\"): unknown variant `tape`"),
            "{err}"
        );
        assert!(parse("config = \"x.toml\"\n").is_err());
        assert!(parse("[backend.file]\npath = \"/x\"\nsync = true\n").is_err());
    }

    #[test]
    fn the_command_line_overrides_the_file() {
        let file = parse(
            "size = \"1G\"\nqueues = 4\nname = \"fromfile\"\ntransfer = \"map\"\nbackend = \"null\"\n",
        )
        .unwrap();
        let args = merge(create_args(&["-c", "x.toml", "-q", "2", "-r"]), file);
        assert_eq!(args.size, Some(Bytes(1 << 30)));
        assert_eq!(args.queues, Some(Ranged(2)));
        assert_eq!(args.name.as_deref(), Some("fromfile"));
        assert_eq!(args.transfer, Some(Transfer(TransferMode::Map)));
        assert!(args.read_only);
        assert_eq!(args.backend, Some(Backend::Null));
        assert_eq!(args.config, Some("x.toml".into()));

        let file = parse("backend = \"null\"\n").unwrap();
        let args = merge(create_args(&["-c", "x.toml", "ramdisk"]), file);
        assert_eq!(args.backend, Some(Backend::Ramdisk));
    }

    /// Every backend as the module documentation and example.toml say.
    #[test]
    fn every_backend_has_its_form() {
        for (text, zero) in [
            ("backend = \"zero\"\n", true),
            ("backend = \"ramdisk\"\n", false),
        ] {
            let file = parse(text).unwrap();
            assert_eq!(file.backend == Some(Backend::Zero), zero, "{text}");
        }
        let file = parse(
            "[backend.nbd]\naddress = \"unix:/run/nbd.sock\"\nexport = \"disk\"\nconnections = 2\n",
        )
        .unwrap();
        assert!(
            matches!(&file.backend, Some(Backend::Nbd { export, .. }) if export == "disk"),
            "{:?}",
            file.backend
        );
        let file = parse("[backend.file]\npath = \"/dev/vdb\"\nengine = \"threads\"\n").unwrap();
        assert!(matches!(
            file.backend,
            Some(Backend::File {
                engine: Engine::Threads,
                ..
            })
        ));
    }

    #[test]
    fn the_keys_are_the_options_of_create() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let options: Vec<String> = cli
            .find_subcommand("create")
            .unwrap()
            .get_arguments()
            .filter(|arg| arg.get_help_heading() != Some("Model"))
            .filter_map(|arg| arg.get_long())
            .filter(|long| !["config", "verbose", "help"].contains(long))
            .map(|long| long.replace('-', "_"))
            .collect();
        // a key of the file takes a value of the option's type: not an array
        for key in &options {
            let err = parse(&format!("{key} = []\n")).unwrap_err();
            assert!(!err.contains("unknown field"), "{key}: {err}");
        }
        let err = parse("x = 1\n").unwrap_err();
        let (_, expected) = err.split_once("expected one of ").unwrap();
        let keys: Vec<&str> = expected
            .split(", ")
            .map(|key| key.trim_matches('`'))
            .collect();
        let others = ["model", "backend"];
        assert_eq!(keys.len(), options.len() + others.len(), "{keys:?}");
        for key in keys.iter().filter(|key| !others.contains(key)) {
            assert!(options.contains(&key.to_string()), "{key} is no option");
        }
    }
}
