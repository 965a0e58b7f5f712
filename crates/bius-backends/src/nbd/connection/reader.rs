//! The reader thread of a connection: reads replies and dispatches them by
//! cookie.

use std::io::{self, Read};
use std::sync::Arc;

use super::{Shared, Stream};
use crate::nbd::error::read_error;
use crate::nbd::proto::{self, ChunkHeader, Request};
use crate::nbd::{NbdError, NbdIo};

/// The reader thread's state.
pub(super) struct Reader {
    pub(super) shared: Arc<Shared>,
    pub(super) stream: Stream,
    /// The io whose buffer is being filled, off the table meanwhile.
    pub(super) held: Option<(u64, Box<dyn NbdIo>)>,
}

/// What the reader needs to know about a request, copied out of the table.
#[derive(Clone, Copy)]
struct Pending {
    req: Request,
    chunks: bool,
}

impl Reader {
    pub(super) fn run(&mut self) {
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
