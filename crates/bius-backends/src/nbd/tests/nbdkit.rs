//! The client against a real `nbdkit` (memory plugin).

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{pattern, Ios};
use crate::nbd::{proto, NbdAddress, NbdClient, NbdCommand, NbdError};

const NBDKIT: &str = "/usr/bin/nbdkit";
const SIZE: u64 = 64 << 20;

/// A running nbdkit, killed on drop.
struct Nbdkit {
    child: Child,
    addr: NbdAddress,
    _dir: tempfile::TempDir,
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `nbdkit ARGS` on a Unix socket (or TCP) and waits until it
/// accepts connections.
fn nbdkit(tcp: bool, args: &[&str]) -> Nbdkit {
    assert!(
        Path::new(NBDKIT).exists(),
        "{NBDKIT} is not installed: run scripts/setup.sh (as root) to install nbdkit"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(NBDKIT);
    cmd.args(["--exit-with-parent", "-f"]);
    let addr = if tcp {
        // A free port: bind, read it, let nbdkit take it.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        cmd.args(["-i", "127.0.0.1", "-p", &port.to_string()]);
        NbdAddress::Tcp {
            host: "127.0.0.1".into(),
            port,
        }
    } else {
        let sock = dir.path().join("nbd.sock");
        cmd.arg("-U").arg(&sock);
        NbdAddress::Unix(sock)
    };
    let child = cmd
        .args(args)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn nbdkit");
    let server = Nbdkit {
        child,
        addr,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let up = match &server.addr {
            NbdAddress::Tcp { port, .. } => TcpStream::connect(("127.0.0.1", *port)).is_ok(),
            NbdAddress::Unix(path) => path.exists(),
        };
        if up {
            return server;
        }
        assert!(Instant::now() < deadline, "nbdkit did not start");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Writes patterns with 64 requests in flight from 4 threads, reads them
/// back the same way, then exercises flush, FUA, trim and write-zeroes.
fn workload(client: Arc<NbdClient>) {
    const CHUNK: usize = 64 << 10;
    const PER_THREAD: usize = 16;
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let client = client.clone();
            thread::spawn(move || {
                let ios = Ios::new();
                let offset = |i: usize| ((t as usize * PER_THREAD + i) * CHUNK) as u64;
                for i in 0..PER_THREAD {
                    client.submit(ios.write(offset(i), pattern(offset(i), CHUNK, t)));
                }
                for d in ios.collect(PER_THREAD) {
                    d.result.expect("write");
                }
                for i in 0..PER_THREAD {
                    client.submit(ios.read(offset(i), CHUNK as u32));
                }
                for (i, d) in ios.collect(PER_THREAD).into_iter().enumerate() {
                    d.result.expect("read");
                    assert!(
                        d.buf == pattern(offset(i), CHUNK, t),
                        "data at {}",
                        offset(i)
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker");
    }

    let ios = Ios::new();
    let flush = ios.io(NbdCommand::Flush, Vec::new());
    ios.run(&client, flush).result.expect("flush");

    let fua = ios.io(
        NbdCommand::Write {
            offset: 8192,
            len: 4096,
            fua: true,
        },
        vec![0x5a; 4096],
    );
    ios.run(&client, fua).result.expect("FUA write");
    let d = ios.run(&client, ios.read(8192, 4096));
    assert!(d.buf.iter().all(|&b| b == 0x5a));

    let trim = ios.io(
        NbdCommand::Trim {
            offset: 0,
            len: 4 * CHUNK as u32,
        },
        Vec::new(),
    );
    ios.run(&client, trim).result.expect("trim");
    let d = ios.run(&client, ios.read(0, 4 * CHUNK as u32));
    d.result.expect("read after trim");
    assert!(d.buf.iter().all(|&b| b == 0), "zeroes after trim");

    let zero = ios.io(
        NbdCommand::WriteZeroes {
            offset: 5 * CHUNK as u64,
            len: 2 * CHUNK as u32,
            no_hole: true,
            fua: true,
        },
        Vec::new(),
    );
    ios.run(&client, zero).result.expect("write zeroes");
    let d = ios.run(&client, ios.read(4 * CHUNK as u64, 4 * CHUNK as u32));
    let pat = pattern(4 * CHUNK as u64, CHUNK, 0);
    assert!(d.buf[..CHUNK] == pat[..], "data before the zeroes kept");
    assert!(d.buf[CHUNK..3 * CHUNK].iter().all(|&b| b == 0), "zeroes");
    assert!(d.buf[3 * CHUNK..] == pattern(7 * CHUNK as u64, CHUNK, 0)[..]);
}

fn check_export(client: &NbdClient) {
    assert_eq!(client.size(), SIZE);
    let f = client.flags();
    assert!(f.flush() && f.fua() && f.trim() && f.write_zeroes() && f.multi_conn());
    assert!(!f.read_only());
    assert!(client.structured_replies());
}

#[test]
fn unix_socket_many_in_flight() {
    let server = nbdkit(false, &["memory", "64M"]);
    let client = NbdClient::connect(&server.addr, "", 1).expect("connect");
    check_export(&client);
    assert_eq!(client.connections(), 1);
    let client = Arc::new(client);
    workload(client.clone());
    assert!(client.connection_error().is_none());

    // Requests refused before they reach the server.
    let ios = Ios::new();
    let d = ios.run(&client, ios.read(SIZE - 512, 1024));
    assert!(
        matches!(d.result, Err(NbdError::OutOfRange { .. })),
        "{:?}",
        d.result
    );
    let io = ios.io(
        NbdCommand::Read {
            offset: 0,
            len: 512,
        },
        vec![0; 100],
    );
    let d = ios.run(&client, io);
    assert!(matches!(
        d.result,
        Err(NbdError::BufferSize {
            len: 512,
            buffer: 100
        })
    ));
    let max = client.block_size().max;
    let d = ios.run(&client, ios.read(0, max + 1));
    assert!(
        matches!(d.result, Err(NbdError::TooLarge { .. })),
        "{:?}",
        d.result
    );

    client.close();
    let d = ios.run(&client, ios.read(0, 512));
    assert!(matches!(d.result, Err(NbdError::Closed)), "{:?}", d.result);
}

#[test]
fn tcp_four_connections() {
    let server = nbdkit(true, &["memory", "64M"]);
    let client = NbdClient::connect(&server.addr, "", 4).expect("connect");
    check_export(&client);
    assert_eq!(client.connections(), 4);
    workload(Arc::new(client));
}

#[test]
fn unknown_export_is_refused() {
    let server = nbdkit(
        false,
        &[
            "--filter=exportname",
            "memory",
            "64M",
            "exportname-strict=true",
            "exportname=disk",
        ],
    );
    NbdClient::connect(&server.addr, "disk", 1).expect("the listed export");
    let err = NbdClient::connect(&server.addr, "nosuchdisk", 1).unwrap_err();
    match &err {
        NbdError::ExportRefused { export, code, .. } => {
            assert_eq!(export, "nosuchdisk");
            assert_eq!(*code & proto::REP_FLAG_ERROR, proto::REP_FLAG_ERROR);
        }
        other => panic!("expected ExportRefused, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("\"nosuchdisk\""), "{text}");
}

#[test]
fn read_only_export() {
    let server = nbdkit(false, &["-r", "memory", "1M"]);
    let client = NbdClient::connect(&server.addr, "", 1).expect("connect");
    assert!(client.flags().read_only());
    let ios = Ios::new();
    let d = ios.run(&client, ios.write(0, vec![1; 512]));
    assert!(
        matches!(d.result, Err(NbdError::ReadOnly)),
        "{:?}",
        d.result
    );
    let d = ios.run(&client, ios.read(0, 512));
    d.result.expect("read");
    assert!(d.buf.iter().all(|&b| b == 0));
}

/// A BIUS device on nbdkit, through the loopback kernel: patterns written
/// with 64 requests in flight on two queues read back; flush; discard
/// reads as zeroes; zone requests refused.
#[test]
fn a_device_on_nbdkit_round_trips_with_many_in_flight() {
    use bius::loopback::Loopback;
    use bius::{Command, DeviceBuilder, IoError};

    use crate::nbd::NbdDevice;

    const CHUNK: usize = 64 << 10;
    let server = nbdkit(false, &["memory", "64M"]);
    let disk = NbdDevice::connect(&server.addr, "", 1).expect("connect");
    assert_eq!(disk.size(), SIZE);
    let builder = DeviceBuilder::new(disk.size())
        .queues(2)
        .queue_depth(32)
        .max_io_size(disk.max_io_size());
    let mut kernel = Loopback::new(&builder).expect("loopback");
    kernel.start_deferred(disk).expect("start");
    crate::testing::round_trip(&kernel, 64, CHUNK);
    assert_eq!(
        kernel.run(0, Command::ZoneResetAll),
        Err(IoError::Unsupported)
    );
    assert_eq!(kernel.counters().refused, 0);
    kernel.stop().expect("stop");
}
