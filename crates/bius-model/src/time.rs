//! Device time: nanoseconds since the model started, and what takes it.

use std::collections::VecDeque;

/// A point or a span of device time, in nanoseconds.
pub type Nanos = u64;

/// Nanoseconds in a second.
pub const SECOND: Nanos = 1_000_000_000;

/// How long `bytes` take at `bandwidth` bytes per second (rounded up; 0 for
/// an unlimited bandwidth of 0).
pub fn transfer(bytes: u64, bandwidth: u64) -> Nanos {
    if bandwidth == 0 {
        return 0;
    }
    let nanos = (u128::from(bytes) * u128::from(SECOND)).div_ceil(u128::from(bandwidth));
    Nanos::try_from(nanos).unwrap_or(Nanos::MAX)
}

/// Busy spans a [`Timeline`] remembers; older ones are forgotten (they
/// lie in the past by then).
const REMEMBERED_SPANS: usize = 64;

/// A resource that does one thing at a time (a flash die, a channel, the
/// host link, a disk's actuator): work waits until the resource is free.
///
/// Work is booked when its request arrives, often for later (a program
/// after its data have crossed a channel, garbage collection's copies): a
/// new piece of work takes the first idle span, from when it is ready,
/// that is long enough, before work booked earlier if the resource is
/// idle then, as a controller's scheduler would use it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    /// Busy spans, sorted, disjoint and not touching.
    busy: VecDeque<(Nanos, Nanos)>,
}

impl Timeline {
    /// Occupies the resource for `busy`, from when the work is `ready` or
    /// the first idle span after that long enough; returns when it is done.
    pub fn occupy(&mut self, ready: Nanos, busy: Nanos) -> Nanos {
        let mut start = ready;
        let mut at = self.busy.len();
        for (index, &(begin, end)) in self.busy.iter().enumerate() {
            if end <= start {
                continue;
            }
            if begin >= start.saturating_add(busy) {
                at = index;
                break;
            }
            start = end;
        }
        let end = start.saturating_add(busy);
        if busy > 0 {
            self.insert(at, start, end);
        }
        end
    }

    /// When the resource is next free for good: the end of the last work
    /// booked.
    pub fn free_at(&self) -> Nanos {
        self.busy.back().map_or(0, |&(_, end)| end)
    }

    /// Inserts the busy span `start..end` at `index`, merged with the
    /// spans it touches.
    fn insert(&mut self, index: usize, start: Nanos, end: Nanos) {
        let (mut start, mut end, mut index) = (start, end, index);
        if index > 0 && self.busy[index - 1].1 == start {
            index -= 1;
            start = self.busy[index].0;
            self.busy.remove(index);
        }
        if index < self.busy.len() && self.busy[index].0 == end {
            end = self.busy[index].1;
            self.busy.remove(index);
        }
        self.busy.insert(index, (start, end));
        if self.busy.len() > REMEMBERED_SPANS {
            self.busy.pop_front();
        }
    }
}

/// Identical resources that each do one thing at a time (a controller's
/// cores): work takes the one free first.  A pool of none sets no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pool {
    members: Vec<Timeline>,
}

impl Pool {
    /// `count` resources (0: no limit).
    pub fn new(count: u32) -> Self {
        Pool {
            members: vec![Timeline::default(); count as usize],
        }
    }

    /// Occupies the member free first for `busy` from `ready` on; returns
    /// when the work is done (`ready + busy` without members).
    pub fn occupy(&mut self, ready: Nanos, busy: Nanos) -> Nanos {
        match self
            .members
            .iter_mut()
            .min_by_key(|member| member.free_at())
        {
            Some(member) => member.occupy(ready, busy),
            None => ready.saturating_add(busy),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_times() {
        assert_eq!(transfer(4096, 0), 0);
        // 4 KiB at 800 MB/s: 5.12 us.
        assert_eq!(transfer(4096, 800_000_000), 5120);
        assert_eq!(transfer(1, 3), 333_333_334);
        assert_eq!(transfer(u64::MAX, 1), Nanos::MAX);
    }

    #[test]
    fn work_takes_the_first_idle_span_long_enough() {
        let mut channel = Timeline::default();
        assert_eq!(channel.occupy(1000, 100), 1100);
        assert_eq!(channel.occupy(0, 100), 100);
        // 100..1000 is idle: 500 fits there, 1000 does not.
        assert_eq!(channel.occupy(200, 500), 700);
        assert_eq!(channel.occupy(0, 1000), 2100);
        // Touching spans merge: 0..100, 100..200 and 200..700.
        assert_eq!(channel.occupy(100, 100), 200);
        assert_eq!(channel.busy, [(0, 700), (1000, 2100)]);
        assert_eq!(channel.free_at(), 2100);
        // Zero-length work waits for an idle moment.
        assert_eq!(channel.occupy(50, 0), 700);
        assert_eq!(channel.occupy(800, 0), 800);
    }

    #[test]
    fn a_pool_runs_as_many_at_once_as_it_has_members() {
        let mut cores = Pool::new(2);
        assert_eq!(cores.occupy(0, 10), 10);
        assert_eq!(cores.occupy(0, 10), 10);
        assert_eq!(cores.occupy(0, 10), 20);
        assert_eq!(Pool::new(0).occupy(5, 10), 15);
    }

    #[test]
    fn work_queues_behind_a_busy_resource() {
        let mut die = Timeline::default();
        assert_eq!(die.occupy(100, 50), 150);
        // Ready at 120 but the die is busy until 150.
        assert_eq!(die.occupy(120, 50), 200);
        // Ready after the die is free: starts at once.
        assert_eq!(die.occupy(500, 10), 510);
        assert_eq!(die.free_at(), 510);
    }
}
