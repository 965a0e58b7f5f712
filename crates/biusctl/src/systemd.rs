//! Readiness for systemd (`Type=notify`): when `NOTIFY_SOCKET` is set,
//! `READY=1` once the disk is live, `STOPPING=1` when a signal starts the
//! stop.  Without `NOTIFY_SOCKET` nothing is sent.

use std::path::Path;

use sd_notify::NotifyState;

/// Tells the service manager that the disk `path` is served.
pub fn ready(path: &Path) {
    let status = format!("serving {}", path.display());
    notify(&[
        NotifyState::Ready,
        NotifyState::Status(&status),
        NotifyState::MainPid(std::process::id()),
    ]);
}

/// Tells the service manager that the device is stopping (the framework
/// calls it as a signal starts the stop).
pub fn stopping() {
    notify(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// Sends `states` if a service manager listens (sd_notify does nothing
/// without `NOTIFY_SOCKET`).
fn notify(states: &[NotifyState]) {
    if let Err(err) = sd_notify::notify(states) {
        log::warn!("cannot notify systemd: {err}");
    }
}
