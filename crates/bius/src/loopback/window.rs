//! The data window of each hardware queue, the twin of the driver's
//! `bius_map.c`: one slot per tag, the data of a mapped request laid out
//! in its slot (in one piece or in segments) while it is outstanding.

use std::sync::atomic::Ordering;

use bius_sys::{bius_request, bius_segment};

use super::queue::{Connection, QueueState};
use crate::abi::{self, SEGMENT_SIZE};
use crate::op::Op;

/// Page size the loopback pretends I/O buffers are made of.
const PAGE: usize = 4096;

/// Bytes of a window slot for a largest I/O of `max_io` bytes, as the
/// kernel's `BIUS_MAP_SLOT_BYTES`.
pub(super) fn slot_bytes(max_io: usize) -> usize {
    (max_io.div_ceil(PAGE) + 1) * PAGE
}

/// Bytes between two segments of a segmented request in its slot.
const SEGMENT_GAP: usize = 512;

/// The request a window slot is mapped for: its id and where its data is
/// in the slot.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mapping {
    pub(super) id: u64,
    /// Where the data starts in the slot.
    pub(super) start: usize,
    pub(super) len: usize,
    /// The pieces the data is in: 1, or the request's `nr_segments`.
    pub(super) segments: usize,
}

impl Mapping {
    /// Where the pieces of the data are in the slot, in data order: the
    /// data split into `segments` runs (of whole sectors if more than one,
    /// the last ones the longer), each [`SEGMENT_GAP`] bytes after the end
    /// of the one before.
    fn pieces(self) -> impl Iterator<Item = std::ops::Range<usize>> {
        let n = self.segments;
        // Where piece `i` starts in the data.
        let split = move |i: usize| {
            if i == n {
                self.len
            } else {
                self.len * i / n / 512 * 512
            }
        };
        (0..n).map(move |i| {
            let at = self.start + i * SEGMENT_GAP;
            at + split(i)..at + split(i + 1)
        })
    }

    /// The end of the last piece in the slot.
    fn end(self) -> usize {
        self.start + self.len + (self.segments - 1) * SEGMENT_GAP
    }
}

impl Connection {
    /// Maps `hdr`'s data into a free slot if the transfer mode wants it
    /// (a write's `payload` is copied there), in segments if
    /// [`Loopback::segments`] wants it and their records fit in `room`
    /// bytes; sets `BIUS_REQ_MAPPED`, `window_offset` and `nr_segments`.
    /// Returns the slot.
    pub(super) fn map(
        &mut self,
        state: &mut QueueState,
        hdr: &mut bius_request,
        op: Op,
        payload: &[u8],
        room: usize,
    ) -> Option<u32> {
        let threshold = self.shared.map_threshold?;
        if !op.has_data() || hdr.len == 0 || hdr.len < threshold {
            return None;
        }
        let len = hdr.len as usize;
        let wanted = self.shared.segments.load(Ordering::Relaxed);
        let segmentable =
            matches!(op, Op::Read | Op::Write) && len.is_multiple_of(512) && len / 512 >= wanted;
        let segments = if wanted >= 2 && segmentable {
            wanted
        } else {
            1
        };
        let mapping = Mapping {
            id: hdr.id,
            start: (hdr.sector as usize % (PAGE / 512)) * 512,
            len,
            segments,
        };
        let records = if segments > 1 { segments } else { 0 };
        let slot_bytes = self.shared.slot_bytes;
        if records * SEGMENT_SIZE > room || mapping.end() > slot_bytes {
            return None;
        }
        let slot = state.free_slots.pop()?;
        // Zeroed here, the one place: a slot reads as zeroes each time it
        // is mapped, whatever its last request left in it.
        let buf = &mut self.slots[slot as usize];
        buf.clear();
        buf.resize(slot_bytes, 0);
        if op != Op::Read {
            let mut rest = payload;
            for piece in mapping.pieces() {
                let (data, tail) = rest.split_at(piece.len());
                buf[piece].copy_from_slice(data);
                rest = tail;
            }
        }
        self.mappings[slot as usize] = Some(mapping);
        self.shared.mapped.fetch_add(1, Ordering::Relaxed);
        if records > 0 {
            self.shared.segmented.fetch_add(1, Ordering::Relaxed);
        }
        hdr.flags |= bius_sys::BIUS_REQ_MAPPED as u16;
        hdr.window_offset = (slot as usize * slot_bytes + mapping.start) as u64;
        hdr.nr_segments = records as u8;
        Some(slot)
    }

    /// Encodes the segment records of the segmented request mapped in
    /// `slot` into `out`; returns their length (0 for a request in one
    /// piece).
    pub(super) fn encode_segments(&self, slot: u32, out: &mut [u8]) -> usize {
        let Some(mapping) = self.mappings[slot as usize].filter(|m| m.segments > 1) else {
            return 0;
        };
        let base = slot as usize * self.shared.slot_bytes;
        for (piece, bytes) in mapping.pieces().zip(out.chunks_exact_mut(SEGMENT_SIZE)) {
            let seg = bius_segment {
                window_offset: (base + piece.start) as u64,
                len: piece.len() as u32,
                reserved: 0,
            };
            abi::encode(&seg, bytes);
        }
        mapping.segments * SEGMENT_SIZE
    }

    /// Unmaps slot `slot`; the data of a read in it, gathered from its
    /// pieces.  The slot keeps its bytes until [`Connection::map`] zeroes
    /// it; nothing reads an unmapped slot.
    pub(super) fn unmap(&mut self, slot: u32) -> Vec<u8> {
        let slot = slot as usize;
        let mut data = Vec::new();
        if let Some(m) = self.mappings[slot].take() {
            data.reserve_exact(m.len);
            for piece in m.pieces() {
                data.extend_from_slice(&self.slots[slot][piece]);
            }
        }
        data
    }

    /// Unmaps the slots of requests no longer outstanding (timed out or
    /// failed by another thread), as the kernel does when it ends them.
    pub(super) fn unmap_ended(&mut self, state: &QueueState) {
        for slot in 0..self.mappings.len() {
            if let Some(m) = self.mappings[slot] {
                if !state.outstanding.contains_key(&m.id) {
                    self.unmap(slot as u32);
                }
            }
        }
    }

    /// The window range `offset..offset + len` if it is inside one piece
    /// of the data of the request its slot is mapped for.
    pub(super) fn mapped_range(
        &self,
        offset: u64,
        len: usize,
    ) -> Option<(usize, std::ops::Range<usize>)> {
        let slot_bytes = self.shared.slot_bytes;
        let offset = usize::try_from(offset).ok()?;
        let slot = offset / slot_bytes;
        let m = (*self.mappings.get(slot)?)?;
        let start = offset % slot_bytes;
        let end = start.checked_add(len)?;
        m.pieces()
            .any(|piece| start >= piece.start && end <= piece.end)
            .then_some((slot, start..end))
    }
}
