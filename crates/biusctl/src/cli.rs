//! The command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgGroup, Args, Parser, Subcommand};
use serde::Deserialize;

use crate::model::{ModelArgs, ModelCommand};
use crate::trace::FormatArg;
use crate::values::{
    parse_seconds, parse_sector, BlockSize, Bytes, Connections, Depth, LatencySpec, NbdServer,
    PhysicalBlockSize, PollQueues, PollUsecs, Queues, Ranged, RecoverSecs, Sched, TimeoutSecs,
    Transfer,
};

/// The exit statuses, shown by every --help.
const EXIT_STATUS: &str = "\
Exit status:
  0  success
  1  failure: the error message says what failed, with its errno
  2  invalid command line or config file (nothing was done)";

/// Examples of `biusctl create --help`.
const CREATE_EXAMPLES: &str = "\
Examples:
  biusctl create -s 4G -q 2 ramdisk          4 GiB RAM disk, two queues
  biusctl create --zoned --zone-size 64M ramdisk
                                             zoned RAM disk (1 GiB, 16 zones)
  biusctl create -n data file --direct /srv/disk.img
                                             a file as /dev/data, no page cache
  biusctl create --zoned -s 4G --zone-size 256M file /srv/zoned.img
                                             zoned file, zone states in
                                             /srv/zoned.img.zones (created at
                                             4 GiB if missing; a restarted
                                             daemon finds its zones)
  biusctl create -s 1.5G null                null device: no data moves
  biusctl create -t map -s 1.5G zero         zero device, data mapped (zero-copy)
  biusctl create --config /etc/bius/data.toml -r
                                             the device of a config file, read-only

Sizes: 512, 64k, 4G, 4GiB and 1.5G are 1024-based; 4GB, 100MB are 1000-based
(the same in --bandwidth rates, config files and model files).
";

/// Examples of `biusctl recover --help`.
const RECOVER_EXAMPLES: &str = "\
Examples:
  biusctl create -n data --recover-timeout 30 file /srv/data.img
                                             a disk that survives its daemon
  kill -9 <its pid>; biusctl list            data is `recovering`, its I/O waits
  biusctl recover data file /srv/data.img    serve it again, from the same file
  biusctl detach data                        hand it over to a new daemon
";

/// Create, list, inspect and destroy BIUS block devices.
#[derive(Debug, Parser)]
#[command(version, after_help = EXIT_STATUS)]
pub struct Cli {
    /// More diagnostics on standard error (-v: info, -vv: debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.  Every command's help ends with the exit statuses.
#[derive(Debug, Subcommand)]
#[command(mut_subcommands = with_exit_status)]
pub enum Command {
    /// Create a device and serve it in the foreground until SIGINT/SIGTERM.
    ///
    /// Prints the disk's path (/dev/<name>) on standard output once it is
    /// live; under systemd (NOTIFY_SOCKET set) it then also reports
    /// READY=1.  It answers `biusctl stats`, `biusctl trace` and (a zoned
    /// RAM disk) `biusctl fault` on the Unix socket /run/bius/<name>.sock.
    #[command(after_help = CREATE_EXAMPLES)]
    Create(Box<CreateArgs>),
    /// Serve again a device whose daemon died or detached (state
    /// `recovering`), until SIGINT/SIGTERM, as `create` does.
    ///
    /// Takes the backend as `create` does; every other setting defaults to
    /// the device's (size, queues, block sizes, timeouts, zone geometry,
    /// ...), and an option given must equal the device's (else it is
    /// refused, naming the device's value).  Requests the dead daemon had
    /// read are sent again.  Only a backend that keeps its data outside
    /// the daemon recovers it: file (and a zoned file), not ramdisk or
    /// null.
    #[command(after_help = RECOVER_EXAMPLES)]
    Recover(Box<RecoverArgs>),
    /// Stop serving a device and exit, leaving it to `biusctl recover`
    /// (e.g. to upgrade biusctl or the backend).
    ///
    /// Asks the daemon serving the device, through its socket
    /// /run/bius/<name>.sock, to close its queues without destroying the
    /// device, and waits until the device is `recovering`: its I/O then
    /// waits for `biusctl recover` for up to the recovery timeout.
    /// Refused for a device created without --recover-timeout.
    Detach {
        /// Disk name (bius0), path (/dev/bius0) or device id.
        device: String,
    },
    /// List the devices.
    List {
        /// One JSON array of device objects instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Show all parameters of one device.
    Info {
        /// One JSON object instead of the `key: value` lines.
        #[arg(long)]
        json: bool,
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
        /// (Held as the sector's first byte.)
        #[arg(long, value_name = "SECTOR", group = "fault", value_parser = parse_sector)]
        write_error: Option<u64>,
        /// Remove the write error at SECTOR.  (Held as the sector's first
        /// byte.)
        #[arg(long, value_name = "SECTOR", group = "fault", value_parser = parse_sector)]
        clear_write_error: Option<u64>,
        /// Disk name (bius0), path (/dev/bius0) or device id.
        device: String,
    },
    /// Show the statistics the daemon of a device keeps of its requests.
    ///
    /// Per operation: requests, bytes, failures and service times in the
    /// daemon (mean, percentiles, max); the same requests as
    /// /sys/block/<name>/stat counts them; on a zoned disk, the zones'
    /// history (bytes written, opens, closes, finishes, resets, appends)
    /// and how full they are now and were when reset or finished, in 10%
    /// buckets.  Read from the daemon's socket /run/bius/<name>.sock.
    Stats {
        /// One JSON object (one per line with --watch).
        #[arg(long)]
        json: bool,
        /// Each zone's statistics too.
        #[arg(long)]
        zones: bool,
        /// Count from zero again after printing (with --watch: each
        /// reading covers its interval).
        #[arg(long)]
        reset: bool,
        /// Print again every SECS seconds until interrupted.
        #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
        watch: Option<Duration>,
        /// Disk name (bius0), path (/dev/bius0) or device id.
        device: String,
    },
    /// Record every request of a running device into a file.
    ///
    /// The daemon writes the file: a record per request (arrival time,
    /// queue, op, offset, length, service time, result) in CSV or binary
    /// (see the book's "Statistics, traces and plots").  It never waits for
    /// the file: records it cannot take are dropped and counted.  Prints
    /// the records written and dropped; a trace that failed (a full disk)
    /// is an error, and the device serves on.
    #[command(group(ArgGroup::new("what").required(true).multiple(false)))]
    Trace {
        /// The trace file (replaced).
        #[arg(short, long, value_name = "FILE", group = "what")]
        output: Option<PathBuf>,
        /// csv or binary [default: csv for a FILE ending in .csv, else
        /// binary].
        #[arg(long, value_enum, requires = "output")]
        format: Option<FormatArg>,
        /// Stop after SECS seconds [default: at SIGINT or SIGTERM].
        #[arg(long, value_name = "SECS", value_parser = parse_seconds, requires = "output")]
        duration: Option<Duration>,
        /// Stop the trace that runs (e.g. one of `create --trace`) and
        /// report it.
        #[arg(long, group = "what")]
        stop: bool,
        /// Disk name (bius0), path (/dev/bius0) or device id.
        device: String,
    },
    /// Export a device through a kernel service: the NVMe target.
    ///
    /// `export nvme` makes the device the namespace of an NVMe subsystem
    /// of the kernel's NVMe target (nvmet) and connects this host to it,
    /// so that NVMe software (nvme-cli, io_uring passthrough on
    /// /dev/ngXnY, SPDK's and xNVMe's kernel paths) can drive it; a
    /// zoned device becomes a ZNS namespace.  Undone by `unexport`.
    #[command(mut_subcommands = with_exit_status)]
    Export {
        #[command(subcommand)]
        service: ExportService,
    },
    /// Undo `biusctl export`.
    #[command(mut_subcommands = with_exit_status)]
    Unexport {
        #[command(subcommand)]
        service: UnexportService,
    },
    /// List the built-in device models, or show one's values.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Stop and remove a device, or all of them.
    ///
    /// With --all, every device is tried; each failure is reported, and
    /// the exit status is 1 if any failed.
    Destroy {
        /// Remove it even if its disk is open (with --all: all of them).
        #[arg(short, long)]
        force: bool,
        /// Destroy every device.
        #[arg(short, long, conflicts_with = "device")]
        all: bool,
        /// Device id, disk name (bius0) or path (/dev/bius0).
        #[arg(required_unless_present = "all")]
        device: Option<String>,
    },
    /// Show the versions of biusctl, its library and ABI, and of the
    /// loaded kernel module.
    Version {
        /// One JSON object instead of the `key: value` lines.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script on standard output.
    ///
    /// E.g. `biusctl completions bash > /usr/share/bash-completion/completions/biusctl`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the manual pages (biusctl.1, biusctl-<command>.1, ...) into DIR.
    Manpages {
        /// An existing directory.
        dir: PathBuf,
    },
}

/// The services `biusctl export` exports through.
#[derive(Debug, Subcommand)]
pub enum ExportService {
    /// As an NVMe namespace of the kernel's NVMe target, connected to
    /// this host.
    ///
    /// Loads the kernel modules, makes the subsystem (one namespace on
    /// DEVICE, any host allowed) and its port in configfs
    /// (/sys/kernel/config/nvmet), connects a controller through
    /// /dev/nvme-fabrics, waits for the namespace and prints its block
    /// device (/dev/nvmeXnY) and character device (/dev/ngXnY), a line
    /// each.  What the target cannot export is refused before anything
    /// is made: a read-only device, and of a zoned one conventional or
    /// host-aware zones, a smaller last zone, a zone append limit below
    /// 4 KiB.  A failure midway undoes what was made.
    #[command(after_help = EXPORT_EXAMPLES)]
    Nvme(NvmeExportArgs),
}

/// The services `biusctl unexport` undoes.
#[derive(Debug, Subcommand)]
pub enum UnexportService {
    /// Disconnect the controller and remove the subsystem, its namespace
    /// and its port (if it serves nothing else).
    Nvme {
        /// Disk name (bius0), path (/dev/bius0) or bius device id.
        device: String,
    },
}

/// The options of `biusctl export nvme`.
#[derive(Debug, Args)]
pub struct NvmeExportArgs {
    /// loop (nvme-loop, no network) or tcp (NVMe/TCP on 127.0.0.1)
    /// [default: loop if the kernel has nvme-loop, else tcp].
    #[arg(short, long, value_enum)]
    pub transport: Option<crate::nvme::Transport>,
    /// The subsystem's NQN [default: nqn.2025-01.bius:<disk name>].
    #[arg(long)]
    pub nqn: Option<String>,
    /// The TCP port (implies --transport tcp) [default: 4420].
    #[arg(short, long)]
    pub port: Option<u16>,
    /// Disk name (bius0), path (/dev/bius0) or bius device id.
    pub device: String,
}

/// Examples of `biusctl export nvme --help`.
const EXPORT_EXAMPLES: &str = "\
Examples:
  biusctl create -n zns0 --zoned --model zns-ssd -s 4G ramdisk &
  biusctl export nvme zns0                   prints /dev/nvme1n1 and /dev/ng1n1
  nvme zns report-zones /dev/nvme1n1         the zones, through NVMe
  biusctl unexport nvme zns0
  biusctl export nvme -t tcp -p 4421 data    over NVMe/TCP on 127.0.0.1:4421
";

/// Ends a command's help with the exit statuses, after its own text.
fn with_exit_status(command: clap::Command) -> clap::Command {
    let after = match command.get_after_help() {
        Some(text) => format!("{text}\n{EXIT_STATUS}"),
        None => EXIT_STATUS.to_string(),
    };
    command.after_help(after)
}

/// Options of `biusctl create`, from the command line, merged with those
/// of a config file (`--config`, [`ConfigFile`]).  Options without a value
/// here take the documented default.  Each may come before the backend or
/// after it.
///
/// [`ConfigFile`]: crate::config::ConfigFile
#[derive(Debug, Default, Args)]
#[command(
    subcommand_value_name = "BACKEND",
    subcommand_help_heading = "Backends",
    disable_help_subcommand = true,
    mut_args = before_or_after_the_backend
)]
pub struct CreateArgs {
    /// Read the device's settings from a TOML file; options given here
    /// override it, and the file may name the backend.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Size [default: 1G; file: the file's size, whole blocks].
    #[arg(short, long)]
    pub size: Option<Bytes>,
    /// Hardware queues, each served by its own thread, 1 to 64, the poll
    /// queues among them [default: one per CPU plus the poll queues, at
    /// most 64].
    #[arg(short, long, value_name = "N")]
    pub queues: Option<Queues>,
    /// Of the queues, the last N serve polled I/O: io_uring with IOPOLL
    /// (fio --hipri) on O_DIRECT, whose submitter spins for each
    /// completion instead of sleeping (the disk shows queue/io_poll 1).
    /// Fewer than --queues: other I/O goes to the first ones [default: 0].
    #[arg(long, value_name = "N")]
    pub poll_queues: Option<PollQueues>,
    /// Requests in flight per queue, 1 to 4096 [default: 128].
    #[arg(short, long, value_name = "N")]
    pub depth: Option<Depth>,
    /// Logical block size: 512, 1024, 2048 or 4096 [default: 512].
    #[arg(short, long, value_name = "BYTES")]
    pub block_size: Option<BlockSize>,
    /// Physical block size, a power of two up to 64K [default: the block
    /// size].
    #[arg(long, value_name = "BYTES")]
    pub physical_block_size: Option<PhysicalBlockSize>,
    /// Largest I/O, a multiple of the block size from the page size to 8M
    /// [default: 1M].
    #[arg(long, value_name = "SIZE")]
    pub max_io: Option<Bytes>,
    /// Request timeout in seconds [default: 30].
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<TimeoutSecs>,
    /// Disk name, up to 31 of [A-Za-z0-9_-] [default: bius<id>].
    #[arg(short, long)]
    pub name: Option<String>,
    /// Keep the disk when its daemon dies (a crash, kill -9, `biusctl
    /// detach`): its I/O then waits up to SECS seconds, 1 to 90, for
    /// `biusctl recover` [default: none, the disk dies with its daemon].
    #[arg(long, value_name = "SECS")]
    pub recover_timeout: Option<RecoverSecs>,
    /// Make the disk read-only.
    #[arg(short, long)]
    pub read_only: bool,
    /// How request data crosses the kernel boundary: copy (through the
    /// request stream), map (the I/O buffers mapped into the daemon, zero
    /// copy) or selective[=SIZE] (map requests of at least SIZE, default
    /// 128K, copy smaller ones) [default: selective].
    #[arg(short, long, value_name = "MODE")]
    pub transfer: Option<Transfer>,
    /// Microseconds a queue thread waiting for a request busy-waits in
    /// the kernel before it sleeps, 0 to 1000 (0: never) [default: 200].
    /// Saves two context switches per request when requests follow
    /// closely, for idle CPU time.
    #[arg(long, value_name = "USECS")]
    pub poll_us: Option<PollUsecs>,
    /// Scheduling policy of the queue threads: batch (SCHED_BATCH: a woken
    /// queue thread lets the submitting task run on and then fetches its
    /// requests together, the speed at deep queues) or inherit (this
    /// process's policy: a woken queue thread may preempt the submitter
    /// at once) [default: batch].
    #[arg(long, value_name = "POLICY")]
    pub sched: Option<Sched>,
    /// Make every request of a kind take at least this long, as nbdkit's
    /// delay filter does: KIND=TIME[,KIND=TIME...], KIND one of read,
    /// write, flush, discard, zone or all, TIME like 80us, 10ms or 1s.
    /// Requests then complete at their time, up to --depth in flight per
    /// queue [default: none].
    #[arg(long, value_name = "SPEC")]
    pub latency: Option<LatencySpec>,
    /// The zone options.
    #[command(flatten)]
    pub zones: ZoneArgs,
    /// The statistics options.
    #[command(flatten)]
    pub stats: StatsArgs,
    /// The device model that times requests.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Where the data lives (optional with a --config that names it).
    #[command(subcommand)]
    pub backend: Option<Backend>,
    /// Set by `biusctl recover`, not an option: the id of the device to
    /// recover instead of creating one.
    #[arg(skip)]
    pub recover: Option<u32>,
}

/// Makes an option of `create` (and `recover`) global: given after the
/// backend, the backend's subcommand takes it for `create`.
fn before_or_after_the_backend(arg: Arg) -> Arg {
    match arg.is_positional() {
        true => arg,
        false => arg.global(true),
    }
}

/// The zone options of `create` and `recover`: `--zoned` and those that
/// need it.
#[derive(Debug, Default, Args)]
#[command(next_help_heading = ZONED, mut_args = need_zoned)]
pub struct ZoneArgs {
    /// Make a zoned (host-managed) disk, as zoned null_blk does (ramdisk,
    /// nbd, and file but not with --engine sync).  The other zoned options
    /// need it on the command line, even with a --config that sets
    /// `zoned = true`.
    #[arg(short, long)]
    pub zoned: bool,
    /// The zone state file of a zoned file: each zone's condition and
    /// write pointer, kept across daemon restarts and power losses
    /// [default: PATH.zones next to a regular file; a block device needs
    /// one].  Created if missing; an existing one gives the zone options
    /// omitted (and --size, --block-size), and those given must match it.
    #[arg(long, value_name = "FILE")]
    pub zone_state: Option<PathBuf>,
    /// Zone size, a power of two [default: 64M].
    #[arg(long, value_name = "SIZE")]
    pub zone_size: Option<Bytes>,
    /// Writable bytes of each zone [default: the zone size].
    #[arg(long, value_name = "SIZE")]
    pub zone_capacity: Option<Bytes>,
    /// Leading conventional zones [default: 0].
    #[arg(long, value_name = "N")]
    pub conv_zones: Option<u32>,
    /// Most open zones [default: no limit].
    #[arg(long, value_name = "N")]
    pub max_open: Option<u32>,
    /// Most active (open or closed) zones [default: no limit].
    #[arg(long, value_name = "N")]
    pub max_active: Option<u32>,
    /// Largest zone append [default: the largest I/O].
    #[arg(long, value_name = "SIZE")]
    pub max_append: Option<Bytes>,
    /// Let the kernel emulate zone append, as zoned null_blk does with
    /// zone_append_max_sectors=0: the disk takes no zone appends, the
    /// block layer writes each at its zone's write pointer (Linux 6.10 or
    /// newer; older kernels refuse the disk) [default: the daemon serves
    /// them].
    #[arg(long, conflicts_with = "max_append")]
    pub emulate_append: bool,
}

/// The help heading of the zone options.
const ZONED: &str = "Zoned";

/// Makes the zone options but `--zoned` (those under its heading) need
/// it.
fn need_zoned(arg: Arg) -> Arg {
    match arg.get_help_heading() {
        Some(ZONED) if arg.get_id() != "zoned" => arg.requires("zoned"),
        _ => arg,
    }
}

/// The statistics options of `create` and `recover`.
#[derive(Debug, Default, Args)]
#[command(next_help_heading = "Statistics")]
pub struct StatsArgs {
    /// Keep no statistics of the requests (biusctl stats shows zeros, no
    /// traces): to measure what the bookkeeping costs.
    #[arg(long, conflicts_with = "trace")]
    pub no_stats: bool,
    /// Record every request into FILE from the start until the daemon
    /// ends (as `biusctl trace`; `biusctl trace --stop` ends it earlier).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The trace's format, csv or binary [default: csv for a FILE ending
    /// in .csv, else binary].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub trace_format: Option<FormatArg>,
}

/// Arguments of `biusctl recover`: the device, then `create`'s.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Device id, disk name (bius0) or path (/dev/bius0).
    pub device: String,
    #[command(flatten)]
    pub create: CreateArgs,
}

/// Where the data lives.  In a config file: `backend = "ramdisk"`,
/// `backend = "null"`, `backend = "zero"`, a `[backend.file]` table with `path` and `direct`,
/// or a `[backend.nbd]` table with `address`, `export` and `connections`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Backend {
    /// Anonymous memory, allocated on first write.
    Ramdisk,
    /// No storage and no data: the kernel moves none, in any transfer mode
    /// (reads leave the reader's buffer as it was, as null_blk does);
    /// measures a request's own cost.
    Null,
    /// No storage: reads return zeroes, writes are dropped; the data moves
    /// as the transfer mode says.  Measures a request's cost with its data.
    Zero,
    /// A regular file or an existing block device.
    File {
        /// Bypass the page cache (O_DIRECT).
        #[arg(long)]
        #[serde(default)]
        direct: bool,
        /// How requests reach the file: uring (io_uring) or threads (a pool
        /// of pread/pwrite threads), each with up to --depth requests in
        /// flight; sync (one request at a time per queue, on the queue's
        /// thread); auto: with --direct or --zoned, uring if the kernel
        /// has it, else threads; otherwise (a file served from the page
        /// cache, where handing a request to another thread costs more
        /// than the I/O) sync [default: auto].
        #[arg(
            long,
            value_name = "ENGINE",
            default_value = "auto",
            hide_default_value = true
        )]
        #[serde(default)]
        engine: Engine,
        /// The file or block device.
        path: PathBuf,
    },
    /// An export of an NBD server (nbdkit, qemu-nbd, nbd-server), with
    /// many requests in flight per queue.
    Nbd {
        /// The export's name [default: the server's default export].
        #[arg(short, long, default_value = "", hide_default_value = true)]
        #[serde(default)]
        export: String,
        /// Connections to the server, 1 to 16, if it allows several
        /// (multi-conn) [default: 1].
        #[arg(long, value_name = "N", default_value = "1", hide_default_value = true)]
        #[serde(default = "one_connection")]
        connections: Connections,
        /// HOST:PORT, [IPV6]:PORT or unix:PATH.
        address: NbdServer,
    },
}

/// How the file backend reaches its file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// With --direct or --zoned: io_uring if the kernel has it, else
    /// threads; otherwise sync.
    #[default]
    Auto,
    /// io_uring.
    Uring,
    /// A pool of pread/pwrite threads.
    Threads,
    /// One request at a time per queue, on the queue's thread.
    Sync,
}

/// The default of `connections` in a config file.
fn one_connection() -> Connections {
    Ranged(1)
}

/// The options of `biusctl create ARGS...`, for tests.
#[cfg(test)]
pub fn create_args(args: &[&str]) -> CreateArgs {
    let argv = ["biusctl", "create"].iter().chain(args);
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Create(args) => *args,
        other => panic!("not create: {other:?}"),
    }
}

#[cfg(test)]
mod tests;
