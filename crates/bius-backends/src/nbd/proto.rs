//! NBD wire format: constants, encoding and decoding as pure functions.
//!
//! All multi-byte fields are big-endian ("network byte order").  Nothing in
//! here touches a socket.  The server side (request decoding, some
//! constants, marked `cfg(test)`) serves the tests' fake server.

/// `NBDMAGIC`, the first 8 bytes a server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: newstyle handshake magic, also the option request magic.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of every option reply.
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;

/// Handshake flag: the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server can omit the 124 zero bytes.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: the client speaks fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: the server must omit the 124 zero bytes.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Option: choose the export, old style (no error reporting).
pub const OPT_EXPORT_NAME: u32 = 1;

/// Option: choose the export and enter transmission.
pub const OPT_GO: u32 = 7;
/// Option: use structured replies.
pub const OPT_STRUCTURED_REPLY: u32 = 8;

/// Option reply: success, no more data.
pub const REP_ACK: u32 = 1;
/// Option reply: information about the export.
pub const REP_INFO: u32 = 3;
/// Bit set in every option error reply.
pub const REP_FLAG_ERROR: u32 = 1 << 31;
/// Option error: the option is unknown to the server.
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
/// Option error: the export is unknown.
#[cfg(test)] // the tests' fake server
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;

/// Information type: size and transmission flags.
pub const INFO_EXPORT: u16 = 0;
/// Information type: block size constraints.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Transmission flag: the flags field is valid (always set).
#[cfg(test)] // the tests' fake server
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag: the export is read-only.
pub const FLAG_READ_ONLY: u16 = 1 << 1;
/// Transmission flag: `NBD_CMD_FLUSH` is supported.
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag: `NBD_CMD_FLAG_FUA` is supported.
pub const FLAG_SEND_FUA: u16 = 1 << 3;
/// Transmission flag: rotational medium.
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
/// Transmission flag: `NBD_CMD_TRIM` is supported.
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag: `NBD_CMD_WRITE_ZEROES` (and `NO_HOLE`) is supported.
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Transmission flag: several connections share one cache.
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Request magic.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Simple reply magic.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Structured reply chunk magic.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Command: read.
pub const CMD_READ: u16 = 0;
/// Command: write.
pub const CMD_WRITE: u16 = 1;
/// Command: disconnect.
pub const CMD_DISC: u16 = 2;
/// Command: flush.
pub const CMD_FLUSH: u16 = 3;
/// Command: trim (discard).
pub const CMD_TRIM: u16 = 4;
/// Command: write zeroes.
pub const CMD_WRITE_ZEROES: u16 = 6;

/// Command flag: force unit access.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag: write zeroes must not punch a hole.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;

/// Structured reply flag: last chunk of the reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
/// Chunk type: nothing (final chunk only).
pub const REPLY_TYPE_NONE: u16 = 0;
/// Chunk type: data at an offset.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// Chunk type: a hole (zeroes) at an offset.
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// Bit set in every error chunk type.
pub const REPLY_TYPE_ERROR_BIT: u16 = 1 << 15;
/// Chunk type: an error.
#[cfg(test)] // the tests' fake server
pub const REPLY_TYPE_ERROR: u16 = REPLY_TYPE_ERROR_BIT | 1;
/// Chunk type: an error at an offset.
pub const REPLY_TYPE_ERROR_OFFSET: u16 = REPLY_TYPE_ERROR_BIT | 2;

/// Longest string (export name, error message) the protocol allows.
pub const MAX_STRING: usize = 4096;
/// Largest option reply payload accepted during the handshake.
pub const MAX_OPTION_REPLY: u32 = 64 * 1024;
/// Largest error chunk payload accepted: the error, the message length,
/// the longest message and an offset.
pub const MAX_ERROR_CHUNK: u32 = 4 + 2 + MAX_STRING as u32 + 8;
/// Maximum payload assumed when the server does not announce one.
pub const DEFAULT_MAX_PAYLOAD: u32 = 32 << 20;
/// Upper bound on the read and write payload the client ever uses, whatever
/// the server announces (a sanity cap on reply lengths too).
pub const MAX_PAYLOAD_CAP: u32 = 128 << 20;

/// Size of a request header.
pub const REQUEST_LEN: usize = 28;
/// Size of an option reply header.
pub const OPTION_REPLY_LEN: usize = 20;

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// An option request: `IHAVEOPT`, option, length, data.
pub fn encode_option(option: u32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + data.len());
    v.extend_from_slice(&IHAVEOPT.to_be_bytes());
    v.extend_from_slice(&option.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    v
}

/// The data of `NBD_OPT_GO`: export name and information requests.
pub fn encode_go_data(export: &str, infos: &[u16]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + export.len() + 2 + 2 * infos.len());
    v.extend_from_slice(&(export.len() as u32).to_be_bytes());
    v.extend_from_slice(export.as_bytes());
    v.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for info in infos {
        v.extend_from_slice(&info.to_be_bytes());
    }
    v
}

/// Header of an option reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionReply {
    /// Magic, [`OPT_REPLY_MAGIC`] when valid.
    pub magic: u64,
    /// The option replied to.
    pub option: u32,
    /// Reply type (`NBD_REP_*`).
    pub reply: u32,
    /// Length of the data that follows.
    pub len: u32,
}

/// Decodes an option reply header.
pub fn decode_option_reply(b: &[u8; OPTION_REPLY_LEN]) -> OptionReply {
    OptionReply {
        magic: be_u64(b),
        option: be_u32(&b[8..]),
        reply: be_u32(&b[12..]),
        len: be_u32(&b[16..]),
    }
}

/// An `NBD_REP_INFO` payload the client understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Info {
    /// `NBD_INFO_EXPORT`: size and transmission flags.
    Export {
        /// Size in bytes.
        size: u64,
        /// Transmission flags.
        flags: u16,
    },
    /// `NBD_INFO_BLOCK_SIZE`: minimum, preferred, maximum payload.
    BlockSize {
        /// Minimum block size.
        min: u32,
        /// Preferred block size.
        preferred: u32,
        /// Maximum payload.
        max: u32,
    },
    /// Any other information type, to be ignored.
    Other(u16),
}

/// Decodes an `NBD_REP_INFO` payload; `Err` names the type whose length is
/// wrong.
pub fn decode_info(b: &[u8]) -> Result<Info, Option<u16>> {
    if b.len() < 2 {
        return Err(None);
    }
    let kind = be_u16(b);
    match kind {
        INFO_EXPORT if b.len() == 12 => Ok(Info::Export {
            size: be_u64(&b[2..]),
            flags: be_u16(&b[10..]),
        }),
        INFO_BLOCK_SIZE if b.len() == 14 => Ok(Info::BlockSize {
            min: be_u32(&b[2..]),
            preferred: be_u32(&b[6..]),
            max: be_u32(&b[10..]),
        }),
        INFO_EXPORT | INFO_BLOCK_SIZE => Err(Some(kind)),
        other => Ok(Info::Other(other)),
    }
}

/// The name of an option error reply type.
pub fn rep_err_name(reply: u32) -> &'static str {
    match reply & !REP_FLAG_ERROR {
        1 => "NBD_REP_ERR_UNSUP (option not supported)",
        2 => "NBD_REP_ERR_POLICY (forbidden by server policy)",
        3 => "NBD_REP_ERR_INVALID (invalid option)",
        4 => "NBD_REP_ERR_PLATFORM (not supported on the server's platform)",
        5 => "NBD_REP_ERR_TLS_REQD (TLS required)",
        6 => "NBD_REP_ERR_UNKNOWN (no such export)",
        7 => "NBD_REP_ERR_SHUTDOWN (server shutting down)",
        8 => "NBD_REP_ERR_BLOCK_SIZE_REQD (block size negotiation required)",
        9 => "NBD_REP_ERR_TOO_BIG (request too big)",
        10 => "NBD_REP_ERR_EXT_HEADER_REQD (extended headers required)",
        _ => "unknown option error",
    }
}

/// The name of an NBD error value (the same numbers as Linux errnos).
pub fn errno_name(errno: u32) -> &'static str {
    match errno {
        1 => "EPERM",
        5 => "EIO",
        12 => "ENOMEM",
        22 => "EINVAL",
        28 => "ENOSPC",
        75 => "EOVERFLOW",
        95 => "ENOTSUP",
        108 => "ESHUTDOWN",
        _ => "unknown error",
    }
}

/// A transmission request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Command flags (`NBD_CMD_FLAG_*`).
    pub flags: u16,
    /// Command type (`NBD_CMD_*`).
    pub kind: u16,
    /// Cookie echoed in the reply.
    pub cookie: u64,
    /// Offset in the export.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

impl Request {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.kind.to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// Decodes a header; `None` on a bad magic.
    #[cfg(test)] // the tests' fake server
    pub fn decode(b: &[u8; REQUEST_LEN]) -> Option<Request> {
        (be_u32(b) == REQUEST_MAGIC).then(|| Request {
            flags: be_u16(&b[4..]),
            kind: be_u16(&b[6..]),
            cookie: be_u64(&b[8..]),
            offset: be_u64(&b[16..]),
            len: be_u32(&b[24..]),
        })
    }
}

/// The rest of a simple reply after its magic: (error, cookie).
pub fn decode_simple_reply(b: &[u8; 12]) -> (u32, u64) {
    (be_u32(b), be_u64(&b[4..]))
}

/// The rest of a structured reply chunk header after its magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Flags (`NBD_REPLY_FLAG_*`).
    pub flags: u16,
    /// Chunk type (`NBD_REPLY_TYPE_*`).
    pub kind: u16,
    /// Cookie of the request.
    pub cookie: u64,
    /// Payload length.
    pub len: u32,
}

/// Decodes the 16 bytes after a structured reply magic.
pub fn decode_chunk_header(b: &[u8; 16]) -> ChunkHeader {
    ChunkHeader {
        flags: be_u16(b),
        kind: be_u16(&b[2..]),
        cookie: be_u64(&b[4..]),
        len: be_u32(&b[12..]),
    }
}

/// The payload of an error chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorPayload {
    /// The NBD error value.
    pub errno: u32,
    /// The server's message (lossily decoded).
    pub message: String,
    /// The offset of `NBD_REPLY_TYPE_ERROR_OFFSET`.
    pub offset: Option<u64>,
}

/// Decodes an error chunk payload of type `kind`; `Err` describes why the
/// payload is inconsistent.
pub fn decode_error_payload(kind: u16, b: &[u8]) -> Result<ErrorPayload, &'static str> {
    if b.len() < 6 {
        return Err("error chunk shorter than 6 bytes");
    }
    let errno = be_u32(b);
    let msg_len = be_u16(&b[4..]) as usize;
    let rest = &b[6..];
    if msg_len > rest.len() {
        return Err("message length exceeds the chunk length");
    }
    let message = String::from_utf8_lossy(&rest[..msg_len]).into_owned();
    let offset = if kind == REPLY_TYPE_ERROR_OFFSET {
        if rest.len() - msg_len != 8 {
            return Err("error offset chunk length is not message + 14");
        }
        Some(be_u64(&rest[msg_len..]))
    } else {
        None
    };
    if errno == 0 {
        return Err("error chunk with error value 0");
    }
    Ok(ErrorPayload {
        errno,
        message,
        offset,
    })
}

/// The byte ranges of a read already delivered, to reject chunks that
/// overlap and to tell when the whole request is covered.
#[derive(Debug, Default, Clone)]
pub struct Coverage {
    /// Disjoint `[start, end)` ranges, sorted by start.
    ranges: Vec<(u64, u64)>,
    total: u64,
}

impl Coverage {
    /// Records `[start, end)`; `false` (and nothing recorded) if it overlaps
    /// a range recorded before.
    pub fn add(&mut self, start: u64, end: u64) -> bool {
        let i = self.ranges.partition_point(|&(s, _)| s < start);
        if i > 0 && self.ranges[i - 1].1 > start {
            return false;
        }
        if i < self.ranges.len() && self.ranges[i].0 < end {
            return false;
        }
        self.ranges.insert(i, (start, end));
        self.total += end - start;
        true
    }

    /// Bytes covered so far.
    pub fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trip() {
        let r = Request {
            flags: CMD_FLAG_FUA,
            kind: CMD_WRITE,
            cookie: 0x0102_0304_0506_0708,
            offset: 1 << 40,
            len: 4096,
        };
        let b = r.encode();
        assert_eq!(&b[..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(Request::decode(&b), Some(r));
        let mut bad = b;
        bad[0] = 0;
        assert_eq!(Request::decode(&bad), None);
    }

    #[test]
    fn info_decoding() {
        let mut b = vec![0, 0];
        b.extend_from_slice(&(64u64 << 20).to_be_bytes());
        b.extend_from_slice(&0x0123u16.to_be_bytes());
        assert_eq!(
            decode_info(&b),
            Ok(Info::Export {
                size: 64 << 20,
                flags: 0x123
            })
        );
        assert_eq!(decode_info(&b[..11]), Err(Some(INFO_EXPORT)));
        assert_eq!(decode_info(&[0, 9, 1]), Ok(Info::Other(9)));
        assert_eq!(decode_info(&[0]), Err(None));
    }

    #[test]
    fn error_payload() {
        let mut b = 5u32.to_be_bytes().to_vec();
        b.extend_from_slice(&3u16.to_be_bytes());
        b.extend_from_slice(b"bad");
        let p = decode_error_payload(REPLY_TYPE_ERROR, &b).unwrap();
        assert_eq!((p.errno, p.message.as_str(), p.offset), (5, "bad", None));
        assert!(decode_error_payload(REPLY_TYPE_ERROR_OFFSET, &b).is_err());
        b.extend_from_slice(&77u64.to_be_bytes());
        let p = decode_error_payload(REPLY_TYPE_ERROR_OFFSET, &b).unwrap();
        assert_eq!(p.offset, Some(77));
        let mut bogus = 5u32.to_be_bytes().to_vec();
        bogus.extend_from_slice(&100u16.to_be_bytes());
        assert!(decode_error_payload(REPLY_TYPE_ERROR, &bogus).is_err());
    }

    #[test]
    fn coverage_rejects_overlap() {
        let mut c = Coverage::default();
        assert!(c.add(100, 200));
        assert!(c.add(0, 100));
        assert!(c.add(300, 400));
        assert!(!c.add(150, 160));
        assert!(!c.add(199, 301));
        assert!(!c.add(50, 250));
        assert!(c.add(200, 300));
        assert_eq!(c.total(), 400);
    }
}
