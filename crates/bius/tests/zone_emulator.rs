//! Zones emulated over a conventional deferred device, through the
//! loopback kernel: the rules of zoned null_blk, the data in the store.
#![cfg(feature = "loopback")]

mod common;

use std::time::Duration;

use bius::loopback::{Loopback, Op};
use bius::zone::{ZoneCondition, ZoneEmulator, ZoneGeometry, FILL_PATTERN};
use bius::{DeviceBuilder, Errno, IoError};
use common::{Pool, SIZE};

const ZONE: u64 = 256 << 10;

/// 16 zones of 256 KiB, the first conventional, at most 2 open.
fn start() -> (Loopback, std::sync::Arc<std::sync::RwLock<Vec<u8>>>) {
    let geometry = ZoneGeometry {
        conventional_zones: 1,
        max_open: 2,
        ..ZoneGeometry::new(SIZE >> 9, ZONE >> 9)
    };
    let pool = Pool::new(4, Duration::from_micros(100));
    let data = std::sync::Arc::clone(&pool.data);
    let emulator = ZoneEmulator::new(pool, geometry).unwrap();
    let builder = DeviceBuilder::new(SIZE).queues(2).queue_depth(16);
    let mut kernel = Loopback::new(&builder).unwrap();
    kernel.start_deferred(emulator).unwrap();
    (kernel, data)
}

fn read(kernel: &Loopback, offset: u64, len: u32) -> Result<Vec<u8>, IoError> {
    kernel.run(0, Op::Read { offset, len })
}

#[test]
fn writes_follow_the_write_pointer_and_land_in_the_store() {
    let (kernel, data) = start();
    assert_eq!(kernel.run(0, Op::write(ZONE, vec![1; 4096])), Ok(vec![]));
    assert_eq!(
        kernel.run(1, Op::write(ZONE + 4096, vec![2; 4096])),
        Ok(vec![])
    );
    // not at the write pointer
    assert_eq!(
        kernel.run(0, Op::write(ZONE, vec![3; 4096])),
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
    assert_eq!(kernel.run(0, Op::write(8192, vec![4; 512])), Ok(vec![]));
    assert_eq!(read(&kernel, 8192, 512), Ok(vec![4; 512]));
    kernel.stop().unwrap();
}

#[test]
fn appends_complete_with_their_sector() {
    let (kernel, _data) = start();
    let append = |byte: u8, len: usize| {
        let op = Op::ZoneAppend {
            offset: 2 * ZONE,
            data: vec![byte; len],
            fua: false,
        };
        kernel
            .submit(0, op)
            .wait_completion()
            .map(|completion| completion.sector)
    };
    assert_eq!(append(1, 4096), Ok(2 * ZONE / 512));
    assert_eq!(append(2, 512), Ok(2 * ZONE / 512 + 8));
    let got = read(&kernel, 2 * ZONE, 5120).unwrap();
    assert_eq!(got[..4608], [vec![1; 4096], vec![2; 512]].concat()[..]);
    assert!(got[4608..].iter().all(|&b| b == FILL_PATTERN));
    kernel.stop().unwrap();
}

#[test]
fn a_reset_discards_the_zone_and_empties_it() {
    let (kernel, data) = start();
    assert_eq!(
        kernel.run(0, Op::write(3 * ZONE, vec![7; 8192])),
        Ok(vec![])
    );
    assert_eq!(
        kernel.run(1, Op::ZoneReset { offset: 3 * ZONE }),
        Ok(vec![])
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
    assert_eq!(kernel.run(0, Op::write(3 * ZONE, vec![8; 512])), Ok(vec![]));
    kernel.stop().unwrap();
}

#[test]
fn zone_operations_give_the_errnos_of_null_blk() {
    let (kernel, _data) = start();
    let open = |zone: u64| {
        kernel.run(
            0,
            Op::ZoneOpen {
                offset: zone * ZONE,
            },
        )
    };
    assert_eq!(open(1), Ok(vec![]));
    assert_eq!(open(2), Ok(vec![]));
    // max_open 2
    assert_eq!(open(3), Err(IoError::Errno(Errno::ETOOMANYREFS)));
    assert_eq!(kernel.run(0, Op::ZoneClose { offset: ZONE }), Ok(vec![]));
    assert_eq!(open(3), Ok(vec![]));
    assert_eq!(
        kernel.run(0, Op::ZoneFinish { offset: 2 * ZONE }),
        Ok(vec![])
    );
    assert_eq!(
        kernel.run(0, Op::write(2 * ZONE, vec![1; 512])),
        Err(IoError::Io)
    );
    assert_eq!(kernel.run(0, Op::ZoneResetAll), Ok(vec![]));
    let zones = kernel.report_zones(0, ZONE, 15).unwrap();
    assert!(zones
        .iter()
        .all(|zone| zone.condition == ZoneCondition::Empty));
    // no discard on a zoned disk
    let discard = Op::Discard {
        offset: ZONE,
        len: 4096,
    };
    assert_eq!(kernel.run(0, discard), Err(IoError::Unsupported));
    kernel.stop().unwrap();
}
