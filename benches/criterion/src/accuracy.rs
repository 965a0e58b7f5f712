//! The device models against measurements of the real drives: the
//! reference files (`benches/criterion/accuracy/*.toml`: each row a workload, a
//! metric, the value measured on the drive and where it comes from), and
//! a closed-loop driver that runs each row's workload on the model alone,
//! through [`DeviceModel::served`] in simulated time (no sleeping), and
//! says what the model gives.
//!
//! ```
//! let reference = bius_benches::accuracy::Reference::built_in("zn540")?;
//! let row = &reference.rows[0];
//! let result = reference.evaluate(row)?;
//! println!("{}: measured {}, modelled {}", row.name, row.measured, result.modelled);
//! # Ok::<(), bius_benches::accuracy::AccuracyError>(())
//! ```

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use bius::{Command, DeviceModel, Errno, Reply};
use bius_model::time::{Nanos, SECOND};
use bius_model::{Model, Profile, ProfileError};
use serde::Deserialize;

/// The reference files: name and TOML text.
const BUILT_IN: [(&str, &str); 3] = [
    ("zn540", include_str!("../accuracy/zn540.toml")),
    ("xg6", include_str!("../accuracy/xg6.toml")),
    ("970pro", include_str!("../accuracy/970pro.toml")),
];

/// Why a reference could not be read or run.
#[derive(Debug, thiserror::Error)]
pub enum AccuracyError {
    /// No reference file of that name.
    #[error("no reference `{0}` (known: zn540, xg6, 970pro)")]
    Unknown(String),
    /// The reference file is not valid TOML of the expected form.
    #[error("{0}: {1}")]
    Parse(String, String),
    /// The profile or its overrides were refused.
    #[error("{0}")]
    Profile(#[from] ProfileError),
    /// A row asks for what the driver cannot run.
    #[error("row `{0}`: {1}")]
    Workload(String, String),
}

impl AccuracyError {
    /// The errno of the error: `ENOENT` for an unknown reference,
    /// `EINVAL` otherwise.
    pub fn errno(&self) -> Errno {
        match self {
            AccuracyError::Unknown(_) => Errno::ENOENT,
            _ => Errno::EINVAL,
        }
    }
}

/// A reference file: the drive, the profile that models it, and the rows.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// The drive measured.
    pub drive: String,
    /// The built-in profile that models it.
    pub profile: String,
    /// `section.key=value` overrides for the drive's real geometry.
    #[serde(default)]
    pub set: Vec<String>,
    /// The modelled device's capacity.
    #[serde(with = "bius_model::quantity::bytes")]
    pub capacity: u64,
    /// Where the measurements come from (repository and commit, or
    /// document).
    pub source: String,
    /// The rows.
    #[serde(rename = "row")]
    pub rows: Vec<Row>,
}

/// One measurement of the real drive.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// What was measured.
    pub name: String,
    /// Calibration (the profile was fitted to it: ±10 %) or validation
    /// (not fitted: ±20 %).
    pub set: Set,
    /// The workload.
    pub workload: Workload,
    /// The metric.
    pub metric: Metric,
    /// Its value on the drive, in `unit`.
    pub measured: f64,
    /// `IOPS`, `MiB/s`, `MB/s`, `us` or `ms`.
    pub unit: String,
    /// Where the value is (path in the source, field).
    pub source: String,
    /// A row the model misses, and why (the check then reports it instead
    /// of failing).
    #[serde(default)]
    pub miss: Option<String>,
    /// The VM models suite's job that measures the row through BIUS (see
    /// `benches/vm/guest/models.sh`), if it runs one.
    #[serde(default)]
    pub vm: Option<String>,
}

/// Which set a row is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Set {
    /// The profile was fitted to it.
    Calibration,
    /// It checks the fitted profile.
    Validation,
}

impl Set {
    /// The largest error allowed: ±10 % (calibration), ±20 % (validation).
    pub fn target(self) -> f64 {
        match self {
            Set::Calibration => 0.10,
            Set::Validation => 0.20,
        }
    }
}

/// What is measured of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Requests a second.
    Iops,
    /// Bytes a second.
    Bandwidth,
    /// Mean latency.
    LatMean,
    /// Median latency.
    LatP50,
    /// 99th percentile latency.
    LatP99,
}

/// A workload, as the source ran it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// `write`, `append` (zones written sequentially), `read`
    /// (sequential), `randread` (of data written first), `randwrite`
    /// (into a fresh device), `reset`, `finish`, `close` (one zone
    /// operation after `fill`).
    pub op: String,
    /// Request size.
    #[serde(with = "bius_model::quantity::bytes", default = "four_k")]
    pub bs: u64,
    /// Requests in flight per job.
    #[serde(default = "one")]
    pub qd: u32,
    /// Jobs (zoned: each in zones of its own).
    #[serde(default = "one")]
    pub jobs: u32,
    /// Bytes the requests span (conventional devices; 0: the device).
    #[serde(with = "bius_model::quantity::bytes", default)]
    pub span: u64,
    /// Zone operations: bytes written into the zone first (negative: the
    /// zone's capacity less that many bytes).
    #[serde(default)]
    pub fill: i64,
    /// Zone operations: the zone was finished before the operation.
    #[serde(default)]
    pub finished: bool,
}

fn four_k() -> u64 {
    4096
}

fn one() -> u32 {
    1
}

/// What the model gave for a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluation {
    /// The model's value, in the row's unit.
    pub modelled: f64,
    /// modelled / measured - 1.
    pub error: f64,
    /// Within the row's target.
    pub within: bool,
}

impl Reference {
    /// A built-in reference file by name (`zn540`, `xg6`, `970pro`).
    pub fn built_in(name: &str) -> Result<Reference, AccuracyError> {
        let (_, text) = BUILT_IN
            .iter()
            .find(|(known, _)| *known == name)
            .ok_or_else(|| AccuracyError::Unknown(name.to_string()))?;
        toml::from_str(text).map_err(|err| AccuracyError::Parse(name.to_string(), err.to_string()))
    }

    /// The names of the built-in reference files.
    pub fn built_in_names() -> impl Iterator<Item = &'static str> {
        BUILT_IN.iter().map(|(name, _)| *name)
    }

    /// The profile with the reference's overrides.
    pub fn profile(&self) -> Result<Profile, AccuracyError> {
        let mut profile = Profile::built_in(&self.profile)?;
        for assignment in &self.set {
            let (key, value) = assignment.split_once('=').ok_or_else(|| {
                AccuracyError::Parse(self.drive.clone(), format!("`{assignment}`: not KEY=VALUE"))
            })?;
            profile.set(key, &format!("\"{value}\""))?;
        }
        Ok(profile)
    }

    /// Runs `row`'s workload on a fresh model and compares.
    pub fn evaluate(&self, row: &Row) -> Result<Evaluation, AccuracyError> {
        let profile = self.profile()?;
        let mut driver = Driver::new(profile, self.capacity)?;
        let bad = |why: &str| AccuracyError::Workload(row.name.clone(), why.to_string());
        let run = driver.run(&row.workload).map_err(|why| bad(&why))?;
        let value = match row.metric {
            Metric::Iops => run.iops(),
            Metric::Bandwidth => run.iops() * row.workload.bs as f64,
            Metric::LatMean => run.mean(),
            Metric::LatP50 => run.percentile(0.50),
            Metric::LatP99 => run.percentile(0.99),
        };
        let scale = match row.unit.as_str() {
            "IOPS" => 1.0,
            "MiB/s" => 1.0 / f64::from(1 << 20),
            "MB/s" => 1e-6,
            "GB/s" => 1e-9,
            "us" => 1e-3,
            "ms" => 1e-6,
            unit => return Err(bad(&format!("unknown unit `{unit}`"))),
        };
        let modelled = value * scale;
        let error = modelled / row.measured - 1.0;
        Ok(Evaluation {
            modelled,
            error,
            within: error.abs() <= row.set.target(),
        })
    }
}

/// The latencies of a run's measured part, and how long it took.
struct RunResult {
    latencies: Vec<Nanos>,
    span: Nanos,
}

impl RunResult {
    fn iops(&self) -> f64 {
        self.latencies.len() as f64 * SECOND as f64 / self.span.max(1) as f64
    }

    /// Mean latency in nanoseconds.
    fn mean(&self) -> f64 {
        self.latencies.iter().sum::<Nanos>() as f64 / self.latencies.len().max(1) as f64
    }

    fn percentile(&self, fraction: f64) -> f64 {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        let at = ((sorted.len() as f64 * fraction).ceil() as usize).clamp(1, sorted.len().max(1));
        sorted.get(at - 1).copied().unwrap_or(0) as f64
    }
}

/// A model driven in simulated time.
struct Driver {
    model: Model,
    base: Instant,
    zoned: bool,
    zone_size: u64,
    zone_capacity: u64,
    capacity: u64,
    /// Device time of the last request issued.
    now: Nanos,
    rng: fastrand::Rng,
}

/// Requests a throughput run issues at least; the first quarter of their
/// completions warms up.
const REQUESTS: usize = 8000;

/// Bytes a write run writes at least: many times the write buffers, so
/// that it measures the flash.
const WRITTEN: u64 = 512 << 20;

impl Driver {
    fn new(profile: Profile, capacity: u64) -> Result<Driver, AccuracyError> {
        let zones = profile.zone_geometry(capacity)?;
        let model = Model::new(profile, capacity)?;
        Ok(Driver {
            model,
            base: Instant::now(),
            zoned: zones.is_some(),
            zone_size: zones.as_ref().map_or(capacity, |z| z.zone_size()),
            zone_capacity: zones.as_ref().map_or(capacity, |z| z.zone_capacity()),
            capacity,
            now: 0,
            rng: fastrand::Rng::with_seed(28),
        })
    }

    /// Serves `command` (answered `reply`) arriving at `at`; when done.
    fn serve(&mut self, command: Command, at: Nanos, reply: Reply) -> Nanos {
        self.now = self.now.max(at);
        let arrived = self.base + Duration::from_nanos(self.now);
        let due = self
            .model
            .served(command, arrived, &Ok(reply))
            .unwrap_or(arrived);
        due.saturating_duration_since(self.base).as_nanos() as Nanos
    }

    /// Writes `len` bytes at `offset` in 1 MiB requests one at a time
    /// (untimed set-up), then lets a second pass (what is left of a
    /// program unit stays in the buffer, as on the drive).
    fn fill(&mut self, offset: u64, len: u64) {
        let mut at = offset;
        while at < offset + len {
            let piece = (1 << 20).min(offset + len - at);
            let write = Command::Write {
                offset: at,
                len: piece,
                fua: false,
            };
            let done = self.serve(write, self.now, Reply::Done);
            self.now = done;
            at += piece;
        }
        self.now += SECOND;
    }

    /// Flushes and lets a second pass: the device is idle.
    fn settle(&mut self) {
        let done = self.serve(Command::Flush, self.now, Reply::Done);
        self.now = done + SECOND;
    }

    fn run(&mut self, workload: &Workload) -> Result<RunResult, String> {
        match workload.op.as_str() {
            "write" | "append" | "read" | "randread" | "randwrite" => self.stream(workload),
            "reset" | "finish" | "close" => self.zone_op(workload),
            op => Err(format!("unknown op `{op}`")),
        }
    }

    /// One zone operation on zone 1 after writing `fill` bytes into it.
    fn zone_op(&mut self, workload: &Workload) -> Result<RunResult, String> {
        if !self.zoned {
            return Err("zone operations need a zoned profile".into());
        }
        let zone = self.zone_size;
        let fill = match workload.fill {
            fill if fill < 0 => self.zone_capacity - fill.unsigned_abs(),
            fill => fill as u64,
        };
        if fill > 0 {
            self.fill(zone, fill);
        }
        if workload.finished {
            let done = self.serve(Command::ZoneFinish { offset: zone }, self.now, Reply::Done);
            self.now = done;
            self.settle();
        }
        let command = match workload.op.as_str() {
            "reset" => Command::ZoneReset { offset: zone },
            "finish" => Command::ZoneFinish { offset: zone },
            _ => Command::ZoneClose { offset: zone },
        };
        let start = self.now;
        let done = self.serve(command, start, Reply::Done);
        Ok(RunResult {
            latencies: vec![done - start],
            span: done - start,
        })
    }

    /// A closed loop: `jobs` × `qd` requests in flight, each job issuing
    /// its next as one completes.
    fn stream(&mut self, workload: &Workload) -> Result<RunResult, String> {
        let (op, bs) = (workload.op.as_str(), workload.bs);
        let jobs = workload.jobs.max(1) as u64;
        let span = match workload.span {
            0 => self.capacity,
            span => span.min(self.capacity),
        };
        // Where each job reads or writes: zoned, zones of its own (job j:
        // zones 1 + j, 1 + j + jobs, ...); else a share of the span.
        let region = if self.zoned {
            self.zone_capacity
        } else {
            span / jobs
        };
        let (zoned, zone_size) = (self.zoned, self.zone_size);
        let first = |job: u64| {
            if zoned {
                (1 + job) * zone_size
            } else {
                job * region
            }
        };
        match op {
            "read" | "randread" => {
                for job in 0..jobs {
                    self.fill(first(job), region);
                }
            }
            _ => {}
        }
        let mut cursor: Vec<(u64, u64)> = (0..jobs).map(|job| (first(job), 0)).collect();
        let mut pending = BinaryHeap::new();
        let start = self.now;
        // (completion, job, issued at; None: a job's first requests)
        for job in 0..jobs {
            for _ in 0..workload.qd.max(1) {
                pending.push(Reverse((start, job, None)));
            }
        }
        // Completions in time order; the first quarter warms up.
        let requests = match op {
            "write" | "append" | "randwrite" => REQUESTS.max((WRITTEN / bs) as usize),
            _ => REQUESTS,
        };
        let mut completions: Vec<(Nanos, Nanos)> = Vec::with_capacity(requests);
        let mut issued = 0;
        while let Some(Reverse((at, job, issued_at))) = pending.pop() {
            if let Some(issued_at) = issued_at {
                completions.push((at, at - issued_at));
            }
            if issued >= requests {
                continue;
            }
            issued += 1;
            let (zone, within) = cursor[job as usize];
            let (command, reply) = match op {
                "write" | "append" | "read" => {
                    let (mut zone, mut within) = (zone, within);
                    if within + bs > region {
                        if op == "read" || !self.zoned {
                            within = 0;
                        } else {
                            zone += jobs * self.zone_size;
                            within = 0;
                        }
                    }
                    cursor[job as usize] = (zone, within + bs);
                    let offset = zone + within;
                    match op {
                        "append" => (
                            Command::ZoneAppend {
                                offset: zone,
                                len: bs,
                                fua: false,
                            },
                            Reply::Appended(offset),
                        ),
                        "read" => (Command::Read { offset, len: bs }, Reply::Done),
                        _ => (
                            Command::Write {
                                offset,
                                len: bs,
                                fua: false,
                            },
                            Reply::Done,
                        ),
                    }
                }
                _ => {
                    let offset = zone + self.rng.u64(0..region / bs) * bs;
                    let command = if op == "randread" {
                        Command::Read { offset, len: bs }
                    } else {
                        Command::Write {
                            offset,
                            len: bs,
                            fua: false,
                        }
                    };
                    (command, Reply::Done)
                }
            };
            let done = self.serve(command, at, reply);
            pending.push(Reverse((done, job, Some(at))));
        }
        let warm = completions.len() / 4;
        let (Some(&(from, _)), Some(&(to, _))) = (completions.get(warm), completions.last()) else {
            return Err("no request completed".into());
        };
        Ok(RunResult {
            span: to - from,
            latencies: completions[warm + 1..]
                .iter()
                .map(|&(_, lat)| lat)
                .collect(),
        })
    }
}
