//! A `/dev/bius` connected to one hardware queue: the kernel's
//! [`Transport`] (requests by `read()`, completions by `write()`, or both
//! in one `BIUS_IOC_COMPLETE_FETCH`), its data window, and the eventfd
//! that wakes its worker in deferred mode and the timerfd that ends its
//! wait at the next completion's due time.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bius_sys::bius_complete_fetch;
use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::clock_gettime;

use super::window::{SharedBytes, Window, WindowRange};
use crate::transport::{complete_then_fetch, Exchange, Transport, Wakeup};

/// A file descriptor connected to one hardware queue, with its data window
/// once mapped, and the eventfd that wakes its worker in deferred mode.
pub(crate) struct KernelQueue {
    file: File,
    window: Option<Arc<Window>>,
    wakeup: Option<Arc<EventWakeup>>,
    /// Deferred mode: ends a wait at its deadline.
    timer: Option<DeadlineTimer>,
    /// Whether `BIUS_IOC_COMPLETE_FETCH` is to be used: unless the
    /// environment turns it off, until the module says it has none.
    complete_fetch: bool,
}

/// Environment variable: set to `1`, the kernel transport completes and
/// fetches with `write()` and `read()` instead of one
/// `BIUS_IOC_COMPLETE_FETCH` (to compare the two, or to rule the call out).
const NO_COMPLETE_FETCH_ENV: &str = "BIUS_NO_COMPLETE_FETCH";

/// Whether the combined call is wanted: not if [`NO_COMPLETE_FETCH_ENV`]
/// is `1` (read once per process).
fn complete_fetch_wanted() -> bool {
    static WANTED: OnceLock<bool> = OnceLock::new();
    *WANTED.get_or_init(|| {
        let off = std::env::var_os(NO_COMPLETE_FETCH_ENV).is_some_and(|value| value == "1");
        if off {
            log::info!(
                "{NO_COMPLETE_FETCH_ENV}=1: completing with write() and fetching with read()"
            );
        }
        !off
    })
}

impl KernelQueue {
    /// The queue of `file`, just connected.
    pub(super) fn new(file: File) -> Self {
        KernelQueue {
            file,
            window: None,
            wakeup: None,
            timer: None,
            complete_fetch: complete_fetch_wanted(),
        }
    }

    /// mmap()s the queue's data window of `len` bytes (`map_window_bytes`
    /// of `BIUS_IOC_GET_INFO`).
    pub(crate) fn map_window(&mut self, len: usize) -> Result<(), Errno> {
        self.window = Some(Window::map(&self.file, len)?);
        Ok(())
    }
}

/// The eventfd that ends a deferred worker's `poll()`.
struct EventWakeup(EventFd);

impl Wakeup for EventWakeup {
    fn ring(&self) {
        // EAGAIN (the counter is full) means it is rung already.
        let _ = self.0.write(1);
    }
}

/// The timer that ends a deferred worker's wait at its deadline: a timerfd
/// on `CLOCK_MONOTONIC` (the clock of [`Instant`]) set to the deadline
/// itself, which the kernel keeps to the nanosecond (where `ppoll()`'s
/// own timeout, relative, starts late by the call's own time and has a
/// slack of at least a thousandth of the wait: 10 us of a 10 ms one, 1 ms
/// of a second), set again only when the deadline changes.
struct DeadlineTimer {
    timer: TimerFd,
    /// An instant, and `CLOCK_MONOTONIC` read just after it: a deadline's
    /// time on the clock, from these two, is never before the deadline.
    anchor: (Instant, Duration),
    /// The deadline the timer is set to (it may have passed).
    armed: Option<Instant>,
}

impl DeadlineTimer {
    fn new() -> Result<Self, Errno> {
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
        )?;
        let instant = Instant::now();
        let clock = clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)?;
        Ok(DeadlineTimer {
            timer,
            anchor: (instant, Duration::from(clock)),
            armed: None,
        })
    }

    /// Sets the timer to `deadline` (a deadline before the anchor: at
    /// once).
    fn arm(&mut self, deadline: Instant) -> Result<(), Errno> {
        if self.armed == Some(deadline) {
            return Ok(());
        }
        let (instant, clock) = self.anchor;
        // (at least 1 ns: a zero expiration would disarm the timer)
        let at = (clock + deadline.saturating_duration_since(instant)).max(Duration::from_nanos(1));
        self.timer.set(
            Expiration::OneShot(TimeSpec::from_duration(at)),
            TimerSetTimeFlags::TFD_TIMER_ABSTIME,
        )?;
        self.armed = Some(deadline);
        Ok(())
    }

    /// Consumes an expiry (EAGAIN: none, or another read took it).
    fn consume(&mut self) {
        let mut count = [0u8; 8];
        let _ = nix::unistd::read(&self.timer, &mut count);
        self.armed = None;
    }
}

impl Transport for KernelQueue {
    fn fetch(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }

    fn complete(&mut self, records: &[u8]) -> io::Result<usize> {
        self.file.write(records)
    }

    fn complete_and_fetch(&mut self, records: &[u8], buf: &mut [u8]) -> Exchange {
        let Ok(completions_len) = u32::try_from(records.len()) else {
            return complete_then_fetch(self, records, buf);
        };
        if !self.complete_fetch {
            return complete_then_fetch(self, records, buf);
        }
        let mut arg = bius_complete_fetch {
            completions: records.as_ptr() as u64,
            completions_len,
            requests: buf.as_mut_ptr() as u64,
            requests_len: u32::try_from(buf.len()).unwrap_or(u32::MAX),
            ..Default::default()
        };
        // SAFETY: the fd is open and `arg` is a valid, exclusively borrowed
        // struct of the type the ioctl number encodes; the kernel reads at
        // most `completions_len` bytes at `completions` (borrowed from
        // `records`) and writes at most `requests_len` bytes at `requests`
        // (`buf`, exclusively borrowed, at least that long), both alive for
        // the call.
        let result = unsafe { bius_sys::ioctl::complete_fetch(self.file.as_raw_fd(), &mut arg) };
        match result {
            // A module older than the call (it took nothing).
            Err(Errno::ENOTTY) => {
                log::info!(
                    "the bius module has no BIUS_IOC_COMPLETE_FETCH: using write() and read()"
                );
                self.complete_fetch = false;
                complete_then_fetch(self, records, buf)
            }
            result => Exchange {
                completed: arg.completed as usize,
                fetched: result.map(|n| n as usize).map_err(io::Error::from),
            },
        }
    }

    fn window(&mut self, offset: u64, len: usize) -> Option<SharedBytes<'_>> {
        let window = self.window.as_deref()?;
        // SAFETY: the worker asks only for the data of a request it has
        // fetched and not yet completed, which the kernel keeps mapped
        // until the completion is written; the borrow of `self` ends
        // before that write.  It never asks for a lent request's data
        // (`lend`), and `&mut self` makes these bytes the only ones of
        // `window()` alive.
        unsafe { window.bytes(offset, len) }
    }

    fn lend(&mut self, offset: u64, len: usize) -> Option<WindowRange> {
        let window = self.window.as_ref()?;
        // SAFETY: as in `window`: the deferred worker lends the data of a
        // request it has fetched, once, and drops the range before it
        // writes the request's completion; it asks `window()` for none of
        // a lent request's data.
        unsafe { Window::lend(window, offset, len) }
    }

    fn defer(&mut self) -> io::Result<Arc<dyn Wakeup>> {
        let flags = OFlag::from_bits_retain(fcntl(&self.file, FcntlArg::F_GETFL)?);
        fcntl(&self.file, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        let wakeup = Arc::new(EventWakeup(EventFd::from_flags(
            EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK,
        )?));
        self.wakeup = Some(Arc::clone(&wakeup));
        self.timer = Some(DeadlineTimer::new()?);
        Ok(wakeup)
    }

    fn wait(&mut self, deadline: Option<Instant>) -> io::Result<bool> {
        let (Some(wakeup), Some(timer)) = (self.wakeup.as_ref(), self.timer.as_mut()) else {
            return Err(Errno::EINVAL.into());
        };
        if let Some(deadline) = deadline {
            timer.arm(deadline)?;
        }
        // (a timer left set for a deadline no longer waited for may end
        // this wait early, once: the caller waits again)
        let mut fds = [
            PollFd::new(self.file.as_fd(), PollFlags::POLLIN),
            PollFd::new(wakeup.0.as_fd(), PollFlags::POLLIN),
            PollFd::new(timer.timer.as_fd(), PollFlags::POLLIN),
        ];
        match ppoll(&mut fds, None, None) {
            Ok(_) => {}
            // (the caller waits again if need be)
            Err(Errno::EINTR) => return Ok(false),
            Err(errno) => return Err(errno.into()),
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        let (requests, rung, expired) = (ready(&fds[0]), ready(&fds[1]), ready(&fds[2]));
        if rung {
            // Consumes the ring (EAGAIN: another wait consumed it).
            let _ = wakeup.0.read();
        }
        if expired {
            timer.consume();
        }
        Ok(requests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timer expires at its deadline or after it, never before, and
    /// is set again for a new deadline after it expired.
    #[test]
    fn the_deadline_timer_never_ends_a_wait_early() {
        let mut timer = DeadlineTimer::new().unwrap();
        for _ in 0..3 {
            let deadline = Instant::now() + Duration::from_millis(2);
            timer.arm(deadline).unwrap();
            let mut fds = [PollFd::new(timer.timer.as_fd(), PollFlags::POLLIN)];
            assert_eq!(ppoll(&mut fds, None, None), Ok(1));
            assert!(Instant::now() >= deadline);
            timer.consume();
        }
        // A deadline already past (or before the anchor) expires at once.
        let past = timer.anchor.0.checked_sub(Duration::from_secs(1));
        timer.arm(past.unwrap_or(timer.anchor.0)).unwrap();
        let mut fds = [PollFd::new(timer.timer.as_fd(), PollFlags::POLLIN)];
        assert_eq!(ppoll(&mut fds, None, None), Ok(1));
    }
}
