//! [`File`]: a regular file or an existing block device as backing store.

use std::fs::OpenOptions;
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use bius::{BlockDevice, Capabilities, IoError};
use nix::fcntl::OFlag;

use crate::file_engine::sync_ops::SyncFile;

/// How to open a [`File`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileOptions {
    /// Bypass the page cache (`O_DIRECT`).  Offsets and lengths must then
    /// be multiples of the backing store's block size, which a BIUS logical
    /// block size at least as large guarantees.
    pub direct: bool,
    /// Open read-only and announce a read-only disk.
    pub read_only: bool,
}

/// A device stored in a regular file or an existing block device, accessed
/// with positioned reads and writes (so queues never contend on a file
/// offset).
///
/// Flush is `fdatasync`, FUA is a write followed by `fdatasync`; on regular
/// files discard punches holes and write-zeroes uses `fallocate`.  The
/// operations themselves are those of the worker threads of
/// [`FileEngine`](crate::file_engine::FileEngine).
#[derive(Debug)]
pub struct File {
    pub(crate) file: std::fs::File,
    pub(crate) size: u64,
    pub(crate) options: FileOptions,
    pub(crate) regular: bool,
}

impl File {
    /// Opens `path`; the device size is the file's or block device's size.
    pub fn open(path: impl AsRef<Path>, options: FileOptions) -> io::Result<Self> {
        let mut open = OpenOptions::new();
        open.read(true).write(!options.read_only);
        if options.direct {
            open.custom_flags(OFlag::O_DIRECT.bits());
        }
        let mut file = open.open(path)?;
        let regular = file.metadata()?.file_type().is_file();
        // Works for block devices too, whose metadata length is 0.
        let size = file.seek(SeekFrom::End(0))?;
        Ok(File {
            file,
            size,
            options,
            regular,
        })
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The synchronous operations on the file.
    fn ops(&self) -> SyncFile<'_> {
        SyncFile {
            file: &self.file,
            direct: self.options.direct,
            regular: self.regular,
        }
    }

    /// [`IoError::ReadOnly`] on a read-only disk.
    fn writable(&self) -> Result<(), IoError> {
        if self.options.read_only {
            return Err(IoError::ReadOnly);
        }
        Ok(())
    }
}

/// What a file or block device as backing store supports.
pub(crate) fn capabilities(options: FileOptions, regular: bool) -> Capabilities {
    Capabilities {
        write_cache: true,
        fua: true,
        discard: regular,
        write_zeroes: true,
        read_only: options.read_only,
        rotational: false,
        no_data: false,
    }
}

impl BlockDevice for File {
    fn capabilities(&self) -> Capabilities {
        capabilities(self.options, self.regular)
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        Ok(self.ops().read(offset, buf)?)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        self.writable()?;
        Ok(self.ops().write(offset, data, fua)?)
    }

    fn flush(&self) -> Result<(), IoError> {
        Ok(self.ops().flush()?)
    }

    fn discard(&self, offset: u64, len: u64) -> Result<(), IoError> {
        self.writable()?;
        Ok(self.ops().discard(offset, len)?)
    }

    fn write_zeroes(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        self.writable()?;
        Ok(self.ops().write_zeroes(offset, len, unmap)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_engine::sync_ops::with_bounce;
    use bius::Errno;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    const SIZE: u64 = 1 << 20;

    fn backing(data: &[u8]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(data).unwrap();
        file
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 253) as u8).collect()
    }

    /// Allocated bytes of the file (holes are not).
    fn allocated(tmp: &tempfile::NamedTempFile) -> u64 {
        tmp.as_file().metadata().unwrap().blocks() * 512
    }

    #[test]
    fn size_comes_from_the_file() {
        let tmp = backing(&vec![0; 3 * 4096]);
        let file = File::open(tmp.path(), FileOptions::default()).unwrap();
        assert_eq!(file.size(), 3 * 4096);
    }

    #[test]
    fn reads_and_writes_round_trip_buffered_and_direct() {
        for direct in [false, true] {
            let tmp = backing(&vec![0; SIZE as usize]);
            let options = FileOptions {
                direct,
                read_only: false,
            };
            let file = match File::open(tmp.path(), options) {
                Err(err) if direct && err.raw_os_error() == Some(Errno::EINVAL as i32) => {
                    eprintln!("skipped: the temporary directory does not support O_DIRECT");
                    continue;
                }
                file => file.unwrap(),
            };
            let data = pattern(8192);
            // Deliberately misaligned in memory: O_DIRECT bounces.
            let mut unaligned = vec![0u8; 8192 + 1];
            unaligned[1..].copy_from_slice(&data);
            file.write(4096, &unaligned[1..], false).unwrap();
            file.write(65536, &data, true).unwrap();
            file.flush().unwrap();
            let mut back = vec![0u8; 8192 + 1];
            file.read(4096, &mut back[1..]).unwrap();
            assert_eq!(&back[1..], &data[..], "direct: {direct}");
            with_bounce(8192, |aligned| {
                file.read(65536, aligned).unwrap();
                assert_eq!(aligned, &data[..]);
            });
            assert_eq!(
                std::fs::read(tmp.path()).unwrap()[4096..4096 + 8192],
                data[..]
            );
        }
    }

    #[test]
    fn fua_and_flush_sync_and_the_cache_is_announced() {
        use crate::file_engine::sync_log::{self, Issued};
        let tmp = backing(&[0; 8192]);
        let file = File::open(tmp.path(), FileOptions::default()).unwrap();
        let caps = file.capabilities();
        assert!(caps.write_cache && caps.fua);
        sync_log::take(&file.file);
        file.write(0, &[1; 512], false).unwrap();
        assert_eq!(sync_log::take(&file.file), [Issued::Write]);
        file.write(512, &[2; 512], true).unwrap();
        assert_eq!(
            sync_log::take(&file.file),
            [Issued::Write, Issued::Fdatasync]
        );
        file.flush().unwrap();
        assert_eq!(sync_log::take(&file.file), [Issued::Fdatasync]);
    }

    #[test]
    fn reading_past_the_end_fails_with_eio() {
        let tmp = backing(&[0; 4096]);
        let file = File::open(tmp.path(), FileOptions::default()).unwrap();
        let mut buf = [0; 512];
        assert_eq!(file.read(4096, &mut buf), Err(IoError::Io));
    }

    #[test]
    fn discard_punches_holes_and_keeps_the_size() {
        let tmp = backing(&pattern(SIZE as usize));
        let file = File::open(tmp.path(), FileOptions::default()).unwrap();
        assert!(file.capabilities().discard);
        let before = allocated(&tmp);
        file.discard(65536, 256 * 1024).unwrap();
        assert!(allocated(&tmp) <= before - 256 * 1024);
        let content = std::fs::read(tmp.path()).unwrap();
        assert_eq!(content.len() as u64, SIZE);
        assert!(content[65536..65536 + 256 * 1024].iter().all(|&b| b == 0));
        assert_eq!(content[..65536], pattern(SIZE as usize)[..65536]);
    }

    #[test]
    fn write_zeroes_zeroes_with_and_without_unmap() {
        let tmp = backing(&pattern(SIZE as usize));
        let file = File::open(tmp.path(), FileOptions::default()).unwrap();
        file.write_zeroes(0, 8192, false).unwrap();
        file.write_zeroes(8192, 8192, true).unwrap();
        let content = std::fs::read(tmp.path()).unwrap();
        assert!(content[..16384].iter().all(|&b| b == 0));
        assert_eq!(content[16384..], pattern(SIZE as usize)[16384..]);
    }

    #[test]
    fn read_only_refuses_writes() {
        let tmp = backing(&[5; 4096]);
        let options = FileOptions {
            direct: false,
            read_only: true,
        };
        let file = File::open(tmp.path(), options).unwrap();
        assert!(file.capabilities().read_only);
        assert_eq!(file.write(0, &[0; 512], false), Err(IoError::ReadOnly));
        let mut buf = [0; 512];
        file.read(0, &mut buf).unwrap();
        assert_eq!(buf, [5; 512]);
    }
}
