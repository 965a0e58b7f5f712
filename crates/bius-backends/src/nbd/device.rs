//! [`NbdDevice`]: a BIUS device stored on a remote NBD export, with many
//! requests in flight per queue and per connection.

use bius::{Capabilities, Command, DeferredDevice, Io, IoError};

use super::{NbdAddress, NbdClient, NbdCommand, NbdError, NbdIo};

/// A block device whose data is an NBD export: each request is sent to
/// the server as it arrives and completes when the server answers, so a
/// queue keeps up to its depth of requests in flight over the network.
///
/// The device announces what the export offers: a write cache (flush),
/// FUA, discard (trim), write-zeroes, read-only, rotational.  A server that
/// breaks the protocol or goes away fails the requests in flight on its
/// connection, and every later one, with `EIO` (logged once with the
/// reason).
///
/// ```no_run
/// use bius_backends::nbd::{NbdAddress, NbdDevice};
///
/// let address: NbdAddress = "unix:/run/nbdkit.sock".parse()?;
/// let disk = NbdDevice::connect(&address, "", 1)?;
/// let device = bius::DeviceBuilder::new(disk.size())
///     .max_io_size(disk.max_io_size())
///     .queue_depth(64)
///     .create_deferred(disk)?;
/// device.run_until_signal()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct NbdDevice {
    client: NbdClient,
}

impl NbdDevice {
    /// Connects to `export` on the server at `address` with up to
    /// `connections` connections (1 unless the server allows several).
    pub fn connect(
        address: &NbdAddress,
        export: &str,
        connections: usize,
    ) -> Result<Self, NbdError> {
        NbdClient::connect(address, export, connections).map(|client| NbdDevice { client })
    }

    /// The export's size in bytes.
    pub fn size(&self) -> u64 {
        self.client.size()
    }

    /// The largest read or write the device should announce: the server's
    /// largest payload, whole pages, at most 1 MiB (BIUS's default).
    pub fn max_io_size(&self) -> u32 {
        let max = self.client.block_size().max.min(1 << 20);
        max / 4096 * 4096
    }

    /// The client engine.
    pub fn client(&self) -> &NbdClient {
        &self.client
    }
}

/// The NBD command of a request; `None` for what NBD cannot do.
fn nbd_command(command: Command) -> Option<NbdCommand> {
    // (The kernel sends at most u32::MAX bytes per request.)
    let len32 = |len: u64| u32::try_from(len).ok();
    Some(match command {
        Command::Read { offset, len } => NbdCommand::Read {
            offset,
            len: len32(len)?,
        },
        Command::Write { offset, len, fua } => NbdCommand::Write {
            offset,
            len: len32(len)?,
            fua,
        },
        Command::Flush => NbdCommand::Flush,
        Command::Discard { offset, len } => NbdCommand::Trim {
            offset,
            len: len32(len)?,
        },
        Command::WriteZeroes { offset, len, unmap } => NbdCommand::WriteZeroes {
            offset,
            len: len32(len)?,
            no_hole: !unmap,
            fua: false,
        },
        _ => return None,
    })
}

impl DeferredDevice for NbdDevice {
    fn capabilities(&self) -> Capabilities {
        let flags = self.client.flags();
        Capabilities {
            write_cache: flags.flush(),
            fua: flags.fua(),
            discard: flags.trim(),
            write_zeroes: flags.write_zeroes(),
            read_only: flags.read_only(),
            rotational: flags.rotational(),
            no_data: false,
        }
    }

    fn submit(&self, io: Io) {
        match nbd_command(io.command()) {
            Some(command) => self.client.submit(Box::new(Remote { io, command })),
            None => io.complete_done(Err(IoError::Unsupported)),
        }
    }
}

/// A request on its way to the server and back.
struct Remote {
    io: Io,
    command: NbdCommand,
}

impl NbdIo for Remote {
    fn command(&self) -> NbdCommand {
        self.command
    }

    fn write_data(&self) -> &[u8] {
        self.io.data()
    }

    fn read_buf(&mut self) -> &mut [u8] {
        self.io.buf_mut()
    }

    fn finish(self: Box<Self>, result: Result<(), NbdError>) {
        let result = result.map_err(|err| {
            log::debug!("{:?} failed: {err}", self.io);
            err.io_error()
        });
        self.io.complete_done(result);
    }
}
