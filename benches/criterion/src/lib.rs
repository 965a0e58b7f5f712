//! Benchmarks of BIUS; see `benches/` (criterion: `cargo bench -p bius-benches`)
//! and `vm/` (the VM benchmark run by `scripts/bench.sh`).
//!
//! The library part holds helpers shared by the criterion benches, and
//! [`accuracy`]: the device models against measurements of real drives.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod accuracy;

/// Sizes of the transfers measured: 4 KiB and 256 KiB.
pub const SIZES: [usize; 2] = [4 << 10, 256 << 10];

/// A human name for a transfer size ("4KiB", "256KiB").
pub fn size_name(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}MiB", bytes >> 20)
    } else {
        format!("{}KiB", bytes >> 10)
    }
}
