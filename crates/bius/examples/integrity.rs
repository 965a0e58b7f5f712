//! `integrity`: a wrapper device that checks the data of another one, in
//! the manner of `dm-integrity`.
//!
//! What it teaches:
//! - a device generic over any [`BlockDevice`]: [`Integrity`] stands in
//!   front of an inner device, forwards requests to it and adds a
//!   behaviour of its own, here a checksum per 4 KiB block, kept in
//!   memory: a read whose data no longer matches the checksum of what was
//!   written fails with `EIO` instead of returning corrupted data;
//! - that a wrapper chooses its [`Capabilities`] from the inner device's:
//!   flush and FUA are passed on, discard is not (discarded data has no
//!   defined contents, so no checksum could hold);
//! - that the builder's logical block size decides the request
//!   granularity: with 4096, every request covers whole blocks, so the
//!   wrapper never has to read, patch and rewrite a partial block.
//!
//! The inner device here is [`FileDisk`], a file or block device read and
//! written with `pread`/`pwrite`.  Overwriting some bytes of that file
//! behind the wrapper's back simulates silent corruption on the medium:
//!
//! ```sh
//! truncate -s 256M /tmp/inner.img
//! cargo run --release --example integrity -- --file /tmp/inner.img --name integrity
//! # prints /dev/integrity once live, in another terminal:
//! dd if=/dev/urandom of=/dev/integrity bs=4k count=1 seek=100 oflag=direct
//! printf X | dd of=/tmp/inner.img bs=1 seek=409600 conv=notrunc
//! dd if=/dev/integrity of=/dev/null bs=4k count=1 skip=100 iflag=direct  # Input/output error
//! ```
//!
//! The checksums live only as long as the process: at start, the wrapper
//! adopts the inner device's contents by reading it whole (a real one
//! would store its checksums on a device too).

use std::collections::hash_map::DefaultHasher;
use std::fs::{File, OpenOptions};
use std::hash::Hasher;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{PoisonError, RwLock};

use bius::{BlockDevice, Capabilities, DeviceBuilder, IoError};

mod common;
use common::DiskArgs;

/// A wrapper that checks the data of a file or block device.
#[derive(Debug, clap::Parser)]
#[command(name = "integrity")]
struct Options {
    /// The inner device: a file or a block device; its size must be a
    /// multiple of 4096.
    #[arg(long, default_value = "integrity.img")]
    file: PathBuf,
    /// Size of the file made if FILE is missing or empty: bytes, or with a
    /// unit (256M, 1.5G, 1GB).
    #[arg(long, value_parser = bius::size::parse, default_value = "256M")]
    size: u64,
    #[command(flatten)]
    disk: DiskArgs,
}

/// Bytes per checksummed block; also the disk's logical block size.
const BLOCK_SIZE: usize = 4096;

/// The checksum of one block.  `DefaultHasher::new()` always uses the
/// same keys, so equal data always gives equal sums within one build,
/// all that checksums kept in memory need.
fn checksum(block: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(block);
    hasher.finish()
}

/// A block device in front of `inner` that keeps a checksum of each of
/// its blocks and fails reads of blocks that do not match.
///
/// One lock guards the checksums: writes take it exclusively, for their
/// whole length, so that a read never sees data of one write and the
/// checksum of another.  Simple and correct, not fast: writes to
/// different blocks wait for each other (a real one locks ranges).
struct Integrity<D> {
    inner: D,
    /// The checksum of each block.
    sums: RwLock<Vec<u64>>,
}

impl<D: BlockDevice> Integrity<D> {
    /// `inner`, `size` bytes long, with the checksums of what it holds
    /// now (read whole once).
    fn adopt(inner: D, size: u64) -> Result<Self, IoError> {
        if !size.is_multiple_of(BLOCK_SIZE as u64) {
            return Err(IoError::InvalidArgument);
        }
        let mut sums = Vec::with_capacity(size as usize / BLOCK_SIZE);
        let mut buf = vec![0; 1 << 20];
        for offset in (0..size).step_by(1 << 20) {
            let chunk = &mut buf[..(size - offset).min(1 << 20) as usize];
            inner.read(offset, chunk)?;
            sums.extend(chunk.chunks(BLOCK_SIZE).map(checksum));
        }
        let sums = RwLock::new(sums);
        Ok(Integrity { inner, sums })
    }

    /// The blocks a request covers; requests must cover whole blocks.  (The
    /// framework hands a device only ranges that lie on it.)
    fn blocks(offset: u64, len: usize) -> Result<std::ops::Range<usize>, IoError> {
        if !offset.is_multiple_of(BLOCK_SIZE as u64) || !len.is_multiple_of(BLOCK_SIZE) {
            return Err(IoError::InvalidArgument);
        }
        let first = (offset / BLOCK_SIZE as u64) as usize;
        Ok(first..first + len / BLOCK_SIZE)
    }
}

impl<D: BlockDevice> BlockDevice for Integrity<D> {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            discard: false,
            write_zeroes: true,
            ..self.inner.capabilities()
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let blocks = Self::blocks(offset, buf.len())?;
        let sums = self.sums.read().unwrap_or_else(PoisonError::into_inner);
        self.inner.read(offset, buf)?;
        let data = buf.chunks(BLOCK_SIZE);
        for ((block, data), &sum) in blocks.clone().zip(data).zip(&sums[blocks]) {
            if checksum(data) != sum {
                eprintln!("integrity: block {block} does not match its checksum: EIO");
                return Err(IoError::Io);
            }
        }
        Ok(())
    }

    /// Stores the data, then its checksums.  If the inner write fails,
    /// the checksums stay those of the old data: the blocks the failed
    /// write changed then fail to read, rather than read as garbage.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        let blocks = Self::blocks(offset, data.len())?;
        let new: Vec<u64> = data.chunks(BLOCK_SIZE).map(checksum).collect();
        let mut sums = self.sums.write().unwrap_or_else(PoisonError::into_inner);
        self.inner.write(offset, data, fua)?;
        sums[blocks].copy_from_slice(&new);
        Ok(())
    }

    fn flush(&self) -> Result<(), IoError> {
        self.inner.flush()
    }

    /// The inner device zeroes (with its own write-zeroes, which may be
    /// cheaper than writing); every block then has the sum of zeroes.
    fn write_zeroes(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        let blocks = Self::blocks(offset, len as usize)?;
        let mut sums = self.sums.write().unwrap_or_else(PoisonError::into_inner);
        self.inner.write_zeroes(offset, len, unmap)?;
        sums[blocks].fill(checksum(&[0; BLOCK_SIZE]));
        Ok(())
    }
}

/// The inner device of this example: a file or a block device, through
/// the page cache.  It has a volatile write cache (the page cache), so it
/// declares one and makes data durable on flush and on FUA writes.
struct FileDisk {
    file: File,
}

impl FileDisk {
    /// Opens `path` for reading and writing, making it a file of
    /// `new_size` bytes if it is missing or empty; returns the disk and
    /// its size.
    fn open(path: &Path, new_size: u64) -> std::io::Result<(Self, u64)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        // (metadata().len() is 0 for a block device: seek to its end)
        let mut size = (&file).seek(SeekFrom::End(0))?;
        if size == 0 {
            file.set_len(new_size)?;
            size = new_size;
        }
        Ok((FileDisk { file }, size))
    }
}

impl BlockDevice for FileDisk {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write_cache: true,
            fua: true,
            ..Capabilities::default()
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        Ok(self.file.read_exact_at(buf, offset)?)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        self.file.write_all_at(data, offset)?;
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), IoError> {
        Ok(self.file.sync_data()?)
    }
}

fn main() -> ExitCode {
    let options: Options = clap::Parser::parse();
    let path = &options.file;
    let (inner, size) = match FileDisk::open(path, options.size) {
        Ok(opened) => opened,
        Err(err) => common::usage_error::<Options>(format!("{}: {err}", path.display())),
    };
    let disk = match Integrity::adopt(inner, size) {
        Ok(disk) => disk,
        Err(err) => {
            common::usage_error::<Options>(format!("{} ({size} bytes): {err}", path.display()))
        }
    };
    let builder = options
        .disk
        .apply(DeviceBuilder::new(size), "integrity")
        .logical_block_size(BLOCK_SIZE as u32);
    common::serve(builder.create(disk))
}

// Through the in-process loopback: `cargo test` enables its feature.
#[cfg(test)]
mod tests {
    use bius::loopback::{Loopback, Submission};
    use bius::{Command, Reply};
    use tempfile::NamedTempFile;

    use super::*;

    /// A scratch file holding `contents`, and the wrapper over it.
    fn wrapped(contents: &[u8]) -> (NamedTempFile, Integrity<FileDisk>) {
        let scratch = NamedTempFile::new().unwrap();
        scratch.as_file().write_all_at(contents, 0).unwrap();
        let (inner, size) = FileDisk::open(scratch.path(), 1 << 20).unwrap();
        (scratch, Integrity::adopt(inner, size).unwrap())
    }

    /// Flips one byte of the file behind the wrapper's back.
    fn corrupt(scratch: &NamedTempFile, offset: u64) {
        let mut byte = [0];
        scratch.as_file().read_exact_at(&mut byte, offset).unwrap();
        scratch.as_file().write_all_at(&[!byte[0]], offset).unwrap();
    }

    #[test]
    fn adopts_the_contents_and_catches_corruption() {
        let (scratch, disk) = wrapped(&[3; 16 * BLOCK_SIZE]);
        let mut buf = vec![0; 2 * BLOCK_SIZE];
        disk.read(0, &mut buf).unwrap();
        assert_eq!(buf, vec![3; 2 * BLOCK_SIZE]);

        corrupt(&scratch, BLOCK_SIZE as u64 + 100);
        assert_eq!(disk.read(0, &mut buf), Err(IoError::Io));
        disk.read(0, &mut buf[..BLOCK_SIZE]).unwrap();
        // Writing the block again heals it.
        let block = [9; BLOCK_SIZE];
        disk.write(BLOCK_SIZE as u64, &block, false).unwrap();
        disk.read(0, &mut buf).unwrap();
        assert_eq!(buf[BLOCK_SIZE..], block);
    }

    #[test]
    fn makes_an_empty_file_refuses_partial_blocks_never_discards() {
        let (scratch, disk) = wrapped(&[]);
        assert_eq!(scratch.as_file().metadata().unwrap().len(), 1 << 20);
        let unaligned = disk.write(512, &[1; BLOCK_SIZE], false);
        assert_eq!(unaligned, Err(IoError::InvalidArgument));
        assert_eq!(disk.write(0, &[1; 512], false), unaligned);
        let capabilities = disk.capabilities();
        assert!(capabilities.write_cache && capabilities.fua && capabilities.write_zeroes);
        assert!(!capabilities.discard);
        assert_eq!(disk.discard(0, 4096), Err(IoError::Unsupported));
    }

    /// Served through the framework's workers by the in-process loopback
    /// kernel: writes and write-zeroes from several queues keep their
    /// checksums; a corrupted block fails with EIO as the kernel sees it.
    #[test]
    fn serves_through_the_loopback_and_fails_corrupted_reads() {
        let (scratch, disk) = wrapped(&[0; 1 << 20]);
        let builder = DeviceBuilder::new(1 << 20)
            .queues(2)
            .logical_block_size(4096);
        let mut kernel = Loopback::new(&builder).unwrap();
        kernel.start(disk).unwrap();
        std::thread::scope(|s| {
            for queue in 0..2 {
                let kernel = &kernel;
                s.spawn(move || {
                    let (offset, data) = (u64::from(queue) << 19, vec![queue as u8 + 1; 64 << 10]);
                    let write = Submission::write(offset, data.clone());
                    assert_eq!(kernel.run(queue, write), Ok(Reply::Done));
                    assert_eq!(kernel.run(queue, Command::Flush), Ok(Reply::Done));
                    assert_eq!(kernel.read(queue, offset, 64 << 10), Ok(data));
                });
            }
        });
        let (offset, len, unmap) = (0, 8192, true);
        let zero = Command::WriteZeroes { offset, len, unmap };
        assert_eq!(kernel.run(0, zero), Ok(Reply::Done));
        let mut expected = vec![0; 8192];
        expected.extend([1; 8192]);
        assert_eq!(kernel.read(1, 0, 16384), Ok(expected));

        corrupt(&scratch, 12345);
        assert_eq!(kernel.read(1, 0, 16384), Err(IoError::Io));
        assert_eq!(kernel.read(1, 1 << 19, 4096), Ok(vec![2; 4096]));
        kernel.stop().unwrap();
    }
}
