//! The journal's commits and rolls, and replay at mount.

use zonelab_runtime::{CommandQueue, HostExt, IoData};
use zonelab_zns::ZoneSendAction;

use super::{Node, Result, State, ZonedFs, ZonedFsError, META_ZONES};
use crate::journal::{self, FileRecord, Record, FORMAT_VERSION, SUPERBLOCK_MAGIC};

impl<Q: CommandQueue + Clone + 'static> ZonedFs<Q> {
    /// Makes `records` durable: the device flushed first (so data they point at is durable), then the records
    /// written at the journal's write pointer, then flushed. A full journal zone rolls to the other one.
    pub(super) async fn commit(&self, records: Vec<Record>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
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
