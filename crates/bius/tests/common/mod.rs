//! A deferred RAM disk for the tests of deferred devices.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::Duration;

use bius::{Capabilities, DeferredDevice, Io, IoError, Request};

/// The size of the test disks.
pub const SIZE: u64 = 4 << 20;

/// What a [`Pool`] does with a discard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // (not every test crate uses every kind)
pub enum Discard {
    /// Zeroes the range.
    Zeroes,
    /// Succeeds and keeps the data (a discard is only a hint).
    Keeps,
    /// Fails with `EIO`.
    Fails,
    /// Not offered: the pool has no discard capability.
    Unsupported,
}

/// A RAM disk served on a pool of threads, each request after `delay`.
pub struct Pool {
    /// The disk's contents.
    pub data: Arc<RwLock<Vec<u8>>>,
    jobs: Mutex<Sender<Io>>,
    /// Requests served so far.
    #[allow(dead_code)] // (not every test crate reads it)
    pub served: Arc<AtomicUsize>,
    discard: Discard,
}

impl Pool {
    /// A pool whose discards zero.
    #[allow(dead_code)] // (not every test crate calls it)
    pub fn new(threads: usize, delay: Duration) -> Self {
        Self::with_discard(threads, delay, Discard::Zeroes)
    }

    /// A pool doing `discard` with discards.
    #[allow(dead_code)] // (not every test crate calls it)
    pub fn with_discard(threads: usize, delay: Duration, discard: Discard) -> Self {
        let data = Arc::new(RwLock::new(vec![0; SIZE as usize]));
        let served = Arc::new(AtomicUsize::new(0));
        let (jobs, queue) = channel::<Io>();
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..threads {
            let (data, queue, served) =
                (Arc::clone(&data), Arc::clone(&queue), Arc::clone(&served));
            thread::spawn(move || loop {
                let Ok(mut io) = queue.lock().unwrap().recv() else {
                    return;
                };
                thread::sleep(delay);
                let result = match io.request() {
                    Request::Read { offset, buf } => {
                        let at = offset as usize;
                        buf.copy_from_slice(&data.read().unwrap()[at..at + buf.len()]);
                        Ok(())
                    }
                    Request::Write {
                        offset,
                        data: bytes,
                        ..
                    } => {
                        let at = offset as usize;
                        data.write().unwrap()[at..at + bytes.len()].copy_from_slice(bytes);
                        Ok(())
                    }
                    Request::Flush => Ok(()),
                    Request::Discard { offset, len } => match discard {
                        Discard::Zeroes => {
                            let at = offset as usize;
                            data.write().unwrap()[at..at + len as usize].fill(0);
                            Ok(())
                        }
                        Discard::Keeps => Ok(()),
                        Discard::Fails => Err(IoError::Io),
                        Discard::Unsupported => Err(IoError::Unsupported),
                    },
                    _ => Err(IoError::Unsupported),
                };
                served.fetch_add(1, Ordering::Relaxed);
                io.complete_done(result);
            });
        }
        Pool {
            data,
            jobs: Mutex::new(jobs),
            served,
            discard,
        }
    }
}

impl DeferredDevice for Pool {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            discard: self.discard != Discard::Unsupported,
            write_cache: true,
            ..Capabilities::default()
        }
    }

    fn submit(&self, io: Io) {
        let _ = self.jobs.lock().unwrap().send(io);
    }
}
