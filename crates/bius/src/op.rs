//! [`Op`]: the kind of a request, decoded once from the kernel's
//! `bius_request.op` and named the same everywhere after (commands,
//! requests, statistics, traces, the loopback).

use std::fmt;

/// The kind of a request, without its offsets, lengths or data.
///
/// The kernel sends each request with a `BIUS_OP_*` code, which the worker
/// decodes once ([`Op::from_raw`]); a request of a code this version does
/// not know fails there with `EOPNOTSUPP` and reaches no device.  The
/// discriminants are the codes of the binary trace format ([`Op::trace_code`]),
/// which differ from the kernel's for the last three operations.
///
/// ```
/// use bius::Op;
///
/// let op = Op::from_raw(bius_sys::BIUS_OP_ZONE_APPEND as u8).unwrap();
/// assert_eq!(op, Op::ZoneAppend);
/// assert_eq!(op.name(), "zone_append");
/// assert!(op.is_zone() && op.has_payload());
/// assert_eq!(Op::from_raw(op.raw()), Some(op));
/// assert_eq!(Op::ALL.len(), 12);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[repr(u8)]
pub enum Op {
    /// Read.
    Read = 0,
    /// Write.
    Write = 1,
    /// Cache flush.
    Flush = 2,
    /// Discard (trim).
    Discard = 3,
    /// Write zeroes.
    WriteZeroes = 4,
    /// Zone report (the kernel's own, and `BLKREPORTZONE`).
    ReportZones = 5,
    /// Explicit zone open.
    ZoneOpen = 6,
    /// Zone close.
    ZoneClose = 7,
    /// Zone finish.
    ZoneFinish = 8,
    /// Zone reset.
    ZoneReset = 9,
    /// Reset of every zone.
    ZoneResetAll = 10,
    /// Zone append.
    ZoneAppend = 11,
}

impl Op {
    /// Every operation, in trace code order.
    pub const ALL: [Op; 12] = [
        Op::Read,
        Op::Write,
        Op::Flush,
        Op::Discard,
        Op::WriteZeroes,
        Op::ReportZones,
        Op::ZoneOpen,
        Op::ZoneClose,
        Op::ZoneFinish,
        Op::ZoneReset,
        Op::ZoneResetAll,
        Op::ZoneAppend,
    ];

    /// The name in statistics, traces and logs (`read`, `zone_append`,
    /// ...), as the driver's tracepoints name it too.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
            Op::WriteZeroes => "write_zeroes",
            Op::ReportZones => "report_zones",
            Op::ZoneOpen => "zone_open",
            Op::ZoneClose => "zone_close",
            Op::ZoneFinish => "zone_finish",
            Op::ZoneReset => "zone_reset",
            Op::ZoneResetAll => "zone_reset_all",
            Op::ZoneAppend => "zone_append",
        }
    }

    /// The operation of a request header's `BIUS_OP_*` code; `None` for a
    /// code this version does not know.
    pub fn from_raw(raw: u8) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.raw() == raw)
    }

    /// The kernel's `BIUS_OP_*` code of this operation.
    pub fn raw(self) -> u8 {
        use bius_sys::*;
        let raw = match self {
            Op::Read => BIUS_OP_READ,
            Op::Write => BIUS_OP_WRITE,
            Op::Flush => BIUS_OP_FLUSH,
            Op::Discard => BIUS_OP_DISCARD,
            Op::WriteZeroes => BIUS_OP_WRITE_ZEROES,
            Op::ReportZones => BIUS_OP_REPORT_ZONES,
            Op::ZoneOpen => BIUS_OP_ZONE_OPEN,
            Op::ZoneClose => BIUS_OP_ZONE_CLOSE,
            Op::ZoneFinish => BIUS_OP_ZONE_FINISH,
            Op::ZoneReset => BIUS_OP_ZONE_RESET,
            Op::ZoneResetAll => BIUS_OP_ZONE_RESET_ALL,
            Op::ZoneAppend => BIUS_OP_ZONE_APPEND,
        };
        raw as u8
    }

    /// The operation's code in a binary trace
    /// ([`TraceRecord`](crate::stats::TraceRecord)).
    pub fn trace_code(self) -> u8 {
        self as u8
    }

    /// The operation of a binary trace's op code.
    pub fn from_trace_code(code: u8) -> Option<Op> {
        Op::ALL.get(usize::from(code)).copied()
    }

    /// Whether the request carries data to the device: a write or a zone
    /// append.
    pub fn has_payload(self) -> bool {
        matches!(self, Op::Write | Op::ZoneAppend)
    }

    /// Whether the request moves data: a read, a write or a zone append.
    pub fn has_data(self) -> bool {
        self == Op::Read || self.has_payload()
    }

    /// Whether this is a zone operation: a report, a management operation
    /// or an append.
    pub fn is_zone(self) -> bool {
        self >= Op::ReportZones
    }
}

/// The [name](Op::name).
impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_round_trip() {
        for (code, op) in Op::ALL.iter().enumerate() {
            assert_eq!(Op::from_trace_code(code as u8), Some(*op));
            assert_eq!(op.trace_code() as usize, code);
            assert_eq!(Op::from_raw(op.raw()), Some(*op));
        }
        assert_eq!(Op::from_trace_code(12), None);
        assert_eq!(Op::from_raw(200), None);
        assert_eq!(Op::ZoneResetAll.name(), "zone_reset_all");
        assert_eq!(Op::ZoneAppend.raw(), bius_sys::BIUS_OP_ZONE_APPEND as u8);
        assert_eq!(Op::ZoneAppend.trace_code(), 11);
        let zone: Vec<Op> = Op::ALL.into_iter().filter(|op| op.is_zone()).collect();
        assert_eq!(zone.len(), 7);
        assert!(!zone.contains(&Op::Discard));
    }
}
