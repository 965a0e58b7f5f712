//! [`ChunkStore`]: anonymous memory allocated chunk by chunk, the storage
//! of the RAM disks.

use std::ops::Range;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bius::IoError;
use memmap2::MmapMut;

/// Bytes in anonymous memory, cut into fixed-size chunks, each behind its
/// own lock and mapped on its first write: unwritten chunks read as zeroes
/// and take no memory, and requests touching different chunks never
/// contend.  Zeroing a whole chunk with unmap frees it.
#[derive(Debug)]
pub(crate) struct ChunkStore {
    size: u64,
    chunk_size: usize,
    chunks: Vec<RwLock<Option<MmapMut>>>,
}

/// The part of one chunk a request touches.
struct Span {
    /// Chunk index.
    chunk: usize,
    /// Byte range within the chunk.
    within: Range<usize>,
    /// Byte range within the request.
    request: Range<usize>,
}

impl ChunkStore {
    /// A store of `size` bytes allocated in chunks of `chunk_size` bytes.
    ///
    /// # Panics
    /// If `chunk_size` is zero.
    pub(crate) fn new(size: u64, chunk_size: usize) -> Self {
        assert!(chunk_size > 0, "chunk size must be positive");
        let count = size.div_ceil(chunk_size as u64) as usize;
        ChunkStore {
            size,
            chunk_size,
            chunks: (0..count).map(|_| RwLock::new(None)).collect(),
        }
    }

    /// The size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of memory currently mapped.
    pub(crate) fn allocated_bytes(&self) -> u64 {
        (0..self.chunks.len())
            .filter(|&chunk| self.read_chunk(chunk).is_some())
            .map(|chunk| self.chunk_len(chunk) as u64)
            .sum()
    }

    /// Fills `buf` with the bytes at `offset`.
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        for span in self.spans(offset, buf.len() as u64)? {
            let dst = &mut buf[span.request];
            match self.read_chunk(span.chunk).as_ref() {
                Some(map) => dst.copy_from_slice(&map[span.within]),
                None => dst.fill(0),
            }
        }
        Ok(())
    }

    /// Stores `data` at `offset`, mapping chunks as needed.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> Result<(), IoError> {
        for span in self.spans(offset, data.len() as u64)? {
            let mut guard = self.write_chunk(span.chunk);
            let map = match guard.as_mut() {
                Some(map) => map,
                None => guard.insert(
                    MmapMut::map_anon(self.chunk_len(span.chunk)).map_err(|_| IoError::NoSpace)?,
                ),
            };
            map[span.within].copy_from_slice(&data[span.request]);
        }
        Ok(())
    }

    /// Zeroes a range; whole chunks are freed if `unmap`.
    pub(crate) fn zero(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        for span in self.spans(offset, len)? {
            let mut guard = self.write_chunk(span.chunk);
            if unmap && span.within.len() == self.chunk_len(span.chunk) {
                *guard = None;
            } else if let Some(map) = guard.as_mut() {
                map[span.within].fill(0);
            }
        }
        Ok(())
    }

    /// Length of chunk `chunk` (the last one may be short).
    fn chunk_len(&self, chunk: usize) -> usize {
        let start = chunk as u64 * self.chunk_size as u64;
        (self.size - start).min(self.chunk_size as u64) as usize
    }

    fn read_chunk(&self, chunk: usize) -> RwLockReadGuard<'_, Option<MmapMut>> {
        self.chunks[chunk]
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write_chunk(&self, chunk: usize) -> RwLockWriteGuard<'_, Option<MmapMut>> {
        self.chunks[chunk]
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The chunks `[offset, offset + len)` covers, after a range check.
    fn spans(&self, offset: u64, len: u64) -> Result<impl Iterator<Item = Span> + '_, IoError> {
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= self.size)
            .ok_or(IoError::InvalidArgument)?;
        let chunk_size = self.chunk_size as u64;
        let mut pos = offset;
        Ok(std::iter::from_fn(move || {
            (pos < end).then(|| {
                let chunk = pos / chunk_size;
                let within_start = (pos % chunk_size) as usize;
                let n = (end - pos).min(chunk_size - within_start as u64) as usize;
                let request_start = (pos - offset) as usize;
                pos += n as u64;
                Span {
                    chunk: chunk as usize,
                    within: within_start..within_start + n,
                    request: request_start..request_start + n,
                }
            })
        }))
    }
}
