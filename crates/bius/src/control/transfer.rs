//! How request data crosses between the kernel and the workers:
//! [`TransferMode`], as the builder asks for it and the kernel reports it.

use std::fmt;

/// How the data of reads and writes crosses between the kernel and the
/// workers.  Backends see no difference: they get the same `&[u8]` and
/// `&mut [u8]`, which in the map modes are the I/O buffers' own pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum TransferMode {
    /// The data is copied through the request and completion streams.
    #[default]
    Copy,
    /// The kernel maps the I/O buffers' pages into each queue's data
    /// window (zero copy), falling back to copying for a request whose
    /// buffer is too fragmented.
    Map,
    /// Requests of at least `threshold` bytes are mapped, smaller ones
    /// copied.
    Selective {
        /// In bytes, at most the largest I/O; 0 is the kernel's default,
        /// [`TransferMode::DEFAULT_THRESHOLD`] (or the largest I/O if
        /// smaller).
        threshold: u32,
    },
}

impl TransferMode {
    /// The default threshold of [`TransferMode::Selective`]: 128 KiB.
    pub const DEFAULT_THRESHOLD: u32 = bius_sys::BIUS_DEFAULT_MAP_THRESHOLD;

    /// The `BIUS_TRANSFER_*` value and `map_threshold` of this mode on a
    /// device whose largest I/O is `max_io`, the default threshold filled
    /// in as the kernel fills it.
    pub(crate) fn to_raw(self, max_io: u32) -> (u32, u32) {
        match self {
            TransferMode::Copy => (bius_sys::BIUS_TRANSFER_COPY, 0),
            TransferMode::Map => (bius_sys::BIUS_TRANSFER_MAP, 0),
            TransferMode::Selective { threshold: 0 } => (
                bius_sys::BIUS_TRANSFER_SELECTIVE,
                TransferMode::DEFAULT_THRESHOLD.min(max_io),
            ),
            TransferMode::Selective { threshold } => (bius_sys::BIUS_TRANSFER_SELECTIVE, threshold),
        }
    }

    /// The mode of a `BIUS_TRANSFER_*` value; `None` for an unknown one.
    pub(crate) fn from_raw(mode: u32, threshold: u32) -> Option<Self> {
        match mode {
            bius_sys::BIUS_TRANSFER_COPY => Some(TransferMode::Copy),
            bius_sys::BIUS_TRANSFER_MAP => Some(TransferMode::Map),
            bius_sys::BIUS_TRANSFER_SELECTIVE => Some(TransferMode::Selective { threshold }),
            _ => None,
        }
    }

    /// Whether the queues need a data window.
    pub(crate) fn maps(self) -> bool {
        self != TransferMode::Copy
    }
}

impl fmt::Display for TransferMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransferMode::Copy => f.write_str("copy"),
            TransferMode::Map => f.write_str("map"),
            TransferMode::Selective { threshold } => write!(f, "selective={threshold}"),
        }
    }
}
