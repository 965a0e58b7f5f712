//! `DeferredZoned` with a journal, and replayed requests, through the
//! loopback kernel: an inner device that holds its requests until the test
//! completes them, in the order the test chooses.
#![cfg(feature = "loopback")]

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bius::loopback::{Loopback, Submission, Ticket};
use bius::zone::{DeferredZoned, ZoneCondition, ZoneGeometry, ZoneJournal, ZoneRecord, ZoneSet};
use bius::{Capabilities, Command, DeferredDevice, DeviceBuilder, Io, IoError, Reply};

const SIZE: u64 = 4 << 20;
const ZONE: u64 = 256 << 10;
const WAIT: Duration = Duration::from_secs(10);

/// Holds every request until the test completes it.
#[derive(Default)]
struct Held {
    ios: Mutex<Vec<Io>>,
    arrived: Condvar,
}

impl DeferredDevice for Held {
    /// A write cache and FUA: the kernel sends flushes and FUA writes.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write_cache: true,
            fua: true,
            ..Capabilities::default()
        }
    }

    fn submit(&self, io: Io) {
        self.ios.lock().unwrap().push(io);
        self.arrived.notify_all();
    }
}

impl Held {
    /// The `n` requests held, once there are `n`, in arrival order.
    fn take(&self, n: usize) -> Vec<Io> {
        let ios = self.ios.lock().unwrap();
        let (mut ios, timeout) = self
            .arrived
            .wait_timeout_while(ios, WAIT, |ios| ios.len() < n)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "{} requests held, {n} expected",
            ios.len()
        );
        assert_eq!(ios.len(), n);
        ios.drain(..).collect()
    }

    fn commands(ios: &[Io]) -> Vec<Command> {
        ios.iter().map(Io::command).collect()
    }
}

/// What the journal was told, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Acknowledged(u32, ZoneRecord),
    Durable(Vec<(u32, ZoneRecord)>),
}

#[derive(Default)]
struct Log(Mutex<Vec<Entry>>);

impl ZoneJournal for Log {
    fn acknowledged(&self, index: u32, record: ZoneRecord) -> std::io::Result<()> {
        self.0
            .lock()
            .unwrap()
            .push(Entry::Acknowledged(index, record));
        Ok(())
    }
    fn durable(&self, records: &[(u32, ZoneRecord)]) -> std::io::Result<()> {
        self.0
            .lock()
            .unwrap()
            .push(Entry::Durable(records.to_vec()));
        Ok(())
    }
}

impl Log {
    fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// 16 zones of 256 KiB, the first conventional.
fn geometry() -> ZoneGeometry {
    ZoneGeometry::new(SIZE, ZONE)
        .unwrap()
        .with_conventional_zones(1)
        .unwrap()
}

fn start() -> (Loopback, Arc<Held>, Arc<Log>) {
    let held = Arc::new(Held::default());
    let log = Arc::new(Log::default());
    let records = ZoneSet::new(geometry()).records();
    let zoned =
        DeferredZoned::with_journal(Arc::clone(&held), geometry(), Arc::clone(&log), &records)
            .unwrap();
    let builder = DeviceBuilder::default().queues(2).queue_depth(16);
    let mut kernel = Loopback::new(&builder).unwrap();
    kernel.start_deferred(zoned).unwrap();
    (kernel, held, log)
}

fn closed(write_pointer: u64) -> ZoneRecord {
    ZoneRecord {
        condition: ZoneCondition::Closed,
        write_pointer,
        data_end: write_pointer,
    }
}

fn done(ticket: Ticket) {
    assert_eq!(ticket.wait(), Ok(Reply::Done));
}

#[test]
fn the_journal_gets_the_completed_prefix_only() {
    let (kernel, held, log) = start();
    let tickets: Vec<_> = (0..3)
        .map(|i| {
            kernel
                .submit(0, Submission::write(ZONE + i * 4096, vec![1; 4096]))
                .unwrap()
        })
        .collect();
    let mut ios = held.take(3);
    let third = ios.pop().unwrap();
    let second = ios.pop().unwrap();
    let first = ios.pop().unwrap();
    // The last write completes first: nothing before it has.
    third.complete_done(Ok(()));
    assert_eq!(log.take(), []);
    first.complete_done(Ok(()));
    assert_eq!(log.take(), [Entry::Acknowledged(1, closed(ZONE + 4096))]);
    second.complete_done(Ok(()));
    assert_eq!(log.take(), [Entry::Acknowledged(1, closed(ZONE + 12288))]);
    tickets.into_iter().for_each(done);
    // A flush makes the acknowledged states durable once the inner device
    // has flushed.
    let flush = kernel.submit(0, Command::Flush).unwrap();
    let ios = held.take(1);
    assert_eq!(Held::commands(&ios), [Command::Flush]);
    assert_eq!(log.take(), []);
    ios.into_iter().for_each(|io| io.complete_done(Ok(())));
    done(flush);
    assert_eq!(
        log.take(),
        [Entry::Durable(vec![(1, closed(ZONE + 12288))])]
    );
    kernel.stop().unwrap();
}

#[test]
fn a_failed_write_moves_no_write_pointer_nor_the_journal() {
    let (kernel, held, log) = start();
    let write = |at: u64| {
        kernel
            .submit(0, Submission::write(ZONE + at, vec![1; 4096]))
            .unwrap()
    };
    let (first, second) = (write(0), write(4096));
    let mut ios = held.take(2);
    let second_io = ios.pop().unwrap();
    let first_io = ios.pop().unwrap();
    // The first fails: the zone's write pointer stays at its start, and
    // the second, in flight behind it, is no longer at the write pointer:
    // it fails too, whatever the inner device says.
    first_io.complete_done(Err(IoError::Io));
    assert_eq!(first.wait(), Err(IoError::Io));
    second_io.complete_done(Ok(()));
    assert_eq!(second.wait(), Err(IoError::Io));
    assert_eq!(log.take(), []);
    let zone = kernel.report_zones(0, ZONE, 1).unwrap()[0];
    assert_eq!(
        (zone.condition, zone.write_pointer),
        (ZoneCondition::ImplicitOpen, ZONE)
    );
    // Writes go on from where the data ends.
    let again = write(0);
    held.take(1).pop().unwrap().complete_done(Ok(()));
    done(again);
    assert_eq!(log.take(), [Entry::Acknowledged(1, closed(ZONE + 4096))]);
    // Past it no data, whatever the second write left in the inner device.
    assert_eq!(kernel.read(0, ZONE + 4096, 4096), Ok(vec![0xff; 4096]));
    kernel.stop().unwrap();
}

#[test]
fn a_fua_write_is_followed_by_a_flush_and_made_durable() {
    let (kernel, held, log) = start();
    let op = Submission::write(2 * ZONE, vec![2; 4096]).fua();
    let ticket = kernel.submit(0, op).unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    let flush = held.take(1);
    assert_eq!(Held::commands(&flush), [Command::Flush]);
    assert!(ticket.wait_timeout(Duration::from_millis(50)).is_none());
    flush.into_iter().for_each(|io| io.complete_done(Ok(())));
    done(ticket);
    let zone = closed(2 * ZONE + 4096);
    assert_eq!(
        log.take(),
        [
            Entry::Acknowledged(2, zone),
            Entry::Durable(vec![(2, zone)])
        ]
    );
    // A failed flush fails the write and leaves the state to the next one.
    let ticket = kernel
        .submit(0, Submission::write(2 * ZONE + 4096, vec![3; 4096]).fua())
        .unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    held.take(1).pop().unwrap().complete_done(Err(IoError::Io));
    assert_eq!(ticket.wait(), Err(IoError::Io));
    let flush = kernel.submit(0, Command::Flush).unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    done(flush);
    let zone = closed(2 * ZONE + 8192);
    assert_eq!(
        log.take(),
        [
            Entry::Acknowledged(2, zone),
            Entry::Durable(vec![(2, zone)])
        ]
    );
    kernel.stop().unwrap();
}

#[test]
fn zone_management_is_acknowledged() {
    let (kernel, held, log) = start();
    let write = kernel
        .submit(0, Submission::write(3 * ZONE, vec![1; 4096]))
        .unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    done(write);
    assert_eq!(
        kernel.run(0, Command::ZoneFinish { offset: 3 * ZONE }),
        Ok(Reply::Done)
    );
    assert_eq!(
        kernel.run(0, Command::ZoneOpen { offset: 4 * ZONE }),
        Ok(Reply::Done)
    );
    // The finish keeps where the data ends.
    let full = ZoneRecord {
        condition: ZoneCondition::Full,
        write_pointer: 4 * ZONE,
        data_end: 3 * ZONE + 4096,
    };
    let open = ZoneRecord {
        condition: ZoneCondition::ExplicitOpen,
        write_pointer: 4 * ZONE,
        data_end: 4 * ZONE,
    };
    assert_eq!(
        log.take(),
        [
            Entry::Acknowledged(3, closed(3 * ZONE + 4096)),
            Entry::Acknowledged(3, full),
            Entry::Acknowledged(4, open),
        ]
    );
    // Resets are durable at once (before their data is discarded).
    assert_eq!(kernel.run(0, Command::ZoneResetAll), Ok(Reply::Done));
    let empty = |zone: u64| ZoneRecord {
        condition: ZoneCondition::Empty,
        write_pointer: zone * ZONE,
        data_end: zone * ZONE,
    };
    assert_eq!(
        log.take(),
        [
            Entry::Acknowledged(3, empty(3)),
            Entry::Acknowledged(4, empty(4)),
            Entry::Durable(vec![(3, empty(3)), (4, empty(4))]),
        ]
    );
    let write = kernel
        .submit(0, Submission::write(6 * ZONE, vec![1; 4096]))
        .unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    done(write);
    assert_eq!(
        kernel.run(0, Command::ZoneReset { offset: 6 * ZONE }),
        Ok(Reply::Done)
    );
    assert_eq!(
        log.take(),
        [
            Entry::Acknowledged(6, closed(6 * ZONE + 4096)),
            Entry::Acknowledged(6, empty(6)),
            Entry::Durable(vec![(6, empty(6))]),
        ]
    );
    assert_eq!(
        kernel.run(0, Command::ZoneOpen { offset: 4 * ZONE }),
        Ok(Reply::Done)
    );
    assert_eq!(
        kernel.run(0, Command::ZoneClose { offset: 4 * ZONE }),
        Ok(Reply::Done)
    );
    assert_eq!(
        log.take(),
        [
            Entry::Acknowledged(4, open),
            Entry::Acknowledged(4, empty(4))
        ]
    );
    kernel.stop().unwrap();
}

#[test]
fn replayed_writes_are_applied_once_and_appends_fail() {
    let (kernel, held, _log) = start();
    let write = kernel
        .submit(0, Submission::write(ZONE, vec![1; 8192]))
        .unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    done(write);
    // Below the write pointer: applied before, done without the store.
    assert_eq!(
        kernel.run(0, Submission::write(ZONE, vec![1; 4096]).replayed()),
        Ok(Reply::Done)
    );
    assert_eq!(
        kernel.run(0, Submission::write(ZONE + 4096, vec![1; 4096]).replayed()),
        Ok(Reply::Done)
    );
    // Across the write pointer: cannot tell.
    assert_eq!(
        kernel.run(0, Submission::write(ZONE + 4096, vec![1; 8192]).replayed()),
        Err(IoError::Io)
    );
    // Past the write pointer, not at it: cannot tell either.
    assert_eq!(
        kernel.run(0, Submission::write(ZONE + 12288, vec![1; 4096]).replayed()),
        Err(IoError::Io)
    );
    // At the write pointer: applied now.
    let write = kernel
        .submit(0, Submission::write(ZONE + 8192, vec![2; 4096]).replayed())
        .unwrap();
    let ios = held.take(1);
    assert_eq!(ios[0].data(), &[2; 4096][..]);
    ios.into_iter().for_each(|io| io.complete_done(Ok(())));
    done(write);
    // A full zone's write was applied; a conventional zone's is redone.
    assert_eq!(
        kernel.run(0, Command::ZoneFinish { offset: 5 * ZONE }),
        Ok(Reply::Done)
    );
    assert_eq!(
        kernel.run(
            0,
            Submission::write(5 * ZONE + 4096, vec![3; 4096]).replayed()
        ),
        Ok(Reply::Done)
    );
    let write = kernel
        .submit(0, Submission::write(4096, vec![4; 4096]).replayed())
        .unwrap();
    held.take(1)
        .into_iter()
        .for_each(|io| io.complete_done(Ok(())));
    done(write);
    // Appends cannot be told from new ones.
    let append = Submission::append(6 * ZONE, vec![5; 4096]);
    assert_eq!(kernel.run(0, append.replayed()), Err(IoError::Io));
    assert!(held.ios.lock().unwrap().is_empty());
    kernel.stop().unwrap();
}

#[test]
fn overlapping_flushes_never_make_an_older_state_durable_last() {
    let (kernel, held, log) = start();
    let write = kernel
        .submit(0, Submission::write(ZONE, vec![1; 4096]))
        .unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    done(write);
    let first = kernel.submit(0, Command::Flush).unwrap();
    let first_io = held.take(1).pop().unwrap();
    let write = kernel
        .submit(0, Submission::write(ZONE + 4096, vec![2; 4096]))
        .unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    done(write);
    // The second flush covers the first write too: the first flush may
    // not have made it durable when the second completes.
    let second = kernel.submit(1, Command::Flush).unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    done(second);
    assert_eq!(
        log.take(),
        [
            Entry::Acknowledged(1, closed(ZONE + 4096)),
            Entry::Acknowledged(1, closed(ZONE + 8192)),
            Entry::Durable(vec![(1, closed(ZONE + 8192))]),
        ]
    );
    // The first flush ends last: its older state is not written.
    first_io.complete_done(Ok(()));
    done(first);
    assert_eq!(log.take(), []);
    // Nothing is dirty any more.
    let third = kernel.submit(0, Command::Flush).unwrap();
    held.take(1).pop().unwrap().complete_done(Ok(()));
    done(third);
    assert_eq!(log.take(), []);
    kernel.stop().unwrap();
}
