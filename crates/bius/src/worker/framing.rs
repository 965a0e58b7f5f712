//! The framing of the request stream: headers, their segment records and
//! write payloads, which may continue in the next read.

use bius_sys::{bius_request, bius_segment};

use super::{has_stream_payload, WorkerConfig};
use crate::abi::{self, MAX_SEGMENTS, REQUEST_SIZE, SEGMENT_SIZE};
use crate::error::Error;
use crate::op::Op;

/// Cuts the reads of one queue into requests.
pub(super) struct Framer {
    queue: u32,
    /// A write or zone append whose payload continues in the next read.
    spanning: Option<(bius_request, Op)>,
    /// The part of the spanning payload received so far.
    assembly: Vec<u8>,
}

impl Framer {
    pub(super) fn new(config: &WorkerConfig) -> Self {
        Framer {
            queue: config.queue,
            spanning: None,
            assembly: Vec::with_capacity(config.max_io),
        }
    }

    /// Calls `serve` with every whole request of one read (its header, its
    /// operation, decoded here once, `None` for an op code this version
    /// does not know, its payload if it has one in the stream, its segment
    /// records), in order.
    pub(super) fn feed(
        &mut self,
        mut input: &[u8],
        mut serve: impl FnMut(&bius_request, Option<Op>, &[u8], &[bius_segment]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if let Some((hdr, op)) = self.spanning {
            let missing = hdr.len as usize - self.assembly.len();
            let (part, rest) = input.split_at(missing.min(input.len()));
            self.assembly.extend_from_slice(part);
            input = rest;
            if self.assembly.len() == hdr.len as usize {
                self.spanning = None;
                let payload = std::mem::take(&mut self.assembly);
                let served = serve(&hdr, Some(op), &payload, &[]);
                self.assembly = payload;
                served?;
            }
        }
        let mut records = [bius_segment::default(); MAX_SEGMENTS];
        while !input.is_empty() {
            if input.len() < REQUEST_SIZE {
                log::error!(
                    "queue {}: truncated request header ({} bytes)",
                    self.queue,
                    input.len()
                );
                return Err(Error::Protocol { queue: self.queue });
            }
            let hdr = abi::decode::<bius_request>(input);
            let op = Op::from_raw(hdr.op);
            input = &input[REQUEST_SIZE..];
            let segments = take_segments(&hdr, &mut input, &mut records, self.queue)?;
            match op {
                Some(op) if has_stream_payload(&hdr, op) => {
                    if input.len() >= hdr.len as usize {
                        let (payload, rest) = input.split_at(hdr.len as usize);
                        serve(&hdr, Some(op), payload, segments)?;
                        input = rest;
                    } else {
                        // (Segments on a request with a payload are refused
                        // when it is served: they need not be kept.)
                        self.assembly.clear();
                        self.assembly.extend_from_slice(input);
                        self.spanning = Some((hdr, op));
                        input = &[];
                    }
                }
                op => serve(&hdr, op, &[], segments)?,
            }
        }
        Ok(())
    }

    /// Logs a payload cut short by the end of the stream.
    pub(super) fn end(&self) {
        if let Some((hdr, _)) = self.spanning {
            log::debug!(
                "queue {}: stopped while receiving the payload of request {:#x}",
                self.queue,
                hdr.id
            );
        }
    }
}

/// Decodes the `hdr.nr_segments` segment records at the start of `input`
/// into `records` and moves `input` past them; none if the request has
/// none.  Records missing from `input` (the kernel never splits them from
/// their header), or a count of 1 or more than `BIUS_MAP_MAX_SEGMENTS`,
/// are a protocol error: the stream can no longer be trusted.
fn take_segments<'r>(
    hdr: &bius_request,
    input: &mut &[u8],
    records: &'r mut [bius_segment; MAX_SEGMENTS],
    queue: u32,
) -> Result<&'r [bius_segment], Error> {
    let count = usize::from(hdr.nr_segments);
    if count == 0 {
        return Ok(&[]);
    }
    let bytes = count * SEGMENT_SIZE;
    if count == 1 || count > MAX_SEGMENTS || input.len() < bytes {
        log::error!(
            "queue {queue}: request {:#x} has {count} segment records, {} bytes of them in this read",
            hdr.id,
            input.len().min(bytes)
        );
        return Err(Error::Protocol { queue });
    }
    let (encoded, rest) = input.split_at(bytes);
    for (record, bytes) in records.iter_mut().zip(encoded.chunks_exact(SEGMENT_SIZE)) {
        *record = abi::decode::<bius_segment>(bytes);
    }
    *input = rest;
    Ok(&records[..count])
}
