//! The backends served by the real worker loop, through the in-process
//! loopback kernel.

use bius::loopback::{Loopback, Submission};

use bius::{BlockDevice, DeviceBuilder, TransferMode};
use bius::{Command, Reply};
use std::sync::{Arc, Mutex};

use bius::{Capabilities, IoError, Latency};

use bius_backends::{File, FileOptions, Null, RamDisk, Zero};

const SIZE: u64 = 8 << 20;

/// Every transfer mode: the backends must not see a difference.
const MODES: [TransferMode; 3] = [
    TransferMode::Copy,
    TransferMode::Map,
    TransferMode::Selective { threshold: 16384 },
];

/// Every transfer mode, and the map modes with the mapped reads and writes
/// in segments too ([`Loopback::segments`]: the requests reach the backend
/// in pieces).
const SETUPS: [(TransferMode, usize); 5] = [
    (MODES[0], 0),
    (MODES[1], 0),
    (MODES[2], 0),
    (MODES[1], 4),
    (MODES[2], 16),
];

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Writes, reads back, discards and zeroes across 1 MiB chunk boundaries
/// from four queues, with reads small enough to split payloads, mapped
/// requests in `segments` pieces; flushes, FUA, discards and write zeroes
/// only where the device offers them, as the kernel sends them.
fn exercise<D: BlockDevice>(device: D, (mode, segments): (TransferMode, usize)) {
    let caps = device.capabilities();
    let builder = DeviceBuilder::new(SIZE).queues(4).transfer_mode(mode);
    let mut kernel = Loopback::new(&builder)
        .unwrap()
        .read_limit(20_000)
        .segments(segments);
    kernel.start(device).unwrap();
    std::thread::scope(|s| {
        for queue in 0..4u32 {
            let kernel = &kernel;
            s.spawn(move || {
                let base = u64::from(queue) * (2 << 20);
                let offset = base + (1 << 20) - 4096;
                let payload = data(64 * 1024, queue as u8);
                let mut write = Submission::write(offset, payload.clone());
                if queue % 2 == 0 && caps.fua {
                    write = write.fua();
                }
                assert_eq!(kernel.run(queue, write), Ok(Reply::Done));
                let read = Command::Read {
                    offset,
                    len: 64 * 1024,
                };
                let got = kernel.submit(queue, read).unwrap().wait_data();
                assert_eq!(got, Ok(payload.clone()));
                if caps.write_cache {
                    assert_eq!(kernel.run(queue, Command::Flush), Ok(Reply::Done));
                }
                let mut expected = payload;
                if caps.write_zeroes {
                    let zero = Command::WriteZeroes {
                        offset,
                        len: 8192,
                        unmap: false,
                    };
                    assert_eq!(kernel.run(queue, zero), Ok(Reply::Done));
                    expected[..8192].fill(0);
                }
                if caps.discard {
                    let discard = Command::Discard {
                        offset: offset + 8192,
                        len: 8192,
                    };
                    assert_eq!(kernel.run(queue, discard), Ok(Reply::Done));
                    expected[8192..16384].fill(0);
                }
                assert_eq!(
                    kernel.submit(queue, read).unwrap().wait_data(),
                    Ok(expected)
                );
            });
        }
    });
    // The 64 KiB reads and writes were mapped in segments (unless copied).
    let segmented = kernel.counters().segmented;
    assert_eq!(segmented > 0, mode != TransferMode::Copy && segments > 1);
    kernel.stop().unwrap();
}

#[test]
fn ramdisk_serves_through_the_worker_loop() {
    for setup in SETUPS {
        exercise(RamDisk::new(SIZE), setup);
    }
}

#[test]
fn file_serves_through_the_worker_loop() {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    tmp.as_file().set_len(SIZE).unwrap();
    for setup in SETUPS {
        exercise(
            File::open(tmp.path(), FileOptions::default()).unwrap(),
            setup,
        );
    }
}

/// What a dataless device saw: (is a write, offset, length, data all
/// zeroes).
type Seen = Mutex<Vec<(bool, u64, usize, bool)>>;

/// A device that keeps no data and records what it is asked.
#[derive(Default)]
struct Dataless(Seen);

impl BlockDevice for Dataless {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            no_data: true,
            ..Capabilities::default()
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        buf.fill(0x5a); // goes nowhere
        self.0
            .lock()
            .unwrap()
            .push((false, offset, buf.len(), false));
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
        let zeroes = data.iter().all(|&b| b == 0);
        self.0
            .lock()
            .unwrap()
            .push((true, offset, data.len(), zeroes));
        Ok(())
    }
}

/// Every transfer mode, the plain worker and the deferred one (with a
/// latency): a dataless device sees each read and write with its offset
/// and length (a write's data as zeroes), and no data travels: nothing is
/// mapped, a read completes without data.
#[test]
fn no_data_moves_in_any_mode() {
    for (mode, latency) in MODES.into_iter().flat_map(|mode| {
        [
            (mode, None),
            (mode, Some("all=50us".parse::<Latency>().unwrap())),
        ]
    }) {
        let mut builder = DeviceBuilder::new(SIZE).transfer_mode(mode);
        if let Some(latency) = latency {
            builder = builder.latency(latency);
        }
        let device = Arc::new(Dataless::default());
        let mut kernel = Loopback::new(&builder).unwrap();
        kernel.start(Arc::clone(&device)).unwrap();
        for len in [4096u64, 256 << 10] {
            assert_eq!(
                kernel.run(0, Submission::write(8192, data(len as usize, 7))),
                Ok(Reply::Done)
            );
            let read = Command::Read { offset: 8192, len };
            assert_eq!(kernel.run(0, read), Ok(Reply::Done), "{mode} {latency:?}");
        }
        assert_eq!(kernel.counters().mapped, 0, "{mode} {latency:?}");
        kernel.stop().unwrap();
        let seen = device.0.lock().unwrap().clone();
        let expected = [
            (true, 8192, 4096, true),
            (false, 8192, 4096, false),
            (true, 8192, 256 << 10, true),
            (false, 8192, 256 << 10, false),
        ];
        assert_eq!(seen, expected, "{mode} {latency:?}");
    }
}

#[test]
fn null_and_zero_serve_through_the_worker_loop() {
    for mode in MODES {
        let builder = DeviceBuilder::new(SIZE).transfer_mode(mode);
        let mut kernel = Loopback::new(&builder).unwrap();
        kernel.start(Null).unwrap();
        assert_eq!(
            kernel.run(0, Submission::write(0, vec![1; 65536])),
            Ok(Reply::Done)
        );
        let read = Command::Read {
            offset: 0,
            len: 65536,
        };
        assert_eq!(kernel.run(0, read), Ok(Reply::Done), "null moves no data");
        kernel.stop().unwrap();

        let mut kernel = Loopback::new(&builder).unwrap();
        kernel.start(Zero).unwrap();
        assert_eq!(
            kernel.run(0, Submission::write(0, vec![1; 65536])),
            Ok(Reply::Done)
        );
        let read = Command::Read {
            offset: 0,
            len: 65536,
        };
        assert_eq!(
            kernel.submit(0, read).unwrap().wait_data(),
            Ok(vec![0; 65536]),
            "zero reads zeroes"
        );
        kernel.stop().unwrap();
    }
}

#[test]
fn zoned_ramdisk_serves_through_the_worker_loop() {
    use bius::zone::{ZoneCondition, ZoneGeometry};
    use bius::Errno;

    // 8 MiB in 1 MiB zones of 768 KiB: one conventional, at most 4 open.
    const ZONE: u64 = 1 << 20;
    let geometry = ZoneGeometry::new(SIZE, ZONE)
        .unwrap()
        .with_zone_capacity(768 << 10)
        .unwrap()
        .with_conventional_zones(1)
        .unwrap()
        .with_max_open(4);
    for (mode, segments) in SETUPS {
        let disk = std::sync::Arc::new(RamDisk::zoned(geometry));
        let builder = DeviceBuilder::default().queues(4).transfer_mode(mode);
        let mut kernel = Loopback::new(&builder)
            .unwrap()
            .read_limit(20_000)
            .segments(segments);
        kernel.start(std::sync::Arc::clone(&disk)).unwrap();
        std::thread::scope(|s| {
            for queue in 0..4u32 {
                let kernel = &kernel;
                s.spawn(move || {
                    // Each queue writes its own zone, appends to a shared one.
                    let zone = u64::from(queue + 1) * ZONE;
                    let payload = data(64 * 1024, queue as u8);
                    let write = Submission::write(zone, payload.clone());
                    assert_eq!(kernel.run(queue, write), Ok(Reply::Done));
                    let appended = kernel.zone_append(queue, 5 * ZONE, payload.clone());
                    let at = appended.unwrap();
                    let read = |offset| kernel.read(queue, offset, 64 * 1024);
                    assert_eq!(read(zone), Ok(payload.clone()));
                    assert_eq!(read(at), Ok(payload));
                    let finish = Command::ZoneFinish { offset: zone };
                    assert_eq!(kernel.run(queue, finish), Ok(Reply::Done));
                });
            }
        });
        let zones = kernel.report_zones(0, 0, 8).unwrap();
        let conditions: Vec<_> = zones.iter().map(|zone| zone.condition).collect();
        use ZoneCondition::*;
        assert_eq!(
            conditions,
            [
                NotWritePointer,
                Full,
                Full,
                Full,
                Full,
                ImplicitOpen,
                Empty,
                Empty
            ]
        );
        assert_eq!(zones[5].write_pointer, 5 * ZONE + (256 << 10));
        // Past the capacity (768 KiB, 256 KiB written): EIO.
        let append = kernel.zone_append(0, 5 * ZONE, vec![0; 600 << 10]);
        assert_eq!(append.unwrap_err().errno(), Errno::EIO);
        assert_eq!(kernel.run(1, Command::ZoneResetAll), Ok(Reply::Done));
        assert_eq!(disk.inner().allocated_bytes(), 0);
        // The appends of 64 KiB were mapped unless copied, the writes in
        // segments if asked for (appends never are).
        let stats = kernel.counters();
        assert_eq!(stats.mapped > 0, mode != TransferMode::Copy);
        assert_eq!(
            stats.segmented > 0,
            mode != TransferMode::Copy && segments > 1
        );
        kernel.stop().unwrap();
    }
}
