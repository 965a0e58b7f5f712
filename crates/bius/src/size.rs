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

/// The units and their powers of 1024, as [`format`] writes them.
const PREFIXES: [(char, u32); 6] = [('K', 1), ('M', 2), ('G', 3), ('T', 4), ('P', 5), ('E', 6)];

/// What the units are, for the errors.
const UNITS: &str = "K, M, G, T, P, KiB, MiB, ... are 1024-based, KB, MB, ... 1000-based";

/// Why a text is not a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// No number, or not one of the units (`""`, `-1`, `G`, `12X`).
    #[error("not a size (bytes, or a number with a unit: {UNITS})")]
    NotASize,
    /// The size is not a whole number of bytes (`1.3K`, `0.5`).
    #[error("not a whole number of bytes")]
    NotWhole,
    /// The size is more than `u64::MAX` bytes.
    #[error("too large (at most {} bytes)", u64::MAX)]
    TooLarge,
}

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
/// assert_eq!(parse("12X"), Err(SizeError::NotASize));
/// assert_eq!(parse("16E"), Err(SizeError::TooLarge));
/// ```
pub fn parse(text: &str) -> Result<u64, SizeError> {
    let written = text.trim();
    // parse_size reads a bare unit letter as 1000-based: 1024-based is `Ki`
    let binary;
    let text = match written.chars().last() {
        Some(last) if "KMGTPE".contains(last.to_ascii_uppercase()) => {
            binary = format!("{written}i");
            &binary
        }
        _ => written,
    };
    let bytes = parse_size::parse_size(text).map_err(SizeError::from)?;
    // parse_size rounds a fraction (1.3K is 1331): the size is whole if
    // the number without its point gives the size times 10^digits
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    if let Some((_, fraction)) = number.split_once('.') {
        let scaled = parse_size::parse_size(format!("{}{unit}", number.replace('.', "")));
        let exact = 10u64
            .checked_pow(fraction.len() as u32)
            .and_then(|scale| bytes.checked_mul(scale));
        match (exact, scaled) {
            (Some(exact), Ok(scaled)) if exact == scaled => {}
            _ => return Err(SizeError::NotWhole),
        }
    }
    Ok(bytes)
}

impl From<parse_size::Error> for SizeError {
    fn from(err: parse_size::Error) -> Self {
        match err {
            parse_size::Error::PosOverflow => SizeError::TooLarge,
            _ => SizeError::NotASize,
        }
    }
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
            ("", SizeError::NotASize),
            (".", SizeError::NotASize),
            ("G", SizeError::NotASize),
            ("-1", SizeError::NotASize),
            ("1.2.3", SizeError::NotASize),
            ("12X", SizeError::NotASize),
            ("4 GiBs", SizeError::NotASize),
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
    }

    #[test]
    fn errors_say_what_a_size_is() {
        assert!(SizeError::NotASize
            .to_string()
            .starts_with("not a size (bytes, or a number with a unit: K, M,"));
        assert_eq!(
            SizeError::NotWhole.to_string(),
            "not a whole number of bytes"
        );
        assert_eq!(
            SizeError::TooLarge.to_string(),
            "too large (at most 18446744073709551615 bytes)"
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
