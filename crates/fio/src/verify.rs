//! fio's data verification (`verify=`, `verify_pattern`, `buffer_pattern`), laid out as fio 3.33 lays it out
//! (`verify.c`, `verify.h`): each `verify_interval` of a written block starts with fio's 40-byte header
//! (magic 0xacca, verify type, length, random seed, offset, time, thread, I/O number, and a crc32c of those
//! fields), then the checksum of the rest, then the data: the pattern when one is given, else bytes from the
//! block's random seed.
//!
//! One choice is ours: the random seed of a block is a hash of the job's `randseed` and the block's offset,
//! where fio draws it from the job's random sequence. A read-only job with the same `randseed` therefore
//! verifies the blocks a write job left, whatever order either issued them in.

use md5::{Digest, Md5};
use zonelab_runtime::rng::SplitMix64;

use super::options::FioError;

/// fio's `FIO_HDR_MAGIC`.
const MAGIC: u16 = 0xacca;
/// `sizeof(struct verify_header)`.
const HEADER_BYTES: usize = 40;
/// The header's fields before its own crc32c (`offsetof(struct verify_header, crc32)`).
const HEADER_CRC_SPAN: usize = 36;
/// fio's `MAX_PATTERN_SIZE`.
const MAX_PATTERN_BYTES: usize = 512;

/// How a block's data is checked: fio's verify types that zonelab implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyMethod {
    /// `md5`: an MD5 digest of each interval's data.
    Md5,
    /// `crc32`: zlib's CRC-32.
    Crc32,
    /// `crc32c` and `crc32c-intel` (the same sum; fio keeps the name given).
    Crc32c { intel: bool },
    /// `meta`: the header only, no data checksum.
    Meta,
    /// `pattern`: the data must repeat `verify_pattern`; no header.
    Pattern,
    /// `null`: verify reads are issued and nothing is checked.
    Null,
}

impl VerifyMethod {
    /// `verify=`'s value; None for `0`/`none`.
    pub fn parse(value: &str) -> Result<Option<VerifyMethod>, FioError> {
        Ok(Some(match value.trim() {
            "0" | "none" => return Ok(None),
            "md5" => VerifyMethod::Md5,
            "crc32" => VerifyMethod::Crc32,
            "crc32c" | "1" => VerifyMethod::Crc32c { intel: false },
            "crc32c-intel" => VerifyMethod::Crc32c { intel: true },
            "meta" => VerifyMethod::Meta,
            "pattern" => VerifyMethod::Pattern,
            "null" => VerifyMethod::Null,
            other => {
                return Err(FioError::Options(format!(
                    "option verify: {other:?} is not one zonelab implements (md5, crc32, crc32c, crc32c-intel, \
                     meta, pattern, null)"
                )))
            }
        }))
    }

    pub fn name(self) -> &'static str {
        match self {
            VerifyMethod::Md5 => "md5",
            VerifyMethod::Crc32 => "crc32",
            VerifyMethod::Crc32c { intel: false } => "crc32c",
            VerifyMethod::Crc32c { intel: true } => "crc32c-intel",
            VerifyMethod::Meta => "meta",
            VerifyMethod::Pattern => "pattern",
            VerifyMethod::Null => "null",
        }
    }

    /// fio's `enum verify_type` value, recorded in each header.
    fn type_code(self) -> u16 {
        match self {
            VerifyMethod::Meta => 1,
            VerifyMethod::Md5 => 2,
            VerifyMethod::Crc32 => 4,
            VerifyMethod::Crc32c { intel: false } => 5,
            VerifyMethod::Crc32c { intel: true } => 6,
            VerifyMethod::Pattern => 17,
            VerifyMethod::Null => 19,
        }
    }

    /// Bytes of checksum after the header (`__hdr_size`).
    fn sum_bytes(self) -> usize {
        match self {
            VerifyMethod::Md5 => 16,
            VerifyMethod::Crc32 | VerifyMethod::Crc32c { .. } => 4,
            VerifyMethod::Meta | VerifyMethod::Pattern | VerifyMethod::Null => 0,
        }
    }

    fn has_header(self) -> bool {
        !matches!(self, VerifyMethod::Pattern | VerifyMethod::Null)
    }

    fn sum(self, data: &[u8]) -> Vec<u8> {
        match self {
            VerifyMethod::Md5 => Md5::digest(data).to_vec(),
            VerifyMethod::Crc32 => crc32fast::hash(data).to_le_bytes().to_vec(),
            VerifyMethod::Crc32c { .. } => crc32c::crc32c(data).to_le_bytes().to_vec(),
            VerifyMethod::Meta | VerifyMethod::Pattern | VerifyMethod::Null => Vec::new(),
        }
    }
}

/// Parses fio's data patterns (`buffer_pattern`, `verify_pattern`; `lib/pattern.c`): a sequence of quoted
/// strings (`"abc"`), hexadecimal byte strings (`0xdeadbeef`, each pair of digits a byte, in order) and decimal
/// integers from INT_MIN to INT_MAX (little-endian, in as few bytes as hold them; `0` is one zero byte). At
/// most 512 bytes, as in fio.
pub fn parse_pattern(key: &str, text: &str) -> Result<Vec<u8>, FioError> {
    let bad = |why: &str| FioError::Options(format!("option {key}: {text:?} is not a pattern: {why}"));
    let mut bytes = Vec::new();
    let mut rest = text.trim();
    // A job file's value may come quoted as a whole ('...').
    if let Some(inner) = rest.strip_prefix('\'').and_then(|inner| inner.strip_suffix('\'')) {
        rest = inner;
    }
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').ok_or_else(|| bad("a string has no closing quote"))?;
            bytes.extend_from_slice(&quoted.as_bytes()[..end]);
            rest = &quoted[end + 1..];
        } else if rest.len() > 2 && rest[..2].eq_ignore_ascii_case("0x") {
            let digits = &rest[2..];
            let mut end = digits.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(digits.len());
            // `0xff0x14` is two numbers: a `0` followed by `x` starts the next one.
            if let Some(next) = digits[..end]
                .char_indices()
                .find(|&(at, c)| c == '0' && digits[at + 1..].starts_with(['x', 'X']) && at + 2 < digits.len())
            {
                end = end.min(next.0);
            }
            if end == 0 {
                return Err(bad("0x has no hexadecimal digits"));
            }
            let hex = &digits[..end];
            // An odd count: the first digit is a byte of its own, as fio reads it.
            let (head, tail) = hex.split_at(hex.len() % 2);
            if !head.is_empty() {
                bytes.push(u8::from_str_radix(head, 16).map_err(|_| bad("bad hexadecimal"))?);
            }
            for pair in tail.as_bytes().chunks(2) {
                let pair = std::str::from_utf8(pair).map_err(|_| bad("bad hexadecimal"))?;
                bytes.push(u8::from_str_radix(pair, 16).map_err(|_| bad("bad hexadecimal"))?);
            }
            rest = &digits[end..];
        } else {
            let sign = usize::from(rest.starts_with('-'));
            let digits = rest[sign..].find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len() - sign);
            // A decimal ends where a hexadecimal number (`0x`) starts.
            let digits = rest[sign..sign + digits].find("0x").map_or(digits, |at| at.max(1));
            if digits == 0 {
                return Err(bad(&format!("unexpected {:?}", rest.chars().next().unwrap_or(' '))));
            }
            let number: i64 = rest[..sign + digits].parse().map_err(|_| bad("bad decimal"))?;
            let number = i32::try_from(number).map_err(|_| bad("a decimal is outside INT_MIN to INT_MAX"))?;
            let mut value = number as u32;
            if value == 0 {
                bytes.push(0);
            }
            while value != 0 {
                bytes.push(value as u8);
                value >>= 8;
            }
            rest = &rest[sign + digits..];
        }
        if bytes.len() > MAX_PATTERN_BYTES {
            return Err(bad("longer than 512 bytes"));
        }
    }
    if bytes.is_empty() {
        return Err(bad("it is empty"));
    }
    Ok(bytes)
}

/// Fills `buf` with `pattern` repeated from its start.
pub fn fill_pattern(buf: &mut [u8], pattern: &[u8]) {
    for (byte, value) in buf.iter_mut().zip(pattern.iter().cycle()) {
        *byte = *value;
    }
}

/// What one job verifies with: the method, the bytes each header covers, the pattern and the job's seed.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyLayout {
    pub method: VerifyMethod,
    /// `verify_interval`: each this many bytes of a block has its own header (fio's default: the block size).
    pub interval: usize,
    pub pattern: Option<Vec<u8>>,
    pub randseed: u64,
}

/// What a verified block was written with, beyond its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockStamp {
    /// fio's `numberio`: the job's writes issued before this one (16 bits in the header).
    pub numberio: u16,
    pub thread: u16,
    /// Device time of the write, in ns.
    pub time_ns: u64,
}

impl VerifyLayout {
    /// The random seed of the interval at `offset` (see the module's doc).
    fn seed(&self, offset: u64) -> u64 {
        let mut rng = SplitMix64::new(self.randseed ^ offset.rotate_left(17));
        rng.next_u64()
    }

    /// The contents of a block of `len` bytes written at byte `offset`.
    pub fn fill(&self, offset: u64, len: usize, stamp: BlockStamp) -> Vec<u8> {
        let mut block = vec![0u8; len];
        for (index, interval) in block.chunks_mut(self.interval).enumerate() {
            let at = offset + (index * self.interval) as u64;
            self.fill_interval(at, interval, stamp);
        }
        block
    }

    fn fill_interval(&self, offset: u64, interval: &mut [u8], stamp: BlockStamp) {
        let method = self.method;
        let seed = self.seed(offset);
        let data_start = if method.has_header() { HEADER_BYTES + method.sum_bytes() } else { 0 };
        let data_start = data_start.min(interval.len());
        match &self.pattern {
            Some(pattern) => fill_pattern(&mut interval[data_start..], pattern),
            None => {
                let mut rng = SplitMix64::new(seed);
                for chunk in interval[data_start..].chunks_mut(8) {
                    let word = rng.next_u64().to_le_bytes();
                    chunk.copy_from_slice(&word[..chunk.len()]);
                }
            }
        }
        if !method.has_header() || interval.len() < data_start {
            return;
        }
        let sum = method.sum(&interval[data_start..]);
        let len = interval.len() as u32;
        let header = &mut interval[..HEADER_BYTES];
        header[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        header[2..4].copy_from_slice(&method.type_code().to_le_bytes());
        header[4..8].copy_from_slice(&len.to_le_bytes());
        header[8..16].copy_from_slice(&seed.to_le_bytes());
        header[16..24].copy_from_slice(&offset.to_le_bytes());
        header[24..28].copy_from_slice(&((stamp.time_ns / 1_000_000_000) as u32).to_le_bytes());
        header[28..32].copy_from_slice(&((stamp.time_ns % 1_000_000_000) as u32).to_le_bytes());
        header[32..34].copy_from_slice(&stamp.thread.to_le_bytes());
        header[34..36].copy_from_slice(&stamp.numberio.to_le_bytes());
        let crc = crc32c::crc32c(&header[..HEADER_CRC_SPAN]);
        header[HEADER_CRC_SPAN..].copy_from_slice(&crc.to_le_bytes());
        interval[HEADER_BYTES..data_start].copy_from_slice(&sum);
    }

    /// Checks a block of data read back from byte `offset`, in fio's order and with fio's messages
    /// (`verify_header`, `verify_io_u_*`, `log_verify_failure`). `numberio` is checked when the job knows
    /// which write it expects (fio: a writing job of one block size, not time based).
    pub fn check(&self, file: &str, offset: u64, data: &[u8], numberio: Option<u16>) -> Result<(), String> {
        for (index, interval) in data.chunks(self.interval).enumerate() {
            let at = offset + (index * self.interval) as u64;
            let requested = format!("(requested block: offset={offset}, length={})", data.len());
            if let Err(why) = self.check_interval(at, interval, numberio) {
                return Err(match why {
                    Mismatch::Header(what) => {
                        format!("verify: {what} at file {file} offset {at}, length {} {requested}", interval.len())
                    }
                    Mismatch::Sum { expected, received } => format!(
                        "{}: verify failed at file {file} offset {at}, length {} {requested}\n       Expected CRC: \
                         {}\n       Received CRC: {}",
                        self.method.name(),
                        interval.len(),
                        hex(&expected),
                        hex(&received)
                    ),
                    Mismatch::Pattern { at: byte } => format!(
                        "pattern: verify failed at file {file} offset {at}, length {} {requested}: byte {byte} \
                         differs from the pattern",
                        interval.len()
                    ),
                });
            }
        }
        Ok(())
    }

    fn check_interval(&self, offset: u64, interval: &[u8], numberio: Option<u16>) -> Result<(), Mismatch> {
        let method = self.method;
        if method == VerifyMethod::Null {
            return Ok(());
        }
        if !method.has_header() {
            let mut expected = vec![0u8; interval.len()];
            fill_pattern(&mut expected, self.pattern.as_deref().unwrap_or(&[0]));
            return match interval.iter().zip(&expected).position(|(read, want)| read != want) {
                Some(at) => Err(Mismatch::Pattern { at }),
                None => Ok(()),
            };
        }
        let data_start = HEADER_BYTES + method.sum_bytes();
        if interval.len() < data_start {
            return Err(Mismatch::Header(format!(
                "bad header length {}, wanted at least {data_start}",
                interval.len()
            )));
        }
        let u16_at = |at: usize| u16::from_le_bytes([interval[at], interval[at + 1]]);
        let u32_at = |at: usize| u32::from_le_bytes(interval[at..at + 4].try_into().unwrap_or_default());
        let u64_at = |at: usize| u64::from_le_bytes(interval[at..at + 8].try_into().unwrap_or_default());
        if u16_at(0) != MAGIC {
            return Err(Mismatch::Header(format!("bad magic header {:x}, wanted {MAGIC:x}", u16_at(0))));
        }
        if u32_at(4) != interval.len() as u32 {
            return Err(Mismatch::Header(format!("bad header length {}, wanted {}", u32_at(4), interval.len())));
        }
        let seed = self.seed(offset);
        if u64_at(8) != seed {
            return Err(Mismatch::Header(format!("bad header rand_seed {}, wanted {seed}", u64_at(8))));
        }
        if u64_at(16) != offset {
            return Err(Mismatch::Header(format!("bad header offset {}, wanted {offset}", u64_at(16))));
        }
        if let Some(numberio) = numberio.filter(|&wanted| wanted != u16_at(34)) {
            return Err(Mismatch::Header(format!("bad header numberio {}, wanted {numberio}", u16_at(34))));
        }
        let crc = crc32c::crc32c(&interval[..HEADER_CRC_SPAN]);
        if u32_at(HEADER_CRC_SPAN) != crc {
            return Err(Mismatch::Header(format!("bad header crc {:x}, calculated {crc:x}", u32_at(HEADER_CRC_SPAN))));
        }
        let received = method.sum(&interval[data_start..]);
        let expected = &interval[HEADER_BYTES..data_start];
        if received != expected {
            return Err(Mismatch::Sum { expected: expected.to_vec(), received });
        }
        Ok(())
    }
}

/// How an interval failed its check.
enum Mismatch {
    Header(String),
    Sum { expected: Vec<u8>, received: Vec<u8> },
    Pattern { at: usize },
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(method: VerifyMethod) -> VerifyLayout {
        VerifyLayout { method, interval: 4096, pattern: None, randseed: 7 }
    }

    const STAMP: BlockStamp = BlockStamp { numberio: 3, thread: 1, time_ns: 1_500_000_000 };

    #[test]
    fn patterns_parse_as_fio_documents_them() {
        // The examples of fio's lib/pattern.c.
        assert_eq!(parse_pattern("p", "\"abcd\"").ok(), Some(vec![0x61, 0x62, 0x63, 0x64]));
        assert_eq!(parse_pattern("p", "-1024").ok(), Some(vec![0x00, 0xfc, 0xff, 0xff]));
        assert_eq!(parse_pattern("p", "66").ok(), Some(vec![0x42]));
        assert_eq!(parse_pattern("p", "0xFF0X1").ok(), Some(vec![0xff, 0x01]));
        assert_eq!(parse_pattern("p", "\"123\"0xFFeeCC").ok(), Some(vec![0x31, 0x32, 0x33, 0xff, 0xee, 0xcc]));
        assert_eq!(parse_pattern("p", "0xabc").ok(), Some(vec![0x0a, 0xbc]));
        assert_eq!(parse_pattern("p", "0").ok(), Some(vec![0]));
        assert!(parse_pattern("p", "\"open").is_err());
        assert!(parse_pattern("p", "4294967296").is_err());
        assert!(parse_pattern("p", "%o").is_err());
    }

    #[test]
    fn a_block_verifies_and_each_kind_of_damage_is_named() {
        for method in [VerifyMethod::Md5, VerifyMethod::Crc32, VerifyMethod::Crc32c { intel: false }] {
            let layout = layout(method);
            let block = layout.fill(8192, 8192, STAMP);
            assert_eq!(layout.check("dev", 8192, &block, Some(3)), Ok(()), "{method:?}");
            // Data flipped past the header: the checksum catches it.
            let mut damaged = block.clone();
            damaged[1000] ^= 1;
            let error = layout.check("dev", 8192, &damaged, Some(3)).expect_err("a flipped byte");
            assert!(error.starts_with(&format!("{}: verify failed at file dev offset 8192", method.name())), "{error}");
            // Read from another place: the header's offset is wrong for where it was read.
            let error = layout.check("dev", 12288, &block[..4096], None).expect_err("misplaced");
            assert!(error.contains("bad header rand_seed") || error.contains("bad header offset"), "{error}");
            // Never written: zeros have no magic.
            let error = layout.check("dev", 0, &[0u8; 4096], None).expect_err("zeros");
            assert_eq!(
                error,
                "verify: bad magic header 0, wanted acca at file dev offset 0, length 4096 (requested block: \
                 offset=0, length=4096)"
            );
            // An older write at the right place: its numberio is not the one expected.
            let error = layout.check("dev", 8192, &block, Some(4)).expect_err("stale");
            assert!(error.contains("bad header numberio 3, wanted 4"), "{error}");
        }
    }

    #[test]
    fn a_pattern_is_the_data_and_the_pattern_method_checks_only_it() {
        let pattern = parse_pattern("verify_pattern", "0xdeadbeef").expect("pattern");
        let with_header = VerifyLayout {
            method: VerifyMethod::Crc32c { intel: false },
            interval: 512,
            pattern: Some(pattern.clone()),
            randseed: 1,
        };
        let block = with_header.fill(0, 1024, STAMP);
        assert_eq!(&block[HEADER_BYTES + 4..HEADER_BYTES + 8], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(with_header.check("f", 0, &block, None), Ok(()));
        let bare = VerifyLayout { method: VerifyMethod::Pattern, interval: 512, pattern: Some(pattern), randseed: 1 };
        let block = bare.fill(0, 1024, STAMP);
        assert_eq!(&block[..4], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(bare.check("f", 0, &block, None), Ok(()));
        assert!(bare.check("f", 0, &[0u8; 1024], None).is_err());
    }
}
