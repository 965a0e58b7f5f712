//! [`ReadSpan`]: one zone's part of a read, and what each of its bytes
//! reads as.

use super::FILL_PATTERN;

/// One zone's part of a read, given to the closure of [`ZoneSet::read`](super::ZoneSet::read),
/// in bytes: first the bytes that hold data, then those a finish moved the
/// write pointer over (they read as zeroes, as on a memory-backed
/// `null_blk`, whose reset frees them), then those past the write pointer
/// (they read as [`FILL_PATTERN`]).  A byte written before the zone's last
/// reset is never data.  Each part is whole 512-byte sectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSpan {
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// How many bytes, from the first, hold data written since the zone's
    /// last reset: below its data end (see
    /// [`ZoneRecord::data_end`](super::ZoneRecord::data_end)).
    pub written: u64,
    /// How many bytes after the written ones are below the write pointer
    /// without data: they read as zeroes.
    pub skipped: u64,
}

impl ReadSpan {
    /// The bytes that hold no data, from the span's first byte, and what
    /// each of them reads as: the skipped ones zeroes, the rest
    /// [`FILL_PATTERN`] (either range may be empty).
    ///
    /// ```
    /// use bius::zone::{ReadSpan, FILL_PATTERN};
    ///
    /// let span = ReadSpan { offset: 4096, len: 4096, written: 1024, skipped: 1536 };
    /// assert_eq!(span.unwritten(), [(1024..2560, 0), (2560..4096, FILL_PATTERN)]);
    /// ```
    pub fn unwritten(&self) -> [(std::ops::Range<u64>, u8); 2] {
        let below_write_pointer = self.written + self.skipped;
        [
            (self.written..below_write_pointer, 0),
            (below_write_pointer..self.len, FILL_PATTERN),
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
    /// let span = ReadSpan { offset: 4096, len: 1536, written: 512, skipped: 512 };
    /// let mut out = [7; 1536];
    /// let data = span.fill_unwritten(&mut out);
    /// assert_eq!(data.len(), 512);
    /// assert_eq!(out[512..1024], [0; 512]);
    /// assert_eq!(out[1024..], [FILL_PATTERN; 512]);
    /// ```
    pub fn fill_unwritten<'b>(&self, out: &'b mut [u8]) -> &'b mut [u8] {
        for (range, byte) in self.unwritten() {
            out[range.start as usize..range.end as usize].fill(byte);
        }
        &mut out[..self.written as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::{ZoneCondition, ZoneGeometry, ZoneRecord, ZoneRestoreError, ZoneSet};

    /// Zones of 4 KiB with a capacity of 3 KiB, the first conventional.
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

    const K: u64 = 1024;

    /// Zone 1 (bytes 4096..8192) read whole.
    fn zone_1(set: &ZoneSet) -> ReadSpan {
        let mut spans = Vec::new();
        set.read(4 * K, 4 * K, |span| {
            spans.push(span);
            Ok(())
        })
        .unwrap();
        assert_eq!(spans.len(), 1);
        spans[0]
    }

    fn span(written: u64, skipped: u64) -> ReadSpan {
        ReadSpan {
            offset: 4 * K,
            len: 4 * K,
            written,
            skipped,
        }
    }

    #[test]
    fn a_finish_skips_sectors_and_a_reset_leaves_no_data() {
        let set = ZoneSet::new(geometry());
        set.write(4 * K, 1536, ok).unwrap();
        assert_eq!(zone_1(&set), span(1536, 0));
        set.finish(4 * K).unwrap();
        assert_eq!(zone_1(&set), span(1536, 2560));
        // Whatever the discard does.
        set.reset(4 * K, ok).unwrap();
        assert_eq!(zone_1(&set), span(0, 0));
        set.finish(4 * K).unwrap();
        assert_eq!(zone_1(&set), span(0, 4 * K));
        set.reset_all(ok).unwrap();
        set.write(4 * K, K, ok).unwrap();
        set.set_read_only(4 * K, ok).unwrap();
        assert_eq!(zone_1(&set), span(K, 3 * K));
        let read = |offset, len| {
            let mut spans = Vec::new();
            set.read(offset, len, |span| {
                spans.push(span);
                Ok(())
            })
            .map(|()| spans)
        };
        // A conventional zone is all data.
        let conventional = ReadSpan {
            offset: 0,
            len: 4 * K,
            written: 4 * K,
            skipped: 0,
        };
        assert_eq!(read(0, 4 * K), Ok(vec![conventional]));
    }

    #[test]
    fn the_data_end_is_kept_in_the_records() {
        let set = ZoneSet::new(geometry());
        set.write(4 * K, 1536, ok).unwrap();
        set.finish(4 * K).unwrap();
        set.write(8 * K, K, ok).unwrap();
        let records = set.records();
        let record = |condition, write_pointer, data_end| ZoneRecord {
            condition,
            write_pointer,
            data_end,
        };
        let closed = 8 * K + K;
        assert_eq!(
            records[0],
            record(ZoneCondition::NotWritePointer, 4 * K, 4 * K)
        );
        assert_eq!(records[1], record(ZoneCondition::Full, 8 * K, 4 * K + 1536));
        assert_eq!(records[2], record(ZoneCondition::Closed, closed, closed));
        assert_eq!(records[3], record(ZoneCondition::Empty, 12 * K, 12 * K));
        let restored = ZoneSet::with_records(geometry(), &records).unwrap();
        assert_eq!(zone_1(&restored), span(1536, 2560));
        assert_eq!(restored.records(), records);
        // A data end no zone has.
        let refused = |index: usize, data_end| {
            let mut records = records.clone();
            records[index].data_end = data_end;
            ZoneSet::with_records(geometry(), &records)
        };
        let why = "data end is invalid for the write pointer and condition";
        // (in sectors: 7, 7, 15, 17, 25; and not a whole sector)
        let refusals = [
            (0, 3584),
            (1, 3584),
            (1, 7680),
            (2, 8704),
            (3, 12800),
            (1, 4 * K + 100),
        ];
        for (index, data_end) in refusals {
            assert_eq!(
                refused(index, data_end).err(),
                Some(ZoneRestoreError::Record {
                    zone: index as u64,
                    why
                }),
                "zone {index} data end {data_end}"
            );
        }
        assert!(refused(1, 7 * K).is_ok());
    }
}
