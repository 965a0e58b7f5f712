//! [`NbdError`]: everything that can go wrong talking to an NBD server.

use std::fmt;
use std::io;
use std::sync::Arc;

use bius::IoError;
use nix::errno::Errno;

use super::proto;

/// An error of the NBD client: connecting, negotiating, a request refused
/// locally or by the server, or a broken connection.
///
/// Errors that break a connection (the protocol violations and socket
/// failures) reach every request in flight on it, and every later one, as
/// [`NbdError::Disconnected`] carrying the first such error.
#[derive(Debug)]
#[non_exhaustive]
pub enum NbdError {
    /// Connecting to the server failed.
    Connect {
        /// The address, as text.
        addr: String,
        /// The socket error.
        source: io::Error,
    },
    /// A socket read or write failed.
    Io {
        /// What the client was doing.
        context: &'static str,
        /// The socket error.
        source: io::Error,
    },
    /// The server closed the connection in the middle of a message.
    UnexpectedEof {
        /// What the client was reading.
        context: &'static str,
    },
    /// The server closed the connection.
    ConnectionClosed,
    /// The server's greeting does not start with `NBDMAGIC` + `IHAVEOPT`.
    BadGreeting {
        /// The first 16 bytes received.
        got: [u8; 16],
    },
    /// The server does not speak fixed newstyle negotiation.
    NotFixedNewstyle {
        /// The handshake flags it sent.
        flags: u16,
    },
    /// An option reply is malformed (magic, option, length or contents).
    BadOptionReply {
        /// The option sent.
        option: u32,
        /// What is wrong, with the values.
        reason: String,
    },
    /// The server refused the export (an `NBD_REP_ERR_*` reply to
    /// `NBD_OPT_GO`, or a hang-up after `NBD_OPT_EXPORT_NAME`).
    ExportRefused {
        /// The export name asked for.
        export: String,
        /// The reply type.
        code: u32,
        /// The server's message, possibly empty.
        message: String,
    },
    /// The server announced invalid block size constraints.
    BadBlockSize {
        /// Minimum block size.
        min: u32,
        /// Preferred block size.
        preferred: u32,
        /// Maximum payload.
        max: u32,
    },
    /// Another connection to the same export negotiated a different size or
    /// different flags.
    InconsistentConnections {
        /// Size and flags of the first connection.
        first: (u64, u16),
        /// Size and flags of this one.
        this: (u64, u16),
    },
    /// A reply started with neither the simple nor the structured magic.
    BadReplyMagic {
        /// The 32 bits received.
        magic: u32,
    },
    /// A reply for a cookie that is not in flight (unknown or already
    /// completed).
    UnknownCookie {
        /// The cookie.
        cookie: u64,
    },
    /// A reply length larger than the request allows or than the client
    /// accepts.
    ReplyTooLong {
        /// The cookie.
        cookie: u64,
        /// The length received.
        len: u32,
        /// The largest length allowed.
        limit: u32,
    },
    /// A read chunk outside the range requested.
    ChunkOutOfRange {
        /// The cookie.
        cookie: u64,
        /// Start of the chunk.
        offset: u64,
        /// Length of the chunk.
        len: u64,
        /// Start of the request.
        req_offset: u64,
        /// Length of the request.
        req_len: u32,
    },
    /// A read chunk overlapping one received before for the same request.
    ChunkOverlap {
        /// The cookie.
        cookie: u64,
        /// Start of the chunk.
        offset: u64,
        /// Length of the chunk.
        len: u64,
    },
    /// A structured reply chunk that is malformed or not allowed here.
    BadChunk {
        /// The cookie.
        cookie: u64,
        /// The chunk type.
        kind: u16,
        /// The payload length.
        len: u32,
        /// What is wrong.
        reason: &'static str,
    },
    /// A successful read reply that did not deliver all the bytes.
    IncompleteRead {
        /// The cookie.
        cookie: u64,
        /// Bytes delivered.
        covered: u64,
        /// Bytes requested.
        len: u32,
    },
    /// A simple reply where the negotiation rules it out, or mixed with
    /// structured chunks.
    UnexpectedSimpleReply {
        /// The cookie.
        cookie: u64,
    },
    /// The connection broke earlier; this request never completed.
    Disconnected(Arc<NbdError>),
    /// The client was closed.
    Closed,
    /// The server failed the request (the connection stays up).
    Server {
        /// The NBD error value.
        errno: u32,
        /// The server's message, possibly empty.
        message: String,
        /// The offset an `NBD_REPLY_TYPE_ERROR_OFFSET` named.
        offset: Option<u64>,
    },
    /// The export does not support the command or flag.
    Unsupported(&'static str),
    /// A write, trim or write-zeroes to a read-only export.
    ReadOnly,
    /// The range ends beyond the export.
    OutOfRange {
        /// Start of the request.
        offset: u64,
        /// Length of the request.
        len: u32,
        /// Size of the export.
        size: u64,
    },
    /// Offset or length is not a multiple of the minimum block size.
    Misaligned {
        /// Start of the request.
        offset: u64,
        /// Length of the request.
        len: u32,
        /// The minimum block size.
        min_block: u32,
    },
    /// A read or write larger than the server's maximum payload (split it:
    /// announce [`super::BlockSize::max`] as the device's maximum transfer).
    TooLarge {
        /// Length of the request.
        len: u32,
        /// The maximum payload.
        max: u32,
    },
    /// The io's buffer does not match the command's length.
    BufferSize {
        /// The command's length.
        len: u32,
        /// The buffer's length.
        buffer: usize,
    },
}

impl NbdError {
    /// The errno to report to the kernel: the server's error for
    /// [`NbdError::Server`], `EOPNOTSUPP`, `EROFS` or `EINVAL` for requests
    /// refused locally, `EIO` for everything else.
    pub fn errno(&self) -> Errno {
        match self {
            NbdError::Server { errno, .. } => match *errno {
                1 => Errno::EPERM,
                12 => Errno::ENOMEM,
                22 => Errno::EINVAL,
                28 => Errno::ENOSPC,
                75 => Errno::EOVERFLOW,
                95 => Errno::EOPNOTSUPP,
                _ => Errno::EIO,
            },
            NbdError::Connect { source, .. } => {
                source.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
            }
            NbdError::Unsupported(_) => Errno::EOPNOTSUPP,
            NbdError::ReadOnly => Errno::EROFS,
            NbdError::OutOfRange { .. }
            | NbdError::Misaligned { .. }
            | NbdError::TooLarge { .. }
            | NbdError::BufferSize { .. } => Errno::EINVAL,
            _ => Errno::EIO,
        }
    }

    /// The [`IoError`] a BIUS device completes the request with.
    pub fn io_error(&self) -> IoError {
        IoError::from_errno(self.errno())
    }

    /// The error that broke the connection, for [`NbdError::Disconnected`];
    /// `self` otherwise.
    pub fn cause(&self) -> &NbdError {
        match self {
            NbdError::Disconnected(cause) => cause.cause(),
            other => other,
        }
    }
}

fn message(f: &mut fmt::Formatter<'_>, message: &str) -> fmt::Result {
    if message.is_empty() {
        Ok(())
    } else {
        write!(f, ": {message:?}")
    }
}

impl fmt::Display for NbdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use NbdError::*;
        match self {
            Connect { addr, source } => {
                let source = nix::errno::Errno::from_raw(source.raw_os_error().unwrap_or(0));
                write!(f, "cannot connect to NBD server {addr}: {}", source.desc())
            }
            Io { context, source } => write!(f, "NBD socket error while {context}: {source}"),
            UnexpectedEof { context } => {
                write!(f, "NBD server closed the connection while the client was {context}")
            }
            ConnectionClosed => write!(f, "NBD server closed the connection"),
            BadGreeting { got } => write!(
                f,
                "not an NBD newstyle server: greeting {:?}, expected \"NBDMAGICIHAVEOPT\"",
                String::from_utf8_lossy(got)
            ),
            NotFixedNewstyle { flags } => write!(
                f,
                "NBD server does not support fixed newstyle negotiation (handshake flags {flags:#x})"
            ),
            BadOptionReply { option, reason } => {
                write!(f, "malformed NBD reply to option {option}: {reason}")
            }
            ExportRefused {
                export,
                code,
                message: msg,
            } => {
                write!(f, "NBD server refused export {export:?}: ")?;
                if *code == 0 {
                    write!(f, "it closed the connection after NBD_OPT_EXPORT_NAME")?;
                } else {
                    write!(f, "{} ({code:#x})", proto::rep_err_name(*code))?;
                }
                message(f, msg)
            }
            BadBlockSize {
                min,
                preferred,
                max,
            } => write!(
                f,
                "NBD server announced invalid block sizes: minimum {min}, preferred {preferred}, maximum payload {max}"
            ),
            InconsistentConnections { first, this } => write!(
                f,
                "NBD connections disagree: size {} flags {:#x} on the first, size {} flags {:#x} on another",
                first.0, first.1, this.0, this.1
            ),
            BadReplyMagic { magic } => write!(f, "NBD reply with bad magic {magic:#010x}"),
            UnknownCookie { cookie } => {
                write!(f, "NBD reply for cookie {cookie:#x}, which is not in flight")
            }
            ReplyTooLong { cookie, len, limit } => write!(
                f,
                "NBD reply for cookie {cookie:#x} has length {len}, more than the {limit} allowed"
            ),
            ChunkOutOfRange {
                cookie,
                offset,
                len,
                req_offset,
                req_len,
            } => write!(
                f,
                "NBD read chunk {offset}+{len} for cookie {cookie:#x} lies outside the request {req_offset}+{req_len}"
            ),
            ChunkOverlap {
                cookie,
                offset,
                len,
            } => write!(
                f,
                "NBD read chunk {offset}+{len} for cookie {cookie:#x} overlaps an earlier chunk"
            ),
            BadChunk {
                cookie,
                kind,
                len,
                reason,
            } => write!(
                f,
                "bad NBD reply chunk (type {kind:#x}, length {len}) for cookie {cookie:#x}: {reason}"
            ),
            IncompleteRead {
                cookie,
                covered,
                len,
            } => write!(
                f,
                "NBD read reply for cookie {cookie:#x} ended after {covered} of {len} bytes"
            ),
            UnexpectedSimpleReply { cookie } => write!(
                f,
                "NBD simple reply for cookie {cookie:#x} where a structured reply is required"
            ),
            Disconnected(cause) => write!(f, "NBD connection lost: {cause}"),
            Closed => write!(f, "NBD client closed"),
            Server {
                errno,
                message: msg,
                offset,
            } => {
                write!(f, "NBD server error {} ({errno})", proto::errno_name(*errno))?;
                if let Some(offset) = offset {
                    write!(f, " at offset {offset}")?;
                }
                message(f, msg)
            }
            Unsupported(what) => write!(f, "NBD export does not support {what}"),
            ReadOnly => write!(f, "NBD export is read-only"),
            OutOfRange { offset, len, size } => write!(
                f,
                "NBD request {offset}+{len} ends beyond the export size {size}"
            ),
            Misaligned {
                offset,
                len,
                min_block,
            } => write!(
                f,
                "NBD request {offset}+{len} is not aligned to the minimum block size {min_block}"
            ),
            TooLarge { len, max } => write!(
                f,
                "NBD request of {len} bytes exceeds the server's maximum payload of {max}"
            ),
            BufferSize { len, buffer } => write!(
                f,
                "NBD request of {len} bytes has a buffer of {buffer} bytes"
            ),
        }
    }
}

impl std::error::Error for NbdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NbdError::Connect { source, .. } | NbdError::Io { source, .. } => Some(source),
            NbdError::Disconnected(cause) => Some(&**cause),
            _ => None,
        }
    }
}

/// Maps a socket read error: EOF becomes [`NbdError::UnexpectedEof`].
pub(crate) fn read_error(context: &'static str) -> impl FnOnce(io::Error) -> NbdError {
    move |source| {
        if source.kind() == io::ErrorKind::UnexpectedEof {
            NbdError::UnexpectedEof { context }
        } else {
            NbdError::Io { context, source }
        }
    }
}
