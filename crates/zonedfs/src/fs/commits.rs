//! The journal's commits and rolls, and replay at mount.

use std::collections::BTreeMap;

use zonelab_runtime::{CommandQueue, HostExt, IoData};
use zonelab_zns::{Geometry, ZoneDescriptor, ZoneSendAction, ZoneState};

use super::{read_blocks, Node, Result, State, ZonedFs, ZonedFsError, META_ZONES};
use crate::journal::{self, FileRecord, JournalEnd, Record, FORMAT_VERSION, SUPERBLOCK_MAGIC};

/// A metadata zone's written bytes, as a mount reads them.
pub(super) struct MetaZone {
    zone: u32,
    bytes: Vec<u8>,
    /// FULL and finished by the controller: a power loss may have left its last blocks reading as zeros.
    lost_tail: bool,
}

/// The journal a mount replays: the zone it continues in, and the records after the superblock.
pub(super) struct Journal {
    pub generation: u64,
    pub current: u32,
    pub fs_id: u64,
    pub records: Vec<Record>,
    /// Damage a salvaging mount skipped, for `check` to report.
    pub problems: Vec<String>,
    /// The journal ends in bytes replay stops at (a torn commit, or damage salvaged): a writable mount must
    /// start a new generation before it commits anything, or replay would never reach what it commits.
    pub needs_roll: bool,
}

/// Reads the written part of every metadata zone.
pub(super) async fn read_meta_zones<Q: CommandQueue>(queue: &Q, report: &[ZoneDescriptor]) -> Result<Vec<MetaZone>> {
    let mut zones = Vec::new();
    for (zone, descriptor) in report.iter().enumerate().take(META_ZONES as usize) {
        let written = match descriptor.state {
            ZoneState::Full => descriptor.capacity_lba,
            _ => descriptor.wp_lba.saturating_sub(descriptor.start_lba).min(descriptor.capacity_lba),
        };
        if written > 0 {
            let bytes = read_blocks(queue, descriptor.start_lba, written).await?;
            let lost_tail = descriptor.may_have_lost_tail();
            zones.push(MetaZone { zone: zone as u32, bytes, lost_tail });
        }
    }
    Ok(zones)
}

/// A metadata zone parsed: its generation when its superblock checks.
struct Seen<'a> {
    zone: &'a MetaZone,
    generation: Option<u64>,
    fs_id: u64,
    parsed: journal::Parsed,
}

/// Picks the journal to replay: the highest generation whose superblock and snapshot check. A damaged zone
/// that may be current (not older than it) makes the mount fail with where the damage is, unless `salvage`:
/// then every record that checks is replayed, from the newest zone with a readable snapshot on, and the
/// damage is listed. None when no zone holds a superblock and snapshot.
pub(super) fn choose_journal(zones: &[MetaZone], geometry: &Geometry, salvage: bool) -> Result<Option<Journal>> {
    let block = geometry.lba_size as usize;
    let mut seen = Vec::new();
    for zone in zones {
        let parsed = journal::parse(&zone.bytes, block, zone.lost_tail);
        let (generation, fs_id) = match parsed.records.first() {
            Some(Record::Superblock { magic, version, generation, fs_id, lba_size, zone_size_lba, zones, .. }) => {
                if magic != SUPERBLOCK_MAGIC || *version != FORMAT_VERSION {
                    return Err(ZonedFsError::NotFormatted(format!(
                        "zone {} holds {magic} version {version}; this is {SUPERBLOCK_MAGIC} version {FORMAT_VERSION}",
                        zone.zone
                    )));
                }
                if (*lba_size, *zone_size_lba, *zones) != (geometry.lba_size, geometry.zone_size_lba, geometry.zones) {
                    return Err(ZonedFsError::Corrupt(format!(
                        "the superblock was written for {zones} zones of {zone_size_lba} blocks of {lba_size} bytes; \
                         the device has {} zones of {} blocks of {} bytes",
                        geometry.zones, geometry.zone_size_lba, geometry.lba_size
                    )));
                }
                (Some(*generation), *fs_id)
            }
            _ => (None, 0),
        };
        seen.push(Seen { zone, generation, fs_id, parsed });
    }
    let has_snapshot = |seen: &Seen| matches!(seen.parsed.records.get(1), Some(Record::Snapshot { .. }));
    let current = seen.iter().filter(|seen| has_snapshot(seen)).max_by_key(|seen| seen.generation);
    let Some(current_generation) = current.and_then(|seen| seen.generation) else {
        // Nothing here was ever a whole zonedfs superblock and snapshot, or a repair must find what is.
        return Ok(if salvage { salvage_journal(&seen, block) } else { None });
    };
    // Damage in a zone older than the current one is harmless: the current snapshot holds all it said.
    let harmful = seen.iter().find_map(|seen| match &seen.parsed.end {
        JournalEnd::Damaged { offset, reason, .. }
            if seen.generation.is_none_or(|generation| generation >= current_generation) =>
        {
            Some(format!("journal zone {}: {}", seen.zone.zone, at_offset(*offset, block, reason)))
        }
        _ => None,
    });
    match (harmful, salvage) {
        (Some(damage), false) => Err(ZonedFsError::Corrupt(format!(
            "{damage}. The journal is damaged, not torn by a crash: nothing was mounted. `zonelab fs fsck DEVICE` \
             lists what the damage affects; `zonelab fs fsck --repair DEVICE` keeps every record that checks"
        ))),
        (None, _) => Ok(current.map(|current| Journal {
            generation: current_generation,
            current: current.zone.zone,
            fs_id: current.fs_id,
            records: current.parsed.records[1..].to_vec(),
            problems: Vec::new(),
            needs_roll: matches!(current.parsed.end, JournalEnd::Torn { .. }),
        })),
        (Some(_), true) => Ok(salvage_journal(&seen, block)),
    }
}

/// Every record that checks, zone by zone in generation order from the newest zone whose snapshot survives,
/// with a problem line for each damaged stretch and each zone whose superblock does not check.
fn salvage_journal(seen: &[Seen], block: usize) -> Option<Journal> {
    let mut ordered: Vec<(u64, &Seen, Vec<Record>, Vec<journal::Damage>)> = Vec::new();
    let mut problems = Vec::new();
    for seen in seen {
        let Some(generation) = seen.generation else {
            problems.push(format!(
                "journal zone {}: its superblock does not check ({}); the zone was skipped",
                seen.zone.zone,
                match &seen.parsed.end {
                    JournalEnd::Damaged { reason, .. } => reason.as_str(),
                    _ => "no superblock",
                }
            ));
            continue;
        };
        let (records, damage) = journal::salvage(&seen.zone.bytes, block, seen.zone.lost_tail);
        ordered.push((generation, seen, records, damage));
    }
    ordered.sort_by_key(|(generation, ..)| *generation);
    let from = ordered
        .iter()
        .rposition(|(_, _, records, _)| records.iter().any(|record| matches!(record, Record::Snapshot { .. })))?;
    let names = file_names(ordered[from..].iter().flat_map(|(_, _, records, _)| records));
    let mut records = Vec::new();
    for (generation, seen, zone_records, damage) in &ordered[from..] {
        for stretch in damage {
            let after = &zone_records[stretch.records_before..];
            let mut touched: Vec<&str> = Vec::new();
            for name in after.iter().filter_map(|record| record_file(record).and_then(|id| names.get(&id))) {
                if !touched.contains(&name.as_str()) {
                    touched.push(name);
                }
            }
            let unchecked = stretch.unchecked.as_ref().map_or(UNREADABLE.to_string(), |record| {
                let file = record_file(record).and_then(|id| names.get(&id));
                let file = file.map_or(String::new(), |name| format!(" (file {name})"));
                format!("{}{file}", serde_json::to_string(record).unwrap_or_default())
            });
            problems.push(format!(
                "journal zone {} (generation {generation}): {}; the damaged record, unchecked: {unchecked}; {} \
                 records after it check and were kept; files they touch: {}",
                seen.zone.zone,
                at_offset(stretch.offset, block, &stretch.reason),
                after.len(),
                if touched.is_empty() { "none".to_string() } else { touched.join(", ") }
            ));
        }
        records.extend(zone_records.iter().filter(|record| !matches!(record, Record::Superblock { .. })).cloned());
    }
    let (generation, current, ..) = ordered.last()?;
    Some(Journal {
        generation: *generation,
        current: current.zone.zone,
        fs_id: current.fs_id,
        records,
        problems,
        needs_roll: true,
    })
}

/// What a salvage says of a damaged record it cannot read: it cannot name the files that record changed.
const UNREADABLE: &str = "unreadable, so the files it changed cannot be named (a file it grew may be shorter now; \
                          data no file names is kept in /lost+found)";

/// `reason` at a byte offset of a zone, with the block it falls in.
fn at_offset(offset: usize, block: usize, reason: &str) -> String {
    format!("the frame at byte {offset} (block {}) is damaged: {reason}", offset / block)
}

/// The file a record changes.
fn record_file(record: &Record) -> Option<u64> {
    match record {
        Record::Create { file } => Some(file.id),
        Record::Extents { id, .. } | Record::WalZone { id, .. } | Record::Rename { id, .. } | Record::Delete { id } => {
            Some(*id)
        }
        _ => None,
    }
}

/// Every file id's last name in `records` (snapshots, creates and renames).
fn file_names<'a>(records: impl Iterator<Item = &'a Record>) -> BTreeMap<u64, String> {
    let mut names = BTreeMap::new();
    for record in records {
        match record {
            Record::Snapshot { files, .. } => names.extend(files.iter().map(|file| (file.id, file.name.clone()))),
            Record::Create { file } => {
                names.insert(file.id, file.name.clone());
            }
            Record::Rename { id, to } => {
                names.insert(*id, to.clone());
            }
            _ => {}
        }
    }
    names
}

impl<Q: CommandQueue + Clone + 'static> ZonedFs<Q> {
    /// Makes `records` durable: the device flushed first (so data they point at is durable), then the records
    /// written at the journal's write pointer, then flushed. A full journal zone rolls to the other one.
    pub(super) async fn commit(&self, records: Vec<Record>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let count = records.len();
        let name = || format!("commit of {count} records");
        self.traced("zonedfs journal", name, self.commit_now(records)).await
    }

    async fn commit_now(&self, records: Vec<Record>) -> Result<()> {
        let _journal = self.inner.journal_lock.lock().await;
        self.inner.queue.flush().await?;
        let block = self.inner.block_bytes;
        let bytes = journal::encode_commit(&records, block as usize);
        let (zone, written) = {
            let state = self.inner.state.borrow();
            (state.meta.current, state.meta.written_lba)
        };
        let blocks = bytes.len() as u64 / block;
        if written + blocks > self.inner.geometry.zone_cap_lba {
            // The snapshot holds the state these records describe.
            self.roll_journal().await?;
        } else {
            self.write_journal(zone, written, bytes).await?;
        }
        self.inner.queue.flush().await?;
        self.inner.state.borrow_mut().stats.journal_commits += 1;
        Ok(())
    }

    pub(super) async fn write_journal(&self, zone: u32, written_lba: u64, bytes: Vec<u8>) -> Result<()> {
        let block = self.inner.block_bytes;
        let geometry = self.inner.geometry;
        let blocks = bytes.len() as u64 / block;
        let step = geometry.max_transfer_lba.unwrap_or(blocks).max(1);
        let mut done = 0;
        while done < blocks {
            let count = step.min(blocks - done);
            let chunk = bytes[(done * block) as usize..((done + count) * block) as usize].to_vec();
            self.inner.queue.write(geometry.zone_start_lba(zone) + written_lba + done, IoData::Bytes(chunk)).await?;
            done += count;
            let mut state = self.inner.state.borrow_mut();
            state.meta.current = zone;
            state.meta.written_lba = written_lba + done;
        }
        Ok(())
    }

    /// Starts the next generation of the journal in the other metadata zone: reset it, write a superblock and
    /// a snapshot of the whole namespace. Until that is whole, a mount still finds the previous generation.
    pub(super) async fn roll_journal(&self) -> Result<()> {
        let geometry = self.inner.geometry;
        let (next, records) = {
            let state = self.inner.state.borrow();
            let next =
                if state.meta.generation == 0 { state.meta.current } else { (state.meta.current + 1) % META_ZONES };
            let superblock = Record::Superblock {
                magic: SUPERBLOCK_MAGIC.to_string(),
                version: FORMAT_VERSION,
                generation: state.meta.generation + 1,
                fs_id: state.meta.fs_id,
                lba_size: geometry.lba_size,
                zone_size_lba: geometry.zone_size_lba,
                zones: geometry.zones,
                meta_zones: META_ZONES,
            };
            let snapshot = Record::Snapshot {
                next_file_id: state.next_id,
                dirs: state.dirs.iter().cloned().collect(),
                files: state
                    .files
                    .values()
                    .filter(|node| !node.unlinked)
                    .map(|node| FileRecord { extents: node.record.extents.clone(), ..node.record.clone() })
                    .collect(),
            };
            (next, vec![superblock, snapshot])
        };
        let bytes = journal::encode_commit(&records, self.inner.block_bytes as usize);
        if bytes.len() as u64 > geometry.zone_cap_lba * self.inner.block_bytes {
            return Err(ZonedFsError::Corrupt(format!(
                "the metadata snapshot ({} bytes) no longer fits a zone ({} bytes)",
                bytes.len(),
                geometry.zone_cap_lba * self.inner.block_bytes
            )));
        }
        self.inner.queue.zone_send(geometry.zone_start_lba(next), ZoneSendAction::Reset, false).await?;
        self.write_journal(next, 0, bytes).await?;
        let mut state = self.inner.state.borrow_mut();
        for node in state.files.values_mut() {
            node.journaled = node.record.extents.len();
        }
        state.meta.generation += 1;
        state.stats.journal_rolls += 1;
        Ok(())
    }
}

/// Applies a replayed record to the namespace.
pub(super) fn apply(state: &mut State, record: &Record) {
    match record {
        Record::Superblock { .. } => {}
        Record::Snapshot { next_file_id, dirs, files } => {
            state.next_id = *next_file_id;
            state.dirs = dirs.iter().cloned().collect();
            state.dirs.insert("/".to_string());
            state.files.clear();
            state.names.clear();
            for file in files {
                state.names.insert(file.name.clone(), file.id);
                state.files.insert(file.id, Node::new(file.clone()));
            }
        }
        Record::Create { file } => {
            if let Some(old) = state.names.insert(file.name.clone(), file.id) {
                if old != file.id {
                    state.files.remove(&old);
                }
            }
            state.files.insert(file.id, Node::new(file.clone()));
            state.next_id = state.next_id.max(file.id + 1);
        }
        Record::Extents { id, from, extents, mtime_s, lifetime } => {
            if let Some(node) = state.files.get_mut(id) {
                node.record.extents.truncate(*from);
                node.record.extents.extend_from_slice(extents);
                node.record.mtime_s = *mtime_s;
                node.record.lifetime = *lifetime;
            }
        }
        Record::WalZone { id, zone } => {
            if let Some(layout) = state.files.get_mut(id).and_then(|node| node.record.wal.as_mut()) {
                if !layout.zones.contains(zone) {
                    layout.zones.push(*zone);
                }
            }
        }
        Record::Rename { id, to } => {
            if let Some(node) = state.files.get_mut(id) {
                state.names.remove(&node.record.name);
                node.record.name = to.clone();
                if let Some(old) = state.names.insert(to.clone(), *id) {
                    if old != *id {
                        state.files.remove(&old);
                    }
                }
            }
        }
        Record::Delete { id } => {
            if let Some(node) = state.files.remove(id) {
                if state.names.get(&node.record.name) == Some(id) {
                    state.names.remove(&node.record.name);
                }
            }
        }
        Record::Mkdir { path } => {
            state.dirs.insert(path.clone());
        }
        Record::Rmdir { path } => {
            state.dirs.remove(path);
        }
    }
}
