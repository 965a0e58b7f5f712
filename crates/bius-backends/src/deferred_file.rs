//! [`DeferredFile`]: a file or block device as backing store, with many
//! requests in flight per queue through a [`FileEngine`].

use std::io;
use std::sync::Arc;

use bius::{Capabilities, DeferredDevice, Io, IoError, Op};

use crate::file::{capabilities, File};
use crate::file_engine::{EngineKind, EngineOptions, FileEngine, FileIo, FileOp};

/// A device stored in a regular file or an existing block device, as
/// [`File`], but served with up to the queue depth of requests in flight
/// per queue: each request goes to a [`FileEngine`] (io_uring where the
/// kernel has it, a pool of threads otherwise) and completes when the file
/// has answered.  This is the backend for a real SSD (`O_DIRECT`), whose
/// speed shows only with requests in flight.
///
/// ```no_run
/// use bius_backends::file_engine::EngineKind;
/// use bius_backends::{DeferredFile, File, FileOptions};
///
/// let options = FileOptions { direct: true, read_only: false };
/// let disk = DeferredFile::new(File::open("/dev/nvme0n1", options)?, EngineKind::Auto, 128)?;
/// let device = bius::DeviceBuilder::new(disk.size())
///     .logical_block_size(4096)
///     .queue_depth(128)
///     .create_deferred(disk)?;
/// device.run_until_signal()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct DeferredFile {
    engine: FileEngine,
    size: u64,
    capabilities: Capabilities,
}

impl DeferredFile {
    /// Serves `file` through an engine of `kind` with up to `depth`
    /// requests in flight (io_uring: the ring's size; threads: as many
    /// threads, at most 64).
    pub fn new(file: File, kind: EngineKind, depth: u32) -> io::Result<Self> {
        let options = EngineOptions {
            kind,
            depth,
            threads: depth.clamp(1, 64) as usize,
            direct: file.options.direct,
            regular: file.regular,
            ..EngineOptions::default()
        };
        let capabilities = capabilities(file.options, file.regular);
        let size = file.size;
        let engine = FileEngine::new(Arc::new(file.file), options)?;
        Ok(DeferredFile {
            engine,
            size,
            capabilities,
        })
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The engine chosen: [`EngineKind::Uring`] or [`EngineKind::Threads`].
    pub fn engine_kind(&self) -> EngineKind {
        self.engine.kind()
    }
}

impl DeferredDevice for DeferredFile {
    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn submit(&self, io: Io) {
        // (a conventional device sees no zone request)
        let writes = !matches!(io.command().op(), Op::Read | Op::Flush);
        if writes && self.capabilities.read_only {
            return io.complete_done(Err(IoError::ReadOnly));
        }
        self.engine.submit(Box::new(FileRequest(io)));
    }
}

/// A request on its way to the file and back.
struct FileRequest(Io);

impl FileIo for FileRequest {
    fn op(&mut self) -> FileOp<'_> {
        self.0.request()
    }

    fn finish(self: Box<Self>, result: io::Result<()>) {
        self.0.complete_done(result.map_err(IoError::from));
    }
}

#[cfg(test)]
mod tests {
    use bius::loopback::{Loopback, Submission};
    use bius::DeviceBuilder;

    use super::*;
    use crate::file_engine::probe_uring;
    use crate::{testing, FileOptions};

    const SIZE: u64 = 4 << 20;
    const CHUNK: usize = 64 << 10;

    /// Patterns written with 64 requests in flight on two queues read
    /// back, from the device and from the file; discard reads as zeroes.
    fn round_trip(kind: EngineKind) {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.as_file().set_len(SIZE).unwrap();
        let file = File::open(tmp.path(), FileOptions::default()).unwrap();
        let disk = DeferredFile::new(file, kind, 32).unwrap();
        assert_eq!(disk.size(), SIZE);
        let builder = DeviceBuilder::new(SIZE).queues(2).queue_depth(32);
        let mut kernel = Loopback::new(&builder).unwrap();
        kernel.start_deferred(disk).unwrap();
        testing::round_trip(&kernel, 64, CHUNK);
        // The data is in the file (but the discarded first chunk).
        let on_disk = std::fs::read(tmp.path()).unwrap();
        for i in 1..64 {
            let want = testing::chunk_pattern(i, CHUNK);
            assert_eq!(on_disk[i * CHUNK..(i + 1) * CHUNK], want[..], "chunk {i}");
        }
        kernel.stop().unwrap();
    }

    #[test]
    fn round_trip_on_threads() {
        round_trip(EngineKind::Threads);
    }

    #[test]
    fn round_trip_on_io_uring() {
        match probe_uring() {
            Ok(()) => round_trip(EngineKind::Uring),
            // (the engine's own tests report it too)
            Err(err) => eprintln!("io_uring unavailable here ({err}): tested on threads only"),
        }
    }

    #[test]
    fn a_read_only_file_refuses_writes() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.as_file().set_len(SIZE).unwrap();
        let options = FileOptions {
            read_only: true,
            ..FileOptions::default()
        };
        let disk = DeferredFile::new(
            File::open(tmp.path(), options).unwrap(),
            EngineKind::Auto,
            4,
        );
        let disk = disk.unwrap();
        assert!(disk.capabilities().read_only);
        let mut kernel = Loopback::new(&DeviceBuilder::new(SIZE)).unwrap();
        kernel.start_deferred(disk).unwrap();
        assert_eq!(
            kernel.run(0, Submission::write(0, vec![1; 512])),
            Err(IoError::ReadOnly)
        );
        assert_eq!(kernel.read(0, 0, 512), Ok(vec![0; 512]));
        kernel.stop().unwrap();
    }
}
