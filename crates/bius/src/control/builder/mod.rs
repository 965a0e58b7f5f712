//! The parameters of a new device, checked and encoded for the kernel, and
//! the start of the device they describe: [`DeviceBuilder`].

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bius_sys::bius_device_params;
use nix::errno::Errno;

use self::recover::Target;
use super::device::{Device, Doorbell, Ringer};
use super::flusher::mark_io_flusher;
use super::sched::Scheduling;
use super::transfer::TransferMode;
use crate::block::BlockDevice;
use crate::deferred::DeferredDevice;
use crate::deferred::Immediate;
use crate::error::{ControlOp, Error};
use crate::kernel::{Control, KernelQueue};
use crate::latency::Latency;
use crate::model::{DeviceModel, Timing};
use crate::stats::{Recorder, Statistics};
use crate::worker::deferred::{spawn_deferred, DeferredServer};
use crate::worker::serve::Served;
use crate::worker::{spawn_worker, WorkerConfig};
use crate::zone::layout::ZoneLayout;

/// Starts the worker of one connected queue; the ringer is dropped when it
/// ends.
type SpawnWorker<'a> = dyn Fn(
        KernelQueue,
        WorkerConfig,
        Arc<Recorder>,
        Ringer,
    ) -> Result<JoinHandle<Result<(), Error>>, Error>
    + 'a;

/// The parameters of a new device; [`DeviceBuilder::create`] starts it.
/// With [`DeviceBuilder::recover`] (or from [`DeviceBuilder::from_device`])
/// they are those of a device that lost its daemon, which `create` then
/// recovers.
///
/// The size of the disk is given once: a conventional device's by
/// [`DeviceBuilder::new`], a zoned device's by its geometry (its
/// [`ZoneGeometry::size`](crate::zone::ZoneGeometry::size)), with a builder made by
/// [`DeviceBuilder::default`], which has no size; a zoned device and a
/// builder with a size are refused ([`Parameter::ZonedSize`](crate::Parameter::ZonedSize)).
///
/// Every setter is named after its setting and takes and returns the
/// builder by value.  A getter is the setting's name with `get_` (the
/// setter has the name: [`get_transfer_mode`](DeviceBuilder::get_transfer_mode)
/// of [`transfer_mode`](DeviceBuilder::transfer_mode)) and returns the
/// value the device will have, the default filled in when none was set
/// ([`get_timeout`](DeviceBuilder::get_timeout) is 30 s on a fresh
/// builder).
///
/// Defaults, each a `DEFAULT_*` const but the queue count, which depends
/// on the machine ([`default_queues`](DeviceBuilder::default_queues)):
/// 512-byte logical blocks
/// ([`DEFAULT_LOGICAL_BLOCK_SIZE`](DeviceBuilder::DEFAULT_LOGICAL_BLOCK_SIZE))
/// and physical blocks of the logical size; one queue per CPU this
/// process may run on, at most 64, plus the poll queues (none); 128
/// requests in flight per queue
/// ([`DEFAULT_QUEUE_DEPTH`](DeviceBuilder::DEFAULT_QUEUE_DEPTH)); the
/// kernel's default largest I/O, 1 MiB
/// ([`DEFAULT_MAX_IO_SIZE`](DeviceBuilder::DEFAULT_MAX_IO_SIZE)), and
/// request timeout, 30 s
/// ([`DEFAULT_TIMEOUT`](DeviceBuilder::DEFAULT_TIMEOUT));
/// [`DEFAULT_TRANSFER_MODE`](DeviceBuilder::DEFAULT_TRANSFER_MODE) and
/// [`DEFAULT_POLL_TIME`](DeviceBuilder::DEFAULT_POLL_TIME); a
/// kernel-chosen name; 10 s to go live
/// ([`DEFAULT_START_TIMEOUT`](DeviceBuilder::DEFAULT_START_TIMEOUT)).
#[derive(Debug, Clone)]
pub struct DeviceBuilder {
    /// `None`: the zone geometry's.
    size: Option<u64>,
    logical_block_size: u32,
    physical_block_size: u32,
    /// `None`: [`DeviceBuilder::default_queues`] and the poll queues.
    queues: Option<u32>,
    poll_queues: u32,
    queue_depth: u32,
    max_io_size: u32,
    timeout: Option<Duration>,
    name: String,
    read_only: bool,
    start_timeout: Duration,
    transfer_mode: TransferMode,
    poll_time: Duration,
    io_flusher: bool,
    scheduling: Scheduling,
    statistics: bool,
    timing: Timing,
    recover_timeout: Option<Duration>,
    emulate_zone_append: bool,
    target: Target,
    #[cfg(feature = "control-socket")]
    control_socket: socket::Served,
}

impl DeviceBuilder {
    /// The transfer mode of a device that does not choose one: requests of
    /// 128 KiB and more mapped, smaller ones copied, the fastest mode the
    /// VM bench measures at every block size (benches/README.md).
    pub const DEFAULT_TRANSFER_MODE: TransferMode = TransferMode::Selective { threshold: 0 };

    /// The busy-wait of a device that does not choose one: 200 µs, which
    /// catches the next request of a busy queue or of a synchronous
    /// application and costs one 200 µs spin per idle period (the kernel
    /// spins only while nothing else wants the CPU).
    pub const DEFAULT_POLL_TIME: Duration = Duration::from_micros(200);

    /// The logical block size of a device that does not choose one: 512
    /// bytes.
    pub const DEFAULT_LOGICAL_BLOCK_SIZE: u32 = 512;

    /// The requests in flight per queue of a device that does not choose
    /// a depth: 128.
    pub const DEFAULT_QUEUE_DEPTH: u32 = 128;

    /// The largest I/O of a device that does not choose one: the kernel's
    /// default, `BIUS_DEFAULT_MAX_IO_BYTES` (1 MiB).
    pub const DEFAULT_MAX_IO_SIZE: u32 = bius_sys::BIUS_DEFAULT_MAX_IO_BYTES;

    /// The request timeout of a device that does not choose one: the
    /// kernel's default, `BIUS_DEFAULT_TIMEOUT_MS` (30 s).
    pub const DEFAULT_TIMEOUT: Duration =
        Duration::from_millis(bius_sys::BIUS_DEFAULT_TIMEOUT_MS as u64);

    /// How long [`DeviceBuilder::create`] waits for the disk to go live,
    /// unless told otherwise: 10 s.
    pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(10);

    /// Whether the queue threads are I/O flushers when the builder does not
    /// say ([`DeviceBuilder::io_flusher`]): yes.
    pub const DEFAULT_IO_FLUSHER: bool = true;

    /// Whether the workers keep statistics when the builder does not say
    /// ([`DeviceBuilder::statistics`]): yes.
    pub const DEFAULT_STATISTICS: bool = true;

    /// A conventional device of `size` bytes (a zoned device's size is
    /// its geometry's: start from [`DeviceBuilder::default`]).
    pub fn new(size: u64) -> Self {
        DeviceBuilder {
            size: Some(size),
            ..DeviceBuilder::default()
        }
    }

    /// Adds a latency to every request of the kinds it names: each
    /// completes no earlier than that long after it arrived, however fast
    /// the device serves it, as nbdkit's delay filter does.  The device
    /// is then served with many requests in flight per queue (up to the
    /// queue depth), and each queue's worker completes them at their time
    /// (it waits in `poll()` until the next is due; no thread sleeps), so
    /// a queue of depth 32 at 10 ms carries about 3200 requests a second.
    /// Each latency must be below the request timeout.
    ///
    /// ```
    /// let latency: bius::Latency = "read=10ms,write=1ms".parse()?;
    /// let builder = bius::DeviceBuilder::new(1 << 30).latency(latency);
    /// assert_eq!(builder.get_latency(), Some(latency));
    /// # Ok::<(), bius::LatencyError>(())
    /// ```
    pub fn latency(mut self, latency: Latency) -> Self {
        self.timing.latency = Some(latency);
        self
    }

    /// The latency set with [`DeviceBuilder::latency`].
    pub fn get_latency(&self) -> Option<Latency> {
        self.timing.latency
    }

    /// Times the device's requests with `model`, told each one's result
    /// once the device has served it: each completes when the model says
    /// the hardware it emulates would answer (see [`DeviceModel`]; the
    /// `bius-model` crate has SSD, ZNS, SMR and NVM models), and no
    /// earlier than a [`latency`](DeviceBuilder::latency)
    /// if one is set too.  As with a latency, the device is served with
    /// many requests in flight per queue.
    pub fn model(mut self, model: impl DeviceModel) -> Self {
        self.timing.model = Some(Arc::new(model));
        self
    }

    /// The model set with [`DeviceBuilder::model`].
    pub fn get_model(&self) -> Option<&Arc<dyn DeviceModel>> {
        self.timing.model.as_ref()
    }

    /// Whether the workers keep statistics.
    pub(crate) fn keeps_statistics(&self) -> bool {
        self.statistics
    }

    /// When requests complete: the latency and the model, and the poll
    /// time as the workers' spin before a due time.
    pub(crate) fn timing(&self) -> Timing {
        Timing {
            spin: self.get_poll_time(),
            ..self.timing.clone()
        }
    }

    /// How long a worker waiting for a request busy-waits in the kernel
    /// before it sleeps (default: [`DeviceBuilder::DEFAULT_POLL_TIME`];
    /// zero: never; at most 1 ms).  The kernel
    /// waits only while nothing else wants the CPU, so the price is idle
    /// CPU time; the gain is a sleep and a wake-up (two context switches)
    /// saved whenever the next request comes within that time, the case
    /// of a busy device or a synchronous application at queue depth 1.
    ///
    /// A device with a [`latency`](DeviceBuilder::latency) or a
    /// [`model`](DeviceBuilder::model) spends the same budget on its held
    /// completions: its workers wake before the earliest is due, as early
    /// as their timed wake-ups have lately been late and at most this
    /// long, and poll their queue until it is due, so that it goes to the
    /// kernel on time rather than a wake-up late (`biusctl stats`: the
    /// lateness).  Zero: they sleep until the due time itself.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let builder = bius::DeviceBuilder::new(1 << 30).poll_time(Duration::from_micros(50));
    /// assert_eq!(builder.get_poll_time(), Duration::from_micros(50));
    /// ```
    pub fn poll_time(mut self, time: Duration) -> Self {
        self.poll_time = time;
        self
    }

    /// The busy-wait time set with [`DeviceBuilder::poll_time`] (or its
    /// default), rounded down to whole microseconds as the kernel takes it.
    pub fn get_poll_time(&self) -> Duration {
        Duration::from_micros(self.poll_time.as_micros().try_into().unwrap_or(u64::MAX))
    }

    /// How request data crosses the kernel boundary (default:
    /// [`DeviceBuilder::DEFAULT_TRANSFER_MODE`]).
    pub fn transfer_mode(mut self, mode: TransferMode) -> Self {
        self.transfer_mode = mode;
        self
    }

    /// The transfer mode set with [`DeviceBuilder::transfer_mode`] (or
    /// its default).
    pub fn get_transfer_mode(&self) -> TransferMode {
        self.transfer_mode
    }

    /// Logical block size: a power of two from 512 to 4096 (default:
    /// [`DeviceBuilder::DEFAULT_LOGICAL_BLOCK_SIZE`]).
    pub fn logical_block_size(mut self, bytes: u32) -> Self {
        self.logical_block_size = bytes;
        self
    }

    /// Physical block size: a power of two from the logical block size to
    /// 64 KiB (default: the logical block size).
    pub fn physical_block_size(mut self, bytes: u32) -> Self {
        self.physical_block_size = bytes;
        self
    }

    /// The queue count of a device that does not choose one: one per CPU
    /// this process may run on, at most 64.  The VM bench measured one
    /// queue per vCPU faster than a single queue on every row, by 1.3x to
    /// 1.5x (benches/README.md).
    pub fn default_queues() -> u32 {
        std::thread::available_parallelism().map_or(1, |cpus| {
            let most = bius_sys::BIUS_MAX_HW_QUEUES;
            u32::try_from(cpus.get()).map_or(most, |cpus| cpus.min(most))
        })
    }

    /// Number of hardware queues, each served by its own thread (1..=64),
    /// the poll queues among them; default: [`DeviceBuilder::default_queues`]
    /// plus the [poll queues](DeviceBuilder::poll_queues), at most 64.
    pub fn queues(mut self, queues: u32) -> Self {
        self.queues = Some(queues);
        self
    }

    /// Makes the last `count` of the [queues](DeviceBuilder::queues) poll
    /// queues (default 0: none; fewer than the queues, else
    /// [`Parameter::PollQueues`](crate::Parameter::PollQueues)).  Polled
    /// I/O goes to them: io_uring with
    /// `IORING_SETUP_IOPOLL` (fio's `--hipri`) on the disk opened with
    /// `O_DIRECT`, whose submitter spins for each completion instead of
    /// sleeping until it is woken, which saves a wake-up per request at
    /// the price of the submitter's CPU.  Workers serve a poll queue as
    /// any other; the kernel ends its requests in the submitter's poll
    /// (see "Poll queues" in bius.h).  Other I/O goes to the first
    /// queues, so a device with poll queues needs at least two (without
    /// [`DeviceBuilder::queues`], one per CPU besides the poll queues).
    ///
    /// ```
    /// let builder = bius::DeviceBuilder::new(1 << 30).queues(2).poll_queues(1);
    /// assert_eq!(builder.get_poll_queues(), 1);
    /// ```
    pub fn poll_queues(mut self, count: u32) -> Self {
        self.poll_queues = count;
        self
    }

    /// The number of poll queues set with [`DeviceBuilder::poll_queues`]
    /// (or its default, 0), among the [queues](DeviceBuilder::get_queues).
    pub fn get_poll_queues(&self) -> u32 {
        self.poll_queues
    }

    /// Requests in flight per queue (1..=4096; default:
    /// [`DeviceBuilder::DEFAULT_QUEUE_DEPTH`]).
    pub fn queue_depth(mut self, depth: u32) -> Self {
        self.queue_depth = depth;
        self
    }

    /// Largest read or write in bytes: a multiple of the logical block size
    /// from the page size to 8 MiB (default:
    /// [`DeviceBuilder::DEFAULT_MAX_IO_SIZE`], 1 MiB).  The block layer
    /// splits a larger read or write into requests of at most this size
    /// (and, unless the administrator raises the disk's `max_sectors_kb`,
    /// of at most 1280 KiB), so the device never sees more; the loopback
    /// refuses more (`loopback::NotSent::TooLarge`).  Discards and write zeroes are not
    /// bound by it.
    ///
    /// ```
    /// let builder = bius::DeviceBuilder::new(1 << 30).max_io_size(256 << 10);
    /// assert_eq!(builder.get_max_io_size(), 256 << 10);
    /// assert_eq!(bius::DeviceBuilder::new(1 << 30).get_max_io_size(), 1 << 20);
    /// ```
    pub fn max_io_size(mut self, bytes: u32) -> Self {
        self.max_io_size = bytes;
        self
    }

    /// Time after which the kernel fails a request not yet completed
    /// (default: [`DeviceBuilder::DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Name of the disk (`/dev/<name>`); empty lets the kernel pick
    /// `bius<id>`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Makes the disk read-only, whatever the device's capabilities say.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Whether the workers keep [statistics](crate::stats) of the requests
    /// (default: yes).  Off, they skip the bookkeeping (a clock read, a
    /// lock and a few counters per request), the device's
    /// [statistics](crate::Device::statistics) stay at zero and no trace
    /// can start: for measuring what the bookkeeping costs.
    ///
    /// ```
    /// let builder = bius::DeviceBuilder::new(1 << 30).statistics(false);
    /// ```
    pub fn statistics(mut self, keep: bool) -> Self {
        self.statistics = keep;
        self
    }

    /// Whether the worker threads mark themselves as I/O flushers (`PR_SET_IO_FLUSHER`, default: yes).  A block device served from
    /// user space must not wait for its own I/O: when memory runs short,
    /// the kernel reclaims it by writing dirty pages, possibly to this very
    /// disk, and a worker that then allocates memory (a page fault, a
    /// buffer) could enter reclaim and wait for those writes, which only it
    /// can complete.  Marked threads allocate without starting I/O and are
    /// throttled only against the disk they serve.  The mark needs
    /// `CAP_SYS_RESOURCE`; without it the device still works, with a
    /// warning in the log.  Threads a backend starts on its own (an
    /// io_uring engine's, a socket reader) inherit the mark only if they
    /// are started from a marked thread: make such a backend inside an
    /// [`IoFlusherScope`](crate::IoFlusherScope).
    pub fn io_flusher(mut self, io_flusher: bool) -> Self {
        self.io_flusher = io_flusher;
        self
    }

    /// The scheduling policy of the queue threads (default:
    /// [`Scheduling::Batch`]).  Under `SCHED_BATCH` a queue thread that a
    /// request wakes lets the application that submitted it run on until
    /// it sleeps or its time slice ends, and then fetches all the requests
    /// it submitted meanwhile in one system call: at queue depths of 32 and
    /// more the VM bench measures 1.5 to 2.5 times the IOPS on Linux 6.12
    /// and 3 to 5 times on 6.1, for 0.2 to 0.8 times the CPU per I/O
    /// (the book's Benchmarks, `docs/src/project/benchmarks.md`).  The price
    /// is on a CPU that a task keeps busy without sleeping: there a woken
    /// queue thread waits for the task's time slice to end (a few
    /// milliseconds) rather than preempting it.  A device whose I/O must
    /// preempt such work keeps the creating thread's policy with
    /// [`Scheduling::Inherit`] (and gives that thread the policy it wants,
    /// such as `chrt`'s).  Threads a backend starts on its own keep theirs.
    ///
    /// ```
    /// use bius::{DeviceBuilder, Scheduling};
    ///
    /// let builder = DeviceBuilder::new(1 << 30).scheduling(Scheduling::Inherit);
    /// assert_eq!(builder.get_scheduling(), Scheduling::Inherit);
    /// ```
    pub fn scheduling(mut self, scheduling: Scheduling) -> Self {
        self.scheduling = scheduling;
        self
    }

    /// The policy set with [`DeviceBuilder::scheduling`] (or the default).
    pub fn get_scheduling(&self) -> Scheduling {
        self.scheduling
    }

    /// Lets the device survive its daemon (default: it dies with it): when
    /// the process serving it ends without stopping it (a crash, `kill
    /// -9`, [`Device::detach`]), the kernel keeps the disk and holds its
    /// I/O for up to `timeout` (1 ms to 90 s, the kernel's
    /// `BIUS_MAX_RECOVER_TIMEOUT_MS`; else
    /// [`Parameter::RecoverTimeout`](crate::Parameter::RecoverTimeout)),
    /// waiting for a new daemon to [recover](DeviceBuilder::recover) it.
    /// Nothing fails meanwhile; after the timeout the device is removed as
    /// without recovery.  Only a backend that keeps its data outside the
    /// daemon (a file) makes this lossless.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let builder = bius::DeviceBuilder::new(1 << 30).recover_timeout(Duration::from_secs(30));
    /// ```
    pub fn recover_timeout(mut self, timeout: Duration) -> Self {
        self.recover_timeout = Some(timeout);
        self
    }

    /// Lets the kernel emulate zone append on a zoned device (default:
    /// no, the device serves appends): the disk then takes no
    /// `ZONE_APPEND` requests, and the block layer's zone write plugging
    /// turns every append into a write at the zone's write pointer, as it
    /// does for a zoned `null_blk` with `zone_append_max_sectors` 0.  The
    /// device sees only writes, one at a time per zone, and no
    /// [`Request::ZoneAppend`](crate::Request::ZoneAppend).  The largest
    /// zone append of the geometry must be left at the zone size (the
    /// default; else [`Parameter::EmulatedAppend`](crate::Parameter::EmulatedAppend)); the
    /// kernel reports 0 ([`ZonedParams::append_emulated`]).  Needs Linux 6.10 or newer:
    /// older kernels refuse the device with `EOPNOTSUPP`.  Only zoned
    /// devices look at it.
    ///
    /// [`ZonedParams::append_emulated`]: crate::ZonedParams::append_emulated
    ///
    /// ```
    /// let builder = bius::DeviceBuilder::new(1 << 30).emulate_zone_append(true);
    /// assert!(builder.get_emulate_zone_append());
    /// ```
    pub fn emulate_zone_append(mut self, emulate: bool) -> Self {
        self.emulate_zone_append = emulate;
        self
    }

    /// Whether the kernel emulates zone append, as set with
    /// [`DeviceBuilder::emulate_zone_append`] (or its default, no).
    pub fn get_emulate_zone_append(&self) -> bool {
        self.emulate_zone_append
    }

    /// How long [`DeviceBuilder::create`] waits for the disk to go live
    /// (default: [`DeviceBuilder::DEFAULT_START_TIMEOUT`]).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// The device size in bytes, if the builder has one
    /// ([`DeviceBuilder::new`]; `None` from [`DeviceBuilder::default`]: a
    /// zoned device's is its geometry's).
    pub fn get_size(&self) -> Option<u64> {
        self.size
    }

    /// The number of hardware queues set with [`DeviceBuilder::queues`]
    /// (or its default), the poll queues among them.
    pub fn get_queues(&self) -> u32 {
        self.queues.unwrap_or_else(|| {
            (DeviceBuilder::default_queues() + self.poll_queues).min(bius_sys::BIUS_MAX_HW_QUEUES)
        })
    }

    /// The largest I/O in bytes set with [`DeviceBuilder::max_io_size`]
    /// (or the kernel's default).
    pub fn get_max_io_size(&self) -> u32 {
        match self.max_io_size {
            0 => DeviceBuilder::DEFAULT_MAX_IO_SIZE,
            bytes => bytes,
        }
    }

    /// The request timeout set with [`DeviceBuilder::timeout`] (or the
    /// kernel's default, 30 s).
    pub fn get_timeout(&self) -> Duration {
        self.timeout.unwrap_or(DeviceBuilder::DEFAULT_TIMEOUT)
    }

    /// The logical block size set with [`DeviceBuilder::logical_block_size`]
    /// (or its default).
    pub fn get_logical_block_size(&self) -> u32 {
        self.logical_block_size
    }

    /// The physical block size set with
    /// [`DeviceBuilder::physical_block_size`] (or its default, the logical
    /// block size).
    ///
    /// ```
    /// let builder = bius::DeviceBuilder::new(1 << 30).logical_block_size(4096);
    /// assert_eq!(builder.get_physical_block_size(), 4096);
    /// ```
    pub fn get_physical_block_size(&self) -> u32 {
        match self.physical_block_size {
            0 => self.logical_block_size,
            bytes => bytes,
        }
    }

    /// The queue depth set with [`DeviceBuilder::queue_depth`] (or its
    /// default).
    pub fn get_queue_depth(&self) -> u32 {
        self.queue_depth
    }

    /// The disk name set with [`DeviceBuilder::name`] (empty: the kernel's
    /// `bius<id>`).
    pub fn get_name(&self) -> &str {
        &self.name
    }

    /// Whether the disk is made read-only ([`DeviceBuilder::read_only`]).
    pub fn get_read_only(&self) -> bool {
        self.read_only
    }

    /// The recovery timeout set with [`DeviceBuilder::recover_timeout`]
    /// (`None`: the device is removed when its daemon is lost).
    pub fn get_recover_timeout(&self) -> Option<Duration> {
        self.recover_timeout
    }

    /// Creates the device in the kernel, starts one worker thread per
    /// hardware queue serving `device`, and waits until the disk is live.
    /// A device with [`zones`](BlockDevice::zones) is created zoned
    /// (host-managed), of its geometry's size (from a builder without a
    /// size, [`DeviceBuilder::default`]); its disk goes live once the
    /// workers have answered the kernel's zone report.
    ///
    /// On any failure the half-made device is destroyed again (by force).
    /// After [`DeviceBuilder::recover`], recovers that device instead, and
    /// leaves it recovering on a failure.
    ///
    /// ```no_run
    /// use bius::zone::{ZoneGeometry, Zoned};
    /// use bius::{BlockDevice, DeviceBuilder};
    ///
    /// /// Serves `store` (1 GiB or more) as a zoned disk of 1 GiB in 64 MiB
    /// /// zones: the disk's size is the geometry's.
    /// fn serve(store: impl BlockDevice) -> Result<(), Box<dyn std::error::Error>> {
    ///     let geometry = ZoneGeometry::new(1 << 30, 64 << 20)?;
    ///     let disk = Zoned::new(store, geometry);
    ///     let device = DeviceBuilder::default().name("zoned0").create(disk)?;
    ///     device.run_until_signal()?;
    ///     Ok(())
    /// }
    /// ```
    pub fn create<D: BlockDevice>(&self, device: D) -> Result<Device, Error> {
        let (params, layout) = self.device_params(device.capabilities(), device.zones())?;
        self.serve(params, Served { device, layout })
    }

    /// Creates a device whose requests `device` completes later, from any
    /// thread ([`DeferredDevice`]), as [`DeviceBuilder::create`] does one
    /// that answers at once: up to the queue depth of requests are in
    /// flight per queue.  A device with [`zones`](DeferredDevice::zones) is
    /// created zoned, as by [`DeviceBuilder::create`].
    ///
    /// ```no_run
    /// use bius::{DeferredDevice, DeviceBuilder, Io, IoError};
    ///
    /// /// Fails every request, later.
    /// struct Refuse;
    ///
    /// impl DeferredDevice for Refuse {
    ///     fn submit(&self, io: Io) {
    ///         std::thread::spawn(move || io.complete_done(Err(IoError::Unsupported)));
    ///     }
    /// }
    ///
    /// let device = DeviceBuilder::new(1 << 30).queue_depth(64).create_deferred(Refuse)?;
    /// # Ok::<(), bius::Error>(())
    /// ```
    pub fn create_deferred<D: DeferredDevice>(&self, device: D) -> Result<Device, Error> {
        let (params, layout) = self.device_params(device.capabilities(), device.zones())?;
        let _io_flusher = self.io_flusher.then(mark_io_flusher).flatten();
        let server = DeferredServer::new(device, layout, self.timing());
        self.start_device(params, layout, &*deferred_spawner(Arc::new(server)))
    }

    /// Starts a synchronous device: through the plain workers, or, with a
    /// latency to add or a model, through the deferred ones.
    fn serve<D: BlockDevice>(
        &self,
        params: bius_device_params,
        served: Served<D>,
    ) -> Result<Device, Error> {
        let _io_flusher = self.io_flusher.then(mark_io_flusher).flatten();
        let layout = served.layout;
        if self.timing.is_immediate() {
            let served = Arc::new(served);
            return self.start_device(params, layout, &move |queue, config, stats, ringer| {
                spawn_worker(queue, Arc::clone(&served), config, stats, ringer)
            });
        }
        let device = Immediate::new(served.device);
        let server = DeferredServer::new(device, layout, self.timing());
        self.start_device(params, layout, &*deferred_spawner(Arc::new(server)))
    }

    /// Creates (or recovers) the device (zoned with `layout`, if given)
    /// and starts its workers, which inherit the I/O flusher mark of this
    /// thread (see [`DeviceBuilder::io_flusher`]).
    fn start_device(
        &self,
        mut params: bius_device_params,
        layout: Option<ZoneLayout>,
        spawn: &SpawnWorker<'_>,
    ) -> Result<Device, Error> {
        let control = Control::open().map_err(Error::from_open)?;
        let id = self.target.open(&control, &mut params)?;
        let doorbell = Doorbell::new().map_err(Error::from_io)?;
        let mut handle = Device {
            id,
            control: Some(control),
            doorbell,
            detach_requested: Arc::new(AtomicBool::new(false)),
            workers: Vec::new(),
            disk_name: String::new(),
            stopped: false,
            statistics: Statistics::new(
                self.get_queues(),
                layout.as_ref(),
                self.keeps_statistics(),
            ),
            #[cfg(feature = "control-socket")]
            control_socket: None,
        };
        match self.start(&mut handle, params.size, spawn) {
            Ok(()) => {
                #[cfg(feature = "control-socket")]
                {
                    handle.control_socket = self.serve_control_socket(&handle);
                }
                Ok(handle)
            }
            Err(err) => {
                let cleanup = match self.target {
                    // Nothing to flush on a disk that never went live.
                    Target::Create => handle.stop_force(),
                    // Closing its fds leaves it for another attempt.
                    Target::Recover(_) => handle.abandon(),
                };
                if let Err(stop_err) = cleanup {
                    log::warn!("device {id}: cleanup after a failed start: {stop_err}");
                }
                Err(err)
            }
        }
    }

    /// Connects and serves every queue of a created device of `size`
    /// bytes, then waits until it is live.
    fn start(&self, handle: &mut Device, size: u64, spawn: &SpawnWorker<'_>) -> Result<(), Error> {
        let id = handle.id;
        let window = if self.transfer_mode.maps() {
            let bytes = handle.info()?.window_size;
            usize::try_from(bytes).map_err(|_| Error::Kernel {
                op: ControlOp::MapWindow,
                errno: Errno::ENOMEM,
            })?
        } else {
            0
        };
        for queue in 0..self.get_queues() {
            let mut connected = Control::open()
                .map_err(Error::from_open)?
                .connect(id, queue)
                .map_err(|errno| Error::from_kernel(ControlOp::Connect, id, errno))?;
            if window > 0 {
                connected
                    .map_window(window)
                    .map_err(|errno| Error::from_kernel(ControlOp::MapWindow, id, errno))?;
            }
            let config = WorkerConfig {
                queue,
                size,
                max_io: self.get_max_io_size() as usize,
                scheduling: self.scheduling,
            };
            let ringer = handle.doorbell.ringer().map_err(Error::from_io)?;
            let stats = handle.statistics.recorder();
            handle
                .workers
                .push(spawn(connected, config, stats, ringer)?);
        }
        handle.wait_live(self.start_timeout)
    }
}

/// A builder without a size, for a zoned device, whose size is its
/// geometry's; every other parameter at its default (see the type's
/// documentation).
impl Default for DeviceBuilder {
    fn default() -> Self {
        DeviceBuilder {
            size: None,

            logical_block_size: DeviceBuilder::DEFAULT_LOGICAL_BLOCK_SIZE,
            physical_block_size: 0,
            queues: None,
            poll_queues: 0,
            queue_depth: DeviceBuilder::DEFAULT_QUEUE_DEPTH,
            max_io_size: 0,
            timeout: None,
            name: String::new(),
            read_only: false,
            start_timeout: DeviceBuilder::DEFAULT_START_TIMEOUT,
            transfer_mode: DeviceBuilder::DEFAULT_TRANSFER_MODE,
            poll_time: DeviceBuilder::DEFAULT_POLL_TIME,
            io_flusher: DeviceBuilder::DEFAULT_IO_FLUSHER,
            scheduling: Scheduling::default(),
            statistics: DeviceBuilder::DEFAULT_STATISTICS,
            timing: Timing::default(),
            recover_timeout: None,
            emulate_zone_append: false,
            target: Target::Create,
            #[cfg(feature = "control-socket")]
            control_socket: socket::Served::default(),
        }
    }
}

/// Starts deferred workers serving `server`.
fn deferred_spawner<D: DeferredDevice>(
    server: Arc<DeferredServer<D>>,
) -> Box<SpawnWorker<'static>> {
    Box::new(move |queue, config, stats, ringer| {
        spawn_deferred(queue, Arc::clone(&server), config, stats, ringer)
    })
}

mod params;
mod recover;
#[cfg(feature = "control-socket")]
mod socket;
#[cfg(test)]
mod tests;
