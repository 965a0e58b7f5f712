//! Tests of the zone state file.

use super::*;
use bius::zone::ZoneCondition;

const BOOT: BootId = BootId([7; 16]);
const REBOOT: BootId = BootId([8; 16]);

/// 1 MiB in 256 KiB zones, the first conventional, capacity 384 sectors.
fn geometry() -> ZoneGeometry {
    ZoneGeometry::new(1 << 20, 256 << 10)
        .unwrap()
        .with_zone_capacity(192 << 10)
        .unwrap()
        .with_conventional_zones(1)
        .unwrap()
}

/// A sector: the tests count in sectors, as the file does; the records
/// are in bytes.
const S: u64 = 512;

/// A record of a zone whose data ends at its write pointer, `sector` (or
/// none: `u64::MAX`).
fn record(condition: ZoneCondition, sector: u64) -> ZoneRecord {
    let write_pointer = match sector {
        u64::MAX => u64::MAX,
        sector => sector * S,
    };
    ZoneRecord {
        condition,
        write_pointer,
        data_end: write_pointer,
    }
}

fn open(path: &Path, boot: BootId) -> Result<(ZoneStateFile, Vec<ZoneRecord>), ZoneStateError> {
    ZoneStateFile::open_at_boot(path, &geometry(), 4096, boot, Duration::ZERO)
}

#[test]
fn a_new_file_has_empty_zones_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.zones");
    let (state, records) = open(&path, BOOT).unwrap();
    assert_eq!(records, ZoneSet::new(geometry()).records());
    assert_eq!(records[0].condition, ZoneCondition::NotWritePointer);
    assert_eq!(records[1], record(ZoneCondition::Empty, 512));
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        (HEADER_LEN + 4 * 2 * RECORD_LEN) as u64
    );
    state
        .acknowledged(1, record(ZoneCondition::Closed, 520))
        .unwrap();
    state
        .acknowledged(2, record(ZoneCondition::Full, 1024 + 384))
        .unwrap();
    state
        .durable(&[(1, record(ZoneCondition::Closed, 520))])
        .unwrap();
    drop(state);
    let (_, same_boot) = open(&path, BOOT).unwrap();
    assert_eq!(same_boot[1], record(ZoneCondition::Closed, 520));
    assert_eq!(same_boot[2], record(ZoneCondition::Full, 1024 + 384));
    let header = ZoneStateFile::header(&path).unwrap();
    assert_eq!(header, ZoneStateHeader::of(&geometry(), 4096));
    assert_eq!(header.geometry(), Ok(geometry()));
    let odd = ZoneStateHeader {
        zone_size: 3 * S,
        ..header
    };
    assert_eq!(
        odd.geometry(),
        Err(bius::zone::ZoneGeometryError::ZoneSize { bytes: 1536 })
    );
    assert_eq!(
        (header.device_size, header.zone_size, header.zone_capacity),
        (1 << 20, 512 * S, 384 * S)
    );
}

#[test]
fn another_boot_takes_the_durable_states_and_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.zones");
    let (state, _) = open(&path, BOOT).unwrap();
    state
        .acknowledged(1, record(ZoneCondition::Closed, 600))
        .unwrap();
    state
        .durable(&[(1, record(ZoneCondition::Closed, 560))])
        .unwrap();
    state
        .acknowledged(1, record(ZoneCondition::Closed, 700))
        .unwrap();
    drop(state);
    let (_, after_power_loss) = open(&path, REBOOT).unwrap();
    assert_eq!(after_power_loss[1], record(ZoneCondition::Closed, 560));
    // The durable states became the acknowledged ones of the new boot.
    let (_, again) = open(&path, REBOOT).unwrap();
    assert_eq!(again[1], record(ZoneCondition::Closed, 560));
    // An unknown boot is never the same boot.
    let unknown = BootId([0; 16]);
    let (state, _) = open(&path, unknown).unwrap();
    state
        .acknowledged(1, record(ZoneCondition::Closed, 900))
        .unwrap();
    drop(state);
    assert_eq!(open(&path, unknown).unwrap().1[1].write_pointer, 560 * S);
}

#[test]
fn the_data_end_of_finished_and_read_only_zones_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.zones");
    let (state, _) = open(&path, BOOT).unwrap();
    // Zone 1 finished after 8 sectors, zone 2 made read-only after 16.
    let finished = ZoneRecord {
        data_end: 520 * S,
        ..record(ZoneCondition::Full, 1024)
    };
    let read_only = ZoneRecord {
        data_end: 1040 * S,
        ..record(ZoneCondition::ReadOnly, u64::MAX)
    };
    state.acknowledged(1, finished).unwrap();
    state.acknowledged(2, read_only).unwrap();
    state.durable(&[(1, finished), (2, read_only)]).unwrap();
    drop(state);
    let (_, same_boot) = open(&path, BOOT).unwrap();
    assert_eq!(same_boot[1..3], [finished, read_only]);
    let (_, rebooted) = open(&path, REBOOT).unwrap();
    assert_eq!(rebooted[1..3], [finished, read_only]);
}

#[test]
fn a_version_1_file_is_read_and_becomes_version_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.zones");
    let (state, _) = open(&path, BOOT).unwrap();
    state
        .acknowledged(1, record(ZoneCondition::Closed, 520))
        .unwrap();
    // Version 1 knew no data end: below the write pointer, all data.
    state
        .acknowledged(2, record(ZoneCondition::Full, 1536))
        .unwrap();
    drop(state);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let (state, records) = open(&path, BOOT).unwrap();
    assert_eq!(records[1], record(ZoneCondition::Closed, 520));
    let capacity_end = 1024 + 384;
    assert_eq!(
        records[2],
        ZoneRecord {
            data_end: capacity_end * S,
            ..record(ZoneCondition::Full, 1536)
        }
    );
    assert_eq!(std::fs::read(&path).unwrap()[8..12], 2u32.to_le_bytes());
    drop(state);
    assert_eq!(open(&path, BOOT).unwrap().1, records);
}

/// The error opening a file whose bytes `edit` changed.
fn refused(edit: impl FnOnce(&mut Vec<u8>)) -> ZoneStateError {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.zones");
    drop(open(&path, BOOT).unwrap());
    let mut bytes = std::fs::read(&path).unwrap();
    edit(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    let err = open(&path, BOOT).unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL, "{err}");
    assert!(err.to_string().contains("disk.zones"), "{err}");
    err
}

#[test]
fn malformed_truncated_and_other_geometries_are_refused() {
    let err = refused(|bytes| bytes.truncate(40));
    assert!(
        matches!(err, ZoneStateError::Truncated { len: 40, .. }),
        "{err}"
    );
    let err = refused(|bytes| bytes.truncate(bytes.len() - 1));
    assert!(matches!(err, ZoneStateError::Truncated { .. }), "{err}");
    let err = refused(|bytes| bytes[0] = b'X');
    assert!(err.to_string().contains("magic"), "{err}");
    let err = refused(|bytes| bytes[8] = 3);
    assert!(err.to_string().contains("version"), "{err}");
    let err = refused(|bytes| bytes[25] = 4);
    assert!(
        matches!(
            err,
            ZoneStateError::Mismatch {
                field: "zone size in bytes",
                stored,
                given,
                ..
            } if (stored, given) == (1024 * S, 512 * S)
        ),
        "{err}"
    );
    let err = refused(|bytes| bytes[40] = 2);
    assert!(err.to_string().contains("conventional zones"), "{err}");
    // Zone 1's acknowledged record: an unknown condition, a data end
    // before the device start or before the zone's, a write pointer
    // outside the zone.
    let ack = record_offset(1, false) as usize;
    let err = refused(|bytes| bytes[ack + 8] = 0x42);
    assert!(
        err.to_string().contains("zone 1 acknowledged record"),
        "{err}"
    );
    let err = refused(|bytes| bytes[ack + 12] = 1);
    assert!(err.to_string().contains("before the device start"), "{err}");
    let err = refused(|bytes| bytes[ack + 9] = 1);
    assert!(err.to_string().contains("data end is invalid"), "{err}");
    let err = refused(|bytes| {
        bytes[ack..ack + 8].copy_from_slice(&4096u64.to_le_bytes());
        bytes[ack + 8] = ZoneCondition::Closed as u8;
    });
    assert!(err.to_string().contains("wp is invalid"), "{err}");
    // Opened with another geometry.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.zones");
    drop(open(&path, BOOT).unwrap());
    let other = geometry().with_zone_capacity(256 << 10).unwrap();
    let err = ZoneStateFile::open_at_boot(&path, &other, 4096, BOOT, Duration::ZERO).unwrap_err();
    assert!(
        matches!(
            err,
            ZoneStateError::Mismatch {
                field: "zone capacity in bytes",
                ..
            }
        ),
        "{err}"
    );
    let err =
        ZoneStateFile::open_at_boot(&path, &geometry(), 512, BOOT, Duration::ZERO).unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL);
    assert!(
        err.to_string().contains("block size in bytes is 4096"),
        "{err}"
    );
}

#[test]
fn a_file_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.zones");
    let held = open(&path, BOOT).unwrap();
    let err = open(&path, BOOT).unwrap_err();
    assert!(matches!(err, ZoneStateError::InUse { .. }), "{err}");
    assert_eq!(err.errno(), Errno::EBUSY);
    drop(held);
    let held = open(&path, BOOT).unwrap();
    // Let go of while waiting: taken.
    let waiting = std::thread::spawn(move || {
        ZoneStateFile::open_at_boot(&path, &geometry(), 4096, BOOT, LOCK_WAIT).map(drop)
    });
    std::thread::sleep(Duration::from_millis(100));
    drop(held);
    waiting.join().unwrap().unwrap();
}

#[test]
fn io_errors_carry_their_errno() {
    let err = open(Path::new("/nonexistent-dir/disk.zones"), BOOT).unwrap_err();
    assert_eq!(err.errno(), Errno::ENOENT);
    assert!(err.to_string().contains("/nonexistent-dir/disk.zones"));
}

#[test]
fn this_boot_is_known() {
    assert!(BootId::current().known());
    assert_eq!(BootId::current(), BootId::current());
}

#[test]
fn errors_name_the_file_and_what_is_wrong() {
    let path = || PathBuf::from("/srv/disk.zones");
    for (err, message) in [
        (
            ZoneStateError::Io {
                path: path(),
                source: io::Error::from_raw_os_error(Errno::ENOSPC as i32),
            },
            "zone state file /srv/disk.zones: No space left on device (os error 28)",
        ),
        (
            ZoneStateError::InUse { path: path() },
            "zone state file /srv/disk.zones: in use by another process (another daemon of the disk?)",
        ),
        (
            ZoneStateError::Truncated {
                path: path(),
                len: 40,
                expected: 64,
            },
            "zone state file /srv/disk.zones: 40 bytes long, 64 expected (truncated?)",
        ),
        (
            ZoneStateError::Malformed {
                path: path(),
                field: "zone 3 condition".into(),
                why: "9 is no condition".into(),
            },
            "zone state file /srv/disk.zones: zone 3 condition: 9 is no condition",
        ),
        (
            ZoneStateError::Mismatch {
                path: path(),
                field: "zones",
                stored: 4,
                given: 8,
            },
            "zone state file /srv/disk.zones: zones is 4, the device's is 8",
        ),
    ] {
        assert_eq!(err.to_string(), message, "{err:?}");
        let has_source = matches!(err, ZoneStateError::Io { .. });
        assert_eq!(std::error::Error::source(&err).is_some(), has_source);
    }
}

/// `value`'s little-endian bytes, `len` of them.
fn le(value: u64, len: usize) -> Vec<u8> {
    value.to_le_bytes()[..len].to_vec()
}

/// A record as the format says: write pointer (sectors), condition, the
/// sectors from the data end to the write pointer or capacity end (u56).
fn record_bytes(write_pointer: u64, condition: ZoneCondition, skipped: u64) -> Vec<u8> {
    [le(write_pointer, 8), vec![condition as u8], le(skipped, 7)].concat()
}

#[test]
fn the_bytes_are_the_documented_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.zones");
    let (state, _) = open(&path, BOOT).unwrap();
    // Zone 1 closed at sector 520; zone 2 finished after 16 sectors;
    // zone 3 made read-only after 8.
    let closed = record(ZoneCondition::Closed, 520);
    let finished = ZoneRecord {
        data_end: 1040 * S,
        ..record(ZoneCondition::Full, 1536)
    };
    let read_only = ZoneRecord {
        data_end: 1544 * S,
        ..record(ZoneCondition::ReadOnly, u64::MAX)
    };
    state.acknowledged(1, closed).unwrap();
    state.acknowledged(2, finished).unwrap();
    state.acknowledged(3, read_only).unwrap();
    state.durable(&[(2, finished)]).unwrap();
    drop(state);
    let header = [
        b"BIUSZONE".to_vec(),
        le(2, 4),       // version
        le(4096, 4),    // block size, bytes
        le(1 << 20, 8), // device size, bytes
        le(512, 8),     // zone size, sectors
        le(384, 8),     // zone capacity, sectors
        le(1, 4),       // conventional zones
        le(4, 4),       // zones
        vec![7; 16],    // boot id
    ]
    .concat();
    let zones = [
        // Zone 0, conventional: both records as created.
        record_bytes(512, ZoneCondition::NotWritePointer, 0),
        record_bytes(512, ZoneCondition::NotWritePointer, 0),
        // Zone 1: acknowledged closed, durable still empty.
        record_bytes(520, ZoneCondition::Closed, 0),
        record_bytes(512, ZoneCondition::Empty, 0),
        // Zone 2: the data ends 368 sectors before the capacity end
        // (1024 + 384), below the write pointer at the zone end.
        record_bytes(1536, ZoneCondition::Full, 368),
        record_bytes(1536, ZoneCondition::Full, 368),
        // Zone 3: no write pointer; the data ends 376 sectors before the
        // capacity end (1536 + 384).
        record_bytes(u64::MAX, ZoneCondition::ReadOnly, 376),
        record_bytes(1536, ZoneCondition::Empty, 0),
    ]
    .concat();
    assert_eq!(std::fs::read(&path).unwrap(), [header, zones].concat());
    let (_, same_boot) = open(&path, BOOT).unwrap();
    assert_eq!(same_boot[1..], [closed, finished, read_only]);
}
