//! The daemon's end of the control socket: [`ControlSocket`], a thread
//! answering the requests for a [`ControlTarget`] (a [`Device`], through
//! [`DeviceTarget`]) and the daemon's own [`ControlExtension`].

use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};

use nix::errno::Errno;

use crate::control::{device_info, Detacher, Device, DeviceInfo};
use crate::error::Error;
use crate::stats::{Statistics, TraceError};

use super::fault::{Fault, FaultReport};
use super::protocol::{
    ControlError, ControlReply, ControlRequest, ReplyLine, RequestLine, Response, Version,
    PROTOCOL_VERSION,
};
use super::{socket_path, IO_TIMEOUT};

/// Longest request line read (a trace request carries a path).
const MAX_REQUEST: u64 = 8 << 10;

/// Conversations answered at once, each on its own thread; a client
/// beyond them waits for one to end (at most [`IO_TIMEOUT`]).
const MAX_CONVERSATIONS: usize = 8;

/// The device a control socket answers for: its statistics (and traces),
/// its info, its detach.  [`DeviceTarget`] is a [`Device`]'s; a daemon
/// serving something else (a test over the loopback) implements it.
pub trait ControlTarget: Send + Sync + 'static {
    /// The statistics that stats and trace requests read and drive.
    fn statistics(&self) -> &Statistics;

    /// What the kernel reports about the device
    /// ([`ControlRequest::Info`]).  By default not answered.
    fn info(&self) -> Result<DeviceInfo, ControlError> {
        Err(ControlError::unsupported(&ControlRequest::Info))
    }

    /// Starts detaching the device ([`ControlRequest::Detach`]).  By default
    /// not answered.
    fn detach(&self) -> Result<(), ControlError> {
        Err(ControlError::unsupported(&ControlRequest::Detach))
    }
}

/// The requests a daemon answers beyond its device's: faults injected into
/// its zones, its device model.  Each is by default not answered
/// ([`ControlError::Unsupported`]); `()` answers none.
///
/// ```
/// use std::sync::Arc;
///
/// use bius::control_socket::{ControlError, ControlExtension, Fault, FaultReport};
/// use bius::zone::ZoneSet;
///
/// /// Faults for a daemon whose zones are a `ZoneSet` over memory.
/// struct Faults(Arc<ZoneSet>);
///
/// impl ControlExtension for Faults {
///     fn fault(&self, fault: Fault) -> Result<FaultReport, ControlError> {
///         // (nothing to discard: a zone made empty reads as zeroes anyway)
///         fault
///             .apply(&self.0, |_, _| Ok(()))
///             .map_err(|err| ControlError::failed(err.errno(), err))
///     }
/// }
/// ```
pub trait ControlExtension: Send + Sync + 'static {
    /// Injects `fault` ([`ControlRequest::Fault`]).
    fn fault(&self, fault: Fault) -> Result<FaultReport, ControlError> {
        Err(ControlError::unsupported(&ControlRequest::Fault(fault)))
    }

    /// Answers the daemon's own request `name` with its `body`
    /// ([`ControlRequest::Extension`]), in any form its client reads back
    /// ([`ControlClient::extension`](super::ControlClient::extension)).
    fn extension(
        &self,
        name: &str,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, ControlError> {
        let _ = body;
        Err(ControlError::unsupported(&ControlRequest::Extension {
            name: name.into(),
            body: serde_json::Value::Null,
        }))
    }
}

/// No extension: faults and the model are not answered.
impl ControlExtension for () {}

/// A shared extension answers as itself.
impl<E: ControlExtension + ?Sized> ControlExtension for Arc<E> {
    fn fault(&self, fault: Fault) -> Result<FaultReport, ControlError> {
        (**self).fault(fault)
    }

    fn extension(
        &self,
        name: &str,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, ControlError> {
        (**self).extension(name, body)
    }
}

/// A [`Device`]'s side of the control socket: its statistics, what the
/// kernel reports about it, and a [`Detacher`].
#[derive(Debug)]
pub struct DeviceTarget {
    id: u32,
    statistics: Statistics,
    detacher: Detacher,
}

impl DeviceTarget {
    /// The handles of `device` that a control socket needs.
    pub fn new(device: &Device) -> Result<DeviceTarget, Error> {
        Ok(DeviceTarget {
            id: device.id(),
            statistics: device.statistics(),
            detacher: device.detacher()?,
        })
    }
}

impl ControlTarget for DeviceTarget {
    fn statistics(&self) -> &Statistics {
        &self.statistics
    }

    fn info(&self) -> Result<DeviceInfo, ControlError> {
        device_info(self.id).map_err(|err| ControlError::failed(err.errno(), err))
    }

    fn detach(&self) -> Result<(), ControlError> {
        self.detacher
            .detach()
            .map_err(|err| ControlError::failed(err.errno(), err))
    }
}

/// Why a control socket could not be served.
#[derive(Debug)]
pub enum ServeError {
    /// The device's handles could not be had ([`DeviceTarget::new`]).
    Device(Error),
    /// Listening on the socket failed.
    Listen {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl ServeError {
    /// The errno that says why.
    pub fn errno(&self) -> Errno {
        match self {
            ServeError::Device(err) => err.errno(),
            ServeError::Listen { source, .. } => {
                source.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
            }
        }
    }
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Device(err) => err.fmt(f),
            ServeError::Listen { path, source } => {
                write!(f, "cannot listen on {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Device(err) => Some(err),
            ServeError::Listen { source, .. } => Some(source),
        }
    }
}

/// A daemon's control socket: a thread accepting connections, each
/// answered (one request) on a thread of its own, so that a slow or silent
/// client delays nobody else.  Dropping it ends the open conversations,
/// stops the threads and removes the socket.
#[derive(Debug)]
pub struct ControlSocket {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlSocket {
    /// Serves `device`'s control socket at [`socket_path`] of its disk:
    /// statistics, traces, info, detach; faults and the model are not
    /// answered.
    pub fn serve(device: &Device) -> Result<ControlSocket, ServeError> {
        ControlSocket::serve_with(device, ())
    }

    /// Serves `device`'s control socket at [`socket_path`] of its disk,
    /// with the daemon's `extension`.
    pub fn serve_with(
        device: &Device,
        extension: impl ControlExtension,
    ) -> Result<ControlSocket, ServeError> {
        let target = DeviceTarget::new(device).map_err(ServeError::Device)?;
        ControlSocket::bind(socket_path(device.disk_name()), target, extension)
    }

    /// Listens on `path` (creating its directory with mode 0700 if there
    /// is none; a socket left there by a dead daemon is replaced), and
    /// answers for `target` and `extension`.
    pub fn bind(
        path: impl Into<PathBuf>,
        target: impl ControlTarget,
        extension: impl ControlExtension,
    ) -> Result<ControlSocket, ServeError> {
        let path = path.into();
        let listen_error = |source| ServeError::Listen {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(listen_error)?;
        }
        match std::fs::remove_file(&path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(listen_error(err)),
            _ => {}
        }
        let listener = UnixListener::bind(&path).map_err(listen_error)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let answerer = Arc::new(Answerer {
            target: Box::new(target),
            extension: Box::new(extension),
        });
        let thread = thread::Builder::new()
            .name("bius-control".into())
            .spawn(move || Conversations::default().serve(answerer, &listener, &stopped))
            .map_err(listen_error)?;
        Ok(ControlSocket {
            path,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the thread up from accept().
        if UnixStream::connect(&self.path).is_ok() {
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The conversations under way: a clone of each one's stream (to end it
/// at the socket's drop) and the threads answering them.
#[derive(Default)]
struct Conversations {
    open: Mutex<Open>,
    /// Signalled when a conversation ends.
    ended: Condvar,
}

#[derive(Default)]
struct Open {
    next: u64,
    streams: HashMap<u64, UnixStream>,
    threads: Vec<JoinHandle<()>>,
}

impl Conversations {
    /// Accepts connections on `listener` until `stop`, each answered by
    /// `answerer` on a thread of its own; then ends the open ones (their
    /// streams shut down) and waits for their threads.
    fn serve(self, answerer: Arc<Answerer>, listener: &UnixListener, stop: &AtomicBool) {
        let conversations = Arc::new(self);
        for stream in listener.incoming() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let started = stream.and_then(|stream| conversations.start(&answerer, stream));
            if let Err(err) = started {
                log::warn!("control socket: {err}");
            }
        }
        let threads = {
            let mut open = conversations.lock();
            for stream in open.streams.values() {
                let _ = stream.shutdown(Shutdown::Both);
            }
            std::mem::take(&mut open.threads)
        };
        for thread in threads {
            let _ = thread.join();
        }
    }

    /// Answers `stream` on a new thread, once fewer than
    /// [`MAX_CONVERSATIONS`] are under way.
    fn start(self: &Arc<Self>, answerer: &Arc<Answerer>, stream: UnixStream) -> io::Result<()> {
        let mut open = self.lock();
        while open.streams.len() >= MAX_CONVERSATIONS {
            open = self
                .ended
                .wait(open)
                .unwrap_or_else(PoisonError::into_inner);
        }
        open.threads.retain(|thread| !thread.is_finished());
        let id = open.next;
        open.next += 1;
        open.streams.insert(id, stream.try_clone()?);
        let (conversations, answerer) = (Arc::clone(self), Arc::clone(answerer));
        let spawned = thread::Builder::new()
            .name("bius-control-c".into())
            .spawn(move || {
                if let Err(err) = answerer.converse(&stream) {
                    log::warn!("control socket: {err}");
                }
                conversations.lock().streams.remove(&id);
                conversations.ended.notify_one();
            });
        match spawned {
            Ok(thread) => {
                open.threads.push(thread);
                Ok(())
            }
            Err(err) => {
                open.streams.remove(&id);
                Err(err)
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        // (the guarded maps stay whole whatever panicked)
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What answers the requests.
struct Answerer {
    target: Box<dyn ControlTarget>,
    extension: Box<dyn ControlExtension>,
}

impl Answerer {
    /// Reads a request line from `stream` and writes the reply line.
    fn converse(&self, stream: &UnixStream) -> io::Result<()> {
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        let mut line = String::new();
        let read = BufReader::new(stream)
            .take(MAX_REQUEST)
            .read_line(&mut line)?;
        if read == 0 {
            // Closed without a request (a client that gave up, or the
            // wake-up of `drop`): nobody to answer.
            return Ok(());
        }
        let reply = self.reply_line(line.trim_end());
        log::debug!("control socket: {} -> {reply}", line.trim_end());
        let mut stream = stream;
        stream.write_all(reply.as_bytes())?;
        stream.write_all(b"\n")
    }

    /// The reply line (without the newline) to a request line.
    fn reply_line(&self, line: &str) -> String {
        let result = parse(line).and_then(|request| self.answer(request));
        let reply = |reply: ControlReply| ReplyLine {
            version: PROTOCOL_VERSION,
            reply,
        };
        serde_json::to_string(&reply(result.into())).unwrap_or_else(|err| {
            let err = ControlError::failed(Errno::EIO, format!("cannot encode the answer: {err}"));
            // (an error of strings always encodes)
            serde_json::to_string(&reply(ControlReply::Error(err))).unwrap_or_default()
        })
    }

    fn answer(&self, request: ControlRequest) -> Result<Response, ControlError> {
        let statistics = self.target.statistics();
        match request {
            ControlRequest::Stats(query) => {
                let stats = match query.per_zone {
                    true => statistics.snapshot_per_zone(),
                    false => statistics.snapshot(),
                };
                if query.reset {
                    statistics.reset();
                }
                Ok(Response::Stats(Box::new(stats)))
            }
            ControlRequest::TraceStart { file, format } => {
                statistics
                    .start_trace(&file, format)
                    .map_err(|err| ControlError::failed(trace_errno(&err), err))?;
                Ok(Response::Trace(statistics.snapshot().trace))
            }
            ControlRequest::TraceStop => Ok(Response::Trace(statistics.stop_trace())),
            ControlRequest::TraceStatus => Ok(Response::Trace(statistics.snapshot().trace)),
            ControlRequest::Info => Ok(Response::Info(Box::new(self.target.info()?))),
            ControlRequest::Fault(fault) => Ok(Response::Fault(self.extension.fault(fault)?)),
            ControlRequest::Detach => {
                self.target.detach()?;
                Ok(Response::Detaching)
            }
            ControlRequest::Extension { name, body } => {
                Ok(Response::Extension(self.extension.extension(&name, body)?))
            }
        }
    }
}

/// The request of a line: its version first, then the request of that
/// version.
fn parse(line: &str) -> Result<ControlRequest, ControlError> {
    let malformed = |err: serde_json::Error| ControlError::Malformed {
        reason: err.to_string(),
    };
    let Version { version } = serde_json::from_str(line).map_err(malformed)?;
    if version != PROTOCOL_VERSION {
        return Err(ControlError::UnsupportedVersion { version });
    }
    let RequestLine { request, .. } = serde_json::from_str(line).map_err(malformed)?;
    Ok(request)
}

/// The errno of a trace that could not start.
fn trace_errno(err: &TraceError) -> Errno {
    match err {
        TraceError::File(_, io) => io.raw_os_error().map_or(Errno::EIO, Errno::from_raw),
        TraceError::Running(_) => Errno::EBUSY,
        TraceError::Disabled => Errno::EOPNOTSUPP,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control_socket::StatsQuery;

    struct Counts(Statistics);

    impl ControlTarget for Counts {
        fn statistics(&self) -> &Statistics {
            &self.0
        }
    }

    fn answerer() -> Answerer {
        Answerer {
            target: Box::new(Counts(Statistics::default())),
            extension: Box::new(()),
        }
    }

    fn reply(line: &str) -> ControlReply {
        let text = answerer().reply_line(line);
        let reply: ReplyLine = serde_json::from_str(&text).unwrap();
        assert_eq!(reply.version, PROTOCOL_VERSION);
        reply.reply
    }

    fn request(request: ControlRequest) -> String {
        serde_json::to_string(&RequestLine {
            version: PROTOCOL_VERSION,
            request,
        })
        .unwrap()
    }

    #[test]
    fn every_line_gets_a_typed_answer() {
        let stats = request(ControlRequest::Stats(StatsQuery::default()));
        assert!(matches!(
            reply(&stats),
            ControlReply::Response(Response::Stats(_))
        ));
        assert!(matches!(
            reply(r#"{"version":3,"request":"Melt"}"#),
            ControlReply::Error(ControlError::UnsupportedVersion { version: 3 })
        ));
        for line in ["", "stats zones", r#"{"version":2,"request":"Melt"}"#] {
            assert!(
                matches!(
                    reply(line),
                    ControlReply::Error(ControlError::Malformed { .. })
                ),
                "{line}"
            );
        }
        for unanswered in [
            ControlRequest::Extension {
                name: "model".into(),
                body: serde_json::Value::Null,
            },
            ControlRequest::Detach,
            ControlRequest::Info,
        ] {
            let name = unanswered.name().to_string();
            assert_eq!(
                reply(&request(unanswered)),
                ControlReply::Error(ControlError::Unsupported { request: name })
            );
        }
    }

    /// One exchange over the socket at `path`, as a client makes it.
    fn exchange(path: &Path, line: &str) -> String {
        let stream = UnixStream::connect(path).unwrap();
        (&stream).write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut reply = String::new();
        BufReader::new(&stream).read_line(&mut reply).unwrap();
        reply
    }

    /// A client that connects and says nothing holds up neither another
    /// client's answer nor the socket's drop.
    #[test]
    fn a_silent_client_delays_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("silent.sock");
        let socket = ControlSocket::bind(&path, Counts(Statistics::default()), ()).unwrap();
        let silent: Vec<_> = (0..MAX_CONVERSATIONS - 1)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        // (the server would answer these after IO_TIMEOUT at the earliest)
        let client = UnixStream::connect(&path).unwrap();
        client.set_read_timeout(Some(IO_TIMEOUT / 2)).unwrap();
        (&client)
            .write_all(format!("{}\n", request(ControlRequest::TraceStatus)).as_bytes())
            .unwrap();
        let mut reply = String::new();
        BufReader::new(&client).read_line(&mut reply).unwrap();
        assert!(reply.contains("Trace"), "{reply}");
        let (done, dropped) = std::sync::mpsc::channel();
        thread::spawn(move || {
            drop(socket);
            done.send(()).unwrap();
        });
        dropped
            .recv_timeout(IO_TIMEOUT / 2)
            .expect("the drop waited for the silent clients");
        for mut stream in silent {
            let mut rest = Vec::new();
            // (ended by the drop: end of file, or reset)
            assert!(matches!(stream.read_to_end(&mut rest), Ok(0) | Err(_)));
        }
    }

    #[test]
    fn the_socket_serves_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let path = run.join("zdisk.sock");
        let bind = || ControlSocket::bind(&path, Counts(Statistics::default()), ());
        let socket = bind().unwrap();
        assert_eq!(socket.path(), path);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&run).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let reply = exchange(&path, &request(ControlRequest::TraceStatus));
        assert!(
            reply.starts_with(r#"{"version":2,"response":{"Trace":"#),
            "{reply}"
        );
        assert!(reply.ends_with('\n'));
        let reply = exchange(&path, "melt");
        assert!(
            reply.starts_with(r#"{"version":2,"error":{"Malformed":"#),
            "{reply}"
        );
        // A stale socket is replaced; a dropped one removed.
        drop(socket);
        assert!(!path.exists());
        drop(UnixListener::bind(&path).unwrap());
        let socket = bind().unwrap();
        assert!(exchange(&path, &request(ControlRequest::TraceStatus)).contains("Trace"));
        drop(socket);
        assert!(!path.exists());
    }
}
