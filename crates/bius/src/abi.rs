//! Byte-level encoding of the request, segment and completion records of
//! `bius.h` and of the zone descriptors of `REPORT_ZONES` completions, in native
//! byte order: whole records, by the zerocopy traits that bius-sys derives
//! on them (no field can be forgotten).

use std::mem::size_of;

use bius_sys::{bius_completion, bius_request, bius_segment, blk_zone};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::zone::{Zone, ZoneCondition, ZoneType};

/// Size of a `struct bius_request` header in the request stream.
pub(crate) const REQUEST_SIZE: usize = size_of::<bius_request>();
/// Size of a `struct bius_segment` record, `hdr.nr_segments` of which
/// follow a segmented mapped request's header.
pub(crate) const SEGMENT_SIZE: usize = size_of::<bius_segment>();
/// Most segment records a request has (`BIUS_MAP_MAX_SEGMENTS`).
pub(crate) const MAX_SEGMENTS: usize = bius_sys::BIUS_MAP_MAX_SEGMENTS as usize;
/// Size of a `struct bius_completion` header in the completion stream.
pub(crate) const COMPLETION_SIZE: usize = size_of::<bius_completion>();

/// Size of a `struct blk_zone` in a `REPORT_ZONES` completion.
pub(crate) const ZONE_SIZE: usize = size_of::<blk_zone>();

/// Bytes per sector: the unit of `bius_request.sector`, of
/// `bius_completion.sector` and of `struct blk_zone`, and the alignment of
/// every position and length of the framework's requests.  The one
/// definition in the crate.
pub(crate) const SECTOR_SIZE: u64 = 512;

/// Decodes a record (`bius_request`, `bius_segment`, `bius_completion`,
/// `blk_zone`) from the first `size_of::<T>()` bytes of `bytes`.
///
/// # Panics
/// If `bytes` is shorter (the callers cut their streams into whole
/// records first).
pub(crate) fn decode<T: FromBytes>(bytes: &[u8]) -> T {
    match T::read_from_prefix(bytes) {
        Ok((record, _)) => record,
        Err(_) => panic!(
            "{} bytes hold no {}-byte record",
            bytes.len(),
            size_of::<T>()
        ),
    }
}

/// Encodes a record into the first `size_of::<T>()` bytes of `bytes`.
///
/// # Panics
/// If `bytes` is shorter (the callers reserve room for whole records
/// first).
pub(crate) fn encode<T: IntoBytes + Immutable>(record: &T, bytes: &mut [u8]) {
    let len = bytes.len();
    if record.write_to_prefix(bytes).is_err() {
        panic!(
            "{len} bytes have no room for a {}-byte record",
            size_of::<T>()
        );
    }
}

/// The kernel's descriptor of `zone` (`non_seq` and `reset` 0): its bytes
/// in sectors (a part of a sector dropped: the worker checks the reports
/// it encodes), a write pointer of `u64::MAX` (none) kept so.
pub(crate) fn raw_zone(zone: &Zone) -> blk_zone {
    let sectors = |bytes: u64| bytes / SECTOR_SIZE;
    blk_zone {
        start: sectors(zone.start),
        len: sectors(zone.len),
        wp: match zone.write_pointer {
            u64::MAX => u64::MAX,
            wp => sectors(wp),
        },
        type_: zone.zone_type as u8,
        cond: zone.condition as u8,
        capacity: sectors(zone.capacity),
        ..Default::default()
    }
}

/// The zone a kernel descriptor describes, in bytes (a write pointer of
/// `u64::MAX` kept so, and so any past the last byte); `None` for an
/// unknown type or condition.
pub(crate) fn zone_of(raw: &blk_zone) -> Option<Zone> {
    let bytes = |sectors: u64| sectors.saturating_mul(SECTOR_SIZE);
    Some(Zone {
        start: bytes(raw.start),
        len: bytes(raw.len),
        capacity: bytes(raw.capacity),
        write_pointer: bytes(raw.wp),
        zone_type: ZoneType::from_raw(raw.type_)?,
        condition: ZoneCondition::from_raw(raw.cond)?,
    })
}

/// Encodes `zone` as a `struct blk_zone` into the first [`ZONE_SIZE`]
/// bytes (reserved bytes zeroed).
pub(crate) fn encode_zone(zone: &Zone, bytes: &mut [u8]) {
    encode(&raw_zone(zone), bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fields` (each a value's native-endian bytes) laid end to end:
    /// the record as `bius.h` spells it, field by field.
    fn wire(fields: &[&[u8]]) -> Vec<u8> {
        fields.concat()
    }

    /// Encodes `record` over a buffer of 0xff, checks the bytes against
    /// `expected`, decodes them back and returns what was decoded.
    fn round_trip<T: FromBytes + IntoBytes + Immutable>(record: &T, expected: &[u8]) -> T {
        let mut bytes = vec![0xffu8; size_of::<T>() + 3];
        encode(record, &mut bytes);
        assert_eq!(&bytes[..size_of::<T>()], expected);
        assert_eq!(
            &bytes[size_of::<T>()..],
            &[0xff; 3],
            "wrote past the record"
        );
        decode(&bytes)
    }

    #[test]
    fn request_round_trip() {
        let req = bius_request {
            id: 0x0102_0304_0506_0708,
            sector: 77,
            len: 4096,
            op: 1,
            nr_segments: 3,
            flags: 4,
            window_offset: 0x1_0000_0200,
        };
        let expected = wire(&[
            &req.id.to_ne_bytes(),
            &77u64.to_ne_bytes(),
            &4096u32.to_ne_bytes(),
            &[1, 3],
            &4u16.to_ne_bytes(),
            &0x1_0000_0200u64.to_ne_bytes(),
        ]);
        assert_eq!(expected.len(), REQUEST_SIZE);
        assert_eq!(round_trip(&req, &expected), req);
    }

    #[test]
    fn segment_round_trip() {
        let seg = bius_segment {
            window_offset: 0x0102_0304_0506_0708,
            len: 0x1_0200,
            reserved: 0x0a0b_0c0d,
        };
        let expected = wire(&[
            &seg.window_offset.to_ne_bytes(),
            &seg.len.to_ne_bytes(),
            &seg.reserved.to_ne_bytes(),
        ]);
        assert_eq!(expected.len(), SEGMENT_SIZE);
        assert_eq!(round_trip(&seg, &expected), seg);
    }

    #[test]
    fn completion_round_trip() {
        let comp = bius_completion {
            id: 9,
            result: -5,
            len: 512,
            sector: 0x0807_0605_0403_0201,
        };
        let expected = wire(&[
            &9u64.to_ne_bytes(),
            &(-5i32).to_ne_bytes(),
            &512u32.to_ne_bytes(),
            &comp.sector.to_ne_bytes(),
        ]);
        assert_eq!(expected.len(), COMPLETION_SIZE);
        assert_eq!(round_trip(&comp, &expected), comp);
    }

    #[test]
    fn zone_round_trip() {
        // In bytes here, in sectors in the record.
        let zone = Zone {
            start: 512 << 20,
            len: 2048 * 512,
            capacity: 1536 * 512,
            write_pointer: (512 << 20) + 8 * 512,
            zone_type: ZoneType::SequentialWriteRequired,
            condition: ZoneCondition::ImplicitOpen,
        };
        let expected = wire(&[
            &(1u64 << 20).to_ne_bytes(),
            &2048u64.to_ne_bytes(),
            &((1u64 << 20) + 8).to_ne_bytes(),
            // type, condition, non_seq, reset, 4 reserved
            &[2, 2, 0, 0, 0, 0, 0, 0],
            &1536u64.to_ne_bytes(),
            &[0; 24],
        ]);
        assert_eq!(expected.len(), ZONE_SIZE);
        let raw = round_trip(&raw_zone(&zone), &expected);
        assert_eq!(zone_of(&raw), Some(zone));

        let mut bytes = [0xffu8; ZONE_SIZE];
        encode_zone(&zone, &mut bytes);
        assert_eq!(&bytes[..], &expected[..]);
        let unknown = blk_zone {
            cond: 5,
            ..raw_zone(&zone)
        };
        assert_eq!(zone_of(&unknown), None);
        // No write pointer: all ones both ways.
        let read_only = Zone {
            write_pointer: u64::MAX,
            condition: ZoneCondition::ReadOnly,
            ..zone
        };
        assert_eq!(raw_zone(&read_only).wp, u64::MAX);
        assert_eq!(zone_of(&raw_zone(&read_only)), Some(read_only));
    }

    #[test]
    fn records_read_from_unaligned_bytes() {
        let comp = bius_completion {
            id: u64::MAX - 1,
            result: 0,
            len: 4096,
            sector: 12,
        };
        let mut bytes = [0u8; COMPLETION_SIZE + 1];
        encode(&comp, &mut bytes[1..]);
        assert_eq!(decode::<bius_completion>(&bytes[1..]), comp);
    }

    #[test]
    #[should_panic(expected = "hold no 32-byte record")]
    fn a_short_record_is_refused() {
        decode::<bius_request>(&[0; REQUEST_SIZE - 1]);
    }

    #[test]
    #[should_panic(expected = "no room for a 24-byte record")]
    fn no_room_for_a_record_is_refused() {
        encode(&bius_completion::default(), &mut [0; COMPLETION_SIZE - 1]);
    }
}
