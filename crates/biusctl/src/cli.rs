//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    /// live.
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
    #[command(subcommand)]
    pub backend: Backend,
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
