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

use super::error::read_error;
use super::handshake::{handshake, Negotiated};
use super::proto::{self, ChunkHeader, Coverage, Request};
use super::{NbdAddress, NbdError, NbdIo};

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
        let (cause, ios) = {
            let mut st = self.lock();
            let cause = st.dead.get_or_insert_with(|| Arc::new(cause)).clone();
            self.is_dead.store(true, Ordering::Release);
            let n = st.entries.len();
            let ios: Vec<_> = st.entries.drain().filter_map(|(_, e)| e.io).collect();
            self.in_flight.fetch_sub(n, Ordering::Relaxed);
            (cause, ios)
        };
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
        let handle = thread::Builder::new()
            .name(format!("nbd-reader-{index}"))
            .spawn(move || reader.run())
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
        if !self.is_dead() {
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
        self.shared.kill(NbdError::Closed);
        let handle = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            // `close` may run in an io's `finish`, on the reader thread.
            if handle.thread().id() != thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

/// The reader thread's state.
struct Reader {
    shared: Arc<Shared>,
    stream: Stream,
    /// The io whose buffer is being filled, off the table meanwhile.
    held: Option<(u64, Box<dyn NbdIo>)>,
}

/// What the reader needs to know about a request, copied out of the table.
#[derive(Clone, Copy)]
struct Pending {
    req: Request,
    chunks: bool,
}

impl Reader {
    fn run(&mut self) {
        let cause = loop {
            if let Err(e) = self.reply() {
                break e;
            }
        };
        self.shared.kill(cause);
        if let Some((cookie, io)) = self.held.take() {
            let st = self.shared.lock();
            self.shared
                .finish_held(st, cookie, io, Err(NbdError::Closed));
        }
    }

    fn read(&mut self, buf: &mut [u8], context: &'static str) -> Result<(), NbdError> {
        self.stream.read_exact(buf).map_err(read_error(context))
    }

    /// Copies out the request `cookie` refers to, marking it as having
    /// received a structured chunk if `chunk`.
    fn pending(&self, cookie: u64, chunk: bool) -> Result<Pending, NbdError> {
        let mut st = self.shared.lock();
        let e = match st.entries.get_mut(&cookie) {
            // A completed write whose sender still holds the io counts as
            // gone.
            Some(e) if e.done.is_none() => e,
            _ => return Err(NbdError::UnknownCookie { cookie }),
        };
        let p = Pending {
            req: e.req,
            chunks: e.chunks,
        };
        e.chunks |= chunk;
        Ok(p)
    }

    /// Reads and dispatches one simple reply or structured chunk.
    fn reply(&mut self) -> Result<(), NbdError> {
        let mut magic = [0; 4];
        let mut got = 0;
        while got < 4 {
            match self.stream.read(&mut magic[got..]) {
                Ok(0) if got == 0 => return Err(NbdError::ConnectionClosed),
                Ok(0) => {
                    return Err(NbdError::UnexpectedEof {
                        context: "reading a reply header",
                    })
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(NbdError::Io {
                        context: "reading a reply header",
                        source,
                    })
                }
            }
        }
        match u32::from_be_bytes(magic) {
            proto::SIMPLE_REPLY_MAGIC => {
                let mut b = [0; 12];
                self.read(&mut b, "reading a simple reply")?;
                let (errno, cookie) = proto::decode_simple_reply(&b);
                self.simple(errno, cookie)
            }
            proto::STRUCTURED_REPLY_MAGIC if self.shared.structured => {
                let mut b = [0; 16];
                self.read(&mut b, "reading a structured reply chunk header")?;
                self.chunk(proto::decode_chunk_header(&b))
            }
            magic => Err(NbdError::BadReplyMagic { magic }),
        }
    }

    fn simple(&mut self, errno: u32, cookie: u64) -> Result<(), NbdError> {
        let p = self.pending(cookie, false)?;
        if p.chunks || (p.req.kind == proto::CMD_READ && self.shared.structured && errno == 0) {
            return Err(NbdError::UnexpectedSimpleReply { cookie });
        }
        if errno != 0 {
            return self.complete(cookie, Err(server_error(errno, String::new(), None)));
        }
        if p.req.kind == proto::CMD_READ {
            // The length was checked against the maximum payload on submit.
            self.take(cookie)?;
            self.fill(0, p.req.len as usize, "reading read data")?;
        }
        self.complete(cookie, Ok(()))
    }

    fn chunk(&mut self, h: ChunkHeader) -> Result<(), NbdError> {
        let cookie = h.cookie;
        let p = self.pending(cookie, true)?;
        let done = h.flags & proto::REPLY_FLAG_DONE != 0;
        let bad = |reason: &'static str| NbdError::BadChunk {
            cookie,
            kind: h.kind,
            len: h.len,
            reason,
        };
        let read = p.req.kind == proto::CMD_READ;
        match h.kind {
            proto::REPLY_TYPE_NONE if h.len != 0 => return Err(bad("NONE chunk with a payload")),
            proto::REPLY_TYPE_NONE if !done => return Err(bad("NONE chunk without the DONE flag")),
            proto::REPLY_TYPE_NONE => {}
            proto::REPLY_TYPE_OFFSET_DATA | proto::REPLY_TYPE_OFFSET_HOLE if !read => {
                return Err(bad("content chunk for a command other than read"))
            }
            proto::REPLY_TYPE_OFFSET_DATA => {
                let limit = p.req.len.saturating_add(8);
                if h.len > limit {
                    return Err(NbdError::ReplyTooLong {
                        cookie,
                        len: h.len,
                        limit,
                    });
                }
                if h.len < 9 {
                    return Err(bad("data chunk shorter than 9 bytes"));
                }
                let mut b = [0; 8];
                self.read(&mut b, "reading a data chunk")?;
                let offset = u64::from_be_bytes(b);
                let start = self.claim(&p, offset, u64::from(h.len - 8))?;
                self.take(cookie)?;
                self.fill(start, (h.len - 8) as usize, "reading a data chunk")?;
                if !done {
                    return self.put_back();
                }
            }
            proto::REPLY_TYPE_OFFSET_HOLE => {
                if h.len != 12 {
                    return Err(bad("hole chunk length is not 12"));
                }
                let mut b = [0; 12];
                self.read(&mut b, "reading a hole chunk")?;
                let offset = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
                let size = u32::from_be_bytes(b[8..].try_into().expect("4 bytes"));
                if size == 0 {
                    return Err(bad("hole of size 0"));
                }
                let start = self.claim(&p, offset, u64::from(size))?;
                let mut st = self.shared.lock();
                if let Some(io) = st.entries.get_mut(&cookie).and_then(|e| e.io.as_mut()) {
                    let buf = io.read_buf();
                    let buffer = buf.len();
                    buf.get_mut(start..start + size as usize)
                        .ok_or(NbdError::BufferSize {
                            len: p.req.len,
                            buffer,
                        })?
                        .fill(0);
                }
            }
            kind if kind & proto::REPLY_TYPE_ERROR_BIT != 0 => {
                if h.len > proto::MAX_ERROR_CHUNK {
                    return Err(NbdError::ReplyTooLong {
                        cookie,
                        len: h.len,
                        limit: proto::MAX_ERROR_CHUNK,
                    });
                }
                let mut b = vec![0; h.len as usize];
                self.read(&mut b, "reading an error chunk")?;
                let e = proto::decode_error_payload(kind, &b).map_err(bad)?;
                if let Some(offset) = e.offset {
                    if p.req.kind == proto::CMD_FLUSH {
                        return Err(bad("error offset for a flush"));
                    }
                    let end = p.req.offset + u64::from(p.req.len);
                    if offset < p.req.offset || offset >= end {
                        return Err(NbdError::ChunkOutOfRange {
                            cookie,
                            offset,
                            len: 1,
                            req_offset: p.req.offset,
                            req_len: p.req.len,
                        });
                    }
                }
                let mut st = self.shared.lock();
                if let Some(entry) = st.entries.get_mut(&cookie) {
                    entry
                        .error
                        .get_or_insert(server_error(e.errno, e.message, e.offset));
                }
            }
            _ => return Err(bad("unexpected chunk type")),
        }
        if done {
            self.finalize(cookie)
        } else {
            Ok(())
        }
    }

    /// Checks that `offset..offset+len` lies in the read `p` and overlaps
    /// nothing received before, records it, and returns its start in the
    /// read buffer.
    fn claim(&mut self, p: &Pending, offset: u64, len: u64) -> Result<usize, NbdError> {
        let cookie = p.req.cookie;
        let req_end = p.req.offset + u64::from(p.req.len);
        let inside =
            offset >= p.req.offset && offset.checked_add(len).is_some_and(|end| end <= req_end);
        if !inside {
            return Err(NbdError::ChunkOutOfRange {
                cookie,
                offset,
                len,
                req_offset: p.req.offset,
                req_len: p.req.len,
            });
        }
        let mut st = self.shared.lock();
        // Gone only if the connection died meanwhile.
        let e = st.entries.get_mut(&cookie).ok_or(NbdError::Closed)?;
        let start = offset - p.req.offset;
        if !e.coverage.add(start, start + len) {
            return Err(NbdError::ChunkOverlap {
                cookie,
                offset,
                len,
            });
        }
        Ok(start as usize)
    }

    /// Takes the io of `cookie` off the table to fill its buffer.
    fn take(&mut self, cookie: u64) -> Result<(), NbdError> {
        let mut st = self.shared.lock();
        let io = st
            .entries
            .get_mut(&cookie)
            .and_then(|e| e.io.take())
            .ok_or(NbdError::Closed)?;
        self.held = Some((cookie, io));
        Ok(())
    }

    /// Reads `len` bytes from the socket into the held io's buffer at
    /// `start`.
    fn fill(&mut self, start: usize, len: usize, context: &'static str) -> Result<(), NbdError> {
        let (_, io) = self.held.as_mut().expect("an io is held");
        let buf = io.read_buf();
        let buffer = buf.len();
        let buf = buf
            .get_mut(start..start + len)
            .ok_or(NbdError::BufferSize {
                len: (start + len) as u32,
                buffer,
            })?;
        self.stream.read_exact(buf).map_err(read_error(context))
    }

    /// Returns the held io to its entry, more chunks to come.
    fn put_back(&mut self) -> Result<(), NbdError> {
        let (cookie, io) = self.held.take().expect("an io is held");
        let mut st = self.shared.lock();
        match st.entries.get_mut(&cookie) {
            Some(e) => e.io = Some(io),
            None => self
                .shared
                .finish_held(st, cookie, io, Err(NbdError::Closed)),
        }
        Ok(())
    }

    /// The final chunk of `cookie` arrived.
    fn finalize(&mut self, cookie: u64) -> Result<(), NbdError> {
        let result = {
            let mut st = self.shared.lock();
            let Some(e) = st.entries.get_mut(&cookie) else {
                return Err(NbdError::Closed);
            };
            match e.error.take() {
                Some(err) => Err(err),
                None if e.req.kind == proto::CMD_READ
                    && e.coverage.total() != u64::from(e.req.len) =>
                {
                    return Err(NbdError::IncompleteRead {
                        cookie,
                        covered: e.coverage.total(),
                        len: e.req.len,
                    })
                }
                None => Ok(()),
            }
        };
        self.complete(cookie, result)
    }

    /// Completes `cookie` with `result`: finishes its io, or leaves the
    /// result for the sender still writing its payload.
    fn complete(&mut self, cookie: u64, result: Result<(), NbdError>) -> Result<(), NbdError> {
        let mut st = self.shared.lock();
        let io = match self.held.take() {
            Some((_, io)) => Some(io),
            None => st.entries.get_mut(&cookie).and_then(|e| e.io.take()),
        };
        match io {
            Some(io) => self.shared.finish_held(st, cookie, io, result),
            None => {
                if let Some(e) = st.entries.get_mut(&cookie) {
                    e.done = Some(result);
                }
            }
        }
        Ok(())
    }
}

fn server_error(errno: u32, message: String, offset: Option<u64>) -> NbdError {
    NbdError::Server {
        errno,
        message,
        offset,
    }
}
