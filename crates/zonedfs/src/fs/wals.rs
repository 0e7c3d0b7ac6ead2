//! WAL files through the WAL library (`zonelab_host::wal`, seed 001's two designs): a file named `*.log` created
//! under `wal=zwal|conventional` is a log in empty zones of its own, taken one at a time as it grows and
//! journaled before the log writes into them. Each append is one log record; a sync is the log's sync (its
//! buffer written, every append in flight waited for, a flush), with no journal commit. The mount recovers
//! each log through the library, which returns the longest prefix of records with no hole: that prefix is the
//! file's bytes.

use std::rc::Rc;

use zonelab_host::{Wal, WalConfig, WalError, ZoneSource};
use zonelab_runtime::sync::Mutex;
use zonelab_runtime::CommandQueue;

use super::{Purpose, Result, SharedWal, ZonedFs, ZonedFsError};
use crate::journal::{Record, WalLayout};

impl From<WalError> for ZonedFsError {
    fn from(error: WalError) -> Self {
        match error {
            WalError::Device(status) => ZonedFsError::Device(status),
            WalError::Full(_) => ZonedFsError::NoSpace,
            other => ZonedFsError::Wal(other.to_string()),
        }
    }
}

impl<Q: CommandQueue + Clone + 'static> ZonedFs<Q> {
    /// Appends `data` to a WAL file's log as one record, and to its bytes in memory.
    pub(super) async fn append_to_wal(&self, id: u64, data: &[u8]) -> Result<()> {
        let wal = self.wal_for(id).await?;
        wal.lock().await.append(data).await?;
        let mut state = self.inner.state.borrow_mut();
        if let Some(node) = state.files.get_mut(&id) {
            node.buffer.extend_from_slice(data);
            state.stats.bytes_written += data.len() as u64;
        }
        Ok(())
    }

    /// Makes every record appended to a WAL file durable.
    pub(super) async fn sync_wal(&self, id: u64) -> Result<()> {
        let wal = self.inner.wals.borrow().get(&id).cloned();
        match wal {
            Some(wal) => Ok(wal.lock().await.sync().await?),
            None => Ok(()),
        }
    }

    /// The log of a WAL file, started with its first zone at its first append.
    async fn wal_for(&self, id: u64) -> Result<SharedWal<Q>> {
        if let Some(wal) = self.inner.wals.borrow().get(&id) {
            return Ok(Rc::clone(wal));
        }
        // One first append takes the first zone; another waits for it and finds the log.
        let Some(starting) = self.inner.state.borrow().files.get(&id).map(|node| Rc::clone(&node.flushing)) else {
            return Err(ZonedFsError::NotWritable(id));
        };
        let _one_start = starting.lock().await;
        if let Some(wal) = self.inner.wals.borrow().get(&id) {
            return Ok(Rc::clone(wal));
        }
        // The layout holds the zone just taken, its first.
        self.take_wal_zone(id).await?;
        let wal = Wal::new(self.inner.queue.clone(), self.wal_config(&self.wal_layout(id)?))?
            .with_zone_source(self.zone_source(id));
        let wal = Rc::new(Mutex::new(wal));
        self.inner.wals.borrow_mut().insert(id, Rc::clone(&wal));
        Ok(wal)
    }

    fn wal_layout(&self, id: u64) -> Result<WalLayout> {
        let state = self.inner.state.borrow();
        let node = state.files.get(&id).ok_or_else(|| ZonedFsError::NotFound(format!("file id {id}")))?;
        Ok(node.record.wal.clone().expect("only WAL files have logs"))
    }

    /// The library's configuration for a log laid out as `layout`, with the mount's buffer, depth and barrier.
    fn wal_config(&self, layout: &WalLayout) -> WalConfig {
        let options = &self.inner.options;
        WalConfig {
            design: layout.design,
            zones: layout.zones.clone(),
            buffer_bytes: options.wal_buffer_bytes,
            queue_depth: options.wal_queue_depth,
            barrier_bytes: options.wal_barrier_bytes,
            recovery_read_bytes: 0,
        }
    }

    /// Takes an empty zone for a WAL file's log and journals it before the log may write there. The zones the
    /// log had are full: it moves on only when no block is left in them.
    async fn take_wal_zone(&self, id: u64) -> Result<u32> {
        let zone = self.acquire(0, None, Purpose::Wal).await?;
        let owned = {
            let mut state = self.inner.state.borrow_mut();
            let previous = match state.files.get_mut(&id).and_then(|node| node.record.wal.as_mut()) {
                Some(layout) => {
                    layout.zones.push(zone);
                    layout.zones[..layout.zones.len() - 1].to_vec()
                }
                None => Vec::new(),
            };
            let owned = state.files.contains_key(&id);
            for earlier in previous {
                state.zones[earlier as usize].full = true;
            }
            if owned {
                state.zones[zone as usize].wal_of = Some(id);
                state.stats.wal_zones += 1;
            }
            owned
        };
        let committed = if owned { self.commit(vec![Record::WalZone { id, zone }]).await } else { Ok(()) };
        self.release(zone);
        committed?;
        if !owned {
            return Err(ZonedFsError::NotFound(format!("file id {id}")));
        }
        Ok(zone)
    }

    /// What a log calls when its zones are full. It holds the file system weakly: a log is kept by it.
    fn zone_source(&self, id: u64) -> ZoneSource {
        let inner = Rc::downgrade(&self.inner);
        Box::new(move || {
            let inner = inner.clone();
            Box::pin(async move {
                let fs = ZonedFs { inner: inner.upgrade()? };
                fs.take_wal_zone(id).await.ok()
            })
        })
    }

    /// At mount: every WAL file's log read back through the library; its recovered records are the file.
    pub(super) async fn recover_wals(&self) -> Result<()> {
        let logs: Vec<(u64, WalLayout)> = {
            let state = self.inner.state.borrow();
            state
                .files
                .iter()
                .filter_map(|(id, node)| node.record.wal.clone().map(|layout| (*id, layout)))
                .filter(|(_, layout)| !layout.zones.is_empty())
                .collect()
        };
        for (id, layout) in logs {
            let mut wal =
                Wal::new(self.inner.queue.clone(), self.wal_config(&layout))?.with_zone_source(self.zone_source(id));
            let records = wal.recover().await?;
            let mut state = self.inner.state.borrow_mut();
            state.stats.bytes_read += wal.last_recovery().bytes_read;
            if let Some(node) = state.files.get_mut(&id) {
                node.buffer = records.concat();
            }
            self.inner.wals.borrow_mut().insert(id, Rc::new(Mutex::new(wal)));
        }
        Ok(())
    }

    /// Drops the logs of WAL files that are gone, once no write of theirs is in flight: their zones are about
    /// to be reset.
    pub(super) async fn retire_wals(&self) {
        let gone: Vec<SharedWal<Q>> = {
            let state = self.inner.state.borrow();
            let mut wals = self.inner.wals.borrow_mut();
            let ids: Vec<u64> = wals.keys().filter(|id| !state.files.contains_key(id)).copied().collect();
            ids.iter().filter_map(|id| wals.remove(id)).collect()
        };
        for wal in gone {
            // A write that fails now is of a file that no longer exists.
            let _ = wal.lock().await.quiesce().await;
        }
    }
}
