//! What a backend implements: [`BlockDevice`], the [`Request`]s it serves
//! and the [`Capabilities`] it declares.

use std::fmt;

use crate::error::IoError;

/// One block request, with offsets and lengths in bytes.
///
/// New kinds of requests may be added in later versions; a backend that
/// overrides [`BlockDevice::handle`] should answer unknown ones with
/// [`IoError::Unsupported`].  Zone operations are not block requests: they
/// are [`ZoneRequest`](crate::ZoneRequest)s, served by
/// [`ZonedDevice::handle_zone`](crate::ZonedDevice::handle_zone).
///
/// # Requests in pieces
///
/// The kernel may pass the data of a read or write in several pieces: a
/// mapped request (see [`TransferMode`](crate::TransferMode)) whose buffer
/// is made of pieces not aligned to each other, such as an `O_DIRECT`
/// `readv` of buffers at different page offsets, comes as a segmented
/// request.  Such a request reaches the device as one [`Request::Read`]
/// or [`Request::Write`] (one [`BlockDevice::read`] or
/// [`BlockDevice::write`] call) per piece, in order, at consecutive
/// offsets, each piece a multiple of 512 bytes long (`fua` is the
/// request's, on every piece).  The kernel's request completes once every
/// piece is served; it fails with the error of the first piece that fails,
/// and the pieces after that one are not served.
#[non_exhaustive]
pub enum Request<'a> {
    /// Fill `buf` (entirely) with the data at `offset`.  A read whose data
    /// comes in pieces is one `Read` per piece (see
    /// [Requests in pieces](Request#requests-in-pieces)).
    Read {
        /// Byte offset on the device.
        offset: u64,
        /// Where the data goes; its length is the request length.
        buf: &'a mut [u8],
    },
    /// Store `data` at `offset`.  A write whose data comes in pieces is
    /// one `Write` per piece (see
    /// [Requests in pieces](Request#requests-in-pieces)).
    Write {
        /// Byte offset on the device.
        offset: u64,
        /// The data to store; its length is the request length.
        data: &'a [u8],
        /// Forced unit access: the data must be durable on completion.
        fua: bool,
    },
    /// Make every completed write durable.
    Flush,
    /// The range's contents are no longer needed.
    Discard {
        /// Byte offset on the device.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
    /// Make the range read as zeroes.
    WriteZeroes {
        /// Byte offset on the device.
        offset: u64,
        /// Length in bytes.
        len: u64,
        /// The backend may deallocate the range (false: keep it allocated).
        unmap: bool,
    },
}

impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Read { offset, buf } => f
                .debug_struct("Read")
                .field("offset", offset)
                .field("len", &buf.len())
                .finish(),
            Request::Write { offset, data, fua } => f
                .debug_struct("Write")
                .field("offset", offset)
                .field("len", &data.len())
                .field("fua", fua)
                .finish(),
            Request::Flush => f.write_str("Flush"),
            Request::Discard { offset, len } => f
                .debug_struct("Discard")
                .field("offset", offset)
                .field("len", len)
                .finish(),
            Request::WriteZeroes { offset, len, unmap } => f
                .debug_struct("WriteZeroes")
                .field("offset", offset)
                .field("len", len)
                .field("unmap", unmap)
                .finish(),
        }
    }
}

/// What a device supports; announced to the kernel when it is created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Capabilities {
    /// The device has a volatile write cache: the kernel sends flushes.
    pub write_cache: bool,
    /// The device honours forced unit access on writes.
    pub fua: bool,
    /// The device implements [`BlockDevice::discard`].
    pub discard: bool,
    /// The kernel may send write-zeroes requests.
    pub write_zeroes: bool,
    /// The disk is read-only.
    pub read_only: bool,
    /// The disk is rotational (seeks are expensive).
    pub rotational: bool,
    /// The device keeps no data (a null device, a timing model without
    /// storage): the kernel moves none, in any
    /// [`TransferMode`](crate::TransferMode).  The device still sees every
    /// read and write with its offset and length, but a read's `buf` is a
    /// scratch buffer whose contents go nowhere (the reader's buffer keeps
    /// what it held, as with null_blk without `memory_backed`) and a
    /// write's `data` is zeroes.
    pub no_data: bool,
}

impl Capabilities {
    /// The `BIUS_FEATURE_*` bits of these capabilities.
    pub fn features(&self) -> u64 {
        use bius_sys::*;
        [
            (self.write_cache, BIUS_FEATURE_WRITE_CACHE),
            (self.fua, BIUS_FEATURE_FUA),
            (self.discard, BIUS_FEATURE_DISCARD),
            (self.write_zeroes, BIUS_FEATURE_WRITE_ZEROES),
            (self.read_only, BIUS_FEATURE_READ_ONLY),
            (self.rotational, BIUS_FEATURE_ROTATIONAL),
            (self.no_data, BIUS_FEATURE_NO_DATA),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .fold(0, |bits, (_, bit)| bits | u64::from(bit))
    }

    /// Capabilities from `BIUS_FEATURE_*` bits (unknown bits are ignored).
    pub fn from_features(features: u64) -> Self {
        use bius_sys::*;
        let has = |bit: u32| features & u64::from(bit) != 0;
        Capabilities {
            write_cache: has(BIUS_FEATURE_WRITE_CACHE),
            fua: has(BIUS_FEATURE_FUA),
            discard: has(BIUS_FEATURE_DISCARD),
            write_zeroes: has(BIUS_FEATURE_WRITE_ZEROES),
            read_only: has(BIUS_FEATURE_READ_ONLY),
            rotational: has(BIUS_FEATURE_ROTATIONAL),
            no_data: has(BIUS_FEATURE_NO_DATA),
        }
    }
}

/// Zero bytes for the default [`BlockDevice::write_zeroes`].
static ZEROES: [u8; 64 * 1024] = [0; 64 * 1024];

/// Zeroes a range by writing zero-filled chunks through
/// [`BlockDevice::write`]: the default [`BlockDevice::write_zeroes`], for
/// implementations that fall back to it.
pub fn write_zeroes_by_writing<D: BlockDevice + ?Sized>(
    device: &D,
    offset: u64,
    len: u64,
) -> Result<(), IoError> {
    let end = offset.checked_add(len).ok_or(IoError::InvalidArgument)?;
    let mut pos = offset;
    while pos < end {
        let chunk = (end - pos).min(ZEROES.len() as u64) as usize;
        device.write(pos, &ZEROES[..chunk], false)?;
        pos += chunk as u64;
    }
    Ok(())
}

/// A block device implemented in user space.
///
/// Every method takes `&self`: the hardware queues call the device
/// concurrently from their worker threads, so an implementation does its
/// own (preferably fine-grained) locking.
///
/// A panic in a method called for a request (every method but
/// [`capabilities`](BlockDevice::capabilities)) is caught on the queue's
/// worker thread: the request fails with `EIO` (the panic is logged) and
/// the queue serves on, the requests read with it in the same batch
/// included.  A request served in pieces fails at the piece whose call
/// panicked; the pieces before it were served.  What the panic leaves
/// behind stays: a lock it poisoned is poisoned for the calls after it.
/// `capabilities` is called once, on the thread that creates the device,
/// and a panic in it is not caught.
pub trait BlockDevice: Send + Sync + 'static {
    /// What the device supports.  Called once, when the device is created.
    /// The default is a plain device without cache, FUA or discard.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// Fills `buf` with the data at `offset`.  The whole buffer must be
    /// written: its previous contents are unspecified.
    ///
    /// A read whose data the kernel passes in several pieces (a segmented
    /// mapped request, e.g. an `O_DIRECT` `readv` of buffers at different
    /// page offsets) is one call per piece, in order, at consecutive
    /// offsets, each piece a multiple of 512 bytes; the request completes
    /// when all pieces are served and fails with the first failing piece's
    /// error (see [Requests in pieces](Request#requests-in-pieces)).
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError>;

    /// Stores `data` at `offset`; with `fua` it must be durable on return.
    ///
    /// A write whose data the kernel passes in several pieces is one call
    /// per piece, as for [`BlockDevice::read`]: in order, at consecutive
    /// offsets, each piece a multiple of 512 bytes and with the request's
    /// `fua`; the request completes when all pieces are stored and fails
    /// with the first failing piece's error.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError>;

    /// Makes every completed write durable.  The default does nothing,
    /// which is right for a device without a volatile cache.
    fn flush(&self) -> Result<(), IoError> {
        Ok(())
    }

    /// Discards a range.  The default refuses with [`IoError::Unsupported`].
    fn discard(&self, offset: u64, len: u64) -> Result<(), IoError> {
        let _ = (offset, len);
        Err(IoError::Unsupported)
    }

    /// Makes a range read as zeroes.  The default writes zero-filled chunks
    /// through [`BlockDevice::write`].
    fn write_zeroes(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        let _ = unmap;
        write_zeroes_by_writing(self, offset, len)
    }

    /// Serves one request by calling the method for its kind.  Override it
    /// only to see every request in one place.
    fn handle(&self, request: Request<'_>) -> Result<(), IoError> {
        match request {
            Request::Read { offset, buf } => self.read(offset, buf),
            Request::Write { offset, data, fua } => self.write(offset, data, fua),
            Request::Flush => self.flush(),
            Request::Discard { offset, len } => self.discard(offset, len),
            Request::WriteZeroes { offset, len, unmap } => self.write_zeroes(offset, len, unmap),
        }
    }
}

impl<D: BlockDevice + ?Sized> BlockDevice for std::sync::Arc<D> {
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        (**self).read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        (**self).write(offset, data, fua)
    }
    fn flush(&self) -> Result<(), IoError> {
        (**self).flush()
    }
    fn discard(&self, offset: u64, len: u64) -> Result<(), IoError> {
        (**self).discard(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64, unmap: bool) -> Result<(), IoError> {
        (**self).write_zeroes(offset, len, unmap)
    }
    fn handle(&self, request: Request<'_>) -> Result<(), IoError> {
        (**self).handle(request)
    }
}
