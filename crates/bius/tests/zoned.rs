//! Zoned devices served by the worker loop through the in-process loopback
//! kernel: zone reports, appends, zone operations and their errnos.
#![cfg(feature = "loopback")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bius::loopback::{Loopback, Submission, Ticket};
use bius::zone::{self, Zone, ZoneCondition, ZoneGeometry, ZoneType, Zoned};
use bius::{
    BlockDevice, Capabilities, Command, DeviceBuilder, DeviceModel, Errno, Error, IoError, Op,
    Reply, Request,
};

mod memory;
use memory::Memory;

/// 4 MiB in 512 KiB zones: the first conventional, at most 2 open and 3
/// active.
const SIZE: u64 = 4 << 20;
const ZONE: u64 = 512 << 10;

fn geometry() -> ZoneGeometry {
    ZoneGeometry::new(SIZE, ZONE)
        .unwrap()
        .with_conventional_zones(1)
        .unwrap()
        .with_max_open(2)
        .with_max_active(3)
}

/// A zoned RAM disk ([`Zoned`] over [`Memory`]) that records the reports
/// asked for, counts flushes, and misbehaves on demand.
struct Disk {
    zoned: Zoned<Memory>,
    reports: Mutex<Vec<(u64, usize)>>,
    /// Leave the second zone out of reports, as a buggy device would.
    skip_zone_1: bool,
    /// Claim appends landed one zone further.
    append_elsewhere: bool,
    /// Flushes served.
    flushes: AtomicUsize,
    /// Panic in reports, as a buggy device would.
    panicking_reports: AtomicBool,
}

impl Disk {
    fn new(geometry: ZoneGeometry) -> Self {
        Disk {
            zoned: Zoned::new(Memory::new(geometry.size(), 0), geometry),
            reports: Mutex::new(Vec::new()),
            skip_zone_1: false,
            append_elsewhere: false,
            flushes: AtomicUsize::new(0),
            panicking_reports: AtomicBool::new(false),
        }
    }
}

impl BlockDevice for Disk {
    /// A write cache and FUA: the kernel sends flushes and FUA appends.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write_cache: true,
            fua: true,
            ..Capabilities::default()
        }
    }

    fn zones(&self) -> Option<ZoneGeometry> {
        self.zoned.zones()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        self.zoned.read(offset, buf)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        self.zoned.write(offset, data, fua)
    }

    fn flush(&self) -> Result<(), IoError> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn report_zones(&self, offset: u64, max_zones: usize) -> Result<Vec<Zone>, IoError> {
        assert!(
            !self.panicking_reports.load(Ordering::SeqCst),
            "the device's bug"
        );
        self.reports.lock().unwrap().push((offset, max_zones));
        let mut zones = self.zoned.report_zones(offset, max_zones)?;
        if self.skip_zone_1 {
            zones.retain(|zone| zone.start != ZONE);
        }
        Ok(zones)
    }

    /// With forced unit access, the append is followed by a flush.
    fn zone_append(&self, offset: u64, data: &[u8], fua: bool) -> Result<u64, IoError> {
        let at = self.zoned.zone_append(offset, data, false)?;
        if fua {
            self.flush()?;
        }
        let elsewhere = if self.append_elsewhere { ZONE } else { 0 };
        Ok(at + elsewhere)
    }

    fn handle(&self, request: Request<'_>) -> Result<Reply, IoError> {
        match request {
            Request::ReportZones { offset, max_zones } => {
                self.report_zones(offset, max_zones).map(Reply::Zones)
            }
            Request::ZoneAppend { offset, data, fua } => {
                self.zone_append(offset, data, fua).map(Reply::Appended)
            }
            Request::Flush => self.flush().map(|()| Reply::Done),
            request => self.zoned.handle(request),
        }
    }
}

fn started(geometry: ZoneGeometry, builder: &DeviceBuilder) -> (Loopback, Arc<Disk>) {
    let device = Arc::new(Disk::new(geometry));
    let mut kernel = Loopback::new(builder).unwrap();
    kernel.start(Arc::clone(&device)).unwrap();
    (kernel, device)
}

fn errno<T: std::fmt::Debug>(result: Result<T, IoError>) -> Errno {
    result.unwrap_err().errno()
}

/// The outcome of `ticket`, waited for at most 10 s: a request that never
/// completes (its worker gone) fails the test instead of hanging it.
fn outcome(ticket: Ticket) -> Result<Reply, IoError> {
    ticket
        .wait_timeout(Duration::from_secs(10))
        .expect("the request never completed")
}

/// A synchronous device is served by the plain worker, and with a latency
/// (or a model) by the deferred one: a builder of each.
fn served_both_ways() -> [DeviceBuilder; 2] {
    let latency = "write=1ms".parse().unwrap();
    [
        DeviceBuilder::default(),
        DeviceBuilder::default().latency(latency),
    ]
}

fn condition(kernel: &Loopback, offset: u64) -> ZoneCondition {
    kernel.report_zones(0, offset, 1).unwrap()[0].condition
}

#[test]
fn every_zone_is_reported_before_the_disk_goes_live() {
    // 100 zones of 4 KiB; a room of 64 descriptors (4 KiB of I/O): two reports.
    let builder = DeviceBuilder::default().max_io_size(4096);
    let (kernel, device) = started(ZoneGeometry::new(400 << 10, 4 << 10).unwrap(), &builder);
    assert_eq!(*device.reports.lock().unwrap(), [(0, 64), (64 * 4096, 64)]);
    kernel.stop().unwrap();
}

#[test]
fn a_wrong_report_fails_and_keeps_the_disk_down() {
    let device = Disk {
        skip_zone_1: true,
        ..Disk::new(geometry())
    };
    let mut kernel = Loopback::new(&DeviceBuilder::default()).unwrap();
    // The worker fails the report (EIO) rather than send what the kernel
    // would refuse.
    let Err(Error::NotLive { cause, .. }) = kernel.start(device) else {
        panic!("a wrong report left the disk live");
    };
    // The error says why, not only the log.
    let cause = cause.expect("a cause");
    assert!(
        cause.starts_with("the kernel refused its zones: report of zone"),
        "{cause}"
    );
    assert_eq!(kernel.counters().refused, 0);
    assert_eq!(
        kernel.run(
            0,
            Command::Read {
                offset: 0,
                len: 512
            }
        ),
        Err(IoError::from(Errno::ENODEV))
    );
}

#[test]
fn a_wrong_append_sector_fails_the_append() {
    let device = Disk {
        append_elsewhere: true,
        ..Disk::new(geometry())
    };
    let mut kernel = Loopback::new(&DeviceBuilder::default()).unwrap();
    kernel.start(device).unwrap();
    let appended = kernel.zone_append(0, ZONE, vec![1; 512]);
    assert_eq!(errno(appended), Errno::EIO);
    assert_eq!(kernel.counters().refused, 0);
    kernel.stop().unwrap();
}

#[test]
fn the_size_is_the_geometrys_and_the_zones_fit_the_blocks() {
    // A builder with a size is a contradiction, even of the same size.
    for size in [SIZE, 2 * SIZE] {
        let mut kernel = Loopback::new(&DeviceBuilder::new(size)).unwrap();
        assert_eq!(
            kernel.start(Disk::new(geometry())),
            Err(Error::InvalidParameter(bius::Parameter::ZonedSize))
        );
    }
    let builder = DeviceBuilder::default().logical_block_size(4096);
    let mut kernel = Loopback::new(&builder).unwrap();
    let odd_capacity = geometry().with_zone_capacity(ZONE - 512).unwrap();
    assert_eq!(
        kernel.start(Disk::new(odd_capacity)),
        Err(Error::InvalidParameter(bius::Parameter::ZoneAlignment))
    );
}

#[test]
fn reports_round_trip() {
    let (kernel, _device) = started(geometry(), &DeviceBuilder::default().queues(2));
    let zones = kernel.report_zones(1, 3 * ZONE + 4096, 2).unwrap();
    let sequential = |index: u64| Zone {
        start: index * ZONE,
        len: ZONE,
        capacity: ZONE,
        write_pointer: index * ZONE,
        zone_type: ZoneType::SequentialWriteRequired,
        condition: ZoneCondition::Empty,
    };
    assert_eq!(zones, [sequential(3), sequential(4)]);
    let all = kernel.report_zones(0, 0, 100).unwrap();
    assert_eq!(all.len(), 8);
    assert_eq!(
        (all[0].zone_type, all[0].condition, all[0].write_pointer),
        (ZoneType::Conventional, ZoneCondition::NotWritePointer, ZONE)
    );
    // Past the last zone: the kernel sends no report (and fails none).
    assert_eq!(kernel.report_zones(0, SIZE, 4), Err(IoError::Io));
    // The room is whole descriptors, at least one.
    for len in [0, 100] {
        let report = Submission::raw(Op::ReportZones.raw(), 0, len);
        assert_eq!(errno(kernel.run(0, report)), Errno::EINVAL);
    }
    kernel.stop().unwrap();
}

#[test]
fn appends_complete_with_their_sector() {
    // Small reads: the append payloads span several of them.
    let builder = DeviceBuilder::default().queues(2);
    let device = Arc::new(Disk::new(geometry()));
    let mut kernel = Loopback::new(&builder).unwrap().read_limit(1000);
    kernel.start(Arc::clone(&device)).unwrap();
    assert_eq!(kernel.zone_append(0, ZONE, vec![1; 4096]), Ok(ZONE));
    assert_eq!(kernel.zone_append(1, ZONE, vec![2; 512]), Ok(ZONE + 4096));
    let mut expected = vec![1; 512];
    expected.extend([2; 512]);
    expected.extend([zone::FILL_PATTERN; 512]);
    assert_eq!(kernel.read(1, ZONE + 3584, 1536), Ok(expected));
    // Not at a zone start, into a conventional zone, past the end.
    assert_eq!(
        errno(kernel.zone_append(0, ZONE + 512, vec![3; 512])),
        Errno::EIO
    );
    assert_eq!(errno(kernel.zone_append(0, 0, vec![3; 512])), Errno::EIO);
    assert_eq!(errno(kernel.zone_append(0, SIZE, vec![3; 512])), Errno::EIO);
    // Forced unit access: the append is followed by a flush.
    assert_eq!(device.flushes.load(Ordering::SeqCst), 0);
    let append = Submission::append(2 * ZONE, vec![4; 512]).fua();
    let reply = kernel.submit(0, append).unwrap().wait();
    assert_eq!(reply, Ok(Reply::Appended(2 * ZONE)));
    assert_eq!(device.flushes.load(Ordering::SeqCst), 1);
    assert_eq!(kernel.counters().refused, 0);
    kernel.stop().unwrap();
}

#[test]
fn zone_errors_reach_the_completion_as_errnos() {
    let (kernel, _device) = started(geometry(), &DeviceBuilder::default());
    let run = |op: Submission| kernel.run(0, op).map(drop);
    let write = |offset| Submission::write(offset, vec![7; 512]);
    // Two open zones at most (an implicitly open one would be closed to
    // make room, as on null_blk).
    run(Command::ZoneOpen { offset: ZONE }.into()).unwrap();
    run(Command::ZoneOpen { offset: 2 * ZONE }.into()).unwrap();
    assert_eq!(
        errno(run(Command::ZoneOpen { offset: 3 * ZONE }.into())),
        Errno::ETOOMANYREFS
    );
    assert_eq!(errno(run(write(3 * ZONE))), Errno::ETOOMANYREFS);
    assert_eq!(condition(&kernel, ZONE), ZoneCondition::ExplicitOpen);
    // Three active: two closed and one open, then no more.
    run(write(ZONE)).unwrap();
    run(write(2 * ZONE)).unwrap();
    run(Command::ZoneClose { offset: ZONE }.into()).unwrap();
    run(Command::ZoneClose { offset: 2 * ZONE }.into()).unwrap();
    run(write(3 * ZONE)).unwrap();
    assert_eq!(errno(run(write(4 * ZONE))), Errno::EOVERFLOW);
    assert_eq!(condition(&kernel, ZONE), ZoneCondition::Closed);
    assert_eq!(condition(&kernel, 3 * ZONE), ZoneCondition::ImplicitOpen);
    // Invalid state or write position: EIO.
    assert_eq!(errno(run(write(3 * ZONE))), Errno::EIO);
    assert_eq!(
        errno(run(Command::ZoneOpen { offset: 0 }.into())),
        Errno::EIO
    );
    assert_eq!(
        errno(run(Command::ZoneClose { offset: 5 * ZONE }.into())),
        Errno::EIO
    );
    // Past the end.
    assert_eq!(
        errno(run(Command::ZoneFinish { offset: SIZE }.into())),
        Errno::EIO
    );
    // Finish, reset, reset all.
    run(Command::ZoneFinish { offset: 3 * ZONE }.into()).unwrap();
    assert_eq!(condition(&kernel, 3 * ZONE), ZoneCondition::Full);
    run(Command::ZoneReset { offset: 3 * ZONE }.into()).unwrap();
    assert_eq!(condition(&kernel, 3 * ZONE), ZoneCondition::Empty);
    run(Command::ZoneResetAll.into()).unwrap();
    let conditions: Vec<_> = kernel
        .report_zones(0, 0, 8)
        .unwrap()
        .iter()
        .map(|zone| zone.condition)
        .collect();
    assert_eq!(conditions[0], ZoneCondition::NotWritePointer);
    assert!(conditions[1..].iter().all(|&c| c == ZoneCondition::Empty));
    kernel.stop().unwrap();
}

#[test]
fn a_conventional_device_refuses_zone_requests() {
    let mut kernel = Loopback::new(&DeviceBuilder::new(SIZE)).unwrap();
    // Without zones: the worker refuses zone requests itself.
    kernel.start(Memory::new(SIZE, 0)).unwrap();
    for op in [
        Command::ReportZones {
            offset: 0,
            max_zones: 1,
        }
        .into(),
        Command::ZoneOpen { offset: ZONE }.into(),
        Command::ZoneClose { offset: ZONE }.into(),
        Command::ZoneFinish { offset: ZONE }.into(),
        Command::ZoneReset { offset: ZONE }.into(),
        Command::ZoneResetAll.into(),
        Submission::append(ZONE, vec![1; 4096]),
    ] {
        assert_eq!(
            errno(kernel.run(0, op.clone())),
            Errno::EOPNOTSUPP,
            "{op:?}"
        );
    }
    // The append's payload was consumed: the stream is still framed.
    let write = Submission::write(ZONE, vec![1; 512]);
    assert_eq!(kernel.run(0, write), Ok(Reply::Done));
    kernel.stop().unwrap();
}

#[test]
fn replayed_writes_are_applied_once_and_appends_fail() {
    for builder in served_both_ways() {
        let (kernel, _disk) = started(geometry(), &builder);
        let replayed = |op: Submission| kernel.run(0, op.replayed());
        let read = |offset: u64, len: u64| kernel.read(0, offset, len).unwrap();
        assert_eq!(
            kernel.run(0, Submission::write(ZONE, vec![1; 8192])),
            Ok(Reply::Done)
        );
        // Below the write pointer: applied before, not again.
        assert_eq!(
            replayed(Submission::write(ZONE, vec![2; 4096])),
            Ok(Reply::Done)
        );
        assert_eq!(read(ZONE, 8192), vec![1; 8192]);
        // Across the write pointer, or past it: cannot tell.
        assert_eq!(
            replayed(Submission::write(ZONE + 4096, vec![2; 8192])),
            Err(IoError::Io)
        );
        assert_eq!(
            replayed(Submission::write(ZONE + 12288, vec![2; 4096])),
            Err(IoError::Io)
        );
        // At the write pointer: applied now.
        assert_eq!(
            replayed(Submission::write(ZONE + 8192, vec![3; 4096])),
            Ok(Reply::Done)
        );
        assert_eq!(read(ZONE + 8192, 4096), vec![3; 4096]);
        // A conventional zone's write is applied again.
        assert_eq!(
            replayed(Submission::write(4096, vec![4; 4096])),
            Ok(Reply::Done)
        );
        assert_eq!(read(4096, 4096), vec![4; 4096]);
        let append = Submission::append(2 * ZONE, vec![5; 4096]);
        assert_eq!(replayed(append), Err(IoError::Io));
        assert_eq!(condition(&kernel, 2 * ZONE), ZoneCondition::Empty);
        kernel.stop().unwrap();
    }
}

#[test]
fn a_device_with_emulated_appends_is_never_asked_to_append() {
    let builder = DeviceBuilder::default().emulate_zone_append(true);
    let (kernel, device) = started(geometry(), &builder);
    // The kernel turns appends into writes at the write pointer; one
    // that came anyway fails without reaching the device.
    assert_eq!(
        errno(kernel.zone_append(0, ZONE, vec![1; 4096])),
        Errno::EOPNOTSUPP
    );
    assert_eq!(condition(&kernel, ZONE), ZoneCondition::Empty);
    let write = Submission::write(ZONE, vec![1; 4096]);
    assert_eq!(kernel.run(0, write), Ok(Reply::Done));
    assert_eq!(
        device.zoned.zone_set().report(ZONE, 1)[0].write_pointer,
        ZONE + 4096
    );
    kernel.stop().unwrap();
    // A largest append contradicts it.
    let mut kernel = Loopback::new(&builder).unwrap();
    let with_limit = geometry().with_max_append(4 << 10).unwrap();
    assert_eq!(
        kernel.start(Disk::new(with_limit)),
        Err(Error::InvalidParameter(bius::Parameter::EmulatedAppend))
    );
}

/// Times each request a millisecond long, but panics timing a read from
/// its byte offset, as a buggy model would (in `completion`, which the
/// framework calls through `served`).
struct PanicsAt(u64);

impl DeviceModel for PanicsAt {
    fn completion(&self, command: Command, arrived: Instant) -> Option<Instant> {
        if let Command::Read { offset, .. } = command {
            assert_ne!(offset, self.0, "the model's bug");
        }
        Some(arrived + Duration::from_millis(1))
    }
}

#[test]
fn a_panicking_model_fails_its_request_with_eio_and_the_queue_serves_on() {
    let builder = DeviceBuilder::default().model(PanicsAt(ZONE));
    let (kernel, _device) = started(geometry(), &builder);
    assert_eq!(
        outcome(
            kernel
                .submit(0, Submission::write(ZONE, vec![1; 4096]))
                .unwrap()
        ),
        Ok(Reply::Done)
    );
    // The panic and the next request, in the same batch.
    let panicking = kernel
        .submit(
            0,
            Command::Read {
                offset: ZONE,
                len: 4096,
            },
        )
        .unwrap();
    let next = kernel
        .submit(
            0,
            Command::Read {
                offset: ZONE + 2048,
                len: 2048,
            },
        )
        .unwrap();
    // The device served it, but the model's panic fails it.
    assert_eq!(panicking.wait_data(), Err(IoError::Io));
    assert_eq!(next.wait_data(), Ok(vec![1; 2048]));
    // Later requests of every kind, on the same queue.
    let append = Submission::append(ZONE, vec![2; 512]);
    assert_eq!(
        outcome(kernel.submit(0, append).unwrap()),
        Ok(Reply::Appended(ZONE + 4096))
    );
    let report = Command::ReportZones {
        offset: ZONE,
        max_zones: 1,
    };
    let report = outcome(kernel.submit(0, report).unwrap());
    assert!(matches!(report, Ok(Reply::Zones(zones)) if zones.len() == 1));
    assert_eq!(
        outcome(
            kernel
                .submit(0, Command::ZoneFinish { offset: ZONE })
                .unwrap()
        ),
        Ok(Reply::Done)
    );
    assert_eq!(condition(&kernel, ZONE), ZoneCondition::Full);
    kernel.stop().unwrap();
}

#[test]
fn a_panic_judging_a_replayed_write_fails_it_and_the_queue_serves_on() {
    for builder in served_both_ways() {
        let (kernel, device) = started(geometry(), &builder);
        assert_eq!(
            outcome(
                kernel
                    .submit(0, Submission::write(ZONE, vec![1; 4096]))
                    .unwrap()
            ),
            Ok(Reply::Done)
        );
        // The replayed write is judged by the zone the device reports.
        device.panicking_reports.store(true, Ordering::SeqCst);
        let replayed = Submission::write(ZONE, vec![2; 4096]).replayed();
        assert_eq!(
            outcome(kernel.submit(0, replayed).unwrap()),
            Err(IoError::Io)
        );
        assert_eq!(
            outcome(
                kernel
                    .submit(0, Submission::write(ZONE + 4096, vec![3; 512]))
                    .unwrap()
            ),
            Ok(Reply::Done)
        );
        let mut written = vec![1; 4096];
        written.extend([3; 512]);
        assert_eq!(kernel.read(0, ZONE, 4608), Ok(written));
        kernel.stop().unwrap();
    }
}

/// Records what it is told of each request, and times each 1 ms after
/// it arrived; panics on a refusal if `panic_on_refusal`.
#[derive(Default)]
struct Told {
    seen: Mutex<Vec<(Command, Result<Reply, IoError>)>>,
    panic_on_refusal: bool,
}

impl DeviceModel for Told {
    fn served(
        &self,
        command: Command,
        arrived: Instant,
        result: &Result<Reply, IoError>,
    ) -> Option<Instant> {
        self.seen.lock().unwrap().push((command, result.clone()));
        assert!(
            !(self.panic_on_refusal && result.is_err()),
            "the model's bug"
        );
        Some(arrived + Duration::from_millis(1))
    }
}

#[test]
fn the_model_is_told_each_result_with_its_errno_and_append_offset() {
    let model = Arc::new(Told::default());
    let builder = DeviceBuilder::default().model(Arc::clone(&model));
    let (kernel, _device) = started(geometry(), &builder);
    // (what the kernel asked before the disk went live)
    model.seen.lock().unwrap().clear();
    let write = |offset| Submission::write(offset, vec![7; 4096]);
    let requests: Vec<(Submission, Result<Reply, IoError>)> = vec![
        (write(ZONE), Ok(Reply::Done)),
        // Off the write pointer.
        (write(ZONE + 8192), Err(IoError::Io)),
        (
            Submission::append(ZONE, vec![8; 512]),
            Ok(Reply::Appended(ZONE + 4096)),
        ),
        // (closing the implicitly open zone to make room)
        (
            Command::ZoneOpen { offset: 2 * ZONE }.into(),
            Ok(Reply::Done),
        ),
        (
            Command::ZoneOpen { offset: 3 * ZONE }.into(),
            Ok(Reply::Done),
        ),
        // Beyond three active zones.
        (
            Command::ZoneOpen { offset: 4 * ZONE }.into(),
            Err(IoError::from(Errno::EOVERFLOW)),
        ),
        // The closed zone would have to open.
        (
            Command::ZoneFinish { offset: ZONE }.into(),
            Err(IoError::from(Errno::ETOOMANYREFS)),
        ),
        (
            Command::ZoneFinish { offset: 3 * ZONE }.into(),
            Ok(Reply::Done),
        ),
        // Into a full zone.
        (write(3 * ZONE), Err(IoError::Io)),
        (Command::ZoneReset { offset: ZONE }.into(), Ok(Reply::Done)),
        // A zone request of a conventional zone.
        (Command::ZoneReset { offset: 0 }.into(), Err(IoError::Io)),
    ];
    let mut expected = Vec::new();
    for (submission, result) in requests {
        let command = submission.command().unwrap();
        assert_eq!(kernel.run(0, submission), result, "{command:?}");
        expected.push((command, result));
    }
    assert_eq!(*model.seen.lock().unwrap(), expected);
    kernel.stop().unwrap();
}

#[test]
fn a_model_panicking_on_a_result_keeps_the_completion_and_the_queue() {
    let model = Arc::new(Told {
        panic_on_refusal: true,
        ..Told::default()
    });
    let builder = DeviceBuilder::default().model(Arc::clone(&model));
    let (kernel, _device) = started(geometry(), &builder);
    model.seen.lock().unwrap().clear();
    // A refusal (the panic) and a request after it, in the same batch.
    let refused = kernel
        .submit(0, Submission::write(ZONE + 8192, vec![1; 512]))
        .unwrap();
    let next = kernel
        .submit(0, Submission::write(ZONE, vec![2; 512]))
        .unwrap();
    assert_eq!(outcome(refused), Err(IoError::Io));
    assert_eq!(outcome(next), Ok(Reply::Done));
    // Later refusals panic again; every request completes.
    let refused = Command::ZoneReset { offset: 0 };
    assert_eq!(
        outcome(kernel.submit(0, refused).unwrap()),
        Err(IoError::Io)
    );
    let append = Submission::append(ZONE, vec![3; 512]);
    assert_eq!(
        outcome(kernel.submit(0, append).unwrap()),
        Ok(Reply::Appended(ZONE + 512))
    );
    assert_eq!(model.seen.lock().unwrap().len(), 4);
    kernel.stop().unwrap();
}
