//! The command line.

use std::path::PathBuf;

use bius::TransferMode;
use clap::{ArgGroup, Args, Parser, Subcommand};

use crate::size;

/// Create, list, inspect and destroy BIUS block devices.
#[derive(Debug, Parser)]
#[command(version)]
pub struct Cli {
    /// More diagnostics on standard error (-v: info, -vv: debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a device and serve it in the foreground until SIGINT/SIGTERM.
    ///
    /// Prints the disk's path (/dev/<name>) on standard output once it is
    /// live.  A zoned RAM disk (--zoned) also listens for `biusctl fault`
    /// on the Unix socket /run/bius/<name>.sock.
    #[command(
        subcommand_value_name = "BACKEND",
        subcommand_help_heading = "Backends",
        disable_help_subcommand = true
    )]
    Create(CreateArgs),
    /// List the devices.
    List,
    /// Show all parameters of one device.
    Info {
        /// Device id, disk name (bius0) or path (/dev/bius0).
        device: String,
    },
    /// Show the zones of a zoned block device (any: bius, null_blk, ...).
    ///
    /// Positions and lengths are in 512-byte sectors.  The table's WP is
    /// the write pointer relative to the zone start ("-" where there is
    /// none: conventional, read-only and offline zones); --json gives it
    /// as an absolute sector, or null.
    Zones {
        /// One JSON array of zone objects (zone, start, len, capacity, wp,
        /// type, cond) instead of the table.
        #[arg(long)]
        json: bool,
        /// Disk name (nullb0), path (/dev/nullb0) or bius device id.
        device: String,
    },
    /// Inject a fault into a running zoned RAM disk (biusctl create --zoned).
    ///
    /// Sends the command to the daemon serving the disk, through
    /// /run/bius/<name>.sock, and prints its answer.  ZONE is a zone index
    /// as `biusctl zones` numbers them (0 = first zone); SECTOR is a
    /// 512-byte sector.  --read-only (--offline) on a zone that already is
    /// read-only (offline) makes it empty again.
    #[command(group(ArgGroup::new("fault").required(true).multiple(false)))]
    Fault {
        /// Make zone ZONE read-only.
        #[arg(long, value_name = "ZONE", group = "fault")]
        read_only: Option<u32>,
        /// Take zone ZONE offline.
        #[arg(long, value_name = "ZONE", group = "fault")]
        offline: Option<u32>,
        /// Fail writes reaching SECTOR (the sectors before it are written).
        #[arg(long, value_name = "SECTOR", group = "fault")]
        write_error: Option<u64>,
        /// Remove the write error at SECTOR.
        #[arg(long, value_name = "SECTOR", group = "fault")]
        clear_write_error: Option<u64>,
        /// Disk name (bius0), path (/dev/bius0) or device id.
        device: String,
    },
    /// Stop and remove a device.
    Destroy {
        /// Remove it even if its disk is open.
        #[arg(long)]
        force: bool,
        /// Device id, disk name (bius0) or path (/dev/bius0).
        device: String,
    },
}

/// Options of `biusctl create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Size in bytes, or with a K, M, G or T suffix (powers of 1024)
    /// [default: 1G; file: the file's size].
    #[arg(long, value_parser = size::parse, global = true)]
    pub size: Option<u64>,
    /// Hardware queues, each served by its own thread.
    #[arg(long, default_value_t = 1, global = true)]
    pub queues: u32,
    /// Requests in flight per queue.
    #[arg(long, default_value_t = 128, global = true)]
    pub depth: u32,
    /// Logical block size in bytes (512 or 4096).
    #[arg(long, default_value_t = 512, global = true)]
    pub block_size: u32,
    /// Physical block size in bytes [default: the block size].
    #[arg(long, global = true)]
    pub physical_block_size: Option<u32>,
    /// Largest I/O, like --size [default: the kernel's, 1M].
    #[arg(long, value_parser = size::parse, global = true)]
    pub max_io: Option<u64>,
    /// Request timeout in seconds [default: the kernel's, 30].
    #[arg(long, global = true)]
    pub timeout: Option<u64>,
    /// Disk name [default: bius<id>].
    #[arg(long, global = true)]
    pub name: Option<String>,
    /// Make the disk read-only.
    #[arg(long, global = true)]
    pub read_only: bool,
    /// How request data crosses the kernel boundary: copy (through the
    /// request stream), map (the I/O buffers mapped into the daemon, zero
    /// copy) or selective[=SIZE] (map requests of at least SIZE, default
    /// 128K, copy smaller ones).
    #[arg(long, value_name = "MODE", value_parser = parse_transfer, default_value = "copy", global = true)]
    pub transfer: TransferMode,
    /// Microseconds a queue thread waiting for a request busy-waits in
    /// the kernel before it sleeps (0..=1000; 0: never).  Saves two context
    /// switches per request when requests follow closely, for idle CPU
    /// time.
    #[arg(long, value_name = "USECS", default_value_t = 0, global = true)]
    pub poll_us: u64,
    /// Make a zoned (host-managed) disk, as zoned null_blk does (ramdisk
    /// only).
    #[arg(long, global = true, help_heading = "Zoned")]
    pub zoned: bool,
    /// Zone size, a power of two, like --size [default: 64M].
    #[arg(long, value_name = "SIZE", value_parser = size::parse, global = true, help_heading = "Zoned")]
    pub zone_size: Option<u64>,
    /// Writable bytes of each zone, like --size [default: the zone size].
    #[arg(long, value_name = "SIZE", value_parser = size::parse, global = true, help_heading = "Zoned")]
    pub zone_capacity: Option<u64>,
    /// Leading conventional zones [default: 0].
    #[arg(long, value_name = "N", global = true, help_heading = "Zoned")]
    pub conv_zones: Option<u32>,
    /// Most open zones [default: no limit].
    #[arg(long, value_name = "N", global = true, help_heading = "Zoned")]
    pub max_open: Option<u32>,
    /// Most active (open or closed) zones [default: no limit].
    #[arg(long, value_name = "N", global = true, help_heading = "Zoned")]
    pub max_active: Option<u32>,
    /// Largest zone append, like --size [default: the largest I/O].
    #[arg(long, value_name = "SIZE", value_parser = size::parse, global = true, help_heading = "Zoned")]
    pub max_append: Option<u64>,
    #[command(subcommand)]
    pub backend: Backend,
}

impl CreateArgs {
    /// The usage errors clap cannot see: zone options need --zoned, and
    /// --zoned the ramdisk backend.
    pub fn check(&self) -> Result<(), String> {
        if self.zoned {
            return match self.backend {
                Backend::Ramdisk => Ok(()),
                _ => Err("--zoned works with the ramdisk backend only".into()),
            };
        }
        let zone_options = [
            ("--zone-size", self.zone_size.is_some()),
            ("--zone-capacity", self.zone_capacity.is_some()),
            ("--conv-zones", self.conv_zones.is_some()),
            ("--max-open", self.max_open.is_some()),
            ("--max-active", self.max_active.is_some()),
            ("--max-append", self.max_append.is_some()),
        ];
        match zone_options.iter().find(|(_, given)| *given) {
            Some((option, _)) => Err(format!("{option} needs --zoned")),
            None => Ok(()),
        }
    }
}

/// Parses `copy`, `map`, `selective` or `selective=SIZE` (SIZE as for
/// --size, at most 4 GiB - 1).
pub fn parse_transfer(text: &str) -> Result<TransferMode, String> {
    match text.split_once('=') {
        None if text == "copy" => Ok(TransferMode::Copy),
        None if text == "map" => Ok(TransferMode::Map),
        None if text == "selective" => Ok(TransferMode::Selective { threshold: 0 }),
        Some(("selective", bytes)) => {
            let threshold = size::parse(bytes)?;
            let threshold = u32::try_from(threshold)
                .map_err(|_| format!("`{bytes}` is too large a threshold"))?;
            Ok(TransferMode::Selective { threshold })
        }
        _ => Err(format!(
            "`{text}` is not a transfer mode (copy, map, selective or selective=SIZE)"
        )),
    }
}

/// Where the data lives.
#[derive(Debug, Subcommand)]
pub enum Backend {
    /// Anonymous memory, allocated on first write.
    Ramdisk,
    /// No storage: reads return zeroes, writes are dropped.
    Null,
    /// A regular file or an existing block device.
    File {
        /// Bypass the page cache (O_DIRECT).
        #[arg(long)]
        direct: bool,
        /// The file or block device.
        path: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(args: &[&str]) -> CreateArgs {
        let argv = ["biusctl", "create"].iter().chain(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Create(args) => args,
            other => panic!("not create: {other:?}"),
        }
    }

    #[test]
    fn create_defaults() {
        let args = create(&["ramdisk"]);
        assert_eq!(args.size, None);
        assert_eq!((args.queues, args.depth, args.block_size), (1, 128, 512));
        assert!(!args.read_only);
        assert!(matches!(args.backend, Backend::Ramdisk));
        assert_eq!(args.transfer, TransferMode::Copy);
    }

    #[test]
    fn transfer_modes() {
        assert_eq!(
            create(&["--transfer", "map", "null"]).transfer,
            TransferMode::Map
        );
        assert_eq!(
            create(&["ramdisk", "--transfer=selective"]).transfer,
            TransferMode::Selective { threshold: 0 }
        );
        assert_eq!(
            create(&["--transfer", "selective=64K", "ramdisk"]).transfer,
            TransferMode::Selective {
                threshold: 64 << 10
            }
        );
        assert_eq!(parse_transfer("copy"), Ok(TransferMode::Copy));
        for bad in [
            "",
            "Map",
            "copy=4K",
            "selective=",
            "selective=4X",
            "selective=4G",
        ] {
            assert!(parse_transfer(bad).is_err(), "{bad}");
        }
        let argv = ["biusctl", "create", "--transfer", "zero", "ramdisk"];
        assert!(Cli::try_parse_from(argv).is_err());
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
            "null",
        ]);
        assert_eq!(args.size, Some(64 << 20));
        assert_eq!((args.queues, args.depth, args.block_size), (4, 32, 4096));
        assert_eq!(args.physical_block_size, Some(8192));
        assert_eq!((args.max_io, args.timeout), (Some(256 << 10), Some(5)));
        assert_eq!(args.name.as_deref(), Some("test0"));
        assert!(args.read_only);
        assert!(matches!(args.backend, Backend::Null));

        let args = create(&["file", "--direct", "/dev/vdb", "--size", "1G"]);
        assert_eq!(args.size, Some(1 << 30));
        match args.backend {
            Backend::File { direct, path } => {
                assert!(direct);
                assert_eq!(path, PathBuf::from("/dev/vdb"));
            }
            other => panic!("not file: {other:?}"),
        }
    }

    #[test]
    fn other_commands() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(["biusctl"].iter().chain(args))
                .unwrap()
                .command
        };
        assert!(matches!(parse(&["list"]), Command::List));
        assert!(matches!(parse(&["info", "bius0"]), Command::Info { device } if device == "bius0"));
        assert!(matches!(
            parse(&["destroy", "--force", "/dev/bius1"]),
            Command::Destroy { force: true, device } if device == "/dev/bius1"
        ));
        assert!(matches!(
            parse(&["destroy", "3"]),
            Command::Destroy { force: false, device } if device == "3"
        ));
    }

    #[test]
    fn zoned_options() {
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
        assert!(args.zoned);
        assert_eq!(
            (args.zone_size, args.zone_capacity),
            (Some(32 << 20), Some(24 << 20))
        );
        assert_eq!(
            (args.conv_zones, args.max_open, args.max_active),
            (Some(2), Some(4), Some(6))
        );
        assert_eq!(args.max_append, Some(256 << 10));
        assert_eq!(args.check(), Ok(()));
        assert!(!create(&["ramdisk"]).zoned);
        assert_eq!(
            create(&["--zoned", "null"]).check(),
            Err("--zoned works with the ramdisk backend only".into())
        );
        assert_eq!(
            create(&["--max-open", "3", "ramdisk"]).check(),
            Err("--max-open needs --zoned".into())
        );
    }

    #[test]
    fn zones_and_fault() {
        let parse = |args: &[&str]| Cli::try_parse_from(["biusctl"].iter().chain(args));
        assert!(matches!(
            parse(&["zones", "nullb0"]).unwrap().command,
            Command::Zones { json: false, device } if device == "nullb0"
        ));
        assert!(matches!(
            parse(&["zones", "--json", "/dev/bius0"]).unwrap().command,
            Command::Zones { json: true, .. }
        ));
        assert!(matches!(
            parse(&["fault", "bius0", "--read-only", "3"])
                .unwrap()
                .command,
            Command::Fault {
                read_only: Some(3),
                offline: None,
                ..
            }
        ));
        assert!(matches!(
            parse(&["fault", "--write-error", "4096", "bius0"])
                .unwrap()
                .command,
            Command::Fault {
                write_error: Some(4096),
                ..
            }
        ));
        // Exactly one fault.
        assert!(parse(&["fault", "bius0"]).is_err());
        assert!(parse(&["fault", "bius0", "--offline", "1", "--read-only", "2"]).is_err());
    }

    #[test]
    fn bad_arguments_are_rejected() {
        for args in [
            &["create"][..],
            &["create", "--size", "12X", "ramdisk"],
            &["create", "file"],
            &["create", "tape"],
            &["destroy"],
        ] {
            assert!(
                Cli::try_parse_from(["biusctl"].iter().chain(args)).is_err(),
                "{args:?}"
            );
        }
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
