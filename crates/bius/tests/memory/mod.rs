//! Memory behind one lock: the store of the synchronous test disks.

use std::sync::RwLock;

use bius::{BlockDevice, IoError};

/// A plain synchronous device in memory.
pub struct Memory(RwLock<Vec<u8>>);

impl Memory {
    /// `size` bytes of `byte`.
    pub fn new(size: u64, byte: u8) -> Self {
        Memory(RwLock::new(vec![byte; size as usize]))
    }
}

impl BlockDevice for Memory {
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        buf.copy_from_slice(&self.0.read().unwrap()[offset as usize..][..buf.len()]);
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), IoError> {
        self.0.write().unwrap()[offset as usize..][..data.len()].copy_from_slice(data);
        Ok(())
    }
}
