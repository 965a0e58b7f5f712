//! The flash translation layer of a conventional SSD: a page-mapping FTL
//! with greedy garbage collection over superblocks, as NVMeVirt's
//! `conv_ftl.c` has it.  It keeps no time: it says where each page goes
//! and which flash work ([`FlashOp`]) that takes, and
//! [`SsdMedia`](crate::ssd::SsdMedia) books that work on the dies.
//!
//! * Mapping pages are 4 KiB ([`PAGE_SIZE`]); the map and its reverse are
//!   `u32` arrays, one entry a page.
//! * Physical flash is the logical pages × (1 + over-provisioning),
//!   rounded up to whole *superblocks*: one erase block on every die.
//!   Pages of a superblock are striped over the dies in program units:
//!   page `p` is on die `(p / pages_per_program_unit) % dies`.
//! * Host writes fill the open host superblock; garbage collection moves
//!   valid pages into a superblock stream of its own, so cold (moved) and
//!   hot (new) data part.
//! * A program unit is programmed when its last page is written (or at a
//!   flush: [`Ftl::program_pending`]).
//! * When the host stream needs a new superblock and at most
//!   `gc_threshold` are free, garbage collection takes the sealed
//!   superblock with the fewest valid pages (greedy), reads them, programs
//!   them into the GC stream and erases the superblock, until more than
//!   the threshold are free.
//!
//! Simplified against NVMeVirt: GC runs when the host stream opens a
//! superblock rather than before each page, and a program unit programmed
//! early by a flush is not padded: the rest of it is programmed when it
//! fills, so flushes cost time but no flash space.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::profile::{at_least_one, positive, Flash, ProfileError};
use crate::quantity;

/// Bytes of a mapping page.
pub const PAGE_SIZE: u64 = 4096;

/// A page or superblock that maps to nothing.
const UNMAPPED: u32 = u32::MAX;

/// The FTL of a conventional SSD profile (`[ftl]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FtlProfile {
    /// Spare flash beyond the host-visible capacity, as a fraction of it
    /// (NVMeVirt's `OP_AREA_PERCENT`: 0.07 for 7 %).
    pub over_provisioning: f64,
    /// Bytes of an erase block on one die (a multiple of
    /// `flash.program_unit`); a superblock is one block on every die.
    #[serde(with = "quantity::bytes")]
    pub block_size: u64,
    /// Garbage collection runs when the host needs a new superblock and at
    /// most this many are free (NVMeVirt's `gc_thres_lines_high`).
    #[serde(default = "default_gc_threshold")]
    pub gc_threshold: u32,
}

fn default_gc_threshold() -> u32 {
    2
}

impl FtlProfile {
    /// Checks its values, and against `flash` if there is one.
    pub(crate) fn check(&self, flash: Option<&Flash>) -> Result<(), ProfileError> {
        positive("ftl.over_provisioning", self.over_provisioning)?;
        at_least_one("ftl.block_size", self.block_size)?;
        at_least_one("ftl.gc_threshold", self.gc_threshold)?;
        if let Some(flash) = flash {
            if !self.block_size.is_multiple_of(flash.program_unit) {
                return Err(ProfileError::new(
                    "ftl.block_size",
                    format!(
                        "must be a multiple of flash.program_unit ({}) (is {})",
                        flash.program_unit, self.block_size
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// How flash is laid out, in mapping pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FtlGeometry {
    /// Parallel units (channels × dies).
    pub dies: u32,
    /// Pages programmed at once on a die.
    pub pages_per_program_unit: u32,
    /// Pages of an erase block on one die (a multiple of the above).
    pub pages_per_block: u32,
}

impl FtlGeometry {
    /// The geometry of `flash` with `ftl`'s erase blocks.
    pub fn of(flash: &Flash, ftl: &FtlProfile) -> Result<Self, ProfileError> {
        ftl.check(Some(flash))?;
        let pages = |bytes: u64, parameter: &str| {
            u32::try_from(bytes / PAGE_SIZE)
                .map_err(|_| ProfileError::new(parameter, format!("too large (is {bytes})")))
        };
        Ok(FtlGeometry {
            dies: flash.dies(),
            pages_per_program_unit: pages(flash.program_unit, "flash.program_unit")?,
            pages_per_block: pages(ftl.block_size, "ftl.block_size")?,
        })
    }

    /// Pages of a superblock (a block on every die).
    pub fn pages_per_superblock(&self) -> u32 {
        self.dies.saturating_mul(self.pages_per_block)
    }

    /// The die that page `page` of a superblock is on.
    fn die_of(&self, page: u32) -> u32 {
        (page / self.pages_per_program_unit) % self.dies
    }
}

/// Which stream of superblocks a program writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The host's writes (their data are in the write buffer).
    Host,
    /// Pages garbage collection moves.
    Gc,
}

/// Flash work the FTL needs done, in the order to book it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashOp {
    /// Garbage collection reads `pages` valid pages off `die`.
    GcRead {
        /// The die.
        die: u32,
        /// Pages read.
        pages: u32,
    },
    /// Program `pages` pages of one program unit onto `die`.
    Program {
        /// The die.
        die: u32,
        /// Pages programmed (a whole unit, or what a flush found of one).
        pages: u32,
        /// Whose data they are.
        stream: Stream,
    },
    /// Erase a block of `die` (garbage collection freed it).
    Erase {
        /// The die.
        die: u32,
    },
}

/// Where a logical page is on flash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLocation {
    /// Its die.
    pub die: u32,
    /// The program unit it was programmed in, numbered across the device
    /// (pages of one unit are sensed together).
    pub program_unit: u32,
}

/// What the FTL counted, in pages and blocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FtlCounters {
    /// Pages the host wrote.
    pub host_pages: u64,
    /// Pages written to flash: the host's and garbage collection's.
    pub programmed_pages: u64,
    /// Pages garbage collection moved.
    pub gc_pages_moved: u64,
    /// Erase blocks erased (a superblock is one on every die).
    pub erased_blocks: u64,
}

/// What a superblock holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SuperblockState {
    Free,
    /// A stream writes it.
    Open,
    /// Written full: a garbage collection victim.
    Sealed,
}

/// A stream's open superblock.
#[derive(Debug, Clone, Copy)]
struct OpenSuperblock {
    superblock: u32,
    /// The next page to write in it.
    next: u32,
    /// The first page written but not programmed yet.
    unprogrammed: u32,
}

/// A page-mapping FTL (see the module documentation).
#[derive(Debug, Clone)]
pub struct Ftl {
    geometry: FtlGeometry,
    gc_threshold: u32,
    /// Logical page → physical page.
    page_map: Vec<u32>,
    /// Physical page → the logical page it holds, if still valid.
    reverse_map: Vec<u32>,
    valid_pages: Vec<u32>,
    states: Vec<SuperblockState>,
    free: VecDeque<u32>,
    host_stream: Option<OpenSuperblock>,
    gc_stream: Option<OpenSuperblock>,
    /// Per die: valid pages of the victim (scratch for garbage collection).
    victim_pages_per_die: Vec<u32>,
    counters: FtlCounters,
}

impl Ftl {
    /// The FTL of a device of `capacity` bytes (whole pages: a partial
    /// last page counts as one) on flash of `geometry`.
    pub fn new(
        capacity: u64,
        geometry: FtlGeometry,
        profile: &FtlProfile,
    ) -> Result<Self, ProfileError> {
        profile.check(None)?;
        at_least_one("flash.channels", geometry.dies)?;
        at_least_one("flash.program_unit", geometry.pages_per_program_unit)?;
        if !geometry
            .pages_per_block
            .is_multiple_of(geometry.pages_per_program_unit)
            || geometry.pages_per_block == 0
        {
            return Err(ProfileError::new(
                "ftl.block_size",
                "must be a non-zero multiple of flash.program_unit",
            ));
        }
        let logical_pages = capacity.div_ceil(PAGE_SIZE);
        let per_superblock = u64::from(geometry.pages_per_superblock());
        let needed = logical_pages.div_ceil(per_superblock);
        let spare = (logical_pages as f64 * profile.over_provisioning / per_superblock as f64)
            .ceil() as u64;
        // Room for the free reserve and both open superblocks, so that a
        // garbage collection victim always has invalid pages.
        let superblocks = needed + spare.max(u64::from(profile.gc_threshold) + 3);
        let physical_pages = superblocks * per_superblock;
        if physical_pages >= u64::from(UNMAPPED) {
            return Err(ProfileError::new(
                "capacity",
                format!("{capacity} bytes is too large for the FTL's 32-bit page numbers"),
            ));
        }
        let superblocks = superblocks as u32;
        Ok(Ftl {
            geometry,
            gc_threshold: profile.gc_threshold,
            page_map: vec![UNMAPPED; logical_pages as usize],
            reverse_map: vec![UNMAPPED; physical_pages as usize],
            valid_pages: vec![0; superblocks as usize],
            states: vec![SuperblockState::Free; superblocks as usize],
            free: (0..superblocks).collect(),
            host_stream: None,
            gc_stream: None,
            victim_pages_per_die: vec![0; geometry.dies as usize],
            counters: FtlCounters::default(),
        })
    }

    /// Logical pages (the host-visible capacity).
    pub fn logical_pages(&self) -> u32 {
        self.page_map.len() as u32
    }

    /// Superblocks of physical flash.
    pub fn superblocks(&self) -> u32 {
        self.states.len() as u32
    }

    /// The flash layout.
    pub fn geometry(&self) -> FtlGeometry {
        self.geometry
    }

    /// What it counted so far.
    pub fn counters(&self) -> FtlCounters {
        self.counters
    }

    /// Where logical page `page` is (`None`: never written, trimmed, or
    /// beyond the device).
    pub fn locate(&self, page: u64) -> Option<PageLocation> {
        let physical = *self.page_map.get(usize::try_from(page).ok()?)?;
        (physical != UNMAPPED).then(|| self.location(physical))
    }

    /// The host writes logical page `page` (ignored beyond the device):
    /// pushes onto `work` the garbage collection it triggers and the
    /// program of the unit it completes.
    pub fn write(&mut self, page: u64, work: &mut Vec<FlashOp>) {
        let Some(logical) = self.logical(page) else {
            return;
        };
        self.invalidate(logical);
        self.counters.host_pages += 1;
        self.place(logical, Stream::Host, work);
    }

    /// Logical page `page` no longer holds data (discard).
    pub fn trim(&mut self, page: u64) {
        if let Some(logical) = self.logical(page) {
            self.invalidate(logical);
        }
    }

    /// Pushes onto `work` the programs of every unit written in part (a
    /// flush: the data become durable).
    pub fn program_pending(&mut self, work: &mut Vec<FlashOp>) {
        for stream in [Stream::Host, Stream::Gc] {
            let geometry = self.geometry;
            if let Some(open) = self.stream_mut(stream) {
                if open.next > open.unprogrammed {
                    let pages = open.next - open.unprogrammed;
                    let die = geometry.die_of(open.unprogrammed);
                    open.unprogrammed = open.next;
                    work.push(FlashOp::Program { die, pages, stream });
                }
            }
        }
    }

    fn logical(&self, page: u64) -> Option<u32> {
        u32::try_from(page)
            .ok()
            .filter(|&page| page < self.logical_pages())
    }

    fn location(&self, physical: u32) -> PageLocation {
        let in_superblock = physical % self.geometry.pages_per_superblock();
        PageLocation {
            die: self.geometry.die_of(in_superblock),
            program_unit: physical / self.geometry.pages_per_program_unit,
        }
    }

    fn invalidate(&mut self, logical: u32) {
        let physical = std::mem::replace(&mut self.page_map[logical as usize], UNMAPPED);
        if physical != UNMAPPED {
            self.reverse_map[physical as usize] = UNMAPPED;
            self.valid_pages[(physical / self.geometry.pages_per_superblock()) as usize] -= 1;
        }
    }

    fn stream_mut(&mut self, stream: Stream) -> Option<&mut OpenSuperblock> {
        match stream {
            Stream::Host => self.host_stream.as_mut(),
            Stream::Gc => self.gc_stream.as_mut(),
        }
    }

    /// Writes `logical` at the next page of `stream`, programming the unit
    /// it completes.
    fn place(&mut self, logical: u32, stream: Stream, work: &mut Vec<FlashOp>) {
        let open = self.open_superblock(stream, work);
        let per_superblock = self.geometry.pages_per_superblock();
        let per_unit = self.geometry.pages_per_program_unit;
        let physical = open.superblock * per_superblock + open.next;
        let mut written = open;
        written.next += 1;
        if written.next.is_multiple_of(per_unit) {
            work.push(FlashOp::Program {
                die: self.geometry.die_of(written.unprogrammed),
                pages: written.next - written.unprogrammed,
                stream,
            });
            written.unprogrammed = written.next;
        }
        let still_open = (written.next < per_superblock).then_some(written);
        if still_open.is_none() {
            self.states[open.superblock as usize] = SuperblockState::Sealed;
        }
        match stream {
            Stream::Host => self.host_stream = still_open,
            Stream::Gc => self.gc_stream = still_open,
        }
        self.page_map[logical as usize] = physical;
        self.reverse_map[physical as usize] = logical;
        self.valid_pages[open.superblock as usize] += 1;
        self.counters.programmed_pages += 1;
    }

    /// The open superblock of `stream`, opening one (after garbage
    /// collection, for the host) if it has none.
    fn open_superblock(&mut self, stream: Stream, work: &mut Vec<FlashOp>) -> OpenSuperblock {
        if let Some(open) = self.stream_mut(stream) {
            return *open;
        }
        if stream == Stream::Host {
            while self.free.len() <= self.gc_threshold as usize && self.collect(work) {}
        }
        let superblock = self
            .free
            .pop_front()
            .expect("the spare superblocks always leave garbage collection a victim");
        self.states[superblock as usize] = SuperblockState::Open;
        OpenSuperblock {
            superblock,
            next: 0,
            unprogrammed: 0,
        }
    }

    /// Garbage-collects the sealed superblock with the fewest valid pages;
    /// `false` if none would free anything.
    fn collect(&mut self, work: &mut Vec<FlashOp>) -> bool {
        let per_superblock = self.geometry.pages_per_superblock();
        let victim = (0..self.superblocks())
            .filter(|&superblock| self.states[superblock as usize] == SuperblockState::Sealed)
            .min_by_key(|&superblock| self.valid_pages[superblock as usize]);
        let Some(victim) = victim.filter(|&v| self.valid_pages[v as usize] < per_superblock) else {
            return false;
        };
        let first = victim * per_superblock;
        let pages = first..first + per_superblock;
        self.victim_pages_per_die.fill(0);
        for physical in pages.clone() {
            if self.reverse_map[physical as usize] != UNMAPPED {
                let die = self.geometry.die_of(physical - first);
                self.victim_pages_per_die[die as usize] += 1;
            }
        }
        for (die, &pages) in self.victim_pages_per_die.iter().enumerate() {
            if pages > 0 {
                work.push(FlashOp::GcRead {
                    die: die as u32,
                    pages,
                });
            }
        }
        for physical in pages {
            let logical = self.reverse_map[physical as usize];
            if logical != UNMAPPED {
                self.invalidate(logical);
                self.place(logical, Stream::Gc, work);
                self.counters.gc_pages_moved += 1;
            }
        }
        work.extend((0..self.geometry.dies).map(|die| FlashOp::Erase { die }));
        self.counters.erased_blocks += u64::from(self.geometry.dies);
        self.states[victim as usize] = SuperblockState::Free;
        self.free.push_back(victim);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 dies, 4-page program units, 16-page blocks: 64-page superblocks.
    const GEOMETRY: FtlGeometry = FtlGeometry {
        dies: 4,
        pages_per_program_unit: 4,
        pages_per_block: 16,
    };

    fn ftl(capacity: u64, over_provisioning: f64) -> Ftl {
        let profile = FtlProfile {
            over_provisioning,
            block_size: u64::from(GEOMETRY.pages_per_block) * PAGE_SIZE,
            gc_threshold: 2,
        };
        Ftl::new(capacity, GEOMETRY, &profile).unwrap()
    }

    #[test]
    fn the_profile_is_checked_against_the_flash() {
        let mut profile = crate::Profile::built_in("nvme-ssd").unwrap();
        let refused = |profile: &mut crate::Profile, key, value| {
            profile.set(key, value).unwrap_err().parameter
        };
        assert_eq!(
            refused(&mut profile, "ftl.block_size", "48KiB"),
            "ftl.block_size"
        );
        assert_eq!(
            refused(&mut profile, "ftl.gc_threshold", "0"),
            "ftl.gc_threshold"
        );
        assert_eq!(
            refused(&mut profile, "ftl.over_provisioning", "0"),
            "ftl.over_provisioning"
        );
        profile.set("ftl.block_size", "96KiB").unwrap();
        assert_eq!(profile.ftl.unwrap().gc_threshold, 2);
    }

    #[test]
    fn writes_stripe_program_units_over_the_dies() {
        let mut ftl = ftl(1 << 20, 0.07);
        let mut work = Vec::new();
        for page in 0..9 {
            ftl.write(page, &mut work);
        }
        let program = |die| FlashOp::Program {
            die,
            pages: 4,
            stream: Stream::Host,
        };
        assert_eq!(work, [program(0), program(1)]);
        assert_eq!(ftl.locate(3).map(|at| at.die), Some(0));
        assert_eq!(ftl.locate(4).map(|at| at.die), Some(1));
        assert_eq!(ftl.locate(8).map(|at| at.die), Some(2));
        assert_ne!(
            ftl.locate(3).unwrap().program_unit,
            ftl.locate(4).unwrap().program_unit
        );
        // A flush programs the partial unit; the rest of it comes later.
        work.clear();
        ftl.program_pending(&mut work);
        assert_eq!(
            work,
            [FlashOp::Program {
                die: 2,
                pages: 1,
                stream: Stream::Host
            }]
        );
        work.clear();
        for page in 9..12 {
            ftl.write(page, &mut work);
        }
        assert_eq!(
            work,
            [FlashOp::Program {
                die: 2,
                pages: 3,
                stream: Stream::Host
            }]
        );
        assert_eq!(ftl.locate(12), None);
        assert_eq!(ftl.locate(1 << 40), None);
    }

    #[test]
    fn an_overwrite_moves_the_page_and_a_trim_unmaps_it() {
        let mut ftl = ftl(1 << 20, 0.07);
        let mut work = Vec::new();
        ftl.write(0, &mut work);
        assert_eq!(ftl.locate(0).map(|at| at.die), Some(0));
        for page in 1..4 {
            ftl.write(page, &mut work);
        }
        // Page 0 again: the next page of the stream, on die 1.
        ftl.write(0, &mut work);
        assert_eq!(ftl.locate(0).map(|at| at.die), Some(1));
        assert_eq!(ftl.valid_pages[0], 4);
        ftl.trim(0);
        assert_eq!(ftl.locate(0), None);
        assert_eq!(ftl.valid_pages[0], 3);
        ftl.trim(0);
        assert_eq!(ftl.valid_pages[0], 3);
        let counters = ftl.counters();
        assert_eq!((counters.host_pages, counters.programmed_pages), (5, 5));
    }

    #[test]
    fn garbage_collection_moves_the_fewest_valid_pages_and_erases() {
        // 16 superblocks of data and 5 spare ones.
        let mut ftl = ftl(16 * 64 * PAGE_SIZE, 0.07);
        assert_eq!(ftl.superblocks(), 21);
        let pages = u64::from(ftl.logical_pages());
        let mut work = Vec::new();
        for page in 0..pages {
            ftl.write(page, &mut work);
        }
        // Overwrite even pages: superblocks 0, 1, ... keep their 32 odd
        // ones, 8 on each die.
        let mut page = 0;
        while ftl.counters().erased_blocks == 0 {
            work.clear();
            ftl.write(page, &mut work);
            page += 2;
        }
        // Opening the 20th superblock left 2 free: superblock 0, then 1.
        assert_eq!(page, 3 * 64 * 2 + 2);
        let reads = [0, 1, 2, 3].map(|die| FlashOp::GcRead { die, pages: 8 });
        let programs = [0, 1, 2, 3, 0, 1, 2, 3].map(|die| FlashOp::Program {
            die,
            pages: 4,
            stream: Stream::Gc,
        });
        let erases = [0, 1, 2, 3].map(|die| FlashOp::Erase { die });
        let one_victim: Vec<_> = [&reads[..], &programs, &erases].concat();
        assert_eq!(work[..16], one_victim);
        assert_eq!(work[16..], one_victim);
        let counters = ftl.counters();
        assert_eq!(counters.gc_pages_moved, 64);
        assert_eq!(counters.erased_blocks, 8);
        assert_eq!(counters.programmed_pages, counters.host_pages + 64);
        // 3 free after garbage collection; the host took one.
        assert_eq!(ftl.free.len(), 2);
        // The moved pages read back from their new place.
        assert_eq!(ftl.locate(1).map(|at| at.die), Some(0));
        assert_eq!(ftl.locate(5).map(|at| at.die), Some(0));
        assert_eq!(ftl.locate(9).map(|at| at.die), Some(1));
    }

    /// Write amplification of uniform random page writes over a full
    /// device: fill it, then write 5 × its pages at random.
    fn random_write_amplification(capacity: u64, over_provisioning: f64) -> f64 {
        let mut ftl = ftl(capacity, over_provisioning);
        let mut work = Vec::new();
        let pages = u64::from(ftl.logical_pages());
        for page in 0..pages {
            ftl.write(page, &mut work);
        }
        let mut rng = fastrand::Rng::with_seed(42);
        let before = ftl.counters();
        for _ in 0..5 * pages {
            ftl.write(rng.u64(0..pages), &mut work);
            work.clear();
        }
        let after = ftl.counters();
        (after.programmed_pages - before.programmed_pages) as f64
            / (after.host_pages - before.host_pages) as f64
    }

    #[test]
    fn random_writes_amplify_as_greedy_gc_predicts() {
        // 64 MiB: 256 superblocks of 64 pages, and the spare ones.
        for over_provisioning in [0.07, 0.28] {
            let measured = random_write_amplification(64 << 20, over_provisioning);
            // Bux & Iliadis 2010, Van Houdt 2013: greedy GC's large-block
            // limit.
            let textbook = (1.0 + over_provisioning) / (2.0 * over_provisioning);
            eprintln!(
                "over-provisioning {over_provisioning}: WAF {measured:.3}, textbook {textbook:.3}"
            );
            assert!(
                (measured / textbook - 1.0).abs() < 0.15,
                "over-provisioning {over_provisioning}: WAF {measured}, textbook {textbook}"
            );
        }
    }
}
