//! The builder's tests: parameters, limits and zoned geometry checks.

use bius_sys::bius_device_info;

use super::params::page_size;
use super::*;
use crate::block::Capabilities;
use crate::control::info::{c_name, DeviceInfo, ZonedParams};
use crate::error::Parameter;
use crate::limits;
use crate::zone::ZoneGeometry;

/// The parameters of `builder`'s conventional device with `caps`.
fn conventional(builder: DeviceBuilder, caps: Capabilities) -> Result<bius_device_params, Error> {
    builder.device_params(caps, None).map(|(params, _)| params)
}

fn invalid(builder: DeviceBuilder) -> Parameter {
    match conventional(builder, Capabilities::default()) {
        Err(Error::InvalidParameter(param)) => param,
        other => panic!("expected an invalid parameter, got {other:?}"),
    }
}

#[test]
fn a_fresh_builder_gets_the_defaults() {
    let builder = DeviceBuilder::new(1 << 30);
    assert_eq!(builder.get_size(), Some(1 << 30));
    assert_eq!(DeviceBuilder::default().get_size(), None);
    assert_eq!(builder.get_queues(), DeviceBuilder::default_queues());
    assert_eq!(builder.get_poll_queues(), 0);
    assert_eq!(builder.get_max_io_size(), 1 << 20);
    assert_eq!(
        builder.get_max_io_size(),
        DeviceBuilder::DEFAULT_MAX_IO_SIZE
    );
    assert_eq!(builder.get_timeout(), Duration::from_secs(30));
    assert_eq!(builder.get_timeout(), DeviceBuilder::DEFAULT_TIMEOUT);
    assert_eq!(builder.get_poll_time(), DeviceBuilder::DEFAULT_POLL_TIME);
    assert_eq!(
        builder.get_transfer_mode(),
        DeviceBuilder::DEFAULT_TRANSFER_MODE
    );
    assert!(!builder.get_emulate_zone_append());
    assert_eq!(builder.start_timeout, DeviceBuilder::DEFAULT_START_TIMEOUT);
    let params = conventional(builder, Capabilities::default()).unwrap();
    assert_eq!(params.logical_block_size, 512);
    assert_eq!(
        params.logical_block_size,
        DeviceBuilder::DEFAULT_LOGICAL_BLOCK_SIZE
    );
    assert_eq!(params.queue_depth, DeviceBuilder::DEFAULT_QUEUE_DEPTH);
    // The kernel's defaults, which the consts are, sent explicitly.
    assert_eq!(
        (params.max_io_bytes, params.timeout_ms),
        (
            bius_sys::BIUS_DEFAULT_MAX_IO_BYTES,
            bius_sys::BIUS_DEFAULT_TIMEOUT_MS
        )
    );
}

#[test]
fn parameters_are_encoded() {
    let caps = Capabilities {
        discard: true,
        ..Capabilities::default()
    };
    let builder = DeviceBuilder::new(1 << 30)
        .logical_block_size(4096)
        .physical_block_size(8192)
        .queues(4)
        .queue_depth(64)
        .max_io_size(256 << 10)
        .timeout(Duration::from_secs(5))
        .name("disk_1-a")
        .read_only(true);
    let params = conventional(builder, caps).unwrap();
    assert_eq!(params.abi_version, bius_sys::BIUS_ABI_VERSION);
    assert_eq!(
        (
            params.size,
            params.logical_block_size,
            params.physical_block_size
        ),
        (1 << 30, 4096, 8192)
    );
    assert_eq!((params.nr_hw_queues, params.queue_depth), (4, 64));
    assert_eq!((params.max_io_bytes, params.timeout_ms), (256 << 10, 5000));
    assert_eq!(
        params.features,
        u64::from(bius_sys::BIUS_FEATURE_DISCARD | bius_sys::BIUS_FEATURE_READ_ONLY)
    );
    assert_eq!(c_name(&params.name), "disk_1-a");
    // Defaults are filled in as the kernel would (bius_params_check()),
    // so it reports back what it was given.
    let params = conventional(DeviceBuilder::new(1 << 20), Capabilities::default()).unwrap();
    assert_eq!(
        (
            params.physical_block_size,
            params.max_io_bytes,
            params.timeout_ms
        ),
        (
            512,
            bius_sys::BIUS_DEFAULT_MAX_IO_BYTES,
            bius_sys::BIUS_DEFAULT_TIMEOUT_MS
        )
    );
    assert_eq!(params.name[0], 0);
}

#[test]
fn invalid_parameters_are_named() {
    let b = || DeviceBuilder::new(1 << 20);
    assert_eq!(invalid(DeviceBuilder::new(0)), Parameter::Size);
    assert_eq!(invalid(DeviceBuilder::new(1000)), Parameter::Size);
    assert_eq!(
        invalid(DeviceBuilder::new(512 * 3).logical_block_size(1024)),
        Parameter::Size
    );
    for lbs in [256, 768, 8192] {
        assert_eq!(
            invalid(b().logical_block_size(lbs)),
            Parameter::LogicalBlockSize
        );
    }
    for pbs in [256, 3000, 128 << 10] {
        assert_eq!(
            invalid(b().physical_block_size(pbs)),
            Parameter::PhysicalBlockSize
        );
    }
    assert_eq!(
        invalid(b().logical_block_size(4096).physical_block_size(2048)),
        Parameter::PhysicalBlockSize
    );
    assert_eq!(invalid(b().queues(0)), Parameter::Queues);
    assert_eq!(invalid(b().queues(65)), Parameter::Queues);
    assert_eq!(invalid(b().queues(1).poll_queues(1)), Parameter::PollQueues);
    // Without a queue count, the poll queues come on top of the default.
    let default = DeviceBuilder::default_queues();
    assert!((1..=64).contains(&default));
    assert_eq!(b().get_queues(), default);
    assert_eq!(b().poll_queues(1).get_queues(), (default + 1).min(64));
    assert_eq!(invalid(b().queues(2).poll_queues(2)), Parameter::PollQueues);
    let params = conventional(b().queues(4).poll_queues(3), Capabilities::default()).unwrap();
    assert_eq!((params.nr_hw_queues, params.nr_poll_queues), (4, 3));
    assert_eq!(invalid(b().queue_depth(0)), Parameter::QueueDepth);
    assert_eq!(invalid(b().queue_depth(4097)), Parameter::QueueDepth);
    assert_eq!(invalid(b().max_io_size(1000)), Parameter::MaxIoSize);
    assert_eq!(
        invalid(b().max_io_size(page_size() / 2)),
        Parameter::MaxIoSize
    );
    assert_eq!(invalid(b().max_io_size(16 << 20)), Parameter::MaxIoSize);
    assert_eq!(invalid(b().timeout(Duration::ZERO)), Parameter::Timeout);
    assert_eq!(
        invalid(b().poll_time(Duration::from_micros(1001))),
        Parameter::PollTime
    );
    let polled = b().poll_time(Duration::from_nanos(1_999_999 / 2));
    let params = conventional(polled, Capabilities::default()).unwrap();
    assert_eq!(params.poll_usecs, 999);
    assert_eq!(
        invalid(b().timeout(Duration::from_secs(u64::MAX / 1000))),
        Parameter::Timeout
    );
    assert_eq!(invalid(b().name("a".repeat(32))), Parameter::Name);
    assert_eq!(invalid(b().name("no/slash")), Parameter::Name);
    assert!(conventional(b().name("a".repeat(31)), Capabilities::default()).is_ok());
}

#[test]
fn recovery_timeouts_are_from_1_ms_to_90_s() {
    let b = || DeviceBuilder::new(1 << 20);
    let encoded = |timeout| {
        conventional(b().recover_timeout(timeout), Capabilities::default())
            .map(|params| params.recover_timeout_ms)
    };
    assert_eq!(
        conventional(b(), Capabilities::default())
            .unwrap()
            .recover_timeout_ms,
        0,
        "no recovery by default"
    );
    assert_eq!(encoded(Duration::from_millis(1)), Ok(1));
    assert_eq!(encoded(Duration::from_micros(2500)), Ok(2));
    assert_eq!(encoded(Duration::from_secs(90)), Ok(90_000));
    for refused in [
        Duration::ZERO,
        Duration::from_micros(999),
        Duration::from_millis(90_001),
        Duration::MAX,
    ] {
        let err = encoded(refused).unwrap_err();
        assert_eq!(err, Error::InvalidParameter(Parameter::RecoverTimeout));
        assert_eq!(err.errno(), Errno::EINVAL);
        assert!(err.to_string().contains("1 ms to 90 s"), "{err}");
    }
}

#[test]
fn zoned_parameters_are_encoded_in_bytes() {
    // 64 MiB in 4 MiB zones of 3 MiB, 2 conventional, limits 4/6.
    let geometry = ZoneGeometry::new(64 << 20, 4 << 20)
        .unwrap()
        .with_zone_capacity(3 << 20)
        .unwrap()
        .with_conventional_zones(2)
        .unwrap()
        .with_max_open(4)
        .with_max_active(6);
    let (params, layout) = DeviceBuilder::default()
        .logical_block_size(4096)
        .device_params(Capabilities::default(), Some(geometry))
        .unwrap();
    assert_eq!(params.size, 64 << 20);
    assert_eq!(layout.unwrap().geometry().max_append(), 4 << 20);
    assert_eq!(
        params.features,
        u64::from(bius_sys::BIUS_FEATURE_ZONED),
        "zoned, nothing else"
    );
    let z = params.zoned;
    assert_eq!((z.zone_size, z.zone_capacity), (4 << 20, 3 << 20));
    assert_eq!(
        (z.nr_conv_zones, z.max_open_zones, z.max_active_zones),
        (2, 4, 6)
    );
    // The largest append is at most the largest I/O.
    assert_eq!(z.max_append_bytes, bius_sys::BIUS_DEFAULT_MAX_IO_BYTES);
    let info = DeviceInfo::from_raw(&bius_device_info {
        params,
        ..Default::default()
    });
    assert_eq!(
        info.zoned,
        Some(ZonedParams {
            zone_size: 4 << 20,
            zone_capacity: 3 << 20,
            conventional_zones: 2,
            max_open: 4,
            max_active: 6,
            max_append: 1 << 20,
            append_emulated: false,
        })
    );
    // The geometry again, its largest append the largest I/O.
    assert_eq!(
        ZoneGeometry::from_params(info.size, &info.zoned.unwrap()),
        Ok(geometry.with_max_append(1 << 20).unwrap())
    );
    let plain = conventional(DeviceBuilder::new(1 << 20), Capabilities::default()).unwrap();
    assert_eq!(
        DeviceInfo::from_raw(&bius_device_info {
            params: plain,
            ..Default::default()
        })
        .zoned,
        None
    );
}

#[test]
fn invalid_zone_geometries_are_named() {
    let zoned = |builder: DeviceBuilder, geometry| {
        builder
            .device_params(Capabilities::default(), Some(geometry))
            .map(drop)
            .unwrap_err()
    };
    let geometry = ZoneGeometry::new(1 << 20, 128 << 10).unwrap();
    // The size is the geometry's: a builder with a size (even the same) is
    // a contradiction; a conventional device needs one.
    for size in [1 << 20, 2 << 20] {
        assert_eq!(
            zoned(DeviceBuilder::new(size), geometry),
            Error::InvalidParameter(Parameter::ZonedSize)
        );
    }
    assert_eq!(
        invalid(DeviceBuilder::default()),
        Parameter::Size,
        "no size, no zones"
    );
    let lbs4k = || DeviceBuilder::default().logical_block_size(4096);
    assert_eq!(
        zoned(lbs4k(), ZoneGeometry::new(1 << 20, 4 << 10).unwrap()),
        Error::InvalidParameter(Parameter::ZoneAlignment)
    );
    assert_eq!(
        zoned(lbs4k(), geometry.with_max_append(4608).unwrap()),
        Error::InvalidParameter(Parameter::ZoneAlignment)
    );
    assert!(lbs4k()
        .device_params(Capabilities::default(), Some(geometry))
        .is_ok());
    let huge = ZoneGeometry::new(4096 << 30, 2048 << 30).unwrap();
    assert_eq!(
        zoned(DeviceBuilder::default(), huge),
        Error::InvalidParameter(Parameter::ZoneSize)
    );
}

#[test]
fn emulated_zone_append_has_no_largest_append() {
    let geometry = ZoneGeometry::new(1 << 20, 128 << 10).unwrap();
    let builder = DeviceBuilder::default().emulate_zone_append(true);
    let (params, layout) = builder
        .zoned_params(Capabilities::default(), geometry)
        .unwrap();
    assert!(layout.append_emulated());
    assert_eq!(
        params.features,
        u64::from(bius_sys::BIUS_FEATURE_ZONED | bius_sys::BIUS_FEATURE_ZONE_APPEND_EMULATED)
    );
    assert_eq!(params.zoned.max_append_bytes, 0);
    let info = DeviceInfo::from_raw(&bius_device_info {
        params,
        ..Default::default()
    });
    let zoned = info.zoned.unwrap();
    assert!(zoned.append_emulated);
    assert_eq!(zoned.max_append, 0);
    // No largest append: the zone size, which emulation wants.
    assert_eq!(ZoneGeometry::from_params(info.size, &zoned), Ok(geometry));
    // A largest append is a contradiction.
    let err = builder
        .zoned_params(
            Capabilities::default(),
            geometry.with_max_append(4096).unwrap(),
        )
        .map(drop)
        .unwrap_err();
    assert_eq!(err, Error::InvalidParameter(Parameter::EmulatedAppend));
    assert_eq!(err.errno(), Errno::EINVAL);
    // Conventional devices ignore it.
    let plain = conventional(
        DeviceBuilder::new(1 << 20).emulate_zone_append(true),
        Capabilities::default(),
    );
    assert_eq!(plain.unwrap().features, 0);
}

#[test]
fn each_limit_is_accepted_and_one_past_it_refused() {
    let b = || DeviceBuilder::new(1 << 20);
    let accepted = |builder: DeviceBuilder| conventional(builder, Capabilities::default()).is_ok();
    let ms = Duration::from_millis(1);
    let us = Duration::from_micros(1);
    for (at, past, param) in [
        (
            b().queues(limits::MAX_QUEUES),
            b().queues(limits::MAX_QUEUES + 1),
            Parameter::Queues,
        ),
        (
            b().queue_depth(limits::MAX_QUEUE_DEPTH),
            b().queue_depth(limits::MAX_QUEUE_DEPTH + 1),
            Parameter::QueueDepth,
        ),
        (
            b().max_io_size(limits::MAX_IO_SIZE),
            b().max_io_size(limits::MAX_IO_SIZE + 512),
            Parameter::MaxIoSize,
        ),
        (
            DeviceBuilder::new(limits::MAX_SIZE),
            DeviceBuilder::new(limits::MAX_SIZE + 512),
            Parameter::Size,
        ),
        (
            b().logical_block_size(limits::MIN_BLOCK_SIZE),
            b().logical_block_size(limits::MIN_BLOCK_SIZE / 2),
            Parameter::LogicalBlockSize,
        ),
        (
            b().logical_block_size(limits::MAX_LOGICAL_BLOCK_SIZE),
            b().logical_block_size(limits::MAX_LOGICAL_BLOCK_SIZE * 2),
            Parameter::LogicalBlockSize,
        ),
        (
            b().physical_block_size(limits::MAX_PHYSICAL_BLOCK_SIZE),
            b().physical_block_size(limits::MAX_PHYSICAL_BLOCK_SIZE * 2),
            Parameter::PhysicalBlockSize,
        ),
        (
            b().timeout(limits::MAX_TIMEOUT),
            b().timeout(limits::MAX_TIMEOUT + ms),
            Parameter::Timeout,
        ),
        (
            b().recover_timeout(limits::MAX_RECOVER_TIMEOUT),
            b().recover_timeout(limits::MAX_RECOVER_TIMEOUT + ms),
            Parameter::RecoverTimeout,
        ),
        (
            b().poll_time(limits::MAX_POLL_TIME),
            b().poll_time(limits::MAX_POLL_TIME + us),
            Parameter::PollTime,
        ),
        (
            b().name("a".repeat(limits::MAX_NAME_LEN)),
            b().name("a".repeat(limits::MAX_NAME_LEN + 1)),
            Parameter::Name,
        ),
    ] {
        assert!(accepted(at), "{param:?}");
        assert_eq!(invalid(past), param);
    }
    let zoned = |zones: u64, zone_size: u64| {
        let geometry = ZoneGeometry::new(zones * zone_size, zone_size).unwrap();
        DeviceBuilder::default()
            .logical_block_size(4096)
            .device_params(Capabilities::default(), Some(geometry))
            .map(drop)
    };
    let smallest = 2 * 4096;
    assert_eq!(zoned(u64::from(limits::MAX_ZONES), smallest), Ok(()));
    assert_eq!(
        zoned(u64::from(limits::MAX_ZONES) + 1, smallest),
        Err(Error::InvalidParameter(Parameter::ZoneCount))
    );
    assert_eq!(zoned(2, limits::MAX_ZONE_SIZE), Ok(()));
    assert_eq!(
        zoned(2, 2 * limits::MAX_ZONE_SIZE),
        Err(Error::InvalidParameter(Parameter::ZoneSize))
    );
}
