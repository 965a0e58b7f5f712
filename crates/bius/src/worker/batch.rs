//! The completion records a worker has yet to write, in one buffer, and
//! the `write()` (or the combined completion and fetch) that hands them to
//! the kernel.

use std::io;

use bius_sys::bius_completion;
use nix::errno::Errno;

use super::{WorkerConfig, HEADERS_PER_READ};
use crate::abi::{self, COMPLETION_SIZE};
use crate::error::{errno_of, ControlOp, Error, IoError};
use crate::transport::Transport;

/// A batch of completion records; read payloads and zone reports are
/// produced in place, after their record.
pub(super) struct Batch {
    queue: u32,
    output: Vec<u8>,
    /// Bytes of `output` filled.
    used: usize,
}

impl Batch {
    pub(super) fn new(config: &WorkerConfig) -> Self {
        Batch {
            queue: config.queue,
            output: vec![0u8; config.max_io + HEADERS_PER_READ * COMPLETION_SIZE],
            used: 0,
        }
    }

    /// Makes room for a record with up to `room` payload bytes (writing
    /// the batch first if it is full); returns the room, for the payload.
    pub(super) fn reserve<T: Transport>(
        &mut self,
        transport: &mut T,
        room: usize,
    ) -> Result<&mut [u8], Error> {
        if self.output.len() - self.used < COMPLETION_SIZE + room {
            self.flush(transport)?;
        }
        let body = self.used + COMPLETION_SIZE;
        Ok(&mut self.output[body..body + room])
    }

    /// Appends the record of request `id` after [`Batch::reserve`]: its
    /// payload length and sector, or its error.
    pub(super) fn push(&mut self, id: u64, reply: Result<(usize, u64), IoError>) {
        let comp = match reply {
            Ok((len, sector)) => bius_completion {
                id,
                result: 0,
                len: len as u32,
                sector,
            },
            Err(err) => bius_completion {
                id,
                result: -(err.errno() as i32),
                len: 0,
                sector: 0,
            },
        };
        let start = self.used;
        let body = start + COMPLETION_SIZE;
        abi::encode(&comp, &mut self.output[start..body]);
        self.used = body + comp.len as usize;
    }

    /// Appends the record of request `id` failed with `err` before it
    /// was served (no payload).
    pub(super) fn fail<T: Transport>(
        &mut self,
        transport: &mut T,
        id: u64,
        err: IoError,
    ) -> Result<(), Error> {
        self.reserve(transport, 0)?;
        self.push(id, Err(err));
        Ok(())
    }

    /// Whether no record waits to be written.
    pub(super) fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Writes the batch, skipping records the kernel refuses.
    pub(super) fn flush<T: Transport>(&mut self, transport: &mut T) -> Result<(), Error> {
        self.flush_from(transport, 0)
    }

    /// Writes the batch and fetches the next requests into `input`, in one
    /// call where the transport has it ([`Transport::complete_and_fetch`]);
    /// returns what the fetch returned.  Refused records are skipped as
    /// [`Batch::flush`] skips them (the fetch then follows on its own).
    pub(super) fn flush_and_fetch<T: Transport>(
        &mut self,
        transport: &mut T,
        input: &mut [u8],
    ) -> Result<io::Result<usize>, Error> {
        let exchange = transport.complete_and_fetch(&self.output[..self.used], input);
        let pos = exchange.completed;
        match exchange.fetched {
            fetched if pos == self.used => {
                self.used = 0;
                return Ok(fetched);
            }
            // (A record was refused: nothing was fetched.)
            Err(err) => match self.refusal(pos, &err)? {
                Some(skip) => self.flush_from(transport, pos + skip)?,
                None => self.used = 0,
            },
            Ok(_) => return Err(transfer_eio()),
        }
        Ok(transport.fetch(input))
    }

    /// Writes the records from byte `pos` of the batch on.
    fn flush_from<T: Transport>(&mut self, transport: &mut T, mut pos: usize) -> Result<(), Error> {
        while pos < self.used {
            match transport.complete(&self.output[pos..self.used]) {
                // A short count stops before a refused record: writing again
                // from there reports the refusal's errno.
                Ok(n) if n > 0 => pos += n,
                Ok(_) => return Err(transfer_eio()),
                Err(err) => match self.refusal(pos, &err)? {
                    Some(skip) => pos += skip,
                    None => break,
                },
            }
        }
        self.used = 0;
        Ok(())
    }

    /// What to do about `err`, the refusal of the record at byte `pos`:
    /// skip that many bytes (0: write it again), or `None`: the device has
    /// stopped, drop the rest.
    fn refusal(&self, pos: usize, err: &io::Error) -> Result<Option<usize>, Error> {
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(Some(0));
        }
        match errno_of(err) {
            Errno::ENODEV | Errno::ENOTCONN => {
                log::debug!("queue {}: device stopped, completions dropped", self.queue);
                Ok(None)
            }
            errno @ (Errno::EINVAL | Errno::ENOENT | Errno::EXDEV) => {
                let comp = abi::decode::<bius_completion>(&self.output[pos..]);
                log::warn!(
                    "queue {}: kernel refused the completion of request {:#x} ({errno})",
                    self.queue,
                    comp.id
                );
                Ok(Some(COMPLETION_SIZE + comp.len as usize))
            }
            errno => Err(Error::Kernel {
                op: ControlOp::Transfer,
                errno,
            }),
        }
    }
}

/// The error of a transport that took no completion and refused none.
fn transfer_eio() -> Error {
    Error::Kernel {
        op: ControlOp::Transfer,
        errno: Errno::EIO,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::control::Scheduling;
    use crate::transport::{complete_then_fetch, Exchange, Wakeup};

    /// Takes completion records as the kernel does, refusing those of the
    /// ids in `refuse` with their errno; counts its calls.  With
    /// `combined`, it completes and fetches in one call, as
    /// `BIUS_IOC_COMPLETE_FETCH` does, else as two.
    #[derive(Default)]
    struct Scripted {
        combined: bool,
        refuse: Vec<(u64, Errno)>,
        /// Ids of the records taken, in order.
        taken: Vec<u64>,
        completes: usize,
        fetches: usize,
        exchanges: usize,
        /// What a fetch returns: these many bytes, or this errno.
        fetch: Option<Errno>,
    }

    const FETCHED: usize = 7;

    impl Scripted {
        /// Takes the whole records of `records` up to the first refused one.
        fn take(&mut self, records: &[u8]) -> (usize, Option<Errno>) {
            let mut pos = 0;
            while pos < records.len() {
                let comp = abi::decode::<bius_completion>(&records[pos..]);
                if let Some((_, errno)) = self.refuse.iter().find(|(id, _)| *id == comp.id) {
                    return (pos, Some(*errno));
                }
                self.taken.push(comp.id);
                pos += COMPLETION_SIZE + comp.len as usize;
            }
            (pos, None)
        }
    }

    impl Transport for Scripted {
        fn fetch(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
            self.fetches += 1;
            self.fetch.map_or(Ok(FETCHED), |errno| Err(errno.into()))
        }

        fn complete(&mut self, records: &[u8]) -> io::Result<usize> {
            self.completes += 1;
            match self.take(records) {
                (0, Some(errno)) => Err(errno.into()),
                (n, _) => Ok(n),
            }
        }

        fn complete_and_fetch(&mut self, records: &[u8], buf: &mut [u8]) -> Exchange {
            if !self.combined {
                return complete_then_fetch(self, records, buf);
            }
            self.exchanges += 1;
            let (completed, refused) = self.take(records);
            let fetched = match refused {
                Some(errno) => Err(errno.into()),
                None => {
                    self.fetches += 1;
                    self.fetch.map_or(Ok(FETCHED), |errno| Err(errno.into()))
                }
            };
            Exchange { completed, fetched }
        }

        fn defer(&mut self) -> io::Result<Arc<dyn Wakeup>> {
            Err(io::ErrorKind::Unsupported.into())
        }

        fn wait(&mut self, _deadline: Option<std::time::Instant>) -> io::Result<bool> {
            Err(io::ErrorKind::Unsupported.into())
        }
    }

    /// A batch of the completions of requests `ids` (a read's 512 bytes
    /// of payload for odd ids).
    fn batch(transport: &mut Scripted, ids: &[u64]) -> Batch {
        let config = WorkerConfig {
            queue: 0,
            size: 1 << 20,
            max_io: 64 << 10,
            scheduling: Scheduling::Inherit,
        };
        let mut batch = Batch::new(&config);
        for &id in ids {
            let len = if id % 2 == 1 { 512 } else { 0 };
            batch.reserve(transport, len).unwrap().fill(id as u8);
            batch.push(id, Ok((len, 0)));
        }
        batch
    }

    fn exchange(transport: &mut Scripted, ids: &[u64]) -> Result<io::Result<usize>, Error> {
        let mut input = [0u8; 64];
        batch(transport, ids).flush_and_fetch(transport, &mut input)
    }

    #[test]
    fn one_call_completes_and_fetches() {
        let mut t = Scripted {
            combined: true,
            ..Default::default()
        };
        let fetched = exchange(&mut t, &[1, 2, 3]).unwrap().unwrap();
        assert_eq!(fetched, FETCHED);
        assert_eq!(t.taken, [1, 2, 3]);
        assert_eq!((t.exchanges, t.completes, t.fetches), (1, 0, 1));
    }

    #[test]
    fn without_the_call_it_writes_then_fetches() {
        let mut t = Scripted::default();
        let fetched = exchange(&mut t, &[1, 2, 3]).unwrap().unwrap();
        assert_eq!(fetched, FETCHED);
        assert_eq!(t.taken, [1, 2, 3]);
        assert_eq!((t.exchanges, t.completes, t.fetches), (0, 1, 1));
    }

    #[test]
    fn an_empty_batch_only_fetches() {
        for combined in [false, true] {
            let mut t = Scripted {
                combined,
                ..Default::default()
            };
            assert_eq!(exchange(&mut t, &[]).unwrap().unwrap(), FETCHED);
            assert_eq!((t.completes, t.fetches), (0, 1));
        }
    }

    /// A refused record is skipped, the records after it written, then
    /// the requests fetched, whether the transport combines or not.
    #[test]
    fn refused_records_are_skipped_then_fetched() {
        for combined in [false, true] {
            for errno in [Errno::ENOENT, Errno::EINVAL, Errno::EXDEV] {
                let mut t = Scripted {
                    combined,
                    refuse: vec![(3, errno), (6, errno)],
                    ..Default::default()
                };
                let fetched = exchange(&mut t, &[1, 2, 3, 4, 5, 6]).unwrap().unwrap();
                assert_eq!(fetched, FETCHED, "combined {combined}, {errno}");
                assert_eq!(t.taken, [1, 2, 4, 5], "combined {combined}, {errno}");
                assert_eq!(t.fetches, 1, "combined {combined}, {errno}");
            }
        }
    }

    /// A stopped device drops the completions; the fetch tells the end.
    #[test]
    fn a_stopped_device_drops_the_rest() {
        for combined in [false, true] {
            let mut t = Scripted {
                combined,
                refuse: vec![(2, Errno::ENODEV)],
                ..Default::default()
            };
            let fetched = exchange(&mut t, &[1, 2, 3]).unwrap().unwrap();
            assert_eq!(fetched, FETCHED);
            assert_eq!(t.taken, [1]);
            assert_eq!(t.fetches, 1);
        }
    }

    #[test]
    fn other_refusals_end_the_worker() {
        for combined in [false, true] {
            let mut t = Scripted {
                combined,
                refuse: vec![(2, Errno::EFAULT)],
                ..Default::default()
            };
            let err = exchange(&mut t, &[1, 2, 3]).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::Kernel {
                        errno: Errno::EFAULT,
                        ..
                    }
                ),
                "{err:?}"
            );
            assert_eq!(t.fetches, 0);
        }
    }

    /// A fetch that fails after every completion was taken (a signal,
    /// O_NONBLOCK) leaves the batch empty: nothing is completed twice.
    #[test]
    fn a_failed_fetch_keeps_the_completions_taken() {
        for combined in [false, true] {
            let mut t = Scripted {
                combined,
                fetch: Some(Errno::EINTR),
                ..Default::default()
            };
            let mut b = batch(&mut t, &[1, 2]);
            let mut input = [0u8; 64];
            let fetched = b.flush_and_fetch(&mut t, &mut input).unwrap();
            assert_eq!(fetched.unwrap_err().kind(), io::ErrorKind::Interrupted);
            assert_eq!(b.used, 0);
            t.fetch = None;
            assert_eq!(
                b.flush_and_fetch(&mut t, &mut input).unwrap().unwrap(),
                FETCHED
            );
            assert_eq!(t.taken, [1, 2]);
        }
    }
}
