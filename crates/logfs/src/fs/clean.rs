//! Checkpoints and cleaning. A checkpoint writes the root directory's changed buckets and every dirty node,
//! then a record of the node address table; only then are prefree zones reset, one after another, as Linux
//! 5.16's F2FS does under its checkpoint (f2fs_clear_prefree_segments issues each zone reset and waits). The
//! cleaner moves a victim zone's valid blocks (data to the cold data log, nodes to their node log), which
//! leaves the zone prefree for the next checkpoint.

use std::collections::BTreeSet;

use zonelab_runtime::{CommandQueue, HostExt, IoData};
use zonelab_zns::ZoneSendAction;

use super::{device, LogFs, LogFsError, Page, CHECKPOINT_ZONES, COLD_DATA, HOT_DATA, NODE_LOGS, ROOT_INO};
use crate::format::{encode_bucket, Checkpoint, LogPosition, BLOCK};
use crate::fs::log::Payload;
use crate::segments::{Owner, SectionUse, Victim};

impl<Q: CommandQueue> LogFs<Q> {
    /// Free zones below which writers clean before they write (F2FS's f2fs_balance_fs): half the
    /// overprovision, and never fewer than the logs need.
    fn foreground_threshold(&self) -> u32 {
        (self.overprovision_zones() / 2).max(super::LOGS as u32 + 2)
    }

    fn free_zones(&self) -> u32 {
        self.state.borrow().segments.free_zones()
    }

    fn excess_prefree(&self) -> bool {
        let state = self.state.borrow();
        let prefree = f64::from(state.segments.prefree_zones());
        prefree > f64::from(state.segments.main_zones()) * self.options.prefree_checkpoint_pct / 100.0
    }

    /// Cleans in the foreground while free zones are short, and checkpoints when many zones are prefree or
    /// the interval has passed (F2FS's f2fs_balance_fs and f2fs_balance_fs_bg). Called before a change takes
    /// the checkpoint lock; one caller at a time does the work, the others find it done.
    pub(crate) async fn balance(&self) -> Result<(), LogFsError> {
        let threshold = self.foreground_threshold();
        let needed = || self.free_zones() < threshold || self.excess_prefree() || self.checkpoint_due();
        if !needed() {
            return Ok(());
        }
        let _cleaner = self.cleaner.lock().await;
        let mut rounds = 0;
        while self.free_zones() < threshold && rounds <= self.geo.zones {
            rounds += 1;
            if self.state.borrow().segments.prefree_zones() > 0 {
                self.checkpoint().await?;
                continue;
            }
            let now_s = self.queue.now_ns() as f64 / 1e9;
            let Some(victim) = self.state.borrow().segments.victim(self.options.foreground_victim, now_s) else {
                break;
            };
            let _op = self.checkpoint_lock.read().await;
            self.traced("cleaning", Some(victim), self.clean_zone(victim)).await?;
            self.stats.borrow_mut().foreground_cleanings += 1;
        }
        if self.excess_prefree() || self.checkpoint_due() {
            self.checkpoint().await?;
        }
        Ok(())
    }

    fn checkpoint_due(&self) -> bool {
        self.queue.now_ns().saturating_sub(self.state.borrow().last_checkpoint_ns)
            >= self.options.checkpoint_interval_ns
    }

    /// Moves every valid block out of `zone` (under the caller's shared checkpoint lock).
    async fn clean_zone(&self, zone: u32) -> Result<(), LogFsError> {
        let blocks = self.state.borrow().segments.valid_blocks(zone);
        let mut data: Vec<Payload> = Vec::new();
        let mut node_inos = BTreeSet::new();
        let mut run: Vec<(u32, u64, u32)> = Vec::new();
        for (addr, owner) in blocks {
            match owner {
                Owner::Data { ino, block } => {
                    if run.last().is_some_and(|&(_, _, last)| last + 1 != addr)
                        || run.len() as u32 == self.geo.max_blocks
                    {
                        self.read_run(&run, &mut data).await?;
                        run.clear();
                    }
                    run.push((ino, block, addr));
                }
                Owner::Node { ino, index } => {
                    if let Some(inode) = self.state.borrow_mut().inodes.get_mut(&ino) {
                        inode.dirty_nodes.insert(index);
                        node_inos.insert(ino);
                    }
                }
            }
        }
        self.read_run(&run, &mut data).await?;
        let moved = data.len() as u64;
        if !data.is_empty() {
            self.append(COLD_DATA, data).await?;
        }
        for &ino in &node_inos {
            self.write_nodes(ino, false).await?;
        }
        self.stats.borrow_mut().blocks_moved += moved + node_inos.len() as u64;
        Ok(())
    }

    /// Reads a run of valid data blocks for the cleaner (cached pages need no read).
    async fn read_run(&self, run: &[(u32, u64, u32)], out: &mut Vec<Payload>) -> Result<(), LogFsError> {
        let Some(&(_, _, first)) = run.first() else { return Ok(()) };
        let bytes = self.read_blocks(first, run.len() as u32).await?;
        for (i, &(ino, block, addr)) in run.iter().enumerate() {
            let page = Page::from_bytes(&bytes[i * BLOCK as usize..(i + 1) * BLOCK as usize]);
            out.push(Payload::Data { ino, block, page, moved_from: Some(addr) });
        }
        Ok(())
    }

    /// Takes a checkpoint, then resets the zones that were prefree.
    pub async fn checkpoint(&self) -> Result<(), LogFsError> {
        let _all = self.checkpoint_lock.write().await;
        self.traced("checkpoint", None, self.checkpoint_locked()).await
    }

    /// The checkpoint's work, under the checkpoint lock held alone.
    async fn checkpoint_locked(&self) -> Result<(), LogFsError> {
        let buckets: Vec<Payload> = {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let dirty = std::mem::take(&mut state.dirty_buckets);
            let mut entries: Vec<Vec<(&str, u32)>> = vec![Vec::new(); state.buckets as usize];
            for (name, &ino) in &state.names {
                let bucket = self.bucket_of(name, state.buckets);
                if dirty.contains(&bucket) {
                    entries[bucket as usize].push((name.as_str(), ino));
                }
            }
            dirty
                .iter()
                .map(|&bucket| Payload::Data {
                    ino: ROOT_INO,
                    block: u64::from(bucket),
                    page: Page::from_bytes(&encode_bucket(&entries[bucket as usize])),
                    moved_from: None,
                })
                .collect()
        };
        if !buckets.is_empty() {
            self.append(HOT_DATA, buckets).await?;
        }
        let dirty_inos: Vec<u32> = self
            .state
            .borrow()
            .inodes
            .iter()
            .filter(|(_, inode)| !inode.dirty_nodes.is_empty())
            .map(|(&ino, _)| ino)
            .collect();
        for ino in dirty_inos {
            self.write_nodes(ino, false).await?;
        }
        self.flush().await?;
        let mut node_logs = Vec::new();
        for &log in &NODE_LOGS {
            let head = self.logs[log].lock().await;
            node_logs.push(head.zone.map(|zone| LogPosition { zone, offset: head.next }));
        }
        let (record, version) = {
            let state = self.state.borrow();
            let version = state.checkpoint_version + 1;
            let nat = state.inodes.iter().map(|(&ino, inode)| (ino, inode.nodes.clone())).collect();
            let checkpoint = Checkpoint { version, next_ino: state.next_ino, next_seq: state.next_seq, node_logs, nat };
            (checkpoint.encode(), version)
        };
        self.write_record(record).await?;
        let prefree: Vec<u32> = {
            let mut state = self.state.borrow_mut();
            state.checkpoint_version = version;
            state.last_checkpoint_ns = self.queue.now_ns();
            for inode in state.inodes.values_mut() {
                inode.dentry_checkpointed = true;
                inode.needs_checkpoint = false;
            }
            let first = state.segments.first_main;
            (first..self.geo.zones).filter(|&zone| state.segments.use_of(zone) == SectionUse::Prefree).collect()
        };
        for zone in prefree {
            self.reset_zone(zone).await?;
            let written = self.state.borrow().segments.written(zone);
            self.state.borrow_mut().segments.reset(zone);
            let mut stats = self.stats.borrow_mut();
            stats.zone_resets += 1;
            if written < self.geo.blocks_per_zone {
                stats.partial_zone_resets += 1;
            }
        }
        self.stats.borrow_mut().checkpoints += 1;
        Ok(())
    }

    pub(crate) async fn reset_zone(&self, zone: u32) -> Result<(), LogFsError> {
        let zslba = u64::from(zone) * self.geo.zone_size_lba;
        self.inflight.set(self.inflight.get() + 1);
        let result = self.queue.zone_send(zslba, ZoneSendAction::Reset, false).await;
        self.inflight.set(self.inflight.get() - 1);
        result.map_err(device("zone reset"))
    }

    /// Writes a checkpoint record after the last one; when the zone has no room, the other checkpoint zone is
    /// reset and takes it (the newest record always survives in one of the two).
    async fn write_record(&self, record: Vec<u8>) -> Result<(), LogFsError> {
        let blocks = (record.len() as u64 / BLOCK) as u32;
        let (zone, next) = {
            let state = self.state.borrow();
            (state.checkpoint_zone, state.checkpoint_next)
        };
        let (zone, next) = if next + blocks > self.geo.blocks_per_zone {
            let other = (zone + 1) % CHECKPOINT_ZONES;
            self.reset_zone(other).await?;
            (other, 0)
        } else {
            (zone, next)
        };
        if blocks > self.geo.blocks_per_zone {
            let capacity = self.capacity_blocks();
            return Err(LogFsError::NoSpace { needed: u64::from(blocks), free: 0, capacity });
        }
        let mut offset = 0;
        while offset < blocks {
            let count = (blocks - offset).min(self.geo.max_blocks);
            let addr = zone * self.geo.blocks_per_zone + next + offset;
            let bytes = record[(offset as u64 * BLOCK) as usize..((offset + count) as u64 * BLOCK) as usize].to_vec();
            self.inflight.set(self.inflight.get() + 1);
            let result = self.queue.write(self.geo.lba(addr), IoData::Bytes(bytes)).await;
            self.inflight.set(self.inflight.get() - 1);
            result.map_err(device("checkpoint write"))?;
            offset += count;
        }
        self.flush().await?;
        let mut state = self.state.borrow_mut();
        state.checkpoint_zone = zone;
        state.checkpoint_next = next + blocks;
        drop(state);
        self.stats.borrow_mut().checkpoint_blocks_written += u64::from(blocks);
        Ok(())
    }

    /// The background thread's work until `stop` says so: a checkpoint every interval, and one zone cleaned
    /// per period while no command of the file system is in flight (F2FS's gc thread cleans only when idle).
    pub async fn background(&self, stop: impl Fn() -> bool) -> Result<(), LogFsError> {
        let period = self.options.background_gc_period_ns;
        let tick = if period > 0 {
            period.min(self.options.checkpoint_interval_ns)
        } else {
            self.options.checkpoint_interval_ns
        };
        loop {
            self.queue.sleep(tick.max(1)).await;
            if stop() {
                return Ok(());
            }
            if self.checkpoint_due() {
                self.checkpoint().await?;
            }
            if period == 0 || self.inflight.get() > 0 {
                continue;
            }
            let _cleaner = self.cleaner.lock().await;
            let now_s = self.queue.now_ns() as f64 / 1e9;
            let victim = self.state.borrow().segments.victim(self.options.background_victim, now_s);
            if let Some(zone) = victim {
                let _op = self.checkpoint_lock.read().await;
                self.traced("cleaning", Some(zone), self.clean_zone(zone)).await?;
                self.stats.borrow_mut().background_cleanings += 1;
            }
        }
    }

    /// The foreground policy's victim now, for tests and tools.
    pub fn victim(&self, policy: Victim) -> Option<u32> {
        let now_s = self.queue.now_ns() as f64 / 1e9;
        self.state.borrow().segments.victim(policy, now_s)
    }
}
