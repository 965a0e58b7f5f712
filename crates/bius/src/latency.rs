//! [`Latency`]: a fixed time added to every request of a kind, as
//! nbdkit's delay filter does, for [`DeviceBuilder::latency`].
//!
//! [`DeviceBuilder::latency`]: crate::DeviceBuilder::latency

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::request::Command;

/// How long each kind of request takes at least, from its arrival to its
/// completion.  Kinds without a time complete as soon as they are served.
///
/// It parses from `KIND=TIME[,KIND=TIME...]`, the times as
/// [`humantime`] takes them (`10ms`, `500us`, `1s 500ms`) or `0`, the kinds
/// `read`, `write` (writes and zone appends), `flush`, `discard` (discards
/// and write-zeroes), `zone` (zone reports and management) and `all`:
///
/// ```
/// use std::time::Duration;
///
/// let latency: bius::Latency = "read=80us,write=1ms,flush=2ms".parse()?;
/// assert_eq!(latency.read, Some(Duration::from_micros(80)));
/// assert_eq!(latency.discard, None);
/// assert!("read=-1".parse::<bius::Latency>().is_err());
/// # Ok::<(), bius::LatencyError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    /// Reads.
    pub read: Option<Duration>,
    /// Writes and zone appends.
    pub write: Option<Duration>,
    /// Flushes.
    pub flush: Option<Duration>,
    /// Discards and write-zeroes.
    pub discard: Option<Duration>,
    /// Zone reports and zone management.
    pub zone: Option<Duration>,
}

/// The kinds [`Latency`] parses, in its documentation's order.
const KINDS: &str = "read, write, flush, discard, zone or all";

impl Latency {
    /// The time a request of this command takes at least, if any.
    pub fn of(&self, command: Command) -> Option<Duration> {
        match command {
            Command::Read { .. } => self.read,
            Command::Write { .. } | Command::ZoneAppend { .. } => self.write,
            Command::Flush => self.flush,
            Command::Discard { .. } | Command::WriteZeroes { .. } => self.discard,
            _ => self.zone,
        }
        .filter(|time| !time.is_zero())
    }

    /// The longest of the times.
    pub fn longest(&self) -> Duration {
        [self.read, self.write, self.flush, self.discard, self.zone]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or_default()
    }

    fn set(&mut self, kind: &str, time: Duration) -> Result<(), ()> {
        let fields = match kind {
            "read" => vec![&mut self.read],
            "write" => vec![&mut self.write],
            "flush" => vec![&mut self.flush],
            "discard" => vec![&mut self.discard],
            "zone" => vec![&mut self.zone],
            "all" => vec![
                &mut self.read,
                &mut self.write,
                &mut self.flush,
                &mut self.discard,
                &mut self.zone,
            ],
            _ => return Err(()),
        };
        for field in fields {
            *field = Some(time);
        }
        Ok(())
    }
}

/// Why a latency specification does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LatencyError {
    /// An item is not `KIND=TIME`.
    #[error("'{0}' is not KIND=TIME (e.g. read=1ms)")]
    NotAnAssignment(String),
    /// The kind of an item is not one of the known ones.
    #[error("unknown request kind '{0}' (expected {KINDS})")]
    UnknownKind(String),
    /// The time of an item is not a duration.
    #[error("{kind}={time}: not a time ({reason}; e.g. 500us, 10ms, 1s)")]
    InvalidTime {
        /// The item's kind.
        kind: String,
        /// The time as given.
        time: String,
        /// Why it is not a duration.
        reason: String,
    },
}

impl FromStr for Latency {
    type Err = LatencyError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let mut latency = Latency::default();
        for item in spec.split(',').map(str::trim) {
            let (kind, time) = item
                .split_once('=')
                .ok_or_else(|| LatencyError::NotAnAssignment(item.to_string()))?;
            let (kind, time) = (kind.trim(), time.trim());
            let parsed = if time == "0" {
                Ok(Duration::ZERO)
            } else {
                humantime::parse_duration(time)
            };
            let time = parsed.map_err(|err| LatencyError::InvalidTime {
                kind: kind.to_string(),
                time: time.to_string(),
                reason: err.to_string(),
            })?;
            latency
                .set(kind, time)
                .map_err(|()| LatencyError::UnknownKind(kind.to_string()))?;
        }
        Ok(latency)
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = [
            ("read", self.read),
            ("write", self.write),
            ("flush", self.flush),
            ("discard", self.discard),
            ("zone", self.zone),
        ]
        .into_iter()
        .filter_map(|(kind, time)| {
            time.map(|time| format!("{kind}={}", humantime::format_duration(time)))
        })
        .collect();
        f.write_str(&items.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specifications_parse() {
        let latency: Latency = "read=1ms, write=500us,flush=2ms,discard=0".parse().unwrap();
        assert_eq!(latency.read, Some(Duration::from_millis(1)));
        assert_eq!(latency.write, Some(Duration::from_micros(500)));
        assert_eq!(latency.flush, Some(Duration::from_millis(2)));
        assert_eq!(latency.discard, Some(Duration::ZERO));
        assert_eq!(latency.zone, None);
        assert_eq!(latency.longest(), Duration::from_millis(2));
        let all: Latency = "all=10ms,read=1ms".parse().unwrap();
        assert_eq!(all.zone, Some(Duration::from_millis(10)));
        assert_eq!(all.read, Some(Duration::from_millis(1)));
        assert_eq!(
            all.to_string(),
            "read=1ms,write=10ms,flush=10ms,discard=10ms,zone=10ms"
        );
    }

    #[test]
    fn commands_take_their_kind_s_time() {
        let latency: Latency = "write=1ms,zone=2ms,discard=0".parse().unwrap();
        let append = Command::ZoneAppend {
            offset: 0,
            len: 4096,
            fua: false,
        };
        assert_eq!(latency.of(append), Some(Duration::from_millis(1)));
        assert_eq!(
            latency.of(Command::ZoneResetAll),
            Some(Duration::from_millis(2))
        );
        assert_eq!(
            latency.of(Command::Read {
                offset: 0,
                len: 512
            }),
            None
        );
        // a zero time is none
        let discard = Command::Discard {
            offset: 0,
            len: 512,
        };
        assert_eq!(latency.of(discard), None);
    }

    #[test]
    fn nonsense_is_named() {
        let err = |spec: &str| spec.parse::<Latency>().unwrap_err().to_string();
        assert_eq!(
            err("read=-1"),
            "read=-1: not a time (expected number at 0; e.g. 500us, 10ms, 1s)"
        );
        assert_eq!(
            err("reed=1ms"),
            "unknown request kind 'reed' (expected read, write, flush, discard, zone or all)"
        );
        assert_eq!(err("read"), "'read' is not KIND=TIME (e.g. read=1ms)");
        assert!(err("read=10").contains("read=10: not a time"));
        assert!(err("").contains("is not KIND=TIME"));
    }
}
