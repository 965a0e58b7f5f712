//! Device time: nanoseconds since the model started, and what takes it.

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

/// A resource that does one thing at a time (a flash die, a channel, the
/// host link, a disk's actuator): work queues behind it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timeline {
    free_at: Nanos,
}

impl Timeline {
    /// Occupies the resource for `busy`, starting when the work is `ready`
    /// or, if later, when the resource is free; returns when it is done.
    pub fn occupy(&mut self, ready: Nanos, busy: Nanos) -> Nanos {
        let start = ready.max(self.free_at);
        self.free_at = start.saturating_add(busy);
        self.free_at
    }

    /// When the resource is next free.
    pub fn free_at(&self) -> Nanos {
        self.free_at
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
