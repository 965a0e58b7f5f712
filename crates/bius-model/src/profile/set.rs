//! Changing a [`Profile`]: typed setters for what a command line
//! overrides (the time scale, bandwidths, parallel units, operation times,
//! the zones), and [`Profile::set`] for any key by name.  Each checks the
//! changed profile as loading one does ([`Profile::check`]) and leaves the
//! profile as it was when it refuses the change.

use bius::Latency;

use super::{at_least_one, one_line, Profile, ProfileError, Zones};
use crate::time::Nanos;

/// A bandwidth of a profile, for [`Profile::set_bandwidth`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bandwidth {
    /// The host link from the device (`host.read_bandwidth`).
    Read,
    /// The host link to the device (`host.write_bandwidth`).
    Write,
    /// Each flash channel (`flash.channel_bandwidth`).
    Channel,
}

impl Profile {
    /// Sets `key` (dotted: `flash.channels`, `ftl.over_provisioning`,
    /// `time_scale`) to `value` (a TOML value; anything else is taken as a
    /// string, so `read=80us` needs no quotes), and checks the result.
    ///
    /// ```
    /// let mut ssd = bius_model::Profile::built_in("nvme-ssd")?;
    /// ssd.set("flash.read_4k", "80us")?;
    /// ssd.set("ftl.over_provisioning", "0.28")?;
    /// assert_eq!(ssd.flash.as_ref().unwrap().read_4k, 80_000);
    /// assert!(ssd.set("flash.channels", "0").is_err());
    /// assert!(ssd.set("flash.colour", "blue").is_err());
    /// # Ok::<(), bius_model::ProfileError>(())
    /// ```
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ProfileError> {
        let mut table = toml::Table::try_from(&*self)
            .map_err(|err| ProfileError::new(key, one_line(&err.to_string())))?;
        let value = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut parsed| parsed.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        let (path, last) = match key.rsplit_once('.') {
            Some((path, last)) => (path.split('.').collect::<Vec<_>>(), last),
            None => (Vec::new(), key),
        };
        let mut section = &mut table;
        for part in path {
            section = section
                .entry(part)
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()
                .ok_or_else(|| ProfileError::new(key, format!("`{part}` is not a section")))?;
        }
        section.insert(last.to_string(), value);
        let profile: Profile = table
            .try_into()
            .map_err(|err: toml::de::Error| ProfileError::new(key, one_line(err.message())))?;
        profile.check()?;
        *self = profile;
        Ok(())
    }

    /// Sets the time scale (`time_scale`: device time runs this many times
    /// slower than real time).
    ///
    /// ```
    /// let mut nvm = bius_model::Profile::built_in("nvm")?;
    /// nvm.set_time_scale(100.0)?;
    /// assert_eq!(nvm.time_scale, 100.0);
    /// assert!(nvm.set_time_scale(0.0).is_err());
    /// # Ok::<(), bius_model::ProfileError>(())
    /// ```
    pub fn set_time_scale(&mut self, scale: f64) -> Result<(), ProfileError> {
        self.change(|profile| {
            profile.time_scale = scale;
            Ok(())
        })
    }

    /// Sets a bandwidth, in bytes a second.
    ///
    /// ```
    /// use bius_model::{Bandwidth, Profile};
    ///
    /// let mut ssd = Profile::built_in("nvme-ssd")?;
    /// ssd.set_bandwidth(Bandwidth::Channel, 400_000_000)?;
    /// assert_eq!(ssd.flash.as_ref().unwrap().channel_bandwidth, 400_000_000);
    /// assert!(ssd.set_bandwidth(Bandwidth::Read, 0).is_err());
    /// assert!(Profile::built_in("nvm")?.set_bandwidth(Bandwidth::Channel, 1).is_err());
    /// # Ok::<(), bius_model::ProfileError>(())
    /// ```
    pub fn set_bandwidth(
        &mut self,
        bandwidth: Bandwidth,
        bytes_per_second: u64,
    ) -> Result<(), ProfileError> {
        let name = self.name.clone();
        self.change(|profile| {
            let field = match bandwidth {
                Bandwidth::Read => &mut profile.host.read_bandwidth,
                Bandwidth::Write => &mut profile.host.write_bandwidth,
                Bandwidth::Channel => match &mut profile.flash {
                    Some(flash) => &mut flash.channel_bandwidth,
                    None => {
                        return Err(ProfileError::new(
                            "flash.channel_bandwidth",
                            format!("the {name} model has no flash channels"),
                        ))
                    }
                },
            };
            *field = bytes_per_second;
            Ok(())
        })
    }

    /// Sets the parallel units: the dies of a flash model (the same
    /// channels with more or fewer dies each if they divide `units`, else
    /// `units` channels of one die; zones stripe over at most `units`
    /// dies), the units of an NVM one.  A refusal of `units` itself names
    /// the parameter `units`.
    ///
    /// ```
    /// let mut ssd = bius_model::Profile::built_in("nvme-ssd")?;
    /// ssd.set_units(32)?;
    /// let flash = ssd.flash.as_ref().unwrap();
    /// assert_eq!((flash.channels, flash.dies_per_channel), (8, 4));
    /// assert_eq!(ssd.set_units(0).unwrap_err().parameter, "units");
    /// assert!(bius_model::Profile::built_in("smr-hdd")?.set_units(4).is_err());
    /// # Ok::<(), bius_model::ProfileError>(())
    /// ```
    pub fn set_units(&mut self, units: u32) -> Result<(), ProfileError> {
        at_least_one("units", units)?;
        let name = self.name.clone();
        self.change(|profile| {
            match (&mut profile.flash, &mut profile.nvm) {
                (Some(flash), _) => {
                    (flash.channels, flash.dies_per_channel) =
                        if units.is_multiple_of(flash.channels) {
                            (flash.channels, units / flash.channels)
                        } else {
                            (units, 1)
                        };
                    if let Some(zones) = &mut profile.zones {
                        zones.dies_per_zone = zones.dies_per_zone.min(units);
                    }
                }
                (None, Some(nvm)) => nvm.units = units,
                (None, None) => {
                    return Err(ProfileError::new(
                        "units",
                        format!("the {name} model has one actuator, no parallel units"),
                    ))
                }
            }
            Ok(())
        })
    }

    /// Sets the operation times that `latency` gives: read and write (the
    /// NAND sensing and program, or the NVM access), flush, discard, zone
    /// (reset and finish).  A time the model does not have (a disk's read:
    /// seeks and rotation) is refused, naming the parameter `latency`.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let mut ssd = bius_model::Profile::built_in("nvme-ssd")?;
    /// let latency = "read=80us,flush=1ms".parse::<bius::Latency>().unwrap();
    /// ssd.set_latencies(&latency)?;
    /// assert_eq!(ssd.flash.as_ref().unwrap().read_page, 80_000);
    /// assert_eq!(ssd.host.flush, 1_000_000);
    /// let zone = "zone=1ms".parse::<bius::Latency>().unwrap();
    /// assert_eq!(ssd.set_latencies(&zone).unwrap_err().parameter, "latency");
    /// # Ok::<(), bius_model::ProfileError>(())
    /// ```
    pub fn set_latencies(&mut self, latency: &Latency) -> Result<(), ProfileError> {
        let name = self.name.clone();
        self.change(|profile| {
            for (kind, time) in [
                ("read", latency.read),
                ("write", latency.write),
                ("flush", latency.flush),
                ("discard", latency.discard),
                ("zone", latency.zone),
            ] {
                let Some(time) = time else { continue };
                let nanos = Nanos::try_from(time.as_nanos()).map_err(|_| {
                    ProfileError::new("latency", format!("{kind}: {time:?} is too long"))
                })?;
                let fields = profile.times(kind);
                if fields.is_empty() {
                    return Err(ProfileError::new(
                        "latency",
                        format!("the {name} model has no {kind} time"),
                    ));
                }
                fields.into_iter().for_each(|field| *field = nanos);
            }
            Ok(())
        })
    }

    /// The times of a `kind` of operation, as [`Latency`] names them.
    fn times(&mut self, kind: &str) -> Vec<&mut Nanos> {
        match (kind, &mut self.flash, &mut self.nvm) {
            ("read", Some(flash), _) => vec![&mut flash.read_4k, &mut flash.read_page],
            ("read", None, Some(nvm)) => vec![&mut nvm.read],
            ("write", Some(flash), _) => vec![&mut flash.program],
            ("write", None, Some(nvm)) => vec![&mut nvm.write],
            ("flush", ..) => vec![&mut self.host.flush],
            ("discard", ..) => vec![&mut self.host.discard],
            ("zone", ..) => self
                .zones
                .iter_mut()
                .flat_map(|zones| [&mut zones.reset, &mut zones.finish])
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Sets the zones of a zoned profile, all values at once: the zone
    /// size and capacity, and the open and active limits, are checked
    /// against each other only as they end up.
    ///
    /// ```
    /// let mut zns = bius_model::Profile::built_in("zns-ssd")?;
    /// let mut zones = zns.zones.clone().unwrap();
    /// (zones.size, zones.capacity) = (32 << 20, 16 << 20);
    /// zns.set_zones(zones.clone())?;
    /// assert_eq!(zns.zones.as_ref().unwrap().writable(), 16 << 20);
    /// zones.size = 48 << 20;
    /// assert_eq!(zns.set_zones(zones).unwrap_err().parameter, "zones.size");
    /// # Ok::<(), bius_model::ProfileError>(())
    /// ```
    pub fn set_zones(&mut self, zones: Zones) -> Result<(), ProfileError> {
        if !self.is_zoned() {
            return Err(ProfileError::new(
                "zones",
                format!("the {} model is not zoned", self.name),
            ));
        }
        self.change(|profile| {
            profile.zones = Some(zones);
            Ok(())
        })
    }

    /// Makes `change` to a copy of the profile and takes it if it passes
    /// [`Profile::check`].
    fn change(
        &mut self,
        change: impl FnOnce(&mut Profile) -> Result<(), ProfileError>,
    ) -> Result<(), ProfileError> {
        let mut changed = self.clone();
        change(&mut changed)?;
        changed.check()?;
        *self = changed;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn latency(spec: &str) -> Latency {
        spec.parse().unwrap()
    }

    #[test]
    fn a_refused_change_leaves_the_profile_as_it_was() {
        let mut ssd = Profile::built_in("nvme-ssd").unwrap();
        let before = ssd.clone();
        let err = ssd.set_bandwidth(Bandwidth::Write, 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "host.write_bandwidth: must be at least 1 (is 0)"
        );
        assert!(ssd.set_time_scale(f64::NAN).is_err());
        assert!(ssd.set_latencies(&latency("read=1us,zone=1ms")).is_err());
        assert_eq!(ssd, before);
    }

    #[test]
    fn units_spread_over_the_channels_and_the_zones() {
        let mut zns = Profile::built_in("zns-ssd").unwrap();
        assert_eq!(zns.zones.as_ref().unwrap().dies_per_zone, 32);
        zns.set_units(6).unwrap();
        let flash = zns.flash.as_ref().unwrap();
        assert_eq!((flash.channels, flash.dies_per_channel), (6, 1));
        assert_eq!(zns.zones.as_ref().unwrap().dies_per_zone, 6);
        let mut nvm = Profile::built_in("nvm").unwrap();
        nvm.set_units(3).unwrap();
        assert_eq!(nvm.nvm.as_ref().unwrap().units, 3);
        assert_eq!(
            nvm.set_units(0).unwrap_err().to_string(),
            "units: must be at least 1 (is 0)"
        );
        let err = Profile::built_in("smr-hdd")
            .unwrap()
            .set_units(2)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "units: the smr-hdd model has one actuator, no parallel units"
        );
    }

    #[test]
    fn latencies_set_the_times_of_the_models_kind() {
        let mut nvm = Profile::built_in("nvm").unwrap();
        nvm.set_latencies(&latency("read=2us,write=3us,discard=1ms"))
            .unwrap();
        let media = nvm.nvm.as_ref().unwrap();
        assert_eq!((media.read, media.write), (2_000, 3_000));
        assert_eq!(nvm.host.discard, 1_000_000);
        let mut ssd = Profile::built_in("nvme-ssd").unwrap();
        ssd.set_latencies(&latency("write=100us")).unwrap();
        assert_eq!(ssd.flash.as_ref().unwrap().program, 100_000);
        let mut hdd = Profile::built_in("smr-hdd").unwrap();
        hdd.set_latencies(&latency("zone=2ms")).unwrap();
        let zones = hdd.zones.as_ref().unwrap();
        assert_eq!((zones.reset, zones.finish), (2_000_000, 2_000_000));
        assert_eq!(
            hdd.set_latencies(&latency("read=1ms"))
                .unwrap_err()
                .to_string(),
            "latency: the smr-hdd model has no read time"
        );
        let forever = Latency {
            flush: Some(Duration::MAX),
            ..Latency::default()
        };
        assert!(hdd
            .set_latencies(&forever)
            .unwrap_err()
            .reason
            .contains("too long"));
    }

    #[test]
    fn zones_are_checked_as_they_end_up() {
        let mut zns = Profile::built_in("zns-ssd").unwrap();
        let mut zones = zns.zones.clone().unwrap();
        // 20 open zones alone would be refused: more than the 14 active.
        (zones.max_open, zones.max_active) = (20, 20);
        zns.set_zones(zones.clone()).unwrap();
        zones.max_open = 21;
        let err = zns.set_zones(zones).unwrap_err();
        assert_eq!(err.parameter, "zones.max_open");
        let nvm_zones = zns.zones.clone().unwrap();
        let err = Profile::built_in("nvm").unwrap().set_zones(nvm_zones);
        assert_eq!(
            err.unwrap_err().to_string(),
            "zones: the nvm model is not zoned"
        );
    }
}
