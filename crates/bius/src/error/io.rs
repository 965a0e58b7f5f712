//! [`IoError`]: why one request failed, one spelling per errno.

use nix::errno::Errno;

/// Why one request failed.  The worker turns it into the negated errno of
/// the completion the kernel receives.
///
/// Each errno has one spelling: [`IoError::from_errno`] (and `From<Errno>`)
/// gives an errno with a variant of its own that variant and any other
/// [`IoError::Other`], whose [`OtherErrno`] only it makes.  So two
/// `IoError`s are equal exactly when their errnos are, and a match on
/// [`IoError::Io`] sees every `EIO`.
///
/// ```
/// use bius::{Errno, IoError};
///
/// assert_eq!(IoError::from(Errno::EIO), IoError::Io);
/// assert_eq!(IoError::from(Errno::EAGAIN).errno(), Errno::EAGAIN);
/// assert!(matches!(IoError::from(Errno::EAGAIN), IoError::Other(_)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("I/O request failed ({})", self.errno())]
#[non_exhaustive]
pub enum IoError {
    /// A generic I/O error (`EIO`).
    Io,
    /// No space left on the backing store (`ENOSPC`).
    NoSpace,
    /// The operation is not supported by this device (`EOPNOTSUPP`).
    Unsupported,
    /// The request is malformed or out of range (`EINVAL`).
    InvalidArgument,
    /// The device or the backing store is read-only (`EROFS`).
    ReadOnly,
    /// Any other errno (from [`IoError::from_errno`]).
    Other(OtherErrno),
}

/// An errno that has no variant of its own in [`IoError`]; only
/// [`IoError::from_errno`] makes one, so that no errno has two spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherErrno(Errno);

impl OtherErrno {
    /// The errno.
    pub fn errno(self) -> Errno {
        self.0
    }
}

impl IoError {
    /// The errno reported to the kernel for this error.
    pub fn errno(self) -> Errno {
        match self {
            IoError::Io => Errno::EIO,
            IoError::NoSpace => Errno::ENOSPC,
            IoError::Unsupported => Errno::EOPNOTSUPP,
            IoError::InvalidArgument => Errno::EINVAL,
            IoError::ReadOnly => Errno::EROFS,
            IoError::Other(other) => other.0,
        }
    }

    /// The error for an errno; the inverse of [`IoError::errno`].
    pub fn from_errno(errno: Errno) -> Self {
        match errno {
            Errno::EIO => IoError::Io,
            Errno::ENOSPC => IoError::NoSpace,
            Errno::EOPNOTSUPP => IoError::Unsupported,
            Errno::EINVAL => IoError::InvalidArgument,
            Errno::EROFS => IoError::ReadOnly,
            other => IoError::Other(OtherErrno(other)),
        }
    }
}

impl From<Errno> for IoError {
    fn from(errno: Errno) -> Self {
        IoError::from_errno(errno)
    }
}

/// An OS error keeps its errno; any other error becomes [`IoError::Io`].
impl From<std::io::Error> for IoError {
    fn from(err: std::io::Error) -> Self {
        IoError::from_errno(errno_of(&err))
    }
}

/// The errno of a standard library error (`EIO` if it has none).
pub(crate) fn errno_of(err: &std::io::Error) -> Errno {
    err.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_keep_their_errno() {
        let err = std::io::Error::from_raw_os_error(Errno::ENOSPC as i32);
        assert_eq!(IoError::from(err), IoError::NoSpace);
        let err = std::io::Error::other("no errno");
        assert_eq!(IoError::from(err), IoError::Io);
        assert_eq!(IoError::from_errno(Errno::EAGAIN).errno(), Errno::EAGAIN);
    }

    #[test]
    fn an_io_error_names_its_errno() {
        assert_eq!(
            IoError::NoSpace.to_string(),
            "I/O request failed (ENOSPC: No space left on device)"
        );
        assert_eq!(
            IoError::from(Errno::EAGAIN).to_string(),
            "I/O request failed (EAGAIN: Try again)"
        );
    }

    #[test]
    fn an_errno_has_one_spelling() {
        for errno in [
            Errno::EIO,
            Errno::ENOSPC,
            Errno::EOPNOTSUPP,
            Errno::EINVAL,
            Errno::EROFS,
        ] {
            let err = IoError::from_errno(errno);
            assert!(!matches!(err, IoError::Other(_)), "{errno} has a variant");
            assert_eq!(err.errno(), errno);
        }
        assert_eq!(IoError::from(Errno::EIO), IoError::Io);
        assert_eq!(
            IoError::from(Errno::ETIMEDOUT),
            IoError::from_errno(Errno::ETIMEDOUT)
        );
        assert_ne!(IoError::from(Errno::ETIMEDOUT), IoError::Io);
    }
}
