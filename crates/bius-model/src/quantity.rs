//! Quantities as model files write them: times (`35.76us`, `2ms`, `0`),
//! sizes (`32KiB`, `64M`, `1GB`, as [`bius::size`] reads them) and
//! bandwidths (`800MB/s`; the `/s` is optional), for serde's `with`
//! attribute.  Times keep nanoseconds.

use std::time::Duration;

use bius::size;
use serde::{de, Deserialize, Deserializer, Serializer};

use crate::time::Nanos;

/// A time: [`humantime`] syntax, or `0`.
pub fn parse_time(text: &str) -> Result<Nanos, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(0);
    }
    let time = humantime::parse_duration(text)
        .map_err(|_| format!("`{text}` is not a time (like 35us, 1.5ms, 0)"))?;
    Nanos::try_from(time.as_nanos()).map_err(|_| format!("`{text}` is too long"))
}

/// A size in bytes, as [`bius::size::parse`] reads it.
fn parse_bytes(text: &str) -> Result<u64, String> {
    size::parse(text).map_err(|err| format!("`{}`: {err}", text.trim()))
}

/// A bandwidth in bytes a second: a size ([`bius::size::parse`]),
/// optionally followed by `/s`.
pub fn parse_bandwidth(text: &str) -> Result<u64, String> {
    let size = text.trim().trim_end_matches("/s");
    size::parse(size).map_err(|err| {
        format!(
            "`{}` is not a bandwidth (like 800MB/s, 3GiB/s): {err}",
            text.trim()
        )
    })
}

/// A time as it is written back: `0` or humantime's rendering.
pub fn format_time(nanos: Nanos) -> String {
    if nanos == 0 {
        return "0".into();
    }
    humantime::format_duration(Duration::from_nanos(nanos)).to_string()
}

/// A bandwidth as it is written back: decimal units, as datasheets do.
pub fn format_bandwidth(bandwidth: u64) -> String {
    for (scale, unit) in [(1_000_000_000, "GB"), (1_000_000, "MB"), (1_000, "KB")] {
        if bandwidth >= scale && bandwidth.is_multiple_of(scale) {
            return format!("{}{unit}/s", bandwidth / scale);
        }
    }
    format!("{bandwidth}B/s")
}

/// Numbers in a model file are written as strings with units; a bare
/// number is taken as the base unit (ns, bytes, bytes a second).
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Integer(i64),
    Float(f64),
    Text(String),
}

fn deserialize_with<'de, D: Deserializer<'de>>(
    deserializer: D,
    parse: fn(&str) -> Result<u64, String>,
) -> Result<u64, D::Error> {
    let invalid = |why: String| de::Error::custom(why);
    match Written::deserialize(deserializer)? {
        Written::Integer(number) => u64::try_from(number)
            .map_err(|_| invalid(format!("must not be negative (is {number})"))),
        Written::Float(number) => Err(invalid(format!(
            "{number}: write a fraction with its unit, as a string (\"1.5ms\", \"2.5GB/s\")"
        ))),
        Written::Text(text) => parse(&text).map_err(invalid),
    }
}

/// `#[serde(with = "quantity::time")]`
pub mod time {
    use super::*;

    /// Parses a time.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Nanos, D::Error> {
        deserialize_with(deserializer, parse_time)
    }

    /// Writes a time.
    pub fn serialize<S: Serializer>(nanos: &Nanos, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format_time(*nanos))
    }
}

/// `#[serde(with = "quantity::bytes")]`
pub mod bytes {
    use super::*;

    /// Parses a size.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        deserialize_with(deserializer, parse_bytes)
    }

    /// Writes a size.
    pub fn serialize<S: Serializer>(bytes: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&size::format(*bytes))
    }
}

/// `#[serde(with = "quantity::bandwidth")]`
pub mod bandwidth {
    use super::*;

    /// Parses a bandwidth.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        deserialize_with(deserializer, parse_bandwidth)
    }

    /// Writes a bandwidth.
    pub fn serialize<S: Serializer>(bandwidth: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format_bandwidth(*bandwidth))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_and_print_back() {
        assert_eq!(parse_time("35.76us"), Ok(35_760));
        assert_eq!(parse_time("0"), Ok(0));
        assert_eq!(parse_time("2ms"), Ok(2_000_000));
        assert!(parse_time("-1ms").is_err());
        assert!(parse_time("fast").is_err());
        assert_eq!(parse_bytes("32KiB"), Ok(32768));
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("1GB"), Ok(1_000_000_000));
        assert!(parse_bytes("1.3K")
            .unwrap_err()
            .starts_with("`1.3K`: not a whole number"));
        assert_eq!(parse_bandwidth("800MB/s"), Ok(800_000_000));
        assert_eq!(parse_bandwidth("3GiB"), Ok(3 << 30));
        assert_eq!(parse_bandwidth("1G/s"), Ok(1 << 30));
        assert_eq!(parse_bandwidth("1234B/s"), Ok(1234));
        assert!(parse_bandwidth("-3MB/s").is_err());
        assert_eq!(format_time(35_760), "35us 760ns");
        assert_eq!(parse_time(&format_time(35_760)), Ok(35_760));
        assert_eq!(format_bandwidth(3_360_000_000), "3360MB/s");
        assert_eq!(format_bandwidth(3_000_000_000), "3GB/s");
    }
}
