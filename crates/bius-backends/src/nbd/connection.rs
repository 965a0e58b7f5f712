//! One NBD connection in the transmission phase: senders write requests
//! under a lock, one reader thread reads replies and hands each to the
//! request with its cookie.
//!
//! Ownership of an io: it sits in its entry of the cookie table, except
//! while the sender writes its payload (a write) or while the reader reads
//! data into its buffer; whoever holds it when the entry completes or the
//! connection dies finishes it, so it is finished exactly once.

use std::collections::HashMap;
use std::io::{self, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::handshake::{handshake, Negotiated};
use super::proto::{self, Coverage, Request};
use super::{NbdAddress, NbdError, NbdIo};
use crate::io_thread;

mod reader;

use reader::Reader;

/// How long a handshake read, or a request write, may make no progress
/// before the connection is considered dead.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A connected socket.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn connect(addr: &NbdAddress) -> io::Result<Stream> {
        Ok(match addr {
            NbdAddress::Tcp { host, port } => {
                let s = TcpStream::connect((host.as_str(), *port))?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
            NbdAddress::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
        })
    }

    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
            Stream::Unix(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
        }
    }

    fn shutdown(&self) {
        // Fails only if already shut down or never connected.
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A request in flight.
struct Entry {
    /// The io, unless the sender or the reader holds it.
    io: Option<Box<dyn NbdIo>>,
    req: Request,
    /// Bytes of a read delivered so far.
    coverage: Coverage,
    /// Whether a structured chunk arrived for it.
    chunks: bool,
    /// The first error chunk.
    error: Option<NbdError>,
    /// The result, if the reply completed while the sender held the io.
    done: Option<Result<(), NbdError>>,
}

struct State {
    /// What broke the connection.
    dead: Option<Arc<NbdError>>,
    entries: HashMap<u64, Entry>,
    next_cookie: u64,
}

/// State shared by senders and the reader.
struct Shared {
    state: Mutex<State>,
    in_flight: AtomicUsize,
    is_dead: AtomicBool,
    /// For shutting the socket down.
    stream: Stream,
    structured: bool,
}

/// The error an io finishes with once the connection died of `cause`.
fn dead_error(cause: &Arc<NbdError>) -> NbdError {
    match **cause {
        NbdError::Closed => NbdError::Closed,
        _ => NbdError::Disconnected(cause.clone()),
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking `finish` never runs under this lock; recover anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remove(&self, st: &mut State, cookie: u64) -> Option<Entry> {
        let e = st.entries.remove(&cookie);
        if e.is_some() {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        e
    }

    /// Marks the connection dead (the first cause wins), shuts the socket
    /// down and fails every io in the table.
    fn kill(&self, cause: NbdError) {
        let dead = self.mark_dead(cause);
        self.bury(dead);
    }

    /// Marks the connection dead (the first cause wins) and takes the ios
    /// of the table; `bury` then finishes them.
    fn mark_dead(&self, cause: NbdError) -> (Arc<NbdError>, Vec<Box<dyn NbdIo>>) {
        let mut st = self.lock();
        if st.dead.is_none() {
            // (A close by the client is no news.)
            if !matches!(cause, NbdError::Closed) {
                log::error!("NBD connection lost: {cause}; its requests fail with EIO");
            }
        }
        let cause = st.dead.get_or_insert_with(|| Arc::new(cause)).clone();
        self.is_dead.store(true, Ordering::Release);
        let n = st.entries.len();
        let ios: Vec<_> = st.entries.drain().filter_map(|(_, e)| e.io).collect();
        self.in_flight.fetch_sub(n, Ordering::Relaxed);
        (cause, ios)
    }

    /// Shuts the socket down and fails the ios `mark_dead` took.
    fn bury(&self, (cause, ios): (Arc<NbdError>, Vec<Box<dyn NbdIo>>)) {
        self.stream.shutdown();
        for io in ios {
            io.finish(Err(dead_error(&cause)));
        }
    }

    /// Finishes `io` of `cookie` with `result`, or with the connection's
    /// death if its entry is gone.
    fn finish_held(
        &self,
        mut st: MutexGuard<'_, State>,
        cookie: u64,
        io: Box<dyn NbdIo>,
        result: Result<(), NbdError>,
    ) {
        let result = match self.remove(&mut st, cookie) {
            Some(_) => result,
            None => Err(st.dead.as_ref().map_or(NbdError::Closed, dead_error)),
        };
        drop(st);
        io.finish(result);
    }

    /// The sender hands a write's io back after writing its payload.
    fn return_io(&self, cookie: u64, io: Box<dyn NbdIo>) {
        let mut st = self.lock();
        match st.entries.get_mut(&cookie) {
            Some(e) if e.done.is_none() => e.io = Some(io),
            Some(e) => {
                let result = e.done.take().expect("checked");
                self.finish_held(st, cookie, io, result);
            }
            None => self.finish_held(st, cookie, io, Ok(())),
        }
    }
}

/// One connection to the server.
pub(crate) struct Connection {
    shared: Arc<Shared>,
    writer: Mutex<BufWriter<Stream>>,
    reader: Mutex<Option<JoinHandle<()>>>,
}

impl Connection {
    /// Connects, negotiates `export` and starts the reader thread.
    pub(crate) fn open(
        addr: &NbdAddress,
        export: &str,
        index: usize,
    ) -> Result<(Connection, Negotiated), NbdError> {
        let mut stream = Stream::connect(addr).map_err(|source| NbdError::Connect {
            addr: addr.to_string(),
            source,
        })?;
        let io_err = |context| move |source| NbdError::Io { context, source };
        stream
            .set_timeouts(Some(STALL_TIMEOUT), Some(STALL_TIMEOUT))
            .map_err(io_err("setting socket timeouts"))?;
        let negotiated = handshake(&mut stream, export)?;
        // Replies may take arbitrarily long; writes must make progress.
        stream
            .set_timeouts(None, Some(STALL_TIMEOUT))
            .map_err(io_err("setting socket timeouts"))?;
        let reader_stream = stream.try_clone().map_err(io_err("cloning the socket"))?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                dead: None,
                entries: HashMap::new(),
                next_cookie: 1,
            }),
            in_flight: AtomicUsize::new(0),
            is_dead: AtomicBool::new(false),
            stream: stream.try_clone().map_err(io_err("cloning the socket"))?,
            structured: negotiated.structured,
        });
        let mut reader = Reader {
            shared: shared.clone(),
            stream: reader_stream,
            held: None,
        };
        let handle = io_thread::spawn(
            thread::Builder::new().name(format!("nbd-reader-{index}")),
            move || reader.run(),
        )
        .map_err(io_err("spawning the reader thread"))?;
        let conn = Connection {
            shared,
            writer: Mutex::new(BufWriter::with_capacity(64 * 1024, stream)),
            reader: Mutex::new(Some(handle)),
        };
        Ok((conn, negotiated))
    }

    /// Requests in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::Relaxed)
    }

    /// Whether the connection broke or was closed.
    pub(crate) fn is_dead(&self) -> bool {
        self.shared.is_dead.load(Ordering::Acquire)
    }

    /// What broke the connection, if it is dead.
    pub(crate) fn error(&self) -> Option<Arc<NbdError>> {
        self.shared.lock().dead.clone()
    }

    /// Sends `io` as request `req` (its cookie is filled in here).
    pub(crate) fn submit(&self, io: Box<dyn NbdIo>, mut req: Request) {
        let write = req.kind == proto::CMD_WRITE;
        let mut held = None;
        {
            let mut st = self.shared.lock();
            if let Some(cause) = &st.dead {
                let err = dead_error(cause);
                drop(st);
                io.finish(Err(err));
                return;
            }
            req.cookie = st.next_cookie;
            st.next_cookie += 1;
            let io = if write {
                held = Some(io);
                None
            } else {
                Some(io)
            };
            st.entries.insert(
                req.cookie,
                Entry {
                    io,
                    req,
                    coverage: Coverage::default(),
                    chunks: false,
                    error: None,
                    done: None,
                },
            );
            self.shared.in_flight.fetch_add(1, Ordering::Relaxed);
        }
        let sent = {
            let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            w.write_all(&req.encode())
                .and_then(|()| match &held {
                    Some(io) => w.write_all(io.write_data()),
                    None => Ok(()),
                })
                .and_then(|()| w.flush())
        };
        if let Err(source) = sent {
            self.shared.kill(NbdError::Io {
                context: "sending a request",
                source,
            });
        }
        if let Some(io) = held {
            self.shared.return_io(req.cookie, io);
        }
    }

    /// Sends `NBD_CMD_DISC` if the connection is alive and idle enough to
    /// take the writer lock, fails everything in flight with
    /// [`NbdError::Closed`] and waits for the reader thread.
    pub(crate) fn close(&self) {
        let alive = !self.is_dead();
        // Dead first, so the server hanging up after NBD_CMD_DISC is not
        // taken for the cause.
        let dead = self.shared.mark_dead(NbdError::Closed);
        if alive {
            if let Ok(mut w) = self.writer.try_lock() {
                let disc = Request {
                    flags: 0,
                    kind: proto::CMD_DISC,
                    cookie: 0,
                    offset: 0,
                    len: 0,
                };
                let _ = w.write_all(&disc.encode()).and_then(|()| w.flush());
            }
        }
        self.shared.bury(dead);
        let handle = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            // `close` may run in an io's `finish`, on the reader thread.
            if handle.thread().id() != thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}
