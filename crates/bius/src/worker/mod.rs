//! The worker loop of one hardware queue: reads request records, serves
//! them with the device and writes the completions back in batches.  How
//! a worker calls its device is in [`serve`].

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use bius_sys::{bius_completion, bius_request, bius_segment};
use nix::errno::Errno;

use crate::abi::{
    self, COMPLETION_SIZE, MAX_SEGMENTS, REQUEST_SIZE, SECTOR_SIZE, SEGMENT_SIZE, ZONE_SIZE,
};
use crate::block::Request;
use crate::error::{errno_of, ControlOp, Error, IoError};
use crate::transport::Transport;
use crate::zone::request::{ZoneReply, ZoneRequest};
use serve::Serve;

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

/// Whether a request's data is in the data window (`BIUS_REQ_MAPPED`).
fn is_mapped(hdr: &bius_request) -> bool {
    u32::from(hdr.flags) & bius_sys::BIUS_REQ_MAPPED != 0
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
        let data_op = matches!(
            op,
            bius_sys::BIUS_OP_READ | bius_sys::BIUS_OP_WRITE | bius_sys::BIUS_OP_ZONE_APPEND
        );
        return (is_mapped(hdr) && !data_op).then(|| "it is mapped but has no data".into());
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

/// Decodes the `hdr.nr_segments` segment records at the start of `input`
/// into `records` and moves `input` past them; none if the request has
/// none.  Records missing from `input` (the kernel never splits them from
/// their header), or a count of 1 or more than `BIUS_MAP_MAX_SEGMENTS`,
/// are a protocol error: the stream can no longer be trusted.
fn take_segments<'r>(
    hdr: &bius_request,
    input: &mut &[u8],
    records: &'r mut [bius_segment; MAX_SEGMENTS],
    queue: u32,
) -> Result<&'r [bius_segment], Error> {
    let count = usize::from(hdr.nr_segments);
    if count == 0 {
        return Ok(&[]);
    }
    let bytes = count * SEGMENT_SIZE;
    if count == 1 || count > MAX_SEGMENTS || input.len() < bytes {
        log::error!(
            "queue {queue}: request {:#x} has {count} segment records, {} bytes of them in this read",
            hdr.id,
            input.len().min(bytes)
        );
        return Err(Error::Protocol { queue });
    }
    let (encoded, rest) = input.split_at(bytes);
    for (record, bytes) in records.iter_mut().zip(encoded.chunks_exact(SEGMENT_SIZE)) {
        *record = abi::decode_segment(bytes);
    }
    *input = rest;
    Ok(&records[..count])
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

/// Runs [`serve`] on a new thread named after the queue; `exit_guard` is
/// dropped when the thread ends.
pub(crate) fn spawn_worker<T: Transport, D: Serve, G: Send + 'static>(
    transport: T,
    device: Arc<D>,
    config: WorkerConfig,
    exit_guard: G,
) -> Result<JoinHandle<Result<(), Error>>, Error> {
    thread::Builder::new()
        .name(format!("bius-q{}", config.queue))
        .spawn(move || {
            // dropped when the thread ends, normally or by a panic
            let _exit_guard = exit_guard;
            serve(transport, &*device, config)
        })
        .map_err(Error::from_io)
}

/// Serves requests until the transport reports end of file.
pub(crate) fn serve<T: Transport, D: Serve + ?Sized>(
    transport: T,
    device: &D,
    config: WorkerConfig,
) -> Result<(), Error> {
    let mut input = vec![0u8; config.max_io + HEADERS_PER_READ * REQUEST_SIZE];
    let mut worker = Worker::new(transport, device, config);
    loop {
        let n = match worker.transport.fetch(&mut input) {
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
        worker.process(&input[..n])?;
        worker.flush_completions()?;
    }
    if let Some(hdr) = worker.spanning {
        log::debug!(
            "queue {}: stopped while receiving the payload of request {:#x}",
            config.queue,
            hdr.id
        );
    }
    Ok(())
}

struct Worker<'d, T, D: ?Sized> {
    transport: T,
    device: &'d D,
    config: WorkerConfig,
    /// Completion records of the current batch; read payloads are produced
    /// in place by the device, zone reports encoded in place.
    output: Vec<u8>,
    /// Bytes of `output` filled.
    used: usize,
    /// A write or zone append whose payload continues in the next read.
    spanning: Option<bius_request>,
    /// The part of the spanning payload received so far.
    assembly: Vec<u8>,
}

impl<'d, T: Transport, D: Serve + ?Sized> Worker<'d, T, D> {
    /// A worker serving `device` over `transport`, with its buffers.
    fn new(transport: T, device: &'d D, config: WorkerConfig) -> Self {
        Worker {
            transport,
            device,
            config,
            output: vec![0u8; config.max_io + HEADERS_PER_READ * COMPLETION_SIZE],
            used: 0,
            spanning: None,
            assembly: Vec::with_capacity(config.max_io),
        }
    }

    /// Serves every record of one read.
    fn process(&mut self, mut input: &[u8]) -> Result<(), Error> {
        if let Some(hdr) = self.spanning {
            let missing = hdr.len as usize - self.assembly.len();
            let (part, rest) = input.split_at(missing.min(input.len()));
            self.assembly.extend_from_slice(part);
            input = rest;
            if self.assembly.len() == hdr.len as usize {
                self.spanning = None;
                let payload = std::mem::take(&mut self.assembly);
                let served = self.serve_request(&hdr, &payload, &[]);
                self.assembly = payload;
                served?;
            }
        }
        let mut records = [bius_segment::default(); MAX_SEGMENTS];
        while !input.is_empty() {
            if input.len() < REQUEST_SIZE {
                log::error!(
                    "queue {}: truncated request header ({} bytes)",
                    self.config.queue,
                    input.len()
                );
                return Err(Error::Protocol {
                    queue: self.config.queue,
                });
            }
            let hdr = abi::decode_request(input);
            input = &input[REQUEST_SIZE..];
            let segments = take_segments(&hdr, &mut input, &mut records, self.config.queue)?;
            if !has_payload(hdr.op) || is_mapped(&hdr) {
                self.serve_request(&hdr, &[], segments)?;
            } else if input.len() >= hdr.len as usize {
                let (payload, rest) = input.split_at(hdr.len as usize);
                self.serve_request(&hdr, payload, segments)?;
                input = rest;
            } else {
                // (Segments on a request with a payload are refused when it
                // is served: they need not be kept.)
                self.assembly.clear();
                self.assembly.extend_from_slice(input);
                self.spanning = Some(hdr);
                input = &[];
            }
        }
        Ok(())
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
        let room = if mapped {
            0
        } else {
            reply_room(hdr, &self.config)
        };
        if self.output.len() - self.used < COMPLETION_SIZE + room {
            self.flush_completions()?;
        }
        let start = self.used;
        let body = start + COMPLETION_SIZE;
        let result = if let Some(problem) = layout_problem(hdr, segments) {
            log::error!(
                "queue {}: request {:#x} (op {}, len {}): {problem}; failing it with EIO",
                self.config.queue,
                hdr.id,
                hdr.op,
                hdr.len
            );
            Err(IoError::Io)
        } else if mapped {
            self.serve_mapped(hdr, segments)
        } else {
            let reply_buf = &mut self.output[body..body + room];
            build_request(hdr, payload, reply_buf, &self.config)
                .map_err(|err| invalid(hdr, &self.config, err))
                .and_then(|request| call_device(self.device, request, hdr.id, self.config.queue))
        };
        let reply = result.and_then(|reply| {
            encode_reply(
                hdr,
                reply,
                &mut self.output[body..body + room],
                &self.config,
            )
        });
        let comp = match reply {
            Ok((len, sector)) => bius_completion {
                id: hdr.id,
                result: 0,
                len: len as u32,
                sector,
            },
            Err(err) => bius_completion {
                id: hdr.id,
                result: -(err.errno() as i32),
                len: 0,
                sector: 0,
            },
        };
        abi::encode_completion(&comp, &mut self.output[start..body]);
        self.used = body + comp.len as usize;
        Ok(())
    }

    /// Serves a mapped request (its layout checked): the data is in the
    /// window, in `segments`, or, if there are none, in one piece at
    /// `hdr.window_offset`.  Each piece goes to the device as a request of
    /// its own, in order, at consecutive offsets, up to the first error,
    /// which fails the request; the device sees no piece unless all of
    /// them are in the window and the whole request is within its limits.
    fn serve_mapped(
        &mut self,
        hdr: &bius_request,
        segments: &[bius_segment],
    ) -> Result<ZoneReply, IoError> {
        let whole = [bius_segment {
            window_offset: hdr.window_offset,
            len: hdr.len,
            reserved: 0,
        }];
        let segments = if segments.is_empty() {
            &whole[..]
        } else {
            segments
        };
        for piece in pieces(hdr, segments) {
            mapped_data(&mut self.transport, &piece, &self.config)?;
        }
        data_offset(hdr, &self.config).map_err(|err| invalid(hdr, &self.config, err))?;
        let mut reply = ZoneReply::Done;
        for piece in pieces(hdr, segments) {
            let (payload, buf) = mapped_data(&mut self.transport, &piece, &self.config)?;
            let request = build_request(&piece, payload, buf, &self.config)?;
            reply = call_device(self.device, request, hdr.id, self.config.queue)?;
        }
        Ok(reply)
    }

    /// Writes the batch of completions, skipping records the kernel refuses.
    fn flush_completions(&mut self) -> Result<(), Error> {
        let mut pos = 0;
        while pos < self.used {
            match self.transport.complete(&self.output[pos..self.used]) {
                // A short count stops before a refused record: writing again
                // from there reports the refusal's errno.
                Ok(n) if n > 0 => pos += n,
                Ok(_) => {
                    return Err(Error::Kernel {
                        op: ControlOp::Transfer,
                        errno: Errno::EIO,
                    })
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => match errno_of(&err) {
                    Errno::ENODEV | Errno::ENOTCONN => {
                        log::debug!(
                            "queue {}: device stopped, completions dropped",
                            self.config.queue
                        );
                        break;
                    }
                    errno @ (Errno::EINVAL | Errno::ENOENT | Errno::EXDEV) => {
                        let comp = abi::decode_completion(&self.output[pos..]);
                        log::warn!(
                            "queue {}: kernel refused the completion of request {:#x} ({errno})",
                            self.config.queue,
                            comp.id
                        );
                        pos += COMPLETION_SIZE + comp.len as usize;
                    }
                    errno => {
                        return Err(Error::Kernel {
                            op: ControlOp::Transfer,
                            errno,
                        })
                    }
                },
            }
        }
        self.used = 0;
        Ok(())
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

/// A block or a zone request.
enum Parsed<'a> {
    Block(Request<'a>),
    Zone(ZoneRequest<'a>),
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

/// The request a header stands for, after checking it against the
/// device's limits.  A read's data goes to `reply_buf`.
fn build_request<'a>(
    hdr: &bius_request,
    payload: &'a [u8],
    reply_buf: &'a mut [u8],
    config: &WorkerConfig,
) -> Result<Parsed<'a>, IoError> {
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
    let block = |request| Ok(Parsed::Block(request));
    let zoned = |request| Ok(Parsed::Zone(request));
    match u32::from(hdr.op) {
        bius_sys::BIUS_OP_READ => block(Request::Read {
            offset: data_offset(hdr, config)?,
            buf: reply_buf,
        }),
        bius_sys::BIUS_OP_WRITE => block(Request::Write {
            offset: data_offset(hdr, config)?,
            data: payload,
            fua: flags & bius_sys::BIUS_REQ_FUA != 0,
        }),
        bius_sys::BIUS_OP_FLUSH => block(Request::Flush),
        bius_sys::BIUS_OP_DISCARD => block(Request::Discard {
            offset: offset()?,
            len,
        }),
        bius_sys::BIUS_OP_WRITE_ZEROES => block(Request::WriteZeroes {
            offset: offset()?,
            len,
            unmap: flags & bius_sys::BIUS_REQ_NOUNMAP == 0,
        }),
        bius_sys::BIUS_OP_REPORT_ZONES => {
            // The room is whole descriptors, at least one.
            if len == 0 || !len.is_multiple_of(ZONE_SIZE as u64) {
                return Err(IoError::InvalidArgument);
            }
            zoned(ZoneRequest::ReportZones {
                offset: start()?,
                max_zones: reply_buf.len() / ZONE_SIZE,
            })
        }
        bius_sys::BIUS_OP_ZONE_OPEN => zoned(ZoneRequest::Open { offset: zone()? }),
        bius_sys::BIUS_OP_ZONE_CLOSE => zoned(ZoneRequest::Close { offset: zone()? }),
        bius_sys::BIUS_OP_ZONE_FINISH => zoned(ZoneRequest::Finish { offset: zone()? }),
        bius_sys::BIUS_OP_ZONE_RESET => zoned(ZoneRequest::Reset { offset: zone()? }),
        bius_sys::BIUS_OP_ZONE_RESET_ALL => zoned(ZoneRequest::ResetAll),
        bius_sys::BIUS_OP_ZONE_APPEND => zoned(ZoneRequest::Append {
            offset: data_offset(hdr, config)?,
            data: payload,
            fua: flags & bius_sys::BIUS_REQ_FUA != 0,
        }),
        _ => Err(IoError::Unsupported),
    }
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

/// Calls the device; a panic fails the request with `EIO`.  A block
/// request's success is [`ZoneReply::Done`].
fn call_device<D: Serve + ?Sized>(
    device: &D,
    request: Parsed<'_>,
    id: u64,
    queue: u32,
) -> Result<ZoneReply, IoError> {
    catch_unwind(AssertUnwindSafe(|| match request {
        Parsed::Block(request) => device.block(request).map(|()| ZoneReply::Done),
        Parsed::Zone(request) => device.zone(request),
    }))
    .unwrap_or_else(|_| {
        log::error!(
            "queue {queue}: the device panicked serving request {id:#x}; failing it with EIO"
        );
        Err(IoError::Io)
    })
}
