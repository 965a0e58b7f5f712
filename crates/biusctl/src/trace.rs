//! `biusctl trace`: records every request of a running device into a file
//! (the daemon writes it: [`bius::stats::trace`] has the formats), for a
//! time or until interrupted, through the daemon's control socket
//! ([`bius::control_socket`]).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bius::control_socket::{ClientError, ControlClient, ControlError};
use bius::stats::{TraceFormat, TraceSummary};
use bius::Errno;
use clap::ValueEnum;
use serde::Deserialize;

use crate::error::CliError;

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

    pub(crate) fn format(self) -> TraceFormat {
        match self {
            FormatArg::Csv => TraceFormat::Csv,
            FormatArg::Binary => TraceFormat::Binary,
        }
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
    ControlClient::connect_disk(disk)
        .and_then(|mut client| client.start_trace(file, format.format()))
        .map_err(CliError::Daemon)?;
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
    let summary = ControlClient::connect_disk(disk)
        .and_then(|mut client| client.stop_trace())
        .map_err(CliError::Daemon)?;
    report(&summary)
}

/// Prints a trace summary; a trace that failed is an error.
fn report(summary: &TraceSummary) -> Result<(), CliError> {
    let Some(file) = &summary.file else {
        let none = ControlError::failed(Errno::ENOENT, "no trace ran on this device");
        return Err(CliError::Daemon(ClientError::Refused(none)));
    };
    if let Some(reason) = &summary.error {
        return Err(CliError::TraceFailed {
            file: file.display().to_string(),
            records: summary.records,
            reason: reason.clone(),
        });
    }
    let mut stdout = io::stdout().lock();
    writeln!(
        stdout,
        "{}: {} records, {} dropped",
        file.display(),
        summary.records,
        summary.dropped
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
    fn a_failed_trace_is_an_error_with_its_errno() {
        let summary = TraceSummary {
            file: Some("/full/t".into()),
            records: 3,
            dropped: 9,
            error: Some("No space left on device (os error 28)".into()),
            ..TraceSummary::default()
        };
        let err = report(&summary).unwrap_err();
        assert_eq!(err.errno(), Errno::ENOSPC);
        let ended = TraceSummary {
            error: None,
            ..summary
        };
        assert!(report(&ended).is_ok());
        let none = TraceSummary::default();
        assert_eq!(report(&none).unwrap_err().errno(), Errno::ENOENT);
    }
}
