//! [`ZoneLayout`]: what the kernel knows of a zoned device's zones, and the
//! checks its driver makes on zone reports and append sectors.  The worker
//! makes them before answering (a wrong answer fails with `EIO` at once,
//! instead of being refused and timing out), the loopback as the driver.

use super::{Zone, ZoneCondition, ZoneExtent, ZoneGeometry, ZoneType};

/// The zones of a normalised [`ZoneGeometry`] with a logical block size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZoneLayout {
    geometry: ZoneGeometry,
    /// Sectors per logical block.
    block_sectors: u64,
    /// The kernel emulates zone append: no `ZONE_APPEND` ever comes.
    append_emulated: bool,
}

impl ZoneLayout {
    /// The layout of `geometry` (normalised) with blocks of
    /// `logical_block_size` bytes.
    pub(crate) fn new(geometry: ZoneGeometry, logical_block_size: u32) -> Self {
        ZoneLayout {
            geometry,
            block_sectors: (u64::from(logical_block_size) >> super::SECTOR_SHIFT).max(1),
            append_emulated: false,
        }
    }

    /// The layout with zone appends emulated by the kernel (`true`), which
    /// then sends none (`BIUS_FEATURE_ZONE_APPEND_EMULATED`).
    pub(crate) fn emulated_append(self, append_emulated: bool) -> Self {
        ZoneLayout {
            append_emulated,
            ..self
        }
    }

    /// Whether the kernel emulates zone append.
    pub(crate) fn append_emulated(&self) -> bool {
        self.append_emulated
    }

    /// The geometry.
    pub(crate) fn geometry(&self) -> &ZoneGeometry {
        &self.geometry
    }

    fn conventional(&self, index: u64) -> bool {
        index < u64::from(self.geometry.conventional_zones)
    }

    /// Why the driver refuses `zone` as the descriptor of zone `index`.
    fn problem(&self, zone: &Zone, index: u64) -> Option<&'static str> {
        if index >= self.geometry.zone_count() {
            return Some("past the last zone");
        }
        let ZoneExtent {
            start,
            len,
            capacity,
        } = self.geometry.zone_extent(index);
        let conventional = self.conventional(index);
        let zone_type = if conventional {
            ZoneType::Conventional
        } else {
            ZoneType::SequentialWriteRequired
        };
        let write_pointer_ok = match zone.condition {
            ZoneCondition::Empty => zone.write_pointer == start,
            ZoneCondition::ImplicitOpen | ZoneCondition::ExplicitOpen | ZoneCondition::Closed => {
                (start..start + capacity).contains(&zone.write_pointer)
            }
            _ => {
                zone.write_pointer == u64::MAX
                    || (start..=start + len).contains(&zone.write_pointer)
            }
        };
        if zone.start != start {
            Some("start is not the next zone's")
        } else if zone.len != len {
            Some("len is not the zone's")
        } else if zone.capacity != capacity {
            Some("capacity is not the zone's")
        } else if zone.zone_type != zone_type {
            Some("type is not the zone's")
        } else if conventional != (zone.condition == ZoneCondition::NotWritePointer) {
            Some("cond is invalid for the zone type")
        } else if !write_pointer_ok {
            Some("wp is invalid for the zone condition")
        } else {
            None
        }
    }

    /// The first wrong zone of a report from `sector`, and why; a report
    /// may be empty only past the last zone.
    pub(crate) fn report_problem(
        &self,
        sector: u64,
        zones: &[Zone],
    ) -> Option<(u64, &'static str)> {
        let first = sector / self.geometry.zone_sectors;
        if zones.is_empty() && sector < self.geometry.device_sectors {
            return Some((first, "no zone reported"));
        }
        zones
            .iter()
            .zip(first..)
            .find_map(|(zone, index)| self.problem(zone, index).map(|why| (index, why)))
    }

    /// Whether an append of `len` bytes to the zone of `zone_sector` may
    /// have landed at `sector`: block aligned, data inside the capacity.
    pub(crate) fn append_ok(&self, zone_sector: u64, len: u64, sector: u64) -> bool {
        let index = zone_sector / self.geometry.zone_sectors;
        if index >= self.geometry.zone_count() {
            return false;
        }
        let extent = self.geometry.zone_extent(index);
        let (start, end) = (extent.start, extent.start + extent.capacity);
        let sectors = len >> super::SECTOR_SHIFT;
        (start..=end).contains(&sector)
            && sectors <= end - sector
            && sector.is_multiple_of(self.block_sectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::set::ZoneSet;

    #[test]
    fn a_zone_set_reports_what_the_driver_accepts() {
        let geometry = ZoneGeometry::new(100 << 10, 32 << 10)
            .unwrap()
            .with_zone_capacity(24 << 10)
            .unwrap()
            .with_conventional_zones(1)
            .unwrap();
        let zones = ZoneSet::new(geometry);
        let layout = ZoneLayout::new(*zones.geometry(), 4096);
        zones.write(64, 8, |_, _| Ok(())).unwrap();
        zones.finish(128).unwrap();
        zones.set_offline(192, |_, _| Ok(())).unwrap();
        let report = zones.report(0, 10);
        assert_eq!(report.len(), 4);
        assert_eq!(layout.report_problem(0, &report), None);
        assert_eq!(layout.report_problem(64, &report[1..]), None);
        // Empty: only past the last zone.
        assert_eq!(
            layout.report_problem(64, &[]),
            Some((1, "no zone reported"))
        );
        assert_eq!(layout.report_problem(200, &[]), None);
        // Shifted by one zone, a runt too long, a wrong capacity.
        assert_eq!(
            layout.report_problem(0, &report[1..]),
            Some((0, "start is not the next zone's"))
        );
        let runt = Zone {
            len: 64,
            ..report[3]
        };
        assert_eq!(
            layout.report_problem(192, &[runt]),
            Some((3, "len is not the zone's"))
        );
        let capacity = Zone {
            capacity: 64,
            ..report[1]
        };
        assert_eq!(
            layout.report_problem(64, &[capacity]),
            Some((1, "capacity is not the zone's"))
        );
        let open_at_capacity = Zone {
            write_pointer: 64 + 48,
            ..report[1]
        };
        assert_eq!(
            layout.report_problem(64, &[open_at_capacity]),
            Some((1, "wp is invalid for the zone condition"))
        );
        // Appends: aligned, inside the capacity.
        assert!(layout.append_ok(64, 4096, 64));
        assert!(layout.append_ok(64, 4096, 64 + 40));
        assert!(!layout.append_ok(64, 4096, 64 + 44));
        assert!(!layout.append_ok(64, 4096, 66));
        assert!(!layout.append_ok(64, 4096, 128));
        assert!(!layout.append_ok(256, 4096, 256));
    }
}
