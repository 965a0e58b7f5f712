//! [`Profile`]: every number of a model, read from TOML (a built-in
//! profile, a model file, `section.key=value` overrides), checked before
//! any device exists.

use std::fmt;

use bius::zone::{ZoneGeometry, ZoneGeometryError};
use bius::Command;
use serde::{Deserialize, Serialize};

use crate::ftl::FtlProfile;
use crate::hdd::HddProfile;
use crate::quantity;
use crate::time::Nanos;

mod set;
#[cfg(test)]
mod tests;

pub use set::Bandwidth;

/// The built-in profiles: name and TOML text.
const BUILT_IN: [(&str, &str); 5] = [
    ("nvme-ssd", include_str!("profiles/nvme-ssd.toml")),
    ("xg6", include_str!("profiles/xg6.toml")),
    ("zns-ssd", include_str!("profiles/zns-ssd.toml")),
    ("smr-hdd", include_str!("profiles/smr-hdd.toml")),
    ("nvm", include_str!("profiles/nvm.toml")),
];

/// What kind of device a profile models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A conventional flash SSD: dies, a write buffer, an FTL with garbage
    /// collection (`[flash]`, `[firmware]`, `[ftl]`).
    Ssd,
    /// A zoned (ZNS) flash SSD: dies per zone, a write buffer per zone,
    /// zone reset and finish costs (`[flash]`, `[firmware]`, `[zones]`).
    Zns,
    /// A host-managed SMR disk: seeks, rotation, a media rate (`[hdd]`,
    /// `[zones]`).
    Hdd,
    /// Byte-addressable persistent memory behind a block interface: a
    /// fixed access time and parallel units (`[nvm]`).
    Nvm,
}

/// The host interface: link bandwidth each way, and what flushes and
/// discards cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Bytes a second from the device to the host.
    #[serde(with = "quantity::bandwidth")]
    pub read_bandwidth: u64,
    /// Bytes a second from the host to the device.
    #[serde(with = "quantity::bandwidth")]
    pub write_bandwidth: u64,
    /// A flush's own time, after the write buffer has drained.
    #[serde(with = "quantity::time", default)]
    pub flush: Nanos,
    /// A discard's (or write-zeroes with unmap's) time.
    #[serde(with = "quantity::time", default)]
    pub discard: Nanos,
    /// Every command's time outside the device's shared resources
    /// (submission, DMA set-up, completion, the host's driver): added to
    /// each request's latency, limiting no throughput.
    #[serde(with = "quantity::time", default)]
    pub overhead: Nanos,
}

/// Flash media: channels of dies and their NAND timings (as NVMeVirt's
/// `ssd_config.h` names them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flash {
    /// Channels (`NAND_CHANNELS`).
    pub channels: u32,
    /// Dies on each channel (`LUNS_PER_NAND_CH`): the parallel units are
    /// channels × dies.
    pub dies_per_channel: u32,
    /// Bytes programmed at once on a die (`ONESHOT_PAGE_SIZE`); writes
    /// stripe over the dies in these units.
    #[serde(with = "quantity::bytes")]
    pub program_unit: u64,
    /// Bytes a second each channel moves (`NAND_CHANNEL_BANDWIDTH`).
    #[serde(with = "quantity::bandwidth")]
    pub channel_bandwidth: u64,
    /// Sensing a read of at most 4 KiB (`NAND_4KB_READ_LATENCY`).
    #[serde(with = "quantity::time")]
    pub read_4k: Nanos,
    /// Sensing a larger read, per flash page (`NAND_READ_LATENCY`).
    #[serde(with = "quantity::time")]
    pub read_page: Nanos,
    /// Programming one program unit (`NAND_PROG_LATENCY`).
    #[serde(with = "quantity::time")]
    pub program: Nanos,
    /// Erasing a block (`NAND_ERASE_LATENCY`).
    #[serde(with = "quantity::time", default)]
    pub erase: Nanos,
    /// The device-wide write buffer (`GLOBAL_WB_SIZE`); 0 for none: writes
    /// then complete when programmed.
    #[serde(with = "quantity::bytes", default)]
    pub write_buffer: u64,
}

/// Controller firmware time per command (NVMeVirt's `FW_*` latencies).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Firmware {
    /// A read of at most 4 KiB (`FW_4KB_READ_LATENCY`).
    #[serde(with = "quantity::time", default)]
    pub read_4k: Nanos,
    /// A larger read (`FW_READ_LATENCY`).
    #[serde(with = "quantity::time", default)]
    pub read: Nanos,
    /// A write into the buffer (`FW_WBUF_LATENCY0`).
    #[serde(with = "quantity::time", default)]
    pub write: Nanos,
    /// And per 4 KiB written (`FW_WBUF_LATENCY1`).
    #[serde(with = "quantity::time", default)]
    pub write_per_4k: Nanos,
    /// What a zone append takes on top of a write (finding where it
    /// lands).
    #[serde(with = "quantity::time", default)]
    pub append: Nanos,
    /// A zone management command (open, close, finish, reset), before
    /// any flash work.
    #[serde(with = "quantity::time", default)]
    pub zone: Nanos,
    /// The controller's cores: each command's firmware time occupies one
    /// of them, so at most `cores` commands are parsed at once (0: no
    /// limit, firmware time is latency only).
    #[serde(default)]
    pub cores: u32,
}

/// The zones of a zoned device, and what managing them costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zones {
    /// Zone size (a power of two).
    #[serde(with = "quantity::bytes")]
    pub size: u64,
    /// Writable bytes of a zone (at most its size); 0 for the size.
    #[serde(with = "quantity::bytes", default)]
    pub capacity: u64,
    /// Conventional zones at the start of the device.
    #[serde(default)]
    pub conventional: u32,
    /// Most zones open at once; 0 for no limit.
    #[serde(default)]
    pub max_open: u32,
    /// Most zones open or closed at once; 0 for no limit.
    #[serde(default)]
    pub max_active: u32,
    /// Resetting a zone: the fixed part (an empty zone's reset).
    #[serde(with = "quantity::time", default)]
    pub reset: Nanos,
    /// Erasing what the host wrote into a full zone, on top of `reset`; a
    /// zone written in part takes its share (flash zones; padding that a
    /// finish added is not counted).
    #[serde(with = "quantity::time", default)]
    pub erase_full: Nanos,
    /// Finishing a zone that holds data: closing out its open stripe, on
    /// top of programming the rest of the zone (flash zones: the padding
    /// runs through the zone's write path); an empty zone's finish costs
    /// nothing here.  A reset of a zone that is open with data on flash
    /// closes it out too.
    #[serde(with = "quantity::time", default)]
    pub finish: Nanos,
    /// Dies a zone's data stripe over (flash devices; `DIES_PER_ZONE`).
    #[serde(default)]
    pub dies_per_zone: u32,
    /// Each open zone's write buffer (`ZONE_WB_SIZE`); 0 for none.
    #[serde(with = "quantity::bytes", default)]
    pub zone_buffer: u64,
}

/// Persistent memory: an access time and how many accesses overlap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nvm {
    /// A read of at most `access_size`.
    #[serde(with = "quantity::time")]
    pub read: Nanos,
    /// A write of at most `access_size`.
    #[serde(with = "quantity::time")]
    pub write: Nanos,
    /// Bytes one access moves; larger requests take several.
    #[serde(with = "quantity::bytes")]
    pub access_size: u64,
    /// Accesses in progress at once.
    pub units: u32,
}

/// Seeded random variation of every modelled time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jitter {
    /// Each request's time from arrival to completion is scaled by a
    /// uniform factor in `1 ± fraction` (0: none; below 1).
    #[serde(default)]
    pub fraction: f64,
    /// The seed: the same seed and requests give the same times.
    #[serde(default)]
    pub seed: u64,
}

/// Every number of a device model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name (`nvme-ssd`).
    pub name: String,
    /// What it models.
    #[serde(default)]
    pub description: String,
    /// Where its numbers come from.
    #[serde(default)]
    pub source: String,
    /// The kind of device, which says which sections it needs.
    pub kind: Kind,
    /// Device time runs this many times slower than real time (1: real
    /// time): a model too fast for the machine it runs on can be watched
    /// at, say, 100× with every ratio kept.
    #[serde(default = "one")]
    pub time_scale: f64,
    /// Random variation of the times.
    #[serde(default)]
    pub jitter: Jitter,
    /// The host interface.
    pub host: Host,
    /// Flash media (`ssd`, `zns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash: Option<Flash>,
    /// Controller firmware (`ssd`, `zns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    /// The flash translation layer (`ssd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ftl: Option<FtlProfile>,
    /// Zones (`zns`, `hdd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Zones>,
    /// Disk mechanics (`hdd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdd: Option<HddProfile>,
    /// Persistent memory (`nvm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvm: Option<Nvm>,
}

fn one() -> f64 {
    1.0
}

/// Why a profile was refused: the parameter, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{parameter}: {reason}")]
pub struct ProfileError {
    /// The parameter (`flash.channels`), the argument of a setter refused
    /// for itself (`units`, `latency`, `zones`), or the file or name
    /// refused.
    pub parameter: String,
    /// What is wrong.
    pub reason: String,
}

impl ProfileError {
    /// `parameter` refused for `reason`.
    pub fn new(parameter: impl Into<String>, reason: impl Into<String>) -> Self {
        ProfileError {
            parameter: parameter.into(),
            reason: reason.into(),
        }
    }
}

impl Profile {
    /// The names of the built-in profiles.
    pub fn built_in_names() -> impl Iterator<Item = &'static str> {
        BUILT_IN.iter().map(|(name, _)| *name)
    }

    /// A built-in profile by name.
    ///
    /// ```
    /// let ssd = bius_model::Profile::built_in("nvme-ssd")?;
    /// assert_eq!(ssd.flash.as_ref().unwrap().channels, 8);
    /// assert!(bius_model::Profile::built_in("floppy").is_err());
    /// # Ok::<(), bius_model::ProfileError>(())
    /// ```
    pub fn built_in(name: &str) -> Result<Profile, ProfileError> {
        let (_, text) = BUILT_IN
            .iter()
            .find(|(known, _)| *known == name)
            .ok_or_else(|| {
                let known: Vec<_> = Profile::built_in_names().collect();
                ProfileError::new(
                    "--model",
                    format!("no built-in model `{name}` (known: {})", known.join(", ")),
                )
            })?;
        Profile::from_toml(text, name)
    }

    /// A profile from TOML text; `origin` (a file name) names it in errors.
    /// Unknown keys are refused; the profile is [checked](Profile::check).
    pub fn from_toml(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let profile: Profile = toml::from_str(text)
            .map_err(|err| ProfileError::new(origin, one_line(&err.to_string())))?;
        profile.check()?;
        Ok(profile)
    }

    /// The profile as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|err| format!("# cannot render the profile: {err}\n"))
    }

    /// Checks every value: a one-line error naming the first wrong one.
    ///
    /// ```
    /// let text = "name = \"x\"\nkind = \"nvm\"\ncolour = 1\n";
    /// let err = bius_model::Profile::from_toml(text, "x.toml").unwrap_err();
    /// assert!(err.to_string().starts_with("x.toml: TOML parse error at line 3"));
    /// assert!(!err.to_string().contains('\n'));
    /// ```
    pub fn check(&self) -> Result<(), ProfileError> {
        positive("time_scale", self.time_scale)?;
        if !(0.0..1.0).contains(&self.jitter.fraction) {
            return Err(ProfileError::new(
                "jitter.fraction",
                format!(
                    "must be at least 0 and below 1 (is {})",
                    self.jitter.fraction
                ),
            ));
        }
        at_least_one("host.read_bandwidth", self.host.read_bandwidth)?;
        at_least_one("host.write_bandwidth", self.host.write_bandwidth)?;
        match self.kind {
            Kind::Ssd => {
                self.section("flash", &self.flash)?;
                self.section("ftl", &self.ftl)?;
            }
            Kind::Zns => {
                self.section("flash", &self.flash)?;
                self.section("zones", &self.zones)?;
            }
            Kind::Hdd => {
                self.section("hdd", &self.hdd)?;
                self.section("zones", &self.zones)?;
            }
            Kind::Nvm => {
                self.section("nvm", &self.nvm)?;
            }
        }
        if let Some(flash) = &self.flash {
            flash.check()?;
        }
        if let Some(ftl) = &self.ftl {
            ftl.check(self.flash.as_ref())?;
        }
        if let Some(zones) = &self.zones {
            zones.check(self.flash.as_ref())?;
        }
        if let Some(hdd) = &self.hdd {
            hdd.check()?;
        }
        if let Some(nvm) = &self.nvm {
            at_least_one("nvm.units", nvm.units)?;
            at_least_one("nvm.access_size", nvm.access_size)?;
        }
        Ok(())
    }

    /// `section` (named `name`) of this profile, or the error that its kind
    /// needs it.
    pub(crate) fn section<'a, T>(
        &self,
        name: &str,
        section: &'a Option<T>,
    ) -> Result<&'a T, ProfileError> {
        section.as_ref().ok_or_else(|| {
            let kind = format!("{:?}", self.kind).to_lowercase();
            ProfileError::new(name, format!("a {kind} model needs a [{name}] section"))
        })
    }

    /// Whether the device is zoned.
    pub fn is_zoned(&self) -> bool {
        matches!(self.kind, Kind::Zns | Kind::Hdd)
    }

    /// Checks the profile against a device of `capacity` bytes: a zoned
    /// one needs a zone geometry that fits it (see
    /// [`Profile::zone_geometry`]), and no more open or active zones than
    /// it has sequential ones.
    pub fn check_capacity(&self, capacity: u64) -> Result<(), ProfileError> {
        let (Some(zones), Some(geometry)) = (self.zoned(), self.zone_geometry(capacity)?) else {
            return Ok(());
        };
        let sequential = geometry.sequential_zones();
        for (parameter, limit) in [
            ("zones.max_open", zones.max_open),
            ("zones.max_active", zones.max_active),
        ] {
            if u64::from(limit) > sequential {
                return Err(ProfileError::new(
                    parameter,
                    format!("{limit} is more than the device's {sequential} sequential zones"),
                ));
            }
        }
        Ok(())
    }

    /// The `[zones]` section of a zoned profile.
    fn zoned(&self) -> Option<&Zones> {
        self.zones.as_ref().filter(|_| self.is_zoned())
    }

    /// The zone geometry of a zoned profile over `capacity` bytes; `None`
    /// for a conventional one.  A `[zones]` section that does not fit the
    /// device is an error that names the parameter.
    pub fn zone_geometry(&self, capacity: u64) -> Result<Option<ZoneGeometry>, ProfileError> {
        let Some(zones) = self.zoned() else {
            return Ok(None);
        };
        let invalid = |parameter: &'static str| {
            move |err: ZoneGeometryError| ProfileError::new(parameter, err.to_string())
        };
        let geometry = ZoneGeometry::new(capacity, zones.size)
            .map_err(invalid("zones.size"))?
            .with_zone_capacity(zones.writable())
            .map_err(invalid("zones.capacity"))?
            .with_conventional_zones(zones.conventional)
            .map_err(invalid("zones.conventional"))?;
        Ok(Some(
            geometry
                .with_max_open(zones.max_open)
                .with_max_active(zones.max_active),
        ))
    }
}

impl Flash {
    fn check(&self) -> Result<(), ProfileError> {
        at_least_one("flash.channels", self.channels)?;
        at_least_one("flash.dies_per_channel", self.dies_per_channel)?;
        at_least_one("flash.program_unit", self.program_unit)?;
        at_least_one("flash.channel_bandwidth", self.channel_bandwidth)?;
        if !self.program_unit.is_multiple_of(4096) {
            return Err(ProfileError::new(
                "flash.program_unit",
                format!("must be a multiple of 4 KiB (is {})", self.program_unit),
            ));
        }
        Ok(())
    }

    /// The parallel units: channels × dies.
    pub fn dies(&self) -> u32 {
        self.channels.saturating_mul(self.dies_per_channel)
    }
}

impl Firmware {
    /// What the firmware takes to refuse `command` as it parses it: the
    /// fixed time of its kind (a read's `read_4k`, a write's, append's or
    /// write-zeroes' `write`), nothing per byte; other commands, none.
    pub fn refusal(&self, command: Command) -> Nanos {
        match command {
            Command::Read { .. } => self.read_4k,
            Command::Write { .. } | Command::ZoneAppend { .. } | Command::WriteZeroes { .. } => {
                self.write
            }
            _ => 0,
        }
    }
}

impl Zones {
    fn check(&self, flash: Option<&Flash>) -> Result<(), ProfileError> {
        if !self.size.is_power_of_two() || self.size < 4096 {
            return Err(ProfileError::new(
                "zones.size",
                format!(
                    "must be a power of two of at least 4 KiB (is {})",
                    self.size
                ),
            ));
        }
        if self.capacity > self.size || !self.capacity.is_multiple_of(4096) {
            return Err(ProfileError::new(
                "zones.capacity",
                format!(
                    "must be a multiple of 4 KiB no larger than the zone size (is {})",
                    self.capacity
                ),
            ));
        }
        if self.max_active != 0 && self.max_open > self.max_active {
            return Err(ProfileError::new(
                "zones.max_open",
                format!(
                    "more open zones ({}) than active ones ({})",
                    self.max_open, self.max_active
                ),
            ));
        }
        if let Some(flash) = flash {
            at_least_one("zones.dies_per_zone", self.dies_per_zone)?;
            if self.dies_per_zone > flash.dies() {
                return Err(ProfileError::new(
                    "zones.dies_per_zone",
                    format!(
                        "more than the {} dies of [flash] (is {})",
                        flash.dies(),
                        self.dies_per_zone
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Writable bytes of each zone.
    pub fn writable(&self) -> u64 {
        match self.capacity {
            0 => self.size,
            bytes => bytes,
        }
    }
}

/// `Ok` if `value` is at least 1.
pub(crate) fn at_least_one<T: PartialOrd + From<u8> + fmt::Display>(
    parameter: &str,
    value: T,
) -> Result<(), ProfileError> {
    if value < T::from(1) {
        return Err(ProfileError::new(
            parameter,
            format!("must be at least 1 (is {value})"),
        ));
    }
    Ok(())
}

/// `Ok` if `value` is a finite number above 0.
pub(crate) fn positive(parameter: &str, value: f64) -> Result<(), ProfileError> {
    if !(value.is_finite() && value > 0.0) {
        return Err(ProfileError::new(
            parameter,
            format!("must be above 0 (is {value})"),
        ));
    }
    Ok(())
}

/// An error message on one line, without the source excerpt the TOML
/// parser draws (`3 | colour = 1`, `  |  ^^^`).
fn one_line(message: &str) -> String {
    let excerpt = |line: &str| {
        line.trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start()
            .starts_with('|')
    };
    message
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !excerpt(line))
        .collect::<Vec<_>>()
        .join("; ")
}
