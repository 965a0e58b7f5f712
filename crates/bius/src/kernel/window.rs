//! The data window of a queue in the map transfer modes ([`Window`]), and
//! the bytes of a request in it ([`SharedBytes`], [`WindowRange`]): memory
//! shared with the kernel and, through it, with the I/O's owner.

use std::marker::PhantomData;
use std::num::NonZeroUsize;
use std::ops::Deref;
use std::os::fd::AsFd;
use std::ptr::NonNull;
use std::sync::Arc;

use nix::errno::Errno;
use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

use crate::transport::window_range;

/// The mmap()ed data window of a queue.  The kernel maps the data of a
/// request with `BIUS_REQ_MAPPED` into it (in one piece or in segments)
/// while the request is outstanding; every other page of it shows the zero
/// page, read-only (writing it raises SIGBUS).
pub(super) struct Window {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Window` only owns the mapping, to unmap it once: it gives no
// access to the memory (that is `SharedBytes`'), so any thread may hold,
// share or drop it.
unsafe impl Send for Window {}
// SAFETY: as for `Send`.
unsafe impl Sync for Window {}

impl Window {
    /// mmap()s the first `len` bytes of `fd` (a connected `/dev/bius`: its
    /// `map_window_bytes`), shared, readable and writable.
    pub(super) fn map(fd: impl AsFd, len: usize) -> Result<Arc<Window>, Errno> {
        let length = NonZeroUsize::new(len).ok_or(Errno::EINVAL)?;
        // SAFETY: a new mapping at an address the kernel chooses, so no
        // existing memory is affected; the kernel checks the length and
        // flags against the device.  The mapping is owned by the returned
        // `Window`, which unmaps it exactly once, on drop.
        let ptr = unsafe {
            mmap(
                None,
                length,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd,
                0,
            )
        }?;
        Ok(Arc::new(Window {
            ptr: ptr.cast(),
            len,
        }))
    }

    /// The bytes `offset..offset + len` of the window, reached through the
    /// returned value alone while it borrows the window; `None` if they
    /// are not all inside it.
    ///
    /// # Safety
    /// The range is the data (or one piece of the data) of a mapped
    /// request that has been fetched and not yet completed, and no other
    /// [`SharedBytes`] of this window covering any of it lives meanwhile:
    /// the contract of [`SharedBytes`].
    pub(super) unsafe fn bytes(&self, offset: u64, len: usize) -> Option<SharedBytes<'_>> {
        let start = self.start_of(offset, len)?;
        // SAFETY: inside the mapping, which outlives the borrow of `self`;
        // the caller vouches for the rest.
        Some(unsafe { SharedBytes::new(start, len) })
    }

    /// The bytes `offset..offset + len` of the window, lent until the
    /// returned range is dropped, from any thread; `None` if they are not
    /// all inside it.
    ///
    /// # Safety
    /// As for [`Window::bytes`], for as long as the range lives.
    pub(super) unsafe fn lend(self: &Arc<Self>, offset: u64, len: usize) -> Option<WindowRange> {
        let start = self.start_of(offset, len)?;
        Some(WindowRange {
            // SAFETY: inside the mapping, which the range keeps alive (the
            // `Arc`) however long it lives: hence `'static`; the caller
            // vouches for the rest.
            bytes: unsafe { SharedBytes::new(start, len) },
            _window: Arc::clone(self),
        })
    }

    /// Where the bytes `offset..offset + len` start, if they are all
    /// inside the window.
    fn start_of(&self, offset: u64, len: usize) -> Option<NonNull<u8>> {
        let range = window_range(offset, len, self.len)?;
        // SAFETY: `range.start <= self.len`: inside the mapping, or one
        // past its end.
        Some(unsafe { self.ptr.add(range.start) })
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made by `map`,
        // unmapped only here; every `SharedBytes` of it borrows the
        // `Window`, or is a `WindowRange` holding it, so none outlives it.
        if let Err(errno) = unsafe { munmap(self.ptr.cast(), self.len) } {
            log::warn!("munmap of a data window failed: {errno}");
        }
    }
}

/// The bytes of an outstanding request in a queue's data window: memory
/// shared with the kernel, which says so.
///
/// # What the memory is
/// The kernel inserts the pages of the request's I/O buffer into the
/// window when the worker fetches the request (read-only for the data of a
/// write or zone append, writable for a read's buffer; partial pages are
/// copied to and from spare pages), and keeps them there until the worker
/// writes the request's completion.  If the request times out or the
/// device stops first, the kernel puts its sink page behind the range
/// instead, so that the memory never faults.  The same pages are mapped
/// elsewhere: in the process that issued a direct I/O, or in the page
/// cache (and in any process that maps those file pages) for buffered
/// I/O.
///
/// # Who may change it, and why a slice is still honest
/// While the request is outstanding, only two parties can change these
/// bytes besides us:
/// - the I/O's owner, writing its own buffer while its I/O is in flight:
///   a direct I/O's issuer racing its own I/O (undefined data for any
///   block driver, as with DMA), or, for buffered I/O, the page cache
///   redirtying a page under writeback (a BIUS disk does not ask for
///   stable pages; such a page is written again later);
/// - the kernel, once the request has timed out or its device has
///   stopped: the sink page, shared by every aborted request, replaces
///   the data; the outcome of the request is then thrown away.
///
/// Neither is a party the device must cooperate with: the first is the
/// owner's own race with its I/O, the second happens only to a request
/// whose result no one will see.  So the framework takes as the contract
/// that, for as long as the request is outstanding, the bytes are its
/// alone — the contract every block driver has with the owner of an I/O
/// buffer — and on that contract lends them to the device as the plain
/// `&[u8]` and `&mut [u8]` of [`BlockDevice`](crate::BlockDevice),
/// [`Io::data`](crate::Io::data) and [`Io::buf_mut`](crate::Io::buf_mut):
/// the point of the map modes is that the device reaches the I/O's pages
/// with no copy, and a slice is what every storage API takes.  Should the
/// owner break the contract, what the device sees is bytes that change
/// under it (torn data, which `u8` admits: every bit pattern is a valid
/// byte), never memory that goes away or faults.
///
/// Those slices are made in one place, [`SharedBytes::as_slice`] and
/// [`SharedBytes::as_mut_slice`], for the device's call or its `Io`.
/// Everywhere else the framework handles the window through this type:
/// it copies with raw-pointer copies ([`SharedBytes::append_to`],
/// [`SharedBytes::copy_from`]) and keeps no slice of the window.
///
/// A `SharedBytes` of the kernel's window is made only by [`Window`], for
/// the request its transport fetched; one of ordinary memory (the
/// loopback's stand-in window, tests) from a `&mut [u8]`.
pub(crate) struct SharedBytes<'w> {
    ptr: NonNull<u8>,
    len: usize,
    /// Borrowed as a `&'w mut [u8]` would be.  (Invariant in `'w` behind
    /// a `&mut`, as any type: no swap can trade bytes of a short borrow
    /// for those of a [`WindowRange`].)
    _borrow: PhantomData<&'w mut [u8]>,
}

// SAFETY: a `SharedBytes` is an exclusive borrow of its bytes, as a
// `&mut [u8]` is, which is `Send`: moving it to another thread moves the
// only access.
unsafe impl Send for SharedBytes<'_> {}
// SAFETY: as a `&mut [u8]` is `Sync`: `&SharedBytes` only reads.
unsafe impl Sync for SharedBytes<'_> {}

impl SharedBytes<'_> {
    /// The `len` bytes at `ptr`.
    ///
    /// # Safety
    /// They stay mapped, readable (and writable if anyone writes them
    /// through the value) and are reached through the value alone for as
    /// long as it lives, as the type's documentation says of a request's
    /// data.
    unsafe fn new(ptr: NonNull<u8>, len: usize) -> Self {
        SharedBytes {
            ptr,
            len,
            _borrow: PhantomData,
        }
    }

    /// Appends a copy of the bytes to `buf` (gathering a request's data
    /// out of the window).
    pub(crate) fn append_to(&self, buf: &mut Vec<u8>) {
        buf.reserve(self.len);
        let end = buf.len();
        // SAFETY: `self.len` readable bytes at `self.ptr` (the contract of
        // `new`), copied into `buf`'s spare capacity, just reserved, which
        // the window cannot overlap; those bytes are then initialized.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), buf.as_mut_ptr().add(end), self.len);
            buf.set_len(end + self.len);
        }
    }

    /// Overwrites the bytes with `src` (scattering a read's data back to
    /// the window).
    ///
    /// # Panics
    /// If `src` is not as long as the bytes.
    pub(crate) fn copy_from(&mut self, src: &[u8]) {
        assert_eq!(src.len(), self.len, "copying into shared bytes");
        // SAFETY: `self.len` writable bytes at `self.ptr`, reached only
        // through `self` (the contract of `new`), exclusively borrowed;
        // `src` is ours and cannot overlap them.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr(), self.len) }
    }

    /// The bytes as a slice, for the device's call (or its `Io`): one of
    /// the two places a slice of the window is made, on the contract the
    /// type's documentation states.
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `self.len` readable bytes at `self.ptr`, alive and not
        // written through any other value of ours while `self` is
        // borrowed (the contract of `new`); that nobody else changes them
        // meanwhile is the contract of the request's owner, see the
        // type's documentation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes as a mutable slice, for the device's call (or its `Io`):
    /// a read's buffer, which the kernel maps writable (writing a write's
    /// data raises SIGBUS).  The other place a slice of the window is
    /// made, see [`SharedBytes::as_slice`].
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the borrow
        // exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<'a> From<&'a mut [u8]> for SharedBytes<'a> {
    /// Bytes of ordinary memory standing in for a window's (the loopback's
    /// window, tests).
    fn from(bytes: &'a mut [u8]) -> Self {
        let len = bytes.len();
        // SAFETY: an exclusive borrow of `len` bytes for `'a`, which the
        // value keeps; no one else can reach them meanwhile.
        unsafe { SharedBytes::new(NonNull::from(bytes).cast(), len) }
    }
}

/// The data of one outstanding mapped request in its queue's window, lent
/// to whoever serves it, on any thread, until it is completed: the
/// deferred worker takes it back (drops it) before it writes the
/// completion, so the contract of [`SharedBytes`] holds for as long as
/// the range lives.  The range lies inside the request's slot, and the
/// kernel sends one request per tag at a time: no two lent ranges
/// overlap, and the worker asks the transport for no lent range.  The
/// `Arc` keeps the mapping alive however long the range lives.
pub(crate) struct WindowRange {
    bytes: SharedBytes<'static>,
    _window: Arc<Window>,
}

impl WindowRange {
    /// The bytes as a mutable slice (a read's buffer): see
    /// [`SharedBytes::as_mut_slice`].
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        self.bytes.as_mut_slice()
    }
}

/// (No `DerefMut`: through a `&mut SharedBytes<'static>` the bytes could
/// be swapped with another window's, outliving their own mapping.)
impl Deref for WindowRange {
    type Target = SharedBytes<'static>;

    fn deref(&self) -> &SharedBytes<'static> {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use nix::sys::memfd::{memfd_create, MFdFlags};

    use super::*;

    /// A window of `len` bytes over a new memory file, and the file.
    fn memory_window(len: usize) -> (Arc<Window>, File) {
        let file = File::from(memfd_create("bius-window-test", MFdFlags::MFD_CLOEXEC).unwrap());
        file.set_len(len as u64).unwrap();
        (Window::map(&file, len).unwrap(), file)
    }

    #[test]
    fn bytes_copy_in_and_out_without_a_slice() {
        let mut memory = vec![1u8, 2, 3, 4];
        let mut bytes = SharedBytes::from(&mut memory[1..3]);
        let mut buf = vec![9];
        bytes.append_to(&mut buf);
        assert_eq!(buf, [9, 2, 3]);
        bytes.copy_from(&[7, 8]);
        assert_eq!(bytes.as_slice(), &[7, 8]);
        bytes.as_mut_slice()[0] = 6;
        assert_eq!(memory, [1, 6, 8, 4]);
    }

    #[test]
    #[should_panic(expected = "copying into shared bytes")]
    fn copying_a_buffer_of_another_length_panics() {
        let mut memory = [0u8; 4];
        SharedBytes::from(&mut memory[..]).copy_from(&[1, 2]);
    }

    /// The window is shared memory: what one mapping of the pages writes,
    /// another (the I/O owner's, standing in) sees, and the reverse.
    #[test]
    fn a_window_shares_its_pages() {
        const LEN: usize = 2 * 4096;
        let (ours, file) = memory_window(LEN);
        let theirs = Window::map(&file, LEN).unwrap();
        assert_ne!(ours.ptr, theirs.ptr);
        // SAFETY: test ranges; the two windows' bytes never overlap in use.
        let (mut mine, mut owners) = unsafe {
            (
                ours.bytes(4096, 512).unwrap(),
                theirs.bytes(4096, 512).unwrap(),
            )
        };
        mine.copy_from(&[0x5a; 512]);
        assert_eq!(owners.as_slice(), &[0x5a; 512]);
        owners.as_mut_slice()[..2].copy_from_slice(&[1, 2]);
        let mut seen = Vec::new();
        mine.append_to(&mut seen);
        assert_eq!(&seen[..3], &[1, 2, 0x5a]);
    }

    #[test]
    fn ranges_outside_the_window_are_refused() {
        let (window, _file) = memory_window(4096);
        // SAFETY: no bytes are made.
        unsafe {
            assert!(window.bytes(4096, 1).is_none());
            assert!(window.bytes(4095, 2).is_none());
            assert!(window.lend(u64::MAX, 1).is_none());
        }
    }

    /// A lent range keeps the mapping: the window's last other holder (the
    /// queue) may be gone.
    #[test]
    fn a_lent_range_outlives_its_queue() {
        let (window, _file) = memory_window(4096);
        // SAFETY: the only bytes made of the window.
        let mut range = unsafe { window.lend(512, 1024).unwrap() };
        drop(window);
        range.as_mut_slice().fill(3);
        let mut buf = Vec::new();
        range.append_to(&mut buf);
        assert_eq!(buf, [3; 1024]);
        let moved =
            std::thread::spawn(move || range.as_slice().iter().map(|&b| u64::from(b)).sum::<u64>());
        assert_eq!(moved.join().unwrap(), 3 * 1024);
    }
}
