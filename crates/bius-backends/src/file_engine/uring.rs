//! The io_uring backend: one ring per engine.
//!
//! [`Uring::submit`] hands requests over a channel to the engine's
//! submitter thread, which pushes their SQEs under the engine's lock, in
//! batches; one completion thread (the reaper) waits for CQEs, advances or
//! finishes the requests they belong to and starts requests that waited
//! for a free slot.  Only these two threads, the engine's own, enter the
//! ring, and both live until the engine has drained: the kernel cancels a
//! thread's requests when that thread exits, so requests submitted from
//! short-lived callers would fail with `ECANCELED`.
//!
//! A request's user data is its key in a slab of [`Inflight`]s, which own
//! the boxed [`FileIo`] (and its bounce buffer, if any) until its last CQE
//! is reaped: that is what keeps the buffer pointers handed to the kernel
//! valid.  What a CQE means for its request is [`super::inflight`]'s
//! business, in safe code.
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

use crossbeam_channel::{Receiver, Sender};
use io_uring::{opcode, squeue, types, IoUring, Probe};
use nix::libc;
use slab::Slab;

use super::inflight::{sqe, Caps, Inflight, Step};
use super::sync_ops;
use super::threads::Threads;
#[cfg(test)]
use super::FileOp;
use super::{canceled, finish, send_or_cancel, EngineOptions, FileIo};
use crate::io_thread;

/// User data of the no-op that wakes the reaper to stop.
const WAKE: u64 = u64::MAX;
/// User data of cancel requests (their own CQEs are ignored).
const CANCEL: u64 = u64::MAX - 1;
/// How long a stopping engine waits for canceled requests.
const CANCEL_GRACE: Duration = Duration::from_secs(1);
/// Helper threads for operations the ring refuses.
const FALLBACK_THREADS: usize = 4;
/// Retries of an `io_uring_enter` failing with a transient error.
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
    sender: Option<Sender<Box<dyn FileIo>>>,
    submitter: Option<JoinHandle<()>>,
    reaper: Option<JoinHandle<()>>,
    drain_timeout: Duration,
}

struct Shared {
    ring: IoUring,
    file: Arc<File>,
    caps: Caps,
    /// Operations the ring refuses or lacks run here.
    fallback: Threads,
    state: Mutex<State>,
    /// Notified when the engine goes idle, the submitter has drained the
    /// closed channel, or the threads are to stop.
    changed: Condvar,
}

/// What the lock protects: the slab and the queue of waiting requests.
/// Only a holder of the lock pushes SQEs.
struct State {
    /// Keyed by user data.
    slots: Slab<Inflight>,
    depth: usize,
    pending: VecDeque<Box<dyn FileIo>>,
    /// The channel is closed and empty: everything submitted is in
    /// `slots` or `pending`, or gone.
    drained: bool,
    /// The drain timeout has passed: requests not started yet are
    /// finished with `ECANCELED`.
    canceling: bool,
    /// The submitter and the reaper leave (the reaper at its next wake-up).
    stop: bool,
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
        let caps = Caps {
            direct: options.direct,
            regular: options.regular,
            fallocate: probe.is_supported(opcode::Fallocate::CODE),
            fsync: probe.is_supported(opcode::Fsync::CODE),
        };
        let shared = Arc::new(Shared {
            ring,
            file,
            caps,
            fallback,
            state: Mutex::new(State {
                slots: Slab::with_capacity(depth),
                depth,
                pending: VecDeque::new(),
                drained: false,
                canceling: false,
                stop: false,
            }),
            changed: Condvar::new(),
        });
        let (sender, receiver) = crossbeam_channel::unbounded();
        // Dropped (stopping the threads already started) if a spawn fails.
        let mut uring = Uring {
            shared,
            sender: Some(sender),
            submitter: None,
            reaper: None,
            drain_timeout: options.drain_timeout,
        };
        let shared = uring.shared.clone();
        uring.reaper = Some(io_thread::spawn(
            thread::Builder::new().name("bius-uring-cq".into()),
            move || reap(&shared),
        )?);
        let shared = uring.shared.clone();
        uring.submitter = Some(io_thread::spawn(
            thread::Builder::new().name("bius-uring-sq".into()),
            move || push_submitted(&shared, &receiver),
        )?);
        Ok(uring)
    }

    pub(super) fn submit(&self, io: Box<dyn FileIo>) {
        send_or_cancel(self.sender.as_ref(), io);
    }
}

impl Drop for Uring {
    /// Closes the channel and waits up to the drain timeout for queued and
    /// in-flight requests; then finishes the queued ones with `ECANCELED`,
    /// asks the kernel to cancel the rest and waits a little more.
    /// Requests the kernel still holds after that are leaked, not
    /// finished: their buffers must outlive the kernel's use of them.
    fn drop(&mut self) {
        drop(self.sender.take());
        let shared = &*self.shared;
        let mut out = Outcomes::default();
        let mut state = shared.lock();
        let done = |state: &State| state.drained && state.idle();
        state = shared.wait(state, Instant::now() + self.drain_timeout, done);
        if !done(&state) {
            state.canceling = true;
            let pending = state.pending.drain(..).map(|io| (io, Err(canceled())));
            out.finished.extend(pending);
            for (key, _) in &state.slots {
                let cancel = opcode::AsyncCancel::new(key as u64).build();
                let _ = shared.push_raw(&cancel.user_data(CANCEL));
            }
            shared.submit_all();
            state = shared.wait(state, Instant::now() + CANCEL_GRACE, done);
        }
        state.stop = true;
        shared.changed.notify_all();
        let _ = shared.push_raw(&opcode::Nop::new().build().user_data(WAKE));
        shared.submit_all();
        drop(state);
        out.deliver(shared);
        join(self.submitter.take());
        join(self.reaper.take());
        let mut state = shared.lock();
        for entry in state.slots.drain() {
            std::mem::forget(entry);
        }
        let left: Vec<_> = state.pending.drain(..).collect();
        drop(state);
        for io in left {
            finish(io, Err(canceled()));
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

    /// Waits until `until` holds or `deadline` passes.
    fn wait<'a>(
        &self,
        mut state: MutexGuard<'a, State>,
        deadline: Instant,
        until: impl Fn(&State) -> bool,
    ) -> MutexGuard<'a, State> {
        while !until(&state) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state
    }

    /// Starts `io`: into the ring, to the fallback threads, or finished.
    fn start(&self, state: &mut State, mut io: Box<dyn FileIo>, out: &mut Outcomes) {
        if state.canceling {
            return out.finished.push((io, Err(canceled())));
        }
        let bounce = match self.caps.route(io.op()) {
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

    /// Handles the CQE of slot `key`.
    fn complete(&self, state: &mut State, key: usize, res: i32, out: &mut Outcomes) {
        let Some(entry) = state.slots.get_mut(key) else {
            return;
        };
        let step = match self.caps.advance(entry, res) {
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
        let sqe = sqe(types::Fd(self.file.as_raw_fd()), entry)
            .ok_or_else(|| io::Error::from_raw_os_error(sync_ops::EOPNOTSUPP))?;
        #[cfg(test)]
        {
            use super::sync_log::{record, Issued};
            match entry.io.op() {
                FileOp::Write { fua: false, .. } => record(&self.file, Issued::Write),
                FileOp::Write { fua: true, .. } => record(&self.file, Issued::DsyncWrite),
                FileOp::Flush => record(&self.file, Issued::Fdatasync),
                _ => {}
            }
        }
        self.push_raw(&sqe.user_data(key as u64))
    }

    /// Pushes `sqe`, to be submitted by the next `io_uring_enter` (the
    /// submitter's, or the reaper's before it waits); the caller holds the
    /// lock, and every buffer `sqe` points to belongs to an entry of the
    /// slab.
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
            if pushed {
                return Ok(());
            }
            self.submit_all();
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

/// The submitter: starts the requests of the channel, a batch per system
/// call, until the channel is closed and empty; then stays until the engine
/// stops, since the kernel would cancel the requests it submitted.
fn push_submitted(shared: &Shared, receiver: &Receiver<Box<dyn FileIo>>) {
    while let Ok(first) = receiver.recv() {
        let mut out = Outcomes::default();
        let mut state = shared.lock();
        for io in std::iter::once(first).chain(receiver.try_iter()) {
            let full = state.slots.len() >= state.depth || !state.pending.is_empty();
            if full && !state.canceling {
                state.pending.push_back(io);
            } else {
                shared.start(&mut state, io, &mut out);
            }
        }
        drop(state);
        shared.submit_all();
        out.deliver(shared);
    }
    let mut state = shared.lock();
    state.drained = true;
    shared.changed.notify_all();
    while !state.stop {
        state = shared
            .changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
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
            shared.changed.notify_all();
        }
        let stop = state.stop;
        drop(state);
        shared.submit_all();
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

/// Joins `thread`, unless this is it: the last reference to the engine may
/// go in a `finish` that an engine thread runs.
fn join(thread: Option<JoinHandle<()>>) {
    if let Some(thread) = thread.filter(|t| t.thread().id() != thread::current().id()) {
        let _ = thread.join();
    }
}
