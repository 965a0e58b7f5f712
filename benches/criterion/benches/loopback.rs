//! Requests per second through the worker loop with the in-process
//! transport (`bius::loopback`), for the Zero and RamDisk backends, reads
//! and writes of 4 KiB and 256 KiB, each against a plain memcpy
//! (`copy_from_slice`) of the same size: the physical limit of a RAM disk.
//!
//! Two shapes per case:
//! - `qd1`: submit one request, wait for it (a round trip through the
//!   worker thread: two thread wake-ups per request);
//! - `batch32`: submit 32 requests, then wait for all of them (the worker
//!   reads them in one or a few read() calls and writes the completions in
//!   batches, as with a deep queue).
//!
//! Criterion reports time per request and bytes per second.

use std::hint::black_box;
use std::time::Duration;

use bius::loopback::{Loopback, Submission};

use bius::Command;
use bius::{BlockDevice, DeviceBuilder};
use bius_backends::{RamDisk, Zero};
use bius_benches::{size_name, SIZES};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// Device size: small enough to prefill quickly, large enough that 256 KiB
/// requests walk over many chunks.
const DEVICE: u64 = 64 << 20;
const BATCH: usize = 32;

fn start<D: BlockDevice>(device: D) -> Loopback {
    let builder = DeviceBuilder::new(DEVICE).queues(1).queue_depth(128);
    let mut kernel = Loopback::new(&builder).expect("loopback");
    kernel.start(device).expect("workers");
    kernel
}

/// The offset of request `i` of size `len`: walks the device.
fn offset(i: u64, len: usize) -> u64 {
    (i * len as u64) % (DEVICE - len as u64)
}

fn memcpy(c: &mut Criterion) {
    let mut group = c.benchmark_group("memcpy");
    for len in SIZES {
        let src = vec![0x5au8; len];
        let mut dst = vec![0u8; len];
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function(BenchmarkId::from_parameter(size_name(len)), |b| {
            b.iter(|| {
                dst.copy_from_slice(black_box(&src));
                black_box(&mut dst);
            })
        });
    }
    group.finish();
}

fn bench_device<D: BlockDevice>(c: &mut Criterion, name: &str, device: D) {
    let kernel = start(device);
    // prefill, so that RamDisk reads hit allocated memory
    for i in 0..DEVICE / (1 << 20) {
        let data = vec![0xa5; 1 << 20];
        kernel
            .run(0, Submission::write(i << 20, data))
            .expect("prefill");
    }
    let mut group = c.benchmark_group(format!("loopback/{name}"));
    for len in SIZES {
        group.throughput(Throughput::Bytes(len as u64));
        let payload = vec![0x3cu8; len];
        let mut i = 0u64;
        group.bench_function(BenchmarkId::new("read-qd1", size_name(len)), |b| {
            b.iter(|| {
                i += 1;
                let op = Command::Read {
                    offset: offset(i, len),
                    len: len as u64,
                };
                black_box(kernel.run(0, op).expect("read"));
            })
        });
        group.bench_function(BenchmarkId::new("write-qd1", size_name(len)), |b| {
            b.iter(|| {
                i += 1;
                let data = payload.clone();
                let op = Submission::write(offset(i, len), data);
                black_box(kernel.run(0, op).expect("write"));
            })
        });
        group.throughput(Throughput::Bytes((len * BATCH) as u64));
        group.bench_function(BenchmarkId::new("read-batch32", size_name(len)), |b| {
            b.iter(|| {
                let tickets: Vec<_> = (0..BATCH)
                    .map(|_| {
                        i += 1;
                        kernel
                            .submit(
                                0,
                                Command::Read {
                                    offset: offset(i, len),
                                    len: len as u64,
                                },
                            )
                            .unwrap()
                    })
                    .collect();
                for ticket in tickets {
                    black_box(ticket.wait().expect("read"));
                }
            })
        });
        group.bench_function(BenchmarkId::new("write-batch32", size_name(len)), |b| {
            b.iter(|| {
                let tickets: Vec<_> = (0..BATCH)
                    .map(|_| {
                        i += 1;
                        let data = payload.clone();
                        kernel
                            .submit(0, Submission::write(offset(i, len), data))
                            .unwrap()
                    })
                    .collect();
                for ticket in tickets {
                    black_box(ticket.wait().expect("write"));
                }
            })
        });
    }
    group.finish();
    let stats = kernel.counters();
    eprintln!(
        "loopback/{name}: {} completions in {} read() and {} write() calls: \
         {:.1} requests per read(), {:.1} completions per write()",
        stats.completions,
        stats.read_calls,
        stats.write_calls,
        stats.completions as f64 / stats.read_calls.max(1) as f64,
        stats.completions as f64 / stats.write_calls.max(1) as f64,
    );
    kernel.stop().expect("stop");
}

fn null(c: &mut Criterion) {
    bench_device(c, "zero", Zero);
}

fn ramdisk(c: &mut Criterion) {
    bench_device(c, "ramdisk", RamDisk::new(DEVICE));
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = memcpy, null, ramdisk
}
criterion_main!(benches);
