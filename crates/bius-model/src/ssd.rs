//! A conventional NVMe SSD, as NVMeVirt (FAST '23; `conv_ftl.c`,
//! `ssd.c`) models one: a host link each way, firmware time per command,
//! a device-wide write buffer, channels of dies ([`FlashArray`]) and a
//! page-mapping FTL with greedy garbage collection ([`Ftl`]).
//!
//! # Timing
//!
//! A request arriving at `now` (bytes `len`, pages of [`PAGE_SIZE`];
//! every request completes `host.overhead` after the time below; with
//! `firmware.cores`, each command's firmware time occupies one of the
//! controller's cores, [`Pool`], so "`now` + firmware" is when a core has
//! run it):
//!
//! * **Read**: starts at `start = now + firmware.read_4k` (`len` ≤ 4 KiB)
//!   or `now + firmware.read`.  Its pages are grouped per die by the FTL;
//!   each die with a part of it senses (`flash.read_4k` if its part is at
//!   most 4 KiB, else `flash.read_page` per program unit it touches) from
//!   `start` on, then moves its bytes over its channel
//!   ([`FlashArray::read`]).  Never-written pages need no flash read.  The
//!   read completes when the read link (`host.read_bandwidth`) has moved
//!   `len` bytes, after the last die.
//! * **Write**: the write link (`host.write_bandwidth`) moves `len` bytes
//!   (done at `arrived`); then each page takes room in the write buffer
//!   (`flash.write_buffer` bytes, [`WriteBuffer::admit`]: a *stall* if it
//!   had to wait) in turn, the last at `admitted`; the write completes
//!   when both that and its firmware, `firmware.write +
//!   firmware.write_per_4k × ⌈len / 4 KiB⌉` from `arrived`, are done.
//!   A page that fills a program unit on its die has the unit programmed
//!   from its admission on ([`FlashArray::program`]: channel transfer,
//!   then `flash.program`), and the unit's room in the buffer frees when
//!   that program is done.  Without a buffer (`write_buffer = 0`) the
//!   programs start at `arrived` + the firmware time, partial units are
//!   programmed at once, and the write completes when its programs are
//!   done; a FUA write likewise waits for its programs.
//! * **Garbage collection** is booked when a write triggers it, at that
//!   page's admission: the victim's valid pages are read on their dies
//!   (`flash.read_4k` for one page, else `flash.read_page` per program
//!   unit's worth), programmed into the GC stream's units and the
//!   victim's blocks erased (`flash.erase`), each die and channel taking
//!   its share in the first idle span long enough ([`Timeline`]:
//!   NVMeVirt books strictly in order and leaves idle gaps unused; as
//!   there, a GC program does not wait for reads on other dies).  Host
//!   programs and reads compete with that work, so random writes on a
//!   full device slow down by about `WA + (WA − 1) × (read_page +
//!   program_unit / channel) / program` (the dies program WA pages per
//!   host page and read WA − 1 to move them, each read holding its die
//!   until its data are out over the channel: [`FlashArray::read`]);
//!   waits for the channels, which reads and programs share, add a few
//!   percent.
//! * **Flush**: programs the units written in part, and completes when
//!   every program issued so far is done, plus `host.flush`.
//! * **Discard**, **write-zeroes with unmap**: the whole pages of the range
//!   are trimmed; complete at `now + host.discard`.  **Write-zeroes**
//!   without unmap is a write that moves no data over the link.
//! * Zone commands complete at once (a conventional device has none).
//! * A request the drive refuses (it failed) takes the firmware's fixed
//!   time of its kind ([`Firmware::refusal`](crate::Firmware::refusal))
//!   and nothing else: no link, buffer, FTL or flash time.
//!
//! # Simplified against NVMeVirt
//!
//! NVMeVirt books each 4 KiB page on its own and runs garbage collection
//! before any page once free lines are few; here a die's pages of one
//! request are one read, and garbage collection runs when the host stream
//! opens a superblock (see [`crate::ftl`]).  A write smaller than 4 KiB
//! takes a whole page (no read-modify-write).  NVMeVirt's LSB/MSB read
//! latencies are one centre value (a profile's `[jitter]` spreads times).

use bius::{Command, IoError, Reply};

use crate::buffer::WriteBuffer;
use crate::flash::FlashArray;
use crate::ftl::{FlashOp, Ftl, FtlGeometry, Stream, PAGE_SIZE};
use crate::media::{Media, MediaStats};
use crate::profile::{Firmware, Flash, Host, Profile, ProfileError};
use crate::time::{transfer, Nanos, Pool, Timeline};

/// The [`Media`] of an `ssd` profile (see the module documentation).
#[derive(Debug)]
pub struct SsdMedia {
    flash: Flash,
    firmware: Firmware,
    host: Host,
    ftl: Ftl,
    array: FlashArray,
    buffer: WriteBuffer,
    read_link: Timeline,
    write_link: Timeline,
    /// The controller's cores (`firmware.cores`).
    cores: Pool,
    /// When every program issued so far is done.
    programs_done: Nanos,
    buffer_stalls: u64,
    /// The FTL's flash work for the page at hand (kept to reuse its room).
    work: Vec<FlashOp>,
    /// Each die's part of the read at hand.
    die_reads: Vec<DieRead>,
}

/// A die's part of one read.
#[derive(Debug, Clone, Copy, Default)]
struct DieRead {
    bytes: u64,
    /// Program units sensed.
    units: u32,
    /// The last of them.
    last_unit: u32,
}

impl SsdMedia {
    /// The media of `profile` (which needs `[flash]` and `[ftl]`
    /// sections) over `capacity` bytes.
    pub fn new(profile: &Profile, capacity: u64) -> Result<Self, ProfileError> {
        let flash = profile.section("flash", &profile.flash)?.clone();
        let ftl_profile = profile.section("ftl", &profile.ftl)?;
        let ftl = Ftl::new(capacity, FtlGeometry::of(&flash, ftl_profile)?, ftl_profile)?;
        Ok(SsdMedia {
            array: FlashArray::new(
                flash.channels,
                flash.dies_per_channel,
                flash.channel_bandwidth,
            ),
            buffer: WriteBuffer::new(flash.write_buffer),
            die_reads: vec![DieRead::default(); flash.dies() as usize],
            flash,
            cores: Pool::new(profile.firmware.as_ref().map_or(0, |f| f.cores)),
            firmware: profile.firmware.clone().unwrap_or_default(),
            host: profile.host.clone(),
            ftl,
            read_link: Timeline::default(),
            write_link: Timeline::default(),
            programs_done: 0,
            buffer_stalls: 0,
            work: Vec::new(),
        })
    }

    /// The FTL (its mapping and counters).
    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }

    fn read(&mut self, offset: u64, len: u64, now: Nanos) -> Nanos {
        let firmware = if len <= PAGE_SIZE {
            self.firmware.read_4k
        } else {
            self.firmware.read
        };
        let start = self.cores.occupy(now, firmware);
        let end = offset.saturating_add(len);
        for page in pages_touched(offset, len) {
            let Some(location) = self.ftl.locate(page) else {
                continue;
            };
            let bytes = end.min((page + 1) * PAGE_SIZE) - offset.max(page * PAGE_SIZE);
            let part = &mut self.die_reads[location.die as usize];
            if part.units == 0 || part.last_unit != location.program_unit {
                part.units += 1;
                part.last_unit = location.program_unit;
            }
            part.bytes += bytes;
        }
        let mut flash_done = start;
        for (die, part) in self.die_reads.iter_mut().enumerate() {
            if part.bytes == 0 {
                continue;
            }
            let sense = if part.bytes <= PAGE_SIZE {
                self.flash.read_4k
            } else {
                self.flash.read_page * u64::from(part.units)
            };
            let done = self.array.read(die as u32, start, sense, part.bytes);
            flash_done = flash_done.max(done);
            *part = DieRead::default();
        }
        self.read_link
            .occupy(flash_done, transfer(len, self.host.read_bandwidth))
            + self.host.overhead
    }

    /// A write of `len` bytes at `offset`; `durable`: it completes when
    /// programmed (FUA); `over_link`: its data cross the host link.
    fn write(
        &mut self,
        offset: u64,
        len: u64,
        now: Nanos,
        durable: bool,
        over_link: bool,
    ) -> Nanos {
        let arrived = if over_link {
            self.write_link
                .occupy(now, transfer(len, self.host.write_bandwidth))
        } else {
            now
        };
        let firmware = self.firmware.write + self.firmware.write_per_4k * len.div_ceil(PAGE_SIZE);
        let buffered = self.buffer.capacity() > 0;
        let parsed = self.cores.occupy(arrived, firmware);
        let mut admitted = if buffered { arrived } else { parsed };
        let mut programmed = admitted;
        let mut stalled = false;
        for page in pages_touched(offset, len) {
            let room = self.buffer.admit(admitted, PAGE_SIZE);
            stalled |= room > admitted;
            admitted = room;
            self.ftl.write(page, &mut self.work);
            programmed = programmed.max(self.book_work(admitted));
        }
        self.buffer_stalls += u64::from(stalled);
        let overhead = self.host.overhead;
        if !buffered {
            self.ftl.program_pending(&mut self.work);
            return programmed.max(self.book_work(admitted)) + overhead;
        }
        let acknowledged = admitted.max(parsed);
        if durable {
            self.ftl.program_pending(&mut self.work);
            return acknowledged.max(programmed).max(self.book_work(admitted)) + overhead;
        }
        acknowledged + overhead
    }

    /// Books the FTL's pending work on the flash, from `ready` on; returns
    /// when the last host program of it is done (0 if none).
    fn book_work(&mut self, ready: Nanos) -> Nanos {
        let mut host_programmed = 0;
        for op in self.work.drain(..) {
            match op {
                FlashOp::GcRead { die, pages } => {
                    let units = pages.div_ceil(self.ftl.geometry().pages_per_program_unit);
                    let sense = if pages == 1 {
                        self.flash.read_4k
                    } else {
                        self.flash.read_page * u64::from(units)
                    };
                    let bytes = u64::from(pages) * PAGE_SIZE;
                    self.array.read(die, ready, sense, bytes);
                }
                FlashOp::Program { die, pages, stream } => {
                    let bytes = u64::from(pages) * PAGE_SIZE;
                    let done = self.array.program(die, ready, bytes, self.flash.program);
                    self.programs_done = self.programs_done.max(done);
                    if stream == Stream::Host {
                        self.buffer.release_at(done, bytes);
                        host_programmed = host_programmed.max(done);
                    }
                }
                FlashOp::Erase { die } => {
                    self.array.occupy_die(die, ready, self.flash.erase);
                }
            }
        }
        host_programmed
    }

    fn flush(&mut self, now: Nanos) -> Nanos {
        self.ftl.program_pending(&mut self.work);
        self.book_work(now);
        now.max(self.programs_done) + self.host.flush
    }

    fn trim(&mut self, offset: u64, len: u64, now: Nanos) -> Nanos {
        let first = offset.div_ceil(PAGE_SIZE);
        let end = offset.saturating_add(len) / PAGE_SIZE;
        for page in first..end {
            self.ftl.trim(page);
        }
        now + self.host.discard
    }
}

/// The pages that bytes `offset..offset + len` touch.
fn pages_touched(offset: u64, len: u64) -> std::ops::Range<u64> {
    if len == 0 {
        return 0..0;
    }
    offset / PAGE_SIZE..offset.saturating_add(len).div_ceil(PAGE_SIZE)
}

impl Media for SsdMedia {
    fn serve(&mut self, command: Command, _reply: &Reply, now: Nanos) -> Nanos {
        match command {
            Command::Read { offset, len } => self.read(offset, len, now),
            Command::Write { offset, len, fua } => self.write(offset, len, now, fua, true),
            Command::WriteZeroes {
                offset,
                len,
                unmap: false,
            } => self.write(offset, len, now, false, false),
            Command::Flush => self.flush(now),
            Command::Discard { offset, len } | Command::WriteZeroes { offset, len, .. } => {
                self.trim(offset, len, now)
            }
            _ => now,
        }
    }

    fn refuse(&mut self, command: Command, _error: IoError, now: Nanos) -> Nanos {
        now + self.firmware.refusal(command)
    }

    fn stats(&self) -> MediaStats {
        let counters = self.ftl.counters();
        MediaStats {
            host_bytes_written: counters.host_pages * PAGE_SIZE,
            media_bytes_written: counters.programmed_pages * PAGE_SIZE,
            gc_bytes_moved: counters.gc_pages_moved * PAGE_SIZE,
            erases: counters.erased_blocks,
            buffer_stalls: self.buffer_stalls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::SECOND;

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;

    fn profile() -> Profile {
        Profile::built_in("nvme-ssd").unwrap()
    }

    fn media(profile: &Profile, capacity: u64) -> SsdMedia {
        SsdMedia::new(profile, capacity).unwrap()
    }

    fn read(offset: u64, len: u64) -> Command {
        Command::Read { offset, len }
    }

    fn write(offset: u64, len: u64) -> Command {
        Command::Write {
            offset,
            len,
            fua: false,
        }
    }

    #[test]
    fn a_qd1_read_is_firmware_sense_channel_and_link() {
        let profile = profile();
        let (flash, firmware, host) = (
            profile.flash.clone().unwrap(),
            profile.firmware.clone().unwrap(),
            profile.host.clone(),
        );
        let mut ssd = media(&profile, 64 * MIB);
        // Never written: no flash read.
        let link_4k = transfer(4096, host.read_bandwidth);
        assert_eq!(
            ssd.serve(read(0, 4096), &Reply::Done, 0),
            firmware.read_4k + link_4k
        );
        ssd.serve(write(0, 128 * KIB), &Reply::Done, 0);
        let idle = ssd.serve(Command::Flush, &Reply::Done, 0) + SECOND;
        let channel_4k = transfer(4096, flash.channel_bandwidth);
        assert_eq!(
            ssd.serve(read(8192, 4096), &Reply::Done, idle) - idle,
            firmware.read_4k + flash.read_4k + channel_4k + link_4k
        );
        // 128 KiB: a 32 KiB unit on each of 4 dies (4 channels), in
        // parallel.
        let later = idle + SECOND;
        assert_eq!(
            ssd.serve(read(0, 128 * KIB), &Reply::Done, later) - later,
            firmware.read
                + flash.read_page
                + transfer(32 * KIB, flash.channel_bandwidth)
                + transfer(128 * KIB, host.read_bandwidth)
        );
    }

    #[test]
    fn reads_of_two_dies_overlap_and_of_one_die_queue() {
        let profile = profile();
        let flash = profile.flash.clone().unwrap();
        let mut ssd = media(&profile, 64 * MIB);
        ssd.serve(write(0, 64 * KIB), &Reply::Done, 0);
        let now = ssd.serve(Command::Flush, &Reply::Done, 0) + SECOND;
        // Pages 0 and 8: dies 0 and 1; only the host link is shared.
        let first = ssd.serve(read(0, 4096), &Reply::Done, now);
        let other_die = ssd.serve(read(32 * KIB, 4096), &Reply::Done, now);
        let link_4k = transfer(4096, profile.host.read_bandwidth);
        assert_eq!(other_die, first + link_4k);
        // Page 1 is on die 0 too: it senses once the first is out.
        let same_die = ssd.serve(read(4096, 4096), &Reply::Done, now);
        assert_eq!(
            same_die,
            first + flash.read_4k + transfer(4096, flash.channel_bandwidth)
        );
    }

    #[test]
    fn a_qd1_write_is_link_and_firmware_into_the_buffer() {
        let profile = profile();
        let (firmware, host) = (profile.firmware.clone().unwrap(), profile.host.clone());
        let mut ssd = media(&profile, 64 * MIB);
        assert_eq!(
            ssd.serve(write(0, 4096), &Reply::Done, 0),
            transfer(4096, host.write_bandwidth) + firmware.write + firmware.write_per_4k
        );
        let now = SECOND;
        assert_eq!(
            ssd.serve(write(4096, 128 * KIB), &Reply::Done, now) - now,
            transfer(128 * KIB, host.write_bandwidth) + firmware.write + 32 * firmware.write_per_4k
        );
        assert_eq!(ssd.stats().buffer_stalls, 0);
        assert_eq!(ssd.stats().host_bytes_written, 132 * KIB);
    }

    #[test]
    fn without_a_buffer_a_write_completes_when_programmed() {
        let mut profile = profile();
        profile.set("flash.write_buffer", "0").unwrap();
        let flash = profile.flash.clone().unwrap();
        let firmware = profile.firmware.clone().unwrap();
        let mut ssd = media(&profile, 64 * MIB);
        assert_eq!(
            ssd.serve(write(0, 4096), &Reply::Done, 0),
            transfer(4096, profile.host.write_bandwidth)
                + firmware.write
                + firmware.write_per_4k
                + transfer(4096, flash.channel_bandwidth)
                + flash.program
        );
    }

    #[test]
    fn a_flush_waits_for_the_programs() {
        let profile = profile();
        let flash = profile.flash.clone().unwrap();
        let mut ssd = media(&profile, 64 * MIB);
        let acknowledged = ssd.serve(write(0, 4096), &Reply::Done, 0);
        assert_eq!(
            ssd.serve(Command::Flush, &Reply::Done, acknowledged),
            acknowledged + transfer(4096, flash.channel_bandwidth) + flash.program
        );
        // Nothing left to program.
        assert_eq!(ssd.serve(Command::Flush, &Reply::Done, SECOND), SECOND);
    }

    #[test]
    fn sustained_writes_run_at_program_speed() {
        let profile = profile();
        let flash = profile.flash.clone().unwrap();
        let mut ssd = media(&profile, 128 * MIB);
        // 64 MiB of 128 KiB writes, all queued at once.
        let total = 64 * MIB;
        let mut done = 0;
        for offset in (0..total).step_by(128 * KIB as usize) {
            done = done.max(ssd.serve(write(offset, 128 * KIB), &Reply::Done, 0));
        }
        let throughput = total as f64 * SECOND as f64 / done as f64;
        let programs = f64::from(flash.dies()) * flash.program_unit as f64 * SECOND as f64
            / flash.program as f64;
        assert!(
            (throughput / programs - 1.0).abs() < 0.03,
            "{throughput} B/s, programs {programs} B/s"
        );
        assert!(ssd.stats().buffer_stalls > 400);
    }

    #[test]
    fn trimmed_pages_read_without_flash() {
        let profile = profile();
        let firmware = profile.firmware.clone().unwrap();
        let mut ssd = media(&profile, 64 * MIB);
        ssd.serve(write(0, 8192), &Reply::Done, 0);
        let now = ssd.serve(Command::Flush, &Reply::Done, 0);
        // Only whole pages are trimmed: page 0 stays.
        let discard = Command::Discard {
            offset: 512,
            len: 8192,
        };
        assert_eq!(
            ssd.serve(discard, &Reply::Done, now),
            now + profile.host.discard
        );
        assert!(ssd.ftl().locate(0).is_some());
        assert!(ssd.ftl().locate(1).is_none());
        let link_4k = transfer(4096, profile.host.read_bandwidth);
        let later = now + SECOND;
        assert_eq!(
            ssd.serve(read(4096, 4096), &Reply::Done, later),
            later + firmware.read_4k + link_4k
        );
    }

    #[test]
    fn random_writes_on_a_full_device_slow_down_by_the_write_amplification() {
        let mut profile = profile();
        profile.set("ftl.over_provisioning", "0.28").unwrap();
        // 128 superblocks of data: enough for greedy GC in a short test.
        profile.set("ftl.block_size", "32KiB").unwrap();
        let flash = profile.flash.clone().unwrap();
        let capacity = 64 * MIB;
        let mut ssd = media(&profile, capacity);
        let pages = capacity / PAGE_SIZE;
        let mut filled = 0;
        for offset in (0..capacity).step_by(128 * KIB as usize) {
            filled = filled.max(ssd.serve(write(offset, 128 * KIB), &Reply::Done, 0));
        }
        // Twice the capacity at random to reach the steady state, then
        // twice more, all queued at once, timed.
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..2 * pages {
            ssd.serve(
                write(rng.u64(0..pages) * PAGE_SIZE, 4096),
                &Reply::Done,
                filled,
            );
        }
        let before = ssd.stats();
        let start = ssd.serve(Command::Flush, &Reply::Done, filled);
        let mut done = start;
        for _ in 0..2 * pages {
            done = done.max(ssd.serve(
                write(rng.u64(0..pages) * PAGE_SIZE, 4096),
                &Reply::Done,
                start,
            ));
        }
        let after = ssd.stats();
        let amplification = (after.media_bytes_written - before.media_bytes_written) as f64
            / (after.host_bytes_written - before.host_bytes_written) as f64;
        let random = (2 * pages * PAGE_SIZE) as f64 / (done - start) as f64;
        let sequential = f64::from(flash.dies()) * flash.program_unit as f64 / flash.program as f64;
        let slowdown = sequential / random;
        // The dies program `amplification` pages a host page, and read
        // `amplification - 1` of them (in program units) to move them, a
        // read holding its die until its unit is out over the channel;
        // waits for the channels add a few percent (3.41 for 3.24).
        let read = flash.read_page + transfer(flash.program_unit, flash.channel_bandwidth);
        let read_per_program = read as f64 / flash.program as f64;
        let predicted = amplification + (amplification - 1.0) * read_per_program;
        assert!(
            (predicted * 0.97..predicted * 1.08).contains(&slowdown),
            "write amplification {amplification}, slowdown {slowdown}, predicted {predicted}"
        );
        assert!(after.gc_bytes_moved > before.gc_bytes_moved);
        assert!(after.erases > before.erases);
    }
}
