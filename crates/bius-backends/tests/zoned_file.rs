//! A zoned file ([`bius_backends::ZonedFile`]: zones emulated over a
//! file, their states in a zone state file) through the loopback kernel: a
//! daemon restart finds the zones and the data it left.

use bius::loopback::{Loopback, Submission};
use bius::zone::{Zone, ZoneCondition, ZoneGeometry};
use bius::{Command, Reply};
use bius::{DeviceBuilder, IoError};
use bius_backends::file_engine::EngineKind;
use bius_backends::{ZoneStateFile, ZonedFile};

const SIZE: u64 = 4 << 20;
const ZONE: u64 = 512 << 10;

/// 8 zones of 512 KiB, 384 KiB writable, the first conventional.
fn geometry() -> ZoneGeometry {
    ZoneGeometry::new(SIZE, ZONE)
        .unwrap()
        .with_zone_capacity(384 << 10)
        .unwrap()
        .with_conventional_zones(1)
        .unwrap()
}

/// The device over `dir`'s `disk` and `disk.zones` (created at the first
/// start), as a daemon starts it.
fn start(dir: &std::path::Path, kind: EngineKind) -> Loopback {
    let zoned = ZonedFile::new(dir.join("disk"))
        .engine(kind, 16)
        .open(&geometry(), 4096)
        .unwrap();
    let builder = DeviceBuilder::default()
        .logical_block_size(4096)
        .queues(2)
        .queue_depth(16);
    let mut kernel = Loopback::new(&builder).unwrap();
    kernel.start_deferred(zoned).unwrap();
    kernel
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

fn read(kernel: &Loopback, offset: u64, len: u64) -> Result<Vec<u8>, IoError> {
    kernel.read(0, offset, len)
}

fn zones(kernel: &Loopback) -> Vec<Zone> {
    kernel.report_zones(0, 0, 8).unwrap()
}

fn restarts_find_the_zones_and_data(kind: EngineKind) {
    let dir = tempfile::tempdir().unwrap();
    let kernel = start(dir.path(), kind);
    let conventional = data(8192, 1);
    assert_eq!(
        kernel.run(0, Submission::write(4096, conventional.clone())),
        Ok(Reply::Done)
    );
    let written = data(64 << 10, 2);
    assert_eq!(
        kernel.run(0, Submission::write(ZONE, written.clone())),
        Ok(Reply::Done)
    );
    let appended = data(16 << 10, 3);
    let at = kernel.zone_append(1, 2 * ZONE, appended.clone()).unwrap();
    assert_eq!(at, 2 * ZONE);
    let fua = Submission::write(3 * ZONE, data(4096, 4)).fua();
    assert_eq!(kernel.run(1, fua), Ok(Reply::Done));
    assert_eq!(
        kernel.run(0, Command::ZoneFinish { offset: 4 * ZONE }),
        Ok(Reply::Done)
    );
    assert_eq!(
        kernel.run(0, Command::ZoneOpen { offset: 5 * ZONE }),
        Ok(Reply::Done)
    );
    let before = zones(&kernel);
    // The daemon goes away without a flush (its writes are acknowledged,
    // not durable); the next one opens the same files in the same boot.
    kernel.kill();
    drop(kernel);
    let kernel = start(dir.path(), kind);
    let after = zones(&kernel);
    let closed = |zone: &Zone| Zone {
        condition: ZoneCondition::Closed,
        ..*zone
    };
    // Implicitly open zones come back closed, as after a power cycle.
    let expected = [
        before[0],
        closed(&before[1]),
        closed(&before[2]),
        closed(&before[3]),
        before[4],
        before[5],
        before[6],
        before[7],
    ];
    assert_eq!(after, expected);
    assert_eq!(after[1].write_pointer, ZONE + (64 << 10));
    assert_eq!(after[4].condition, ZoneCondition::Full);
    assert_eq!(after[5].condition, ZoneCondition::ExplicitOpen);
    assert_eq!(read(&kernel, 4096, 8192), Ok(conventional));
    assert_eq!(read(&kernel, ZONE, 64 << 10), Ok(written));
    assert_eq!(read(&kernel, 2 * ZONE, 16 << 10), Ok(appended));
    assert_eq!(read(&kernel, 3 * ZONE, 4096), Ok(data(4096, 4)));
    // Writing goes on at the write pointers.
    let more = Submission::write(ZONE + (64 << 10), data(4096, 5));
    assert_eq!(kernel.run(0, more), Ok(Reply::Done));
    assert_eq!(
        kernel.run(0, Submission::write(ZONE, data(4096, 6))),
        Err(IoError::Io)
    );
    kernel.stop().unwrap();
}

#[test]
fn restarts_find_the_zones_and_data_on_threads() {
    restarts_find_the_zones_and_data(EngineKind::Threads);
}

#[test]
fn restarts_find_the_zones_and_data_on_io_uring() {
    match bius_backends::file_engine::probe_uring() {
        Ok(()) => restarts_find_the_zones_and_data(EngineKind::Uring),
        Err(err) => eprintln!("io_uring unavailable here ({err}): tested on threads only"),
    }
}

#[test]
fn another_geometry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.zones");
    drop(ZoneStateFile::open(&path, &geometry(), 4096).unwrap());
    let other = geometry().with_conventional_zones(2).unwrap();
    let err = ZoneStateFile::open(&path, &other, 4096).unwrap_err();
    assert_eq!(err.errno(), bius::Errno::EINVAL);
    assert_eq!(
        err.to_string(),
        format!(
            "zone state file {}: conventional zones is 1, the device's is 2",
            path.display()
        )
    );
}
