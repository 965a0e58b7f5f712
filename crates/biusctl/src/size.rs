//! Sizes as users write them, and as biusctl prints them.
//!
//! `512`, `64k`, `4G` and `4GiB` are powers of 1024 (a bare K, M, G, T or
//! P, like dd and util-linux); `4GB` is decimal (10^9).  Fractions are fine
//! as long as the result is a whole number of bytes: `1.5G`, not `1.3K`.

/// Why a size was refused.
const SIZE_SYNTAX: &str = "not a size (bytes, or a number with a unit: K, M, G, T, P, \
     KiB, MiB, ... are 1024-based, KB, MB, ... 1000-based)";

/// Parses a size in bytes (see the module documentation).
pub fn parse(text: &str) -> Result<u64, String> {
    let original = text.trim();
    // A bare unit letter means 1024-based; parse_size reads it as 1000.
    let binary;
    let text = match original.chars().last() {
        Some(last) if "KMGTPE".contains(last.to_ascii_uppercase()) => {
            binary = format!("{original}i");
            &binary
        }
        _ => original,
    };
    let bytes = parse_size::parse_size(text).map_err(|_| SIZE_SYNTAX.to_string())?;
    // parse_size rounds fractions: 1.3K would be 1331.  The size is whole
    // if scaling the number by its fraction digits scales the result alike
    // ("1.5G" * 10 == "15G").
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    if let Some((_, fraction)) = number.split_once('.') {
        let scale = 10u64.checked_pow(fraction.len() as u32);
        let scaled = parse_size::parse_size(format!("{}{unit}", number.replace('.', "")));
        match (scale.and_then(|scale| bytes.checked_mul(scale)), scaled) {
            (Some(exact), Ok(scaled)) if exact == scaled => {}
            _ => return Err("not a whole number of bytes".into()),
        }
    }
    Ok(bytes)
}

const SUFFIXES: [(char, u32); 5] = [('K', 10), ('M', 20), ('G', 30), ('T', 40), ('P', 50)];

/// Formats a size with the largest 1024-based unit that divides it exactly
/// (what [`parse`] reads back).
pub fn format(bytes: u64) -> String {
    SUFFIXES
        .iter()
        .rev()
        .find(|&&(_, shift)| bytes != 0 && bytes.is_multiple_of(1 << shift))
        .map_or_else(
            || bytes.to_string(),
            |&(suffix, shift)| format!("{}{suffix}", bytes >> shift),
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
            ("64k", 64 << 10),
            ("64K", 64 << 10),
            ("64M", 64 << 20),
            ("64MiB", 64 << 20),
            ("64mib", 64 << 20),
            ("4G", 4 << 30),
            ("4GiB", 4 << 30),
            ("4GB", 4_000_000_000),
            ("100MB", 100_000_000),
            ("1.5G", 3 << 29),
            ("0.5K", 512),
            ("2T", 2 << 40),
            ("1P", 1 << 50),
            (" 8M ", 8 << 20),
        ] {
            assert_eq!(parse(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_whole_size() {
        for bad in ["", "G", "-1", "12X", "1.3K", "0.1", "99999999T", "4 GiBs"] {
            let err = parse(bad).unwrap_err();
            assert!(err.starts_with("not a"), "{bad}: {err}");
        }
        assert_eq!(parse("1.3K"), Err("not a whole number of bytes".into()));
        assert!(parse("12X")
            .unwrap_err()
            .starts_with("not a size (bytes, or"));
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
        for bytes in [4096, 64 << 20, 3 << 29, 12345] {
            assert_eq!(parse(&format(bytes)), Ok(bytes));
        }
    }
}
