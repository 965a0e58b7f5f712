//! The completion records a worker has yet to write, in one buffer, and
//! the `write()` that hands them to the kernel.

use std::io;

use bius_sys::bius_completion;
use nix::errno::Errno;

use super::{WorkerConfig, HEADERS_PER_READ};
use crate::abi::{self, COMPLETION_SIZE};
use crate::error::{errno_of, ControlOp, Error, IoError};
use crate::transport::Transport;

/// A batch of completion records; read payloads and zone reports are
/// produced in place, after their record.
pub(super) struct Batch {
    queue: u32,
    output: Vec<u8>,
    /// Bytes of `output` filled.
    used: usize,
}

impl Batch {
    pub(super) fn new(config: &WorkerConfig) -> Self {
        Batch {
            queue: config.queue,
            output: vec![0u8; config.max_io + HEADERS_PER_READ * COMPLETION_SIZE],
            used: 0,
        }
    }

    /// Makes room for a record with up to `room` payload bytes (writing
    /// the batch first if it is full); returns the room, for the payload.
    pub(super) fn reserve<T: Transport>(
        &mut self,
        transport: &mut T,
        room: usize,
    ) -> Result<&mut [u8], Error> {
        if self.output.len() - self.used < COMPLETION_SIZE + room {
            self.flush(transport)?;
        }
        let body = self.used + COMPLETION_SIZE;
        Ok(&mut self.output[body..body + room])
    }

    /// Appends the record of request `id` after [`Batch::reserve`]: its
    /// payload length and sector, or its error.
    pub(super) fn push(&mut self, id: u64, reply: Result<(usize, u64), IoError>) {
        let comp = match reply {
            Ok((len, sector)) => bius_completion {
                id,
                result: 0,
                len: len as u32,
                sector,
            },
            Err(err) => bius_completion {
                id,
                result: -(err.errno() as i32),
                len: 0,
                sector: 0,
            },
        };
        let start = self.used;
        let body = start + COMPLETION_SIZE;
        abi::encode_completion(&comp, &mut self.output[start..body]);
        self.used = body + comp.len as usize;
    }

    /// Writes the batch, skipping records the kernel refuses.
    pub(super) fn flush<T: Transport>(&mut self, transport: &mut T) -> Result<(), Error> {
        let mut pos = 0;
        while pos < self.used {
            match transport.complete(&self.output[pos..self.used]) {
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
                        log::debug!("queue {}: device stopped, completions dropped", self.queue);
                        break;
                    }
                    errno @ (Errno::EINVAL | Errno::ENOENT | Errno::EXDEV) => {
                        let comp = abi::decode_completion(&self.output[pos..]);
                        log::warn!(
                            "queue {}: kernel refused the completion of request {:#x} ({errno})",
                            self.queue,
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
