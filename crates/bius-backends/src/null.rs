//! [`Null`]: a device without storage.

use bius::{BlockDevice, Capabilities, IoError};

/// A device without storage: reads return zeroes, writes are dropped,
/// everything else succeeds.  Measures the framework's own overhead.
#[derive(Debug, Clone, Copy, Default)]
pub struct Null;

impl BlockDevice for Null {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            discard: true,
            write_zeroes: true,
            ..Capabilities::default()
        }
    }

    fn read(&self, _offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        buf.fill(0);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_zeroes_and_accepts_everything() {
        let mut buf = [0xffu8; 4096];
        Null.read(0, &mut buf).unwrap();
        assert_eq!(buf, [0; 4096]);
        Null.write(0, &[1; 512], true).unwrap();
        Null.flush().unwrap();
        Null.discard(0, 1 << 30).unwrap();
        Null.write_zeroes(0, 1 << 30, false).unwrap();
        Null.read(0, &mut buf).unwrap();
        assert_eq!(buf, [0; 4096]);
    }
}
