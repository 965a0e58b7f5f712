//! The checks of a [`DeviceBuilder`]'s parameters against the kernel's
//! limits, and their encoding for `CREATE_DEVICE`.

use std::time::Duration;

use bius_sys::{bius_device_params, bius_zoned_params};

use super::DeviceBuilder;
use crate::block::Capabilities;
use crate::error::{Error, Parameter};
use crate::limits;
use crate::zone::layout::ZoneLayout;
use crate::zone::ZoneGeometry;

impl DeviceBuilder {
    /// Checks the parameters of a device of `size` bytes and encodes them
    /// for `CREATE_DEVICE`, every one explicit (the builder's defaults,
    /// which are the kernel's, filled in): so the kernel reports them back
    /// as given, and a recovery compares them as they are.
    pub(crate) fn params(
        &self,
        capabilities: Capabilities,
        size: u64,
    ) -> Result<bius_device_params, Error> {
        let check = |ok: bool, param| {
            if ok {
                Ok(())
            } else {
                Err(Error::InvalidParameter(param))
            }
        };
        let lbs = self.logical_block_size;
        check(
            lbs.is_power_of_two()
                && (limits::MIN_BLOCK_SIZE..=limits::MAX_LOGICAL_BLOCK_SIZE).contains(&lbs),
            Parameter::LogicalBlockSize,
        )?;
        check(
            size > 0 && size.is_multiple_of(u64::from(lbs)) && size <= limits::MAX_SIZE,
            Parameter::Size,
        )?;
        let pbs = self.physical_block_size;
        check(
            pbs == 0
                || (pbs.is_power_of_two()
                    && (lbs..=limits::MAX_PHYSICAL_BLOCK_SIZE).contains(&pbs)),
            Parameter::PhysicalBlockSize,
        )?;
        check(
            (1..=limits::MAX_QUEUES).contains(&self.get_queues()),
            Parameter::Queues,
        )?;
        check(self.poll_queues < self.get_queues(), Parameter::PollQueues)?;
        check(
            (1..=limits::MAX_QUEUE_DEPTH).contains(&self.queue_depth),
            Parameter::QueueDepth,
        )?;
        let max_io = self.max_io_size;
        check(
            max_io == 0
                || (max_io.is_multiple_of(lbs)
                    && (page_size()..=limits::MAX_IO_SIZE).contains(&max_io)),
            Parameter::MaxIoSize,
        )?;
        let (transfer_mode, map_threshold) = self.transfer_mode.to_raw(self.get_max_io_size());
        check(
            map_threshold <= self.get_max_io_size(),
            Parameter::MapThreshold,
        )?;
        // (in whole microseconds and milliseconds, as the kernel takes them)
        let poll_usecs = u32::try_from(self.poll_time.as_micros())
            .ok()
            .filter(|&us| u128::from(us) <= limits::MAX_POLL_TIME.as_micros())
            .ok_or(Error::InvalidParameter(Parameter::PollTime))?;
        let recover_timeout_ms = millis(
            self.recover_timeout,
            limits::MAX_RECOVER_TIMEOUT,
            Parameter::RecoverTimeout,
        )?;
        let timeout_ms = millis(
            Some(self.get_timeout()),
            limits::MAX_TIMEOUT,
            Parameter::Timeout,
        )?;
        check(
            self.timing
                .latency
                .is_none_or(|latency| latency.longest() < self.get_timeout()),
            Parameter::Latency,
        )?;
        let mut name = [0; bius_sys::BIUS_NAME_LEN as usize];
        check(
            self.name.len() <= limits::MAX_NAME_LEN
                && self
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            Parameter::Name,
        )?;
        for (dst, src) in name.iter_mut().zip(self.name.bytes()) {
            *dst = src as _;
        }
        let capabilities = Capabilities {
            read_only: capabilities.read_only || self.read_only,
            ..capabilities
        };
        Ok(bius_device_params {
            abi_version: bius_sys::BIUS_ABI_VERSION,
            size,
            logical_block_size: lbs,
            physical_block_size: self.get_physical_block_size(),
            nr_hw_queues: self.get_queues(),
            nr_poll_queues: self.poll_queues,
            queue_depth: self.queue_depth,
            max_io_bytes: self.get_max_io_size(),
            timeout_ms,
            features: capabilities.features(),
            transfer_mode,
            map_threshold,
            name,
            poll_usecs,
            recover_timeout_ms,
            ..Default::default()
        })
    }

    /// Checks the parameters that do not depend on the device: all of
    /// them, the size too if the builder has one (else a zoned device's is
    /// checked with it, by [`DeviceBuilder::device_params`]).
    #[cfg(feature = "loopback")]
    pub(crate) fn checked(&self) -> Result<bius_device_params, Error> {
        let size = self.size.unwrap_or(u64::from(self.logical_block_size));
        self.params(Capabilities::default(), size)
    }

    /// Checks the parameters of a device with `capabilities`, zoned with
    /// `zones` if given, and encodes them for `CREATE_DEVICE`; also returns
    /// the zones as the kernel will know them.  The size is the builder's,
    /// or a zoned device's geometry's (a builder with a size refuses a
    /// zoned device).
    pub(crate) fn device_params(
        &self,
        capabilities: Capabilities,
        zones: Option<ZoneGeometry>,
    ) -> Result<(bius_device_params, Option<ZoneLayout>), Error> {
        match (zones, self.size) {
            (None, size) => {
                let size = size.ok_or(Error::InvalidParameter(Parameter::Size))?;
                Ok((self.params(capabilities, size)?, None))
            }
            (Some(geometry), None) => {
                let (params, layout) = self.zoned_params(capabilities, geometry)?;
                Ok((params, Some(layout)))
            }
            (Some(_), Some(_)) => Err(Error::InvalidParameter(Parameter::ZonedSize)),
        }
    }

    /// The parameters of a zoned device of `geometry` (see
    /// [`DeviceBuilder::device_params`]): `BIUS_FEATURE_ZONED` and the zone
    /// geometry in bytes (the largest zone append at most the largest I/O,
    /// or 0 and `BIUS_FEATURE_ZONE_APPEND_EMULATED` if the kernel emulates
    /// appends).
    pub(super) fn zoned_params(
        &self,
        capabilities: Capabilities,
        geometry: ZoneGeometry,
    ) -> Result<(bius_device_params, ZoneLayout), Error> {
        let mut params = self.params(capabilities, geometry.size())?;
        // (a largest append of 0 is the zone size)
        if self.emulate_zone_append && geometry.max_append() != geometry.zone_size() {
            return Err(Error::InvalidParameter(Parameter::EmulatedAppend));
        }
        let lbs = u64::from(self.logical_block_size);
        let zone_size = geometry.zone_size();
        if zone_size > limits::MAX_ZONE_SIZE {
            return Err(Error::InvalidParameter(Parameter::ZoneSize));
        }
        if geometry.zone_count() > u64::from(limits::MAX_ZONES) {
            return Err(Error::InvalidParameter(Parameter::ZoneCount));
        }
        let zone_capacity = geometry.zone_capacity();
        let max_append = geometry.max_append().min(u64::from(self.get_max_io_size()));
        if zone_size < 2 * lbs
            || !zone_capacity.is_multiple_of(lbs)
            || !max_append.is_multiple_of(lbs)
        {
            return Err(Error::InvalidParameter(Parameter::ZoneAlignment));
        }
        params.features |= u64::from(bius_sys::BIUS_FEATURE_ZONED);
        if self.emulate_zone_append {
            params.features |= u64::from(bius_sys::BIUS_FEATURE_ZONE_APPEND_EMULATED);
        }
        params.zoned = bius_zoned_params {
            zone_size,
            zone_capacity,
            nr_conv_zones: geometry.conventional_zones(),
            max_open_zones: geometry.max_open(),
            max_active_zones: geometry.max_active(),
            max_append_bytes: if self.emulate_zone_append {
                0
            } else {
                max_append as u32
            },
        };
        let layout = ZoneLayout::new(geometry, self.logical_block_size)
            .emulated_append(self.emulate_zone_append);
        Ok((params, layout))
    }
}

/// A time limit in the whole milliseconds the kernel takes: 0 for none
/// (the kernel's default), else 1 ms to `max`, or `param` is invalid.
fn millis(time: Option<Duration>, max: Duration, param: Parameter) -> Result<u32, Error> {
    match time {
        None => Ok(0),
        Some(time) => u32::try_from(time.as_millis())
            .ok()
            .filter(|&ms| (1..=max.as_millis()).contains(&ms.into()))
            .ok_or(Error::InvalidParameter(param)),
    }
}

/// The memory page size, the smallest largest-I/O the kernel accepts.
pub(super) fn page_size() -> u32 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|bytes| u32::try_from(bytes).ok())
        .unwrap_or(4096)
}
