//! Devices without storage: [`Null`], which keeps no data and asks the
//! kernel to move none, and [`Zero`], which reads zeroes and drops writes
//! while the data moves as for any device.

use bius::{BlockDevice, Capabilities, IoError};

/// What both devices without storage support: discards and write-zeroes
/// (which they accept and forget).
fn storage_free(no_data: bool) -> Capabilities {
    Capabilities {
        discard: true,
        write_zeroes: true,
        no_data,
        ..Capabilities::default()
    }
}

/// A device that keeps no data: the kernel moves none
/// ([`Capabilities::no_data`]), in any transfer mode.  Reads leave the
/// reader's buffer as it was (as null_blk does without `memory_backed`),
/// writes are dropped, everything succeeds.  Measures the cost of a request
/// itself, without its data; [`Zero`] measures it with the data.
#[derive(Debug, Clone, Copy, Default)]
pub struct Null;

impl BlockDevice for Null {
    fn capabilities(&self) -> Capabilities {
        storage_free(true)
    }

    /// Leaves `buf` (a scratch buffer: no data moves) as it is.
    fn read(&self, _offset: u64, _buf: &mut [u8]) -> Result<(), IoError> {
        Ok(())
    }

    fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> Result<(), IoError> {
        Ok(())
    }

    fn discard(&self, _offset: u64, _len: u64) -> Result<(), IoError> {
        Ok(())
    }

    fn write_zeroes(&self, _offset: u64, _len: u64, _unmap: bool) -> Result<(), IoError> {
        Ok(())
    }
}

/// A device without storage whose data moves as any device's does (in the
/// streams or through the window, as the transfer mode says): reads return
/// zeroes, writes are dropped, everything else succeeds.  Measures the
/// framework's own overhead with the data; [`Null`] measures it without.
#[derive(Debug, Clone, Copy, Default)]
pub struct Zero;

impl BlockDevice for Zero {
    fn capabilities(&self) -> Capabilities {
        storage_free(false)
    }

    fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        buf.fill(0);
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        Null.write(offset, data, fua)
    }

    fn discard(&self, offset: u64, len: u64) -> Result<(), IoError> {
        Null.discard(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        Null.write_zeroes(offset, len, unmap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_keeps_no_data_and_accepts_everything() {
        assert!(Null.capabilities().no_data);
        let mut buf = [0xa5u8; 4096];
        Null.read(0, &mut buf).unwrap();
        assert_eq!(buf, [0xa5; 4096], "a read leaves the buffer as it was");
        Null.write(0, &[1; 512], true).unwrap();
        Null.flush().unwrap();
        Null.discard(0, 1 << 30).unwrap();
        Null.write_zeroes(0, 1 << 30, false).unwrap();
    }

    #[test]
    fn zero_reads_zeroes_and_accepts_everything() {
        assert!(!Zero.capabilities().no_data);
        let mut buf = [0xffu8; 4096];
        Zero.read(0, &mut buf).unwrap();
        assert_eq!(buf, [0; 4096]);
        Zero.write(0, &[1; 512], true).unwrap();
        Zero.flush().unwrap();
        Zero.discard(0, 1 << 30).unwrap();
        Zero.write_zeroes(0, 1 << 30, false).unwrap();
        Zero.read(0, &mut buf).unwrap();
        assert_eq!(buf, [0; 4096]);
    }
}
