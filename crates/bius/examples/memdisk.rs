//! `memdisk`: a sparse RAM disk, the smallest complete [`BlockDevice`].
//!
//! What it teaches:
//! - the four data methods of a block device ([`BlockDevice::read`],
//!   [`BlockDevice::write`], [`BlockDevice::discard`],
//!   [`BlockDevice::write_zeroes`]) and how [`Capabilities`] tells the
//!   kernel which requests to send;
//! - that every method takes `&self` and runs concurrently on the queues'
//!   worker threads: the disk locks per shard of pages, not as a whole;
//! - that requests arrive checked: every range lies on the disk;
//! - thin provisioning: memory is taken in 4 KiB pages when first written
//!   with data; discard and write-zeroes with unmap give pages back, while
//!   write-zeroes without unmap keeps them (the caller wants the space to
//!   stay allocated).  At exit it prints how much memory it still holds.
//!
//! Run it (as root, with `bius.ko` loaded):
//!
//! ```sh
//! cargo run --release --example memdisk -- --size 1G --name memdisk --queues 2
//! # prints /dev/memdisk once the disk is live; Ctrl-C removes it
//! ```

use std::collections::HashMap;
use std::ops::Range;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bius::{BlockDevice, Capabilities, DeviceBuilder, IoError};

mod common;
use common::DiskArgs;

/// A sparse RAM disk.
#[derive(Debug, clap::Parser)]
#[command(name = "memdisk")]
struct Options {
    /// Disk size: bytes, or with a unit (256M, 1.5G, 1GB).
    #[arg(long, value_parser = bius::size::parse, default_value = "256M")]
    size: u64,
    #[command(flatten)]
    disk: DiskArgs,
}

/// Bytes per page: the unit of allocation.
const PAGE_SIZE: usize = 4096;

/// Pages are spread over this many independently locked maps, so that
/// queues working on different pages seldom wait for each other.
const SHARDS: usize = 64;

/// One page of data.
type Page = Box<[u8; PAGE_SIZE]>;

/// A RAM disk that holds only the pages written with data: every other
/// page reads as zeroes and takes no memory.  It needs not know its size:
/// the framework hands a device only ranges that lie on it.
struct MemDisk {
    /// Page `n` lives in shard `n % SHARDS`, keyed by `n`.
    shards: [Mutex<HashMap<u64, Page>>; SHARDS],
}

/// The part of one page that a request covers.
struct Piece {
    /// Page number.
    page: u64,
    /// Bytes within the page.
    in_page: Range<usize>,
    /// The same bytes within the request.
    in_request: Range<usize>,
}

/// The pages `[offset, offset + len)` covers, in order.
fn pieces(offset: u64, len: u64) -> impl Iterator<Item = Piece> {
    let mut pos = offset;
    std::iter::from_fn(move || {
        (pos < offset + len).then(|| {
            let (page, start) = (pos / PAGE_SIZE as u64, (pos % PAGE_SIZE as u64) as usize);
            let n = (offset + len - pos).min((PAGE_SIZE - start) as u64) as usize;
            let at = (pos - offset) as usize;
            pos += n as u64;
            let (in_page, in_request) = (start..start + n, at..at + n);
            Piece {
                page,
                in_page,
                in_request,
            }
        })
    })
}

impl MemDisk {
    /// An empty disk.
    fn new() -> Self {
        let shards = std::array::from_fn(|_| Mutex::default());
        MemDisk { shards }
    }

    /// Bytes of memory the pages take now.
    fn allocated_bytes(&self) -> u64 {
        let pages: usize = self.shards.iter().map(|shard| lock(shard).len()).sum();
        (pages * PAGE_SIZE) as u64
    }

    /// The shard holding page `page`, locked.
    fn shard_of(&self, page: u64) -> MutexGuard<'_, HashMap<u64, Page>> {
        lock(&self.shards[(page % SHARDS as u64) as usize])
    }

    /// Zeroes a range: whole pages are dropped if `unmap`, the rest is
    /// filled with zeroes where allocated.
    fn zero(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        for piece in pieces(offset, len) {
            let mut shard = self.shard_of(piece.page);
            if unmap && piece.in_page.len() == PAGE_SIZE {
                shard.remove(&piece.page);
            } else if let Some(page) = shard.get_mut(&piece.page) {
                page[piece.in_page].fill(0);
            }
        }
        Ok(())
    }
}

/// A shard, locked.  A panic in another request never leaves a map
/// half-updated, so a poisoned lock is safe to take over.
fn lock<T>(shard: &Mutex<T>) -> MutexGuard<'_, T> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BlockDevice for MemDisk {
    /// Announced once, at creation: the kernel sends discard and
    /// write-zeroes requests only because these are set.  No volatile
    /// write cache: a completed write is as durable as RAM gets, so the
    /// kernel sends no flushes and the default [`BlockDevice::flush`]
    /// (nothing to do) is right.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            discard: true,
            write_zeroes: true,
            ..Capabilities::default()
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        for piece in pieces(offset, buf.len() as u64) {
            let out = &mut buf[piece.in_request];
            match self.shard_of(piece.page).get(&piece.page) {
                Some(page) => out.copy_from_slice(&page[piece.in_page]),
                // The whole buffer must be filled: it may hold old data.
                None => out.fill(0),
            }
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
        for piece in pieces(offset, data.len() as u64) {
            let bytes = &data[piece.in_request];
            let mut shard = self.shard_of(piece.page);
            if let Some(page) = shard.get_mut(&piece.page) {
                page[piece.in_page].copy_from_slice(bytes);
            } else if bytes.iter().any(|&byte| byte != 0) {
                // Zeroes written to a missing page are already there.
                let mut page: Page = Box::new([0; PAGE_SIZE]);
                page[piece.in_page].copy_from_slice(bytes);
                shard.insert(piece.page, page);
            }
        }
        Ok(())
    }

    /// The data is no longer needed: drop the pages (reading them gives
    /// zeroes afterwards, as with the other ways to zero).
    fn discard(&self, offset: u64, len: u64) -> Result<(), IoError> {
        self.zero(offset, len, true)
    }

    /// Overrides the default, which writes zero-filled buffers through
    /// [`BlockDevice::write`]: here zeroing is cheaper than writing.
    fn write_zeroes(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        self.zero(offset, len, unmap)
    }
}

fn main() -> ExitCode {
    let Options { size, disk: args } = clap::Parser::parse();
    let builder = args.apply(DeviceBuilder::new(size), "memdisk");
    // Shared with the device, to look at its memory once it is removed.
    let disk = Arc::new(MemDisk::new());
    let status = common::serve(builder.create(Arc::clone(&disk)));
    eprintln!(
        "memdisk: {} KiB of pages held at exit",
        disk.allocated_bytes() >> 10
    );
    status
}

// Through the in-process loopback: `cargo test` enables its feature.
#[cfg(test)]
mod tests {
    use bius::loopback::{Loopback, Submission};
    use bius::{Command, Reply};

    use super::*;

    fn read(disk: &MemDisk, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0xee; len];
        disk.read(offset, &mut buf).unwrap();
        buf
    }

    #[test]
    fn only_pages_written_with_data_take_memory() {
        let disk = MemDisk::new();
        assert_eq!(read(&disk, 0, 8192), vec![0; 8192]);
        disk.write(0, &[0; 8192], false).unwrap();
        assert_eq!(disk.allocated_bytes(), 0);
        // 1 KiB across the border of pages 1 and 2.
        disk.write(2 * 4096 - 512, &[7; 1024], false).unwrap();
        assert_eq!(disk.allocated_bytes(), 2 * 4096);
        let mut expected = vec![0; 3 * 4096];
        expected[4096 - 512..4096 + 512].fill(7);
        assert_eq!(read(&disk, 4096, 3 * 4096), expected);
    }

    #[test]
    fn discard_and_write_zeroes_give_back_whole_pages() {
        let disk = MemDisk::new();
        disk.write(0, &[1; 6 * 4096], false).unwrap();
        // From the middle of page 0 to the middle of page 3.
        disk.discard(2048, 3 * 4096).unwrap();
        assert_eq!(disk.allocated_bytes(), 4 * 4096);
        // Page 4 kept, page 5 dropped.
        disk.write_zeroes(4 * 4096, 4096, false).unwrap();
        disk.write_zeroes(5 * 4096, 4096, true).unwrap();
        assert_eq!(disk.allocated_bytes(), 3 * 4096);
        let mut expected = vec![0; 6 * 4096];
        expected[..2048].fill(1);
        expected[2048 + 3 * 4096..4 * 4096].fill(1);
        assert_eq!(read(&disk, 0, 6 * 4096), expected);
    }

    /// The disk served by the framework's worker threads, with the
    /// in-process loopback kernel instead of `bius.ko`: four queues at
    /// once, each on its own pages and on the page they share; a read past
    /// the end is refused before it reaches the disk.
    #[test]
    fn serves_four_queues_through_the_loopback() {
        const SHARED_PAGE: u64 = 7 << 20;
        let disk = Arc::new(MemDisk::new());
        let mut kernel = Loopback::new(&DeviceBuilder::new(8 << 20).queues(4)).unwrap();
        kernel.start(Arc::clone(&disk)).unwrap();
        std::thread::scope(|s| {
            for queue in 0..4 {
                let kernel = &kernel;
                s.spawn(move || {
                    let (offset, byte) = (u64::from(queue) << 20, queue as u8 + 1);
                    let write = Submission::write(offset + 512, vec![byte; 64 << 10]);
                    assert_eq!(kernel.run(queue, write), Ok(Reply::Done));
                    // Each queue writes its own sector of the shared page.
                    let shared = SHARED_PAGE + u64::from(queue) * 512;
                    let write = Submission::write(shared, vec![byte; 512]);
                    assert_eq!(kernel.run(queue, write), Ok(Reply::Done));
                    let data = kernel.read(queue, offset + 512, 64 << 10);
                    assert_eq!(data, Ok(vec![byte; 64 << 10]));
                    let discard = Command::Discard {
                        offset,
                        len: 1 << 20,
                    };
                    assert_eq!(kernel.run(queue, discard), Ok(Reply::Done));
                });
            }
        });
        let expected: Vec<u8> = (1..=4).flat_map(|byte| [byte; 512]).collect();
        assert_eq!(kernel.read(0, SHARED_PAGE, 2048), Ok(expected));
        assert_eq!(kernel.read(0, 8 << 20, 512), Err(IoError::Io));
        // Only the shared page is left.
        assert_eq!(disk.allocated_bytes(), 4096);
        kernel.stop().unwrap();
    }
}
