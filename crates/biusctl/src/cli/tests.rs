//! The command line's tests: parsing, defaults and refusals.

use bius::{Scheduling, TransferMode};
use clap::error::ErrorKind;

use super::*;
use crate::values::{PowerOfTwo, Sched};

fn create(args: &[&str]) -> CreateArgs {
    create_args(args)
}

fn parse(args: &[&str]) -> Result<Command, clap::Error> {
    Cli::try_parse_from(["biusctl"].iter().chain(args)).map(|cli| cli.command)
}

#[test]
fn create_defaults() {
    let args = create(&["ramdisk"]);
    assert_eq!(args.size, None);
    assert_eq!(
        (args.queues, args.depth, args.block_size),
        (None, None, None)
    );
    assert!(!args.read_only && !args.zones.zoned);
    assert_eq!(args.backend, Some(Backend::Ramdisk));
    assert_eq!(args.transfer, None);
}

#[test]
fn create_options_before_and_after_the_backend() {
    let args = create(&[
        "--size",
        "64M",
        "--queues",
        "4",
        "--depth",
        "32",
        "--block-size",
        "4096",
        "--physical-block-size",
        "8192",
        "--max-io",
        "256K",
        "--timeout",
        "5",
        "--name",
        "test0",
        "--read-only",
        "--transfer",
        "selective=64K",
        "--poll-us",
        "200",
        "--sched",
        "inherit",
        "--poll-queues",
        "1",
        "null",
    ]);
    assert_eq!(args.size, Some(Bytes(64 << 20)));
    assert_eq!(args.queues, Some(Ranged(4)));
    assert_eq!(args.depth, Some(Ranged(32)));
    assert_eq!(args.block_size, Some(PowerOfTwo(4096)));
    assert_eq!(args.physical_block_size, Some(PowerOfTwo(8192)));
    assert_eq!(args.max_io, Some(Bytes(256 << 10)));
    assert_eq!(args.timeout, Some(Ranged(5)));
    assert_eq!(args.name.as_deref(), Some("test0"));
    assert!(args.read_only);
    assert_eq!(
        args.transfer.map(|t| t.0),
        Some(TransferMode::Selective {
            threshold: 64 << 10
        })
    );
    assert_eq!(args.poll_us, Some(Ranged(200)));
    assert_eq!(args.sched, Some(Sched(Scheduling::Inherit)));
    assert_eq!(args.poll_queues, Some(Ranged(1)));
    assert_eq!(args.backend, Some(Backend::Null));

    let args = create(&["file", "--direct", "/dev/vdb", "--size", "1G"]);
    assert_eq!(args.size, Some(Bytes(1 << 30)));
    assert_eq!(
        args.backend,
        Some(Backend::File {
            engine: Engine::Auto,
            direct: true,
            path: "/dev/vdb".into()
        })
    );
}

#[test]
fn short_options() {
    let args = create(&[
        "-s", "1.5G", "-q", "2", "-d", "64", "-b", "4K", "-n", "x", "-t", "map", "-r", "-z",
        "ramdisk",
    ]);
    assert_eq!(args.size, Some(Bytes(3 << 29)));
    assert_eq!(
        (args.queues, args.depth),
        (Some(Ranged(2)), Some(Ranged(64)))
    );
    assert_eq!(args.block_size, Some(PowerOfTwo(4096)));
    assert_eq!(args.name.as_deref(), Some("x"));
    assert_eq!(args.transfer.map(|t| t.0), Some(TransferMode::Map));
    assert!(args.read_only && args.zones.zoned);
    let args = create(&["-c", "/etc/bius/x.toml", "-vv"]);
    assert_eq!(args.config, Some("/etc/bius/x.toml".into()));
    assert_eq!(args.backend, None);
}

#[test]
fn zone_options_need_zoned() {
    let args = create(&[
        "ramdisk",
        "--zoned",
        "--zone-size",
        "32M",
        "--zone-capacity",
        "24M",
        "--conv-zones",
        "2",
        "--max-open",
        "4",
        "--max-active",
        "6",
        "--max-append",
        "256K",
    ]);
    assert!(args.zones.zoned);
    assert_eq!(
        (args.zones.zone_size, args.zones.zone_capacity),
        (Some(Bytes(32 << 20)), Some(Bytes(24 << 20)))
    );
    assert_eq!(
        (
            args.zones.conv_zones,
            args.zones.max_open,
            args.zones.max_active
        ),
        (Some(2), Some(4), Some(6))
    );
    assert_eq!(args.zones.max_append, Some(Bytes(256 << 10)));
    for argv in [
        &["create", "--max-open", "3", "ramdisk"][..],
        &["create", "ramdisk", "--zone-size", "64M"],
    ] {
        let err = parse(argv).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument, "{argv:?}");
    }
    let args = create(&["--config", "z.toml", "--zoned", "--max-open", "3"]);
    assert_eq!(args.zones.max_open, Some(3));
    let args = create(&["--zoned", "--emulate-append", "ramdisk"]);
    assert!(args.zones.emulate_append);
    let err = parse(&["create", "--emulate-append", "ramdisk"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
    let err = parse(&[
        "create",
        "--zoned",
        "--emulate-append",
        "--max-append",
        "64K",
        "ramdisk",
    ])
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
}

#[test]
fn other_commands() {
    let parse = |args: &[&str]| parse(args).unwrap();
    assert!(matches!(parse(&["list"]), Command::List { json: false }));
    assert!(matches!(
        parse(&["list", "--json"]),
        Command::List { json: true }
    ));
    assert!(
        matches!(parse(&["info", "--json", "bius0"]), Command::Info { json: true, device } if device == "bius0")
    );
    assert!(matches!(
        parse(&["destroy", "--force", "/dev/bius1"]),
        Command::Destroy { force: true, all: false, device: Some(device) } if device == "/dev/bius1"
    ));
    assert!(matches!(
        parse(&["destroy", "--all", "-f"]),
        Command::Destroy {
            force: true,
            all: true,
            device: None
        }
    ));
    assert!(matches!(
        parse(&["version", "--json"]),
        Command::Version { json: true }
    ));
    assert!(matches!(
        parse(&["completions", "zsh"]),
        Command::Completions {
            shell: clap_complete::Shell::Zsh
        }
    ));
    assert!(
        matches!(parse(&["manpages", "/tmp/man"]), Command::Manpages { dir } if dir == std::path::Path::new("/tmp/man"))
    );
}

#[test]
fn recover_takes_the_device_then_create_s_arguments() {
    let Command::Recover(args) = parse(&["recover", "data", "file", "/srv/data.img"]).unwrap()
    else {
        panic!("not recover")
    };
    assert_eq!(args.device, "data");
    assert_eq!(
        args.create.backend,
        Some(Backend::File {
            engine: Engine::Auto,
            direct: false,
            path: "/srv/data.img".into()
        })
    );
    assert_eq!((args.create.size, args.create.recover), (None, None));
    let Command::Recover(args) = parse(&[
        "recover", "-q", "2", "3", "--zoned", "ramdisk", "--depth", "64",
    ])
    .unwrap() else {
        panic!("not recover")
    };
    assert_eq!(args.device, "3");
    assert!(args.create.zones.zoned);
    assert_eq!(
        (args.create.queues, args.create.depth),
        (Some(Ranged(2)), Some(Ranged(64)))
    );
    let args = create(&["--recover-timeout", "30", "null"]);
    assert_eq!(args.recover_timeout, Some(Ranged(30)));
    assert!(matches!(
        parse(&["detach", "/dev/data"]).unwrap(),
        Command::Detach { device } if device == "/dev/data"
    ));
    for (args, kind) in [
        (&["recover"][..], ErrorKind::MissingRequiredArgument),
        (
            &["create", "--recover-timeout", "91", "null"],
            ErrorKind::ValueValidation,
        ),
        (&["detach"], ErrorKind::MissingRequiredArgument),
    ] {
        assert_eq!(parse(args).unwrap_err().kind(), kind, "{args:?}");
    }
}

#[test]
fn zones_and_fault() {
    assert!(matches!(
        parse(&["zones", "nullb0"]).unwrap(),
        Command::Zones { json: false, device } if device == "nullb0"
    ));
    assert!(matches!(
        parse(&["fault", "--write-error", "4096", "bius0"]).unwrap(),
        Command::Fault {
            write_error: Some(2097152),
            ..
        }
    ));
    // SECTOR is a sector, held as its first byte; one past any disk is
    // refused.
    let past = (u64::MAX / 512 + 1).to_string();
    assert!(parse(&["fault", "--write-error", &past, "bius0"]).is_err());
    // Exactly one fault.
    assert!(parse(&["fault", "bius0"]).is_err());
    assert!(parse(&["fault", "bius0", "--offline", "1", "--read-only", "2"]).is_err());
}

#[test]
fn bad_arguments_are_rejected() {
    for (args, kind) in [
        (
            &["create", "--size", "12X", "ramdisk"][..],
            ErrorKind::ValueValidation,
        ),
        (
            &["create", "--queues", "0", "ramdisk"],
            ErrorKind::ValueValidation,
        ),
        (
            &["create", "--depth", "5000", "ramdisk"],
            ErrorKind::ValueValidation,
        ),
        (
            &["create", "--poll-us", "1001", "ramdisk"],
            ErrorKind::ValueValidation,
        ),
        (
            &["create", "--block-size", "1000", "ramdisk"],
            ErrorKind::ValueValidation,
        ),
        (
            &["create", "--transfer", "zero", "ramdisk"],
            ErrorKind::ValueValidation,
        ),
        (&["create", "file"], ErrorKind::MissingRequiredArgument),
        (&["create", "tape"], ErrorKind::InvalidSubcommand),
        (&["destroy"], ErrorKind::MissingRequiredArgument),
        (&["destroy", "--all", "bius0"], ErrorKind::ArgumentConflict),
        (&["completions", "tcsh"], ErrorKind::InvalidValue),
    ] {
        assert_eq!(parse(args).unwrap_err().kind(), kind, "{args:?}");
    }
}

#[test]
fn cli_is_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}

/// The help of `biusctl create`'s option `--LONG`, long or short.
fn create_help(long: &str) -> String {
    use clap::CommandFactory;
    let cli = Cli::command();
    let create = cli.find_subcommand("create").unwrap();
    let arg = create
        .get_arguments()
        .find(|arg| arg.get_long() == Some(long))
        .unwrap();
    arg.get_long_help().or(arg.get_help()).unwrap().to_string()
}

#[test]
fn the_help_says_the_limits_of_bius() {
    use bius::{limits, size};
    let help = create_help;
    for (option, limit) in [
        ("queues", format!("1 to {}", limits::MAX_QUEUES)),
        ("queues", format!("at most {}", limits::MAX_QUEUES)),
        ("depth", format!("1 to {}", limits::MAX_QUEUE_DEPTH)),
        ("block-size", format!("{},", limits::MIN_BLOCK_SIZE)),
        (
            "block-size",
            format!("or {}", limits::MAX_LOGICAL_BLOCK_SIZE),
        ),
        (
            "physical-block-size",
            format!(
                "up to {}",
                size::format(limits::MAX_PHYSICAL_BLOCK_SIZE.into())
            ),
        ),
        (
            "max-io",
            format!("to {}", size::format(limits::MAX_IO_SIZE.into())),
        ),
        ("name", format!("up to {} of", limits::MAX_NAME_LEN)),
        (
            "recover-timeout",
            format!("1 to {}", limits::MAX_RECOVER_TIMEOUT.as_secs()),
        ),
        (
            "poll-us",
            format!("0 to {}", limits::MAX_POLL_TIME.as_micros()),
        ),
    ] {
        let help = help(option);
        assert!(
            help.contains(&limit),
            "--{option}: {limit:?} not in {help:?}"
        );
    }
}

#[test]
fn the_help_says_the_defaults_of_bius() {
    use bius::{size, DeviceBuilder};
    let help = create_help;
    let defaults = DeviceBuilder::default();
    for (option, default) in [
        ("depth", DeviceBuilder::DEFAULT_QUEUE_DEPTH.to_string()),
        (
            "block-size",
            DeviceBuilder::DEFAULT_LOGICAL_BLOCK_SIZE.to_string(),
        ),
        (
            "max-io",
            size::format(DeviceBuilder::DEFAULT_MAX_IO_SIZE.into()),
        ),
        (
            "timeout",
            DeviceBuilder::DEFAULT_TIMEOUT.as_secs().to_string(),
        ),
        (
            "poll-us",
            DeviceBuilder::DEFAULT_POLL_TIME.as_micros().to_string(),
        ),
        (
            "transfer",
            Transfer(DeviceBuilder::DEFAULT_TRANSFER_MODE).to_string(),
        ),
        ("sched", Sched(defaults.get_scheduling()).to_string()),
        ("poll-queues", defaults.get_poll_queues().to_string()),
    ] {
        let help = help(option);
        let default = format!("[default: {default}]");
        assert!(
            help.contains(&default),
            "--{option}: {default:?} not in {help:?}"
        );
    }
    assert!(help("queues").contains("[default: one per CPU plus the poll queues, at most 64]"));
}

#[test]
fn every_command_s_help_ends_with_the_exit_statuses() {
    use clap::CommandFactory;
    let cli = Cli::command();
    for command in std::iter::once(&cli).chain(cli.get_subcommands()) {
        let after = command.get_after_help().map(ToString::to_string);
        let after = after.unwrap_or_default();
        assert!(after.ends_with(EXIT_STATUS), "{}", command.get_name());
    }
    for (name, examples) in [("create", CREATE_EXAMPLES), ("recover", RECOVER_EXAMPLES)] {
        let command = cli.find_subcommand(name).unwrap();
        let after = command.get_after_help().unwrap().to_string();
        assert_eq!(after, format!("{examples}\n{EXIT_STATUS}"));
    }
}
