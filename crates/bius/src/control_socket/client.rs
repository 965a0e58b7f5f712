//! The client's end of the control socket: [`ControlClient`], a typed
//! method per request, and [`ClientError`].

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::control::DeviceInfo;
use crate::stats::{StatsSnapshot, TraceFormat, TraceSummary};

use super::fault::{Fault, FaultReport};
use super::protocol::{
    ControlError, ControlReply, ControlRequest, ReplyLine, RequestLine, Response, StatsQuery,
    Version, PROTOCOL_VERSION,
};
use super::{socket_path, IO_TIMEOUT};

/// Longest reply line read (the statistics of every zone of a large disk).
const MAX_REPLY: u64 = 64 << 20;

/// Why a request to a daemon failed.
#[derive(Debug)]
pub enum ClientError {
    /// No daemon listens on the socket.
    NoDaemon {
        /// The socket.
        path: PathBuf,
        /// Why connecting failed.
        source: io::Error,
    },
    /// The exchange with the daemon failed.
    Io {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The daemon answered outside the protocol (another version, a line
    /// that is no reply, or another response than the request's).
    Protocol {
        /// The socket.
        path: PathBuf,
        /// What is wrong with the answer.
        reason: String,
    },
    /// The daemon answered with an error.
    Refused(ControlError),
}

impl ClientError {
    /// The errno that says why: the system call's, `EPROTO` for an answer
    /// outside the protocol, the daemon's for a refusal.
    pub fn errno(&self) -> Errno {
        match self {
            ClientError::NoDaemon { source, .. } | ClientError::Io { source, .. } => {
                source.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
            }
            ClientError::Protocol { .. } => Errno::EPROTO,
            ClientError::Refused(err) => err.errno(),
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NoDaemon { path, source }
                if source.kind() == io::ErrorKind::ConnectionRefused =>
            {
                write!(f, "the daemon of {} is gone (did it die?)", path.display())
            }
            ClientError::NoDaemon { path, .. } => write!(
                f,
                "no daemon listens on {} (only a daemon serving a control socket, as `biusctl create` does, has one)",
                path.display()
            ),
            ClientError::Io { path, .. } => {
                write!(f, "talking to the daemon on {} failed", path.display())
            }
            ClientError::Protocol { path, reason } => write!(
                f,
                "the daemon on {} answered outside the protocol: {reason}",
                path.display()
            ),
            ClientError::Refused(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::NoDaemon { source, .. } | ClientError::Io { source, .. } => Some(source),
            ClientError::Protocol { .. } => None,
            ClientError::Refused(err) => Some(err),
        }
    }
}

/// A client of a daemon's control socket: one request per connection, a
/// typed method per request.
///
/// ```
/// use bius::control_socket::{ControlClient, ControlSocket, ControlTarget};
/// use bius::loopback::Loopback;
/// use bius::stats::Statistics;
/// use bius::{BlockDevice, DeviceBuilder, IoError, Op};
///
/// struct Zeroes;
///
/// impl BlockDevice for Zeroes {
///     fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
///         buf.fill(0);
///         Ok(())
///     }
///     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
///         Ok(())
///     }
/// }
///
/// /// A device served by the loopback: statistics only.
/// struct Served(Statistics);
///
/// impl ControlTarget for Served {
///     fn statistics(&self) -> &Statistics {
///         &self.0
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut kernel = Loopback::new(&DeviceBuilder::new(1 << 20))?;
/// kernel.start(Zeroes)?;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("zeroes.sock");
/// let _socket = ControlSocket::bind(&path, Served(kernel.statistics()), ())?;
/// kernel.read(0, 0, 4096)?;
///
/// let stats = ControlClient::connect(&path)?.stats()?;
/// assert_eq!(stats.op(Op::Read).count, 1);
/// # kernel.stop()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ControlClient {
    path: PathBuf,
    /// The connection of the next request, made by `connect`.
    stream: Option<UnixStream>,
}

impl ControlClient {
    /// Connects to the daemon listening on `path`.
    pub fn connect(path: impl Into<PathBuf>) -> Result<ControlClient, ClientError> {
        let path = path.into();
        let stream = open(&path)?;
        Ok(ControlClient {
            path,
            stream: Some(stream),
        })
    }

    /// Connects to the daemon serving `disk_name`, at its [`socket_path`].
    pub fn connect_disk(disk_name: &str) -> Result<ControlClient, ClientError> {
        ControlClient::connect(socket_path(disk_name))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends `request` and returns the daemon's response.
    pub fn request(&mut self, request: ControlRequest) -> Result<Response, ClientError> {
        let stream = match self.stream.take() {
            Some(stream) => stream,
            None => open(&self.path)?,
        };
        let io_error = |source| ClientError::Io {
            path: self.path.clone(),
            source,
        };
        let line = RequestLine {
            version: PROTOCOL_VERSION,
            request,
        };
        let mut text = serde_json::to_string(&line).map_err(|err| self.protocol(err))?;
        text.push('\n');
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .map_err(io_error)?;
        stream
            .set_write_timeout(Some(IO_TIMEOUT))
            .map_err(io_error)?;
        (&stream).write_all(text.as_bytes()).map_err(io_error)?;
        let mut answer = String::new();
        BufReader::new(&stream)
            .take(MAX_REPLY)
            .read_line(&mut answer)
            .map_err(io_error)?;
        let Version { version } =
            serde_json::from_str(&answer).map_err(|err| self.protocol(err))?;
        if version != PROTOCOL_VERSION {
            return Err(self.protocol(format!("version {version}, not {PROTOCOL_VERSION}")));
        }
        let ReplyLine { reply, .. } =
            serde_json::from_str(&answer).map_err(|err| self.protocol(err))?;
        match reply {
            ControlReply::Response(response) => Ok(response),
            ControlReply::Error(err) => Err(ClientError::Refused(err)),
        }
    }

    /// The statistics now, without each zone's.
    pub fn stats(&mut self) -> Result<StatsSnapshot, ClientError> {
        self.stats_with(StatsQuery::default())
    }

    /// The statistics as `query` asks.
    pub fn stats_with(&mut self, query: StatsQuery) -> Result<StatsSnapshot, ClientError> {
        match self.request(ControlRequest::Stats(query))? {
            Response::Stats(stats) => Ok(*stats),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Starts tracing every request into a new file at `file` (as the
    /// daemon sees it: absolute); the trace as it runs.
    pub fn start_trace(
        &mut self,
        file: impl Into<PathBuf>,
        format: TraceFormat,
    ) -> Result<TraceSummary, ClientError> {
        let file = file.into();
        self.trace(ControlRequest::TraceStart { file, format })
    }

    /// Stops the trace; its summary.
    pub fn stop_trace(&mut self) -> Result<TraceSummary, ClientError> {
        self.trace(ControlRequest::TraceStop)
    }

    /// The running or last trace.
    pub fn trace_status(&mut self) -> Result<TraceSummary, ClientError> {
        self.trace(ControlRequest::TraceStatus)
    }

    fn trace(&mut self, request: ControlRequest) -> Result<TraceSummary, ClientError> {
        match self.request(request)? {
            Response::Trace(summary) => Ok(summary),
            other => Err(self.unexpected(&other)),
        }
    }

    /// What the kernel reports about the device.
    pub fn info(&mut self) -> Result<DeviceInfo, ClientError> {
        match self.request(ControlRequest::Info)? {
            Response::Info(info) => Ok(*info),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Injects `fault` into the device's zones.
    pub fn fault(&mut self, fault: Fault) -> Result<FaultReport, ClientError> {
        match self.request(ControlRequest::Fault(fault))? {
            Response::Fault(report) => Ok(report),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Asks the daemon to detach the device (watch
    /// [`device_info`](crate::device_info) for it to be recovering).
    pub fn detach(&mut self) -> Result<(), ClientError> {
        match self.request(ControlRequest::Detach)? {
            Response::Detaching => Ok(()),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Asks the daemon's own request `name` with `body`
    /// ([`ControlRequest::Extension`]), its answer read as `T`: the two
    /// ends agree on the forms through serde (`biusctl info` asks `model`
    /// of a `biusctl create` daemon for its model's report).
    pub fn extension<T: DeserializeOwned>(
        &mut self,
        name: &str,
        body: impl Serialize,
    ) -> Result<T, ClientError> {
        let body = serde_json::to_value(body).map_err(|err| self.protocol(err))?;
        let request = ControlRequest::Extension {
            name: name.into(),
            body,
        };
        match self.request(request)? {
            Response::Extension(answer) => {
                serde_json::from_value(answer).map_err(|err| self.protocol(err))
            }
            other => Err(self.unexpected(&other)),
        }
    }

    fn protocol(&self, reason: impl fmt::Display) -> ClientError {
        ClientError::Protocol {
            path: self.path.clone(),
            reason: reason.to_string(),
        }
    }

    fn unexpected(&self, response: &Response) -> ClientError {
        let name = match response {
            Response::Stats(_) => "statistics",
            Response::Trace(_) => "a trace",
            Response::Info(_) => "device info",
            Response::Fault(_) => "a fault report",
            Response::Detaching => "detaching",
            Response::Extension(_) => "an extension's answer",
        };
        self.protocol(format!("{name} as the answer to another request"))
    }
}

/// A connection to the daemon on `path`.
fn open(path: &Path) -> Result<UnixStream, ClientError> {
    UnixStream::connect(path).map_err(|source| ClientError::NoDaemon {
        path: path.to_owned(),
        source,
    })
}
