//! The worker loop, driven through the in-process loopback kernel.
#![cfg(feature = "loopback")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::Duration;

use bius::loopback::{Loopback, NotSent, Submission, SubmitError};

use bius::{BlockDevice, Capabilities, DeviceBuilder, Errno, IoError, Request, TransferMode};
use bius::{Command, Op, Reply};

const SIZE: u64 = 4 << 20;

/// What a [`Memory`] device was asked to do (payload-free summary).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Read(u64, usize),
    Write(u64, usize, bool),
    Flush,
    Discard(u64, u64),
    WriteZeroes(u64, u64, bool),
}

/// A RAM disk that records every request it serves.
struct Memory {
    data: RwLock<Vec<u8>>,
    seen: Mutex<Vec<Seen>>,
}

impl Memory {
    fn new() -> Arc<Self> {
        Arc::new(Memory {
            data: RwLock::new(vec![0; SIZE as usize]),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl BlockDevice for Memory {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write_cache: true,
            fua: true,
            discard: true,
            write_zeroes: true,
            ..Capabilities::default()
        }
    }

    fn handle(&self, request: Request<'_>) -> Result<Reply, IoError> {
        let seen = match &request {
            Request::Read { offset, buf } => Seen::Read(*offset, buf.len()),
            Request::Write { offset, data, fua } => Seen::Write(*offset, data.len(), *fua),
            Request::Flush => Seen::Flush,
            Request::Discard { offset, len } => Seen::Discard(*offset, *len),
            Request::WriteZeroes { offset, len, unmap } => Seen::WriteZeroes(*offset, *len, *unmap),
            _ => unreachable!("a conventional device sees no zone request"),
        };
        self.seen.lock().unwrap().push(seen);
        match request {
            Request::Read { offset, buf } => self.read(offset, buf),
            Request::Write { offset, data, fua } => self.write(offset, data, fua),
            Request::Flush => Ok(()),
            Request::Discard { offset, len } | Request::WriteZeroes { offset, len, .. } => {
                let start = offset as usize;
                self.data.write().unwrap()[start..start + len as usize].fill(0);
                Ok(())
            }
            _ => Err(IoError::Unsupported),
        }
        .map(|()| Reply::Done)
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let start = offset as usize;
        buf.copy_from_slice(&self.data.read().unwrap()[start..start + buf.len()]);
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
        let start = offset as usize;
        self.data.write().unwrap()[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }
}

/// Deterministic, non-repeating-looking test data.
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn started<D: BlockDevice>(params: DeviceBuilder, read_limit: usize, device: D) -> Loopback {
    let mut kernel = Loopback::new(&params).unwrap().read_limit(read_limit);
    kernel.start(device).unwrap();
    kernel
}

#[test]
fn write_then_read_round_trips() {
    let memory = Memory::new();
    let kernel = started(DeviceBuilder::new(SIZE), usize::MAX, Arc::clone(&memory));
    for (i, len) in [512usize, 4096, 65536, 1 << 20].into_iter().enumerate() {
        let offset = (i as u64) * (1 << 20);
        let data = pattern(len, i as u32);
        assert_eq!(
            kernel.run(0, Submission::write(offset, data.clone())),
            Ok(Reply::Done)
        );
        assert_eq!(kernel.read(0, offset, len as u64), Ok(data));
    }
    kernel.stop().unwrap();
}

#[test]
fn payloads_continue_across_small_reads() {
    // 32 bytes: a read holds a header or payload only; 100 and 4129: payloads
    // split at odd places; every write is longer than a read.
    for read_limit in [32, 100, 4129] {
        let memory = Memory::new();
        let mut kernel = Loopback::new(&DeviceBuilder::new(SIZE))
            .unwrap()
            .read_limit(read_limit);
        // Queued before the worker starts, so headers and payloads share reads.
        let writes: Vec<_> = (0..8u32)
            .map(|i| {
                let data = pattern(4096 + 512 * i as usize, i);
                let offset = u64::from(i) * 65536;
                (
                    offset,
                    data.clone(),
                    kernel.submit(0, Submission::write(offset, data)).unwrap(),
                )
            })
            .collect();
        kernel.start(Arc::clone(&memory)).unwrap();
        for (offset, data, ticket) in writes {
            assert_eq!(ticket.wait(), Ok(Reply::Done));
            assert_eq!(
                kernel.read(0, offset, data.len() as u64),
                Ok(data),
                "read limit {read_limit}"
            );
        }
        kernel.stop().unwrap();
    }
}

#[test]
fn one_read_and_one_write_per_batch() {
    let memory = Memory::new();
    let mut kernel = Loopback::new(&DeviceBuilder::new(SIZE)).unwrap();
    let data = pattern(4096, 7);
    let mut tickets = vec![kernel
        .submit(0, Submission::write(0, data.clone()))
        .unwrap()];
    tickets.extend((0..15).map(|_| {
        kernel
            .submit(
                0,
                Command::Read {
                    offset: 0,
                    len: 4096,
                },
            )
            .unwrap()
    }));
    kernel.start(Arc::clone(&memory)).unwrap();
    let outcomes: Vec<_> = tickets.into_iter().map(|t| t.wait_data()).collect();
    // Served in order: every read sees the write before it.
    assert_eq!(outcomes[0], Ok(vec![]));
    assert!(outcomes[1..].iter().all(|o| o.as_deref() == Ok(&data[..])));
    let stats = kernel.counters();
    assert_eq!((stats.read_calls, stats.write_calls), (1, 1));
    assert_eq!((stats.completions, stats.refused), (16, 0));
    kernel.stop().unwrap();
}

#[test]
fn completions_larger_than_the_output_buffer_are_split() {
    // 40 reads of 1 MiB copied: far more than one output buffer holds.
    let kernel_params = DeviceBuilder::new(SIZE).transfer_mode(TransferMode::Copy);
    let mut kernel = Loopback::new(&kernel_params).unwrap();
    let memory = Memory::new();
    memory.write(0, &pattern(1 << 20, 3), false).unwrap();
    let tickets: Vec<_> = (0..40)
        .map(|_| {
            kernel
                .submit(
                    0,
                    Command::Read {
                        offset: 0,
                        len: 1 << 20,
                    },
                )
                .unwrap()
        })
        .collect();
    kernel.start(Arc::clone(&memory)).unwrap();
    for ticket in tickets {
        assert_eq!(ticket.wait_data(), Ok(pattern(1 << 20, 3)));
    }
    let stats = kernel.counters();
    assert_eq!(stats.completions, 40);
    assert!(stats.write_calls > 1, "{stats:?}");
    kernel.stop().unwrap();
}

#[test]
fn flags_and_lengths_reach_the_device() {
    let memory = Memory::new();
    let kernel = started(DeviceBuilder::new(SIZE), usize::MAX, Arc::clone(&memory));
    let ops: [Submission; 6] = [
        Submission::write(512, vec![1; 1024]).fua(),
        Command::Flush.into(),
        Command::Discard {
            offset: 4096,
            len: 8192,
        }
        .into(),
        Command::WriteZeroes {
            offset: 0,
            len: 512,
            unmap: true,
        }
        .into(),
        Command::WriteZeroes {
            offset: 1024,
            len: 512,
            unmap: false,
        }
        .into(),
        Command::Read {
            offset: 0,
            len: 2048,
        }
        .into(),
    ];
    for op in ops {
        kernel.run(0, op).unwrap();
    }
    assert_eq!(
        memory.seen(),
        [
            Seen::Write(512, 1024, true),
            Seen::Flush,
            Seen::Discard(4096, 8192),
            Seen::WriteZeroes(0, 512, true),
            Seen::WriteZeroes(1024, 512, false),
            Seen::Read(0, 2048),
        ]
    );
    let mut expected = vec![0; 2048];
    expected[512..1024].fill(1);
    assert_eq!(kernel.read(0, 0, 2048), Ok(expected));
    kernel.stop().unwrap();
}

/// A device that fails in every way a test asks for.
struct Failing;

impl BlockDevice for Failing {
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        match offset / 512 {
            0 => Err(IoError::Io),
            1 => Err(IoError::NoSpace),
            2 => Err(IoError::InvalidArgument),
            3 => Err(IoError::ReadOnly),
            4 => Err(IoError::from(Errno::EAGAIN)),
            5 => Err(std::io::Error::from_raw_os_error(Errno::ENOSPC as i32).into()),
            6 => panic!("backend bug"),
            _ => {
                buf.fill(0xab);
                Ok(())
            }
        }
    }

    fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
        Err(IoError::ReadOnly)
    }

    /// Offered, so that the kernel sends them, but served by the trait's
    /// defaults.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write_cache: true,
            discard: true,
            write_zeroes: true,
            ..Capabilities::default()
        }
    }
}

#[test]
fn errors_reach_the_submitter_as_errnos() {
    let kernel = started(DeviceBuilder::new(SIZE), usize::MAX, Failing);
    let read = |sector: u64| kernel.read(0, sector * 512, 512);
    assert_eq!(read(0), Err(IoError::Io));
    assert_eq!(read(1), Err(IoError::NoSpace));
    assert_eq!(read(2), Err(IoError::InvalidArgument));
    assert_eq!(read(3), Err(IoError::ReadOnly));
    assert_eq!(read(4), Err(IoError::from(Errno::EAGAIN)));
    assert_eq!(read(5), Err(IoError::NoSpace));
    assert_eq!(read(7), Ok(vec![0xab; 512]));
    assert_eq!(
        kernel.run(0, Submission::write(0, vec![0; 512])),
        Err(IoError::ReadOnly)
    );
    // Defaults of the trait.
    assert_eq!(kernel.run(0, Command::Flush), Ok(Reply::Done));
    assert_eq!(
        kernel.run(
            0,
            Command::Discard {
                offset: 0,
                len: 512
            }
        ),
        Err(IoError::Unsupported)
    );
    // The default write-zeroes goes through write.
    assert_eq!(
        kernel.run(
            0,
            Command::WriteZeroes {
                offset: 0,
                len: 512,
                unmap: true
            }
        ),
        Err(IoError::ReadOnly)
    );
    kernel.stop().unwrap();
}

#[test]
fn a_panicking_device_fails_the_request_and_keeps_serving() {
    // Served by the plain worker, and with a latency by the deferred one.
    let latency = "read=1ms".parse().unwrap();
    for builder in [
        DeviceBuilder::new(SIZE),
        DeviceBuilder::new(SIZE).latency(latency),
    ] {
        let kernel = started(builder, usize::MAX, Failing);
        // The panic and the next request in the same batch.
        let panicking = kernel
            .submit(
                0,
                Command::Read {
                    offset: 6 * 512,
                    len: 512,
                },
            )
            .unwrap();
        let fine = kernel
            .submit(
                0,
                Command::Read {
                    offset: 7 * 512,
                    len: 512,
                },
            )
            .unwrap();
        assert_eq!(panicking.wait(), Err(IoError::Io));
        assert_eq!(fine.wait_data(), Ok(vec![0xab; 512]));
        kernel.stop().unwrap();
    }
}

#[test]
fn malformed_requests_fail_without_reaching_the_device() {
    let memory = Memory::new();
    let params = DeviceBuilder::new(SIZE).max_io_size(64 * 1024);
    let kernel = started(params, usize::MAX, Arc::clone(&memory));
    // Unknown op (a later kernel's request type).
    assert_eq!(
        kernel.run(0, Submission::raw(42, 0, 0)),
        Err(IoError::Unsupported)
    );
    // Beyond the end of the device.
    assert_eq!(kernel.read(0, SIZE - 512, 1024), Err(IoError::Io));
    assert_eq!(
        kernel.run(
            0,
            Command::Discard {
                offset: SIZE,
                len: 512
            }
        ),
        Err(IoError::Io)
    );
    // Larger than the largest I/O: the kernel would have split it.
    assert_eq!(
        kernel.run(0, Submission::write(0, vec![1; 128 * 1024])),
        Err(IoError::InvalidArgument)
    );
    assert_eq!(
        kernel
            .submit(
                0,
                Command::Read {
                    offset: 0,
                    len: 128 * 1024
                }
            )
            .unwrap_err(),
        SubmitError::NotSent {
            op: Op::Read,
            why: NotSent::TooLarge { max: 64 * 1024 }
        }
    );
    assert_eq!(memory.seen(), []);
    // The stream is still in sync.
    assert_eq!(kernel.read(0, 0, 512), Ok(vec![0; 512]));
    kernel.stop().unwrap();
}

/// A device whose reads of sector 0 wait for a go from the test.
struct Gated {
    entered: Mutex<Sender<()>>,
    go: Mutex<Receiver<()>>,
}

impl BlockDevice for Gated {
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        if offset == 0 {
            self.entered.lock().unwrap().send(()).unwrap();
            self.go.lock().unwrap().recv().unwrap();
        }
        buf.fill(1);
        Ok(())
    }

    fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
        Ok(())
    }
}

fn gated() -> (Gated, Receiver<()>, Sender<()>) {
    let (entered_tx, entered_rx) = channel();
    let (go_tx, go_rx) = channel();
    let device = Gated {
        entered: Mutex::new(entered_tx),
        go: Mutex::new(go_rx),
    };
    (device, entered_rx, go_tx)
}

#[test]
fn a_refused_completion_is_skipped_and_the_rest_delivered() {
    // The timed-out request first in the batch (write() fails with ENOENT),
    // then last (write() returns the bytes before it).
    for timed_out_first in [true, false] {
        let (device, entered, go) = gated();
        let mut kernel = Loopback::new(&DeviceBuilder::new(SIZE)).unwrap();
        let other = || {
            kernel
                .submit(
                    0,
                    Command::Read {
                        offset: 512,
                        len: 512,
                    },
                )
                .unwrap()
        };
        let slow = |k: &Loopback| {
            k.submit(
                0,
                Command::Read {
                    offset: 0,
                    len: 512,
                },
            )
            .unwrap()
        };
        let (slow, fine) = if timed_out_first {
            let slow = slow(&kernel);
            (slow, other())
        } else {
            let fine = other();
            (slow(&kernel), fine)
        };
        kernel.start(device).unwrap();
        entered.recv().unwrap();
        assert!(kernel.time_out(&slow));
        go.send(()).unwrap();
        assert_eq!(slow.wait(), Err(IoError::from(Errno::ETIMEDOUT)));
        assert_eq!(fine.wait_data(), Ok(vec![1; 512]));
        // The worker goes on serving.
        assert_eq!(kernel.read(0, 1024, 512), Ok(vec![1; 512]));
        // Refused last, the record is refused twice: once ending the short
        // write, once when written again alone, which reports the errno.
        let refusals = if timed_out_first { 1 } else { 2 };
        let stats = kernel.counters();
        assert_eq!(
            (stats.write_calls, stats.refused, stats.completions),
            (3, refusals, 2),
            "{stats:?}"
        );
        kernel.stop().unwrap();
    }
}

#[test]
fn kill_fails_in_flight_requests_and_ends_the_workers() {
    let (device, entered, go) = gated();
    let kernel = started(DeviceBuilder::new(SIZE), usize::MAX, device);
    let in_flight = kernel
        .submit(
            0,
            Command::Read {
                offset: 0,
                len: 512,
            },
        )
        .unwrap();
    entered.recv().unwrap();
    kernel.kill();
    assert_eq!(in_flight.wait(), Err(IoError::Io));
    // The completion now meets ENODEV; the next read returns end of file.
    go.send(()).unwrap();
    assert_eq!(
        kernel.run(
            0,
            Command::Read {
                offset: 512,
                len: 512
            }
        ),
        Err(IoError::from(Errno::ENODEV))
    );
    kernel.stop().unwrap();
}

#[test]
fn graceful_stop_completes_queued_requests_first() {
    let memory = Memory::new();
    let mut kernel = Loopback::new(&DeviceBuilder::new(SIZE).queues(2)).unwrap();
    let tickets: Vec<_> = (0..64u32)
        .map(|i| {
            kernel
                .submit(
                    i % 2,
                    Submission::write(u64::from(i) * 4096, pattern(4096, i)),
                )
                .unwrap()
        })
        .collect();
    kernel.start(Arc::clone(&memory)).unwrap();
    kernel.stop().unwrap();
    for ticket in tickets {
        assert_eq!(ticket.wait_timeout(Duration::ZERO), Some(Ok(Reply::Done)));
    }
    assert_eq!(memory.seen().len(), 64);
}

#[test]
fn queues_run_concurrently() {
    /// Reads block until all four queues are inside the device at once.
    struct Rendezvous(std::sync::Barrier, AtomicBool);
    impl BlockDevice for Rendezvous {
        fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
            self.0.wait();
            self.1.store(true, Ordering::SeqCst);
            buf.fill(2);
            Ok(())
        }
        fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
            Ok(())
        }
    }
    let device = Arc::new(Rendezvous(
        std::sync::Barrier::new(4),
        AtomicBool::new(false),
    ));
    let kernel = started(
        DeviceBuilder::new(SIZE).queues(4),
        usize::MAX,
        Arc::clone(&device),
    );
    thread::scope(|s| {
        for queue in 0..4 {
            let kernel = &kernel;
            s.spawn(move || {
                assert_eq!(kernel.read(queue, 0, 512), Ok(vec![2; 512]));
            });
        }
    });
    assert!(device.1.load(Ordering::SeqCst));
    kernel.stop().unwrap();
}

#[test]
fn many_queues_many_submitters_keep_data_intact() {
    let memory = Memory::new();
    let kernel = started(
        DeviceBuilder::new(SIZE).queues(4),
        1000,
        Arc::clone(&memory),
    );
    thread::scope(|s| {
        for t in 0..4u32 {
            let kernel = &kernel;
            s.spawn(move || {
                for i in 0..50u32 {
                    let offset = u64::from(t) * (1 << 20) + u64::from(i) * 8192;
                    let data = pattern(8192, t * 1000 + i);
                    let queue = (t + i) % 4;
                    assert_eq!(
                        kernel.run(queue, Submission::write(offset, data.clone())),
                        Ok(Reply::Done)
                    );
                    assert_eq!(
                        kernel
                            .submit((queue + 1) % 4, Command::Read { offset, len: 8192 })
                            .unwrap()
                            .wait_data(),
                        Ok(data)
                    );
                }
            });
        }
    });
    kernel.stop().unwrap();
}

#[test]
fn every_transfer_mode_keeps_data_intact() {
    use bius::TransferMode;

    let modes = [
        (TransferMode::Copy, 0),
        (TransferMode::Map, 10),
        // 4 of the sizes reach the threshold
        (TransferMode::Selective { threshold: 8192 }, 8),
        // the default threshold, 128 KiB: the 1 MiB write and read
        (TransferMode::Selective { threshold: 0 }, 2),
    ];
    for (mode, expect_mapped) in modes {
        let memory = Memory::new();
        let params = DeviceBuilder::new(SIZE).queue_depth(4).transfer_mode(mode);
        let kernel = started(params, usize::MAX, Arc::clone(&memory));
        let sizes = [512usize, 1536, 4096, 8192, 1 << 20];
        let mut expected = vec![0u8; SIZE as usize];
        for (i, len) in sizes.into_iter().enumerate() {
            // offsets at every sector of a page
            let offset = (i as u64) * (1 << 20) / 2 + (i as u64 % 8) * 512;
            let data = pattern(len, i as u32 + 100);
            expected[offset as usize..offset as usize + len].copy_from_slice(&data);
            assert_eq!(
                kernel.run(0, Submission::write(offset, data.clone())),
                Ok(Reply::Done)
            );
            let read = Command::Read {
                offset,
                len: len as u64,
            };
            assert_eq!(
                kernel.submit(0, read).unwrap().wait_data(),
                Ok(data),
                "{mode}, {len} bytes"
            );
        }
        assert_eq!(*memory.data.read().unwrap(), expected, "{mode}");
        // Many at once: more than the depth's slots, so some are copied.
        let tickets: Vec<_> = (0..16u64)
            .map(|i| {
                kernel
                    .submit(0, Submission::write(i << 16, pattern(65536, i as u32)))
                    .unwrap()
            })
            .collect();
        for ticket in tickets {
            assert_eq!(ticket.wait(), Ok(Reply::Done));
        }
        for i in 0..16u64 {
            assert_eq!(
                kernel.read(0, i << 16, 65536),
                Ok(pattern(65536, i as u32)),
                "{mode}"
            );
        }
        let mapped = kernel.counters().mapped;
        match mode {
            TransferMode::Copy => assert_eq!(mapped, 0),
            TransferMode::Selective { threshold: 0 } => assert_eq!(mapped, expect_mapped),
            // 10 small ones mapped, and of the 16 + 16 large ones at least the
            // 16 reads (one at a time) and some writes
            _ => assert!(mapped > expect_mapped + 16, "{mode}: {mapped} mapped"),
        }
        kernel.stop().unwrap();
    }
}

#[test]
fn segmented_requests_reach_the_device_piece_by_piece() {
    use bius::TransferMode;

    let memory = Memory::new();
    let params = DeviceBuilder::new(SIZE).transfer_mode(TransferMode::Map);
    let mut kernel = Loopback::new(&params).unwrap().segments(4);
    kernel.start(Arc::clone(&memory)).unwrap();
    // 9 sectors from the fourth of a page: pieces of 2, 2, 2 and 3 sectors.
    let data = pattern(9 * 512, 41);
    let write = Submission::write(1536, data.clone()).fua();
    assert_eq!(kernel.run(0, write), Ok(Reply::Done));
    let read = Command::Read {
        offset: 1536,
        len: 9 * 512,
    };
    assert_eq!(
        kernel.submit(0, read).unwrap().wait_data(),
        Ok(data.clone())
    );
    let pieces = [(1536, 1024), (2560, 1024), (3584, 1024), (4608, 1536)];
    let writes = pieces.map(|(offset, len)| Seen::Write(offset, len, true));
    let reads = pieces.map(|(offset, len)| Seen::Read(offset, len));
    assert_eq!(memory.seen(), [&writes[..], &reads[..]].concat());
    assert_eq!(memory.data.read().unwrap()[1536..6144], data[..]);
    let stats = kernel.counters();
    assert_eq!((stats.mapped, stats.segmented), (2, 2));
    kernel.stop().unwrap();
}

#[test]
fn segmented_requests_keep_data_intact() {
    use bius::TransferMode;

    for segments in [2, 5, 16] {
        let memory = Memory::new();
        let params = DeviceBuilder::new(SIZE)
            .queues(2)
            .queue_depth(4)
            .transfer_mode(TransferMode::Map);
        let mut kernel = Loopback::new(&params)
            .unwrap()
            .read_limit(4096)
            .segments(segments);
        kernel.start(Arc::clone(&memory)).unwrap();
        let mut expected = vec![0u8; SIZE as usize];
        // Sizes below, at and above the segment count in sectors, at
        // several sectors of a page; the largest I/O from the sixth sector
        // fits in its slot with the gaps of 2 segments only, else it is
        // copied.
        let sizes = [512usize, 1024, 2560, 8192, 65536 + 3584, 1 << 20];
        let offset = |i: usize| (i as u64) * (1 << 20) / 2 + (i as u64 % 8) * 512;
        let tickets: Vec<_> = sizes
            .into_iter()
            .enumerate()
            .map(|(i, len)| {
                let offset = offset(i);
                let data = pattern(len, (segments * 10 + i) as u32);
                expected[offset as usize..offset as usize + len].copy_from_slice(&data);
                kernel
                    .submit(i as u32 % 2, Submission::write(offset, data))
                    .unwrap()
            })
            .collect();
        for ticket in tickets {
            assert_eq!(ticket.wait(), Ok(Reply::Done));
        }
        for (i, len) in sizes.into_iter().enumerate() {
            let offset = offset(i);
            let read = Command::Read {
                offset,
                len: len as u64,
            };
            let range = offset as usize..offset as usize + len;
            let outcome = kernel.submit(i as u32 % 2, read).unwrap().wait_data();
            assert!(
                outcome.as_deref() == Ok(&expected[range]),
                "{segments}: {len}"
            );
        }
        assert!(*memory.data.read().unwrap() == expected, "{segments}");
        let stats = kernel.counters();
        // Both directions of the sizes of at least `segments` sectors whose
        // pieces and gaps fit in a slot (1 MiB and a page).
        let segmented = sizes.iter().enumerate().filter(|&(i, &len)| {
            let room = (i % 8) * 512 + len + (segments - 1) * 512;
            len / 512 >= segments && room <= (1 << 20) + 4096
        });
        assert_eq!(
            stats.segmented,
            2 * segmented.count() as u64,
            "{segments}: {stats:?}"
        );
        // One call per piece.
        assert_eq!(
            memory.seen().len() as u64,
            2 * sizes.len() as u64 + stats.segmented * (segments as u64 - 1)
        );
        kernel.stop().unwrap();
    }
}
