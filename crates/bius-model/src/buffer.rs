//! A write buffer: writes are acknowledged once their data are in it, and
//! their space frees when the flash program that takes them is done.  A
//! full buffer makes writes wait for programs, so sustained writes drop
//! from buffer speed to flash speed once it fills.  Writes take room in
//! the order they come: none is admitted before one that came earlier
//! (room freed for a write that had to wait is there only from then on).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::Nanos;

/// Space in a write buffer, over time.
#[derive(Debug, Clone)]
pub struct WriteBuffer {
    capacity: u64,
    used: u64,
    /// Space that frees, and when.
    releases: BinaryHeap<Reverse<(Nanos, u64)>>,
    /// When the last write was admitted.
    last_admitted: Nanos,
}

impl WriteBuffer {
    /// A buffer of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        WriteBuffer {
            capacity,
            used: 0,
            releases: BinaryHeap::new(),
            last_admitted: 0,
        }
    }

    /// Its size in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Takes room for `bytes` (at most the whole buffer) at `ready` or, if
    /// the buffer is too full then (or an earlier write was admitted
    /// later), as soon as enough has been released; returns when.
    pub fn admit(&mut self, ready: Nanos, bytes: u64) -> Nanos {
        let bytes = bytes.min(self.capacity);
        let mut at = ready.max(self.last_admitted);
        self.release_until(at);
        while self.used + bytes > self.capacity {
            let Some(Reverse((time, freed))) = self.releases.pop() else {
                break;
            };
            at = at.max(time);
            self.used -= freed;
        }
        self.used += bytes;
        self.last_admitted = at;
        at
    }

    /// Frees `bytes` (taken by [`WriteBuffer::admit`]) at `time`.
    pub fn release_at(&mut self, time: Nanos, bytes: u64) {
        let bytes = bytes.min(self.capacity);
        if bytes > 0 {
            self.releases.push(Reverse((time, bytes)));
        }
    }

    /// Bytes in the buffer at `now` (releases before it done).
    pub fn used_at(&mut self, now: Nanos) -> u64 {
        self.release_until(now);
        self.used
    }

    fn release_until(&mut self, now: Nanos) {
        while let Some(&Reverse((time, freed))) = self.releases.peek() {
            if time > now {
                break;
            }
            self.releases.pop();
            self.used = self.used.saturating_sub(freed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_wait_once_the_buffer_is_full() {
        let mut buffer = WriteBuffer::new(8192);
        assert_eq!(buffer.admit(0, 4096), 0);
        buffer.release_at(1000, 4096);
        assert_eq!(buffer.admit(10, 4096), 10);
        buffer.release_at(2000, 4096);
        // Full: the third write waits for the first program.
        assert_eq!(buffer.admit(20, 4096), 1000);
        buffer.release_at(3000, 4096);
        assert_eq!(buffer.used_at(2500), 4096);
        // A write larger than the buffer waits for all of it.
        assert_eq!(buffer.admit(2500, 1 << 20), 3000);
    }

    #[test]
    fn room_freed_for_a_waiting_write_is_there_only_from_then() {
        let mut buffer = WriteBuffer::new(8192);
        assert_eq!(buffer.admit(0, 8192), 0);
        buffer.release_at(1000, 8192);
        // Waits for the release; the other 4 KiB it freed are free from
        // 1000 on, not for a write arriving at 10.
        assert_eq!(buffer.admit(5, 4096), 1000);
        assert_eq!(buffer.admit(10, 4096), 1000);
    }
}
