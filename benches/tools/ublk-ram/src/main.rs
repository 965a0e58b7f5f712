//! `ublk-ram`: a RAM disk served through ublk with libublk, as the bench's
//! counterpart of `biusctl create ramdisk`: N queues (one thread each), the
//! same depth and the same storage scheme (1 MiB chunks, zero until
//! written, each behind its own lock).  Prints `/dev/ublkbN` once the disk
//! is live and serves it in the foreground until it is killed.

use std::ops::Range;
use std::sync::{Arc, RwLock};

use clap::Parser;
use libublk::ctrl::{UblkCtrl, UblkCtrlBuilder};
use libublk::io::{BufDescList, UblkDev, UblkIOCtx, UblkQueue};
use libublk::{BufDesc, UblkFlags, UblkIORes};

/// Bytes of one chunk of the RAM disk.
const CHUNK: usize = 1 << 20;

/// The errno of a request out of range or of an unknown operation.
const EINVAL: i32 = 22;

#[derive(Parser)]
struct Args {
    /// Size in MiB.
    #[arg(long, default_value_t = 256)]
    size_mib: u64,
    /// Hardware queues.
    #[arg(long, default_value_t = 2)]
    queues: u16,
    /// Requests in flight per queue.
    #[arg(long, default_value_t = 128)]
    depth: u16,
}

/// The disk's bytes, in chunks that each have a lock.
struct Ram {
    chunks: Vec<RwLock<Box<[u8]>>>,
}

impl Ram {
    fn new(bytes: usize) -> Self {
        let chunks = (0..bytes.div_ceil(CHUNK))
            .map(|_| RwLock::new(vec![0u8; CHUNK].into_boxed_slice()))
            .collect();
        Ram { chunks }
    }

    /// Calls `f(chunk, offset in it, range of buf)` for each piece of `len`
    /// bytes from `off`.
    fn pieces(
        &self,
        off: usize,
        len: usize,
        mut f: impl FnMut(&RwLock<Box<[u8]>>, usize, Range<usize>),
    ) {
        let mut done = 0;
        while done < len {
            let pos = off + done;
            let n = (CHUNK - pos % CHUNK).min(len - done);
            f(&self.chunks[pos / CHUNK], pos % CHUNK, done..done + n);
            done += n;
        }
    }

    fn read(&self, off: usize, buf: &mut [u8]) {
        self.pieces(off, buf.len(), |chunk, at, r| {
            let n = r.len();
            buf[r].copy_from_slice(&chunk.read().unwrap()[at..at + n]);
        });
    }

    fn write(&self, off: usize, buf: &[u8]) {
        self.pieces(off, buf.len(), |chunk, at, r| {
            let n = r.len();
            chunk.write().unwrap()[at..at + n].copy_from_slice(&buf[r]);
        });
    }

    fn len(&self) -> usize {
        self.chunks.len() * CHUNK
    }
}

/// Serves one request; its result (bytes, or -errno).
fn serve(q: &UblkQueue, tag: u16, buf: &mut [u8], ram: &Ram) -> i32 {
    let iod = q.get_iod(tag);
    let off = (iod.start_sector << 9) as usize;
    let bytes = (iod.nr_sectors << 9) as usize;
    if off.saturating_add(bytes) > ram.len() || bytes > buf.len() {
        return -EINVAL;
    }
    match iod.op_flags & 0xff {
        libublk::sys::UBLK_IO_OP_READ => ram.read(off, &mut buf[..bytes]),
        libublk::sys::UBLK_IO_OP_WRITE => ram.write(off, &buf[..bytes]),
        libublk::sys::UBLK_IO_OP_FLUSH => {}
        _ => return -EINVAL,
    }
    bytes as i32
}

/// One queue's thread: fetch, serve, commit, until the device stops.
fn queue_thread(qid: u16, dev: &UblkDev, ram: &Ram) {
    let mut bufs = dev.alloc_queue_io_bufs();
    let queue = match UblkQueue::new(qid, dev)
        .and_then(|q| q.submit_fetch_commands_unified(BufDescList::Slices(Some(&bufs))))
    {
        Ok(q) => q,
        Err(e) => {
            eprintln!("ublk-ram: queue {qid}: {e}");
            return;
        }
    };
    queue.wait_and_handle_io(move |q: &UblkQueue, tag: u16, _: &UblkIOCtx| {
        let buf = bufs[tag as usize].as_mut_slice();
        let res = serve(q, tag, buf, ram);
        let _ = q.complete_io_cmd_unified(tag, BufDesc::Slice(buf), Ok(UblkIORes::Result(res)));
    });
}

fn main() {
    let args = Args::parse();
    let size = args.size_mib << 20;
    let ram = Arc::new(Ram::new(size as usize));
    let ctrl = UblkCtrlBuilder::default()
        .name("ublk-ram")
        .nr_queues(args.queues)
        .depth(args.depth)
        .dev_flags(UblkFlags::UBLK_DEV_F_ADD_DEV)
        .build()
        .expect("ublk-ram: creating the ublk device");
    let queue_fn = move |qid: u16, dev: &UblkDev| queue_thread(qid, dev, &ram);
    let started = |ctrl: &UblkCtrl| {
        println!("/dev/ublkb{}", ctrl.dev_info().dev_id);
    };
    ctrl.run_target(
        |dev: &mut UblkDev| {
            dev.set_default_params(size);
            Ok(())
        },
        queue_fn,
        started,
    )
    .expect("ublk-ram: serving the device");
}
