//! Fault injection on a running zoned RAM disk.
//!
//! The daemon of `biusctl create --zoned ... ramdisk` answers these on its
//! socket ([`crate::socket`]); `biusctl fault` [`send`]s one and prints
//! the answer.  Requests:
//! `read-only ZONE`, `offline ZONE` (ZONE: a zone index, 0 = first zone),
//! `write-error SECTOR`, `clear-write-error SECTOR` (512-byte sectors).
//! Answers: `ok MESSAGE` or `error MESSAGE`.  The faults are those of
//! [`bius::ZoneSet`]: [`set_read_only`](bius::ZoneSet::set_read_only),
//! [`set_offline`](bius::ZoneSet::set_offline) (on a zone already so, back
//! to empty), [`inject_write_error`](bius::ZoneSet::inject_write_error),
//! [`clear_write_error`](bius::ZoneSet::clear_write_error).

use std::fmt;
use std::path::Path;

use bius::zone::{ZoneError, ZoneOp};
use bius::ZoneCondition;
use bius_backends::ZonedRamDisk;

use crate::socket::{self, SendError};

/// One fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Make a zone read-only (or, if it is, empty again).
    ReadOnly(u32),
    /// Take a zone offline (or, if it is, empty again).
    Offline(u32),
    /// Fail writes reaching a sector.
    WriteError(u64),
    /// Remove an injected write error.
    ClearWriteError(u64),
}

impl fmt::Display for Fault {
    /// The request line, without the newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::ReadOnly(zone) => write!(f, "read-only {zone}"),
            Fault::Offline(zone) => write!(f, "offline {zone}"),
            Fault::WriteError(sector) => write!(f, "write-error {sector}"),
            Fault::ClearWriteError(sector) => write!(f, "clear-write-error {sector}"),
        }
    }
}

impl Fault {
    /// Parses a request line.
    pub fn parse(line: &str) -> Result<Fault, String> {
        let mut words = line.split_whitespace();
        let (Some(command), Some(arg), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("malformed request `{line}`"));
        };
        let number = || {
            arg.parse::<u64>()
                .map_err(|_| format!("`{arg}` is not a number"))
        };
        let zone = || u32::try_from(number()?).map_err(|_| format!("no zone {arg}"));
        match command {
            "read-only" => Ok(Fault::ReadOnly(zone()?)),
            "offline" => Ok(Fault::Offline(zone()?)),
            "write-error" => Ok(Fault::WriteError(number()?)),
            "clear-write-error" => Ok(Fault::ClearWriteError(number()?)),
            _ => Err(format!("unknown request `{command}`")),
        }
    }

    /// Injects the fault into `disk`; the answer's message.
    pub fn apply(self, disk: &ZonedRamDisk) -> Result<String, String> {
        let zones = disk.zones();
        let geometry = zones.geometry();
        let discard = |sector, sectors| disk.discard_zone(sector, sectors);
        let zone_start = |zone: u32| {
            let count = geometry.zone_count();
            if u64::from(zone) < count {
                Ok(u64::from(zone) * geometry.zone_sectors)
            } else {
                Err(format!(
                    "no zone {zone}: the disk has {count} zones (0 to {})",
                    count - 1
                ))
            }
        };
        let conventional = |zone: u32, err| match err {
            ZoneError::InvalidCondition {
                op: ZoneOp::InjectFault,
                condition: ZoneCondition::NotWritePointer,
            } => format!("zone {zone} is conventional: only sequential zones take faults"),
            err => format!("zone {zone}: {err}"),
        };
        let condition = |start: u64| {
            zones
                .report(start, 1)
                .first()
                .map_or_else(|| "?".into(), |zone| zone.condition.to_string())
        };
        let past_end = |sector| {
            format!(
                "sector {sector} is past the end of the disk ({} sectors)",
                geometry.device_sectors
            )
        };
        match self {
            Fault::ReadOnly(zone) | Fault::Offline(zone) => {
                let start = zone_start(zone)?;
                let result = match self {
                    Fault::ReadOnly(_) => zones.set_read_only(start, discard),
                    _ => zones.set_offline(start, discard),
                };
                result.map_err(|err| conventional(zone, err))?;
                Ok(format!(
                    "zone {zone} (sector {start}) is now {}",
                    condition(start)
                ))
            }
            Fault::WriteError(sector) => {
                zones
                    .inject_write_error(sector)
                    .map_err(|_| past_end(sector))?;
                Ok(format!("writes reaching sector {sector} now fail"))
            }
            Fault::ClearWriteError(sector) => {
                if zones.clear_write_error(sector) {
                    Ok(format!("write error at sector {sector} cleared"))
                } else {
                    Err(format!("no write error at sector {sector}"))
                }
            }
        }
    }
}

/// The answer line (without the newline) to a request line.
pub fn answer(disk: &ZonedRamDisk, line: &str) -> String {
    match Fault::parse(line).and_then(|fault| fault.apply(disk)) {
        Ok(message) => format!("ok {message}"),
        Err(message) => format!("error {message}"),
    }
}

/// Sends `fault` to the daemon of `disk_name` in `dir`; its answer.
pub fn send(dir: &Path, disk_name: &str, fault: Fault) -> Result<String, SendError> {
    socket::request(dir, disk_name, &fault.to_string())
}

#[cfg(test)]
mod tests {
    use bius::zone::ZoneGeometry;
    use bius::BlockDevice;
    use std::sync::Arc;

    use super::*;

    /// 8 zones of 64 sectors, the first conventional.
    fn disk() -> Arc<ZonedRamDisk> {
        let geometry = ZoneGeometry {
            conventional_zones: 1,
            ..ZoneGeometry::new(512, 64)
        };
        Arc::new(ZonedRamDisk::new(geometry).unwrap())
    }

    #[test]
    fn requests_round_trip() {
        for fault in [
            Fault::ReadOnly(3),
            Fault::Offline(0),
            Fault::WriteError(12345),
            Fault::ClearWriteError(7),
        ] {
            assert_eq!(Fault::parse(&fault.to_string()), Ok(fault));
        }
        for bad in [
            "",
            "read-only",
            "read-only x",
            "offline 1 2",
            "melt 3",
            "offline 5000000000",
        ] {
            assert!(Fault::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn faults_reach_the_zones() {
        let disk = disk();
        assert_eq!(
            answer(&disk, "read-only 2"),
            "ok zone 2 (sector 128) is now READONLY"
        );
        assert_eq!(
            answer(&disk, "read-only 2"),
            "ok zone 2 (sector 128) is now EMPTY"
        );
        assert_eq!(
            answer(&disk, "offline 7"),
            "ok zone 7 (sector 448) is now OFFLINE"
        );
        assert_eq!(
            answer(&disk, "offline 0"),
            "error zone 0 is conventional: only sequential zones take faults"
        );
        assert_eq!(
            answer(&disk, "offline 8"),
            "error no zone 8: the disk has 8 zones (0 to 7)"
        );
        assert_eq!(
            answer(&disk, "write-error 66"),
            "ok writes reaching sector 66 now fail"
        );
        assert!(disk.write(64 * 512, &[1; 4096], false).is_err());
        assert_eq!(
            answer(&disk, "clear-write-error 66"),
            "ok write error at sector 66 cleared"
        );
        assert_eq!(
            answer(&disk, "clear-write-error 66"),
            "error no write error at sector 66"
        );
        assert_eq!(
            answer(&disk, "write-error 512"),
            "error sector 512 is past the end of the disk (512 sectors)"
        );
        assert!(answer(&disk, "nonsense").starts_with("error "));
    }
}
