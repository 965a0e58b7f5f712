//! Sizes in bytes as people write them, and as the project prints them:
//! the one size convention of BIUS (`biusctl`'s options and config files,
//! model files, the examples' command lines).
//!
//! A size is a number of bytes, optionally with a fraction, followed by an
//! optional unit (case does not matter, a space before it is allowed):
//!
//! | unit                          | means                                  |
//! |-------------------------------|----------------------------------------|
//! | none, `B`                     | bytes                                  |
//! | `K`, `M`, `G`, `T`, `P`, `E`  | 1024-based, as `dd` and util-linux read them |
//! | `KiB`, `MiB`, ... (or `Ki`, ...) | 1024-based                          |
//! | `KB`, `MB`, ...               | 1000-based                             |
//!
//! The result must be a whole number of bytes: `1.5G` is, `1.3K` is not.
//!
//! ```
//! use bius::size::{self, SizeError};
//!
//! assert_eq!(size::parse("64M"), Ok(64 << 20));
//! assert_eq!(size::parse("64MiB"), Ok(64 << 20));
//! assert_eq!(size::parse("100MB"), Ok(100_000_000));
//! assert_eq!(size::parse("1.5G"), Ok(3 << 29));
//! assert_eq!(size::parse("1.3K"), Err(SizeError::NotWhole));
//! assert_eq!(size::format(64 << 20), "64M");
//! ```

use std::fmt;

/// The units, their powers of 1024 (or of 1000 with a `B` after them).
const PREFIXES: [(char, u32); 6] = [('K', 1), ('M', 2), ('G', 3), ('T', 4), ('P', 5), ('E', 6)];

/// Fraction digits [`parse`] reads at most (after trailing zeros): the
/// fraction must fit a `u128`.
const MAX_FRACTION_DIGITS: usize = 38;

/// What the units are, for the errors.
const UNITS: &str = "K, M, G, T, P, KiB, MiB, ... are 1024-based, KB, MB, ... 1000-based";

/// Why a text is not a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeError {
    /// No number where the size starts (an empty text, `-1`, `G`), or a
    /// fraction of more than 38 digits.
    NotANumber,
    /// The text after the number is no unit: it is carried (`X` of `12X`).
    UnknownUnit(String),
    /// The size is not a whole number of bytes (`1.3K`, `0.5`).
    NotWhole,
    /// The size is more than `u64::MAX` bytes.
    TooLarge,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeError::NotANumber => {
                write!(f, "not a size (bytes, or a number with a unit: {UNITS})")
            }
            SizeError::UnknownUnit(unit) => write!(f, "not a size (no unit `{unit}`: {UNITS})"),
            SizeError::NotWhole => f.write_str("not a whole number of bytes"),
            SizeError::TooLarge => write!(f, "too large (at most {} bytes)", u64::MAX),
        }
    }
}

impl std::error::Error for SizeError {}

/// Parses a size in bytes (see the [module](self) documentation).
///
/// ```
/// use bius::size::{parse, SizeError};
///
/// assert_eq!(parse("4096"), Ok(4096));
/// assert_eq!(parse("64k"), Ok(64 << 10));
/// assert_eq!(parse("4 GiB"), Ok(4 << 30));
/// assert_eq!(parse("4GB"), Ok(4_000_000_000));
/// assert_eq!(parse("0.5K"), Ok(512));
/// assert_eq!(parse("12X"), Err(SizeError::UnknownUnit("X".into())));
/// assert_eq!(parse("16E"), Err(SizeError::TooLarge));
/// ```
pub fn parse(text: &str) -> Result<u64, SizeError> {
    let text = text.trim();
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |part: &str| part.chars().filter(|&c| c != '_').collect::<String>();
    let (whole, fraction) = (digits(whole), digits(fraction));
    let fraction = fraction.trim_end_matches('0');
    if !number.contains(|c: char| c.is_ascii_digit())
        || fraction.contains('.')
        || fraction.len() > MAX_FRACTION_DIGITS
    {
        return Err(SizeError::NotANumber);
    }
    let scale = unit_scale(unit.trim_start())?;
    // whole + fraction / 10^digits, in units of `scale` bytes: the
    // fraction's bytes are fraction * scale / 10^digits, whole if the
    // divisor's part that `scale` does not cancel divides the fraction.
    let parse_digits = |part: &str| match part {
        "" => Ok(0),
        part => part.parse::<u128>().map_err(|_| SizeError::TooLarge),
    };
    let (whole, numerator) = (parse_digits(&whole)?, parse_digits(fraction)?);
    let divisor = 10u128.pow(fraction.len() as u32);
    let common = gcd(u128::from(scale), divisor);
    let (scale_left, divisor_left) = (u128::from(scale) / common, divisor / common);
    if !numerator.is_multiple_of(divisor_left) {
        return Err(SizeError::NotWhole);
    }
    whole
        .checked_mul(scale.into())
        .and_then(|bytes| bytes.checked_add(numerator / divisor_left * scale_left))
        .and_then(|bytes| u64::try_from(bytes).ok())
        .ok_or(SizeError::TooLarge)
}

/// The bytes of one `unit`.
fn unit_scale(unit: &str) -> Result<u64, SizeError> {
    let unknown = || SizeError::UnknownUnit(unit.to_string());
    let upper = unit.to_ascii_uppercase();
    if upper.is_empty() || upper == "B" {
        return Ok(1);
    }
    let &(letter, power) = PREFIXES
        .iter()
        .find(|(letter, _)| upper.starts_with(*letter))
        .ok_or_else(unknown)?;
    match &upper[letter.len_utf8()..] {
        "" | "I" | "IB" => Ok(1 << (10 * power)),
        "B" => Ok(1000u64.pow(power)),
        _ => Err(unknown()),
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Formats a size with the largest 1024-based unit that divides it exactly,
/// as a bare letter (`64M`): what [`parse`] reads back.
///
/// ```
/// assert_eq!(bius::size::format(4096), "4K");
/// assert_eq!(bius::size::format(1536), "1536");
/// assert_eq!(bius::size::format(3 << 29), "1536M");
/// ```
pub fn format(bytes: u64) -> String {
    PREFIXES
        .iter()
        .rev()
        .map(|&(letter, power)| (letter, 10 * power))
        .find(|&(_, shift)| bytes != 0 && bytes.is_multiple_of(1 << shift))
        .map_or_else(
            || bytes.to_string(),
            |(letter, shift)| format!("{}{letter}", bytes >> shift),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_decimal_and_fractional_sizes() {
        for (text, bytes) in [
            ("4096", 4096),
            ("512", 512),
            ("0", 0),
            ("512B", 512),
            ("64k", 64 << 10),
            ("64K", 64 << 10),
            ("64M", 64 << 20),
            ("64m", 64 << 20),
            ("64MiB", 64 << 20),
            ("64mib", 64 << 20),
            ("64Mi", 64 << 20),
            ("4G", 4 << 30),
            ("4GiB", 4 << 30),
            ("4 GiB", 4 << 30),
            ("4GB", 4_000_000_000),
            ("4gb", 4_000_000_000),
            ("100MB", 100_000_000),
            ("1.5G", 3 << 29),
            ("0.5K", 512),
            (".5K", 512),
            ("33.5MiB", 67 << 19),
            ("1.5KB", 1500),
            ("1.000", 1),
            ("2T", 2 << 40),
            ("1P", 1 << 50),
            ("15E", 15 << 60),
            ("1_000_000", 1_000_000),
            (" 8M ", 8 << 20),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(parse(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_whole_size() {
        for (bad, error) in [
            ("", SizeError::NotANumber),
            (".", SizeError::NotANumber),
            ("G", SizeError::NotANumber),
            ("-1", SizeError::NotANumber),
            ("1.2.3", SizeError::NotANumber),
            ("12X", SizeError::UnknownUnit("X".into())),
            ("4 GiBs", SizeError::UnknownUnit("GiBs".into())),
            ("1e3", SizeError::UnknownUnit("e3".into())),
            ("1.3K", SizeError::NotWhole),
            ("0.1", SizeError::NotWhole),
            ("1.0001KB", SizeError::NotWhole),
            ("99999999T", SizeError::TooLarge),
            ("16E", SizeError::TooLarge),
            ("18446744073709551616", SizeError::TooLarge),
            (
                "999999999999999999999999999999999999999999",
                SizeError::TooLarge,
            ),
        ] {
            assert_eq!(parse(bad), Err(error), "{bad}");
        }
        let long_fraction = format!("0.{}1K", "0".repeat(MAX_FRACTION_DIGITS));
        assert_eq!(parse(&long_fraction), Err(SizeError::NotANumber));
    }

    #[test]
    fn errors_say_what_a_size_is() {
        assert!(SizeError::NotANumber
            .to_string()
            .starts_with("not a size (bytes, or a number with a unit: K, M,"));
        assert!(SizeError::UnknownUnit("X".into())
            .to_string()
            .starts_with("not a size (no unit `X`: K, M,"));
        assert_eq!(
            SizeError::NotWhole.to_string(),
            "not a whole number of bytes"
        );
    }

    #[test]
    fn formats_exact_sizes() {
        assert_eq!(format(0), "0");
        assert_eq!(format(1000), "1000");
        assert_eq!(format(1536), "1536");
        assert_eq!(format(4096), "4K");
        assert_eq!(format(64 << 20), "64M");
        assert_eq!(format(3 << 30), "3G");
        assert_eq!(format(1 << 40), "1T");
        assert_eq!(format(3 << 29), "1536M");
        assert_eq!(format(1 << 60), "1E");
        for bytes in [4096, 64 << 20, 3 << 29, 12345, u64::MAX] {
            assert_eq!(parse(&format(bytes)), Ok(bytes));
        }
    }
}
