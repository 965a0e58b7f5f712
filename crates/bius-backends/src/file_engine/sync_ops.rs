//! Synchronous execution of a [`FileOp`]: positioned reads and writes,
//! `fdatasync` and `fallocate`.  [`crate::File`] runs every request through
//! it, and so do the engine's worker threads; the io_uring backend shares
//! its `O_DIRECT` alignment rule, its bounce buffers and its `fallocate`
//! modes.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use nix::errno::Errno;
use nix::fcntl::{fallocate, FallocateFlags};

use super::FileOp;

/// Memory alignment of buffers handed to `O_DIRECT` reads and writes.
pub(crate) const DIRECT_ALIGNMENT: usize = 4096;

/// The errno of a direct transfer whose buffer pages cannot be pinned.
pub(crate) const EFAULT: i32 = Errno::EFAULT as i32;
/// The errno of an operation the file (system) does not support.
pub(crate) const EOPNOTSUPP: i32 = Errno::EOPNOTSUPP as i32;

/// Zeroes written where `fallocate` cannot zero a range; aligned so that
/// `O_DIRECT` takes them as they are.
#[repr(C, align(4096))]
struct Zeroes([u8; 64 * 1024]);

static ZEROES: Zeroes = Zeroes([0; 64 * 1024]);

thread_local! {
    /// Per-thread aligned bounce buffer for `O_DIRECT` transfers.
    static BOUNCE: RefCell<AlignedBuf> = const { RefCell::new(AlignedBuf::empty()) };
}

/// A heap buffer whose first byte is [`DIRECT_ALIGNMENT`]-aligned.  Its
/// memory does not move when the value moves.
#[derive(Debug)]
pub(crate) struct AlignedBuf {
    vec: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A buffer of no bytes, without allocating.
    const fn empty() -> Self {
        AlignedBuf {
            vec: Vec::new(),
            start: 0,
            len: 0,
        }
    }

    /// A zeroed buffer of `len` bytes.
    pub(crate) fn new(len: usize) -> Self {
        let vec = vec![0; len + DIRECT_ALIGNMENT];
        let start = vec.as_ptr().align_offset(DIRECT_ALIGNMENT);
        AlignedBuf { vec, start, len }
    }

    /// A buffer holding a copy of `data`.
    pub(crate) fn copy_of(data: &[u8]) -> Self {
        let mut buf = AlignedBuf::new(data.len());
        buf.as_mut_slice().copy_from_slice(data);
        buf
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.vec[self.start..self.start + self.len]
    }

    /// The bytes, mutably.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.vec[self.start..self.start + self.len]
    }
}

/// An aligned buffer for the transfer `op`: zeroes for a read, a copy of
/// the data for a write; none for other operations.
pub(crate) fn bounce_of(op: FileOp<'_>) -> Option<AlignedBuf> {
    match op {
        FileOp::Read { buf, .. } => Some(AlignedBuf::new(buf.len())),
        FileOp::Write { data, .. } => Some(AlignedBuf::copy_of(data)),
        _ => None,
    }
}

/// Whether `buf` may be handed to an `O_DIRECT` transfer as it is.
pub(crate) fn direct_ready(buf: &[u8]) -> bool {
    buf.as_ptr().align_offset(DIRECT_ALIGNMENT) == 0
}

/// Runs `f` on this thread's aligned bounce buffer of `len` bytes.
pub(crate) fn with_bounce<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    BOUNCE.with(|bounce| {
        let mut bounce = bounce.borrow_mut();
        if bounce.vec.len() < len + DIRECT_ALIGNMENT {
            *bounce = AlignedBuf::new(len);
        }
        bounce.len = len;
        f(bounce.as_mut_slice())
    })
}

/// The `fallocate` mode of a discard: punch a hole, keep the size.
pub(crate) fn discard_mode() -> FallocateFlags {
    FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE
}

/// The `fallocate` mode of a write-zeroes: punch a hole when the range may
/// be unmapped, zero it in place otherwise; keep the size either way.
pub(crate) fn write_zeroes_mode(unmap: bool) -> FallocateFlags {
    let mode = if unmap {
        FallocateFlags::FALLOC_FL_PUNCH_HOLE
    } else {
        FallocateFlags::FALLOC_FL_ZERO_RANGE
    };
    mode | FallocateFlags::FALLOC_FL_KEEP_SIZE
}

/// A file and how it was opened: everything needed to run a [`FileOp`] on
/// it synchronously.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SyncFile<'a> {
    /// The file or block device.
    pub(crate) file: &'a File,
    /// Opened with `O_DIRECT`: misaligned buffers go through a bounce
    /// buffer.
    pub(crate) direct: bool,
    /// A regular file: `fallocate` works.  On anything else discard fails
    /// with `EOPNOTSUPP` and write-zeroes writes zeroes.
    pub(crate) regular: bool,
}

impl SyncFile<'_> {
    /// Runs `op` to the end.  A read past the end of the file fails with
    /// [`io::ErrorKind::UnexpectedEof`] (`EIO` for a BIUS request).
    pub(crate) fn execute(self, op: FileOp<'_>) -> io::Result<()> {
        match op {
            FileOp::Read { offset, buf } => self.read(offset, buf),
            FileOp::Write { offset, data, fua } => self.write(offset, data, fua),
            FileOp::Flush => self.flush(),
            FileOp::Discard { offset, len } => self.discard(offset, len),
            FileOp::WriteZeroes { offset, len, unmap } => self.write_zeroes(offset, len, unmap),
            _ => Err(io::Error::from_raw_os_error(EOPNOTSUPP)),
        }
    }

    /// Fills `buf` from `offset`.
    pub(crate) fn read(self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let in_place = |buf: &mut [u8]| self.file.read_exact_at(buf, offset);
        let bounced = |buf: &mut [u8]| -> io::Result<()> {
            with_bounce(buf.len(), |bounce| {
                self.file.read_exact_at(bounce, offset)?;
                buf.copy_from_slice(bounce);
                Ok(())
            })
        };
        self.in_place_or_bounced(buf, in_place, bounced)
    }

    /// Writes `data` at `offset`, then `fdatasync`s if `fua`.
    pub(crate) fn write(self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let in_place = |data: &mut &[u8]| self.file.write_all_at(data, offset);
        let bounced = |data: &mut &[u8]| {
            with_bounce(data.len(), |bounce| {
                bounce.copy_from_slice(data);
                self.file.write_all_at(bounce, offset)
            })
        };
        #[cfg(test)]
        super::sync_log::record(self.file, super::sync_log::Issued::Write);
        self.in_place_or_bounced(&mut { data }, in_place, bounced)?;
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    /// `fdatasync`: every write completed before is durable.
    pub(crate) fn flush(self) -> io::Result<()> {
        #[cfg(test)]
        super::sync_log::record(self.file, super::sync_log::Issued::Fdatasync);
        self.file.sync_data()
    }

    /// Punches a hole (regular files only).
    pub(crate) fn discard(self, offset: u64, len: u64) -> io::Result<()> {
        self.fallocate(discard_mode(), offset, len)
    }

    /// Zeroes a range with `fallocate`, or by writing zeroes where that is
    /// not supported (block devices, some file systems).
    pub(crate) fn write_zeroes(self, offset: u64, len: u64, unmap: bool) -> io::Result<()> {
        match self.fallocate(write_zeroes_mode(unmap), offset, len) {
            Err(err) if err.raw_os_error() == Some(EOPNOTSUPP) => {
                self.write_zeroes_by_writing(offset, len)
            }
            result => result,
        }
    }

    /// `fallocate` on a regular file; `EOPNOTSUPP` elsewhere.
    fn fallocate(self, mode: FallocateFlags, offset: u64, len: u64) -> io::Result<()> {
        if !self.regular {
            return Err(io::Error::from_raw_os_error(EOPNOTSUPP));
        }
        let invalid = |_| io::Error::from(Errno::EINVAL);
        let offset = i64::try_from(offset).map_err(invalid)?;
        let len = i64::try_from(len).map_err(invalid)?;
        Ok(fallocate(self.file, mode, offset, len)?)
    }

    fn write_zeroes_by_writing(self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset.checked_add(len).ok_or(Errno::EINVAL)?;
        let mut pos = offset;
        while pos < end {
            let chunk = (end - pos).min(ZEROES.0.len() as u64) as usize;
            self.write(pos, &ZEROES.0[..chunk], false)?;
            pos += chunk as u64;
        }
        Ok(())
    }

    /// Runs the transfer `in_place` on `buf`, or `bounced` (the same
    /// transfer through [`with_bounce`]) where `O_DIRECT` cannot take
    /// `buf`'s memory: misaligned, or the pages of a mapped request, which
    /// the kernel maps without page references so that `O_DIRECT` cannot
    /// pin them (`EFAULT`).
    fn in_place_or_bounced<B: AsRef<[u8]> + ?Sized>(
        self,
        buf: &mut B,
        in_place: impl FnOnce(&mut B) -> io::Result<()>,
        bounced: impl FnOnce(&mut B) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.direct && !direct_ready(buf.as_ref()) {
            return bounced(buf);
        }
        match in_place(buf) {
            Err(err) if self.direct && err.raw_os_error() == Some(EFAULT) => bounced(buf),
            result => result,
        }
    }
}
