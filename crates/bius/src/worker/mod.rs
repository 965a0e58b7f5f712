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
use crate::deferred::IoCommand;
use crate::error::{errno_of, ControlOp, Error, IoError};
use crate::stats::Recorder;
use crate::transport::Transport;
use crate::zone::request::ZoneReply;
use batch::Batch;
use framing::Framer;
use serve::{guarded, Callee, Serve};

mod batch;
pub(crate) mod deferred;
mod framing;
pub(crate) mod serve;
#[cfg(test)]
mod tests;

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
}

/// Whether a payload follows the request header in the stream.
fn has_payload(op: u8) -> bool {
    matches!(
        u32::from(op),
        bius_sys::BIUS_OP_WRITE | bius_sys::BIUS_OP_ZONE_APPEND
    )
}

/// Whether requests of `op` have data: reads, writes, zone appends.
pub(crate) fn has_data(op: u8) -> bool {
    u32::from(op) == bius_sys::BIUS_OP_READ || has_payload(op)
}

/// Whether a request's data is in the data window (`BIUS_REQ_MAPPED`).
fn is_mapped(hdr: &bius_request) -> bool {
    u32::from(hdr.flags) & bius_sys::BIUS_REQ_MAPPED != 0
}

/// Whether a request moves no data (`BIUS_REQ_NO_DATA`: its device has
/// [`Capabilities::no_data`](crate::Capabilities::no_data)): no payload in
/// the stream, none in the completion.
fn is_dataless(hdr: &bius_request) -> bool {
    u32::from(hdr.flags) & bius_sys::BIUS_REQ_NO_DATA != 0
}

/// Whether a request's data travels in the streams: neither mapped nor
/// dataless.
fn in_stream(hdr: &bius_request) -> bool {
    !is_mapped(hdr) && !is_dataless(hdr)
}

/// What is wrong with where a request's data is, if anything (the kernel
/// never sends such): segment records on a request other than a mapped
/// read or write; a segment that is empty, not whole sectors or has
/// reserved bits set; segments that do not add up to the request's length;
/// a mapped request of an op without data.  `segments` are the records
/// that followed the header (none for an unsegmented request).
fn layout_problem(hdr: &bius_request, segments: &[bius_segment]) -> Option<String> {
    let op = u32::from(hdr.op);
    if hdr.nr_segments == 0 {
        return (is_mapped(hdr) && !has_data(hdr.op))
            .then(|| "it is mapped but has no data".into());
    }
    if !is_mapped(hdr) || !matches!(op, bius_sys::BIUS_OP_READ | bius_sys::BIUS_OP_WRITE) {
        return Some(format!(
            "it has {} segments but is not a mapped read or write",
            hdr.nr_segments
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
    (total != u64::from(hdr.len)).then(|| format!("its segments add up to {total} bytes"))
}

/// The pieces of the data of a mapped request, each as the request that
/// serves it: `hdr` with a segment's window offset and length, at the
/// sectors that follow the previous piece's.
fn pieces<'s>(
    hdr: &bius_request,
    segments: &'s [bius_segment],
) -> impl Iterator<Item = bius_request> + 's {
    let hdr = *hdr;
    segments.iter().scan(hdr.sector, move |sector, seg| {
        let piece = bius_request {
            sector: *sector,
            len: seg.len,
            window_offset: seg.window_offset,
            nr_segments: 0,
            ..hdr
        };
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
    hdr: &bius_request,
    config: &WorkerConfig,
) -> Result<(&'t [u8], &'t mut [u8]), IoError> {
    let len = hdr.len as usize;
    let data = if u32::from(hdr.op) == bius_sys::BIUS_OP_READ {
        transport
            .window_mut(hdr.window_offset, len)
            .map(|buf| (&[][..], buf))
    } else {
        transport
            .window(hdr.window_offset, len)
            .map(|data| (data, &mut [][..]))
    };
    data.ok_or_else(|| {
        log::error!(
            "queue {}: request {:#x} (op {}) has {} bytes mapped at {:#x}, outside the data window",
            config.queue,
            hdr.id,
            hdr.op,
            hdr.len,
            hdr.window_offset
        );
        IoError::Io
    })
}

/// Logs a request that the device's limits (or this framework) refuse;
/// returns `err`.
fn invalid(hdr: &bius_request, config: &WorkerConfig, err: IoError) -> IoError {
    log::warn!(
        "queue {}: invalid request {:#x} (op {}, sector {}, len {})",
        config.queue,
        hdr.id,
        hdr.op,
        hdr.sector,
        hdr.len
    );
    err
}

/// Runs [`serve`] on a new thread named after the queue, counting into
/// `stats`; `exit_guard` is dropped when the thread ends.
pub(crate) fn spawn_worker<T: Transport, D: Serve, G: Send + 'static>(
    transport: T,
    device: Arc<D>,
    config: WorkerConfig,
    stats: Arc<Recorder>,
    exit_guard: G,
) -> Result<JoinHandle<Result<(), Error>>, Error> {
    spawn_queue_thread(config.queue, exit_guard, move || {
        serve(transport, &*device, config, stats)
    })
}

/// Runs `work` on a new thread named after queue `queue`; `exit_guard`
/// is dropped when the thread ends, normally or by a panic.
pub(crate) fn spawn_queue_thread<G: Send + 'static>(
    queue: u32,
    exit_guard: G,
    work: impl FnOnce() -> Result<(), Error> + Send + 'static,
) -> Result<JoinHandle<Result<(), Error>>, Error> {
    thread::Builder::new()
        .name(format!("bius-q{queue}"))
        .spawn(move || {
            let _exit_guard = exit_guard;
            work()
        })
        .map_err(Error::from_io)
}

/// Serves requests until the transport reports end of file, counting them
/// into `stats`.
pub(crate) fn serve<T: Transport, D: Serve + ?Sized>(
    transport: T,
    device: &D,
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
        framer.feed(&input[..n], |hdr, payload, segments| {
            worker.serve_request(hdr, payload, segments)
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

struct Worker<'d, T, D: ?Sized> {
    transport: T,
    device: &'d D,
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

impl<'d, T: Transport, D: Serve + ?Sized> Worker<'d, T, D> {
    /// A worker serving `device` over `transport`, with its buffers.
    fn new(transport: T, device: &'d D, config: WorkerConfig, stats: Arc<Recorder>) -> Self {
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

    /// Serves one request and appends its completion to the batch.  The
    /// data of a mapped request is in the transport's window: a read's
    /// buffer there, a write's payload (instead of `payload`), in one
    /// piece or in the `segments` that followed its header.
    fn serve_request(
        &mut self,
        hdr: &bius_request,
        payload: &[u8],
        segments: &[bius_segment],
    ) -> Result<(), Error> {
        let mapped = is_mapped(hdr);
        let room = if in_stream(hdr) {
            reply_room(hdr, &self.config)
        } else {
            0
        };
        let out = self.batch.reserve(&mut self.transport, room)?;
        let result = if let Some(problem) = layout_problem(hdr, segments) {
            log::error!(
                "queue {}: request {:#x} (op {}, len {}): {problem}; failing it with EIO",
                self.config.queue,
                hdr.id,
                hdr.op,
                hdr.len
            );
            Err(IoError::Io)
        } else if let Some(outcome) = replay_outcome(self.device, hdr, &self.config) {
            outcome
        } else if mapped {
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
                    let request = if is_dataless(hdr) {
                        let (zeroes, scratch) = self.scratch.buffers(hdr.len as usize);
                        command.request(zeroes, scratch)
                    } else {
                        command.request(payload, out)
                    };
                    guarded(Callee::Device, self.config.queue, hdr.id, || {
                        self.device.serve(request)
                    })
                })
        };
        self.stats
            .complete(self.config.queue, hdr, &result, self.arrived);
        let out = self.batch.reserve(&mut self.transport, room)?;
        let reply = result.and_then(|reply| encode_reply(hdr, reply, out, &self.config));
        self.batch.push(hdr.id, reply);
        Ok(())
    }
}

/// Serves a mapped request (its layout checked): the data is in the
/// window, in `segments`, or, if there are none, in one piece at
/// `hdr.window_offset`.  Each piece goes to the device as a request of its
/// own, in order, at consecutive offsets, up to the first error, which
/// fails the request; the device sees no piece unless all of them are in
/// the window and the whole request is within its limits.
fn serve_mapped<T: Transport, D: Serve + ?Sized>(
    transport: &mut T,
    device: &D,
    hdr: &bius_request,
    segments: &[bius_segment],
    config: &WorkerConfig,
) -> Result<ZoneReply, IoError> {
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
    let mut reply = ZoneReply::Done;
    for piece in pieces(hdr, segments) {
        let (payload, buf) = mapped_data(transport, &piece, config)?;
        let request = command_of(&piece, config)?.request(payload, buf);
        reply = guarded(Callee::Device, config.queue, hdr.id, || {
            device.serve(request)
        })?;
    }
    Ok(reply)
}

/// The outcome of a replayed request (`BIUS_REQ_REPLAY`) that the device
/// must not serve again ([`Serve::replayed`]); `None` for the others.  A
/// panic in the device's judgement fails the request with `EIO`.
fn replay_outcome<D: Serve + ?Sized>(
    device: &D,
    hdr: &bius_request,
    config: &WorkerConfig,
) -> Option<Result<ZoneReply, IoError>> {
    if u32::from(hdr.flags) & bius_sys::BIUS_REQ_REPLAY == 0 {
        return None;
    }
    let command = command_of(hdr, config).ok()?;
    guarded(Callee::Device, config.queue, hdr.id, || {
        Ok(device.replayed(command))
    })
    .unwrap_or_else(|err| Some(Err(err)))
}

/// The one segment of a mapped request that has no segment records.
fn whole_segment(hdr: &bius_request) -> bius_segment {
    bius_segment {
        window_offset: hdr.window_offset,
        len: hdr.len,
        reserved: 0,
    }
}

/// Completion payload bytes a request may need: the data of a read, the
/// zone descriptors of a report (at most the room the kernel gave and the
/// largest I/O, whole descriptors; the kernel asks again for the rest).
fn reply_room(hdr: &bius_request, config: &WorkerConfig) -> usize {
    let len = hdr.len as usize;
    match u32::from(hdr.op) {
        bius_sys::BIUS_OP_READ if len <= config.max_io => len,
        bius_sys::BIUS_OP_REPORT_ZONES => len.min(config.max_io) / ZONE_SIZE * ZONE_SIZE,
        _ => 0,
    }
}

/// The byte offset of a request's range (`len` bytes from `sector`) if
/// all of it is on the device, else `EIO`.
fn range_offset(hdr: &bius_request, config: &WorkerConfig) -> Result<u64, IoError> {
    let offset = hdr.sector.checked_mul(SECTOR_SIZE).ok_or(IoError::Io)?;
    match offset.checked_add(u64::from(hdr.len)) {
        Some(end) if end <= config.size => Ok(offset),
        _ => Err(IoError::Io),
    }
}

/// The byte offset of a read's, write's or zone append's data if it fits
/// the device: on it, and at most the largest I/O; else `EIO`.
fn data_offset(hdr: &bius_request, config: &WorkerConfig) -> Result<u64, IoError> {
    if hdr.len as usize > config.max_io {
        return Err(IoError::Io);
    }
    range_offset(hdr, config)
}

/// The command a header stands for, after checking it against the
/// device's limits.
pub(crate) fn command_of(hdr: &bius_request, config: &WorkerConfig) -> Result<IoCommand, IoError> {
    let len = u64::from(hdr.len);
    let start = || hdr.sector.checked_mul(SECTOR_SIZE).ok_or(IoError::Io);
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
    let flags = u32::from(hdr.flags);
    let fua = flags & bius_sys::BIUS_REQ_FUA != 0;
    let data_len = hdr.len as usize;
    Ok(match u32::from(hdr.op) {
        bius_sys::BIUS_OP_READ => IoCommand::Read {
            offset: data_offset(hdr, config)?,
            len: data_len,
        },
        bius_sys::BIUS_OP_WRITE => IoCommand::Write {
            offset: data_offset(hdr, config)?,
            len: data_len,
            fua,
        },
        bius_sys::BIUS_OP_FLUSH => IoCommand::Flush,
        bius_sys::BIUS_OP_DISCARD => IoCommand::Discard {
            offset: offset()?,
            len,
        },
        bius_sys::BIUS_OP_WRITE_ZEROES => IoCommand::WriteZeroes {
            offset: offset()?,
            len,
            unmap: flags & bius_sys::BIUS_REQ_NOUNMAP == 0,
        },
        bius_sys::BIUS_OP_REPORT_ZONES => {
            // The room is whole descriptors, at least one.
            if len == 0 || !len.is_multiple_of(ZONE_SIZE as u64) {
                return Err(IoError::InvalidArgument);
            }
            IoCommand::ReportZones {
                offset: start()?,
                max_zones: reply_room(hdr, config) / ZONE_SIZE,
            }
        }
        bius_sys::BIUS_OP_ZONE_OPEN => IoCommand::ZoneOpen { offset: zone()? },
        bius_sys::BIUS_OP_ZONE_CLOSE => IoCommand::ZoneClose { offset: zone()? },
        bius_sys::BIUS_OP_ZONE_FINISH => IoCommand::ZoneFinish { offset: zone()? },
        bius_sys::BIUS_OP_ZONE_RESET => IoCommand::ZoneReset { offset: zone()? },
        bius_sys::BIUS_OP_ZONE_RESET_ALL => IoCommand::ZoneResetAll,
        bius_sys::BIUS_OP_ZONE_APPEND => IoCommand::ZoneAppend {
            offset: data_offset(hdr, config)?,
            len: data_len,
            fua,
        },
        _ => return Err(IoError::Unsupported),
    })
}

/// The completion payload length and sector of a successful request: the
/// data of a read, the descriptors of a report (encoded into `out`), the
/// sector of an append.  A reply that does not fit the request (a device
/// bug) fails it with `EIO`.
fn encode_reply(
    hdr: &bius_request,
    reply: ZoneReply,
    out: &mut [u8],
    config: &WorkerConfig,
) -> Result<(usize, u64), IoError> {
    let op = u32::from(hdr.op);
    match reply {
        ZoneReply::Done if op == bius_sys::BIUS_OP_READ => Ok((out.len(), 0)),
        ZoneReply::Done
            if op != bius_sys::BIUS_OP_REPORT_ZONES && op != bius_sys::BIUS_OP_ZONE_APPEND =>
        {
            Ok((0, 0))
        }
        ZoneReply::Zones(zones) if op == bius_sys::BIUS_OP_REPORT_ZONES => {
            // (Zoned::zone has checked the zones against the layout.)
            let n = zones.len().min(out.len() / ZONE_SIZE);
            for (zone, bytes) in zones[..n].iter().zip(out.chunks_exact_mut(ZONE_SIZE)) {
                abi::encode_zone(zone, bytes);
            }
            Ok((n * ZONE_SIZE, 0))
        }
        ZoneReply::Appended(sector) if op == bius_sys::BIUS_OP_ZONE_APPEND => Ok((0, sector)),
        reply => {
            log::error!(
                "queue {}: the device answered op {} with {reply:?}; failing it with EIO",
                config.queue,
                hdr.op
            );
            Err(IoError::Io)
        }
    }
}
