//! Byte sizes in `perf bench` style.
//!
//! * [`parse_size`] turns user input such as `"4096"`, `"4KB"`, `"2M"` or
//!   `"1 GB"` into a byte count. Units are case-insensitive and use *binary*
//!   multiples exactly like `perf bench mem` (`1KB = 1024` bytes). Accepted
//!   units: `B`, `KB`/`K`, `MB`/`M`, `GB`/`G`, `TB`/`T` (the IEC spellings
//!   `KiB`, `MiB`, `GiB`, `TiB` are accepted as synonyms). Fractions,
//!   negative numbers, unknown units and values that do not fit in a `u64`
//!   are rejected with a [`SizeError`] whose message names the bad input and
//!   shows a valid example.
//! * [`format_size`] is the exact inverse for display: it picks the largest
//!   unit that represents the value without a fraction (`4096` -> `"4KB"`,
//!   `2097153` -> `"2097153B"`), so `parse_size(&format_size(x)) == Ok(x)`.
//! * [`clap_size`] adapts [`parse_size`] for use as a `clap` `value_parser`.

use thiserror::Error;

/// Units accepted on input, their multipliers and the name used on output.
/// Ordered from largest to smallest; `format_size` relies on this order.
const UNITS: [(&str, u64); 4] = [
    ("TB", 1 << 40),
    ("GB", 1 << 30),
    ("MB", 1 << 20),
    ("KB", 1 << 10),
];

/// List of accepted units, shared by the error messages.
const UNIT_HELP: &str = "B, KB/K, MB/M, GB/G, TB/T (binary multiples: 1KB = 1024 bytes)";

/// Why a size string could not be parsed. Every message names the offending
/// input and shows an example of a valid size.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum SizeError {
    /// The input was empty or only whitespace.
    #[error(
        "empty size: give a whole number of bytes with an optional unit, e.g. \"4096\" or \"4KB\""
    )]
    Empty,

    /// The input started with a minus sign.
    #[error(
        "invalid size \"{input}\": sizes cannot be negative; use a non-negative whole number such as \"0\" or \"4KB\""
    )]
    Negative {
        /// The input as given (trimmed).
        input: String,
    },

    /// The number had a fractional part, e.g. `1.5GB`.
    #[error(
        "invalid size \"{input}\": fractional sizes are not supported; use a whole number, {}",
        match suggestion {
            Some(s) => format!("e.g. \"{s}\" for the same amount"),
            None => "possibly in a smaller unit, e.g. \"1536MB\" instead of \"1.5GB\"".to_string(),
        }
    )]
    Fractional {
        /// The input as given (trimmed).
        input: String,
        /// The same amount written as a whole number, when it is a whole
        /// number of bytes (e.g. `"1536MB"` for `"1.5GB"`).
        suggestion: Option<String>,
    },

    /// The input did not start with a decimal number.
    #[error(
        "invalid size \"{input}\": expected a whole number of bytes with an optional unit ({UNIT_HELP}), e.g. \"4096\", \"4KB\" or \"2M\""
    )]
    InvalidNumber {
        /// The input as given (trimmed).
        input: String,
    },

    /// The number was followed by something that is not a known unit.
    #[error(
        "invalid size \"{input}\": unknown unit \"{unit}\"; valid units are {UNIT_HELP}, e.g. \"2MB\""
    )]
    UnknownUnit {
        /// The input as given (trimmed).
        input: String,
        /// The unrecognised unit text.
        unit: String,
    },

    /// The value is larger than `u64::MAX` bytes.
    #[error("invalid size \"{input}\": value does not fit in 64 bits (at most {max} bytes); use a smaller size, e.g. \"1TB\"", max = u64::MAX)]
    Overflow {
        /// The input as given (trimmed).
        input: String,
    },
}

/// Map a (case-insensitive) unit suffix to its multiplier.
fn unit_multiplier(unit: &str) -> Option<u64> {
    let mult = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        _ => return None,
    };
    Some(mult)
}

/// Parse a size such as `"4096"`, `"4096B"`, `"4KB"`, `"4k"`, `"2 MB"` or
/// `"1G"` into bytes.
///
/// Units are case-insensitive binary multiples (`1KB = 1024`), optional
/// whitespace may separate number and unit, and surrounding whitespace is
/// ignored. A bare number is a byte count.
///
/// # Errors
///
/// Returns a [`SizeError`] for empty input, negative numbers, fractions
/// (`"1.5GB"` — the message suggests the whole-number equivalent), unknown
/// units and values above `u64::MAX`.
pub(crate) fn parse_size(s: &str) -> Result<u64, SizeError> {
    let input = s.trim();
    if input.is_empty() {
        return Err(SizeError::Empty);
    }
    if input.starts_with('-') {
        return Err(SizeError::Negative {
            input: input.to_string(),
        });
    }

    let digits_end = input
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(input.len());
    let (digits, rest) = input.split_at(digits_end);

    // A fraction: "1.5GB", ".5G" or "1,5G".
    if let Some(after_sep) = rest.strip_prefix(['.', ',']) {
        let frac_end = after_sep
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after_sep.len());
        let (frac, unit) = after_sep.split_at(frac_end);
        if !digits.is_empty() || !frac.is_empty() {
            let suggestion = unit_multiplier(unit.trim())
                .and_then(|mult| exact_fraction(digits, frac, mult))
                .map(format_size);
            return Err(SizeError::Fractional {
                input: input.to_string(),
                suggestion,
            });
        }
    }

    if digits.is_empty() {
        return Err(SizeError::InvalidNumber {
            input: input.to_string(),
        });
    }

    let unit = rest.trim_start();
    let mult = unit_multiplier(unit).ok_or_else(|| SizeError::UnknownUnit {
        input: input.to_string(),
        unit: unit.to_string(),
    })?;

    // `digits` is non-empty and all ASCII digits, so the only possible parse
    // failure is overflow.
    let overflow = || SizeError::Overflow {
        input: input.to_string(),
    };
    let number: u64 = digits.parse().map_err(|_| overflow())?;
    number.checked_mul(mult).ok_or_else(overflow)
}

/// `int.frac * mult` as a byte count, if it is a whole number of bytes that
/// fits in a `u64`. Used only to build a helpful suggestion.
fn exact_fraction(int: &str, frac: &str, mult: u64) -> Option<u64> {
    // Keep the arithmetic comfortably inside u128.
    if int.len() > 20 || frac.len() > 18 {
        return None;
    }
    let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac_val: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let scale = 10u128.pow(u32::try_from(frac.len()).ok()?);
    let scaled = int.checked_mul(scale)?.checked_add(frac_val)?;
    let total = scaled.checked_mul(u128::from(mult))?;
    if total % scale != 0 {
        return None;
    }
    u64::try_from(total / scale).ok()
}

/// Format a byte count exactly, using the largest unit that divides it:
/// `4096` -> `"4KB"`, `2097152` -> `"2MB"`, `1073741824` -> `"1GB"`,
/// `2097153` -> `"2097153B"`, `0` -> `"0B"`.
///
/// The result always parses back to the same value with [`parse_size`].
pub fn format_size(bytes: u64) -> String {
    if bytes != 0 {
        for (name, mult) in UNITS {
            if bytes.is_multiple_of(mult) {
                return format!("{}{name}", bytes / mult);
            }
        }
    }
    format!("{bytes}B")
}

/// A signed percentage at a precision that stays readable: two decimals
/// below 1000%, none below 10^6 %, then scientific (a change that large
/// is a broken measurement, not a figure to read to the hundredth).
pub fn format_pct(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        format!("{x}%")
    } else if a < 1e3 {
        format!("{x:+.2}%")
    } else if a < 1e6 {
        format!("{x:+.0}%")
    } else {
        format!("{x:+.1e}%")
    }
}

/// [`parse_size`] with a `String` error, for `clap`'s `value_parser`:
///
/// ```ignore
/// #[arg(long, value_parser = units::clap_size, default_value = "1MB")]
/// size: u64,
/// ```
///
/// # Errors
///
/// Returns the [`SizeError`] message when the size cannot be parsed.
pub fn clap_size(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

/// perf bench's "GB/sec": 2^30 bytes per second (tools/perf/bench/
/// mem-functions.c), what bench's tables print so that they read side by
/// side with perf's (hypclear's decimal GB/s was 7.4% larger).
pub const PERF_GB: f64 = (1u64 << 30) as f64;

/// The unit throughput is printed in (`compare --unit`). `B/s` prints raw
/// bytes per second, like `perf bench mem`'s "bytes/sec" and the review
/// tables on the lists; `GB/sec` is perf's 2^30 bytes/s; KB/s, MB/s, GB/s
/// are decimal (1 GB/s = 10^9 bytes/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Rate {
    /// bytes per second, as perf bench prints it
    #[default]
    #[cfg_attr(feature = "cli", value(name = "B/s", alias = "bytes/sec"))]
    Bytes,
    /// 10^3 bytes per second
    #[cfg_attr(feature = "cli", value(name = "KB/s"))]
    Kilo,
    /// 10^6 bytes per second
    #[cfg_attr(feature = "cli", value(name = "MB/s"))]
    Mega,
    /// 10^9 bytes per second
    #[cfg_attr(feature = "cli", value(name = "GB/s"))]
    Giga,
    /// 2^30 bytes per second, perf bench's "GB/sec"
    #[cfg_attr(feature = "cli", value(name = "GB/sec"))]
    PerfGiga,
}

impl Rate {
    /// The unit as a table header names it.
    pub fn label(self) -> &'static str {
        match self {
            Rate::Bytes => "bytes/sec",
            Rate::Kilo => "KB/s",
            Rate::Mega => "MB/s",
            Rate::Giga => "GB/s",
            Rate::PerfGiga => "GB/sec",
        }
    }

    fn divisor(self) -> f64 {
        match self {
            Rate::Bytes => 1.0,
            Rate::Kilo => 1e3,
            Rate::Mega => 1e6,
            Rate::Giga => 1e9,
            Rate::PerfGiga => PERF_GB,
        }
    }

    /// `bytes_per_sec` in this unit with two decimals, no grouping
    /// (`65367617364.09` bytes/sec, `65.37` GB/s).
    pub fn format(self, bytes_per_sec: f64) -> String {
        format!("{:.2}", bytes_per_sec / self.divisor())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn percentages_keep_a_sane_precision() {
        use super::format_pct;
        assert_eq!(format_pct(0.1), "+0.10%");
        assert_eq!(format_pct(-20.0), "-20.00%");
        assert_eq!(format_pct(1234.56), "+1235%");
        // Issue 25 case 5 printed "+3667336667216705224704.00%".
        assert_eq!(format_pct(3.667336667216705e21), "+3.7e21%");
    }

    use super::*;

    #[test]
    fn rates_are_decimal_and_bytes_per_sec_is_raw() {
        let v = 65_367_617_364.09;
        assert_eq!(Rate::Bytes.format(v), "65367617364.09");
        assert_eq!(Rate::Kilo.format(v), "65367617.36");
        assert_eq!(Rate::Mega.format(v), "65367.62");
        assert_eq!(Rate::Giga.format(v), "65.37");
        assert_eq!(Rate::default(), Rate::Bytes);
        assert_eq!(Rate::Bytes.label(), "bytes/sec");
        assert_eq!(Rate::Giga.label(), "GB/s");
    }

    #[cfg(feature = "cli")]
    #[test]
    fn rates_parse_by_their_units() {
        use clap::ValueEnum;
        for (s, r) in [
            ("B/s", Rate::Bytes),
            ("bytes/sec", Rate::Bytes),
            ("KB/s", Rate::Kilo),
            ("MB/s", Rate::Mega),
            ("GB/s", Rate::Giga),
        ] {
            assert_eq!(Rate::from_str(s, false), Ok(r), "{s}");
        }
        assert!(Rate::from_str("GiB/s", false).is_err());
    }

    const KB: u64 = 1024;
    const MB: u64 = 1024 * KB;
    const GB: u64 = 1024 * MB;
    const TB: u64 = 1024 * GB;

    #[test]
    fn parses_plain_numbers_and_bytes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4096B"), Ok(4096));
        assert_eq!(parse_size("4096b"), Ok(4096));
        assert_eq!(parse_size("0B"), Ok(0));
        assert_eq!(parse_size("007"), Ok(7));
    }

    #[test]
    fn parses_all_units_case_insensitively() {
        let cases = [
            ("4KB", 4 * KB),
            ("4K", 4 * KB),
            ("4kb", 4 * KB),
            ("4k", 4 * KB),
            ("4Kb", 4 * KB),
            ("4KiB", 4 * KB),
            ("2MB", 2 * MB),
            ("2M", 2 * MB),
            ("2mb", 2 * MB),
            ("2m", 2 * MB),
            ("2MiB", 2 * MB),
            ("1GB", GB),
            ("1G", GB),
            ("1gb", GB),
            ("1g", GB),
            ("1gib", GB),
            ("3TB", 3 * TB),
            ("3T", 3 * TB),
            ("3tb", 3 * TB),
            ("3TiB", 3 * TB),
            ("0GB", 0),
        ];
        for (input, want) in cases {
            assert_eq!(parse_size(input), Ok(want), "input {input:?}");
        }
    }

    #[test]
    fn allows_whitespace_between_number_unit_and_around() {
        assert_eq!(parse_size("4 KB"), Ok(4 * KB));
        assert_eq!(parse_size("4\tK"), Ok(4 * KB));
        assert_eq!(parse_size("  2   MB  "), Ok(2 * MB));
        assert_eq!(parse_size(" 4096 "), Ok(4096));
        assert_eq!(parse_size("1 B"), Ok(1));
    }

    #[test]
    fn rejects_empty() {
        assert_eq!(parse_size(""), Err(SizeError::Empty));
        assert_eq!(parse_size("   "), Err(SizeError::Empty));
        let msg = SizeError::Empty.to_string();
        assert!(msg.contains("empty"), "{msg}");
        assert!(msg.contains("\"4KB\""), "{msg}");
    }

    #[test]
    fn rejects_negative() {
        let err = parse_size("-4K").unwrap_err();
        assert_eq!(
            err,
            SizeError::Negative {
                input: "-4K".into()
            }
        );
        let msg = err.to_string();
        assert!(msg.contains("\"-4K\""), "{msg}");
        assert!(msg.contains("negative"), "{msg}");
        assert!(msg.contains("\"4KB\""), "{msg}");
        assert!(matches!(parse_size(" -0"), Err(SizeError::Negative { .. })));
    }

    #[test]
    fn rejects_fractions_with_a_whole_number_suggestion() {
        let err = parse_size("1.5GB").unwrap_err();
        assert_eq!(
            err,
            SizeError::Fractional {
                input: "1.5GB".into(),
                suggestion: Some("1536MB".into()),
            }
        );
        let msg = err.to_string();
        assert!(msg.contains("\"1.5GB\""), "{msg}");
        assert!(msg.contains("fractional"), "{msg}");
        assert!(msg.contains("\"1536MB\""), "{msg}");

        assert!(matches!(
            parse_size("0.5 K"),
            Err(SizeError::Fractional { suggestion: Some(ref s), .. }) if s == "512B"
        ));
        assert!(matches!(
            parse_size(".5M"),
            Err(SizeError::Fractional { suggestion: Some(ref s), .. }) if s == "512KB"
        ));
        assert!(matches!(
            parse_size("1,5G"),
            Err(SizeError::Fractional { suggestion: Some(ref s), .. }) if s == "1536MB"
        ));
        assert!(matches!(
            parse_size("2.0M"),
            Err(SizeError::Fractional { suggestion: Some(ref s), .. }) if s == "2MB"
        ));
    }

    #[test]
    fn fraction_without_exact_byte_count_still_has_an_example() {
        // 1.5 bytes is not a whole number of bytes; 0.3K = 307.2 bytes.
        for input in ["1.5", "1.5B", "0.3K", "1.5XB"] {
            let err = parse_size(input).unwrap_err();
            assert!(
                matches!(
                    err,
                    SizeError::Fractional {
                        suggestion: None,
                        ..
                    }
                ),
                "{input}: {err:?}"
            );
            let msg = err.to_string();
            assert!(msg.contains(&format!("\"{input}\"")), "{msg}");
            assert!(msg.contains("\"1536MB\""), "{msg}");
        }
    }

    #[test]
    fn rejects_unknown_units() {
        for (input, unit) in [
            ("4XB", "XB"),
            ("4 PB", "PB"),
            ("4KBB", "KBB"),
            ("10 bytes", "bytes"),
            ("4K B", "K B"),
            ("12abc", "abc"),
        ] {
            let err = parse_size(input).unwrap_err();
            assert_eq!(
                err,
                SizeError::UnknownUnit {
                    input: input.into(),
                    unit: unit.into()
                },
                "input {input:?}"
            );
            let msg = err.to_string();
            assert!(msg.contains(&format!("\"{input}\"")), "{msg}");
            assert!(msg.contains(&format!("unknown unit \"{unit}\"")), "{msg}");
            assert!(msg.contains("\"2MB\""), "{msg}");
        }
    }

    #[test]
    fn rejects_missing_number() {
        for input in ["KB", "abc", "+4K", "K4", "."] {
            let err = parse_size(input).unwrap_err();
            assert_eq!(
                err,
                SizeError::InvalidNumber {
                    input: input.into()
                },
                "input {input:?}"
            );
            let msg = err.to_string();
            assert!(msg.contains(&format!("\"{input}\"")), "{msg}");
            assert!(msg.contains("\"4KB\""), "{msg}");
        }
    }

    #[test]
    fn rejects_overflow() {
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_size("16777215TB"), Ok(16_777_215 * TB));
        for input in [
            "18446744073709551616",
            "16777216TB",
            "17179869184G",
            "99999999999999999999999999K",
        ] {
            let err = parse_size(input).unwrap_err();
            assert_eq!(
                err,
                SizeError::Overflow {
                    input: input.into()
                },
                "input {input:?}"
            );
            let msg = err.to_string();
            assert!(msg.contains(&format!("\"{input}\"")), "{msg}");
            assert!(msg.contains("64 bits"), "{msg}");
            assert!(msg.contains("\"1TB\""), "{msg}");
        }
    }

    #[test]
    fn non_ascii_input_does_not_panic() {
        assert!(matches!(
            parse_size("4\u{00e9}"),
            Err(SizeError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_size("\u{0664}"),
            Err(SizeError::InvalidNumber { .. })
        ));
        assert!(matches!(
            parse_size("1.\u{00e9}"),
            Err(SizeError::Fractional { .. })
        ));
    }

    #[test]
    fn formats_exact_sizes() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1), "1B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1024), "1KB");
        assert_eq!(format_size(4096), "4KB");
        assert_eq!(format_size(1536), "1536B");
        assert_eq!(format_size(1536 * KB), "1536KB");
        assert_eq!(format_size(2_097_152), "2MB");
        assert_eq!(format_size(2_097_153), "2097153B");
        assert_eq!(format_size(1_073_741_824), "1GB");
        assert_eq!(format_size(1536 * MB), "1536MB");
        assert_eq!(format_size(TB), "1TB");
        assert_eq!(format_size(2048 * TB), "2048TB");
        assert_eq!(format_size(u64::MAX), "18446744073709551615B");
    }

    #[test]
    fn format_then_parse_round_trips() {
        let values = [
            0,
            1,
            512,
            1023,
            1024,
            1025,
            4096,
            1536 * KB,
            2 * MB,
            2 * MB + 1,
            GB,
            3 * GB + 4 * KB,
            7 * TB,
            16_777_215 * TB,
            u64::MAX,
            u64::MAX - 1023,
        ];
        for v in values {
            assert_eq!(parse_size(&format_size(v)), Ok(v), "value {v}");
        }
    }

    #[test]
    fn clap_wrapper_passes_values_and_messages() {
        assert_eq!(clap_size("4K"), Ok(4096));
        let msg = clap_size("4XB").unwrap_err();
        assert_eq!(msg, parse_size("4XB").unwrap_err().to_string());
        assert!(msg.contains("\"4XB\""));
    }
}
