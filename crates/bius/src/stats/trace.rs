//! Request traces: every request a device serves, written to a file by a
//! thread of its own.  The workers hand records over through a bounded
//! channel and never wait for the writer: what does not fit is dropped and
//! counted.
//!
//! # Formats
//!
//! One record per request, in completion order per queue (sort by
//! `time_ns` for one timeline):
//!
//! | field | meaning |
//! |---|---|
//! | `time_ns` | when the worker received the request, ns since the trace started |
//! | `queue` | hardware queue |
//! | `op` | [`Op`]: its name in CSV, its [code](Op::trace_code) in binary |
//! | `offset` | byte offset (a zone operation's zone; 0 for flush and reset-all) |
//! | `len` | bytes (0 for flush and zone management) |
//! | `latency_ns` | service time in the daemon |
//! | `result` | 0, or `-errno` |
//!
//! [`TraceFormat::Csv`]: a header line `time_ns,queue,op,offset,len,latency_ns,result`,
//! then a line per request.
//!
//! [`TraceFormat::Binary`], little-endian: a 32-byte header (magic
//! `BIUSTRC1`, `u32` version 1, `u32` record size 40, `u64` wall-clock
//! start in ns since the Unix epoch, `u64` 0), then 40-byte records:
//! `u64 time_ns, u64 offset, u64 latency_ns, u32 len, u16 queue, u8 op,
//! u8 0, i32 result, u32 0`.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::op::Op;

/// Records the channel holds before the workers drop them: 2.5 MiB.
const CHANNEL_RECORDS: usize = 1 << 16;

/// The binary format's magic.
pub const TRACE_MAGIC: &[u8; 8] = b"BIUSTRC1";

/// Bytes of a binary record.
pub const TRACE_RECORD_SIZE: usize = 40;

/// How a trace file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum TraceFormat {
    /// Text, a line per request.
    Csv,
    /// 40-byte records after a 32-byte header.
    Binary,
}

/// One request, as traced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRecord {
    /// Arrival, ns since the trace started.
    pub time_ns: u64,
    /// Hardware queue.
    pub queue: u16,
    /// Operation.
    pub op: Op,
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub len: u32,
    /// Service time in ns.
    pub latency_ns: u64,
    /// 0 or `-errno`.
    pub result: i32,
}

impl TraceRecord {
    /// The binary encoding.
    pub fn to_bytes(&self) -> [u8; TRACE_RECORD_SIZE] {
        let mut bytes = [0u8; TRACE_RECORD_SIZE];
        bytes[0..8].copy_from_slice(&self.time_ns.to_le_bytes());
        bytes[8..16].copy_from_slice(&self.offset.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.latency_ns.to_le_bytes());
        bytes[24..28].copy_from_slice(&self.len.to_le_bytes());
        bytes[28..30].copy_from_slice(&self.queue.to_le_bytes());
        bytes[30] = self.op.trace_code();
        bytes[32..36].copy_from_slice(&self.result.to_le_bytes());
        bytes
    }

    /// The record of a binary encoding; `None` for an unknown op code.
    pub fn from_bytes(bytes: &[u8; TRACE_RECORD_SIZE]) -> Option<TraceRecord> {
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        Some(TraceRecord {
            time_ns: u64_at(0),
            offset: u64_at(8),
            latency_ns: u64_at(16),
            len: u32::from_le_bytes(bytes[24..28].try_into().unwrap()),
            queue: u16::from_le_bytes(bytes[28..30].try_into().unwrap()),
            op: Op::from_trace_code(bytes[30])?,
            result: i32::from_le_bytes(bytes[32..36].try_into().unwrap()),
        })
    }

    fn write_csv(&self, out: &mut impl Write) -> io::Result<()> {
        writeln!(
            out,
            "{},{},{},{},{},{},{}",
            self.time_ns,
            self.queue,
            self.op.name(),
            self.offset,
            self.len,
            self.latency_ns,
            self.result
        )
    }
}

/// A trace that ended, or is running, summed up.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TraceSummary {
    /// Whether it is running.
    pub active: bool,
    /// Its file.
    pub file: Option<PathBuf>,
    /// Records written (or handed to the writer, while it runs).
    pub records: u64,
    /// Records dropped because the writer fell behind, or after it failed.
    pub dropped: u64,
    /// Why the writer stopped early, if it did (`ENOSPC` on a full disk).
    pub error: Option<String>,
}

/// Why a trace could not start.
#[derive(Debug)]
pub enum TraceError {
    /// One runs already, into this file.
    Running(PathBuf),
    /// The file could not be created or written.
    File(PathBuf, io::Error),
    /// The device keeps no statistics.
    Disabled,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Running(path) => {
                write!(f, "a trace into {} runs already", path.display())
            }
            TraceError::Disabled => {
                f.write_str("the device keeps no statistics, so no traces either")
            }
            TraceError::File(path, err) => {
                // Without io::Error's " (os error N)": reports add the errno.
                let text = err.to_string();
                let text = text.split(" (os error").next().unwrap_or(&text);
                write!(f, "{}: {text}", path.display())
            }
        }
    }
}

impl std::error::Error for TraceError {}

/// A running trace: the workers' end of the channel and the counts.
struct Running {
    sender: SyncSender<TraceRecord>,
    started: Instant,
}

/// What the writer thread shares with the workers.
#[derive(Default)]
struct Shared {
    running: RwLock<Option<Running>>,
    /// Whether `running` is `Some`: what the workers look at first, so
    /// that without a trace no request touches the lock's cache line.
    active: AtomicBool,
    sent: AtomicU64,
    dropped: AtomicU64,
}

/// The current or last trace of a device.
#[derive(Default)]
pub(crate) struct Tracer {
    shared: Arc<Shared>,
    /// The writer, its file, and the last trace's outcome.
    writer: Mutex<WriterState>,
}

#[derive(Default)]
struct WriterState {
    /// Returns the records it wrote and why it stopped early, if it did.
    thread: Option<JoinHandle<(u64, Option<String>)>>,
    file: Option<PathBuf>,
    last: TraceSummary,
}

impl Tracer {
    /// Starts tracing into a new file at `path`.
    pub(crate) fn start(&self, path: &Path, format: TraceFormat) -> Result<(), TraceError> {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if let (Some(file), true) = (&writer.file, writer.thread.is_some()) {
            return Err(TraceError::Running(file.clone()));
        }
        let file_error = |err| TraceError::File(path.to_path_buf(), err);
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(file_error)?);
        write_header(&mut out, format).map_err(file_error)?;
        let (sender, receiver) = sync_channel(CHANNEL_RECORDS);
        self.shared.sent.store(0, Ordering::Relaxed);
        self.shared.dropped.store(0, Ordering::Relaxed);
        let thread = thread::Builder::new()
            .name("bius-trace".into())
            .spawn(move || write_records(receiver, out, format))
            .map_err(file_error)?;
        self.set_running(Some(Running {
            sender,
            started: Instant::now(),
        }));
        writer.thread = Some(thread);
        writer.file = Some(path.to_path_buf());
        Ok(())
    }

    /// Starts (`Some`) or ends (`None`: the writer ends once it has
    /// written the rest) the workers' side of a trace.
    fn set_running(&self, running: Option<Running>) {
        let mut slot = self
            .shared
            .running
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        self.shared
            .active
            .store(running.is_some(), Ordering::Release);
        *slot = running;
    }

    /// Hands a record of a request that arrived at `arrived` to the
    /// writer, if a trace runs; `record` makes it, given the arrival in ns
    /// since the trace started.
    pub(crate) fn record(&self, arrived: Instant, record: impl FnOnce(u64) -> TraceRecord) {
        if !self.shared.active.load(Ordering::Acquire) {
            return;
        }
        let running = self
            .shared
            .running
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(running) = running.as_ref() else {
            return;
        };
        let time_ns = arrived
            .saturating_duration_since(running.started)
            .as_nanos() as u64;
        match running.sender.try_send(record(time_ns)) {
            Ok(()) => self.shared.sent.fetch_add(1, Ordering::Relaxed),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed)
            }
        };
    }

    /// Stops the trace, if one runs, and waits for its file to be written;
    /// the summary of the last trace.
    pub(crate) fn stop(&self) -> TraceSummary {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        // Dropping the sender ends the writer once it has written the rest.
        self.set_running(None);
        self.join(&mut writer);
        writer.last.clone()
    }

    /// Joins a writer that ended (or is ending: the sender is gone) and
    /// keeps its summary.
    fn join(&self, writer: &mut WriterState) {
        let Some(thread) = writer.thread.take() else {
            return;
        };
        let (written, error) = thread
            .join()
            .unwrap_or_else(|_| (0, Some("the trace writer panicked".into())));
        let sent = self.shared.sent.load(Ordering::Relaxed);
        writer.last = TraceSummary {
            active: false,
            file: writer.file.clone(),
            records: written,
            dropped: self.shared.dropped.load(Ordering::Relaxed) + sent.saturating_sub(written),
            error,
        };
    }

    /// The running trace, or the last one.  A writer that failed (a full
    /// disk) ends the trace: the workers' records are dropped from then on.
    pub(crate) fn summary(&self) -> TraceSummary {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if writer.thread.as_ref().is_some_and(JoinHandle::is_finished) {
            self.set_running(None);
            self.join(&mut writer);
        }
        if writer.thread.is_none() {
            return writer.last.clone();
        }
        TraceSummary {
            active: true,
            file: writer.file.clone(),
            records: self.shared.sent.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
            error: None,
        }
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn write_header(out: &mut impl Write, format: TraceFormat) -> io::Result<()> {
    match format {
        TraceFormat::Csv => writeln!(out, "time_ns,queue,op,offset,len,latency_ns,result"),
        TraceFormat::Binary => {
            let start_ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos() as u64);
            let mut header = [0u8; 32];
            header[0..8].copy_from_slice(TRACE_MAGIC);
            header[8..12].copy_from_slice(&1u32.to_le_bytes());
            header[12..16].copy_from_slice(&(TRACE_RECORD_SIZE as u32).to_le_bytes());
            header[16..24].copy_from_slice(&start_ns.to_le_bytes());
            out.write_all(&header)
        }
    }
}

/// The writer thread: writes what arrives until the channel closes; on a
/// write error, stops reading (the workers' records are then dropped and
/// counted).  Returns the records written and the error's text.
fn write_records(
    receiver: Receiver<TraceRecord>,
    mut out: BufWriter<File>,
    format: TraceFormat,
) -> (u64, Option<String>) {
    let mut written = 0;
    let mut result = Ok(());
    for record in receiver.iter() {
        result = match format {
            TraceFormat::Csv => record.write_csv(&mut out),
            TraceFormat::Binary => out.write_all(&record.to_bytes()),
        };
        if result.is_err() {
            break;
        }
        written += 1;
    }
    drop(receiver);
    // Records still in the buffer are not written if the flush fails.
    let buffered = (out.buffer().len() / record_bytes(format)) as u64;
    match result.and_then(|()| out.flush()) {
        Ok(()) => (written, None),
        Err(err) => (written.saturating_sub(buffered), Some(err.to_string())),
    }
}

/// Bytes of one record, to count those left in a buffer (CSV lines vary:
/// counted as their shortest, 20 bytes).
fn record_bytes(format: TraceFormat) -> usize {
    match format {
        TraceFormat::Csv => 20,
        TraceFormat::Binary => TRACE_RECORD_SIZE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(time_ns: u64) -> TraceRecord {
        TraceRecord {
            time_ns,
            queue: 3,
            op: Op::ZoneAppend,
            offset: 1 << 40,
            len: 4096,
            latency_ns: 1234,
            result: -5,
        }
    }

    #[test]
    fn binary_records_round_trip() {
        let rec = record(77);
        assert_eq!(TraceRecord::from_bytes(&rec.to_bytes()), Some(rec));
        let mut bytes = rec.to_bytes();
        bytes[30] = 200;
        assert_eq!(TraceRecord::from_bytes(&bytes), None);
    }

    #[test]
    fn a_trace_writes_every_record_and_stops() {
        let dir = std::env::temp_dir().join(format!("bius-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tracer = Tracer::default();
        let now = Instant::now();
        tracer.record(now, record);
        assert_eq!(tracer.summary(), TraceSummary::default());
        for format in [TraceFormat::Csv, TraceFormat::Binary] {
            let path = dir.join(format!("{format:?}"));
            tracer.start(&path, format).unwrap();
            assert!(matches!(
                tracer.start(&path, format),
                Err(TraceError::Running(_))
            ));
            for _ in 0..1000 {
                tracer.record(Instant::now(), record);
            }
            assert!(tracer.summary().active);
            let summary = tracer.stop();
            assert_eq!((summary.records, summary.dropped), (1000, 0));
            assert_eq!(summary.error, None);
            let bytes = std::fs::read(&path).unwrap();
            match format {
                TraceFormat::Csv => {
                    let text = String::from_utf8(bytes).unwrap();
                    assert_eq!(text.lines().count(), 1001);
                    assert!(text
                        .lines()
                        .nth(1)
                        .unwrap()
                        .ends_with(",3,zone_append,1099511627776,4096,1234,-5"));
                }
                TraceFormat::Binary => {
                    assert_eq!(bytes.len(), 32 + 1000 * TRACE_RECORD_SIZE);
                    assert_eq!(&bytes[..8], TRACE_MAGIC);
                    let first: &[u8; TRACE_RECORD_SIZE] = bytes[32..72].try_into().unwrap();
                    assert_eq!(TraceRecord::from_bytes(first).unwrap().op, Op::ZoneAppend);
                }
            }
        }
        let missing = dir.join("no/such/dir/trace");
        assert!(matches!(
            tracer.start(&missing, TraceFormat::Csv),
            Err(TraceError::File(..))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_full_disk_stops_the_writer_and_counts_the_rest_as_dropped() {
        if !Path::new("/dev/full").exists() {
            return;
        }
        let tracer = Tracer::default();
        tracer
            .start(Path::new("/dev/full"), TraceFormat::Binary)
            .unwrap();
        // More than the writer's buffer holds, so that it writes.
        for _ in 0..100_000 {
            tracer.record(Instant::now(), record);
        }
        let summary = tracer.stop();
        assert!(summary.error.unwrap().contains("No space left"));
        assert_eq!(summary.records + summary.dropped, 100_000);
    }
}
