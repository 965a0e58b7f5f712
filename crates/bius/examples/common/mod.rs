//! What the examples share: a tiny command line of `--option value` pairs
//! and serving the device until Ctrl-C.  Copy this file along with the
//! example you start from (or use your favourite argument parser).

use std::fmt::Display;
use std::process::{self, ExitCode};
use std::str::FromStr;

use bius::{Device, DeviceBuilder};

/// A size in bytes, written as a number with an optional `K`, `M`, `G` or
/// `T` suffix (powers of 1024): `64M`, `4096`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl FromStr for Size {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (digits, shift) = match text.as_bytes().last() {
            Some(b'K' | b'k') => (&text[..text.len() - 1], 10),
            Some(b'M' | b'm') => (&text[..text.len() - 1], 20),
            Some(b'G' | b'g') => (&text[..text.len() - 1], 30),
            Some(b'T' | b't') => (&text[..text.len() - 1], 40),
            _ => (text, 0),
        };
        let number: u64 = digits.parse().map_err(|_| format!("not a size: {text}"))?;
        number
            .checked_mul(1 << shift)
            .map(Size)
            .ok_or_else(|| format!("size too large: {text}"))
    }
}

/// The command line of an example: `--option value` pairs, taken one by
/// one with [`Options::get`]; `--help` prints the usage.
pub struct Options {
    usage: &'static str,
    pairs: Vec<(String, String)>,
}

impl Options {
    /// The options of this process's command line.  Prints `usage` and
    /// exits on `--help`, or on an argument that is not `--option value`.
    pub fn from_args(usage: &'static str) -> Self {
        let mut args = std::env::args().skip(1);
        let mut pairs = Vec::new();
        while let Some(arg) = args.next() {
            if arg == "--help" || arg == "-h" {
                println!("{usage}");
                process::exit(0);
            }
            match (arg.strip_prefix("--"), args.next()) {
                (Some(name), Some(value)) => pairs.push((name.to_owned(), value)),
                _ => exit_with(usage, format!("expected --option value, got {arg}")),
            }
        }
        Options { usage, pairs }
    }

    /// The value of `--name` (the last one given), or `default`.  Exits
    /// with an error if it does not parse.
    pub fn get<T: FromStr>(&mut self, name: &str, default: T) -> T
    where
        T::Err: Display,
    {
        let mut value = None;
        self.pairs.retain(|(option, text)| {
            let found = option == name;
            if found {
                value = Some(text.clone());
            }
            !found
        });
        match value.map(|text| text.parse::<T>().map_err(|err| (text, err))) {
            None => default,
            Some(Ok(value)) => value,
            Some(Err((text, err))) => exit_with(self.usage, format!("--{name} {text}: {err}")),
        }
    }

    /// A builder for a device of `size` bytes with the options every
    /// example takes: `--name` (default `default_name`) and `--queues`
    /// (default 2).  Call it last: it exits with an error if an option
    /// was not taken.
    pub fn builder(mut self, size: u64, default_name: &str) -> DeviceBuilder {
        let name: String = self.get("name", default_name.to_owned());
        let queues: u32 = self.get("queues", 2);
        if let Some((option, _)) = self.pairs.first() {
            exit_with(self.usage, format!("unknown option --{option}"));
        }
        DeviceBuilder::new(size).name(name).queues(queues)
    }
}

/// Prints `message` and the usage on stderr, and exits with status 2.
pub fn exit_with(usage: &str, message: impl Display) -> ! {
    eprintln!("error: {message}\n\n{usage}");
    process::exit(2)
}

/// Serves a device just created until SIGINT or SIGTERM: prints its path
/// (`/dev/NAME`, one line on stdout) once the disk is live, then lets the
/// framework remove it gracefully on the signal.  Errors go to stderr and
/// make the exit status 1.
pub fn serve(created: Result<Device, bius::Error>) -> ExitCode {
    let served = created.and_then(|device| {
        println!("{}", device.path().display());
        device.run_until_signal()
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
