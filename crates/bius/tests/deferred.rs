//! Deferred completion, driven through the in-process loopback kernel:
//! requests in flight, completed out of order, from other threads, late,
//! never; latency; the order of zone management against writes.
#![cfg(feature = "loopback")]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use bius::loopback::{Loopback, Submission, Ticket};
use bius::zone::ZoneGeometry;
use bius::{
    BlockDevice, Capabilities, Command, DeferredDevice, DeviceBuilder, Io, IoError, Latency, Reply,
    TransferMode,
};

mod common;
mod memory;

use common::{Pool, SIZE};

const DEPTH: u32 = 32;

/// Keeps every request it is given until the test completes it.
#[derive(Default)]
struct Held {
    ios: Mutex<Vec<Io>>,
    arrived: Condvar,
    geometry: Option<ZoneGeometry>,
}

impl Held {
    fn zoned(geometry: ZoneGeometry) -> Arc<Self> {
        Arc::new(Held {
            geometry: Some(geometry),
            ..Held::default()
        })
    }

    /// Waits until `count` requests are held; takes them, in arrival order.
    fn take(&self, count: usize) -> Vec<Io> {
        let mut ios = self.ios.lock().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while ios.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{} of {count} requests arrived", ios.len());
            ios = self.arrived.wait_timeout(ios, left).unwrap().0;
        }
        ios.drain(..).collect()
    }

    /// How many requests are held now.
    fn count(&self) -> usize {
        self.ios.lock().unwrap().len()
    }
}

impl DeferredDevice for Held {
    /// A write cache and FUA, so that the kernel would send flushes and
    /// FUA writes.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write_cache: true,
            fua: true,
            ..Capabilities::default()
        }
    }

    fn zones(&self) -> Option<ZoneGeometry> {
        self.geometry
    }

    fn submit(&self, io: Io) {
        self.ios.lock().unwrap().push(io);
        self.arrived.notify_all();
    }
}

/// A byte pattern that differs with `seed`.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize * 31 + i * 7) as u8)
        .collect()
}

fn builder() -> DeviceBuilder {
    DeviceBuilder::new(SIZE).queue_depth(DEPTH)
}

fn read(offset: u64, len: u64) -> Command {
    Command::Read { offset, len }
}

#[test]
fn requests_complete_out_of_order_from_other_threads() {
    let device = Arc::new(Held::default());
    let mut kernel = Loopback::new(&builder()).unwrap();
    // Queued before the worker starts: it takes them all at once.
    let tickets: Vec<Ticket> = (0..DEPTH as u64)
        .map(|i| kernel.submit(0, read(i * 4096, 4096)).unwrap())
        .collect();
    kernel.start_deferred(Arc::clone(&device)).unwrap();
    let ios = device.take(DEPTH as usize);
    // All in flight at once: every one held, none completed yet.
    for ticket in &tickets {
        assert_eq!(ticket.wait_timeout(Duration::ZERO), None);
    }
    let threads: Vec<_> = ios
        .into_iter()
        .rev()
        .map(|mut io| {
            thread::spawn(move || {
                let Command::Read { offset, len } = io.command() else {
                    panic!("{io:?} is not a read");
                };
                io.buf_mut().copy_from_slice(&pattern(offset, len as usize));
                io.complete_done(Ok(()));
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    for (i, ticket) in tickets.into_iter().enumerate() {
        assert_eq!(ticket.wait_data().unwrap(), pattern(i as u64 * 4096, 4096));
    }
    let stats = kernel.counters();
    assert_eq!(stats.refused, 0);
    kernel.stop().unwrap();
}

#[test]
fn a_dropped_request_fails_with_eio_and_the_rest_go_on() {
    let device = Arc::new(Held::default());
    let mut kernel = Loopback::new(&builder()).unwrap();
    kernel.start_deferred(Arc::clone(&device)).unwrap();
    let dropped = kernel
        .submit(0, Submission::write(0, vec![1; 512]))
        .unwrap();
    let kept = kernel.submit(0, Command::Flush).unwrap();
    let mut ios = device.take(2);
    assert_eq!(ios[0].data(), &[1; 512][..]);
    let flush = ios.pop().unwrap();
    drop(ios);
    assert_eq!(dropped.wait(), Err(IoError::Io));
    assert_eq!(kept.wait_timeout(Duration::ZERO), None);
    flush.complete_done(Ok(()));
    assert_eq!(kept.wait(), Ok(Reply::Done));
    kernel.stop().unwrap();
}

#[test]
fn a_completion_after_the_device_stopped_is_discarded() {
    let device = Arc::new(Held::default());
    let mut kernel = Loopback::new(&builder()).unwrap();
    kernel.start_deferred(Arc::clone(&device)).unwrap();
    let ticket = kernel.submit(0, read(0, 512)).unwrap();
    let mut io = device.take(1).pop().unwrap();
    kernel.kill();
    assert_eq!(ticket.wait(), Err(IoError::Io));
    kernel.stop().unwrap();
    // The buffer is still the request's to fill; the completion goes
    // nowhere, without a panic.
    io.buf_mut().fill(7);
    io.complete_done(Ok(()));
}

/// Panics on every request of `panic_at`; serves the rest on a thread.
struct Panicky {
    panic_at: u64,
}

impl DeferredDevice for Panicky {
    fn submit(&self, mut io: Io) {
        let Command::Read { offset, .. } = io.command() else {
            return io.complete_done(Err(IoError::Unsupported));
        };
        if offset == self.panic_at {
            panic!("submit of a read at {offset}");
        }
        thread::spawn(move || {
            if offset == 2 * 4096 {
                panic!("task of the read at {offset}");
            }
            io.buf_mut().fill(1);
            io.complete_done(Ok(()));
        });
    }
}

#[test]
fn a_panic_in_submit_or_in_a_task_fails_only_its_request() {
    let mut kernel = Loopback::new(&builder()).unwrap();
    kernel.start_deferred(Panicky { panic_at: 4096 }).unwrap();
    assert_eq!(
        kernel.submit(0, read(0, 512)).unwrap().wait_data(),
        Ok(vec![1; 512])
    );
    assert_eq!(kernel.run(0, read(4096, 512)), Err(IoError::Io));
    assert_eq!(kernel.run(0, read(2 * 4096, 512)), Err(IoError::Io));
    assert_eq!(
        kernel.submit(0, read(3 * 4096, 512)).unwrap().wait_data(),
        Ok(vec![1; 512])
    );
    kernel.stop().unwrap();
}

/// Writes then reads back patterns with many requests in flight on two
/// queues, in `mode`, with payloads cut by small reads or data in segments.
fn round_trip(builder: DeviceBuilder, segments: usize, read_limit: usize) {
    let pool = Pool::new(8, Duration::from_micros(200));
    let data = Arc::clone(&pool.data);
    let served = Arc::clone(&pool.served);
    let mut kernel = Loopback::new(&builder.queues(2))
        .unwrap()
        .segments(segments)
        .read_limit(read_limit);
    kernel.start_deferred(pool).unwrap();
    let sizes = [512usize, 4096, 64 << 10, 128 << 10];
    let offset = |i: usize| (i as u64 % 24) * (128 << 10);
    let writes: Vec<Ticket> = (0..24)
        .map(|i| {
            let len = sizes[i % sizes.len()];
            kernel
                .submit(
                    (i % 2) as u32,
                    Submission::write(offset(i), pattern(i as u64, len)),
                )
                .unwrap()
        })
        .collect();
    for ticket in writes {
        assert_eq!(ticket.wait(), Ok(Reply::Done));
    }
    for i in 0..24 {
        let len = sizes[i % sizes.len()];
        let at = offset(i) as usize;
        assert_eq!(
            data.read().unwrap()[at..at + len],
            pattern(i as u64, len)[..]
        );
    }
    let reads: Vec<Ticket> = (0..24)
        .map(|i| {
            let len = sizes[i % sizes.len()] as u64;
            kernel.submit((i % 2) as u32, read(offset(i), len)).unwrap()
        })
        .collect();
    for (i, ticket) in reads.into_iter().enumerate() {
        let len = sizes[i % sizes.len()];
        assert_eq!(
            ticket.wait_data().unwrap(),
            pattern(i as u64, len),
            "read {i}"
        );
    }
    assert_eq!(served.load(Ordering::Relaxed), 48);
    assert_eq!(kernel.counters().refused, 0);
    kernel.stop().unwrap();
}

#[test]
fn data_survives_copy_mode_with_split_payloads() {
    round_trip(builder(), 0, 1000);
}

#[test]
fn data_survives_map_mode() {
    round_trip(builder().transfer_mode(TransferMode::Map), 0, usize::MAX);
}

#[test]
fn data_survives_map_mode_in_segments() {
    round_trip(builder().transfer_mode(TransferMode::Map), 4, usize::MAX);
}

/// A RAM disk that answers at once.
struct Memory(RwLock<Vec<u8>>);

impl BlockDevice for Memory {
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let at = offset as usize;
        buf.copy_from_slice(&self.0.read().unwrap()[at..at + buf.len()]);
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
        let at = offset as usize;
        self.0.write().unwrap()[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }
}

#[test]
fn latency_delays_each_request_of_a_synchronous_device() {
    let latency: Latency = "read=30ms".parse().unwrap();
    let mut kernel = Loopback::new(&builder().latency(latency)).unwrap();
    kernel
        .start(Memory(RwLock::new(vec![5; SIZE as usize])))
        .unwrap();
    assert_eq!(
        kernel.run(0, Submission::write(0, vec![9; 4096])),
        Ok(Reply::Done)
    );
    let start = Instant::now();
    let reads: Vec<Ticket> = (0..DEPTH as u64)
        .map(|i| kernel.submit(0, read(i * 4096, 4096)).unwrap())
        .collect();
    for (i, ticket) in reads.into_iter().enumerate() {
        let want = if i == 0 { 9 } else { 5 };
        assert_eq!(ticket.wait_data(), Ok(vec![want; 4096]));
        // never before its time
        assert!(start.elapsed() >= Duration::from_millis(30));
    }
    kernel.stop().unwrap();
}

#[test]
fn latency_holds_completions_of_a_deferred_device_with_all_in_flight() {
    let latency: Latency = "read=50ms".parse().unwrap();
    let device = Arc::new(Held::default());
    let mut kernel = Loopback::new(&builder().latency(latency)).unwrap();
    let start = Instant::now();
    let reads: Vec<Ticket> = (0..DEPTH as u64)
        .map(|i| kernel.submit(0, read(i * 4096, 4096)).unwrap())
        .collect();
    kernel.start_deferred(Arc::clone(&device)).unwrap();
    // The whole queue depth reaches the device before any completes.
    for mut io in device.take(DEPTH as usize) {
        io.buf_mut().fill(3);
        io.complete_done(Ok(()));
    }
    for ticket in reads {
        assert_eq!(ticket.wait_data(), Ok(vec![3; 4096]));
        assert!(start.elapsed() >= Duration::from_millis(50));
    }
    kernel.stop().unwrap();
}

#[test]
fn a_latency_at_or_above_the_timeout_is_refused() {
    let latency: Latency = "flush=2s".parse().unwrap();
    let builder = builder().timeout(Duration::from_secs(2)).latency(latency);
    let err = Loopback::new(&builder).err().expect("refused");
    assert_eq!(
        err.to_string(),
        "invalid parameter: an added latency must be below the request timeout (EINVAL)"
    );
}

/// 8 zones of 64 KiB, the first conventional.
fn geometry() -> ZoneGeometry {
    ZoneGeometry::new(512 << 10, 64 << 10)
        .unwrap()
        .with_conventional_zones(1)
        .unwrap()
}

fn zoned_builder() -> DeviceBuilder {
    DeviceBuilder::default().queue_depth(DEPTH)
}

/// Answers the loopback's zone report (all zones empty) while it starts.
fn answer_reports(device: &Held, done: &std::sync::atomic::AtomicBool) {
    let geometry = geometry();
    while !done.load(Ordering::SeqCst) {
        let ios: Vec<Io> = std::mem::take(&mut *device.ios.lock().unwrap());
        for io in ios {
            let Command::ReportZones { offset, max_zones } = io.command() else {
                panic!("{io:?} before the disk is live");
            };
            let zones = bius::zone::ZoneSet::new(geometry);
            let report = zones.report(offset, max_zones);
            io.complete(Ok(Reply::Zones(report)));
        }
        thread::sleep(Duration::from_millis(1));
    }
}

fn start_zoned(device: &Arc<Held>) -> Loopback {
    let mut kernel = Loopback::new(&zoned_builder()).unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answerer = {
        let (device, done) = (Arc::clone(device), Arc::clone(&done));
        thread::spawn(move || answer_reports(&device, &done))
    };
    kernel.start_deferred(Arc::clone(device)).unwrap();
    done.store(true, Ordering::SeqCst);
    answerer.join().unwrap();
    kernel
}

#[test]
fn zone_management_waits_for_the_zone_s_writes_and_holds_later_ones() {
    let device = Held::zoned(geometry());
    let kernel = start_zoned(&device);
    let zone1 = 64 << 10;
    let zone2 = 128 << 10;
    let write1 = kernel
        .submit(0, Submission::write(zone1, vec![1; 4096]))
        .unwrap();
    let write2 = kernel
        .submit(0, Submission::write(zone2, vec![2; 4096]))
        .unwrap();
    let mut first = device.take(2);
    // The reset of zone 1 waits for its write; zone 2's write does not.
    let reset = kernel
        .submit(0, Command::ZoneReset { offset: zone1 })
        .unwrap();
    let later = kernel
        .submit(0, Submission::write(zone1, vec![3; 4096]))
        .unwrap();
    let other = kernel.submit(0, Command::Flush).unwrap();
    let flush = device.take(1).pop().unwrap();
    assert_eq!(flush.command(), Command::Flush);
    flush.complete_done(Ok(()));
    assert_eq!(other.wait(), Ok(Reply::Done));
    assert_eq!(device.count(), 0, "the reset went ahead of the write");
    let w2 = first.pop().unwrap();
    w2.complete_done(Ok(()));
    assert_eq!(write2.wait(), Ok(Reply::Done));
    assert_eq!(device.count(), 0);
    first.pop().unwrap().complete_done(Ok(()));
    assert_eq!(write1.wait(), Ok(Reply::Done));
    // Now the reset, and only the reset: the later write waits for it.
    let reset_io = device.take(1).pop().unwrap();
    assert_eq!(reset_io.command(), Command::ZoneReset { offset: zone1 });
    thread::sleep(Duration::from_millis(20));
    assert_eq!(device.count(), 0, "a write went ahead of the reset");
    reset_io.complete_done(Ok(()));
    assert_eq!(reset.wait(), Ok(Reply::Done));
    let last = device.take(1).pop().unwrap();
    assert_eq!(last.data(), &[3; 4096][..]);
    last.complete_done(Ok(()));
    assert_eq!(later.wait(), Ok(Reply::Done));
    kernel.stop().unwrap();
}

#[test]
fn reset_all_waits_for_every_write_and_a_dropped_write_releases_it() {
    let device = Held::zoned(geometry());
    let kernel = start_zoned(&device);
    let writes: Vec<Ticket> = (1..4u64)
        .map(|zone| {
            kernel
                .submit(0, Submission::write(zone << 16, vec![1; 512]))
                .unwrap()
        })
        .collect();
    let mut ios = device.take(3);
    let reset_all = kernel.submit(0, Command::ZoneResetAll).unwrap();
    let after = kernel
        .submit(0, Submission::write(5 << 16, vec![4; 512]))
        .unwrap();
    ios.pop().unwrap().complete_done(Ok(()));
    ios.pop().unwrap().complete_done(Ok(()));
    thread::sleep(Duration::from_millis(20));
    assert_eq!(device.count(), 0, "the reset went ahead of a write");
    drop(ios);
    let results: Vec<_> = writes.into_iter().map(Ticket::wait).collect();
    assert_eq!(
        results,
        [Err(IoError::Io), Ok(Reply::Done), Ok(Reply::Done)]
    );
    let reset_io = device.take(1).pop().unwrap();
    assert_eq!(reset_io.command(), Command::ZoneResetAll);
    thread::sleep(Duration::from_millis(20));
    assert_eq!(device.count(), 0, "a write went ahead of the reset");
    reset_io.complete_done(Ok(()));
    assert_eq!(reset_all.wait(), Ok(Reply::Done));
    device.take(1).pop().unwrap().complete_done(Ok(()));
    assert_eq!(after.wait(), Ok(Reply::Done));
    kernel.stop().unwrap();
}

#[test]
fn a_zone_reply_that_does_not_fit_fails_with_eio() {
    let device = Held::zoned(geometry());
    let kernel = start_zoned(&device);
    // An append answered with a sector outside its zone.
    let append = kernel
        .submit(0, Submission::append(2 << 16, vec![1; 512]))
        .unwrap();
    device
        .take(1)
        .pop()
        .unwrap()
        .complete(Ok(Reply::Appended(0)));
    assert_eq!(append.wait(), Err(IoError::Io));
    // A read answered as a report.
    let ticket = kernel.submit(0, read(0, 512)).unwrap();
    device
        .take(1)
        .pop()
        .unwrap()
        .complete(Ok(Reply::Zones(vec![])));
    assert_eq!(ticket.wait(), Err(IoError::Io));
    assert_eq!(kernel.counters().refused, 0);
    kernel.stop().unwrap();
}

/// Completes every read at once, but no earlier than `delay` after it
/// arrived: a device model's way of answering at the modelled time.
struct Modelled {
    delay: Duration,
}

impl DeferredDevice for Modelled {
    fn submit(&self, mut io: Io) {
        io.delay_until(Instant::now() + self.delay);
        io.buf_mut().fill(4);
        io.complete_done(Ok(()));
    }
}

#[test]
fn a_device_sets_when_its_requests_complete() {
    let mut kernel = Loopback::new(&builder()).unwrap();
    kernel
        .start_deferred(Modelled {
            delay: Duration::from_millis(40),
        })
        .unwrap();
    let start = Instant::now();
    let reads: Vec<Ticket> = (0..8u64)
        .map(|i| kernel.submit(0, read(i * 4096, 4096)).unwrap())
        .collect();
    for ticket in reads {
        assert_eq!(ticket.wait_data(), Ok(vec![4; 4096]));
        assert!(start.elapsed() >= Duration::from_millis(40));
    }
    kernel.stop().unwrap();
}

#[test]
fn the_later_of_the_latency_and_the_device_s_time_counts() {
    let latency: Latency = "read=60ms".parse().unwrap();
    let mut kernel = Loopback::new(&builder().latency(latency)).unwrap();
    kernel
        .start_deferred(Modelled {
            delay: Duration::from_millis(5),
        })
        .unwrap();
    let start = Instant::now();
    assert_eq!(
        kernel.submit(0, read(0, 512)).unwrap().wait_data(),
        Ok(vec![4; 512])
    );
    assert!(start.elapsed() >= Duration::from_millis(60));
    kernel.stop().unwrap();
}

/// One request at a time, each `each` long: a single-actuator model.
struct OneAtATime {
    each: Duration,
    busy_until: std::sync::Mutex<Option<Instant>>,
    seen: std::sync::atomic::AtomicUsize,
}

impl bius::DeviceModel for OneAtATime {
    fn completion(&self, _command: Command, arrived: Instant) -> Option<Instant> {
        self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut busy_until = self.busy_until.lock().unwrap();
        let start = busy_until.map_or(arrived, |busy| busy.max(arrived));
        *busy_until = Some(start + self.each);
        *busy_until
    }
}

#[test]
fn a_device_model_times_every_request_of_a_synchronous_device() {
    let model = Arc::new(OneAtATime {
        each: Duration::from_millis(20),
        busy_until: std::sync::Mutex::new(None),
        seen: Default::default(),
    });
    let mut kernel = Loopback::new(&builder().model(Arc::clone(&model))).unwrap();
    kernel
        .start(Memory(RwLock::new(vec![5; SIZE as usize])))
        .unwrap();
    let start = Instant::now();
    let reads: Vec<Ticket> = (0..4)
        .map(|i| kernel.submit(0, read(i * 4096, 4096)).unwrap())
        .collect();
    for (i, ticket) in reads.into_iter().enumerate() {
        assert_eq!(ticket.wait_data(), Ok(vec![5; 4096]));
        // The model serves them one after the other.
        assert!(start.elapsed() >= Duration::from_millis(20 * (i as u64 + 1)));
    }
    assert_eq!(model.seen.load(std::sync::atomic::Ordering::SeqCst), 4);
    kernel.stop().unwrap();
}

/// A wrapper that notes in `log` each request it passed on as it
/// completes.
struct Noting<D> {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    inner: D,
}

impl<D: DeferredDevice> DeferredDevice for Noting<D> {
    fn submit(&self, mut io: Io) {
        let (name, log) = (self.name, Arc::clone(&self.log));
        io.on_complete(move |io, result| {
            log.lock()
                .unwrap()
                .push(format!("{name}: {:?}", io.command()));
            io.complete(result);
        });
        self.inner.submit(io);
    }
}

/// A wrapper that follows every write with a flush of `inner`, through a
/// hook that sends the request on: as `DeferredZoned` does a FUA write.
struct FlushAfterWrite<D>(Arc<D>);

impl<D: DeferredDevice> DeferredDevice for FlushAfterWrite<D> {
    fn submit(&self, mut io: Io) {
        let inner = Arc::clone(&self.0);
        if let Command::Write { .. } = io.command() {
            io.on_complete(move |mut io, result| match result {
                Ok(_) => {
                    io.redirect(Command::Flush).unwrap();
                    inner.submit(io);
                }
                Err(err) => io.complete(Err(err)),
            });
        }
        self.0.submit(io);
    }
}

#[test]
fn the_hooks_of_nested_wrappers_all_run_the_innermost_first() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let store = bius::deferred::Immediate::new(memory::Memory::new(SIZE, 0));
    let inner = Noting {
        name: "inner",
        log: Arc::clone(&log),
        inner: store,
    };
    let outer = Noting {
        name: "outer",
        log: Arc::clone(&log),
        inner: FlushAfterWrite(Arc::new(inner)),
    };
    let mut kernel = Loopback::new(&builder()).unwrap();
    kernel.start_deferred(outer).unwrap();
    let write = Submission::write(4096, vec![1; 512]);
    assert_eq!(kernel.run(0, write), Ok(Reply::Done));
    assert_eq!(kernel.read(0, 4096, 512), Ok(vec![1; 512]));
    kernel.stop().unwrap();
    // The write, then the flush it became, then the read.
    let log = log.lock().unwrap();
    let write = "Write { offset: 4096, len: 512, fua: false }";
    let read = "Read { offset: 4096, len: 512 }";
    assert_eq!(
        *log,
        [
            format!("inner: {write}"),
            "inner: Flush".into(),
            "outer: Flush".into(),
            format!("inner: {read}"),
            format!("outer: {read}"),
        ]
    );
}
