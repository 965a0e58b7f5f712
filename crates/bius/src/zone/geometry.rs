//! [`ZoneGeometry`]: the zone layout and limits of a zoned device, in
//! bytes, checked when it is built ([`ZoneGeometryError`]).

use std::hash::{Hash, Hasher};

use crate::abi::SECTOR_SIZE;
use crate::control::ZonedParams;

/// The zone layout and limits of a zoned device: its size, the zone size,
/// each zone's writable capacity, how many zones are conventional, the
/// open and active zone limits and the largest zone append.
///
/// Sizes are in bytes, whole 512-byte sectors.  A geometry is checked as
/// it is built: [`ZoneGeometry::new`] and the `with_*` methods that can
/// fail return a [`ZoneGeometryError`] that names the quantity, its value
/// and its unit, so a geometry given in sectors where bytes are meant is
/// caught there.  The limits are normalised as `null_blk` does them: a
/// limit of 0, or of at least the number of sequential zones, means no
/// limit, and the open limit is at most the active one.
///
/// A zoned device returns its geometry from `zones()`
/// ([`BlockDevice::zones`](crate::BlockDevice::zones),
/// [`DeferredDevice::zones`](crate::DeferredDevice::zones)); the disk then
/// has the geometry's [size](ZoneGeometry::size).
///
/// ```
/// use bius::zone::ZoneGeometry;
///
/// // 64 MiB in 4 MiB zones of 3 MiB capacity, the first two conventional,
/// // at most 8 zones open.
/// let geometry = ZoneGeometry::new(64 << 20, 4 << 20)?
///     .with_zone_capacity(3 << 20)?
///     .with_conventional_zones(2)?
///     .with_max_open(8);
/// assert_eq!(geometry.zone_count(), 16);
/// assert_eq!(geometry.sequential_zones(), 14);
/// assert_eq!(geometry.max_append(), 4 << 20);
/// // The error names the quantity, its value and its unit.
/// let err = ZoneGeometry::new(64 << 20, 3 << 20).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "zone size 3145728 bytes is not a power of two of at least 512 bytes"
/// );
/// # Ok::<(), bius::zone::ZoneGeometryError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ZoneGeometry {
    /// Device size.
    size: u64,
    /// Zone size: a power of two.
    zone_size: u64,
    /// Writable bytes of each zone, from 512 to the zone size.
    zone_capacity: u64,
    /// How many zones, from the first, are conventional.
    conventional_zones: u32,
    /// Most zones open at once, normalised; 0 for no limit.
    max_open: u32,
    /// Most zones open or closed at once, normalised; 0 for no limit.
    max_active: u32,
    /// Largest zone append, normalised (0 became the zone size).
    max_append: u64,
    /// The limits as given, which the normalised ones follow from.
    requested: Limits,
}

/// The open and active limits as given.
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    max_open: u32,
    max_active: u32,
}

impl ZoneGeometry {
    /// A device of `size` bytes in zones of `zone_size` bytes (a power of
    /// two, at least 512, at most `size`), all sequential, each writable to
    /// its end, without limits.  The last zone is shorter (a runt) if
    /// `size` is not a multiple of the zone size.
    pub fn new(size: u64, zone_size: u64) -> Result<Self, ZoneGeometryError> {
        if size == 0 || !size.is_multiple_of(SECTOR_SIZE) {
            return Err(ZoneGeometryError::DeviceSize { bytes: size });
        }
        if !zone_size.is_power_of_two() || zone_size < SECTOR_SIZE {
            return Err(ZoneGeometryError::ZoneSize { bytes: zone_size });
        }
        if zone_size > size {
            return Err(ZoneGeometryError::ZoneLargerThanDevice {
                zone_bytes: zone_size,
                device_bytes: size,
            });
        }
        let zones = size.div_ceil(zone_size);
        if zones > u64::from(u32::MAX) {
            return Err(ZoneGeometryError::TooManyZones { zones });
        }
        Ok(ZoneGeometry {
            size,
            zone_size,
            zone_capacity: zone_size,
            conventional_zones: 0,
            max_open: 0,
            max_active: 0,
            max_append: zone_size,
            requested: Limits::default(),
        })
    }

    /// The same with `bytes` writable in each zone (from 512 bytes to the
    /// zone size, whole sectors; a runt zone's capacity is at most its
    /// length).
    pub fn with_zone_capacity(mut self, bytes: u64) -> Result<Self, ZoneGeometryError> {
        let zone_bytes = self.zone_size();
        if bytes == 0 || !bytes.is_multiple_of(SECTOR_SIZE) || bytes > zone_bytes {
            return Err(ZoneGeometryError::ZoneCapacity { bytes, zone_bytes });
        }
        self.zone_capacity = bytes;
        Ok(self)
    }

    /// The same with the first `count` zones conventional (written
    /// anywhere); at least one zone must stay sequential.
    pub fn with_conventional_zones(mut self, count: u32) -> Result<Self, ZoneGeometryError> {
        let zones = self.zone_count();
        if u64::from(count) >= zones {
            return Err(ZoneGeometryError::NoSequentialZone {
                conventional: count,
                zones,
            });
        }
        self.conventional_zones = count;
        Ok(self.normalized())
    }

    /// The same with at most `zones` zones open at once (0: no limit).
    pub fn with_max_open(mut self, zones: u32) -> Self {
        self.requested.max_open = zones;
        self.normalized()
    }

    /// The same with at most `zones` zones open or closed at once (0: no
    /// limit).
    pub fn with_max_active(mut self, zones: u32) -> Self {
        self.requested.max_active = zones;
        self.normalized()
    }

    /// The same with zone appends of at most `bytes` (whole sectors, at
    /// most the zone size; 0 for the zone size, the default).
    pub fn with_max_append(mut self, bytes: u64) -> Result<Self, ZoneGeometryError> {
        let zone_bytes = self.zone_size();
        if !bytes.is_multiple_of(SECTOR_SIZE) || bytes > zone_bytes {
            return Err(ZoneGeometryError::MaxAppend { bytes, zone_bytes });
        }
        self.max_append = match bytes {
            0 => self.zone_size,
            bytes => bytes,
        };
        Ok(self)
    }

    /// The geometry of a zoned device of `size` bytes whose zones the
    /// kernel reports as `params`: what [`DeviceInfo::size`] and
    /// [`DeviceInfo::zoned`] say of a device created with a geometry (a
    /// recovered device is served with it again).  The largest append is
    /// the one the kernel reports, at most the device's largest I/O; an
    /// emulated zone append's 0 is the zone size, as in
    /// [`ZoneGeometry::with_max_append`].  An error says `size` or
    /// `params` are not a zoned device's.
    ///
    /// [`DeviceInfo::size`]: crate::DeviceInfo::size
    /// [`DeviceInfo::zoned`]: crate::DeviceInfo::zoned
    ///
    /// ```no_run
    /// use bius::zone::ZoneGeometry;
    ///
    /// let info = bius::device_info(0)?;
    /// if let Some(zoned) = &info.zoned {
    ///     let geometry = ZoneGeometry::from_params(info.size, zoned)?;
    ///     println!("{} zones", geometry.zone_count());
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_params(size: u64, params: &ZonedParams) -> Result<Self, ZoneGeometryError> {
        Ok(ZoneGeometry::new(size, params.zone_size)?
            .with_zone_capacity(params.zone_capacity)?
            .with_conventional_zones(params.conventional_zones)?
            .with_max_append(params.max_append.into())?
            .with_max_open(params.max_open)
            .with_max_active(params.max_active))
    }

    /// The limits normalised as `null_blk` does: one that cannot be reached
    /// becomes 0 (none), and the open limit is lowered to the active one.
    fn normalized(mut self) -> Self {
        let sequential = self.sequential_zones();
        let Limits {
            max_open,
            max_active,
        } = self.requested;
        self.max_active = if u64::from(max_active) >= sequential {
            0
        } else {
            max_active
        };
        self.max_open = if self.max_active != 0 && max_open > self.max_active {
            self.max_active
        } else if u64::from(max_open) >= sequential {
            0
        } else {
            max_open
        };
        self
    }

    /// The device size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The zone size in bytes.
    pub fn zone_size(&self) -> u64 {
        self.zone_size
    }

    /// The writable bytes of each zone (a runt zone's are at most its
    /// length).
    pub fn zone_capacity(&self) -> u64 {
        self.zone_capacity
    }

    /// How many zones, from the first, are conventional.
    pub fn conventional_zones(&self) -> u32 {
        self.conventional_zones
    }

    /// Most zones open at once; 0 for no limit.
    pub fn max_open(&self) -> u32 {
        self.max_open
    }

    /// Most zones open or closed at once; 0 for no limit.
    pub fn max_active(&self) -> u32 {
        self.max_active
    }

    /// The largest zone append in bytes.
    pub fn max_append(&self) -> u64 {
        self.max_append
    }

    /// Number of zones, the runt included.
    pub fn zone_count(&self) -> u64 {
        self.size.div_ceil(self.zone_size)
    }

    /// Number of sequential zones.
    pub fn sequential_zones(&self) -> u64 {
        self.zone_count()
            .saturating_sub(u64::from(self.conventional_zones))
    }

    /// Where zone `index` (below [`ZoneGeometry::zone_count`]) lies and how
    /// much of it is writable: a conventional zone all of it, a sequential
    /// one at most the zone capacity.
    pub(crate) fn zone_extent(&self, index: u64) -> ZoneExtent {
        let start = index * self.zone_size;
        let len = self.zone_size.min(self.size - start);
        let capacity = if index < u64::from(self.conventional_zones) {
            len
        } else {
            len.min(self.zone_capacity)
        };
        ZoneExtent {
            start,
            len,
            capacity,
        }
    }

    /// What the geometry is, the limits normalised.
    fn key(&self) -> (u64, u64, u64, u32, u32, u32, u64) {
        (
            self.size,
            self.zone_size,
            self.zone_capacity,
            self.conventional_zones,
            self.max_open,
            self.max_active,
            self.max_append,
        )
    }
}

/// Equal when they describe the same zones and limits, however the limits
/// were given (a limit past the sequential zones is no limit).
impl PartialEq for ZoneGeometry {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ZoneGeometry {}

impl Hash for ZoneGeometry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

/// Where a zone lies in a [`ZoneGeometry`] and how much of it is
/// writable, in bytes ([`ZoneGeometry::zone_extent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ZoneExtent {
    /// First byte.
    pub(crate) start: u64,
    /// Length: the zone size, less for a runt at the device end.
    pub(crate) len: u64,
    /// Writable bytes from the start.
    pub(crate) capacity: u64,
}

/// What is wrong with a [`ZoneGeometry`] being built; each names the
/// quantity and its value in its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ZoneGeometryError {
    /// The device size is 0 or not a whole number of sectors.
    #[error("device size {bytes} bytes is not a positive multiple of 512 bytes")]
    DeviceSize {
        /// The size, in bytes.
        bytes: u64,
    },
    /// The zone size is not a power of two of at least 512 bytes.
    #[error("zone size {bytes} bytes is not a power of two of at least 512 bytes")]
    ZoneSize {
        /// The zone size, in bytes.
        bytes: u64,
    },
    /// The zone size is larger than the device.
    #[error("zone size {zone_bytes} bytes is larger than the device ({device_bytes} bytes)")]
    ZoneLargerThanDevice {
        /// The zone size, in bytes.
        zone_bytes: u64,
        /// The device size, in bytes.
        device_bytes: u64,
    },
    /// More than `u32::MAX` zones.
    #[error("{zones} zones: a device has at most {}", u32::MAX)]
    TooManyZones {
        /// How many zones the device would have.
        zones: u64,
    },
    /// The zone capacity is 0, not whole sectors, or larger than the zone.
    #[error(
        "zone capacity {bytes} bytes is not a multiple of 512 bytes \
         from 512 bytes to the zone size ({zone_bytes} bytes)"
    )]
    ZoneCapacity {
        /// The capacity, in bytes.
        bytes: u64,
        /// The zone size, in bytes.
        zone_bytes: u64,
    },
    /// Every zone would be conventional.
    #[error("{conventional} conventional zones leave none of the {zones} zones sequential")]
    NoSequentialZone {
        /// The conventional zones asked for.
        conventional: u32,
        /// The zones there are.
        zones: u64,
    },
    /// The largest zone append is not whole sectors or larger than the
    /// zone.
    #[error(
        "largest zone append {bytes} bytes is not a multiple of 512 bytes \
         up to the zone size ({zone_bytes} bytes)"
    )]
    MaxAppend {
        /// The largest append, in bytes.
        bytes: u64,
        /// The zone size, in bytes.
        zone_bytes: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_geometry_is_checked_as_it_is_built() {
        use ZoneGeometryError::*;
        let new = ZoneGeometry::new;
        assert_eq!(new(0, 512).unwrap_err(), DeviceSize { bytes: 0 });
        assert_eq!(new(1000, 512).unwrap_err(), DeviceSize { bytes: 1000 });
        assert_eq!(
            new(1 << 20, 3 << 10).unwrap_err(),
            ZoneSize { bytes: 3 << 10 }
        );
        assert_eq!(new(1 << 20, 256).unwrap_err(), ZoneSize { bytes: 256 });
        assert_eq!(
            new(1 << 20, 2 << 20).unwrap_err(),
            ZoneLargerThanDevice {
                zone_bytes: 2 << 20,
                device_bytes: 1 << 20
            }
        );
        assert_eq!(
            new(1 << 42, 512).unwrap_err(),
            TooManyZones { zones: 1 << 33 }
        );
        let g = new(4 << 20, 1 << 20).unwrap();
        let capacity = |bytes| g.with_zone_capacity(bytes).unwrap_err();
        for bytes in [0, 1000, 2 << 20] {
            assert_eq!(
                capacity(bytes),
                ZoneCapacity {
                    bytes,
                    zone_bytes: 1 << 20
                }
            );
        }
        assert_eq!(
            g.with_conventional_zones(4).unwrap_err(),
            NoSequentialZone {
                conventional: 4,
                zones: 4
            }
        );
        for bytes in [1000, 2 << 20] {
            assert_eq!(
                g.with_max_append(bytes).unwrap_err(),
                MaxAppend {
                    bytes,
                    zone_bytes: 1 << 20
                }
            );
        }
        // A runt zone at the end.
        let runt = new((4 << 20) + 4096, 1 << 20).unwrap();
        assert_eq!((runt.zone_count(), runt.size()), (5, (4 << 20) + 4096));
    }

    #[test]
    fn each_error_names_the_quantity_and_its_unit() {
        use ZoneGeometryError::*;
        for (err, message) in [
            (
                DeviceSize { bytes: 1000 },
                "device size 1000 bytes is not a positive multiple of 512 bytes",
            ),
            (
                ZoneSize { bytes: 3072 },
                "zone size 3072 bytes is not a power of two of at least 512 bytes",
            ),
            (
                ZoneLargerThanDevice {
                    zone_bytes: 2048,
                    device_bytes: 1024,
                },
                "zone size 2048 bytes is larger than the device (1024 bytes)",
            ),
            (
                TooManyZones { zones: 1 << 33 },
                "8589934592 zones: a device has at most 4294967295",
            ),
            (
                ZoneCapacity {
                    bytes: 1000,
                    zone_bytes: 4096,
                },
                "zone capacity 1000 bytes is not a multiple of 512 bytes \
                 from 512 bytes to the zone size (4096 bytes)",
            ),
            (
                NoSequentialZone {
                    conventional: 4,
                    zones: 4,
                },
                "4 conventional zones leave none of the 4 zones sequential",
            ),
            (
                MaxAppend {
                    bytes: 1000,
                    zone_bytes: 4096,
                },
                "largest zone append 1000 bytes is not a multiple of 512 bytes \
                 up to the zone size (4096 bytes)",
            ),
        ] {
            assert_eq!(err.to_string(), message, "{err:?}");
        }
    }

    #[test]
    fn limits_are_normalised_whatever_the_order() {
        let g = ZoneGeometry::new(8 << 20, 1 << 20).unwrap();
        // Open above active: lowered to it, in either order.
        let a = g.with_max_open(5).with_max_active(3);
        let b = g.with_max_active(3).with_max_open(5);
        assert_eq!((a.max_open(), a.max_active()), (3, 3));
        assert_eq!(a, b);
        // A limit of at least the sequential zones is none, also when
        // conventional zones come later.
        let c = g.with_max_open(6).with_conventional_zones(2).unwrap();
        assert_eq!(c.max_open(), 0);
        assert_eq!(c, g.with_conventional_zones(2).unwrap());
        // The largest append: 0 is the zone size.
        assert_eq!(g.with_max_append(0).unwrap(), g);
        assert_eq!(g.with_max_append(64 << 10).unwrap().max_append(), 64 << 10);
    }
}
