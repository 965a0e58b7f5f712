//! Persistent memory behind a block interface (Optane-class): every access
//! of up to `access_size` bytes takes a fixed time on one of `units`
//! parallel units, and the host link caps the bandwidth.

use bius::{Command, Reply};

use crate::media::{Media, MediaStats};
use crate::profile::{Host, Nvm, Profile, ProfileError};
use crate::time::{transfer, Nanos, Timeline};

/// The [`Media`] of an `nvm` profile.
#[derive(Debug)]
pub struct NvmMedia {
    nvm: Nvm,
    host: Host,
    units: Vec<Timeline>,
    read_link: Timeline,
    write_link: Timeline,
    stats: MediaStats,
}

impl NvmMedia {
    /// The media of `profile` (which must have an `[nvm]` section).
    pub fn new(profile: &Profile) -> Result<Self, ProfileError> {
        let nvm = profile.section("nvm", &profile.nvm)?.clone();
        Ok(NvmMedia {
            units: vec![Timeline::default(); nvm.units.max(1) as usize],
            nvm,
            host: profile.host.clone(),
            read_link: Timeline::default(),
            write_link: Timeline::default(),
            stats: MediaStats::default(),
        })
    }

    /// `accesses` accesses of `each` time on the unit free first.
    fn access(&mut self, now: Nanos, accesses: u64, each: Nanos) -> Nanos {
        let unit = self
            .units
            .iter_mut()
            .min_by_key(|unit| unit.free_at())
            .expect("at least one unit");
        unit.occupy(now, accesses.saturating_mul(each))
    }

    fn accesses(&self, len: u64) -> u64 {
        len.div_ceil(self.nvm.access_size).max(1)
    }
}

impl Media for NvmMedia {
    fn serve(&mut self, command: Command, _reply: &Reply, now: Nanos) -> Nanos {
        match command {
            Command::Read { len, .. } => {
                let read = self.access(now, self.accesses(len), self.nvm.read);
                let moved = transfer(len, self.host.read_bandwidth);
                self.read_link.occupy(read, moved)
            }
            Command::Write { len, .. } | Command::ZoneAppend { len, .. } => {
                self.stats.host_bytes_written += len;
                self.stats.media_bytes_written += len;
                let moved = transfer(len, self.host.write_bandwidth);
                let arrived = self.write_link.occupy(now, moved);
                self.access(arrived, self.accesses(len), self.nvm.write)
            }
            Command::WriteZeroes {
                len, unmap: false, ..
            } => {
                self.stats.host_bytes_written += len;
                self.stats.media_bytes_written += len;
                self.access(now, self.accesses(len), self.nvm.write)
            }
            Command::Flush => now + self.host.flush,
            Command::Discard { .. } | Command::WriteZeroes { .. } => now + self.host.discard,
            _ => now,
        }
    }

    fn stats(&self) -> MediaStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(units: u32) -> NvmMedia {
        let mut profile = Profile::built_in("nvm").unwrap();
        profile.nvm.as_mut().unwrap().units = units;
        // A link too fast to matter.
        profile.host.read_bandwidth = u64::MAX;
        profile.host.write_bandwidth = u64::MAX;
        NvmMedia::new(&profile).unwrap()
    }

    #[test]
    fn accesses_overlap_up_to_the_units() {
        let mut nvm = media(2);
        let read = nvm.nvm.read;
        // The link adds a nanosecond or two.
        let about = |got: Nanos, expected: Nanos| {
            assert!(got.abs_diff(expected) <= 2, "{got} vs {expected}");
        };
        let command = Command::Read {
            offset: 0,
            len: 4096,
        };
        about(nvm.serve(command, &Reply::Done, 0), read);
        about(nvm.serve(command, &Reply::Done, 0), read);
        // The third waits for a unit.
        about(nvm.serve(command, &Reply::Done, 0), 2 * read);
        // A 64 KiB read is several accesses.
        let big = Command::Read {
            offset: 0,
            len: 65536,
        };
        let accesses = 65536 / nvm.nvm.access_size;
        about(
            nvm.serve(big, &Reply::Done, 10 * read),
            10 * read + accesses * read,
        );
    }
}
