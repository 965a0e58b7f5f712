//! Placeholder: the ssd media model comes next.

use bius::IoCommand;

use crate::media::Media;
use crate::profile::{Profile, ProfileError};
use crate::time::Nanos;

/// The media of a `ssd` profile.
#[derive(Debug)]
pub struct SsdMedia;

impl SsdMedia {
    /// The media of `profile` over `capacity` bytes.
    pub fn new(_profile: &Profile, _capacity: u64) -> Result<Self, ProfileError> {
        Ok(SsdMedia)
    }
}

impl Media for SsdMedia {
    fn serve(&mut self, _command: IoCommand, now: Nanos) -> Nanos {
        now
    }
}
