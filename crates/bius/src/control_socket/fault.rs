//! Faults injected into a running zoned device over the control socket
//! ([`Fault`]), applied to its [`ZoneSet`] with [`Fault::apply`]: what
//! `biusctl fault` sends.

use std::fmt;

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use crate::abi::SECTOR_SIZE;
use crate::error::IoError;
use crate::zone::{ZoneCondition, ZoneError, ZoneSet};

/// One fault to inject.  Zones are numbered from 0; positions are in
/// bytes, whole 512-byte sectors (on the wire, as `biusctl fault` and
/// earlier daemons speak it, the sector number `sector`).  The faults are
/// those of [`ZoneSet`]: [`set_read_only`](ZoneSet::set_read_only),
/// [`set_offline`](ZoneSet::set_offline) (on a zone already so, back to
/// empty), [`inject_write_error`](ZoneSet::inject_write_error),
/// [`clear_write_error`](ZoneSet::clear_write_error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// Make a zone read-only (or, if it is, empty again).
    ReadOnly {
        /// The zone.
        zone: u32,
    },
    /// Take a zone offline (or, if it is, empty again).
    Offline {
        /// The zone.
        zone: u32,
    },
    /// Fail writes reaching a sector.
    WriteError {
        /// The sector's first byte.
        #[serde(rename = "sector", with = "sectors")]
        offset: u64,
    },
    /// Remove an injected write error.
    ClearWriteError {
        /// The sector's first byte.
        #[serde(rename = "sector", with = "sectors")]
        offset: u64,
    },
}

/// What an injected fault did.  Its [`Display`](fmt::Display) speaks
/// sectors, as `biusctl fault` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FaultReport {
    /// A zone made read-only or offline, or empty again.
    Zone {
        /// The zone.
        zone: u32,
        /// Its first byte.
        #[serde(with = "sectors")]
        start: u64,
        /// Its condition now.
        #[serde(with = "crate::stats::condition_name")]
        condition: ZoneCondition,
    },
    /// Writes reaching a sector now fail.
    WriteError {
        /// The sector's first byte.
        #[serde(rename = "sector", with = "sectors")]
        offset: u64,
    },
    /// A write error is cleared.
    WriteErrorCleared {
        /// The sector's first byte.
        #[serde(rename = "sector", with = "sectors")]
        offset: u64,
    },
}

/// A byte offset on the wire as the number of its 512-byte sector: the
/// protocol's unit, as biusctl and earlier daemons speak it.
mod sectors {
    use serde::{de, ser, Deserialize, Deserializer, Serializer};

    use crate::abi::SECTOR_SIZE;

    pub(super) fn serialize<S: Serializer>(offset: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        if !offset.is_multiple_of(SECTOR_SIZE) {
            let why = format!("byte {offset} is not the start of a sector");
            return Err(ser::Error::custom(why));
        }
        serializer.serialize_u64(offset / SECTOR_SIZE)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        let sector = u64::deserialize(deserializer)?;
        sector
            .checked_mul(SECTOR_SIZE)
            .ok_or_else(|| de::Error::custom(format!("sector {sector} is past any disk")))
    }
}

/// The sector of byte `offset`, as messages name it.
fn sector(offset: u64) -> u64 {
    offset / SECTOR_SIZE
}

impl fmt::Display for FaultReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultReport::Zone {
                zone,
                start,
                condition,
            } => write!(
                f,
                "zone {zone} (sector {}) is now {condition}",
                sector(*start)
            ),
            FaultReport::WriteError { offset } => {
                write!(f, "writes reaching sector {} now fail", sector(*offset))
            }
            FaultReport::WriteErrorCleared { offset } => {
                write!(f, "write error at sector {} cleared", sector(*offset))
            }
        }
    }
}

/// Why a fault could not be injected.  Its [`Display`](fmt::Display)
/// speaks sectors, as `biusctl fault` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultError {
    /// The device has no such zone.
    NoZone {
        /// The zone asked for.
        zone: u32,
        /// The device's zones.
        zones: u64,
    },
    /// The zone is conventional: only sequential zones take faults.
    Conventional {
        /// The zone.
        zone: u32,
    },
    /// The zones refused the fault.
    Zone {
        /// The zone.
        zone: u32,
        /// Why.
        source: ZoneError,
    },
    /// The offset is past the end of the device.
    PastEnd {
        /// The offset asked for.
        offset: u64,
        /// The device's size in bytes.
        size: u64,
    },
    /// The offset is not the start of a sector.
    Unaligned {
        /// The offset asked for.
        offset: u64,
    },
    /// No write error was injected at the offset.
    NoWriteError {
        /// The offset.
        offset: u64,
    },
}

impl FaultError {
    /// `EINVAL`: the fault does not fit the device.
    pub fn errno(&self) -> Errno {
        Errno::EINVAL
    }
}

impl fmt::Display for FaultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultError::NoZone { zone, zones } => write!(
                f,
                "no zone {zone}: the disk has {zones} zones (0 to {})",
                zones.saturating_sub(1)
            ),
            FaultError::Conventional { zone } => write!(
                f,
                "zone {zone} is conventional: only sequential zones take faults"
            ),
            FaultError::Zone { zone, source } => write!(f, "zone {zone}: {source}"),
            FaultError::PastEnd { offset, size } => write!(
                f,
                "sector {} is past the end of the disk ({} sectors)",
                sector(*offset),
                sector(*size)
            ),
            FaultError::Unaligned { offset } => {
                write!(f, "byte {offset} is not the start of a sector")
            }
            FaultError::NoWriteError { offset } => {
                write!(f, "no write error at sector {}", sector(*offset))
            }
        }
    }
}

impl std::error::Error for FaultError {}

impl Fault {
    /// Injects the fault into `zones`; `discard(offset, len)` drops the
    /// data of a zone made empty again (as a reset does).
    ///
    /// ```
    /// use bius::control_socket::{Fault, FaultReport};
    /// use bius::zone::{ZoneCondition, ZoneGeometry, ZoneSet};
    ///
    /// // 8 zones of 32 KiB (64 sectors).
    /// let zones = ZoneSet::new(ZoneGeometry::new(256 << 10, 32 << 10)?);
    /// let report = Fault::Offline { zone: 2 }.apply(&zones, |_, _| Ok(())).unwrap();
    /// assert_eq!(
    ///     report,
    ///     FaultReport::Zone { zone: 2, start: 64 << 10, condition: ZoneCondition::Offline }
    /// );
    /// assert_eq!(report.to_string(), "zone 2 (sector 128) is now offline");
    /// # Ok::<(), bius::zone::ZoneGeometryError>(())
    /// ```
    pub fn apply<F>(self, zones: &ZoneSet, discard: F) -> Result<FaultReport, FaultError>
    where
        F: FnOnce(u64, u64) -> Result<(), IoError>,
    {
        let geometry = zones.geometry();
        match self {
            Fault::ReadOnly { zone } | Fault::Offline { zone } => {
                let count = geometry.zone_count();
                if u64::from(zone) >= count {
                    return Err(FaultError::NoZone { zone, zones: count });
                }
                let start = u64::from(zone) * geometry.zone_size();
                let result = match self {
                    Fault::ReadOnly { .. } => zones.set_read_only(start, discard),
                    _ => zones.set_offline(start, discard),
                };
                result.map_err(|source| match source {
                    ZoneError::ConventionalZone => FaultError::Conventional { zone },
                    source => FaultError::Zone { zone, source },
                })?;
                let now = zones.report(start, 1).first().map(|zone| zone.condition);
                let condition = now.ok_or(FaultError::NoZone { zone, zones: count })?;
                Ok(FaultReport::Zone {
                    zone,
                    start,
                    condition,
                })
            }
            Fault::WriteError { offset } => {
                zones.inject_write_error(offset).map_err(|err| match err {
                    ZoneError::Unaligned => FaultError::Unaligned { offset },
                    _ => FaultError::PastEnd {
                        offset,
                        size: geometry.size(),
                    },
                })?;
                Ok(FaultReport::WriteError { offset })
            }
            Fault::ClearWriteError { offset } => match zones.clear_write_error(offset) {
                true => Ok(FaultReport::WriteErrorCleared { offset }),
                false => Err(FaultError::NoWriteError { offset }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::zone::ZoneGeometry;

    use super::*;

    /// 8 zones of 32 KiB (64 sectors), the first conventional.
    fn zones() -> ZoneSet {
        let geometry = ZoneGeometry::new(256 << 10, 32 << 10)
            .and_then(|geometry| geometry.with_conventional_zones(1))
            .unwrap();
        ZoneSet::new(geometry)
    }

    fn apply(zones: &ZoneSet, fault: Fault) -> String {
        match fault.apply(zones, |_, _| Ok(())) {
            Ok(report) => report.to_string(),
            Err(err) => format!("error {err}"),
        }
    }

    #[test]
    fn faults_travel_in_sectors() {
        let lines = [
            (Fault::ReadOnly { zone: 2 }, r#"{"ReadOnly":{"zone":2}}"#),
            (Fault::Offline { zone: 7 }, r#"{"Offline":{"zone":7}}"#),
            (
                Fault::WriteError { offset: 66 * 512 },
                r#"{"WriteError":{"sector":66}}"#,
            ),
            (
                Fault::ClearWriteError { offset: 66 * 512 },
                r#"{"ClearWriteError":{"sector":66}}"#,
            ),
        ];
        for (fault, line) in lines {
            assert_eq!(serde_json::to_string(&fault).unwrap(), line);
            assert_eq!(serde_json::from_str::<Fault>(line).unwrap(), fault);
        }
        let reports = [
            (
                FaultReport::Zone {
                    zone: 2,
                    start: 128 * 512,
                    condition: ZoneCondition::Offline,
                },
                r#"{"Zone":{"zone":2,"start":128,"condition":"offline"}}"#,
            ),
            (
                FaultReport::WriteError { offset: 66 * 512 },
                r#"{"WriteError":{"sector":66}}"#,
            ),
            (
                FaultReport::WriteErrorCleared { offset: 66 * 512 },
                r#"{"WriteErrorCleared":{"sector":66}}"#,
            ),
        ];
        for (report, line) in reports {
            assert_eq!(serde_json::to_string(&report).unwrap(), line);
            assert_eq!(serde_json::from_str::<FaultReport>(line).unwrap(), report);
        }
        // Only whole sectors travel.
        assert!(serde_json::to_string(&Fault::WriteError { offset: 100 }).is_err());
        let past_any_disk = format!(r#"{{"WriteError":{{"sector":{}}}}}"#, u64::MAX);
        assert!(serde_json::from_str::<Fault>(&past_any_disk).is_err());
    }

    #[test]
    fn faults_reach_the_zones() {
        let zones = zones();
        let read_only = Fault::ReadOnly { zone: 2 };
        assert_eq!(
            apply(&zones, read_only),
            "zone 2 (sector 128) is now read_only"
        );
        assert_eq!(apply(&zones, read_only), "zone 2 (sector 128) is now empty");
        assert_eq!(
            apply(&zones, Fault::Offline { zone: 7 }),
            "zone 7 (sector 448) is now offline"
        );
        assert_eq!(
            apply(&zones, Fault::Offline { zone: 0 }),
            "error zone 0 is conventional: only sequential zones take faults"
        );
        assert_eq!(
            apply(&zones, Fault::Offline { zone: 8 }),
            "error no zone 8: the disk has 8 zones (0 to 7)"
        );
        assert_eq!(
            apply(&zones, Fault::WriteError { offset: 66 * 512 }),
            "writes reaching sector 66 now fail"
        );
        assert_eq!(
            apply(&zones, Fault::ClearWriteError { offset: 66 * 512 }),
            "write error at sector 66 cleared"
        );
        assert_eq!(
            apply(&zones, Fault::ClearWriteError { offset: 66 * 512 }),
            "error no write error at sector 66"
        );
        assert_eq!(
            apply(&zones, Fault::WriteError { offset: 512 * 512 }),
            "error sector 512 is past the end of the disk (512 sectors)"
        );
        assert_eq!(
            apply(&zones, Fault::WriteError { offset: 100 }),
            "error byte 100 is not the start of a sector"
        );
    }
}
