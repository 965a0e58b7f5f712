//! `biusctl recover`: `create`'s options and backends, with the settings
//! not given taken from the recovering device, then served as `create`
//! serves a new one.

use std::time::Duration;

use bius::zone::ZoneGeometry;
use bius::{DeviceBuilder, DeviceInfo};

use crate::cli::{Backend, CreateArgs, RecoverArgs, ZoneArgs};
use crate::create;
use crate::error::CliError;
use crate::values::{Bytes, PowerOfTwo, Ranged, Transfer};

/// Recovers the device and serves it until a signal.
pub fn recover(args: RecoverArgs) -> Result<(), CliError> {
    let id = crate::resolve(&args.device)?;
    let info = bius::device_info(id)?;
    let (create, backend) = create::checked(with_device(create::merged(args.create)?, &info))?;
    if backend == Backend::Ramdisk {
        log::warn!(
            "{}: the data of a RAM disk died with its daemon: the recovered disk starts empty",
            args.device
        );
    }
    create::create(create, backend)
}

/// `args` (merged with its config file) with every setting it leaves out
/// taken from the device as the framework recovers it
/// ([`DeviceBuilder::from_info`]), set to recover it; a zoned device's
/// geometry from what the kernel reports of its zones.
fn with_device(args: CreateArgs, info: &DeviceInfo) -> CreateArgs {
    let device = DeviceBuilder::from_info(info);
    let zoned = info.zoned;
    let geometry = zoned.as_ref().and_then(|params| {
        ZoneGeometry::from_params(info.size, params)
            .inspect_err(|err| log::warn!("the device's zones are no geometry: {err}"))
            .ok()
    });
    let zone = |bytes: fn(&ZoneGeometry) -> u64| geometry.as_ref().map(|g| Bytes(bytes(g)));
    let limit = |value: fn(&ZoneGeometry) -> u32| geometry.as_ref().map(value);
    let name = device.get_name();
    CreateArgs {
        // (a zoned device's size is its geometry's)
        size: args
            .size
            .or(Some(Bytes(device.get_size().unwrap_or(info.size)))),
        queues: args.queues.or(Some(Ranged(device.get_queues()))),
        poll_queues: args.poll_queues.or(Some(Ranged(device.get_poll_queues()))),
        depth: args.depth.or(Some(Ranged(device.get_queue_depth()))),
        block_size: args
            .block_size
            .or(Some(PowerOfTwo(device.get_logical_block_size()))),
        physical_block_size: args
            .physical_block_size
            .or(Some(PowerOfTwo(device.get_physical_block_size()))),
        max_io: args.max_io.or(Some(Bytes(device.get_max_io_size().into()))),
        timeout: args.timeout.or_else(|| whole_secs(device.get_timeout())),
        recover_timeout: args
            .recover_timeout
            .or_else(|| device.get_recover_timeout().and_then(whole_secs)),
        name: args
            .name
            .or_else(|| (!name.is_empty()).then(|| name.to_owned())),
        read_only: args.read_only || device.get_read_only(),
        transfer: args.transfer.or(Some(Transfer(device.get_transfer_mode()))),
        poll_us: args
            .poll_us
            .or(u32::try_from(device.get_poll_time().as_micros())
                .ok()
                .map(Ranged)),
        zones: ZoneArgs {
            zoned: args.zones.zoned || zoned.is_some(),
            zone_size: args.zones.zone_size.or(zone(ZoneGeometry::zone_size)),
            zone_capacity: args
                .zones
                .zone_capacity
                .or(zone(ZoneGeometry::zone_capacity)),
            conv_zones: args
                .zones
                .conv_zones
                .or(limit(ZoneGeometry::conventional_zones)),
            max_open: args.zones.max_open.or(limit(ZoneGeometry::max_open)),
            max_active: args.zones.max_active.or(limit(ZoneGeometry::max_active)),
            max_append: args.zones.max_append.or(zone(ZoneGeometry::max_append)),
            emulate_append: args.zones.emulate_append || device.get_emulate_zone_append(),
            ..args.zones
        },
        recover: Some(info.id),
        ..args
    }
}

/// `time` in seconds, if whole (else `None`: the option's default, which
/// the recovery then refuses, naming the device's time).
fn whole_secs<const MIN: u32, const MAX: u32>(time: Duration) -> Option<Ranged<MIN, MAX>> {
    if time.subsec_nanos() != 0 {
        return None;
    }
    u32::try_from(time.as_secs()).ok().map(Ranged)
}

/// A parameter of `biusctl recover` that differs from the device's, named
/// by its option (`--size 2G: ...`); a difference no option makes (the
/// backend's features) stays the framework's error.
pub fn mismatch(err: bius::Error) -> CliError {
    let bius::Error::Mismatch {
        id,
        field,
        device,
        given,
    } = &err
    else {
        return CliError::Bius(err);
    };
    let option = match *field {
        "size" => "--size",
        "logical_block_size" => "--block-size",
        "physical_block_size" => "--physical-block-size",
        "nr_hw_queues" => "--queues",
        "nr_poll_queues" => "--poll-queues",
        "queue_depth" => "--depth",
        "max_io_bytes" => "--max-io",
        "timeout_ms" => "--timeout",
        "recover_timeout_ms" => "--recover-timeout",
        "transfer_mode" | "map_threshold" => "--transfer",
        "name" => "--name",
        "zone_size" => "--zone-size",
        "zone_capacity" => "--zone-capacity",
        "nr_conv_zones" => "--conv-zones",
        "max_open_zones" => "--max-open",
        "max_active_zones" => "--max-active",
        "max_append_bytes" => "--max-append",
        _ => return CliError::Bius(err),
    };
    CliError::Invalid {
        option,
        value: given.clone(),
        reason: format!(
            "device {id} has {field} {device}; a recovery serves the device as it is (leave the option out)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use bius::{Capabilities, DeviceState, TransferMode, ZonedParams};

    use super::*;
    use crate::cli::create_args;

    fn device() -> DeviceInfo {
        DeviceInfo {
            id: 3,
            state: DeviceState::Recovering,
            connected_queues: 0,
            owner_pid: 42,
            disk_name: "data".into(),
            size: 1 << 30,
            logical_block_size: 4096,
            physical_block_size: 4096,
            queues: 2,
            poll_queues: 1,
            queue_depth: 64,
            max_io_size: 512 << 10,
            timeout: Duration::from_secs(20),
            capabilities: Capabilities {
                read_only: true,
                ..Capabilities::default()
            },
            transfer_mode: Some(TransferMode::Map),
            window_size: 0,
            poll_time: Duration::from_micros(50),
            mapped_requests: 0,
            segmented_requests: 0,
            zoned: Some(ZonedParams {
                zone_size: 64 << 20,
                zone_capacity: 48 << 20,
                conventional_zones: 1,
                max_open: 0,
                max_active: 6,
                max_append: 512 << 10,
                append_emulated: false,
            }),
            recover_timeout: Some(Duration::from_secs(30)),
        }
    }

    #[test]
    fn settings_not_given_come_from_the_device() {
        let args = with_device(create_args(&["ramdisk"]), &device());
        assert_eq!(args.recover, Some(3));
        assert_eq!(args.size, Some(Bytes(1 << 30)));
        assert_eq!(
            (args.queues, args.depth),
            (Some(Ranged(2)), Some(Ranged(64)))
        );
        assert_eq!(args.block_size, Some(PowerOfTwo(4096)));
        assert_eq!(args.max_io, Some(Bytes(512 << 10)));
        assert_eq!(args.timeout, Some(Ranged(20)));
        assert_eq!(args.recover_timeout, Some(Ranged(30)));
        assert_eq!(args.name.as_deref(), Some("data"));
        assert!(args.read_only && args.zones.zoned);
        assert_eq!(args.transfer, Some(Transfer(TransferMode::Map)));
        assert_eq!(args.poll_us, Some(Ranged(50)));
        assert_eq!(args.poll_queues, Some(Ranged(1)));
        assert_eq!(args.zones.zone_capacity, Some(Bytes(48 << 20)));
        assert_eq!(
            (
                args.zones.conv_zones,
                args.zones.max_open,
                args.zones.max_active
            ),
            (Some(1), Some(0), Some(6))
        );
        assert_eq!(args.zones.max_append, Some(Bytes(512 << 10)));
        assert!(!args.zones.emulate_append);
        // A device whose appends the kernel emulates is recovered so.
        let mut emulated = device();
        emulated.zoned = emulated.zoned.map(|z| ZonedParams {
            max_append: 0,
            append_emulated: true,
            ..z
        });
        let args = with_device(create_args(&["ramdisk"]), &emulated);
        assert!(args.zones.emulate_append);
        // (no largest append: the zone size, which emulation wants)
        assert_eq!(args.zones.max_append, Some(Bytes(64 << 20)));
        // The given ones are kept, for the recovery to check.
        let args = with_device(
            create_args(&["-q", "4", "--timeout", "5", "null"]),
            &device(),
        );
        assert_eq!(
            (args.queues, args.timeout),
            (Some(Ranged(4)), Some(Ranged(5)))
        );
        // A time of no whole seconds is left to the check.
        let mut odd = device();
        odd.timeout = Duration::from_millis(2500);
        assert_eq!(with_device(create_args(&["null"]), &odd).timeout, None);
    }

    #[test]
    fn a_difference_is_named_by_its_option() {
        let err = mismatch(bius::Error::Mismatch {
            id: 3,
            field: "queue_depth",
            device: "64".into(),
            given: "128".into(),
        });
        assert_eq!(
            err.to_string(),
            "--depth 128: device 3 has queue_depth 64; a recovery serves the device as it is (leave the option out)"
        );
        assert_eq!(err.exit_status(), crate::error::EXIT_USAGE);
        let features = bius::Error::Mismatch {
            id: 3,
            field: "features",
            device: "write_cache".into(),
            given: "none".into(),
        };
        assert!(matches!(mismatch(features), CliError::Bius(_)));
    }
}
