//! The zone journal of a device image: the on-disk copy of every zone's state and write pointer, kept so that
//! a crash of the process at any instant leaves an image that opens with exactly the commands that completed.
//!
//! Layout of `zones.meta` (all integers little-endian):
//! - bytes 0..64, header: magic `ZLABZNS\0`, format version (u32), zone count (u32), zone size in LBAs (u64),
//!   zone capacity in LBAs (u64), LBA size (u32), journal identity (u64 at 36, random at creation), CRC32 of
//!   bytes 0..60 at 60.
//! - bytes 64..128, intent: the select-all action or power cycle in progress, if any (see `Intent`).
//! - from byte 4096, one 64-byte record per zone: state (u8), attributes (u8), write pointer offset from the
//!   zone start in LBAs (u64 at 8), implicit-open sequence (u64 at 16), the zone's index (u32 at 24), the
//!   journal identity (u64 at 28), CRC32 of bytes 0..60 at 60. The index and identity are sealed into each
//!   record so that a record copied to another zone's slot, or from another image, is refused as corrupt.
//!
//! Why this is crash-safe: each record is one `pwrite` of 64 aligned bytes inside one page, which a killed
//! process either completes or never starts. A write stores its data before its record, so a write pointer
//! never passes data that is not there. A command that changes many zones writes an intent first and clears
//! it last; opening an image with an intent set replays the action, which is idempotent.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::codec::{u32_le, u64_le};
use crate::{Geometry, ZoneState};

const MAGIC: &[u8; 8] = b"ZLABZNS\0";
/// Bumped whenever the layout above changes; an image of another version is refused.
pub const JOURNAL_FORMAT_VERSION: u32 = 2;
const INTENT_OFFSET: u64 = 64;
const RECORDS_OFFSET: u64 = 4096;
const RECORD_BYTES: usize = 64;
const CRC_AT: usize = 60;

/// What the journal keeps of one zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneRecord {
    pub state: ZoneState,
    pub attrs: u8,
    pub wp_offset_lba: u64,
    /// Order in which IMPL_OPEN zones were opened, so auto-close picks the same victim after a restart.
    pub open_seq: u64,
}

/// A command that changes several zones, recorded before it starts so that a crash part-way is completed
/// when the image is next opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    /// Zone Management Send with Select All, by its ZSA value.
    SelectAll(u8),
    /// The controller-reset rule of a power cycle.
    PowerCycle,
}

const INTENT_POWER_CYCLE: u8 = 0xff;

/// Why a journal could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path} has format version {found}; this zonelab reads version {JOURNAL_FORMAT_VERSION}")]
    Version { path: PathBuf, found: u32 },
}

fn sealed<const N: usize>(mut bytes: [u8; N]) -> [u8; N] {
    let crc = crc32fast::hash(&bytes[..CRC_AT]);
    bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn seal_ok(bytes: &[u8]) -> bool {
    let mut stored = [0u8; 4];
    stored.copy_from_slice(&bytes[CRC_AT..CRC_AT + 4]);
    crc32fast::hash(&bytes[..CRC_AT]) == u32::from_le_bytes(stored)
}

fn encode_record(record: &ZoneRecord, zone: u32, identity: u64) -> [u8; RECORD_BYTES] {
    let mut bytes = [0u8; RECORD_BYTES];
    bytes[0] = record.state as u8;
    bytes[1] = record.attrs;
    bytes[8..16].copy_from_slice(&record.wp_offset_lba.to_le_bytes());
    bytes[16..24].copy_from_slice(&record.open_seq.to_le_bytes());
    bytes[24..28].copy_from_slice(&zone.to_le_bytes());
    bytes[28..36].copy_from_slice(&identity.to_le_bytes());
    sealed(bytes)
}

/// A fresh journal identity: the process's random hash keys mixed with the time and process id, so that two
/// images created anywhere, even in the same nanosecond, differ.
/// A zone's record, or why it does not check.
pub type CheckedRecord = Result<ZoneRecord, String>;

/// Zone `zone`'s record, checked: its seal, its image, its place, its state and write pointer.
fn decode_record(bytes: &[u8], zone: u32, identity: u64, geometry: &Geometry) -> Result<ZoneRecord, String> {
    if !seal_ok(bytes) {
        return Err(format!("the record of zone {zone} fails its checksum"));
    }
    if u64_le(bytes, 28) != identity {
        return Err(format!("the record of zone {zone} comes from another image"));
    }
    let owner = u32_le(bytes, 24);
    if owner != zone {
        return Err(format!("the record in zone {zone}'s place is zone {owner}'s"));
    }
    let state =
        ZoneState::from_raw(bytes[0]).ok_or_else(|| format!("zone {zone} has undefined state {:#x}", bytes[0]))?;
    let record = ZoneRecord { state, attrs: bytes[1], wp_offset_lba: u64_le(bytes, 8), open_seq: u64_le(bytes, 16) };
    if record.wp_offset_lba > geometry.zone_cap_lba {
        return Err(format!("zone {zone} has its write pointer beyond its capacity"));
    }
    Ok(record)
}

fn new_identity() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    hasher.write_u128(now.as_nanos());
    hasher.write_u32(std::process::id());
    hasher.finish()
}

fn encode_header(geometry: &Geometry, identity: u64) -> [u8; 64] {
    let mut bytes = [0u8; 64];
    bytes[..8].copy_from_slice(MAGIC);
    bytes[8..12].copy_from_slice(&JOURNAL_FORMAT_VERSION.to_le_bytes());
    bytes[12..16].copy_from_slice(&geometry.zones.to_le_bytes());
    bytes[16..24].copy_from_slice(&geometry.zone_size_lba.to_le_bytes());
    bytes[24..32].copy_from_slice(&geometry.zone_cap_lba.to_le_bytes());
    bytes[32..36].copy_from_slice(&geometry.lba_size.to_le_bytes());
    bytes[36..44].copy_from_slice(&identity.to_le_bytes());
    sealed(bytes)
}

/// The open journal file of an image.
#[derive(Debug)]
pub struct ZoneJournal {
    file: File,
    identity: u64,
}

impl ZoneJournal {
    /// Creates the journal with every zone EMPTY.
    pub fn create(path: &Path, geometry: &Geometry) -> Result<ZoneJournal, JournalError> {
        let io_error = |source| JournalError::Io { path: path.to_path_buf(), source };
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).map_err(io_error)?;
        let identity = new_identity();
        let empty = ZoneRecord { state: ZoneState::Empty, attrs: 0, wp_offset_lba: 0, open_seq: 0 };
        let mut all = vec![0u8; RECORDS_OFFSET as usize + RECORD_BYTES * geometry.zones as usize];
        all[..64].copy_from_slice(&encode_header(geometry, identity));
        for (zone, slot) in (0..).zip(all[RECORDS_OFFSET as usize..].chunks_exact_mut(RECORD_BYTES)) {
            slot.copy_from_slice(&encode_record(&empty, zone, identity));
        }
        file.write_all_at(&all, 0).map_err(io_error)?;
        file.sync_all().map_err(io_error)?;
        Ok(ZoneJournal { file, identity })
    }

    /// Opens a journal (for writing too if `writable`) and checks it against `geometry`, returning every zone's
    /// record (or why it does not check) and any intent left by a crash. Nothing is written.
    pub fn open(
        path: &Path,
        geometry: &Geometry,
        writable: bool,
    ) -> Result<(ZoneJournal, Vec<CheckedRecord>, Option<Intent>), JournalError> {
        let corrupt = |reason: String| JournalError::Corrupt { path: path.to_path_buf(), reason };
        let io_error = |source| JournalError::Io { path: path.to_path_buf(), source };
        let file = OpenOptions::new().read(true).write(writable).open(path).map_err(io_error)?;
        let expected_len = RECORDS_OFFSET + (RECORD_BYTES as u64) * u64::from(geometry.zones);
        let actual_len = file.metadata().map_err(io_error)?.len();
        if actual_len < 64 {
            return Err(corrupt(format!("it is {actual_len} bytes long, shorter than its header")));
        }
        let mut header = [0u8; 128];
        file.read_exact_at(&mut header, 0).map_err(|_| corrupt("its header cannot be read".into()))?;
        let repair = || match path.parent() {
            Some(image) => format!("; `zonelab repair-zones {}` rebuilds it from config.toml", image.display()),
            None => String::new(),
        };
        if &header[..8] != MAGIC {
            return Err(corrupt(format!("it does not start with the zonelab journal magic{}", repair())));
        }
        // The checksum first: a flipped version byte is corruption, not a journal of another version.
        if !seal_ok(&header[..64]) {
            return Err(corrupt(format!("its header checksum does not match{}", repair())));
        }
        let found = u32_le(&header, 8);
        if found != JOURNAL_FORMAT_VERSION {
            return Err(JournalError::Version { path: path.to_path_buf(), found });
        }
        let identity = u64_le(&header, 36);
        if header[..64] != encode_header(geometry, identity) {
            return Err(corrupt("its geometry differs from the image configuration".into()));
        }
        if actual_len != expected_len {
            return Err(corrupt(format!(
                "it is {actual_len} bytes long; {} zones need {expected_len}",
                geometry.zones
            )));
        }
        let intent = Self::decode_intent(&header[64..128]).map_err(corrupt)?;
        let mut all = vec![0u8; RECORD_BYTES * geometry.zones as usize];
        file.read_exact_at(&mut all, RECORDS_OFFSET).map_err(io_error)?;
        let records = all
            .chunks_exact(RECORD_BYTES)
            .zip(0u32..)
            .map(|(bytes, zone)| decode_record(bytes, zone, identity, geometry))
            .collect();
        Ok((ZoneJournal { file, identity }, records, intent))
    }

    /// Writes a new header for the journal at `path` when its own is damaged (its magic or its seal does not
    /// check): the geometry from the image's configuration, and the identity that most of the zone records
    /// whose seal checks carry (a new one when none does, after which every record is rebuilt from the data). A
    /// many-zone command the damaged header recorded as interrupted is forgotten. A header that checks is left
    /// alone, whatever it says (another format version, another geometry: `open` names those). Returns what was
    /// rebuilt, if anything.
    pub fn rebuild_header(path: &Path, geometry: &Geometry) -> Result<Option<String>, JournalError> {
        let io_error = |source| JournalError::Io { path: path.to_path_buf(), source };
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(io_error)?;
        let expected_len = RECORDS_OFFSET + (RECORD_BYTES as u64) * u64::from(geometry.zones);
        if file.metadata().map_err(io_error)?.len() != expected_len {
            return Ok(None);
        }
        let mut header = [0u8; 64];
        file.read_exact_at(&mut header, 0).map_err(io_error)?;
        let damage = if &header[..8] != MAGIC {
            "it did not start with the zonelab journal magic"
        } else if !seal_ok(&header) {
            "its checksum did not match"
        } else {
            return Ok(None);
        };
        let mut all = vec![0u8; RECORD_BYTES * geometry.zones as usize];
        file.read_exact_at(&mut all, RECORDS_OFFSET).map_err(io_error)?;
        let mut counts: std::collections::BTreeMap<u64, u32> = std::collections::BTreeMap::new();
        for (bytes, zone) in all.chunks_exact(RECORD_BYTES).zip(0u32..) {
            if seal_ok(bytes) && u32_le(bytes, 24) == zone {
                *counts.entry(u64_le(bytes, 28)).or_default() += 1;
            }
        }
        let (identity, agreeing) = counts.into_iter().max_by_key(|&(_, count)| count).unwrap_or((new_identity(), 0));
        let mut rebuilt = [0u8; 128];
        rebuilt[..64].copy_from_slice(&encode_header(geometry, identity));
        file.write_all_at(&rebuilt, 0).map_err(io_error)?;
        file.sync_all().map_err(io_error)?;
        Ok(Some(format!(
            "its header was damaged ({damage}); rebuilt from config.toml, with the image identity that {agreeing} \
             of its {} zone records carry",
            geometry.zones
        )))
    }

    fn decode_intent(bytes: &[u8]) -> Result<Option<Intent>, String> {
        if bytes.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        if bytes[0] != 1 || !seal_ok(bytes) {
            return Err("its intent record is damaged".into());
        }
        Ok(Some(if bytes[1] == INTENT_POWER_CYCLE { Intent::PowerCycle } else { Intent::SelectAll(bytes[1]) }))
    }

    /// Records the new state of one zone.
    pub fn write_zone(&mut self, zone: u32, record: &ZoneRecord) -> io::Result<()> {
        let bytes = encode_record(record, zone, self.identity);
        self.file.write_all_at(&bytes, RECORDS_OFFSET + RECORD_BYTES as u64 * u64::from(zone))
    }

    /// Records that a many-zone command is starting.
    pub fn begin(&mut self, intent: Intent) -> io::Result<()> {
        let mut bytes = [0u8; 64];
        bytes[0] = 1;
        bytes[1] = match intent {
            Intent::SelectAll(action) => action,
            Intent::PowerCycle => INTENT_POWER_CYCLE,
        };
        self.file.write_all_at(&sealed(bytes), INTENT_OFFSET)
    }

    /// Records that the many-zone command has finished.
    pub fn end(&mut self) -> io::Result<()> {
        self.file.write_all_at(&[0u8; 64], INTENT_OFFSET)
    }

    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
}
