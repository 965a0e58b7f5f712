//! Tests of the zone state machine: a table of every condition against
//! every operation, the resource limits and concurrent appends; the
//! randomized comparison with a reference model is in [`model`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::*;
use crate::error::Errno;

use ZoneCondition::*;

mod model;

fn errno(err: ZoneError) -> Errno {
    IoError::from(err).errno()
}

/// A sector: the tests count in sectors, the zone API in bytes.
const S: u64 = 512;

fn ok(_: u64, _: u64) -> Result<(), IoError> {
    Ok(())
}

fn zone(set: &ZoneSet, offset: u64) -> Zone {
    set.report(offset, 1)[0]
}

fn counts(implicit_open: u32, explicit_open: u32, closed: u32) -> ActiveZones {
    ActiveZones {
        implicit_open,
        explicit_open,
        closed,
    }
}

/// The bytes of the `len` at `offset` below the write pointer.
fn below_write_pointer(set: &ZoneSet, offset: u64, len: u64) -> Result<u64, ZoneError> {
    let mut total = 0;
    set.read(offset, len, |span| {
        total += span.written + span.skipped;
        Ok(())
    })?;
    Ok(total)
}

// ---------------------------------------------------------------------
// Every condition against every operation.

/// Zones of 8 sectors with a capacity of 6: zone 0 conventional (sectors
/// 0..8), zone 1 (8..16) the one under test, zones 2 and 3 spare.
const START: u64 = 8 * S;

fn table_set() -> ZoneSet {
    ZoneSet::new(
        ZoneGeometry::new(16 << 10, 4 << 10)
            .unwrap()
            .with_zone_capacity(3 << 10)
            .unwrap()
            .with_conventional_zones(1)
            .unwrap(),
    )
}

#[derive(Debug, Clone, Copy)]
enum Setup {
    Conventional,
    Empty,
    ImplicitOpen,
    ExplicitOpenEmpty,
    ExplicitOpen,
    Closed,
    Full,
    ReadOnly,
    Offline,
}

impl Setup {
    /// Brings zone 1 (or 0 for a conventional zone) into this setup;
    /// returns the zone's start.
    fn apply(self, set: &ZoneSet) -> u64 {
        let write_one = || set.write(START, S, ok).unwrap();
        match self {
            Setup::Conventional => return 0,
            Setup::Empty => {}
            Setup::ImplicitOpen => write_one(),
            Setup::ExplicitOpenEmpty => set.open(START).unwrap(),
            Setup::ExplicitOpen => {
                write_one();
                set.open(START).unwrap();
            }
            Setup::Closed => {
                write_one();
                set.close(START).unwrap();
            }
            Setup::Full => set.finish(START).unwrap(),
            Setup::ReadOnly => {
                write_one();
                set.set_read_only(START, ok).unwrap();
            }
            Setup::Offline => set.set_offline(START, ok).unwrap(),
        }
        START
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    WriteAtWp,
    WriteNotAtWp,
    Append,
    Open,
    Close,
    Finish,
    Reset,
    Read,
}

impl Op {
    /// Applies the operation to the zone at `start`; a read returns the
    /// bytes below the write pointer, anything else 0.
    fn apply(self, set: &ZoneSet, start: u64) -> Result<u64, ZoneError> {
        let wp = zone(set, start).write_pointer;
        // A write pointer outside the zone (full, read-only, offline,
        // conventional): write at the start instead.
        let at_wp = if (start..start + 8 * S).contains(&wp) {
            wp
        } else {
            start
        };
        match self {
            Op::WriteAtWp => set.write(at_wp, S, ok).map(|()| 0),
            Op::WriteNotAtWp => set.write(at_wp + S, S, ok).map(|()| 0),
            Op::Append => set.append(start, S, ok).map(|_| 0),
            Op::Open => set.open(start).map(|()| 0),
            Op::Close => set.close(start).map(|()| 0),
            Op::Finish => set.finish(start).map(|()| 0),
            Op::Reset => set.reset(start, ok).map(|()| 0),
            Op::Read => below_write_pointer(set, start, 8 * S),
        }
    }
}

const EIO: Result<u64, Errno> = Err(Errno::EIO);
const MAX: u64 = u64::MAX;

/// One row: setup, operation, result (bytes read below the write
/// pointer), condition after, write pointer after (a byte), counters after
/// as (implicit open, explicit open, closed).
type Row = (
    Setup,
    Op,
    Result<u64, Errno>,
    ZoneCondition,
    u64,
    (u32, u32, u32),
);

#[rustfmt::skip]
const TABLE: &[Row] = &[
    (Setup::Conventional, Op::WriteAtWp,    Ok(0), NotWritePointer, 8 * S, (0, 0, 0)),
    (Setup::Conventional, Op::WriteNotAtWp, Ok(0), NotWritePointer, 8 * S, (0, 0, 0)),
    (Setup::Conventional, Op::Append,       EIO,   NotWritePointer, 8 * S, (0, 0, 0)),
    (Setup::Conventional, Op::Open,         EIO,   NotWritePointer, 8 * S, (0, 0, 0)),
    (Setup::Conventional, Op::Close,        EIO,   NotWritePointer, 8 * S, (0, 0, 0)),
    (Setup::Conventional, Op::Finish,       EIO,   NotWritePointer, 8 * S, (0, 0, 0)),
    (Setup::Conventional, Op::Reset,        EIO,   NotWritePointer, 8 * S, (0, 0, 0)),
    (Setup::Conventional, Op::Read,         Ok(8 * S), NotWritePointer, 8 * S, (0, 0, 0)),

    (Setup::Empty, Op::WriteAtWp,    Ok(0), ImplicitOpen, 9 * S,  (1, 0, 0)),
    (Setup::Empty, Op::WriteNotAtWp, EIO,   Empty,        8 * S,  (0, 0, 0)),
    (Setup::Empty, Op::Append,       Ok(0), ImplicitOpen, 9 * S,  (1, 0, 0)),
    (Setup::Empty, Op::Open,         Ok(0), ExplicitOpen, 8 * S,  (0, 1, 0)),
    (Setup::Empty, Op::Close,        EIO,   Empty,        8 * S,  (0, 0, 0)),
    (Setup::Empty, Op::Finish,       Ok(0), Full,         16 * S, (0, 0, 0)),
    (Setup::Empty, Op::Reset,        Ok(0), Empty,        8 * S,  (0, 0, 0)),
    (Setup::Empty, Op::Read,         Ok(0), Empty,        8 * S,  (0, 0, 0)),

    (Setup::ImplicitOpen, Op::WriteAtWp,    Ok(0), ImplicitOpen, 10 * S, (1, 0, 0)),
    (Setup::ImplicitOpen, Op::WriteNotAtWp, EIO,   ImplicitOpen, 9 * S,  (1, 0, 0)),
    (Setup::ImplicitOpen, Op::Append,       Ok(0), ImplicitOpen, 10 * S, (1, 0, 0)),
    (Setup::ImplicitOpen, Op::Open,         Ok(0), ExplicitOpen, 9 * S,  (0, 1, 0)),
    (Setup::ImplicitOpen, Op::Close,        Ok(0), Closed,       9 * S,  (0, 0, 1)),
    (Setup::ImplicitOpen, Op::Finish,       Ok(0), Full,         16 * S, (0, 0, 0)),
    (Setup::ImplicitOpen, Op::Reset,        Ok(0), Empty,        8 * S,  (0, 0, 0)),
    (Setup::ImplicitOpen, Op::Read,         Ok(S), ImplicitOpen, 9 * S,  (1, 0, 0)),

    (Setup::ExplicitOpenEmpty, Op::WriteAtWp,    Ok(0), ExplicitOpen, 9 * S,  (0, 1, 0)),
    (Setup::ExplicitOpenEmpty, Op::WriteNotAtWp, EIO,   ExplicitOpen, 8 * S,  (0, 1, 0)),
    (Setup::ExplicitOpenEmpty, Op::Append,       Ok(0), ExplicitOpen, 9 * S,  (0, 1, 0)),
    (Setup::ExplicitOpenEmpty, Op::Open,         Ok(0), ExplicitOpen, 8 * S,  (0, 1, 0)),
    (Setup::ExplicitOpenEmpty, Op::Close,        Ok(0), Empty,        8 * S,  (0, 0, 0)),
    (Setup::ExplicitOpenEmpty, Op::Finish,       Ok(0), Full,         16 * S, (0, 0, 0)),
    (Setup::ExplicitOpenEmpty, Op::Reset,        Ok(0), Empty,        8 * S,  (0, 0, 0)),
    (Setup::ExplicitOpenEmpty, Op::Read,         Ok(0), ExplicitOpen, 8 * S,  (0, 1, 0)),

    (Setup::ExplicitOpen, Op::WriteAtWp,    Ok(0), ExplicitOpen, 10 * S, (0, 1, 0)),
    (Setup::ExplicitOpen, Op::WriteNotAtWp, EIO,   ExplicitOpen, 9 * S,  (0, 1, 0)),
    (Setup::ExplicitOpen, Op::Append,       Ok(0), ExplicitOpen, 10 * S, (0, 1, 0)),
    (Setup::ExplicitOpen, Op::Open,         Ok(0), ExplicitOpen, 9 * S,  (0, 1, 0)),
    (Setup::ExplicitOpen, Op::Close,        Ok(0), Closed,       9 * S,  (0, 0, 1)),
    (Setup::ExplicitOpen, Op::Finish,       Ok(0), Full,         16 * S, (0, 0, 0)),
    (Setup::ExplicitOpen, Op::Reset,        Ok(0), Empty,        8 * S,  (0, 0, 0)),
    (Setup::ExplicitOpen, Op::Read,         Ok(S), ExplicitOpen, 9 * S,  (0, 1, 0)),

    (Setup::Closed, Op::WriteAtWp,    Ok(0), ImplicitOpen, 10 * S, (1, 0, 0)),
    (Setup::Closed, Op::WriteNotAtWp, EIO,   Closed,       9 * S,  (0, 0, 1)),
    (Setup::Closed, Op::Append,       Ok(0), ImplicitOpen, 10 * S, (1, 0, 0)),
    (Setup::Closed, Op::Open,         Ok(0), ExplicitOpen, 9 * S,  (0, 1, 0)),
    (Setup::Closed, Op::Close,        Ok(0), Closed,       9 * S,  (0, 0, 1)),
    (Setup::Closed, Op::Finish,       Ok(0), Full,         16 * S, (0, 0, 0)),
    (Setup::Closed, Op::Reset,        Ok(0), Empty,        8 * S,  (0, 0, 0)),
    (Setup::Closed, Op::Read,         Ok(S), Closed,       9 * S,  (0, 0, 1)),

    (Setup::Full, Op::WriteAtWp,    EIO,   Full,  16 * S, (0, 0, 0)),
    (Setup::Full, Op::WriteNotAtWp, EIO,   Full,  16 * S, (0, 0, 0)),
    (Setup::Full, Op::Append,       EIO,   Full,  16 * S, (0, 0, 0)),
    (Setup::Full, Op::Open,         EIO,   Full,  16 * S, (0, 0, 0)),
    (Setup::Full, Op::Close,        EIO,   Full,  16 * S, (0, 0, 0)),
    (Setup::Full, Op::Finish,       Ok(0), Full,  16 * S, (0, 0, 0)),
    (Setup::Full, Op::Reset,        Ok(0), Empty, 8 * S,  (0, 0, 0)),
    (Setup::Full, Op::Read,         Ok(8 * S), Full,  16 * S, (0, 0, 0)),

    (Setup::ReadOnly, Op::WriteAtWp,    EIO,   ReadOnly, MAX, (0, 0, 0)),
    (Setup::ReadOnly, Op::WriteNotAtWp, EIO,   ReadOnly, MAX, (0, 0, 0)),
    (Setup::ReadOnly, Op::Append,       EIO,   ReadOnly, MAX, (0, 0, 0)),
    (Setup::ReadOnly, Op::Open,         EIO,   ReadOnly, MAX, (0, 0, 0)),
    (Setup::ReadOnly, Op::Close,        EIO,   ReadOnly, MAX, (0, 0, 0)),
    (Setup::ReadOnly, Op::Finish,       EIO,   ReadOnly, MAX, (0, 0, 0)),
    (Setup::ReadOnly, Op::Reset,        EIO,   ReadOnly, MAX, (0, 0, 0)),
    (Setup::ReadOnly, Op::Read,         Ok(8 * S), ReadOnly, MAX, (0, 0, 0)),

    (Setup::Offline, Op::WriteAtWp,    EIO, Offline, MAX, (0, 0, 0)),
    (Setup::Offline, Op::WriteNotAtWp, EIO, Offline, MAX, (0, 0, 0)),
    (Setup::Offline, Op::Append,       EIO, Offline, MAX, (0, 0, 0)),
    (Setup::Offline, Op::Open,         EIO, Offline, MAX, (0, 0, 0)),
    (Setup::Offline, Op::Close,        EIO, Offline, MAX, (0, 0, 0)),
    (Setup::Offline, Op::Finish,       EIO, Offline, MAX, (0, 0, 0)),
    (Setup::Offline, Op::Reset,        EIO, Offline, MAX, (0, 0, 0)),
    (Setup::Offline, Op::Read,         EIO, Offline, MAX, (0, 0, 0)),
];

#[test]
fn every_condition_against_every_operation() {
    assert_eq!(TABLE.len(), 9 * 8);
    for &(setup, op, result, condition, write_pointer, (imp, exp, closed)) in TABLE {
        let set = table_set();
        let start = setup.apply(&set);
        let case = format!("{setup:?} {op:?}");
        assert_eq!(op.apply(&set, start).map_err(errno), result, "{case}");
        let after = zone(&set, start);
        assert_eq!(after.condition, condition, "{case}");
        assert_eq!(after.write_pointer, write_pointer, "{case}");
        assert_eq!(set.active_zones(), counts(imp, exp, closed), "{case}");
        // The other zones are untouched.
        for other in set.report(16 * S, 2) {
            assert_eq!((other.condition, other.write_pointer), (Empty, other.start));
        }
    }
}

#[test]
fn values_match_the_kernel_uapi() {
    use bius_sys::*;
    let types = [
        (ZoneType::Conventional, BLK_ZONE_TYPE_CONVENTIONAL),
        (
            ZoneType::SequentialWriteRequired,
            BLK_ZONE_TYPE_SEQWRITE_REQ,
        ),
        (
            ZoneType::SequentialWritePreferred,
            BLK_ZONE_TYPE_SEQWRITE_PREF,
        ),
    ];
    for (zone_type, value) in types {
        assert_eq!(u32::from(zone_type as u8), value);
        assert_eq!(ZoneType::from_raw(value as u8), Some(zone_type));
    }
    assert_eq!(ZoneType::from_raw(4), None);
    let conditions = [
        (NotWritePointer, BLK_ZONE_COND_NOT_WP),
        (Empty, BLK_ZONE_COND_EMPTY),
        (ImplicitOpen, BLK_ZONE_COND_IMP_OPEN),
        (ExplicitOpen, BLK_ZONE_COND_EXP_OPEN),
        (Closed, BLK_ZONE_COND_CLOSED),
        (ReadOnly, BLK_ZONE_COND_READONLY),
        (Full, BLK_ZONE_COND_FULL),
        (Offline, BLK_ZONE_COND_OFFLINE),
    ];
    for (condition, value) in conditions {
        assert_eq!(u32::from(condition as u8), value);
        assert_eq!(ZoneCondition::from_raw(value as u8), Some(condition));
    }
    assert_eq!(ZoneCondition::from_raw(5), None);
    let kernel_names: Vec<_> = conditions.iter().map(|(c, _)| c.kernel_name()).collect();
    assert_eq!(
        kernel_names,
        ["NOT_WP", "EMPTY", "IMP_OPEN", "EXP_OPEN", "CLOSED", "READONLY", "FULL", "OFFLINE"]
    );
    // One machine name, which Display prints and from_name reads.
    let names: Vec<_> = conditions.iter().map(|(c, _)| c.name()).collect();
    assert_eq!(
        names,
        [
            "not_write_pointer",
            "empty",
            "implicit_open",
            "explicit_open",
            "closed",
            "read_only",
            "full",
            "offline"
        ]
    );
    for (condition, _) in conditions {
        assert_eq!(condition.to_string(), condition.name());
        assert_eq!(ZoneCondition::from_name(condition.name()), Some(condition));
    }
    assert_eq!(ZoneCondition::from_name("READONLY"), None);
    assert_eq!(
        ZoneType::SequentialWriteRequired.to_string(),
        "seq_write_required"
    );
    assert_eq!(
        ZoneType::SequentialWriteRequired.kernel_name(),
        "SEQ_WRITE_REQUIRED"
    );
    let with_write_pointer: Vec<_> = conditions
        .iter()
        .filter(|(c, _)| c.has_write_pointer())
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(
        with_write_pointer,
        [Empty, ImplicitOpen, ExplicitOpen, Closed, Full]
    );
}

#[test]
fn errors_become_the_errnos_of_null_blk() {
    assert_eq!(errno(ZoneError::OpenResource), Errno::ETOOMANYREFS);
    assert_eq!(errno(ZoneError::ActiveResource), Errno::EOVERFLOW);
    assert_eq!(errno(ZoneError::BeyondCapacity), Errno::EIO);
    assert_eq!(errno(ZoneError::Unaligned), Errno::EINVAL);
    assert_eq!(errno(ZoneError::Io(IoError::NoSpace)), Errno::ENOSPC);
    assert_eq!(check_aligned(1024, 512), Ok(()));
    assert_eq!(check_aligned(1024, 100), Err(ZoneError::Unaligned));
    assert_eq!(check_aligned(100, 512), Err(ZoneError::Unaligned));
}

// ---------------------------------------------------------------------
// Geometry, capacity, the runt zone.

#[test]
fn limits_are_normalised_as_null_blk_does() {
    // 8 zones, 2 conventional: 6 sequential.
    let base = ZoneGeometry::new(32 << 10, 4 << 10)
        .unwrap()
        .with_conventional_zones(2)
        .unwrap();
    let limits = |max_open, max_active| {
        let g = base.with_max_open(max_open).with_max_active(max_active);
        (g.max_open(), g.max_active())
    };
    assert_eq!(limits(6, 0), (0, 0));
    assert_eq!(limits(5, 0), (5, 0));
    assert_eq!(limits(0, 6), (0, 0));
    assert_eq!(limits(4, 3), (3, 3));
    assert_eq!(limits(2, 3), (2, 3));
    assert_eq!(limits(0, 3), (0, 3));
    assert_eq!(limits(9, 9), (0, 0));
    assert_eq!(base.max_append(), 4 << 10);
}

#[test]
fn the_last_zone_may_be_a_runt_and_capacity_limits_writes() {
    let set = ZoneSet::new(
        ZoneGeometry::new(10 << 10, 4 << 10)
            .unwrap()
            .with_zone_capacity(3 << 10)
            .unwrap(),
    );
    let zones = set.report(0, usize::MAX);
    let shape: Vec<_> = zones.iter().map(|z| (z.start, z.len, z.capacity)).collect();
    assert_eq!(
        shape,
        [
            (0, 8 * S, 6 * S),
            (8 * S, 8 * S, 6 * S),
            (16 * S, 4 * S, 4 * S)
        ]
    );
    // As on null_blk, a sector past the end in the runt's slot names it.
    assert_eq!(set.report(20 * S, 4).len(), 1);
    assert!(set.report(24 * S, 4).is_empty());
    assert_eq!(set.report(9 * S, 4).len(), 2);

    // Writes stop at the capacity, which fills the zone.
    assert_eq!(set.write(0, 7 * S, ok), Err(ZoneError::BeyondCapacity));
    set.write(0, 6 * S, ok).unwrap();
    assert_eq!(
        (zone(&set, 0).condition, set.active_zones()),
        (Full, counts(0, 0, 0))
    );
    // Past the capacity reads as unwritten until a finish.
    assert_eq!(below_write_pointer(&set, 0, 8 * S), Ok(6 * S));
    set.write(8 * S, 2 * S, ok).unwrap();
    set.finish(8 * S).unwrap();
    assert_eq!(zone(&set, 8 * S).write_pointer, 16 * S);
    assert_eq!(below_write_pointer(&set, 8 * S, 8 * S), Ok(8 * S));
    // The runt finishes at the device end.
    set.finish(16 * S).unwrap();
    assert_eq!(zone(&set, 16 * S).write_pointer, 20 * S);
    assert_eq!(
        set.write(20 * S, S, ok),
        Err(ZoneError::OutOfRange { offset: 20 * S })
    );
    assert_eq!(
        below_write_pointer(&set, 19 * S, 2 * S),
        Err(ZoneError::OutOfRange { offset: 19 * S })
    );
    // Data is whole sectors.
    assert_eq!(set.write(8 * S, 100, ok), Err(ZoneError::Unaligned));
    assert_eq!(set.write(100, S, ok), Err(ZoneError::Unaligned));
    assert_eq!(
        below_write_pointer(&set, 0, S + 1),
        Err(ZoneError::Unaligned)
    );
}

#[test]
fn reads_span_zones_and_writes_do_not() {
    let set = table_set();
    set.write(START, 3 * S, ok).unwrap();
    let mut spans = Vec::new();
    set.read(4 * S, 16 * S, |span| {
        spans.push(span);
        Ok(())
    })
    .unwrap();
    let span = |sector, sectors, written| ReadSpan {
        offset: sector * S,
        len: sectors * S,
        written: written * S,
        skipped: 0,
    };
    assert_eq!(spans, [span(4, 4, 4), span(8, 8, 3), span(16, 4, 0)]);
    assert_eq!(
        set.write(4 * S, 8 * S, ok),
        Err(ZoneError::CrossesZoneBoundary)
    );
    assert_eq!(
        set.write(START + 3 * S, 8 * S, ok),
        Err(ZoneError::BeyondCapacity)
    );
}

#[test]
fn appends_must_name_a_zone_start_and_fit() {
    let set = ZoneSet::new(
        ZoneGeometry::new(16 << 10, 4 << 10)
            .unwrap()
            .with_max_append(2 << 10)
            .unwrap(),
    );
    assert_eq!(set.append(S, S, ok), Err(ZoneError::NotZoneStart));
    assert_eq!(
        set.append(8 * S, 5 * S, ok),
        Err(ZoneError::AppendTooLarge { max: 4 * S })
    );
    assert_eq!(set.append(8 * S, 4 * S, ok), Ok(8 * S));
    assert_eq!(set.append(8 * S, 4 * S, ok), Ok(12 * S));
    assert_eq!(zone(&set, 8 * S).condition, Full);
    assert_eq!(set.append(8 * S, S, ok).map_err(errno), Err(Errno::EIO));
    assert_eq!(set.append(8 * S, 100, ok), Err(ZoneError::Unaligned));
}

// ---------------------------------------------------------------------
// Data closures, discards and injected faults.

#[test]
fn the_write_pointer_moves_only_after_the_data_is_stored() {
    let set = table_set();
    let failed = set.write(START, 2 * S, |_, _| Err(IoError::NoSpace));
    assert_eq!(failed, Err(ZoneError::Io(IoError::NoSpace)));
    // As on null_blk the zone was opened before the data transfer.
    let after = zone(&set, START);
    assert_eq!(
        (after.condition, after.write_pointer),
        (ImplicitOpen, START)
    );
    let mut seen = None;
    assert_eq!(
        set.append(START, 2 * S, |offset, len| {
            seen = Some((offset, len));
            Ok(())
        }),
        Ok(START)
    );
    assert_eq!(seen, Some((START, 2 * S)));
}

#[test]
fn resets_discard_written_zones_only() {
    let set = table_set();
    let discarded = Mutex::new(Vec::new());
    let discard = |start, len| {
        discarded.lock().unwrap().push((start, len));
        Ok(())
    };
    set.reset(START, discard).unwrap();
    assert!(discarded.lock().unwrap().is_empty());
    set.write(START, S, ok).unwrap();
    set.finish(24 * S).unwrap();
    set.set_read_only(16 * S, ok).unwrap();
    set.reset_all(discard).unwrap();
    assert_eq!(
        *discarded.lock().unwrap(),
        [(8 * S, 8 * S), (24 * S, 8 * S)]
    );
    assert_eq!(zone(&set, 16 * S).condition, ReadOnly);
    // A failing discard still leaves the zone reset, and reset_all goes on.
    set.write(START, S, ok).unwrap();
    set.write(24 * S, S, ok).unwrap();
    assert_eq!(
        set.reset_all(|_, _| Err(IoError::Io)),
        Err(ZoneError::Io(IoError::Io))
    );
    assert_eq!(set.active_zones(), counts(0, 0, 0));
    assert_eq!(zone(&set, 24 * S).condition, Empty);
}

#[test]
fn read_only_and_offline_toggle_back_to_empty() {
    let set = ZoneSet::new(table_set().geometry().to_owned().with_max_open(1));
    set.write(START, 2 * S, ok).unwrap();
    set.set_read_only(START, ok).unwrap();
    // Its open resource is back.
    assert_eq!(set.active_zones(), counts(0, 0, 0));
    set.open(16 * S).unwrap();
    assert_eq!(below_write_pointer(&set, START, 8 * S), Ok(8 * S));
    set.set_offline(START, ok).unwrap();
    assert_eq!(
        below_write_pointer(&set, START, 8 * S).map_err(errno),
        Err(Errno::EIO)
    );
    let mut discarded = None;
    set.set_offline(START, |start, len| {
        discarded = Some((start, len));
        Ok(())
    })
    .unwrap();
    assert_eq!(discarded, Some((START, 8 * S)));
    let after = zone(&set, START);
    assert_eq!((after.condition, after.write_pointer), (Empty, START));
    assert_eq!(set.set_read_only(0, ok), Err(ZoneError::ConventionalZone));
}

#[test]
fn an_injected_write_error_stores_up_to_the_bad_sector() {
    let set = table_set();
    let bad = START + 3 * S;
    set.inject_write_error(bad).unwrap();
    let mut stored = Vec::new();
    let mut store = |offset, len| {
        stored.push((offset, len));
        Ok(())
    };
    assert_eq!(
        set.write(START, 5 * S, &mut store),
        Err(ZoneError::InjectedFault { offset: bad })
    );
    assert_eq!(zone(&set, START).write_pointer, bad);
    // At the bad sector nothing is stored.
    assert_eq!(
        set.append(START, S, &mut store).map_err(errno),
        Err(Errno::EIO)
    );
    assert_eq!(zone(&set, START).write_pointer, bad);
    assert!(set.clear_write_error(bad));
    assert!(!set.clear_write_error(bad));
    assert_eq!(set.append(START, S, &mut store), Ok(bad));
    // Conventional zones too.
    set.inject_write_error(2 * S).unwrap();
    assert_eq!(
        set.write(0, 4 * S, &mut store).map_err(errno),
        Err(Errno::EIO)
    );
    assert_eq!(stored, [(START, 3 * S), (bad, S), (0, 2 * S)]);
    assert_eq!(
        set.inject_write_error(32 * S),
        Err(ZoneError::OutOfRange { offset: 32 * S })
    );
    // A fault is a whole sector.
    assert_eq!(set.inject_write_error(S + 1), Err(ZoneError::Unaligned));
}

// ---------------------------------------------------------------------
// Resource limits.

/// Six sequential zones of 8 sectors.
fn limited(max_open: u32, max_active: u32) -> ZoneSet {
    ZoneSet::new(
        ZoneGeometry::new(24 << 10, 4 << 10)
            .unwrap()
            .with_max_open(max_open)
            .with_max_active(max_active),
    )
}

fn conditions(set: &ZoneSet) -> Vec<ZoneCondition> {
    set.report(0, usize::MAX)
        .iter()
        .map(|z| z.condition)
        .collect()
}

fn write_at_wp(set: &ZoneSet, zone_no: u64) -> Result<(), Errno> {
    let wp = zone(set, zone_no * 8 * S).write_pointer;
    set.write(wp, S, ok).map_err(errno)
}

#[test]
fn at_max_open_implicitly_open_zones_are_closed_round_robin() {
    let set = limited(2, 0);
    write_at_wp(&set, 0).unwrap();
    write_at_wp(&set, 1).unwrap();
    write_at_wp(&set, 2).unwrap();
    assert_eq!(conditions(&set)[..3], [Closed, ImplicitOpen, ImplicitOpen]);
    write_at_wp(&set, 3).unwrap();
    assert_eq!(
        conditions(&set)[..4],
        [Closed, Closed, ImplicitOpen, ImplicitOpen]
    );
    // A closed zone reopening closes the next one in turn.
    write_at_wp(&set, 0).unwrap();
    assert_eq!(
        conditions(&set)[..4],
        [ImplicitOpen, Closed, Closed, ImplicitOpen]
    );
    assert_eq!(set.active_zones(), counts(2, 0, 2));
    // So does an explicit open, and an open zone needs no resource.
    set.open(8 * S).unwrap();
    assert_eq!(
        conditions(&set)[..4],
        [ImplicitOpen, ExplicitOpen, Closed, Closed]
    );
    set.open(0).unwrap();
    assert_eq!(set.active_zones(), counts(0, 2, 2));
}

#[test]
fn explicitly_open_zones_are_never_closed_implicitly() {
    let set = limited(2, 0);
    set.open(0).unwrap();
    write_at_wp(&set, 1).unwrap();
    write_at_wp(&set, 2).unwrap();
    assert_eq!(conditions(&set)[..3], [ExplicitOpen, Closed, ImplicitOpen]);
    set.open(24 * S).unwrap();
    assert_eq!(
        conditions(&set)[..4],
        [ExplicitOpen, Closed, Closed, ExplicitOpen]
    );
    assert_eq!(write_at_wp(&set, 4), Err(Errno::ETOOMANYREFS));
    assert_eq!(set.open(32 * S).map_err(errno), Err(Errno::ETOOMANYREFS));
    assert_eq!(set.finish(32 * S).map_err(errno), Err(Errno::ETOOMANYREFS));
    // Closing one frees a resource.
    set.close(0).unwrap();
    write_at_wp(&set, 4).unwrap();
    assert_eq!(set.active_zones(), counts(1, 1, 2));
}

#[test]
fn max_active_counts_closed_zones() {
    let set = limited(0, 3);
    for zone_no in 0..3 {
        write_at_wp(&set, zone_no).unwrap();
        set.close(zone_no * 8 * S).unwrap();
    }
    assert_eq!(set.active_zones(), counts(0, 0, 3));
    assert_eq!(write_at_wp(&set, 3), Err(Errno::EOVERFLOW));
    assert_eq!(set.open(24 * S).map_err(errno), Err(Errno::EOVERFLOW));
    assert_eq!(set.finish(24 * S).map_err(errno), Err(Errno::EOVERFLOW));
    // A closed zone reopens without a new active resource.
    write_at_wp(&set, 0).unwrap();
    set.open(8 * S).unwrap();
    // Finishing or resetting one gives it back.
    set.finish(8 * S).unwrap();
    write_at_wp(&set, 3).unwrap();
    assert_eq!(set.active_zones(), counts(2, 0, 1));
}

#[test]
fn at_max_active_the_open_limit_fails_instead_of_closing() {
    let set = limited(2, 3);
    write_at_wp(&set, 0).unwrap();
    write_at_wp(&set, 1).unwrap();
    // Zone 0 is closed to open zone 2: 3 active.
    write_at_wp(&set, 2).unwrap();
    assert_eq!(set.active_zones(), counts(2, 0, 1));
    // Empty zones need an active resource first ...
    assert_eq!(write_at_wp(&set, 3), Err(Errno::EOVERFLOW));
    // ... and closed ones cannot steal an open one at max active.
    assert_eq!(write_at_wp(&set, 0), Err(Errno::ETOOMANYREFS));
    assert_eq!(set.open(0).map_err(errno), Err(Errno::ETOOMANYREFS));
    assert_eq!(conditions(&set)[..3], [Closed, ImplicitOpen, ImplicitOpen]);
    // Resetting a zone gives back both of its resources.
    set.reset(8 * S, ok).unwrap();
    write_at_wp(&set, 3).unwrap();
    assert_eq!(set.active_zones(), counts(2, 0, 1));
}

#[test]
fn closing_an_unwritten_open_zone_empties_it() {
    let set = limited(1, 0);
    set.append(0, 0, ok).unwrap();
    assert_eq!(conditions(&set)[0], ImplicitOpen);
    // Closed implicitly with nothing written: empty, not closed.
    write_at_wp(&set, 1).unwrap();
    assert_eq!(conditions(&set)[..2], [Empty, ImplicitOpen]);
    assert_eq!(set.active_zones(), counts(1, 0, 0));
}

// ---------------------------------------------------------------------
// Concurrency.

#[test]
fn concurrent_appends_to_one_zone_land_contiguously() {
    let set = ZoneSet::new(ZoneGeometry::new(2 << 20, 2 << 20).unwrap());
    let in_flight = AtomicBool::new(false);
    let landed = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (set, in_flight, landed) = (&set, &in_flight, &landed);
            s.spawn(move || {
                for _ in 0..64 {
                    let len = (1 + t % 4) * S;
                    let at = set
                        .append(0, len, |at, n| {
                            assert!(!in_flight.swap(true, Ordering::SeqCst));
                            std::thread::yield_now();
                            in_flight.store(false, Ordering::SeqCst);
                            assert_eq!(n, len);
                            landed.lock().unwrap().push((at, n));
                            Ok(())
                        })
                        .unwrap();
                    assert!(landed.lock().unwrap().contains(&(at, len)));
                }
            });
        }
    });
    let mut landed = landed.into_inner().unwrap();
    landed.sort_unstable();
    let mut next = 0;
    for (at, len) in &landed {
        assert_eq!(*at, next);
        next += len;
    }
    assert_eq!(next, 64 * (1 + 2 + 3 + 4) * 2 * S);
    assert_eq!(zone(&set, 0).write_pointer, next);
}

#[test]
fn concurrent_writers_under_limits_keep_the_counters_right() {
    let set = limited(2, 4);
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let set = &set;
            s.spawn(move || {
                for i in 0..200u64 {
                    let zone_start = ((t + i) % 6) * 8 * S;
                    let _ = set.append(zone_start, S, ok);
                    if i % 7 == 0 {
                        let _ = set.close(zone_start);
                    }
                    if i % 11 == 0 {
                        let _ = set.reset(zone_start, ok);
                    }
                }
            });
        }
    });
    let report = set.report(0, usize::MAX);
    let number = |c| report.iter().filter(|z| z.condition == c).count() as u32;
    let expected = counts(number(ImplicitOpen), number(ExplicitOpen), number(Closed));
    assert_eq!(set.active_zones(), expected);
    assert!(expected.open() <= 2 && expected.active() <= 4);
}
