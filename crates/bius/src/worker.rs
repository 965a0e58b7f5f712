//! The worker loop of one hardware queue: reads request records, serves
//! them with the device and writes the completions back in batches.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use bius_sys::{bius_completion, bius_request};
use nix::errno::Errno;

use crate::abi::{self, COMPLETION_SIZE, REQUEST_SIZE, SECTOR_SIZE, ZONE_SIZE};
use crate::error::errno_of;
use crate::transport::Transport;
use crate::zone::{ZoneLayout, ZoneReply, ZoneRequest, ZonedDevice};
use crate::{BlockDevice, ControlOp, Error, IoError, Request};

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

/// How a worker calls its device: block requests through
/// [`BlockDevice::handle`], zone requests through
/// [`ZonedDevice::handle_zone`] or, on a conventional device, not at all.
pub(crate) trait Serve: Send + Sync + 'static {
    /// Serves a block request.
    fn block(&self, request: Request<'_>) -> Result<(), IoError>;
    /// Serves a zone request.
    fn zone(&self, request: ZoneRequest<'_>) -> Result<ZoneReply, IoError>;
}

/// A conventional device: zone requests fail with `EOPNOTSUPP`.
pub(crate) struct Conventional<D>(pub(crate) D);

impl<D: BlockDevice> Serve for Conventional<D> {
    fn block(&self, request: Request<'_>) -> Result<(), IoError> {
        self.0.handle(request)
    }
    fn zone(&self, _request: ZoneRequest<'_>) -> Result<ZoneReply, IoError> {
        Err(IoError::Unsupported)
    }
}

/// A zoned device, with the zones the kernel knows: a report or an append
/// sector the driver would refuse fails with `EIO` instead (logged).
pub(crate) struct Zoned<D> {
    pub(crate) device: D,
    pub(crate) layout: ZoneLayout,
}

impl<D: ZonedDevice> Serve for Zoned<D> {
    fn block(&self, request: Request<'_>) -> Result<(), IoError> {
        self.device.handle(request)
    }

    fn zone(&self, request: ZoneRequest<'_>) -> Result<ZoneReply, IoError> {
        let asked = match &request {
            ZoneRequest::ReportZones { offset, .. } => Some((*offset, None)),
            ZoneRequest::Append { offset, data, .. } => Some((*offset, Some(data.len() as u64))),
            _ => None,
        };
        let reply = self.device.handle_zone(request)?;
        let problem = match (&reply, asked) {
            (ZoneReply::Zones(zones), Some((offset, None))) => self
                .layout
                .report_problem(offset / SECTOR_SIZE, zones)
                .map(|(index, why)| format!("reported zone {index} wrongly: {why}")),
            (ZoneReply::Appended(sector), Some((offset, Some(len))))
                if !self.layout.append_ok(offset / SECTOR_SIZE, len, *sector) =>
            {
                Some(format!(
                    "appended {len} bytes to the zone at byte {offset} at sector {sector}"
                ))
            }
            _ => None,
        };
        match problem {
            Some(problem) => {
                log::error!("the zoned device {problem}; failing the request with EIO");
                Err(IoError::Io)
            }
            None => Ok(reply),
        }
    }
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

/// The data of a mapped request in `transport`'s window: a write's or an
/// append's payload, or a read's buffer.  A mapped request of another op,
/// or one outside the window, fails with `EIO` (the kernel never sends
/// such).
fn mapped_data<'t, T: Transport>(
    transport: &'t mut T,
    hdr: &bius_request,
    config: &WorkerConfig,
) -> Result<(&'t [u8], &'t mut [u8]), IoError> {
    let len = hdr.len as usize;
    let data = match u32::from(hdr.op) {
        bius_sys::BIUS_OP_READ => transport
            .window_mut(hdr.window_offset, len)
            .map(|buf| (&[][..], buf)),
        bius_sys::BIUS_OP_WRITE | bius_sys::BIUS_OP_ZONE_APPEND => transport
            .window(hdr.window_offset, len)
            .map(|data| (data, &mut [][..])),
        _ => None,
    };
    data.ok_or_else(|| {
        log::error!(
            "queue {}: request {:#x} (op {}) is mapped at {:#x}, outside the data window",
            config.queue,
            hdr.id,
            hdr.op,
            hdr.window_offset
        );
        IoError::Io
    })
}

/// Runs [`serve`] on a new thread named after the queue.
pub(crate) fn spawn_worker<T: Transport, D: Serve>(
    transport: T,
    device: Arc<D>,
    config: WorkerConfig,
) -> Result<JoinHandle<Result<(), Error>>, Error> {
    thread::Builder::new()
        .name(format!("bius-q{}", config.queue))
        .spawn(move || serve(transport, &*device, config))
        .map_err(|err| Error::System(errno_of(&err)))
}

/// Serves requests until the transport reports end of file.
pub(crate) fn serve<T: Transport, D: Serve + ?Sized>(
    transport: T,
    device: &D,
    config: WorkerConfig,
) -> Result<(), Error> {
    let mut input = vec![0u8; config.max_io + HEADERS_PER_READ * REQUEST_SIZE];
    let mut worker = Worker {
        transport,
        device,
        config,
        output: vec![0u8; config.max_io + HEADERS_PER_READ * COMPLETION_SIZE],
        used: 0,
        spanning: None,
        assembly: Vec::with_capacity(config.max_io),
    };
    loop {
        let n = match worker.transport.read(&mut input) {
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

impl<T: Transport, D: Serve + ?Sized> Worker<'_, T, D> {
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
                let served = self.serve_request(&hdr, &payload);
                self.assembly = payload;
                served?;
            }
        }
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
            if !has_payload(hdr.op) || is_mapped(&hdr) {
                self.serve_request(&hdr, &[])?;
            } else if input.len() >= hdr.len as usize {
                let (payload, rest) = input.split_at(hdr.len as usize);
                self.serve_request(&hdr, payload)?;
                input = rest;
            } else {
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
    /// buffer there, a write's payload (instead of `payload`).
    fn serve_request(&mut self, hdr: &bius_request, payload: &[u8]) -> Result<(), Error> {
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
        let built = if mapped {
            mapped_data(&mut self.transport, hdr, &self.config).and_then(|(payload, reply_buf)| {
                build_request(hdr, payload, reply_buf, &self.config)
            })
        } else {
            let reply_buf = &mut self.output[body..body + room];
            build_request(hdr, payload, reply_buf, &self.config)
        };
        let result = match built {
            Ok(request) => call_device(self.device, request, hdr.id, self.config.queue),
            Err(err) => {
                log::warn!(
                    "queue {}: invalid request {:#x} (op {}, sector {}, len {})",
                    self.config.queue,
                    hdr.id,
                    hdr.op,
                    hdr.sector,
                    hdr.len
                );
                Err(err)
            }
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

    /// Writes the batch of completions, skipping records the kernel refuses.
    fn flush_completions(&mut self) -> Result<(), Error> {
        let mut pos = 0;
        while pos < self.used {
            match self.transport.write(&self.output[pos..self.used]) {
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
    let offset = || {
        let offset = start()?;
        match offset.checked_add(len) {
            Some(end) if end <= config.size => Ok(offset),
            _ => Err(IoError::Io),
        }
    };
    // A zone operation names a sector on the device.
    let zone = || {
        let offset = start()?;
        if offset < config.size {
            Ok(offset)
        } else {
            Err(IoError::Io)
        }
    };
    let data_fits = || {
        if hdr.len as usize <= config.max_io {
            Ok(())
        } else {
            Err(IoError::Io)
        }
    };
    let flags = u32::from(hdr.flags);
    let block = |request| Ok(Parsed::Block(request));
    let zoned = |request| Ok(Parsed::Zone(request));
    match u32::from(hdr.op) {
        bius_sys::BIUS_OP_READ => {
            data_fits()?;
            block(Request::Read {
                offset: offset()?,
                buf: reply_buf,
            })
        }
        bius_sys::BIUS_OP_WRITE => {
            data_fits()?;
            block(Request::Write {
                offset: offset()?,
                data: payload,
                fua: flags & bius_sys::BIUS_REQ_FUA != 0,
            })
        }
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
        bius_sys::BIUS_OP_ZONE_APPEND => {
            data_fits()?;
            zoned(ZoneRequest::Append {
                offset: offset()?,
                data: payload,
                fua: flags & bius_sys::BIUS_REQ_FUA != 0,
            })
        }
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
