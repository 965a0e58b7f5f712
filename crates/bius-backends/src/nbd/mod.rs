//! An NBD (Network Block Device) client engine: the protocol side of a
//! block device stored on a remote NBD server.
//!
//! [`NbdClient::connect`] negotiates an export with fixed newstyle
//! negotiation (structured replies when the server offers them,
//! `NBD_OPT_GO` asking for block size constraints, `NBD_OPT_EXPORT_NAME` as
//! the fallback), over one or more TCP or Unix socket connections.
//! [`NbdClient::submit`] then sends requests, any number in flight at once:
//! each is an [`NbdIo`] that owns its buffer and is finished exactly once,
//! from whatever thread completes it.
//!
//! Each connection has a reader thread that reads replies and dispatches
//! them by cookie; read data lands directly in [`NbdIo::read_buf`].  A
//! server breaking the protocol, or going away, kills its connection: every
//! request in flight on it fails with [`NbdError::Disconnected`] naming the
//! reason, and so does every later request sent to it (there is no
//! reconnection).
//!
//! The export's [`ExportFlags`] tell what the device can announce: a write
//! cache ([`ExportFlags::flush`]), FUA, discard ([`ExportFlags::trim`]),
//! write-zeroes and read-only.  Requests the export cannot serve are refused
//! locally with a clear error rather than sent.

mod address;
mod connection;
mod device;
mod error;
mod handshake;
mod proto;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub use address::{AddressError, NbdAddress};
pub use device::NbdDevice;
pub use error::NbdError;

use connection::Connection;
use proto::Request;

/// A command, as an [`NbdIo`] describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NbdCommand {
    /// Read `len` bytes at `offset` into [`NbdIo::read_buf`].
    Read {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u32,
    },
    /// Write [`NbdIo::write_data`] (`len` bytes) at `offset`.
    Write {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u32,
        /// Force unit access (needs [`ExportFlags::fua`]).
        fua: bool,
    },
    /// Make completed writes durable (needs [`ExportFlags::flush`]).
    Flush,
    /// Discard a range (needs [`ExportFlags::trim`]).
    Trim {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u32,
    },
    /// Write zeroes (needs [`ExportFlags::write_zeroes`]).
    WriteZeroes {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u32,
        /// Keep the range allocated (`NBD_CMD_FLAG_NO_HOLE`).
        no_hole: bool,
        /// Force unit access (needs [`ExportFlags::fua`]).
        fua: bool,
    },
}

/// One request in flight: owns its data buffer until [`NbdIo::finish`].
pub trait NbdIo: Send + 'static {
    /// The command; called once, on submission.
    fn command(&self) -> NbdCommand;
    /// The payload of a [`NbdCommand::Write`]: exactly `len` bytes.
    fn write_data(&self) -> &[u8];
    /// Where a [`NbdCommand::Read`]'s data goes: exactly `len` bytes.
    fn read_buf(&mut self) -> &mut [u8];
    /// Called exactly once with the outcome, from any thread (often a
    /// connection's reader thread, which reads no replies meanwhile: do not
    /// block in it, nor submit from it, as a submission may wait for the
    /// socket to drain).
    fn finish(self: Box<Self>, result: Result<(), NbdError>);
}

/// The export's transmission flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportFlags(pub u16);

impl ExportFlags {
    fn has(self, flag: u16) -> bool {
        self.0 & flag != 0
    }

    /// The raw flags.
    pub fn bits(self) -> u16 {
        self.0
    }

    /// The export is read-only (`NBD_FLAG_READ_ONLY`).
    pub fn read_only(self) -> bool {
        self.has(proto::FLAG_READ_ONLY)
    }

    /// Flush is supported: announce a volatile write cache
    /// (`NBD_FLAG_SEND_FLUSH`).
    pub fn flush(self) -> bool {
        self.has(proto::FLAG_SEND_FLUSH)
    }

    /// Force unit access is supported (`NBD_FLAG_SEND_FUA`).
    pub fn fua(self) -> bool {
        self.has(proto::FLAG_SEND_FUA)
    }

    /// The medium is rotational (`NBD_FLAG_ROTATIONAL`).
    pub fn rotational(self) -> bool {
        self.has(proto::FLAG_ROTATIONAL)
    }

    /// Trim is supported: announce discard (`NBD_FLAG_SEND_TRIM`).
    pub fn trim(self) -> bool {
        self.has(proto::FLAG_SEND_TRIM)
    }

    /// Write-zeroes is supported (`NBD_FLAG_SEND_WRITE_ZEROES`).
    pub fn write_zeroes(self) -> bool {
        self.has(proto::FLAG_SEND_WRITE_ZEROES)
    }

    /// Several connections may be used (`NBD_FLAG_CAN_MULTI_CONN`).
    pub fn multi_conn(self) -> bool {
        self.has(proto::FLAG_CAN_MULTI_CONN)
    }
}

/// The export's size constraints, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSize {
    /// Minimum block size: every offset and length is a multiple of it.
    pub min: u32,
    /// Preferred block size, for efficient I/O.
    pub preferred: u32,
    /// Maximum payload of a read or write.
    pub max: u32,
}

impl Default for BlockSize {
    /// The protocol's defaults when the server announces none.
    fn default() -> Self {
        BlockSize {
            min: 1,
            preferred: 4096,
            max: proto::DEFAULT_MAX_PAYLOAD,
        }
    }
}

/// A client of one NBD export over one or more connections.
///
/// Dropping it [closes](NbdClient::close) it.
pub struct NbdClient {
    conns: Vec<Connection>,
    size: u64,
    flags: ExportFlags,
    block_size: BlockSize,
    structured: bool,
    next: AtomicUsize,
}

impl std::fmt::Debug for NbdClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbdClient")
            .field("connections", &self.conns.len())
            .field("size", &self.size)
            .field("flags", &self.flags)
            .field("block_size", &self.block_size)
            .field("structured", &self.structured)
            .finish()
    }
}

impl NbdClient {
    /// Connects to `export` (`""` is the default export) at `addr` with
    /// `connections` connections (at least 1).  More than one is used only
    /// if the server sets `NBD_FLAG_CAN_MULTI_CONN`; otherwise a warning is
    /// logged and one is used.
    pub fn connect(addr: &NbdAddress, export: &str, connections: usize) -> Result<Self, NbdError> {
        let (first, neg) = Connection::open(addr, export, 0)?;
        let flags = ExportFlags(neg.flags);
        let mut wanted = connections.max(1);
        if wanted > 1 && !flags.multi_conn() {
            log::warn!(
                "NBD server {addr} export {export:?} does not allow multiple connections \
                 (no NBD_FLAG_CAN_MULTI_CONN): using 1 instead of {wanted}"
            );
            wanted = 1;
        }
        let mut conns = vec![first];
        let close_all = |conns: &[Connection]| conns.iter().for_each(Connection::close);
        for index in 1..wanted {
            match Connection::open(addr, export, index) {
                Ok((conn, other)) if (other.size, other.flags) == (neg.size, neg.flags) => {
                    conns.push(conn)
                }
                Ok((conn, other)) => {
                    conn.close();
                    close_all(&conns);
                    return Err(NbdError::InconsistentConnections {
                        first: (neg.size, neg.flags),
                        this: (other.size, other.flags),
                    });
                }
                Err(e) => {
                    close_all(&conns);
                    return Err(e);
                }
            }
        }
        let mut block_size = neg.block_size;
        block_size.max = block_size.max.min(proto::MAX_PAYLOAD_CAP);
        Ok(NbdClient {
            conns,
            size: neg.size,
            flags,
            block_size,
            structured: neg.structured,
            next: AtomicUsize::new(0),
        })
    }

    /// The export size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The export's transmission flags.
    pub fn flags(&self) -> ExportFlags {
        self.flags
    }

    /// The size constraints; `max` is capped at 128 MiB.  Reads and writes longer than `max` are
    /// refused ([`NbdError::TooLarge`]): announce it as the device's maximum
    /// transfer size.
    pub fn block_size(&self) -> BlockSize {
        self.block_size
    }

    /// Whether structured replies were negotiated.
    pub fn structured_replies(&self) -> bool {
        self.structured
    }

    /// The number of connections in use.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// What broke the first broken connection, if any did.
    pub fn connection_error(&self) -> Option<Arc<NbdError>> {
        self.conns.iter().find_map(Connection::error)
    }

    /// Checks `cmd` against the export, returning the request to send.
    fn request(&self, io: &mut dyn NbdIo) -> Result<Request, NbdError> {
        let cmd = io.command();
        let f = self.flags;
        let (kind, offset, len, mut flags) = match cmd {
            NbdCommand::Read { offset, len } => (proto::CMD_READ, offset, len, 0),
            NbdCommand::Write { offset, len, .. } => (proto::CMD_WRITE, offset, len, 0),
            NbdCommand::Flush => (proto::CMD_FLUSH, 0, 0, 0),
            NbdCommand::Trim { offset, len } => (proto::CMD_TRIM, offset, len, 0),
            NbdCommand::WriteZeroes {
                offset,
                len,
                no_hole,
                ..
            } => {
                let flags = if no_hole { proto::CMD_FLAG_NO_HOLE } else { 0 };
                (proto::CMD_WRITE_ZEROES, offset, len, flags)
            }
        };
        if kind != proto::CMD_READ && kind != proto::CMD_FLUSH && f.read_only() {
            return Err(NbdError::ReadOnly);
        }
        let fua = matches!(
            cmd,
            NbdCommand::Write { fua: true, .. } | NbdCommand::WriteZeroes { fua: true, .. }
        );
        if fua {
            if !f.fua() {
                return Err(NbdError::Unsupported("FUA"));
            }
            flags |= proto::CMD_FLAG_FUA;
        }
        let supported = match kind {
            proto::CMD_FLUSH => f.flush(),
            proto::CMD_TRIM => f.trim(),
            proto::CMD_WRITE_ZEROES => f.write_zeroes(),
            _ => true,
        };
        if !supported {
            return Err(NbdError::Unsupported(match kind {
                proto::CMD_FLUSH => "flush",
                proto::CMD_TRIM => "trim",
                _ => "write zeroes",
            }));
        }
        if kind != proto::CMD_FLUSH {
            if offset
                .checked_add(u64::from(len))
                .is_none_or(|end| end > self.size)
            {
                return Err(NbdError::OutOfRange {
                    offset,
                    len,
                    size: self.size,
                });
            }
            let min = self.block_size.min;
            if offset % u64::from(min) != 0 || len % min != 0 {
                return Err(NbdError::Misaligned {
                    offset,
                    len,
                    min_block: min,
                });
            }
        }
        let buffer = match kind {
            proto::CMD_READ => Some(io.read_buf().len()),
            proto::CMD_WRITE => Some(io.write_data().len()),
            _ => None,
        };
        if let Some(buffer) = buffer {
            if len > self.block_size.max {
                return Err(NbdError::TooLarge {
                    len,
                    max: self.block_size.max,
                });
            }
            if buffer != len as usize {
                return Err(NbdError::BufferSize { len, buffer });
            }
        }
        Ok(Request {
            flags,
            kind,
            cookie: 0,
            offset,
            len,
        })
    }

    /// The live connection with the fewest requests in flight, starting the
    /// search round-robin so ties spread.
    fn pick(&self) -> &Connection {
        let n = self.conns.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        (0..n)
            .map(|i| &self.conns[(start + i) % n])
            .min_by_key(|c| (c.is_dead(), c.in_flight()))
            .expect("at least one connection")
    }

    /// Sends `io`; its [`NbdIo::finish`] is called exactly once, maybe
    /// before this returns (a request refused locally, a dead connection).
    pub fn submit(&self, mut io: Box<dyn NbdIo>) {
        match self.request(&mut *io) {
            Ok(req) => self.pick().submit(io, req),
            Err(e) => io.finish(Err(e)),
        }
    }

    /// Sends `NBD_CMD_DISC` on every idle live connection, closes them,
    /// fails whatever is still in flight with [`NbdError::Closed`] and waits
    /// for the reader threads.  Later submissions fail with
    /// [`NbdError::Closed`].  Idempotent.
    pub fn close(&self) {
        for conn in &self.conns {
            conn.close();
        }
    }
}

impl Drop for NbdClient {
    fn drop(&mut self) {
        self.close();
    }
}
