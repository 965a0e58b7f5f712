//! Sizes with K/M/G/T suffixes (powers of 1024).

const SUFFIXES: [(char, u32); 4] = [('K', 10), ('M', 20), ('G', 30), ('T', 40)];

/// Parses `4096`, `64K`, `64M`, `1G`, `2T` (suffixes case-insensitive).
pub fn parse(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, shift) = match text.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some(last) => match SUFFIXES.iter().find(|(suffix, _)| *suffix == last) {
            Some(&(_, shift)) => (&text[..text.len() - 1], shift),
            None => (text, 0),
        },
        None => (text, 0),
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size (bytes, or a number with K, M, G or T)"))?;
    value
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// Formats a size with the largest suffix that divides it exactly.
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
    fn parses_bytes_and_suffixes() {
        assert_eq!(parse("4096"), Ok(4096));
        assert_eq!(parse("64K"), Ok(64 << 10));
        assert_eq!(parse("64m"), Ok(64 << 20));
        assert_eq!(parse("1G"), Ok(1 << 30));
        assert_eq!(parse("2T"), Ok(2 << 40));
        for bad in ["", "G", "1.5G", "-1", "12X", "1GB", "99999999T"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
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
    }
}
