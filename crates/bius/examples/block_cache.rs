//! `block_cache`: a cache of blocks in memory in front of any deferred
//! device, zoned or not, written with the hooks of a wrapper.
//!
//! What it teaches:
//! - a wrapper [`DeferredDevice`] over another one, as
//!   [`bius::zone::DeferredZoned`] is: it answers what it can itself (a
//!   read of cached blocks completes at once, without `inner`), passes
//!   the rest on, and learns how each ended with [`Io::on_complete`];
//! - that a wrapper's hook sees the request as it completes: a read's
//!   buffer holds what every device under it put there (the fill pattern
//!   of a `DeferredZoned` included), so that is what it caches;
//! - keeping a cache right with requests in flight: a request that
//!   changes data drops its blocks as it is submitted, and a completion
//!   fills the cache only if no change began before it ended (the
//!   block layer does not order overlapping requests in flight);
//! - over a zoned device, that data changes in more ways than by writes:
//!   an append, a reset and a finish drop their zone's blocks, a reset of
//!   all zones the whole cache.
//!
//! It writes through: a write goes to `inner` and completes when `inner`
//! has it, then its whole blocks are cached.  A write-back cache (a write
//! completed from memory, written to `inner` on a flush or an eviction)
//! would need requests of its own to send `inner`; a wrapper has only the
//! kernel's to pass on, so here flushes and FUA writes pass through too.
//!
//! The inner device here is a RAM disk served through
//! [`Immediate`], zoned by a [`DeferredZoned`] with `--zone-size`; its
//! reads take `--inner-latency` (a stand-in for a slower medium).  At
//! exit the cache prints its hits and misses.
//!
//! ```sh
//! cargo run --release --example block_cache -- --size 256M --cache 16M --inner-latency 1ms
//! cargo run --release --example block_cache -- --size 256M --zone-size 4M --name cached0
//! ```

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use bius::deferred::Immediate;
use bius::zone::{DeferredZoned, ZoneGeometry};
use bius::{BlockDevice, Capabilities, Command, DeferredDevice, DeviceBuilder, Io, IoError};

mod common;
use common::DiskArgs;

/// A cache of blocks in front of a RAM disk, zoned or not.
#[derive(Debug, clap::Parser)]
#[command(name = "block_cache")]
struct Options {
    /// Disk size: bytes, or with a unit (256M, 1.5G, 1GB).
    #[arg(long, value_parser = bius::size::parse, default_value = "256M")]
    size: u64,
    /// Memory for cached blocks.
    #[arg(long, value_parser = bius::size::parse, default_value = "16M")]
    cache: u64,
    /// Zone the disk in zones of this size (a power of two).
    #[arg(long, value_parser = bius::size::parse)]
    zone_size: Option<u64>,
    /// How long each read of the inner device takes, e.g. 1ms.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    inner_latency: Duration,
    #[command(flatten)]
    disk: DiskArgs,
}

/// Bytes per cached block.
const BLOCK: u64 = 4096;

/// The blocks the bytes `[offset, offset + len)` touch.
fn touched(offset: u64, len: u64) -> Range<u64> {
    offset / BLOCK..(offset + len).div_ceil(BLOCK)
}

/// The cached blocks, least recently used first out, and what tells a
/// completion whether it may fill the cache.
#[derive(Default)]
struct Blocks {
    /// Block number → (last use, data).
    data: HashMap<u64, (u64, Box<[u8]>)>,
    /// Last use → block number.
    by_use: BTreeMap<u64, u64>,
    /// Uses so far: the clock of `by_use`.
    uses: u64,
    capacity: usize,
    /// Requests that change data, submitted so far and in flight.
    changes: u64,
    changing: u64,
    hits: u64,
    misses: u64,
}

/// When a request began, for [`Blocks::may_fill`].
#[derive(Clone, Copy)]
struct Began {
    /// The changes submitted by then (its own included).
    changes: u64,
    /// No change was in flight.
    alone: bool,
}

impl Blocks {
    /// Block `block`'s data, now the most recently used.
    fn get(&mut self, block: u64) -> Option<&[u8]> {
        let (used, data) = self.data.get_mut(&block)?;
        self.by_use.remove(used);
        self.uses += 1;
        *used = self.uses;
        self.by_use.insert(*used, block);
        Some(data)
    }

    /// Caches `data` as block `block`, the least recently used block out
    /// if the cache is full.
    fn insert(&mut self, block: u64, data: &[u8]) {
        self.remove(block);
        if self.data.len() >= self.capacity {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                return;
            };
            self.data.remove(&oldest);
        }
        self.uses += 1;
        self.by_use.insert(self.uses, block);
        self.data.insert(block, (self.uses, data.into()));
    }

    fn remove(&mut self, block: u64) {
        if let Some((used, _)) = self.data.remove(&block) {
            self.by_use.remove(&used);
        }
    }

    /// A request that changes `blocks` begins: they leave the cache.
    fn begin_change(&mut self, blocks: Range<u64>) -> Began {
        if blocks.end - blocks.start > self.data.len() as u64 {
            let cached = self.data.keys().filter(|block| blocks.contains(block));
            for block in cached.copied().collect::<Vec<_>>() {
                self.remove(block);
            }
        } else {
            blocks.for_each(|block| self.remove(block));
        }
        self.changes += 1;
        self.changing += 1;
        Began {
            changes: self.changes,
            alone: self.changing == 1,
        }
    }

    /// A read begins.
    fn begin_read(&self) -> Began {
        let (changes, alone) = (self.changes, self.changing == 0);
        Began { changes, alone }
    }

    /// Whether a request that `began` so, and has completed, may fill the
    /// cache: nothing changed while it was in flight, so the data it
    /// moved is what `inner` holds.
    fn may_fill(&self, began: Began) -> bool {
        began.alone && self.changes == began.changes
    }
}

/// The cache, locked.  (A panic never leaves it half-updated.)
fn lock(blocks: &Mutex<Blocks>) -> MutexGuard<'_, Blocks> {
    blocks.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A write-through cache of `BLOCK`-byte blocks in front of `inner`.
struct BlockCache<D> {
    inner: D,
    zone_size: Option<u64>,
    blocks: Arc<Mutex<Blocks>>,
}

impl<D: DeferredDevice> BlockCache<D> {
    /// `inner` with a cache of `bytes` bytes of blocks.
    fn new(inner: D, bytes: u64) -> Self {
        let blocks = Blocks {
            capacity: (bytes / BLOCK) as usize,
            ..Blocks::default()
        };
        let zone_size = inner.zones().map(|zones| zones.zone_size());
        let blocks = Arc::new(Mutex::new(blocks));
        BlockCache {
            inner,
            zone_size,
            blocks,
        }
    }

    /// The blocks of the zone holding byte `offset`.
    fn zone(&self, offset: u64) -> Range<u64> {
        let size = self.zone_size.unwrap_or(BLOCK);
        touched(offset / size * size, size)
    }

    /// Serves a read from the cache if every block is there, else from
    /// `inner`, caching what it read.  Reads of parts of blocks pass by.
    fn read(&self, mut io: Io, offset: u64, len: u64) {
        if !offset.is_multiple_of(BLOCK) || !len.is_multiple_of(BLOCK) {
            return self.inner.submit(io);
        }
        let blocks = touched(offset, len);
        let mut cache = lock(&self.blocks);
        let hit = blocks.clone().all(|block| cache.data.contains_key(&block));
        if hit {
            cache.hits += 1;
            let buf = io.buf_mut().chunks_mut(BLOCK as usize);
            for (block, buf) in blocks.zip(buf) {
                buf.copy_from_slice(cache.get(block).expect("checked above"));
            }
            drop(cache);
            return io.complete_done(Ok(()));
        }
        cache.misses += 1;
        let began = cache.begin_read();
        drop(cache);
        let shared = Arc::clone(&self.blocks);
        io.on_complete(move |mut io, result| {
            let mut cache = lock(&shared);
            if result.is_ok() && cache.may_fill(began) {
                let data = io.buf_mut().chunks(BLOCK as usize);
                blocks
                    .zip(data)
                    .for_each(|(block, data)| cache.insert(block, data));
            }
            drop(cache);
            io.complete(result);
        });
        self.inner.submit(io);
    }

    /// Passes on a request that changes `blocks`; a write at `write_at`
    /// caches its whole blocks once `inner` has them.
    fn change(&self, mut io: Io, blocks: Range<u64>, write_at: Option<u64>) {
        let began = lock(&self.blocks).begin_change(blocks);
        let shared = Arc::clone(&self.blocks);
        io.on_complete(move |io, result| {
            let mut cache = lock(&shared);
            cache.changing -= 1;
            match write_at {
                Some(offset) if result.is_ok() && cache.may_fill(began) => {
                    let first = offset.div_ceil(BLOCK);
                    let skip = (first * BLOCK - offset) as usize;
                    let data = io.data().get(skip..).unwrap_or_default();
                    let whole = data.chunks_exact(BLOCK as usize);
                    (first..)
                        .zip(whole)
                        .for_each(|(block, data)| cache.insert(block, data));
                }
                _ => {}
            }
            drop(cache);
            io.complete(result);
        });
        self.inner.submit(io);
    }
}

impl<D: DeferredDevice> DeferredDevice for BlockCache<D> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn zones(&self) -> Option<ZoneGeometry> {
        self.inner.zones()
    }

    fn submit(&self, io: Io) {
        match io.command() {
            Command::Read { offset, len } => self.read(io, offset, len),
            Command::Write { offset, len, .. } => {
                self.change(io, touched(offset, len), Some(offset))
            }
            Command::Discard { offset, len } | Command::WriteZeroes { offset, len, .. } => {
                self.change(io, touched(offset, len), None)
            }
            Command::ZoneAppend { offset, .. }
            | Command::ZoneFinish { offset }
            | Command::ZoneReset { offset } => self.change(io, self.zone(offset), None),
            Command::ZoneResetAll => self.change(io, 0..u64::MAX, None),
            // Flushes, zone reports, opens and closes change no data.
            _ => self.inner.submit(io),
        }
    }
}

/// The inner device of this example: RAM whose reads take their time.
struct SlowRam {
    data: RwLock<Vec<u8>>,
    read_latency: Duration,
}

impl SlowRam {
    fn new(size: u64, read_latency: Duration) -> Self {
        let data = RwLock::new(vec![0; size as usize]);
        SlowRam { data, read_latency }
    }
}

impl BlockDevice for SlowRam {
    /// Write zeroes (the trait's, through `write`), so that the kernel
    /// sends them and the cache sees them.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write_zeroes: true,
            ..Capabilities::default()
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        std::thread::sleep(self.read_latency);
        let data = self.data.read().unwrap_or_else(PoisonError::into_inner);
        buf.copy_from_slice(&data[offset as usize..][..buf.len()]);
        Ok(())
    }

    fn write(&self, offset: u64, bytes: &[u8], _fua: bool) -> Result<(), IoError> {
        let mut data = self.data.write().unwrap_or_else(PoisonError::into_inner);
        data[offset as usize..][..bytes.len()].copy_from_slice(bytes);
        Ok(())
    }
}

/// Serves `cache` until a signal, then prints its hits and misses.
fn serve<D: DeferredDevice>(builder: DeviceBuilder, cache: BlockCache<D>) -> ExitCode {
    let cache = Arc::new(cache);
    let status = common::serve(builder.create_deferred(Arc::clone(&cache)));
    let blocks = lock(&cache.blocks);
    eprintln!(
        "block_cache: {} hits, {} misses",
        blocks.hits, blocks.misses
    );
    status
}

fn main() -> ExitCode {
    let options: Options = clap::Parser::parse();
    let ram = Immediate::new(SlowRam::new(options.size, options.inner_latency));
    let Some(zone_size) = options.zone_size else {
        let builder = options
            .disk
            .apply(DeviceBuilder::new(options.size), "block_cache");
        return serve(builder, BlockCache::new(ram, options.cache));
    };
    let geometry = ZoneGeometry::new(options.size, zone_size).unwrap_or_else(|err| {
        common::usage_error::<Options>(format!("invalid zone geometry: {err}"))
    });
    let zoned = DeferredZoned::new(ram, geometry);
    // The size is the geometry's: a builder without one.
    let builder = options.disk.apply(DeviceBuilder::default(), "block_cache");
    serve(builder, BlockCache::new(zoned, options.cache))
}

// Through the in-process loopback: `cargo test` enables its feature.
#[cfg(test)]
mod tests {
    use bius::loopback::{Loopback, Submission};
    use bius::zone::FILL_PATTERN;
    use bius::Reply;

    use super::*;

    type Cached<D> = Arc<BlockCache<D>>;

    /// A loopback kernel serving `cache` on two queues.
    fn start<D: DeferredDevice>(builder: DeviceBuilder, cache: &Cached<D>) -> Loopback {
        let mut kernel = Loopback::new(&builder.queues(2)).unwrap();
        kernel.start_deferred(Arc::clone(cache)).unwrap();
        kernel
    }

    fn counts<D>(cache: &Cached<D>) -> (u64, u64) {
        let blocks = lock(&cache.blocks);
        (blocks.hits, blocks.misses)
    }

    #[test]
    fn reads_hit_writes_go_through_and_old_blocks_leave() {
        let ram = Immediate::new(SlowRam::new(1 << 20, Duration::ZERO));
        // Room for 4 blocks.
        let cache = Arc::new(BlockCache::new(ram, 4 * BLOCK));
        let kernel = start(DeviceBuilder::new(1 << 20), &cache);
        let write = Submission::write(8192, vec![1; 8192]);
        assert_eq!(kernel.run(0, write), Ok(Reply::Done));
        assert_eq!(kernel.read(1, 8192, 8192), Ok(vec![1; 8192]));
        assert_eq!(counts(&cache), (1, 0));
        // Through: inner holds the data.
        let mut stored = vec![0; 8192];
        cache.inner.device().read(8192, &mut stored).unwrap();
        assert_eq!(stored, vec![1; 8192]);
        // A partial write drops its blocks: they are read again.
        assert_eq!(
            kernel.run(0, Submission::write(8704, vec![2; 512])),
            Ok(Reply::Done)
        );
        let mut expected = vec![1; 8192];
        expected[512..1024].fill(2);
        assert_eq!(kernel.read(0, 8192, 8192), Ok(expected.clone()));
        assert_eq!(counts(&cache), (1, 1));
        assert_eq!(kernel.read(0, 8192, 8192), Ok(expected.clone()));
        assert_eq!(counts(&cache), (2, 1));
        // Four blocks more: the oldest leave, blocks 2 and 3 among them.
        assert_eq!(kernel.read(0, 1 << 19, 4 * BLOCK), Ok(vec![0; 4 << 12]));
        assert_eq!(kernel.read(0, 8192, 4096), Ok(expected[..4096].to_vec()));
        assert_eq!(counts(&cache), (2, 3));
        let (offset, len, unmap) = (0, 1 << 20, false);
        let zero = Command::WriteZeroes { offset, len, unmap };
        assert_eq!(kernel.run(0, zero), Ok(Reply::Done));
        assert!(cache.blocks.lock().unwrap().data.is_empty());
        kernel.stop().unwrap();
    }

    /// Over a `DeferredZoned`: reads past the write pointer cache its fill
    /// pattern, and every way a zone's data changes drops what was cached.
    #[test]
    fn zoned_data_never_reads_stale() {
        const ZONE: u64 = 256 << 10;
        let ram = Immediate::new(SlowRam::new(1 << 20, Duration::ZERO));
        let geometry = ZoneGeometry::new(1 << 20, ZONE).unwrap();
        let cache = Arc::new(BlockCache::new(DeferredZoned::new(ram, geometry), 1 << 20));
        let kernel = start(DeviceBuilder::default(), &cache);
        let unwritten = vec![FILL_PATTERN; 8192];
        assert_eq!(kernel.read(0, ZONE, 8192), Ok(unwritten.clone()));
        assert_eq!(kernel.read(0, ZONE, 8192), Ok(unwritten.clone()));
        assert_eq!(counts(&cache), (1, 1));
        // An append lands where the fill pattern was cached.
        assert_eq!(kernel.zone_append(1, ZONE, vec![3; 4096]), Ok(ZONE));
        let mut appended = unwritten.clone();
        appended[..4096].fill(3);
        assert_eq!(kernel.read(0, ZONE, 8192), Ok(appended.clone()));
        assert_eq!(kernel.read(0, ZONE, 8192), Ok(appended));
        // A finish makes the rest of the zone read as zeroes.
        let finish = Command::ZoneFinish { offset: ZONE };
        assert_eq!(kernel.run(0, finish), Ok(Reply::Done));
        let mut finished = vec![0; 8192];
        finished[..4096].fill(3);
        assert_eq!(kernel.read(0, ZONE, 8192), Ok(finished));
        // A written block, cached, then reset: the fill pattern again.
        assert_eq!(
            kernel.run(0, Submission::write(2 * ZONE, vec![4; 4096])),
            Ok(Reply::Done)
        );
        assert_eq!(kernel.read(0, 2 * ZONE, 4096), Ok(vec![4; 4096]));
        let reset = Command::ZoneReset { offset: 2 * ZONE };
        assert_eq!(kernel.run(1, reset), Ok(Reply::Done));
        assert_eq!(kernel.read(0, 2 * ZONE, 8192), Ok(unwritten.clone()));
        assert_eq!(kernel.run(1, Command::ZoneResetAll), Ok(Reply::Done));
        assert_eq!(kernel.read(0, ZONE, 8192), Ok(unwritten));
        kernel.stop().unwrap();
    }

    #[test]
    fn a_completion_fills_the_cache_only_if_nothing_changed_meanwhile() {
        let mut blocks = Blocks {
            capacity: 8,
            ..Blocks::default()
        };
        let read = blocks.begin_read();
        let first = blocks.begin_change(0..1);
        // A write in flight when another begins: either may land last.
        let second = blocks.begin_change(0..1);
        assert!(!blocks.may_fill(read) && !blocks.may_fill(first));
        blocks.changing -= 2;
        assert!(!blocks.may_fill(second));
        assert!(blocks.may_fill(blocks.begin_read()));
        let alone = blocks.begin_change(3..4);
        assert!(blocks.may_fill(alone));
    }
}
