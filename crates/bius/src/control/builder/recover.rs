//! Recovery: a builder that takes over a device whose daemon was lost
//! ([`DeviceBuilder::recover`], [`DeviceBuilder::from_device`]), and the
//! check of its parameters against the device's before
//! `BIUS_IOC_RECOVER_DEVICE`.

use std::time::Duration;

use bius_sys::{bius_device_info, bius_device_params};
use nix::errno::Errno;

use super::DeviceBuilder;
use crate::block::feature_names;
use crate::control::info::{c_name, device_info, DeviceInfo, DeviceState};
use crate::error::{ControlOp, Error};
use crate::kernel::Control;

/// What starting a builder's device does: create a new device, or recover
/// an existing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Target {
    /// `BIUS_IOC_CREATE_DEVICE`.
    #[default]
    Create,
    /// `BIUS_IOC_RECOVER_DEVICE` of this device id.
    Recover(u32),
}

impl Target {
    /// Creates or recovers the device of `params` through `control`, which
    /// becomes its owner; its id.  A recovery first checks that the device
    /// waits for one and that `params` describe it.
    pub(crate) fn open(
        self,
        control: &Control,
        params: &mut bius_device_params,
    ) -> Result<u32, Error> {
        let id = match self {
            Target::Create => {
                control
                    .create(params)
                    .map_err(|errno| Error::from_kernel(ControlOp::Create, 0, errno))?;
                return Ok(params.dev_id);
            }
            Target::Recover(id) => id,
        };
        let failed = |errno| Error::from_kernel(ControlOp::Recover, id, errno);
        let info = control.info(id).map_err(failed)?;
        match DeviceState::from_raw(info.state) {
            state @ (DeviceState::Created | DeviceState::Live) => {
                return Err(Error::RecoverBusy {
                    id,
                    state: Some(state),
                })
            }
            DeviceState::Stopping | DeviceState::Dead => return Err(failed(Errno::ENODEV)),
            // (an unknown state: the kernel decides)
            DeviceState::Recovering | DeviceState::Unknown(_) => {}
        }
        params.dev_id = id;
        compare(&info, params)?;
        // Checked: "" is the one name the kernel takes whatever it reports.
        params.name = [0; bius_sys::BIUS_NAME_LEN as usize];
        control.recover(params).map_err(failed)?;
        Ok(id)
    }
}

impl DeviceBuilder {
    /// Makes [`create`](DeviceBuilder::create) and
    /// [`create_deferred`](DeviceBuilder::create_deferred) recover device
    /// `id` instead of creating one: take over a device whose daemon was
    /// lost ([`DeviceState::Recovering`]), serving it with the given
    /// device from where the lost daemon left it.  The device's requests
    /// held meanwhile then go out, those the lost daemon had read first,
    /// marked as replayed.
    ///
    /// The parameters must describe the device as it is: every one equal
    /// to what [`device_info`] reports (defaults applied), except the name
    /// (empty, or the disk's) and the [poll time](DeviceBuilder::poll_time);
    /// the capabilities of the device served, too.  A difference is refused
    /// before asking the kernel, with [`Error::Mismatch`] naming it.
    /// [`DeviceBuilder::from_device`] starts from the device's own
    /// parameters.  A device that is not recovering is refused with
    /// [`Error::RecoverBusy`].  If the recovery fails after the kernel
    /// accepted it, the device is left recovering, for another attempt.
    pub fn recover(mut self, id: u32) -> Self {
        self.target = Target::Recover(id);
        self
    }

    /// A builder recovering device `id` ([`DeviceBuilder::recover`]) with
    /// the parameters the kernel reports for it: its size (a conventional
    /// device's; a zoned one's is its geometry's), block sizes,
    /// queues and poll queues, largest I/O, timeouts, name, transfer mode, poll time,
    /// read-only flag and emulated zone append.  The zone geometry of a zoned device comes from the
    /// device served (see [`DeviceInfo::zoned`]).
    ///
    /// ```no_run
    /// use bius::{BlockDevice, DeviceBuilder};
    ///
    /// /// Serves device `id`, whose daemon died, with `disk` (holding the
    /// /// data the dead daemon wrote, e.g. the same file).
    /// fn take_over(id: u32, disk: impl BlockDevice) -> Result<(), bius::Error> {
    ///     let device = DeviceBuilder::from_device(id)?.create(disk)?;
    ///     device.run_until_signal()
    /// }
    /// ```
    pub fn from_device(id: u32) -> Result<Self, Error> {
        Ok(Self::from_info(&device_info(id)?))
    }

    /// The builder of [`DeviceBuilder::from_device`], from what the kernel
    /// reported of the device ([`device_info`]): the one place that says
    /// which of a device's settings a recovery repeats, and how.
    ///
    /// ```
    /// use bius::{DeviceBuilder, DeviceInfo};
    ///
    /// /// The queues a recovery of `device` serves.
    /// fn queues(device: &DeviceInfo) -> u32 {
    ///     DeviceBuilder::from_info(device).get_queues()
    /// }
    /// ```
    pub fn from_info(info: &DeviceInfo) -> Self {
        DeviceBuilder {
            logical_block_size: info.logical_block_size,
            physical_block_size: info.physical_block_size,
            queues: Some(info.queues),
            poll_queues: info.poll_queues,
            queue_depth: info.queue_depth,
            max_io_size: info.max_io_size,
            timeout: (!info.timeout.is_zero()).then_some(info.timeout),
            name: info.disk_name.clone(),
            read_only: info.capabilities.read_only,
            // (an unknown mode: the check names it)
            transfer_mode: info.transfer_mode.unwrap_or_default(),
            poll_time: info.poll_time,
            recover_timeout: info.recover_timeout,
            emulate_zone_append: info.zoned.is_some_and(|z| z.append_emulated),
            // (a zoned device's size is its geometry's)
            size: info.zoned.is_none().then_some(info.size),
            ..DeviceBuilder::default().recover(info.id)
        }
    }
}

/// The fields of `params` that a recovery must repeat, named as in
/// `struct bius_device_params`, each as shown in an [`Error::Mismatch`].
fn fields(p: &bius_device_params) -> [(&'static str, String); 18] {
    let mode = match p.transfer_mode {
        bius_sys::BIUS_TRANSFER_COPY => "copy".to_string(),
        bius_sys::BIUS_TRANSFER_MAP => "map".into(),
        bius_sys::BIUS_TRANSFER_SELECTIVE => "selective".into(),
        other => format!("unknown({other})"),
    };
    let ms = |ms: u32| format!("{:?}", Duration::from_millis(ms.into()));
    let z = &p.zoned;
    [
        ("size", p.size.to_string()),
        ("logical_block_size", p.logical_block_size.to_string()),
        ("physical_block_size", p.physical_block_size.to_string()),
        ("nr_hw_queues", p.nr_hw_queues.to_string()),
        ("nr_poll_queues", p.nr_poll_queues.to_string()),
        ("queue_depth", p.queue_depth.to_string()),
        ("max_io_bytes", p.max_io_bytes.to_string()),
        ("timeout_ms", ms(p.timeout_ms)),
        ("features", feature_names(p.features)),
        ("transfer_mode", mode),
        ("map_threshold", p.map_threshold.to_string()),
        ("recover_timeout_ms", ms(p.recover_timeout_ms)),
        ("zone_size", z.zone_size.to_string()),
        ("zone_capacity", z.zone_capacity.to_string()),
        ("nr_conv_zones", z.nr_conv_zones.to_string()),
        ("max_open_zones", z.max_open_zones.to_string()),
        ("max_active_zones", z.max_active_zones.to_string()),
        ("max_append_bytes", z.max_append_bytes.to_string()),
    ]
}

/// Checks that `given` describes the device `info` reports, as the kernel
/// checks a `RECOVER_DEVICE`: [`Error::Mismatch`] names the first
/// difference.
fn compare(info: &bius_device_info, given: &bius_device_params) -> Result<(), Error> {
    // (both explicit: the kernel reports its defaults applied, and the
    // builder fills them in)
    let id = info.dev_id;
    let device = &info.params;
    let mismatch = |field, device: String, given: String| Error::Mismatch {
        id,
        field,
        device,
        given,
    };
    if let Some(((field, device), (_, given))) = fields(device)
        .into_iter()
        .zip(fields(given))
        .find(|((_, device), (_, given))| device != given)
    {
        return Err(mismatch(field, device, given));
    }
    let name = c_name(&given.name);
    let device_name = match c_name(&device.name) {
        name if name.is_empty() => c_name(&info.disk_name),
        name => name,
    };
    if !name.is_empty() && name != device_name {
        return Err(mismatch("name", device_name, name));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::block::Capabilities;
    use crate::control::transfer::TransferMode;
    use crate::zone::ZoneGeometry;

    /// What `GET_INFO` reports about a device created from `params` (the
    /// builder's, whose defaults are filled in: the kernel applies none).
    fn reported(id: u32, params: &bius_device_params) -> bius_device_info {
        let mut info = bius_device_info {
            dev_id: id,
            state: bius_sys::BIUS_STATE_RECOVERING,
            params: *params,
            ..Default::default()
        };
        info.params.dev_id = id;
        for (dst, src) in info.disk_name.iter_mut().zip(b"bius3") {
            *dst = *src as _;
        }
        info
    }

    /// The parameters of `builder`'s conventional device.
    fn conventional(builder: &DeviceBuilder, caps: Capabilities) -> bius_device_params {
        builder.device_params(caps, None).unwrap().0
    }

    fn caps() -> Capabilities {
        Capabilities {
            write_cache: true,
            discard: true,
            ..Capabilities::default()
        }
    }

    #[test]
    fn the_builder_s_parameters_match_as_the_kernel_reports_them() {
        let builder = DeviceBuilder::new(1 << 30)
            .queues(4)
            .transfer_mode(TransferMode::Selective { threshold: 0 })
            .recover_timeout(Duration::from_secs(30));
        let params = conventional(&builder, caps());
        // The kernel's defaults, filled in as the kernel fills them.
        assert_eq!(
            (params.physical_block_size, params.max_io_bytes),
            (512, bius_sys::BIUS_DEFAULT_MAX_IO_BYTES)
        );
        assert_eq!(params.timeout_ms, bius_sys::BIUS_DEFAULT_TIMEOUT_MS);
        assert_eq!(params.map_threshold, bius_sys::BIUS_DEFAULT_MAP_THRESHOLD);
        let small = conventional(&builder.clone().max_io_size(64 << 10), caps());
        assert_eq!(small.map_threshold, 64 << 10);
        let info = reported(3, &params);
        assert_eq!(compare(&info, &params), Ok(()));

        // The device's own parameters, as from_device reads them, match.
        let again = DeviceBuilder::from_info(&DeviceInfo::from_raw(&info));
        assert_eq!(again.target, Target::Recover(3));
        assert_eq!(compare(&info, &conventional(&again, caps())), Ok(()));
        // ... except for another poll time, which may differ.
        let polled = again.clone().poll_time(Duration::from_micros(50));
        assert_eq!(compare(&info, &conventional(&polled, caps())), Ok(()));
    }

    #[test]
    fn a_difference_is_named_with_both_values() {
        let builder = DeviceBuilder::new(1 << 30)
            .queues(1)
            .recover_timeout(Duration::from_secs(30));
        let info = reported(3, &conventional(&builder, caps()));
        let refused = |builder: DeviceBuilder, caps: Capabilities| {
            compare(&info, &conventional(&builder, caps)).unwrap_err()
        };
        let err = refused(builder.clone().queue_depth(64), caps());
        assert_eq!(
            err,
            Error::Mismatch {
                id: 3,
                field: "queue_depth",
                device: "128".into(),
                given: "64".into()
            }
        );
        assert_eq!(err.errno(), Errno::EINVAL);
        let mut larger = builder.clone();
        larger.size = Some(2 << 30);
        assert_eq!(
            refused(larger, caps()).to_string(),
            "recovering the device: device 3 has size 1073741824, the parameters give 2147483648 (EINVAL)"
        );
        let err = refused(builder.clone(), Capabilities::default());
        assert!(
            matches!(&err, Error::Mismatch { field: "features", device, given, .. }
                if device == "write_cache,discard" && given == "none"),
            "{err:?}"
        );
        let err = refused(
            builder.clone().recover_timeout(Duration::from_secs(5)),
            caps(),
        );
        assert!(
            matches!(&err, Error::Mismatch { field: "recover_timeout_ms", device, given, .. }
                if device == "30s" && given == "5s"),
            "{err:?}"
        );
        let err = refused(builder.clone().queues(2).poll_queues(1), caps());
        assert!(
            matches!(
                &err,
                Error::Mismatch {
                    field: "nr_hw_queues",
                    ..
                }
            ),
            "{err:?}"
        );
        let polled = DeviceBuilder::new(1 << 30).queues(2).poll_queues(1);
        let polled_info = reported(3, &conventional(&polled, caps()));
        let err = compare(
            &polled_info,
            &conventional(&polled.clone().poll_queues(0), caps()),
        )
        .unwrap_err();
        assert!(
            matches!(&err, Error::Mismatch { field: "nr_poll_queues", device, given, .. }
                if device == "1" && given == "0"),
            "{err:?}"
        );
        let again = DeviceBuilder::from_info(&DeviceInfo::from_raw(&polled_info));
        assert_eq!(again.get_poll_queues(), 1);
        let err = refused(builder.clone().name("other"), caps());
        assert!(
            matches!(&err, Error::Mismatch { field: "name", device, given, .. }
                if device == "bius3" && given == "other"),
            "{err:?}"
        );
        assert_eq!(
            compare(&info, &conventional(&builder.name("bius3"), caps())),
            Ok(())
        );
    }

    #[test]
    fn zone_geometries_are_compared_normalised() {
        let builder = DeviceBuilder::new(64 << 20).recover_timeout(Duration::from_secs(1));
        let unlimited = ZoneGeometry::new(64 << 20, 4 << 20).unwrap();
        let (params, _) = builder
            .zoned_params(caps(), unlimited.with_max_open(1000))
            .unwrap();
        let info = reported(1, &params);
        // A limit of at least the zones means none, either way.
        let (same, _) = builder.zoned_params(caps(), unlimited).unwrap();
        assert_eq!(compare(&info, &same), Ok(()));
        let smaller = ZoneGeometry::new(64 << 20, 2 << 20).unwrap();
        let (other, _) = builder.zoned_params(caps(), smaller).unwrap();
        assert!(matches!(
            compare(&info, &other),
            Err(Error::Mismatch {
                field: "zone_size",
                ..
            })
        ));
        // A conventional device is not a zoned one.
        let err = compare(&info, &conventional(&builder, caps())).unwrap_err();
        assert!(
            matches!(&err, Error::Mismatch { field: "features", device, given, .. }
                if device == "write_cache,discard,zoned" && given == "write_cache,discard"),
            "{err:?}"
        );
    }

    #[test]
    fn emulated_zone_append_is_kept_and_compared() {
        let builder = DeviceBuilder::new(64 << 20)
            .recover_timeout(Duration::from_secs(1))
            .emulate_zone_append(true);
        let geometry = ZoneGeometry::new(64 << 20, 4 << 20).unwrap();
        let (params, _) = builder.zoned_params(caps(), geometry).unwrap();
        let info = reported(1, &params);
        // The kernel's default does not fill in a largest append.
        assert_eq!(info.params.zoned.max_append_bytes, 0);
        assert_eq!(compare(&info, &params), Ok(()));
        let again = DeviceBuilder::from_info(&DeviceInfo::from_raw(&info));
        assert!(again.get_emulate_zone_append());
        let (same, _) = again.zoned_params(caps(), geometry).unwrap();
        assert_eq!(compare(&info, &same), Ok(()));
        let native = builder.emulate_zone_append(false);
        let (other, _) = native.zoned_params(caps(), geometry).unwrap();
        let err = compare(&info, &other).unwrap_err();
        assert!(
            matches!(&err, Error::Mismatch { field: "features", device, given, .. }
                if device == "write_cache,discard,zoned,zone_append_emulated"
                    && given == "write_cache,discard,zoned"),
            "{err:?}"
        );
    }

    #[test]
    fn feature_names_include_unknown_bits() {
        assert_eq!(feature_names(0), "none");
        assert_eq!(
            feature_names(u64::from(bius_sys::BIUS_FEATURE_FUA) | 1 << 40),
            "fua,0x10000000000"
        );
    }
}
