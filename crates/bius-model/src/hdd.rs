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
//! after the media, writes before.  Zone appends go to the write pointer the
//! model keeps for each sequential zone.  Zone reset and finish are metadata
//! updates (`zones.reset`, `zones.finish`) that queue on the actuator but do
//! not move the head; open, close and report zones are answered from the
//! drive's memory at once; a flush costs `host.flush`, discard and
//! write-zeroes with unmap `host.discard`.
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

use bius::IoCommand;
use serde::{Deserialize, Serialize};

use crate::media::Media;
use crate::profile::{at_least_one, Profile, ProfileError};
use crate::quantity;
use crate::time::{Nanos, SECOND};

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
}

/// The media of an `hdd` profile (placeholder: the seek and rotation
/// model comes next).
#[derive(Debug)]
pub struct HddMedia;

impl HddMedia {
    /// The media of `profile` over `capacity` bytes.
    pub fn new(_profile: &Profile, _capacity: u64) -> Result<Self, ProfileError> {
        Ok(HddMedia)
    }
}

impl Media for HddMedia {
    fn serve(&mut self, _command: IoCommand, now: Nanos) -> Nanos {
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in profile without host link limits.
    fn profile() -> Profile {
        let mut profile = Profile::built_in("smr-hdd").unwrap();
        profile.host.read_bandwidth = 0;
        profile.host.write_bandwidth = 0;
        profile
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
}
