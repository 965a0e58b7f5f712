//! The thread-pool backend: workers taking [`FileIo`]s from a channel and
//! running them synchronously ([`SyncFile`]).  The io_uring backend keeps a
//! small one for the operations its ring refuses.

use std::fs::File;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::sync_ops::SyncFile;
use super::{canceled, finish, send_or_cancel, EngineOptions, FileIo};
use crate::io_thread;

/// How long a stopping pool waits, after its drain timeout, for workers to
/// finish what is left in the channel with `ECANCELED`.
const ABANDON_GRACE: Duration = Duration::from_secs(1);

/// A pool of worker threads.
pub(super) struct Threads {
    sender: Option<Sender<Box<dyn FileIo>>>,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    drain_timeout: Duration,
}

struct Shared {
    file: Arc<File>,
    direct: bool,
    regular: bool,
    /// Set when the drain timeout has passed: workers finish what is
    /// still in the channel with `ECANCELED` instead of running it.
    abandon: AtomicBool,
    /// Workers still running.
    running: Mutex<usize>,
    exited: Condvar,
}

impl Threads {
    /// Starts `options.threads` workers on `file`.
    pub(super) fn new(file: Arc<File>, options: &EngineOptions) -> io::Result<Self> {
        Self::with_workers(file, options, options.threads)
    }

    /// Starts `workers` workers on `file`.
    pub(super) fn with_workers(
        file: Arc<File>,
        options: &EngineOptions,
        workers: usize,
    ) -> io::Result<Self> {
        let (sender, receiver) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared {
            file,
            direct: options.direct,
            regular: options.regular,
            abandon: AtomicBool::new(false),
            running: Mutex::new(0),
            exited: Condvar::new(),
        });
        // Dropped (stopping the workers already started) if a spawn fails.
        let mut pool = Threads {
            sender: Some(sender),
            shared,
            workers: Vec::with_capacity(workers),
            drain_timeout: options.drain_timeout,
        };
        for i in 0..workers {
            let shared = pool.shared.clone();
            let receiver = receiver.clone();
            *pool.shared.lock_running() += 1;
            let spawned = io_thread::spawn(
                thread::Builder::new().name(format!("bius-file-{i}")),
                move || work(&shared, &receiver),
            );
            match spawned {
                Ok(handle) => pool.workers.push(handle),
                Err(err) => {
                    *pool.shared.lock_running() -= 1;
                    return Err(err);
                }
            }
        }
        Ok(pool)
    }

    /// Queues `io` for the next free worker.
    pub(super) fn submit(&self, io: Box<dyn FileIo>) {
        // (The workers only leave once the sender is gone.)
        send_or_cancel(self.sender.as_ref(), io);
    }
}

impl Shared {
    fn lock_running(&self) -> std::sync::MutexGuard<'_, usize> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until no worker runs or `deadline` passes; whether none runs.
    fn wait_exited(&self, deadline: Instant) -> bool {
        let mut running = self.lock_running();
        while *running > 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            running = self
                .exited
                .wait_timeout(running, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

/// A worker: runs requests until the channel is closed and empty.
fn work(shared: &Shared, receiver: &Receiver<Box<dyn FileIo>>) {
    let file = SyncFile {
        file: &shared.file,
        direct: shared.direct,
        regular: shared.regular,
    };
    for mut io in receiver.iter() {
        if shared.abandon.load(Ordering::Relaxed) {
            finish(io, Err(canceled()));
            continue;
        }
        let result = catch_unwind(AssertUnwindSafe(|| file.execute(io.op())))
            .unwrap_or_else(|_| Err(io::Error::other("file operation panicked")));
        finish(io, result);
    }
    *shared.lock_running() -= 1;
    shared.exited.notify_all();
}

impl Drop for Threads {
    /// Closes the channel and waits (up to the drain timeout) for the
    /// workers to run what is left; then has them finish the rest with
    /// `ECANCELED`.  Workers still stuck in a system call after that are
    /// left to finish their request on their own, detached.
    fn drop(&mut self) {
        drop(self.sender.take());
        let mut exited = self.shared.wait_exited(Instant::now() + self.drain_timeout);
        if !exited {
            self.shared.abandon.store(true, Ordering::Relaxed);
            exited = self.shared.wait_exited(Instant::now() + ABANDON_GRACE);
        }
        for worker in self.workers.drain(..) {
            // A worker that has left its loop returns at once.
            if exited || worker.is_finished() {
                let _ = worker.join();
            }
        }
    }
}
