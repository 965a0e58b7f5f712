//! A host-managed SMR hard disk: one actuator that seeks, a platter that
//! turns, and a media rate that falls from the outer edge to the inner one.
//!
//! # What is modelled
//!
//! Requests are served one at a time, in arrival order, by the actuator
//! (a [`Timeline`]): a request starts when it has arrived and the actuator
//! is free, and then takes
//!
//! ```text
//! seek + rotational wait + transfer
//! ```
//!
//! * **Seek**: none if the head is already on the target's track, else
//!   [`HddProfile::seek`] of the distance as a fraction `d` of the stroke,
//!   `d = |target - head| / capacity`: the whole emulated device is the
//!   whole stroke, so random access over a small device costs what it costs
//!   over the whole disk.  The curve is `t(d) = a + b·√d + c·d` with
//!   `a = track_to_track_seek` and `b`, `c` chosen so that `t(1)` is
//!   `full_stroke_seek` and the mean over uniformly random start and end
//!   points (`E[√d] = 8/15`, `E[d] = 1/3`) is exactly `average_seek`:
//!   `b = 5·(A - F/3)`, `c = F - b` with `A = average - a`,
//!   `F = full_stroke - a`.  When `full_stroke = a + 15/8·A`, `c` is 0: the
//!   usual `a + b·√d`.  Writes after a seek settle `write_settle` longer.
//! * **Rotation**: zoned bit recording with the media rate falling linearly
//!   from `outer_rate` at offset 0 to `inner_rate` at the end, so a track
//!   (one revolution) holds `T(o) = rate(o) · 60/rpm` bytes at offset `o`.
//!   Byte `o` lies `N(o) = ∫₀ᵒ dx / T(x)` revolutions from the start, and
//!   passes under the head when the platter's angle, `time · rpm/60 mod 1`,
//!   equals `N(o) mod 1`; the head's track is `⌊N(o)⌋`.  The rotational wait
//!   is the time until the first byte comes round.
//! * **Transfer**: `(N(end) - N(offset))` revolutions, i.e. `len / rate` at
//!   that position.  The head then sits at the end, so a request that
//!   follows on seeks nothing and waits (almost) nothing.
//!
//! The host link caps each direction ([`Host`] bandwidths): reads cross it
//! after the media, writes before.  A zone append's data go where the disk
//! says they landed.  Zone reset and finish are metadata updates
//! (`zones.reset`, `zones.finish`) that queue on the actuator but do not
//! move the head; a reset of all zones counts an erase for each zone the
//! disk's answers say is not empty.  Open, close and report zones are
//! answered from the drive's memory at once; a flush costs `host.flush`,
//! discard and write-zeroes with unmap `host.discard`.  A request the disk
//! refuses (a write off a zone's write pointer, an open beyond the limit,
//! ...) is answered at once: the drive checks it before the actuator or
//! the link does anything.
//!
//! # What is not
//!
//! * No DRAM cache: a write completes when it is on the media, and reads do
//!   not hit read-ahead (a following-on read still costs no seek or
//!   rotation, which is most of what read-ahead saves).
//! * No media cache: the conventional zones are written in place, like the
//!   rest (a host-managed drive has no media cache to stage writes in).
//! * No command reordering: the kernel's mq-deadline scheduler, which zoned
//!   disks need, already dispatches writes to a zone in order, one at a time.
//! * No head switches, track skew, seek direction or retries: crossing a
//!   track boundary during a transfer costs nothing extra.

use bius::{Command, IoError, Reply};
use serde::{Deserialize, Serialize};

use crate::media::{Media, MediaStats};
use crate::profile::{at_least_one, Host, Profile, ProfileError, Zones};
use crate::quantity;
use crate::time::{transfer, Nanos, Timeline, SECOND};

/// A first byte passed this recently still counts as under the head: device
/// time is kept in whole nanoseconds (each transfer rounded), and a
/// request that follows on arrives after the host link's last nanoseconds,
/// so it may find the platter a few nanoseconds past its start.  A
/// microsecond is a ten-thousandth of a turn: a few bytes.
const ROUNDING_SLACK: f64 = 1000.0;

/// The mechanics of a disk (`[hdd]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddProfile {
    /// Spindle speed, revolutions a minute.
    pub rpm: u32,
    /// A seek to the next track, settling included.
    #[serde(with = "quantity::time")]
    pub track_to_track_seek: Nanos,
    /// The mean seek between uniformly random positions (the datasheet's
    /// average seek).
    #[serde(with = "quantity::time")]
    pub average_seek: Nanos,
    /// A seek across the whole stroke.
    #[serde(with = "quantity::time")]
    pub full_stroke_seek: Nanos,
    /// Extra settling before a write that needed a seek.
    #[serde(with = "quantity::time", default)]
    pub write_settle: Nanos,
    /// Bytes a second passing under the head at the outer edge (offset 0).
    #[serde(with = "quantity::bandwidth")]
    pub outer_rate: u64,
    /// Bytes a second at the inner edge (the end of the device); the rate
    /// falls linearly between them.  0 for `outer_rate` everywhere.
    #[serde(with = "quantity::bandwidth", default)]
    pub inner_rate: u64,
}

impl HddProfile {
    pub(crate) fn check(&self) -> Result<(), ProfileError> {
        at_least_one("hdd.rpm", self.rpm)?;
        at_least_one("hdd.outer_rate", self.outer_rate)?;
        if self.inner_rate > self.outer_rate {
            return Err(ProfileError::new(
                "hdd.inner_rate",
                format!(
                    "must not exceed outer_rate {} (is {})",
                    self.outer_rate, self.inner_rate
                ),
            ));
        }
        if self.average_seek < self.track_to_track_seek {
            return Err(ProfileError::new(
                "hdd.average_seek",
                format!(
                    "must not be below track_to_track_seek {} (is {})",
                    self.track_to_track_seek, self.average_seek
                ),
            ));
        }
        if self.full_stroke_seek < self.average_seek {
            return Err(ProfileError::new(
                "hdd.full_stroke_seek",
                format!(
                    "must not be below average_seek {} (is {})",
                    self.average_seek, self.full_stroke_seek
                ),
            ));
        }
        // b ≥ 0 and c ≥ 0: the seek time grows with the distance.
        let (a, full) = (self.track_to_track_seek, self.full_stroke_seek);
        let (lowest, highest) = (a + (full - a) / 3, a + (full - a) * 8 / 15);
        if !(lowest..=highest).contains(&self.average_seek) {
            return Err(ProfileError::new(
                "hdd.average_seek",
                format!(
                    "must be within {lowest}..={highest} ns for these track-to-track and \
                     full-stroke seeks (is {})",
                    self.average_seek
                ),
            ));
        }
        Ok(())
    }

    /// One revolution of the platter.
    pub fn revolution(&self) -> Nanos {
        60 * SECOND / Nanos::from(self.rpm.max(1))
    }

    /// A seek across `distance`, a fraction of the stroke (0 to 1): see the
    /// [module documentation](self) for the curve.
    pub fn seek(&self, distance: f64) -> Nanos {
        let a = self.track_to_track_seek as f64;
        let average = self.average_seek as f64 - a;
        let full = self.full_stroke_seek as f64 - a;
        let b = 5.0 * (average - full / 3.0);
        let c = full - b;
        let d = distance.clamp(0.0, 1.0);
        (a + b * d.sqrt() + c * d).round() as Nanos
    }

    /// The rate at the inner edge.
    fn inner_rate(&self) -> u64 {
        match self.inner_rate {
            0 => self.outer_rate,
            rate => rate,
        }
    }
}

/// The [`Media`] of an `hdd` profile.
#[derive(Debug)]
pub struct HddMedia {
    hdd: HddProfile,
    zones: Zones,
    host: Host,
    capacity: u64,
    /// One revolution, ns.
    revolution: f64,
    /// Bytes on the outermost track.
    outer_track: f64,
    /// How the track size changes per byte of offset.
    track_slope: f64,
    /// Where the head is: the offset after the last byte it moved.
    head: u64,
    actuator: Timeline,
    read_link: Timeline,
    write_link: Timeline,
    /// The sequential zones that are not empty, as the disk's answers say
    /// (written or finished since their reset).
    not_empty: Vec<bool>,
    stats: MediaStats,
}

impl HddMedia {
    /// The media of `profile` (which must have `[hdd]` and `[zones]`
    /// sections) over `capacity` bytes.
    pub fn new(profile: &Profile, capacity: u64) -> Result<Self, ProfileError> {
        let hdd = profile.section("hdd", &profile.hdd)?.clone();
        let zones = profile.section("zones", &profile.zones)?.clone();
        hdd.check()?;
        at_least_one("capacity", capacity)?;
        let revolution = 60.0 * SECOND as f64 / f64::from(hdd.rpm);
        let track = |rate: u64| rate as f64 * revolution / SECOND as f64;
        let outer_track = track(hdd.outer_rate);
        let track_slope = (track(hdd.inner_rate()) - outer_track) / capacity as f64;
        Ok(HddMedia {
            not_empty: vec![false; capacity.div_ceil(zones.size) as usize],
            hdd,
            zones,
            host: profile.host.clone(),
            capacity,
            revolution,
            outer_track,
            track_slope,
            head: 0,
            actuator: Timeline::default(),
            read_link: Timeline::default(),
            write_link: Timeline::default(),
            stats: MediaStats::default(),
        })
    }

    /// `N(offset)`: revolutions from the start of the device to `offset`.
    fn revolutions_to(&self, offset: u64) -> f64 {
        let offset = offset.min(self.capacity) as f64;
        if self.track_slope == 0.0 {
            offset / self.outer_track
        } else {
            (self.track_slope * offset / self.outer_track).ln_1p() / self.track_slope
        }
    }

    /// The seek from the head to `target`: none on the same track.
    fn seek_to(&self, target: u64) -> Nanos {
        let track = |offset| self.revolutions_to(offset).floor();
        if track(self.head) == track(target) {
            return 0;
        }
        let distance = self.head.abs_diff(target) as f64 / self.capacity as f64;
        self.hdd.seek(distance)
    }

    /// The wait at time `at` until the byte `revolutions` from the start
    /// comes round under the head.
    fn rotation_wait(&self, at: Nanos, revolutions: f64) -> Nanos {
        let platter = (at as f64 / self.revolution).fract();
        let wait = (revolutions.fract() - platter).rem_euclid(1.0) * self.revolution;
        if self.revolution - wait <= ROUNDING_SLACK {
            0
        } else {
            wait.round() as Nanos
        }
    }

    /// Moves `len` bytes at `offset` on the media, starting when the
    /// request is `ready` and the actuator free; returns when done.
    fn access(&mut self, ready: Nanos, offset: u64, len: u64, write: bool) -> Nanos {
        let start = ready.max(self.actuator.free_at());
        let mut seek = self.seek_to(offset);
        if write && seek > 0 {
            seek += self.hdd.write_settle;
        }
        let first = self.revolutions_to(offset);
        let wait = self.rotation_wait(start + seek, first);
        let end = offset.saturating_add(len);
        let moving = ((self.revolutions_to(end) - first) * self.revolution).round() as Nanos;
        self.head = end;
        self.actuator.occupy(start, seek + wait + moving)
    }

    /// Writes `len` bytes at `offset`, arrived over the link at `ready`.
    fn write(&mut self, ready: Nanos, offset: u64, len: u64) -> Nanos {
        self.stats.host_bytes_written += len;
        self.stats.media_bytes_written += len;
        if offset / self.zones.size >= u64::from(self.zones.conventional) {
            self.mark(offset, true);
        }
        self.access(ready, offset, len, true)
    }

    /// Writes `len` bytes from the host at `offset`: over the link first.
    fn write_from_host(&mut self, now: Nanos, offset: u64, len: u64) -> Nanos {
        let moved = transfer(len, self.host.write_bandwidth);
        let arrived = self.write_link.occupy(now, moved);
        self.write(arrived, offset, len)
    }

    /// Marks the zone at `offset` (if there is one) not empty or empty.
    fn mark(&mut self, offset: u64, not_empty: bool) {
        if let Some(zone) = self.not_empty.get_mut((offset / self.zones.size) as usize) {
            *zone = not_empty;
        }
    }
}

impl Media for HddMedia {
    fn serve(&mut self, command: Command, reply: &Reply, now: Nanos) -> Nanos {
        match command {
            Command::Read { offset, len } => {
                let read = self.access(now, offset, len, false);
                let moved = transfer(len, self.host.read_bandwidth);
                self.read_link.occupy(read, moved)
            }
            Command::Write { offset, len, .. } => self.write_from_host(now, offset, len),
            Command::ZoneAppend { len, .. } => match reply {
                Reply::Appended(at) => self.write_from_host(now, *at, len),
                // A success that does not say where (the kernel gets EIO).
                _ => self.refuse(command, IoError::Io, now),
            },
            Command::WriteZeroes {
                offset,
                len,
                unmap: false,
            } => self.write(now, offset, len),
            Command::Discard { .. } | Command::WriteZeroes { .. } => now + self.host.discard,
            Command::Flush => now + self.host.flush,
            Command::ZoneReset { offset } => {
                self.stats.erases += 1;
                self.mark(offset, false);
                self.actuator.occupy(now, self.zones.reset)
            }
            Command::ZoneResetAll => {
                let written = self.not_empty.iter().filter(|&&zone| zone).count();
                self.stats.erases += written as u64;
                self.not_empty.fill(false);
                self.actuator.occupy(now, self.zones.reset)
            }
            Command::ZoneFinish { offset } => {
                self.mark(offset, true);
                self.actuator.occupy(now, self.zones.finish)
            }
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
    use crate::Model;

    const GIB: u64 = 1 << 30;

    /// The built-in profile with a host link too fast to matter.
    fn profile() -> Profile {
        let mut profile = Profile::built_in("smr-hdd").unwrap();
        profile.host.read_bandwidth = 1 << 60;
        profile.host.write_bandwidth = 1 << 60;
        profile
    }

    fn read(offset: u64, len: u64) -> Command {
        Command::Read { offset, len }
    }

    #[test]
    fn random_reads_cost_average_seek_half_a_turn_and_the_transfer() {
        let profile = profile();
        let hdd = profile.hdd.clone().unwrap();
        let mut disk = HddMedia::new(&profile, 4 * GIB).unwrap();
        let mut rng = fastrand::Rng::with_seed(42);
        let (requests, len) = (4000, 4096);
        let (mut now, mut total) = (0, 0);
        for _ in 0..requests {
            let offset = rng.u64(0..4 * GIB / 4096) * 4096;
            let done = disk.serve(read(offset, len), &Reply::Done, now);
            total += done - now;
            now = done;
        }
        let mean = total as f64 / requests as f64;
        let middle_rate = (hdd.outer_rate + hdd.inner_rate) as f64 / 2.0;
        let expected = hdd.average_seek as f64
            + hdd.revolution() as f64 / 2.0
            + len as f64 / middle_rate * SECOND as f64;
        assert!(
            (mean / expected - 1.0).abs() < 0.05,
            "mean {mean} ns, expected {expected} ns"
        );
    }

    #[test]
    fn sequential_reads_run_at_the_media_rate() {
        let profile = profile();
        let hdd = profile.hdd.clone().unwrap();
        let mut disk = HddMedia::new(&profile, 4 * GIB).unwrap();
        let (chunks, len) = (64u64, 1u64 << 20);
        let first = disk.serve(read(0, len), &Reply::Done, 0);
        assert!(first <= hdd.revolution() + 5_000_000, "{first}");
        let mut done = first;
        for chunk in 1..chunks {
            // Half the reads arrive as the previous completes, half queued.
            let arrival = if chunk % 2 == 0 { done } else { 0 };
            let next = disk.serve(read(chunk * len, len), &Reply::Done, arrival);
            let rate = disk.hdd.outer_rate as f64
                - (disk.hdd.outer_rate - disk.hdd.inner_rate) as f64
                    * (chunk as f64 + 0.5)
                    * len as f64
                    / disk.capacity as f64;
            let at_rate = len as f64 / rate * SECOND as f64;
            let step = (next - done) as f64;
            assert!((step - at_rate).abs() < 1_000.0, "{step} vs {at_rate}");
            done = next;
        }
        let throughput = ((chunks - 1) * len) as f64 / ((done - first) as f64 / 1e9);
        assert!((throughput / hdd.outer_rate as f64 - 1.0).abs() < 0.01);
    }

    #[test]
    fn a_later_request_is_timed_by_the_platter_angle() {
        let mut profile = profile();
        // 6000 rpm: 10 ms a turn; 100 MB/s everywhere: 1 MB a track.
        profile.set("hdd.rpm", "6000").unwrap();
        profile.set("hdd.inner_rate", "0").unwrap();
        profile.set("hdd.outer_rate", "100MB/s").unwrap();
        let mut disk = HddMedia::new(&profile, 4 * GIB).unwrap();
        // 4 KiB at 100 MB/s, and a nanosecond over the (unlimited) link.
        let moving = 40_960 + 1;
        // On the head's track (no seek): a quarter turn to byte 250 000.
        assert_eq!(
            disk.serve(read(250_000, 4096), &Reply::Done, 0),
            2_500_000 + moving
        );
        // At 20 ms the platter is back at angle 0: half a turn to 500 000.
        assert_eq!(
            disk.serve(read(500_000, 4096), &Reply::Done, 20_000_000),
            25_000_000 + moving
        );
        // At 27 ms it is at 0.7 turn: 0.4 turn on to 100 000 (angle 0.1).
        assert_eq!(
            disk.serve(read(100_000, 4096), &Reply::Done, 27_000_000),
            31_000_000 + moving
        );
    }

    #[test]
    fn seeks_follow_the_datasheet_points() {
        let hdd = profile().hdd.unwrap();
        assert_eq!(hdd.seek(0.0), hdd.track_to_track_seek);
        assert_eq!(hdd.seek(1.0), hdd.full_stroke_seek);
        // The mean over uniformly random pairs: distance density 2·(1 - d).
        let steps = 100_000;
        let mean = (0..steps)
            .map(|i| {
                let d = (i as f64 + 0.5) / steps as f64;
                2.0 * (1.0 - d) * hdd.seek(d) as f64 / steps as f64
            })
            .sum::<f64>();
        assert!(
            (mean / hdd.average_seek as f64 - 1.0).abs() < 0.01,
            "{mean}"
        );
    }

    #[test]
    fn appends_go_where_the_disk_says_and_writes_are_counted() {
        let profile = profile();
        let zone = profile.zones.as_ref().unwrap().size;
        let mut disk = HddMedia::new(&profile, 4 * GIB).unwrap();
        let append = Command::ZoneAppend {
            offset: zone,
            len: 65536,
            fua: false,
        };
        disk.serve(append, &Reply::Appended(zone + 4096), 0);
        assert_eq!(disk.head, zone + 4096 + 65536);
        let done = disk.serve(append, &Reply::Appended(zone + 4096 + 65536), 0);
        assert_eq!(disk.head, zone + 4096 + 2 * 65536);
        assert_eq!(disk.stats().host_bytes_written, 2 * 65536);
        assert_eq!(disk.stats().write_amplification(), Some(1.0));
        disk.serve(Command::ZoneReset { offset: zone }, &Reply::Done, done);
        assert_eq!(disk.stats().erases, 1);
        // Of the zones, only the one finished is not empty.
        disk.serve(Command::ZoneFinish { offset: 3 * zone }, &Reply::Done, done);
        disk.serve(Command::ZoneResetAll, &Reply::Done, done);
        assert_eq!(disk.stats().erases, 2);
    }

    #[test]
    fn a_refusal_is_answered_at_once_and_moves_nothing() {
        let profile = profile();
        let zone = profile.zones.as_ref().unwrap().size;
        let mut disk = HddMedia::new(&profile, 4 * GIB).unwrap();
        let far = Command::Write {
            offset: 3 * zone + 8192,
            len: 1 << 20,
            fua: false,
        };
        assert_eq!(disk.refuse(far, IoError::Io, 1000), 1000);
        assert_eq!(disk.head, 0);
        assert_eq!(disk.actuator.free_at(), 0);
        assert_eq!(disk.stats(), MediaStats::default());
        // A reset of all zones erases none: the write was refused.
        disk.serve(Command::ZoneResetAll, &Reply::Done, 1000);
        assert_eq!(disk.stats().erases, 0);
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let mut profile = profile();
        for (key, value) in [
            ("hdd.rpm", "0"),
            ("hdd.outer_rate", "0"),
            ("hdd.inner_rate", "1GB/s"),
            ("hdd.average_seek", "100us"),
            ("hdd.average_seek", "14ms"),
            ("hdd.full_stroke_seek", "1ms"),
        ] {
            let err = profile.set(key, value).unwrap_err();
            assert_eq!(err.parameter, key, "{key}={value}: {err}");
        }
    }

    #[test]
    fn the_built_in_profile_makes_a_model() {
        let profile = Profile::built_in("smr-hdd").unwrap();
        let geometry = profile.zone_geometry(4 * GIB).unwrap().unwrap();
        assert!(geometry.max_open() > 0 && u64::from(geometry.max_open()) < 16);
        assert!(geometry.conventional_zones() >= 1);
        let model = Model::new(profile, 4 * GIB).unwrap();
        assert_eq!(model.stats(), MediaStats::default());
    }
}
