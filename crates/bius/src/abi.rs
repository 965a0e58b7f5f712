//! Byte-level encoding of the request, segment and completion records of
//! `bius.h` and of the zone descriptors of `REPORT_ZONES` completions, in native
//! byte order, without `unsafe`.

use std::mem::{offset_of, size_of};

use bius_sys::{bius_completion, bius_request, bius_segment, blk_zone};

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

/// Bytes per sector, the unit of `bius_request.sector`.
pub(crate) const SECTOR_SIZE: u64 = 512;

fn get<const N: usize>(bytes: &[u8], offset: usize) -> [u8; N] {
    bytes[offset..offset + N].try_into().expect("N bytes")
}

fn put(bytes: &mut [u8], offset: usize, value: &[u8]) {
    bytes[offset..offset + value.len()].copy_from_slice(value);
}

/// Decodes a request header from the first [`REQUEST_SIZE`] bytes.
pub(crate) fn decode_request(bytes: &[u8]) -> bius_request {
    bius_request {
        id: u64::from_ne_bytes(get(bytes, offset_of!(bius_request, id))),
        sector: u64::from_ne_bytes(get(bytes, offset_of!(bius_request, sector))),
        len: u32::from_ne_bytes(get(bytes, offset_of!(bius_request, len))),
        op: bytes[offset_of!(bius_request, op)],
        nr_segments: bytes[offset_of!(bius_request, nr_segments)],
        flags: u16::from_ne_bytes(get(bytes, offset_of!(bius_request, flags))),
        window_offset: u64::from_ne_bytes(get(bytes, offset_of!(bius_request, window_offset))),
    }
}

/// Encodes a request header into the first [`REQUEST_SIZE`] bytes (the
/// kernel's side: the loopback's and the tests').
#[cfg(any(test, feature = "loopback"))]
pub(crate) fn encode_request(req: &bius_request, bytes: &mut [u8]) {
    put(bytes, offset_of!(bius_request, id), &req.id.to_ne_bytes());
    put(
        bytes,
        offset_of!(bius_request, sector),
        &req.sector.to_ne_bytes(),
    );
    put(bytes, offset_of!(bius_request, len), &req.len.to_ne_bytes());
    bytes[offset_of!(bius_request, op)] = req.op;
    bytes[offset_of!(bius_request, nr_segments)] = req.nr_segments;
    put(
        bytes,
        offset_of!(bius_request, flags),
        &req.flags.to_ne_bytes(),
    );
    put(
        bytes,
        offset_of!(bius_request, window_offset),
        &req.window_offset.to_ne_bytes(),
    );
}

/// Decodes a segment record from the first [`SEGMENT_SIZE`] bytes.
pub(crate) fn decode_segment(bytes: &[u8]) -> bius_segment {
    bius_segment {
        window_offset: u64::from_ne_bytes(get(bytes, offset_of!(bius_segment, window_offset))),
        len: u32::from_ne_bytes(get(bytes, offset_of!(bius_segment, len))),
        reserved: u32::from_ne_bytes(get(bytes, offset_of!(bius_segment, reserved))),
    }
}

/// Encodes a segment record into the first [`SEGMENT_SIZE`] bytes (the
/// kernel's side).
#[cfg(any(test, feature = "loopback"))]
pub(crate) fn encode_segment(seg: &bius_segment, bytes: &mut [u8]) {
    put(
        bytes,
        offset_of!(bius_segment, window_offset),
        &seg.window_offset.to_ne_bytes(),
    );
    put(bytes, offset_of!(bius_segment, len), &seg.len.to_ne_bytes());
    put(
        bytes,
        offset_of!(bius_segment, reserved),
        &seg.reserved.to_ne_bytes(),
    );
}

/// Decodes a completion header from the first [`COMPLETION_SIZE`] bytes.
pub(crate) fn decode_completion(bytes: &[u8]) -> bius_completion {
    bius_completion {
        id: u64::from_ne_bytes(get(bytes, offset_of!(bius_completion, id))),
        result: i32::from_ne_bytes(get(bytes, offset_of!(bius_completion, result))),
        len: u32::from_ne_bytes(get(bytes, offset_of!(bius_completion, len))),
        sector: u64::from_ne_bytes(get(bytes, offset_of!(bius_completion, sector))),
    }
}

/// Encodes a completion header into the first [`COMPLETION_SIZE`] bytes.
pub(crate) fn encode_completion(comp: &bius_completion, bytes: &mut [u8]) {
    put(
        bytes,
        offset_of!(bius_completion, id),
        &comp.id.to_ne_bytes(),
    );
    put(
        bytes,
        offset_of!(bius_completion, result),
        &comp.result.to_ne_bytes(),
    );
    put(
        bytes,
        offset_of!(bius_completion, len),
        &comp.len.to_ne_bytes(),
    );
    put(
        bytes,
        offset_of!(bius_completion, sector),
        &comp.sector.to_ne_bytes(),
    );
}

/// The kernel's descriptor of `zone` (`non_seq` and `reset` 0).
pub(crate) fn raw_zone(zone: &Zone) -> blk_zone {
    blk_zone {
        start: zone.start,
        len: zone.len,
        wp: zone.write_pointer,
        type_: zone.zone_type as u8,
        cond: zone.condition as u8,
        capacity: zone.capacity,
        ..Default::default()
    }
}

/// The zone a kernel descriptor describes; `None` for an unknown type or
/// condition.
pub(crate) fn zone_of(raw: &blk_zone) -> Option<Zone> {
    Some(Zone {
        start: raw.start,
        len: raw.len,
        capacity: raw.capacity,
        write_pointer: raw.wp,
        zone_type: ZoneType::from_raw(raw.type_)?,
        condition: ZoneCondition::from_raw(raw.cond)?,
    })
}

/// Encodes `zone` as a `struct blk_zone` into the first [`ZONE_SIZE`]
/// bytes (reserved bytes zeroed).
pub(crate) fn encode_zone(zone: &Zone, bytes: &mut [u8]) {
    let raw = raw_zone(zone);
    bytes[..ZONE_SIZE].fill(0);
    put(bytes, offset_of!(blk_zone, start), &raw.start.to_ne_bytes());
    put(bytes, offset_of!(blk_zone, len), &raw.len.to_ne_bytes());
    put(bytes, offset_of!(blk_zone, wp), &raw.wp.to_ne_bytes());
    bytes[offset_of!(blk_zone, type_)] = raw.type_;
    bytes[offset_of!(blk_zone, cond)] = raw.cond;
    put(
        bytes,
        offset_of!(blk_zone, capacity),
        &raw.capacity.to_ne_bytes(),
    );
}

/// Decodes a `struct blk_zone` from the first [`ZONE_SIZE`] bytes (the
/// kernel's side).
#[cfg(any(test, feature = "loopback"))]
pub(crate) fn decode_zone(bytes: &[u8]) -> blk_zone {
    blk_zone {
        start: u64::from_ne_bytes(get(bytes, offset_of!(blk_zone, start))),
        len: u64::from_ne_bytes(get(bytes, offset_of!(blk_zone, len))),
        wp: u64::from_ne_bytes(get(bytes, offset_of!(blk_zone, wp))),
        type_: bytes[offset_of!(blk_zone, type_)],
        cond: bytes[offset_of!(blk_zone, cond)],
        non_seq: bytes[offset_of!(blk_zone, non_seq)],
        reset: bytes[offset_of!(blk_zone, reset)],
        capacity: u64::from_ne_bytes(get(bytes, offset_of!(blk_zone, capacity))),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut bytes = [0xffu8; REQUEST_SIZE];
        encode_request(&req, &mut bytes);
        let back = decode_request(&bytes);
        assert_eq!(
            (
                back.id,
                back.sector,
                back.len,
                back.op,
                back.flags,
                back.nr_segments,
                back.window_offset
            ),
            (req.id, 77, 4096, 1, 4, 3, 0x1_0000_0200)
        );
        assert_eq!(&bytes[..8], &req.id.to_ne_bytes());
        assert_eq!(bytes[21], 3);
    }

    #[test]
    fn segment_round_trip() {
        let seg = bius_segment {
            window_offset: 0x0102_0304_0506_0708,
            len: 0x1_0200,
            reserved: 0x0a0b_0c0d,
        };
        let mut bytes = [0xffu8; SEGMENT_SIZE];
        encode_segment(&seg, &mut bytes);
        let back = decode_segment(&bytes);
        assert_eq!(
            (back.window_offset, back.len, back.reserved),
            (seg.window_offset, seg.len, seg.reserved)
        );
        assert_eq!(&bytes[..8], &seg.window_offset.to_ne_bytes());
        assert_eq!(&bytes[8..12], &seg.len.to_ne_bytes());
        assert_eq!(&bytes[12..], &seg.reserved.to_ne_bytes());
    }

    #[test]
    fn completion_round_trip() {
        let comp = bius_completion {
            id: 9,
            result: -5,
            len: 512,
            sector: 0,
        };
        let mut bytes = [0xffu8; COMPLETION_SIZE];
        encode_completion(&comp, &mut bytes);
        let back = decode_completion(&bytes);
        assert_eq!(
            (back.id, back.result, back.len, back.sector),
            (9, -5, 512, 0)
        );
    }

    #[test]
    fn zone_round_trip() {
        let zone = Zone {
            start: 1 << 20,
            len: 2048,
            capacity: 1536,
            write_pointer: (1 << 20) + 8,
            zone_type: ZoneType::SequentialWriteRequired,
            condition: ZoneCondition::ImplicitOpen,
        };
        let mut bytes = [0xffu8; ZONE_SIZE];
        encode_zone(&zone, &mut bytes);
        assert_eq!(&bytes[24..28], &[2, 2, 0, 0]);
        assert_eq!(&bytes[40..], &[0; 24]);
        let raw = decode_zone(&bytes);
        assert_eq!((raw.non_seq, raw.reset), (0, 0));
        assert_eq!(zone_of(&raw), Some(zone));
        let unknown = blk_zone {
            cond: 5,
            ..raw_zone(&zone)
        };
        assert_eq!(zone_of(&unknown), None);
    }
}
