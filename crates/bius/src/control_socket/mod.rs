//! The daemon's control socket (cargo feature `control-socket`): what
//! `biusctl stats|trace|info|fault|detach` and the model report of
//! `biusctl info` ask a running daemon, over the Unix socket
//! `/run/bius/<disk>.sock` ([`socket_path`]).
//!
//! # Protocol
//!
//! One line of JSON each way per connection, both carrying the
//! [`PROTOCOL_VERSION`]: a [`RequestLine`], e.g.
//! `{"version":2,"request":{"Stats":{"per_zone":false,"reset":false}}}`,
//! answered by a [`ReplyLine`]: `{"version":2,"response":{"Stats":{...}}}`,
//! or `{"version":2,"error":{...}}` with a [`ControlError`] (a line of
//! another version, or a request the daemon does not know or answer, gets
//! an error too).  The statistics travel as [`StatsSnapshot`](crate::stats::StatsSnapshot)
//! serializes them.
//!
//! The requests are [`ControlRequest`]'s: statistics, trace start, stop and
//! status, the device's [`DeviceInfo`](crate::DeviceInfo), a [`Fault`] to
//! inject into the zones, detach, and a daemon's own requests
//! ([`ControlRequest::Extension`]: a name and a JSON body each way, typed
//! at both ends by serde, as `biusctl`'s `model` is).
//!
//! # Serving it
//!
//! Every [`Device`](crate::Device) serves its control socket from the
//! moment it is live
//! ([`DeviceBuilder::control_socket`](crate::DeviceBuilder::control_socket)):
//! a daemon written on this crate answers `biusctl stats`, `biusctl
//! trace`, `biusctl detach` like one of `biusctl create`.  Faults and
//! requests of its own are the daemon's: it answers them through a
//! [`ControlExtension`]
//! ([`DeviceBuilder::control_extension`](crate::DeviceBuilder::control_extension)),
//! or they are refused as [`ControlError::Unsupported`].  A daemon that
//! opts out may serve one by hand, [`ControlSocket::serve`] (until
//! dropped), as below.
//!
//! [`ControlClient`] asks, as biusctl does; its documentation has an
//! example that serves a device of the loopback and reads its statistics.
//!
//! ```no_run
//! use bius::control_socket::ControlSocket;
//! use bius::{BlockDevice, DeviceBuilder, IoError};
//!
//! /// Reads zeroes, drops writes.
//! struct Zeroes;
//!
//! impl BlockDevice for Zeroes {
//!     fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
//!         buf.fill(0);
//!         Ok(())
//!     }
//!     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
//!         Ok(())
//!     }
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let device = DeviceBuilder::new(1 << 30)
//!         .name("zeroes")
//!         .control_socket(false)
//!         .create(Zeroes)?;
//!     // `biusctl stats zeroes` asks here, at /run/bius/zeroes.sock.
//!     let socket = ControlSocket::serve(&device)?;
//!     device.run_until_signal()?;
//!     drop(socket);
//!     Ok(())
//! }
//! ```

mod client;
mod fault;
mod protocol;
mod server;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use client::{ClientError, ControlClient};
pub use fault::{Fault, FaultError, FaultReport};
pub use protocol::{
    ControlError, ControlReply, ControlRequest, ReplyLine, RequestLine, Response, StatsQuery,
    PROTOCOL_VERSION,
};
pub use server::{ControlExtension, ControlSocket, ControlTarget, DeviceTarget, ServeError};

/// Where daemons' control sockets are: `/run/bius`.
pub const SOCKET_DIR: &str = "/run/bius";

/// How long a connection may take, on either end.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The control socket of the daemon serving `disk_name`:
/// `/run/bius/<disk_name>.sock`.
pub fn socket_path(disk_name: &str) -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{disk_name}.sock"))
}
