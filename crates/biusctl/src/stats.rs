//! `biusctl stats`: a device's statistics, kept by the framework in the
//! daemon ([`bius::stats`]) and read through its control socket
//! ([`bius::control_socket`]), as JSON or as tables.
//!
//! The JSON is that of [`bius::stats::StatsSnapshot`], with the disk's name as
//! `device` and the fill buckets' names as `zoned.fill_buckets`.

use std::io::{self, Write};
use std::thread;
use std::time::Duration;

use bius::control_socket::{ControlClient, StatsQuery};
use bius::size;
use bius::stats::{LatencySummary, StatsSnapshot, ZonedStats, FILL_BUCKETS};
use bius::Op;
use serde_json::Value;

use crate::error::CliError;

/// What `biusctl stats` prints, and how often.
#[derive(Debug, Clone, Copy)]
pub struct StatsOptions {
    /// One JSON object (a line per reading with `watch`).
    pub json: bool,
    /// Each zone's statistics too.
    pub zones: bool,
    /// Count from zero again after each reading.
    pub reset: bool,
    /// Read again every this many seconds, until interrupted.
    pub watch: Option<Duration>,
}

/// The fill buckets' names: `0-10%`, ..., `90-100%`.
fn fill_labels() -> Vec<String> {
    (0..FILL_BUCKETS)
        .map(|bucket| format!("{}-{}%", bucket * 10, bucket * 10 + 10))
        .collect()
}

/// Prints the statistics of `disk` as `options` say.
pub fn run(disk: &str, options: StatsOptions) -> Result<(), CliError> {
    let query = StatsQuery {
        per_zone: options.zones,
        reset: options.reset,
    };
    loop {
        let stats = ControlClient::connect_disk(disk)
            .and_then(|mut client| client.stats_with(query))
            .map_err(CliError::Daemon)?;
        let mut stdout = io::stdout().lock();
        match options.json {
            true => writeln!(stdout, "{}", json(disk, &stats)),
            false => write_text(&mut stdout, disk, &stats, options.zones),
        }
        .and_then(|()| stdout.flush())
        .map_err(CliError::Stdout)?;
        match options.watch {
            Some(period) => thread::sleep(period),
            None => return Ok(()),
        }
    }
}

/// The JSON of `stats --json`: the statistics' own, keys sorted, with
/// `device` and `zoned.fill_buckets` added.
fn json(disk: &str, stats: &StatsSnapshot) -> Value {
    // (statistics always encode: numbers, strings, maps with string keys)
    let mut json = serde_json::to_value(stats).unwrap_or_default();
    if let Value::Object(map) = &mut json {
        map.insert("device".into(), disk.into());
        if let Some(Value::Object(zoned)) = map.get_mut("zoned") {
            zoned.insert("fill_buckets".into(), fill_labels().into());
        }
    }
    json
}

/// A duration in ns, short: `850ns`, `12.3us`, `4.56ms`, `1.20s`.
fn time(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// The statistics of `device` as tables: the ops that had requests, how
/// late the timed completions were, the kernel's view, the zones (each, with `zones`) and the trace.
pub fn write_text(
    out: &mut impl Write,
    device: &str,
    stats: &StatsSnapshot,
    zones: bool,
) -> io::Result<()> {
    if !stats.enabled {
        return writeln!(
            out,
            "{device}: keeps no statistics (created with --no-stats)"
        );
    }
    writeln!(
        out,
        "{device}: requests over {:.1} s",
        stats.elapsed.as_secs_f64()
    )?;
    writeln!(
        out,
        "{:<15} {:>10} {:>10} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "op", "count", "bytes", "errors", "mean", "p50", "p90", "p99", "p99.9", "max"
    )?;
    let row =
        |out: &mut dyn Write, name: &str, count, bytes: &str, errors: &str, t: &LatencySummary| {
            writeln!(
                out,
                "{:<15} {:>10} {:>10} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                name,
                count,
                bytes,
                errors,
                time(t.mean),
                time(t.p50),
                time(t.p90),
                time(t.p99),
                time(t.p999),
                time(t.max)
            )
        };
    for op in Op::ALL {
        let entry = stats.op(op);
        if entry.count == 0 {
            continue;
        }
        let bytes = size::format(entry.bytes);
        let errors = entry.errors.to_string();
        row(
            out,
            op.name(),
            entry.count,
            &bytes,
            &errors,
            &entry.latency_ns,
        )?;
    }
    // How late the completions with a due time (a latency, a model) went
    // back, past that time.
    let late = &stats.lateness;
    if late.count > 0 {
        row(out, "late (timed)", late.count, "-", "-", &late.ns)?;
    }
    let k = &stats.kernel;
    writeln!(
        out,
        "as /sys/block/{device}/stat counts: read {} ios {} sectors, write {} ios {} sectors, discard {} ios {} sectors, flush {} ios",
        k.read_ios,
        k.read_sectors,
        k.write_ios,
        k.write_sectors,
        k.discard_ios,
        k.discard_sectors,
        k.flush_ios
    )?;
    if let Some(zoned) = &stats.zoned {
        write_zoned(out, zoned, zones)?;
    }
    let trace = &stats.trace;
    if let Some(file) = &trace.file {
        let state = match trace.active {
            true => "running",
            false => "ended",
        };
        write!(
            out,
            "trace ({state}) into {}: {} records, {} dropped",
            file.display(),
            trace.records,
            trace.dropped
        )?;
        match &trace.error {
            Some(error) => writeln!(out, "; stopped by: {error}")?,
            None => writeln!(out)?,
        }
    }
    Ok(())
}

/// The zones summed up, their fill histograms, and each zone if `each`.
fn write_zoned(out: &mut impl Write, zoned: &ZonedStats, each: bool) -> io::Result<()> {
    writeln!(
        out,
        "zones: {} of {} (capacity {}), {} conventional",
        zoned.zones,
        size::format(zoned.zone_bytes),
        size::format(zoned.zone_capacity),
        zoned.conventional_zones
    )?;
    let per_reset = zoned
        .bytes_per_reset
        .map_or_else(|| "-".into(), |bytes| size::format(bytes as u64));
    let counts = &zoned.counts;
    writeln!(
        out,
        "  written {} by hosts, {} appends; {} resets ({per_reset} written per reset), {} finishes; opens {} explicit, {} implicit; {} closes",
        size::format(zoned.host_bytes_written),
        counts.appends,
        counts.resets,
        counts.finishes,
        counts.opens_explicit,
        counts.opens_implicit,
        counts.closes
    )?;
    let (held, written) = (zoned.held_bytes, zoned.written_bytes_now);
    let amplification = match written {
        0 => "-".into(),
        _ => format!("{:.2}", held as f64 / written as f64),
    };
    writeln!(
        out,
        "  held {} in non-empty zones for {} written in them ({amplification}x)",
        size::format(held),
        size::format(written)
    )?;
    write!(out, "  {:<10}", "fill")?;
    for label in fill_labels() {
        write!(out, " {label:>7}")?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "  {} sequential zones empty; the others by fill:",
        zoned.empty_zones
    )?;
    for (label, counts) in [
        ("now", &zoned.fill_now),
        ("at reset", &zoned.fill_at_reset),
        ("at finish", &zoned.fill_at_finish),
    ] {
        write!(out, "  {label:<10}")?;
        for count in counts {
            write!(out, " {count:>7}")?;
        }
        writeln!(out)?;
    }
    if !each {
        return Ok(());
    }
    writeln!(
        out,
        "{:>6} {:>12} {:<17} {:>10} {:>10} {:>7} {:>6} {:>6} {:>8} {:>8} {:>6}",
        "zone",
        "start",
        "cond",
        "wp",
        "written",
        "appends",
        "resets",
        "finish",
        "open-exp",
        "open-imp",
        "closes"
    )?;
    for zone in &zoned.per_zone {
        let counts = &zone.counts;
        writeln!(
            out,
            "{:>6} {:>12} {:<17} {:>10} {:>10} {:>7} {:>6} {:>6} {:>8} {:>8} {:>6}",
            zone.index,
            zone.start,
            zone.condition.name(),
            size::format(zone.write_pointer),
            size::format(zone.bytes_written),
            counts.appends,
            counts.resets,
            counts.finishes,
            counts.opens_explicit,
            counts.opens_implicit,
            counts.closes
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_short() {
        assert_eq!(time(850), "850ns");
        assert_eq!(time(12_345), "12.3us");
        assert_eq!(time(4_560_000), "4.56ms");
        assert_eq!(time(1_200_000_000), "1.20s");
    }

    #[test]
    fn json_and_tables_of_a_fresh_device() {
        let stats = bius::stats::Statistics::default().snapshot();
        let json = json("bius3", &stats);
        assert_eq!(json["device"], "bius3");
        assert_eq!(json["ops"]["zone_append"]["count"], 0);
        assert_eq!(json["kernel"]["write_ios"], 0);
        assert!(json["zoned"].is_null());
        // Keys sorted, as before the statistics were typed.
        let text = json.to_string();
        assert!(
            text.starts_with(r#"{"device":"bius3","elapsed_s":"#),
            "{text}"
        );
        let mut text = Vec::new();
        write_text(&mut text, "bius3", &stats, true).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.starts_with("bius3: requests over "), "{text}");
        assert!(text.contains("write 0 ios 0 sectors"), "{text}");
        assert!(!text.contains("late"), "{text}");
        assert_eq!(json["lateness"]["count"], 0);
    }

    #[test]
    fn lateness_is_a_row_under_the_service_times() {
        let mut stats = bius::stats::Statistics::default().snapshot();
        stats.lateness.count = 12;
        stats.lateness.ns.p99 = 48_700;
        let mut text = Vec::new();
        write_text(&mut text, "bius3", &stats, false).unwrap();
        let text = String::from_utf8(text).unwrap();
        let row = text.lines().find(|line| line.starts_with("late (timed)"));
        assert!(
            row.is_some_and(|row| row.contains(" 12 ") && row.contains("48.7us")),
            "{text}"
        );
        assert_eq!(json("bius3", &stats)["lateness"]["ns"]["p99"], 48_700);
    }
}
