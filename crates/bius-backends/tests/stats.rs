//! The framework's statistics and traces of real backends, served through
//! the in-process loopback kernel: counts per op and as the kernel groups
//! them, zone histories, and a trace with a record of every request.

use std::time::{Duration, Instant};

use bius::loopback::{Loopback, Submission};
use bius::stats::{TraceFormat, TraceRecord, TRACE_RECORD_SIZE};
use bius::zone::{ZoneCondition, ZoneGeometry};
use bius::Command;
use bius::Op;
use bius::{DeviceBuilder, IoError, TransferMode};
use bius_backends::RamDisk;

const MIB: u64 = 1 << 20;

/// Each setup counts a mapped request in pieces once, and a delayed one
/// (served by the deferred worker) like any other.
#[test]
fn every_request_is_counted_once_in_every_worker() {
    let setups = [
        (TransferMode::Copy, 0, None),
        (TransferMode::Map, 4, None),
        (TransferMode::Copy, 0, Some(Duration::from_millis(2))),
    ];
    for (mode, segments, latency) in setups {
        let mut builder = DeviceBuilder::new(8 * MIB).queues(2).transfer_mode(mode);
        if let Some(latency) = latency {
            builder = builder.latency(bius::Latency {
                read: Some(latency),
                ..bius::Latency::default()
            });
        }
        let mut kernel = Loopback::new(&builder).unwrap().segments(segments);
        kernel.start(RamDisk::new(8 * MIB)).unwrap();
        let data = vec![7u8; 64 << 10];
        for i in 0..10u64 {
            let queue = (i % 2) as u32;
            kernel
                .run(queue, Submission::write(i * 65536, data.clone()))
                .unwrap();
            kernel
                .run(
                    queue,
                    Command::Read {
                        offset: i * 65536,
                        len: 4096,
                    },
                )
                .unwrap();
        }
        kernel
            .run(
                0,
                Command::Discard {
                    offset: MIB,
                    len: MIB,
                },
            )
            .unwrap();
        // Past the end: the kernel fails it, the device never sees it
        // (nor the flush of a disk without a write cache).
        assert_eq!(kernel.read(0, 8 * MIB, 4096), Err(IoError::Io));
        assert!(kernel.run(1, Command::Flush).is_err());
        let stats = kernel.statistics().snapshot();
        let setup = format!("{mode:?} in {segments} segments, latency {latency:?}");
        let write = stats.op(Op::Write);
        assert_eq!(
            (write.count, write.bytes, write.errors),
            (10, 640 << 10, 0),
            "{setup}"
        );
        let read = stats.op(Op::Read);
        assert_eq!(
            (read.count, read.bytes, read.errors),
            (10, 40 << 10, 0),
            "{setup}"
        );
        assert_eq!(stats.kernel.write_sectors, 1280, "{setup}");
        assert_eq!(
            (stats.kernel.read_ios, stats.kernel.read_sectors),
            (10, 80),
            "{setup}"
        );
        assert_eq!(
            (stats.kernel.discard_ios, stats.kernel.discard_sectors),
            (1, 2048)
        );
        assert_eq!(stats.kernel.flush_ios, 0);
        if let Some(latency) = latency {
            assert!(
                read.latency_ns.p50 >= latency.as_nanos() as u64,
                "{setup}: {read:?}"
            );
        }
        assert!(stats.zoned.is_none());
        kernel.statistics().reset();
        assert_eq!(kernel.statistics().snapshot().op(Op::Write).count, 0);
        kernel.stop().unwrap();
    }
}

/// Times writes by a model: 2 ms after they arrive.
struct SlowWrites;

impl bius::DeviceModel for SlowWrites {
    fn completion(&self, command: Command, arrived: Instant) -> Option<Instant> {
        matches!(command, Command::Write { .. }).then(|| arrived + Duration::from_millis(2))
    }
}

/// Every completion that had a due time (the builder's latency, the
/// model's) is counted in the lateness, once, and none other; none comes
/// before its time.  (How late they are depends on the host: not
/// asserted.)
#[test]
fn timed_completions_are_counted_late_and_never_early() {
    let read_latency = Duration::from_millis(3);
    let builder = DeviceBuilder::new(8 * MIB)
        .queues(2)
        .latency(bius::Latency {
            read: Some(read_latency),
            ..bius::Latency::default()
        })
        .model(SlowWrites);
    let mut kernel = Loopback::new(&builder).unwrap();
    kernel.start(RamDisk::new(8 * MIB)).unwrap();
    // 3 rounds of 16 reads, 16 writes and 16 discards over two queues
    // (the discards neither the latency nor the model times).
    for round in 0..3u64 {
        let mut tickets = Vec::new();
        for i in 0..16u64 {
            let queue = (i % 2) as u32;
            let offset = (round * 16 + i) * 4096;
            let read = Command::Read { offset, len: 4096 };
            let write = Submission::write(offset, vec![1; 4096]);
            let sent = Instant::now();
            tickets.push((sent, read_latency, kernel.submit(queue, read).unwrap()));
            tickets.push((
                sent,
                Duration::from_millis(2),
                kernel.submit(queue, write).unwrap(),
            ));
            let discard = Command::Discard { offset, len: 4096 };
            tickets.push((sent, Duration::ZERO, kernel.submit(queue, discard).unwrap()));
        }
        for (sent, time, ticket) in tickets {
            ticket.wait().unwrap();
            // (the worker receives a request after it is sent: its due
            // time is later still)
            assert!(
                sent.elapsed() >= time,
                "completed after {:?}",
                sent.elapsed()
            );
        }
    }
    let stats = kernel.statistics().snapshot();
    assert_eq!(stats.op(Op::Discard).count, 48);
    // the 48 reads and 48 writes
    assert_eq!(stats.lateness.count, 96);
    let late = stats.lateness.ns;
    assert!(late.p50 <= late.p99 && late.p99 <= late.max, "{late:?}");
    // Late by less than the whole service time of the request.
    assert!(
        late.max
            <= stats
                .op(Op::Read)
                .latency_ns
                .max
                .max(stats.op(Op::Write).latency_ns.max)
    );
    kernel.statistics().reset();
    assert_eq!(kernel.statistics().snapshot().lateness.count, 0);
    kernel.stop().unwrap();
}

/// A zoned RAM disk served with 2 queues: 16 MiB in 1 MiB zones of 768
/// KiB capacity, the first two conventional.
fn zoned_kernel() -> Loopback {
    let geometry = ZoneGeometry::new(16 * MIB, MIB)
        .and_then(|g| g.with_zone_capacity(768 << 10))
        .and_then(|g| g.with_conventional_zones(2))
        .unwrap();
    let mut kernel = Loopback::new(&DeviceBuilder::default().queues(2)).unwrap();
    kernel.start(RamDisk::zoned(geometry)).unwrap();
    kernel
}

#[test]
fn zones_are_followed_and_agree_with_the_report() {
    let kernel = zoned_kernel();
    let stats = kernel.statistics();
    let cap = 768 << 10;
    let block = vec![1u8; 64 << 10];
    let write = |offset| Submission::write(offset, block.clone());
    // Zone 2: half full, then closed.  Zone 3: full by appends.  Zone 4:
    // opened, written a little, finished.  Zone 5: written and reset.
    for i in 0..6 {
        kernel.run(0, write(2 * MIB + i * 65536)).unwrap();
    }
    kernel
        .run(1, Command::ZoneClose { offset: 2 * MIB })
        .unwrap();
    for _ in 0..12 {
        kernel.zone_append(1, 3 * MIB, block.clone()).unwrap();
    }
    kernel
        .run(0, Command::ZoneOpen { offset: 4 * MIB })
        .unwrap();
    kernel.run(0, write(4 * MIB)).unwrap();
    kernel
        .run(0, Command::ZoneFinish { offset: 4 * MIB })
        .unwrap();
    for i in 0..11 {
        kernel.run(1, write(5 * MIB + i * 65536)).unwrap();
    }
    kernel
        .run(1, Command::ZoneReset { offset: 5 * MIB })
        .unwrap();
    // Not at the write pointer: fails, changes nothing.
    assert!(kernel.run(0, write(6 * MIB + 4096)).is_err());

    let snapshot = stats.snapshot_per_zone();
    let zoned = snapshot.zoned.as_ref().unwrap();
    assert_eq!(zoned.host_bytes_written, (6 + 12 + 1 + 11) * 65536);
    let counts = zoned.counts;
    assert_eq!((counts.appends, counts.resets, counts.finishes), (12, 1, 1));
    assert_eq!(
        (counts.opens_explicit, counts.opens_implicit, counts.closes),
        (1, 3, 1)
    );
    // Zone 5 was 11/12 full when reset; zone 4 1/12 full when finished.
    assert_eq!(zoned.fill_at_reset[9], 1);
    assert_eq!(zoned.fill_at_finish[0], 1);
    assert_eq!(
        zoned.bytes_per_reset,
        Some(((6 + 12 + 1 + 11) * 65536) as f64)
    );
    assert_eq!(zoned.held_bytes, 3 * cap);
    assert_eq!(snapshot.op(Op::Write).errors, 1);
    // The kernel counts every zone operation as a write, but not the
    // reports.
    assert_eq!(
        snapshot.kernel.write_ios,
        6 + 1 + 12 + 1 + 1 + 1 + 11 + 1 + 1
    );
    assert_eq!(snapshot.kernel.read_ios, 0);

    // What the requests implied is what the device reports.
    let reported = kernel.report_zones(0, 0, 16).unwrap();
    for (zone, followed) in reported.iter().zip(&zoned.per_zone) {
        assert_eq!(
            zone.condition, followed.condition,
            "zone {}",
            followed.index
        );
        if zone.condition != ZoneCondition::NotWritePointer {
            let wp = zone.write_pointer.saturating_sub(zone.start);
            let wp = if zone.condition == ZoneCondition::Full {
                cap
            } else {
                wp
            };
            assert_eq!(wp, followed.write_pointer, "zone {}", followed.index);
        }
    }
    assert_eq!(zoned.per_zone[2].condition, ZoneCondition::Closed);
    assert_eq!(zoned.per_zone[3].condition, ZoneCondition::Full);
    assert_eq!(zoned.per_zone[5].condition, ZoneCondition::Empty);

    kernel.run(0, Command::ZoneResetAll).unwrap();
    let zoned = stats.snapshot().zoned.unwrap();
    assert_eq!(zoned.counts.resets, 1 + 3);
    assert_eq!(zoned.empty_zones, 14);
    assert_eq!(zoned.fill_now, [0; 10]);
    assert_eq!(zoned.held_bytes, 0);
    kernel.stop().unwrap();
}

#[test]
fn a_trace_has_a_record_of_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = zoned_kernel();
    let stats = kernel.statistics();
    let binary = dir.path().join("trace.bin");
    stats.start_trace(&binary, TraceFormat::Binary).unwrap();
    let block = vec![3u8; 4096];
    for i in 0..100u64 {
        let write = Submission::write(2 * MIB + i * 4096, block.clone());
        kernel.run((i % 2) as u32, write).unwrap();
    }
    kernel.zone_append(0, 3 * MIB, block.clone()).unwrap();
    kernel
        .run(
            1,
            Command::Read {
                offset: 2 * MIB,
                len: 8192,
            },
        )
        .unwrap();
    // A conventional zone cannot be opened: the device fails it with EIO.
    assert_eq!(
        kernel.run(1, Command::ZoneOpen { offset: 0 }),
        Err(IoError::Io)
    );
    let summary = stats.stop_trace();
    assert_eq!(
        (summary.records, summary.dropped, summary.error),
        (103, 0, None)
    );

    let bytes = std::fs::read(&binary).unwrap();
    let records: Vec<TraceRecord> = bytes[32..]
        .chunks_exact(TRACE_RECORD_SIZE)
        .map(|chunk| TraceRecord::from_bytes(chunk.try_into().unwrap()).unwrap())
        .collect();
    assert_eq!(records.len(), 103);
    let mut writes: Vec<u64> = records
        .iter()
        .filter(|r| r.op == Op::Write)
        .map(|r| r.offset)
        .collect();
    writes.sort_unstable();
    assert_eq!(
        writes,
        (0..100).map(|i| 2 * MIB + i * 4096).collect::<Vec<_>>()
    );
    assert!(records
        .iter()
        .all(|r| r.op != Op::Write || (r.len, r.result) == (4096, 0)));
    assert!(records
        .iter()
        .any(|r| r.op == Op::ZoneAppend && r.offset == 3 * MIB));
    assert!(records
        .iter()
        .any(|r| r.op == Op::ZoneOpen && r.offset == 0 && r.result == -5));
    assert_eq!(records.iter().filter(|r| r.queue == 1).count(), 52);

    // Requests after the trace stopped are not in it; a new trace is CSV.
    let csv = dir.path().join("trace.csv");
    kernel
        .run(0, Command::ZoneOpen { offset: 2 * MIB })
        .unwrap();
    stats.start_trace(&csv, TraceFormat::Csv).unwrap();
    kernel
        .run(0, Command::ZoneReset { offset: 2 * MIB })
        .unwrap();
    assert_eq!(stats.stop_trace().records, 1);
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "time_ns,queue,op,offset,len,latency_ns,result");
    let fields: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(
        (fields[2], fields[3], fields[4], fields[6]),
        ("zone_reset", "2097152", "0", "0")
    );
    assert_eq!(lines.len(), 2);
    kernel.stop().unwrap();
}
