//! `biusctl trace`: records every request of a running device into a file
//! (the daemon writes it: [`bius::stats::trace`] has the formats), for a
//! time or until interrupted; and the daemon's answers.
//!
//! Requests: `trace start csv|binary PATH`, `trace stop` and `trace
//! status`; `stop` and `status` answer the JSON of
//! [`bius::stats::TraceSummary`].

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bius::stats::{Statistics, TraceError, TraceFormat, TraceSummary};
use bius::Errno;
use clap::ValueEnum;
use serde::Deserialize;
use serde_json::Value;

use crate::error::CliError;
use crate::socket::{self, SendError};

/// The first word of the requests answered here.
pub const REQUEST: &str = "trace";

/// How often a waiting `biusctl trace` looks at the clock and for signals.
const TICK: Duration = Duration::from_millis(100);

/// The format of a trace file, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FormatArg {
    /// A header line, then `time_ns,queue,op,offset,len,latency_ns,result`.
    Csv,
    /// 40-byte little-endian records after a 32-byte header.
    Binary,
}

impl FormatArg {
    /// The format of `file`: as given, else CSV for a name ending in
    /// `.csv`, else binary.
    pub fn of(given: Option<FormatArg>, file: &Path) -> FormatArg {
        given.unwrap_or_else(|| match file.extension() {
            Some(ext) if ext == "csv" => FormatArg::Csv,
            _ => FormatArg::Binary,
        })
    }

    fn word(self) -> &'static str {
        match self {
            FormatArg::Csv => "csv",
            FormatArg::Binary => "binary",
        }
    }

    pub(crate) fn format(self) -> TraceFormat {
        match self {
            FormatArg::Csv => TraceFormat::Csv,
            FormatArg::Binary => TraceFormat::Binary,
        }
    }
}

/// The daemon's answer to a trace request `line`.
pub fn answer(statistics: &Statistics, line: &str) -> String {
    let mut words = line.splitn(4, ' ').skip(1);
    let summary = match (words.next(), words.next(), words.next()) {
        (Some("start"), Some(format), Some(path)) => {
            let format = match format {
                "csv" => TraceFormat::Csv,
                "binary" => TraceFormat::Binary,
                _ => return socket::failure(Errno::EINVAL, format!("unknown format `{format}`")),
            };
            return match statistics.start_trace(Path::new(path), format) {
                Ok(()) => format!("ok tracing into {path}"),
                Err(err) => {
                    let errno = match &err {
                        TraceError::File(_, io) => {
                            io.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
                        }
                        TraceError::Running(_) => Errno::EBUSY,
                        TraceError::Disabled => Errno::EOPNOTSUPP,
                    };
                    socket::failure(errno, err)
                }
            };
        }
        (Some("stop"), None, None) => statistics.stop_trace(),
        (Some("status"), None, None) => statistics.snapshot().trace,
        _ => return socket::failure(Errno::EINVAL, format!("unknown trace request `{line}`")),
    };
    match serde_json::to_string(&summary) {
        Ok(json) => format!("ok {json}"),
        Err(err) => socket::failure(Errno::EIO, format!("cannot encode: {err}")),
    }
}

/// Traces `disk` into `file` for `duration` (until SIGINT or SIGTERM
/// without one), then reports what was written.
pub fn run(
    disk: &str,
    file: &Path,
    format: FormatArg,
    duration: Option<Duration>,
) -> Result<(), CliError> {
    let file = absolute(file)?;
    let dir = Path::new(socket::SOCKET_DIR);
    let start = format!("{REQUEST} start {} {}", format.word(), file.display());
    socket::request(dir, disk, &start).map_err(CliError::Daemon)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Without the handler, a signal ends biusctl and the trace runs on
        // until `biusctl trace --stop`.
        let _ = signal_hook::flag::register(signal, Arc::clone(&interrupted));
    }
    let started = Instant::now();
    while !interrupted.load(Ordering::Relaxed)
        && duration.is_none_or(|duration| started.elapsed() < duration)
    {
        thread::sleep(TICK);
    }
    stop(disk)
}

/// Stops the trace of `disk` and reports it.
pub fn stop(disk: &str) -> Result<(), CliError> {
    let stop = format!("{REQUEST} stop");
    let answer =
        socket::request(Path::new(socket::SOCKET_DIR), disk, &stop).map_err(CliError::Daemon)?;
    let summary: Value = serde_json::from_str(&answer).map_err(|err| {
        CliError::Daemon(SendError::Refused(
            format!("the daemon's trace summary is not JSON: {err}"),
            Errno::EPROTO,
        ))
    })?;
    report(&summary)
}

/// Prints a trace summary (JSON of [`TraceSummary`]); a trace that failed
/// is an error.
fn report(summary: &Value) -> Result<(), CliError> {
    let count = |key| summary.get(key).and_then(Value::as_u64).unwrap_or(0);
    let Some(file) = summary.get("file").and_then(Value::as_str) else {
        return Err(CliError::Daemon(SendError::Refused(
            "no trace ran on this device".into(),
            Errno::ENOENT,
        )));
    };
    if let Some(reason) = summary.get("error").and_then(Value::as_str) {
        return Err(CliError::TraceFailed {
            file: file.into(),
            records: count("records"),
            reason: reason.into(),
        });
    }
    let mut stdout = io::stdout().lock();
    writeln!(
        stdout,
        "{file}: {} records, {} dropped",
        count("records"),
        count("dropped")
    )
    .map_err(CliError::Stdout)
}

/// `path` made absolute (the daemon has another working directory).
fn absolute(path: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(path).map_err(|err| CliError::Invalid {
        option: "--output",
        value: path.display().to_string(),
        reason: err.to_string(),
    })
}

/// Logs a trace summary as the daemon ends (for `create --trace`).
pub fn log_end(summary: &TraceSummary) {
    let Some(file) = &summary.file else {
        return;
    };
    match &summary.error {
        Some(error) => log::error!(
            "trace into {}: stopped after {} records: {error}",
            file.display(),
            summary.records
        ),
        None => log::info!(
            "trace into {}: {} records, {} dropped",
            file.display(),
            summary.records,
            summary.dropped
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_follows_the_name_unless_given() {
        let of = |given, name: &str| FormatArg::of(given, Path::new(name));
        assert_eq!(of(None, "t.csv"), FormatArg::Csv);
        assert_eq!(of(None, "t.bin"), FormatArg::Binary);
        assert_eq!(of(Some(FormatArg::Binary), "t.csv"), FormatArg::Binary);
    }

    #[test]
    fn the_daemon_answers_starts_stops_and_bad_requests() {
        let dir = std::env::temp_dir().join(format!("biusctl-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stats = Statistics::default();
        let file = dir.join("t.csv");
        let start = format!("trace start csv {}", file.display());
        assert!(answer(&stats, &start).starts_with("ok tracing into "));
        assert!(answer(&stats, &start).starts_with("error errno=16 "));
        let status: Value =
            serde_json::from_str(answer(&stats, "trace status").strip_prefix("ok ").unwrap())
                .unwrap();
        assert_eq!(status["active"], true);
        let stop: Value =
            serde_json::from_str(answer(&stats, "trace stop").strip_prefix("ok ").unwrap())
                .unwrap();
        assert_eq!(stop["records"], 0);
        assert!(report(&stop).is_ok());
        assert!(answer(&stats, "trace start xml /tmp/x").starts_with("error errno=22 "));
        assert!(answer(&stats, "trace melt").starts_with("error errno=22 "));
        let nowhere = format!("trace start binary {}", dir.join("no/t").display());
        assert!(answer(&stats, &nowhere).starts_with("error errno=2 "));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_trace_is_an_error_with_its_errno() {
        let summary = serde_json::json!({
            "active": false, "file": "/full/t", "records": 3, "dropped": 9,
            "error": "No space left on device (os error 28)"
        });
        let err = report(&summary).unwrap_err();
        assert_eq!(err.errno(), Errno::ENOSPC);
        let none = serde_json::json!({"active": false, "file": null, "records": 0, "dropped": 0, "error": null});
        assert_eq!(report(&none).unwrap_err().errno(), Errno::ENOENT);
    }
}
