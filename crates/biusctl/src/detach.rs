//! `biusctl detach`: the daemon serving a device stops and exits without
//! destroying it, leaving it to `biusctl recover` (a graceful upgrade).
//! The request goes over the daemon's control socket
//! ([`bius::control_socket`]); the daemon's serving thread detaches
//! ([`bius::Device::detach`]).

use std::io::{self, Write};
use std::thread;
use std::time::{Duration, Instant};

use bius::control_socket::ControlClient;
use bius::DeviceState;

use crate::error::CliError;

/// How long `biusctl detach` waits for the device to be recovering.
const DETACH_WAIT: Duration = Duration::from_secs(10);

/// How often it looks.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Asks the daemon of `device` to detach, and waits until the device is
/// recovering (or already recovered by a successor).
pub fn run(device: &str) -> Result<(), CliError> {
    let id = crate::resolve(device)?;
    let info = bius::device_info(id)?;
    let Some(timeout) = info.recover_timeout else {
        return Err(bius::Error::NoRecovery { id }.into());
    };
    let path = info.path().ok_or_else(|| CliError::NoDisk(device.into()))?;
    ControlClient::connect_disk(&info.disk_name)
        .and_then(|mut client| client.detach())
        .map_err(CliError::Daemon)?;
    let deadline = Instant::now() + DETACH_WAIT;
    loop {
        let now = bius::device_info(id)?;
        if now.state == DeviceState::Recovering || now.owner_pid != info.owner_pid {
            break;
        }
        if Instant::now() >= deadline {
            return Err(CliError::NotDetached {
                device: device.into(),
                state: now.state,
            });
        }
        thread::sleep(POLL_INTERVAL);
    }
    let mut stdout = io::stdout().lock();
    writeln!(
        stdout,
        "{}: detached; it waits up to {} s for `biusctl recover {} BACKEND`",
        path.display(),
        timeout.as_secs_f64(),
        info.disk_name
    )
    .map_err(CliError::Stdout)
}
