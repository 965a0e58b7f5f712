//! Tests of the NBD client: against a real `nbdkit`, and against a fake
//! in-process server that misbehaves on purpose.

mod fake;
mod hostile;
mod nbdkit;

use std::cell::Cell;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

use super::{NbdClient, NbdCommand, NbdError, NbdIo};

/// How long a test waits for every io to finish before calling it a hang.
pub(super) const HANG: Duration = Duration::from_secs(5);

/// A finished io: its id, result and buffer.
pub(super) struct Done {
    pub id: usize,
    pub result: Result<(), NbdError>,
    pub buf: Vec<u8>,
}

/// An io that reports its completion on a channel.
pub(super) struct TestIo {
    id: usize,
    cmd: NbdCommand,
    buf: Vec<u8>,
    tx: Sender<Done>,
}

impl NbdIo for TestIo {
    fn command(&self) -> NbdCommand {
        self.cmd
    }

    fn write_data(&self) -> &[u8] {
        &self.buf
    }

    fn read_buf(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn finish(self: Box<Self>, result: Result<(), NbdError>) {
        let _ = self.tx.send(Done {
            id: self.id,
            result,
            buf: self.buf,
        });
    }
}

/// Submits ios and collects their completions.
pub(super) struct Ios {
    tx: Sender<Done>,
    rx: Receiver<Done>,
    next: Cell<usize>,
}

impl Ios {
    pub fn new() -> Self {
        let (tx, rx) = channel();
        Ios {
            tx,
            rx,
            next: Cell::new(0),
        }
    }

    /// An io with id, command and buffer.
    pub fn io(&self, cmd: NbdCommand, buf: Vec<u8>) -> Box<TestIo> {
        self.next.set(self.next.get() + 1);
        Box::new(TestIo {
            id: self.next.get(),
            cmd,
            buf,
            tx: self.tx.clone(),
        })
    }

    /// A read io whose buffer starts filled with 0xee.
    pub fn read(&self, offset: u64, len: u32) -> Box<TestIo> {
        self.io(NbdCommand::Read { offset, len }, vec![0xee; len as usize])
    }

    /// A write io.
    pub fn write(&self, offset: u64, data: Vec<u8>) -> Box<TestIo> {
        let len = data.len() as u32;
        self.io(
            NbdCommand::Write {
                offset,
                len,
                fua: false,
            },
            data,
        )
    }

    /// The next `n` completions, sorted by id; panics if they do not all
    /// arrive within [`HANG`].
    pub fn collect(&self, n: usize) -> Vec<Done> {
        let deadline = Instant::now() + HANG;
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(d) => v.push(d),
                Err(_) => panic!("only {} of {n} ios finished within {HANG:?}", v.len()),
            }
        }
        v.sort_by_key(|d| d.id);
        v
    }

    /// Submits one io and waits for it.
    pub fn run(&self, client: &NbdClient, io: Box<TestIo>) -> Done {
        client.submit(io);
        self.collect(1).pop().expect("one")
    }
}

/// A recognisable pattern for `len` bytes at `offset`, varied by `seed`.
pub(super) fn pattern(offset: u64, len: usize, seed: u8) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            let x = offset + i;
            (x ^ (x >> 8) ^ (x >> 16)) as u8 ^ seed
        })
        .collect()
}
