//! [`spawn`]: the threads a backend starts to do a device's I/O, marked as
//! I/O flushers as the device's queue threads are.

use std::io;
use std::sync::Once;
use std::thread::{Builder, JoinHandle};

/// Starts `f` on a thread of `builder` marked as an I/O flusher
/// (`PR_SET_IO_FLUSHER`, through [`bius::IoFlusherScope`]): a thread that
/// does a device's I/O must not wait for that device's own write-back
/// when it allocates memory (see
/// [`DeviceBuilder::io_flusher`](bius::DeviceBuilder::io_flusher)).
/// Without `CAP_SYS_RESOURCE` it starts unmarked, with a warning (once).
pub(crate) fn spawn<F, T>(builder: Builder, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    static WARNED: Once = Once::new();
    let _mark = bius::IoFlusherScope::enter()
        .inspect_err(|errno| {
            WARNED.call_once(|| {
                log::warn!("cannot mark the backend's threads as I/O flushers (PR_SET_IO_FLUSHER): {errno}; under memory pressure the device may deadlock in reclaim");
            });
        })
        .ok();
    builder.spawn(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PF_MEMALLOC_NOIO`, which `PR_SET_IO_FLUSHER` sets, in the task
    /// flags (field 9 of `/proc/thread-self/stat`; the name has no space).
    fn marked() -> bool {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let flags: u64 = stat.split(' ').nth(8).unwrap().parse().unwrap();
        flags & 0x80000 != 0
    }

    #[test]
    fn a_backend_thread_is_an_io_flusher_and_its_starter_is_left_as_it_was() {
        if bius::IoFlusherScope::enter().is_err() {
            eprintln!("skipped: no CAP_SYS_RESOURCE to mark threads");
            return;
        }
        let starter = std::thread::spawn(|| {
            let before = marked();
            let thread = spawn(Builder::new().name("bius-test-io".into()), marked).unwrap();
            (before, thread.join().unwrap(), marked())
        });
        assert_eq!(starter.join().unwrap(), (false, true, false));
    }
}
