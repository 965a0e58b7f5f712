//! [`ReadSpan`]: one zone's part of a read, and what each of its sectors
//! reads as.

use super::{FILL_PATTERN, SECTOR_SHIFT};

/// One zone's part of a read, given to the closure of [`ZoneSet::read`](super::ZoneSet::read):
/// first the sectors that hold data, then those a finish moved the write
/// pointer over (they read as zeroes, as on a memory-backed `null_blk`,
/// whose reset frees them), then those past the write pointer (they read
/// as [`FILL_PATTERN`]).  A sector written before the zone's last reset is
/// never data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSpan {
    /// First sector.
    pub sector: u64,
    /// Number of sectors.
    pub sectors: u64,
    /// How many sectors, from the first, hold data written since the
    /// zone's last reset: below its data end (see
    /// [`ZoneRecord::data_end`](super::ZoneRecord::data_end)).
    pub written: u64,
    /// How many sectors after the written ones are below the write pointer
    /// without data: they read as zeroes.
    pub skipped: u64,
}

impl ReadSpan {
    /// The sectors that hold no data, from the span's first sector, and
    /// what each of their bytes reads as: the skipped ones zeroes, the
    /// rest [`FILL_PATTERN`] (either range may be empty).
    ///
    /// ```
    /// use bius::zone::{ReadSpan, FILL_PATTERN};
    ///
    /// let span = ReadSpan { sector: 8, sectors: 8, written: 2, skipped: 3 };
    /// assert_eq!(span.unwritten(), [(2..5, 0), (5..8, FILL_PATTERN)]);
    /// ```
    pub fn unwritten(&self) -> [(std::ops::Range<u64>, u8); 2] {
        let below_write_pointer = self.written + self.skipped;
        [
            (self.written..below_write_pointer, 0),
            (below_write_pointer..self.sectors, FILL_PATTERN),
        ]
    }

    /// Fills the bytes of `out`, this span's part of a read buffer, that
    /// hold no data as they read (see [`ReadSpan::unwritten`]), and
    /// returns the others, the written part, for the caller to read from
    /// its store.
    ///
    /// ```
    /// use bius::zone::{ReadSpan, FILL_PATTERN};
    ///
    /// let span = ReadSpan { sector: 8, sectors: 3, written: 1, skipped: 1 };
    /// let mut out = [7; 1536];
    /// let data = span.fill_unwritten(&mut out);
    /// assert_eq!(data.len(), 512);
    /// assert_eq!(out[512..1024], [0; 512]);
    /// assert_eq!(out[1024..], [FILL_PATTERN; 512]);
    /// ```
    pub fn fill_unwritten<'b>(&self, out: &'b mut [u8]) -> &'b mut [u8] {
        let bytes = |sectors: u64| (sectors << SECTOR_SHIFT) as usize;
        for (range, byte) in self.unwritten() {
            out[bytes(range.start)..bytes(range.end)].fill(byte);
        }
        &mut out[..bytes(self.written)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::{ZoneCondition, ZoneGeometry, ZoneRecord, ZoneRestoreError, ZoneSet};

    /// Zones of 8 sectors with a capacity of 6, the first conventional.
    fn geometry() -> ZoneGeometry {
        ZoneGeometry::new(16 << 10, 4 << 10)
            .unwrap()
            .with_zone_capacity(3 << 10)
            .unwrap()
            .with_conventional_zones(1)
            .unwrap()
    }

    fn ok(_: u64, _: u64) -> Result<(), crate::IoError> {
        Ok(())
    }

    /// Zone 1 (sectors 8..16) read whole.
    fn zone_1(set: &ZoneSet) -> ReadSpan {
        let mut spans = Vec::new();
        set.read(8, 8, |span| {
            spans.push(span);
            Ok(())
        })
        .unwrap();
        assert_eq!(spans.len(), 1);
        spans[0]
    }

    fn span(written: u64, skipped: u64) -> ReadSpan {
        ReadSpan {
            sector: 8,
            sectors: 8,
            written,
            skipped,
        }
    }

    #[test]
    fn a_finish_skips_sectors_and_a_reset_leaves_no_data() {
        let set = ZoneSet::new(geometry());
        set.write(8, 3, ok).unwrap();
        assert_eq!(zone_1(&set), span(3, 0));
        set.finish(8).unwrap();
        assert_eq!(zone_1(&set), span(3, 5));
        // Whatever the discard does.
        set.reset(8, ok).unwrap();
        assert_eq!(zone_1(&set), span(0, 0));
        set.finish(8).unwrap();
        assert_eq!(zone_1(&set), span(0, 8));
        set.reset_all(ok).unwrap();
        set.write(8, 2, ok).unwrap();
        set.set_read_only(8, ok).unwrap();
        assert_eq!(zone_1(&set), span(2, 6));
        let read = |sector, sectors| {
            let mut spans = Vec::new();
            set.read(sector, sectors, |span| {
                spans.push(span);
                Ok(())
            })
            .map(|()| spans)
        };
        // A conventional zone is all data.
        let conventional = ReadSpan {
            sector: 0,
            sectors: 8,
            written: 8,
            skipped: 0,
        };
        assert_eq!(read(0, 8), Ok(vec![conventional]));
    }

    #[test]
    fn the_data_end_is_kept_in_the_records() {
        let set = ZoneSet::new(geometry());
        set.write(8, 3, ok).unwrap();
        set.finish(8).unwrap();
        set.write(16, 2, ok).unwrap();
        let records = set.records();
        let record = |condition, write_pointer, data_end| ZoneRecord {
            condition,
            write_pointer,
            data_end,
        };
        assert_eq!(records[0], record(ZoneCondition::NotWritePointer, 8, 8));
        assert_eq!(records[1], record(ZoneCondition::Full, 16, 11));
        assert_eq!(records[2], record(ZoneCondition::Closed, 18, 18));
        assert_eq!(records[3], record(ZoneCondition::Empty, 24, 24));
        let restored = ZoneSet::with_records(geometry(), &records).unwrap();
        assert_eq!(zone_1(&restored), span(3, 5));
        assert_eq!(restored.records(), records);
        // A data end no zone has.
        let refused = |index: usize, data_end| {
            let mut records = records.clone();
            records[index].data_end = data_end;
            ZoneSet::with_records(geometry(), &records)
        };
        let why = "data end is invalid for the write pointer and condition";
        for (index, data_end) in [(0, 7), (1, 7), (1, 15), (2, 17), (3, 25)] {
            assert_eq!(
                refused(index, data_end).err(),
                Some(ZoneRestoreError::Record {
                    zone: index as u64,
                    why
                }),
                "zone {index} data end {data_end}"
            );
        }
        assert!(refused(1, 14).is_ok());
    }
}
