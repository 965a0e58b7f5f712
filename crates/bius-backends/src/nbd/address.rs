//! [`NbdAddress`]: where an NBD server listens.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Where an NBD server listens.
///
/// Parsed from `HOST:PORT`, `[IPV6]:PORT` or `unix:PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NbdAddress {
    /// A TCP server: a host name or an IP address (IPv6 without brackets),
    /// and a port.
    Tcp {
        /// Host name or IP address.
        host: String,
        /// TCP port.
        port: u16,
    },
    /// A Unix domain socket.
    Unix(PathBuf),
}

/// Why a string is not an [`NbdAddress`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// The string is empty.
    #[error("empty NBD address (expected {FORMS})")]
    Empty,
    /// `unix:` without a path.
    #[error("NBD address \"unix:\" has no socket path")]
    EmptyUnixPath,
    /// No `:PORT` at the end.
    #[error("NBD address {0:?} has no port (expected {FORMS})")]
    MissingPort(String),
    /// The port is not a number from 1 to 65535.
    #[error("NBD address {0:?}: the port is not a number from 1 to 65535")]
    BadPort(String),
    /// Nothing before `:PORT`.
    #[error("NBD address {0:?} has no host before the port")]
    EmptyHost(String),
    /// An IPv6 address without brackets (`[::1]:10809` is the form).
    #[error("NBD address {0:?}: write an IPv6 address in brackets, as [ADDRESS]:PORT")]
    UnbracketedIpv6(String),
    /// A `[` without its `]`, or text between `]` and `:PORT`.
    #[error("NBD address {0:?}: expected [IPV6]:PORT")]
    BadBrackets(String),
}

/// The forms of an address, for the errors.
const FORMS: &str = "HOST:PORT, [IPV6]:PORT or unix:PATH";

fn parse_port(port: &str, whole: &str) -> Result<u16, AddressError> {
    match port.parse::<u16>() {
        Ok(p) if p != 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(AddressError::BadPort(whole.to_string())),
    }
}

impl FromStr for NbdAddress {
    type Err = AddressError;

    fn from_str(s: &str) -> Result<Self, AddressError> {
        if s.is_empty() {
            return Err(AddressError::Empty);
        }
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(AddressError::EmptyUnixPath);
            }
            return Ok(NbdAddress::Unix(PathBuf::from(path)));
        }
        if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| AddressError::BadBrackets(s.to_string()))?;
            let port = match after.strip_prefix(':') {
                Some(port) => port,
                None if after.is_empty() => return Err(AddressError::MissingPort(s.to_string())),
                None => return Err(AddressError::BadBrackets(s.to_string())),
            };
            if host.is_empty() {
                return Err(AddressError::EmptyHost(s.to_string()));
            }
            let port = parse_port(port, s)?;
            return Ok(NbdAddress::Tcp {
                host: host.to_string(),
                port,
            });
        }
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| AddressError::MissingPort(s.to_string()))?;
        if host.contains(':') {
            return Err(AddressError::UnbracketedIpv6(s.to_string()));
        }
        if host.is_empty() {
            return Err(AddressError::EmptyHost(s.to_string()));
        }
        let port = parse_port(port, s)?;
        Ok(NbdAddress::Tcp {
            host: host.to_string(),
            port,
        })
    }
}

impl fmt::Display for NbdAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NbdAddress::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            NbdAddress::Tcp { host, port } => write!(f, "{host}:{port}"),
            NbdAddress::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16) -> NbdAddress {
        NbdAddress::Tcp {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn parses_addresses() {
        assert_eq!("localhost:10809".parse(), Ok(tcp("localhost", 10809)));
        assert_eq!("127.0.0.1:1".parse(), Ok(tcp("127.0.0.1", 1)));
        assert_eq!("[::1]:10809".parse(), Ok(tcp("::1", 10809)));
        assert_eq!(
            "unix:/run/nbd.sock".parse(),
            Ok(NbdAddress::Unix("/run/nbd.sock".into()))
        );
        assert_eq!(
            "unix:rel:ative".parse(),
            Ok(NbdAddress::Unix("rel:ative".into()))
        );
    }

    #[test]
    fn rejects_bad_addresses() {
        use AddressError::*;
        let err = |s: &str| s.parse::<NbdAddress>().unwrap_err();
        assert_eq!(err(""), Empty);
        assert_eq!(err("unix:"), EmptyUnixPath);
        assert_eq!(err("localhost"), MissingPort("localhost".into()));
        assert_eq!(err("host:"), BadPort("host:".into()));
        assert_eq!(err("host:0"), BadPort("host:0".into()));
        assert_eq!(err("host:65536"), BadPort("host:65536".into()));
        assert_eq!(err("host:+80"), BadPort("host:+80".into()));
        assert_eq!(err(":80"), EmptyHost(":80".into()));
        assert_eq!(err("::1:80"), UnbracketedIpv6("::1:80".into()));
        assert_eq!(err("[::1:80"), BadBrackets("[::1:80".into()));
        assert_eq!(err("[::1]x:80"), BadBrackets("[::1]x:80".into()));
        assert_eq!(err("[::1]"), MissingPort("[::1]".into()));
        assert_eq!(err("[]:80"), EmptyHost("[]:80".into()));
        assert!(err("x:y").to_string().contains("port"));
    }

    #[test]
    fn displays_round_trip() {
        for s in ["localhost:10809", "[::1]:10809", "unix:/tmp/s"] {
            assert_eq!(s.parse::<NbdAddress>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn errors_name_the_address_and_the_form() {
        for (bad, message) in [
            (
                "",
                "empty NBD address (expected HOST:PORT, [IPV6]:PORT or unix:PATH)",
            ),
            ("unix:", "NBD address \"unix:\" has no socket path"),
            (
                "localhost",
                "NBD address \"localhost\" has no port (expected HOST:PORT, [IPV6]:PORT or unix:PATH)",
            ),
            (
                "host:0",
                "NBD address \"host:0\": the port is not a number from 1 to 65535",
            ),
            (":80", "NBD address \":80\" has no host before the port"),
            (
                "::1:80",
                "NBD address \"::1:80\": write an IPv6 address in brackets, as [ADDRESS]:PORT",
            ),
            ("[::1:80", "NBD address \"[::1:80\": expected [IPV6]:PORT"),
        ] {
            let err = bad.parse::<NbdAddress>().unwrap_err();
            assert_eq!(err.to_string(), message, "{bad}");
        }
    }
}
