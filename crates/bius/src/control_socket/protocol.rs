//! The control socket's protocol: one JSON line each way per connection, a
//! [`ControlRequest`] in a [`RequestLine`] and a [`Response`] or a
//! [`ControlError`] in a [`ReplyLine`], both carrying the
//! [`PROTOCOL_VERSION`].

use std::fmt;
use std::path::PathBuf;

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use crate::control::DeviceInfo;
use crate::stats::{StatsSnapshot, TraceFormat, TraceSummary};

use super::fault::{Fault, FaultReport};

/// The version of the protocol spoken here.  A line of another version is
/// answered with [`ControlError::UnsupportedVersion`].
pub const PROTOCOL_VERSION: u32 = 2;

/// What a client asks a daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ControlRequest {
    /// The statistics: answered with [`Response::Stats`].
    Stats(StatsQuery),
    /// Start tracing every request into a new file at `file` (a path the
    /// daemon sees: absolute): answered with [`Response::Trace`].
    TraceStart {
        /// The trace file.
        file: PathBuf,
        /// Its format.
        format: TraceFormat,
    },
    /// Stop the trace: answered with [`Response::Trace`], its summary.
    TraceStop,
    /// The running or last trace: answered with [`Response::Trace`].
    TraceStatus,
    /// What the kernel reports about the device: answered with
    /// [`Response::Info`].
    Info,
    /// Inject a fault into the zones: answered with [`Response::Fault`].
    Fault(Fault),
    /// Detach the device for a successor to recover it: answered with
    /// [`Response::Detaching`].
    Detach,
    /// A request of the daemon's own, named `name` with its `body` (any
    /// JSON): answered with [`Response::Extension`] by the daemon's
    /// [`ControlExtension::extension`](super::ControlExtension::extension),
    /// or refused as unsupported.  `biusctl create` answers `model`, its
    /// device model and counts.
    Extension {
        /// The request's name (`model`, ...).
        name: String,
        /// What it asks, in the extension's own form.
        body: serde_json::Value,
    },
}

impl ControlRequest {
    /// The request's name, as errors name it (`stats`, `fault`, an
    /// extension's own, ...).
    pub fn name(&self) -> &str {
        match self {
            ControlRequest::Stats(_) => "stats",
            ControlRequest::TraceStart { .. }
            | ControlRequest::TraceStop
            | ControlRequest::TraceStatus => "trace",
            ControlRequest::Info => "info",
            ControlRequest::Fault(_) => "fault",
            ControlRequest::Detach => "detach",
            ControlRequest::Extension { name, .. } => name,
        }
    }
}

/// What [`ControlRequest::Stats`] asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsQuery {
    /// Each zone's statistics too ([`crate::stats::ZonedStats::per_zone`]).
    pub per_zone: bool,
    /// Count from zero again after this snapshot.
    pub reset: bool,
}

/// A daemon's answer to a [`ControlRequest`] it served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// The statistics.
    Stats(Box<StatsSnapshot>),
    /// The trace started, stopped, or as it is.
    Trace(TraceSummary),
    /// What the kernel reports about the device.
    Info(Box<DeviceInfo>),
    /// The fault is injected.
    Fault(FaultReport),
    /// The device is detaching: the daemon's serving thread detaches it and
    /// returns.
    Detaching,
    /// The answer to a [`ControlRequest::Extension`], in the extension's
    /// own form.
    Extension(serde_json::Value),
}

/// Why a daemon answered a request with an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControlError {
    /// The line speaks another version of the protocol.
    UnsupportedVersion {
        /// The line's version.
        version: u32,
    },
    /// The line is no request of this version: not JSON, no version, or a
    /// request this daemon does not know.
    Malformed {
        /// What is wrong with it.
        reason: String,
    },
    /// The daemon does not answer this request (a library daemon answers
    /// faults and requests of its own only through a
    /// [`super::ControlExtension`]).
    Unsupported {
        /// The request's name ([`ControlRequest::name`]).
        request: String,
    },
    /// The daemon refused the request, or serving it failed.
    Failed {
        /// The errno that says why.
        errno: i32,
        /// What went wrong.
        message: String,
    },
}

impl ControlError {
    /// A request refused or failed with `errno`, saying `message`.
    pub fn failed(errno: Errno, message: impl fmt::Display) -> ControlError {
        ControlError::Failed {
            errno: errno as i32,
            message: message.to_string(),
        }
    }

    /// `request` is not answered here.
    pub fn unsupported(request: &ControlRequest) -> ControlError {
        ControlError::Unsupported {
            request: request.name().into(),
        }
    }

    /// The errno that says why: `EPROTONOSUPPORT` for another version,
    /// `EINVAL` for a malformed line, `EOPNOTSUPP` for a request not
    /// answered here, the failure's own otherwise.
    pub fn errno(&self) -> Errno {
        match self {
            ControlError::UnsupportedVersion { .. } => Errno::EPROTONOSUPPORT,
            ControlError::Malformed { .. } => Errno::EINVAL,
            ControlError::Unsupported { .. } => Errno::EOPNOTSUPP,
            ControlError::Failed { errno, .. } => Errno::from_raw(*errno),
        }
    }
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::UnsupportedVersion { version } => write!(
                f,
                "the daemon speaks version {PROTOCOL_VERSION} of the control protocol, not {version}"
            ),
            ControlError::Malformed { reason } => write!(f, "malformed request: {reason}"),
            ControlError::Unsupported { request } => {
                write!(f, "this daemon does not answer {request} requests")
            }
            ControlError::Failed { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for ControlError {}

/// A request as it goes on the wire: `{"version":2,"request":...}` and a
/// newline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestLine {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The request.
    pub request: ControlRequest,
}

/// An answer as it goes on the wire: `{"version":2,"response":...}` or
/// `{"version":2,"error":...}` and a newline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyLine {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The response, or why there is none.
    #[serde(flatten)]
    pub reply: ControlReply,
}

/// The answer itself: a response or an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ControlReply {
    /// The request was served.
    Response(Response),
    /// It was not: why.
    Error(ControlError),
}

impl From<Result<Response, ControlError>> for ControlReply {
    fn from(result: Result<Response, ControlError>) -> Self {
        match result {
            Ok(response) => ControlReply::Response(response),
            Err(err) => ControlReply::Error(err),
        }
    }
}

/// The version of a line, read before the rest: a line of another version
/// may not parse as this version's.
#[derive(Deserialize)]
pub(super) struct Version {
    pub(super) version: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_versioned_json() {
        let line = RequestLine {
            version: PROTOCOL_VERSION,
            request: ControlRequest::Stats(StatsQuery {
                per_zone: true,
                reset: false,
            }),
        };
        let text = serde_json::to_string(&line).unwrap();
        assert_eq!(
            text,
            r#"{"version":2,"request":{"Stats":{"per_zone":true,"reset":false}}}"#
        );
        assert_eq!(serde_json::from_str::<RequestLine>(&text).unwrap(), line);
        let reply = ReplyLine {
            version: PROTOCOL_VERSION,
            reply: ControlReply::Error(ControlError::Unsupported {
                request: "fault".into(),
            }),
        };
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(
            text,
            r#"{"version":2,"error":{"Unsupported":{"request":"fault"}}}"#
        );
        assert_eq!(serde_json::from_str::<ReplyLine>(&text).unwrap(), reply);
        let detaching = r#"{"version":2,"response":"Detaching"}"#;
        assert_eq!(
            serde_json::from_str::<ReplyLine>(detaching).unwrap().reply,
            ControlReply::Response(Response::Detaching)
        );
    }

    #[test]
    fn stats_travel_unchanged() {
        use crate::stats::{LatencySummary, Lateness, OpStats, ZoneEvents, ZoneStats, ZonedStats};
        use crate::zone::ZoneCondition;
        use std::time::Duration;

        let counts = ZoneEvents {
            appends: 1,
            resets: 2,
            finishes: 3,
            opens_explicit: 4,
            opens_implicit: 5,
            closes: 6,
        };
        let mut ops = [OpStats::default(); 12];
        ops[11].count = 7;
        ops[1].latency_ns.p999 = 123_456;
        for elapsed in [
            Duration::ZERO,
            Duration::new(0, 1),
            Duration::new(3, 141_592_653),
            Duration::new(86_400 * 90, 999_999_999),
        ] {
            let stats = StatsSnapshot {
                enabled: true,
                elapsed,
                ops,
                kernel: Default::default(),
                lateness: Lateness {
                    count: 3,
                    ns: LatencySummary {
                        p99: 42_000,
                        ..Default::default()
                    },
                },
                zoned: Some(ZonedStats {
                    zone_bytes: 1 << 20,
                    zone_capacity: 768 << 10,
                    zones: 2,
                    conventional_zones: 1,
                    host_bytes_written: 3 << 20,
                    counts,
                    bytes_per_reset: Some(1.0 / 3.0),
                    fill_at_reset: [1; 10],
                    fill_at_finish: [2; 10],
                    fill_now: [3; 10],
                    empty_zones: 0,
                    held_bytes: 768 << 10,
                    written_bytes_now: 4096,
                    per_zone: vec![ZoneStats {
                        index: 1,
                        start: 1 << 20,
                        condition: ZoneCondition::ImplicitOpen,
                        write_pointer: 4096,
                        bytes_written: 4096,
                        counts,
                    }],
                }),
                trace: TraceSummary {
                    active: false,
                    file: Some("/tmp/t.csv".into()),
                    records: 9,
                    dropped: 1,
                    error: Some("No space left on device (os error 28)".into()),
                },
            };
            let response = Response::Stats(Box::new(stats));
            let text = serde_json::to_string(&response).unwrap();
            assert!(text.contains(r#""zone_append":{"count":7"#), "{text}");
            assert!(text.contains(r#""condition":"implicit_open""#), "{text}");
            assert_eq!(serde_json::from_str::<Response>(&text).unwrap(), response);
        }
    }

    #[test]
    fn errors_carry_their_errno() {
        let err = ControlError::failed(Errno::EBUSY, "a trace runs already");
        assert_eq!(err.errno(), Errno::EBUSY);
        assert_eq!(err.to_string(), "a trace runs already");
        let err = ControlError::unsupported(&ControlRequest::Extension {
            name: "model".into(),
            body: serde_json::Value::Null,
        });
        assert_eq!(err.errno(), Errno::EOPNOTSUPP);
        assert_eq!(
            err.to_string(),
            "this daemon does not answer model requests"
        );
        let err = ControlError::UnsupportedVersion { version: 7 };
        assert_eq!(err.errno(), Errno::EPROTONOSUPPORT);
    }
}
