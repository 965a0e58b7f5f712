//! A fake NBD server on a Unix socket: a correct handshake, then whatever
//! the test makes it do.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::thread::{self, JoinHandle};

use crate::nbd::proto::{self, Request};
use crate::nbd::NbdAddress;

/// What the fake server says during the handshake.
#[derive(Clone)]
pub(super) struct Opts {
    /// Accept `NBD_OPT_STRUCTURED_REPLY`.
    pub structured: bool,
    /// Know `NBD_OPT_GO` (else answer `NBD_REP_ERR_UNSUP`).
    pub go: bool,
    /// Refuse `NBD_OPT_GO` with this error and message.
    pub refuse: Option<(u32, &'static str)>,
    /// Export size.
    pub size: u64,
    /// Transmission flags.
    pub flags: u16,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            structured: true,
            go: true,
            refuse: None,
            size: 1 << 20,
            flags: proto::FLAG_HAS_FLAGS
                | proto::FLAG_SEND_FLUSH
                | proto::FLAG_SEND_FUA
                | proto::FLAG_SEND_TRIM
                | proto::FLAG_SEND_WRITE_ZEROES,
        }
    }
}

/// A fake server serving one connection.
pub(super) struct Fake {
    pub addr: NbdAddress,
    handle: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Fake {
    /// Waits for the server thread, propagating its panics.
    pub fn join(mut self) {
        if let Some(h) = self.handle.take() {
            h.join().expect("fake server panicked");
        }
    }
}

/// Starts a server that negotiates per `opts`, then runs `behave` on the
/// connection (unless the export was refused).
pub(super) fn fake<F>(opts: Opts, behave: F) -> Fake
where
    F: FnOnce(&mut UnixStream) + Send + 'static,
{
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fake.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    let handle = thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        if handshake(&mut s, &opts) {
            behave(&mut s);
        }
    });
    Fake {
        addr: NbdAddress::Unix(path),
        handle: Some(handle),
        _dir: dir,
    }
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}

fn option_reply(s: &mut UnixStream, option: u32, reply: u32, data: &[u8]) {
    let mut v = proto::OPT_REPLY_MAGIC.to_be_bytes().to_vec();
    v.extend_from_slice(&option.to_be_bytes());
    v.extend_from_slice(&reply.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    s.write_all(&v).unwrap();
}

/// The server side of fixed newstyle negotiation; `false` if the export
/// was refused.
fn handshake(s: &mut UnixStream, opts: &Opts) -> bool {
    let mut v = proto::NBDMAGIC.to_be_bytes().to_vec();
    v.extend_from_slice(&proto::IHAVEOPT.to_be_bytes());
    v.extend_from_slice(&(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES).to_be_bytes());
    s.write_all(&v).unwrap();
    let mut b = [0; 4];
    s.read_exact(&mut b).unwrap();
    let client_flags = u32_at(&b);
    assert_eq!(
        client_flags,
        proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES
    );
    loop {
        let mut h = [0; 16];
        s.read_exact(&mut h).unwrap();
        assert_eq!(&h[..8], &proto::IHAVEOPT.to_be_bytes());
        let option = u32_at(&h[8..]);
        let mut data = vec![0; u32_at(&h[12..]) as usize];
        s.read_exact(&mut data).unwrap();
        match option {
            proto::OPT_STRUCTURED_REPLY if opts.structured => {
                option_reply(s, option, proto::REP_ACK, &[])
            }
            proto::OPT_GO if opts.go => {
                let name_len = u32_at(&data) as usize;
                let n_infos = u16::from_be_bytes([data[4 + name_len], data[5 + name_len]]);
                assert_eq!(n_infos, 1, "the client asks for NBD_INFO_BLOCK_SIZE");
                if let Some((code, message)) = opts.refuse {
                    option_reply(s, option, code, message.as_bytes());
                    return false;
                }
                let mut info = proto::INFO_EXPORT.to_be_bytes().to_vec();
                info.extend_from_slice(&opts.size.to_be_bytes());
                info.extend_from_slice(&opts.flags.to_be_bytes());
                option_reply(s, option, proto::REP_INFO, &info);
                let mut info = proto::INFO_BLOCK_SIZE.to_be_bytes().to_vec();
                for v in [512u32, 4096, 1 << 20] {
                    info.extend_from_slice(&v.to_be_bytes());
                }
                option_reply(s, option, proto::REP_INFO, &info);
                option_reply(s, option, proto::REP_ACK, &[]);
                return true;
            }
            proto::OPT_EXPORT_NAME => {
                let mut v = opts.size.to_be_bytes().to_vec();
                v.extend_from_slice(&opts.flags.to_be_bytes());
                s.write_all(&v).unwrap();
                return true;
            }
            _ => option_reply(s, option, proto::REP_ERR_UNSUP, b"unknown option"),
        }
    }
}

/// Reads one request and a write's payload; `None` at EOF.
pub(super) fn request(s: &mut UnixStream) -> Option<(Request, Vec<u8>)> {
    let mut b = [0; proto::REQUEST_LEN];
    s.read_exact(&mut b).ok()?;
    let req = Request::decode(&b).expect("request magic");
    let mut data = Vec::new();
    if req.kind == proto::CMD_WRITE {
        data = vec![0; req.len as usize];
        s.read_exact(&mut data).ok()?;
    }
    Some((req, data))
}

/// Sends a simple reply.
pub(super) fn simple(s: &mut UnixStream, errno: u32, cookie: u64, data: &[u8]) {
    let mut v = proto::SIMPLE_REPLY_MAGIC.to_be_bytes().to_vec();
    v.extend_from_slice(&errno.to_be_bytes());
    v.extend_from_slice(&cookie.to_be_bytes());
    v.extend_from_slice(data);
    let _ = s.write_all(&v);
}

/// A structured chunk header with a declared length, without the payload.
pub(super) fn chunk_header(flags: u16, kind: u16, cookie: u64, len: u32) -> Vec<u8> {
    let mut v = proto::STRUCTURED_REPLY_MAGIC.to_be_bytes().to_vec();
    v.extend_from_slice(&flags.to_be_bytes());
    v.extend_from_slice(&kind.to_be_bytes());
    v.extend_from_slice(&cookie.to_be_bytes());
    v.extend_from_slice(&len.to_be_bytes());
    v
}

/// Sends a structured chunk with its payload.
pub(super) fn chunk(s: &mut UnixStream, flags: u16, kind: u16, cookie: u64, payload: &[u8]) {
    let mut v = chunk_header(flags, kind, cookie, payload.len() as u32);
    v.extend_from_slice(payload);
    let _ = s.write_all(&v);
}

/// Sends an `OFFSET_DATA` chunk.
pub(super) fn data(s: &mut UnixStream, done: bool, cookie: u64, offset: u64, data: &[u8]) {
    let mut p = offset.to_be_bytes().to_vec();
    p.extend_from_slice(data);
    chunk(s, done as u16, proto::REPLY_TYPE_OFFSET_DATA, cookie, &p);
}

/// Sends an `OFFSET_HOLE` chunk.
pub(super) fn hole(s: &mut UnixStream, done: bool, cookie: u64, offset: u64, len: u32) {
    let mut p = offset.to_be_bytes().to_vec();
    p.extend_from_slice(&len.to_be_bytes());
    chunk(s, done as u16, proto::REPLY_TYPE_OFFSET_HOLE, cookie, &p);
}

/// An `ERROR` chunk payload.
pub(super) fn error_payload(errno: u32, message: &str) -> Vec<u8> {
    let mut p = errno.to_be_bytes().to_vec();
    p.extend_from_slice(&(message.len() as u16).to_be_bytes());
    p.extend_from_slice(message.as_bytes());
    p
}

/// Serves requests correctly from memory until `NBD_CMD_DISC` or EOF,
/// replying to each batch of `batch` requests in reverse order.
pub(super) fn serve(s: &mut UnixStream, size: u64, structured: bool, batch: usize) {
    let mut disk = vec![0u8; size as usize];
    loop {
        let mut reqs = Vec::new();
        while reqs.len() < batch {
            match request(s) {
                Some((req, _)) if req.kind == proto::CMD_DISC => return,
                Some(r) => reqs.push(r),
                None => return,
            }
        }
        for (req, payload) in reqs.into_iter().rev() {
            let range = req.offset as usize..(req.offset + u64::from(req.len)) as usize;
            match req.kind {
                proto::CMD_READ if structured => {
                    data(s, true, req.cookie, req.offset, &disk[range]);
                }
                proto::CMD_READ => simple(s, 0, req.cookie, &disk[range]),
                proto::CMD_WRITE => {
                    disk[range].copy_from_slice(&payload);
                    simple(s, 0, req.cookie, &[]);
                }
                _ => simple(s, 0, req.cookie, &[]),
            }
        }
    }
}
