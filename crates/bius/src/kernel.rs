//! The kernel transport: file descriptors of `/dev/bius`, the ioctls on
//! them and the mmap()ed data windows of the map transfer modes, and
//! `BLKREPORTZONE` on zoned block devices.  This is the only
//! module of the crate with `unsafe` code (allowed where it is declared, in
//! `lib.rs`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bius_sys::{
    bius_complete_fetch, bius_connect, bius_destroy, bius_device_info, bius_device_list,
    bius_device_params, blk_zone, blk_zone_report, BlkZoneReport,
};
use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};
use nix::sys::time::TimeSpec;

use crate::error::errno_of;
use crate::transport::{complete_then_fetch, window_range, Exchange, Transport, Wakeup};

/// Path of the BIUS control device.
pub(crate) const CONTROL_PATH: &str = "/dev/bius";

/// An open, not yet connected, file descriptor of `/dev/bius`.
pub(crate) struct Control {
    file: File,
}

impl Control {
    /// Opens `/dev/bius` for reading and writing.
    pub(crate) fn open() -> Result<Self, Errno> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(CONTROL_PATH)
            .map_err(|err| errno_of(&err))?;
        Ok(Control { file })
    }

    /// `BIUS_IOC_CREATE_DEVICE`; on success `params.dev_id` is set.
    pub(crate) fn create(&self, params: &mut bius_device_params) -> Result<(), Errno> {
        // SAFETY: the fd is open, and `params` is a valid, exclusively
        // borrowed struct of the type the ioctl number encodes.
        unsafe { bius_sys::ioctl::create_device(self.file.as_raw_fd(), params) }.map(drop)
    }

    /// `BIUS_IOC_RECOVER_DEVICE`: this fd becomes the owner of the
    /// RECOVERING device `params.dev_id`, which `params` must describe.
    pub(crate) fn recover(&self, params: &bius_device_params) -> Result<(), Errno> {
        // SAFETY: the fd is open and `params` is a valid struct of the type
        // the ioctl number encodes; the kernel only reads it.
        unsafe { bius_sys::ioctl::recover_device(self.file.as_raw_fd(), params) }.map(drop)
    }

    /// `BIUS_IOC_DESTROY_DEVICE` with `BIUS_DESTROY_*` flags.
    pub(crate) fn destroy(&self, dev_id: u32, flags: u32) -> Result<(), Errno> {
        let arg = bius_destroy { dev_id, flags };
        // SAFETY: the fd is open and `arg` is a valid struct of the type the
        // ioctl number encodes; the kernel only reads it.
        unsafe { bius_sys::ioctl::destroy_device(self.file.as_raw_fd(), &arg) }.map(drop)
    }

    /// `BIUS_IOC_GET_INFO` of device `dev_id`.
    pub(crate) fn info(&self, dev_id: u32) -> Result<bius_device_info, Errno> {
        let mut info = bius_device_info {
            dev_id,
            ..Default::default()
        };
        // SAFETY: the fd is open and `info` is a valid, exclusively borrowed
        // struct of the type the ioctl number encodes.
        unsafe { bius_sys::ioctl::get_info(self.file.as_raw_fd(), &mut info) }?;
        Ok(info)
    }

    /// `BIUS_IOC_LIST_DEVICES`: the ids of all devices.
    pub(crate) fn list(&self) -> Result<Vec<u32>, Errno> {
        let mut ids = vec![0u32; 64];
        loop {
            let mut list = bius_device_list {
                capacity: u32::try_from(ids.len()).unwrap_or(u32::MAX),
                count: 0,
                ids: ids.as_mut_ptr() as u64,
            };
            // SAFETY: the fd is open, `list` is a valid struct of the type the
            // ioctl number encodes, and `list.ids` points to `capacity`
            // writable u32s that outlive the call.
            unsafe { bius_sys::ioctl::list_devices(self.file.as_raw_fd(), &mut list) }?;
            let count = list.count as usize;
            if count <= ids.len() {
                ids.truncate(count);
                return Ok(ids);
            }
            ids.resize(count, 0);
        }
    }

    /// `BIUS_IOC_CONNECT`: binds this fd to queue `queue` of `dev_id`.
    pub(crate) fn connect(self, dev_id: u32, queue: u32) -> Result<KernelQueue, Errno> {
        let arg = bius_connect {
            dev_id,
            queue,
            reserved: 0,
        };
        // SAFETY: the fd is open and `arg` is a valid struct of the type the
        // ioctl number encodes; the kernel only reads it.
        unsafe { bius_sys::ioctl::connect(self.file.as_raw_fd(), &arg) }?;
        Ok(KernelQueue {
            file: self.file,
            window: None,
            wakeup: None,
            complete_fetch: complete_fetch_wanted(),
        })
    }
}

/// A file descriptor connected to one hardware queue, with its data window
/// once mapped, and the eventfd that wakes its worker in deferred mode.
pub(crate) struct KernelQueue {
    file: File,
    window: Option<Arc<Window>>,
    wakeup: Option<Arc<EventWakeup>>,
    /// Whether `BIUS_IOC_COMPLETE_FETCH` is to be used: unless the
    /// environment turns it off, until the module says it has none.
    complete_fetch: bool,
}

/// Environment variable: set to `1`, the kernel transport completes and
/// fetches with `write()` and `read()` instead of one
/// `BIUS_IOC_COMPLETE_FETCH` (to compare the two, or to rule the call out).
pub(crate) const NO_COMPLETE_FETCH_ENV: &str = "BIUS_NO_COMPLETE_FETCH";

/// Whether the combined call is wanted: not if [`NO_COMPLETE_FETCH_ENV`]
/// is `1` (read once per process).
fn complete_fetch_wanted() -> bool {
    static WANTED: OnceLock<bool> = OnceLock::new();
    *WANTED.get_or_init(|| {
        let off = std::env::var_os(NO_COMPLETE_FETCH_ENV).is_some_and(|value| value == "1");
        if off {
            log::info!(
                "{NO_COMPLETE_FETCH_ENV}=1: completing with write() and fetching with read()"
            );
        }
        !off
    })
}

impl KernelQueue {
    /// mmap()s the queue's data window of `len` bytes (`map_window_bytes`
    /// of `BIUS_IOC_GET_INFO`): shared, readable and writable.
    pub(crate) fn map_window(&mut self, len: usize) -> Result<(), Errno> {
        let length = NonZeroUsize::new(len).ok_or(Errno::EINVAL)?;
        // SAFETY: a new mapping at an address the kernel chooses, so no
        // existing memory is affected; the kernel checks the length and
        // flags against the device.  The mapping is owned by the returned
        // `Window`, which unmaps it exactly once, on drop.
        let ptr = unsafe {
            mmap(
                None,
                length,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &self.file,
                0,
            )
        }?;
        self.window = Some(Arc::new(Window {
            ptr: ptr.cast(),
            len,
        }));
        Ok(())
    }
}

/// The mmap()ed data window of a queue.  The kernel maps the data of a
/// request with `BIUS_REQ_MAPPED` into it (in one piece or in segments)
/// while the request is outstanding; every other page of it shows the zero
/// page, read-only (writing it raises SIGBUS).
struct Window {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the window is plain memory owned by this value; slices of it are
// handed out only through `&mut` borrows of its queue (`Transport::window`)
// or of the one `WindowRange` lent for an outstanding request, whose ranges
// never overlap (see `WindowRange`).
unsafe impl Send for Window {}
// SAFETY: as for `Send`: shared references give no access to the memory.
unsafe impl Sync for Window {}

/// The data of one outstanding mapped request in its queue's window, lent
/// to whoever serves it, on any thread, until it is completed: the deferred
/// worker takes it back (drops it) before it writes the completion, and the
/// kernel keeps the range mapped (read-only for a write) until then, or maps
/// a scratch page there if the request times out or the device stops first,
/// so the memory is always accessible.  The range lies inside the request's
/// slot, and the kernel sends one request per tag at a time: no two lent
/// ranges overlap, and the worker touches no lent range through
/// [`Transport::window`].  The `Arc` keeps the mapping alive however long the
/// range lives.
pub(crate) struct WindowRange {
    window: Arc<Window>,
    start: usize,
    len: usize,
}

impl WindowRange {
    /// The data (of a write or zone append).
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: inside the mapping (checked by `lend`), mapped for this
        // request alone while `self` lives, see the type's documentation.
        unsafe { std::slice::from_raw_parts(self.window.ptr.as_ptr().add(self.start), self.len) }
    }

    /// The buffer (of a read), mapped writable by the kernel.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the borrow exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(self.window.ptr.as_ptr().add(self.start), self.len)
        }
    }
}

/// The eventfd that ends a deferred worker's `poll()`.
struct EventWakeup(EventFd);

impl Wakeup for EventWakeup {
    fn ring(&self) {
        // EAGAIN (the counter is full) means it is rung already.
        let _ = self.0.write(1);
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made by `map_window`,
        // unmapped only here; no slice of it outlives the `&mut` borrow of
        // the queue it came from.
        if let Err(errno) = unsafe { munmap(self.ptr.cast(), self.len) } {
            log::warn!("munmap of a data window failed: {errno}");
        }
    }
}

impl Transport for KernelQueue {
    fn fetch(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }

    fn complete(&mut self, records: &[u8]) -> io::Result<usize> {
        self.file.write(records)
    }

    fn complete_and_fetch(&mut self, records: &[u8], buf: &mut [u8]) -> Exchange {
        let Ok(completions_len) = u32::try_from(records.len()) else {
            return complete_then_fetch(self, records, buf);
        };
        if !self.complete_fetch {
            return complete_then_fetch(self, records, buf);
        }
        let mut arg = bius_complete_fetch {
            completions: records.as_ptr() as u64,
            completions_len,
            requests: buf.as_mut_ptr() as u64,
            requests_len: u32::try_from(buf.len()).unwrap_or(u32::MAX),
            ..Default::default()
        };
        // SAFETY: the fd is open and `arg` is a valid, exclusively borrowed
        // struct of the type the ioctl number encodes; the kernel reads at
        // most `completions_len` bytes at `completions` (borrowed from
        // `records`) and writes at most `requests_len` bytes at `requests`
        // (`buf`, exclusively borrowed, at least that long), both alive for
        // the call.
        let result = unsafe { bius_sys::ioctl::complete_fetch(self.file.as_raw_fd(), &mut arg) };
        match result {
            // A module older than the call (it took nothing).
            Err(Errno::ENOTTY) => {
                log::info!(
                    "the bius module has no BIUS_IOC_COMPLETE_FETCH: using write() and read()"
                );
                self.complete_fetch = false;
                complete_then_fetch(self, records, buf)
            }
            result => Exchange {
                completed: arg.completed as usize,
                fetched: result.map(|n| n as usize).map_err(io::Error::from),
            },
        }
    }

    fn window(&mut self, offset: u64, len: usize) -> Option<&[u8]> {
        let window = self.window.as_deref()?;
        let range = window_range(offset, len, window.len)?;
        // SAFETY: the range lies inside the mapping.  The worker asks only
        // for the data of a request it has read and not yet completed, which
        // the kernel keeps mapped (read-only for writes) until the
        // completion is written; the borrow of `self` ends before that
        // write.  If the request times out or the device dies first, the
        // kernel maps a scratch page there instead, so the memory stays
        // accessible.  The pages are the I/O buffer's: like any shared
        // memory, the writer of the I/O (or that swap) may still change
        // them, which only changes the bytes read, never their validity as
        // `u8`.
        Some(unsafe {
            std::slice::from_raw_parts(window.ptr.as_ptr().add(range.start), range.len())
        })
    }

    fn window_mut(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let window = self.window.as_deref()?;
        let range = window_range(offset, len, window.len)?;
        // SAFETY: as in `window`; the kernel maps a read's buffer writable,
        // and no other slice of the window is alive while `self` is
        // mutably borrowed.
        Some(unsafe {
            std::slice::from_raw_parts_mut(window.ptr.as_ptr().add(range.start), range.len())
        })
    }

    fn lend(&mut self, offset: u64, len: usize) -> Option<WindowRange> {
        let window = self.window.as_ref()?;
        let range = window_range(offset, len, window.len)?;
        Some(WindowRange {
            window: Arc::clone(window),
            start: range.start,
            len: range.len(),
        })
    }

    fn defer(&mut self) -> io::Result<Arc<dyn Wakeup>> {
        let flags = OFlag::from_bits_retain(fcntl(&self.file, FcntlArg::F_GETFL)?);
        fcntl(&self.file, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        let wakeup = Arc::new(EventWakeup(EventFd::from_flags(
            EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK,
        )?));
        self.wakeup = Some(Arc::clone(&wakeup));
        Ok(wakeup)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        let wakeup = self.wakeup.as_ref().ok_or(Errno::EINVAL)?;
        let mut fds = [
            PollFd::new(self.file.as_fd(), PollFlags::POLLIN),
            PollFd::new(wakeup.0.as_fd(), PollFlags::POLLIN),
        ];
        // (ppoll: a timeout to the nanosecond, where poll has milliseconds)
        let timeout = timeout.map(TimeSpec::from_duration);
        match ppoll(&mut fds, timeout, None) {
            Ok(_) => {}
            // (the caller waits again if need be)
            Err(Errno::EINTR) => return Ok(false),
            Err(errno) => return Err(errno.into()),
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        let requests = ready(&fds[0]);
        if ready(&fds[1]) {
            // Consumes the ring (EAGAIN: another wait consumed it).
            let _ = wakeup.0.read();
        }
        Ok(requests)
    }
}

/// Zone descriptors asked for per `BLKREPORTZONE` call.
const REPORT_BATCH: usize = 128;

/// `BLKREPORTZONE` on an open block device: the descriptors of up to 128
/// zones from the one containing `sector` on (none past the last zone).
pub(crate) fn report_zones(disk: &File, sector: u64) -> Result<Vec<blk_zone>, Errno> {
    let mut buf = Box::<BlkZoneReport<REPORT_BATCH>>::default();
    buf.report.sector = sector;
    buf.report.nr_zones = REPORT_BATCH as u32;
    let arg = std::ptr::from_mut(&mut *buf).cast::<blk_zone_report>();
    // SAFETY: the fd is open, and `arg` points to a `blk_zone_report`
    // followed by room for `nr_zones` descriptors (`BlkZoneReport` is
    // repr(C), its layout checked in bius-sys), exclusively borrowed for the
    // call; the kernel writes at most `nr_zones` descriptors.
    unsafe { bius_sys::ioctl::report_zones(disk.as_raw_fd(), arg) }?;
    let filled = (buf.report.nr_zones as usize).min(REPORT_BATCH);
    Ok(buf.zones[..filled].to_vec())
}

/// `PR_SET_IO_FLUSHER` and `PR_GET_IO_FLUSHER` of `<linux/prctl.h>`
/// (Linux 5.6), which the libc crate does not define for Linux.
const PR_SET_IO_FLUSHER: nix::libc::c_int = 57;
const PR_GET_IO_FLUSHER: nix::libc::c_int = 58;

/// The calling thread marked as an I/O flusher (`PR_SET_IO_FLUSHER`) for
/// as long as this lives: its memory allocations do not recurse into I/O
/// reclaim, and it is throttled only against the device it writes to.
/// Threads it spawns meanwhile inherit the mark and keep it; dropping the
/// guard restores the calling thread's own previous mark.
#[derive(Debug)]
pub(crate) struct IoFlusherMark {
    previous: nix::libc::c_int,
}

impl IoFlusherMark {
    /// Marks the calling thread; needs `CAP_SYS_RESOURCE` (else `EPERM`).
    pub(crate) fn set() -> Result<Self, Errno> {
        // SAFETY: prctl with integer arguments only; PR_GET_IO_FLUSHER
        // reads no memory and returns the mark.
        let previous = Errno::result(unsafe { nix::libc::prctl(PR_GET_IO_FLUSHER, 0, 0, 0, 0) })?;
        set_io_flusher(1)?;
        Ok(IoFlusherMark { previous })
    }
}

impl Drop for IoFlusherMark {
    fn drop(&mut self) {
        if let Err(errno) = set_io_flusher(self.previous) {
            log::warn!("restoring this thread's PR_SET_IO_FLUSHER mark: {errno}");
        }
    }
}

fn set_io_flusher(mark: nix::libc::c_int) -> Result<(), Errno> {
    // SAFETY: prctl with integer arguments only; it touches no memory of
    // ours.  The kernel takes the value as an unsigned long.
    Errno::result(unsafe {
        nix::libc::prctl(PR_SET_IO_FLUSHER, mark as nix::libc::c_ulong, 0, 0, 0)
    })
    .map(drop)
}
