//! Flash: channels of dies.  A read occupies its die for the sensing time,
//! then the die's channel for the transfer out; a program occupies the
//! channel for the transfer in, then the die for the program time.  Work
//! for a busy die or channel queues behind it, so parallelism is the
//! number of dies and the channels' bandwidth caps the throughput.

use crate::time::{transfer, Nanos, Timeline};

/// The dies and channels of a flash array, and when each is free.
#[derive(Debug, Clone)]
pub struct FlashArray {
    channels: Vec<Timeline>,
    dies: Vec<Timeline>,
    channel_bandwidth: u64,
}

impl FlashArray {
    /// `channels` × `dies_per_channel` dies (both at least 1), each channel
    /// moving `channel_bandwidth` bytes a second (0: unlimited).  Die `d`
    /// hangs off channel `d % channels`, so consecutive dies are on
    /// different channels.
    pub fn new(channels: u32, dies_per_channel: u32, channel_bandwidth: u64) -> Self {
        let channels = channels.max(1) as usize;
        let dies = channels * dies_per_channel.max(1) as usize;
        FlashArray {
            channels: vec![Timeline::default(); channels],
            dies: vec![Timeline::default(); dies],
            channel_bandwidth,
        }
    }

    /// How many dies.
    pub fn dies(&self) -> u32 {
        self.dies.len() as u32
    }

    /// Reads `bytes` from `die` (any number: taken modulo the dies), its
    /// sensing taking `sense`, from `ready` on; returns when the data are
    /// through the channel.
    pub fn read(&mut self, die: u32, ready: Nanos, sense: Nanos, bytes: u64) -> Nanos {
        let (die, channel) = self.locate(die);
        let moved = transfer(bytes, self.channel_bandwidth);
        // The die holds the data in its page register until they are out:
        // busy for the sensing and the transfer.
        let sensed = self.dies[die].occupy(ready, sense + moved) - moved;
        self.channels[channel].occupy(sensed, moved)
    }

    /// Programs `bytes` into `die`, the program taking `program`, from
    /// `ready` on; returns when the program is done.
    pub fn program(&mut self, die: u32, ready: Nanos, bytes: u64, program: Nanos) -> Nanos {
        let (die, channel) = self.locate(die);
        let moved = transfer(bytes, self.channel_bandwidth);
        let arrived = self.channels[channel].occupy(ready, moved);
        self.dies[die].occupy(arrived, program)
    }

    /// Occupies `die` for `busy` (an erase, a zone reset) from `ready` on;
    /// returns when it is done.
    pub fn occupy_die(&mut self, die: u32, ready: Nanos, busy: Nanos) -> Nanos {
        let (die, _) = self.locate(die);
        self.dies[die].occupy(ready, busy)
    }

    /// When every die and channel is free.
    pub fn idle_at(&self) -> Nanos {
        self.dies
            .iter()
            .chain(&self.channels)
            .map(Timeline::free_at)
            .max()
            .unwrap_or(0)
    }

    fn locate(&self, die: u32) -> (usize, usize) {
        let die = die as usize % self.dies.len();
        (die, die % self.channels.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_of_one_die_queue_and_of_two_dies_overlap() {
        // 2 channels x 2 dies, 1 GB/s: 4 KiB moves in 4096 ns.
        let mut flash = FlashArray::new(2, 2, 1_000_000_000);
        assert_eq!(flash.dies(), 4);
        assert_eq!(flash.read(0, 0, 50_000, 4096), 54_096);
        // Same die: sensing waits for the die.
        assert_eq!(flash.read(0, 0, 50_000, 4096), 108_192);
        // Die 1 is on the other channel: in parallel.
        assert_eq!(flash.read(1, 0, 50_000, 4096), 54_096);
        // Die 2 shares channel 0 with die 0: it senses in parallel, then
        // its transfer takes the channel's idle span between die 0's two
        // transfers.
        assert_eq!(flash.read(2, 0, 50_000, 4096), 54_096 + 4096);
    }

    #[test]
    fn programs_move_the_data_then_program() {
        let mut flash = FlashArray::new(1, 2, 1_000_000_000);
        assert_eq!(flash.program(0, 0, 32768, 185_000), 32_768 + 185_000);
        // The channel is free again at 32_768: die 1 programs in parallel.
        assert_eq!(flash.program(1, 0, 32768, 185_000), 65_536 + 185_000);
        // Die 0 is idle until its data arrive: an erase fits before.
        assert_eq!(flash.occupy_die(0, 0, 1000), 1000);
        assert_eq!(flash.idle_at(), 250_536);
    }
}
