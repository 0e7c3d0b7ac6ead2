//! Human-readable byte sizes (`4096`, `4k`, `4KiB`, `1m`, `2GiB`), as configuration files and the CLI take them.
//! Every unit is binary: `k` and `KiB` both mean 1024, as in fio, blkzone and QEMU's size parser.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A size in bytes that parses from and prints to a human-readable string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

/// Why a size string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {input:?}: {reason} (examples: 4096, 4k, 4KiB, 1MiB, 2GiB)")]
pub struct ParseSizeError {
    input: String,
    reason: &'static str,
}

impl FromStr for ByteSize {
    type Err = ParseSizeError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let refuse = |reason| ParseSizeError { input: input.to_string(), reason };
        let text = input.trim();
        let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        if digits_end == 0 {
            return Err(refuse("it does not start with a number"));
        }
        let number: u64 = text[..digits_end].parse().map_err(|_| refuse("the number is too large"))?;
        let shift = match text[digits_end..].trim().to_ascii_lowercase().as_str() {
            "" | "b" => 0,
            "k" | "kb" | "kib" => 10,
            "m" | "mb" | "mib" => 20,
            "g" | "gb" | "gib" => 30,
            "t" | "tb" | "tib" => 40,
            _ => return Err(refuse("unknown unit")),
        };
        number.checked_mul(1u64 << shift).map(ByteSize).ok_or_else(|| refuse("the size overflows 64 bits"))
    }
}

impl fmt::Display for ByteSize {
    /// The largest binary unit that divides the size exactly, so that printing and parsing round-trip.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u32, &str); 4] = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
        for (shift, unit) in UNITS {
            if self.0 != 0 && self.0.is_multiple_of(1u64 << shift) {
                return write!(f, "{}{}", self.0 >> shift, unit);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    /// Accepts a string (`"2GiB"`) or a plain integer number of bytes.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl serde::de::Visitor<'_> for SizeVisitor {
            type Value = ByteSize;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size such as \"16MiB\" or a whole number of bytes")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<ByteSize, E> {
                text.parse().map_err(E::custom)
            }

            fn visit_u64<E: serde::de::Error>(self, bytes: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(bytes))
            }

            fn visit_i64<E: serde::de::Error>(self, bytes: i64) -> Result<ByteSize, E> {
                u64::try_from(bytes)
                    .map(ByteSize)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(bytes), &self))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_the_cli_documents() {
        for (text, bytes) in [
            ("4096", 4096),
            ("4k", 4096),
            ("4KiB", 4096),
            ("1m", 1 << 20),
            ("1MiB", 1 << 20),
            ("2GiB", 2 << 30),
            ("0", 0),
        ] {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
    }

    #[test]
    fn refuses_garbage_with_the_input_named() {
        for text in ["", "k", "4x", "-4k", "99999999999999999999", "17179869184GiB"] {
            let error = text.parse::<ByteSize>().expect_err(text);
            assert!(error.to_string().contains(&format!("{text:?}")), "{error}");
        }
    }

    #[test]
    fn display_round_trips() {
        for bytes in [0, 1, 512, 4096, 3 << 20, 1077 << 20, 2 << 30, 5000] {
            let text = ByteSize(bytes).to_string();
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
    }
}
