//! Test hook: the writes and syncs the backends issue, per file (by inode),
//! in the order they issue them, so that tests can check that a FUA write
//! or a flush really asks the kernel for durability.  Only in test builds.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

/// What was issued to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Issued {
    /// A plain write (`pwrite`, io_uring `WRITE`).
    Write,
    /// A write that is durable when it completes (io_uring `WRITE` with
    /// `RWF_DSYNC`).
    DsyncWrite,
    /// `fdatasync` (or io_uring `FSYNC` with `DATASYNC`).
    Fdatasync,
}

static LOG: Mutex<Vec<(u64, Issued)>> = Mutex::new(Vec::new());

/// Records `issued` on `file`.
pub(crate) fn record(file: &File, issued: Issued) {
    let inode = file.metadata().map_or(0, |meta| meta.ino());
    LOG.lock().unwrap().push((inode, issued));
}

/// What was issued on `file` so far, and forgets it.
pub(crate) fn take(file: &File) -> Vec<Issued> {
    let inode = file.metadata().unwrap().ino();
    let mut log = LOG.lock().unwrap();
    let (mine, others) = log.drain(..).partition(|&(ino, _)| ino == inode);
    *log = others;
    mine.into_iter().map(|(_, issued)| issued).collect()
}
