//! `slow_memdisk`: a RAM disk that takes its time, as an async device on
//! tokio: the way to write a backend that waits (a modelled flash read, a
//! network round trip) without a thread per request.
//!
//! What it teaches:
//! - an [`AsyncBlockDevice`]: `async fn` methods, each request a task on
//!   the runtime; a request waiting (here `tokio::time::sleep`) holds no
//!   thread, so a queue of depth 64 keeps 64 requests waiting at once;
//! - [`TokioDevice`] to serve it, and [`DeviceBuilder::create_deferred`];
//! - keeping `run_until_signal` (which blocks) off the runtime's threads.
//!
//! Run it (as root, with `bius.ko` loaded), then compare queue depths:
//!
//! ```sh
//! cargo run --release --features tokio --example slow_memdisk -- --read-latency 1ms
//! fio --name=qd1 --filename=/dev/slow_memdisk --direct=1 --rw=randread --bs=4k \
//!     --ioengine=libaio --iodepth=1 --runtime=5 --time_based
//! # --iodepth=32: about 32 times the IOPS, each read still 1 ms
//! ```

use std::ops::Range;
use std::process::ExitCode;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use bius::tokio::{AsyncBlockDevice, TokioDevice};
use bius::{Capabilities, DeviceBuilder, IoError};

mod common;
use common::DiskArgs;

/// A RAM disk whose reads and writes take a fixed time.
#[derive(Debug, clap::Parser)]
#[command(name = "slow_memdisk")]
struct Options {
    /// Disk size: bytes, or with a unit (256M, 1.5G, 1GB).
    #[arg(long, value_parser = bius::size::parse, default_value = "256M")]
    size: u64,
    /// How long each read takes, e.g. 80us or 1ms.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1ms")]
    read_latency: Duration,
    /// How long each write takes.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "100us")]
    write_latency: Duration,
    /// Requests in flight per queue.
    #[arg(long, default_value_t = 64)]
    depth: u32,
    #[command(flatten)]
    disk: DiskArgs,
}

/// The data, and how long each kind of request takes.
struct SlowMemDisk {
    data: RwLock<Vec<u8>>,
    read_latency: Duration,
    write_latency: Duration,
}

impl SlowMemDisk {
    fn new(size: u64, read_latency: Duration, write_latency: Duration) -> Self {
        let data = RwLock::new(vec![0; size as usize]);
        SlowMemDisk {
            data,
            read_latency,
            write_latency,
        }
    }
}

/// The bytes of a request: the framework hands a device only ranges that
/// lie on it.
fn range(offset: u64, len: usize) -> Range<usize> {
    offset as usize..offset as usize + len
}

impl AsyncBlockDevice for SlowMemDisk {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            write_cache: true,
            ..Capabilities::default()
        }
    }

    async fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        // The wait holds no lock and no thread.
        tokio::time::sleep(self.read_latency).await;
        let data = self.data.read().unwrap_or_else(PoisonError::into_inner);
        buf.copy_from_slice(&data[range(offset, buf.len())]);
        Ok(())
    }

    async fn write(&self, offset: u64, bytes: &[u8], _fua: bool) -> Result<(), IoError> {
        tokio::time::sleep(self.write_latency).await;
        let mut data = self.data.write().unwrap_or_else(PoisonError::into_inner);
        data[range(offset, bytes.len())].copy_from_slice(bytes);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let options: Options = clap::Parser::parse();
    let disk = SlowMemDisk::new(options.size, options.read_latency, options.write_latency);
    let device = TokioDevice::new(disk, tokio::runtime::Handle::current());
    let created = options
        .disk
        .apply(DeviceBuilder::new(options.size), "slow_memdisk")
        .queue_depth(options.depth)
        .create_deferred(device);
    // Serving blocks until a signal: on a thread of its own.
    tokio::task::spawn_blocking(move || common::serve(created))
        .await
        .unwrap_or(ExitCode::FAILURE)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use bius::loopback::{Loopback, Submission};
    use bius::{Command, Reply};

    use super::*;

    /// A loopback kernel serving a 1 MiB disk whose reads take
    /// `read_latency`, on the runtime `runtime`.
    fn start(runtime: &tokio::runtime::Runtime, read_latency: Duration) -> Loopback {
        let disk = SlowMemDisk::new(1 << 20, read_latency, Duration::ZERO);
        let device = TokioDevice::new(disk, runtime.handle().clone());
        let mut kernel = Loopback::new(&DeviceBuilder::new(1 << 20).queue_depth(64)).unwrap();
        kernel.start_deferred(device).unwrap();
        kernel
    }

    /// 64 writes, then 64 reads in flight at once on one queue, each read
    /// waiting its 5 ms; a flush succeeds, a zone request fails.
    #[test]
    fn serves_many_requests_in_flight() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let kernel = start(&runtime, Duration::from_millis(5));
        let chunk = |i: u64| vec![i as u8 + 1; 4096];
        let writes: Vec<_> = (0..64)
            .map(|i| kernel.submit(0, Submission::write(i * 4096, chunk(i))))
            .collect();
        for ticket in writes {
            assert_eq!(ticket.unwrap().wait(), Ok(Reply::Done));
        }
        let start = Instant::now();
        let read = |offset| Command::Read { offset, len: 4096 };
        let reads: Vec<_> = (0..64).map(|i| kernel.submit(0, read(i * 4096))).collect();
        for (i, ticket) in (0..).zip(reads) {
            assert_eq!(ticket.unwrap().wait_data(), Ok(chunk(i)));
        }
        assert!(start.elapsed() >= Duration::from_millis(5));
        assert_eq!(kernel.run(0, Command::Flush), Ok(Reply::Done));
        let reset_all = kernel.run(0, Command::ZoneResetAll);
        assert_eq!(reset_all, Err(IoError::Unsupported));
        kernel.stop().unwrap();
    }

    #[test]
    fn requests_in_flight_when_the_runtime_stops_fail_with_eio() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let kernel = start(&runtime, Duration::from_secs(3600));
        let len = 512;
        let read = kernel.submit(0, Command::Read { offset: 0, len });
        // (let the task start sleeping)
        std::thread::sleep(Duration::from_millis(50));
        runtime.shutdown_background();
        assert_eq!(read.unwrap().wait(), Err(IoError::Io));
        kernel.stop().unwrap();
    }
}
