//! The worker loop of one hardware queue: reads request records, serves
//! them with the device and writes the completions back in batches, each
//! with the fetch of the next requests.  How
//! a worker calls its device is in [`serve`].

use std::io;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Instant;

use bius_sys::{bius_request, bius_segment};

use crate::abi::{self, REQUEST_SIZE, SECTOR_SIZE, ZONE_SIZE};
use crate::block::BlockDevice;
use crate::control::Scheduling;
use crate::error::{errno_of, ControlOp, Error, IoError};
use crate::op::Op;
use crate::request::Command;
use crate::request::Reply;
use crate::stats::Recorder;
use crate::transport::{SharedBytes, Transport};
use batch::Batch;
use framing::Framer;
use serve::{guarded, Callee, Served};

mod batch;
pub(crate) mod deferred;
mod framing;
pub(crate) mod serve;
#[cfg(test)]
mod tests;
mod wake;

/// Request headers that fit in the read buffer besides one maximal payload.
const HEADERS_PER_READ: usize = 256;

/// What a worker needs to know about its device.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorkerConfig {
    /// Hardware queue index (for logs and errors).
    pub(crate) queue: u32,
    /// Device size in bytes: requests beyond it fail with `EIO`.
    pub(crate) size: u64,
    /// Largest read or write payload in bytes.
    pub(crate) max_io: usize,
    /// The worker thread's scheduling policy.
    pub(crate) scheduling: Scheduling,
}

/// A request header as the worker serves it: the kernel's record and its
/// operation, decoded once, where the [`Framer`] cuts the stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub(crate) raw: bius_request,
    pub(crate) op: Op,
}

impl Header {
    /// The header of `raw`, whose op code decoded as `op`; `EOPNOTSUPP`
    /// (logged) for an op code this version does not know.
    fn decode(raw: &bius_request, op: Option<Op>, config: &WorkerConfig) -> Result<Self, IoError> {
        match op {
            Some(op) => Ok(Header { raw: *raw, op }),
            None => {
                log::warn!(
                    "queue {}: request {:#x} has the unknown op code {}; failing it with EOPNOTSUPP",
                    config.queue,
                    raw.id,
                    raw.op
                );
                Err(IoError::Unsupported)
            }
        }
    }

    /// The kernel's id of the request.
    pub(crate) fn id(&self) -> u64 {
        self.raw.id
    }

    /// The byte offset of the request's first sector (saturated).
    pub(crate) fn offset(&self) -> u64 {
        self.raw.sector.saturating_mul(SECTOR_SIZE)
    }

    fn flag(&self, flag: u32) -> bool {
        has_flag(&self.raw, flag)
    }

    /// Whether the request's data is in the data window
    /// (`BIUS_REQ_MAPPED`).
    fn is_mapped(&self) -> bool {
        self.flag(bius_sys::BIUS_REQ_MAPPED)
    }

    /// Whether the request moves no data (`BIUS_REQ_NO_DATA`: its device
    /// has [`Capabilities::no_data`](crate::Capabilities::no_data)): no
    /// payload in the stream, none in the completion.
    fn is_dataless(&self) -> bool {
        self.flag(bius_sys::BIUS_REQ_NO_DATA)
    }

    /// Whether the request's data travels in the streams: neither mapped
    /// nor dataless.
    fn in_stream(&self) -> bool {
        !self.is_mapped() && !self.is_dataless()
    }

    /// Whether the kernel sent the request before, to a daemon lost before
    /// completing it (`BIUS_REQ_REPLAY`).
    pub(crate) fn is_replay(&self) -> bool {
        self.flag(bius_sys::BIUS_REQ_REPLAY)
    }
}

/// Whether the `BIUS_REQ_*` `flag` is set on `hdr`.
fn has_flag(hdr: &bius_request, flag: u32) -> bool {
    u32::from(hdr.flags) & flag != 0
}

/// Whether a payload follows the header `hdr`, of operation `op`, in the
/// request stream: a write's or zone append's that is neither mapped nor
/// dataless.
fn has_stream_payload(hdr: &bius_request, op: Op) -> bool {
    op.has_payload() && !has_flag(hdr, bius_sys::BIUS_REQ_MAPPED | bius_sys::BIUS_REQ_NO_DATA)
}

/// What is wrong with where a request's data is, if anything (the kernel
/// never sends such): segment records on a request other than a mapped
/// read or write; a segment that is empty, not whole sectors or has
/// reserved bits set; segments that do not add up to the request's length;
/// a mapped request of an op without data.  `segments` are the records
/// that followed the header (none for an unsegmented request).
fn layout_problem(hdr: &Header, segments: &[bius_segment]) -> Option<String> {
    if hdr.raw.nr_segments == 0 {
        return (hdr.is_mapped() && !hdr.op.has_data())
            .then(|| "it is mapped but has no data".into());
    }
    if !hdr.is_mapped() || !matches!(hdr.op, Op::Read | Op::Write) {
        return Some(format!(
            "it has {} segments but is not a mapped read or write",
            hdr.raw.nr_segments
        ));
    }
    let bad = |seg: &bius_segment| {
        seg.len == 0 || !u64::from(seg.len).is_multiple_of(SECTOR_SIZE) || seg.reserved != 0
    };
    if let Some((index, seg)) = segments.iter().enumerate().find(|(_, seg)| bad(seg)) {
        return Some(format!(
            "its segment {index} ({} bytes, reserved {:#x}) is not whole sectors or has reserved bits",
            seg.len, seg.reserved
        ));
    }
    let total: u64 = segments.iter().map(|seg| u64::from(seg.len)).sum();
    (total != u64::from(hdr.raw.len)).then(|| format!("its segments add up to {total} bytes"))
}

/// Logs a request whose data layout is wrong (`problem`, which the kernel
/// never sends); `EIO`.
fn malformed(hdr: &Header, config: &WorkerConfig, problem: &str) -> IoError {
    log::error!(
        "queue {}: request {:#x} ({}, len {}): {problem}; failing it with EIO",
        config.queue,
        hdr.id(),
        hdr.op,
        hdr.raw.len
    );
    IoError::Io
}

/// The pieces of the data of a mapped request, each as the request that
/// serves it: `hdr` with a segment's window offset and length, at the
/// sectors that follow the previous piece's.
fn pieces<'s>(hdr: &Header, segments: &'s [bius_segment]) -> impl Iterator<Item = Header> + 's {
    let hdr = *hdr;
    segments.iter().scan(hdr.raw.sector, move |sector, seg| {
        let raw = bius_request {
            sector: *sector,
            len: seg.len,
            window_offset: seg.window_offset,
            nr_segments: 0,
            ..hdr.raw
        };
        let piece = Header { raw, ..hdr };
        *sector = sector.saturating_add(u64::from(seg.len) / SECTOR_SIZE);
        Some(piece)
    })
}

/// The data of a mapped request (or of one piece of it) in `transport`'s
/// window: a read's buffer, or the data of a write or zone append (ops
/// without data are refused before, by [`layout_problem`]).  Data outside
/// the window fails the request with `EIO` (the kernel never sends such).
fn mapped_data<'t, T: Transport>(
    transport: &'t mut T,
    hdr: &Header,
    config: &WorkerConfig,
) -> Result<SharedBytes<'t>, IoError> {
    let (len, at) = (hdr.raw.len as usize, hdr.raw.window_offset);
    transport.window(at, len).ok_or_else(|| {
        log::error!(
            "queue {}: request {:#x} ({}) has {len} bytes mapped at {at:#x}, outside the data window",
            config.queue,
            hdr.id(),
            hdr.op,
        );
        IoError::Io
    })
}

/// Logs a request that the device's limits (or this framework) refuse;
/// returns `err`.
fn invalid(hdr: &Header, config: &WorkerConfig, err: IoError) -> IoError {
    log::warn!(
        "queue {}: invalid request {:#x} ({}, sector {}, len {})",
        config.queue,
        hdr.id(),
        hdr.op,
        hdr.raw.sector,
        hdr.raw.len
    );
    err
}

/// Runs [`serve`] on a new thread named after the queue, counting into
/// `stats`; `exit_guard` is dropped when the thread ends.
pub(crate) fn spawn_worker<T: Transport, D: BlockDevice, G: Send + 'static>(
    transport: T,
    device: Arc<Served<D>>,
    config: WorkerConfig,
    stats: Arc<Recorder>,
    exit_guard: G,
) -> Result<JoinHandle<Result<(), Error>>, Error> {
    spawn_queue_thread(&config, exit_guard, move || {
        serve(transport, &*device, config, stats)
    })
}

/// Runs `work` on a new thread named after the queue of `config`, under
/// its scheduling policy; `exit_guard` is dropped when the thread ends,
/// normally or by a panic.
pub(crate) fn spawn_queue_thread<G: Send + 'static>(
    config: &WorkerConfig,
    exit_guard: G,
    work: impl FnOnce() -> Result<(), Error> + Send + 'static,
) -> Result<JoinHandle<Result<(), Error>>, Error> {
    let (queue, scheduling) = (config.queue, config.scheduling);
    thread::Builder::new()
        .name(format!("bius-q{queue}"))
        .spawn(move || {
            let _exit_guard = exit_guard;
            scheduling.apply(queue);
            work()
        })
        .map_err(Error::from_io)
}

/// Serves requests until the transport reports end of file, counting them
/// into `stats`.
pub(crate) fn serve<T: Transport, D: BlockDevice>(
    transport: T,
    device: &Served<D>,
    config: WorkerConfig,
    stats: Arc<Recorder>,
) -> Result<(), Error> {
    let mut input = vec![0u8; input_bytes(&config)];
    let mut framer = Framer::new(&config);
    let mut worker = Worker::new(transport, device, config, stats);
    loop {
        // The completions of the last requests go with the next fetch.
        let fetched = worker
            .batch
            .flush_and_fetch(&mut worker.transport, &mut input)?;
        let n = match fetched {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                return Err(Error::Kernel {
                    op: ControlOp::Transfer,
                    errno: errno_of(&err),
                })
            }
        };
        worker.arrived = Instant::now();
        framer.feed(&input[..n], |hdr, op, payload, segments| {
            worker.serve_request(hdr, op, payload, segments)
        })?;
    }
    framer.end();
    Ok(())
}

/// Bytes of a worker's read buffer: one largest payload and
/// [`HEADERS_PER_READ`] headers.
fn input_bytes(config: &WorkerConfig) -> usize {
    config.max_io + HEADERS_PER_READ * REQUEST_SIZE
}

struct Worker<'d, T, D> {
    transport: T,
    device: &'d Served<D>,
    config: WorkerConfig,
    batch: Batch,
    stats: Arc<Recorder>,
    /// When the requests being served were read.
    arrived: Instant,
    /// The buffers of dataless requests.
    scratch: Scratch,
}

/// The stand-in buffers of dataless requests (`BIUS_REQ_NO_DATA`), made
/// at the first one: zeroes for a write's data, a scratch buffer for a
/// read's, whose contents go nowhere.
#[derive(Default)]
struct Scratch {
    zeroes: Vec<u8>,
    read: Vec<u8>,
}

impl Scratch {
    /// A write's zeroes and a read's scratch buffer, `len` bytes each
    /// (`len` at most the largest I/O, checked by [`command_of`]).
    fn buffers(&mut self, len: usize) -> (&[u8], &mut [u8]) {
        if self.zeroes.len() < len {
            self.zeroes.resize(len, 0);
            self.read.resize(len, 0);
        }
        (&self.zeroes[..len], &mut self.read[..len])
    }
}

impl<'d, T: Transport, D: BlockDevice> Worker<'d, T, D> {
    /// A worker serving `device` over `transport`, with its buffers.
    fn new(
        transport: T,
        device: &'d Served<D>,
        config: WorkerConfig,
        stats: Arc<Recorder>,
    ) -> Self {
        Worker {
            transport,
            device,
            config,
            batch: Batch::new(&config),
            stats,
            arrived: Instant::now(),
            scratch: Scratch::default(),
        }
    }

    /// Serves one request, of operation `op` (`None`: an op code this
    /// version does not know, refused), and appends its completion to the
    /// batch.  The data of a mapped request is in the transport's window:
    /// a read's buffer there, a write's payload (instead of `payload`), in
    /// one piece or in the `segments` that followed its header.
    fn serve_request(
        &mut self,
        raw: &bius_request,
        op: Option<Op>,
        payload: &[u8],
        segments: &[bius_segment],
    ) -> Result<(), Error> {
        let hdr = match Header::decode(raw, op, &self.config) {
            Ok(hdr) => hdr,
            Err(err) => return self.batch.fail(&mut self.transport, raw.id, err),
        };
        let hdr = &hdr;
        let room = if hdr.in_stream() {
            reply_room(hdr, &self.config)
        } else {
            0
        };
        let out = self.batch.reserve(&mut self.transport, room)?;
        let result = if let Some(problem) = layout_problem(hdr, segments) {
            Err(malformed(hdr, &self.config, &problem))
        } else if let Some(outcome) = replay_outcome(self.device, hdr, &self.config) {
            outcome
        } else if hdr.is_mapped() {
            serve_mapped(
                &mut self.transport,
                self.device,
                hdr,
                segments,
                &self.config,
            )
        } else {
            command_of(hdr, &self.config)
                .map_err(|err| invalid(hdr, &self.config, err))
                .and_then(|command| {
                    let request = if hdr.is_dataless() {
                        let (zeroes, scratch) = self.scratch.buffers(hdr.raw.len as usize);
                        command.request(zeroes, scratch)
                    } else {
                        command.request(payload, out)
                    };
                    guarded(Callee::Device, self.config.queue, hdr.id(), || {
                        self.device.serve(request)
                    })
                })
        };
        self.stats
            .complete(self.config.queue, hdr, &result, self.arrived, None);
        let out = self.batch.reserve(&mut self.transport, room)?;
        let reply = result.and_then(|reply| encode_reply(hdr, reply, out, &self.config));
        self.batch.push(hdr.id(), reply);
        Ok(())
    }
}

/// Serves a mapped request (its layout checked): the data is in the
/// window, in `segments`, or, if there are none, in one piece at
/// `hdr.window_offset`.  Each piece goes to the device as a request of its
/// own, in order, at consecutive offsets, up to the first error, which
/// fails the request; the device sees no piece unless all of them are in
/// the window and the whole request is within its limits.
fn serve_mapped<T: Transport, D: BlockDevice>(
    transport: &mut T,
    device: &Served<D>,
    hdr: &Header,
    segments: &[bius_segment],
    config: &WorkerConfig,
) -> Result<Reply, IoError> {
    let whole = [whole_segment(hdr)];
    let segments = if segments.is_empty() {
        &whole[..]
    } else {
        segments
    };
    for piece in pieces(hdr, segments) {
        mapped_data(transport, &piece, config)?;
    }
    data_offset(hdr, config).map_err(|err| invalid(hdr, config, err))?;
    let mut reply = Reply::Done;
    for piece in pieces(hdr, segments) {
        let mut data = mapped_data(transport, &piece, config)?;
        let command = command_of(&piece, config)?;
        // (the data becomes a slice for the device's call alone)
        let request = if hdr.op == Op::Read {
            command.request(&[], data.as_mut_slice())
        } else {
            command.request(data.as_slice(), &mut [])
        };
        reply = guarded(Callee::Device, config.queue, hdr.id(), || {
            device.serve(request)
        })?;
    }
    Ok(reply)
}

/// The outcome of a replayed request (`BIUS_REQ_REPLAY`) that the device
/// must not serve again ([`Served::replayed`]); `None` for the others.  A
/// panic in the device's judgement fails the request with `EIO`.
fn replay_outcome<D: BlockDevice>(
    device: &Served<D>,
    hdr: &Header,
    config: &WorkerConfig,
) -> Option<Result<Reply, IoError>> {
    if !hdr.is_replay() {
        return None;
    }
    let command = command_of(hdr, config).ok()?;
    guarded(Callee::Device, config.queue, hdr.id(), || {
        Ok(device.replayed(command))
    })
    .unwrap_or_else(|err| Some(Err(err)))
}

/// The one segment of a mapped request that has no segment records.
fn whole_segment(hdr: &Header) -> bius_segment {
    bius_segment {
        window_offset: hdr.raw.window_offset,
        len: hdr.raw.len,
        reserved: 0,
    }
}

/// Completion payload bytes a request may need: the data of a read, the
/// zone descriptors of a report (at most the room the kernel gave and the
/// largest I/O, whole descriptors; the kernel asks again for the rest).
fn reply_room(hdr: &Header, config: &WorkerConfig) -> usize {
    let len = hdr.raw.len as usize;
    match hdr.op {
        Op::Read if len <= config.max_io => len,
        Op::ReportZones => len.min(config.max_io) / ZONE_SIZE * ZONE_SIZE,
        _ => 0,
    }
}

/// The byte offset of a request's range (`len` bytes from `sector`) if
/// all of it is on the device, else `EIO`.
fn range_offset(hdr: &Header, config: &WorkerConfig) -> Result<u64, IoError> {
    let offset = hdr.raw.sector.checked_mul(SECTOR_SIZE).ok_or(IoError::Io)?;
    match offset.checked_add(u64::from(hdr.raw.len)) {
        Some(end) if end <= config.size => Ok(offset),
        _ => Err(IoError::Io),
    }
}

/// The byte offset of a read's, write's or zone append's data if it fits
/// the device: on it, and at most the largest I/O; else `EIO`.
fn data_offset(hdr: &Header, config: &WorkerConfig) -> Result<u64, IoError> {
    if hdr.raw.len as usize > config.max_io {
        return Err(IoError::Io);
    }
    range_offset(hdr, config)
}

/// The command a header stands for, after checking it against the
/// device's limits.
pub(crate) fn command_of(hdr: &Header, config: &WorkerConfig) -> Result<Command, IoError> {
    let len = u64::from(hdr.raw.len);
    let start = || hdr.raw.sector.checked_mul(SECTOR_SIZE).ok_or(IoError::Io);
    let offset = || range_offset(hdr, config);
    // A zone operation names a sector on the device.
    let zone = || {
        let offset = start()?;
        if offset < config.size {
            Ok(offset)
        } else {
            Err(IoError::Io)
        }
    };
    let fua = hdr.flag(bius_sys::BIUS_REQ_FUA);
    Ok(match hdr.op {
        Op::Read => Command::Read {
            offset: data_offset(hdr, config)?,
            len,
        },
        Op::Write => Command::Write {
            offset: data_offset(hdr, config)?,
            len,
            fua,
        },
        Op::Flush => Command::Flush,
        Op::Discard => Command::Discard {
            offset: offset()?,
            len,
        },
        Op::WriteZeroes => Command::WriteZeroes {
            offset: offset()?,
            len,
            unmap: !hdr.flag(bius_sys::BIUS_REQ_NOUNMAP),
        },
        Op::ReportZones => {
            // The room is whole descriptors, at least one.
            if len == 0 || !len.is_multiple_of(ZONE_SIZE as u64) {
                return Err(IoError::InvalidArgument);
            }
            Command::ReportZones {
                offset: start()?,
                max_zones: reply_room(hdr, config) / ZONE_SIZE,
            }
        }
        Op::ZoneOpen => Command::ZoneOpen { offset: zone()? },
        Op::ZoneClose => Command::ZoneClose { offset: zone()? },
        Op::ZoneFinish => Command::ZoneFinish { offset: zone()? },
        Op::ZoneReset => Command::ZoneReset { offset: zone()? },
        Op::ZoneResetAll => Command::ZoneResetAll,
        Op::ZoneAppend => Command::ZoneAppend {
            offset: data_offset(hdr, config)?,
            len,
            fua,
        },
    })
}

/// The completion payload length and sector of a successful request: the
/// data of a read, the descriptors of a report (encoded into `out`), the
/// sector of an append.  A reply that does not fit the request (a device
/// bug) fails it with `EIO`.
fn encode_reply(
    hdr: &Header,
    reply: Reply,
    out: &mut [u8],
    config: &WorkerConfig,
) -> Result<(usize, u64), IoError> {
    let op = hdr.op;
    match reply {
        Reply::Done if op == Op::Read => Ok((out.len(), 0)),
        Reply::Done if !matches!(op, Op::ReportZones | Op::ZoneAppend) => Ok((0, 0)),
        Reply::Zones(zones) if op == Op::ReportZones => {
            // (the worker has checked the zones against the layout)
            let n = zones.len().min(out.len() / ZONE_SIZE);
            for (zone, bytes) in zones[..n].iter().zip(out.chunks_exact_mut(ZONE_SIZE)) {
                abi::encode_zone(zone, bytes);
            }
            Ok((n * ZONE_SIZE, 0))
        }
        Reply::Appended(at) if op == Op::ZoneAppend && at.is_multiple_of(SECTOR_SIZE) => {
            Ok((0, at / SECTOR_SIZE))
        }
        reply => {
            log::error!(
                "queue {}: the device answered a {op} with {reply:?}; failing it with EIO",
                config.queue,
            );
            Err(IoError::Io)
        }
    }
}
