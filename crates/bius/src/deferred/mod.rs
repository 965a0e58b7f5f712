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
//! [`DeferredZoned`](crate::zone::DeferredZoned), say).
//!
//! # Writing a wrapper
//!
//! A wrapper is a `DeferredDevice` that serves its requests with another
//! one (`inner`), changing them on the way: it hands each [`Io`] to
//! `inner.submit`, after telling it what to ask `inner`
//! ([`Io::redirect`]), what to answer on success instead of what `inner`
//! answers ([`Io::reply_on_success`]), which bytes of a read to fill
//! itself on success ([`Io::fill_on_success`]), and what to run when
//! `inner` completes it, before (or instead of) its completion
//! ([`Io::on_complete`]).  The data stays the request's all along, with
//! no copy.  [`DeferredZoned`](crate::zone::DeferredZoned) is written so: an
//! append becomes a write at the write pointer answered with where it
//! landed, a read of unwritten space is filled here, a zone's state is
//! journaled when its write completes.  A wrapper wraps any kind of
//! device: a synchronous one through [`Immediate`], an async one through
//! `bius::tokio::TokioDevice`.
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! use bius::deferred::Immediate;
//! use bius::loopback::{Loopback, Submission};
//! use bius::{BlockDevice, Command, DeferredDevice, DeviceBuilder, Io, IoError, Reply};
//!
//! /// The bytes from `base` on of `inner`, as a disk of its own (a
//! /// partition), counting the writes `inner` completed.
//! struct Partition<D> {
//!     inner: D,
//!     base: u64,
//!     writes: Arc<AtomicU64>,
//! }
//!
//! impl<D: DeferredDevice> DeferredDevice for Partition<D> {
//!     fn submit(&self, mut io: Io) {
//!         let shifted = match io.command() {
//!             Command::Read { offset, len } => Command::Read { offset: offset + self.base, len },
//!             Command::Write { offset, len, fua } => {
//!                 let writes = Arc::clone(&self.writes);
//!                 io.on_complete(move |io, result| {
//!                     writes.fetch_add(u64::from(result.is_ok()), Ordering::Relaxed);
//!                     io.complete(result);
//!                 });
//!                 Command::Write { offset: offset + self.base, len, fua }
//!             }
//!             Command::Flush => Command::Flush,
//!             _ => return io.complete_done(Err(IoError::Unsupported)),
//!         };
//!         io.redirect(shifted).expect("the same data");
//!         self.inner.submit(io);
//!     }
//! }
//!
//! /// A synchronous store: a read sees its sector number.
//! struct Store;
//!
//! impl BlockDevice for Store {
//!     fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
//!         buf.fill((offset / 512) as u8);
//!         Ok(())
//!     }
//!     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
//!         Ok(())
//!     }
//! }
//!
//! let writes = Arc::new(AtomicU64::new(0));
//! let inner = Immediate::new(Store);
//! let partition = Partition { inner, base: 2048, writes: Arc::clone(&writes) };
//! let mut kernel = Loopback::new(&DeviceBuilder::new(1 << 20)).unwrap();
//! kernel.start_deferred(partition).unwrap();
//! // Sector 1 of the partition is sector 5 of the store.
//! assert_eq!(kernel.read(0, 512, 512), Ok(vec![5; 512]));
//! assert_eq!(kernel.run(0, Submission::write(0, vec![1; 512])), Ok(Reply::Done));
//! assert_eq!(writes.load(Ordering::Relaxed), 1);
//! kernel.stop().unwrap();
//! ```

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

pub use hooks::RedirectError;
pub use immediate::Immediate;

mod hooks;
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
            Data::Lent(range) => range.as_slice(),
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Data::None => &mut [],
            Data::Owned(buf) | Data::Gathered { buf, .. } => buf,
            Data::Lent(range) => range.as_mut_slice(),
        }
    }
}

/// One request in flight, owned by whoever serves it until it completes.
///
/// Complete it with [`Io::complete`] and its [`Reply`] (or, for every
/// request but zone reports and appends, with [`Io::complete_done`]), from
/// any thread.  A wrapper that hands it to another device changes it on
/// the way with the hooks of the [wrappers](self#writing-a-wrapper)
/// section: [`Io::redirect`], [`Io::reply_on_success`],
/// [`Io::fill_on_success`], [`Io::on_complete`].
/// Dropping it without completing it fails the request with `EIO`.  An
/// `Io` completed after its device has stopped is discarded.
pub struct Io {
    hdr: Header,
    queue: u32,
    /// What the request asks for now (a wrapper may redirect it).
    command: Command,
    /// What the kernel asked for.
    sent: Command,
    data: Data,
    sink: Arc<Sink>,
    gate: GateTicket,
    /// Complete no earlier than this (the worker holds the completion).
    not_before: Option<Instant>,
    /// When the worker received it.
    arrived: Instant,
    /// How a success is answered, if not with [`Reply::Done`]
    /// ([`Io::reply_on_success`]).
    reply: Option<Reply>,
    /// Ranges of a read's buffer filled with a byte each on success
    /// ([`Io::fill_on_success`]).
    fill: Vec<(std::ops::Range<usize>, u8)>,
    /// Run instead of the completion, the last set first, each once
    /// ([`Io::on_complete`]).
    on_complete: Vec<CompletionHook>,
    done: bool,
}

/// What [`Io::on_complete`] runs: the request and the outcome it was
/// completed with.
type CompletionHook = Box<dyn FnOnce(Io, Result<Reply, IoError>) + Send>;

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
            sent: command,
            data,
            sink,
            gate: GateTicket::None,
            not_before: None,
            arrived,
            reply: None,
            fill: Vec::new(),
            on_complete: Vec::new(),
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
        // What the wrappers asked for on success, before their hooks run:
        // each sees the request as it will complete.
        let result = match (result, &self.reply) {
            (Ok(Reply::Done), Some(reply)) => Ok(reply.clone()),
            (result, _) => result,
        };
        if result.is_ok() {
            for (range, byte) in &self.fill {
                if let Some(bytes) = self.data.bytes_mut().get_mut(range.clone()) {
                    bytes.fill(*byte);
                }
            }
        }
        if let Some(hook) = self.on_complete.pop() {
            return hook(self, result);
        }
        self.done = true;
        self.sink.push(Delivery {
            finished: Finished {
                hdr: self.hdr,
                result,
                data: std::mem::replace(&mut self.data, Data::None),
                arrived: self.arrived,
            },
            sent: self.sent,
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
                sent: self.sent,
                data: std::mem::replace(&mut self.data, Data::None),
                sink: Arc::clone(&self.sink),
                gate: std::mem::take(&mut self.gate),
                not_before: self.not_before.take(),
                arrived: self.arrived,
                reply: None,
                fill: Vec::new(),
                on_complete: std::mem::take(&mut self.on_complete),
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
