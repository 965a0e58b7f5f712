//! One thread that completes delayed requests at their time
//! ([`DeviceBuilder::latency`](crate::DeviceBuilder::latency)), so that no
//! worker sleeps for a request.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use super::sink::Delivery;

struct Entry {
    due: Instant,
    seq: u64,
    delivery: Delivery,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

#[derive(Default)]
struct TimerState {
    /// Earliest first; equal times in the order scheduled.
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    stopped: bool,
}

/// Completions waiting for their time.
pub(crate) struct Timer {
    state: Mutex<TimerState>,
    changed: Condvar,
}

impl Timer {
    fn lock(&self) -> MutexGuard<'_, TimerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Delivers `delivery` at `due` (at once if the timer has stopped).
    pub(crate) fn schedule(&self, due: Instant, delivery: Delivery) {
        let mut state = self.lock();
        if state.stopped {
            drop(state);
            delivery.deliver();
            return;
        }
        let earliest = state.heap.peek().is_none_or(|Reverse(e)| due < e.due);
        state.seq += 1;
        let seq = state.seq;
        state.heap.push(Reverse(Entry { due, seq, delivery }));
        drop(state);
        if earliest {
            self.changed.notify_one();
        }
    }

    /// The thread's loop: delivers what is due, sleeps until the next is;
    /// once stopped, delivers everything left and ends.
    fn run(&self) {
        let mut due = Vec::new();
        let mut state = self.lock();
        loop {
            let now = Instant::now();
            while let Some(Reverse(entry)) = state.heap.peek() {
                if entry.due > now && !state.stopped {
                    break;
                }
                let Some(Reverse(entry)) = state.heap.pop() else {
                    break;
                };
                due.push(entry.delivery);
            }
            if !due.is_empty() {
                drop(state);
                due.drain(..).for_each(Delivery::deliver);
                state = self.lock();
                continue;
            }
            if state.stopped {
                return;
            }
            state = match state.heap.peek() {
                Some(Reverse(next)) => {
                    let wait = next.due.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(state, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
    }
}

/// The timer and its thread, which ends when this is dropped (after
/// delivering every completion left, at once).
pub(crate) struct TimerThread {
    timer: Arc<Timer>,
    thread: Option<JoinHandle<()>>,
}

impl TimerThread {
    pub(crate) fn start(name: String) -> io::Result<Self> {
        let timer = Arc::new(Timer {
            state: Mutex::default(),
            changed: Condvar::new(),
        });
        let runner = Arc::clone(&timer);
        let thread = thread::Builder::new()
            .name(name)
            .spawn(move || runner.run())?;
        Ok(TimerThread {
            timer,
            thread: Some(thread),
        })
    }

    pub(crate) fn timer(&self) -> &Arc<Timer> {
        &self.timer
    }
}

impl Drop for TimerThread {
    fn drop(&mut self) {
        self.timer.lock().stopped = true;
        self.timer.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
