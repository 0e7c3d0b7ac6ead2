//! The on-flash format shared by both WAL designs.
//!
//! An entry is `[u64 len][u64 seq][u32 crc32c][u32 magic][payload][zero padding to the LBA size]`, little-endian;
//! the CRC covers len, seq and the payload, so a torn or stale entry is recognised. Entries carry consecutive
//! slices of one byte stream of framed records (`[u32 len][record]`), so a record may span entries and an entry
//! may hold many records. Recovery orders entries by seq, keeps the gap-free prefix from seq 0, and re-frames.

use std::collections::BTreeMap;

use zonelab_zns::codec::{u32_le, u64_le};

pub const HEADER_BYTES: u64 = 24;
const MAGIC: u32 = 0x4c41_575a; // "ZWAL"

/// Bytes an entry with `payload` bytes takes on flash.
pub fn entry_bytes(payload: u64, lba_bytes: u64) -> u64 {
    (HEADER_BYTES + payload).div_ceil(lba_bytes) * lba_bytes
}

fn checksum(len: u64, seq: u64, payload: &[u8]) -> u32 {
    let mut crc = crc32c::crc32c(&len.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &seq.to_le_bytes());
    crc32c::crc32c_append(crc, payload)
}

/// One entry, padded to whole LBAs.
pub fn encode_entry(seq: u64, payload: &[u8], lba_bytes: u64) -> Vec<u8> {
    let len = payload.len() as u64;
    let mut bytes = Vec::with_capacity(entry_bytes(len, lba_bytes) as usize);
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(&seq.to_le_bytes());
    bytes.extend_from_slice(&checksum(len, seq, payload).to_le_bytes());
    bytes.extend_from_slice(&MAGIC.to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes.resize(entry_bytes(len, lba_bytes) as usize, 0);
    bytes
}

/// An entry found on flash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub payload: Vec<u8>,
}

/// Every valid entry in `region` (whole LBAs read from a zone), stepping over padding and anything torn: a
/// block that does not start a valid entry is skipped, a valid entry is stepped over whole. (The reference
/// implementation stopped at the first zero length and did not round entries up to the block; see docs/host-stack.md
/// 2.7.)
pub fn parse_region(region: &[u8], lba_bytes: u64) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut parser = RegionParser::new(lba_bytes);
    parser.push(region, |entry| entries.push(entry));
    parser.finish(|entry| entries.push(entry));
    entries
}

/// `parse_region` on a region that arrives a read at a time: it holds back only the bytes from the first entry it
/// cannot judge yet (one whose header promises more bytes than have come), so recovery need not hold a whole
/// zone's bytes at once.
pub struct RegionParser {
    block: usize,
    /// Bytes not yet parsed; `at` may point past their end when an entry's padding has not all come.
    pending: Vec<u8>,
    at: usize,
}

impl RegionParser {
    pub fn new(lba_bytes: u64) -> RegionParser {
        RegionParser { block: lba_bytes as usize, pending: Vec::new(), at: 0 }
    }

    /// Takes the region's next bytes and hands over every entry now judged valid, in region order.
    pub fn push(&mut self, bytes: &[u8], found: impl FnMut(Entry)) {
        self.pending.extend_from_slice(bytes);
        self.parse(false, found);
        let done = self.at.min(self.pending.len());
        self.pending.drain(..done);
        self.at -= done;
    }

    /// The region has ended: an entry that promised more bytes than it had is torn.
    pub fn finish(mut self, found: impl FnMut(Entry)) {
        self.parse(true, found);
    }

    fn parse(&mut self, ended: bool, mut found: impl FnMut(Entry)) {
        let region = &self.pending;
        while self.at + HEADER_BYTES as usize <= region.len() {
            let at = self.at;
            let len = u64_le(region, at);
            let seq = u64_le(region, at + 8);
            let header = len > 0 && u32_le(region, at + 20) == MAGIC;
            let end = (at as u64 + HEADER_BYTES).checked_add(len).filter(|&end| end <= region.len() as u64);
            match end {
                None if header && !ended => break,
                Some(end) if header => {
                    let payload = &region[at + HEADER_BYTES as usize..end as usize];
                    if checksum(len, seq, payload) == u32_le(region, at + 16) {
                        found(Entry { seq, payload: payload.to_vec() });
                        self.at += entry_bytes(len, self.block as u64) as usize;
                        continue;
                    }
                }
                _ => {}
            }
            self.at += self.block;
        }
    }
}

/// The records of the gap-free run of entries from seq `first`, in order; a record cut by a missing entry or
/// by the end is dropped. Returns the records and the next expected seq.
pub fn records_from(entries: Vec<Entry>, first: u64) -> (Vec<Vec<u8>>, u64) {
    let mut records = Vec::new();
    let mut stream = RecordStream::new(first);
    for entry in entries {
        stream.push(entry, |record| records.push(record));
    }
    (records, stream.next_seq())
}

/// `records_from` on entries that arrive one at a time, in any order: each record is handed over as soon as
/// the entries before it are all in, and only entries that came early (ahead of a missing seq) are held, so
/// recovery holds about a queue depth of entries rather than the whole log. Of two entries with one seq, the
/// first to arrive counts.
pub struct RecordStream {
    next: u64,
    early: BTreeMap<u64, Vec<u8>>,
    /// The stream's bytes after the last whole record.
    partial: Vec<u8>,
}

impl RecordStream {
    pub fn new(first: u64) -> RecordStream {
        RecordStream { next: first, early: BTreeMap::new(), partial: Vec::new() }
    }

    pub fn push(&mut self, entry: Entry, mut record: impl FnMut(Vec<u8>)) {
        if entry.seq < self.next || self.early.contains_key(&entry.seq) {
            return;
        }
        if entry.seq > self.next {
            self.early.insert(entry.seq, entry.payload);
            return;
        }
        self.extend(&entry.payload, &mut record);
        while let Some(payload) = self.early.remove(&self.next) {
            self.extend(&payload, &mut record);
        }
    }

    /// The seq after the gap-free run so far.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    fn extend(&mut self, payload: &[u8], record: &mut impl FnMut(Vec<u8>)) {
        self.next += 1;
        self.partial.extend_from_slice(payload);
        let mut at = 0usize;
        while at + 4 <= self.partial.len() {
            let len = u32_le(&self.partial, at) as usize;
            if at + 4 + len > self.partial.len() {
                break;
            }
            record(self.partial[at + 4..at + 4 + len].to_vec());
            at += 4 + len;
        }
        self.partial.drain(..at);
    }
}

/// A record as it goes into the byte stream.
pub fn frame(record: &[u8], stream: &mut Vec<u8>) {
    stream.extend_from_slice(&(record.len() as u32).to_le_bytes());
    stream.extend_from_slice(record);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_pad_to_blocks() {
        let entry = encode_entry(7, b"hello", 4096);
        assert_eq!(entry.len(), 4096);
        assert_eq!(entry_bytes(4096 - 24, 4096), 4096);
        assert_eq!(entry_bytes(4096 - 23, 4096), 8192);
        let mut region = entry.clone();
        region.extend_from_slice(&[0u8; 4096]);
        region.extend_from_slice(&encode_entry(8, &[9u8; 5000], 4096));
        let parsed = parse_region(&region, 4096);
        assert_eq!(
            parsed,
            vec![Entry { seq: 7, payload: b"hello".to_vec() }, Entry { seq: 8, payload: vec![9u8; 5000] }]
        );
    }

    #[test]
    fn torn_or_corrupt_entries_are_skipped() {
        let mut region = encode_entry(0, &[1u8; 100], 512);
        region.extend_from_slice(&encode_entry(1, &[2u8; 100], 512));
        region[24 + 10] ^= 0xff;
        let parsed = parse_region(&region, 512);
        assert_eq!(
            parsed.iter().map(|entry| entry.seq).collect::<Vec<_>>(),
            vec![1],
            "the corrupted entry fails its CRC"
        );
        let cut = encode_entry(2, &[3u8; 1000], 512);
        assert!(parse_region(&cut[..512], 512).is_empty(), "an entry cut short is not taken");
    }

    #[test]
    fn a_region_parsed_a_piece_at_a_time_gives_the_entries_of_the_whole() {
        let mut region = encode_entry(0, &[1u8; 700], 512);
        region.extend_from_slice(&[0u8; 512]);
        region.extend_from_slice(&encode_entry(1, &[2u8; 100], 512));
        let mut torn = encode_entry(2, &[3u8; 2000], 512);
        torn.truncate(1024);
        region.extend_from_slice(&torn);
        region.extend_from_slice(&encode_entry(3, &[4u8; 1500], 512));
        let whole = parse_region(&region, 512);
        assert_eq!(whole.iter().map(|entry| entry.seq).collect::<Vec<_>>(), vec![0, 1, 3]);
        for piece in [512, 1024, 1536, 4096] {
            let mut parser = RegionParser::new(512);
            let mut found = Vec::new();
            for bytes in region.chunks(piece) {
                parser.push(bytes, |entry| found.push(entry));
            }
            parser.finish(|entry| found.push(entry));
            assert_eq!(found, whole, "pieces of {piece} bytes");
        }
    }

    #[test]
    fn records_are_the_gap_free_prefix_in_seq_order() {
        let mut stream = Vec::new();
        for record in [b"a".as_slice(), b"bb", b"ccc"] {
            frame(record, &mut stream);
        }
        let entries = vec![
            Entry { seq: 1, payload: stream[5..9].to_vec() },
            Entry { seq: 0, payload: stream[..5].to_vec() },
            Entry { seq: 2, payload: stream[9..].to_vec() },
        ];
        let (records, next) = records_from(entries.clone(), 0);
        assert_eq!(records, vec![b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]);
        assert_eq!(next, 3);
        let without_middle: Vec<Entry> = entries.into_iter().filter(|entry| entry.seq != 1).collect();
        let (records, next) = records_from(without_middle, 0);
        assert_eq!((records, next), (vec![b"a".to_vec()], 1), "a hole ends the log; the record it cut is dropped");
    }
}
