//! A disk's mechanics (placeholder: the profile section only; the seek and
//! rotation model comes next).

use serde::{Deserialize, Serialize};

use crate::profile::{at_least_one, ProfileError};

/// The mechanics of a disk (`[hdd]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddProfile {
    /// Spindle speed, revolutions a minute.
    pub rpm: u32,
}

impl HddProfile {
    pub(crate) fn check(&self) -> Result<(), ProfileError> {
        at_least_one("hdd.rpm", self.rpm)
    }
}

/// The media of an `hdd` profile (placeholder).
#[derive(Debug)]
pub struct HddMedia;

impl HddMedia {
    /// The media of `profile` over `capacity` bytes.
    pub fn new(_profile: &crate::Profile, _capacity: u64) -> Result<Self, ProfileError> {
        Ok(HddMedia)
    }
}

impl crate::Media for HddMedia {
    fn serve(&mut self, _command: bius::IoCommand, now: crate::time::Nanos) -> crate::time::Nanos {
        now
    }
}
