//! The client against a fake server: correct behaviours the real server
//! does not show (out-of-order chunks, holes, simple replies, fallbacks),
//! and broken or hostile ones, each of which must fail every io in flight
//! with the right error, in bounded time, without a panic.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::fake::{
    self, chunk, chunk_header, data, error_payload, hole, request, serve, simple, Opts,
};
use super::{pattern, Ios, HANG};
use crate::nbd::proto::{self, Request};
use crate::nbd::{NbdClient, NbdCommand, NbdError};

/// Reads `n` requests.
fn requests(s: &mut UnixStream, n: usize) -> Vec<Request> {
    (0..n).map(|_| request(s).expect("request").0).collect()
}

/// Waits until the client hangs up, so a failure is the client's own
/// detection and not an EOF.
fn linger(s: &mut UnixStream) {
    let _ = s.read_to_end(&mut Vec::new());
}

/// Submits `n` reads of 4 KiB to a server that reads them and then runs
/// `misbehave`; every read must fail with a connection loss whose cause
/// passes `check`, and a later read must fail at once the same way.
fn broken<F>(n: usize, misbehave: F, check: impl Fn(&NbdError) -> bool)
where
    F: FnOnce(&mut UnixStream, Vec<Request>) + Send + 'static,
{
    let server = fake::fake(Opts::default(), move |s| {
        let reqs = requests(s, n);
        misbehave(s, reqs);
    });
    let client = NbdClient::connect(&server.addr, "", 1).expect("connect");
    let ios = Ios::new();
    let start = Instant::now();
    for i in 0..n {
        client.submit(ios.read(4096 * i as u64, 4096));
    }
    for d in ios.collect(n) {
        match d.result {
            Err(NbdError::Disconnected(cause)) => {
                assert!(check(&cause), "io {}: unexpected cause {cause:?}", d.id)
            }
            other => panic!("io {}: expected a connection loss, got {other:?}", d.id),
        }
    }
    assert!(start.elapsed() < HANG);
    let cause = client.connection_error().expect("the connection is dead");
    assert!(check(&cause));
    // One-line Display naming what went wrong.
    assert!(!cause.to_string().contains('\n'));
    let d = ios.run(&client, ios.read(0, 4096));
    assert!(
        matches!(&d.result, Err(NbdError::Disconnected(c)) if check(c)),
        "{:?}",
        d.result
    );
    drop(client);
    server.join();
}

#[test]
fn bad_reply_magic() {
    broken(
        4,
        |s, _| {
            let mut reply = 0xdead_beefu32.to_be_bytes().to_vec();
            reply.extend_from_slice(&[0; 12]);
            s.write_all(&reply).unwrap();
            linger(s);
        },
        |e| matches!(e, NbdError::BadReplyMagic { magic: 0xdead_beef }),
    );
}

#[test]
fn unknown_cookie() {
    broken(
        3,
        |s, reqs| {
            simple(s, 0, reqs[0].cookie + 1000, &[]);
            linger(s);
        },
        |e| matches!(e, NbdError::UnknownCookie { .. }),
    );
}

#[test]
fn duplicate_reply() {
    let server = fake::fake(Opts::default(), |s| {
        let reqs = requests(s, 2);
        simple(s, 0, reqs[0].cookie, &[]);
        simple(s, 0, reqs[0].cookie, &[]);
        linger(s);
    });
    let client = NbdClient::connect(&server.addr, "", 1).expect("connect");
    let ios = Ios::new();
    let flush = ios.io(NbdCommand::Flush, Vec::new());
    client.submit(flush);
    client.submit(ios.read(0, 4096));
    let done = ios.collect(2);
    done[0]
        .result
        .as_ref()
        .expect("the first reply completes the flush");
    assert!(
        matches!(&done[1].result, Err(NbdError::Disconnected(c)) if matches!(**c, NbdError::UnknownCookie { .. })),
        "{:?}",
        done[1].result
    );
    drop(client);
    server.join();
}

#[test]
fn chunk_longer_than_request() {
    broken(
        2,
        |s, reqs| {
            s.write_all(&chunk_header(
                0,
                proto::REPLY_TYPE_OFFSET_DATA,
                reqs[1].cookie,
                8 + 8192,
            ))
            .unwrap();
            linger(s);
        },
        |e| {
            matches!(
                e,
                NbdError::ReplyTooLong {
                    len: 8200,
                    limit: 4104,
                    ..
                }
            )
        },
    );
}

#[test]
fn huge_error_chunk() {
    broken(
        2,
        |s, reqs| {
            s.write_all(&chunk_header(
                1,
                proto::REPLY_TYPE_ERROR,
                reqs[0].cookie,
                1 << 30,
            ))
            .unwrap();
            linger(s);
        },
        |e| {
            matches!(
                e,
                NbdError::ReplyTooLong {
                    len: 0x4000_0000,
                    ..
                }
            )
        },
    );
}

#[test]
fn chunk_outside_range() {
    broken(
        2,
        |s, reqs| {
            // Request 1 covers 4096..8192.
            data(s, true, reqs[1].cookie, 0, &[1; 4096]);
            linger(s);
        },
        |e| {
            matches!(
                e,
                NbdError::ChunkOutOfRange {
                    offset: 0,
                    len: 4096,
                    req_offset: 4096,
                    ..
                }
            )
        },
    );
}

#[test]
fn overlapping_chunks() {
    broken(
        1,
        |s, reqs| {
            hole(s, false, reqs[0].cookie, 1024, 2048);
            data(s, true, reqs[0].cookie, 0, &[1; 2048]);
            linger(s);
        },
        |e| {
            matches!(
                e,
                NbdError::ChunkOverlap {
                    offset: 0,
                    len: 2048,
                    ..
                }
            )
        },
    );
}

#[test]
fn short_read_then_eof() {
    broken(
        3,
        |s, reqs| {
            s.write_all(&chunk_header(
                1,
                proto::REPLY_TYPE_OFFSET_DATA,
                reqs[2].cookie,
                8 + 4096,
            ))
            .unwrap();
            s.write_all(&(2 * 4096u64).to_be_bytes()).unwrap();
            s.write_all(&[7; 100]).unwrap();
        },
        |e| matches!(e, NbdError::UnexpectedEof { .. }),
    );
}

#[test]
fn error_chunk_with_bogus_length() {
    broken(
        2,
        |s, reqs| {
            // Message length 100 in a 6-byte payload.
            let mut p = 5u32.to_be_bytes().to_vec();
            p.extend_from_slice(&100u16.to_be_bytes());
            chunk(s, 1, proto::REPLY_TYPE_ERROR, reqs[0].cookie, &p);
            linger(s);
        },
        |e| matches!(e, NbdError::BadChunk { len: 6, .. }),
    );
}

#[test]
fn incomplete_read() {
    broken(
        1,
        |s, reqs| {
            data(s, false, reqs[0].cookie, 0, &[1; 2048]);
            chunk(s, 1, proto::REPLY_TYPE_NONE, reqs[0].cookie, &[]);
            linger(s);
        },
        |e| {
            matches!(
                e,
                NbdError::IncompleteRead {
                    covered: 2048,
                    len: 4096,
                    ..
                }
            )
        },
    );
}

#[test]
fn simple_reply_to_structured_read() {
    broken(
        1,
        |s, reqs| {
            simple(s, 0, reqs[0].cookie, &[0; 4096]);
            linger(s);
        },
        |e| matches!(e, NbdError::UnexpectedSimpleReply { .. }),
    );
}

#[test]
fn server_closes_with_16_in_flight() {
    broken(16, |_, _| {}, |e| matches!(e, NbdError::ConnectionClosed));
}

#[test]
fn close_fails_ios_in_flight() {
    let server = fake::fake(Opts::default(), |s| {
        requests(s, 8);
        linger(s);
    });
    let client = NbdClient::connect(&server.addr, "", 1).expect("connect");
    let ios = Ios::new();
    for i in 0..8 {
        client.submit(ios.read(4096 * i, 4096));
    }
    // Let them reach the server, then close with all of them in flight.
    std::thread::sleep(Duration::from_millis(100));
    drop(client);
    for d in ios.collect(8) {
        assert!(matches!(d.result, Err(NbdError::Closed)), "{:?}", d.result);
    }
    server.join();
}

#[test]
fn structured_chunks_in_any_order() {
    let server = fake::fake(Opts::default(), |s| {
        let r = requests(s, 2);
        let (a, b) = (r[0].cookie, r[1].cookie);
        // Interleaved, out of order, with a hole and an error.
        data(s, false, a, 8192 + 4096, &pattern(8192 + 4096, 4096, 1));
        hole(s, false, a, 8192, 1024);
        chunk(
            s,
            0,
            proto::REPLY_TYPE_ERROR,
            b,
            &error_payload(28, "disk full"),
        );
        data(s, false, a, 8192 + 1024, &pattern(8192 + 1024, 3072, 1));
        chunk(s, 1, proto::REPLY_TYPE_NONE, a, &[]);
        chunk(s, 1, proto::REPLY_TYPE_NONE, b, &[]);
        serve(s, 1 << 20, true, 1);
    });
    let client = NbdClient::connect(&server.addr, "", 1).expect("connect");
    assert_eq!(client.block_size().min, 512);
    let ios = Ios::new();
    client.submit(ios.read(8192, 8192));
    client.submit(ios.write(0, vec![3; 4096]));
    let done = ios.collect(2);
    done[0].result.as_ref().expect("read");
    let mut want = vec![0; 1024];
    want.extend(pattern(8192 + 1024, 3072, 1));
    want.extend(pattern(8192 + 4096, 4096, 1));
    assert!(done[0].buf == want, "chunks assembled, hole zeroed");
    match &done[1].result {
        Err(
            e @ NbdError::Server {
                errno: 28,
                message,
                offset: None,
            },
        ) => {
            assert_eq!(message, "disk full");
            assert_eq!(e.errno(), nix::errno::Errno::ENOSPC);
        }
        other => panic!("expected ENOSPC, got {other:?}"),
    }
    // The connection survives a server error.
    let d = ios.run(&client, ios.write(4096, vec![9; 4096]));
    d.result.expect("write");
    let d = ios.run(&client, ios.read(4096, 4096));
    assert!(d.buf.iter().all(|&b| b == 9));
    client.close();
    server.join();
}

#[test]
fn simple_replies_and_export_name_fallback() {
    let opts = Opts {
        structured: false,
        go: false,
        ..Opts::default()
    };
    let server = fake::fake(opts, |s| serve(s, 1 << 20, false, 8));
    let client = NbdClient::connect(&server.addr, "", 4).expect("connect");
    assert!(!client.structured_replies());
    assert_eq!(
        client.connections(),
        1,
        "no multi-conn flag: one connection"
    );
    assert_eq!(client.size(), 1 << 20);
    let ios = Ios::new();
    for i in 0..8u64 {
        client.submit(ios.write(i * 8192, pattern(i * 8192, 8192, 2)));
    }
    assert!(ios.collect(8).iter().all(|d| d.result.is_ok()));
    for i in 0..8u64 {
        client.submit(ios.read(i * 8192, 8192));
    }
    for (i, d) in ios.collect(8).into_iter().enumerate() {
        d.result.expect("read");
        assert!(d.buf == pattern(i as u64 * 8192, 8192, 2));
    }
    client.close();
    server.join();
}

#[test]
fn export_refused_with_message() {
    let opts = Opts {
        refuse: Some((proto::REP_ERR_UNKNOWN, "no export named backup here")),
        ..Opts::default()
    };
    let server = fake::fake(opts, |_| {});
    let err = NbdClient::connect(&server.addr, "backup", 1).unwrap_err();
    assert!(
        matches!(&err, NbdError::ExportRefused { export, code: proto::REP_ERR_UNKNOWN, message }
            if export == "backup" && message == "no export named backup here"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("\"backup\"") && text.contains("NBD_REP_ERR_UNKNOWN"),
        "{text}"
    );
    assert!(text.contains("no export named backup here"), "{text}");
    server.join();
}

#[test]
fn unsupported_commands_refused_locally() {
    let opts = Opts {
        flags: proto::FLAG_HAS_FLAGS,
        ..Opts::default()
    };
    let server = fake::fake(opts, |s| serve(s, 1 << 20, true, 1));
    let client = NbdClient::connect(&server.addr, "", 1).expect("connect");
    let ios = Ios::new();
    let cmds = [
        (NbdCommand::Flush, "flush"),
        (
            NbdCommand::Trim {
                offset: 0,
                len: 512,
            },
            "trim",
        ),
        (
            NbdCommand::WriteZeroes {
                offset: 0,
                len: 512,
                no_hole: false,
                fua: false,
            },
            "write zeroes",
        ),
        (
            NbdCommand::Write {
                offset: 0,
                len: 512,
                fua: true,
            },
            "FUA",
        ),
    ];
    for (cmd, what) in cmds {
        let d = ios.run(&client, ios.io(cmd, vec![0; 512]));
        assert!(
            matches!(d.result, Err(NbdError::Unsupported(w)) if w == what),
            "{:?}",
            d.result
        );
    }
    let d = ios.run(&client, ios.read(100, 512));
    assert!(matches!(
        d.result,
        Err(NbdError::Misaligned { min_block: 512, .. })
    ));
    client.close();
    server.join();
}
