//! The daemon's socket: `biusctl create` listens on the Unix socket
//! `/run/bius/<disk>.sock` (directory mode 0700; the socket is removed
//! when the daemon exits) for the device's statistics and traces
//! ([`crate::stats`], [`crate::trace`]), faults to inject into a zoned RAM
//! disk ([`crate::fault`]) and the device model ([`crate::model`]).
//!
//! The protocol is one line each way per connection: a request, and
//! `ok MESSAGE` or `error MESSAGE`; an error caused by a system call says
//! its errno first: `error errno=28 MESSAGE`.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use bius::Errno;

/// Where the daemons' sockets are.
pub const SOCKET_DIR: &str = "/run/bius";

/// Longest request line read (a trace request carries a path).
const MAX_LINE: u64 = 8 << 10;

/// Longest answer line read (the statistics of every zone of a large
/// disk).
const MAX_ANSWER: u64 = 64 << 20;

/// How long a client or a connection may take.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The answer line (`ok ...` or `error ...`, no newline) to a request line.
pub type Handler = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// The socket of the daemon serving `disk` in `dir`.
pub fn socket_path(dir: &Path, disk: &str) -> PathBuf {
    dir.join(format!("{disk}.sock"))
}

/// A daemon's socket: one thread answering one request per connection.
/// Dropping it stops the thread and removes the socket.
pub struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on `dir/<disk>.sock` (creating `dir` with mode 0700; a
    /// socket left there by a dead daemon is replaced: disk names are
    /// unique while their disks live), answering with `handler`.
    pub fn start(dir: &Path, disk_name: &str, handler: Handler) -> io::Result<Server> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let path = socket_path(dir, disk_name);
        match std::fs::remove_file(&path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
        let listener = UnixListener::bind(&path)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = thread::Builder::new()
            .name("bius-socket".into())
            .spawn(move || serve(&listener, &*handler, &stopped))?;
        Ok(Server {
            path,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the thread up from accept().
        if UnixStream::connect(&self.path).is_ok() {
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(
    listener: &UnixListener,
    handler: &(dyn Fn(&str) -> String + Send + Sync),
    stop: &AtomicBool,
) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let result = stream.and_then(|stream| {
            stream.set_read_timeout(Some(IO_TIMEOUT))?;
            stream.set_write_timeout(Some(IO_TIMEOUT))?;
            let mut line = String::new();
            BufReader::new(&stream)
                .take(MAX_LINE)
                .read_line(&mut line)?;
            let answer = handler(line.trim_end());
            log::debug!("socket: {} -> {answer}", line.trim_end());
            (&stream).write_all(format!("{answer}\n").as_bytes())
        });
        if let Err(err) = result {
            log::warn!("daemon socket: {err}");
        }
    }
}

/// The answer line of a request that failed with `errno`.
pub fn failure(errno: Errno, message: impl fmt::Display) -> String {
    format!("error errno={} {message}", errno as i32)
}

/// Why a request to a daemon failed.
#[derive(Debug)]
pub enum SendError {
    /// No daemon listens on the socket.
    NoDaemon(PathBuf, io::Error),
    /// The exchange with the daemon failed.
    Io(PathBuf, io::Error),
    /// The daemon refused the request: why, and the errno (`EINVAL` if
    /// it named none).
    Refused(String, Errno),
}

impl SendError {
    /// The errno that says why.
    pub fn errno(&self) -> Errno {
        match self {
            SendError::NoDaemon(_, err) | SendError::Io(_, err) => {
                err.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
            }
            SendError::Refused(_, errno) => *errno,
        }
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NoDaemon(path, err) if err.kind() == io::ErrorKind::ConnectionRefused => {
                write!(f, "the daemon of {} is gone (did it die?)", path.display())
            }
            SendError::NoDaemon(path, _) => write!(
                f,
                "no biusctl daemon listens on {} (only a disk of `biusctl create` has one)",
                path.display()
            ),
            SendError::Io(path, _) => {
                write!(f, "talking to the daemon on {} failed", path.display())
            }
            SendError::Refused(message, _) => f.write_str(message),
        }
    }
}

/// Sends `request` to the daemon of `disk_name` in `dir`; its answer's
/// message.
pub fn request(dir: &Path, disk_name: &str, request: &str) -> Result<String, SendError> {
    let path = socket_path(dir, disk_name);
    let stream =
        UnixStream::connect(&path).map_err(|err| SendError::NoDaemon(path.clone(), err))?;
    let io_err = |err| SendError::Io(path.clone(), err);
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(io_err)?;
    (&stream)
        .write_all(format!("{request}\n").as_bytes())
        .map_err(io_err)?;
    let mut line = String::new();
    BufReader::new(&stream)
        .take(MAX_ANSWER)
        .read_line(&mut line)
        .map_err(io_err)?;
    let line = line.trim_end();
    if let Some(message) = line.strip_prefix("ok ") {
        Ok(message.into())
    } else if let Some(message) = line.strip_prefix("error ") {
        Err(refusal(message))
    } else {
        Err(io_err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected answer `{line}`"),
        )))
    }
}

/// A refusal's message and errno (`errno=N MESSAGE`, or `EINVAL`).
fn refusal(message: &str) -> SendError {
    let coded = message.strip_prefix("errno=").and_then(|rest| {
        let (number, text) = rest.split_once(' ')?;
        Some((Errno::from_raw(number.parse().ok()?), text))
    });
    match coded {
        Some((errno, text)) => SendError::Refused(text.into(), errno),
        None => SendError::Refused(message.into(), Errno::EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_serves_until_dropped() {
        let dir = std::env::temp_dir().join(format!("biusctl-socket-{}", std::process::id()));
        let handler: Handler = Arc::new(|line| match line.strip_prefix("echo ") {
            Some(text) => format!("ok {text}"),
            None if line == "full" => failure(Errno::ENOSPC, "disk full"),
            None => format!("error unknown request `{line}`"),
        });
        let server = Server::start(&dir, "zdisk", Arc::clone(&handler)).unwrap();
        let path = socket_path(&dir, "zdisk");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(request(&dir, "zdisk", "echo hello").unwrap(), "hello");
        assert!(matches!(
            request(&dir, "zdisk", "melt"),
            Err(SendError::Refused(message, Errno::EINVAL)) if message.contains("melt")
        ));
        assert!(matches!(
            request(&dir, "zdisk", "full"),
            Err(SendError::Refused(message, Errno::ENOSPC)) if message == "disk full"
        ));
        assert!(matches!(
            request(&dir, "other", "echo x"),
            Err(SendError::NoDaemon(..))
        ));
        // A stale socket is replaced.
        drop(server);
        assert!(!path.exists());
        let stale = UnixListener::bind(&path).unwrap();
        drop(stale);
        let server = Server::start(&dir, "zdisk", handler).unwrap();
        assert!(request(&dir, "zdisk", "echo again").is_ok());
        drop(server);
        std::fs::remove_dir(&dir).unwrap();
    }
}
