//! Everything that talks to the kernel by system calls Rust cannot check:
//! the only module tree of the crate with `unsafe` code.
//!
//! `lib.rs` allows `unsafe` for this module; this file denies it again and
//! allows it for each submodule that needs it, each named for what it does:
//!
//! - `control`: an open `/dev/bius` and its device ioctls;
//! - `queue`: a `/dev/bius` connected to a hardware queue, the kernel's
//!   [`Transport`](crate::transport::Transport) (`read()`/`write()`,
//!   `BIUS_IOC_COMPLETE_FETCH`, the eventfd that wakes a deferred worker);
//! - `window`: the mmap()ed data window of the map transfer modes, and
//!   `SharedBytes`, the bytes of a request in it, which are shared memory;
//! - `zones`: `BLKREPORTZONE` on a zoned block device;
//! - `io_flusher`: `prctl(PR_SET_IO_FLUSHER)`;
//! - `sched`: `sched_setscheduler(SCHED_BATCH)` for a queue thread.
//!
//! Every `unsafe` block and impl says why it is sound in a `// SAFETY:`
//! comment (checked by clippy's `undocumented_unsafe_blocks`).
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[allow(unsafe_code)]
mod control;
#[allow(unsafe_code)]
mod io_flusher;
#[allow(unsafe_code)]
mod queue;
#[allow(unsafe_code)]
pub(crate) mod sched;
#[allow(unsafe_code)]
mod window;
#[allow(unsafe_code)]
mod zones;

pub(crate) use control::Control;
pub(crate) use io_flusher::IoFlusherMark;
pub(crate) use queue::KernelQueue;
pub(crate) use window::{SharedBytes, WindowRange};
pub(crate) use zones::report_zones;
