//! The hooks of a wrapper device on an [`Io`] it hands to another device:
//! [`Io::redirect`], [`Io::reply_on_success`], [`Io::fill_on_success`] and
//! [`Io::on_complete`] (see [Writing a wrapper](super#writing-a-wrapper)).

use std::fmt;
use std::ops::Range;

use super::Io;
use crate::error::IoError;
use crate::op::Op;
use crate::request::{Command, Reply};

impl Io {
    /// Makes this request `command` for whoever serves it next: the
    /// wrapped device's [`Io::command`] and [`Io::request`] are then
    /// `command`'s.  The data stays the request's, so `command` must fit
    /// it: a read stays a read of the same length; any other request may
    /// become a command without data, or, if it has data (a write or
    /// append), a write or append of the same length.  Otherwise the
    /// request is left as it was and a [`RedirectError`] says why.
    ///
    /// ```
    /// use bius::{Command, DeferredDevice, Io};
    ///
    /// /// Sends every write of `inner` as a write with forced unit access.
    /// struct WriteThrough<D>(D);
    ///
    /// impl<D: DeferredDevice> DeferredDevice for WriteThrough<D> {
    ///     fn submit(&self, mut io: Io) {
    ///         if let Command::Write { offset, len, .. } = io.command() {
    ///             let fua = true;
    ///             io.redirect(Command::Write { offset, len, fua }).expect("the same data");
    ///         }
    ///         self.0.submit(io);
    ///     }
    /// }
    /// ```
    pub fn redirect(&mut self, command: Command) -> Result<(), RedirectError> {
        let from = self.command;
        if !fits(from, command) {
            return Err(RedirectError { from, to: command });
        }
        self.command = command;
        Ok(())
    }

    /// Answers a success of whoever serves this request next with `reply`
    /// instead of [`Reply::Done`] (a reply other than `Done` is passed on
    /// as it is): an append served as a write answers with where the data
    /// landed, [`Reply::Appended`].  The last one given counts.  The hooks
    /// of [`Io::on_complete`] see the outcome so answered.
    ///
    /// ```
    /// use bius::{Command, DeferredDevice, Io, Reply};
    ///
    /// /// Serves appends to a one-zone device of `zone` bytes as writes at
    /// /// a write pointer kept here.
    /// struct Appender<D> {
    ///     inner: D,
    ///     write_pointer: std::sync::atomic::AtomicU64,
    /// }
    ///
    /// impl<D: DeferredDevice> DeferredDevice for Appender<D> {
    ///     fn submit(&self, mut io: Io) {
    ///         if let Command::ZoneAppend { len, fua, .. } = io.command() {
    ///             let order = std::sync::atomic::Ordering::Relaxed;
    ///             let offset = self.write_pointer.fetch_add(len, order);
    ///             io.redirect(Command::Write { offset, len, fua }).expect("the same data");
    ///             io.reply_on_success(Reply::Appended(offset));
    ///         }
    ///         self.inner.submit(io);
    ///     }
    /// }
    /// ```
    pub fn reply_on_success(&mut self, reply: Reply) {
        self.reply = Some(reply);
    }

    /// Fills bytes `range` of a read's buffer with `byte` when the request
    /// succeeds, after whoever served it filled the buffer (after the
    /// ranges given before, in order; a range outside the buffer is
    /// ignored), before the hooks of [`Io::on_complete`] run: they see
    /// the buffer filled.  [`DeferredZoned`](crate::zone::DeferredZoned) fills so what its zones hold
    /// no data for.
    ///
    /// ```
    /// use bius::{Command, DeferredDevice, Io};
    ///
    /// /// Hides the first sector of `inner`: it reads as zeroes.
    /// struct HiddenLabel<D>(D);
    ///
    /// impl<D: DeferredDevice> DeferredDevice for HiddenLabel<D> {
    ///     fn submit(&self, mut io: Io) {
    ///         if let Command::Read { offset: 0, .. } = io.command() {
    ///             io.fill_on_success(0..512, 0);
    ///         }
    ///         self.0.submit(io);
    ///     }
    /// }
    /// ```
    pub fn fill_on_success(&mut self, range: Range<usize>, byte: u8) {
        self.fill.push((range, byte));
    }

    /// Runs `hook` when this request is completed, instead of completing
    /// it: the hook gets the request back with the outcome it was
    /// completed with (as [`Io::reply_on_success`] and
    /// [`Io::fill_on_success`] make it), and completes it (with that outcome or another), or
    /// sends it on (to another device, say, a flush after a write).  A
    /// request dropped uncompleted runs the hook with `EIO`.
    ///
    /// Hooks nest, as wrappers do: a hook set while another is pending
    /// runs first, and when it completes the request the one set before
    /// it runs.  So a wrapper over another wrapper (a cache over a
    /// [`DeferredZoned`](crate::zone::DeferredZoned)) gets its hook run
    /// whatever hooks the inner one sets, after them.  (A hook sees the
    /// request as the inner wrappers left it, [`Io::command`] redirected:
    /// what it needs of the request as it sent it, it captures.)
    ///
    /// ```
    /// use bius::{DeferredDevice, Io};
    ///
    /// /// Logs every failed request of `inner`.
    /// struct Logged<D>(D);
    ///
    /// impl<D: DeferredDevice> DeferredDevice for Logged<D> {
    ///     fn submit(&self, mut io: Io) {
    ///         io.on_complete(|io, result| {
    ///             if let Err(err) = &result {
    ///                 eprintln!("{:?} failed: {err}", io.command());
    ///             }
    ///             io.complete(result);
    ///         });
    ///         self.0.submit(io);
    ///     }
    /// }
    /// ```
    pub fn on_complete(&mut self, hook: impl FnOnce(Io, Result<Reply, IoError>) + Send + 'static) {
        self.on_complete.push(Box::new(hook));
    }
}

/// Whether a request of `from` may become `to` ([`Io::redirect`]).
fn fits(from: Command, to: Command) -> bool {
    match (from.op() == Op::Read, to.op() == Op::Read) {
        (true, true) => to.data_len() == from.data_len(),
        (false, false) => to.data_len() == 0 || to.data_len() == from.data_len(),
        _ => false,
    }
}

/// Why [`Io::redirect`] refused a command: it does not fit the request's
/// data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedirectError {
    /// What the request is.
    pub from: Command,
    /// What it was to become.
    pub to: Command,
}

impl fmt::Display for RedirectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (from, to) = (self.from, self.to);
        write!(
            f,
            "a {} with {} bytes of data cannot become a {} with {}",
            from.op(),
            from.data_len(),
            to.op(),
            to.data_len()
        )
    }
}

impl std::error::Error for RedirectError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(from: Command, to: Command) -> bool {
        !fits(from, to)
    }

    #[test]
    fn a_redirect_keeps_the_requests_data() {
        let read = Command::Read {
            offset: 0,
            len: 4096,
        };
        let write = |len| Command::Write {
            offset: 8192,
            len,
            fua: false,
        };
        let discard = Command::Discard {
            offset: 0,
            len: 1 << 20,
        };
        assert!(!refused(
            read,
            Command::Read {
                offset: 512,
                len: 4096
            }
        ));
        assert!(refused(
            read,
            Command::Read {
                offset: 0,
                len: 512
            }
        ));
        assert!(refused(read, write(4096)));
        assert!(refused(read, Command::Flush));
        assert!(!refused(write(4096), write(4096)));
        assert!(!refused(write(4096), Command::Flush));
        assert!(refused(write(4096), write(512)));
        assert!(!refused(Command::ZoneReset { offset: 0 }, discard));
        assert!(refused(discard, write(512)));
        let err = RedirectError {
            from: read,
            to: write(4096),
        };
        assert_eq!(
            err.to_string(),
            "a read with 4096 bytes of data cannot become a write with 4096"
        );
    }
}
