//! Timing models for BIUS block devices: a device that behaves like the
//! hardware it emulates.
//!
//! A [`Model`] is given to [`bius::DeviceBuilder::model`] next to any
//! backend (a RAM disk, a file, an NBD export), which keeps the data; the
//! model says when each request would complete on the modelled hardware,
//! and the framework holds the completion until then (its queues' workers
//! wait in `poll()`; no thread sleeps per request).  A [`Profile`] holds
//! every number of a model; the built-in ones carry their sources, and a
//! TOML file, `section.key=value` overrides ([`Profile::set`]) or typed
//! setters ([`Profile::set_units`], [`Profile::set_zones`], ...) change
//! any of them, each change checked:
//!
//! | profile    | kind  | models                                                   | numbers from |
//! |------------|-------|----------------------------------------------------------|--------------|
//! | `nvme-ssd` | `ssd` | Samsung 970 PRO: 8 channels × 2 dies, 1 MiB write buffer, page-mapping FTL, 7 % over-provisioning, greedy GC | NVMeVirt's calibration (FAST '23) |
//! | `xg6`      | `ssd` | Kioxia XG6 1 TB: 8 × 4 dies, 4 MiB write buffer, page-mapping FTL, 7 % over-provisioning | calibrated on measurements (fio QD32) |
//! | `zns-ssd`  | `zns` | WD ZN540: 8 × 4 dies, zones over all dies, 6 MiB buffer per zone, one firmware core, resets growing with the data, finishes that pad, 14 open/active zones | calibrated on measurements (CLUSTER '23 data set) |
//! | `smr-hdd`  | `hdd` | host-managed SMR disk: seek curve, rotation, media rate, conventional zones | datasheet |
//! | `nvm`      | `nvm` | Optane P5800X: 5 µs accesses, 8 in parallel | Intel |
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
//!
//! # One concept per piece
//! - [`time`]: device time in nanoseconds, [`Timeline`](time::Timeline) (a
//!   resource that does one thing at a time) and transfer times;
//! - [`flash::FlashArray`]: channels of dies, reads and programs booked on
//!   them;
//! - [`buffer::WriteBuffer`]: room in a write buffer over time;
//! - [`ftl`]: the page-mapping FTL, its garbage collection and write
//!   amplification;
//! - the media, one per kind of device, each a [`Media`]:
//!   [`ssd::SsdMedia`], [`zns::ZnsMedia`], [`hdd::HddMedia`],
//!   [`nvm::NvmMedia`] (their module documentation gives their equations);
//! - [`Model`]: a media behind the framework's hook, with the profile's
//!   time scale (device time running slower than real time, to watch a
//!   model faster than the machine) and seeded jitter.
//!
//! # Adding a kind of device
//! A new device is a [`Media`]: it gets each request the device carried
//! out, with its answer, and the device time it arrived at, and returns
//! when it completes; a request the device refused costs nothing unless
//! the media says otherwise ([`Media::refuse`]).  Say a drive whose reads
//! slow down as it wears, 1 % for every GiB written:
//!
//! ```
//! use bius::{Command, Reply};
//! use bius_model::time::{Nanos, Timeline};
//! use bius_model::{Media, MediaStats, Model, Profile};
//!
//! struct Wearing {
//!     die: Timeline,
//!     read: Nanos,
//!     written: u64,
//! }
//!
//! impl Media for Wearing {
//!     fn serve(&mut self, command: Command, _reply: &Reply, now: Nanos) -> Nanos {
//!         match command {
//!             Command::Read { .. } => {
//!                 // 1 % slower per GiB written.
//!                 let wear = self.read * (self.written >> 30) / 100;
//!                 self.die.occupy(now, self.read + wear)
//!             }
//!             Command::Write { len, .. } => {
//!                 self.written += len;
//!                 self.die.occupy(now, 20_000)
//!             }
//!             _ => now,
//!         }
//!     }
//!
//!     fn stats(&self) -> MediaStats {
//!         MediaStats {
//!             host_bytes_written: self.written,
//!             media_bytes_written: self.written,
//!             ..MediaStats::default()
//!         }
//!     }
//! }
//!
//! // The profile gives the time scale, the jitter and the description.
//! let mut profile = Profile::built_in("nvm")?;
//! profile.name = "wearing".into();
//! let media = Wearing { die: Timeline::default(), read: 50_000, written: 0 };
//! let model = Model::with_media(profile, Box::new(media));
//! let builder = bius::DeviceBuilder::new(1 << 30).model(model);
//! # Ok::<(), bius_model::ProfileError>(())
//! ```
//!
//! A model is told every request once the backend has served it, with the
//! result (see [`bius::DeviceModel`] for when): the zone rules (write
//! pointers, open and active limits) are the zoned backend's, and the
//! models learn the zones' state from the answers (where an append
//! landed, a reset, a finish).  A request the backend refused costs what
//! a drive charges to refuse a command as it parses it: its fixed
//! firmware time (SSDs, ZNS SSDs; nothing on the SMR disk and NVM), no
//! media time, the media left as they were.  What the models leave out
//! is said in each module.

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
pub use profile::{
    Bandwidth, Firmware, Flash, Host, Jitter, Kind, Nvm, Profile, ProfileError, Zones,
};
