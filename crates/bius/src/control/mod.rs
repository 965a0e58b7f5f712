//! Creating, serving, querying and stopping devices through `/dev/bius`:
//! the [`builder`] checks a new device's parameters and starts it, the
//! running [`device`] serves it until a signal or a stop, [`info`]
//! reads what the kernel reports about devices and destroys them by id,
//! and [`transfer`] is how request data crosses the kernel boundary.

pub(crate) mod builder;
pub(crate) mod device;
mod flusher;
pub(crate) mod info;
mod sched;
pub(crate) mod transfer;

pub use builder::DeviceBuilder;
pub use device::{Detacher, Device};
pub use flusher::IoFlusherScope;
pub use info::{
    destroy_device, destroy_device_force, device_info, list_devices, DeviceInfo, DeviceState,
    ZonedParams,
};
pub use sched::Scheduling;
pub use transfer::TransferMode;
