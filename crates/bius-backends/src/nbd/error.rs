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
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NbdError {
    /// Connecting to the server failed.
    #[error(
        "cannot connect to NBD server {addr}: {}",
        Errno::from_raw(source.raw_os_error().unwrap_or(0)).desc()
    )]
    Connect {
        /// The address, as text.
        addr: String,
        /// The socket error.
        source: io::Error,
    },
    /// A socket read or write failed.
    #[error("NBD socket error while {context}: {source}")]
    Io {
        /// What the client was doing.
        context: &'static str,
        /// The socket error.
        source: io::Error,
    },
    /// The server closed the connection in the middle of a message.
    #[error("NBD server closed the connection while the client was {context}")]
    UnexpectedEof {
        /// What the client was reading.
        context: &'static str,
    },
    /// The server closed the connection.
    #[error("NBD server closed the connection")]
    ConnectionClosed,
    /// The server's greeting does not start with `NBDMAGIC` + `IHAVEOPT`.
    #[error(
        "not an NBD newstyle server: greeting {:?}, expected \"NBDMAGICIHAVEOPT\"",
        String::from_utf8_lossy(got)
    )]
    BadGreeting {
        /// The first 16 bytes received.
        got: [u8; 16],
    },
    /// The server does not speak fixed newstyle negotiation.
    #[error("NBD server does not support fixed newstyle negotiation (handshake flags {flags:#x})")]
    NotFixedNewstyle {
        /// The handshake flags it sent.
        flags: u16,
    },
    /// An option reply is malformed (magic, option, length or contents).
    #[error("malformed NBD reply to option {option}: {reason}")]
    BadOptionReply {
        /// The option sent.
        option: u32,
        /// What is wrong, with the values.
        reason: String,
    },
    /// The server refused the export (an `NBD_REP_ERR_*` reply to
    /// `NBD_OPT_GO`, or a hang-up after `NBD_OPT_EXPORT_NAME`).
    #[error("NBD server refused export {export:?}: {}{}", refusal(*code), Said(message))]
    ExportRefused {
        /// The export name asked for.
        export: String,
        /// The reply type.
        code: u32,
        /// The server's message, possibly empty.
        message: String,
    },
    /// The server announced invalid block size constraints.
    #[error(
        "NBD server announced invalid block sizes: minimum {min}, preferred {preferred}, maximum payload {max}"
    )]
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
    #[error(
        "NBD connections disagree: size {} flags {:#x} on the first, size {} flags {:#x} on another",
        first.0, first.1, this.0, this.1
    )]
    InconsistentConnections {
        /// Size and flags of the first connection.
        first: (u64, u16),
        /// Size and flags of this one.
        this: (u64, u16),
    },
    /// A reply started with neither the simple nor the structured magic.
    #[error("NBD reply with bad magic {magic:#010x}")]
    BadReplyMagic {
        /// The 32 bits received.
        magic: u32,
    },
    /// A reply for a cookie that is not in flight (unknown or already
    /// completed).
    #[error("NBD reply for cookie {cookie:#x}, which is not in flight")]
    UnknownCookie {
        /// The cookie.
        cookie: u64,
    },
    /// A reply length larger than the request allows or than the client
    /// accepts.
    #[error("NBD reply for cookie {cookie:#x} has length {len}, more than the {limit} allowed")]
    ReplyTooLong {
        /// The cookie.
        cookie: u64,
        /// The length received.
        len: u32,
        /// The largest length allowed.
        limit: u32,
    },
    /// A read chunk outside the range requested.
    #[error(
        "NBD read chunk {offset}+{len} for cookie {cookie:#x} lies outside the request {req_offset}+{req_len}"
    )]
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
    #[error("NBD read chunk {offset}+{len} for cookie {cookie:#x} overlaps an earlier chunk")]
    ChunkOverlap {
        /// The cookie.
        cookie: u64,
        /// Start of the chunk.
        offset: u64,
        /// Length of the chunk.
        len: u64,
    },
    /// A structured reply chunk that is malformed or not allowed here.
    #[error("bad NBD reply chunk (type {kind:#x}, length {len}) for cookie {cookie:#x}: {reason}")]
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
    #[error("NBD read reply for cookie {cookie:#x} ended after {covered} of {len} bytes")]
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
    #[error("NBD simple reply for cookie {cookie:#x} where a structured reply is required")]
    UnexpectedSimpleReply {
        /// The cookie.
        cookie: u64,
    },
    /// The connection broke earlier; this request never completed.
    #[error("NBD connection lost: {0}")]
    Disconnected(#[source] Arc<NbdError>),
    /// The client was closed.
    #[error("NBD client closed")]
    Closed,
    /// The server failed the request (the connection stays up).
    #[error(
        "NBD server error {} ({errno}){}{}",
        proto::errno_name(*errno),
        At(*offset),
        Said(message)
    )]
    Server {
        /// The NBD error value.
        errno: u32,
        /// The server's message, possibly empty.
        message: String,
        /// The offset an `NBD_REPLY_TYPE_ERROR_OFFSET` named.
        offset: Option<u64>,
    },
    /// The export does not support the command or flag.
    #[error("NBD export does not support {0}")]
    Unsupported(&'static str),
    /// A write, trim or write-zeroes to a read-only export.
    #[error("NBD export is read-only")]
    ReadOnly,
    /// The range ends beyond the export.
    #[error("NBD request {offset}+{len} ends beyond the export size {size}")]
    OutOfRange {
        /// Start of the request.
        offset: u64,
        /// Length of the request.
        len: u32,
        /// Size of the export.
        size: u64,
    },
    /// Offset or length is not a multiple of the minimum block size.
    #[error("NBD request {offset}+{len} is not aligned to the minimum block size {min_block}")]
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
    #[error("NBD request of {len} bytes exceeds the server's maximum payload of {max}")]
    TooLarge {
        /// Length of the request.
        len: u32,
        /// The maximum payload.
        max: u32,
    },
    /// The io's buffer does not match the command's length.
    #[error("NBD request of {len} bytes has a buffer of {buffer} bytes")]
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

/// How the server refused an export: the reply type, or the hang-up.
fn refusal(code: u32) -> String {
    match code {
        0 => "it closed the connection after NBD_OPT_EXPORT_NAME".into(),
        code => format!("{} ({code:#x})", proto::rep_err_name(code)),
    }
}

/// A server's message, `: "..."`, if it sent one.
struct Said<'a>(&'a str);

impl fmt::Display for Said<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            "" => Ok(()),
            message => write!(f, ": {message:?}"),
        }
    }
}

/// The offset an error reply named, ` at offset N`, if any.
struct At(Option<u64>);

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => Ok(()),
            Some(offset) => write!(f, " at offset {offset}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of each kind, with the message it displays.
    fn cases() -> Vec<(NbdError, &'static str)> {
        let refused = |code, message: &str| NbdError::ExportRefused {
            export: "disk".into(),
            code,
            message: message.into(),
        };
        let server = |offset, message: &str| NbdError::Server {
            errno: 28,
            message: message.into(),
            offset,
        };
        vec![
            (
                NbdError::Connect {
                    addr: "host:10809".into(),
                    source: io::Error::from_raw_os_error(Errno::ECONNREFUSED as i32),
                },
                "cannot connect to NBD server host:10809: Connection refused",
            ),
            (
                NbdError::Io {
                    context: "sending a request",
                    source: io::Error::from_raw_os_error(Errno::EPIPE as i32),
                },
                "NBD socket error while sending a request: Broken pipe (os error 32)",
            ),
            (
                NbdError::UnexpectedEof {
                    context: "reading a reply",
                },
                "NBD server closed the connection while the client was reading a reply",
            ),
            (
                NbdError::ConnectionClosed,
                "NBD server closed the connection",
            ),
            (
                NbdError::BadGreeting {
                    got: *b"NBDMAGICxxxxxxxx",
                },
                "not an NBD newstyle server: greeting \"NBDMAGICxxxxxxxx\", expected \"NBDMAGICIHAVEOPT\"",
            ),
            (
                NbdError::NotFixedNewstyle { flags: 2 },
                "NBD server does not support fixed newstyle negotiation (handshake flags 0x2)",
            ),
            (
                NbdError::BadOptionReply {
                    option: 7,
                    reason: "length 3".into(),
                },
                "malformed NBD reply to option 7: length 3",
            ),
            (
                refused(0, ""),
                "NBD server refused export \"disk\": it closed the connection after NBD_OPT_EXPORT_NAME",
            ),
            (
                refused(0x8000_0006, "no such export"),
                "NBD server refused export \"disk\": NBD_REP_ERR_UNKNOWN (no such export) (0x80000006): \"no such export\"",
            ),
            (
                NbdError::BadBlockSize {
                    min: 3,
                    preferred: 4096,
                    max: 512,
                },
                "NBD server announced invalid block sizes: minimum 3, preferred 4096, maximum payload 512",
            ),
            (
                NbdError::InconsistentConnections {
                    first: (1024, 1),
                    this: (2048, 3),
                },
                "NBD connections disagree: size 1024 flags 0x1 on the first, size 2048 flags 0x3 on another",
            ),
            (
                NbdError::BadReplyMagic { magic: 0x1234 },
                "NBD reply with bad magic 0x00001234",
            ),
            (
                NbdError::UnknownCookie { cookie: 10 },
                "NBD reply for cookie 0xa, which is not in flight",
            ),
            (
                NbdError::ReplyTooLong {
                    cookie: 10,
                    len: 9000,
                    limit: 4096,
                },
                "NBD reply for cookie 0xa has length 9000, more than the 4096 allowed",
            ),
            (
                NbdError::ChunkOutOfRange {
                    cookie: 10,
                    offset: 0,
                    len: 512,
                    req_offset: 512,
                    req_len: 1024,
                },
                "NBD read chunk 0+512 for cookie 0xa lies outside the request 512+1024",
            ),
            (
                NbdError::ChunkOverlap {
                    cookie: 10,
                    offset: 512,
                    len: 512,
                },
                "NBD read chunk 512+512 for cookie 0xa overlaps an earlier chunk",
            ),
            (
                NbdError::BadChunk {
                    cookie: 10,
                    kind: 2,
                    len: 3,
                    reason: "too short",
                },
                "bad NBD reply chunk (type 0x2, length 3) for cookie 0xa: too short",
            ),
            (
                NbdError::IncompleteRead {
                    cookie: 10,
                    covered: 512,
                    len: 1024,
                },
                "NBD read reply for cookie 0xa ended after 512 of 1024 bytes",
            ),
            (
                NbdError::UnexpectedSimpleReply { cookie: 10 },
                "NBD simple reply for cookie 0xa where a structured reply is required",
            ),
            (
                NbdError::Disconnected(Arc::new(NbdError::ConnectionClosed)),
                "NBD connection lost: NBD server closed the connection",
            ),
            (NbdError::Closed, "NBD client closed"),
            (server(None, ""), "NBD server error ENOSPC (28)"),
            (
                server(Some(4096), "full"),
                "NBD server error ENOSPC (28) at offset 4096: \"full\"",
            ),
            (
                NbdError::Unsupported("trim"),
                "NBD export does not support trim",
            ),
            (NbdError::ReadOnly, "NBD export is read-only"),
            (
                NbdError::OutOfRange {
                    offset: 4096,
                    len: 512,
                    size: 4096,
                },
                "NBD request 4096+512 ends beyond the export size 4096",
            ),
            (
                NbdError::Misaligned {
                    offset: 1,
                    len: 512,
                    min_block: 512,
                },
                "NBD request 1+512 is not aligned to the minimum block size 512",
            ),
            (
                NbdError::TooLarge {
                    len: 1 << 25,
                    max: 1 << 24,
                },
                "NBD request of 33554432 bytes exceeds the server's maximum payload of 16777216",
            ),
            (
                NbdError::BufferSize {
                    len: 512,
                    buffer: 4096,
                },
                "NBD request of 512 bytes has a buffer of 4096 bytes",
            ),
        ]
    }

    #[test]
    fn each_error_says_what_went_wrong() {
        for (err, message) in cases() {
            assert_eq!(err.to_string(), message, "{err:?}");
        }
    }

    #[test]
    fn socket_errors_and_lost_connections_have_a_source() {
        use std::error::Error as _;
        for (err, _) in cases() {
            let has_source = matches!(
                err,
                NbdError::Connect { .. } | NbdError::Io { .. } | NbdError::Disconnected(_)
            );
            assert_eq!(err.source().is_some(), has_source, "{err:?}");
        }
        let lost = NbdError::Disconnected(Arc::new(NbdError::ReadOnly));
        let source = lost.source().unwrap().to_string();
        assert_eq!(source, "NBD export is read-only");
    }
}
