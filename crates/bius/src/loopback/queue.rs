//! The kernel side of each hardware queue, the twin of the driver's
//! `bius_queue.c` and `bius_proto.c`: the requests queued, sent and
//! outstanding, the request stream [`Transport::fetch`] reads and the
//! completions [`Transport::complete`] checks as the kernel does.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use bius_sys::{bius_completion, bius_request, blk_zone};
use nix::errno::Errno;

use super::rules::Rules;
use super::window::Mapping;
use super::Outcome;
use crate::abi::{self, COMPLETION_SIZE, REQUEST_SIZE, SECTOR_SIZE, ZONE_SIZE};
use crate::error::IoError;
use crate::op::Op;
use crate::request::{Command, Reply};
use crate::transport::{SharedBytes, Transport, Wakeup};
use crate::zone::layout::ZoneLayout;
use crate::zone::Zone;

/// Largest errno a completion's result may carry (as the kernel's
/// `IS_ERR_VALUE` sees it).
const MAX_ERRNO: i32 = 4095;

pub(super) struct Shared {
    pub(super) queues: Vec<QueueSlot>,
    /// The zones of a zoned device, once started, to check completions.
    pub(super) layout: OnceLock<ZoneLayout>,
    /// What the kernel sends the device, once started.
    pub(super) rules: OnceLock<Rules>,
    /// Why the last zone report completion was refused (the kernel says it
    /// in its log; the loopback in its start's error too).
    pub(super) report_refused: Mutex<Option<String>>,
    pub(super) next_seq: AtomicU64,
    pub(super) read_limit: AtomicU64,
    /// Segments of a segmented mapped request; below 2: none.
    pub(super) segments: AtomicUsize,
    pub(super) stopping: AtomicBool,
    /// The device keeps no data ([`Capabilities::no_data`]), known when
    /// its workers start: its reads and writes are sent dataless.
    ///
    /// [`Capabilities::no_data`]: crate::Capabilities::no_data
    pub(super) no_data: AtomicBool,
    pub(super) read_calls: AtomicU64,
    pub(super) write_calls: AtomicU64,
    pub(super) completions: AtomicU64,
    pub(super) refused: AtomicU64,
    pub(super) mapped: AtomicU64,
    pub(super) segmented: AtomicU64,
    /// The device size in bytes (a zoned device's known when its workers
    /// start).
    pub(super) size: AtomicU64,
    /// Map mode: requests of at least this many bytes are mapped into the
    /// window; `None` in copy mode.
    pub(super) map_threshold: Option<u32>,
    /// Bytes of a window slot, one per tag (`queue_depth` of them).
    pub(super) slot_bytes: usize,
    pub(super) queue_depth: u32,
}

#[derive(Default)]
pub(super) struct QueueSlot {
    pub(super) state: Mutex<QueueState>,
    pub(super) ready: Condvar,
}

#[derive(Default)]
pub(super) struct QueueState {
    pub(super) pending: VecDeque<Pending>,
    /// A write payload only partly returned by read().
    pub(super) partial: Option<(Vec<u8>, usize)>,
    pub(super) outstanding: HashMap<u64, Outstanding>,
    pub(super) dead: bool,
    /// Window slots no mapped request holds (map mode); like tags.
    pub(super) free_slots: Vec<u32>,
    /// The deferred worker's [`Wakeup`] has rung since its last wait.
    pub(super) rung: bool,
}

pub(super) struct Pending {
    pub(super) hdr: bius_request,
    /// The operation of `hdr.op`; `None` for an op code no version knows.
    pub(super) op: Option<Op>,
    /// The command, to check against the rules once they are known;
    /// `None` for a raw request.
    pub(super) command: Option<Command>,
    pub(super) payload: Vec<u8>,
    pub(super) reply: SyncSender<Outcome>,
}

pub(super) struct Outstanding {
    pub(super) op: Option<Op>,
    pub(super) sector: u64,
    pub(super) len: u32,
    pub(super) reply: SyncSender<Outcome>,
    /// The window slot of a mapped request.
    pub(super) slot: Option<u32>,
    /// Sent with `BIUS_REQ_NO_DATA`.
    pub(super) dataless: bool,
}

pub(super) fn lock(slot: &QueueSlot) -> MutexGuard<'_, QueueState> {
    slot.state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl QueueState {
    /// Whether a read would return at once: something to read, or the end.
    fn has_input(&self) -> bool {
        self.dead || self.partial.is_some() || !self.pending.is_empty()
    }

    pub(super) fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.partial.is_none() && self.outstanding.is_empty()
    }

    /// Removes an outstanding request; its window slot becomes free.
    pub(super) fn take_outstanding(&mut self, id: u64) -> Option<Outstanding> {
        let outstanding = self.outstanding.remove(&id)?;
        self.free_slots.extend(outstanding.slot);
        Some(outstanding)
    }

    /// Fails every queued and in-flight request with `error`.
    pub(super) fn fail_all(&mut self, error: IoError) {
        let replies = self
            .pending
            .drain(..)
            .map(|p| p.reply)
            .chain(self.outstanding.drain().map(|(_, o)| o.reply));
        for reply in replies {
            let _ = reply.send(Err(error));
        }
        self.partial = None;
    }
}

/// The zones of the payload of a report from `sector`, if the driver
/// accepts them: every descriptor known, reserved bytes 0, and, on a zoned
/// device, the report as [`ZoneLayout::report_problem`] wants it (in
/// bytes, as the zones are decoded).
fn reported_zones(
    layout: Option<&ZoneLayout>,
    sector: u64,
    payload: &[u8],
) -> Result<Vec<Zone>, String> {
    let offset = sector.saturating_mul(SECTOR_SIZE);
    let first = layout.map_or(0, |layout| offset / layout.geometry().zone_size());
    let mut zones = Vec::with_capacity(payload.len() / ZONE_SIZE);
    let mut problem = None;
    for (bytes, index) in payload.chunks_exact(ZONE_SIZE).zip(first..) {
        let raw = abi::decode::<blk_zone>(bytes);
        match abi::zone_of(&raw) {
            None => problem = Some((index, "unknown type or condition")),
            Some(_) if raw.non_seq != 0 || raw.reset != 0 => {
                problem = Some((index, "reserved bytes are not zero"));
            }
            Some(zone) => zones.push(zone),
        }
        if problem.is_some() {
            break;
        }
    }
    let problem = problem.or_else(|| layout?.report_problem(offset, &zones));
    match problem {
        None => Ok(zones),
        Some((index, why)) => Err(format!("zone {index}: {why}")),
    }
}

/// The kernel side of one connected queue, as the workers see it.  In map
/// mode it has the queue's data window: the data of a mapped request is
/// in its slot, from an offset inside the first page that varies with the
/// sector (as a buffer's offset in its page would), in one piece or in
/// segments with gaps between them ([`Mapping::pieces`]), while the
/// request is outstanding; everything else of the window, gaps included,
/// is out of reach ([`Transport::window`] returns `None`: stricter than the
/// kernel, whose idle pages read as zeroes and raise SIGBUS when written)
/// and reads as zeroes once it is mapped again.
pub(super) struct Connection {
    pub(super) shared: Arc<Shared>,
    pub(super) queue: u32,
    /// Slot buffers, allocated on first use.
    pub(super) slots: Vec<Vec<u8>>,
    /// What each slot is mapped for.
    pub(super) mappings: Vec<Option<Mapping>>,
    /// Deferred mode: `fetch` does not block.
    pub(super) nonblocking: bool,
}

/// Wakes a deferred worker waiting in [`Transport::wait`] on a loopback
/// queue.
struct QueueWakeup {
    shared: Arc<Shared>,
    queue: u32,
}

impl Wakeup for QueueWakeup {
    fn ring(&self) {
        let slot = &self.shared.queues[self.queue as usize];
        lock(slot).rung = true;
        slot.ready.notify_all();
    }
}

impl Connection {
    pub(super) fn new(shared: Arc<Shared>, queue: u32) -> Self {
        let depth = if shared.map_threshold.is_some() {
            shared.queue_depth as usize
        } else {
            0
        };
        Connection {
            shared,
            queue,
            slots: vec![Vec::new(); depth],
            mappings: vec![None; depth],
            nonblocking: false,
        }
    }

    fn slot(&self) -> &QueueSlot {
        &self.shared.queues[self.queue as usize]
    }

    /// Checks and delivers the first completion record of `records`;
    /// returns its length.
    fn complete_one(&mut self, records: &[u8]) -> Result<usize, Errno> {
        if records.len() < COMPLETION_SIZE {
            return Err(Errno::EINVAL);
        }
        let comp = abi::decode::<bius_completion>(records);
        let total = COMPLETION_SIZE + comp.len as usize;
        if !(-MAX_ERRNO..=0).contains(&comp.result) || records.len() < total {
            return Err(Errno::EINVAL);
        }
        let mut state = lock(self.slot());
        if state.dead {
            return Err(Errno::ENODEV);
        }
        let Some(outstanding) = state.outstanding.get(&comp.id) else {
            drop(state);
            return Err(self.unknown_id_errno(comp.id));
        };
        let ok = comp.result == 0;
        let payload = records.get(COMPLETION_SIZE..total).unwrap_or_default();
        let layout = self.shared.layout.get();
        let in_stream = outstanding.slot.is_none() && !outstanding.dataless;
        let mut zones = None;
        let (len_ok, sector_ok) = match outstanding.op {
            Some(Op::Read) if ok && !in_stream => (comp.len == 0, comp.sector == 0),
            Some(Op::Read) if ok => (comp.len == outstanding.len, comp.sector == 0),
            Some(Op::ReportZones) if ok => {
                let size = self.shared.size.load(Ordering::Relaxed);
                // Whole descriptors within the room, none only past the end,
                // each the zone it stands for.
                let n = comp.len as usize / ZONE_SIZE;
                zones = match reported_zones(layout, outstanding.sector, payload) {
                    Ok(zones) => Some(zones),
                    Err(why) => {
                        log::warn!("REPORT_ZONES completion refused: {why}");
                        *self
                            .shared
                            .report_refused
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner) = Some(why);
                        None
                    }
                };
                let len_ok = (comp.len as usize).is_multiple_of(ZONE_SIZE)
                    && comp.len <= outstanding.len
                    && (n > 0 || outstanding.sector.saturating_mul(SECTOR_SIZE) >= size)
                    && zones.is_some();
                (len_ok, comp.sector == 0)
            }
            Some(Op::ZoneAppend) if ok => (
                comp.len == 0,
                layout.is_none_or(|l| {
                    let bytes = |sector: u64| sector.saturating_mul(SECTOR_SIZE);
                    let (zone, at) = (bytes(outstanding.sector), bytes(comp.sector));
                    l.append_ok(zone, outstanding.len.into(), at)
                }),
            ),
            _ => (comp.len == 0, comp.sector == 0),
        };
        if !(len_ok && sector_ok) {
            return Err(Errno::EINVAL);
        }
        let outstanding = state.take_outstanding(comp.id).expect("outstanding");
        drop(state);
        let read = outstanding.op == Some(Op::Read);
        let mut data = Vec::new();
        if read {
            data = payload.to_vec();
        }
        if let Some(slot) = outstanding.slot {
            let mapped_data = self.unmap(slot);
            if ok && read {
                data = mapped_data;
            }
        }
        let reply = match (outstanding.op, zones) {
            (_, Some(zones)) => Reply::Zones(zones),
            (Some(Op::ZoneAppend), None) => Reply::Appended(comp.sector * SECTOR_SIZE),
            _ => Reply::Done,
        };
        let outcome = match comp.result {
            0 => Ok((reply, data)),
            result => Err(IoError::from_errno(Errno::from_raw(-result))),
        };
        let reply = outstanding.reply;
        // Counted before the submitter can see the outcome.
        self.shared.completions.fetch_add(1, Ordering::Relaxed);
        let _ = reply.send(outcome);
        Ok(total)
    }

    /// `EXDEV` if `id` is outstanding on another queue, else `ENOENT`.
    fn unknown_id_errno(&self, id: u64) -> Errno {
        let owner = (id & 0xff) as usize;
        let elsewhere = owner != self.queue as usize
            && self
                .shared
                .queues
                .get(owner)
                .is_some_and(|slot| lock(slot).outstanding.contains_key(&id));
        if elsewhere {
            Errno::EXDEV
        } else {
            Errno::ENOENT
        }
    }
}

impl Transport for Connection {
    fn fetch(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.len() < REQUEST_SIZE {
            return Err(Errno::EINVAL.into());
        }
        let read_limit = self.shared.read_limit.load(Ordering::Relaxed);
        let limit = buf
            .len()
            .min(usize::try_from(read_limit).unwrap_or(usize::MAX));
        let shared = Arc::clone(&self.shared);
        let slot = &shared.queues[self.queue as usize];
        let mut state = lock(slot);
        if self.nonblocking && !state.has_input() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        while !state.has_input() {
            state = slot
                .ready
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.dead {
            return Ok(0);
        }
        self.shared.read_calls.fetch_add(1, Ordering::Relaxed);
        self.unmap_ended(&state);
        // A payload in progress: this read returns only payload bytes.
        if let Some((payload, sent)) = &mut state.partial {
            let n = (payload.len() - *sent).min(limit);
            buf[..n].copy_from_slice(&payload[*sent..*sent + n]);
            *sent += n;
            if *sent == payload.len() {
                state.partial = None;
            }
            return Ok(n);
        }
        let mut filled = 0;
        while filled + REQUEST_SIZE <= limit {
            let Some(request) = state.pending.pop_front() else {
                break;
            };
            let mut hdr = request.hdr;
            let op = request.op;
            let dataless =
                self.shared.no_data.load(Ordering::Relaxed) && op.is_some_and(Op::has_data);
            let room = limit - filled - REQUEST_SIZE;
            let slot = match op {
                _ if dataless => {
                    hdr.flags |= bius_sys::BIUS_REQ_NO_DATA as u16;
                    None
                }
                Some(op) => self.map(&mut state, &mut hdr, op, &request.payload, room),
                None => None,
            };
            abi::encode(&hdr, &mut buf[filled..]);
            filled += REQUEST_SIZE;
            if let Some(slot) = slot {
                filled += self.encode_segments(slot, &mut buf[filled..limit]);
            }
            state.outstanding.insert(
                hdr.id,
                Outstanding {
                    op,
                    sector: hdr.sector,
                    len: hdr.len,
                    reply: request.reply,
                    slot,
                    dataless,
                },
            );
            let payload = if slot.is_some() || dataless {
                Vec::new()
            } else {
                request.payload
            };
            let n = payload.len().min(limit - filled);
            buf[filled..filled + n].copy_from_slice(&payload[..n]);
            filled += n;
            if n < payload.len() {
                state.partial = Some((payload, n));
                break;
            }
        }
        Ok(filled)
    }

    fn window(&mut self, offset: u64, len: usize) -> Option<SharedBytes<'_>> {
        let (slot, range) = self.mapped_range(offset, len)?;
        Some(SharedBytes::from(&mut self.slots[slot][range]))
    }

    fn complete(&mut self, records: &[u8]) -> io::Result<usize> {
        self.shared.write_calls.fetch_add(1, Ordering::Relaxed);
        let mut accepted = 0;
        while accepted < records.len() {
            match self.complete_one(&records[accepted..]) {
                Ok(n) => accepted += n,
                Err(errno) => {
                    self.shared.refused.fetch_add(1, Ordering::Relaxed);
                    return if accepted == 0 {
                        Err(errno.into())
                    } else {
                        Ok(accepted)
                    };
                }
            }
        }
        Ok(accepted)
    }

    fn defer(&mut self) -> io::Result<Arc<dyn Wakeup>> {
        self.nonblocking = true;
        Ok(Arc::new(QueueWakeup {
            shared: Arc::clone(&self.shared),
            queue: self.queue,
        }))
    }

    fn wait(&mut self, deadline: Option<Instant>) -> io::Result<bool> {
        let slot = self.slot();
        let mut state = lock(slot);
        while !state.has_input() && !state.rung {
            state = match deadline {
                None => slot
                    .ready
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    slot.ready
                        .wait_timeout(state, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        state.rung = false;
        Ok(state.has_input())
    }
}
