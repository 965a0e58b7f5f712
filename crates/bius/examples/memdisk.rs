//! `memdisk`: a sparse RAM disk, the smallest complete [`BlockDevice`].
//!
//! What it teaches:
//! - the four data methods of a block device ([`BlockDevice::read`],
//!   [`BlockDevice::write`], [`BlockDevice::discard`],
//!   [`BlockDevice::write_zeroes`]) and how [`Capabilities`] tells the
//!   kernel which requests to send;
//! - that every method takes `&self` and runs concurrently on the queues'
//!   worker threads: the disk locks per shard of pages, not as a whole;
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
/// page reads as zeroes and takes no memory.
struct MemDisk {
    size: u64,
    /// Page `n` lives in shard `n % SHARDS`, keyed by `n`.
    shards: Box<[Mutex<HashMap<u64, Page>>]>,
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

impl MemDisk {
    /// An empty disk of `size` bytes.
    fn new(size: u64) -> Self {
        MemDisk {
            size,
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    /// Bytes of memory the pages take now.
    fn allocated_bytes(&self) -> u64 {
        let pages: usize = (0..SHARDS).map(|shard| self.shard(shard).len()).sum();
        (pages * PAGE_SIZE) as u64
    }

    /// Shard `index`, locked.  A panic in another request never leaves a
    /// map half-updated, so a poisoned lock is safe to take over.
    fn shard(&self, index: usize) -> MutexGuard<'_, HashMap<u64, Page>> {
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The shard holding page `page`, locked.
    fn shard_of(&self, page: u64) -> MutexGuard<'_, HashMap<u64, Page>> {
        self.shard((page % SHARDS as u64) as usize)
    }

    /// The pages `[offset, offset + len)` covers, in order; an error if the
    /// range goes past the end of the disk (the kernel never sends such a
    /// request, but a device does not trust its input).
    fn pieces(&self, offset: u64, len: u64) -> Result<impl Iterator<Item = Piece>, IoError> {
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= self.size)
            .ok_or(IoError::InvalidArgument)?;
        let mut pos = offset;
        Ok(std::iter::from_fn(move || {
            (pos < end).then(|| {
                let page = pos / PAGE_SIZE as u64;
                let start = (pos % PAGE_SIZE as u64) as usize;
                let n = (end - pos).min((PAGE_SIZE - start) as u64) as usize;
                let at = (pos - offset) as usize;
                pos += n as u64;
                Piece {
                    page,
                    in_page: start..start + n,
                    in_request: at..at + n,
                }
            })
        }))
    }

    /// Zeroes a range: whole pages are dropped if `unmap`, the rest is
    /// filled with zeroes where allocated.
    fn zero(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        for piece in self.pieces(offset, len)? {
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
        for piece in self.pieces(offset, buf.len() as u64)? {
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
        for piece in self.pieces(offset, data.len() as u64)? {
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
    let disk = Arc::new(MemDisk::new(size));
    let status = common::serve(builder.create(Arc::clone(&disk)));
    eprintln!(
        "memdisk: {} KiB of pages held at exit",
        disk.allocated_bytes() >> 10
    );
    status
}

// Through the in-process loopback: `cargo test` enables its feature.
#[cfg(all(test, feature = "loopback"))]
mod tests {
    use bius::loopback::{Loopback, Submission};
    use bius::DeviceBuilder;
    use bius::{Command, Reply};

    use super::*;

    fn read(disk: &MemDisk, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0xee; len];
        disk.read(offset, &mut buf).unwrap();
        buf
    }

    #[test]
    fn only_pages_written_with_data_take_memory() {
        let disk = MemDisk::new(1 << 20);
        assert_eq!(read(&disk, 0, 8192), vec![0; 8192]);
        disk.write(0, &[0; 8192], false).unwrap();
        assert_eq!(disk.allocated_bytes(), 0);
        // 1 KiB across the border of pages 1 and 2.
        disk.write(2 * 4096 - 512, &[7; 1024], false).unwrap();
        assert_eq!(disk.allocated_bytes(), 2 * 4096);
        let around = read(&disk, 4096, 3 * 4096);
        assert!(around[..4096 - 512].iter().all(|&b| b == 0));
        assert_eq!(around[4096 - 512..4096 + 512], [7; 1024]);
        assert!(around[4096 + 512..].iter().all(|&b| b == 0));
    }

    #[test]
    fn discard_drops_whole_pages_and_zeroes_parts() {
        let disk = MemDisk::new(1 << 20);
        disk.write(0, &[1; 4 * 4096], false).unwrap();
        // From the middle of page 0 to the middle of page 3.
        disk.discard(2048, 3 * 4096).unwrap();
        assert_eq!(disk.allocated_bytes(), 2 * 4096);
        let all = read(&disk, 0, 4 * 4096);
        assert_eq!(all[..2048], [1; 2048]);
        assert!(all[2048..2048 + 3 * 4096].iter().all(|&b| b == 0));
        assert_eq!(all[2048 + 3 * 4096..], [1; 2048]);
    }

    #[test]
    fn write_zeroes_keeps_pages_unless_unmapping() {
        let disk = MemDisk::new(1 << 20);
        disk.write(0, &[1; 2 * 4096], false).unwrap();
        disk.write_zeroes(0, 4096, false).unwrap();
        assert_eq!(disk.allocated_bytes(), 2 * 4096);
        disk.write_zeroes(4096, 4096, true).unwrap();
        assert_eq!(disk.allocated_bytes(), 4096);
        assert_eq!(read(&disk, 0, 2 * 4096), vec![0; 2 * 4096]);
    }

    #[test]
    fn requests_past_the_end_are_refused() {
        let disk = MemDisk::new(1 << 20);
        let mut buf = [0; 512];
        assert_eq!(disk.read(1 << 20, &mut buf), Err(IoError::InvalidArgument));
        assert_eq!(
            disk.write(u64::MAX - 100, &buf, false),
            Err(IoError::InvalidArgument)
        );
        assert_eq!(disk.discard(0, 2 << 20), Err(IoError::InvalidArgument));
    }

    /// The disk served by the framework's worker threads, with the
    /// in-process loopback kernel instead of `bius.ko`: four queues at
    /// once, each on its own pages and on the page they share.
    #[test]
    fn serves_four_queues_through_the_loopback() {
        const SHARED_PAGE: u64 = 7 << 20;
        let size = 8 << 20;
        let disk = Arc::new(MemDisk::new(size));
        let mut kernel = Loopback::new(&DeviceBuilder::new(size).queues(4)).unwrap();
        kernel.start(Arc::clone(&disk)).unwrap();
        std::thread::scope(|s| {
            for queue in 0..4u8 {
                let kernel = &kernel;
                s.spawn(move || {
                    let offset = u64::from(queue) * (1 << 20) + 512;
                    let data = vec![queue + 1; 64 << 10];
                    assert_eq!(
                        kernel.run(queue.into(), Submission::write(offset, data.clone())),
                        Ok(Reply::Done)
                    );
                    // Each queue writes its own sector of the shared page.
                    let shared = Submission::write(
                        SHARED_PAGE + u64::from(queue) * 512,
                        vec![queue + 1; 512],
                    );
                    assert_eq!(kernel.run(queue.into(), shared), Ok(Reply::Done));
                    let read = Command::Read {
                        offset,
                        len: 64 << 10,
                    };
                    assert_eq!(
                        kernel.submit(queue.into(), read).unwrap().wait_data(),
                        Ok(data)
                    );
                    let discard = Command::Discard {
                        offset: offset - 512,
                        len: 1 << 20,
                    };
                    assert_eq!(kernel.run(queue.into(), discard), Ok(Reply::Done));
                });
            }
        });
        let shared = Command::Read {
            offset: SHARED_PAGE,
            len: 2048,
        };
        let expected: Vec<u8> = (1..=4).flat_map(|q| [q; 512]).collect();
        assert_eq!(kernel.submit(0, shared).unwrap().wait_data(), Ok(expected));
        // Only the shared page is left.
        assert_eq!(disk.allocated_bytes(), 4096);
        kernel.stop().unwrap();
    }
}
