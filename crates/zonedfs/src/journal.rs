//! The metadata journal: records sealed one by one with a CRC, committed in whole logical blocks at the write
//! pointer of a metadata zone, and rolled to the next metadata zone as a snapshot when the current one is full.
//!
//! A frame is `magic (u32 le) | payload length (u32 le) | crc32c of the payload (u32 le) | payload`, the payload
//! a record in JSON (so `zonelab fs dump` can print the journal as it is). A commit's frames are padded with
//! zeros to the end of a block; a reader skips zeros to the next block and stops at the first frame that does
//! not check, which is where a commit torn by a crash begins. Every record can be applied twice without harm
//! (a snapshot may already hold what a later record says), so replay never needs to know where the snapshot
//! was taken.

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

/// What a metadata zone's written bytes hold: the records up to the first frame that does not check, and
/// whether the parse stopped early at such a frame (a torn commit) rather than at the end.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    pub records: Vec<Record>,
    pub torn: bool,
}

/// Parses a metadata zone's bytes (from its start to its write pointer).
pub fn parse(bytes: &[u8], block_bytes: usize) -> Parsed {
    let mut records = Vec::new();
    let mut at = 0;
    while at + FRAME_HEADER_BYTES <= bytes.len() {
        let word = |offset: usize| u32::from_le_bytes(bytes[at + offset..at + offset + 4].try_into().expect("4 bytes"));
        if word(0) == 0 {
            // Padding: the next commit starts at the next block.
            let next = (at + 1).next_multiple_of(block_bytes);
            if bytes[at..next.min(bytes.len())].iter().any(|&byte| byte != 0) {
                return Parsed { records, torn: true };
            }
            at = next;
            continue;
        }
        let (len, crc) = (word(4) as usize, word(8));
        let payload_at = at + FRAME_HEADER_BYTES;
        if word(0) != FRAME_MAGIC || payload_at + len > bytes.len() {
            return Parsed { records, torn: true };
        }
        let payload = &bytes[payload_at..payload_at + len];
        match serde_json::from_slice::<Record>(payload) {
            Ok(record) if crc32c::crc32c(payload) == crc => records.push(record),
            _ => return Parsed { records, torn: true },
        }
        at = payload_at + len;
    }
    Parsed { records, torn: false }
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
        assert_eq!(parse(&bytes, 4096), Parsed { records: sample(), torn: false });
    }

    #[test]
    fn a_damaged_frame_ends_the_journal_before_it() {
        let mut bytes = encode_commit(&sample()[..1], 4096);
        let second = bytes.len();
        bytes.extend(encode_commit(&sample()[1..], 4096));
        bytes[second + FRAME_HEADER_BYTES + 3] ^= 0x20;
        assert_eq!(parse(&bytes, 4096), Parsed { records: sample()[..1].to_vec(), torn: true });
        // A commit cut short inside its payload (a torn write) is where the journal ends too.
        let cut = encode_commit(&sample(), 4096);
        let parsed = parse(&cut[..20], 4096);
        assert!(parsed.torn && parsed.records.is_empty());
    }
}
