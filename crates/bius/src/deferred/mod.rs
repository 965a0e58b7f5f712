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
//! [`Io::complete`] (or [`Io::complete_zone`]) consumes it, and dropping it
//! uncompleted fails the request with `EIO`, so a lost request never hangs.
//! Completions are batched: the worker writes all that have arrived in one
//! `write()` and sleeps in `poll()` when there is nothing to do.
//!
//! ```
//! use std::sync::mpsc;
//! use std::thread;
//!
//! use bius::deferred::{DeferredDevice, Io, IoCommand};
//! use bius::IoError;
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
//!                     IoCommand::Read { .. } => {
//!                         io.buf_mut().fill(0);
//!                         Ok(())
//!                     }
//!                     IoCommand::Write { .. } | IoCommand::Flush => Ok(()),
//!                     _ => Err(IoError::Unsupported),
//!                 };
//!                 io.complete(result);
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
//! [`latency`](crate::DeviceBuilder::latency).

use std::fmt;
use std::time::Instant;

use bius_sys::bius_segment;

use crate::block::{Capabilities, Request};
use crate::error::IoError;
use crate::transport::WindowRange;
use crate::worker::Header;
use crate::zone::request::{ZoneReply, ZoneRequest};
use crate::zone::ZoneGeometry;
use sink::{Delivery, Finished, Sink};
use std::sync::Arc;
use zone_gate::GateTicket;

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
/// A device that returns a geometry from [`DeferredDevice::zone_geometry`]
/// is created as a host-managed zoned device and receives zone requests as
/// well ([`IoCommand::ReportZones`], [`IoCommand::ZoneAppend`], ...).  The
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
    /// conventional one.  Called once, when the device is created.
    fn zone_geometry(&self) -> Option<ZoneGeometry> {
        None
    }

    /// Starts serving a request; complete it now or later, from any thread.
    fn submit(&self, io: Io);
}

impl<D: DeferredDevice + ?Sized> DeferredDevice for Arc<D> {
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn zone_geometry(&self) -> Option<ZoneGeometry> {
        (**self).zone_geometry()
    }
    fn submit(&self, io: Io) {
        (**self).submit(io)
    }
}

/// What a request asks for, without its data; offsets and lengths in bytes.
///
/// New kinds may be added in later versions: answer unknown ones with
/// [`IoError::Unsupported`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoCommand {
    /// Fill [`Io::buf_mut`] with the data at `offset`.
    Read {
        /// Byte offset on the device.
        offset: u64,
        /// Bytes to read (the buffer's length).
        len: usize,
    },
    /// Store [`Io::data`] at `offset`; with `fua` durably.
    Write {
        /// Byte offset on the device.
        offset: u64,
        /// Bytes to write (the data's length).
        len: usize,
        /// Forced unit access.
        fua: bool,
    },
    /// Make every completed write durable.
    Flush,
    /// The range's contents are no longer needed.
    Discard {
        /// Byte offset on the device.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
    /// Make the range read as zeroes.
    WriteZeroes {
        /// Byte offset on the device.
        offset: u64,
        /// Length in bytes.
        len: u64,
        /// The range may be deallocated.
        unmap: bool,
    },
    /// Report up to `max_zones` zones from the one at `offset` on: complete
    /// with [`ZoneReply::Zones`].
    ReportZones {
        /// Byte offset of the first zone.
        offset: u64,
        /// Most zones to report.
        max_zones: usize,
    },
    /// Open the zone at `offset` explicitly.
    ZoneOpen {
        /// Byte offset of the zone.
        offset: u64,
    },
    /// Close the zone at `offset`.
    ZoneClose {
        /// Byte offset of the zone.
        offset: u64,
    },
    /// Finish the zone at `offset`.
    ZoneFinish {
        /// Byte offset of the zone.
        offset: u64,
    },
    /// Reset the zone at `offset`.
    ZoneReset {
        /// Byte offset of the zone.
        offset: u64,
    },
    /// Reset every sequential zone.
    ZoneResetAll,
    /// Write [`Io::data`] at the write pointer of the zone at `offset`:
    /// complete with [`ZoneReply::Appended`].
    ZoneAppend {
        /// Byte offset of the zone.
        offset: u64,
        /// Bytes to append.
        len: usize,
        /// Forced unit access.
        fua: bool,
    },
}

impl IoCommand {
    /// The request with its data: a read's buffer `buf`, a write's or
    /// append's `data`.
    pub(crate) fn request<'a>(self, data: &'a [u8], buf: &'a mut [u8]) -> IoRequest<'a> {
        use IoRequest::{Block, Zone};
        match self {
            IoCommand::Read { offset, .. } => Block(Request::Read { offset, buf }),
            IoCommand::Write { offset, fua, .. } => Block(Request::Write { offset, data, fua }),
            IoCommand::Flush => Block(Request::Flush),
            IoCommand::Discard { offset, len } => Block(Request::Discard { offset, len }),
            IoCommand::WriteZeroes { offset, len, unmap } => {
                Block(Request::WriteZeroes { offset, len, unmap })
            }
            IoCommand::ReportZones { offset, max_zones } => {
                Zone(ZoneRequest::ReportZones { offset, max_zones })
            }
            IoCommand::ZoneOpen { offset } => Zone(ZoneRequest::Open { offset }),
            IoCommand::ZoneClose { offset } => Zone(ZoneRequest::Close { offset }),
            IoCommand::ZoneFinish { offset } => Zone(ZoneRequest::Finish { offset }),
            IoCommand::ZoneReset { offset } => Zone(ZoneRequest::Reset { offset }),
            IoCommand::ZoneResetAll => Zone(ZoneRequest::ResetAll),
            IoCommand::ZoneAppend { offset, fua, .. } => {
                Zone(ZoneRequest::Append { offset, data, fua })
            }
        }
    }
}

/// A request with its data, as the synchronous traits take it: a block
/// request or a zone request.
#[derive(Debug)]
pub enum IoRequest<'a> {
    /// A read, write, flush, discard or write-zeroes.
    Block(Request<'a>),
    /// A zone report, management operation or append.
    Zone(ZoneRequest<'a>),
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
/// Complete it with [`Io::complete`] (block requests and zone management)
/// or [`Io::complete_zone`] (zone reports and appends), from any thread.
/// Dropping it without completing it fails the request with `EIO`.  An
/// `Io` completed after its device has stopped is discarded.
pub struct Io {
    hdr: Header,
    queue: u32,
    command: IoCommand,
    data: Data,
    sink: Arc<Sink>,
    gate: GateTicket,
    /// Complete no earlier than this (the worker holds the completion).
    not_before: Option<Instant>,
    /// When the worker received it.
    arrived: Instant,
    /// How a success is answered, if not as the device answers it (an
    /// append redirected to a write: the sector).
    reply: Option<ZoneReply>,
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
pub(crate) type CompletionHook = Box<dyn FnOnce(Io, Result<ZoneReply, IoError>) + Send>;

impl Io {
    /// A request of `queue`, arriving at `arrived` with its `data`.
    pub(crate) fn new(
        hdr: Header,
        queue: u32,
        command: IoCommand,
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
    pub fn command(&self) -> IoCommand {
        self.command
    }

    /// Whether the kernel sent this request before, to a daemon that was
    /// lost before completing it (`BIUS_REQ_REPLAY`, after a recovery):
    /// that daemon may or may not have applied it.  Requests that do the
    /// same when applied twice need not care; a zoned device must not
    /// apply a write twice (see
    /// [`ZoneSet::write_replayed`](crate::zone::ZoneSet::write_replayed)).
    /// (A synchronous [`ZonedDevice`](crate::ZonedDevice) is spared this:
    /// the worker judges its replayed writes by its zone reports.)
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

    /// The request with its data, as [`BlockDevice::handle`] and
    /// [`ZonedDevice::handle_zone`] take it.
    ///
    /// [`BlockDevice::handle`]: crate::BlockDevice::handle
    /// [`ZonedDevice::handle_zone`]: crate::ZonedDevice::handle_zone
    pub fn request(&mut self) -> IoRequest<'_> {
        if self.is_read() {
            self.command.request(&[], self.data.bytes_mut())
        } else {
            self.command.request(self.data.bytes(), &mut [])
        }
    }

    fn is_read(&self) -> bool {
        matches!(self.command, IoCommand::Read { .. })
    }

    /// Completes a block request or a zone management operation.  A zone
    /// report or append completed this way with `Ok` fails with `EIO`.
    pub fn complete(self, result: Result<(), IoError>) {
        self.complete_zone(result.map(|()| ZoneReply::Done));
    }

    /// Completes any request with its reply: [`ZoneReply::Zones`] for a
    /// report, [`ZoneReply::Appended`] for an append, [`ZoneReply::Done`]
    /// for everything else.  A reply that does not fit the request fails
    /// it with `EIO` (logged).
    pub fn complete_zone(mut self, result: Result<ZoneReply, IoError>) {
        if let Some(hook) = self.on_complete.take() {
            return hook(self, result);
        }
        self.done = true;
        let result = match (result, self.reply.take()) {
            (Ok(ZoneReply::Done), Some(reply)) => Ok(reply),
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
    pub(crate) fn redirect(&mut self, command: IoCommand, reply: Option<ZoneReply>) {
        self.command = command;
        self.reply = reply;
    }

    /// Makes this request `command` for whoever serves it next, keeping
    /// the reply a success is answered with.
    pub(crate) fn reroute(&mut self, command: IoCommand) {
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
            io.complete(Err(IoError::Io));
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
