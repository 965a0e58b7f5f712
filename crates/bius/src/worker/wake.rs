//! When a deferred worker holding completions wakes for the earliest one:
//! a thread woken by a timer runs some time after it (the CPU leaving
//! idle, the scheduler; half a millisecond for a vCPU under TCG), so the
//! worker sets its timer that much before the due time (as late as its
//! timed wake-ups have lately been, learnt, and at most its spin time),
//! then polls its queue until the completion is due.

use std::time::{Duration, Instant};

/// How a worker waits for the earliest held completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    /// Poll the queue (the due time is near): fetch without blocking,
    /// collect and release, and plan again.
    Poll,
    /// Sleep until a request, a completion, or this time if any.
    Until(Option<Instant>),
}

/// How early a worker wakes before a due time, learnt from how late its
/// timed wake-ups are.
#[derive(Debug)]
pub(super) struct WakeUp {
    /// The most it wakes early and polls: the device's poll time.
    spin: Duration,
    /// How late its timed wake-ups have been: the latest of them, less an
    /// eighth at each wake-up since.
    late: Duration,
}

impl WakeUp {
    /// Waking at most `spin` early (zero: at the due time, never polling
    /// before it).
    pub(super) fn new(spin: Duration) -> Self {
        WakeUp {
            spin,
            late: Duration::ZERO,
        }
    }

    /// How to wait when the earliest held completion is due at `next`
    /// (`None`: none is held; then the clock is not read).
    pub(super) fn plan(&self, next: Option<Instant>) -> Wait {
        let Some(due) = next else {
            return Wait::Until(None);
        };
        let lead = self.late.min(self.spin);
        let wake = due.checked_sub(lead).unwrap_or(due);
        if wake <= Instant::now() {
            Wait::Poll
        } else {
            Wait::Until(Some(wake))
        }
    }

    /// A wait [`planned`](WakeUp::plan) until `deadline` ended at `now`
    /// with neither a request nor a completion: by the timer, `now -
    /// deadline` late.
    pub(super) fn woke(&mut self, deadline: Instant, now: Instant) {
        if self.spin.is_zero() || now < deadline {
            return;
        }
        let late = now - deadline;
        self.late = late.max(self.late - self.late / 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_held_sleeps_without_a_deadline() {
        assert_eq!(
            WakeUp::new(Duration::from_micros(200)).plan(None),
            Wait::Until(None)
        );
    }

    #[test]
    fn without_a_spin_it_wakes_at_the_due_time() {
        let mut wake = WakeUp::new(Duration::ZERO);
        let due = Instant::now() + Duration::from_secs(60);
        wake.woke(due, due + Duration::from_millis(1));
        assert_eq!(wake.plan(Some(due)), Wait::Until(Some(due)));
        assert_eq!(wake.plan(Some(Instant::now())), Wait::Poll);
    }

    #[test]
    fn it_wakes_as_early_as_it_woke_late_within_the_spin() {
        let us = Duration::from_micros;
        let mut wake = WakeUp::new(us(200));
        let due = Instant::now() + Duration::from_secs(60);
        wake.woke(due, due + us(80));
        assert_eq!(wake.plan(Some(due)), Wait::Until(Some(due - us(80))));
        // a later wake-up counts at once, an earlier one an eighth a time
        wake.woke(due, due + us(500));
        assert_eq!(wake.plan(Some(due)), Wait::Until(Some(due - us(200))));
        wake.woke(due, due);
        assert_eq!(wake.late, us(500) - us(500) / 8);
        // (a wait that ended before its deadline was not the timer)
        wake.woke(due, due - us(1));
        assert_eq!(wake.late, us(500) - us(500) / 8);
        // within the lead of the due time: poll
        assert_eq!(wake.plan(Some(Instant::now() + us(100))), Wait::Poll);
    }
}
