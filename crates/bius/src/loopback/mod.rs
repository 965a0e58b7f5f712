//! An in-process stand-in for the kernel, for tests and benchmarks.
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
//! A builder with a [`TransferMode`] other than copy makes the loopback
//! map the data of reads, writes and zone appends into each queue's
//! in-process data window, as the kernel maps I/O buffers: the workers
//! then take it from there (and put a read's data there), the completions
//! of mapped reads carry no payload, and a request finding no free slot is
//! copied instead.  [`LoopbackStats::mapped`] counts the mapped requests.
//! With [`Loopback::segments`], mapped reads and writes come in several
//! pieces with gaps between them, each described by a segment record after
//! the header, as the kernel sends the data of a buffer whose pieces are
//! not aligned to each other.
//!
//! Zoned devices are served with [`Loopback::start_zoned`], which, like the
//! kernel adding the disk, first reads every zone with `REPORT_ZONES` and
//! checks the report against the geometry.  Completions of zone requests
//! are checked as the kernel checks them: a report's payload must be whole
//! `struct blk_zone` descriptors within the room the request gave, and only
//! a successful zone append may carry a sector.
//!
//! ```
//! use bius::loopback::{Loopback, Op};
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
//! assert_eq!(kernel.run(0, Op::Read { offset: 1024, len: 512 }).unwrap(), [2; 512]);
//! assert_eq!(
//!     kernel.run(0, Op::Write { offset: 0, data: vec![1; 512], fua: false }),
//!     Err(IoError::ReadOnly)
//! );
//! kernel.stop().unwrap();
//! ```

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use bius_sys::{bius_request, bius_segment};
use nix::errno::Errno;

use crate::abi::{
    self, COMPLETION_SIZE, MAX_SEGMENTS, REQUEST_SIZE, SECTOR_SIZE, SEGMENT_SIZE, ZONE_SIZE,
};
use crate::transport::Transport;
use crate::worker::serve::{Conventional, Serve, Zoned};
use crate::worker::{spawn_worker, WorkerConfig};
use crate::zone::{Zone, ZoneGeometry, ZoneLayout, ZonedDevice};
use crate::{BlockDevice, DeviceBuilder, DeviceState, Error, IoError, TransferMode};

/// Largest errno a completion's result may carry (as the kernel's
/// `IS_ERR_VALUE` sees it).
const MAX_ERRNO: i32 = 4095;

/// One request to submit, with offsets in bytes (multiples of 512).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Read `len` bytes.
    Read {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u32,
    },
    /// Write `data`.
    Write {
        /// Byte offset.
        offset: u64,
        /// The payload.
        data: Vec<u8>,
        /// Forced unit access.
        fua: bool,
    },
    /// Flush the volatile cache.
    Flush,
    /// Discard a range.
    Discard {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u32,
    },
    /// Zero a range.
    WriteZeroes {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u32,
        /// Whether the device may deallocate the range.
        unmap: bool,
    },
    /// Report the zones from the one containing `offset` on, in a room of
    /// `len` bytes (a multiple of 64, the size of a `struct blk_zone`); the
    /// outcome is the descriptors.
    ReportZones {
        /// Byte offset inside the first zone.
        offset: u64,
        /// Room in bytes.
        len: u32,
    },
    /// Open a zone explicitly.
    ZoneOpen {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Close a zone.
    ZoneClose {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Finish a zone.
    ZoneFinish {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Reset a zone.
    ZoneReset {
        /// Byte offset of the zone start.
        offset: u64,
    },
    /// Reset every zone.
    ZoneResetAll,
    /// Append `data` to a zone; [`Completion::sector`] tells where it landed.
    ZoneAppend {
        /// Byte offset of the zone start.
        offset: u64,
        /// The payload.
        data: Vec<u8>,
        /// Forced unit access.
        fua: bool,
    },
    /// A payload-less request with an arbitrary op code, as a newer kernel
    /// might send.
    Raw {
        /// The `bius_request.op` value.
        op: u8,
        /// Start sector.
        sector: u64,
        /// Length in bytes.
        len: u32,
    },
}

impl Op {
    /// A write of `data` at `offset`, without forced unit access.
    ///
    /// ```
    /// use bius::loopback::Op;
    ///
    /// let op = Op::write(4096, vec![1; 512]);
    /// assert_eq!(op, Op::Write { offset: 4096, data: vec![1; 512], fua: false });
    /// ```
    pub fn write(offset: u64, data: Vec<u8>) -> Self {
        Op::Write {
            offset,
            data,
            fua: false,
        }
    }
}

/// What a request completes with: the data of a read or a zone report
/// (empty otherwise), or the error.
pub type Outcome = Result<Vec<u8>, IoError>;

/// A successful completion as the kernel received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The payload: the data of a read, the `struct blk_zone` descriptors
    /// of a zone report; empty otherwise.
    pub data: Vec<u8>,
    /// Where a zone append's data landed (its first sector); 0 otherwise.
    pub sector: u64,
}

/// What the loopback hands a submitter.
type Reply = Result<Completion, IoError>;

/// A submitted request; [`Ticket::wait`] blocks until it completes.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    queue: u32,
    outcome: Receiver<Reply>,
}

impl Ticket {
    /// The request id, as the worker sees it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Waits for the completion.  A request that can no longer complete
    /// (the loopback is gone) fails with [`IoError::Io`].
    pub fn wait(self) -> Outcome {
        self.wait_completion().map(|completion| completion.data)
    }

    /// Waits for the completion, as [`Ticket::wait`] does, and returns all
    /// of it (the sector of a zone append too).
    pub fn wait_completion(self) -> Result<Completion, IoError> {
        self.outcome.recv().unwrap_or(Err(IoError::Io))
    }

    /// Waits at most `timeout`; `None` if the request is still in flight.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Outcome> {
        let reply = self.outcome.recv_timeout(timeout).ok()?;
        Some(reply.map(|completion| completion.data))
    }
}

/// Counters of what crossed the simulated kernel boundary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopbackStats {
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

/// The in-process kernel: see the [module documentation](self).
pub struct Loopback {
    shared: Arc<Shared>,
    builder: DeviceBuilder,
    config: WorkerConfig,
    workers: Vec<JoinHandle<Result<(), Error>>>,
}

struct Shared {
    queues: Vec<QueueSlot>,
    /// The zones of a zoned device, once started, to check completions.
    layout: OnceLock<ZoneLayout>,
    next_seq: AtomicU64,
    read_limit: AtomicU64,
    /// Segments of a segmented mapped request; below 2: none.
    segments: AtomicUsize,
    stopping: AtomicBool,
    read_calls: AtomicU64,
    write_calls: AtomicU64,
    completions: AtomicU64,
    refused: AtomicU64,
    mapped: AtomicU64,
    segmented: AtomicU64,
    /// The device size in bytes.
    size: u64,
    /// Map mode: requests of at least this many bytes are mapped into the
    /// window; `None` in copy mode.
    map_threshold: Option<u32>,
    /// Bytes of a window slot, one per tag (`queue_depth` of them).
    slot_bytes: usize,
    queue_depth: u32,
}

#[derive(Default)]
struct QueueSlot {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    pending: VecDeque<Pending>,
    /// A write payload only partly returned by read().
    partial: Option<(Vec<u8>, usize)>,
    outstanding: HashMap<u64, Outstanding>,
    dead: bool,
    /// Window slots no mapped request holds (map mode); like tags.
    free_slots: Vec<u32>,
}

struct Pending {
    hdr: bius_request,
    payload: Vec<u8>,
    reply: SyncSender<Reply>,
}

struct Outstanding {
    op: u8,
    sector: u64,
    len: u32,
    reply: SyncSender<Reply>,
    /// The window slot of a mapped request.
    slot: Option<u32>,
}

fn lock(slot: &QueueSlot) -> MutexGuard<'_, QueueState> {
    slot.state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl QueueState {
    fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.partial.is_none() && self.outstanding.is_empty()
    }

    /// Removes an outstanding request; its window slot becomes free.
    fn take_outstanding(&mut self, id: u64) -> Option<Outstanding> {
        let outstanding = self.outstanding.remove(&id)?;
        self.free_slots.extend(outstanding.slot);
        Some(outstanding)
    }

    /// Fails every queued and in-flight request with `error`.
    fn fail_all(&mut self, error: IoError) {
        let replies = self
            .pending
            .drain(..)
            .map(|p| p.reply)
            .chain(self.outstanding.drain().map(|(_, o)| o.reply));
        for reply in replies {
            let _ = reply.send(Err(error));
        }
        self.partial = None;
    }
}

impl Loopback {
    /// A loopback kernel with the geometry of `params` (size, queues,
    /// largest I/O; validated like [`DeviceBuilder::create`] does).  No
    /// worker runs until [`Loopback::start`]: requests submitted before
    /// queue up, which makes batches deterministic.
    pub fn new(params: &DeviceBuilder) -> Result<Self, Error> {
        let raw = params.params(Default::default())?;
        let queues = params.queue_count();
        let max_io = params.effective_max_io_size();
        let map_threshold = match params.mode() {
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
                next_seq: AtomicU64::new(0x5eed),
                read_limit: AtomicU64::new(u64::MAX),
                segments: AtomicUsize::new(0),
                stopping: AtomicBool::new(false),
                read_calls: AtomicU64::new(0),
                write_calls: AtomicU64::new(0),
                completions: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                mapped: AtomicU64::new(0),
                segmented: AtomicU64::new(0),
                size: params.size(),
            }),
            builder: params.clone(),
            config: WorkerConfig {
                queue: 0,
                size: params.size(),
                max_io: params.effective_max_io_size() as usize,
            },
            workers: Vec::new(),
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
    /// [`LoopbackStats::segmented`] counts the segmented requests.
    ///
    /// ```
    /// use bius::loopback::{Loopback, Op};
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
    /// let data = kernel.run(0, Op::Read { offset: 0, len: 2048 }).unwrap();
    /// assert_eq!(data[..512], [0; 512]);
    /// assert_eq!(data[512..1024], [1; 512]);
    /// assert_eq!(data[1024..], [2; 1024]);
    /// assert_eq!(*device.0.lock().unwrap(), [(0, 512), (512, 512), (1024, 1024)]);
    /// assert_eq!(kernel.stats().segmented, 1);
    /// kernel.stop().unwrap();
    /// ```
    pub fn segments(self, count: usize) -> Self {
        let count = count.min(MAX_SEGMENTS);
        self.shared.segments.store(count, Ordering::Relaxed);
        self
    }

    /// Starts one worker thread per queue serving `device`, exactly as a
    /// kernel device is served.
    ///
    /// # Panics
    /// If the workers were already started.
    pub fn start<D: BlockDevice>(&mut self, device: D) -> Result<(), Error> {
        self.spawn(Conventional(device))
    }

    /// Starts the workers serving a zoned `device`, as
    /// [`DeviceBuilder::create_zoned`] does: the parameters are checked the
    /// same way, and, as the kernel does before the disk goes live, every
    /// zone is read with `REPORT_ZONES` (from queue 0, in rooms of the
    /// largest I/O).  From then on the completions of zone reports and
    /// appends are checked as the driver checks them: each descriptor must
    /// be exactly its zone's (start, length, capacity, type, a condition
    /// and write pointer that fit), an append sector block-aligned with the
    /// data inside the zone's capacity; others are refused with `EINVAL`.
    /// If the initial report fails or is refused (it then times out after
    /// the request timeout), the loopback is killed and this fails with
    /// [`Error::NotLive`] (the reason is logged).
    ///
    /// ```
    /// use bius::loopback::Loopback;
    /// use bius::zone::{ZoneCondition, ZoneGeometry, ZoneSet, ZonedDevice};
    /// use bius::{BlockDevice, DeviceBuilder, IoError, Zone};
    ///
    /// /// Zones without data: enough for reports and zone operations.
    /// struct Zones(ZoneSet);
    ///
    /// impl BlockDevice for Zones {
    ///     fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
    ///         buf.fill(0);
    ///         Ok(())
    ///     }
    ///     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
    ///         Err(IoError::Unsupported)
    ///     }
    /// }
    ///
    /// impl ZonedDevice for Zones {
    ///     fn geometry(&self) -> ZoneGeometry {
    ///         *self.0.geometry()
    ///     }
    ///     fn report_zones(&self, offset: u64, max: usize) -> Result<Vec<Zone>, IoError> {
    ///         Ok(self.0.report(offset / 512, max))
    ///     }
    ///     fn zone_open(&self, offset: u64) -> Result<(), IoError> {
    ///         Ok(self.0.open(offset / 512)?)
    ///     }
    ///     fn zone_close(&self, offset: u64) -> Result<(), IoError> {
    ///         Ok(self.0.close(offset / 512)?)
    ///     }
    ///     fn zone_finish(&self, offset: u64) -> Result<(), IoError> {
    ///         Ok(self.0.finish(offset / 512)?)
    ///     }
    ///     fn zone_reset(&self, offset: u64) -> Result<(), IoError> {
    ///         Ok(self.0.reset(offset / 512, |_, _| Ok(()))?)
    ///     }
    ///     fn zone_reset_all(&self) -> Result<(), IoError> {
    ///         Ok(self.0.reset_all(|_, _| Ok(()))?)
    ///     }
    ///     fn zone_append(&self, offset: u64, data: &[u8]) -> Result<u64, IoError> {
    ///         Ok(self.0.append(offset / 512, data.len() as u64 / 512, |_, _| Ok(()))?)
    ///     }
    /// }
    ///
    /// // 1 MiB in 256 KiB zones.
    /// let zones = Zones(ZoneSet::new(ZoneGeometry::new(2048, 512)).unwrap());
    /// let mut kernel = Loopback::new(&DeviceBuilder::new(1 << 20)).unwrap();
    /// kernel.start_zoned(zones).unwrap();
    /// assert_eq!(kernel.zone_append(0, 256 << 10, vec![0; 4096]), Ok(512));
    /// assert_eq!(kernel.zone_append(0, 256 << 10, vec![0; 512]), Ok(520));
    /// let zones = kernel.report_zones(0, 256 << 10, 8).unwrap();
    /// assert_eq!(zones.len(), 3);
    /// assert_eq!(zones[0].condition, ZoneCondition::ImplicitOpen);
    /// kernel.stop().unwrap();
    /// ```
    pub fn start_zoned<D: ZonedDevice>(&mut self, device: D) -> Result<(), Error> {
        let (_, layout) = self.builder.zoned_params(&device)?;
        let geometry = *layout.geometry();
        assert!(
            self.shared.layout.set(layout).is_ok(),
            "loopback workers already started"
        );
        self.spawn(Zoned { device, layout })?;
        if let Err(reason) = self.revalidate(&geometry) {
            log::error!("zone revalidation failed: {reason}");
            self.kill();
            return Err(Error::NotLive {
                id: 0,
                state: DeviceState::Dead,
            });
        }
        Ok(())
    }

    /// Reads every zone as the kernel does before the disk goes live; each
    /// report completion is checked against the geometry, and one that is
    /// refused times out as in the kernel.
    fn revalidate(&self, geometry: &ZoneGeometry) -> Result<(), String> {
        let room = self.config.max_io / ZONE_SIZE * ZONE_SIZE;
        let timeout = self.builder.effective_timeout();
        let mut zones = 0;
        while zones < geometry.zone_count() {
            let offset = zones * geometry.zone_sectors * SECTOR_SIZE;
            let len = u32::try_from(room).expect("room below 4 GiB");
            let ticket = self.submit(0, Op::ReportZones { offset, len });
            let outcome = match ticket.wait_timeout(timeout) {
                Some(outcome) => outcome,
                None => {
                    self.time_out(&ticket);
                    return Err(format!("the report of zone {zones} on timed out"));
                }
            };
            let payload = outcome.map_err(|err| format!("report of zone {zones} on: {err}"))?;
            // Never empty: the completion was checked.
            zones += (payload.len() / ZONE_SIZE) as u64;
        }
        Ok(())
    }

    /// Reports up to `max_zones` zones from the one containing `offset` on
    /// (a `REPORT_ZONES` with a room of `max_zones` descriptors), decoded.
    ///
    /// # Panics
    /// As [`Loopback::submit`] does, or if the room exceeds 4 GiB.
    pub fn report_zones(
        &self,
        queue: u32,
        offset: u64,
        max_zones: usize,
    ) -> Result<Vec<Zone>, IoError> {
        let len = u32::try_from(max_zones * ZONE_SIZE).expect("room below 4 GiB");
        let data = self.run(queue, Op::ReportZones { offset, len })?;
        data.chunks_exact(ZONE_SIZE)
            .map(|bytes| abi::zone_of(&abi::decode_zone(bytes)).ok_or(IoError::Io))
            .collect()
    }

    /// Appends `data` to the zone starting at `offset`; returns the sector
    /// where it landed.
    pub fn zone_append(&self, queue: u32, offset: u64, data: Vec<u8>) -> Result<u64, IoError> {
        let append = Op::ZoneAppend {
            offset,
            data,
            fua: false,
        };
        Ok(self.submit(queue, append).wait_completion()?.sector)
    }

    /// Starts one worker thread per queue serving `device`.
    fn spawn<S: Serve>(&mut self, device: S) -> Result<(), Error> {
        assert!(self.workers.is_empty(), "loopback workers already started");
        let device = Arc::new(device);
        for queue in 0..self.shared.queues.len() as u32 {
            let connection = Connection::new(Arc::clone(&self.shared), queue);
            let config = WorkerConfig {
                queue,
                ..self.config
            };
            self.workers
                .push(spawn_worker(connection, Arc::clone(&device), config, ())?);
        }
        Ok(())
    }

    /// Queues a request on hardware queue `queue`.
    ///
    /// # Panics
    /// If `queue` does not exist or an offset is not a multiple of 512.
    pub fn submit(&self, queue: u32, op: Op) -> Ticket {
        let slot = &self.shared.queues[queue as usize];
        let (reply, outcome) = sync_channel(1);
        let seq = self.shared.next_seq.fetch_add(1, Ordering::Relaxed);
        let id = (seq << 8) | u64::from(queue);
        let (hdr, payload) = encode_op(id, op);
        let mut state = lock(slot);
        if state.dead || self.shared.stopping.load(Ordering::SeqCst) {
            let _ = reply.send(Err(IoError::Errno(Errno::ENODEV)));
        } else {
            state.pending.push_back(Pending {
                hdr,
                payload,
                reply,
            });
            slot.ready.notify_one();
        }
        Ticket { id, queue, outcome }
    }

    /// Submits a request and waits for its completion.
    pub fn run(&self, queue: u32, op: Op) -> Outcome {
        self.submit(queue, op).wait()
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
        let _ = reply.send(Err(IoError::Errno(Errno::ETIMEDOUT)));
        true
    }

    /// The counters so far.
    pub fn stats(&self) -> LoopbackStats {
        let shared = &self.shared;
        LoopbackStats {
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
    /// file) and joins the workers.  Returns the first worker error.
    /// Without started workers it is [`Loopback::kill`].
    pub fn stop(mut self) -> Result<(), Error> {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if !self.workers.is_empty() {
            for slot in &self.shared.queues {
                while !lock(slot).is_idle() {
                    thread::sleep(Duration::from_millis(1));
                }
            }
        }
        self.kill();
        let mut first_error = None;
        for worker in self.workers.drain(..) {
            if let Err(err) = worker.join().unwrap_or(Err(Error::System(Errno::EIO))) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
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

/// The header and payload of a submitted request.
fn encode_op(id: u64, op: Op) -> (bius_request, Vec<u8>) {
    let sector = |offset: u64| {
        assert!(
            offset.is_multiple_of(SECTOR_SIZE),
            "offset {offset} is not a multiple of 512"
        );
        offset / SECTOR_SIZE
    };
    let hdr = |op: u32, sector: u64, len: u32, flags: u32| bius_request {
        id,
        sector,
        len,
        op: op as u8,
        flags: flags as u16,
        ..Default::default()
    };
    match op {
        Op::Read { offset, len } => (hdr(bius_sys::BIUS_OP_READ, sector(offset), len, 0), vec![]),
        Op::Write { offset, data, fua } => {
            let flags = if fua { bius_sys::BIUS_REQ_FUA } else { 0 };
            let len = u32::try_from(data.len()).expect("payload below 4 GiB");
            (
                hdr(bius_sys::BIUS_OP_WRITE, sector(offset), len, flags),
                data,
            )
        }
        Op::Flush => (hdr(bius_sys::BIUS_OP_FLUSH, 0, 0, 0), vec![]),
        Op::Discard { offset, len } => (
            hdr(bius_sys::BIUS_OP_DISCARD, sector(offset), len, 0),
            vec![],
        ),
        Op::WriteZeroes { offset, len, unmap } => {
            let flags = if unmap { 0 } else { bius_sys::BIUS_REQ_NOUNMAP };
            (
                hdr(bius_sys::BIUS_OP_WRITE_ZEROES, sector(offset), len, flags),
                vec![],
            )
        }
        Op::ReportZones { offset, len } => (
            hdr(bius_sys::BIUS_OP_REPORT_ZONES, sector(offset), len, 0),
            vec![],
        ),
        Op::ZoneOpen { offset } => (
            hdr(bius_sys::BIUS_OP_ZONE_OPEN, sector(offset), 0, 0),
            vec![],
        ),
        Op::ZoneClose { offset } => (
            hdr(bius_sys::BIUS_OP_ZONE_CLOSE, sector(offset), 0, 0),
            vec![],
        ),
        Op::ZoneFinish { offset } => (
            hdr(bius_sys::BIUS_OP_ZONE_FINISH, sector(offset), 0, 0),
            vec![],
        ),
        Op::ZoneReset { offset } => (
            hdr(bius_sys::BIUS_OP_ZONE_RESET, sector(offset), 0, 0),
            vec![],
        ),
        Op::ZoneResetAll => (hdr(bius_sys::BIUS_OP_ZONE_RESET_ALL, 0, 0, 0), vec![]),
        Op::ZoneAppend { offset, data, fua } => {
            let flags = if fua { bius_sys::BIUS_REQ_FUA } else { 0 };
            let len = u32::try_from(data.len()).expect("payload below 4 GiB");
            (
                hdr(bius_sys::BIUS_OP_ZONE_APPEND, sector(offset), len, flags),
                data,
            )
        }
        Op::Raw { op, sector, len } => (hdr(op.into(), sector, len, 0), vec![]),
    }
}

/// Whether the payload of a report from `sector` is acceptable to the
/// driver: every descriptor known, reserved bytes 0, and the report as
/// [`ZoneLayout::report_problem`] wants it.
fn report_ok(layout: &ZoneLayout, sector: u64, payload: &[u8]) -> bool {
    let first = sector / layout.geometry().zone_sectors;
    let mut zones = Vec::with_capacity(payload.len() / ZONE_SIZE);
    let mut problem = None;
    for (bytes, index) in payload.chunks_exact(ZONE_SIZE).zip(first..) {
        let raw = abi::decode_zone(bytes);
        match abi::zone_of(&raw) {
            None => problem = Some((index, "unknown type or condition")),
            Some(_) if raw.non_seq != 0 || raw.reset != 0 => {
                problem = Some((index, "reserved bytes are not zero"));
            }
            Some(zone) => zones.push(zone),
        }
        if problem.is_some() {
            break;
        }
    }
    match problem.or_else(|| layout.report_problem(sector, &zones)) {
        None => true,
        Some((index, why)) => {
            log::warn!("REPORT_ZONES completion refused: zone {index}: {why}");
            false
        }
    }
}

/// Page size the loopback pretends I/O buffers are made of.
const PAGE: usize = 4096;

/// Bytes of a window slot for a largest I/O of `max_io` bytes, as the
/// kernel's `BIUS_MAP_SLOT_BYTES`.
fn slot_bytes(max_io: usize) -> usize {
    (max_io.div_ceil(PAGE) + 1) * PAGE
}

/// Bytes between two segments of a segmented request in its slot.
const SEGMENT_GAP: usize = 512;

/// The request a window slot is mapped for: its id and where its data is
/// in the slot.
#[derive(Debug, Clone, Copy)]
struct Mapping {
    id: u64,
    /// Where the data starts in the slot.
    start: usize,
    len: usize,
    /// The pieces the data is in: 1, or the request's `nr_segments`.
    segments: usize,
}

impl Mapping {
    /// Where the pieces of the data are in the slot, in data order: the
    /// data split into `segments` runs (of whole sectors if more than one,
    /// the last ones the longer), each [`SEGMENT_GAP`] bytes after the end
    /// of the one before.
    fn pieces(self) -> impl Iterator<Item = std::ops::Range<usize>> {
        let n = self.segments;
        // Where piece `i` starts in the data.
        let split = move |i: usize| {
            if i == n {
                self.len
            } else {
                self.len * i / n / 512 * 512
            }
        };
        (0..n).map(move |i| {
            let at = self.start + i * SEGMENT_GAP;
            at + split(i)..at + split(i + 1)
        })
    }

    /// The end of the last piece in the slot.
    fn end(self) -> usize {
        self.start + self.len + (self.segments - 1) * SEGMENT_GAP
    }
}

/// The kernel side of one connected queue, as the workers see it.  In map
/// mode it has the queue's data window: the data of a mapped request is
/// in its slot, from an offset inside the first page that varies with the
/// sector (as a buffer's offset in its page would), in one piece or in
/// segments with gaps between them ([`Mapping::pieces`]), while the
/// request is outstanding; everything else of the window, gaps included,
/// is out of reach ([`Transport::window`] returns `None`: stricter than the
/// kernel, whose idle pages read as zeroes and raise SIGBUS when written)
/// and reads as zeroes once it is mapped again.
struct Connection {
    shared: Arc<Shared>,
    queue: u32,
    /// Slot buffers, allocated on first use.
    slots: Vec<Vec<u8>>,
    /// What each slot is mapped for.
    mappings: Vec<Option<Mapping>>,
}

impl Connection {
    fn new(shared: Arc<Shared>, queue: u32) -> Self {
        let depth = if shared.map_threshold.is_some() {
            shared.queue_depth as usize
        } else {
            0
        };
        Connection {
            shared,
            queue,
            slots: vec![Vec::new(); depth],
            mappings: vec![None; depth],
        }
    }

    fn slot(&self) -> &QueueSlot {
        &self.shared.queues[self.queue as usize]
    }

    /// Maps `hdr`'s data into a free slot if the transfer mode wants it
    /// (a write's `payload` is copied there), in segments if
    /// [`Loopback::segments`] wants it and their records fit in `room`
    /// bytes; sets `BIUS_REQ_MAPPED`, `window_offset` and `nr_segments`.
    /// Returns the slot.
    fn map(
        &mut self,
        state: &mut QueueState,
        hdr: &mut bius_request,
        payload: &[u8],
        room: usize,
    ) -> Option<u32> {
        let threshold = self.shared.map_threshold?;
        let op = u32::from(hdr.op);
        let data_op = matches!(
            op,
            bius_sys::BIUS_OP_READ | bius_sys::BIUS_OP_WRITE | bius_sys::BIUS_OP_ZONE_APPEND
        );
        if !data_op || hdr.len == 0 || hdr.len < threshold {
            return None;
        }
        let len = hdr.len as usize;
        let wanted = self.shared.segments.load(Ordering::Relaxed);
        let segmentable = matches!(op, bius_sys::BIUS_OP_READ | bius_sys::BIUS_OP_WRITE)
            && len.is_multiple_of(512)
            && len / 512 >= wanted;
        let segments = if wanted >= 2 && segmentable {
            wanted
        } else {
            1
        };
        let mapping = Mapping {
            id: hdr.id,
            start: (hdr.sector as usize % (PAGE / 512)) * 512,
            len,
            segments,
        };
        let records = if segments > 1 { segments } else { 0 };
        let slot_bytes = self.shared.slot_bytes;
        if records * SEGMENT_SIZE > room || mapping.end() > slot_bytes {
            return None;
        }
        let slot = state.free_slots.pop()?;
        // Zeroed here, the one place: a slot reads as zeroes each time it
        // is mapped, whatever its last request left in it.
        let buf = &mut self.slots[slot as usize];
        buf.clear();
        buf.resize(slot_bytes, 0);
        if op != bius_sys::BIUS_OP_READ {
            let mut rest = payload;
            for piece in mapping.pieces() {
                let (data, tail) = rest.split_at(piece.len());
                buf[piece].copy_from_slice(data);
                rest = tail;
            }
        }
        self.mappings[slot as usize] = Some(mapping);
        self.shared.mapped.fetch_add(1, Ordering::Relaxed);
        if records > 0 {
            self.shared.segmented.fetch_add(1, Ordering::Relaxed);
        }
        hdr.flags |= bius_sys::BIUS_REQ_MAPPED as u16;
        hdr.window_offset = (slot as usize * slot_bytes + mapping.start) as u64;
        hdr.nr_segments = records as u8;
        Some(slot)
    }

    /// Encodes the segment records of the segmented request mapped in
    /// `slot` into `out`; returns their length (0 for a request in one
    /// piece).
    fn encode_segments(&self, slot: u32, out: &mut [u8]) -> usize {
        let Some(mapping) = self.mappings[slot as usize].filter(|m| m.segments > 1) else {
            return 0;
        };
        let base = slot as usize * self.shared.slot_bytes;
        for (piece, bytes) in mapping.pieces().zip(out.chunks_exact_mut(SEGMENT_SIZE)) {
            let seg = bius_segment {
                window_offset: (base + piece.start) as u64,
                len: piece.len() as u32,
                reserved: 0,
            };
            abi::encode_segment(&seg, bytes);
        }
        mapping.segments * SEGMENT_SIZE
    }

    /// Unmaps slot `slot`; the data of a read in it, gathered from its
    /// pieces.  The slot keeps its bytes until [`Connection::map`] zeroes
    /// it; nothing reads an unmapped slot.
    fn unmap(&mut self, slot: u32) -> Vec<u8> {
        let slot = slot as usize;
        let mut data = Vec::new();
        if let Some(m) = self.mappings[slot].take() {
            data.reserve_exact(m.len);
            for piece in m.pieces() {
                data.extend_from_slice(&self.slots[slot][piece]);
            }
        }
        data
    }

    /// Unmaps the slots of requests no longer outstanding (timed out or
    /// failed by another thread), as the kernel does when it ends them.
    fn unmap_ended(&mut self, state: &QueueState) {
        for slot in 0..self.mappings.len() {
            if let Some(m) = self.mappings[slot] {
                if !state.outstanding.contains_key(&m.id) {
                    self.unmap(slot as u32);
                }
            }
        }
    }

    /// The window range `offset..offset + len` if it is inside one piece
    /// of the data of the request its slot is mapped for.
    fn mapped_range(&self, offset: u64, len: usize) -> Option<(usize, std::ops::Range<usize>)> {
        let slot_bytes = self.shared.slot_bytes;
        let offset = usize::try_from(offset).ok()?;
        let slot = offset / slot_bytes;
        let m = (*self.mappings.get(slot)?)?;
        let start = offset % slot_bytes;
        let end = start.checked_add(len)?;
        m.pieces()
            .any(|piece| start >= piece.start && end <= piece.end)
            .then_some((slot, start..end))
    }

    /// Checks and delivers the first completion record of `records`;
    /// returns its length.
    fn complete_one(&mut self, records: &[u8]) -> Result<usize, Errno> {
        if records.len() < COMPLETION_SIZE {
            return Err(Errno::EINVAL);
        }
        let comp = abi::decode_completion(records);
        let total = COMPLETION_SIZE + comp.len as usize;
        if !(-MAX_ERRNO..=0).contains(&comp.result) || records.len() < total {
            return Err(Errno::EINVAL);
        }
        let mut state = lock(self.slot());
        if state.dead {
            return Err(Errno::ENODEV);
        }
        let Some(outstanding) = state.outstanding.get(&comp.id) else {
            drop(state);
            return Err(self.unknown_id_errno(comp.id));
        };
        let ok = comp.result == 0;
        let payload = records.get(COMPLETION_SIZE..total).unwrap_or_default();
        let layout = self.shared.layout.get();
        let mapped = outstanding.slot.is_some();
        let (len_ok, sector_ok) = match u32::from(outstanding.op) {
            bius_sys::BIUS_OP_READ if ok && mapped => (comp.len == 0, comp.sector == 0),
            bius_sys::BIUS_OP_READ if ok => (comp.len == outstanding.len, comp.sector == 0),
            bius_sys::BIUS_OP_REPORT_ZONES if ok => {
                let size = self.shared.size;
                // Whole descriptors within the room, none only past the end,
                // each the zone it stands for.
                let n = comp.len as usize / ZONE_SIZE;
                let len_ok = (comp.len as usize).is_multiple_of(ZONE_SIZE)
                    && comp.len <= outstanding.len
                    && (n > 0 || outstanding.sector.saturating_mul(SECTOR_SIZE) >= size)
                    && layout.is_none_or(|l| report_ok(l, outstanding.sector, payload));
                (len_ok, comp.sector == 0)
            }
            bius_sys::BIUS_OP_ZONE_APPEND if ok => (
                comp.len == 0,
                layout.is_none_or(|l| {
                    l.append_ok(outstanding.sector, outstanding.len.into(), comp.sector)
                }),
            ),
            _ => (comp.len == 0, comp.sector == 0),
        };
        if !(len_ok && sector_ok) {
            return Err(Errno::EINVAL);
        }
        let outstanding = state.take_outstanding(comp.id).expect("outstanding");
        drop(state);
        let mut data = records[COMPLETION_SIZE..total].to_vec();
        if let Some(slot) = outstanding.slot {
            let mapped_data = self.unmap(slot);
            if ok && u32::from(outstanding.op) == bius_sys::BIUS_OP_READ {
                data = mapped_data;
            }
        }
        let reply = outstanding.reply;
        let outcome = match comp.result {
            0 => Ok(Completion {
                data,
                sector: comp.sector,
            }),
            result => Err(IoError::from_errno(Errno::from_raw(-result))),
        };
        // Counted before the submitter can see the outcome.
        self.shared.completions.fetch_add(1, Ordering::Relaxed);
        let _ = reply.send(outcome);
        Ok(total)
    }

    /// `EXDEV` if `id` is outstanding on another queue, else `ENOENT`.
    fn unknown_id_errno(&self, id: u64) -> Errno {
        let owner = (id & 0xff) as usize;
        let elsewhere = owner != self.queue as usize
            && self
                .shared
                .queues
                .get(owner)
                .is_some_and(|slot| lock(slot).outstanding.contains_key(&id));
        if elsewhere {
            Errno::EXDEV
        } else {
            Errno::ENOENT
        }
    }
}

impl Transport for Connection {
    fn fetch(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.len() < REQUEST_SIZE {
            return Err(Errno::EINVAL.into());
        }
        let read_limit = self.shared.read_limit.load(Ordering::Relaxed);
        let limit = buf
            .len()
            .min(usize::try_from(read_limit).unwrap_or(usize::MAX));
        let shared = Arc::clone(&self.shared);
        let slot = &shared.queues[self.queue as usize];
        let mut state = lock(slot);
        while !state.dead && state.partial.is_none() && state.pending.is_empty() {
            state = slot
                .ready
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.dead {
            return Ok(0);
        }
        self.shared.read_calls.fetch_add(1, Ordering::Relaxed);
        self.unmap_ended(&state);
        // A payload in progress: this read returns only payload bytes.
        if let Some((payload, sent)) = &mut state.partial {
            let n = (payload.len() - *sent).min(limit);
            buf[..n].copy_from_slice(&payload[*sent..*sent + n]);
            *sent += n;
            if *sent == payload.len() {
                state.partial = None;
            }
            return Ok(n);
        }
        let mut filled = 0;
        while filled + REQUEST_SIZE <= limit {
            let Some(request) = state.pending.pop_front() else {
                break;
            };
            let mut hdr = request.hdr;
            let room = limit - filled - REQUEST_SIZE;
            let slot = self.map(&mut state, &mut hdr, &request.payload, room);
            abi::encode_request(&hdr, &mut buf[filled..]);
            filled += REQUEST_SIZE;
            if let Some(slot) = slot {
                filled += self.encode_segments(slot, &mut buf[filled..limit]);
            }
            state.outstanding.insert(
                hdr.id,
                Outstanding {
                    op: hdr.op,
                    sector: hdr.sector,
                    len: hdr.len,
                    reply: request.reply,
                    slot,
                },
            );
            let payload = if slot.is_some() {
                Vec::new()
            } else {
                request.payload
            };
            let n = payload.len().min(limit - filled);
            buf[filled..filled + n].copy_from_slice(&payload[..n]);
            filled += n;
            if n < payload.len() {
                state.partial = Some((payload, n));
                break;
            }
        }
        Ok(filled)
    }

    fn window(&mut self, offset: u64, len: usize) -> Option<&[u8]> {
        let (slot, range) = self.mapped_range(offset, len)?;
        Some(&self.slots[slot][range])
    }

    fn window_mut(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let (slot, range) = self.mapped_range(offset, len)?;
        Some(&mut self.slots[slot][range])
    }

    fn complete(&mut self, records: &[u8]) -> io::Result<usize> {
        self.shared.write_calls.fetch_add(1, Ordering::Relaxed);
        let mut accepted = 0;
        while accepted < records.len() {
            match self.complete_one(&records[accepted..]) {
                Ok(n) => accepted += n,
                Err(errno) => {
                    self.shared.refused.fetch_add(1, Ordering::Relaxed);
                    return if accepted == 0 {
                        Err(errno.into())
                    } else {
                        Ok(accepted)
                    };
                }
            }
        }
        Ok(accepted)
    }
}

#[cfg(test)]
mod tests {
    //! The simulated kernel side itself, driven by hand.
    use super::*;
    use bius_sys::bius_completion;

    fn kernel(queues: u32) -> Loopback {
        Loopback::new(&DeviceBuilder::new(1 << 20).queues(queues)).unwrap()
    }

    fn connection(kernel: &Loopback, queue: u32) -> Connection {
        Connection::new(Arc::clone(&kernel.shared), queue)
    }

    fn completion(id: u64, result: i32, payload: &[u8]) -> Vec<u8> {
        completion_at(id, result, payload, 0)
    }

    fn completion_at(id: u64, result: i32, payload: &[u8], sector: u64) -> Vec<u8> {
        let mut record = vec![0; COMPLETION_SIZE];
        let comp = bius_completion {
            id,
            result,
            len: payload.len() as u32,
            sector,
        };
        abi::encode_completion(&comp, &mut record);
        record.extend_from_slice(payload);
        record
    }

    fn errno(result: io::Result<usize>) -> Errno {
        Errno::from_raw(result.unwrap_err().raw_os_error().unwrap())
    }

    #[test]
    fn read_needs_room_for_a_header() {
        let kernel = kernel(1);
        let mut conn = connection(&kernel, 0);
        assert_eq!(errno(conn.fetch(&mut [0; REQUEST_SIZE - 1])), Errno::EINVAL);
    }

    #[test]
    fn stream_holds_several_records_and_continues_payloads() {
        let kernel = kernel(1);
        let flush = kernel.submit(0, Op::Flush);
        let write = kernel.submit(
            0,
            Op::Write {
                offset: 512,
                data: vec![7; 100],
                fua: true,
            },
        );
        let mut conn = connection(&kernel, 0);
        let mut buf = [0u8; 2 * REQUEST_SIZE + 60];
        assert_eq!(conn.fetch(&mut buf).unwrap(), buf.len());
        let first = abi::decode_request(&buf);
        let second = abi::decode_request(&buf[REQUEST_SIZE..]);
        assert_eq!(
            (first.id, u32::from(first.op)),
            (flush.id(), bius_sys::BIUS_OP_FLUSH)
        );
        assert_eq!(
            (
                second.id,
                second.sector,
                second.len,
                u32::from(second.flags)
            ),
            (write.id(), 1, 100, bius_sys::BIUS_REQ_FUA)
        );
        assert_eq!(&buf[2 * REQUEST_SIZE..], &[7; 60]);
        // The continuation holds only the rest of the payload, although a
        // request is queued behind it.
        let _read = kernel.submit(
            0,
            Op::Read {
                offset: 0,
                len: 512,
            },
        );
        assert_eq!(conn.fetch(&mut buf).unwrap(), 40);
        assert_eq!(&buf[..40], &[7; 40]);
        assert_eq!(conn.fetch(&mut buf).unwrap(), REQUEST_SIZE);
    }

    #[test]
    fn completions_are_checked_like_the_kernel_does() {
        let kernel = kernel(2);
        let read = kernel.submit(
            0,
            Op::Read {
                offset: 0,
                len: 512,
            },
        );
        let flush = kernel.submit(0, Op::Flush);
        let other = kernel.submit(1, Op::Flush);
        let (read_id, other_id) = (read.id(), other.id());
        let mut conn = connection(&kernel, 0);
        let mut conn1 = connection(&kernel, 1);
        let mut buf = [0u8; 4096];
        assert_eq!(conn.fetch(&mut buf).unwrap(), 2 * REQUEST_SIZE);
        assert_eq!(conn1.fetch(&mut buf).unwrap(), REQUEST_SIZE);

        // Wrong payload lengths, bad results, a sector on a non-append, truncation.
        assert_eq!(
            errno(conn.complete(&completion(read.id(), 0, &[1; 511]))),
            Errno::EINVAL
        );
        assert_eq!(
            errno(conn.complete(&completion(flush.id(), 0, &[1; 8]))),
            Errno::EINVAL
        );
        assert_eq!(
            errno(conn.complete(&completion(read.id(), -5, &[1; 512]))),
            Errno::EINVAL
        );
        assert_eq!(
            errno(conn.complete(&completion(flush.id(), 1, &[]))),
            Errno::EINVAL
        );
        assert_eq!(
            errno(conn.complete(&completion(flush.id(), -4096, &[]))),
            Errno::EINVAL
        );
        let mut with_sector = completion(flush.id(), 0, &[]);
        with_sector[COMPLETION_SIZE - 1] = 1;
        assert_eq!(errno(conn.complete(&with_sector)), Errno::EINVAL);
        assert_eq!(
            errno(conn.complete(&completion(flush.id(), 0, &[])[..20])),
            Errno::EINVAL
        );
        // Ids: never issued, another queue's.
        assert_eq!(
            errno(conn.complete(&completion(12345, 0, &[]))),
            Errno::ENOENT
        );
        assert_eq!(
            errno(conn.complete(&completion(other.id(), 0, &[]))),
            Errno::EXDEV
        );

        // A good record, then a duplicate: the write stops before it.
        let mut records = completion(read_id, 0, &[9; 512]);
        records.extend(completion(read_id, 0, &[9; 512]));
        assert_eq!(conn.complete(&records).unwrap(), COMPLETION_SIZE + 512);
        assert_eq!(read.wait(), Ok(vec![9; 512]));
        assert_eq!(
            errno(conn.complete(&completion(read_id, 0, &[9; 512]))),
            Errno::ENOENT
        );
        assert_eq!(
            conn.complete(&completion(flush.id(), -28, &[])).unwrap(),
            COMPLETION_SIZE
        );
        assert_eq!(flush.wait(), Err(IoError::NoSpace));

        // Stopped: writes fail with ENODEV, reads return end of file.
        kernel.kill();
        assert_eq!(other.wait(), Err(IoError::Io));
        assert_eq!(
            errno(conn1.complete(&completion(other_id, 0, &[]))),
            Errno::ENODEV
        );
        assert_eq!(conn.fetch(&mut buf).unwrap(), 0);
    }

    #[test]
    fn mapped_requests_use_the_window_while_outstanding() {
        let params = DeviceBuilder::new(1 << 20)
            .queue_depth(2)
            .max_io_size(64 << 10)
            .transfer_mode(TransferMode::Selective { threshold: 1024 });
        let kernel = Loopback::new(&params).unwrap();
        let slot = slot_bytes(64 << 10);
        assert_eq!(slot, 17 * 4096);
        let read = kernel.submit(
            0,
            Op::Read {
                offset: 1536,
                len: 4096,
            },
        );
        let write = kernel.submit(0, Op::write(8192, vec![7; 2048]));
        let small = kernel.submit(0, Op::write(0, vec![1; 512]));
        let third = kernel.submit(0, Op::write(0, vec![2; 2048]));
        let mut conn = connection(&kernel, 0);
        let mut buf = [0u8; 8192];
        // Two mapped (no payloads), one too small, one without a free slot.
        assert_eq!(conn.fetch(&mut buf).unwrap(), 4 * REQUEST_SIZE + 512 + 2048);
        let hdr = |i: usize| abi::decode_request(&buf[i * REQUEST_SIZE..]);
        let mapped = bius_sys::BIUS_REQ_MAPPED;
        let (r, w) = (hdr(0), hdr(1));
        assert_eq!(u32::from(r.flags) & mapped, mapped);
        assert_eq!(u32::from(w.flags) & mapped, mapped);
        // Slots are taken lowest first; the offset in the first page follows
        // the sector.
        assert_eq!(r.window_offset, 1536);
        assert_eq!(w.window_offset, slot as u64);
        let copied = abi::decode_request(&buf[2 * REQUEST_SIZE..]);
        assert_eq!((copied.flags, copied.window_offset), (0, 0));
        assert_eq!(kernel.stats().mapped, 2);

        // Only the request's own bytes are reachable.
        assert_eq!(conn.window(w.window_offset, 2048), Some(&[7u8; 2048][..]));
        assert!(conn.window(w.window_offset, 2049).is_none());
        assert!(conn.window(w.window_offset + 4096, 1).is_none());
        assert!(conn.window(r.window_offset - 1, 1).is_none());
        conn.window_mut(r.window_offset, 4096).unwrap().fill(9);

        // A mapped read completes without payload.
        assert_eq!(
            errno(conn.complete(&completion(read.id(), 0, &[9; 4096]))),
            Errno::EINVAL
        );
        let mut records = completion(read.id(), 0, &[]);
        records.extend(completion(write.id(), 0, &[]));
        assert_eq!(conn.complete(&records).unwrap(), records.len());
        assert_eq!(read.wait(), Ok(vec![9; 4096]));
        assert_eq!(write.wait(), Ok(vec![]));
        // Unmapped after the completion.
        assert!(conn.window(r.window_offset, 1).is_none());
        assert!(conn.window(w.window_offset, 1).is_none());
        drop((small, third));
    }

    /// A loopback mapping every request, 4 slots of 64 KiB and a page, in
    /// `segments` segments.
    fn segmenting(segments: usize) -> Loopback {
        let params = DeviceBuilder::new(1 << 20)
            .queue_depth(4)
            .max_io_size(64 << 10)
            .transfer_mode(TransferMode::Map);
        Loopback::new(&params).unwrap().segments(segments)
    }

    /// The request header at the start of `bytes` and the segment records
    /// that follow it.
    fn request_at(bytes: &[u8]) -> (bius_request, Vec<bius_segment>) {
        let hdr = abi::decode_request(bytes);
        let segments = bytes[REQUEST_SIZE..]
            .chunks_exact(SEGMENT_SIZE)
            .take(hdr.nr_segments.into())
            .map(abi::decode_segment)
            .collect();
        (hdr, segments)
    }

    /// (window offset, length, reserved) of each segment.
    fn layout(segments: &[bius_segment]) -> Vec<(u64, u32, u32)> {
        segments
            .iter()
            .map(|seg| (seg.window_offset, seg.len, seg.reserved))
            .collect()
    }

    #[test]
    fn segmented_requests_reach_only_their_pieces_of_the_window() {
        let kernel = segmenting(3);
        let data: Vec<u8> = (0..5120u32).map(|i| (i % 251) as u8).collect();
        let write = kernel.submit(0, Op::write(1536, data.clone()));
        let read = kernel.submit(
            0,
            Op::Read {
                offset: 0,
                len: 2048,
            },
        );
        // Fewer sectors than segments: one piece.
        let small = kernel.submit(
            0,
            Op::Read {
                offset: 0,
                len: 1024,
            },
        );
        let mut conn = connection(&kernel, 0);
        let mut buf = [0u8; 4096];
        let record = REQUEST_SIZE + 3 * SEGMENT_SIZE;
        assert_eq!(
            conn.fetch(&mut buf).unwrap(),
            3 * REQUEST_SIZE + 6 * SEGMENT_SIZE
        );
        let (w, w_segs) = request_at(&buf);
        let (r, r_segs) = request_at(&buf[record..]);
        let (small_hdr, _) = request_at(&buf[2 * record..]);
        let mapped = bius_sys::BIUS_REQ_MAPPED as u16;
        assert_eq!(
            [w.flags, r.flags, small_hdr.flags].map(|flags| flags & mapped),
            [mapped; 3]
        );
        assert_eq!(
            [w.nr_segments, r.nr_segments, small_hdr.nr_segments],
            [3, 3, 0]
        );
        // Runs of whole sectors in data order, a sector apart, the first
        // at the header's window offset (where the sector puts it).
        let slot = slot_bytes(64 << 10) as u64;
        assert_eq!(
            layout(&w_segs),
            [(1536, 1536, 0), (3584, 1536, 0), (5632, 2048, 0)]
        );
        assert_eq!(
            layout(&r_segs),
            [
                (slot, 512, 0),
                (slot + 1024, 512, 0),
                (slot + 2048, 1024, 0)
            ]
        );
        assert_eq!((w.window_offset, r.window_offset), (1536, slot));
        let mut at = 0;
        for seg in &w_segs {
            let len = seg.len as usize;
            let piece = conn.window(seg.window_offset, len);
            assert_eq!(piece, Some(&data[at..at + len]));
            at += len;
        }
        // Inside one piece only: not in a gap, across one or past the end.
        let (first, second, last) = (w_segs[0], w_segs[1], w_segs[2]);
        assert!(conn.window(second.window_offset + 512, 1024).is_some());
        assert!(conn.window(first.window_offset + 1536, 1).is_none());
        assert!(conn.window(second.window_offset - 1, 1).is_none());
        assert!(conn.window(first.window_offset + 1024, 1024).is_none());
        assert!(conn.window(first.window_offset, 3584).is_none());
        assert!(conn.window(last.window_offset + 2048, 1).is_none());
        assert!(conn.window(first.window_offset - 1, 1).is_none());
        assert!(conn
            .window_mut(r_segs[0].window_offset + 512, 512)
            .is_none());
        for (i, seg) in r_segs.iter().enumerate() {
            let piece = conn.window_mut(seg.window_offset, seg.len as usize);
            piece.unwrap().fill(i as u8 + 1);
        }
        conn.window_mut(small_hdr.window_offset, 1024)
            .unwrap()
            .fill(9);

        // Completions without payload; a read's data is gathered.
        let mut records = completion(write.id(), 0, &[]);
        records.extend(completion(read.id(), 0, &[]));
        records.extend(completion(small.id(), 0, &[]));
        assert_eq!(conn.complete(&records).unwrap(), records.len());
        assert_eq!(write.wait(), Ok(vec![]));
        let expected = [vec![1; 512], vec![2; 512], vec![3; 1024]].concat();
        assert_eq!(read.wait(), Ok(expected));
        assert_eq!(small.wait(), Ok(vec![9; 1024]));
        assert!(conn.window(second.window_offset, 1).is_none());
        let stats = kernel.stats();
        assert_eq!((stats.mapped, stats.segmented), (3, 2));
    }

    #[test]
    fn segmented_requests_that_do_not_fit_are_copied() {
        let read = |offset| Op::Read { offset, len: 2048 };
        // The second request's records do not fit in the rest of the
        // reader's buffer: it comes as in copy mode.
        let kernel = segmenting(3);
        let first = kernel.submit(0, read(0));
        let second = kernel.submit(0, read(4096));
        let mut conn = connection(&kernel, 0);
        let mut buf = [0u8; 2 * (REQUEST_SIZE + 3 * SEGMENT_SIZE) - 1];
        let n = conn.fetch(&mut buf).unwrap();
        assert_eq!(n, 2 * REQUEST_SIZE + 3 * SEGMENT_SIZE);
        let (hdr, segments) = request_at(&buf);
        assert_eq!((hdr.id, segments.len()), (first.id(), 3));
        let copied = abi::decode_request(&buf[REQUEST_SIZE + 3 * SEGMENT_SIZE..]);
        assert_eq!(
            (
                copied.id,
                copied.flags,
                copied.nr_segments,
                copied.window_offset
            ),
            (second.id(), 0, 0, 0)
        );
        let mut records = completion(first.id(), 0, &[]);
        records.extend(completion(second.id(), 0, &[4; 2048]));
        assert_eq!(conn.complete(&records).unwrap(), records.len());
        assert_eq!(second.wait(), Ok(vec![4; 2048]));
        assert_eq!((kernel.stats().mapped, kernel.stats().segmented), (1, 1));

        // The same with a read limit, for a write: its payload follows.
        let kernel = segmenting(3).read_limit(REQUEST_SIZE + 3 * SEGMENT_SIZE - 1);
        let _write = kernel.submit(0, Op::write(0, vec![5; 2048]));
        let mut conn = connection(&kernel, 0);
        let mut buf = [0u8; 4096];
        let n = conn.fetch(&mut buf).unwrap();
        assert_eq!(n, REQUEST_SIZE + 3 * SEGMENT_SIZE - 1);
        let copied = abi::decode_request(&buf);
        assert_eq!((copied.flags, copied.nr_segments), (0, 0));
        assert_eq!(&buf[REQUEST_SIZE..n], &[5; 3 * SEGMENT_SIZE - 1]);

        // Pieces and gaps that do not fit in the slot (64 KiB from the
        // last sector of a page); from the first sector they do.
        let kernel = segmenting(4);
        let _late = kernel.submit(0, Op::write(3584, vec![6; 64 << 10]));
        let _early = kernel.submit(0, Op::write(0, vec![7; 64 << 10]));
        let mut conn = connection(&kernel, 0);
        let mut buf = vec![0u8; 2 * REQUEST_SIZE + 4 * SEGMENT_SIZE + (64 << 10)];
        assert_eq!(conn.fetch(&mut buf).unwrap(), buf.len());
        let late = abi::decode_request(&buf);
        let (early, segments) = request_at(&buf[REQUEST_SIZE + (64 << 10)..]);
        assert_eq!((late.flags, late.nr_segments), (0, 0));
        assert_eq!(early.nr_segments, 4);
        assert_eq!(segments.iter().map(|seg| seg.len).sum::<u32>(), 64 << 10);
        assert_eq!(kernel.stats().segmented, 1);
    }

    #[test]
    fn zone_completions_are_checked_like_the_kernel_does() {
        let kernel = kernel(1);
        let report = kernel.submit(
            0,
            Op::ReportZones {
                offset: 0,
                len: 128,
            },
        );
        let append = kernel.submit(
            0,
            Op::ZoneAppend {
                offset: 0,
                data: vec![5; 512],
                fua: true,
            },
        );
        let open = kernel.submit(0, Op::ZoneOpen { offset: 4096 });
        let mut conn = connection(&kernel, 0);
        let mut buf = [0u8; 4096];
        assert_eq!(conn.fetch(&mut buf).unwrap(), 3 * REQUEST_SIZE + 512);
        let append_hdr = abi::decode_request(&buf[REQUEST_SIZE..]);
        assert_eq!(
            (
                u32::from(append_hdr.op),
                append_hdr.len,
                u32::from(append_hdr.flags)
            ),
            (bius_sys::BIUS_OP_ZONE_APPEND, 512, bius_sys::BIUS_REQ_FUA)
        );
        assert_eq!(&buf[2 * REQUEST_SIZE..][..512], &[5; 512]);
        let open_hdr = abi::decode_request(&buf[2 * REQUEST_SIZE + 512..]);
        assert_eq!(
            (u32::from(open_hdr.op), open_hdr.sector, open_hdr.len),
            (bius_sys::BIUS_OP_ZONE_OPEN, 8, 0)
        );

        // A report: whole descriptors within the room, none on failure.
        for record in [
            completion(report.id(), 0, &[0; 100]),
            completion(report.id(), 0, &[0; 192]),
            completion(report.id(), -5, &[0; 64]),
        ] {
            assert_eq!(errno(conn.complete(&record)), Errno::EINVAL);
        }
        // A sector only on a successful append, no payload there.
        assert_eq!(
            errno(conn.complete(&completion_at(append.id(), -5, &[], 8))),
            Errno::EINVAL
        );
        assert_eq!(
            errno(conn.complete(&completion_at(append.id(), 0, &[0; 8], 8))),
            Errno::EINVAL
        );
        assert_eq!(
            errno(conn.complete(&completion_at(open.id(), 0, &[], 8))),
            Errno::EINVAL
        );
        assert_eq!(
            errno(conn.complete(&completion_at(report.id(), 0, &[0; 64], 8))),
            Errno::EINVAL
        );
        let mut records = completion(report.id(), 0, &[3; 128]);
        records.extend(completion_at(append.id(), 0, &[], 42));
        records.extend(completion(open.id(), -(Errno::ETOOMANYREFS as i32), &[]));
        assert_eq!(conn.complete(&records).unwrap(), records.len());
        assert_eq!(report.wait(), Ok(vec![3; 128]));
        assert_eq!(
            append.wait_completion(),
            Ok(Completion {
                data: vec![],
                sector: 42
            })
        );
        assert_eq!(open.wait(), Err(IoError::Errno(Errno::ETOOMANYREFS)));
    }

    #[test]
    fn zoned_completions_must_match_the_zones() {
        use crate::zone::{ZoneCondition, ZoneSet, ZoneType};

        // 4 zones of 64 sectors, 48 writable, 4 KiB blocks.
        let kernel = Loopback::new(&DeviceBuilder::new(4 * 32768)).unwrap();
        let geometry = ZoneGeometry {
            zone_capacity: 48,
            ..ZoneGeometry::new(256, 64)
        };
        let zones = ZoneSet::new(geometry).unwrap();
        let layout = ZoneLayout::new(*zones.geometry(), 4096);
        assert!(kernel.shared.layout.set(layout).is_ok());
        let report = kernel.submit(
            0,
            Op::ReportZones {
                offset: 32768,
                len: 128,
            },
        );
        let append = kernel.submit(
            0,
            Op::ZoneAppend {
                offset: 32768,
                data: vec![0; 4096],
                fua: false,
            },
        );
        let mut conn = connection(&kernel, 0);
        let mut buf = [0u8; 8192];
        assert_eq!(conn.fetch(&mut buf).unwrap(), 2 * REQUEST_SIZE + 4096);
        let descriptors = |zones: &[Zone]| {
            let mut bytes = vec![0; zones.len() * ZONE_SIZE];
            for (zone, out) in zones.iter().zip(bytes.chunks_exact_mut(ZONE_SIZE)) {
                abi::encode_zone(zone, out);
            }
            bytes
        };
        let right = zones.report(64, 2);
        let shifted = zones.report(128, 2);
        let wrong_type = [Zone {
            zone_type: ZoneType::Conventional,
            condition: ZoneCondition::NotWritePointer,
            ..right[0]
        }];
        let mut reserved = descriptors(&right);
        reserved[27] = 1;
        for payload in [
            descriptors(&shifted),
            descriptors(&wrong_type),
            reserved,
            vec![],
        ] {
            let record = completion(report.id(), 0, &payload);
            assert_eq!(errno(conn.complete(&record)), Errno::EINVAL);
        }
        // An append: block aligned, inside its zone's capacity.
        for sector in [65, 128, 112, 0] {
            let record = completion_at(append.id(), 0, &[], sector);
            assert_eq!(errno(conn.complete(&record)), Errno::EINVAL, "{sector}");
        }
        let mut records = completion(report.id(), 0, &descriptors(&right));
        records.extend(completion_at(append.id(), 0, &[], 72));
        assert_eq!(conn.complete(&records).unwrap(), records.len());
        assert_eq!(report.wait().unwrap().len(), 2 * ZONE_SIZE);
        assert_eq!(append.wait_completion().unwrap().sector, 72);
    }
}
