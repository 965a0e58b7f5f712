//! Creating, serving, querying and stopping devices through `/dev/bius`.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bius_sys::{bius_device_info, bius_device_params, bius_zoned_params};
use nix::errno::Errno;

use crate::abi::SECTOR_SIZE;
use crate::kernel::{Control, IoFlusherMark};
use crate::worker::{spawn_worker, Conventional, Serve, WorkerConfig, Zoned};
use crate::zone::{ZoneLayout, ZonedDevice};
use crate::{BlockDevice, Capabilities, ControlOp, Error, Parameter};

/// How often [`DeviceBuilder::create`] polls for the device to go live.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// How the data of reads and writes crosses between the kernel and the
/// workers.  Backends see no difference: they get the same `&[u8]` and
/// `&mut [u8]`, which in the map modes are the I/O buffers' own pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransferMode {
    /// The data is copied through the request and completion streams.
    #[default]
    Copy,
    /// The kernel maps the I/O buffers' pages into each queue's data
    /// window (zero copy), falling back to copying for a request whose
    /// buffer is too fragmented.
    Map,
    /// Requests of at least `threshold` bytes are mapped, smaller ones
    /// copied.
    Selective {
        /// In bytes, at most the largest I/O; 0 is the kernel's default,
        /// [`TransferMode::DEFAULT_THRESHOLD`] (or the largest I/O if
        /// smaller).
        threshold: u32,
    },
}

impl TransferMode {
    /// The default threshold of [`TransferMode::Selective`]: 128 KiB.
    pub const DEFAULT_THRESHOLD: u32 = bius_sys::BIUS_DEFAULT_MAP_THRESHOLD;

    /// The `BIUS_TRANSFER_*` value and `map_threshold` of this mode.
    fn to_raw(self) -> (u32, u32) {
        match self {
            TransferMode::Copy => (bius_sys::BIUS_TRANSFER_COPY, 0),
            TransferMode::Map => (bius_sys::BIUS_TRANSFER_MAP, 0),
            TransferMode::Selective { threshold } => (bius_sys::BIUS_TRANSFER_SELECTIVE, threshold),
        }
    }

    /// The mode of a `BIUS_TRANSFER_*` value; `None` for an unknown one.
    fn from_raw(mode: u32, threshold: u32) -> Option<Self> {
        match mode {
            bius_sys::BIUS_TRANSFER_COPY => Some(TransferMode::Copy),
            bius_sys::BIUS_TRANSFER_MAP => Some(TransferMode::Map),
            bius_sys::BIUS_TRANSFER_SELECTIVE => Some(TransferMode::Selective { threshold }),
            _ => None,
        }
    }

    /// Whether the queues need a data window.
    fn maps(self) -> bool {
        self != TransferMode::Copy
    }
}

impl fmt::Display for TransferMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransferMode::Copy => f.write_str("copy"),
            TransferMode::Map => f.write_str("map"),
            TransferMode::Selective { threshold } => write!(f, "selective={threshold}"),
        }
    }
}

/// The parameters of a new device; [`DeviceBuilder::create`] starts it.
///
/// Every setter takes and returns the builder by value.  Defaults: 512-byte
/// blocks, one queue of depth 128, the kernel's default largest I/O (1 MiB)
/// and request timeout (30 s), a kernel-chosen name, 10 s to go live.
#[derive(Debug, Clone)]
pub struct DeviceBuilder {
    size: u64,
    logical_block_size: u32,
    physical_block_size: u32,
    queues: u32,
    queue_depth: u32,
    max_io_size: u32,
    timeout: Option<Duration>,
    name: String,
    read_only: bool,
    start_timeout: Duration,
    transfer_mode: TransferMode,
    poll_time: Duration,
    io_flusher: bool,
}

impl DeviceBuilder {
    /// A device of `size` bytes.
    pub fn new(size: u64) -> Self {
        DeviceBuilder {
            size,
            logical_block_size: 512,
            physical_block_size: 0,
            queues: 1,
            queue_depth: 128,
            max_io_size: 0,
            timeout: None,
            name: String::new(),
            read_only: false,
            start_timeout: Duration::from_secs(10),
            transfer_mode: TransferMode::Copy,
            poll_time: Duration::ZERO,
            io_flusher: true,
        }
    }

    /// How long a worker waiting for a request busy-waits in the kernel
    /// before it sleeps (default: zero, never; at most 1 ms).  The kernel
    /// waits only while nothing else wants the CPU, so the price is idle
    /// CPU time; the gain is a sleep and a wake-up (two context switches)
    /// saved whenever the next request comes within that time, the case
    /// of a busy device or a synchronous application at queue depth 1.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let builder = bius::DeviceBuilder::new(1 << 30).poll_time(Duration::from_micros(50));
    /// assert_eq!(builder.effective_poll_time(), Duration::from_micros(50));
    /// ```
    pub fn poll_time(mut self, time: Duration) -> Self {
        self.poll_time = time;
        self
    }

    /// The busy-wait time, rounded down to whole microseconds as the
    /// kernel takes it.
    pub fn effective_poll_time(&self) -> Duration {
        Duration::from_micros(self.poll_time.as_micros().try_into().unwrap_or(u64::MAX))
    }

    /// How request data crosses the kernel boundary (default: copied).
    pub fn transfer_mode(mut self, mode: TransferMode) -> Self {
        self.transfer_mode = mode;
        self
    }

    /// The transfer mode.
    pub fn mode(&self) -> TransferMode {
        self.transfer_mode
    }

    /// Logical block size: a power of two from 512 to 4096.
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

    /// Number of hardware queues, each served by its own thread (1..=64).
    pub fn queues(mut self, queues: u32) -> Self {
        self.queues = queues;
        self
    }

    /// Requests in flight per queue (1..=4096).
    pub fn queue_depth(mut self, depth: u32) -> Self {
        self.queue_depth = depth;
        self
    }

    /// Largest read or write in bytes: a multiple of the logical block size
    /// from the page size to 8 MiB.
    pub fn max_io_size(mut self, bytes: u32) -> Self {
        self.max_io_size = bytes;
        self
    }

    /// Time after which the kernel fails a request not yet completed.
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

    /// Whether the worker threads mark themselves as I/O flushers
    /// (`PR_SET_IO_FLUSHER`, default: yes).  A block device served from
    /// user space must not wait for its own I/O: when memory runs short,
    /// the kernel reclaims it by writing dirty pages, possibly to this very
    /// disk, and a worker that then allocates memory (a page fault, a
    /// buffer) could enter reclaim and wait for those writes, which only it
    /// can complete.  Marked threads allocate without starting I/O and are
    /// throttled only against the disk they serve.  The mark needs
    /// `CAP_SYS_RESOURCE`; without it the device still works, with a
    /// warning in the log.
    pub fn io_flusher(mut self, io_flusher: bool) -> Self {
        self.io_flusher = io_flusher;
        self
    }

    /// How long [`DeviceBuilder::create`] waits for the disk to go live.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// The device size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The number of hardware queues.
    pub fn queue_count(&self) -> u32 {
        self.queues
    }

    /// The largest I/O in bytes, with the kernel's default filled in.
    pub fn effective_max_io_size(&self) -> u32 {
        match self.max_io_size {
            0 => bius_sys::BIUS_DEFAULT_MAX_IO_BYTES,
            bytes => bytes,
        }
    }

    /// The request timeout, with the kernel's default (30 s) filled in.
    pub fn effective_timeout(&self) -> Duration {
        self.timeout.unwrap_or(Duration::from_millis(u64::from(
            bius_sys::BIUS_DEFAULT_TIMEOUT_MS,
        )))
    }

    /// Checks the parameters and encodes them for `CREATE_DEVICE`.
    pub(crate) fn params(&self, capabilities: Capabilities) -> Result<bius_device_params, Error> {
        let check = |ok: bool, param| {
            if ok {
                Ok(())
            } else {
                Err(Error::InvalidParameter(param))
            }
        };
        let lbs = self.logical_block_size;
        check(
            lbs.is_power_of_two() && (512..=4096).contains(&lbs),
            Parameter::LogicalBlockSize,
        )?;
        check(
            self.size > 0 && self.size.is_multiple_of(u64::from(lbs)),
            Parameter::Size,
        )?;
        let pbs = self.physical_block_size;
        check(
            pbs == 0 || (pbs.is_power_of_two() && (lbs..=65536).contains(&pbs)),
            Parameter::PhysicalBlockSize,
        )?;
        check(
            (1..=bius_sys::BIUS_MAX_HW_QUEUES).contains(&self.queues),
            Parameter::Queues,
        )?;
        check(
            (1..=bius_sys::BIUS_MAX_QUEUE_DEPTH).contains(&self.queue_depth),
            Parameter::QueueDepth,
        )?;
        let max_io = self.max_io_size;
        check(
            max_io == 0
                || (max_io.is_multiple_of(lbs)
                    && (page_size()..=bius_sys::BIUS_MAX_IO_BYTES).contains(&max_io)),
            Parameter::MaxIoSize,
        )?;
        let (transfer_mode, map_threshold) = self.transfer_mode.to_raw();
        check(
            map_threshold <= self.effective_max_io_size(),
            Parameter::MapThreshold,
        )?;
        let poll_usecs = u32::try_from(self.poll_time.as_micros())
            .ok()
            .filter(|&us| us <= bius_sys::BIUS_MAX_POLL_USECS)
            .ok_or(Error::InvalidParameter(Parameter::PollTime))?;
        let timeout_ms = match self.timeout {
            None => 0,
            Some(timeout) => u32::try_from(timeout.as_millis())
                .ok()
                .filter(|&ms| ms > 0)
                .ok_or(Error::InvalidParameter(Parameter::Timeout))?,
        };
        let mut name = [0; bius_sys::BIUS_NAME_LEN as usize];
        check(
            self.name.len() < name.len()
                && self
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            Parameter::Name,
        )?;
        for (dst, src) in name.iter_mut().zip(self.name.bytes()) {
            *dst = src as _;
        }
        let capabilities = Capabilities {
            read_only: capabilities.read_only || self.read_only,
            ..capabilities
        };
        Ok(bius_device_params {
            abi_version: bius_sys::BIUS_ABI_VERSION,
            size: self.size,
            logical_block_size: lbs,
            physical_block_size: pbs,
            nr_hw_queues: self.queues,
            queue_depth: self.queue_depth,
            max_io_bytes: max_io,
            timeout_ms,
            features: capabilities.features(),
            transfer_mode,
            map_threshold,
            name,
            poll_usecs,
            ..Default::default()
        })
    }

    /// Checks the parameters of a zoned device and encodes them for
    /// `CREATE_DEVICE`: `BIUS_FEATURE_ZONED` and the zone geometry in bytes
    /// (normalised; the largest zone append at most the largest I/O).
    /// Also returns the zones as the kernel will know them.
    pub(crate) fn zoned_params<D: ZonedDevice>(
        &self,
        device: &D,
    ) -> Result<(bius_device_params, ZoneLayout), Error> {
        let mut params = self.params(device.capabilities())?;
        let geometry = device
            .geometry()
            .normalized()
            .map_err(Error::InvalidZoneGeometry)?;
        let bytes = |sectors: u64| sectors.checked_mul(SECTOR_SIZE);
        if bytes(geometry.device_sectors) != Some(self.size) {
            return Err(Error::InvalidParameter(Parameter::ZonedSize));
        }
        let lbs = u64::from(self.logical_block_size);
        let zone_size = geometry.zone_sectors * SECTOR_SIZE;
        if zone_size >= MAX_ZONE_SIZE {
            return Err(Error::InvalidParameter(Parameter::ZoneSize));
        }
        let zone_capacity = geometry.zone_capacity * SECTOR_SIZE;
        let max_append =
            (geometry.max_append * SECTOR_SIZE).min(u64::from(self.effective_max_io_size()));
        if zone_size < 2 * lbs
            || !zone_capacity.is_multiple_of(lbs)
            || !max_append.is_multiple_of(lbs)
        {
            return Err(Error::InvalidParameter(Parameter::ZoneAlignment));
        }
        params.features |= u64::from(bius_sys::BIUS_FEATURE_ZONED);
        params.zoned = bius_zoned_params {
            zone_size,
            zone_capacity,
            nr_conv_zones: geometry.conventional_zones,
            max_open_zones: geometry.max_open,
            max_active_zones: geometry.max_active,
            max_append_bytes: max_append as u32,
        };
        Ok((params, ZoneLayout::new(geometry, self.logical_block_size)))
    }

    /// Creates the device in the kernel, starts one worker thread per
    /// hardware queue serving `device`, and waits until the disk is live.
    ///
    /// On any failure the half-made device is destroyed again (by force).
    pub fn create<D: BlockDevice>(&self, device: D) -> Result<Device, Error> {
        let params = self.params(device.capabilities())?;
        self.create_with(params, Conventional(device))
    }

    /// Creates a zoned (host-managed) device serving `device`, as
    /// [`DeviceBuilder::create`] does a conventional one: the kernel gets
    /// `device.geometry()`, which must cover exactly the builder's size, and
    /// the disk goes live once the workers have answered the kernel's
    /// zone report.  Zone requests go to [`ZonedDevice::handle_zone`].
    ///
    /// ```no_run
    /// use bius::{DeviceBuilder, ZonedDevice};
    ///
    /// fn serve(disk: impl ZonedDevice) -> Result<(), bius::Error> {
    ///     let size = disk.geometry().device_sectors * 512;
    ///     let device = DeviceBuilder::new(size).name("zoned0").create_zoned(disk)?;
    ///     device.run_until_signal()
    /// }
    /// ```
    pub fn create_zoned<D: ZonedDevice>(&self, device: D) -> Result<Device, Error> {
        let (params, layout) = self.zoned_params(&device)?;
        self.create_with(params, Zoned { device, layout })
    }

    fn create_with<S: Serve>(
        &self,
        mut params: bius_device_params,
        device: S,
    ) -> Result<Device, Error> {
        let control = Control::open().map_err(Error::from_open)?;
        control
            .create(&mut params)
            .map_err(|errno| Error::from_kernel(ControlOp::Create, 0, errno))?;
        let id = params.dev_id;
        let doorbell = Doorbell::new().map_err(Error::from_io)?;
        let mut handle = Device {
            id,
            control,
            doorbell,
            workers: Vec::new(),
            disk_name: String::new(),
            stopped: false,
        };
        match self.start(&mut handle, Arc::new(device)) {
            Ok(()) => Ok(handle),
            Err(err) => {
                // Nothing to flush on a disk that never went live.
                if let Err(stop_err) = handle.stop_force() {
                    log::warn!("device {id}: cleanup after a failed start: {stop_err}");
                }
                Err(err)
            }
        }
    }

    /// Connects and serves every queue of a created device, then waits
    /// until it is live.
    fn start<S: Serve>(&self, handle: &mut Device, device: Arc<S>) -> Result<(), Error> {
        let id = handle.id;
        // The workers inherit the mark from this thread as they are spawned.
        let _io_flusher = self.io_flusher.then(mark_io_flusher).flatten();
        let window = if self.transfer_mode.maps() {
            let bytes = handle
                .control
                .info(id)
                .map_err(|errno| Error::from_kernel(ControlOp::GetInfo, id, errno))?
                .map_window_bytes;
            usize::try_from(bytes).map_err(|_| Error::Kernel {
                op: ControlOp::MapWindow,
                errno: Errno::ENOMEM,
            })?
        } else {
            0
        };
        for queue in 0..self.queues {
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
                size: self.size,
                max_io: self.effective_max_io_size() as usize,
            };
            let ringer = handle.doorbell.ringer().map_err(Error::from_io)?;
            handle.workers.push(spawn_worker(
                connected,
                Arc::clone(&device),
                config,
                ringer,
            )?);
        }
        handle.wait_live(self.start_timeout)
    }
}

/// Marks the calling thread as an I/O flusher until the mark is dropped,
/// or logs why it cannot.
fn mark_io_flusher() -> Option<IoFlusherMark> {
    IoFlusherMark::set()
        .inspect_err(|errno| {
            log::warn!("cannot mark the queue threads as I/O flushers (PR_SET_IO_FLUSHER): {errno}; under memory pressure the device may deadlock in reclaim")
        })
        .ok()
}

/// Zones are smaller than this (their sectors fit in 32 bits).
const MAX_ZONE_SIZE: u64 = 2 << 40;

/// The memory page size, the smallest largest-I/O the kernel accepts.
fn page_size() -> u32 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|bytes| u32::try_from(bytes).ok())
        .unwrap_or(4096)
}

/// The state of a device in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceState {
    /// Waiting for all queues to connect.
    Created,
    /// The disk is added and served.
    Live,
    /// Being removed.
    Stopping,
    /// Removed; waiting for its file descriptors to close.
    Dead,
    /// A state this crate does not know.
    Unknown(u32),
}

impl DeviceState {
    fn from_raw(state: u32) -> Self {
        match state {
            bius_sys::BIUS_STATE_CREATED => DeviceState::Created,
            bius_sys::BIUS_STATE_LIVE => DeviceState::Live,
            bius_sys::BIUS_STATE_STOPPING => DeviceState::Stopping,
            bius_sys::BIUS_STATE_DEAD => DeviceState::Dead,
            other => DeviceState::Unknown(other),
        }
    }
}

impl fmt::Display for DeviceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceState::Created => f.write_str("created"),
            DeviceState::Live => f.write_str("live"),
            DeviceState::Stopping => f.write_str("stopping"),
            DeviceState::Dead => f.write_str("dead"),
            DeviceState::Unknown(state) => write!(f, "unknown({state})"),
        }
    }
}

/// Everything the kernel reports about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device id.
    pub id: u32,
    /// Its state.
    pub state: DeviceState,
    /// Queues connected so far.
    pub connected_queues: u32,
    /// Process id of the creator.
    pub owner_pid: i32,
    /// Name of the disk; empty until it is added.
    pub disk_name: String,
    /// Size in bytes.
    pub size: u64,
    /// Logical block size in bytes.
    pub logical_block_size: u32,
    /// Physical block size in bytes.
    pub physical_block_size: u32,
    /// Number of hardware queues.
    pub queues: u32,
    /// Requests in flight per queue.
    pub queue_depth: u32,
    /// Largest I/O in bytes.
    pub max_io_size: u32,
    /// Request timeout.
    pub timeout: Duration,
    /// Announced capabilities.
    pub capabilities: Capabilities,
    /// How request data crosses the kernel boundary; `None` for a mode
    /// this crate does not know.
    pub transfer_mode: Option<TransferMode>,
    /// Bytes of each queue's data window (0 in copy mode).
    pub window_size: u64,
    /// How long a worker busy-waits for a request before it sleeps.
    pub poll_time: Duration,
    /// Requests whose data went through the data windows (map modes),
    /// since the device was created.
    pub mapped_requests: u64,
    /// Of those, requests passed as a segment list (buffers not aligned to
    /// each other).
    pub segmented_requests: u64,
    /// The zone geometry of a zoned device; `None` for a conventional one.
    pub zoned: Option<ZonedParams>,
}

/// The zone geometry of a zoned device as the kernel reports it, in bytes,
/// with its defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZonedParams {
    /// Zone size.
    pub zone_size: u64,
    /// Writable bytes of each zone.
    pub zone_capacity: u64,
    /// Leading conventional zones.
    pub conventional_zones: u32,
    /// Most zones open at once; 0 for no limit.
    pub max_open: u32,
    /// Most zones open or closed at once; 0 for no limit.
    pub max_active: u32,
    /// Largest zone append.
    pub max_append: u32,
}

impl ZonedParams {
    fn from_raw(raw: &bius_zoned_params) -> Self {
        ZonedParams {
            zone_size: raw.zone_size,
            zone_capacity: raw.zone_capacity,
            conventional_zones: raw.nr_conv_zones,
            max_open: raw.max_open_zones,
            max_active: raw.max_active_zones,
            max_append: raw.max_append_bytes,
        }
    }
}

impl DeviceInfo {
    fn from_raw(raw: &bius_device_info) -> Self {
        let p = &raw.params;
        DeviceInfo {
            id: raw.dev_id,
            state: DeviceState::from_raw(raw.state),
            connected_queues: raw.nr_connected,
            owner_pid: raw.owner_pid,
            disk_name: c_name(&raw.disk_name),
            size: p.size,
            logical_block_size: p.logical_block_size,
            physical_block_size: p.physical_block_size,
            queues: p.nr_hw_queues,
            queue_depth: p.queue_depth,
            max_io_size: p.max_io_bytes,
            timeout: Duration::from_millis(p.timeout_ms.into()),
            capabilities: Capabilities::from_features(p.features),
            transfer_mode: TransferMode::from_raw(p.transfer_mode, p.map_threshold),
            window_size: raw.map_window_bytes,
            poll_time: Duration::from_micros(p.poll_usecs.into()),
            mapped_requests: raw.mapped_requests,
            segmented_requests: raw.segmented_requests,
            zoned: (p.features & u64::from(bius_sys::BIUS_FEATURE_ZONED) != 0)
                .then(|| ZonedParams::from_raw(&p.zoned)),
        }
    }

    /// The disk's path, `/dev/<disk_name>`, once it is added.
    pub fn path(&self) -> Option<PathBuf> {
        (!self.disk_name.is_empty()).then(|| Path::new("/dev").join(&self.disk_name))
    }
}

/// A NUL-terminated name from the kernel.
fn c_name(raw: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The ids and states of all devices.
pub fn list_devices() -> Result<Vec<DeviceInfo>, Error> {
    let control = Control::open().map_err(Error::from_open)?;
    let ids = control
        .list()
        .map_err(|errno| Error::from_kernel(ControlOp::List, 0, errno))?;
    let mut devices = Vec::with_capacity(ids.len());
    for id in ids {
        match control.info(id) {
            Ok(raw) => devices.push(DeviceInfo::from_raw(&raw)),
            // Destroyed between listing and asking.
            Err(Errno::ENOENT | Errno::ENODEV) => {}
            Err(errno) => return Err(Error::from_kernel(ControlOp::GetInfo, id, errno)),
        }
    }
    Ok(devices)
}

/// Everything about device `id`.
pub fn device_info(id: u32) -> Result<DeviceInfo, Error> {
    let control = Control::open().map_err(Error::from_open)?;
    info_via(&control, id)
}

/// Stops and removes device `id`.  Without `force` this fails with
/// [`Error::Busy`] while the disk is open.
pub fn destroy_device(id: u32, force: bool) -> Result<(), Error> {
    let control = Control::open().map_err(Error::from_open)?;
    destroy_via(&control, id, force)
}

fn info_via(control: &Control, id: u32) -> Result<DeviceInfo, Error> {
    control
        .info(id)
        .map(|raw| DeviceInfo::from_raw(&raw))
        .map_err(|errno| Error::from_kernel(ControlOp::GetInfo, id, errno))
}

fn destroy_via(control: &Control, id: u32, force: bool) -> Result<(), Error> {
    let flags = if force {
        bius_sys::BIUS_DESTROY_FORCE
    } else {
        0
    };
    control
        .destroy(id, flags)
        .map_err(|errno| Error::from_kernel(ControlOp::Destroy, id, errno))
}

/// What wakes the thread in [`Device::run_until_signal`]: a byte on a
/// socket pair, sent by the SIGINT and SIGTERM handlers and by each worker
/// thread as it ends.  That thread sleeps in `read()` until then, so a
/// served device costs no wake-ups of its own.
struct Doorbell {
    bell: UnixStream,
    button: UnixStream,
    /// Worker threads whose [`Ringer`] has been dropped.
    ended: Arc<AtomicUsize>,
}

/// Counts its worker as ended and rings its [`Doorbell`], when dropped.
struct Ringer {
    button: UnixStream,
    ended: Arc<AtomicUsize>,
}

impl Drop for Ringer {
    fn drop(&mut self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
        // Non-blocking: a full socket already wakes the waiting thread.
        let _ = self.button.write(&[1]);
    }
}

impl Doorbell {
    fn new() -> io::Result<Self> {
        let (bell, button) = UnixStream::pair()?;
        // (shared by every clone of the button; the bell still blocks)
        button.set_nonblocking(true)?;
        Ok(Doorbell {
            bell,
            button,
            ended: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// A ringer for a worker thread to drop as it ends.
    fn ringer(&self) -> io::Result<Ringer> {
        Ok(Ringer {
            button: self.button.try_clone()?,
            ended: Arc::clone(&self.ended),
        })
    }

    /// How many workers have ended.
    fn ended(&self) -> usize {
        self.ended.load(Ordering::SeqCst)
    }

    /// Rings the bell on `signal` (and sets `flag`) until the returned ids
    /// are unregistered.
    fn ring_on(
        &self,
        signal: std::os::raw::c_int,
        flag: &Arc<AtomicBool>,
    ) -> io::Result<[signal_hook::SigId; 2]> {
        let flag_id = signal_hook::flag::register(signal, Arc::clone(flag))?;
        let pipe_id = match self
            .button
            .try_clone()
            .and_then(|button| signal_hook::low_level::pipe::register(signal, button))
        {
            Ok(id) => id,
            Err(err) => {
                signal_hook::low_level::unregister(flag_id);
                return Err(err);
            }
        };
        Ok([flag_id, pipe_id])
    }

    /// Sleeps until the bell has rung since the last wait.
    fn wait(&self) {
        let mut rings = [0u8; 64];
        loop {
            match (&self.bell).read(&mut rings) {
                Ok(_) => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => {
                    // Cannot happen with a socket pair we own; never spin.
                    log::warn!("device wait: {err}; polling instead");
                    thread::sleep(POLL_INTERVAL);
                    return;
                }
            }
        }
    }
}

/// A running device.  Dropping it stops the device (gracefully if the disk
/// is closed, else by force) and joins its worker threads.
pub struct Device {
    id: u32,
    /// The fd that created the device: closing it destroys the device.
    control: Control,
    /// Rung by signals and by workers ending.
    doorbell: Doorbell,
    workers: Vec<JoinHandle<Result<(), Error>>>,
    disk_name: String,
    stopped: bool,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("disk_name", &self.disk_name)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl Device {
    /// The device id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The disk's name, e.g. `bius0`.
    pub fn disk_name(&self) -> &str {
        &self.disk_name
    }

    /// The disk's path, e.g. `/dev/bius0`.
    pub fn path(&self) -> PathBuf {
        Path::new("/dev").join(&self.disk_name)
    }

    /// What the kernel reports about this device now.
    pub fn info(&self) -> Result<DeviceInfo, Error> {
        info_via(&self.control, self.id)
    }

    /// Graceful stop: the kernel removes the disk (flushing it through the
    /// workers), then ends the queues.  Fails with [`Error::Busy`] while the
    /// disk is open; the device keeps running then.
    pub fn stop(&mut self) -> Result<(), Error> {
        self.destroy(false)
    }

    /// Stops the device even if its disk is open: requests fail with I/O
    /// errors from then on.
    pub fn stop_force(&mut self) -> Result<(), Error> {
        self.destroy(true)
    }

    /// Blocks until the device stops by other means (e.g. `biusctl destroy`,
    /// or a queue failing), then returns the first worker error, if any.
    pub fn wait(&mut self) -> Result<(), Error> {
        let mut first_error = None;
        for worker in self.workers.drain(..) {
            let result = worker.join().unwrap_or(Err(Error::System(Errno::EIO)));
            if let Err(err) = result {
                first_error.get_or_insert(err);
            }
        }
        self.stopped = true;
        first_error.map_or(Ok(()), Err)
    }

    /// Serves until SIGINT or SIGTERM, then stops gracefully.  If the disk
    /// is open, logs a warning and keeps serving until a second signal,
    /// which forces the stop.  Also returns when the device is stopped by
    /// other means.  SIGHUP (a closed terminal, or `systemctl reload`) is
    /// logged and otherwise ignored: it must not take a disk away from
    /// whoever uses it.
    pub fn run_until_signal(mut self) -> Result<(), Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let hang_up = Arc::new(AtomicBool::new(false));
        let mut handlers = Vec::new();
        let result = [
            (signal_hook::consts::SIGINT, &stop),
            (signal_hook::consts::SIGTERM, &stop),
            (signal_hook::consts::SIGHUP, &hang_up),
        ]
        .into_iter()
        .try_for_each(|(signal, flag)| {
            handlers.extend(self.doorbell.ring_on(signal, flag)?);
            Ok(())
        })
        .map_err(Error::from_io)
        .and_then(|()| self.serve_until_signalled(&stop, &hang_up));
        for id in handlers {
            signal_hook::low_level::unregister(id);
        }
        result
    }

    fn serve_until_signalled(
        &mut self,
        stop: &AtomicBool,
        hang_up: &AtomicBool,
    ) -> Result<(), Error> {
        let mut graceful_refused = false;
        while self.doorbell.ended() < self.workers.len() {
            if hang_up.swap(false, Ordering::SeqCst) {
                log::info!(
                    "device {}: SIGHUP ignored (SIGINT or SIGTERM stops it)",
                    self.id
                );
            }
            if stop.swap(false, Ordering::SeqCst) {
                if graceful_refused {
                    log::warn!("stopping device {} by force", self.id);
                    return self.stop_force();
                }
                match self.stop() {
                    Err(Error::Busy { .. }) => {
                        log::warn!(
                            "device {} is busy: its disk is open; signal again to force the stop",
                            self.id
                        );
                        graceful_refused = true;
                    }
                    result => return result,
                }
                continue;
            }
            self.doorbell.wait();
        }
        self.wait()
    }

    fn destroy(&mut self, force: bool) -> Result<(), Error> {
        if self.stopped {
            return Ok(());
        }
        match destroy_via(&self.control, self.id, force) {
            // Already gone: the workers have seen (or will see) end of file.
            Ok(()) | Err(Error::NoSuchDevice { .. }) => self.wait(),
            Err(err) => Err(err),
        }
    }

    /// Polls until the disk is live.
    fn wait_live(&mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let info = self.info()?;
            match info.state {
                DeviceState::Live => {
                    self.disk_name = info.disk_name;
                    return Ok(());
                }
                DeviceState::Stopping | DeviceState::Dead => {
                    return Err(Error::NotLive {
                        id: self.id,
                        state: info.state,
                    })
                }
                _ if self.workers.iter().any(JoinHandle::is_finished) => {
                    // A queue failed; its error says more than the state.
                    self.wait()?;
                    return Err(Error::NotLive {
                        id: self.id,
                        state: info.state,
                    });
                }
                _ if Instant::now() >= deadline => {
                    return Err(Error::NotLive {
                        id: self.id,
                        state: info.state,
                    })
                }
                _ => thread::sleep(POLL_INTERVAL),
            }
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        let result = match self.stop() {
            Err(Error::Busy { .. }) => self.stop_force(),
            result => result,
        };
        if let Err(err) = result {
            // Closing the control fd (next) destroys the device, which ends
            // the workers; they are left to finish on their own.
            log::error!("device {}: stop failed: {err} ({})", self.id, err.errno());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(builder: DeviceBuilder) -> Parameter {
        match builder.params(Capabilities::default()) {
            Err(Error::InvalidParameter(param)) => param,
            other => panic!("expected an invalid parameter, got {other:?}"),
        }
    }

    #[test]
    fn parameters_are_encoded() {
        let caps = Capabilities {
            discard: true,
            ..Capabilities::default()
        };
        let params = DeviceBuilder::new(1 << 30)
            .logical_block_size(4096)
            .physical_block_size(8192)
            .queues(4)
            .queue_depth(64)
            .max_io_size(256 << 10)
            .timeout(Duration::from_secs(5))
            .name("disk_1-a")
            .read_only(true)
            .params(caps)
            .unwrap();
        assert_eq!(params.abi_version, bius_sys::BIUS_ABI_VERSION);
        assert_eq!(
            (
                params.size,
                params.logical_block_size,
                params.physical_block_size
            ),
            (1 << 30, 4096, 8192)
        );
        assert_eq!((params.nr_hw_queues, params.queue_depth), (4, 64));
        assert_eq!((params.max_io_bytes, params.timeout_ms), (256 << 10, 5000));
        assert_eq!(
            params.features,
            u64::from(bius_sys::BIUS_FEATURE_DISCARD | bius_sys::BIUS_FEATURE_READ_ONLY)
        );
        assert_eq!(c_name(&params.name), "disk_1-a");
        // Defaults are left to the kernel.
        let params = DeviceBuilder::new(1 << 20)
            .params(Capabilities::default())
            .unwrap();
        assert_eq!(
            (
                params.physical_block_size,
                params.max_io_bytes,
                params.timeout_ms
            ),
            (0, 0, 0)
        );
        assert_eq!(params.name[0], 0);
    }

    #[test]
    fn invalid_parameters_are_named() {
        let b = || DeviceBuilder::new(1 << 20);
        assert_eq!(invalid(DeviceBuilder::new(0)), Parameter::Size);
        assert_eq!(invalid(DeviceBuilder::new(1000)), Parameter::Size);
        assert_eq!(
            invalid(DeviceBuilder::new(512 * 3).logical_block_size(1024)),
            Parameter::Size
        );
        for lbs in [256, 768, 8192] {
            assert_eq!(
                invalid(b().logical_block_size(lbs)),
                Parameter::LogicalBlockSize
            );
        }
        for pbs in [256, 3000, 128 << 10] {
            assert_eq!(
                invalid(b().physical_block_size(pbs)),
                Parameter::PhysicalBlockSize
            );
        }
        assert_eq!(
            invalid(b().logical_block_size(4096).physical_block_size(2048)),
            Parameter::PhysicalBlockSize
        );
        assert_eq!(invalid(b().queues(0)), Parameter::Queues);
        assert_eq!(invalid(b().queues(65)), Parameter::Queues);
        assert_eq!(invalid(b().queue_depth(0)), Parameter::QueueDepth);
        assert_eq!(invalid(b().queue_depth(4097)), Parameter::QueueDepth);
        assert_eq!(invalid(b().max_io_size(1000)), Parameter::MaxIoSize);
        assert_eq!(
            invalid(b().max_io_size(page_size() / 2)),
            Parameter::MaxIoSize
        );
        assert_eq!(invalid(b().max_io_size(16 << 20)), Parameter::MaxIoSize);
        assert_eq!(invalid(b().timeout(Duration::ZERO)), Parameter::Timeout);
        assert_eq!(
            invalid(b().poll_time(Duration::from_micros(1001))),
            Parameter::PollTime
        );
        let params = b()
            .poll_time(Duration::from_nanos(1_999_999 / 2))
            .params(Capabilities::default())
            .unwrap();
        assert_eq!(params.poll_usecs, 999);
        assert_eq!(
            invalid(b().timeout(Duration::from_secs(u64::MAX / 1000))),
            Parameter::Timeout
        );
        assert_eq!(invalid(b().name("a".repeat(32))), Parameter::Name);
        assert_eq!(invalid(b().name("no/slash")), Parameter::Name);
        assert!(b()
            .name("a".repeat(31))
            .params(Capabilities::default())
            .is_ok());
    }

    #[test]
    fn states_print_lowercase() {
        let states = [0, 1, 2, 3, 9].map(|raw| DeviceState::from_raw(raw).to_string());
        assert_eq!(
            states,
            ["created", "live", "stopping", "dead", "unknown(9)"]
        );
    }

    use crate::ZoneGeometry;

    /// Zones without data, enough for the parameters.
    struct Geometry(ZoneGeometry);

    impl BlockDevice for Geometry {
        fn read(&self, _offset: u64, _buf: &mut [u8]) -> Result<(), crate::IoError> {
            Err(crate::IoError::Unsupported)
        }
        fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), crate::IoError> {
            Err(crate::IoError::Unsupported)
        }
    }

    impl ZonedDevice for Geometry {
        fn geometry(&self) -> ZoneGeometry {
            self.0
        }
        fn report_zones(&self, _: u64, _: usize) -> Result<Vec<crate::Zone>, crate::IoError> {
            Ok(vec![])
        }
        fn zone_open(&self, _offset: u64) -> Result<(), crate::IoError> {
            Ok(())
        }
        fn zone_close(&self, _offset: u64) -> Result<(), crate::IoError> {
            Ok(())
        }
        fn zone_finish(&self, _offset: u64) -> Result<(), crate::IoError> {
            Ok(())
        }
        fn zone_reset(&self, _offset: u64) -> Result<(), crate::IoError> {
            Ok(())
        }
        fn zone_reset_all(&self) -> Result<(), crate::IoError> {
            Ok(())
        }
        fn zone_append(&self, _offset: u64, _data: &[u8]) -> Result<u64, crate::IoError> {
            Ok(0)
        }
    }

    #[test]
    fn zoned_parameters_are_encoded_in_bytes() {
        // 64 MiB in 4 MiB zones of 3 MiB, 2 conventional, limits 4/6.
        let geometry = ZoneGeometry {
            zone_capacity: 6 << 10,
            conventional_zones: 2,
            max_open: 4,
            max_active: 6,
            ..ZoneGeometry::new(128 << 10, 8 << 10)
        };
        let (params, layout) = DeviceBuilder::new(64 << 20)
            .logical_block_size(4096)
            .zoned_params(&Geometry(geometry))
            .unwrap();
        assert_eq!(layout.geometry().max_append, 8 << 10);
        assert_eq!(
            params.features,
            u64::from(bius_sys::BIUS_FEATURE_ZONED),
            "zoned, nothing else"
        );
        let z = params.zoned;
        assert_eq!((z.zone_size, z.zone_capacity), (4 << 20, 3 << 20));
        assert_eq!(
            (z.nr_conv_zones, z.max_open_zones, z.max_active_zones),
            (2, 4, 6)
        );
        // The largest append is at most the largest I/O.
        assert_eq!(z.max_append_bytes, bius_sys::BIUS_DEFAULT_MAX_IO_BYTES);
        let info = DeviceInfo::from_raw(&bius_device_info {
            params,
            ..Default::default()
        });
        assert_eq!(
            info.zoned,
            Some(ZonedParams {
                zone_size: 4 << 20,
                zone_capacity: 3 << 20,
                conventional_zones: 2,
                max_open: 4,
                max_active: 6,
                max_append: 1 << 20,
            })
        );
        let conventional = DeviceBuilder::new(1 << 20)
            .params(Capabilities::default())
            .unwrap();
        assert_eq!(
            DeviceInfo::from_raw(&bius_device_info {
                params: conventional,
                ..Default::default()
            })
            .zoned,
            None
        );
    }

    #[test]
    fn invalid_zone_geometries_are_named() {
        let zoned = |builder: DeviceBuilder, geometry| {
            builder
                .zoned_params(&Geometry(geometry))
                .map(drop)
                .unwrap_err()
        };
        let geometry = ZoneGeometry::new(2048, 256);
        assert_eq!(
            zoned(DeviceBuilder::new(2 << 20), geometry),
            Error::InvalidParameter(Parameter::ZonedSize)
        );
        assert_eq!(
            zoned(
                DeviceBuilder::new(1 << 20),
                ZoneGeometry {
                    zone_sectors: 96,
                    ..geometry
                }
            ),
            Error::InvalidZoneGeometry(crate::ZoneGeometryError::ZoneSizeNotPowerOfTwo)
        );
        let lbs4k = || DeviceBuilder::new(1 << 20).logical_block_size(4096);
        assert_eq!(
            zoned(lbs4k(), ZoneGeometry::new(2048, 8)),
            Error::InvalidParameter(Parameter::ZoneAlignment)
        );
        assert_eq!(
            zoned(
                lbs4k(),
                ZoneGeometry {
                    max_append: 9,
                    ..geometry
                }
            ),
            Error::InvalidParameter(Parameter::ZoneAlignment)
        );
        assert!(lbs4k().zoned_params(&Geometry(geometry)).is_ok());
        let huge = ZoneGeometry::new(1 << 33, 1 << 32);
        assert_eq!(
            zoned(DeviceBuilder::new(4 << 40), huge),
            Error::InvalidParameter(Parameter::ZoneSize)
        );
    }

    /// Waits on `doorbell` in another thread; true if it woke within 5 s.
    fn wakes(doorbell: &Arc<Doorbell>) -> bool {
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = Arc::clone(doorbell);
        thread::spawn(move || {
            waiter.wait();
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(5)).is_ok()
    }

    #[test]
    fn doorbell_rings_when_a_worker_ends_and_on_signals() {
        let doorbell = Arc::new(Doorbell::new().unwrap());
        let ringers = [doorbell.ringer().unwrap(), doorbell.ringer().unwrap()];
        assert_eq!(doorbell.ended(), 0);
        let [first, second] = ringers;
        thread::spawn(move || drop(first)).join().unwrap();
        assert!(wakes(&doorbell));
        assert_eq!(doorbell.ended(), 1);
        drop(second);
        assert_eq!(doorbell.ended(), 2);
        assert!(wakes(&doorbell));

        // SIGUSR2: not one the test harness or the device uses
        let flag = Arc::new(AtomicBool::new(false));
        let ids = doorbell
            .ring_on(signal_hook::consts::SIGUSR2, &flag)
            .unwrap();
        signal_hook::low_level::raise(signal_hook::consts::SIGUSR2).unwrap();
        assert!(wakes(&doorbell));
        assert!(flag.load(Ordering::SeqCst));
        for id in ids {
            signal_hook::low_level::unregister(id);
        }
        assert_eq!(doorbell.ended(), 2, "a signal is not a worker ending");
    }
}
