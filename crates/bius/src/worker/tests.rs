//! Segmented mapped requests, and streams the loopback never produces,
//! fed to a worker by hand.

use std::sync::Mutex;

use super::*;
use crate::abi::{COMPLETION_SIZE, MAX_SEGMENTS, SEGMENT_SIZE};
use crate::request::Request;
use crate::transport::{window_range, SharedBytes, Wakeup};
use crate::zone::layout::ZoneLayout;
use bius_sys::bius_completion;
use nix::errno::Errno;

const SIZE: u64 = 1 << 20;
const MAX_IO: usize = 64 << 10;
const WINDOW: usize = 256 << 10;

/// A window and the completion records written; reads are fed to
/// [`Worker::process`] directly.
struct Fake {
    window: Vec<u8>,
    written: Vec<u8>,
}

impl Transport for Fake {
    fn fetch(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        Ok(0)
    }

    fn complete(&mut self, records: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(records);
        Ok(records.len())
    }

    fn window(&mut self, offset: u64, len: usize) -> Option<SharedBytes<'_>> {
        let range = window_range(offset, len, self.window.len())?;
        Some(SharedBytes::from(&mut self.window[range]))
    }

    fn defer(&mut self) -> io::Result<Arc<dyn Wakeup>> {
        Err(io::ErrorKind::Unsupported.into())
    }

    fn wait(&mut self, _deadline: Option<std::time::Instant>) -> io::Result<bool> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

impl<T: Transport, D: BlockDevice> Worker<'_, T, D> {
    /// Serves every request of one read.
    fn process(&mut self, input: &[u8]) -> Result<(), Error> {
        Framer::new(&self.config).feed(input, |hdr, op, payload, segments| {
            self.serve_request(hdr, op, payload, segments)
        })
    }
}

/// A device call, with the data of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Read(u64, usize),
    Write(u64, Vec<u8>, bool),
    Flush,
    Append(u64, usize),
}

/// Records its calls; a read fills its buffer with the sector number
/// of each byte; a call at `fail_at` fails with `ENOSPC`.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<Call>>,
    fail_at: Option<u64>,
}

impl Recorder {
    fn record(&self, call: Call, offset: u64) -> Result<(), IoError> {
        self.calls.lock().unwrap().push(call);
        if self.fail_at == Some(offset) {
            return Err(IoError::NoSpace);
        }
        Ok(())
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

impl BlockDevice for Recorder {
    fn read(&self, _offset: u64, _buf: &mut [u8]) -> Result<(), IoError> {
        unreachable!("served by handle")
    }

    fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
        unreachable!("served by handle")
    }

    fn handle(&self, request: Request<'_>) -> Result<Reply, IoError> {
        match request {
            Request::Read { offset, buf } => {
                self.record(Call::Read(offset, buf.len()), offset)?;
                fill_sectors(buf, offset);
            }
            Request::Write { offset, data, fua } => {
                self.record(Call::Write(offset, data.to_vec(), fua), offset)?
            }
            Request::Flush => self.record(Call::Flush, u64::MAX)?,
            Request::ZoneAppend { offset, data, .. } => {
                self.record(Call::Append(offset, data.len()), offset)?;
                return Ok(Reply::Appended(offset));
            }
            _ => return Err(IoError::Unsupported),
        }
        Ok(Reply::Done)
    }
}

/// What [`Recorder`] reads at `offset`: each byte its sector number.
fn fill_sectors(buf: &mut [u8], offset: u64) {
    for (i, byte) in buf.iter_mut().enumerate() {
        *byte = ((offset + i as u64) / SECTOR_SIZE) as u8;
    }
}

/// `device` served as a zoned device of 32 KiB zones (the append of a
/// test needs a zone).
fn served(device: &Arc<Recorder>) -> Served<Arc<Recorder>> {
    let geometry = crate::zone::ZoneGeometry::new(SIZE, 32 << 10).unwrap();
    Served {
        device: Arc::clone(device),
        layout: Some(ZoneLayout::new(geometry, 512)),
    }
}

fn worker(device: &Served<Arc<Recorder>>) -> Worker<'_, Fake, Arc<Recorder>> {
    let window = (0..WINDOW).map(|i| (i * 7 % 251) as u8).collect();
    let fake = Fake {
        window,
        written: Vec::new(),
    };
    let config = WorkerConfig {
        queue: 0,
        size: SIZE,
        max_io: MAX_IO,
        scheduling: Scheduling::Inherit,
    };
    let stats = crate::stats::Statistics::new(1, None, true).recorder();
    Worker::new(fake, device, config, stats)
}

/// The (id, result, payload length) of each completion written.
fn completions(worker: &mut Worker<'_, Fake, Arc<Recorder>>) -> Vec<(u64, i32, u32)> {
    worker.batch.flush(&mut worker.transport).unwrap();
    let mut out = Vec::new();
    let mut rest = &worker.transport.written[..];
    while !rest.is_empty() {
        let comp = abi::decode::<bius_completion>(rest);
        out.push((comp.id, comp.result, comp.len));
        rest = &rest[COMPLETION_SIZE + comp.len as usize..];
    }
    worker.transport.written.clear();
    out
}

fn seg(window_offset: u64, len: u32) -> bius_segment {
    bius_segment {
        window_offset,
        len,
        reserved: 0,
    }
}

/// The header of a request mapped in `segments`: its length their sum,
/// its window offset the first's, `nr_segments` their count if more
/// than one.
fn mapped(id: u64, op: Op, sector: u64, segments: &[bius_segment]) -> bius_request {
    bius_request {
        id,
        sector,
        len: segments.iter().map(|seg| seg.len).sum(),
        op: op.raw(),
        nr_segments: if segments.len() > 1 {
            segments.len() as u8
        } else {
            0
        },
        flags: bius_sys::BIUS_REQ_MAPPED as u16,
        window_offset: segments[0].window_offset,
    }
}

/// A header followed by `segments` records, as read() returns them.
fn stream(hdr: &bius_request, segments: &[bius_segment]) -> Vec<u8> {
    let mut bytes = vec![0; REQUEST_SIZE + segments.len() * SEGMENT_SIZE];
    abi::encode(hdr, &mut bytes);
    for (seg, out) in segments
        .iter()
        .zip(bytes[REQUEST_SIZE..].chunks_exact_mut(SEGMENT_SIZE))
    {
        abi::encode(seg, out);
    }
    bytes
}

/// Three pieces of a slot, with gaps, the middle one page aligned.
const PIECES: [bius_segment; 3] = [
    bius_segment {
        window_offset: 4096 + 512,
        len: 1024,
        reserved: 0,
    },
    bius_segment {
        window_offset: 8192,
        len: 4096,
        reserved: 0,
    },
    bius_segment {
        window_offset: 16384 + 1536,
        len: 512,
        reserved: 0,
    },
];

fn window_bytes(worker: &Worker<'_, Fake, Arc<Recorder>>, seg: &bius_segment) -> Vec<u8> {
    let start = seg.window_offset as usize;
    worker.transport.window[start..start + seg.len as usize].to_vec()
}

#[test]
fn a_segmented_write_is_one_call_per_piece_at_consecutive_offsets() {
    let device = Arc::new(Recorder::default());
    let served = served(&device);
    let mut worker = worker(&served);
    let mut hdr = mapped(1, Op::Write, 10, &PIECES);
    hdr.flags |= bius_sys::BIUS_REQ_FUA as u16;
    worker.process(&stream(&hdr, &PIECES)).unwrap();
    let data = |i: usize| window_bytes(&worker, &PIECES[i]);
    let expected = [
        Call::Write(5120, data(0), true),
        Call::Write(6144, data(1), true),
        Call::Write(10240, data(2), true),
    ];
    assert_eq!(device.calls(), expected);
    assert_eq!(completions(&mut worker), [(1, 0, 0)]);
}

#[test]
fn a_segmented_read_fills_each_piece_and_no_gap() {
    let device = Arc::new(Recorder::default());
    let served = served(&device);
    let mut worker = worker(&served);
    let before = worker.transport.window.clone();
    let hdr = mapped(2, Op::Read, 100, &PIECES);
    worker.process(&stream(&hdr, &PIECES)).unwrap();
    assert_eq!(
        device.calls(),
        [
            Call::Read(51200, 1024),
            Call::Read(52224, 4096),
            Call::Read(56320, 512)
        ]
    );
    // Each piece holds its part of the data, in order; nothing else of
    // the window changed.
    let mut expected = before;
    let mut offset = 51200;
    for seg in &PIECES {
        let start = seg.window_offset as usize;
        fill_sectors(&mut expected[start..start + seg.len as usize], offset);
        offset += u64::from(seg.len);
    }
    assert!(worker.transport.window == expected);
    // A successful mapped read completes without payload.
    assert_eq!(completions(&mut worker), [(2, 0, 0)]);
}

#[test]
fn an_unsegmented_mapped_request_is_the_one_piece_case() {
    let device = Arc::new(Recorder::default());
    let served = served(&device);
    let mut worker = worker(&served);
    let piece = [seg(4096 + 1024, 3000)];
    let mut input = stream(&mapped(3, Op::Write, 2, &piece), &[]);
    let append = mapped(4, Op::ZoneAppend, 64, &piece);
    input.extend(stream(&append, &[]));
    worker.process(&input).unwrap();
    let data = window_bytes(&worker, &piece[0]);
    assert_eq!(
        device.calls(),
        [Call::Write(1024, data, false), Call::Append(32768, 3000)]
    );
    assert_eq!(completions(&mut worker), [(3, 0, 0), (4, 0, 0)]);
}

#[test]
fn a_failing_piece_fails_the_request_and_ends_it() {
    let device = Arc::new(Recorder {
        fail_at: Some(52224),
        ..Recorder::default()
    });
    let served = served(&device);
    let mut worker = worker(&served);
    let hdr = mapped(5, Op::Read, 100, &PIECES);
    worker.process(&stream(&hdr, &PIECES)).unwrap();
    assert_eq!(
        device.calls(),
        [Call::Read(51200, 1024), Call::Read(52224, 4096)]
    );
    let enospc = -(Errno::ENOSPC as i32);
    assert_eq!(completions(&mut worker), [(5, enospc, 0)]);
}

#[test]
fn malformed_segmented_requests_fail_with_eio_without_reaching_the_device() {
    let device = Arc::new(Recorder::default());
    let served = served(&device);
    let mut worker = worker(&served);
    let read = |id| mapped(id, Op::Read, 0, &PIECES);
    let with = |i: usize, changed: bius_segment| {
        let mut segments = PIECES;
        segments[i] = changed;
        segments
    };
    let mut cases = Vec::new();
    // Lengths that do not add up to the request's.
    let mut long = read(10);
    long.len += 512;
    cases.push(stream(&long, &PIECES));
    // An empty piece, one not of whole sectors, reserved bits.
    let empty = with(1, seg(8192, 0));
    cases.push(stream(&mapped(11, Op::Read, 0, &empty), &empty));
    let odd = with(1, seg(8192, 1000));
    cases.push(stream(&mapped(12, Op::Read, 0, &odd), &odd));
    let reserved = with(
        2,
        bius_segment {
            reserved: 1,
            ..PIECES[2]
        },
    );
    cases.push(stream(&read(13), &reserved));
    // A piece outside the window, at its end, or overflowing.
    for (id, offset) in [
        (14, WINDOW as u64),
        (15, WINDOW as u64 - 256),
        (16, u64::MAX),
    ] {
        let outside = with(2, seg(offset, 512));
        cases.push(stream(&read(id), &outside));
    }
    // Segments on a zone append, a flush, an unmapped write (whose
    // payload still follows).
    let append = mapped(17, Op::ZoneAppend, 0, &PIECES);
    cases.push(stream(&append, &PIECES));
    let flush = bius_request {
        op: Op::Flush.raw(),
        len: 0,
        ..read(18)
    };
    cases.push(stream(&flush, &PIECES));
    let unmapped = bius_request {
        op: Op::Write.raw(),
        flags: 0,
        window_offset: 0,
        ..read(19)
    };
    let mut copied = stream(&unmapped, &PIECES);
    copied.extend(vec![0xee; unmapped.len as usize]);
    cases.push(copied);
    // The whole request beyond the device, or larger than the largest
    // I/O, although each piece would fit.
    let end = bius_request {
        sector: SIZE / SECTOR_SIZE - 8,
        ..read(20)
    };
    cases.push(stream(&end, &PIECES));
    let large: Vec<_> = (0..16).map(|i| seg(i * 8192, 4608)).collect();
    cases.push(stream(&mapped(21, Op::Read, 0, &large), &large));
    // One read of all, then another request: the stream is in sync.
    let mut input = cases.concat();
    let flush = bius_request {
        id: 22,
        op: Op::Flush.raw(),
        ..Default::default()
    };
    input.extend(stream(&flush, &[]));
    worker.process(&input).unwrap();
    assert_eq!(device.calls(), [Call::Flush]);
    let eio = -(Errno::EIO as i32);
    let expected: Vec<_> = (10..22)
        .map(|id| (id, eio, 0))
        .chain([(22, 0, 0)])
        .collect();
    assert_eq!(completions(&mut worker), expected);
}

#[test]
fn broken_segment_records_are_a_protocol_error() {
    let one = [seg(4096, 1024)];
    let many: Vec<_> = (0..=MAX_SEGMENTS as u64)
        .map(|i| seg(i * 1024, 512))
        .collect();
    let mut cases = Vec::new();
    // A count of 1, or more than BIUS_MAP_MAX_SEGMENTS, records and all.
    let mut hdr = mapped(1, Op::Read, 0, &one);
    hdr.nr_segments = 1;
    cases.push(stream(&hdr, &one));
    let hdr = mapped(2, Op::Read, 0, &many);
    assert_eq!(usize::from(hdr.nr_segments), MAX_SEGMENTS + 1);
    cases.push(stream(&hdr, &many));
    // Records split from their header: some or all of them in the next
    // read, after a good request.
    let good = stream(&mapped(3, Op::Read, 0, &PIECES), &PIECES);
    let split = [&good[..], &good[..REQUEST_SIZE + SEGMENT_SIZE]].concat();
    cases.push(split);
    cases.push(good[..REQUEST_SIZE].to_vec());
    for input in cases {
        let device = Arc::new(Recorder::default());
        let served = served(&device);
        let mut worker = worker(&served);
        assert_eq!(
            worker.process(&input),
            Err(Error::Protocol { queue: 0 }),
            "{} bytes",
            input.len()
        );
    }
}
