//! `biusctl stats`: a device's statistics, kept by the framework in the
//! daemon ([`bius::stats`]) and read through its socket, as JSON or as
//! tables; and the daemon's answer to the request.
//!
//! Requests: `stats`, with the words `zones` (each zone's statistics too)
//! and `reset` (count from zero again after this answer).  The answer is
//! the JSON of [`bius::stats::Stats`] with the disk's name as `device`.

use std::io::{self, Write};
use std::path::Path;
use std::thread;
use std::time::Duration;

use bius::stats::{Op, Statistics, FILL_BUCKETS};
use bius::{size, Errno};
use serde_json::Value;

use crate::error::CliError;
use crate::socket;

/// The first word of the requests answered here.
pub const REQUEST: &str = "stats";

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

/// The daemon's answer to a stats request `line` of the disk `disk`.
pub fn answer(statistics: &Statistics, disk: &str, line: &str) -> String {
    let mut zones = false;
    let mut reset = false;
    for word in line.split_whitespace().skip(1) {
        match word {
            "zones" => zones = true,
            "reset" => reset = true,
            _ => return socket::failure(Errno::EINVAL, format!("unknown stats word `{word}`")),
        }
    }
    let stats = match zones {
        true => statistics.snapshot_with_zones(),
        false => statistics.snapshot(),
    };
    if reset {
        statistics.reset();
    }
    let mut json = match serde_json::to_value(&stats) {
        Ok(json) => json,
        Err(err) => return socket::failure(Errno::EIO, format!("cannot encode: {err}")),
    };
    if let Value::Object(map) = &mut json {
        map.insert("device".into(), disk.into());
        if let Some(Value::Object(zoned)) = map.get_mut("zoned") {
            zoned.insert("fill_buckets".into(), fill_labels().into());
        }
    }
    format!("ok {json}")
}

/// The fill buckets' names: `0-10%`, ..., `90-100%`.
fn fill_labels() -> Vec<String> {
    (0..FILL_BUCKETS)
        .map(|bucket| format!("{}-{}%", bucket * 10, bucket * 10 + 10))
        .collect()
}

/// Prints the statistics of `disk` as `options` say.
pub fn run(disk: &str, options: StatsOptions) -> Result<(), CliError> {
    let mut request = String::from(REQUEST);
    if options.zones {
        request.push_str(" zones");
    }
    if options.reset {
        request.push_str(" reset");
    }
    loop {
        let answer = socket::request(Path::new(socket::SOCKET_DIR), disk, &request)
            .map_err(CliError::Daemon)?;
        let stats: Value = serde_json::from_str(&answer).map_err(|err| {
            CliError::Daemon(socket::SendError::Refused(
                format!("the daemon's statistics are not JSON: {err}"),
                Errno::EPROTO,
            ))
        })?;
        let mut stdout = io::stdout().lock();
        match options.json {
            true => writeln!(stdout, "{stats}"),
            false => write_text(&mut stdout, &stats, options.zones),
        }
        .and_then(|()| stdout.flush())
        .map_err(CliError::Stdout)?;
        match options.watch {
            Some(period) => thread::sleep(period),
            None => return Ok(()),
        }
    }
}

fn u64_at(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
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

/// The statistics as tables: the ops that had requests, the kernel's view,
/// the zones (each, with `zones`) and the trace.
pub fn write_text(out: &mut impl Write, stats: &Value, zones: bool) -> io::Result<()> {
    let device = stats.get("device").and_then(Value::as_str).unwrap_or("?");
    let elapsed = stats
        .get("elapsed_s")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    if stats.get("enabled").and_then(Value::as_bool) == Some(false) {
        return writeln!(
            out,
            "{device}: keeps no statistics (created with --no-stats)"
        );
    }
    writeln!(out, "{device}: requests over {elapsed:.1} s")?;
    writeln!(
        out,
        "{:<15} {:>10} {:>10} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "op", "count", "bytes", "errors", "mean", "p50", "p90", "p99", "p99.9", "max"
    )?;
    let ops = stats.get("ops").cloned().unwrap_or(Value::Null);
    for op in Op::ALL {
        let Some(entry) = ops.get(op.name()) else {
            continue;
        };
        let count = u64_at(entry, "count");
        if count == 0 {
            continue;
        }
        let latency = entry.get("latency_ns").cloned().unwrap_or(Value::Null);
        let lat = |key| time(u64_at(&latency, key));
        writeln!(
            out,
            "{:<15} {:>10} {:>10} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            op.name(),
            count,
            size::format(u64_at(entry, "bytes")),
            u64_at(entry, "errors"),
            lat("mean"),
            lat("p50"),
            lat("p90"),
            lat("p99"),
            lat("p999"),
            lat("max")
        )?;
    }
    let kernel = stats.get("kernel").cloned().unwrap_or(Value::Null);
    let k = |key| u64_at(&kernel, key);
    writeln!(
        out,
        "as /sys/block/{device}/stat counts: read {} ios {} sectors, write {} ios {} sectors, discard {} ios {} sectors, flush {} ios",
        k("read_ios"),
        k("read_sectors"),
        k("write_ios"),
        k("write_sectors"),
        k("discard_ios"),
        k("discard_sectors"),
        k("flush_ios")
    )?;
    if let Some(zoned) = stats.get("zoned").filter(|zoned| zoned.is_object()) {
        write_zoned(out, zoned, zones)?;
    }
    let trace = stats.get("trace").cloned().unwrap_or(Value::Null);
    if let Some(file) = trace.get("file").and_then(Value::as_str) {
        let state = match trace.get("active").and_then(Value::as_bool) {
            Some(true) => "running",
            _ => "ended",
        };
        write!(
            out,
            "trace ({state}) into {file}: {} records, {} dropped",
            u64_at(&trace, "records"),
            u64_at(&trace, "dropped")
        )?;
        match trace.get("error").and_then(Value::as_str) {
            Some(error) => writeln!(out, "; stopped by: {error}")?,
            None => writeln!(out)?,
        }
    }
    Ok(())
}

/// The zones summed up, their fill histograms, and each zone if `each`.
fn write_zoned(out: &mut impl Write, zoned: &Value, each: bool) -> io::Result<()> {
    let z = |key| u64_at(zoned, key);
    writeln!(
        out,
        "zones: {} of {} (capacity {}), {} conventional",
        z("zones"),
        size::format(z("zone_bytes")),
        size::format(z("zone_capacity")),
        z("conventional_zones")
    )?;
    let per_reset = zoned
        .get("bytes_per_reset")
        .and_then(Value::as_f64)
        .map_or_else(|| "-".into(), |bytes| size::format(bytes as u64));
    writeln!(
        out,
        "  written {} by hosts, {} appends; {} resets ({per_reset} written per reset), {} finishes; opens {} explicit, {} implicit; {} closes",
        size::format(z("host_bytes_written")),
        z("appends"),
        z("resets"),
        z("finishes"),
        z("opens_explicit"),
        z("opens_implicit"),
        z("closes")
    )?;
    let held = z("held_bytes");
    let written = z("written_bytes_now");
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
    for bucket in 0..FILL_BUCKETS {
        write!(
            out,
            " {:>7}",
            format!("{}-{}%", bucket * 10, bucket * 10 + 10)
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "  {} sequential zones empty; the others by fill:",
        z("empty_zones")
    )?;
    for (label, key) in [
        ("now", "fill_now"),
        ("at reset", "fill_at_reset"),
        ("at finish", "fill_at_finish"),
    ] {
        write!(out, "  {label:<10}")?;
        for bucket in 0..FILL_BUCKETS {
            let count = zoned
                .get(key)
                .and_then(|counts| counts.get(bucket))
                .and_then(Value::as_u64)
                .unwrap_or(0);
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
    for zone in zoned
        .get("per_zone")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let v = |key| u64_at(zone, key);
        writeln!(
            out,
            "{:>6} {:>12} {:<17} {:>10} {:>10} {:>7} {:>6} {:>6} {:>8} {:>8} {:>6}",
            v("index"),
            v("start"),
            zone.get("condition").and_then(Value::as_str).unwrap_or("?"),
            size::format(v("write_pointer")),
            size::format(v("bytes_written")),
            v("appends"),
            v("resets"),
            v("finishes"),
            v("opens_explicit"),
            v("opens_implicit"),
            v("closes")
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
    fn answers_and_tables_of_a_fresh_device() {
        let stats = Statistics::default();
        let reply = answer(&stats, "bius3", "stats zones reset");
        let json: Value = serde_json::from_str(reply.strip_prefix("ok ").unwrap()).unwrap();
        assert_eq!(json["device"], "bius3");
        assert_eq!(json["ops"]["zone_append"]["count"], 0);
        assert_eq!(json["kernel"]["write_ios"], 0);
        assert!(json["zoned"].is_null());
        assert!(answer(&stats, "bius3", "stats melt").starts_with("error errno=22 "));
        let mut text = Vec::new();
        write_text(&mut text, &json, true).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.starts_with("bius3: requests over "), "{text}");
        assert!(text.contains("write 0 ios 0 sectors"), "{text}");
    }
}
