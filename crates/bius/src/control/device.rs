//! A running device: [`Device`], the [`Doorbell`] that wakes the thread
//! serving it until a signal ([`Device::run_until_signal`]), and the
//! [`Detacher`] that asks that thread to leave the device to recovery.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::info::{destroy_via, device_info, info_via, DeviceInfo, DeviceState};
use crate::error::Error;
use crate::kernel::Control;
use crate::stats::Statistics;

/// How often [`DeviceBuilder::create`] polls for the device to go live.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// What wakes the thread in [`Device::run_until_signal`]: a byte on a
/// socket pair, sent by the SIGINT and SIGTERM handlers and by each worker
/// thread as it ends.  That thread sleeps in `read()` until then, so a
/// served device costs no wake-ups of its own.
pub(crate) struct Doorbell {
    bell: UnixStream,
    button: UnixStream,
    /// Worker threads whose [`Ringer`] has been dropped.
    ended: Arc<AtomicUsize>,
}

/// Counts its worker as ended and rings its [`Doorbell`], when dropped.
pub(crate) struct Ringer {
    button: UnixStream,
    ended: Arc<AtomicUsize>,
}

impl Drop for Ringer {
    fn drop(&mut self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
        // Non-blocking: a full socket already wakes the waiting thread.
        let _ = self.button.write(&[1]);
    }
}

impl Doorbell {
    pub(crate) fn new() -> io::Result<Self> {
        let (bell, button) = UnixStream::pair()?;
        // (shared by every clone of the button; the bell still blocks)
        button.set_nonblocking(true)?;
        Ok(Doorbell {
            bell,
            button,
            ended: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// A ringer for a worker thread to drop as it ends.
    pub(crate) fn ringer(&self) -> io::Result<Ringer> {
        Ok(Ringer {
            button: self.button.try_clone()?,
            ended: Arc::clone(&self.ended),
        })
    }

    /// How many workers have ended.
    fn ended(&self) -> usize {
        self.ended.load(Ordering::SeqCst)
    }

    /// Rings the bell on `signal` (and sets `flag`) until the returned ids
    /// are unregistered.
    fn ring_on(
        &self,
        signal: std::os::raw::c_int,
        flag: &Arc<AtomicBool>,
    ) -> io::Result<[signal_hook::SigId; 2]> {
        let flag_id = signal_hook::flag::register(signal, Arc::clone(flag))?;
        let pipe_id = match self
            .button
            .try_clone()
            .and_then(|button| signal_hook::low_level::pipe::register(signal, button))
        {
            Ok(id) => id,
            Err(err) => {
                signal_hook::low_level::unregister(flag_id);
                return Err(err);
            }
        };
        Ok([flag_id, pipe_id])
    }

    /// Sleeps until the bell has rung since the last wait.
    fn wait(&self) {
        let mut rings = [0u8; 64];
        loop {
            match (&self.bell).read(&mut rings) {
                Ok(_) => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => {
                    // Cannot happen with a socket pair we own; never spin.
                    log::warn!("device wait: {err}; polling instead");
                    thread::sleep(POLL_INTERVAL);
                    return;
                }
            }
        }
    }
}

/// A running device.  Dropping it stops the device (gracefully if the disk
/// is closed, else by force) and joins its worker threads; a device with a
/// [recovery timeout](crate::DeviceBuilder::recover_timeout) can instead be left
/// to a successor with [`Device::detach`].
pub struct Device {
    pub(crate) id: u32,
    /// The fd that created (or recovered) the device: closing it destroys
    /// the device, or, with a recovery timeout, leaves it recovering.
    /// `None` once detached.
    pub(crate) control: Option<Control>,
    /// Rung by signals and by workers ending.
    pub(crate) doorbell: Doorbell,
    /// Set (and the doorbell rung) by a [`Detacher`].
    pub(crate) detach_requested: Arc<AtomicBool>,
    pub(crate) workers: Vec<JoinHandle<Result<(), Error>>>,
    pub(crate) disk_name: String,
    pub(crate) stopped: bool,
    pub(crate) statistics: Statistics,
    /// Served from when the disk is live until it stops or is detached
    /// ([`DeviceBuilder::control_socket`](crate::DeviceBuilder::control_socket)).
    #[cfg(feature = "control-socket")]
    pub(crate) control_socket: Option<crate::control_socket::ControlSocket>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("disk_name", &self.disk_name)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl Device {
    /// The device id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The disk's name, e.g. `bius0`.
    pub fn disk_name(&self) -> &str {
        &self.disk_name
    }

    /// The disk's path, e.g. `/dev/bius0`.
    pub fn path(&self) -> PathBuf {
        Path::new("/dev").join(&self.disk_name)
    }

    /// What the kernel reports about this device now.
    pub fn info(&self) -> Result<DeviceInfo, Error> {
        match &self.control {
            Some(control) => info_via(control, self.id),
            None => device_info(self.id),
        }
    }

    /// Stops serving the device without destroying it, for a successor to
    /// [recover](crate::DeviceBuilder::recover) it: a graceful upgrade of
    /// the daemon.  Closing the file descriptor that owns the device makes
    /// the kernel keep the disk and hold its I/O (the device is then
    /// [`DeviceState::Recovering`]), take back the requests the workers
    /// hold (those already read are replayed to the successor) and end
    /// the queues, whose workers this joins.  The recovery timeout runs
    /// from then on.
    ///
    /// Refused with [`Error::NoRecovery`] if the device has no recovery
    /// timeout (it would die): it keeps running then.  Dropping a
    /// detached device does nothing.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use bius::{BlockDevice, DeviceBuilder, IoError};
    ///
    /// /// Reads zeroes, drops writes.
    /// struct Zeroes;
    ///
    /// impl BlockDevice for Zeroes {
    ///     fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
    ///         buf.fill(0);
    ///         Ok(())
    ///     }
    ///     fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let mut device = DeviceBuilder::new(1 << 30)
    ///     .name("data")
    ///     .recover_timeout(Duration::from_secs(30))
    ///     .create(Zeroes)?;
    /// // ... serve; then hand the device over to a new version of the
    /// // daemon, which calls DeviceBuilder::from_device(id)?.create(..)
    /// // within 30 s.
    /// device.detach()?;
    /// # Ok::<(), bius::Error>(())
    /// ```
    pub fn detach(&mut self) -> Result<(), Error> {
        if self.stopped {
            return Ok(());
        }
        if self.info()?.recover_timeout.is_none() {
            return Err(Error::NoRecovery { id: self.id });
        }
        self.abandon()
    }

    /// A handle that asks [`Device::run_until_signal`], from any thread, to
    /// [detach](Device::detach) and return (e.g. on a request on a control
    /// socket).
    pub fn detacher(&self) -> Result<Detacher, Error> {
        Ok(Detacher {
            id: self.id,
            requested: Arc::clone(&self.detach_requested),
            button: self.doorbell.button.try_clone().map_err(Error::from_io)?,
        })
    }

    /// Closes the owning fd without destroying the device, and joins the
    /// workers, which end as the kernel disconnects their queues.
    pub(crate) fn abandon(&mut self) -> Result<(), Error> {
        // (gone before a successor can bind its own at the same path)
        self.close_control_socket();
        self.control = None;
        self.wait()
    }

    /// Stops answering on the control socket, if the device serves one.
    fn close_control_socket(&mut self) {
        #[cfg(feature = "control-socket")]
        {
            self.control_socket = None;
        }
    }

    /// The live statistics of this device's requests (kept since it
    /// started): a handle that other threads may keep (e.g. to answer a
    /// control socket, to trace or reset) and that outlives the device.
    /// Its [`snapshot`](Statistics::snapshot) is the statistics now.
    ///
    /// ```no_run
    /// fn report(device: &bius::Device) {
    ///     let stats = device.statistics().snapshot();
    ///     let writes = stats.op(bius::Op::Write);
    ///     println!("{} writes, {} bytes, p99 {} ns", writes.count, writes.bytes, writes.latency_ns.p99);
    /// }
    /// ```
    pub fn statistics(&self) -> Statistics {
        self.statistics.clone()
    }

    /// Graceful stop: the kernel removes the disk (flushing it through the
    /// workers), then ends the queues.  Fails with [`Error::Busy`] while the
    /// disk is open; the device keeps running then.
    pub fn stop(&mut self) -> Result<(), Error> {
        self.destroy(false)
    }

    /// Stops the device even if its disk is open: requests fail with I/O
    /// errors from then on.
    pub fn stop_force(&mut self) -> Result<(), Error> {
        self.destroy(true)
    }

    /// Blocks until the device stops by other means (e.g. `biusctl destroy`,
    /// or a queue failing), then returns the first worker error, if any.
    pub fn wait(&mut self) -> Result<(), Error> {
        let mut first_error = None;
        for worker in self.workers.drain(..) {
            let result = worker.join().unwrap_or(Err(Error::System(Errno::EIO)));
            if let Err(err) = result {
                first_error.get_or_insert(err);
            }
        }
        self.stopped = true;
        self.close_control_socket();
        first_error.map_or(Ok(()), Err)
    }

    /// Serves until SIGINT or SIGTERM, then stops gracefully.  If the disk
    /// is open, logs a warning and keeps serving until a second signal,
    /// which forces the stop.  Also returns when the device is stopped by
    /// other means.  SIGHUP (a closed terminal, or `systemctl reload`) is
    /// logged and otherwise ignored: it must not take a disk away from
    /// whoever uses it.
    pub fn run_until_signal(self) -> Result<(), Error> {
        self.run_until_signal_with(|| {})
    }

    /// [`Device::run_until_signal`], calling `stopping` each time SIGINT or
    /// SIGTERM starts a stop, before the stop (e.g. to tell a service
    /// manager, as systemd's `STOPPING=1`).
    ///
    /// ```no_run
    /// fn serve(device: bius::Device) -> Result<(), bius::Error> {
    ///     device.run_until_signal_with(|| eprintln!("stopping"))
    /// }
    /// ```
    pub fn run_until_signal_with(mut self, stopping: impl FnMut()) -> Result<(), Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let hang_up = Arc::new(AtomicBool::new(false));
        let mut handlers = Vec::new();
        let result = [
            (signal_hook::consts::SIGINT, &stop),
            (signal_hook::consts::SIGTERM, &stop),
            (signal_hook::consts::SIGHUP, &hang_up),
        ]
        .into_iter()
        .try_for_each(|(signal, flag)| {
            handlers.extend(self.doorbell.ring_on(signal, flag)?);
            Ok(())
        })
        .map_err(Error::from_io)
        .and_then(|()| self.serve_until_signalled(&stop, &hang_up, stopping));
        for id in handlers {
            signal_hook::low_level::unregister(id);
        }
        result
    }

    fn serve_until_signalled(
        &mut self,
        stop: &AtomicBool,
        hang_up: &AtomicBool,
        mut stopping: impl FnMut(),
    ) -> Result<(), Error> {
        let mut graceful_refused = false;
        while self.doorbell.ended() < self.workers.len() {
            if self.detach_requested.swap(false, Ordering::SeqCst) {
                match self.detach() {
                    Ok(()) => {
                        log::info!("device {}: detached, left to recovery", self.id);
                        return Ok(());
                    }
                    Err(err) => log::warn!("device {}: not detached: {err}", self.id),
                }
            }
            if hang_up.swap(false, Ordering::SeqCst) {
                log::info!(
                    "device {}: SIGHUP ignored (SIGINT or SIGTERM stops it)",
                    self.id
                );
            }
            if stop.swap(false, Ordering::SeqCst) {
                stopping();
                if graceful_refused {
                    log::warn!("stopping device {} by force", self.id);
                    return self.stop_force();
                }
                match self.stop() {
                    Err(Error::Busy { .. }) => {
                        log::warn!(
                            "device {} is busy: its disk is open; signal again to force the stop",
                            self.id
                        );
                        graceful_refused = true;
                    }
                    result => return result,
                }
                continue;
            }
            self.doorbell.wait();
        }
        self.wait()
    }

    fn destroy(&mut self, force: bool) -> Result<(), Error> {
        let Some(control) = self.control.as_ref().filter(|_| !self.stopped) else {
            return Ok(());
        };
        match destroy_via(control, self.id, force) {
            // Already gone: the workers have seen (or will see) end of file.
            Ok(()) | Err(Error::NoSuchDevice { .. }) => self.wait(),
            Err(err) => Err(err),
        }
    }

    /// [`Error::NotLive`] in `state`, with the first queue's error as the
    /// cause, once the queues have ended.
    fn not_live(&mut self, state: DeviceState) -> Error {
        Error::NotLive {
            id: self.id,
            state,
            cause: self.wait().err().map(|err| err.to_string()),
        }
    }

    /// Polls until the disk is live.
    pub(crate) fn wait_live(&mut self, timeout: Duration) -> Result<(), Error> {
        #[cfg(feature = "tokio")]
        crate::tokio::check_blocking("waiting for the disk to go live");
        let deadline = Instant::now() + timeout;
        loop {
            let info = self.info()?;
            match info.state {
                DeviceState::Live => {
                    self.disk_name = info.disk_name;
                    return Ok(());
                }
                // A dead device's queues end; one that failed says why.
                DeviceState::Stopping | DeviceState::Dead => {
                    return Err(self.not_live(info.state));
                }
                _ if self.workers.iter().any(JoinHandle::is_finished) => {
                    return Err(self.not_live(info.state));
                }
                _ if Instant::now() >= deadline => {
                    return Err(Error::NotLive {
                        id: self.id,
                        state: info.state,
                        cause: None,
                    })
                }
                _ => thread::sleep(POLL_INTERVAL),
            }
        }
    }
}

/// Asks the thread in [`Device::run_until_signal`] to
/// [detach](Device::detach) the device: [`Device::detacher`].
#[derive(Debug)]
pub struct Detacher {
    id: u32,
    requested: Arc<AtomicBool>,
    button: UnixStream,
}

impl Detacher {
    /// Checks that the device has a recovery timeout (else
    /// [`Error::NoRecovery`]) and asks for the detach; it happens in the
    /// serving thread, which then returns.  Watch
    /// [`device_info`](crate::device_info) for
    /// [`DeviceState::Recovering`] to know when it is done.
    pub fn detach(&self) -> Result<(), Error> {
        if device_info(self.id)?.recover_timeout.is_none() {
            return Err(Error::NoRecovery { id: self.id });
        }
        self.requested.store(true, Ordering::SeqCst);
        // Non-blocking: a full socket already wakes the serving thread.
        let _ = (&self.button).write(&[1]);
        Ok(())
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        let result = match self.stop() {
            Err(Error::Busy { .. }) => self.stop_force(),
            result => result,
        };
        if let Err(err) = result {
            // Closing the control fd (next) destroys the device, which ends
            // the workers; they are left to finish on their own.
            log::error!("device {}: stop failed: {err} ({})", self.id, err.errno());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits on `doorbell` in another thread; true if it woke within 5 s.
    fn wakes(doorbell: &Arc<Doorbell>) -> bool {
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = Arc::clone(doorbell);
        thread::spawn(move || {
            waiter.wait();
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(5)).is_ok()
    }

    #[test]
    fn doorbell_rings_when_a_worker_ends_and_on_signals() {
        let doorbell = Arc::new(Doorbell::new().unwrap());
        let ringers = [doorbell.ringer().unwrap(), doorbell.ringer().unwrap()];
        assert_eq!(doorbell.ended(), 0);
        let [first, second] = ringers;
        thread::spawn(move || drop(first)).join().unwrap();
        assert!(wakes(&doorbell));
        assert_eq!(doorbell.ended(), 1);
        drop(second);
        assert_eq!(doorbell.ended(), 2);
        assert!(wakes(&doorbell));

        // SIGUSR2: not one the test harness or the device uses
        let flag = Arc::new(AtomicBool::new(false));
        let ids = doorbell
            .ring_on(signal_hook::consts::SIGUSR2, &flag)
            .unwrap();
        signal_hook::low_level::raise(signal_hook::consts::SIGUSR2).unwrap();
        assert!(wakes(&doorbell));
        assert!(flag.load(Ordering::SeqCst));
        for id in ids {
            signal_hook::low_level::unregister(id);
        }
        assert_eq!(doorbell.ended(), 2, "a signal is not a worker ending");
    }
}
