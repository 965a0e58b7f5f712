//! The life of one request in the io_uring backend, in safe code: where a
//! new request goes, the SQE that (re)starts it and what each CQE means
//! for it (continue a short transfer, retry bounced, hand it to the
//! fallback threads, or finish it).

use std::io;

use io_uring::{opcode, squeue, types};
use nix::libc;

use super::sync_ops::{self, bounce_of, direct_ready, AlignedBuf, EFAULT, EOPNOTSUPP};
use super::{FileIo, FileOp};

/// Largest transfer in one SQE; longer ones continue like short ones.
const MAX_CHUNK: usize = 1 << 30;
/// Resubmissions of a request completed with `EINTR` or `EAGAIN`.
const MAX_RETRIES: u8 = 16;

/// What the engine's file and ring support.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caps {
    /// The file was opened with `O_DIRECT`.
    pub(super) direct: bool,
    /// A regular file (`fallocate` works).
    pub(super) regular: bool,
    /// The ring has `FALLOCATE`.
    pub(super) fallocate: bool,
    /// The ring has `FSYNC`.
    pub(super) fsync: bool,
}

/// A request in the ring.
pub(super) struct Inflight {
    pub(super) io: Box<dyn FileIo>,
    /// Bytes transferred so far.
    pub(super) done: usize,
    /// Aligned copy of the buffer, for `O_DIRECT` where the buffer is not.
    pub(super) bounce: Option<AlignedBuf>,
    pub(super) retries: u8,
}

/// What a CQE (or a new request) means for its request: (re)submit it,
/// hand it to the fallback threads, or finish it.
pub(super) enum Step {
    Again,
    Pool,
    Done(io::Result<()>),
}

impl Caps {
    /// Whether a new request goes to the ring (`Ok`, with a bounce buffer
    /// if `O_DIRECT` cannot take its buffer) or elsewhere.
    pub(super) fn route(self, op: FileOp<'_>) -> Result<Option<AlignedBuf>, Step> {
        match op {
            FileOp::Read { ref buf, .. } if self.direct && !direct_ready(buf) => Ok(bounce_of(op)),
            FileOp::Write { data, .. } if self.direct && !direct_ready(data) => Ok(bounce_of(op)),
            FileOp::Read { .. } | FileOp::Write { .. } => Ok(None),
            FileOp::Flush if self.fsync => Ok(None),
            FileOp::Discard { .. } if !self.regular => {
                Err(Step::Done(Err(io::Error::from_raw_os_error(EOPNOTSUPP))))
            }
            FileOp::Discard { .. } | FileOp::WriteZeroes { .. }
                if self.regular && self.fallocate =>
            {
                Ok(None)
            }
            _ => Err(Step::Pool),
        }
    }

    /// What the CQE result `res` means for `entry`.
    pub(super) fn advance(self, entry: &mut Inflight, res: i32) -> Step {
        let op = entry.io.op();
        if res < 0 {
            let errno = -res;
            if matches!(errno, libc::EINTR | libc::EAGAIN) && entry.retries < MAX_RETRIES {
                entry.retries += 1;
                return Step::Again;
            }
            // Pages the kernel cannot pin for O_DIRECT: redo it bounced.
            if errno == EFAULT && self.direct && entry.bounce.is_none() {
                if let Some(aligned) = bounce_of(op) {
                    entry.bounce = Some(aligned);
                    entry.done = 0;
                    return Step::Again;
                }
                return Step::Done(Err(io::Error::from_raw_os_error(errno)));
            }
            let refusable = matches!(
                op,
                FileOp::Flush
                    | FileOp::Discard { .. }
                    | FileOp::WriteZeroes { .. }
                    | FileOp::Write { fua: true, .. }
            );
            if refusable && matches!(errno, libc::EINVAL | EOPNOTSUPP) {
                return Step::Pool;
            }
            return Step::Done(Err(io::Error::from_raw_os_error(errno)));
        }
        let res = res as usize;
        entry.done += res;
        let done = entry.done;
        match op {
            FileOp::Read { buf, .. } if done >= buf.len() => {
                if let Some(bounce) = &entry.bounce {
                    buf.copy_from_slice(bounce.as_slice());
                }
                Step::Done(Ok(()))
            }
            FileOp::Read { .. } if res == 0 => Step::Done(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            ))),
            FileOp::Write { data, .. } if done >= data.len() => Step::Done(Ok(())),
            FileOp::Write { .. } if res == 0 => Step::Done(Err(io::ErrorKind::WriteZero.into())),
            FileOp::Read { .. } | FileOp::Write { .. } => Step::Again,
            _ => Step::Done(Ok(())),
        }
    }
}

/// The SQE continuing `entry` (without its user data); `None` for a kind
/// of request the ring does not serve ([`Caps::route`] sends those to the
/// pool).
pub(super) fn sqe(fd: types::Fd, entry: &mut Inflight) -> Option<squeue::Entry> {
    let done = entry.done;
    let at = |offset: u64| offset + done as u64;
    let chunk = |len: usize| len.min(MAX_CHUNK) as u32;
    Some(match entry.io.op() {
        FileOp::Read { offset, buf } => {
            let target = match &mut entry.bounce {
                Some(bounce) => bounce.as_mut_slice(),
                None => buf,
            };
            let rest = &mut target[done..];
            opcode::Read::new(fd, rest.as_mut_ptr(), chunk(rest.len()))
                .offset(at(offset))
                .build()
        }
        FileOp::Write { offset, data, fua } => {
            let source = match &entry.bounce {
                Some(bounce) => bounce.as_slice(),
                None => data,
            };
            let rest = &source[done..];
            opcode::Write::new(fd, rest.as_ptr(), chunk(rest.len()))
                .offset(at(offset))
                .rw_flags(if fua { libc::RWF_DSYNC } else { 0 })
                .build()
        }
        FileOp::Flush => opcode::Fsync::new(fd)
            .flags(types::FsyncFlags::DATASYNC)
            .build(),
        FileOp::Discard { offset, len } => opcode::Fallocate::new(fd, len)
            .offset(offset)
            .mode(sync_ops::discard_mode().bits())
            .build(),
        FileOp::WriteZeroes { offset, len, unmap } => opcode::Fallocate::new(fd, len)
            .offset(offset)
            .mode(sync_ops::write_zeroes_mode(unmap).bits())
            .build(),
        _ => return None,
    })
}
