//! How late a device with a `--latency` completes its requests, through
//! the worker loop with the in-process transport (`bius::loopback`): a
//! RAM disk with `read=10ms` (as the VM's inflight suite), 4 KiB random
//! reads on one queue at QD1 and QD8, for each busy-wait time (the
//! builder's `poll_time`, which also bounds the worker's spin before a due
//! completion).
//!
//! Not a criterion bench: it prints, per case, the lateness the daemon
//! records (`StatsSnapshot::lateness`: from each completion's due time to the
//! worker writing it) and the overshoot the submitter sees (its wait
//! returning, minus the sending, minus 10 ms: the loopback's own wake-up
//! of the submitter included, as fio's clat includes the kernel's), p50,
//! p99 and max, and the CPU time of the submitting and worker threads per
//! request.
//!
//! ```text
//! cargo bench -p bius-benches --bench lateness            # ~25 s
//! cargo bench -p bius-benches --bench lateness -- 100     # requests per case
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bius::loopback::Loopback;
use bius::{Command, DeviceBuilder, Latency};
use bius_backends::RamDisk;

const DEVICE: u64 = 16 << 20;
const LATENCY: Duration = Duration::from_millis(10);

/// The figures of one case, in µs.
struct Case {
    depth: usize,
    poll: Duration,
    /// Daemon-side lateness: p50, p99, max.
    late: [f64; 3],
    /// Submitter-side overshoot: p50, p99, max.
    overshoot: [f64; 3],
    /// CPU time of the submitter and the worker per request (the worker's
    /// spin included).
    cpu_per_request: f64,
}

/// The CPU time of the process's threads alive now (the first field of
/// each one's `/proc/self/task/*/schedstat`, ns on the CPU).
fn cpu_time() -> Duration {
    let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten();
    let ns = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

fn quantiles(mut values: Vec<f64>) -> [f64; 3] {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.99), *values.last().unwrap_or(&0.0)]
}

/// `requests` 4 KiB reads, `depth` in flight on one queue.
fn run(depth: usize, poll: Duration, requests: u64) -> Case {
    let latency = Latency {
        read: Some(LATENCY),
        ..Latency::default()
    };
    let builder = DeviceBuilder::new(DEVICE)
        .queues(1)
        .queue_depth(64)
        .poll_time(poll)
        .latency(latency);
    let mut kernel = Loopback::new(&builder).expect("loopback");
    kernel.start(RamDisk::new(DEVICE)).expect("workers");
    let mut rng = fastrand::Rng::with_seed(28);
    let mut read = || Command::Read {
        offset: rng.u64(0..DEVICE / 4096) * 4096,
        len: 4096,
    };
    let mut in_flight = VecDeque::new();
    let mut overshoot = Vec::new();
    let cpu = cpu_time();
    for _ in 0..requests {
        if in_flight.len() == depth {
            let (sent, ticket): (Instant, bius::loopback::Ticket) =
                in_flight.pop_front().expect("in flight");
            ticket.wait().expect("read");
            overshoot.push(sent.elapsed().saturating_sub(LATENCY).as_secs_f64() * 1e6);
        }
        in_flight.push_back((Instant::now(), kernel.submit(0, read()).expect("submit")));
    }
    for (sent, ticket) in in_flight {
        ticket.wait().expect("read");
        overshoot.push(sent.elapsed().saturating_sub(LATENCY).as_secs_f64() * 1e6);
    }
    // (before the worker thread ends)
    let cpu = cpu_time().saturating_sub(cpu);
    let late = kernel.statistics().snapshot().lateness.ns;
    kernel.stop().expect("stop");
    let us = |ns: u64| ns as f64 / 1e3;
    Case {
        depth,
        poll,
        late: [us(late.p50), us(late.p99), us(late.max)],
        overshoot: quantiles(overshoot),
        cpu_per_request: cpu.as_secs_f64() * 1e6 / requests as f64,
    }
}

fn main() {
    // (cargo bench passes --bench; a number is the requests per case)
    let requests = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse::<u64>().ok())
        .unwrap_or(300);
    println!(
        "lateness of a 10 ms read latency, loopback, one queue, {requests} reads per case (µs)"
    );
    println!(
        "| QD | poll | late p50 | late p99 | late max | overshoot p50 | overshoot p99 | overshoot max | CPU/request |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for depth in [1, 8] {
        for poll in [
            Duration::ZERO,
            Duration::from_micros(50),
            Duration::from_micros(200),
        ] {
            // (QD8: four times the reads, about as long a run)
            let case = run(depth, poll, requests * depth.min(4) as u64);
            let [l50, l99, lmax] = case.late;
            let [o50, o99, omax] = case.overshoot;
            println!(
                "| {} | {} µs | {l50:.1} | {l99:.1} | {lmax:.1} | {o50:.1} | {o99:.1} | {omax:.1} | {:.1} |",
                case.depth,
                case.poll.as_micros(),
                case.cpu_per_request
            );
        }
    }
}
