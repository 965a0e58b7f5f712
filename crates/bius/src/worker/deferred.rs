//! The worker loop of a queue whose device completes requests later
//! ([`DeferredDevice`]): it hands each request to the device as an [`Io`],
//! collects the completions that arrive meanwhile, from any thread, writes
//! them in batches (with a fetch of more requests when requests just came),
//! and sleeps in [`Transport::wait`] when there is neither, until the
//! earliest held completion is due (or a little before it, then polling:
//! [`WakeUp`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use bius_sys::{bius_request, bius_segment};

use super::batch::Batch;
use super::framing::Framer;
use super::wake::{Wait, WakeUp};
use super::{
    command_of, encode_reply, input_bytes, invalid, layout_problem, malformed, reply_room,
    spawn_queue_thread, whole_segment, Header, WorkerConfig,
};
use crate::deferred::sink::{Delivery, Finished, Sink};
use crate::deferred::zone_gate::ZoneGate;
use crate::deferred::{Data, DeferredDevice, Io};
use crate::error::{errno_of, ControlOp, Error, IoError};
use crate::model::Timing;
use crate::op::Op;
use crate::request::Command;
use crate::request::Reply;
use crate::stats::Recorder;
use crate::transport::Transport;
use crate::worker::serve::{check_zone_reply, guarded, Callee};
use crate::zone::layout::ZoneLayout;

/// Buffers a worker keeps for reuse.
const POOLED_BUFFERS: usize = 64;

/// A deferred device and what its queues share: the order of zone
/// operations, the zones the kernel knows, when requests complete.
pub(crate) struct DeferredServer<D> {
    pub(crate) device: D,
    /// Zoned devices: their zones, and the gate that orders their zone
    /// management against writes.
    pub(crate) zones: Option<(ZoneLayout, Arc<ZoneGate>)>,
    /// The latency added to every request and the device model.
    pub(crate) timing: Timing,
}

impl<D: DeferredDevice> DeferredServer<D> {
    /// A server of `device`, zoned with `layout` if it has one, completing
    /// requests no earlier than `timing` says.
    pub(crate) fn new(device: D, layout: Option<ZoneLayout>, timing: Timing) -> Self {
        let zones = layout.map(|layout| (layout, ZoneGate::new(layout.geometry().zone_size())));
        DeferredServer {
            device,
            zones,
            timing,
        }
    }
}

/// Runs [`serve_deferred`] on a new thread named after the queue,
/// counting into `stats`; `exit_guard` is dropped when the thread ends.
pub(crate) fn spawn_deferred<T: Transport, D: DeferredDevice, G: Send + 'static>(
    transport: T,
    server: Arc<DeferredServer<D>>,
    config: WorkerConfig,
    stats: Arc<Recorder>,
    exit_guard: G,
) -> Result<JoinHandle<Result<(), Error>>, Error> {
    spawn_queue_thread(&config, exit_guard, move || {
        serve_deferred(transport, &server, config, stats)
    })
}

/// Serves requests until the transport reports end of file, counting them
/// into `stats`.  Requests still in flight then complete into the void.
pub(crate) fn serve_deferred<T: Transport, D: DeferredDevice>(
    mut transport: T,
    server: &DeferredServer<D>,
    config: WorkerConfig,
    stats: Arc<Recorder>,
) -> Result<(), Error> {
    let wakeup = transport.defer().map_err(|err| transfer_error(&err))?;
    // A timer slack of 1 ns: the kernel's default lets a timed wait end
    // up to 50 us late (the thread's timer expiries grouped with others).
    if let Err(errno) = nix::sys::prctl::set_timerslack(1) {
        log::debug!("queue {}: timer slack not set: {errno}", config.queue);
    }
    let sink = Arc::new(Sink::new(wakeup));
    let mut worker = DeferredWorker {
        transport,
        server,
        config,
        sink: Arc::clone(&sink),
        batch: Batch::new(&config),
        pool: Vec::new(),
        delivered: Vec::new(),
        released: Vec::new(),
        delayed: BinaryHeap::new(),
        next_seq: 0,
        wake: WakeUp::new(server.timing.spin),
        stats,
    };
    let result = worker.run();
    // Dropped outside the sink's lock (a released request fails as it is
    // dropped, and its completion is discarded).
    let leftovers = sink.close();
    drop(leftovers);
    result
}

fn transfer_error(err: &io::Error) -> Error {
    Error::Kernel {
        op: ControlOp::Transfer,
        errno: errno_of(err),
    }
}

struct DeferredWorker<'s, T, D> {
    transport: T,
    server: &'s DeferredServer<D>,
    config: WorkerConfig,
    sink: Arc<Sink>,
    batch: Batch,
    /// Data buffers of completed requests, for new ones.
    pool: Vec<Vec<u8>>,
    /// Kept empty between uses, for their memory.
    delivered: Vec<Delivery>,
    released: Vec<Io>,
    /// Completions held until their time, earliest first.
    delayed: BinaryHeap<Reverse<Delayed>>,
    /// Orders completions due at the same time as they came.
    next_seq: u64,
    /// When to wake for the earliest of `delayed`.
    wake: WakeUp,
    stats: Arc<Recorder>,
}

/// A completion held until `due` (a request with an added latency).
struct Delayed {
    due: Instant,
    seq: u64,
    delivery: Delivery,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Delayed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

impl<T: Transport, D: DeferredDevice> DeferredWorker<'_, T, D> {
    fn run(&mut self) -> Result<(), Error> {
        let mut input = vec![0u8; input_bytes(&self.config)];
        let mut framer = Framer::new(&self.config);
        let mut fetch = true;
        loop {
            // Whether requests came, and whether more may be waiting.
            let (mut fetched, mut more) = (false, false);
            if fetch {
                // The completions collected so far go with the fetch.
                match self
                    .batch
                    .flush_and_fetch(&mut self.transport, &mut input)?
                {
                    Ok(0) => break,
                    Ok(n) => {
                        let arrived = Instant::now();
                        framer.feed(&input[..n], |hdr, op, payload, segments| {
                            self.dispatch(hdr, op, payload, segments, arrived)
                        })?;
                        fetched = true;
                        // A full read may have left requests behind.
                        more = n == input.len();
                    }
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => more = true,
                    Err(err) => return Err(transfer_error(&err)),
                }
            }
            self.collect()?;
            // After requests came, completions ready now ride with a fetch
            // (it costs no more than writing them, and finds the requests
            // that came meanwhile).
            fetch = more || (fetched && !self.batch.is_empty());
            if fetch {
                continue;
            }
            self.batch.flush(&mut self.transport)?;
            let next = self.delayed.peek().map(|Reverse(first)| first.due);
            let deadline = match self.wake.plan(next) {
                // (a completion due within the spin: poll until it is)
                Wait::Poll => {
                    fetch = true;
                    continue;
                }
                Wait::Until(deadline) => deadline,
            };
            if self.sink.may_sleep() {
                let wait = self.transport.wait(deadline);
                self.sink.awake();
                fetch = wait.map_err(|err| transfer_error(&err))?;
                if let (false, Some(deadline)) = (fetch, deadline) {
                    self.wake.woke(deadline, Instant::now());
                }
            }
        }
        framer.end();
        Ok(())
    }

    /// Hands one request of operation `op`, received at `arrived`, to the
    /// device (or to the zone gate), or fails it at once if its op code is
    /// unknown (`op` is `None`), or it is malformed or out of the device's
    /// limits.
    fn dispatch(
        &mut self,
        raw: &bius_request,
        op: Option<Op>,
        payload: &[u8],
        segments: &[bius_segment],
        arrived: Instant,
    ) -> Result<(), Error> {
        let hdr = match Header::decode(raw, op, &self.config) {
            Ok(hdr) => hdr,
            Err(err) => return self.batch.fail(&mut self.transport, raw.id, err),
        };
        let prepared = self.prepare(&hdr, payload, segments, arrived);
        let mut io = match prepared {
            Ok(io) => io,
            Err(err) => {
                return self.encode(
                    Finished {
                        hdr,
                        result: Err(err),
                        data: Data::None,
                        arrived,
                    },
                    None,
                )
            }
        };
        if let Some(due) = self.server.timing.delayed(io.command(), arrived) {
            io.delay_until(due);
        }
        if let Some((_, gate)) = &self.server.zones {
            match gate.admit(io) {
                Some(admitted) => io = admitted,
                None => return Ok(()),
            }
        }
        self.submit(io);
        Ok(())
    }

    /// The [`Io`] of a request received at `arrived`, with its data.
    fn prepare(
        &mut self,
        hdr: &Header,
        payload: &[u8],
        segments: &[bius_segment],
        arrived: Instant,
    ) -> Result<Io, IoError> {
        if let Some(problem) = layout_problem(hdr, segments) {
            return Err(malformed(hdr, &self.config, &problem));
        }
        let command =
            command_of(hdr, &self.config).map_err(|err| invalid(hdr, &self.config, err))?;
        // A conventional device sees no zone request; a zoned one no
        // append when the kernel emulates appends (the driver refuses them
        // first).
        let refused = match &self.server.zones {
            None => command.op().is_zone(),
            Some((layout, _)) => layout.append_emulated() && command.op() == Op::ZoneAppend,
        };
        if refused {
            return Err(IoError::Unsupported);
        }
        // (at most the largest I/O: checked by command_of)
        let len = hdr.raw.len as usize;
        let data = match command {
            // A stand-in buffer: zeroes for a write, scratch for a read.
            Command::Read { .. } | Command::Write { .. } | Command::ZoneAppend { .. }
                if hdr.is_dataless() =>
            {
                let mut buf = self.buffer();
                buf.resize(len, 0);
                Data::Owned(buf)
            }
            Command::Read { .. } if !hdr.is_mapped() => {
                let mut buf = self.buffer();
                buf.resize(len, 0);
                Data::Owned(buf)
            }
            Command::Write { .. } | Command::ZoneAppend { .. } if !hdr.is_mapped() => {
                let mut buf = self.buffer();
                buf.extend_from_slice(payload);
                Data::Owned(buf)
            }
            Command::Read { .. } | Command::Write { .. } | Command::ZoneAppend { .. } => {
                self.mapped(hdr, segments)?
            }
            _ => Data::None,
        };
        Ok(Io::new(
            *hdr,
            self.config.queue,
            command,
            data,
            Arc::clone(&self.sink),
            arrived,
        ))
    }

    /// The data of a mapped request: its range of the window, lent, or,
    /// where the transport does not lend it or it is in pieces, a copy.
    fn mapped(&mut self, hdr: &Header, segments: &[bius_segment]) -> Result<Data, IoError> {
        let len = hdr.raw.len as usize;
        if segments.is_empty() {
            if let Some(range) = self.transport.lend(hdr.raw.window_offset, len) {
                return Ok(Data::Lent(range));
            }
        }
        let pieces = if segments.is_empty() {
            vec![whole_segment(hdr)]
        } else {
            segments.to_vec()
        };
        let read = hdr.op == Op::Read;
        let mut buf = self.buffer();
        for piece in &pieces {
            let len = piece.len as usize;
            let data = self
                .transport
                .window(piece.window_offset, len)
                .ok_or(IoError::Io)?;
            if read {
                buf.resize(buf.len() + len, 0);
            } else {
                data.append_to(&mut buf);
            }
        }
        Ok(Data::Gathered { buf, pieces })
    }

    fn buffer(&mut self) -> Vec<u8> {
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf
    }

    /// Calls the device; a panic fails the request with `EIO` (the `Io`
    /// is dropped as the panic unwinds).
    fn submit(&self, io: Io) {
        let id = io.id();
        let device = &self.server.device;
        // (a panic drops the Io, which fails it with EIO on its own)
        let _ = guarded(Callee::Device, self.config.queue, id, || {
            device.submit(io);
            Ok(())
        });
    }

    /// Submits what the zone gate released, holds completions that are
    /// not due yet and encodes those that are.
    fn collect(&mut self) -> Result<(), Error> {
        let mut delivered = std::mem::take(&mut self.delivered);
        let mut released = std::mem::take(&mut self.released);
        self.sink.take(&mut delivered, &mut released);
        for io in released.drain(..) {
            self.submit(io);
        }
        let now = Instant::now();
        let mut result = Ok(());
        for mut delivery in delivered.drain(..) {
            match self.due(&mut delivery) {
                Some(due) if due > now => {
                    self.next_seq += 1;
                    let seq = self.next_seq;
                    self.delayed.push(Reverse(Delayed { due, seq, delivery }));
                }
                due if result.is_ok() => result = self.deliver(delivery, due),
                _ => {}
            }
        }
        while result.is_ok() {
            match self.delayed.peek() {
                Some(Reverse(first)) if first.due <= now => {}
                _ => break,
            }
            let Some(Reverse(first)) = self.delayed.pop() else {
                break;
            };
            result = self.deliver(first.delivery, Some(first.due));
        }
        self.delivered = delivered;
        self.released = released;
        result
    }

    /// When `delivery` may go to the kernel: the later of the time its
    /// device set and its model's time for it.  Its zone reply is checked
    /// first, so the model sees the result the kernel will get; a panic in
    /// the model fails it with `EIO`, untimed by the model.
    fn due(&self, delivery: &mut Delivery) -> Option<Instant> {
        let finished = &mut delivery.finished;
        let result = std::mem::replace(&mut finished.result, Err(IoError::Io));
        finished.result = result.and_then(|reply| self.check_zones(&finished.hdr, reply));
        let timing = &self.server.timing;
        let modelled = guarded(Callee::Model, self.config.queue, finished.hdr.id(), || {
            Ok(timing.modelled(delivery.sent, finished.arrived, &finished.result))
        });
        match modelled {
            Ok(modelled) => delivery.due.max(modelled),
            Err(err) => {
                finished.result = Err(err);
                delivery.due
            }
        }
    }

    /// Gives back a completion's zone gate ticket (submitting what that
    /// releases) and encodes the completion, due at `due` if it had a
    /// due time.
    fn deliver(&mut self, delivery: Delivery, due: Option<Instant>) -> Result<(), Error> {
        for io in delivery.gate.finish() {
            if io.belongs_to(&self.sink) {
                self.submit(io);
            } else {
                io.release();
            }
        }
        self.encode(delivery.finished, due)
    }

    /// Appends the completion of a finished request (a served one's zone
    /// reply checked: see [`DeferredWorker::due`]) to the batch: a copy
    /// mode read's data after the record, a gathered read's data back into
    /// the window.  `due`: its due time, if it had one, for the
    /// statistics' lateness.
    fn encode(&mut self, done: Finished, due: Option<Instant>) -> Result<(), Error> {
        let Finished {
            hdr,
            result,
            data,
            arrived,
        } = done;
        let room = if hdr.in_stream() {
            reply_room(&hdr, &self.config)
        } else {
            0
        };
        let result = result.and_then(|reply| self.scatter(&hdr, &data).map(|()| reply));
        self.stats
            .complete(self.config.queue, &hdr, &result, arrived, due);
        let out = self.batch.reserve(&mut self.transport, room)?;
        let reply = result.and_then(|reply| {
            if let (Reply::Done, Data::Owned(buf)) = (&reply, &data) {
                if hdr.op == Op::Read && hdr.in_stream() {
                    out.copy_from_slice(buf);
                }
            }
            encode_reply(&hdr, reply, out, &self.config)
        });
        self.batch.push(hdr.id(), reply);
        self.recycle(data);
        Ok(())
    }

    /// A zoned device's report or append sector, if the driver accepts it.
    fn check_zones(&self, hdr: &Header, reply: Reply) -> Result<Reply, IoError> {
        let Some((layout, _)) = &self.server.zones else {
            return Ok(reply);
        };
        let offset = hdr.offset();
        match hdr.op {
            Op::ReportZones => check_zone_reply(layout, offset, None, reply),
            Op::ZoneAppend => check_zone_reply(layout, offset, Some(hdr.raw.len.into()), reply),
            _ => Ok(reply),
        }
    }

    /// Copies a gathered read's data back to its pieces of the window.
    fn scatter(&mut self, hdr: &Header, data: &Data) -> Result<(), IoError> {
        let Data::Gathered { buf, pieces } = data else {
            return Ok(());
        };
        if hdr.op != Op::Read {
            return Ok(());
        }
        let mut rest = &buf[..];
        for piece in pieces {
            let (part, tail) = rest.split_at(piece.len as usize);
            self.transport
                .window(piece.window_offset, part.len())
                .ok_or(IoError::Io)?
                .copy_from(part);
            rest = tail;
        }
        Ok(())
    }

    fn recycle(&mut self, data: Data) {
        if let Data::Owned(buf) | Data::Gathered { buf, .. } = data {
            if self.pool.len() < POOLED_BUFFERS {
                self.pool.push(buf);
            }
        }
    }
}
