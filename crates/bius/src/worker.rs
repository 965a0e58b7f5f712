//! The worker loop of one hardware queue: reads request records, serves
//! them with the [`BlockDevice`] and writes the completions back in batches.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use bius_sys::{bius_completion, bius_request};
use nix::errno::Errno;

use crate::abi::{self, COMPLETION_SIZE, REQUEST_SIZE, SECTOR_SIZE};
use crate::error::errno_of;
use crate::transport::Transport;
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

/// Runs [`serve`] on a new thread named after the queue.
pub(crate) fn spawn_worker<T: Transport, D: BlockDevice>(
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
pub(crate) fn serve<T: Transport, D: BlockDevice + ?Sized>(
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
    /// in place by the device.
    output: Vec<u8>,
    /// Bytes of `output` filled.
    used: usize,
    /// A write whose payload continues in the next read.
    spanning: Option<bius_request>,
    /// The part of the spanning write's payload received so far.
    assembly: Vec<u8>,
}

impl<T: Transport, D: BlockDevice + ?Sized> Worker<'_, T, D> {
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
            if u32::from(hdr.op) != bius_sys::BIUS_OP_WRITE {
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

    /// Serves one request and appends its completion to the batch.
    fn serve_request(&mut self, hdr: &bius_request, payload: &[u8]) -> Result<(), Error> {
        let is_read = u32::from(hdr.op) == bius_sys::BIUS_OP_READ;
        let read_len = if is_read && hdr.len as usize <= self.config.max_io {
            hdr.len as usize
        } else {
            0
        };
        if self.output.len() - self.used < COMPLETION_SIZE + read_len {
            self.flush_completions()?;
        }
        let start = self.used;
        let body = start + COMPLETION_SIZE;
        let read_buf = &mut self.output[body..body + read_len];
        let result = match build_request(hdr, payload, read_buf, &self.config) {
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
        let comp = bius_completion {
            id: hdr.id,
            result: result.err().map_or(0, |err| -(err.errno() as i32)),
            len: if result.is_ok() { read_len as u32 } else { 0 },
            sector: 0,
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

/// The [`Request`] a header stands for, after checking it against the
/// device's limits.
fn build_request<'a>(
    hdr: &bius_request,
    payload: &'a [u8],
    read_buf: &'a mut [u8],
    config: &WorkerConfig,
) -> Result<Request<'a>, IoError> {
    let len = u64::from(hdr.len);
    let offset = || {
        let offset = hdr.sector.checked_mul(SECTOR_SIZE).ok_or(IoError::Io)?;
        match offset.checked_add(len) {
            Some(end) if end <= config.size => Ok(offset),
            _ => Err(IoError::Io),
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
    match u32::from(hdr.op) {
        bius_sys::BIUS_OP_READ => {
            data_fits()?;
            Ok(Request::Read {
                offset: offset()?,
                buf: read_buf,
            })
        }
        bius_sys::BIUS_OP_WRITE => {
            data_fits()?;
            Ok(Request::Write {
                offset: offset()?,
                data: payload,
                fua: flags & bius_sys::BIUS_REQ_FUA != 0,
            })
        }
        bius_sys::BIUS_OP_FLUSH => Ok(Request::Flush),
        bius_sys::BIUS_OP_DISCARD => Ok(Request::Discard {
            offset: offset()?,
            len,
        }),
        bius_sys::BIUS_OP_WRITE_ZEROES => Ok(Request::WriteZeroes {
            offset: offset()?,
            len,
            unmap: flags & bius_sys::BIUS_REQ_NOUNMAP == 0,
        }),
        _ => Err(IoError::Unsupported),
    }
}

/// Calls the device; a panic fails the request with `EIO`.
fn call_device<D: BlockDevice + ?Sized>(
    device: &D,
    request: Request<'_>,
    id: u64,
    queue: u32,
) -> Result<(), IoError> {
    catch_unwind(AssertUnwindSafe(|| device.handle(request))).unwrap_or_else(|_| {
        log::error!(
            "queue {queue}: the device panicked serving request {id:#x}; failing it with EIO"
        );
        Err(IoError::Io)
    })
}
