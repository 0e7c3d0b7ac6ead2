//! The metadata journal: records sealed one by one with a CRC, committed in whole logical blocks at the write
//! pointer of a metadata zone, and rolled to the next metadata zone as a snapshot when the current one is full.
//!
//! A frame is `magic (u32 le) | payload length (u32 le) | crc32c of the payload (u32 le) | payload`, the payload
//! a record in JSON (so `zonelab fs dump` can print the journal as it is). A commit's frames are padded with
//! zeros to the end of a block; a reader skips zeros to the next block and stops at the first frame that does
//! not check. That frame is a commit torn by a crash only if nothing after it checks and its bytes are what a
//! crash leaves (a prefix cut at a block boundary); anything else is damage, which a mount refuses and
//! `salvage` skips. Every record can be applied twice without harm (a snapshot may already hold what a later
//! record says), so replay never needs to know where the snapshot was taken.

use serde::{Deserialize, Serialize};
use zonelab_host::WalDesign;

/// "ZLFS": the first bytes of every frame.
const FRAME_MAGIC: u32 = 0x5346_4c5a;
const FRAME_HEADER_BYTES: usize = 12;
/// The file system's name in every superblock.
pub const SUPERBLOCK_MAGIC: &str = "zonelab-zonedfs";
/// The on-device format's version; a mount refuses any other.
pub const FORMAT_VERSION: u32 = 1;

/// A run of a file's bytes on the device: `len_bytes` from `lba` on, within one zone. Every extent starts on a
/// block boundary; only a file's synced tail leaves the rest of its last block as padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub lba: u64,
    pub len_bytes: u64,
}

/// A file as the journal records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub id: u64,
    pub name: String,
    /// RocksDB's write-lifetime hint (0 not set, 1 none, 2 short, 3 medium, 4 long, 5 extreme).
    pub lifetime: u8,
    pub mtime_s: u64,
    pub extents: Vec<Extent>,
    /// A write-ahead log kept by the WAL library in zones of its own, instead of extents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal: Option<WalLayout>,
}

/// Where a WAL file lives: its design and its zones in the order it writes them. Its bytes are the records
/// the WAL library recovers from those zones, so no record of its size or syncs is ever journaled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalLayout {
    pub design: WalDesign,
    pub zones: Vec<u32>,
}

/// One journal record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Record {
    /// The first record of every metadata zone: which file system, which device shape, which generation of
    /// the journal (the highest whole one is current).
    Superblock {
        magic: String,
        version: u32,
        generation: u64,
        fs_id: u64,
        lba_size: u32,
        zone_size_lba: u64,
        zones: u32,
        meta_zones: u32,
    },
    /// The whole namespace, written after the superblock when the journal rolls to a new zone.
    Snapshot {
        next_file_id: u64,
        dirs: Vec<String>,
        files: Vec<FileRecord>,
    },
    /// A new, empty file (replacing one of the same id, if replayed twice).
    Create {
        file: FileRecord,
    },
    /// A file's extents from index `from` on are `extents` (appended data, or extents moved by garbage
    /// collection when `from` is 0), with its modification time and write-lifetime hint.
    Extents {
        id: u64,
        from: usize,
        extents: Vec<Extent>,
        mtime_s: u64,
        lifetime: u8,
    },
    /// A WAL file takes one more zone, journaled before the log writes into it.
    WalZone {
        id: u64,
        zone: u32,
    },
    Rename {
        id: u64,
        to: String,
    },
    Delete {
        id: u64,
    },
    Mkdir {
        path: String,
    },
    Rmdir {
        path: String,
    },
}

/// The frames of `records`, padded with zeros to a whole number of `block_bytes`.
pub fn encode_commit(records: &[Record], block_bytes: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for record in records {
        let payload = serde_json::to_vec(record).expect("a journal record always serializes");
        bytes.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
        bytes.extend_from_slice(&payload);
    }
    bytes.resize(bytes.len().next_multiple_of(block_bytes), 0);
    bytes
}

/// How a metadata zone's written bytes end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalEnd {
    /// Every written byte parsed (zeros a power loss left at the end aside).
    Clean,
    /// The frame at `offset` is a commit a crash cut short: nothing checks after it, and what is there is a
    /// prefix of a frame, up to the write pointer or to blocks a power loss left zeroed. Not damage.
    Torn { offset: usize },
    /// The bytes at `offset` do not check, and what follows shows that no crash left them so (a valid frame
    /// later, or bytes that a frame cut short cannot hold): the journal is damaged there.
    /// `next_frame`: where the first whole, checking frame after the damage starts, if any.
    Damaged { offset: usize, reason: String, next_frame: Option<usize> },
}

/// What a metadata zone's written bytes hold: the records up to the first bytes that do not check, and how
/// the parse ended there.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    pub records: Vec<Record>,
    pub end: JournalEnd,
}

/// One step of the parse at an offset.
enum Step {
    Frame(Record, usize),
    /// Zeros that pad a commit to its block's end; the next commit starts at the offset given.
    Padding(usize),
    Bad(String),
}

/// Reads whatever starts at `at`, which lies before `end`, the first byte of the zeros that end `bytes`.
fn step(bytes: &[u8], at: usize, block_bytes: usize) -> Step {
    if bytes[at] == 0 {
        // A frame's magic starts with a non-zero byte, so a commit never starts with zeros: these pad the end
        // of a commit's last block, and a block that starts with zeros, with data after it, was not written
        // so by the journal.
        let next = (at + 1).next_multiple_of(block_bytes);
        if at.is_multiple_of(block_bytes) || bytes[at..next.min(bytes.len())].iter().any(|&byte| byte != 0) {
            return Step::Bad("zeros where a frame should start".into());
        }
        return Step::Padding(next);
    }
    if at + FRAME_HEADER_BYTES > bytes.len() {
        return Step::Bad("a frame header cut short".into());
    }
    let word = |offset: usize| u32::from_le_bytes(bytes[at + offset..at + offset + 4].try_into().expect("4 bytes"));
    if word(0) != FRAME_MAGIC {
        return Step::Bad(format!("no frame magic ({:#010x})", word(0)));
    }
    let (len, crc) = (word(4) as usize, word(8));
    let payload_at = at + FRAME_HEADER_BYTES;
    if payload_at + len > bytes.len() {
        return Step::Bad(format!("a {len}-byte payload runs past the written bytes"));
    }
    let payload = &bytes[payload_at..payload_at + len];
    if crc32c::crc32c(payload) != crc {
        return Step::Bad("the payload fails its CRC".into());
    }
    match serde_json::from_slice::<Record>(payload) {
        Ok(record) => Step::Frame(record, payload_at + len),
        Err(error) => Step::Bad(format!("the payload checks but is no record ({error})")),
    }
}

/// Where the zeros that end `bytes` start (`bytes.len()` when it does not end with a zero).
fn zero_tail(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&byte| byte != 0).map_or(0, |last| last + 1)
}

/// The offset of the first whole, checking frame after `after`, if any.
fn next_valid_frame(bytes: &[u8], after: usize, block_bytes: usize) -> Option<usize> {
    let magic = FRAME_MAGIC.to_le_bytes();
    let mut from = after + 1;
    while let Some(found) = bytes.get(from..)?.windows(4).position(|window| window == magic) {
        let at = from + found;
        if let Step::Frame(..) = step(bytes, at, block_bytes) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Whether the bytes from `at` to `tail` (where only zeros follow) can be a frame that a crash cut short. A
/// crash leaves a prefix of a commit's blocks, up to the write pointer, or (in a zone it had filled, when
/// `lost_tail`) zeros from a block boundary on. So the cut falls on a block boundary, the bytes before it are
/// a prefix of a header with the frame magic, and a payload, JSON, holds no zero byte before the cut.
fn is_cut_frame(bytes: &[u8], at: usize, tail: usize, block_bytes: usize, lost_tail: bool) -> bool {
    if !tail.is_multiple_of(block_bytes) || (!lost_tail && tail != bytes.len()) {
        return false;
    }
    let magic = FRAME_MAGIC.to_le_bytes();
    let present = &bytes[at..tail.min(at + 4)];
    if present != &magic[..present.len()] {
        return false;
    }
    if at + FRAME_HEADER_BYTES > tail {
        return true;
    }
    let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
    let payload_at = at + FRAME_HEADER_BYTES;
    payload_at + len > tail && !bytes[payload_at..tail].contains(&0)
}

/// Parses a metadata zone's bytes (from its start to its write pointer). `lost_tail` says the zone is one a
/// power loss finished (FULL, Zone Finished by Controller), whose last blocks may read as zeros; anywhere
/// else a whole block of zeros before the write pointer is damage.
pub fn parse(bytes: &[u8], block_bytes: usize, lost_tail: bool) -> Parsed {
    parse_from(bytes, 0, block_bytes, lost_tail)
}

/// Parses from the frame at `from` on; offsets are from the zone's start.
fn parse_from(bytes: &[u8], from: usize, block_bytes: usize, lost_tail: bool) -> Parsed {
    let tail = zero_tail(bytes);
    let mut records = Vec::new();
    let mut at = from;
    while at < tail {
        match step(bytes, at, block_bytes) {
            Step::Frame(record, next) => {
                records.push(record);
                at = next;
            }
            Step::Padding(next) => at = next,
            Step::Bad(reason) => {
                let end = match next_valid_frame(bytes, at, block_bytes) {
                    Some(valid) => JournalEnd::Damaged {
                        offset: at,
                        reason: format!("{reason}, and a valid frame follows at byte {valid}"),
                        next_frame: Some(valid),
                    },
                    None if is_cut_frame(bytes, at, tail, block_bytes, lost_tail) => JournalEnd::Torn { offset: at },
                    None => JournalEnd::Damaged {
                        offset: at,
                        reason: format!("{reason}, and the bytes to byte {tail} are not a frame a crash cut short"),
                        next_frame: None,
                    },
                };
                return Parsed { records, end };
            }
        }
    }
    let zeros_from = at.max(tail).next_multiple_of(block_bytes);
    if !lost_tail && zeros_from < bytes.len() {
        let reason = format!(
            "blocks of zeros up to the write pointer (byte {}), which only a power loss in a full \
                              zone leaves",
            bytes.len()
        );
        return Parsed { records, end: JournalEnd::Damaged { offset: zeros_from, reason, next_frame: None } };
    }
    Parsed { records, end: JournalEnd::Clean }
}

/// A damaged stretch that `salvage` skipped: where it starts, where the next valid frame is (or the end),
/// why it does not check, and the record it seems to hold if its payload still reads as one (unchecked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Records that checked before this stretch (the salvaged records from here on follow it).
    pub records_before: usize,
    pub offset: usize,
    pub resumes_at: usize,
    pub reason: String,
    pub unchecked: Option<Record>,
}

/// Every record that checks, skipping damaged stretches to the next valid frame: what `fsck --repair` keeps.
/// A torn end is not damage and is not listed.
pub fn salvage(bytes: &[u8], block_bytes: usize, lost_tail: bool) -> (Vec<Record>, Vec<Damage>) {
    let mut records = Vec::new();
    let mut damage = Vec::new();
    let mut at = 0;
    loop {
        let parsed = parse_from(bytes, at, block_bytes, lost_tail);
        records.extend(parsed.records);
        let JournalEnd::Damaged { offset, reason, next_frame } = parsed.end else {
            return (records, damage);
        };
        let resumes_at = next_frame.unwrap_or(bytes.len());
        let unchecked = unchecked_record(bytes, offset);
        damage.push(Damage { records_before: records.len(), offset, resumes_at, reason, unchecked });
        if resumes_at >= bytes.len() {
            return (records, damage);
        }
        at = resumes_at;
    }
}

/// The record a damaged frame's payload reads as, ignoring its CRC (a hint for a person, never replayed).
fn unchecked_record(bytes: &[u8], at: usize) -> Option<Record> {
    let header = bytes.get(at..at + FRAME_HEADER_BYTES)?;
    let len = u32::from_le_bytes(header[4..8].try_into().ok()?) as usize;
    let payload = bytes.get(at + FRAME_HEADER_BYTES..at + FRAME_HEADER_BYTES + len)?;
    serde_json::from_slice(payload).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record> {
        vec![
            Record::Mkdir { path: "/db".into() },
            Record::Create {
                file: FileRecord {
                    id: 7,
                    name: "/db/000007.sst".into(),
                    lifetime: 3,
                    mtime_s: 1,
                    extents: vec![],
                    wal: None,
                },
            },
            Record::Extents {
                id: 7,
                from: 0,
                extents: vec![Extent { lba: 4096, len_bytes: 5000 }],
                mtime_s: 2,
                lifetime: 3,
            },
        ]
    }

    #[test]
    fn commits_parse_back_across_their_padding() {
        let mut bytes = encode_commit(&sample()[..1], 4096);
        assert_eq!(bytes.len(), 4096);
        bytes.extend(encode_commit(&sample()[1..], 4096));
        assert_eq!(parse(&bytes, 4096, false), Parsed { records: sample(), end: JournalEnd::Clean });
    }

    /// Three commits of one block each.
    fn three_commits() -> Vec<u8> {
        let mut bytes = Vec::new();
        for records in [&sample()[..1], &sample()[1..2], &sample()[2..]] {
            bytes.extend(encode_commit(records, 4096));
        }
        bytes
    }

    #[test]
    fn a_flipped_bit_with_valid_frames_after_it_is_damage_not_a_torn_end() {
        let mut bytes = three_commits();
        bytes[4096 + FRAME_HEADER_BYTES + 3] ^= 0x20;
        let parsed = parse(&bytes, 4096, false);
        assert_eq!(parsed.records, sample()[..1].to_vec());
        assert!(matches!(parsed.end, JournalEnd::Damaged { offset: 4096, .. }), "{:?}", parsed.end);
        // Salvage keeps what checks on both sides and names the damaged frame's unchecked record.
        let (records, damage) = salvage(&bytes, 4096, false);
        assert_eq!(records, vec![sample()[0].clone(), sample()[2].clone()]);
        assert_eq!(damage.len(), 1);
        assert_eq!((damage[0].offset, damage[0].resumes_at), (4096, 8192));
    }

    #[test]
    fn a_flip_in_the_last_frame_is_damage_too() {
        let mut bytes = three_commits();
        bytes[8192 + FRAME_HEADER_BYTES + 5] ^= 0x01;
        assert!(matches!(parse(&bytes, 4096, false).end, JournalEnd::Damaged { offset: 8192, .. }));
        // A flipped length that sends the frame past the end is not a cut either: its padding is zeros.
        let mut bytes = three_commits();
        bytes[8192 + 6] ^= 0x10;
        assert!(matches!(parse(&bytes, 4096, false).end, JournalEnd::Damaged { offset: 8192, .. }));
    }

    #[test]
    fn zeroed_whole_commits_before_data_are_damage() {
        let mut bytes = three_commits();
        bytes[4096..8192].fill(0);
        assert!(matches!(parse(&bytes, 4096, false).end, JournalEnd::Damaged { offset: 4096, .. }));
        // Zeros to the end are an end only where a power loss took blocks from a full zone.
        let mut bytes = three_commits();
        bytes[8192..].fill(0);
        assert_eq!(parse(&bytes, 4096, true), Parsed { records: sample()[..2].to_vec(), end: JournalEnd::Clean });
        assert!(matches!(parse(&bytes, 4096, false).end, JournalEnd::Damaged { offset: 8192, .. }));
    }

    #[test]
    fn a_commit_cut_at_a_block_boundary_is_torn() {
        let long = Record::Mkdir { path: "/".to_string() + &"d".repeat(6000) };
        let mut bytes = encode_commit(&sample()[..1], 4096);
        bytes.extend(encode_commit(&[sample()[1].clone(), long], 4096));
        assert_eq!(bytes.len(), 3 * 4096);
        // The write pointer fell after the commit's first block.
        let parsed = parse(&bytes[..8192], 4096, false);
        assert_eq!(parsed.records, sample()[..2].to_vec());
        assert!(matches!(parsed.end, JournalEnd::Torn { .. }), "{:?}", parsed.end);
        // Or the zone was full and the commit's last block read back as zeros.
        let mut lost = bytes.clone();
        lost[8192..].fill(0);
        assert!(matches!(parse(&lost, 4096, true).end, JournalEnd::Torn { .. }));
        assert!(matches!(parse(&lost, 4096, false).end, JournalEnd::Damaged { .. }));
    }
}
