//! Fault injection on a running zoned RAM disk.
//!
//! `biusctl fault` sends a [`Fault`] over the daemon's control socket
//! ([`bius::control_socket`]); the daemon of `biusctl create --zoned ...
//! ramdisk` [`inject`]s it into its disk's zones ([`Fault::apply`]) and
//! answers what it did.

use bius::control_socket::{ControlError, Fault, FaultReport};
use bius::{BlockDevice, Errno};
use bius_backends::ZonedRamDisk;

/// Injects `fault` into `disk`, if the daemon has a zoned RAM disk.
pub fn inject(disk: Option<&ZonedRamDisk>, fault: Fault) -> Result<FaultReport, ControlError> {
    let Some(disk) = disk else {
        return Err(ControlError::failed(
            Errno::EINVAL,
            "this disk takes no faults (only a zoned ramdisk does)",
        ));
    };
    fault
        .apply(disk.zone_set(), |offset, len| {
            disk.inner().discard(offset, len)
        })
        .map_err(|err| ControlError::failed(err.errno(), err))
}

#[cfg(test)]
mod tests {
    use bius::zone::ZoneGeometry;
    use bius_backends::RamDisk;

    use super::*;

    #[test]
    fn faults_reach_the_disk() {
        // 8 zones of 64 sectors, the first conventional.
        let geometry = ZoneGeometry::new(256 << 10, 32 << 10)
            .unwrap()
            .with_conventional_zones(1)
            .unwrap();
        let disk = RamDisk::zoned(geometry);
        let report = inject(Some(&disk), Fault::WriteError { offset: 66 * 512 }).unwrap();
        assert_eq!(report.to_string(), "writes reaching sector 66 now fail");
        assert!(disk.write(64 * 512, &[1; 4096], false).is_err());
        let err = inject(Some(&disk), Fault::Offline { zone: 8 }).unwrap_err();
        assert_eq!(err.to_string(), "no zone 8: the disk has 8 zones (0 to 7)");
        assert_eq!(err.errno(), Errno::EINVAL);
        let err = inject(None, Fault::Offline { zone: 1 }).unwrap_err();
        assert_eq!(err.errno(), Errno::EINVAL);
    }
}
