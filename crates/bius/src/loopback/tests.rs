//! The simulated kernel side itself, driven by hand.

use std::io;
use std::time::Instant;

use bius_sys::{bius_completion, bius_request, bius_segment};

use super::*;
use crate::abi::{self, COMPLETION_SIZE, SEGMENT_SIZE};
use crate::deferred::Io;
use crate::op::Op;
use crate::transport::Transport;
use crate::zone::layout::ZoneLayout;
use crate::zone::ZoneGeometry;

fn kernel(queues: u32) -> Loopback {
    Loopback::new(&DeviceBuilder::new(1 << 20).queues(queues)).unwrap()
}

fn connection(kernel: &Loopback, queue: u32) -> Connection {
    Connection::new(Arc::clone(&kernel.shared), queue)
}

fn completion(id: u64, result: i32, payload: &[u8]) -> Vec<u8> {
    completion_at(id, result, payload, 0)
}

fn completion_at(id: u64, result: i32, payload: &[u8], sector: u64) -> Vec<u8> {
    let mut record = vec![0; COMPLETION_SIZE];
    let comp = bius_completion {
        id,
        result,
        len: payload.len() as u32,
        sector,
    };
    abi::encode(&comp, &mut record);
    record.extend_from_slice(payload);
    record
}

fn errno(result: io::Result<usize>) -> Errno {
    Errno::from_raw(result.unwrap_err().raw_os_error().unwrap())
}

#[test]
fn read_needs_room_for_a_header() {
    let kernel = kernel(1);
    let mut conn = connection(&kernel, 0);
    assert_eq!(errno(conn.fetch(&mut [0; REQUEST_SIZE - 1])), Errno::EINVAL);
}

#[test]
fn stream_holds_several_records_and_continues_payloads() {
    let kernel = kernel(1);
    let flush = kernel.submit(0, Command::Flush).unwrap();
    let write = kernel
        .submit(0, Submission::write(512, vec![7; 100]).fua())
        .unwrap();
    let mut conn = connection(&kernel, 0);
    let mut buf = [0u8; 2 * REQUEST_SIZE + 60];
    assert_eq!(conn.fetch(&mut buf).unwrap(), buf.len());
    let first = abi::decode::<bius_request>(&buf);
    let second = abi::decode::<bius_request>(&buf[REQUEST_SIZE..]);
    assert_eq!(
        (first.id, u32::from(first.op)),
        (flush.id(), bius_sys::BIUS_OP_FLUSH)
    );
    assert_eq!(
        (
            second.id,
            second.sector,
            second.len,
            u32::from(second.flags)
        ),
        (write.id(), 1, 100, bius_sys::BIUS_REQ_FUA)
    );
    assert_eq!(&buf[2 * REQUEST_SIZE..], &[7; 60]);
    // The continuation holds only the rest of the payload, although a
    // request is queued behind it.
    let _read = kernel
        .submit(
            0,
            Command::Read {
                offset: 0,
                len: 512,
            },
        )
        .unwrap();
    assert_eq!(conn.fetch(&mut buf).unwrap(), 40);
    assert_eq!(&buf[..40], &[7; 40]);
    assert_eq!(conn.fetch(&mut buf).unwrap(), REQUEST_SIZE);
}

#[test]
fn completions_are_checked_like_the_kernel_does() {
    let kernel = kernel(2);
    let read = kernel
        .submit(
            0,
            Command::Read {
                offset: 0,
                len: 512,
            },
        )
        .unwrap();
    let flush = kernel.submit(0, Command::Flush).unwrap();
    let other = kernel.submit(1, Command::Flush).unwrap();
    let (read_id, other_id) = (read.id(), other.id());
    let mut conn = connection(&kernel, 0);
    let mut conn1 = connection(&kernel, 1);
    let mut buf = [0u8; 4096];
    assert_eq!(conn.fetch(&mut buf).unwrap(), 2 * REQUEST_SIZE);
    assert_eq!(conn1.fetch(&mut buf).unwrap(), REQUEST_SIZE);

    // Wrong payload lengths, bad results, a sector on a non-append, truncation.
    assert_eq!(
        errno(conn.complete(&completion(read.id(), 0, &[1; 511]))),
        Errno::EINVAL
    );
    assert_eq!(
        errno(conn.complete(&completion(flush.id(), 0, &[1; 8]))),
        Errno::EINVAL
    );
    assert_eq!(
        errno(conn.complete(&completion(read.id(), -5, &[1; 512]))),
        Errno::EINVAL
    );
    assert_eq!(
        errno(conn.complete(&completion(flush.id(), 1, &[]))),
        Errno::EINVAL
    );
    assert_eq!(
        errno(conn.complete(&completion(flush.id(), -4096, &[]))),
        Errno::EINVAL
    );
    let mut with_sector = completion(flush.id(), 0, &[]);
    with_sector[COMPLETION_SIZE - 1] = 1;
    assert_eq!(errno(conn.complete(&with_sector)), Errno::EINVAL);
    assert_eq!(
        errno(conn.complete(&completion(flush.id(), 0, &[])[..20])),
        Errno::EINVAL
    );
    // Ids: never issued, another queue's.
    assert_eq!(
        errno(conn.complete(&completion(12345, 0, &[]))),
        Errno::ENOENT
    );
    assert_eq!(
        errno(conn.complete(&completion(other.id(), 0, &[]))),
        Errno::EXDEV
    );

    // A good record, then a duplicate: the write stops before it.
    let mut records = completion(read_id, 0, &[9; 512]);
    records.extend(completion(read_id, 0, &[9; 512]));
    assert_eq!(conn.complete(&records).unwrap(), COMPLETION_SIZE + 512);
    assert_eq!(read.wait_data(), Ok(vec![9; 512]));
    assert_eq!(
        errno(conn.complete(&completion(read_id, 0, &[9; 512]))),
        Errno::ENOENT
    );
    assert_eq!(
        conn.complete(&completion(flush.id(), -28, &[])).unwrap(),
        COMPLETION_SIZE
    );
    assert_eq!(flush.wait(), Err(IoError::NoSpace));

    // Stopped: writes fail with ENODEV, reads return end of file.
    kernel.kill();
    assert_eq!(other.wait(), Err(IoError::Io));
    assert_eq!(
        errno(conn1.complete(&completion(other_id, 0, &[]))),
        Errno::ENODEV
    );
    assert_eq!(conn.fetch(&mut buf).unwrap(), 0);
}

#[test]
fn mapped_requests_use_the_window_while_outstanding() {
    let params = DeviceBuilder::new(1 << 20)
        .queue_depth(2)
        .max_io_size(64 << 10)
        .transfer_mode(TransferMode::Selective { threshold: 1024 });
    let kernel = Loopback::new(&params).unwrap();
    let slot = slot_bytes(64 << 10);
    assert_eq!(slot, 17 * 4096);
    let read = kernel
        .submit(
            0,
            Command::Read {
                offset: 1536,
                len: 4096,
            },
        )
        .unwrap();
    let write = kernel
        .submit(0, Submission::write(8192, vec![7; 2048]))
        .unwrap();
    let small = kernel
        .submit(0, Submission::write(0, vec![1; 512]))
        .unwrap();
    let third = kernel
        .submit(0, Submission::write(0, vec![2; 2048]))
        .unwrap();
    let mut conn = connection(&kernel, 0);
    let mut buf = [0u8; 8192];
    // Two mapped (no payloads), one too small, one without a free slot.
    assert_eq!(conn.fetch(&mut buf).unwrap(), 4 * REQUEST_SIZE + 512 + 2048);
    let hdr = |i: usize| abi::decode::<bius_request>(&buf[i * REQUEST_SIZE..]);
    let mapped = bius_sys::BIUS_REQ_MAPPED;
    let (r, w) = (hdr(0), hdr(1));
    assert_eq!(u32::from(r.flags) & mapped, mapped);
    assert_eq!(u32::from(w.flags) & mapped, mapped);
    // Slots are taken lowest first; the offset in the first page follows
    // the sector.
    assert_eq!(r.window_offset, 1536);
    assert_eq!(w.window_offset, slot as u64);
    let copied = abi::decode::<bius_request>(&buf[2 * REQUEST_SIZE..]);
    assert_eq!((copied.flags, copied.window_offset), (0, 0));
    assert_eq!(kernel.counters().mapped, 2);

    // Only the request's own bytes are reachable.
    assert_eq!(
        conn.window(w.window_offset, 2048)
            .map(|data| data.as_slice().to_vec()),
        Some(vec![7u8; 2048])
    );
    assert!(conn.window(w.window_offset, 2049).is_none());
    assert!(conn.window(w.window_offset + 4096, 1).is_none());
    assert!(conn.window(r.window_offset - 1, 1).is_none());
    conn.window(r.window_offset, 4096)
        .unwrap()
        .as_mut_slice()
        .fill(9);

    // A mapped read completes without payload.
    assert_eq!(
        errno(conn.complete(&completion(read.id(), 0, &[9; 4096]))),
        Errno::EINVAL
    );
    let mut records = completion(read.id(), 0, &[]);
    records.extend(completion(write.id(), 0, &[]));
    assert_eq!(conn.complete(&records).unwrap(), records.len());
    assert_eq!(read.wait_data(), Ok(vec![9; 4096]));
    assert_eq!(write.wait(), Ok(Reply::Done));
    // Unmapped after the completion.
    assert!(conn.window(r.window_offset, 1).is_none());
    assert!(conn.window(w.window_offset, 1).is_none());
    drop((small, third));
}

/// A loopback mapping every request, 4 slots of 64 KiB and a page, in
/// `segments` segments.
fn segmenting(segments: usize) -> Loopback {
    let params = DeviceBuilder::new(1 << 20)
        .queue_depth(4)
        .max_io_size(64 << 10)
        .transfer_mode(TransferMode::Map);
    Loopback::new(&params).unwrap().segments(segments)
}

/// The request header at the start of `bytes` and the segment records
/// that follow it.
fn request_at(bytes: &[u8]) -> (bius_request, Vec<bius_segment>) {
    let hdr = abi::decode::<bius_request>(bytes);
    let segments = bytes[REQUEST_SIZE..]
        .chunks_exact(SEGMENT_SIZE)
        .take(hdr.nr_segments.into())
        .map(abi::decode::<bius_segment>)
        .collect();
    (hdr, segments)
}

/// (window offset, length, reserved) of each segment.
fn layout(segments: &[bius_segment]) -> Vec<(u64, u32, u32)> {
    segments
        .iter()
        .map(|seg| (seg.window_offset, seg.len, seg.reserved))
        .collect()
}

#[test]
fn segmented_requests_reach_only_their_pieces_of_the_window() {
    let kernel = segmenting(3);
    let data: Vec<u8> = (0..5120u32).map(|i| (i % 251) as u8).collect();
    let write = kernel
        .submit(0, Submission::write(1536, data.clone()))
        .unwrap();
    let read = kernel
        .submit(
            0,
            Command::Read {
                offset: 0,
                len: 2048,
            },
        )
        .unwrap();
    // Fewer sectors than segments: one piece.
    let small = kernel
        .submit(
            0,
            Command::Read {
                offset: 0,
                len: 1024,
            },
        )
        .unwrap();
    let mut conn = connection(&kernel, 0);
    let mut buf = [0u8; 4096];
    let record = REQUEST_SIZE + 3 * SEGMENT_SIZE;
    assert_eq!(
        conn.fetch(&mut buf).unwrap(),
        3 * REQUEST_SIZE + 6 * SEGMENT_SIZE
    );
    let (w, w_segs) = request_at(&buf);
    let (r, r_segs) = request_at(&buf[record..]);
    let (small_hdr, _) = request_at(&buf[2 * record..]);
    let mapped = bius_sys::BIUS_REQ_MAPPED as u16;
    assert_eq!(
        [w.flags, r.flags, small_hdr.flags].map(|flags| flags & mapped),
        [mapped; 3]
    );
    assert_eq!(
        [w.nr_segments, r.nr_segments, small_hdr.nr_segments],
        [3, 3, 0]
    );
    // Runs of whole sectors in data order, a sector apart, the first
    // at the header's window offset (where the sector puts it).
    let slot = slot_bytes(64 << 10) as u64;
    assert_eq!(
        layout(&w_segs),
        [(1536, 1536, 0), (3584, 1536, 0), (5632, 2048, 0)]
    );
    assert_eq!(
        layout(&r_segs),
        [
            (slot, 512, 0),
            (slot + 1024, 512, 0),
            (slot + 2048, 1024, 0)
        ]
    );
    assert_eq!((w.window_offset, r.window_offset), (1536, slot));
    let mut at = 0;
    for seg in &w_segs {
        let len = seg.len as usize;
        let piece = conn.window(seg.window_offset, len);
        assert_eq!(
            piece.map(|piece| piece.as_slice().to_vec()).as_deref(),
            Some(&data[at..at + len])
        );
        at += len;
    }
    // Inside one piece only: not in a gap, across one or past the end.
    let (first, second, last) = (w_segs[0], w_segs[1], w_segs[2]);
    assert!(conn.window(second.window_offset + 512, 1024).is_some());
    assert!(conn.window(first.window_offset + 1536, 1).is_none());
    assert!(conn.window(second.window_offset - 1, 1).is_none());
    assert!(conn.window(first.window_offset + 1024, 1024).is_none());
    assert!(conn.window(first.window_offset, 3584).is_none());
    assert!(conn.window(last.window_offset + 2048, 1).is_none());
    assert!(conn.window(first.window_offset - 1, 1).is_none());
    assert!(conn.window(r_segs[0].window_offset + 512, 512).is_none());
    for (i, seg) in r_segs.iter().enumerate() {
        let piece = conn.window(seg.window_offset, seg.len as usize);
        piece.unwrap().as_mut_slice().fill(i as u8 + 1);
    }
    conn.window(small_hdr.window_offset, 1024)
        .unwrap()
        .as_mut_slice()
        .fill(9);

    // Completions without payload; a read's data is gathered.
    let mut records = completion(write.id(), 0, &[]);
    records.extend(completion(read.id(), 0, &[]));
    records.extend(completion(small.id(), 0, &[]));
    assert_eq!(conn.complete(&records).unwrap(), records.len());
    assert_eq!(write.wait(), Ok(Reply::Done));
    let expected = [vec![1; 512], vec![2; 512], vec![3; 1024]].concat();
    assert_eq!(read.wait_data(), Ok(expected));
    assert_eq!(small.wait_data(), Ok(vec![9; 1024]));
    assert!(conn.window(second.window_offset, 1).is_none());
    let stats = kernel.counters();
    assert_eq!((stats.mapped, stats.segmented), (3, 2));
}

#[test]
fn segmented_requests_that_do_not_fit_are_copied() {
    let read = |offset| Command::Read { offset, len: 2048 };
    // The second request's records do not fit in the rest of the
    // reader's buffer: it comes as in copy mode.
    let kernel = segmenting(3);
    let first = kernel.submit(0, read(0)).unwrap();
    let second = kernel.submit(0, read(4096)).unwrap();
    let mut conn = connection(&kernel, 0);
    let mut buf = [0u8; 2 * (REQUEST_SIZE + 3 * SEGMENT_SIZE) - 1];
    let n = conn.fetch(&mut buf).unwrap();
    assert_eq!(n, 2 * REQUEST_SIZE + 3 * SEGMENT_SIZE);
    let (hdr, segments) = request_at(&buf);
    assert_eq!((hdr.id, segments.len()), (first.id(), 3));
    let copied = abi::decode::<bius_request>(&buf[REQUEST_SIZE + 3 * SEGMENT_SIZE..]);
    assert_eq!(
        (
            copied.id,
            copied.flags,
            copied.nr_segments,
            copied.window_offset
        ),
        (second.id(), 0, 0, 0)
    );
    let mut records = completion(first.id(), 0, &[]);
    records.extend(completion(second.id(), 0, &[4; 2048]));
    assert_eq!(conn.complete(&records).unwrap(), records.len());
    assert_eq!(second.wait_data(), Ok(vec![4; 2048]));
    assert_eq!(
        (kernel.counters().mapped, kernel.counters().segmented),
        (1, 1)
    );

    // The same with a read limit, for a write: its payload follows.
    let kernel = segmenting(3).read_limit(REQUEST_SIZE + 3 * SEGMENT_SIZE - 1);
    let _write = kernel
        .submit(0, Submission::write(0, vec![5; 2048]))
        .unwrap();
    let mut conn = connection(&kernel, 0);
    let mut buf = [0u8; 4096];
    let n = conn.fetch(&mut buf).unwrap();
    assert_eq!(n, REQUEST_SIZE + 3 * SEGMENT_SIZE - 1);
    let copied = abi::decode::<bius_request>(&buf);
    assert_eq!((copied.flags, copied.nr_segments), (0, 0));
    assert_eq!(&buf[REQUEST_SIZE..n], &[5; 3 * SEGMENT_SIZE - 1]);

    // Pieces and gaps that do not fit in the slot (64 KiB from the
    // last sector of a page); from the first sector they do.
    let kernel = segmenting(4);
    let _late = kernel
        .submit(0, Submission::write(3584, vec![6; 64 << 10]))
        .unwrap();
    let _early = kernel
        .submit(0, Submission::write(0, vec![7; 64 << 10]))
        .unwrap();
    let mut conn = connection(&kernel, 0);
    let mut buf = vec![0u8; 2 * REQUEST_SIZE + 4 * SEGMENT_SIZE + (64 << 10)];
    assert_eq!(conn.fetch(&mut buf).unwrap(), buf.len());
    let late = abi::decode::<bius_request>(&buf);
    let (early, segments) = request_at(&buf[REQUEST_SIZE + (64 << 10)..]);
    assert_eq!((late.flags, late.nr_segments), (0, 0));
    assert_eq!(early.nr_segments, 4);
    assert_eq!(segments.iter().map(|seg| seg.len).sum::<u32>(), 64 << 10);
    assert_eq!(kernel.counters().segmented, 1);
}

#[test]
fn zone_completions_are_checked_like_the_kernel_does() {
    let kernel = kernel(1);
    let report = kernel
        .submit(
            0,
            Command::ReportZones {
                offset: 0,
                max_zones: 2,
            },
        )
        .unwrap();
    let append = kernel
        .submit(0, Submission::append(0, vec![5; 512]).fua())
        .unwrap();
    let open = kernel
        .submit(0, Command::ZoneOpen { offset: 4096 })
        .unwrap();
    let mut conn = connection(&kernel, 0);
    let mut buf = [0u8; 4096];
    assert_eq!(conn.fetch(&mut buf).unwrap(), 3 * REQUEST_SIZE + 512);
    let append_hdr = abi::decode::<bius_request>(&buf[REQUEST_SIZE..]);
    assert_eq!(
        (
            u32::from(append_hdr.op),
            append_hdr.len,
            u32::from(append_hdr.flags)
        ),
        (bius_sys::BIUS_OP_ZONE_APPEND, 512, bius_sys::BIUS_REQ_FUA)
    );
    assert_eq!(&buf[2 * REQUEST_SIZE..][..512], &[5; 512]);
    let open_hdr = abi::decode::<bius_request>(&buf[2 * REQUEST_SIZE + 512..]);
    assert_eq!(
        (u32::from(open_hdr.op), open_hdr.sector, open_hdr.len),
        (bius_sys::BIUS_OP_ZONE_OPEN, 8, 0)
    );

    // A report: whole descriptors within the room, none on failure.
    for record in [
        completion(report.id(), 0, &[0; 100]),
        completion(report.id(), 0, &[0; 192]),
        completion(report.id(), -5, &[0; 64]),
    ] {
        assert_eq!(errno(conn.complete(&record)), Errno::EINVAL);
    }
    // A sector only on a successful append, no payload there.
    assert_eq!(
        errno(conn.complete(&completion_at(append.id(), -5, &[], 8))),
        Errno::EINVAL
    );
    assert_eq!(
        errno(conn.complete(&completion_at(append.id(), 0, &[0; 8], 8))),
        Errno::EINVAL
    );
    assert_eq!(
        errno(conn.complete(&completion_at(open.id(), 0, &[], 8))),
        Errno::EINVAL
    );
    assert_eq!(
        errno(conn.complete(&completion_at(report.id(), 0, &[0; 64], 8))),
        Errno::EINVAL
    );
    // Descriptors of known types and conditions, decoded (in bytes).
    let zone = Zone {
        start: 0,
        len: 8 * 512,
        capacity: 8 * 512,
        write_pointer: 3 * 512,
        zone_type: crate::zone::ZoneType::SequentialWriteRequired,
        condition: crate::zone::ZoneCondition::ImplicitOpen,
    };
    let mut descriptors = vec![0; 2 * ZONE_SIZE];
    abi::encode_zone(&zone, &mut descriptors);
    abi::encode_zone(&zone, &mut descriptors[ZONE_SIZE..]);
    let mut records = completion(report.id(), 0, &descriptors);
    records.extend(completion_at(append.id(), 0, &[], 42));
    records.extend(completion(open.id(), -(Errno::ETOOMANYREFS as i32), &[]));
    assert_eq!(conn.complete(&records).unwrap(), records.len());
    assert_eq!(report.wait(), Ok(Reply::Zones(vec![zone; 2])));
    // The append's sector, in bytes.
    assert_eq!(append.wait(), Ok(Reply::Appended(42 * 512)));
    assert_eq!(open.wait(), Err(IoError::from(Errno::ETOOMANYREFS)));
}

#[test]
fn zoned_completions_must_match_the_zones() {
    use crate::zone::{ZoneCondition, ZoneSet, ZoneType};

    // 4 zones of 64 sectors, 48 writable, 4 KiB blocks.
    let kernel = Loopback::new(&DeviceBuilder::new(4 * 32768)).unwrap();
    let geometry = ZoneGeometry::new(128 << 10, 32 << 10)
        .unwrap()
        .with_zone_capacity(24 << 10)
        .unwrap();
    let zones = ZoneSet::new(geometry);
    let layout = ZoneLayout::new(*zones.geometry(), 4096);
    assert!(kernel.shared.layout.set(layout).is_ok());
    let report = kernel
        .submit(
            0,
            Command::ReportZones {
                offset: 32768,
                max_zones: 2,
            },
        )
        .unwrap();
    let append = kernel
        .submit(0, Submission::append(32768, vec![0; 4096]))
        .unwrap();
    let mut conn = connection(&kernel, 0);
    let mut buf = [0u8; 8192];
    assert_eq!(conn.fetch(&mut buf).unwrap(), 2 * REQUEST_SIZE + 4096);
    let descriptors = |zones: &[Zone]| {
        let mut bytes = vec![0; zones.len() * ZONE_SIZE];
        for (zone, out) in zones.iter().zip(bytes.chunks_exact_mut(ZONE_SIZE)) {
            abi::encode_zone(zone, out);
        }
        bytes
    };
    let right = zones.report(32 << 10, 2);
    let shifted = zones.report(64 << 10, 2);
    let wrong_type = [Zone {
        zone_type: ZoneType::Conventional,
        condition: ZoneCondition::NotWritePointer,
        ..right[0]
    }];
    let mut reserved = descriptors(&right);
    reserved[27] = 1;
    for payload in [
        descriptors(&shifted),
        descriptors(&wrong_type),
        reserved,
        vec![],
    ] {
        let record = completion(report.id(), 0, &payload);
        assert_eq!(errno(conn.complete(&record)), Errno::EINVAL);
    }
    // An append: block aligned, inside its zone's capacity.
    for sector in [65, 128, 112, 0] {
        let record = completion_at(append.id(), 0, &[], sector);
        assert_eq!(errno(conn.complete(&record)), Errno::EINVAL, "{sector}");
    }
    let mut records = completion(report.id(), 0, &descriptors(&right));
    records.extend(completion_at(append.id(), 0, &[], 72));
    assert_eq!(conn.complete(&records).unwrap(), records.len());
    assert_eq!(report.wait(), Ok(Reply::Zones(right)));
    assert_eq!(append.wait(), Ok(Reply::Appended(72 * 512)));
}

/// `kernel.stop()` on a thread of its own; `None` if it has not returned
/// within 10 s (it waits forever, say).
fn stop_within_10s(kernel: Loopback) -> Option<Result<(), Error>> {
    let (stopped, outcome) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = stopped.send(kernel.stop());
    });
    outcome.recv_timeout(Duration::from_secs(10)).ok()
}

/// Keeps every request it is given and completes none.
#[derive(Default)]
struct Hoarder(Mutex<Vec<Io>>);

impl DeferredDevice for Hoarder {
    fn submit(&self, io: Io) {
        self.0.lock().unwrap().push(io);
    }
}

#[test]
fn stop_times_out_the_requests_a_device_never_completes() {
    let timeout = Duration::from_millis(100);
    let mut kernel = Loopback::new(&DeviceBuilder::new(1 << 20).timeout(timeout)).unwrap();
    let device = Arc::new(Hoarder::default());
    kernel.start_deferred(Arc::clone(&device)).unwrap();
    let read = kernel
        .submit(
            0,
            Command::Read {
                offset: 0,
                len: 512,
            },
        )
        .unwrap();
    let start = Instant::now();
    assert_eq!(stop_within_10s(kernel), Some(Ok(())));
    // As the kernel's request timer would have failed it by then.
    assert!(start.elapsed() >= timeout);
    assert_eq!(read.wait(), Err(IoError::from(Errno::ETIMEDOUT)));
}

#[test]
fn stop_does_not_wait_for_a_queue_whose_worker_has_ended() {
    let mut kernel = kernel(1);
    // A worker that ended before it read anything: what is queued will
    // never be read (within the 30 s request timeout, a hang to a test).
    kernel
        .workers
        .push(thread::spawn(|| Err(Error::System(Errno::EPROTO))));
    let flush = kernel.submit(0, Command::Flush).unwrap();
    assert_eq!(
        stop_within_10s(kernel),
        Some(Err(Error::System(Errno::EPROTO)))
    );
    assert_eq!(flush.wait(), Err(IoError::Io));
}

#[test]
fn requests_no_kernel_sends_are_refused_not_panicked_on() {
    let kernel = kernel(2);
    let refused = |queue, request: Submission| kernel.submit(queue, request).unwrap_err();
    assert_eq!(
        refused(2, Command::Flush.into()),
        SubmitError::NoSuchQueue {
            queue: 2,
            queues: 2
        }
    );
    assert_eq!(
        refused(
            0,
            Command::Read {
                offset: 100,
                len: 512
            }
            .into()
        ),
        SubmitError::Unaligned { offset: 100 }
    );
    let short = Submission::new(
        Command::Write {
            offset: 0,
            len: 1024,
            fua: false,
        },
        vec![1; 512],
    );
    assert_eq!(
        refused(0, short),
        SubmitError::PayloadLength {
            op: Op::Write,
            expected: 1024,
            payload: 512
        }
    );
    assert_eq!(
        refused(0, Submission::new(Command::Flush, vec![0])),
        SubmitError::PayloadLength {
            op: Op::Flush,
            expected: 0,
            payload: 1
        }
    );
    assert_eq!(
        refused(
            0,
            Command::Discard {
                offset: 0,
                len: 4 << 30
            }
            .into()
        ),
        SubmitError::TooLong { len: 4 << 30 }
    );
    // run() fails with the errno of the refusal; nothing was queued.
    assert_eq!(
        kernel.run(7, Command::Flush),
        Err(IoError::from(Errno::ENXIO))
    );
    assert!(kernel.shared.queues.iter().all(|slot| lock(slot).is_idle()));
}
