//! The bytes of a zone state file: header, records, boot id (see the
//! [module documentation](super)).  The file counts sizes and positions in
//! 512-byte sectors; what is read from it and written to it is in bytes,
//! as the zone API's, converted here and only here.

use std::path::Path;

use bius::zone::{ZoneCondition, ZoneGeometry, ZoneGeometryError, ZoneRecord};

use super::ZoneStateError;

/// The file's unit of sizes and positions: a 512-byte sector.
const SECTOR: u64 = 512;

/// The bytes of `sectors` of the file, if a device can have them.
fn bytes_of(sectors: u64) -> Option<u64> {
    sectors.checked_mul(SECTOR)
}

/// A write pointer as the file keeps it: in sectors, `u64::MAX` (none)
/// kept so.
fn write_pointer_sectors(write_pointer: u64) -> u64 {
    match write_pointer {
        u64::MAX => u64::MAX,
        bytes => bytes / SECTOR,
    }
}

/// The file's first bytes.
const MAGIC: &[u8; 8] = b"BIUSZONE";
/// The format version.
const VERSION: u32 = 2;
/// The first version this program reads (its records have no data end:
/// see the [module documentation](super)).
const FIRST_VERSION: u32 = 1;
/// Bytes of the header.
pub(super) const HEADER_LEN: usize = 64;
/// Bytes of one record.
pub(super) const RECORD_LEN: usize = 16;
/// Where the header keeps the boot id.
const BOOT_ID: std::ops::Range<usize> = 48..64;

/// Where zone `index`'s acknowledged (or `durable`) record is.
pub(super) fn record_offset(index: u32, durable: bool) -> u64 {
    (HEADER_LEN + (index as usize * 2 + usize::from(durable)) * RECORD_LEN) as u64
}

/// The id of a boot of the machine; all zeroes when unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BootId(pub(super) [u8; 16]);

impl BootId {
    /// This boot's (`/proc/sys/kernel/random/boot_id`), unknown if that
    /// cannot be read.
    pub(super) fn current() -> Self {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let hex: Vec<u8> = text
            .bytes()
            .filter_map(|b| (b as char).to_digit(16).map(|d| d as u8))
            .collect();
        let mut id = [0; 16];
        if hex.len() == 32 {
            for (byte, pair) in id.iter_mut().zip(hex.chunks_exact(2)) {
                *byte = pair[0] << 4 | pair[1];
            }
        }
        BootId(id)
    }

    /// Whether the id is known (an unknown boot is never the same boot).
    pub(super) fn known(self) -> bool {
        self.0 != [0; 16]
    }
}

/// Whether the header `bytes` (checked) is of an older version than the
/// one this program writes.
pub(super) fn is_older(bytes: &[u8]) -> bool {
    u32_at(bytes, 8) < VERSION
}

/// The boot id in the header `bytes` (at least [`HEADER_LEN`] long).
pub(super) fn boot_of(bytes: &[u8]) -> BootId {
    let mut id = [0; 16];
    id.copy_from_slice(&bytes[BOOT_ID]);
    BootId(id)
}

/// The geometry a zone state file records (the file keeps the zone size
/// and capacity in sectors: converted as it is read and written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneStateHeader {
    /// Logical block size in bytes.
    pub block_size: u32,
    /// Device size in bytes.
    pub device_size: u64,
    /// Zone size in bytes.
    pub zone_size: u64,
    /// Zone capacity in bytes.
    pub zone_capacity: u64,
    /// Conventional zones.
    pub conventional_zones: u32,
    /// Zones.
    pub zones: u32,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

impl ZoneStateHeader {
    /// The header of a device of `geometry`.
    pub(super) fn of(geometry: &ZoneGeometry, block_size: u32) -> Self {
        ZoneStateHeader {
            block_size,
            device_size: geometry.size(),
            zone_size: geometry.zone_size(),
            zone_capacity: geometry.zone_capacity(),
            conventional_zones: geometry.conventional_zones(),
            zones: geometry.zone_count() as u32,
        }
    }

    /// The zone geometry the header records, without limits (the file
    /// keeps none): what to open the device with again.  A header that
    /// describes no valid geometry (one written by hand) is refused as
    /// [`ZoneGeometry`]'s checks say.
    pub fn geometry(&self) -> Result<ZoneGeometry, ZoneGeometryError> {
        ZoneGeometry::new(self.device_size, self.zone_size)?
            .with_zone_capacity(self.zone_capacity)?
            .with_conventional_zones(self.conventional_zones)
    }

    /// The header of file `path`, whose content is `bytes`; its length is
    /// checked against the zone count.
    pub(super) fn parse(path: &Path, bytes: &[u8]) -> Result<Self, ZoneStateError> {
        let truncated = |expected: usize| ZoneStateError::Truncated {
            path: path.to_owned(),
            len: bytes.len() as u64,
            expected: expected as u64,
        };
        let malformed = |field: &str, why: String| ZoneStateError::Malformed {
            path: path.to_owned(),
            field: field.into(),
            why,
        };
        if bytes.len() < HEADER_LEN {
            return Err(truncated(HEADER_LEN));
        }
        if &bytes[..8] != MAGIC {
            return Err(malformed("magic", "not a BIUS zone state file".into()));
        }
        let version = u32_at(bytes, 8);
        if !(FIRST_VERSION..=VERSION).contains(&version) {
            return Err(malformed(
                "version",
                format!("{version}, this program knows {FIRST_VERSION} to {VERSION}"),
            ));
        }
        let size = |field: &str, at: usize| {
            let sectors = u64_at(bytes, at);
            bytes_of(sectors).ok_or_else(|| {
                malformed(
                    field,
                    format!("{sectors} sectors: more bytes than a device has"),
                )
            })
        };
        let header = ZoneStateHeader {
            block_size: u32_at(bytes, 12),
            device_size: u64_at(bytes, 16),
            zone_size: size("zone size", 24)?,
            zone_capacity: size("zone capacity", 32)?,
            conventional_zones: u32_at(bytes, 40),
            zones: u32_at(bytes, 44),
        };
        let expected = HEADER_LEN + header.zones as usize * 2 * RECORD_LEN;
        if bytes.len() != expected {
            return Err(truncated(expected));
        }
        Ok(header)
    }

    /// Checks that this header (the file's) is `given` (the device's).
    pub(super) fn check(&self, path: &Path, given: &Self) -> Result<(), ZoneStateError> {
        let fields = [
            (
                "block size in bytes",
                u64::from(self.block_size),
                u64::from(given.block_size),
            ),
            ("device size in bytes", self.device_size, given.device_size),
            ("zone size in bytes", self.zone_size, given.zone_size),
            (
                "zone capacity in bytes",
                self.zone_capacity,
                given.zone_capacity,
            ),
            (
                "conventional zones",
                u64::from(self.conventional_zones),
                u64::from(given.conventional_zones),
            ),
            ("zones", u64::from(self.zones), u64::from(given.zones)),
        ];
        match fields
            .into_iter()
            .find(|(_, stored, given)| stored != given)
        {
            Some((field, stored, given)) => Err(ZoneStateError::Mismatch {
                path: path.to_owned(),
                field,
                stored,
                given,
            }),
            None => Ok(()),
        }
    }

    /// The header's bytes, with `boot`.
    pub(super) fn encode(&self, boot: BootId) -> [u8; HEADER_LEN] {
        let mut bytes = [0; HEADER_LEN];
        bytes[..8].copy_from_slice(MAGIC);
        bytes[8..12].copy_from_slice(&VERSION.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.block_size.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.device_size.to_le_bytes());
        bytes[24..32].copy_from_slice(&(self.zone_size / SECTOR).to_le_bytes());
        bytes[32..40].copy_from_slice(&(self.zone_capacity / SECTOR).to_le_bytes());
        bytes[40..44].copy_from_slice(&self.conventional_zones.to_le_bytes());
        bytes[44..48].copy_from_slice(&self.zones.to_le_bytes());
        bytes[BOOT_ID].copy_from_slice(&boot.0);
        bytes
    }
}

/// Where the data of a zone whose writable sectors end at sector
/// `capacity_end` ends at most with write pointer `write_pointer` (a
/// sector): the data end a record keeps the distance to.
fn data_limit(write_pointer: u64, capacity_end: u64) -> u64 {
    write_pointer.min(capacity_end)
}

/// Bytes of a record's data end field.
const DATA_END: std::ops::Range<usize> = 9..RECORD_LEN;

/// The bytes of `record`, of a zone whose writable bytes end at byte
/// `capacity_end`.
pub(super) fn encode_record(record: &ZoneRecord, capacity_end: u64) -> [u8; RECORD_LEN] {
    let write_pointer = write_pointer_sectors(record.write_pointer);
    let (data_end, capacity_end) = (record.data_end / SECTOR, capacity_end / SECTOR);
    let mut bytes = [0; RECORD_LEN];
    bytes[..8].copy_from_slice(&write_pointer.to_le_bytes());
    bytes[8] = record.condition as u8;
    // Below 2^55 (sectors of a device of at most 2^64 bytes): 7 bytes.
    let skipped = data_limit(write_pointer, capacity_end).saturating_sub(data_end);
    bytes[DATA_END].copy_from_slice(&skipped.to_le_bytes()[..DATA_END.len()]);
    bytes
}

/// The acknowledged (or `durable`) records of file `path`, whose content
/// `bytes` has a checked header; zone `i`'s writable bytes end at byte
/// `capacity_ends[i]`.
pub(super) fn records(
    path: &Path,
    bytes: &[u8],
    durable: bool,
    capacity_ends: &[u64],
) -> Result<Vec<ZoneRecord>, ZoneStateError> {
    let kind = if durable { "durable" } else { "acknowledged" };
    bytes[HEADER_LEN..]
        .chunks_exact(2 * RECORD_LEN)
        .zip(capacity_ends)
        .enumerate()
        .map(|(zone, (pair, &capacity_end))| {
            let record = &pair[usize::from(durable) * RECORD_LEN..][..RECORD_LEN];
            let malformed = |why: String| ZoneStateError::Malformed {
                path: path.to_owned(),
                field: format!("zone {zone} {kind} record"),
                why,
            };
            let condition = ZoneCondition::from_raw(record[8])
                .ok_or_else(|| malformed(format!("unknown condition {:#x}", record[8])))?;
            let write_pointer = u64_at(record, 0);
            let mut skipped = [0; 8];
            skipped[..DATA_END.len()].copy_from_slice(&record[DATA_END]);
            let skipped = u64::from_le_bytes(skipped);
            let limit = data_limit(write_pointer, capacity_end / SECTOR);
            let data_end = limit.checked_sub(skipped).ok_or_else(|| {
                malformed(format!(
                    "data end {skipped} sectors before sector {limit}, before the device start"
                ))
            })?;
            let write_pointer = match write_pointer {
                u64::MAX => u64::MAX,
                sectors => bytes_of(sectors).ok_or_else(|| {
                    malformed(format!(
                        "write pointer at sector {sectors}, past any device"
                    ))
                })?,
            };
            Ok(ZoneRecord {
                condition,
                write_pointer,
                // (at most the capacity end, a byte)
                data_end: data_end * SECTOR,
            })
        })
        .collect()
}
