//! What a device model's bookkeeping costs per request: `Model::served`
//! (a success) of each built-in profile, on the request mixes where it does the most
//! work (4 KiB random writes over a full `nvme-ssd`, where garbage
//! collection runs; random reads; a ZNS zone written sequentially; seeks
//! over an SMR disk).  Every queue's worker calls it under the model's
//! lock, so this is the most requests a second one model serves whatever
//! the queue count: it must stay far below a request's own cost through
//! the kernel (a few microseconds).

use std::hint::black_box;
use std::time::Instant;

use bius::{Command, DeviceModel, Reply};
use bius_model::{Model, Profile};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Device size of the conventional models.
const DEVICE: u64 = 1 << 30;

fn model(name: &str, size: u64) -> Model {
    Model::new(Profile::built_in(name).expect("built-in"), size).expect("model")
}

/// A seeded sequence of 4 KiB offsets over `size` bytes.
fn offsets(size: u64, count: usize) -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(42);
    (0..count).map(|_| rng.u64(0..size / 4096) * 4096).collect()
}

fn write(offset: u64) -> Command {
    Command::Write {
        offset,
        len: 4096,
        fua: false,
    }
}

fn read(offset: u64) -> Command {
    Command::Read { offset, len: 4096 }
}

/// Times `command(i)` for i = 0, 1, ... on `model`.
fn run(c: &mut Criterion, name: &str, model: &Model, command: impl Fn(usize) -> Command) {
    let mut group = c.benchmark_group("model");
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function(name, |b| {
        b.iter(|| {
            i += 1;
            black_box(model.served(command(i), Instant::now(), &Ok(Reply::Done)))
        })
    });
    group.finish();
}

fn models(c: &mut Criterion) {
    let random = offsets(DEVICE, 1 << 16);
    let at = |i: usize| random[i % random.len()];

    let ssd = model("nvme-ssd", DEVICE);
    for page in 0..DEVICE / (1 << 20) {
        let fill = Command::Write {
            offset: page << 20,
            len: 1 << 20,
            fua: false,
        };
        ssd.served(fill, Instant::now(), &Ok(Reply::Done));
    }
    run(c, "nvme-ssd randwrite 4k (full, GC)", &ssd, |i| {
        write(at(i))
    });
    run(c, "nvme-ssd randread 4k", &ssd, |i| read(at(i)));

    let zns = model("zns-ssd", DEVICE);
    let zone = Profile::built_in("zns-ssd").unwrap().zones.unwrap();
    let written = zone.writable() / 4096;
    run(c, "zns-ssd write 4k sequential", &zns, |i| {
        let i = i as u64;
        if i.is_multiple_of(written) {
            return Command::ZoneReset { offset: 0 };
        }
        write((i % written) * 4096)
    });

    let hdd = model("smr-hdd", 4 << 30);
    let far = offsets(4 << 30, 1 << 16);
    run(c, "smr-hdd randread 4k", &hdd, |i| read(far[i % far.len()]));

    let nvm = model("nvm", DEVICE);
    run(c, "nvm randread 4k", &nvm, |i| read(at(i)));
}

criterion_group!(benches, models);
criterion_main!(benches);
