//! Byte-level encoding of the request and completion records of `bius.h`,
//! in native byte order, without `unsafe`.

use std::mem::{offset_of, size_of};

use bius_sys::{bius_completion, bius_request};

/// Size of a `struct bius_request` header in the request stream.
pub(crate) const REQUEST_SIZE: usize = size_of::<bius_request>();
/// Size of a `struct bius_completion` header in the completion stream.
pub(crate) const COMPLETION_SIZE: usize = size_of::<bius_completion>();

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
        reserved0: bytes[offset_of!(bius_request, reserved0)],
        flags: u16::from_ne_bytes(get(bytes, offset_of!(bius_request, flags))),
        reserved1: u64::from_ne_bytes(get(bytes, offset_of!(bius_request, reserved1))),
    }
}

/// Encodes a request header into the first [`REQUEST_SIZE`] bytes.
pub(crate) fn encode_request(req: &bius_request, bytes: &mut [u8]) {
    put(bytes, offset_of!(bius_request, id), &req.id.to_ne_bytes());
    put(
        bytes,
        offset_of!(bius_request, sector),
        &req.sector.to_ne_bytes(),
    );
    put(bytes, offset_of!(bius_request, len), &req.len.to_ne_bytes());
    bytes[offset_of!(bius_request, op)] = req.op;
    bytes[offset_of!(bius_request, reserved0)] = req.reserved0;
    put(
        bytes,
        offset_of!(bius_request, flags),
        &req.flags.to_ne_bytes(),
    );
    put(
        bytes,
        offset_of!(bius_request, reserved1),
        &req.reserved1.to_ne_bytes(),
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
            reserved0: 0,
            flags: 1,
            reserved1: 0,
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
                back.reserved0,
                back.reserved1
            ),
            (req.id, req.sector, req.len, req.op, req.flags, 0, 0)
        );
        assert_eq!(&bytes[..8], &req.id.to_ne_bytes());
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
}
