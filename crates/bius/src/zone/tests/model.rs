//! The randomized comparison of the zone state machine with a separately
//! written reference model.

use std::collections::BTreeSet;
use std::sync::Mutex;

use super::*;

/// A deliberately plain model of the rules: no counters (it counts by
/// looking), no locks, one function per operation.  Positions are bytes,
/// as the zone API's.
struct Model {
    geometry: ZoneGeometry,
    conditions: Vec<ZoneCondition>,
    write_pointers: Vec<u64>,
    /// Where each zone's data ends (see `ZoneRecord::data_end`).
    data_ends: Vec<u64>,
    next_close: usize,
    faults: BTreeSet<u64>,
    /// The tag of the last write to each sector (0: none).
    data: Vec<u64>,
}

/// The tags of the sectors of the `len` bytes at `offset`.
fn sectors(data: &mut [u64], offset: u64, len: u64) -> &mut [u64] {
    &mut data[(offset / S) as usize..((offset + len) / S) as usize]
}

impl Model {
    fn new(geometry: ZoneGeometry) -> Self {
        let zs = geometry.zone_size();
        let zones = geometry.size().div_ceil(zs) as usize;
        let conv = geometry.conventional_zones() as usize;
        let write_pointers: Vec<u64> = (0..zones)
            .map(|i| i as u64 * zs + if i < conv { zs } else { 0 })
            .collect();
        Model {
            geometry,
            conditions: (0..zones)
                .map(|i| if i < conv { NotWritePointer } else { Empty })
                .collect(),
            data_ends: write_pointers.clone(),
            write_pointers,
            next_close: conv,
            faults: BTreeSet::new(),
            data: vec![0; (geometry.size() / S) as usize],
        }
    }

    fn number(&self, condition: ZoneCondition) -> u32 {
        self.conditions.iter().filter(|&&c| c == condition).count() as u32
    }

    fn active_zones(&self) -> ActiveZones {
        counts(
            self.number(ImplicitOpen),
            self.number(ExplicitOpen),
            self.number(Closed),
        )
    }

    fn start(&self, z: usize) -> u64 {
        z as u64 * self.geometry.zone_size()
    }

    fn end(&self, z: usize) -> u64 {
        (self.start(z) + self.geometry.zone_size()).min(self.geometry.size())
    }

    fn capacity_end(&self, z: usize) -> u64 {
        (self.start(z) + self.geometry.zone_capacity()).min(self.end(z))
    }

    fn conventional(&self, z: usize) -> bool {
        z < self.geometry.conventional_zones() as usize
    }

    fn close(&mut self, z: usize) {
        self.conditions[z] = if self.write_pointers[z] == self.start(z) {
            Empty
        } else {
            Closed
        };
    }

    /// May zone `z` (empty or closed) open?  Closes another if need be.
    fn make_room(&mut self, z: usize) -> Result<(), Errno> {
        let c = self.active_zones();
        let g = self.geometry;
        let active_left = g.max_active() == 0 || c.active() < g.max_active();
        if self.conditions[z] == Empty && !active_left {
            return Err(Errno::EOVERFLOW);
        }
        if g.max_open() == 0 || c.open() < g.max_open() {
            return Ok(());
        }
        if c.implicit_open == 0 || !active_left {
            return Err(Errno::ETOOMANYREFS);
        }
        let conv = g.conventional_zones() as usize;
        let zones = self.conditions.len();
        let mut i = if self.next_close < zones {
            self.next_close
        } else {
            conv
        };
        while self.conditions[i] != ImplicitOpen {
            i = if i + 1 < zones { i + 1 } else { conv };
        }
        self.close(i);
        self.next_close = i + 1;
        Ok(())
    }

    /// A write (or append) of `n` bytes at `offset`.
    fn write(&mut self, offset: u64, n: u64, append: bool, tag: u64) -> Result<u64, Errno> {
        if offset >= self.geometry.size() {
            return Err(Errno::EIO);
        }
        let z = (offset / self.geometry.zone_size()) as usize;
        let start = self.start(z);
        let target = if self.conventional(z) {
            if append || offset + n > self.end(z) {
                return Err(Errno::EIO);
            }
            offset
        } else {
            if append && (offset != start || n > self.geometry.max_append()) {
                return Err(Errno::EIO);
            }
            let condition = self.conditions[z];
            let wp = self.write_pointers[z];
            if matches!(condition, Full | ReadOnly | Offline)
                || (!append && offset != wp)
                || wp + n > self.capacity_end(z)
            {
                return Err(Errno::EIO);
            }
            if matches!(condition, Empty | Closed) {
                self.make_room(z)?;
                self.conditions[z] = ImplicitOpen;
            }
            wp
        };
        let bad = self.faults.range(target..target + n).next().copied();
        let stored = bad.map_or(n, |b| b - target);
        sectors(&mut self.data, target, stored).fill(tag);
        if !self.conventional(z) {
            self.write_pointers[z] += stored;
            self.data_ends[z] = self.write_pointers[z];
            if self.write_pointers[z] == self.capacity_end(z) {
                self.conditions[z] = Full;
            }
        }
        match bad {
            Some(_) => Err(Errno::EIO),
            None => Ok(target),
        }
    }

    fn zone_op(&mut self, op: Op, z: usize) -> Result<(), Errno> {
        let condition = self.conditions[z];
        match (op, condition) {
            (Op::Open, ExplicitOpen)
            | (Op::Close, Closed)
            | (Op::Finish, Full)
            | (Op::Reset, Empty) => Ok(()),
            (Op::Open | Op::Finish, Empty | Closed | ImplicitOpen | ExplicitOpen) => {
                if matches!(condition, Empty | Closed) {
                    self.make_room(z)?;
                }
                if op == Op::Open {
                    self.conditions[z] = ExplicitOpen;
                } else {
                    self.conditions[z] = Full;
                    self.write_pointers[z] = self.end(z);
                }
                Ok(())
            }
            (Op::Close, ImplicitOpen | ExplicitOpen) => {
                self.close(z);
                Ok(())
            }
            (Op::Reset, ImplicitOpen | ExplicitOpen | Closed | Full) => {
                self.empty(z);
                Ok(())
            }
            _ => Err(Errno::EIO),
        }
    }

    fn empty(&mut self, z: usize) {
        self.conditions[z] = Empty;
        self.write_pointers[z] = self.start(z);
        self.data_ends[z] = self.start(z);
        let (start, end) = (self.start(z), self.end(z));
        sectors(&mut self.data, start, end - start).fill(0);
    }

    fn inject(&mut self, z: usize, condition: ZoneCondition) -> Result<(), Errno> {
        if self.conventional(z) {
            return Err(Errno::EIO);
        }
        if self.conditions[z] == condition {
            self.empty(z);
        } else {
            self.conditions[z] = condition;
            self.write_pointers[z] = u64::MAX;
        }
        Ok(())
    }

    /// Per sector of the zone: what it reads as.
    fn readable(&self, z: usize) -> Result<Vec<Reads>, Errno> {
        if self.conditions[z] == Offline {
            return Err(Errno::EIO);
        }
        let (wp, data_end) = (self.write_pointers[z], self.data_ends[z]);
        let reads = |s| match s {
            s if s < data_end => Reads::Data,
            s if s < wp => Reads::Zeroes,
            _ => Reads::Fill,
        };
        let each = (self.start(z)..self.end(z)).step_by(S as usize);
        Ok(each.map(reads).collect())
    }
}

/// What a sector reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    Data,
    Zeroes,
    Fill,
}

impl Reads {
    /// The sector at byte `i` of `span`.
    fn of(span: &ReadSpan, i: u64) -> Self {
        match i {
            i if i < span.written => Reads::Data,
            i if i < span.written + span.skipped => Reads::Zeroes,
            _ => Reads::Fill,
        }
    }
}

/// Runs `ops` random operations on a `ZoneSet` and a `Model` side by side.
fn compare_with_model(geometry: ZoneGeometry, seed: u64, ops: usize) {
    let set = ZoneSet::new(geometry);
    let geometry = *set.geometry();
    let mut model = Model::new(geometry);
    let data = Mutex::new(vec![0u64; (geometry.size() / S) as usize]);
    let fill = |offset: u64, len: u64, tag: u64| {
        sectors(&mut data.lock().unwrap(), offset, len).fill(tag);
        Ok(())
    };
    let discard = |offset, len| fill(offset, len, 0);
    let mut rng = fastrand::Rng::with_seed(seed);
    let zones = model.conditions.len();
    for tag in 1..=ops as u64 {
        let z = rng.u64(..zones as u64) as usize;
        let start = model.start(z);
        let len = model.end(z) - start;
        let n = rng.u64(..4) * S;
        let dice = rng.u64(..100);
        let what = format!("op {tag}: dice {dice} zone {z} n {n}");
        let write = |offset, n| {
            set.write(offset, n, |s, k| fill(s, k, tag))
                .map(|()| offset)
        };
        let (real, expected) = match dice {
            0..=29 => {
                let wp = model.write_pointers[z];
                let offset = if (start..start + len).contains(&wp) {
                    wp
                } else {
                    start
                };
                (write(offset, n), model.write(offset, n, false, tag))
            }
            30..=39 => {
                let offset = start + rng.u64(..len / S) * S;
                (write(offset, n), model.write(offset, n, false, tag))
            }
            40..=59 => (
                set.append(start, n, |s, k| fill(s, k, tag)),
                model.write(start, n, true, tag),
            ),
            60..=87 => {
                let op = [Op::Open, Op::Close, Op::Finish, Op::Reset][(dice as usize - 60) / 7];
                let real = match op {
                    Op::Open => set.open(start + rng.u64(..len / S) * S),
                    Op::Close => set.close(start),
                    Op::Finish => set.finish(start),
                    _ => set.reset(start, discard),
                };
                let expected = if model.conventional(z) {
                    Err(Errno::EIO)
                } else {
                    model.zone_op(op, z)
                };
                (real.map(|()| 0), expected.map(|()| 0))
            }
            88 => {
                let targets: Vec<usize> = (0..zones)
                    .filter(|&i| !model.conventional(i))
                    .filter(|&i| !matches!(model.conditions[i], Empty | ReadOnly | Offline))
                    .collect();
                let expected = targets
                    .into_iter()
                    .try_for_each(|i| model.zone_op(Op::Reset, i));
                (set.reset_all(discard).map(|()| 0), expected.map(|()| 0))
            }
            89..=91 => {
                let (real, expected) = if dice == 91 {
                    (set.set_offline(start, discard), model.inject(z, Offline))
                } else {
                    (set.set_read_only(start, discard), model.inject(z, ReadOnly))
                };
                (real.map(|()| 0), expected.map(|()| 0))
            }
            92..=95 => {
                let offset = rng.u64(..geometry.size() / S) * S;
                if dice < 94 {
                    set.inject_write_error(offset).unwrap();
                    model.faults.insert(offset);
                } else {
                    assert_eq!(set.clear_write_error(offset), model.faults.remove(&offset));
                }
                (Ok(0), Ok(0))
            }
            _ => {
                let mut flags = Vec::new();
                let real = set.read(start, len, |span| {
                    let each = (0..span.len).step_by(S as usize);
                    flags.extend(each.map(|i| Reads::of(&span, i)));
                    Ok(())
                });
                let expected = model.readable(z);
                if let Ok(expected) = &expected {
                    assert_eq!(&flags, expected, "{what}");
                }
                (real.map(|()| 0), expected.map(|_| 0))
            }
        };
        assert_eq!(real.map_err(errno), expected, "{what}");
        let report = set.report(0, usize::MAX);
        let conditions: Vec<_> = report.iter().map(|z| z.condition).collect();
        let write_pointers: Vec<_> = report.iter().map(|z| z.write_pointer).collect();
        assert_eq!(conditions, model.conditions, "{what}");
        assert_eq!(write_pointers, model.write_pointers, "{what}");
        assert_eq!(set.active_zones(), model.active_zones(), "{what}");
        assert_eq!(*data.lock().unwrap(), model.data, "{what}");
    }
}

#[test]
fn random_operations_match_the_reference_model() {
    // Zones of 8 sectors, capacity 6, one conventional, a runt of 5.
    let geometry = ZoneGeometry::new(27136, 4 << 10)
        .unwrap()
        .with_zone_capacity(3 << 10)
        .unwrap()
        .with_conventional_zones(1)
        .unwrap();
    for (seed, max_open, max_active) in [(1, 2, 3), (7, 3, 0), (42, 0, 4), (99, 0, 0), (5, 1, 1)] {
        let geometry = geometry.with_max_open(max_open).with_max_active(max_active);
        compare_with_model(geometry, 0x9e37_79b9_7f4a_7c15 ^ seed, 4000);
    }
}
