//! [`Model`]: a profile's media behind the framework's
//! [`DeviceModel`](bius::DeviceModel): device time from the wall clock
//! (scaled, never going backwards), the media under a lock, told each
//! request's result, seeded jitter.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bius::{Command, DeviceModel, IoError, Reply};

use crate::hdd::HddMedia;
use crate::media::{Media, MediaStats};
use crate::nvm::NvmMedia;
use crate::profile::{Kind, Profile, ProfileError};
use crate::ssd::SsdMedia;
use crate::time::Nanos;
use crate::zns::ZnsMedia;

/// A device model: give it to [`bius::DeviceBuilder::model`] (or, to read
/// its statistics while the device runs, an `Arc` of it).
///
/// It prices each request by its result, in
/// [`DeviceModel::served`]; the result-blind
/// [`DeviceModel::completion`] is the trait's default, `None`.
pub struct Model {
    profile: Profile,
    media: Mutex<Clocked>,
    jitter: Option<Mutex<fastrand::Rng>>,
    started: Instant,
}

impl Model {
    /// The model of `profile` for a device of `capacity` bytes (zoned
    /// profiles: zoned as [`Profile::zone_geometry`] says).
    ///
    /// ```
    /// use bius_model::{Model, Profile};
    ///
    /// let model = Model::new(Profile::built_in("nvm")?, 1 << 30)?;
    /// let builder = bius::DeviceBuilder::new(1 << 30).model(model);
    /// # Ok::<(), bius_model::ProfileError>(())
    /// ```
    pub fn new(profile: Profile, capacity: u64) -> Result<Model, ProfileError> {
        profile.check()?;
        profile.check_capacity(capacity)?;
        let media: Box<dyn Media> = match profile.kind {
            Kind::Ssd => Box::new(SsdMedia::new(&profile, capacity)?),
            Kind::Zns => Box::new(ZnsMedia::new(&profile, capacity)?),
            Kind::Hdd => Box::new(HddMedia::new(&profile, capacity)?),
            Kind::Nvm => Box::new(NvmMedia::new(&profile)?),
        };
        Ok(Model::with_media(profile, media))
    }

    /// A model of media of one's own, timed with `profile`'s time scale
    /// and jitter (its other sections are for the media to read, or
    /// describe it).
    pub fn with_media(profile: Profile, media: Box<dyn Media>) -> Model {
        let jitter = (profile.jitter.fraction > 0.0)
            .then(|| Mutex::new(fastrand::Rng::with_seed(profile.jitter.seed)));
        Model {
            profile,
            media: Mutex::new(Clocked { media, now: 0 }),
            jitter,
            started: Instant::now(),
        }
    }

    /// The profile in force.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// What the media counted so far.
    pub fn stats(&self) -> MediaStats {
        self.media().media.stats()
    }

    /// Device time at `instant`.
    fn device_time(&self, instant: Instant) -> Nanos {
        let real = instant.saturating_duration_since(self.started).as_nanos() as f64;
        (real / self.profile.time_scale) as Nanos
    }

    fn media(&self) -> MutexGuard<'_, Clocked> {
        // A panic in the media leaves its state as it was: keep timing.
        self.media
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `span` of device time scaled by the jitter.
    fn jittered(&self, span: Nanos) -> f64 {
        let Some(rng) = &self.jitter else {
            return span as f64;
        };
        let fraction = self.profile.jitter.fraction;
        let draw = rng.lock().map_or(0.5, |mut rng| rng.f64());
        span as f64 * (1.0 + fraction * (2.0 * draw - 1.0))
    }
}

/// The media, and the latest device time it was told of.
struct Clocked {
    media: Box<dyn Media>,
    now: Nanos,
}

/// Each request is priced once the device has answered it: a success by
/// [`Media::serve`], a refusal by [`Media::refuse`] (its fixed overhead,
/// no media time).  A request arriving before the last one priced (from
/// another queue, or a zone operation that waited for the zone's writes)
/// reaches the media at that one's device time.
impl DeviceModel for Model {
    fn served(
        &self,
        command: Command,
        arrived: Instant,
        result: &Result<Reply, IoError>,
    ) -> Option<Instant> {
        let arrival = self.device_time(arrived);
        let done = {
            let mut clocked = self.media();
            let now = clocked.now.max(arrival);
            clocked.now = now;
            match result {
                Ok(reply) => clocked.media.serve(command, reply, now),
                Err(error) => clocked.media.refuse(command, *error, now),
            }
        };
        let span = self.jittered(done.saturating_sub(arrival)) * self.profile.time_scale;
        Some(arrived + Duration::from_nanos(span as u64))
    }
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("profile", &self.profile.name)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_takes_the_media_time_scaled() {
        let mut profile = Profile::built_in("nvm").unwrap();
        profile.time_scale = 100.0;
        let read = profile.nvm.as_ref().unwrap().read;
        let model = Model::new(profile, 1 << 30).unwrap();
        let arrived = Instant::now();
        let read_512 = Command::Read {
            offset: 0,
            len: 512,
        };
        let due = model.served(read_512, arrived, &Ok(Reply::Done)).unwrap();
        let span = due - arrived;
        let expected = Duration::from_nanos(read * 100);
        // The host link adds a little (512 bytes at its bandwidth).
        assert!(
            span >= expected && span < expected + Duration::from_micros(100),
            "{span:?}"
        );
    }

    #[test]
    fn a_refusal_takes_the_firmware_s_fixed_time_scaled() {
        let mut profile = Profile::built_in("zns-ssd").unwrap();
        profile.time_scale = 10.0;
        let firmware = profile.firmware.clone().unwrap();
        let model = Model::new(profile, 1 << 30).unwrap();
        let arrived = Instant::now();
        let write = Command::Write {
            offset: 1 << 20,
            len: 1 << 20,
            fua: false,
        };
        let due = model.served(write, arrived, &Err(IoError::Io)).unwrap();
        assert_eq!(due - arrived, Duration::from_nanos(firmware.write * 10));
        assert_eq!(model.stats(), MediaStats::default());
    }

    #[test]
    fn device_time_does_not_go_backwards() {
        let mut profile = Profile::built_in("nvm").unwrap();
        profile.time_scale = 1000.0;
        let read = profile.nvm.as_ref().unwrap().read;
        let units = profile.nvm.as_ref().unwrap().units;
        let model = Model::new(profile, 1 << 30).unwrap();
        let early = Instant::now();
        let late = early + Duration::from_millis(50);
        let read_4k = Command::Read {
            offset: 0,
            len: 4096,
        };
        let on_time = model.served(read_4k, late, &Ok(Reply::Done)).unwrap();
        // Priced after one that arrived 50 µs of device time later: it
        // reaches the media then (a unit is free: no queueing).
        assert!(units > 1);
        let behind = model.served(read_4k, early, &Ok(Reply::Done)).unwrap();
        assert!(
            behind >= late + Duration::from_nanos(read * 1000),
            "{:?}",
            behind - early
        );
        assert!(behind <= on_time + Duration::from_millis(1));
    }

    #[test]
    fn jitter_is_seeded_and_bounded() {
        let mut profile = Profile::built_in("nvm").unwrap();
        profile.jitter.fraction = 0.5;
        profile.jitter.seed = 7;
        let spans = |profile: &Profile| {
            let model = Model::new(profile.clone(), 1 << 30).unwrap();
            (0..50)
                .map(|_| model.jittered(1000) as u64)
                .collect::<Vec<_>>()
        };
        let first = spans(&profile);
        assert_eq!(first, spans(&profile));
        assert!(first.iter().all(|span| (500..=1500).contains(span)));
        assert!(first.iter().any(|&span| span != first[0]));
    }
}
