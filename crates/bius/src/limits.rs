//! The limits of a device's parameters: what [`DeviceBuilder`] accepts and
//! what its [`Parameter`] errors say, written once.
//!
//! The kernel checks the same limits when it creates a device; those of
//! its ABI come from `bius.h` (through `bius-sys`), the one definition of
//! that ABI.  The block sizes and the zone size, which `bius.h` does not
//! name, are those the driver checks.
//!
//! ```
//! use std::time::Duration;
//!
//! use bius::limits;
//!
//! // as long as a device may wait for its daemon
//! let timeout = Duration::from_secs(120).min(limits::MAX_RECOVER_TIMEOUT);
//! assert_eq!(timeout, Duration::from_secs(90));
//! assert_eq!(limits::MAX_QUEUES, 64);
//! ```
//!
//! [`DeviceBuilder`]: crate::DeviceBuilder
//! [`Parameter`]: crate::Parameter

use std::time::Duration;

/// The most hardware queues of a device (`BIUS_MAX_HW_QUEUES`), the poll
/// queues among them.
pub const MAX_QUEUES: u32 = bius_sys::BIUS_MAX_HW_QUEUES;

/// The most requests in flight per queue (`BIUS_MAX_QUEUE_DEPTH`).
pub const MAX_QUEUE_DEPTH: u32 = bius_sys::BIUS_MAX_QUEUE_DEPTH;

/// The largest limit of a device's largest read or write, in bytes
/// (`BIUS_MAX_IO_BYTES`); the smallest is the memory page size.
pub const MAX_IO_SIZE: u32 = bius_sys::BIUS_MAX_IO_BYTES;

/// The largest device, in bytes (`BIUS_MAX_SIZE`, 4 EiB).
pub const MAX_SIZE: u64 = bius_sys::BIUS_MAX_SIZE;

/// The smallest logical block size, in bytes; block sizes are powers of
/// two.
pub const MIN_BLOCK_SIZE: u32 = 512;

/// The largest logical block size, in bytes.
pub const MAX_LOGICAL_BLOCK_SIZE: u32 = 4096;

/// The largest physical block size, in bytes (at least the logical one).
pub const MAX_PHYSICAL_BLOCK_SIZE: u32 = 64 << 10;

/// The longest request timeout (`BIUS_MAX_TIMEOUT_MS`), in whole
/// milliseconds from 1 ms.
pub const MAX_TIMEOUT: Duration = Duration::from_millis(bius_sys::BIUS_MAX_TIMEOUT_MS as u64);

/// The longest recovery timeout (`BIUS_MAX_RECOVER_TIMEOUT_MS`), in whole
/// milliseconds from 1 ms.
pub const MAX_RECOVER_TIMEOUT: Duration =
    Duration::from_millis(bius_sys::BIUS_MAX_RECOVER_TIMEOUT_MS as u64);

/// The longest busy-wait for a request (`BIUS_MAX_POLL_USECS`), in whole
/// microseconds.
pub const MAX_POLL_TIME: Duration = Duration::from_micros(bius_sys::BIUS_MAX_POLL_USECS as u64);

/// The longest disk name, in bytes of `[A-Za-z0-9_-]` (`BIUS_NAME_LEN`
/// less its terminating NUL).
pub const MAX_NAME_LEN: usize = bius_sys::BIUS_NAME_LEN as usize - 1;

/// The most zones of a device (`BIUS_MAX_ZONES`).
pub const MAX_ZONES: u32 = bius_sys::BIUS_MAX_ZONES;

/// The largest zone, in bytes: zones are powers of two whose sectors fit
/// in 32 bits, so 1 TiB.
pub const MAX_ZONE_SIZE: u64 = 1 << 40;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_zone_is_the_largest_power_of_two_of_32_bit_sectors() {
        let sectors = MAX_ZONE_SIZE / 512;
        assert!(sectors.is_power_of_two());
        assert!(sectors <= u64::from(u32::MAX) && 2 * sectors > u64::from(u32::MAX));
    }
}
