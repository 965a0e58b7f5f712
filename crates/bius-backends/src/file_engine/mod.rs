//! [`FileEngine`]: many requests in flight against one file or block
//! device, completed from the engine's own threads.
//!
//! A request is a [`FileIo`]: a boxed value that owns its buffer, tells
//! the engine what to do ([`FileIo::op`]) and is handed back exactly once,
//! with the outcome, to [`FileIo::finish`], from whichever engine thread
//! completed it.  [`FileEngine::submit`] never blocks on the I/O itself.
//!
//! Two backends do the work:
//!
//! - **io_uring** ([`EngineKind::Uring`]): one ring per engine, sized
//!   [`EngineOptions::depth`], with a submitter thread and a completion
//!   thread; a [`DeferredFile`](crate::DeferredFile) has one engine, which
//!   all the device's queues hand their requests to (through a channel:
//!   no lock is held while the ring is entered).  Only the engine's own
//!   threads enter the ring: the
//!   kernel cancels a thread's requests when the thread exits, so
//!   [`FileEngine::submit`] hands requests to the submitter thread.  Reads
//!   and writes go to the ring as `READ`/`WRITE` on the request's own
//!   buffer; short transfers are continued where they stopped.  Flush is
//!   `FSYNC` with `DATASYNC`, FUA a `WRITE` with `RWF_DSYNC`, discard and
//!   write-zeroes `FALLOCATE`.  What the ring refuses (`EINVAL`,
//!   `EOPNOTSUPP` for those, or an opcode the kernel lacks) runs
//!   synchronously on a few helper threads instead.  More than `depth`
//!   requests wait in an internal queue until a slot frees.
//! - **threads** ([`EngineKind::Threads`]): [`EngineOptions::threads`]
//!   workers take requests from a channel and run them with
//!   `pread`/`pwrite`/`fdatasync`/`fallocate`, exactly as
//!   [`File`](crate::File) does.
//!
//! [`EngineKind::Auto`] picks io_uring when a ring can be set up with the
//! opcodes the engine needs (Linux 5.6 or later, and not disabled through
//! `kernel.io_uring_disabled` or a seccomp filter), threads otherwise.
//!
//! With [`EngineOptions::direct`] (a file opened with `O_DIRECT`), buffers
//! whose memory is not 4096-aligned, or that the kernel cannot pin
//! (`EFAULT`), go through an aligned bounce buffer in both backends.
//!
//! Dropping a [`FileEngine`] stops it: requests still queued or in flight
//! get [`EngineOptions::drain_timeout`] to complete; what has not started
//! by then is finished with `ECANCELED`.  A `finish` may submit more
//! requests to the same engine, but should not drop it: the engine thread
//! running it cannot complete anything while it waits for the drain.

mod inflight;
mod threads;
mod uring;

pub(crate) mod sync_ops;

#[cfg(test)]
pub(crate) mod sync_log;
#[cfg(test)]
mod tests;

use std::fmt;
use std::fs::File;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;

pub use uring::probe_uring;

/// What a [`FileIo`] asks of the file: a block request.  A read past the
/// end of the file fails ([`io::ErrorKind::UnexpectedEof`]), as
/// [`File`](crate::File) does; a write with `fua` is durable when finished
/// (`RWF_DSYNC`, or a write followed by `fdatasync`); a flush is
/// `fdatasync`; a discard punches a hole, keeping the size (regular files
/// only: `EOPNOTSUPP` elsewhere); write-zeroes is `fallocate` zero-range
/// (or punch-hole when `unmap`), or written zeroes where that is not
/// supported.  Requests of kinds the engine does not know fail with
/// `EOPNOTSUPP`.
pub type FileOp<'a> = bius::Request<'a>;

/// One request in flight: owns its buffer until [`finish`](Self::finish).
///
/// The buffer does not move while the submission lives: it is heap or
/// mmap memory owned by the value, not memory inside the value, so moving
/// the box (or the value in it) leaves it where it is.
pub trait FileIo: Send + 'static {
    /// The operation.  The engine may call this more than once (to continue
    /// a short transfer, for instance); every call must return the same
    /// operation on the same buffer.  It runs under an engine lock, so it
    /// should be cheap and must not panic or submit.
    fn op(&mut self) -> FileOp<'_>;

    /// Called exactly once with the outcome, from any thread.  A panic here
    /// is caught and ignored.
    fn finish(self: Box<Self>, result: io::Result<()>);
}

/// Which backend an engine uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// io_uring if a ring can be set up ([`probe_uring`]), threads
    /// otherwise.  [`FileEngine::kind`] never returns this.
    #[default]
    Auto,
    /// io_uring; [`FileEngine::new`] fails where the kernel refuses it.
    Uring,
    /// A pool of threads doing positioned reads and writes.
    Threads,
}

/// How to build a [`FileEngine`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// The backend.  Default: [`EngineKind::Auto`].
    pub kind: EngineKind,
    /// io_uring submission queue entries: requests in the ring at once,
    /// more wait in the engine.  Default: 128.
    pub depth: u32,
    /// Worker threads of [`EngineKind::Threads`] (the io_uring backend
    /// keeps up to 4 of them for operations the ring refuses).
    /// Default: 16.
    pub threads: usize,
    /// The file was opened with `O_DIRECT`.  Default: false.
    pub direct: bool,
    /// The file is a regular file (not a block device), where discard and
    /// write-zeroes are `fallocate`.  Default: true.
    pub regular: bool,
    /// How long dropping the engine waits for requests still queued or in
    /// flight.  Default: 30 s.
    pub drain_timeout: Duration,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            kind: EngineKind::Auto,
            depth: 128,
            threads: 16,
            direct: false,
            regular: true,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// Runs [`FileIo`]s against one file, many at a time.  See the
/// [module documentation](self).
pub struct FileEngine {
    backend: Backend,
}

enum Backend {
    Uring(uring::Uring),
    Threads(threads::Threads),
}

impl FileEngine {
    /// Starts an engine on `file` (opened for reading, and for writing
    /// unless only reads will be submitted).
    ///
    /// Fails with [`io::ErrorKind::InvalidInput`] for a depth or thread
    /// count of 0, with the kernel's error for [`EngineKind::Uring`] where
    /// io_uring cannot be set up, or when threads cannot be spawned.
    pub fn new(file: Arc<File>, options: EngineOptions) -> io::Result<Self> {
        if options.depth == 0 || options.threads == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "engine depth and thread count must be at least 1",
            ));
        }
        let backend = match options.kind {
            EngineKind::Threads => Backend::Threads(threads::Threads::new(file, &options)?),
            EngineKind::Uring => Backend::Uring(uring::Uring::new(file, &options)?),
            EngineKind::Auto => match uring::Uring::new(file.clone(), &options) {
                Ok(ring) => Backend::Uring(ring),
                Err(_) => Backend::Threads(threads::Threads::new(file, &options)?),
            },
        };
        Ok(FileEngine { backend })
    }

    /// The backend in use: [`EngineKind::Uring`] or
    /// [`EngineKind::Threads`].
    pub fn kind(&self) -> EngineKind {
        match self.backend {
            Backend::Uring(_) => EngineKind::Uring,
            Backend::Threads(_) => EngineKind::Threads,
        }
    }

    /// Starts `io`; its [`finish`](FileIo::finish) is called later from an
    /// engine thread (or right away, with the error, if it cannot start).
    /// Never blocks on I/O: beyond the ring's depth requests queue inside
    /// the engine.
    pub fn submit(&self, io: Box<dyn FileIo>) {
        match &self.backend {
            Backend::Uring(ring) => ring.submit(io),
            Backend::Threads(pool) => pool.submit(io),
        }
    }
}

impl fmt::Debug for FileEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileEngine")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

/// Hands `result` to `io`, ignoring a panic in its `finish` so that the
/// engine thread calling it goes on.
fn finish(io: Box<dyn FileIo>, result: io::Result<()>) {
    let _ = catch_unwind(AssertUnwindSafe(|| io.finish(result)));
}

/// Sends `io` to the engine thread(s) behind `sender`; finishes it as
/// canceled if the engine has stopped (no sender, or every receiver gone).
fn send_or_cancel(
    sender: Option<&crossbeam_channel::Sender<Box<dyn FileIo>>>,
    io: Box<dyn FileIo>,
) {
    let Some(sender) = sender else {
        return finish(io, Err(canceled()));
    };
    if let Err(err) = sender.send(io) {
        finish(err.into_inner(), Err(canceled()));
    }
}

/// The error of a request that never started: the engine stopped first.
fn canceled() -> io::Error {
    io::Error::from(Errno::ECANCELED)
}
