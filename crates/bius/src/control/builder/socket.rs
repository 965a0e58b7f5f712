//! The control socket every device serves unless told not to (cargo
//! feature `control-socket`, on by default): [`DeviceBuilder::control_socket`]
//! and [`DeviceBuilder::control_extension`].

use std::fmt;
use std::sync::Arc;

use super::DeviceBuilder;
use crate::control::device::Device;
use crate::control_socket::{ControlExtension, ControlSocket};

/// What a device answers on its control socket, if it serves one.
#[derive(Clone)]
pub(super) struct Served(Option<Arc<dyn ControlExtension>>);

impl Default for Served {
    /// Served, without an extension.
    fn default() -> Self {
        Served(Some(Arc::new(())))
    }
}

impl fmt::Debug for Served {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "served"
        } else {
            "not served"
        })
    }
}

impl DeviceBuilder {
    /// Whether the device serves its control socket,
    /// [`/run/bius/<disk>.sock`](crate::control_socket::socket_path)
    /// (default: yes), from the moment it is live until it stops or is
    /// detached: `biusctl stats`, `trace`, `info` and `detach` then work on
    /// it as on a disk of `biusctl create`.  A socket that cannot be made
    /// (no `/run/bius` for this user) is logged, and the device serves
    /// without.  Off, the program may serve one of its own
    /// ([`ControlSocket`]).
    ///
    /// ```
    /// let builder = bius::DeviceBuilder::new(1 << 30).control_socket(false);
    /// ```
    pub fn control_socket(mut self, serve: bool) -> Self {
        self.control_socket = if serve {
            Served::default()
        } else {
            Served(None)
        };
        self
    }

    /// Serves the control socket with the daemon's `extension`, which
    /// answers faults and the model (`biusctl fault`, the model report of
    /// `biusctl info`); without one they are refused as unsupported.
    pub fn control_extension(mut self, extension: impl ControlExtension) -> Self {
        self.control_socket = Served(Some(Arc::new(extension)));
        self
    }

    /// The control socket of the live `device`, if it is to have one and
    /// it could be made.
    pub(super) fn serve_control_socket(&self, device: &Device) -> Option<ControlSocket> {
        let extension = self.control_socket.0.as_ref()?;
        ControlSocket::serve_with(device, Arc::clone(extension))
            .inspect_err(|err| {
                log::warn!(
                    "{}: no control socket (biusctl stats, trace, info, detach): {err}",
                    device.disk_name()
                );
            })
            .ok()
    }
}
