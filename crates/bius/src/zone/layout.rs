//! [`ZoneLayout`]: what the kernel knows of a zoned device's zones, and the
//! checks its driver makes on zone reports and append positions.  The
//! worker makes them before answering (a wrong answer fails with `EIO` at
//! once, instead of being refused and timing out), the loopback as the
//! driver.  Everything is in bytes, as the zone descriptors are: the
//! kernel's sectors are converted by the callers.

use super::{Zone, ZoneCondition, ZoneExtent, ZoneGeometry, ZoneType};
use crate::abi::SECTOR_SIZE;

/// The zones of a normalised [`ZoneGeometry`] with a logical block size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZoneLayout {
    geometry: ZoneGeometry,
    /// The logical block size in bytes (at least a sector).
    block_size: u64,
    /// The kernel emulates zone append: no `ZONE_APPEND` ever comes.
    append_emulated: bool,
}

impl ZoneLayout {
    /// The layout of `geometry` (normalised) with blocks of
    /// `logical_block_size` bytes.
    pub(crate) fn new(geometry: ZoneGeometry, logical_block_size: u32) -> Self {
        ZoneLayout {
            geometry,
            block_size: u64::from(logical_block_size).max(SECTOR_SIZE),
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
        index < u64::from(self.geometry.conventional_zones())
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
        let whole_sector =
            zone.write_pointer == u64::MAX || zone.write_pointer.is_multiple_of(SECTOR_SIZE);
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
        } else if !whole_sector {
            // (the one check the driver cannot make: its wp is in sectors)
            Some("wp is not a whole sector")
        } else {
            None
        }
    }

    /// The first wrong zone of a report from byte `offset`, and why; a
    /// report may be empty only past the last zone.
    pub(crate) fn report_problem(
        &self,
        offset: u64,
        zones: &[Zone],
    ) -> Option<(u64, &'static str)> {
        let first = offset / self.geometry.zone_size();
        if zones.is_empty() && offset < self.geometry.size() {
            return Some((first, "no zone reported"));
        }
        zones
            .iter()
            .zip(first..)
            .find_map(|(zone, index)| self.problem(zone, index).map(|why| (index, why)))
    }

    /// Whether an append of `len` bytes to the zone of byte `zone_offset`
    /// may have landed at byte `at`: block aligned, data inside the
    /// capacity.
    pub(crate) fn append_ok(&self, zone_offset: u64, len: u64, at: u64) -> bool {
        let index = zone_offset / self.geometry.zone_size();
        if index >= self.geometry.zone_count() {
            return false;
        }
        let extent = self.geometry.zone_extent(index);
        let (start, end) = (extent.start, extent.start + extent.capacity);
        (start..=end).contains(&at) && len <= end - at && at.is_multiple_of(self.block_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::set::ZoneSet;

    #[test]
    fn a_zone_set_reports_what_the_driver_accepts() {
        const K: u64 = 1024;
        // 32 KiB zones, 24 KiB writable, the first conventional, a runt.
        let geometry = ZoneGeometry::new(100 * K, 32 * K)
            .unwrap()
            .with_zone_capacity(24 * K)
            .unwrap()
            .with_conventional_zones(1)
            .unwrap();
        let zones = ZoneSet::new(geometry);
        let layout = ZoneLayout::new(*zones.geometry(), 4096);
        zones.write(32 * K, 4 * K, |_, _| Ok(())).unwrap();
        zones.finish(64 * K).unwrap();
        zones.set_offline(96 * K, |_, _| Ok(())).unwrap();
        let report = zones.report(0, 10);
        assert_eq!(report.len(), 4);
        assert_eq!(layout.report_problem(0, &report), None);
        assert_eq!(layout.report_problem(32 * K, &report[1..]), None);
        // Empty: only past the last zone.
        assert_eq!(
            layout.report_problem(32 * K, &[]),
            Some((1, "no zone reported"))
        );
        assert_eq!(layout.report_problem(100 * K, &[]), None);
        // Shifted by one zone, a runt too long, a wrong capacity.
        assert_eq!(
            layout.report_problem(0, &report[1..]),
            Some((0, "start is not the next zone's"))
        );
        let runt = Zone {
            len: 32 * K,
            ..report[3]
        };
        assert_eq!(
            layout.report_problem(96 * K, &[runt]),
            Some((3, "len is not the zone's"))
        );
        let capacity = Zone {
            capacity: 32 * K,
            ..report[1]
        };
        assert_eq!(
            layout.report_problem(32 * K, &[capacity]),
            Some((1, "capacity is not the zone's"))
        );
        let open_at_capacity = Zone {
            write_pointer: 32 * K + 24 * K,
            ..report[1]
        };
        assert_eq!(
            layout.report_problem(32 * K, &[open_at_capacity]),
            Some((1, "wp is invalid for the zone condition"))
        );
        // Sectors are what the kernel gets: a part of one is refused.
        let part_of_a_sector = Zone {
            write_pointer: 36 * K + 100,
            ..report[1]
        };
        assert_eq!(
            layout.report_problem(32 * K, &[part_of_a_sector]),
            Some((1, "wp is not a whole sector"))
        );
        // Appends: aligned, inside the capacity.
        assert!(layout.append_ok(32 * K, 4096, 32 * K));
        assert!(layout.append_ok(32 * K, 4096, 32 * K + 20 * K));
        assert!(!layout.append_ok(32 * K, 4096, 32 * K + 22 * K));
        assert!(!layout.append_ok(32 * K, 4096, 33 * K));
        assert!(!layout.append_ok(32 * K, 4096, 64 * K));
        assert!(!layout.append_ok(128 * K, 4096, 128 * K));
    }
}
