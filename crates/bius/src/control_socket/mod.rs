//! The daemon's control socket (cargo feature `control-socket`): what
//! `biusctl stats|trace|info|fault|detach` and the model report of
//! `biusctl info` ask a running daemon, over the Unix socket
//! `/run/bius/<disk>.sock` ([`socket_path`]).
//!
//! # Protocol
//!
//! One line of JSON each way per connection, both carrying the
//! [`PROTOCOL_VERSION`]: a [`RequestLine`], e.g.
//! `{"version":1,"request":{"Stats":{"per_zone":false,"reset":false}}}`,
//! answered by a [`ReplyLine`]: `{"version":1,"response":{"Stats":{...}}}`,
//! or `{"version":1,"error":{...}}` with a [`ControlError`] (a line of
//! another version, or a request the daemon does not know or answer, gets
//! an error too).  The statistics travel as [`Stats`](crate::stats::Stats)
//! serializes them.
//!
//! The requests are [`Request`]'s: statistics, trace start, stop and
//! status, the device's [`DeviceInfo`](crate::DeviceInfo), a [`Fault`] to
//! inject into the zones, detach, and the device model.

mod fault;
mod protocol;

use std::path::{Path, PathBuf};

pub use fault::{Fault, FaultError, FaultReport};
pub use protocol::{
    ControlError, Reply, ReplyLine, Request, RequestLine, Response, StatsQuery, PROTOCOL_VERSION,
};

/// Where daemons' control sockets are: `/run/bius`.
pub const SOCKET_DIR: &str = "/run/bius";

/// The control socket of the daemon serving `disk_name`:
/// `/run/bius/<disk_name>.sock`.
pub fn socket_path(disk_name: &str) -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{disk_name}.sock"))
}
