//! The io_uring backend: one ring per engine.
//!
//! Submitters push SQEs under the engine's lock; one completion thread (the
//! reaper) waits for CQEs, advances or finishes the requests they belong to
//! and starts requests that waited for a free slot.  A request's user data
//! is its key in a slab of in-flight [`Inflight`]s, which own the boxed
//! [`FileIo`] (and its bounce buffer, if any) until its last CQE is reaped:
//! that is what keeps the buffer pointers handed to the kernel valid.
//!
//! The only module of the crate with `unsafe` code: pushing an SQE (the
//! kernel will use its buffer pointer) and taking the shared submission and
//! completion queues of the ring.
#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring, Probe};
use nix::libc;
use slab::Slab;

use super::sync_ops::{self, bounce_of, direct_ready, AlignedBuf, EFAULT, EOPNOTSUPP};
use super::threads::Threads;
use super::{canceled, finish, EngineOptions, FileIo, FileOp};

/// User data of the no-op that wakes the reaper to stop.
const WAKE: u64 = u64::MAX;
/// User data of cancel requests (their own CQEs are ignored).
const CANCEL: u64 = u64::MAX - 1;
/// Largest transfer in one SQE; longer ones continue like short ones.
const MAX_CHUNK: usize = 1 << 30;
/// How long a stopping engine waits for canceled requests.
const CANCEL_GRACE: Duration = Duration::from_secs(1);
/// Helper threads for operations the ring refuses.
const FALLBACK_THREADS: usize = 4;
/// Resubmissions of a request completed with `EINTR` or `EAGAIN`.
const MAX_RETRIES: u8 = 16;

/// Whether io_uring works here with what the engine needs: a ring can be
/// set up (Linux 5.1, not disabled by `kernel.io_uring_disabled` or a
/// seccomp filter), its opcodes can be probed and it has `READ` and `WRITE`
/// (Linux 5.6).  [`EngineKind::Auto`](super::EngineKind::Auto) uses threads
/// where this fails.
pub fn probe_uring() -> io::Result<()> {
    probe_ops(&IoUring::new(2)?).map(drop)
}

/// The ring's opcodes; an error without `READ` and `WRITE`.
fn probe_ops(ring: &IoUring) -> io::Result<Probe> {
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    if !probe.is_supported(opcode::Read::CODE) || !probe.is_supported(opcode::Write::CODE) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "io_uring without READ and WRITE (Linux < 5.6)",
        ));
    }
    Ok(probe)
}

/// The io_uring backend.
pub(super) struct Uring {
    shared: Arc<Shared>,
    reaper: Option<JoinHandle<()>>,
    drain_timeout: Duration,
}

struct Shared {
    ring: IoUring,
    file: Arc<File>,
    direct: bool,
    regular: bool,
    /// The ring has `FALLOCATE` and `FSYNC`; without them those go to the
    /// fallback threads.
    fallocate: bool,
    fsync: bool,
    fallback: Threads,
    state: Mutex<State>,
    /// Notified when nothing is in flight or queued.
    idle: Condvar,
}

/// What the lock protects: the slab and the queue of waiting requests.
/// Only a holder of the lock pushes SQEs.
struct State {
    /// Keyed by user data.
    slots: Slab<Inflight>,
    depth: usize,
    pending: VecDeque<Box<dyn FileIo>>,
    /// Dropping: new submissions fail.
    closed: bool,
    /// The reaper leaves at its next wake-up.
    stop: bool,
}

/// A request in the ring.
struct Inflight {
    io: Box<dyn FileIo>,
    /// Bytes transferred so far.
    done: usize,
    /// Aligned copy of the buffer, for `O_DIRECT` where the buffer is not.
    bounce: Option<AlignedBuf>,
    retries: u8,
}

/// What a CQE (or a new request) means for its request: (re)submit it,
/// hand it to the fallback threads, or finish it.
enum Step {
    Again,
    Pool,
    Done(io::Result<()>),
}

/// Requests leaving the ring, handed over once the lock is released (a
/// `finish` may submit again).
#[derive(Default)]
struct Outcomes {
    pool: Vec<Box<dyn FileIo>>,
    finished: Vec<(Box<dyn FileIo>, io::Result<()>)>,
}

impl Outcomes {
    /// Takes `io` leaving the ring by `step`, not [`Step::Again`].
    fn take(&mut self, io: Box<dyn FileIo>, step: Step) {
        match step {
            Step::Pool => self.pool.push(io),
            Step::Done(result) => self.finished.push((io, result)),
            Step::Again => unreachable!("a request going on stays in the ring"),
        }
    }

    fn deliver(self, shared: &Shared) {
        for io in self.pool {
            shared.fallback.submit(io);
        }
        for (io, result) in self.finished {
            finish(io, result);
        }
    }
}

impl Uring {
    pub(super) fn new(file: Arc<File>, options: &EngineOptions) -> io::Result<Self> {
        let ring = IoUring::builder()
            .setup_clamp()
            .setup_cqsize(options.depth.saturating_mul(4))
            .build(options.depth)?;
        let probe = probe_ops(&ring)?;
        let depth = options.depth.min(ring.params().sq_entries()) as usize;
        let fallback =
            Threads::with_workers(file.clone(), options, options.threads.min(FALLBACK_THREADS))?;
        let shared = Arc::new(Shared {
            fallocate: probe.is_supported(opcode::Fallocate::CODE),
            fsync: probe.is_supported(opcode::Fsync::CODE),
            ring,
            file,
            direct: options.direct,
            regular: options.regular,
            fallback,
            state: Mutex::new(State {
                slots: Slab::with_capacity(depth),
                depth,
                pending: VecDeque::new(),
                closed: false,
                stop: false,
            }),
            idle: Condvar::new(),
        });
        let reaper = thread::Builder::new()
            .name("bius-file-uring".into())
            .spawn({
                let shared = shared.clone();
                move || reap(&shared)
            })?;
        Ok(Uring {
            shared,
            reaper: Some(reaper),
            drain_timeout: options.drain_timeout,
        })
    }

    pub(super) fn submit(&self, io: Box<dyn FileIo>) {
        let shared = &*self.shared;
        let mut out = Outcomes::default();
        {
            let mut state = shared.lock();
            if state.closed {
                out.finished.push((io, Err(canceled())));
            } else if state.slots.len() >= state.depth || !state.pending.is_empty() {
                state.pending.push_back(io);
            } else {
                shared.start(&mut state, io, &mut out);
            }
        }
        out.deliver(shared);
    }
}

impl Drop for Uring {
    /// Waits up to the drain timeout for queued and in-flight requests;
    /// then finishes the queued ones with `ECANCELED`, asks the kernel to
    /// cancel the rest and waits a little more.  Requests the kernel still
    /// holds after that are leaked, not finished: their buffers must
    /// outlive the kernel's use of them.
    fn drop(&mut self) {
        let shared = &*self.shared;
        let mut out = Outcomes::default();
        let mut state = shared.lock();
        state.closed = true;
        state = shared.wait_idle(state, Instant::now() + self.drain_timeout);
        if !state.idle() {
            let pending = state.pending.drain(..).map(|io| (io, Err(canceled())));
            out.finished.extend(pending);
            for (key, _) in &state.slots {
                let cancel = opcode::AsyncCancel::new(key as u64).build();
                let _ = shared.push_raw(&cancel.user_data(CANCEL));
            }
            state = shared.wait_idle(state, Instant::now() + CANCEL_GRACE);
        }
        state.stop = true;
        let _ = shared.push_raw(&opcode::Nop::new().build().user_data(WAKE));
        drop(state);
        out.deliver(shared);
        // (Not when the last engine reference goes in a `finish` the
        // reaper runs: a thread cannot join itself.)
        if let Some(reaper) = self.reaper.take() {
            if reaper.thread().id() != thread::current().id() {
                let _ = reaper.join();
            }
        }
        for entry in shared.lock().slots.drain() {
            std::mem::forget(entry);
        }
    }
}

impl State {
    fn idle(&self) -> bool {
        self.slots.is_empty() && self.pending.is_empty()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait_idle<'a>(
        &self,
        mut state: MutexGuard<'a, State>,
        deadline: Instant,
    ) -> MutexGuard<'a, State> {
        while !state.idle() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            state = self
                .idle
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state
    }

    /// Starts `io`: into the ring, to the fallback threads, or finished.
    fn start(&self, state: &mut State, mut io: Box<dyn FileIo>, out: &mut Outcomes) {
        let bounce = match self.route(io.op()) {
            Ok(bounce) => bounce,
            Err(step) => return out.take(io, step),
        };
        let entry = Inflight {
            io,
            done: 0,
            bounce,
            retries: 0,
        };
        let key = state.slots.insert(entry);
        if let Err(err) = self.push(&mut state.slots[key], key) {
            out.finished.push((state.slots.remove(key).io, Err(err)));
        }
    }

    /// Whether a new request goes to the ring (`Ok`, with a bounce buffer
    /// if `O_DIRECT` cannot take its buffer) or elsewhere.
    fn route(&self, op: FileOp<'_>) -> Result<Option<AlignedBuf>, Step> {
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
    fn advance(&self, entry: &mut Inflight, res: i32) -> Step {
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

    /// Handles the CQE of slot `key`.
    fn complete(&self, state: &mut State, key: usize, res: i32, out: &mut Outcomes) {
        let Some(entry) = state.slots.get_mut(key) else {
            return;
        };
        let step = match self.advance(entry, res) {
            Step::Again => match self.push(entry, key) {
                Ok(()) => return,
                Err(err) => Step::Done(Err(err)),
            },
            step => step,
        };
        out.take(state.slots.remove(key).io, step);
    }

    /// Starts waiting requests while there are free slots.
    fn refill(&self, state: &mut State, out: &mut Outcomes) {
        while state.slots.len() < state.depth {
            let Some(io) = state.pending.pop_front() else {
                break;
            };
            self.start(state, io, out);
        }
    }

    /// Pushes the SQE for the rest of `entry`, which is in slot `key` of the
    /// slab (the caller holds the lock).
    fn push(&self, entry: &mut Inflight, key: usize) -> io::Result<()> {
        let sqe = sqe(types::Fd(self.file.as_raw_fd()), entry);
        self.push_raw(&sqe.user_data(key as u64))
    }

    /// Pushes `sqe` and submits it; the caller holds the lock, and every
    /// buffer `sqe` points to belongs to an entry of the slab.
    fn push_raw(&self, sqe: &squeue::Entry) -> io::Result<()> {
        for _ in 0..2 {
            // SAFETY: only a holder of the state lock makes a submission
            // queue, so no other one exists while this one lives.
            let mut sq = unsafe { self.ring.submission_shared() };
            // SAFETY: the buffer `sqe` points to (if any) comes from the
            // `FileIo::op` borrow of a `Box<dyn FileIo>`, or from its bounce
            // buffer, held in the slab from before this push until the
            // reaper has reaped this SQE's CQE.  Until then nothing calls a
            // method of the io or touches its entry, so the memory (owned by
            // the boxed value, its lifetime tied to that borrow) neither
            // moves nor is freed while the kernel may use it; on drop,
            // entries the kernel may still have are leaked, never freed.
            // The file descriptor belongs to `self.file`, which outlives
            // the ring.
            let pushed = unsafe { sq.push(sqe) }.is_ok();
            drop(sq);
            self.submit_all();
            if pushed {
                return Ok(());
            }
        }
        Err(io::Error::other("io_uring submission queue full"))
    }

    /// Submits what is in the submission queue; what a failed submission
    /// leaves there goes with the next one (the reaper's included).
    fn submit_all(&self) {
        for _ in 0..MAX_RETRIES {
            match self.ring.submit() {
                Err(err) if transient(&err) => thread::sleep(Duration::from_micros(100)),
                _ => return,
            }
        }
    }
}

/// The SQE continuing `entry` (without its user data).
fn sqe(fd: types::Fd, entry: &mut Inflight) -> squeue::Entry {
    let done = entry.done;
    let at = |offset: u64| offset + done as u64;
    let chunk = |len: usize| len.min(MAX_CHUNK) as u32;
    match entry.io.op() {
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
    }
}

/// The reaper: waits for completions and handles them until stopped.
fn reap(shared: &Shared) {
    let mut cqes = Vec::new();
    loop {
        match shared.ring.submit_and_wait(1) {
            Err(err) if !transient(&err) => thread::sleep(Duration::from_millis(1)),
            _ => {}
        }
        // SAFETY: only this thread makes a completion queue of the ring.
        let cq = unsafe { shared.ring.completion_shared() };
        cqes.extend(cq.map(|cqe| (cqe.user_data(), cqe.result())));
        let mut out = Outcomes::default();
        let mut state = shared.lock();
        for (key, res) in cqes.drain(..) {
            if key < CANCEL {
                shared.complete(&mut state, key as usize, res, &mut out);
            }
        }
        shared.refill(&mut state, &mut out);
        if state.idle() {
            shared.idle.notify_all();
        }
        let stop = state.stop;
        drop(state);
        out.deliver(shared);
        if stop {
            return;
        }
    }
}

/// An error of `io_uring_enter` worth trying again.
fn transient(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
    )
}
