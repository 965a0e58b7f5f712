//! The zone state machine's cost per operation (`bius::zone::ZoneSet`):
//! write, append, explicit open + close, reset, with data closures that do
//! nothing (the state machine alone) and, for writes, one that copies the
//! 4 KiB payload as the zoned RAM disk does; against a plain 4 KiB memcpy.

use std::hint::black_box;
use std::time::Duration;

use bius::zone::{ZoneGeometry, ZoneSet};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// 1 GiB in 32 MiB zones, no conventional zones, no open/active limits.
const DEVICE: u64 = 1 << 30;
const ZONE: u64 = 32 << 20;
/// 4 KiB.
const LEN: u64 = 4096;
const BYTES: usize = LEN as usize;
/// A sector, the smallest write.
const SECTOR: u64 = 512;

fn zones() -> ZoneSet {
    ZoneSet::new(ZoneGeometry::new(DEVICE, ZONE).expect("geometry"))
}

/// Writes at the write pointer of zone 0 through `f`, resetting the zone
/// when it is full (once per 8192 writes).
fn sequential_writer(set: &ZoneSet) -> impl FnMut(&mut dyn FnMut(u64, u64)) + '_ {
    let mut wp = 0;
    move |f| {
        if wp + LEN > ZONE {
            set.reset(0, |_, _| Ok(())).expect("reset");
            wp = 0;
        }
        set.write(wp, LEN, |offset, len| {
            f(offset, len);
            Ok(())
        })
        .expect("write");
        wp += LEN;
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("zones");
    group.throughput(Throughput::Elements(1));

    let src = vec![0x5au8; BYTES];
    let mut dst = vec![0u8; BYTES];
    group.bench_function("memcpy-4KiB", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        })
    });

    let set = zones();
    let mut write = sequential_writer(&set);
    group.bench_function("write-4KiB", |b| {
        b.iter(|| {
            write(&mut |s, n| {
                black_box((s, n));
            })
        })
    });

    let set = zones();
    let mut write = sequential_writer(&set);
    // the data lands in a 32 MiB buffer, as in a RAM disk's zone
    let mut store = vec![0u8; ZONE as usize];
    group.bench_function("write-4KiB+memcpy", |b| {
        b.iter(|| {
            write(&mut |offset, len| {
                let at = offset as usize;
                store[at..at + len as usize].copy_from_slice(black_box(&src));
            })
        })
    });

    let set = zones();
    let mut appended = 0;
    group.bench_function("append-4KiB", |b| {
        b.iter(|| {
            if appended + LEN > ZONE {
                set.reset(0, |_, _| Ok(())).expect("reset");
                appended = 0;
            }
            black_box(set.append(0, LEN, |_, _| Ok(())).expect("append"));
            appended += LEN;
        })
    });

    let set = zones();
    group.bench_function("open+close", |b| {
        b.iter(|| {
            set.open(black_box(ZONE)).expect("open");
            set.close(black_box(ZONE)).expect("close");
        })
    });

    let set = zones();
    group.bench_function("write-1-sector+reset", |b| {
        b.iter(|| {
            set.write(0, SECTOR, |_, _| Ok(())).expect("write");
            set.reset(black_box(0), |_, _| Ok(())).expect("reset");
        })
    });

    let set = zones();
    group.bench_function("reset-empty", |b| {
        b.iter(|| set.reset(black_box(0), |_, _| Ok(())).expect("reset"))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench
}
criterion_main!(benches);
