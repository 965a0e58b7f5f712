//! What a backend implements: [`BlockDevice`], which serves each
//! [`Request`] as it comes, and the [`Capabilities`] it declares.

use crate::error::IoError;
use crate::request::{Reply, Request};
use crate::zone::{Zone, ZoneGeometry};

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
    /// These capabilities on a zoned device, which has no discard or
    /// write-zeroes of arbitrary ranges (as zoned `null_blk`).
    pub(crate) fn zoned(self) -> Self {
        Capabilities {
            discard: false,
            write_zeroes: false,
            ..self
        }
    }

    /// The `BIUS_FEATURE_*` bits of these capabilities.
    pub fn features(&self) -> u64 {
        let mut caps = *self;
        CAPABILITY_BITS
            .iter()
            .filter(|(_, _, field)| *field(&mut caps))
            .fold(0, |bits, (bit, _, _)| bits | u64::from(*bit))
    }

    /// Capabilities from `BIUS_FEATURE_*` bits (unknown bits are ignored).
    pub fn from_features(features: u64) -> Self {
        let mut caps = Capabilities::default();
        for (bit, _, field) in CAPABILITY_BITS {
            *field(&mut caps) = features & u64::from(bit) != 0;
        }
        caps
    }
}

/// A capability: its `BIUS_FEATURE_*` bit, its name (the field's, and the
/// uapi's in lower case) and its field.
type CapabilityBit = (u32, &'static str, fn(&mut Capabilities) -> &mut bool);

/// Every capability's bit: the one list of them.
const CAPABILITY_BITS: [CapabilityBit; 7] = [
    (bius_sys::BIUS_FEATURE_WRITE_CACHE, "write_cache", |c| {
        &mut c.write_cache
    }),
    (bius_sys::BIUS_FEATURE_FUA, "fua", |c| &mut c.fua),
    (bius_sys::BIUS_FEATURE_DISCARD, "discard", |c| {
        &mut c.discard
    }),
    (bius_sys::BIUS_FEATURE_WRITE_ZEROES, "write_zeroes", |c| {
        &mut c.write_zeroes
    }),
    (bius_sys::BIUS_FEATURE_READ_ONLY, "read_only", |c| {
        &mut c.read_only
    }),
    (bius_sys::BIUS_FEATURE_ROTATIONAL, "rotational", |c| {
        &mut c.rotational
    }),
    (bius_sys::BIUS_FEATURE_NO_DATA, "no_data", |c| {
        &mut c.no_data
    }),
];

/// The names of the `BIUS_FEATURE_*` bits of `features`, comma separated
/// ("none" if there are none; a bit this version does not know in hex).
pub(crate) fn feature_names(features: u64) -> String {
    let others = [
        (bius_sys::BIUS_FEATURE_ZONED, "zoned"),
        (
            bius_sys::BIUS_FEATURE_ZONE_APPEND_EMULATED,
            "zone_append_emulated",
        ),
    ];
    let mut named: Vec<String> = CAPABILITY_BITS
        .iter()
        .map(|(bit, name, _)| (*bit, *name))
        .chain(others)
        .filter(|(bit, _)| features & u64::from(*bit) != 0)
        .map(|(_, name)| name.to_string())
        .collect();
    let unknown = features & !u64::from(bius_sys::BIUS_FEATURES_ALL);
    if unknown != 0 {
        named.push(format!("{unknown:#x}"));
    }
    match named.is_empty() {
        true => "none".into(),
        false => named.join(","),
    }
}

/// Zero bytes for the default `write_zeroes` of every device kind.
static ZEROES: [u8; 64 * 1024] = [0; 64 * 1024];

/// The writes of zero-filled chunks that zero `len` bytes at `offset`: the
/// default `write_zeroes`, of [`BlockDevice`] and of the async devices.
/// `EINVAL` if the range overflows.
pub(crate) fn zero_chunks(
    offset: u64,
    len: u64,
) -> Result<impl Iterator<Item = (u64, &'static [u8])>, IoError> {
    let end = offset.checked_add(len).ok_or(IoError::InvalidArgument)?;
    let chunk = ZEROES.len() as u64;
    Ok((offset..end).step_by(ZEROES.len()).map(move |pos| {
        let bytes = (end - pos).min(chunk) as usize;
        (pos, &ZEROES[..bytes])
    }))
}

/// Zeroes a range by writing zero-filled chunks through
/// [`BlockDevice::write`]: the default [`BlockDevice::write_zeroes`], for
/// implementations that fall back to it.
pub fn write_zeroes_by_writing<D: BlockDevice + ?Sized>(
    device: &D,
    offset: u64,
    len: u64,
) -> Result<(), IoError> {
    zero_chunks(offset, len)?.try_for_each(|(pos, zeroes)| device.write(pos, zeroes, false))
}

/// A block device implemented in user space, which serves each request
/// as it comes, on its queue's worker thread.
///
/// Every method takes `&self`: the hardware queues call the device
/// concurrently from their worker threads, so an implementation does its
/// own (preferably fine-grained) locking.  Offsets and lengths are in
/// bytes.
///
/// # Zoned devices
///
/// A device whose [`zones`](BlockDevice::zones) returns a geometry is
/// created as a host-managed zoned disk of that geometry's size, and
/// serves the zone methods (`report_zones`, `zone_open`, ...,
/// `zone_append`) as well; [`read`](BlockDevice::read) and
/// [`write`](BlockDevice::write) then follow the zone rules (writes to
/// sequential zones only at the write pointer, reads past it
/// [`FILL_PATTERN`](crate::zone::FILL_PATTERN)).  A conventional device
/// never sees a zone request: the framework refuses them with
/// `EOPNOTSUPP`.  [`ZoneSet`](crate::zone::ZoneSet) implements the zone rules;
/// the [`zone`](crate::zone) module shows a zoned RAM disk built on it.
///
/// A panic in a method called for a request (every method but
/// [`capabilities`](BlockDevice::capabilities)) is caught on the queue's
/// worker thread: the request fails with `EIO` (the panic is logged) and
/// the queue serves on, the requests read with it in the same batch
/// included.  A request served in pieces fails at the piece whose call
/// panicked; the pieces before it were served.  What the panic leaves
/// behind stays: a lock it poisoned is poisoned for the calls after it.
/// `capabilities` and `zones` are called when the device is created, on
/// the thread that creates it, and a panic in them is not caught; so is
/// [`report_zones`](BlockDevice::report_zones) called to judge a write
/// sent again after a recovery: the write fails.
pub trait BlockDevice: Send + Sync + 'static {
    /// What the device supports.  Called once, when the device is created.
    /// The default is a plain device without cache, FUA or discard.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The zone geometry of a zoned device, `None` (the default) for a
    /// conventional one (see [Zoned devices](BlockDevice#zoned-devices)).
    /// Called when the device is created.
    fn zones(&self) -> Option<ZoneGeometry> {
        None
    }

    /// Fills `buf` with the data at `offset`.  The whole buffer must be
    /// written: its previous contents are unspecified.
    ///
    /// A read whose data the kernel passes in several pieces (a segmented
    /// mapped request, e.g. an `O_DIRECT` `readv` of buffers at different
    /// page offsets) is one call per piece, in order, at consecutive
    /// offsets, each piece a multiple of 512 bytes; the request completes
    /// when all pieces are served and fails with the first failing piece's
    /// error (see [Requests in pieces](Request#requests-in-pieces)).  The
    /// range is on the device (see
    /// [Requests past the end](Request#requests-past-the-end)).
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

    /// Up to `max_zones` zones, from the one containing byte `offset` on;
    /// none past the last zone.  The default refuses with
    /// [`IoError::Unsupported`], as every zone method's does.
    fn report_zones(&self, offset: u64, max_zones: usize) -> Result<Vec<Zone>, IoError> {
        let _ = (offset, max_zones);
        Err(IoError::Unsupported)
    }

    /// Opens the zone starting at byte `offset` explicitly.
    fn zone_open(&self, offset: u64) -> Result<(), IoError> {
        let _ = offset;
        Err(IoError::Unsupported)
    }

    /// Closes the zone starting at byte `offset`.
    fn zone_close(&self, offset: u64) -> Result<(), IoError> {
        let _ = offset;
        Err(IoError::Unsupported)
    }

    /// Finishes the zone starting at byte `offset`: full, write pointer at
    /// its end.
    fn zone_finish(&self, offset: u64) -> Result<(), IoError> {
        let _ = offset;
        Err(IoError::Unsupported)
    }

    /// Resets the zone starting at byte `offset`: empty, data discarded.
    fn zone_reset(&self, offset: u64) -> Result<(), IoError> {
        let _ = offset;
        Err(IoError::Unsupported)
    }

    /// Resets every sequential zone that is not empty, read-only or
    /// offline.
    fn zone_reset_all(&self) -> Result<(), IoError> {
        Err(IoError::Unsupported)
    }

    /// Writes `data` at the write pointer of the zone starting at byte
    /// `offset` (with `fua` durably); returns the byte offset where the
    /// data landed.
    fn zone_append(&self, offset: u64, data: &[u8], fua: bool) -> Result<u64, IoError> {
        let _ = (offset, data, fua);
        Err(IoError::Unsupported)
    }

    /// Serves one request by calling the method for its kind.  Override
    /// it only to see every request in one place.
    fn handle(&self, request: Request<'_>) -> Result<Reply, IoError> {
        let done = |result: Result<(), IoError>| result.map(|()| Reply::Done);
        match request {
            Request::Read { offset, buf } => done(self.read(offset, buf)),
            Request::Write { offset, data, fua } => done(self.write(offset, data, fua)),
            Request::Flush => done(self.flush()),
            Request::Discard { offset, len } => done(self.discard(offset, len)),
            Request::WriteZeroes { offset, len, unmap } => {
                done(self.write_zeroes(offset, len, unmap))
            }
            Request::ReportZones { offset, max_zones } => {
                self.report_zones(offset, max_zones).map(Reply::Zones)
            }
            Request::ZoneOpen { offset } => done(self.zone_open(offset)),
            Request::ZoneClose { offset } => done(self.zone_close(offset)),
            Request::ZoneFinish { offset } => done(self.zone_finish(offset)),
            Request::ZoneReset { offset } => done(self.zone_reset(offset)),
            Request::ZoneResetAll => done(self.zone_reset_all()),
            Request::ZoneAppend { offset, data, fua } => {
                self.zone_append(offset, data, fua).map(Reply::Appended)
            }
        }
    }
}

impl<D: BlockDevice + ?Sized> BlockDevice for std::sync::Arc<D> {
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn zones(&self) -> Option<ZoneGeometry> {
        (**self).zones()
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
    fn report_zones(&self, offset: u64, max_zones: usize) -> Result<Vec<Zone>, IoError> {
        (**self).report_zones(offset, max_zones)
    }
    fn zone_open(&self, offset: u64) -> Result<(), IoError> {
        (**self).zone_open(offset)
    }
    fn zone_close(&self, offset: u64) -> Result<(), IoError> {
        (**self).zone_close(offset)
    }
    fn zone_finish(&self, offset: u64) -> Result<(), IoError> {
        (**self).zone_finish(offset)
    }
    fn zone_reset(&self, offset: u64) -> Result<(), IoError> {
        (**self).zone_reset(offset)
    }
    fn zone_reset_all(&self) -> Result<(), IoError> {
        (**self).zone_reset_all()
    }
    fn zone_append(&self, offset: u64, data: &[u8], fua: bool) -> Result<u64, IoError> {
        (**self).zone_append(offset, data, fua)
    }
    fn handle(&self, request: Request<'_>) -> Result<Reply, IoError> {
        (**self).handle(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_capability_is_its_own_bit_and_name() {
        let all = Capabilities {
            write_cache: true,
            fua: true,
            discard: true,
            write_zeroes: true,
            read_only: true,
            rotational: true,
            no_data: true,
        };
        let mut bits = 0;
        for (bit, name, field) in CAPABILITY_BITS {
            let mut one = Capabilities::default();
            *field(&mut one) = true;
            assert_eq!(one.features(), u64::from(bit), "{name}");
            assert_eq!(Capabilities::from_features(u64::from(bit)), one, "{name}");
            assert_eq!(feature_names(u64::from(bit)), name);
            assert_eq!(bits & u64::from(bit), 0, "{name}: a bit twice");
            bits |= u64::from(bit);
        }
        assert_eq!(all.features(), bits);
        assert_eq!(Capabilities::from_features(u64::MAX), all);
    }
}
