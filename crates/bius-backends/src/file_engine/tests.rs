//! Tests of both backends against temporary files.

use super::*;
use crossbeam_channel as mpsc;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Weak;

const BLOCK: usize = 4096;
const WAIT: Duration = Duration::from_secs(60);

/// The backends to test: threads, and io_uring where the kernel has it.
fn kinds() -> Vec<EngineKind> {
    match probe_uring() {
        Ok(()) => vec![EngineKind::Threads, EngineKind::Uring],
        Err(err) => {
            eprintln!("io_uring unavailable on this host ({err}): testing threads only");
            vec![EngineKind::Threads]
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Read(u64),
    Write(u64, bool),
    Flush,
    Discard(u64, u64),
    Zeroes(u64, u64, bool),
}

/// Where the buffer sits in memory.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Align {
    Page,
    Odd,
}

struct Done {
    tag: usize,
    result: io::Result<()>,
    data: Vec<u8>,
}

#[derive(Default)]
struct Counts {
    finished: AtomicUsize,
    dropped: AtomicUsize,
}

struct TestIo {
    tag: usize,
    kind: Kind,
    buf: Vec<u8>,
    start: usize,
    len: usize,
    done: Option<mpsc::Sender<Done>>,
    counts: Arc<Counts>,
}

impl FileIo for TestIo {
    fn op(&mut self) -> FileOp<'_> {
        let buf = &mut self.buf[self.start..self.start + self.len];
        match self.kind {
            Kind::Read(offset) => FileOp::Read { offset, buf },
            Kind::Write(offset, fua) => FileOp::Write {
                offset,
                data: buf,
                fua,
            },
            Kind::Flush => FileOp::Flush,
            Kind::Discard(offset, len) => FileOp::Discard { offset, len },
            Kind::Zeroes(offset, len, unmap) => FileOp::WriteZeroes { offset, len, unmap },
        }
    }

    fn finish(mut self: Box<Self>, result: io::Result<()>) {
        self.counts.finished.fetch_add(1, Ordering::SeqCst);
        if let Some(done) = self.done.take() {
            let data = self.buf[self.start..self.start + self.len].to_vec();
            let tag = self.tag;
            let _ = done.send(Done { tag, result, data });
        }
    }
}

impl Drop for TestIo {
    fn drop(&mut self) {
        self.counts.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// An engine and the channel its test requests report to.
struct Harness {
    engine: Arc<FileEngine>,
    tx: mpsc::Sender<Done>,
    rx: mpsc::Receiver<Done>,
    counts: Arc<Counts>,
}

impl Harness {
    fn new(file: &Arc<File>, kind: EngineKind, direct: bool) -> Self {
        let options = EngineOptions {
            kind,
            depth: 32,
            threads: 8,
            direct,
            ..EngineOptions::default()
        };
        Harness::with_options(file, options)
    }

    fn with_options(file: &Arc<File>, options: EngineOptions) -> Self {
        let engine = Arc::new(FileEngine::new(file.clone(), options).unwrap());
        if options.kind != EngineKind::Auto {
            assert_eq!(engine.kind(), options.kind);
        }
        let (tx, rx) = mpsc::unbounded();
        Harness {
            engine,
            tx,
            rx,
            counts: Arc::default(),
        }
    }

    fn io(&self, tag: usize, kind: Kind, data: &[u8], align: Align) -> Box<TestIo> {
        let mut buf = vec![0; data.len() + 2 * BLOCK];
        let aligned = buf.as_ptr().align_offset(BLOCK);
        let start = aligned + usize::from(align == Align::Odd);
        buf[start..start + data.len()].copy_from_slice(data);
        Box::new(TestIo {
            tag,
            kind,
            buf,
            start,
            len: data.len(),
            done: Some(self.tx.clone()),
            counts: self.counts.clone(),
        })
    }

    fn submit(&self, tag: usize, kind: Kind, data: &[u8], align: Align) {
        self.engine.submit(self.io(tag, kind, data, align));
    }

    /// The next `n` completions, in tag order.
    fn wait(&self, n: usize) -> Vec<Done> {
        let mut done: Vec<Done> = (0..n)
            .map(|_| self.rx.recv_timeout(WAIT).unwrap())
            .collect();
        done.sort_by_key(|d| d.tag);
        done
    }

    /// Runs one request to its end.
    fn run(&self, kind: Kind, data: &[u8], align: Align) -> io::Result<Vec<u8>> {
        self.submit(0, kind, data, align);
        let done = self.wait(1).pop().unwrap();
        done.result.map(|()| done.data)
    }
}

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 7 + seed * 13) % 251) as u8)
        .collect()
}

fn temp_file(dir: Option<&Path>, data: &[u8]) -> tempfile::NamedTempFile {
    let mut file = match dir {
        Some(dir) => tempfile::NamedTempFile::new_in(dir).unwrap(),
        None => tempfile::NamedTempFile::new().unwrap(),
    };
    file.write_all(data).unwrap();
    file.as_file().sync_all().unwrap();
    file
}

fn open(path: &Path, direct: bool) -> io::Result<Arc<File>> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true);
    if direct {
        options.custom_flags(nix::fcntl::OFlag::O_DIRECT.bits());
    }
    options.open(path).map(Arc::new)
}

#[test]
fn concurrent_random_writes_then_reads_in_flight() {
    const BLOCKS: usize = 1024;
    const IOS: usize = 256;
    // 256 distinct blocks out of 1024, in a scrambled order.
    let blocks: Vec<usize> = (0..IOS).map(|i| (i * 397 + 11) % BLOCKS).collect();
    let mut distinct = blocks.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), IOS);
    for kind in kinds() {
        let tmp = temp_file(None, &vec![0; BLOCKS * BLOCK]);
        let file = open(tmp.path(), false).unwrap();
        let h = Harness::new(&file, kind, false);
        std::thread::scope(|scope| {
            for part in blocks.chunks(IOS / 4).enumerate() {
                let h = &h;
                scope.spawn(move || {
                    for (i, &block) in part.1.iter().enumerate() {
                        let tag = part.0 * (IOS / 4) + i;
                        let write = Kind::Write((block * BLOCK) as u64, tag.is_multiple_of(5));
                        h.submit(tag, write, &pattern(tag + 1, BLOCK), Align::Page);
                    }
                });
            }
        });
        for done in h.wait(IOS) {
            done.result.unwrap();
        }
        for (tag, &block) in blocks.iter().enumerate() {
            h.submit(
                tag,
                Kind::Read((block * BLOCK) as u64),
                &[0; BLOCK],
                Align::Page,
            );
        }
        for done in h.wait(IOS) {
            done.result.unwrap();
            assert!(done.data == pattern(done.tag + 1, BLOCK), "{kind:?}");
        }
        let content = std::fs::read(tmp.path()).unwrap();
        for (tag, &block) in blocks.iter().enumerate() {
            assert!(content[block * BLOCK..][..BLOCK] == pattern(tag + 1, BLOCK));
        }
        assert_eq!(h.counts.finished.load(Ordering::SeqCst), 2 * IOS);
    }
}

#[test]
fn direct_io_with_unaligned_and_aligned_buffers() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let tmp = temp_file(Some(dir.path()), &vec![0; 1 << 20]);
    let file = match open(tmp.path(), true) {
        Err(err) if err.raw_os_error() == Some(nix::libc::EINVAL) => {
            eprintln!("skipped: {} refuses O_DIRECT ({err})", dir.path().display());
            return;
        }
        file => file.unwrap(),
    };
    for kind in kinds() {
        let h = Harness::new(&file, kind, true);
        let data = pattern(kind as usize, 2 * BLOCK);
        h.run(Kind::Write(BLOCK as u64, false), &data, Align::Odd)
            .unwrap();
        h.run(Kind::Write(16 * BLOCK as u64, true), &data, Align::Page)
            .unwrap();
        h.run(Kind::Flush, &[], Align::Page).unwrap();
        for (offset, align) in [(BLOCK, Align::Page), (16 * BLOCK, Align::Odd)] {
            let back = h.run(Kind::Read(offset as u64), &[0; 2 * BLOCK], align);
            assert!(back.unwrap() == data, "{kind:?} {offset} {align:?}");
        }
        let content = std::fs::read(tmp.path()).unwrap();
        assert!(content[BLOCK..3 * BLOCK] == data[..]);
        assert!(content[16 * BLOCK..18 * BLOCK] == data[..]);
    }
}

#[test]
fn flush_discard_and_write_zeroes() {
    const SIZE: usize = 1 << 20;
    for kind in kinds() {
        let tmp = temp_file(None, &pattern(0, SIZE));
        let file = open(tmp.path(), false).unwrap();
        let h = Harness::new(&file, kind, false);
        h.run(Kind::Flush, &[], Align::Page).unwrap();
        let blocks = |tmp: &tempfile::NamedTempFile| tmp.as_file().metadata().unwrap().blocks();
        let before = blocks(&tmp);
        h.run(Kind::Discard(65536, 256 * 1024), &[], Align::Page)
            .unwrap();
        assert!(blocks(&tmp) * 512 <= before * 512 - 256 * 1024, "{kind:?}");
        let back = h.run(Kind::Read(65536), &vec![1; 256 * 1024], Align::Page);
        assert!(back.unwrap().iter().all(|&b| b == 0), "{kind:?}");
        h.run(Kind::Zeroes(0, 8192, false), &[], Align::Page)
            .unwrap();
        h.run(Kind::Zeroes(8192, 8192, true), &[], Align::Page)
            .unwrap();
        let back = h.run(Kind::Read(0), &[1; 16384], Align::Odd).unwrap();
        assert!(back.iter().all(|&b| b == 0), "{kind:?}");
        let content = std::fs::read(tmp.path()).unwrap();
        assert_eq!(content.len(), SIZE);
        assert!(content[16384..65536] == pattern(0, SIZE)[16384..65536]);
        assert!(content[65536 + 256 * 1024..] == pattern(0, SIZE)[65536 + 256 * 1024..]);
    }
}

#[test]
fn not_a_regular_file_refuses_discard_and_writes_zeroes() {
    for kind in kinds() {
        let tmp = temp_file(None, &pattern(1, 8 * BLOCK));
        let file = open(tmp.path(), false).unwrap();
        let options = EngineOptions {
            kind,
            regular: false,
            ..EngineOptions::default()
        };
        let h = Harness::with_options(&file, options);
        let err = h.run(Kind::Discard(0, 4096), &[], Align::Page).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(nix::libc::EOPNOTSUPP), "{kind:?}");
        h.run(
            Kind::Zeroes(BLOCK as u64, 2 * BLOCK as u64, true),
            &[],
            Align::Page,
        )
        .unwrap();
        let content = std::fs::read(tmp.path()).unwrap();
        assert!(content[BLOCK..3 * BLOCK].iter().all(|&b| b == 0));
        assert!(content[3 * BLOCK..] == pattern(1, 8 * BLOCK)[3 * BLOCK..]);
    }
}

#[test]
fn reading_past_the_end_fails_like_file_does() {
    let tmp = temp_file(None, &[7; BLOCK]);
    let device = crate::File::open(tmp.path(), crate::FileOptions::default()).unwrap();
    let mut buf = [0; 512];
    let expected = bius::BlockDevice::read(&device, BLOCK as u64, &mut buf).unwrap_err();
    for kind in kinds() {
        let file = open(tmp.path(), false).unwrap();
        let h = Harness::new(&file, kind, false);
        for (offset, len) in [(BLOCK, 512), (BLOCK / 2, BLOCK)] {
            let err = h
                .run(Kind::Read(offset as u64), &vec![0; len], Align::Page)
                .unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{kind:?}");
            assert_eq!(bius::IoError::from(err), expected, "{kind:?}");
        }
    }
}

/// Drops the engine right after submitting `n` requests; every one must be
/// finished exactly once, and none dropped unfinished.
fn drop_in_flight(kind: EngineKind, drain_timeout: Duration) -> usize {
    const N: usize = 512;
    let tmp = temp_file(None, &vec![0; 256 * BLOCK]);
    let file = open(tmp.path(), false).unwrap();
    let options = EngineOptions {
        kind,
        // Without drain time, a depth of 1 leaves requests queued to cancel.
        depth: if drain_timeout.is_zero() { 1 } else { 16 },
        threads: 4,
        drain_timeout,
        ..EngineOptions::default()
    };
    let h = Harness::with_options(&file, options);
    for tag in 0..N {
        let offset = ((tag % 256) * BLOCK) as u64;
        let kind = if tag.is_multiple_of(2) {
            Kind::Write(offset, drain_timeout.is_zero() || tag.is_multiple_of(8))
        } else {
            Kind::Read(offset)
        };
        h.submit(tag, kind, &pattern(tag, BLOCK), Align::Page);
    }
    drop(h.engine);
    assert_eq!(h.counts.finished.load(Ordering::SeqCst), N, "{kind:?}");
    assert_eq!(h.counts.dropped.load(Ordering::SeqCst), N, "{kind:?}");
    drop(h.tx);
    let results: Vec<Done> = h.rx.iter().collect();
    assert_eq!(results.len(), N);
    let canceled = results.iter().filter(|d| d.result.is_err()).count();
    for done in &results {
        if let Err(err) = &done.result {
            assert_eq!(err.raw_os_error(), Some(nix::libc::ECANCELED), "{kind:?}");
        }
    }
    canceled
}

#[test]
fn every_io_is_finished_once_even_when_the_engine_is_dropped() {
    for kind in kinds() {
        assert_eq!(drop_in_flight(kind, Duration::from_secs(30)), 0, "{kind:?}");
        let canceled = drop_in_flight(kind, Duration::ZERO);
        eprintln!("{kind:?}: dropped without drain time, {canceled} of 512 canceled");
    }
}

#[test]
fn auto_picks_a_working_backend() {
    let tmp = temp_file(None, &[0; 2 * BLOCK]);
    let file = open(tmp.path(), false).unwrap();
    let h = Harness::with_options(&file, EngineOptions::default());
    let expected = match probe_uring() {
        Ok(()) => EngineKind::Uring,
        Err(_) => EngineKind::Threads,
    };
    eprintln!("Auto chose {:?} ({:?})", h.engine.kind(), h.engine);
    assert_eq!(h.engine.kind(), expected);
    let data = pattern(3, BLOCK);
    h.run(Kind::Write(BLOCK as u64, true), &data, Align::Odd)
        .unwrap();
    let back = h.run(Kind::Read(BLOCK as u64), &[0; BLOCK], Align::Page);
    assert!(back.unwrap() == data);
}

#[test]
fn zero_depth_or_threads_is_refused() {
    let tmp = temp_file(None, &[0; BLOCK]);
    let file = open(tmp.path(), false).unwrap();
    for options in [
        EngineOptions {
            depth: 0,
            ..EngineOptions::default()
        },
        EngineOptions {
            threads: 0,
            ..EngineOptions::default()
        },
    ] {
        let err = FileEngine::new(file.clone(), options).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}

/// A request whose `finish` submits a follow-up to the same engine.
struct Chain {
    first: Box<TestIo>,
    then: Box<TestIo>,
    engine: Weak<FileEngine>,
}

impl FileIo for Chain {
    fn op(&mut self) -> FileOp<'_> {
        self.first.op()
    }

    fn finish(self: Box<Self>, result: io::Result<()>) {
        let Chain {
            first,
            then,
            engine,
        } = *self;
        if let Some(engine) = engine.upgrade() {
            engine.submit(then);
        }
        first.finish(result);
    }
}

#[test]
fn finish_may_submit_to_the_same_engine() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<FileEngine>();
    for kind in kinds() {
        let tmp = temp_file(None, &[0; 4 * BLOCK]);
        let file = open(tmp.path(), false).unwrap();
        let h = Harness::new(&file, kind, false);
        let data = pattern(9, BLOCK);
        for round in 0..32 {
            let offset = ((round % 4) * BLOCK) as u64;
            h.engine.submit(Box::new(Chain {
                first: h.io(0, Kind::Write(offset, false), &data, Align::Page),
                then: h.io(1, Kind::Read(offset), &[0; BLOCK], Align::Odd),
                engine: Arc::downgrade(&h.engine),
            }));
            let done = h.wait(2);
            done[0].result.as_ref().unwrap();
            done[1].result.as_ref().unwrap();
            assert!(done[1].data == data, "{kind:?}");
        }
        // The last strong reference is this one once every io is gone.
        while h.counts.dropped.load(Ordering::SeqCst) < 64 {
            std::thread::yield_now();
        }
        assert_eq!(Arc::strong_count(&h.engine), 1);
    }
}

/// A FUA write is durable when it completes: a write with `RWF_DSYNC`, or
/// a write then `fdatasync`; a flush is an `fdatasync` issued after the
/// writes completed before it.
#[test]
fn fua_writes_and_flushes_ask_for_durability() {
    use super::sync_log::{self, Issued};
    for kind in kinds() {
        let tmp = temp_file(None, &vec![0; 16 * BLOCK]);
        let file = open(tmp.path(), false).unwrap();
        let h = Harness::new(&file, kind, false);
        sync_log::take(&file);
        h.run(Kind::Write(0, false), &pattern(1, BLOCK), Align::Page)
            .unwrap();
        assert_eq!(sync_log::take(&file), [Issued::Write], "{kind:?}");
        h.run(
            Kind::Write(BLOCK as u64, true),
            &pattern(2, BLOCK),
            Align::Page,
        )
        .unwrap();
        let fua = match kind {
            EngineKind::Uring => vec![Issued::DsyncWrite],
            _ => vec![Issued::Write, Issued::Fdatasync],
        };
        assert_eq!(sync_log::take(&file), fua, "{kind:?}");
        h.run(Kind::Flush, &[], Align::Page).unwrap();
        assert_eq!(sync_log::take(&file), [Issued::Fdatasync], "{kind:?}");
    }
}
