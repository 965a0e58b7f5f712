//! Deferred completion: a device that completes requests later, from any
//! thread, with many of them in flight per queue.
//!
//! A [`BlockDevice`](crate::BlockDevice) answers each request before its
//! worker reads the next one: a backend that waits (a modelled flash read,
//! a network round trip, a real disk) then serves one request per queue at
//! a time.  A [`DeferredDevice`] instead receives each request as an [`Io`]
//! that it owns, and completes it whenever it is done, from whatever thread
//! it likes: up to the queue depth of requests are in flight per queue.
//!
//! An [`Io`] holds the request's data: the payload of a write, the buffer
//! of a read (in the map transfer modes, the I/O buffer's own pages, which
//! stay mapped until the `Io` completes).  It completes exactly once:
//! [`Io::complete`] (or [`Io::complete_done`]) consumes it, and dropping it
//! uncompleted fails the request with `EIO`, so a lost request never hangs.
//! Completions are batched: the worker writes all that have arrived in one
//! `write()` and sleeps in `poll()` when there is nothing to do.
//!
//! ```
//! use std::sync::mpsc;
//! use std::thread;
//!
//! use bius::{Command, DeferredDevice, Io, IoError};
//!
//! /// Serves every request on one thread of its own: reads see zeroes,
//! /// writes go nowhere.
//! struct Offloaded(mpsc::SyncSender<Io>);
//!
//! impl Offloaded {
//!     fn new() -> Self {
//!         let (sender, receiver) = mpsc::sync_channel::<Io>(128);
//!         thread::spawn(move || {
//!             for mut io in receiver {
//!                 let result = match io.command() {
//!                     Command::Read { .. } => {
//!                         io.buf_mut().fill(0);
//!                         Ok(())
//!                     }
//!                     Command::Write { .. } | Command::Flush => Ok(()),
//!                     _ => Err(IoError::Unsupported),
//!                 };
//!                 io.complete_done(result);
//!             }
//!         });
//!         Offloaded(sender)
//!     }
//! }
//!
//! impl DeferredDevice for Offloaded {
//!     fn submit(&self, io: Io) {
//!         // If the thread is gone, the Io is dropped: the request fails
//!         // with EIO.
//!         let _ = self.0.send(io);
//!     }
//! }
//! # let _ = Offloaded::new();
//! ```
//!
//! Async Rust code implements `bius::tokio::AsyncBlockDevice`
//! instead and runs it on tokio (the `tokio` cargo feature); a synchronous
//! device is made to wait by the builder's
//! [`latency`](crate::DeviceBuilder::latency).  [`Immediate`] makes a
//! synchronous [`BlockDevice`](crate::BlockDevice) a `DeferredDevice`, for
//! a wrapper written for deferred devices (a
//! [`ZoneEmulator`](crate::zone::ZoneEmulator), say).

use std::fmt;
use std::time::Instant;

use bius_sys::bius_segment;

use crate::block::Capabilities;
use crate::error::IoError;
use crate::request::{Command, Reply, Request};
use crate::transport::WindowRange;
use crate::worker::Header;
use crate::zone::ZoneGeometry;
use sink::{Delivery, Finished, Sink};
use std::sync::Arc;
use zone_gate::GateTicket;

pub use immediate::Immediate;

mod immediate;
pub(crate) mod sink;
pub(crate) mod zone_gate;

/// A block device whose requests are completed later, from any thread.
///
/// Every request of every queue reaches [`DeferredDevice::submit`] as an
/// [`Io`], on the queue's worker thread, in the order the kernel sent them
/// on that queue; up to the queue depth are in flight per queue.  `submit`
/// should return quickly: hand the `Io` to whatever serves it.  A panic in
/// `submit` fails the request with `EIO` (the `Io` is dropped).
///
/// # Zoned devices
/// A device that returns a geometry from [`DeferredDevice::zones`] is
/// created as a host-managed zoned device of the geometry's size and
/// receives zone requests as well ([`Command::ReportZones`],
/// [`Command::ZoneAppend`], ...); a conventional device never sees one
/// (the framework refuses them with `EOPNOTSUPP`).  The
/// framework orders zone management against writes: an open, close,
/// finish or reset of a zone is submitted only once every write and append
/// of that zone submitted before it has completed, and writes and appends
/// of the zone that come after it wait until it has completed (a reset of
/// all zones waits for, and holds back, every write).  Writes of one zone
/// are submitted in write-pointer order, as the kernel sends them; the
/// device must apply them in the order they were submitted.
pub trait DeferredDevice: Send + Sync + 'static {
    /// What the device supports.  Called once, when the device is created.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The zone geometry of a zoned device, `None` (the default) for a
    /// conventional one (see [Zoned devices](DeferredDevice#zoned-devices)).
    /// Called when the device is created.
    fn zones(&self) -> Option<ZoneGeometry> {
        None
    }

    /// Starts serving a request; complete it now or later, from any thread.
    fn submit(&self, io: Io);
}

impl<D: DeferredDevice + ?Sized> DeferredDevice for Arc<D> {
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn zones(&self) -> Option<ZoneGeometry> {
        (**self).zones()
    }
    fn submit(&self, io: Io) {
        (**self).submit(io)
    }
}

/// Where a request's data is.
pub(crate) enum Data {
    /// No data (flush, discard, zone management, report).
    None,
    /// In a buffer of its own: a copied write payload, a read's buffer
    /// whose data follows the completion record.
    Owned(Vec<u8>),
    /// Copied out of the data window (a mapped request the transport does
    /// not lend, or one in pieces): a read's data goes back to `pieces` of
    /// the window when it completes.
    Gathered {
        buf: Vec<u8>,
        pieces: Vec<bius_segment>,
    },
    /// The request's own range of the data window.
    Lent(WindowRange),
}

impl Data {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::None => &[],
            Data::Owned(buf) | Data::Gathered { buf, .. } => buf,
            Data::Lent(range) => range.bytes(),
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Data::None => &mut [],
            Data::Owned(buf) | Data::Gathered { buf, .. } => buf,
            Data::Lent(range) => range.bytes_mut(),
        }
    }
}

/// One request in flight, owned by whoever serves it until it completes.
///
/// Complete it with [`Io::complete`] and its [`Reply`] (or, for every
/// request but zone reports and appends, with [`Io::complete_done`]), from
/// any thread.
/// Dropping it without completing it fails the request with `EIO`.  An
/// `Io` completed after its device has stopped is discarded.
pub struct Io {
    hdr: Header,
    queue: u32,
    command: Command,
    data: Data,
    sink: Arc<Sink>,
    gate: GateTicket,
    /// Complete no earlier than this (the worker holds the completion).
    not_before: Option<Instant>,
    /// When the worker received it.
    arrived: Instant,
    /// How a success is answered, if not as the device answers it (an
    /// append redirected to a write: the sector).
    reply: Option<Reply>,
    /// Ranges of a read's buffer filled with a byte each on success (a
    /// zone's unwritten parts, by a zone emulator).
    fill: Vec<(std::ops::Range<usize>, u8)>,
    /// Runs instead of the completion, once (a zone emulator recording
    /// the write pointer the completed write moved): it completes the
    /// `Io` itself, or sends it on.
    on_complete: Option<CompletionHook>,
    done: bool,
}

/// What [`Io::on_complete`] runs: the request and the outcome it was
/// completed with.
pub(crate) type CompletionHook = Box<dyn FnOnce(Io, Result<Reply, IoError>) + Send>;

impl Io {
    /// A request of `queue`, arriving at `arrived` with its `data`.
    pub(crate) fn new(
        hdr: Header,
        queue: u32,
        command: Command,
        data: Data,
        sink: Arc<Sink>,
        arrived: Instant,
    ) -> Self {
        Io {
            hdr,
            queue,
            command,
            data,
            sink,
            gate: GateTicket::None,
            not_before: None,
            arrived,
            reply: None,
            fill: Vec::new(),
            on_complete: None,
            done: false,
        }
    }

    /// What the request asks for.
    pub fn command(&self) -> Command {
        self.command
    }

    /// Whether the kernel sent this request before, to a daemon that was
    /// lost before completing it (`BIUS_REQ_REPLAY`, after a recovery):
    /// that daemon may or may not have applied it.  Requests that do the
    /// same when applied twice need not care; a zoned device must not
    /// apply a write twice (see
    /// [`ZoneSet::write_replayed`](crate::zone::ZoneSet::write_replayed)).
    /// (A synchronous zoned [`BlockDevice`](crate::BlockDevice) is spared
    /// this: the framework judges its replayed writes by its zone
    /// reports.)
    pub fn is_replay(&self) -> bool {
        self.hdr.is_replay()
    }

    /// The hardware queue the request came from.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// The kernel's id of the request (opaque; unique while in flight).
    pub fn id(&self) -> u64 {
        self.hdr.id()
    }

    /// The data of a write or zone append; empty for other requests.
    pub fn data(&self) -> &[u8] {
        if self.is_read() {
            &[]
        } else {
            self.data.bytes()
        }
    }

    /// The buffer a read fills (entirely: its previous contents are
    /// unspecified); empty for other requests.
    pub fn buf_mut(&mut self) -> &mut [u8] {
        if self.is_read() {
            self.data.bytes_mut()
        } else {
            &mut []
        }
    }

    /// The request with its data, as
    /// [`BlockDevice::handle`](crate::BlockDevice::handle) takes it.
    pub fn request(&mut self) -> Request<'_> {
        if self.is_read() {
            self.command.request(&[], self.data.bytes_mut())
        } else {
            self.command.request(self.data.bytes(), &mut [])
        }
    }

    fn is_read(&self) -> bool {
        matches!(self.command, Command::Read { .. })
    }

    /// Completes the request with its outcome: on success its reply,
    /// [`Reply::Zones`] for a zone report, [`Reply::Appended`] for a zone
    /// append, [`Reply::Done`] for everything else.  A reply that does
    /// not fit the request fails it with `EIO` (logged).
    pub fn complete(mut self, result: Result<Reply, IoError>) {
        if let Some(hook) = self.on_complete.take() {
            return hook(self, result);
        }
        self.done = true;
        let result = match (result, self.reply.take()) {
            (Ok(Reply::Done), Some(reply)) => Ok(reply),
            (result, _) => result,
        };
        if result.is_ok() {
            for (range, byte) in std::mem::take(&mut self.fill) {
                if let Some(bytes) = self.data.bytes_mut().get_mut(range) {
                    bytes.fill(byte);
                }
            }
        }
        self.sink.push(Delivery {
            finished: Finished {
                hdr: self.hdr,
                result,
                data: std::mem::replace(&mut self.data, Data::None),
                arrived: self.arrived,
            },
            gate: std::mem::take(&mut self.gate),
            due: self.not_before.take(),
        });
    }

    /// Completes the request with [`Reply::Done`] on success: the way to
    /// complete every request but zone reports and appends (one of those
    /// completed so with `Ok` fails with `EIO`).
    pub fn complete_done(self, result: Result<(), IoError>) {
        self.complete(result.map(|()| Reply::Done));
    }

    /// Makes this request complete no earlier than `due`, however early it
    /// is completed: its queue's worker holds the completion until then
    /// (waiting in `ppoll()`, no thread sleeps).  A device model computes
    /// when the hardware would answer, says so here, and completes at
    /// once.  With a [`latency`](crate::DeviceBuilder::latency) as well,
    /// the later of the two times counts.
    pub fn delay_until(&mut self, due: Instant) {
        self.not_before = Some(self.not_before.map_or(due, |earlier| earlier.max(due)));
    }

    /// Whether this request belongs to the queue of `sink`.
    pub(crate) fn belongs_to(&self, sink: &Arc<Sink>) -> bool {
        Arc::ptr_eq(&self.sink, sink)
    }

    /// Hands this request (released by the zone gate) to its worker, to
    /// submit.
    pub(crate) fn release(self) {
        Arc::clone(&self.sink).release(self);
    }

    /// Makes this request `command` for whoever serves it next (a zone
    /// emulator's inner device); a success is then answered with `reply`
    /// if given.  The data stays the request's.
    pub(crate) fn redirect(&mut self, command: Command, reply: Option<Reply>) {
        self.command = command;
        self.reply = reply;
    }

    /// Makes this request `command` for whoever serves it next, keeping
    /// the reply a success is answered with.
    pub(crate) fn reroute(&mut self, command: Command) {
        self.command = command;
    }

    /// Runs `hook` when this request is completed, instead of completing
    /// it (the hook completes it, or sends it on).  One hook at a time: a
    /// second replaces the first.
    pub(crate) fn on_complete(&mut self, hook: CompletionHook) {
        self.on_complete = Some(hook);
    }

    /// On success, fills `range` of a read's buffer with `byte` (after
    /// the ranges given before).
    pub(crate) fn fill_on_success(&mut self, range: std::ops::Range<usize>, byte: u8) {
        self.fill.push((range, byte));
    }

    pub(crate) fn gate_mut(&mut self) -> &mut GateTicket {
        &mut self.gate
    }
}

impl Drop for Io {
    fn drop(&mut self) {
        if !self.done {
            log::debug!(
                "queue {}: request {:#x} dropped without completion; failing it with EIO",
                self.queue,
                self.hdr.id()
            );
            // The delay is kept: a dropped request completes no earlier
            // than a completed one would.
            let io = Io {
                hdr: self.hdr,
                queue: self.queue,
                command: self.command,
                data: std::mem::replace(&mut self.data, Data::None),
                sink: Arc::clone(&self.sink),
                gate: std::mem::take(&mut self.gate),
                not_before: self.not_before.take(),
                arrived: self.arrived,
                reply: None,
                fill: Vec::new(),
                on_complete: self.on_complete.take(),
                done: false,
            };
            io.complete_done(Err(IoError::Io));
        }
    }
}

impl fmt::Debug for Io {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Io")
            .field("id", &format_args!("{:#x}", self.hdr.id()))
            .field("queue", &self.queue)
            .field("command", &self.command)
            .finish()
    }
}
