//! Placeholder: the zns media model comes next.

use bius::IoCommand;

use crate::media::Media;
use crate::profile::{Profile, ProfileError};
use crate::time::Nanos;

/// The media of a `zns` profile.
#[derive(Debug)]
pub struct ZnsMedia;

impl ZnsMedia {
    /// The media of `profile` over `capacity` bytes.
    pub fn new(_profile: &Profile, _capacity: u64) -> Result<Self, ProfileError> {
        Ok(ZnsMedia)
    }
}

impl Media for ZnsMedia {
    fn serve(&mut self, _command: IoCommand, now: Nanos) -> Nanos {
        now
    }
}
