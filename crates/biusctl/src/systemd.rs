//! Readiness for systemd (`Type=notify`): when `NOTIFY_SOCKET` is set,
//! `READY=1` once the disk is live, `STOPPING=1` when a signal starts the
//! stop.  Without `NOTIFY_SOCKET` nothing is sent.

use std::path::Path;
use std::thread;

use sd_notify::NotifyState;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Whether a service manager listens.
fn supervised() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// Tells the service manager that the disk `path` is served, and watches
/// for the signals that stop it (the framework's handlers act on them too).
pub fn ready(path: &Path) {
    if !supervised() {
        return;
    }
    let status = format!("serving {}", path.display());
    notify(&[
        NotifyState::Ready,
        NotifyState::Status(&status),
        NotifyState::MainPid(std::process::id()),
    ]);
    match Signals::new([SIGINT, SIGTERM]) {
        Ok(mut signals) => {
            thread::spawn(move || {
                if signals.forever().next().is_some() {
                    notify(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
                }
            });
        }
        Err(err) => log::warn!("systemd will not hear of the stop: {err}"),
    }
}

fn notify(states: &[NotifyState]) {
    if let Err(err) = sd_notify::notify(states) {
        log::warn!("cannot notify systemd: {err}");
    }
}
