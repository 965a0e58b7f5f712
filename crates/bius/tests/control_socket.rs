//! The control socket end to end: a device served by the loopback, its
//! control socket in a temporary directory, a client asking for
//! statistics, traces, faults, detach, and lines of another version or
//! none.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bius::control_socket::{
    ClientError, ControlClient, ControlError, ControlExtension, ControlReply, ControlSocket,
    ControlTarget, Fault, FaultReport, ReplyLine, StatsQuery, PROTOCOL_VERSION,
};
use bius::loopback::{Loopback, Submission};
use bius::stats::{Statistics, TraceFormat};
use bius::zone::{ZoneCondition, ZoneGeometry, ZoneSet};
use bius::{BlockDevice, DeviceBuilder, Errno, IoError, Op};

/// Reads zeroes, drops writes.
struct Zeroes;

impl BlockDevice for Zeroes {
    fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        buf.fill(0);
        Ok(())
    }
    fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
        Ok(())
    }
}

/// The loopback device's side: its statistics, and a detach that is only
/// noted.
struct Served {
    statistics: Statistics,
    detached: Arc<AtomicBool>,
}

impl ControlTarget for Served {
    fn statistics(&self) -> &Statistics {
        &self.statistics
    }

    fn detach(&self) -> Result<(), ControlError> {
        self.detached.store(true, Ordering::SeqCst);
        Ok(())
    }
}

/// Faults into zones of their own (8 of 32 KiB, the first conventional);
/// no model.
struct Faults(ZoneSet);

impl ControlExtension for Faults {
    fn fault(&self, fault: Fault) -> Result<FaultReport, ControlError> {
        fault
            .apply(&self.0, |_, _| Ok(()))
            .map_err(|err| ControlError::failed(err.errno(), err))
    }
}

fn faults() -> Faults {
    let geometry = ZoneGeometry::new(256 << 10, 32 << 10)
        .and_then(|geometry| geometry.with_conventional_zones(1))
        .unwrap();
    Faults(ZoneSet::new(geometry))
}

/// A line sent as is; the reply line read back.
fn exchange(path: &Path, line: &str) -> ControlReply {
    let stream = UnixStream::connect(path).unwrap();
    (&stream).write_all(line.as_bytes()).unwrap();
    let mut reply = String::new();
    BufReader::new(&stream).read_line(&mut reply).unwrap();
    let reply: ReplyLine = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply.version, PROTOCOL_VERSION);
    reply.reply
}

fn refusal(result: Result<impl std::fmt::Debug, ClientError>) -> ControlError {
    match result {
        Err(ClientError::Refused(err)) => err,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_loopback_device_answers_over_its_control_socket() {
    let mut kernel = Loopback::new(&DeviceBuilder::new(1 << 20)).unwrap();
    kernel.start(Zeroes).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run/zeroes.sock");
    let detached = Arc::new(AtomicBool::new(false));
    let served = Served {
        statistics: kernel.statistics(),
        detached: Arc::clone(&detached),
    };
    let socket = ControlSocket::bind(&path, served, faults()).unwrap();
    let mut client = ControlClient::connect(&path).unwrap();

    // Statistics, and a reset.
    for _ in 0..3 {
        kernel.read(0, 0, 4096).unwrap();
    }
    kernel
        .run(0, Submission::write(8192, vec![1; 512]))
        .unwrap();
    let stats = client.stats().unwrap();
    assert_eq!(stats.op(Op::Read).count, 3);
    assert_eq!(stats.op(Op::Write).bytes, 512);
    assert_eq!(stats.kernel.read_sectors, 24);
    assert!(stats.zoned.is_none());
    let query = StatsQuery {
        per_zone: true,
        reset: true,
    };
    assert_eq!(client.stats_with(query).unwrap().op(Op::Read).count, 3);
    assert_eq!(client.stats().unwrap().op(Op::Read).count, 0);

    // A trace.
    let file = dir.path().join("t.csv");
    let started = client.start_trace(&file, TraceFormat::Csv).unwrap();
    assert!(started.active);
    assert_eq!(started.file.as_deref(), Some(file.as_path()));
    let again = refusal(client.start_trace(&file, TraceFormat::Csv));
    assert_eq!(again.errno(), Errno::EBUSY);
    kernel.read(0, 0, 4096).unwrap();
    assert!(client.trace_status().unwrap().active);
    let stopped = client.stop_trace().unwrap();
    assert!(!stopped.active);
    assert_eq!((stopped.records, stopped.dropped), (1, 0));
    let csv = std::fs::read_to_string(&file).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
    let nowhere = refusal(client.start_trace(dir.path().join("no/t.csv"), TraceFormat::Csv));
    assert_eq!(nowhere.errno(), Errno::ENOENT);

    // Faults, through the daemon's extension.
    assert_eq!(
        client.fault(Fault::ReadOnly { zone: 3 }).unwrap(),
        FaultReport::Zone {
            zone: 3,
            start: 96 << 10,
            condition: ZoneCondition::ReadOnly
        }
    );
    let conventional = refusal(client.fault(Fault::Offline { zone: 0 }));
    assert_eq!(conventional.errno(), Errno::EINVAL);
    assert_eq!(
        conventional.to_string(),
        "zone 0 is conventional: only sequential zones take faults"
    );

    // What the daemon does not answer.
    let model = refusal(client.extension::<serde_json::Value>("model", ()));
    assert_eq!(
        model,
        ControlError::Unsupported {
            request: "model".into()
        }
    );
    assert_eq!(refusal(client.info()).errno(), Errno::EOPNOTSUPP);

    // Detach.
    assert!(!detached.load(Ordering::SeqCst));
    client.detach().unwrap();
    assert!(detached.load(Ordering::SeqCst));

    // Lines of another version, or no request: typed errors.
    assert_eq!(
        exchange(&path, "{\"version\":3,\"request\":{\"Stats\":{}}}\n"),
        ControlReply::Error(ControlError::UnsupportedVersion { version: 3 })
    );
    for line in [
        "{\"version\":2,\"request\":\"Melt\"}\n",
        "stats zones\n",
        "\n",
    ] {
        assert!(
            matches!(
                exchange(&path, line),
                ControlReply::Error(ControlError::Malformed { .. })
            ),
            "{line}"
        );
    }

    drop(socket);
    assert!(matches!(
        ControlClient::connect(&path),
        Err(ClientError::NoDaemon { .. })
    ));
    kernel.stop().unwrap();
}

#[test]
fn a_daemon_extension_answers_its_own_requests() {
    struct Model;

    /// `model`, with a body asking for a unit; nothing else.
    impl ControlExtension for Model {
        fn extension(
            &self,
            name: &str,
            body: serde_json::Value,
        ) -> Result<serde_json::Value, ControlError> {
            match (name, body["unit"].as_str()) {
                ("model", Some("erases")) => Ok(serde_json::json!({ "name": "nvm", "erases": 3 })),
                ("model", _) => Err(ControlError::failed(Errno::EINVAL, "no such unit")),
                _ => Err(ControlError::Unsupported {
                    request: name.into(),
                }),
            }
        }
    }

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Report {
        name: String,
        erases: u64,
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.sock");
    let served = Served {
        statistics: Statistics::default(),
        detached: Arc::default(),
    };
    let _socket = ControlSocket::bind(&path, served, Model).unwrap();
    let mut client = ControlClient::connect(&path).unwrap();
    let unit = serde_json::json!({ "unit": "erases" });
    assert_eq!(
        client.extension::<Report>("model", &unit).unwrap(),
        Report {
            name: "nvm".into(),
            erases: 3
        }
    );
    let bad_unit = refusal(client.extension::<Report>("model", ()));
    assert_eq!(bad_unit.errno(), Errno::EINVAL);
    let other = refusal(client.extension::<Report>("wear", ()));
    assert_eq!(
        other,
        ControlError::Unsupported {
            request: "wear".into()
        }
    );
    let faults = refusal(client.fault(Fault::WriteError { offset: 0 }));
    assert_eq!(faults.errno(), Errno::EOPNOTSUPP);
    // A response read as another type is outside the protocol.
    assert!(matches!(
        client.extension::<u64>("model", &unit),
        Err(ClientError::Protocol { .. })
    ));
}
