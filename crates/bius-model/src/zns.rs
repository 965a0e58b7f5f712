//! A zoned (ZNS) flash SSD, as NVMeVirt models one: each zone stripes its
//! data over `zones.dies_per_zone` dies in program units, a write is
//! acknowledged once it is in the zone's write buffer (`zones.zone_buffer`;
//! without one, once it is programmed), a full program unit is programmed
//! on its die, and reset and finish occupy the zone's dies.
//!
//! Times, for a request arriving at `now` (`cores`: the controller's
//! cores, [`Pool`]; every request completes `host.overhead` after the
//! time below):
//! - write (or append) of `len` bytes: the host link moves it (write
//!   bandwidth), a core runs its firmware, `firmware.write +
//!   firmware.write_per_4k × ⌈len / 4 KiB⌉` (+ `firmware.append` for an
//!   append), then it waits for room in the zone's buffer, and completes.
//!   Each program unit it fills is programmed on its die (the channel
//!   moves the unit, the die programs it for `flash.program`), and frees
//!   its room in the buffer when done.  Without a buffer, the write
//!   completes when its units (a partial last one included) are programmed.
//! - read: a core runs `firmware.read_4k` (up to 4 KiB) or
//!   `firmware.read`, then each program unit it touches is sensed on its
//!   die (`flash.read_4k` up to 4 KiB, else `flash.read_page`) and moved
//!   over the channel, then over the host link; what lies beyond the
//!   zone's write pointer needs no flash.
//! - zone management (open, close, finish, reset): a core runs
//!   `firmware.zone`, then:
//! - reset: a zone open with data on flash first has its open stripe
//!   (a program unit on each of its dies) padded and programmed; then
//!   each of its dies is busy `zones.reset + zones.erase_full × host bytes
//!   written / zone capacity`; finish of a zone holding data: the rest of
//!   its capacity is padded and programmed over its dies (at flash speed),
//!   then its dies are busy `zones.finish` (an empty zone: `zones.finish`
//!   only, nothing is padded); finish of a full zone: nothing more;
//!   reset-all resets every written zone.  (ZN540,
//!   stonet-research/NVMeBenchmarks data/custom/zns-a/partial_reset and
//!   partial_finish: a reset grows with the data the host wrote, a reset
//!   after a finish does not count the padding, and finishing a zone
//!   with one block written takes as long as writing the rest of it.)
//! - flush: every partly filled unit is programmed; it completes when all
//!   programs are done, plus `host.flush`.
//! - report: no time.
//! - a request the device refused (a write off the write pointer or into a
//!   full zone, an open beyond the open-zone limit, ...): the firmware's
//!   fixed time of its kind ([`Firmware::refusal`]); no link, buffer or
//!   flash time, and the zones stay as they were.
//!
//! Zone *rules* (write pointer, open and active limits) are the zoned
//! backend's; this model learns how far each zone is written from the
//! device's answers: a write that succeeded ends there, an append ends
//! where the device says it landed plus its length, a reset empties the
//! zone, a finish fills it.  It needs that to skip unwritten data on reads
//! and to know which zones a reset of all zones erases.

use bius::{Command, IoError, Reply};

use crate::buffer::WriteBuffer;
use crate::flash::FlashArray;
use crate::media::{Media, MediaStats};
use crate::profile::{Firmware, Flash, Host, Profile, ProfileError, Zones};
use crate::time::{transfer, Nanos, Pool, Timeline};

/// One zone's state in the model.
#[derive(Debug, Clone)]
struct ZoneState {
    /// Bytes written from the zone's start, as the device's answers say
    /// (a finished zone: all of it).
    written: u64,
    /// Bytes the host wrote into it (what a reset erases).
    host_written: u64,
    /// Bytes of the program unit being filled, not yet programmed.
    pending: u64,
    /// Its write buffer, if the profile has one.
    buffer: Option<WriteBuffer>,
}

/// The [`Media`] of a `zns` profile.
#[derive(Debug)]
pub struct ZnsMedia {
    flash: Flash,
    firmware: Firmware,
    host: Host,
    zone: Zones,
    dies_per_zone: u32,
    array: FlashArray,
    cores: Pool,
    zones: Vec<ZoneState>,
    read_link: Timeline,
    write_link: Timeline,
    /// When every program issued so far is done.
    programs_done: Nanos,
    stats: MediaStats,
}

impl ZnsMedia {
    /// The media of `profile` (with `[flash]` and `[zones]`) over
    /// `capacity` bytes.
    pub fn new(profile: &Profile, capacity: u64) -> Result<Self, ProfileError> {
        let flash = profile.section("flash", &profile.flash)?.clone();
        let zones = profile.section("zones", &profile.zones)?.clone();
        let count = capacity.div_ceil(zones.size).max(1) as usize;
        let buffer = (zones.zone_buffer > 0).then(|| WriteBuffer::new(zones.zone_buffer));
        Ok(ZnsMedia {
            array: FlashArray::new(
                flash.channels,
                flash.dies_per_channel,
                flash.channel_bandwidth,
            ),
            cores: Pool::new(profile.firmware.as_ref().map_or(0, |f| f.cores)),
            firmware: profile.firmware.clone().unwrap_or_default(),
            host: profile.host.clone(),
            dies_per_zone: zones.dies_per_zone.clamp(1, flash.dies()),
            zones: vec![
                ZoneState {
                    written: 0,
                    host_written: 0,
                    pending: 0,
                    buffer,
                };
                count
            ],
            zone: zones,
            flash,
            read_link: Timeline::default(),
            write_link: Timeline::default(),
            programs_done: 0,
            stats: MediaStats::default(),
        })
    }

    /// The zone of `offset`, and the offset within it.
    fn locate(&self, offset: u64) -> (usize, u64) {
        let zone = ((offset / self.zone.size) as usize).min(self.zones.len() - 1);
        (zone, offset % self.zone.size)
    }

    /// The die holding byte `within` of `zone`: the zone's dies in turn,
    /// a program unit each.
    fn die(&self, zone: usize, within: u64) -> u32 {
        let first = (zone as u64 * u64::from(self.dies_per_zone)) % u64::from(self.array.dies());
        let unit = within / self.flash.program_unit;
        ((first + unit % u64::from(self.dies_per_zone)) % u64::from(self.array.dies())) as u32
    }

    /// Programs `bytes` of `zone` ending at byte `end` from `ready` on;
    /// when done (the zone's buffer room is freed then).
    fn program(&mut self, zone: usize, end: u64, bytes: u64, ready: Nanos) -> Nanos {
        let die = self.die(zone, end - bytes);
        let done = self.array.program(die, ready, bytes, self.flash.program);
        if let Some(buffer) = &mut self.zones[zone].buffer {
            buffer.release_at(done, bytes);
        }
        self.stats.media_bytes_written += bytes;
        self.programs_done = self.programs_done.max(done);
        done
    }

    /// Programs the zone's partly filled unit, if any; when done.
    fn program_pending(&mut self, zone: usize, ready: Nanos) -> Nanos {
        let state = &self.zones[zone];
        let (end, pending) = (state.written, state.pending);
        if pending == 0 {
            return ready;
        }
        self.zones[zone].pending = 0;
        self.program(zone, end, pending, ready)
    }

    /// Writes `len` bytes the device wrote at `offset` (`append`: a zone
    /// append put them there).
    fn write(&mut self, offset: u64, len: u64, now: Nanos, append: bool) -> Nanos {
        self.stats.host_bytes_written += len;
        let (zone, within) = self.locate(offset);
        let arrived = self
            .write_link
            .occupy(now, transfer(len, self.host.write_bandwidth));
        let firmware = self.firmware.write
            + self.firmware.write_per_4k * len.div_ceil(4096)
            + if append { self.firmware.append } else { 0 };
        let parsed = self.cores.occupy(arrived, firmware);
        let admitted = match &mut self.zones[zone].buffer {
            Some(buffer) => {
                let admitted = buffer.admit(parsed, len);
                if admitted > parsed {
                    self.stats.buffer_stalls += 1;
                }
                admitted
            }
            None => parsed,
        };
        let state = &mut self.zones[zone];
        // (appends in flight together may be answered out of order)
        state.written = state.written.max(within + len);
        state.host_written += len;
        let unit = self.flash.program_unit;
        let filled = state.pending + len;
        let mut end = within + len - filled % unit;
        state.pending = filled % unit;
        // The units this write completes, last first.
        let mut programmed = admitted;
        for _ in 0..filled / unit {
            programmed = programmed.max(self.program(zone, end, unit, admitted));
            end -= unit;
        }
        if self.zones[zone].buffer.is_some() {
            return admitted + self.host.overhead;
        }
        programmed.max(self.program_pending(zone, admitted)) + self.host.overhead
    }

    fn read(&mut self, offset: u64, len: u64, now: Nanos) -> Nanos {
        let firmware = if len <= 4096 {
            self.firmware.read_4k
        } else {
            self.firmware.read
        };
        let start = self.cores.occupy(now, firmware);
        let (zone, within) = self.locate(offset);
        let written = self.zones[zone].written;
        let unit = self.flash.program_unit;
        let mut sensed = start;
        let mut at = within;
        while at < (within + len).min(written) {
            let piece = (unit - at % unit).min(within + len - at);
            let sense = if piece <= 4096 {
                self.flash.read_4k
            } else {
                self.flash.read_page
            };
            let die = self.die(zone, at);
            sensed = sensed.max(self.array.read(die, start, sense, piece));
            at += piece;
        }
        self.read_link
            .occupy(sensed, transfer(len, self.host.read_bandwidth))
            + self.host.overhead
    }

    /// Occupies the zone's dies for `busy` from `ready` on; when done.
    fn occupy_zone(&mut self, zone: usize, ready: Nanos, busy: Nanos) -> Nanos {
        (0..u64::from(self.dies_per_zone))
            .map(|unit| {
                let die = self.die(zone, unit * self.flash.program_unit);
                self.array.occupy_die(die, ready, busy)
            })
            .max()
            .unwrap_or(ready)
    }

    /// A zone management command's firmware, from `now`; when done.
    fn manage(&mut self, now: Nanos) -> Nanos {
        self.cores.occupy(now, self.firmware.zone)
    }

    /// Programs `zone` from the end of its programmed data up to byte
    /// `end` (padding: the partly filled unit and those after it), each
    /// unit on its die, from `ready` on; when done.
    fn pad(&mut self, zone: usize, end: u64, ready: Nanos) -> Nanos {
        let state = &mut self.zones[zone];
        let mut at = state.written - state.pending;
        state.pending = 0;
        let unit = self.flash.program_unit;
        let mut programmed = ready;
        while at < end {
            let bytes = unit.min(end - at);
            at += bytes;
            programmed = programmed.max(self.program(zone, at, bytes, ready));
        }
        programmed
    }

    fn reset(&mut self, zone: usize, now: Nanos) -> Nanos {
        let mut ready = self.manage(now);
        let capacity = self.zone.writable();
        let state = &self.zones[zone];
        // A zone open with data on flash: its open stripe is closed out
        // (padded) before the erase.
        if state.written < capacity && state.written > state.pending {
            let stripe = self.flash.program_unit * u64::from(self.dies_per_zone);
            let end = state.written.next_multiple_of(stripe).min(capacity);
            ready = self.pad(zone, end, ready);
        }
        let state = &mut self.zones[zone];
        let share = state.host_written.min(capacity) as f64 / capacity as f64;
        let busy = self.zone.reset + (self.zone.erase_full as f64 * share) as Nanos;
        state.written = 0;
        state.host_written = 0;
        state.pending = 0;
        if let Some(buffer) = &mut state.buffer {
            *buffer = WriteBuffer::new(buffer.capacity());
        }
        self.stats.erases += u64::from(self.dies_per_zone);
        self.occupy_zone(zone, ready, busy) + self.host.overhead
    }

    fn finish(&mut self, zone: usize, now: Nanos) -> Nanos {
        let ready = self.manage(now);
        let capacity = self.zone.writable();
        let written = self.zones[zone].written;
        if written >= capacity {
            return ready + self.host.overhead;
        }
        let padded = match written {
            0 => ready,
            _ => self.pad(zone, capacity, ready),
        };
        self.zones[zone].written = self.zone.size;
        let done = match self.zone.finish {
            0 => padded,
            busy => self.occupy_zone(zone, padded, busy),
        };
        done + self.host.overhead
    }

    fn flush(&mut self, now: Nanos) -> Nanos {
        for zone in 0..self.zones.len() {
            self.program_pending(zone, now);
        }
        now.max(self.programs_done) + self.host.flush
    }
}

impl Media for ZnsMedia {
    fn serve(&mut self, command: Command, reply: &Reply, now: Nanos) -> Nanos {
        match command {
            Command::Read { offset, len } => self.read(offset, len, now),
            Command::Write { offset, len, .. }
            | Command::WriteZeroes {
                offset,
                len,
                unmap: false,
            } => self.write(offset, len, now, false),
            Command::ZoneAppend { len, .. } => match reply {
                Reply::Appended(at) => self.write(*at, len, now, true),
                // A success that does not say where (the kernel gets EIO).
                _ => self.refuse(command, IoError::Io, now),
            },
            Command::Flush => self.flush(now),
            Command::Discard { .. } | Command::WriteZeroes { .. } => now + self.host.discard,
            Command::ZoneReset { offset } => self.reset(self.locate(offset).0, now),
            Command::ZoneResetAll => (0..self.zones.len())
                .filter(|&zone| self.zones[zone].written > 0)
                .collect::<Vec<_>>()
                .into_iter()
                .map(|zone| self.reset(zone, now))
                .max()
                .unwrap_or(now),
            Command::ZoneFinish { offset } => self.finish(self.locate(offset).0, now),
            Command::ZoneOpen { .. } | Command::ZoneClose { .. } => {
                self.manage(now) + self.host.overhead
            }
            _ => now,
        }
    }

    fn refuse(&mut self, command: Command, _error: IoError, now: Nanos) -> Nanos {
        now + self.firmware.refusal(command)
    }

    fn stats(&self) -> MediaStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::SECOND;

    fn media() -> (ZnsMedia, Profile) {
        let profile = Profile::built_in("zns-ssd").unwrap();
        (ZnsMedia::new(&profile, 1 << 30).unwrap(), profile)
    }

    fn write(offset: u64, len: u64) -> Command {
        Command::Write {
            offset,
            len,
            fua: false,
        }
    }

    #[test]
    fn a_buffered_write_completes_at_buffer_speed() {
        let (mut zns, profile) = media();
        let firmware = profile.firmware.unwrap();
        let link = transfer(4096, profile.host.write_bandwidth);
        let fixed = firmware.write + firmware.write_per_4k + profile.host.overhead;
        assert_eq!(zns.serve(write(0, 4096), &Reply::Done, 0), link + fixed);
        // An append costs its own firmware time more.
        let append = Command::ZoneAppend {
            offset: 0,
            len: 4096,
            fua: false,
        };
        let later = 1_000_000;
        assert_eq!(
            zns.serve(append, &Reply::Appended(4096), later),
            later + link + fixed + firmware.append
        );
        assert_eq!(zns.stats().host_bytes_written, 8192);
    }

    #[test]
    fn a_full_zone_buffer_slows_writes_to_program_speed() {
        let mut profile = Profile::built_in("zns-ssd").unwrap();
        // A buffer of 10 units (NVMeVirt's): smaller than the dies keep
        // busy, so it is the limit.
        profile.set("zones.zone_buffer", "\"960KiB\"").unwrap();
        let mut zns = ZnsMedia::new(&profile, 1 << 30).unwrap();
        let flash = profile.flash.unwrap();
        let buffer = profile.zones.unwrap().zone_buffer;
        let len = flash.program_unit;
        // Writes back to back: the first buffer-full are fast, then each
        // waits for a program.
        let mut done = Vec::new();
        let mut now = 0;
        for unit in 0..40u64 {
            let at = zns.serve(write(unit * len, len), &Reply::Done, now);
            done.push(at);
            now = at;
        }
        let buffered = buffer / flash.program_unit;
        let fast = done[buffered as usize - 1] / buffered;
        let slow = (done[39] - done[29]) / 10;
        // Little's law: the buffer's units each wait a unit's program
        // (channel transfer and program; the dies are many, not the limit).
        let program = transfer(flash.program_unit, flash.channel_bandwidth) + flash.program;
        let expected = program / buffered;
        assert!(slow > fast, "{fast} {slow}");
        assert!(
            slow.abs_diff(expected) * 20 < expected,
            "{slow} vs {expected}"
        );
        assert!(zns.stats().buffer_stalls > 0);
    }

    #[test]
    fn reads_of_unwritten_data_need_no_flash() {
        let (mut zns, profile) = media();
        let firmware = profile.firmware.as_ref().unwrap();
        let flash = profile.flash.as_ref().unwrap();
        let read = Command::Read {
            offset: 0,
            len: 4096,
        };
        let link = transfer(4096, profile.host.read_bandwidth) + profile.host.overhead;
        assert_eq!(zns.serve(read, &Reply::Done, 0), firmware.read_4k + link);
        zns.serve(write(0, 4096), &Reply::Done, 0);
        zns.serve(Command::Flush, &Reply::Done, 0);
        let later = 10_000_000;
        let sensed = firmware.read_4k + flash.read_4k + transfer(4096, flash.channel_bandwidth);
        assert_eq!(zns.serve(read, &Reply::Done, later), later + sensed + link);
    }

    #[test]
    fn a_reset_grows_with_the_data_the_host_wrote() {
        let (mut zns, profile) = media();
        let zones = profile.zones.unwrap();
        let fixed = profile.firmware.unwrap().zone + profile.host.overhead;
        let reset = |offset| Command::ZoneReset { offset };
        assert_eq!(
            zns.serve(reset(0), &Reply::Done, 1000),
            1000 + zones.reset + fixed
        );
        // Half the zone written, then finished: the reset erases the
        // half the host wrote, not the padding.
        let half = zones.writable() / 2;
        zns.serve(write(zones.size, half), &Reply::Done, 0);
        let later = 10 * SECOND;
        zns.serve(
            Command::ZoneFinish { offset: zones.size },
            &Reply::Done,
            later,
        );
        let idle = 20 * SECOND;
        assert_eq!(
            zns.serve(reset(zones.size), &Reply::Done, idle),
            idle + zones.reset + zones.erase_full / 2 + fixed
        );
        // Open with data on flash: its stripe is padded first (a program).
        let stripe = profile.flash.as_ref().unwrap().program_unit * u64::from(zones.dies_per_zone);
        zns.serve(write(2 * zones.size, stripe + 4096), &Reply::Done, idle);
        let last = 30 * SECOND;
        let open = zns.serve(reset(2 * zones.size), &Reply::Done, last) - last;
        let share =
            (zones.erase_full as f64 * (stripe + 4096) as f64 / zones.writable() as f64) as Nanos;
        assert!(
            open >= zones.reset + share + profile.flash.unwrap().program,
            "{open}"
        );
        assert_eq!(zns.stats().erases, 3 * u64::from(zones.dies_per_zone));
    }

    #[test]
    fn a_finish_pads_the_rest_of_the_zone_at_program_speed() {
        let (mut zns, profile) = media();
        let (zones, flash) = (profile.zones.unwrap(), profile.flash.unwrap());
        let fixed = profile.firmware.unwrap().zone + profile.host.overhead;
        let finish = |offset| Command::ZoneFinish { offset };
        // Empty: nothing to program.
        assert_eq!(zns.serve(finish(0), &Reply::Done, 1000), 1000 + fixed);
        // One block written: the rest of the capacity is programmed over
        // the zone's dies.
        zns.serve(write(zones.size, 4096), &Reply::Done, 0);
        let now = SECOND;
        let took = zns.serve(finish(zones.size), &Reply::Done, now) - now;
        let rate =
            f64::from(zones.dies_per_zone) * flash.program_unit as f64 / flash.program as f64;
        let expected = (zones.writable() as f64 / rate) as Nanos;
        assert!(
            took.abs_diff(expected) * 10 < expected,
            "{took} vs {expected}"
        );
        assert_eq!(zns.zones[1].written, zones.size);
    }

    #[test]
    fn the_zones_follow_the_device_s_answers() {
        let (mut zns, profile) = media();
        let zone = profile.zones.unwrap().size;
        let append = Command::ZoneAppend {
            offset: zone,
            len: 8192,
            fua: false,
        };
        // Where the device says the data landed, not after the model's
        // last write.
        zns.serve(append, &Reply::Appended(zone + 12288), 0);
        assert_eq!(zns.zones[1].written, 12288 + 8192);
        zns.serve(write(zone + 20480, 4096), &Reply::Done, 0);
        assert_eq!(zns.zones[1].written, 24576);
        // A refused reset leaves the zone as it was; a reset empties it.
        let reset = Command::ZoneReset { offset: zone };
        zns.refuse(reset, IoError::Io, 0);
        assert_eq!(zns.zones[1].written, 24576);
        zns.serve(reset, &Reply::Done, 0);
        assert_eq!(zns.zones[1].written, 0);
        // A finish fills it; a reset of all zones empties every one.
        zns.serve(Command::ZoneFinish { offset: 0 }, &Reply::Done, 0);
        assert_eq!(zns.zones[0].written, zone);
        zns.serve(Command::ZoneResetAll, &Reply::Done, 0);
        assert!(zns.zones.iter().all(|state| state.written == 0));
        // An append the device answered without saying where is not
        // written anywhere (the kernel gets EIO for it).
        zns.serve(append, &Reply::Done, 0);
        assert_eq!(zns.zones[1].written, 0);
    }

    #[test]
    fn a_refused_write_costs_the_firmware_only_and_delays_nothing() {
        let (mut refusing, profile) = media();
        let firmware = profile.firmware.unwrap();
        // A large write off the write pointer: a dozen program units,
        // more than the zone's buffer holds.
        let off_pointer = write(1 << 20, 4 << 20);
        assert_eq!(
            refusing.refuse(off_pointer, IoError::Io, 1000),
            1000 + firmware.write
        );
        assert_eq!(refusing.stats(), MediaStats::default());
        assert_eq!(refusing.zones[0].written, 0);
        // What follows completes as on a drive that never saw it.
        let (mut fresh, _) = media();
        for command in [write(0, 1 << 20), write(1 << 20, 4 << 20), Command::Flush] {
            assert_eq!(
                refusing.serve(command, &Reply::Done, 1000),
                fresh.serve(command, &Reply::Done, 1000),
                "{command:?}"
            );
        }
        // Other refusals cost the firmware's fixed time of their kind.
        let read = Command::Read {
            offset: 0,
            len: 1 << 20,
        };
        assert_eq!(refusing.refuse(read, IoError::Io, 0), firmware.read_4k);
        let open = Command::ZoneOpen { offset: 0 };
        let too_many = IoError::from(bius::Errno::ETOOMANYREFS);
        assert_eq!(refusing.refuse(open, too_many, 7), 7);
    }
}
