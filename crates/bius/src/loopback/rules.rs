//! [`NotSent`]: the rules of what the kernel sends a device, the one place
//! the loopback learns them from, and why a request breaks one.
//!
//! The driver sets its disk's limits from the device's parameters
//! (`bius_dev_limits()` in `driver/bius_dev.c`, `bius_zoned_limits()` in
//! `driver/bius_zoned.c`), and the block layer splits, strips or refuses
//! whatever does not fit them before a request reaches the driver.  So a
//! device never sees a request that breaks one of these rules, and the
//! loopback, which stands in for both, refuses it
//! ([`SubmitError::NotSent`](super::SubmitError::NotSent)) rather than let
//! a device test pass on behaviour the kernel never exercises.

use std::fmt;

use bius_sys::bius_device_params;

use crate::op::Op;
use crate::request::Command;

use super::SubmitError;

/// What the kernel sends a device of these parameters: its limits, as
/// the driver gives them to the block layer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rules {
    size: u64,
    block: u64,
    max_io: u64,
    write_cache: bool,
    fua: bool,
    discard: bool,
    write_zeroes: bool,
    read_only: bool,
    /// Zoned: the zone size, and the largest append (0: the kernel
    /// emulates appends).
    zoned: Option<(u64, u64)>,
}

impl Rules {
    /// The rules of a device created with `params` (as the kernel receives
    /// them, defaults not applied).
    pub(super) fn new(params: &bius_device_params) -> Self {
        use bius_sys::*;
        let has = |feature: u32| params.features & u64::from(feature) != 0;
        let max_io = match params.max_io_bytes {
            0 => BIUS_DEFAULT_MAX_IO_BYTES,
            bytes => bytes,
        };
        let zoned = has(BIUS_FEATURE_ZONED).then(|| {
            let zone_size = params.zoned.zone_size;
            let max_append = match params.zoned.max_append_bytes {
                _ if has(BIUS_FEATURE_ZONE_APPEND_EMULATED) => 0,
                0 => u64::from(max_io).min(zone_size),
                bytes => u64::from(bytes),
            };
            (zone_size, max_append)
        });
        Rules {
            size: params.size,
            block: u64::from(params.logical_block_size),
            max_io: u64::from(max_io),
            write_cache: has(BIUS_FEATURE_WRITE_CACHE),
            fua: has(BIUS_FEATURE_WRITE_CACHE) && has(BIUS_FEATURE_FUA),
            discard: has(BIUS_FEATURE_DISCARD),
            write_zeroes: has(BIUS_FEATURE_WRITE_ZEROES),
            read_only: has(BIUS_FEATURE_READ_ONLY),
            zoned,
        }
    }

    /// `command` if the kernel can send it, else the loopback's refusal
    /// of it.
    pub(super) fn admit(&self, command: &Command) -> Result<(), SubmitError> {
        self.check(command).map_err(|why| SubmitError::NotSent {
            op: command.op(),
            why,
        })
    }

    /// Whether the kernel can send `command`, and if not, why.
    pub(super) fn check(&self, command: &Command) -> Result<(), NotSent> {
        let op = command.op();
        if self.read_only && op != Op::Read && op != Op::ReportZones && op != Op::Flush {
            return Err(NotSent::ReadOnly);
        }
        if op.is_zone() && self.zoned.is_none() {
            return Err(NotSent::NotZoned);
        }
        match *command {
            Command::Read { offset, len } => self.data(offset, len),
            Command::Write { offset, len, fua } => {
                self.data(offset, len)?;
                self.fua(fua)
            }
            Command::Flush if !self.write_cache => Err(NotSent::Needs("a write cache")),
            Command::Flush => Ok(()),
            Command::Discard { .. } if !self.discard => Err(NotSent::Needs("discard")),
            Command::WriteZeroes { .. } if !self.write_zeroes => {
                Err(NotSent::Needs("write zeroes"))
            }
            Command::Discard { offset, len } | Command::WriteZeroes { offset, len, .. } => {
                self.range(offset, len)
            }
            Command::ReportZones { offset, .. } => self.position(offset),
            Command::ZoneOpen { offset }
            | Command::ZoneClose { offset }
            | Command::ZoneFinish { offset }
            | Command::ZoneReset { offset } => self.zone_start(offset),
            Command::ZoneResetAll => Ok(()),
            Command::ZoneAppend { offset, len, fua } => {
                let max = self.zoned.map_or(0, |(_, max)| max);
                if max == 0 {
                    return Err(NotSent::AppendEmulated);
                }
                self.range(offset, len)?;
                self.zone_start(offset)?;
                if len > max {
                    return Err(NotSent::TooLarge { max });
                }
                self.fua(fua)
            }
        }
    }

    /// A read or write: a whole number of blocks in range, at most the
    /// largest I/O, within one zone.
    fn data(&self, offset: u64, len: u64) -> Result<(), NotSent> {
        self.range(offset, len)?;
        if len > self.max_io {
            return Err(NotSent::TooLarge { max: self.max_io });
        }
        if let Some((zone_size, _)) = self.zoned {
            if offset / zone_size != (offset + len - 1) / zone_size {
                return Err(NotSent::CrossesZone { zone_size });
            }
        }
        Ok(())
    }

    /// `len` bytes at `offset`: whole blocks, not none, inside the disk.
    fn range(&self, offset: u64, len: u64) -> Result<(), NotSent> {
        if !(offset | len).is_multiple_of(self.block) {
            return Err(NotSent::Unaligned { block: self.block });
        }
        if len == 0 {
            return Err(NotSent::Empty);
        }
        if offset.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(NotSent::PastEnd { size: self.size });
        }
        Ok(())
    }

    /// A position (a zone operation's, a report's start): a whole number
    /// of blocks, inside the disk.
    fn position(&self, offset: u64) -> Result<(), NotSent> {
        if !offset.is_multiple_of(self.block) {
            return Err(NotSent::Unaligned { block: self.block });
        }
        if offset >= self.size {
            return Err(NotSent::PastEnd { size: self.size });
        }
        Ok(())
    }

    /// A position at the start of a zone.
    fn zone_start(&self, offset: u64) -> Result<(), NotSent> {
        self.position(offset)?;
        match self.zoned {
            Some((zone_size, _)) if !offset.is_multiple_of(zone_size) => {
                Err(NotSent::NotZoneStart { zone_size })
            }
            _ => Ok(()),
        }
    }

    /// A FUA flag only where the device honours it.
    fn fua(&self, fua: bool) -> Result<(), NotSent> {
        if fua && !self.fua {
            return Err(NotSent::Needs("forced unit access (and a write cache)"));
        }
        Ok(())
    }
}

/// Why the kernel never sends a request: the rule it breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotSent {
    /// A read, write, discard, write-zeroes or zone append of no bytes
    /// (the block layer completes an empty bio itself).
    Empty,
    /// An offset or a length that is not a whole number of logical blocks.
    Unaligned {
        /// The logical block size, in bytes.
        block: u64,
    },
    /// A range that goes past the end of the disk, or a position past it.
    PastEnd {
        /// The disk's size, in bytes.
        size: u64,
    },
    /// A read or write larger than the device's largest I/O
    /// ([`DeviceBuilder::max_io_size`](crate::DeviceBuilder::max_io_size),
    /// the disk's `max_hw_sectors`), or a zone append larger than its
    /// largest append: the block layer splits a larger read or write into
    /// several requests, and fails a larger append.  Submit the parts.
    TooLarge {
        /// The largest, in bytes.
        max: u64,
    },
    /// A read or write across a zone boundary of a zoned disk (the block
    /// layer splits at each zone, its `chunk_sectors`).
    CrossesZone {
        /// The zone size, in bytes.
        zone_size: u64,
    },
    /// An operation the device's capabilities do not offer: flushes
    /// without a write cache (the block layer completes them itself), FUA
    /// without FUA or without a write cache (it strips the flag), discard
    /// and write zeroes without them (it fails them: `EOPNOTSUPP`).
    Needs(&'static str),
    /// A change to a read-only disk.
    ReadOnly,
    /// A zone operation on a disk that is not zoned.
    NotZoned,
    /// A zone operation or append that does not name the start of a zone.
    NotZoneStart {
        /// The zone size, in bytes.
        zone_size: u64,
    },
    /// A zone append on a disk whose zone appends the kernel emulates: it
    /// sends writes at the write pointer instead.
    AppendEmulated,
}

impl fmt::Display for NotSent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotSent::Empty => f.write_str("it moves no bytes"),
            NotSent::Unaligned { block } => {
                write!(f, "its offset or length is not a multiple of the {block}-byte logical block")
            }
            NotSent::PastEnd { size } => write!(f, "it goes past the end of the {size}-byte disk"),
            NotSent::TooLarge { max } => write!(
                f,
                "it is larger than {max} bytes, the largest the kernel sends (it splits a larger read or write)"
            ),
            NotSent::CrossesZone { zone_size } => write!(
                f,
                "it crosses a zone boundary (the kernel splits at each {zone_size}-byte zone)"
            ),
            NotSent::Needs(what) => write!(f, "the device does not offer {what}"),
            NotSent::ReadOnly => f.write_str("the disk is read-only"),
            NotSent::NotZoned => f.write_str("the disk is not zoned"),
            NotSent::NotZoneStart { zone_size } => {
                write!(f, "it does not name the start of a {zone_size}-byte zone")
            }
            NotSent::AppendEmulated => f.write_str(
                "the kernel emulates zone append on this disk (it sends writes at the write pointer)",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Capabilities;
    use crate::control::builder::DeviceBuilder;
    use crate::zone::ZoneGeometry;

    const MIB: u64 = 1 << 20;

    fn rules(builder: DeviceBuilder, caps: Capabilities, zones: Option<ZoneGeometry>) -> Rules {
        let (params, _) = builder.device_params(caps, zones).unwrap();
        Rules::new(&params)
    }

    /// Each rule of the driver's limits (`bius_dev_limits()`,
    /// `bius_zoned_limits()`) and the block layer's handling of them,
    /// row by row: the device, the request, and whether the kernel sends
    /// it.
    #[test]
    fn the_loopback_sends_what_the_kernel_sends() {
        let plain = Capabilities::default();
        let all = Capabilities {
            write_cache: true,
            fua: true,
            discard: true,
            write_zeroes: true,
            ..plain
        };
        let cache_no_fua = Capabilities {
            write_cache: true,
            ..plain
        };
        let fua_no_cache = Capabilities { fua: true, ..plain };
        let ro = Capabilities {
            read_only: true,
            ..all
        };
        let disk = || DeviceBuilder::new(16 * MIB);
        let disk4k = || disk().logical_block_size(4096);
        let conv = |caps| rules(disk(), caps, None);
        let geometry = ZoneGeometry::new(16 * MIB, MIB)
            .and_then(|g| g.with_max_append(64 << 10))
            .unwrap();
        // as `Zoned` declares them: no discard, no write zeroes
        let zoned = rules(DeviceBuilder::default(), all.zoned(), Some(geometry));
        let zoned_discard = rules(DeviceBuilder::default(), all, Some(geometry));
        let emulated = rules(
            DeviceBuilder::default().emulate_zone_append(true),
            all,
            Some(ZoneGeometry::new(16 * MIB, MIB).unwrap()),
        );
        let read = |offset, len| Command::Read { offset, len };
        let write = |offset, len, fua| Command::Write { offset, len, fua };
        let append = |offset, len| Command::ZoneAppend {
            offset,
            len,
            fua: false,
        };
        use NotSent::*;
        let rows: Vec<(&str, Rules, Command, Result<(), NotSent>)> = vec![
            ("a read", conv(plain), read(0, 4096), Ok(())),
            ("a 0-byte read", conv(plain), read(0, 0), Err(Empty)),
            (
                "a 100-byte write",
                conv(plain),
                write(0, 100, false),
                Err(Unaligned { block: 512 }),
            ),
            (
                "a write at byte 100",
                conv(plain),
                write(100, 512, false),
                Err(Unaligned { block: 512 }),
            ),
            (
                "a 512-byte write, 4 KiB blocks",
                rules(disk4k(), plain, None),
                write(0, 512, false),
                Err(Unaligned { block: 4096 }),
            ),
            (
                "a read past the end",
                conv(plain),
                read(16 * MIB - 512, 1024),
                Err(PastEnd { size: 16 * MIB }),
            ),
            (
                "a read of the largest I/O",
                conv(plain),
                read(0, MIB),
                Ok(()),
            ),
            (
                "a read above it (split)",
                conv(plain),
                read(0, MIB + 512),
                Err(TooLarge { max: MIB }),
            ),
            (
                "a write above a smaller largest I/O",
                rules(disk().max_io_size(64 << 10), plain, None),
                write(0, 128 << 10, false),
                Err(TooLarge { max: 64 << 10 }),
            ),
            (
                "a flush, no write cache",
                conv(plain),
                Command::Flush,
                Err(Needs("a write cache")),
            ),
            (
                "a flush, write cache",
                conv(cache_no_fua),
                Command::Flush,
                Ok(()),
            ),
            (
                "FUA, no FUA",
                conv(cache_no_fua),
                write(0, 512, true),
                Err(Needs("forced unit access (and a write cache)")),
            ),
            (
                "FUA, no write cache",
                conv(fua_no_cache),
                write(0, 512, true),
                Err(Needs("forced unit access (and a write cache)")),
            ),
            (
                "FUA, FUA and write cache",
                conv(all),
                write(0, 512, true),
                Ok(()),
            ),
            (
                "a discard, none offered",
                conv(plain),
                Command::Discard {
                    offset: 0,
                    len: 4096,
                },
                Err(Needs("discard")),
            ),
            (
                "a discard",
                conv(all),
                Command::Discard {
                    offset: 0,
                    len: 4096,
                },
                Ok(()),
            ),
            (
                "a discard above the largest I/O",
                conv(all),
                Command::Discard {
                    offset: 0,
                    len: 8 * MIB,
                },
                Ok(()),
            ),
            (
                "write zeroes, none offered",
                conv(plain),
                Command::WriteZeroes {
                    offset: 0,
                    len: 4096,
                    unmap: false,
                },
                Err(Needs("write zeroes")),
            ),
            (
                "a write, read-only",
                conv(ro),
                write(0, 512, false),
                Err(ReadOnly),
            ),
            (
                "a discard, read-only",
                conv(ro),
                Command::Discard {
                    offset: 0,
                    len: 512,
                },
                Err(ReadOnly),
            ),
            ("a read, read-only", conv(ro), read(0, 512), Ok(())),
            (
                "a zone report, not zoned",
                conv(all),
                Command::ReportZones {
                    offset: 0,
                    max_zones: 1,
                },
                Err(NotZoned),
            ),
            (
                "a zone reset, not zoned",
                conv(all),
                Command::ZoneReset { offset: 0 },
                Err(NotZoned),
            ),
            (
                "a discard, zoned",
                zoned,
                Command::Discard {
                    offset: 0,
                    len: 4096,
                },
                Err(Needs("discard")),
            ),
            (
                "a discard, zoned, discard offered",
                zoned_discard,
                Command::Discard {
                    offset: 0,
                    len: 4096,
                },
                Ok(()),
            ),
            (
                "a write inside a zone",
                zoned,
                write(MIB - 4096, 4096, false),
                Ok(()),
            ),
            (
                "a write across zones (split)",
                zoned,
                write(MIB - 4096, 8192, false),
                Err(CrossesZone { zone_size: MIB }),
            ),
            (
                "a read across zones (split)",
                zoned,
                read(MIB - 512, 1024),
                Err(CrossesZone { zone_size: MIB }),
            ),
            (
                "a zone reset mid-zone",
                zoned,
                Command::ZoneReset { offset: 4096 },
                Err(NotZoneStart { zone_size: MIB }),
            ),
            (
                "a zone finish past the end",
                zoned,
                Command::ZoneFinish { offset: 16 * MIB },
                Err(PastEnd { size: 16 * MIB }),
            ),
            ("a zone append", zoned, append(MIB, 4096), Ok(())),
            (
                "a zone append mid-zone",
                zoned,
                append(MIB + 4096, 4096),
                Err(NotZoneStart { zone_size: MIB }),
            ),
            (
                "a zone append above the largest",
                zoned,
                append(MIB, 128 << 10),
                Err(TooLarge { max: 64 << 10 }),
            ),
            (
                "a zone append, emulated",
                emulated,
                append(MIB, 4096),
                Err(AppendEmulated),
            ),
            (
                "a zone report mid-zone",
                zoned,
                Command::ReportZones {
                    offset: 4096,
                    max_zones: 1,
                },
                Ok(()),
            ),
        ];
        for (what, rules, command, expected) in rows {
            assert_eq!(rules.check(&command), expected, "{what}: {command:?}");
        }
    }
}
