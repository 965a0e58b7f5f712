//! An in-process stand-in for the kernel, for tests and benchmarks (cargo
//! feature `loopback`, off by default).
//!
//! A [`Loopback`] plays the kernel's side of the protocol of `bius.h` for
//! each hardware queue: it queues the requests you [`submit`](Loopback::submit),
//! hands them to the worker threads as the same byte stream `read()` on
//! `/dev/bius` produces (several records per read, write payloads continued
//! across reads when the reader's buffer — or [`Loopback::read_limit`] — is
//! too small), and checks the completions the workers write exactly as the
//! kernel does (`ENOENT` for an unknown or already completed id, `EXDEV` for
//! another queue's id, `EINVAL` for a malformed record or a wrong payload
//! length, `ENODEV` once stopped; a refused record ends the write() with the
//! count of the bytes before it).  The workers are the very same code that
//! serves a kernel device, so everything but the ioctls is exercised without
//! the kernel module.
//!
//! It sends only what the kernel sends: a request that breaks a rule of
//! the device's limits and capabilities (a flush to a device without a
//! write cache, a discard it does not offer, a 512-byte write to a disk of
//! 4 KiB blocks, a read larger than its largest I/O, which the block layer
//! would split, a write across a zone...) is refused with
//! [`SubmitError::NotSent`], whose [`NotSent`] names the rule, and never
//! reaches the device.  So a device test cannot pass on behaviour the
//! kernel never exercises.
//!
//! A builder with a [`TransferMode`] other than copy makes the loopback
//! map the data of reads, writes and zone appends into each queue's
//! in-process data window, as the kernel maps I/O buffers: the workers
//! then take it from there (and put a read's data there), the completions
//! of mapped reads carry no payload, and a request finding no free slot is
//! copied instead.  [`LoopbackCounters::mapped`] counts the mapped requests.
//! With [`Loopback::segments`], mapped reads and writes come in several
//! pieces with gaps between them, each described by a segment record after
//! the header, as the kernel sends the data of a buffer whose pieces are
//! not aligned to each other.
//!
//! A zoned device is served zoned: like the kernel adding the disk, the
//! loopback first reads every zone with `REPORT_ZONES` and checks the
//! report against the geometry.  Completions of zone requests
//! are checked as the kernel checks them: a report's payload must be whole
//! `struct blk_zone` descriptors within the room the request gave, and only
//! a successful zone append may carry a sector.
//!
//! ```
//! use bius::loopback::{Loopback, Submission};
//! use bius::{BlockDevice, DeviceBuilder, IoError};
//!
//! struct Pattern;
//!
//! impl BlockDevice for Pattern {
//!     fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
//!         buf.fill((offset / 512) as u8);
//!         Ok(())
//!     }
//!     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
//!         Err(IoError::ReadOnly)
//!     }
//! }
//!
//! let mut kernel = Loopback::new(&DeviceBuilder::new(1 << 20)).unwrap();
//! kernel.start(Pattern).unwrap();
//! assert_eq!(kernel.read(0, 1024, 512).unwrap(), [2; 512]);
//! assert_eq!(
//!     kernel.run(0, Submission::write(0, vec![1; 512])),
//!     Err(IoError::ReadOnly)
//! );
//! kernel.stop().unwrap();
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::errno::Errno;

use crate::abi::{MAX_SEGMENTS, REQUEST_SIZE, ZONE_SIZE};
use crate::block::{BlockDevice, Capabilities};
use crate::control::builder::DeviceBuilder;
use crate::control::info::DeviceState;
use crate::control::transfer::TransferMode;
use crate::deferred::{DeferredDevice, Immediate};
use crate::error::{Error, IoError};
use crate::request::{Command, Reply};
use crate::stats::{Recorder, Statistics};
use crate::worker::deferred::{spawn_deferred, DeferredServer};
use crate::worker::serve::Served;
use crate::worker::{spawn_worker, WorkerConfig};
use crate::zone::layout::ZoneLayout;
use crate::zone::Zone;
use queue::{lock, Connection, Pending, QueueSlot, QueueState, Shared};
use rules::Rules;
use window::slot_bytes;

pub use rules::NotSent;
pub use submission::{Submission, SubmitError};

mod queue;
mod rules;
mod submission;
#[cfg(test)]
mod tests;
mod window;

/// What the loopback hands a submitter: the reply and a read's data.
type Outcome = Result<(Reply, Vec<u8>), IoError>;

/// A submitted request; [`Ticket::wait`] blocks until it completes.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    queue: u32,
    outcome: Receiver<Outcome>,
}

impl Ticket {
    /// The request id, as the worker sees it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Waits for the completion: the [`Reply`] as the kernel received it
    /// ([`Reply::Zones`] decoded from a report's descriptors,
    /// [`Reply::Appended`] from an append's sector).  A read's data is
    /// [`Ticket::wait_data`]'s.  A request that can no longer complete
    /// (the loopback is gone) fails with [`IoError::Io`].
    pub fn wait(self) -> Result<Reply, IoError> {
        self.wait_all().map(|(reply, _)| reply)
    }

    /// Waits for the completion, as [`Ticket::wait`] does, and returns a
    /// read's data (empty for other requests).
    pub fn wait_data(self) -> Result<Vec<u8>, IoError> {
        self.wait_all().map(|(_, data)| data)
    }

    fn wait_all(self) -> Outcome {
        #[cfg(feature = "tokio")]
        crate::tokio::check_blocking("waiting for a loopback request");
        self.outcome.recv().unwrap_or(Err(IoError::Io))
    }

    /// Waits at most `timeout`; `None` if the request is still in flight.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<Reply, IoError>> {
        #[cfg(feature = "tokio")]
        crate::tokio::check_blocking("waiting for a loopback request");
        let outcome = self.outcome.recv_timeout(timeout).ok()?;
        Some(outcome.map(|(reply, _)| reply))
    }
}

/// Counters of what crossed the simulated kernel boundary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopbackCounters {
    /// read() calls that returned data.
    pub read_calls: u64,
    /// write() calls.
    pub write_calls: u64,
    /// Completion records accepted.
    pub completions: u64,
    /// write() calls that stopped at a refused completion record.
    pub refused: u64,
    /// Requests whose data went through the data window (map modes).
    pub mapped: u64,
    /// Mapped requests whose data came in several segments (counted in
    /// `mapped` too); see [`Loopback::segments`].
    pub segmented: u64,
}

/// Fails each request of `pending` (queued before the device started)
/// that the kernel would not have sent, as [`Loopback::submit`] refuses
/// one once it has.
fn refuse_unsent(pending: &mut VecDeque<Pending>, rules: &Rules) {
    pending.retain(|request| {
        let Some(command) = request.command else {
            return true;
        };
        let Err(err) = rules.admit(&command) else {
            return true;
        };
        let _ = request.reply.send(Err(IoError::from(err)));
        false
    });
}

/// A worker thread as spawned, or why it could not be.
type WorkerThread = Result<JoinHandle<Result<(), Error>>, Error>;

/// The in-process kernel: see the [module documentation](self).
pub struct Loopback {
    shared: Arc<Shared>,
    builder: DeviceBuilder,
    config: WorkerConfig,
    workers: Vec<JoinHandle<Result<(), Error>>>,
    statistics: Statistics,
}

impl Loopback {
    /// A loopback kernel with the parameters of `params` (size, queues,
    /// largest I/O; validated like [`DeviceBuilder::create`] does; a
    /// builder without a size takes a zoned device's when it starts).  No
    /// worker runs until [`Loopback::start`]: requests submitted before
    /// queue up, which makes batches deterministic.
    pub fn new(params: &DeviceBuilder) -> Result<Self, Error> {
        let raw = params.checked()?;
        let queues = params.get_queues();
        let max_io = params.get_max_io_size();
        let map_threshold = match params.get_transfer_mode() {
            TransferMode::Copy => None,
            TransferMode::Map => Some(0),
            TransferMode::Selective { threshold: 0 } => {
                Some(TransferMode::DEFAULT_THRESHOLD.min(max_io))
            }
            TransferMode::Selective { threshold } => Some(threshold),
        };
        let queue = || QueueSlot {
            state: Mutex::new(QueueState {
                free_slots: (0..raw.queue_depth).rev().collect(),
                ..Default::default()
            }),
            ready: Condvar::new(),
        };
        Ok(Loopback {
            shared: Arc::new(Shared {
                queues: (0..queues).map(|_| queue()).collect(),
                map_threshold,
                slot_bytes: slot_bytes(max_io as usize),
                queue_depth: raw.queue_depth,
                layout: OnceLock::new(),
                rules: OnceLock::new(),
                report_refused: Mutex::new(None),
                next_seq: AtomicU64::new(0x5eed),
                read_limit: AtomicU64::new(u64::MAX),
                segments: AtomicUsize::new(0),
                stopping: AtomicBool::new(false),
                no_data: AtomicBool::new(false),
                read_calls: AtomicU64::new(0),
                write_calls: AtomicU64::new(0),
                completions: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                mapped: AtomicU64::new(0),
                segmented: AtomicU64::new(0),
                size: AtomicU64::new(raw.size),
            }),
            builder: params.clone(),
            config: WorkerConfig {
                queue: 0,
                size: raw.size,
                max_io: params.get_max_io_size() as usize,
                scheduling: params.get_scheduling(),
            },
            workers: Vec::new(),
            statistics: Statistics::new(queues, None, true),
        })
    }

    /// Makes every read() return at most `bytes` (at least one request
    /// header), as a small reader buffer would: write payloads then span
    /// several reads.
    pub fn read_limit(self, bytes: usize) -> Self {
        let bytes = bytes.max(REQUEST_SIZE) as u64;
        self.shared.read_limit.store(bytes, Ordering::Relaxed);
        self
    }

    /// Makes mapped reads and writes come in `count` segments, as the
    /// kernel sends a request whose buffer is in pieces not aligned to each
    /// other (an `O_DIRECT` `readv` of buffers at different page offsets,
    /// say).  A mapped `READ` or `WRITE` of whole sectors, at least
    /// `count` of them, is split into `count` runs of whole sectors, as
    /// even as possible (the last ones the longer), laid out in its window
    /// slot in data order with a gap of one sector after each run but the
    /// last.  `count` `struct bius_segment` records describing them follow
    /// the header in the stream; the gaps are out of reach like the rest
    /// of the window.  As the kernel does, the loopback copies instead
    /// (no `BIUS_REQ_MAPPED`) a request whose records do not fit in the
    /// rest of the reader's buffer (see [`Loopback::read_limit`]) or whose
    /// pieces and gaps do not fit in its slot (the largest I/O, rounded up
    /// to whole pages, plus a page).  Zone appends, smaller requests and
    /// requests not of whole sectors are mapped in one piece.
    ///
    /// `count` below 2 (the default, 0) maps every request in one piece;
    /// above `BIUS_MAP_MAX_SEGMENTS` (16) it counts as 16.  Only the map
    /// and selective transfer modes map requests.
    /// [`LoopbackCounters::segmented`] counts the segmented requests.
    ///
    /// ```
    /// use bius::loopback::Loopback;
    /// use bius::{BlockDevice, DeviceBuilder, IoError, TransferMode};
    ///
    /// /// Sees each piece as a request of its own.
    /// struct Pieces(std::sync::Mutex<Vec<(u64, usize)>>);
    ///
    /// impl BlockDevice for Pieces {
    ///     fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
    ///         self.0.lock().unwrap().push((offset, buf.len()));
    ///         buf.fill((offset / 512) as u8);
    ///         Ok(())
    ///     }
    ///     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
    ///         Err(IoError::ReadOnly)
    ///     }
    /// }
    ///
    /// let device = std::sync::Arc::new(Pieces(Default::default()));
    /// let builder = DeviceBuilder::new(1 << 20).transfer_mode(TransferMode::Map);
    /// let mut kernel = Loopback::new(&builder).unwrap().segments(3);
    /// kernel.start(device.clone()).unwrap();
    /// let data = kernel.read(0, 0, 2048).unwrap();
    /// assert_eq!(data[..512], [0; 512]);
    /// assert_eq!(data[512..1024], [1; 512]);
    /// assert_eq!(data[1024..], [2; 1024]);
    /// assert_eq!(*device.0.lock().unwrap(), [(0, 512), (512, 512), (1024, 1024)]);
    /// assert_eq!(kernel.counters().segmented, 1);
    /// kernel.stop().unwrap();
    /// ```
    pub fn segments(self, count: usize) -> Self {
        let count = count.min(MAX_SEGMENTS);
        self.shared.segments.store(count, Ordering::Relaxed);
        self
    }

    /// Starts one worker thread per queue serving `device`, exactly as
    /// [`DeviceBuilder::create`] serves a kernel device: the parameters are
    /// checked the same way, and a zoned device ([`BlockDevice::zones`])
    /// is served zoned.  As the kernel does before a zoned disk goes live,
    /// every zone is then read with `REPORT_ZONES` (from queue 0, in rooms
    /// of the largest I/O), and from then on the completions of zone
    /// reports and appends are checked as the driver checks them: each
    /// descriptor must be exactly its zone's (start, length, capacity,
    /// type, a condition and write pointer that fit), an append offset
    /// block-aligned with the data inside the zone's capacity; others are
    /// refused with `EINVAL`.  If the initial report fails or is refused
    /// (it then times out after the request timeout), the loopback is
    /// killed and this fails with [`Error::NotLive`], whose `cause` says
    /// what was wrong.
    ///
    /// ```
    /// use bius::loopback::Loopback;
    /// use bius::zone::{ZoneCondition, ZoneGeometry, Zoned};
    /// use bius::{BlockDevice, DeviceBuilder, IoError};
    ///
    /// /// No data: enough for reports and zone operations.
    /// struct Nothing;
    ///
    /// impl BlockDevice for Nothing {
    ///     fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
    ///         buf.fill(0);
    ///         Ok(())
    ///     }
    ///     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// // 1 MiB in 256 KiB zones; the size is the geometry's.
    /// let geometry = ZoneGeometry::new(1 << 20, 256 << 10).unwrap();
    /// let mut kernel = Loopback::new(&DeviceBuilder::default()).unwrap();
    /// kernel.start(Zoned::new(Nothing, geometry)).unwrap();
    /// assert_eq!(kernel.zone_append(0, 256 << 10, vec![0; 4096]), Ok(256 << 10));
    /// assert_eq!(kernel.zone_append(0, 256 << 10, vec![0; 512]), Ok(260 << 10));
    /// let zones = kernel.report_zones(0, 256 << 10, 8).unwrap();
    /// assert_eq!(zones.len(), 3);
    /// assert_eq!(zones[0].condition, ZoneCondition::ImplicitOpen);
    /// kernel.stop().unwrap();
    /// ```
    ///
    /// # Panics
    /// If the workers were already started.
    pub fn start<D: BlockDevice>(&mut self, device: D) -> Result<(), Error> {
        let layout = self.prepare(device.capabilities(), device.zones())?;
        let timing = self.builder.timing();
        if timing.is_immediate() {
            let served = Served { device, layout };
            self.spawn_with(spawn_worker, Arc::new(served), layout)?;
        } else {
            let server = DeferredServer::new(Immediate::new(device), layout, timing);
            self.spawn_with(spawn_deferred, Arc::new(server), layout)?;
        }
        self.revalidated(layout)
    }

    /// Starts the workers serving a [`DeferredDevice`], as
    /// [`DeviceBuilder::create_deferred`] does; a zoned one (with
    /// [`zones`](DeferredDevice::zones)) as [`Loopback::start`] does.
    pub fn start_deferred<D: DeferredDevice>(&mut self, device: D) -> Result<(), Error> {
        let layout = self.prepare(device.capabilities(), device.zones())?;
        let server = DeferredServer::new(device, layout, self.builder.timing());
        self.spawn_with(spawn_deferred, Arc::new(server), layout)?;
        self.revalidated(layout)
    }

    /// Checks the parameters of a device with `capabilities`, zoned with
    /// `zones` if given, as [`DeviceBuilder::create`] does, and takes in
    /// what the kernel learns of it: its size, whether it keeps data, and
    /// its zones, which the loopback checks completions against from now
    /// on.
    fn prepare(
        &mut self,
        capabilities: Capabilities,
        zones: Option<crate::zone::ZoneGeometry>,
    ) -> Result<Option<ZoneLayout>, Error> {
        let (params, layout) = self.builder.device_params(capabilities, zones)?;
        let shared = &self.shared;
        let rules = *shared.rules.get_or_init(|| Rules::new(&params));
        for slot in &shared.queues {
            refuse_unsent(&mut lock(slot).pending, &rules);
        }
        shared
            .no_data
            .store(capabilities.no_data, Ordering::Relaxed);
        shared.size.store(params.size, Ordering::Relaxed);
        self.config.size = params.size;
        if let Some(layout) = layout {
            assert!(
                shared.layout.set(layout).is_ok(),
                "loopback workers already started"
            );
        }
        Ok(layout)
    }

    /// Revalidates the zones of a zoned device as the kernel does before
    /// its disk goes live; kills the loopback if that fails.
    fn revalidated(&self, layout: Option<ZoneLayout>) -> Result<(), Error> {
        let Some(layout) = layout else {
            return Ok(());
        };
        if let Err(reason) = self.revalidate(layout.geometry()) {
            self.kill();
            return Err(Error::NotLive {
                id: 0,
                state: DeviceState::Dead,
                cause: Some(format!("the kernel refused its zones: {reason}")),
            });
        }
        Ok(())
    }

    /// Reads every zone as the kernel does before the disk goes live; each
    /// report completion is checked against the geometry, and one that is
    /// refused times out as in the kernel.
    fn revalidate(&self, geometry: &crate::zone::ZoneGeometry) -> Result<(), String> {
        let max_zones = self.config.max_io / ZONE_SIZE;
        let timeout = self.builder.get_timeout();
        let mut zones = 0;
        while zones < geometry.zone_count() {
            let offset = zones * geometry.zone_size();
            let report = Command::ReportZones { offset, max_zones };
            let ticket = self.submit(0, report).map_err(|err| err.to_string())?;
            let outcome = match ticket.wait_timeout(timeout) {
                Some(outcome) => outcome,
                None => {
                    self.time_out(&ticket);
                    let refused = self
                        .shared
                        .report_refused
                        .lock()
                        .ok()
                        .and_then(|mut why| why.take());
                    return Err(match refused {
                        Some(why) => format!("the report of zone {zones} on was refused: {why}"),
                        None => format!("the report of zone {zones} on timed out"),
                    });
                }
            };
            let reply = outcome.map_err(|err| format!("report of zone {zones} on: {err}"))?;
            // Never empty: the completion was checked.
            match reply {
                Reply::Zones(reported) => zones += reported.len() as u64,
                reply => return Err(format!("report of zone {zones} on: {reply:?}")),
            }
        }
        Ok(())
    }

    /// Reports up to `max_zones` zones from the one containing `offset` on
    /// (a `REPORT_ZONES` with a room of `max_zones` descriptors), as
    /// [`Loopback::run`] does.
    pub fn report_zones(
        &self,
        queue: u32,
        offset: u64,
        max_zones: usize,
    ) -> Result<Vec<Zone>, IoError> {
        match self.run(queue, Command::ReportZones { offset, max_zones })? {
            Reply::Zones(zones) => Ok(zones),
            _ => Err(IoError::Io),
        }
    }

    /// Appends `data` to the zone starting at `offset`, as
    /// [`Loopback::run`] does; returns the byte offset where it landed.
    pub fn zone_append(&self, queue: u32, offset: u64, data: Vec<u8>) -> Result<u64, IoError> {
        match self.run(queue, Submission::append(offset, data))? {
            Reply::Appended(at) => Ok(at),
            _ => Err(IoError::Io),
        }
    }

    /// Starts one worker thread per queue with `spawn`, serving `server`
    /// (zoned with `layout`, if given), with new statistics.
    fn spawn_with<S>(
        &mut self,
        spawn: fn(Connection, Arc<S>, WorkerConfig, Arc<Recorder>, ()) -> WorkerThread,
        server: Arc<S>,
        layout: Option<ZoneLayout>,
    ) -> Result<(), Error> {
        assert!(self.workers.is_empty(), "loopback workers already started");
        let queues = self.shared.queues.len() as u32;
        self.statistics = Statistics::new(queues, layout.as_ref(), self.builder.keeps_statistics());
        for queue in 0..self.shared.queues.len() as u32 {
            let connection = Connection::new(Arc::clone(&self.shared), queue);
            let config = WorkerConfig {
                queue,
                ..self.config
            };
            let stats = self.statistics.recorder();
            self.workers
                .push(spawn(connection, Arc::clone(&server), config, stats, ())?);
        }
        Ok(())
    }

    /// The live statistics of the requests the workers served (kept from
    /// their start: [`Loopback::start`] and [`Loopback::start_deferred`]
    /// begin anew), as [`Device::statistics`](crate::Device::statistics);
    /// its [`snapshot`](Statistics::snapshot) is the statistics now.
    pub fn statistics(&self) -> Statistics {
        self.statistics.clone()
    }

    /// Queues a request on hardware queue `queue`.  A request no kernel
    /// could send (to a queue that does not exist, at an offset that is no
    /// whole sector, with a payload that is not its length, or longer than
    /// a request record carries) is refused with a [`SubmitError`].
    ///
    /// ```
    /// use bius::loopback::{Loopback, SubmitError};
    /// use bius::{BlockDevice, Command, DeviceBuilder, IoError};
    ///
    /// struct Nothing;
    ///
    /// impl BlockDevice for Nothing {
    ///     fn read(&self, _offset: u64, _buf: &mut [u8]) -> Result<(), IoError> {
    ///         Err(IoError::Io)
    ///     }
    ///     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
    ///         Err(IoError::Io)
    ///     }
    /// }
    ///
    /// let kernel = Loopback::new(&DeviceBuilder::new(1 << 20).queues(2)).unwrap();
    /// let err = kernel.submit(2, Command::Flush).unwrap_err();
    /// assert_eq!(err, SubmitError::NoSuchQueue { queue: 2, queues: 2 });
    /// ```
    pub fn submit(
        &self,
        queue: u32,
        request: impl Into<Submission>,
    ) -> Result<Ticket, SubmitError> {
        let queues = self.shared.queues.len() as u32;
        let slot = self
            .shared
            .queues
            .get(queue as usize)
            .ok_or(SubmitError::NoSuchQueue { queue, queues })?;
        let (reply, outcome) = sync_channel(1);
        let seq = self.shared.next_seq.fetch_add(1, Ordering::Relaxed);
        let id = (seq << 8) | u64::from(queue);
        let request = request.into();
        let command = request.command();
        if let (Some(rules), Some(command)) = (self.shared.rules.get(), command) {
            rules.admit(&command)?;
        }
        let (hdr, op, payload) = request.encode(id)?;
        let mut state = lock(slot);
        if state.dead || self.shared.stopping.load(Ordering::SeqCst) {
            let _ = reply.send(Err(IoError::from(Errno::ENODEV)));
        } else {
            state.pending.push_back(Pending {
                hdr,
                op,
                command,
                payload,
                reply,
            });
            slot.ready.notify_one();
        }
        Ok(Ticket { id, queue, outcome })
    }

    /// Submits a request and waits for its completion ([`Ticket::wait`]);
    /// a request [`Loopback::submit`] refuses fails with the [`IoError`]
    /// of its [`SubmitError`].
    pub fn run(&self, queue: u32, request: impl Into<Submission>) -> Result<Reply, IoError> {
        self.submit(queue, request)?.wait()
    }

    /// Reads `len` bytes at `offset` on `queue` and waits for the data,
    /// as [`Loopback::run`] does.
    pub fn read(&self, queue: u32, offset: u64, len: u64) -> Result<Vec<u8>, IoError> {
        self.submit(queue, Command::Read { offset, len })?
            .wait_data()
    }

    /// Times the request out, as the kernel's request timer would: it fails
    /// with `ETIMEDOUT` and its id becomes unknown (a later completion of it
    /// is refused with `ENOENT`).  Returns false if it had completed.
    pub fn time_out(&self, ticket: &Ticket) -> bool {
        let mut state = lock(&self.shared.queues[ticket.queue as usize]);
        let reply = match state.take_outstanding(ticket.id) {
            Some(outstanding) => outstanding.reply,
            None => match state.pending.iter().position(|p| p.hdr.id == ticket.id) {
                Some(index) => state.pending.remove(index).expect("index in range").reply,
                None => return false,
            },
        };
        let _ = reply.send(Err(IoError::from(Errno::ETIMEDOUT)));
        true
    }

    /// The counters of what crossed the simulated kernel boundary so far.
    pub fn counters(&self) -> LoopbackCounters {
        let shared = &self.shared;
        LoopbackCounters {
            read_calls: shared.read_calls.load(Ordering::Relaxed),
            write_calls: shared.write_calls.load(Ordering::Relaxed),
            completions: shared.completions.load(Ordering::Relaxed),
            refused: shared.refused.load(Ordering::Relaxed),
            mapped: shared.mapped.load(Ordering::Relaxed),
            segmented: shared.segmented.load(Ordering::Relaxed),
        }
    }

    /// Stops by force, like closing the daemon's fds: every queued and
    /// in-flight request fails with `EIO`, reads return end of file and
    /// writes `ENODEV`.  The workers exit on their own.
    pub fn kill(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        for slot in &self.shared.queues {
            let mut state = lock(slot);
            state.dead = true;
            state.fail_all(IoError::Io);
            slot.ready.notify_all();
        }
    }

    /// Graceful stop: refuses new requests, lets the workers complete every
    /// request already submitted, then ends the queues (reads return end of
    /// file) and joins the workers.  Returns the first worker error (a
    /// worker ended by a panic: [`Error::System`] `EIO`).  Without started
    /// workers it is [`Loopback::kill`].
    ///
    /// The wait has an end: a queue whose worker has ended is not waited
    /// for (its requests fail with `EIO`), and requests still in flight a
    /// request timeout after the stop began fail with `ETIMEDOUT`, as the
    /// kernel's request timer would have failed them by then.
    pub fn stop(mut self) -> Result<(), Error> {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.wait_idle();
        self.kill();
        let mut first_error = None;
        for worker in self.workers.drain(..) {
            if let Err(err) = worker.join().unwrap_or(Err(Error::System(Errno::EIO))) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Waits until each queue has completed every request submitted to
    /// it, while its worker runs and until a request timeout from now:
    /// each was submitted before now, so the kernel would have timed out
    /// by then those still in flight, which fail with `ETIMEDOUT`.
    fn wait_idle(&self) {
        let deadline = Instant::now() + self.builder.get_timeout();
        let queues = self.shared.queues.iter().zip(&self.workers);
        for (queue, (slot, worker)) in queues.enumerate() {
            loop {
                let mut state = lock(slot);
                if state.is_idle() || worker.is_finished() {
                    break;
                }
                if Instant::now() >= deadline {
                    log::warn!(
                        "queue {queue}: requests still in flight at the request timeout; \
                         failing them with ETIMEDOUT"
                    );
                    state.fail_all(IoError::from(Errno::ETIMEDOUT));
                    break;
                }
                drop(state);
                thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.kill();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}
