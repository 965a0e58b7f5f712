//! [`RamDisk`]: anonymous memory, allocated chunk by chunk.

use bius::{BlockDevice, Capabilities, IoError};

use crate::chunks::ChunkStore;

/// Default allocation unit of a [`RamDisk`].
pub(crate) const DEFAULT_CHUNK_SIZE: usize = 1 << 20;

/// A RAM disk in anonymous memory.
///
/// The disk is cut into fixed-size chunks, each behind its own lock and
/// mapped on its first write: unwritten chunks read as zeroes and take no
/// memory, and queues touching different chunks never contend.  Discarding
/// or zeroing (with unmap) a whole chunk frees it.
#[derive(Debug)]
pub struct RamDisk {
    store: ChunkStore,
}

impl RamDisk {
    /// A RAM disk of `size` bytes in 1 MiB chunks.
    pub fn new(size: u64) -> Self {
        Self::with_chunk_size(size, DEFAULT_CHUNK_SIZE)
    }

    /// A RAM disk of `size` bytes allocated in chunks of `chunk_size` bytes.
    ///
    /// # Panics
    /// If `chunk_size` is zero.
    pub fn with_chunk_size(size: u64, chunk_size: usize) -> Self {
        RamDisk {
            store: ChunkStore::new(size, chunk_size),
        }
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.store.size()
    }

    /// Bytes of memory currently mapped.
    pub fn allocated_bytes(&self) -> u64 {
        self.store.allocated_bytes()
    }
}

impl BlockDevice for RamDisk {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            discard: true,
            write_zeroes: true,
            ..Capabilities::default()
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        self.store.read(offset, buf)
    }

    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
        self.store.write(offset, data)
    }

    fn discard(&self, offset: u64, len: u64) -> Result<(), IoError> {
        self.store.zero(offset, len, true)
    }

    fn write_zeroes(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        self.store.zero(offset, len, unmap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: usize = 4096;

    fn disk() -> RamDisk {
        // Three and a half chunks: the last one is short.
        RamDisk::with_chunk_size(3 * CHUNK as u64 + 2048, CHUNK)
    }

    fn read(disk: &RamDisk, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0xee; len];
        disk.read(offset, &mut buf).unwrap();
        buf
    }

    #[test]
    fn unwritten_chunks_read_as_zeroes_and_take_no_memory() {
        let disk = disk();
        assert_eq!(
            read(&disk, 0, disk.size() as usize),
            vec![0; disk.size() as usize]
        );
        assert_eq!(disk.allocated_bytes(), 0);
    }

    #[test]
    fn writes_across_chunk_boundaries_round_trip() {
        let disk = disk();
        let data: Vec<u8> = (0..2 * CHUNK + 2048).map(|i| (i % 251) as u8).collect();
        disk.write(CHUNK as u64 - 512, &data, false).unwrap();
        assert_eq!(read(&disk, CHUNK as u64 - 512, data.len()), data);
        // Touched chunks 0..=3 (the last one short).
        assert_eq!(disk.allocated_bytes(), disk.size());
        // Neighbouring bytes are untouched.
        assert_eq!(read(&disk, 0, CHUNK - 512), vec![0; CHUNK - 512]);
    }

    #[test]
    fn the_short_last_chunk_is_usable_to_the_end() {
        let disk = disk();
        disk.write(disk.size() - 512, &[7; 512], false).unwrap();
        assert_eq!(read(&disk, disk.size() - 512, 512), vec![7; 512]);
        assert_eq!(disk.allocated_bytes(), 2048);
        assert_eq!(
            disk.write(disk.size() - 512, &[7; 1024], false),
            Err(IoError::InvalidArgument)
        );
        let mut buf = [0; 512];
        assert_eq!(
            disk.read(disk.size(), &mut buf),
            Err(IoError::InvalidArgument)
        );
        assert_eq!(disk.read(u64::MAX, &mut buf), Err(IoError::InvalidArgument));
    }

    #[test]
    fn discard_frees_whole_chunks_and_zeroes_partial_ones() {
        let disk = disk();
        disk.write(0, &vec![1; disk.size() as usize], false)
            .unwrap();
        // From the middle of chunk 0 to the middle of chunk 2.
        disk.discard(2048, 2 * CHUNK as u64).unwrap();
        assert_eq!(disk.allocated_bytes(), disk.size() - CHUNK as u64);
        let all = read(&disk, 0, disk.size() as usize);
        assert!(all[..2048].iter().all(|&b| b == 1));
        assert!(all[2048..2048 + 2 * CHUNK].iter().all(|&b| b == 0));
        assert!(all[2048 + 2 * CHUNK..].iter().all(|&b| b == 1));
        // The short last chunk is whole too.
        disk.discard(3 * CHUNK as u64, 2048).unwrap();
        assert_eq!(disk.allocated_bytes(), disk.size() - CHUNK as u64 - 2048);
    }

    #[test]
    fn write_zeroes_frees_only_when_unmapping() {
        let disk = disk();
        disk.write(0, &vec![1; 2 * CHUNK], false).unwrap();
        disk.write_zeroes(0, CHUNK as u64, false).unwrap();
        assert_eq!(disk.allocated_bytes(), 2 * CHUNK as u64);
        disk.write_zeroes(CHUNK as u64, CHUNK as u64, true).unwrap();
        assert_eq!(disk.allocated_bytes(), CHUNK as u64);
        assert_eq!(read(&disk, 0, 2 * CHUNK), vec![0; 2 * CHUNK]);
    }

    #[test]
    fn queues_write_different_chunks_concurrently() {
        let disk = RamDisk::with_chunk_size(8 * CHUNK as u64, CHUNK);
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let disk = &disk;
                s.spawn(move || {
                    for _ in 0..100 {
                        disk.write(u64::from(t) * CHUNK as u64, &[t; CHUNK], false)
                            .unwrap();
                    }
                });
            }
        });
        for t in 0..8u8 {
            assert_eq!(
                read(&disk, u64::from(t) * CHUNK as u64, CHUNK),
                vec![t; CHUNK]
            );
        }
    }
}
