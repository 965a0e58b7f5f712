//! The values of `biusctl create`'s options.  Each type parses its value
//! the same way from the command line (`FromStr`, through clap) and from a
//! config file (serde: a TOML string, or an integer), so both refuse the
//! same values with the same reason; the caller names the option.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bius::{limits, size, Scheduling, TransferMode};
use bius_backends::nbd::{AddressError, NbdAddress};
use serde::{Deserialize, Deserializer};

/// Hardware queues: 1 to [`limits::MAX_QUEUES`].
pub type Queues = Ranged<1, { limits::MAX_QUEUES }>;
/// Poll queues: 0 to one less than [`limits::MAX_QUEUES`] (the framework
/// also checks them against the queues).
pub type PollQueues = Ranged<0, { limits::MAX_QUEUES - 1 }>;
/// Requests in flight per queue: 1 to [`limits::MAX_QUEUE_DEPTH`].
pub type Depth = Ranged<1, { limits::MAX_QUEUE_DEPTH }>;
/// Busy-wait time in µs: 0 to [`limits::MAX_POLL_TIME`].
pub type PollUsecs = Ranged<0, { limits::MAX_POLL_TIME.as_micros() as u32 }>;
/// Request timeout in seconds: 1 to [`limits::MAX_TIMEOUT`].
pub type TimeoutSecs = Ranged<1, { limits::MAX_TIMEOUT.as_secs() as u32 }>;
/// Recovery timeout in seconds: 1 to [`limits::MAX_RECOVER_TIMEOUT`].
pub type RecoverSecs = Ranged<1, { limits::MAX_RECOVER_TIMEOUT.as_secs() as u32 }>;
/// Logical block size in bytes.
pub type BlockSize = PowerOfTwo<{ limits::MIN_BLOCK_SIZE }, { limits::MAX_LOGICAL_BLOCK_SIZE }>;
/// Physical block size in bytes (the framework also checks it against the
/// logical one).
pub type PhysicalBlockSize =
    PowerOfTwo<{ limits::MIN_BLOCK_SIZE }, { limits::MAX_PHYSICAL_BLOCK_SIZE }>;

/// A 512-byte sector: the unit of the positions `biusctl zones` shows and
/// `biusctl fault` takes, as blkzone(8) has them.  The library speaks
/// bytes; biusctl converts where it reads and prints sectors.
pub const SECTOR: u64 = 512;

/// A size in bytes, as [`size::parse`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl FromStr for Bytes {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        size::parse(text).map(Bytes).map_err(|err| err.to_string())
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&size::format(self.0))
    }
}

/// A whole number from `MIN` to `MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ranged<const MIN: u32, const MAX: u32>(pub u32);

impl<const MIN: u32, const MAX: u32> FromStr for Ranged<MIN, MAX> {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let range = || format!("must be {MIN} to {MAX}");
        match text.trim().parse::<u64>() {
            Ok(n) => u32::try_from(n)
                .ok()
                .filter(|n| (MIN..=MAX).contains(n))
                .map(Ranged)
                .ok_or_else(range),
            Err(_) if text.trim().starts_with('-') => Err(range()),
            Err(_) => Err(format!("not a number ({})", range())),
        }
    }
}

impl<const MIN: u32, const MAX: u32> fmt::Display for Ranged<MIN, MAX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A power of two from `MIN` to `MAX` bytes, with a size's units (`4K`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerOfTwo<const MIN: u32, const MAX: u32>(pub u32);

impl<const MIN: u32, const MAX: u32> FromStr for PowerOfTwo<MIN, MAX> {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bytes = size::parse(text).map_err(|err| err.to_string())?;
        u32::try_from(bytes)
            .ok()
            .filter(|n| n.is_power_of_two() && (MIN..=MAX).contains(n))
            .map(PowerOfTwo)
            .ok_or_else(|| format!("must be a power of two from {MIN} to {MAX}"))
    }
}

impl<const MIN: u32, const MAX: u32> fmt::Display for PowerOfTwo<MIN, MAX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A transfer mode: `copy`, `map`, `selective` or `selective=SIZE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer(pub TransferMode);

impl FromStr for Transfer {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mode = match text.split_once('=') {
            None if text == "copy" => TransferMode::Copy,
            None if text == "map" => TransferMode::Map,
            None if text == "selective" => TransferMode::Selective { threshold: 0 },
            Some(("selective", bytes)) => {
                let threshold = size::parse(bytes).map_err(|err| err.to_string())?;
                let threshold = u32::try_from(threshold)
                    .map_err(|_| format!("threshold {bytes} is too large"))?;
                TransferMode::Selective { threshold }
            }
            _ => return Err("not a transfer mode (copy, map, selective or selective=SIZE)".into()),
        };
        Ok(Transfer(mode))
    }
}

impl fmt::Display for Transfer {
    /// As `--transfer` takes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            TransferMode::Selective { threshold: 0 } => f.write_str("selective"),
            TransferMode::Selective { threshold } => {
                write!(f, "selective={}", size::format(threshold.into()))
            }
            mode => mode.fmt(f),
        }
    }
}

/// The queue threads' scheduling policy: `batch` or `inherit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sched(pub Scheduling);

impl FromStr for Sched {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "batch" => Ok(Sched(Scheduling::Batch)),
            "inherit" => Ok(Sched(Scheduling::Inherit)),
            _ => Err("not a scheduling policy (batch or inherit)".into()),
        }
    }
}

impl fmt::Display for Sched {
    /// As `--sched` takes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// NBD connections per device: 1 to 16.
pub type Connections = Ranged<1, 16>;

/// Where an NBD server listens: `HOST:PORT`, `[IPV6]:PORT` or
/// `unix:PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdServer(pub NbdAddress);

impl FromStr for NbdServer {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.parse()
            .map(NbdServer)
            .map_err(|err: AddressError| err.to_string())
    }
}

impl fmt::Display for NbdServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Latencies to add, as [`bius::Latency`] parses them
/// (`read=1ms,write=500us,...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencySpec(pub bius::Latency);

impl FromStr for LatencySpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.parse().map(LatencySpec).map_err(|err| err.to_string())
    }
}

impl fmt::Display for LatencySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A value in a config file: text, or an integer, parsed as on the
/// command line.
fn from_toml<'de, D: Deserializer<'de>, T: FromStr<Err = String>>(
    deserializer: D,
) -> Result<T, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scalar {
        Integer(i64),
        Text(String),
    }
    let text = match Scalar::deserialize(deserializer)? {
        Scalar::Integer(n) => n.to_string(),
        Scalar::Text(text) => text,
    };
    text.parse().map_err(serde::de::Error::custom)
}

/// Deserializes the types of this module with [`from_toml`].
macro_rules! deserialize_from_toml {
    ($($ty:ident $(<$(const $param:ident: $ptype:ty),*>)?),*) => {$(
        impl<'de $($(, const $param: $ptype)*)?> Deserialize<'de> for $ty $(<$($param),*>)? {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                from_toml(deserializer)
            }
        }
    )*};
}

deserialize_from_toml!(
    Bytes,
    LatencySpec,
    NbdServer,
    Sched,
    Transfer,
    Ranged<const MIN: u32, const MAX: u32>,
    PowerOfTwo<const MIN: u32, const MAX: u32>
);

/// A positive number of seconds, fractions allowed (`--watch 0.5`).
/// A sector number, as the byte it starts at (see [`SECTOR`]).
pub fn parse_sector(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .ok()
        .and_then(|sector| sector.checked_mul(SECTOR))
        .ok_or_else(|| format!("`{text}` is not a sector of a disk"))
}

pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs.is_finite() && secs < 1e9 => {
            Ok(Duration::from_secs_f64(secs))
        }
        _ => Err(format!("`{text}` is not a positive number of seconds")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_positive_and_may_be_fractions() {
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_seconds("3"), Ok(Duration::from_secs(3)));
        for bad in ["0", "-1", "inf", "NaN", "1e12", "x"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn latencies_parse_with_their_reasons() {
        let spec: LatencySpec = "read=10ms,write=500us".parse().unwrap();
        assert_eq!(spec.to_string(), "read=10ms,write=500us");
        assert_eq!(
            "read=-1".parse::<LatencySpec>(),
            Err("read=-1: not a time (expected number at 0; e.g. 500us, 10ms, 1s)".into())
        );
        assert!("trim=1ms"
            .parse::<LatencySpec>()
            .unwrap_err()
            .starts_with("unknown request kind 'trim'"));
    }

    #[test]
    fn ranges_come_from_the_abi() {
        assert_eq!("64".parse::<Queues>(), Ok(Ranged(64)));
        assert_eq!("0".parse::<Queues>(), Err("must be 1 to 64".into()));
        assert_eq!("65".parse::<Queues>(), Err("must be 1 to 64".into()));
        assert_eq!("-1".parse::<Queues>(), Err("must be 1 to 64".into()));
        assert_eq!("4097".parse::<Depth>(), Err("must be 1 to 4096".into()));
        assert_eq!("0".parse::<PollUsecs>(), Ok(Ranged(0)));
        assert_eq!("63".parse::<PollQueues>(), Ok(Ranged(63)));
        assert_eq!("64".parse::<PollQueues>(), Err("must be 0 to 63".into()));
        assert_eq!("1001".parse::<PollUsecs>(), Err("must be 0 to 1000".into()));
        assert_eq!("90".parse::<RecoverSecs>(), Ok(Ranged(90)));
        assert_eq!("91".parse::<RecoverSecs>(), Err("must be 1 to 90".into()));
        assert_eq!("0".parse::<RecoverSecs>(), Err("must be 1 to 90".into()));
        assert_eq!(
            "two".parse::<Queues>(),
            Err("not a number (must be 1 to 64)".into())
        );
    }

    #[test]
    fn block_sizes_are_powers_of_two() {
        assert_eq!("4K".parse::<BlockSize>(), Ok(PowerOfTwo(4096)));
        assert_eq!("1024".parse::<BlockSize>(), Ok(PowerOfTwo(1024)));
        for bad in ["1000", "256", "8192"] {
            assert_eq!(
                bad.parse::<BlockSize>(),
                Err("must be a power of two from 512 to 4096".into())
            );
        }
        assert_eq!("64K".parse::<PhysicalBlockSize>(), Ok(PowerOfTwo(65536)));
    }

    #[test]
    fn transfer_modes() {
        let parse = |text: &str| text.parse::<Transfer>().map(|t| t.0);
        assert_eq!(parse("copy"), Ok(TransferMode::Copy));
        assert_eq!(parse("map"), Ok(TransferMode::Map));
        assert_eq!(
            parse("selective"),
            Ok(TransferMode::Selective { threshold: 0 })
        );
        assert_eq!(
            parse("selective=64K"),
            Ok(TransferMode::Selective {
                threshold: 64 << 10
            })
        );
        for bad in [
            "",
            "Map",
            "copy=4K",
            "selective=",
            "selective=4X",
            "selective=4G",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Transfer(TransferMode::Selective { threshold: 1 << 17 }).to_string(),
            "selective=128K"
        );
        assert_eq!(Transfer(TransferMode::Map).to_string(), "map");
    }

    #[test]
    fn toml_values_parse_like_arguments() {
        #[derive(Debug, Deserialize)]
        struct Values {
            size: Bytes,
            bytes: Bytes,
            queues: Queues,
            transfer: Transfer,
        }
        let values: Values = toml::from_str(
            "size = \"1.5G\"\nbytes = 4096\nqueues = 4\ntransfer = \"selective=64K\"\n",
        )
        .unwrap();
        assert_eq!(values.size, Bytes(3 << 29));
        assert_eq!(values.bytes, Bytes(4096));
        assert_eq!(values.queues, Ranged(4));
        assert_eq!(
            values.transfer.0,
            TransferMode::Selective {
                threshold: 64 << 10
            }
        );
        let err =
            toml::from_str::<Values>("size = \"1G\"\nbytes = 1\nqueues = 0\ntransfer = \"copy\"\n")
                .unwrap_err();
        assert_eq!(err.message(), "must be 1 to 64");
    }
}
