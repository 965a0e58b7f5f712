//! Zones emulated over a conventional deferred device, through the
//! loopback kernel: the rules of zoned null_blk, the data in the store.
#![cfg(feature = "loopback")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bius::loopback::{Loopback, Submission};

use bius::zone::{
    DeferredZoned, ZoneCondition, ZoneGeometry, ZoneJournal, ZoneRecord, ZoneSet, FILL_PATTERN,
};
use bius::{Capabilities, Command, Io, Reply};
use bius::{DeferredDevice, DeviceBuilder, Errno, IoError};
use common::{Discard, Pool, SIZE};

const ZONE: u64 = 256 << 10;

/// 16 zones of 256 KiB, the first conventional, at most 2 open.
fn geometry() -> ZoneGeometry {
    ZoneGeometry::new(SIZE, ZONE)
        .unwrap()
        .with_conventional_zones(1)
        .unwrap()
        .with_max_open(2)
}

/// A loopback kernel serving `zoned`.
fn serve<D: DeferredDevice>(zoned: DeferredZoned<D>) -> Loopback {
    let builder = DeviceBuilder::default().queues(2).queue_depth(16);
    let mut kernel = Loopback::new(&builder).unwrap();
    kernel.start_deferred(zoned).unwrap();
    kernel
}

/// The zones of [`geometry`] over a pool doing `discard` with discards.
fn start_with(discard: Discard) -> (Loopback, Arc<RwLock<Vec<u8>>>) {
    let pool = Pool::with_discard(4, Duration::from_micros(100), discard);
    let data = Arc::clone(&pool.data);
    let zoned = DeferredZoned::new(pool, geometry());
    (serve(zoned), data)
}

fn start() -> (Loopback, Arc<RwLock<Vec<u8>>>) {
    start_with(Discard::Zeroes)
}

fn read(kernel: &Loopback, offset: u64, len: u64) -> Result<Vec<u8>, IoError> {
    kernel.read(0, offset, len)
}

#[test]
fn writes_follow_the_write_pointer_and_land_in_the_store() {
    let (kernel, data) = start();
    assert_eq!(
        kernel.run(0, Submission::write(ZONE, vec![1; 4096])),
        Ok(Reply::Done)
    );
    assert_eq!(
        kernel.run(1, Submission::write(ZONE + 4096, vec![2; 4096])),
        Ok(Reply::Done)
    );
    // not at the write pointer
    assert_eq!(
        kernel.run(0, Submission::write(ZONE, vec![3; 4096])),
        Err(IoError::Io)
    );
    assert_eq!(
        data.read().unwrap()[ZONE as usize..][..8192],
        [[1; 4096], [2; 4096]].concat()[..]
    );
    // Beyond the write pointer: the fill pattern, whatever the store has.
    let got = read(&kernel, ZONE, 16384).unwrap();
    assert_eq!(got[..8192], [[1; 4096], [2; 4096]].concat()[..]);
    assert!(got[8192..].iter().all(|&b| b == FILL_PATTERN));
    // The conventional zone is written anywhere.
    assert_eq!(
        kernel.run(0, Submission::write(8192, vec![4; 512])),
        Ok(Reply::Done)
    );
    assert_eq!(read(&kernel, 8192, 512), Ok(vec![4; 512]));
    kernel.stop().unwrap();
}

#[test]
fn appends_complete_with_their_sector() {
    let (kernel, _data) = start();
    let append = |byte: u8, len: usize| kernel.zone_append(0, 2 * ZONE, vec![byte; len]);
    assert_eq!(append(1, 4096), Ok(2 * ZONE));
    assert_eq!(append(2, 512), Ok(2 * ZONE + 4096));
    let got = read(&kernel, 2 * ZONE, 5120).unwrap();
    assert_eq!(got[..4608], [vec![1; 4096], vec![2; 512]].concat()[..]);
    assert!(got[4608..].iter().all(|&b| b == FILL_PATTERN));
    kernel.stop().unwrap();
}

#[test]
fn a_reset_discards_the_zone_and_empties_it() {
    let (kernel, data) = start();
    assert_eq!(
        kernel.run(0, Submission::write(3 * ZONE, vec![7; 8192])),
        Ok(Reply::Done)
    );
    assert_eq!(
        kernel.run(1, Command::ZoneReset { offset: 3 * ZONE }),
        Ok(Reply::Done)
    );
    assert!(data.read().unwrap()[3 * ZONE as usize..][..8192]
        .iter()
        .all(|&b| b == 0));
    assert!(read(&kernel, 3 * ZONE, 8192)
        .unwrap()
        .iter()
        .all(|&b| b == FILL_PATTERN));
    let zones = kernel.report_zones(0, 3 * ZONE, 1).unwrap();
    assert_eq!(zones[0].condition, ZoneCondition::Empty);
    assert_eq!(
        kernel.run(0, Submission::write(3 * ZONE, vec![8; 512])),
        Ok(Reply::Done)
    );
    kernel.stop().unwrap();
}

#[test]
fn zone_operations_give_the_errnos_of_null_blk() {
    let (kernel, _data) = start();
    let open = |zone: u64| {
        kernel.run(
            0,
            Command::ZoneOpen {
                offset: zone * ZONE,
            },
        )
    };
    assert_eq!(open(1), Ok(Reply::Done));
    assert_eq!(open(2), Ok(Reply::Done));
    // max_open 2
    assert_eq!(open(3), Err(IoError::from(Errno::ETOOMANYREFS)));
    assert_eq!(
        kernel.run(0, Command::ZoneClose { offset: ZONE }),
        Ok(Reply::Done)
    );
    assert_eq!(open(3), Ok(Reply::Done));
    assert_eq!(
        kernel.run(0, Command::ZoneFinish { offset: 2 * ZONE }),
        Ok(Reply::Done)
    );
    assert_eq!(
        kernel.run(0, Submission::write(2 * ZONE, vec![1; 512])),
        Err(IoError::Io)
    );
    assert_eq!(kernel.run(0, Command::ZoneResetAll), Ok(Reply::Done));
    let zones = kernel.report_zones(0, ZONE, 15).unwrap();
    assert!(zones
        .iter()
        .all(|zone| zone.condition == ZoneCondition::Empty));
    // no discard on a zoned disk
    let discard = Command::Discard {
        offset: ZONE,
        len: 4096,
    };
    assert_eq!(kernel.run(0, discard), Err(IoError::Unsupported));
    kernel.stop().unwrap();
}

/// What was written before a reset: no read may see this byte again.
const OLD: u8 = 0xa5;

/// Writes zone `zone` full of [`OLD`].
fn fill_old(kernel: &Loopback, zone: u64) {
    let write = Submission::write(zone * ZONE, vec![OLD; ZONE as usize]);
    assert_eq!(kernel.run(0, write), Ok(Reply::Done));
}

/// Zone `zone` read whole, in one request.
fn read_zone(kernel: &Loopback, zone: u64) -> Vec<u8> {
    read(kernel, zone * ZONE, ZONE).unwrap()
}

/// `data`, then zeroes (a finish's gap), then the fill pattern (past the
/// write pointer), `ZONE` bytes in all.
fn zone_of(data: &[u8], zeroes: usize) -> Vec<u8> {
    let fill = ZONE as usize - data.len() - zeroes;
    [data, &vec![0; zeroes], &vec![FILL_PATTERN; fill]].concat()
}

/// Resets zone 3, full of old data, then writes 4 KiB and finishes it:
/// reads see the new data, then what `DeferredZoned` defines for space not
/// written since the reset, never the old data, whatever `discard`.
fn reset_and_finish(discard: Discard) {
    let (kernel, _data) = start_with(discard);
    fill_old(&kernel, 3);
    let reset = Command::ZoneReset { offset: 3 * ZONE };
    assert_eq!(kernel.run(1, reset), Ok(Reply::Done), "{discard:?}");
    assert_eq!(read_zone(&kernel, 3), zone_of(&[], 0), "{discard:?}");
    let new = vec![0x11; 4096];
    assert_eq!(
        kernel.run(0, Submission::write(3 * ZONE, new.clone())),
        Ok(Reply::Done)
    );
    // Below the write pointer the new data, above it the fill pattern.
    assert_eq!(read_zone(&kernel, 3), zone_of(&new, 0), "{discard:?}");
    let finish = Command::ZoneFinish { offset: 3 * ZONE };
    assert_eq!(kernel.run(0, finish), Ok(Reply::Done));
    // The write pointer is at the zone end: the rest reads as zeroes.
    let got = read_zone(&kernel, 3);
    assert!(!got.contains(&OLD), "{discard:?}: old data read back");
    assert_eq!(got, zone_of(&new, ZONE as usize - 4096), "{discard:?}");
    kernel.stop().unwrap();
}

#[test]
fn a_reset_zone_never_reads_back_old_data_with_a_zeroing_discard() {
    reset_and_finish(Discard::Zeroes);
}

#[test]
fn a_reset_zone_never_reads_back_old_data_with_a_discard_that_keeps_it() {
    reset_and_finish(Discard::Keeps);
}

#[test]
fn a_reset_zone_never_reads_back_old_data_with_a_failing_discard() {
    reset_and_finish(Discard::Fails);
}

#[test]
fn a_reset_zone_never_reads_back_old_data_without_discard() {
    reset_and_finish(Discard::Unsupported);
}

#[test]
fn a_reset_of_all_zones_never_reads_back_old_data() {
    let (kernel, _data) = start();
    for zone in 1..4 {
        fill_old(&kernel, zone);
    }
    assert_eq!(kernel.run(0, Command::ZoneResetAll), Ok(Reply::Done));
    let new = vec![0x22; 8192];
    assert_eq!(
        kernel.run(0, Submission::write(2 * ZONE, new.clone())),
        Ok(Reply::Done)
    );
    for zone in 1..3 {
        let finish = Command::ZoneFinish {
            offset: zone * ZONE,
        };
        assert_eq!(kernel.run(0, finish), Ok(Reply::Done));
    }
    // Zone 1 (finished empty), 2 (8 KiB, finished) and 3 (empty), read as
    // the kernel does, a zone at a time.
    let got: Vec<u8> = (1..4)
        .flat_map(|zone| read(&kernel, zone * ZONE, ZONE).unwrap())
        .collect();
    assert!(!got.contains(&OLD), "old data read back");
    let expected = [
        zone_of(&[], ZONE as usize),
        zone_of(&new, ZONE as usize - 8192),
        zone_of(&[], 0),
    ];
    assert_eq!(got, expected.concat());
    kernel.stop().unwrap();
}

#[test]
fn a_read_without_data_does_not_reach_the_store() {
    let pool = Pool::new(4, Duration::from_micros(100));
    let served = Arc::clone(&pool.served);
    let kernel = serve(DeferredZoned::new(pool, geometry()));
    assert_eq!(read_zone(&kernel, 2), zone_of(&[], 0));
    assert_eq!(
        kernel.run(0, Command::ZoneFinish { offset: 2 * ZONE }),
        Ok(Reply::Done)
    );
    assert_eq!(read_zone(&kernel, 2), zone_of(&[], ZONE as usize));
    assert_eq!(served.load(std::sync::atomic::Ordering::Relaxed), 0);
    kernel.stop().unwrap();
}

/// Keeps the acknowledged zone states in memory.
struct Remembered(Mutex<Vec<ZoneRecord>>);

impl ZoneJournal for Remembered {
    fn acknowledged(&self, index: u32, record: ZoneRecord) -> std::io::Result<()> {
        self.0.lock().unwrap()[index as usize] = record;
        Ok(())
    }
    fn durable(&self, _: &[(u32, ZoneRecord)]) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_finished_zone_hides_old_data_after_a_restart() {
    let pool = Arc::new(Pool::with_discard(
        4,
        Duration::from_micros(100),
        Discard::Keeps,
    ));
    let records = ZoneSet::new(geometry()).records();
    let journal = Arc::new(Remembered(Mutex::new(records)));
    let restart = || {
        let records = journal.0.lock().unwrap().clone();
        let zoned = DeferredZoned::with_journal(
            Arc::clone(&pool),
            geometry(),
            Arc::clone(&journal),
            &records,
        )
        .unwrap();
        serve(zoned)
    };
    let kernel = restart();
    fill_old(&kernel, 2);
    assert_eq!(
        kernel.run(0, Command::ZoneReset { offset: 2 * ZONE }),
        Ok(Reply::Done)
    );
    let new = vec![0x33; 4096];
    assert_eq!(
        kernel.run(0, Submission::write(2 * ZONE, new.clone())),
        Ok(Reply::Done)
    );
    assert_eq!(
        kernel.run(0, Command::ZoneFinish { offset: 2 * ZONE }),
        Ok(Reply::Done)
    );
    kernel.stop().unwrap();
    // The daemon restarts with the zone states it left.
    let kernel = restart();
    let zones = kernel.report_zones(0, 2 * ZONE, 1).unwrap();
    assert_eq!(zones[0].condition, ZoneCondition::Full);
    let got = read_zone(&kernel, 2);
    assert!(!got.contains(&OLD), "old data read back");
    assert_eq!(got, zone_of(&new, ZONE as usize - 4096));
    kernel.stop().unwrap();
}

/// `inner`, but the next write after `fail_next` is set fails with `EIO`
/// without reaching it (a store that failed a write).
struct FailingWrites<D> {
    inner: D,
    fail_next: AtomicBool,
}

impl<D: DeferredDevice> DeferredDevice for FailingWrites<D> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn submit(&self, io: Io) {
        let write = matches!(io.command(), Command::Write { .. });
        if write && self.fail_next.swap(false, Ordering::SeqCst) {
            return io.complete_done(Err(IoError::Io));
        }
        self.inner.submit(io);
    }
}

#[test]
fn a_failed_write_leaves_the_write_pointer_and_reads_no_stale_data() {
    // The store keeps what a reset discards: the old data is still there.
    let pool = Pool::with_discard(4, Duration::from_micros(100), Discard::Keeps);
    let store = Arc::new(FailingWrites {
        inner: pool,
        fail_next: AtomicBool::new(false),
    });
    let kernel = serve(DeferredZoned::new(Arc::clone(&store), geometry()));
    fill_old(&kernel, 3);
    let reset = Command::ZoneReset { offset: 3 * ZONE };
    assert_eq!(kernel.run(0, reset), Ok(Reply::Done));
    let zone = |kernel: &Loopback| kernel.report_zones(0, 3 * ZONE, 1).unwrap()[0];
    // A write the store fails: as on zoned null_blk (and as `Zoned` does)
    // the zone is open, its write pointer where it was, nothing written.
    store.fail_next.store(true, Ordering::SeqCst);
    let write = Submission::write(3 * ZONE, vec![0x11; 8192]);
    assert_eq!(kernel.run(0, write), Err(IoError::Io));
    let after = zone(&kernel);
    assert_eq!(after.write_pointer, 3 * ZONE);
    assert_eq!(after.condition, ZoneCondition::ImplicitOpen);
    let got = read_zone(&kernel, 3);
    assert!(!got.contains(&OLD), "old data read back");
    assert_eq!(got, zone_of(&[], 0));
    // An append the store fails: the same.
    store.fail_next.store(true, Ordering::SeqCst);
    let append = kernel.zone_append(0, 3 * ZONE, vec![0x22; 4096]);
    assert_eq!(append, Err(IoError::Io));
    assert_eq!(zone(&kernel).write_pointer, 3 * ZONE);
    assert_eq!(read_zone(&kernel, 3), zone_of(&[], 0));
    // The write is taken again where it failed.
    let new = vec![0x33; 4096];
    let write = Submission::write(3 * ZONE, new.clone());
    assert_eq!(kernel.run(0, write), Ok(Reply::Done));
    assert_eq!(zone(&kernel).write_pointer, 3 * ZONE + 4096);
    assert_eq!(read_zone(&kernel, 3), zone_of(&new, 0));
    kernel.stop().unwrap();
}
