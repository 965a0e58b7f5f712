//! What the tests of the deferred backends share.

use bius::loopback::{Loopback, Submission};

use bius::{Command, Reply};

/// A pattern for chunk `seed` of `len` bytes.
pub(crate) fn chunk_pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed * 13 + i * 7) as u8).collect()
}

/// Writes `count` chunks of `len` bytes with all of them in flight, spread
/// over two queues, flushes, reads them back the same way, then discards
/// the first and reads zeroes there.
pub(crate) fn round_trip(kernel: &Loopback, count: usize, len: usize) {
    let offset = |i: usize| (i * len) as u64;
    let queue = |i: usize| (i % 2) as u32;
    let writes: Vec<_> = (0..count)
        .map(|i| {
            kernel
                .submit(
                    queue(i),
                    Submission::write(offset(i), chunk_pattern(i, len)),
                )
                .unwrap()
        })
        .collect();
    for ticket in writes {
        assert_eq!(ticket.wait(), Ok(Reply::Done));
    }
    assert_eq!(kernel.run(0, Command::Flush), Ok(Reply::Done));
    let read = |i: usize| Command::Read {
        offset: offset(i),
        len: len as u64,
    };
    let reads: Vec<_> = (0..count)
        .map(|i| kernel.submit(queue(i), read(i)).unwrap())
        .collect();
    for (i, ticket) in reads.into_iter().enumerate() {
        assert_eq!(ticket.wait_data(), Ok(chunk_pattern(i, len)), "chunk {i}");
    }
    let discard = Command::Discard {
        offset: 0,
        len: len as u64,
    };
    assert_eq!(kernel.run(1, discard), Ok(Reply::Done));
    assert_eq!(
        kernel.submit(0, read(0)).unwrap().wait_data(),
        Ok(vec![0; len])
    );
    assert_eq!(kernel.counters().refused, 0);
}
