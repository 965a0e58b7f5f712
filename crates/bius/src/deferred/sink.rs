//! The way back from a completed [`Io`] to its queue's worker: the
//! [`Sink`] collects completions (and requests the zone gate lets through)
//! and wakes the worker only when it sleeps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::zone_gate::GateTicket;
use super::{Data, Io};
use crate::error::IoError;
use crate::request::{Command, Reply};
use crate::transport::Wakeup;
use crate::worker::Header;

/// A completed request, on its way to the kernel.
pub(crate) struct Finished {
    pub(crate) hdr: Header,
    pub(crate) result: Result<Reply, IoError>,
    pub(crate) data: Data,
    /// When the worker received it.
    pub(crate) arrived: Instant,
}

/// A completion on its way to the worker, which writes it (once `due`, if
/// given, and once its model's time) after giving back its zone gate
/// ticket.
pub(crate) struct Delivery {
    pub(crate) finished: Finished,
    /// What the kernel asked for (the model prices this).
    pub(crate) sent: Command,
    pub(crate) gate: GateTicket,
    pub(crate) due: Option<Instant>,
}

#[derive(Default)]
struct SinkState {
    delivered: Vec<Delivery>,
    released: Vec<Io>,
    /// The worker has ended: what arrives is discarded.
    closed: bool,
}

/// The completions of one queue's requests, collected for its worker.
pub(crate) struct Sink {
    state: Mutex<SinkState>,
    /// The worker is about to wait or waiting: wake it.
    sleeping: AtomicBool,
    wakeup: Arc<dyn Wakeup>,
}

impl Sink {
    pub(crate) fn new(wakeup: Arc<dyn Wakeup>) -> Self {
        Sink {
            state: Mutex::default(),
            sleeping: AtomicBool::new(false),
            wakeup,
        }
    }

    fn lock(&self) -> MutexGuard<'_, SinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn push(&self, delivery: Delivery) {
        let mut state = self.lock();
        if state.closed {
            drop(state);
            log::debug!(
                "request {:#x} completed after its queue stopped; discarded",
                delivery.finished.hdr.id()
            );
            return;
        }
        state.delivered.push(delivery);
        drop(state);
        self.wake();
    }

    /// Gives the worker a request to submit (one the zone gate held).
    pub(crate) fn release(&self, io: Io) {
        let mut state = self.lock();
        if state.closed {
            drop(state);
            // (dropped here, outside the lock: it fails with EIO, which is
            // discarded as the queue has stopped)
            drop(io);
            return;
        }
        state.released.push(io);
        drop(state);
        self.wake();
    }

    fn wake(&self) {
        if self.sleeping.swap(false, Ordering::SeqCst) {
            self.wakeup.ring();
        }
    }

    /// Moves what has arrived into `delivered` and `released` (which the
    /// worker keeps empty between calls, to reuse their memory).
    pub(crate) fn take(&self, delivered: &mut Vec<Delivery>, released: &mut Vec<Io>) {
        let mut state = self.lock();
        std::mem::swap(&mut state.delivered, delivered);
        std::mem::swap(&mut state.released, released);
    }

    /// Declares the worker about to wait: true if it may (nothing has
    /// arrived; a completion from now on rings the wakeup).
    pub(crate) fn may_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        let state = self.lock();
        let idle = state.delivered.is_empty() && state.released.is_empty();
        drop(state);
        if !idle {
            self.sleeping.store(false, Ordering::SeqCst);
        }
        idle
    }

    /// The worker is awake again.
    pub(crate) fn awake(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// The worker has ended: what is left and what comes later is
    /// discarded (dropped by the caller, outside the lock).
    pub(crate) fn close(&self) -> (Vec<Delivery>, Vec<Io>) {
        let mut state = self.lock();
        state.closed = true;
        (
            std::mem::take(&mut state.delivered),
            std::mem::take(&mut state.released),
        )
    }
}
