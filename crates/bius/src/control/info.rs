//! What the kernel reports about devices, and the control operations on
//! devices by id: [`DeviceInfo`], [`DeviceState`];
//! [`list_devices`], [`device_info`], [`destroy_device`],
//! [`destroy_device_force`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bius_sys::{bius_device_info, bius_zoned_params};
use nix::errno::Errno;

use super::transfer::TransferMode;
use crate::block::Capabilities;
use crate::error::{ControlOp, Error};
use crate::kernel::Control;

/// The state of a device in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum DeviceState {
    /// Waiting for all queues to connect.
    Created,
    /// The disk is added and served.
    Live,
    /// Being removed.
    Stopping,
    /// Removed; waiting for its file descriptors to close.
    Dead,
    /// Its daemon was lost and it has a recovery timeout: the disk stays,
    /// its I/O waits until a new daemon recovers it
    /// ([`DeviceBuilder::recover`](crate::DeviceBuilder::recover)) or the
    /// timeout ends it.
    Recovering,
    /// A state this crate does not know.
    Unknown(u32),
}

impl DeviceState {
    pub(crate) fn from_raw(state: u32) -> Self {
        match state {
            bius_sys::BIUS_STATE_CREATED => DeviceState::Created,
            bius_sys::BIUS_STATE_LIVE => DeviceState::Live,
            bius_sys::BIUS_STATE_STOPPING => DeviceState::Stopping,
            bius_sys::BIUS_STATE_DEAD => DeviceState::Dead,
            bius_sys::BIUS_STATE_RECOVERING => DeviceState::Recovering,
            other => DeviceState::Unknown(other),
        }
    }
}

impl fmt::Display for DeviceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceState::Created => f.write_str("created"),
            DeviceState::Live => f.write_str("live"),
            DeviceState::Stopping => f.write_str("stopping"),
            DeviceState::Dead => f.write_str("dead"),
            DeviceState::Recovering => f.write_str("recovering"),
            DeviceState::Unknown(state) => write!(f, "unknown({state})"),
        }
    }
}

/// Everything the kernel reports about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DeviceInfo {
    /// The device id.
    pub id: u32,
    /// Its state.
    pub state: DeviceState,
    /// Queues connected so far.
    pub connected_queues: u32,
    /// Process id of the creator.
    pub owner_pid: i32,
    /// Name of the disk; empty until it is added.
    pub disk_name: String,
    /// Size in bytes.
    pub size: u64,
    /// Logical block size in bytes.
    pub logical_block_size: u32,
    /// Physical block size in bytes.
    pub physical_block_size: u32,
    /// Number of hardware queues.
    pub queues: u32,
    /// Of those, the last ones that serve polled I/O
    /// ([`DeviceBuilder::poll_queues`](crate::DeviceBuilder::poll_queues)).
    pub poll_queues: u32,
    /// Requests in flight per queue.
    pub queue_depth: u32,
    /// Largest I/O in bytes.
    pub max_io_size: u32,
    /// Request timeout.
    pub timeout: Duration,
    /// Announced capabilities.
    pub capabilities: Capabilities,
    /// How request data crosses the kernel boundary; `None` for a mode
    /// this crate does not know.
    pub transfer_mode: Option<TransferMode>,
    /// Bytes of each queue's data window (0 in copy mode).
    pub window_size: u64,
    /// How long a worker busy-waits for a request before it sleeps.
    pub poll_time: Duration,
    /// Requests whose data went through the data windows (map modes),
    /// since the device was created.
    pub mapped_requests: u64,
    /// Of those, requests passed as a segment list (buffers not aligned to
    /// each other).
    pub segmented_requests: u64,
    /// The zone geometry of a zoned device; `None` for a conventional one.
    pub zoned: Option<ZonedParams>,
    /// How long the device waits for a new daemon when its daemon is lost
    /// ([`DeviceBuilder::recover_timeout`](crate::DeviceBuilder::recover_timeout));
    /// `None` if it dies with its daemon.
    pub recover_timeout: Option<Duration>,
}

/// The zone geometry of a zoned device as the kernel reports it, in bytes,
/// with its defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ZonedParams {
    /// Zone size.
    pub zone_size: u64,
    /// Writable bytes of each zone.
    pub zone_capacity: u64,
    /// Leading conventional zones.
    pub conventional_zones: u32,
    /// Most zones open at once; 0 for no limit.
    pub max_open: u32,
    /// Most zones open or closed at once; 0 for no limit.
    pub max_active: u32,
    /// Largest zone append; 0 if the kernel emulates appends.
    pub max_append: u32,
    /// The kernel emulates zone append: the device takes no appends, the
    /// block layer writes them at the write pointer
    /// ([`DeviceBuilder::emulate_zone_append`](crate::DeviceBuilder::emulate_zone_append)).
    pub append_emulated: bool,
}

impl ZonedParams {
    fn from_raw(raw: &bius_zoned_params, features: u64) -> Self {
        ZonedParams {
            zone_size: raw.zone_size,
            zone_capacity: raw.zone_capacity,
            conventional_zones: raw.nr_conv_zones,
            max_open: raw.max_open_zones,
            max_active: raw.max_active_zones,
            max_append: raw.max_append_bytes,
            append_emulated: features & u64::from(bius_sys::BIUS_FEATURE_ZONE_APPEND_EMULATED) != 0,
        }
    }
}

impl DeviceInfo {
    pub(crate) fn from_raw(raw: &bius_device_info) -> Self {
        let p = &raw.params;
        DeviceInfo {
            id: raw.dev_id,
            state: DeviceState::from_raw(raw.state),
            connected_queues: raw.nr_connected,
            owner_pid: raw.owner_pid,
            disk_name: c_name(&raw.disk_name),
            size: p.size,
            logical_block_size: p.logical_block_size,
            physical_block_size: p.physical_block_size,
            queues: p.nr_hw_queues,
            poll_queues: p.nr_poll_queues,
            queue_depth: p.queue_depth,
            max_io_size: p.max_io_bytes,
            timeout: Duration::from_millis(p.timeout_ms.into()),
            capabilities: Capabilities::from_features(p.features),
            transfer_mode: TransferMode::from_raw(p.transfer_mode, p.map_threshold),
            window_size: raw.map_window_bytes,
            poll_time: Duration::from_micros(p.poll_usecs.into()),
            mapped_requests: raw.mapped_requests,
            segmented_requests: raw.segmented_requests,
            zoned: (p.features & u64::from(bius_sys::BIUS_FEATURE_ZONED) != 0)
                .then(|| ZonedParams::from_raw(&p.zoned, p.features)),
            recover_timeout: (p.recover_timeout_ms > 0)
                .then(|| Duration::from_millis(p.recover_timeout_ms.into())),
        }
    }

    /// The disk's path, `/dev/<disk_name>`, once it is added.
    pub fn path(&self) -> Option<PathBuf> {
        (!self.disk_name.is_empty()).then(|| Path::new("/dev").join(&self.disk_name))
    }
}

/// A NUL-terminated name from the kernel.
pub(crate) fn c_name(raw: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The ids and states of all devices.
pub fn list_devices() -> Result<Vec<DeviceInfo>, Error> {
    let control = Control::open().map_err(Error::from_open)?;
    let ids = control
        .list()
        .map_err(|errno| Error::from_kernel(ControlOp::List, 0, errno))?;
    let mut devices = Vec::with_capacity(ids.len());
    for id in ids {
        match control.info(id) {
            Ok(raw) => devices.push(DeviceInfo::from_raw(&raw)),
            // Destroyed between listing and asking.
            Err(Errno::ENOENT | Errno::ENODEV) => {}
            Err(errno) => return Err(Error::from_kernel(ControlOp::GetInfo, id, errno)),
        }
    }
    Ok(devices)
}

/// Everything about device `id`.
pub fn device_info(id: u32) -> Result<DeviceInfo, Error> {
    let control = Control::open().map_err(Error::from_open)?;
    info_via(&control, id)
}

/// Stops and removes device `id`, gracefully: the kernel removes the
/// disk, flushing it.  Fails with [`Error::Busy`] while the disk is open
/// ([`destroy_device_force`] does not).
pub fn destroy_device(id: u32) -> Result<(), Error> {
    let control = Control::open().map_err(Error::from_open)?;
    destroy_via(&control, id, false)
}

/// Stops and removes device `id` even if its disk is open
/// (`BIUS_DESTROY_FORCE`): its requests fail with I/O errors from then on.
pub fn destroy_device_force(id: u32) -> Result<(), Error> {
    let control = Control::open().map_err(Error::from_open)?;
    destroy_via(&control, id, true)
}

pub(crate) fn info_via(control: &Control, id: u32) -> Result<DeviceInfo, Error> {
    control
        .info(id)
        .map(|raw| DeviceInfo::from_raw(&raw))
        .map_err(|errno| Error::from_kernel(ControlOp::GetInfo, id, errno))
}

pub(crate) fn destroy_via(control: &Control, id: u32, force: bool) -> Result<(), Error> {
    let flags = if force {
        bius_sys::BIUS_DESTROY_FORCE
    } else {
        0
    };
    control
        .destroy(id, flags)
        .map_err(|errno| Error::from_kernel(ControlOp::Destroy, id, errno))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_print_lowercase() {
        let states = [0, 1, 2, 3, 4, 9].map(|raw| DeviceState::from_raw(raw).to_string());
        assert_eq!(
            states,
            [
                "created",
                "live",
                "stopping",
                "dead",
                "recovering",
                "unknown(9)"
            ]
        );
    }

    #[test]
    fn the_recover_timeout_is_decoded() {
        let mut raw = bius_device_info {
            state: bius_sys::BIUS_STATE_RECOVERING,
            ..Default::default()
        };
        let info = DeviceInfo::from_raw(&raw);
        assert_eq!(info.state, DeviceState::Recovering);
        assert_eq!(info.recover_timeout, None);
        raw.params.recover_timeout_ms = 30_000;
        let info = DeviceInfo::from_raw(&raw);
        assert_eq!(info.recover_timeout, Some(Duration::from_secs(30)));
    }
}
