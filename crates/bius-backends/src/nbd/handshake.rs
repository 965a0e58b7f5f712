//! Fixed newstyle negotiation, from the greeting to the transmission phase.

use std::io::{Read, Write};

use super::error::read_error;
use super::proto::{self, Info, OptionReply};
use super::{BlockSize, NbdError};

/// What the negotiation settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// Export size in bytes.
    pub size: u64,
    /// Transmission flags.
    pub flags: u16,
    /// Block size constraints (the defaults if the server sent none).
    pub block_size: BlockSize,
    /// Whether structured replies are in use.
    pub structured: bool,
}

fn read_exact<S: Read>(s: &mut S, buf: &mut [u8], context: &'static str) -> Result<(), NbdError> {
    s.read_exact(buf).map_err(read_error(context))
}

fn send_option<S: Write>(s: &mut S, option: u32, data: &[u8]) -> Result<(), NbdError> {
    s.write_all(&proto::encode_option(option, data))
        .and_then(|()| s.flush())
        .map_err(|source| NbdError::Io {
            context: "sending an option",
            source,
        })
}

fn bad_reply(option: u32, reason: String) -> NbdError {
    NbdError::BadOptionReply { option, reason }
}

/// Reads one option reply to `option`, header and data.
fn read_reply<S: Read>(s: &mut S, option: u32) -> Result<(OptionReply, Vec<u8>), NbdError> {
    let mut header = [0; proto::OPTION_REPLY_LEN];
    read_exact(s, &mut header, "reading an option reply")?;
    let reply = proto::decode_option_reply(&header);
    if reply.magic != proto::OPT_REPLY_MAGIC {
        return Err(bad_reply(
            option,
            format!(
                "magic {:#x}, expected {:#x}",
                reply.magic,
                proto::OPT_REPLY_MAGIC
            ),
        ));
    }
    if reply.option != option {
        return Err(bad_reply(
            option,
            format!("reply names option {}", reply.option),
        ));
    }
    if reply.len > proto::MAX_OPTION_REPLY {
        return Err(bad_reply(
            option,
            format!(
                "length {} exceeds the limit of {}",
                reply.len,
                proto::MAX_OPTION_REPLY
            ),
        ));
    }
    let mut data = vec![0; reply.len as usize];
    read_exact(s, &mut data, "reading an option reply")?;
    Ok((reply, data))
}

fn error_text(data: &[u8]) -> String {
    String::from_utf8_lossy(&data[..data.len().min(proto::MAX_STRING)]).into_owned()
}

/// Asks for structured replies; `false` if the server refuses.
fn structured_replies<S: Read + Write>(s: &mut S) -> Result<bool, NbdError> {
    let option = proto::OPT_STRUCTURED_REPLY;
    send_option(s, option, &[])?;
    let (reply, _) = read_reply(s, option)?;
    match reply.reply {
        proto::REP_ACK => Ok(true),
        // NBD_REP_ERR_UNSUP, or any other refusal: simple replies it is.
        r if r & proto::REP_FLAG_ERROR != 0 => Ok(false),
        r => Err(bad_reply(option, format!("unexpected reply type {r:#x}"))),
    }
}

/// `NBD_OPT_GO`; `Ok(None)` if the server does not know the option.
fn go<S: Read + Write>(
    s: &mut S,
    export: &str,
) -> Result<Option<(u64, u16, Option<BlockSize>)>, NbdError> {
    let option = proto::OPT_GO;
    send_option(
        s,
        option,
        &proto::encode_go_data(export, &[proto::INFO_BLOCK_SIZE]),
    )?;
    let mut export_info = None;
    let mut block_size = None;
    loop {
        let (reply, data) = read_reply(s, option)?;
        match reply.reply {
            proto::REP_INFO => match proto::decode_info(&data) {
                Ok(Info::Export { size, flags }) => export_info = Some((size, flags)),
                Ok(Info::BlockSize {
                    min,
                    preferred,
                    max,
                }) => {
                    block_size = Some(BlockSize {
                        min,
                        preferred,
                        max,
                    })
                }
                Ok(Info::Other(_)) => {}
                Err(kind) => {
                    return Err(bad_reply(
                        option,
                        format!("information type {kind:?} with length {}", data.len()),
                    ))
                }
            },
            proto::REP_ACK => {
                let (size, flags) = export_info.ok_or_else(|| {
                    bad_reply(option, "NBD_REP_ACK without NBD_INFO_EXPORT".into())
                })?;
                return Ok(Some((size, flags, block_size)));
            }
            proto::REP_ERR_UNSUP => return Ok(None),
            code if code & proto::REP_FLAG_ERROR != 0 => {
                return Err(NbdError::ExportRefused {
                    export: export.to_string(),
                    code,
                    message: error_text(&data),
                })
            }
            r => return Err(bad_reply(option, format!("unexpected reply type {r:#x}"))),
        }
    }
}

/// `NBD_OPT_EXPORT_NAME`, for servers without `NBD_OPT_GO`.
fn export_name<S: Read + Write>(
    s: &mut S,
    export: &str,
    no_zeroes: bool,
) -> Result<(u64, u16), NbdError> {
    send_option(s, proto::OPT_EXPORT_NAME, export.as_bytes())?;
    let mut b = [0; 10 + 124];
    let len = if no_zeroes { 10 } else { b.len() };
    match s.read_exact(&mut b[..len]) {
        Ok(()) => {}
        // The only way the server can refuse this option is to hang up.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Err(NbdError::ExportRefused {
                export: export.to_string(),
                code: 0,
                message: String::new(),
            })
        }
        Err(source) => {
            return Err(NbdError::Io {
                context: "reading the export information",
                source,
            })
        }
    }
    let size = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
    Ok((size, u16::from_be_bytes([b[8], b[9]])))
}

/// Checks block size constraints against the protocol's rules.
fn check_block_size(bs: BlockSize) -> Result<BlockSize, NbdError> {
    let ok = bs.min.is_power_of_two()
        && bs.min <= 65536
        && bs.preferred.is_power_of_two()
        && bs.preferred >= bs.min
        && bs.max >= bs.preferred;
    if ok {
        Ok(bs)
    } else {
        Err(NbdError::BadBlockSize {
            min: bs.min,
            preferred: bs.preferred,
            max: bs.max,
        })
    }
}

/// Negotiates `export` on a freshly connected stream, leaving it in the
/// transmission phase.
pub(crate) fn handshake<S: Read + Write>(s: &mut S, export: &str) -> Result<Negotiated, NbdError> {
    let mut greeting = [0; 18];
    read_exact(s, &mut greeting, "reading the server greeting")?;
    let magic = u64::from_be_bytes(greeting[..8].try_into().expect("8 bytes"));
    let opt = u64::from_be_bytes(greeting[8..16].try_into().expect("8 bytes"));
    if magic != proto::NBDMAGIC || opt != proto::IHAVEOPT {
        let mut got = [0; 16];
        got.copy_from_slice(&greeting[..16]);
        return Err(NbdError::BadGreeting { got });
    }
    let server_flags = u16::from_be_bytes([greeting[16], greeting[17]]);
    if server_flags & proto::FLAG_FIXED_NEWSTYLE == 0 {
        return Err(NbdError::NotFixedNewstyle {
            flags: server_flags,
        });
    }
    let no_zeroes = server_flags & proto::FLAG_NO_ZEROES != 0;
    let mut client_flags = proto::FLAG_C_FIXED_NEWSTYLE;
    if no_zeroes {
        client_flags |= proto::FLAG_C_NO_ZEROES;
    }
    s.write_all(&client_flags.to_be_bytes())
        .map_err(|source| NbdError::Io {
            context: "sending the client flags",
            source,
        })?;

    let structured = structured_replies(s)?;
    let (size, flags, block_size) = match go(s, export)? {
        Some(info) => info,
        None => {
            let (size, flags) = export_name(s, export, no_zeroes)?;
            (size, flags, None)
        }
    };
    let block_size = check_block_size(block_size.unwrap_or_default())?;
    Ok(Negotiated {
        size,
        flags,
        block_size,
        structured,
    })
}
