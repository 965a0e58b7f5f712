//! Timing models for BIUS block devices: a device that behaves like the
//! hardware it emulates.
//!
//! A [`Model`] wraps nothing: it is given to
//! [`bius::DeviceBuilder::model`] next to any backend (a RAM disk, a file,
//! an NBD export), which keeps the data, and says when each request would
//! complete on the modelled hardware; the framework holds the completion
//! until then.  A [`Profile`] holds every number of a model; the built-in
//! ones (`nvme-ssd`, `zns-ssd`, `smr-hdd`, `nvm`) carry their sources, and
//! a TOML file or `section.key=value` overrides change any of them.
//!
//! ```
//! use bius_model::{Model, Profile};
//!
//! let mut profile = Profile::built_in("nvme-ssd")?;
//! profile.set("ftl.over_provisioning", "0.28")?;
//! let model = Model::new(profile, 1 << 30)?;
//! let builder = bius::DeviceBuilder::new(1 << 30).model(model);
//! # Ok::<(), bius_model::ProfileError>(())
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod buffer;
pub mod flash;
pub mod ftl;
pub mod hdd;
mod media;
mod model;
pub mod nvm;
mod profile;
pub mod quantity;
pub mod ssd;
pub mod time;
pub mod zns;

pub use media::{Media, MediaStats};
pub use model::Model;
pub use profile::{Firmware, Flash, Host, Jitter, Kind, Nvm, Profile, ProfileError, Zones};
