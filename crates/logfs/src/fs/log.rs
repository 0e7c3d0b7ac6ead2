//! Writing to the logs: blocks go at a log's head in order, one write in flight per log (F2FS serialises each
//! log's bios on a zoned device the same way), and each block's new address is recorded when its write
//! completes.

use zonelab_runtime::{CommandQueue, HostExt, IoData};

use super::{device, LogFs, LogFsError, Page, HOT_DATA, HOT_NODE, WARM_DATA, WARM_NODE};
use crate::format::{
    node_range, nodes_for, Addr, InodeHead, NodeBlock, BLOCK, FLAG_DENTRY, FLAG_FSYNC, FLAG_FSYNC_LAST, NULL_ADDR,
};
use crate::segments::Owner;

/// One block bound for a log.
pub(crate) enum Payload {
    /// File data. `moved_from`: a cleaner's copy, recorded only if the block still lies there.
    Data {
        ino: u32,
        block: u64,
        page: Page,
        moved_from: Option<Addr>,
    },
    Node {
        ino: u32,
        index: u32,
        bytes: Vec<u8>,
    },
}

impl<Q: CommandQueue> LogFs<Q> {
    /// Appends `blocks` to log `log` in order, taking fresh zones as the log fills them.
    pub(crate) async fn append(&self, log: usize, blocks: Vec<Payload>) -> Result<(), LogFsError> {
        let mut head = self.logs[log].lock().await;
        let mut rest = blocks.into_iter().peekable();
        let per_zone = self.geo.blocks_per_zone;
        while rest.peek().is_some() {
            let zone = match head.zone {
                Some(zone) => zone,
                None => {
                    let taken = self.state.borrow_mut().segments.take_free(log);
                    let Some(zone) = taken else {
                        let pending: Vec<Payload> = rest.collect();
                        self.failed(pending);
                        let capacity = self.capacity_blocks();
                        return Err(LogFsError::NoSpace { needed: 1, free: 0, capacity });
                    };
                    head.zone = Some(zone);
                    head.next = 0;
                    zone
                }
            };
            let count = (per_zone - head.next).min(self.geo.max_blocks);
            let chunk: Vec<Payload> = rest.by_ref().take(count as usize).collect();
            let chunk_len = chunk.len() as u32;
            let addr = self.state.borrow().segments.addr(zone, head.next);
            let data = Self::io_data(&chunk);
            head.next += chunk_len;
            self.inflight.set(self.inflight.get() + 1);
            let written = self.queue.write(self.geo.lba(addr), data).await;
            self.inflight.set(self.inflight.get() - 1);
            let failed = written.is_err();
            let lost = if failed {
                chunk
            } else {
                self.landed(addr, chunk);
                Vec::new()
            };
            {
                // Retired only once its blocks are counted valid: a zone with none is prefree. A failed write
                // leaves the write pointer unknown, so the log leaves the zone.
                let mut state = self.state.borrow_mut();
                state.segments.advance(zone, head.next);
                if head.next == per_zone || failed {
                    state.segments.retire(zone);
                    head.zone = None;
                }
            }
            if let Err(status) = written {
                self.failed(lost.into_iter().chain(rest).collect());
                return Err(device("log write")(status));
            }
        }
        Ok(())
    }

    fn io_data(chunk: &[Payload]) -> IoData {
        let zeros = chunk.iter().all(|p| matches!(p, Payload::Data { page: Page::Zeros, .. }));
        if zeros {
            return IoData::Zeros(chunk.len() as u64 * BLOCK);
        }
        let mut bytes = Vec::with_capacity(chunk.len() * BLOCK as usize);
        for payload in chunk {
            match payload {
                Payload::Data { page: Page::Zeros, .. } => bytes.resize(bytes.len() + BLOCK as usize, 0),
                Payload::Data { page: Page::Bytes(b), .. } => bytes.extend_from_slice(b),
                Payload::Node { bytes: b, .. } => bytes.extend_from_slice(b),
            }
        }
        IoData::Bytes(bytes)
    }

    /// Records where each block of a completed write landed.
    fn landed(&self, first: Addr, chunk: Vec<Payload>) {
        let now_s = self.queue.now_ns() as f64 / 1e9;
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let mut stats = self.stats.borrow_mut();
        let mut evictions = Vec::new();
        for (i, payload) in chunk.into_iter().enumerate() {
            let addr = first + i as Addr;
            match payload {
                Payload::Data { ino, block, page, moved_from } => {
                    stats.data_blocks_written += 1;
                    let Some(inode) = state.inodes.get_mut(&ino) else { continue };
                    if moved_from.is_none() && inode.writeback.remove(&block).is_some() {
                        state.writeback_blocks -= 1;
                    }
                    let current = inode.blocks.get(block as usize).copied().unwrap_or(NULL_ADDR);
                    let stale = block >= inode.size.div_ceil(BLOCK) || moved_from.is_some_and(|from| from != current);
                    if stale {
                        continue;
                    }
                    if inode.blocks.len() <= block as usize {
                        inode.blocks.resize(block as usize + 1, NULL_ADDR);
                    }
                    inode.blocks[block as usize] = addr;
                    inode.dirty_node_of(block);
                    state.segments.validate(addr, Owner::Data { ino, block }, now_s);
                    if current != NULL_ADDR {
                        state.segments.invalidate(current);
                    }
                    if !inode.dirty_pages.contains_key(&block) {
                        inode.cached.insert(block);
                        evictions.extend(state.cache.insert(ino, block, page));
                    }
                }
                Payload::Node { ino, index, .. } => {
                    stats.node_blocks_written += 1;
                    let Some(inode) = state.inodes.get_mut(&ino) else { continue };
                    let Some(slot) = inode.nodes.get_mut(index as usize) else { continue };
                    let old = std::mem::replace(slot, addr);
                    state.segments.validate(addr, Owner::Node { ino, index }, now_s);
                    if old != NULL_ADDR {
                        state.segments.invalidate(old);
                    }
                }
            }
        }
        for (ino, block) in evictions {
            if let Some(inode) = state.inodes.get_mut(&ino) {
                inode.cached.remove(block);
            }
        }
        drop(stats);
        self.writeback_done.notify_waiters();
    }

    /// A write failed: its pages are dirty again and its nodes will be written again.
    fn failed(&self, payloads: Vec<Payload>) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        for payload in payloads {
            match payload {
                Payload::Data { ino, block, page, moved_from: None } => {
                    let Some(inode) = state.inodes.get_mut(&ino) else { continue };
                    if inode.writeback.remove(&block).is_some() {
                        state.writeback_blocks -= 1;
                        if let std::collections::btree_map::Entry::Vacant(slot) = inode.dirty_pages.entry(block) {
                            slot.insert(page);
                            state.dirty_bytes += BLOCK;
                        }
                    }
                }
                Payload::Data { .. } => {}
                Payload::Node { ino, index, .. } => {
                    if let Some(inode) = state.inodes.get_mut(&ino) {
                        inode.dirty_nodes.insert(index);
                    }
                }
            }
        }
        self.writeback_done.notify_waiters();
    }

    /// Writes a file's dirty pages to its data log (the hot log for the directory, warm for files), after
    /// any write-back of it already under way.
    pub(crate) async fn write_back(&self, ino: u32) -> Result<(), LogFsError> {
        self.wait_writeback(ino).await;
        let (log, payloads) = {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let Some(inode) = state.inodes.get_mut(&ino) else { return Ok(()) };
            let pages = std::mem::take(&mut inode.dirty_pages);
            let count = pages.len() as u64;
            let payloads: Vec<Payload> = pages
                .into_iter()
                .map(|(block, page)| {
                    inode.writeback.insert(block, page.clone());
                    Payload::Data { ino, block, page, moved_from: None }
                })
                .collect();
            state.dirty_bytes -= count * BLOCK;
            state.writeback_blocks += count;
            (if inode.directory { HOT_DATA } else { WARM_DATA }, payloads)
        };
        if payloads.is_empty() {
            return Ok(());
        }
        self.append(log, payloads).await
    }

    /// Writes a file's dirty nodes to its node log. For fsync they carry the marks roll-forward recovery
    /// looks for, and the inode goes with them whenever its directory entry is not checkpointed yet.
    pub(crate) async fn write_nodes(&self, ino: u32, fsync: bool) -> Result<(), LogFsError> {
        let (log, payloads) = {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let Some(inode) = state.inodes.get_mut(&ino) else { return Ok(()) };
            let needed = nodes_for(inode.size.div_ceil(BLOCK)) as usize;
            if inode.nodes.len() < needed {
                inode.nodes.resize(needed, NULL_ADDR);
            }
            let mut indices = std::mem::take(&mut inode.dirty_nodes);
            if fsync && (!inode.dentry_checkpointed || inode.nodes[0] == NULL_ADDR) {
                indices.insert(0);
            }
            indices.retain(|&index| (index as usize) < inode.nodes.len());
            let last = indices.last().copied();
            let mut payloads = Vec::with_capacity(indices.len());
            for index in indices {
                let (first, covered) = node_range(index);
                let end = (first + covered).min(inode.blocks.len() as u64).max(first);
                let addrs = inode.blocks[first.min(inode.blocks.len() as u64) as usize..end as usize].to_vec();
                let mut flags = 0;
                if fsync {
                    flags |= FLAG_FSYNC;
                    if Some(index) == last {
                        flags |= FLAG_FSYNC_LAST;
                    }
                    if index == 0 && !inode.dentry_checkpointed {
                        flags |= FLAG_DENTRY;
                    }
                }
                let node = NodeBlock {
                    ino,
                    index,
                    checkpoint: state.checkpoint_version,
                    seq: state.next_seq,
                    flags,
                    inode: (index == 0).then(|| InodeHead {
                        size: inode.size,
                        mtime_ns: inode.mtime_ns,
                        directory: inode.directory,
                        name: inode.name.clone(),
                    }),
                    addrs,
                };
                state.next_seq += 1;
                payloads.push(Payload::Node { ino, index, bytes: node.encode() });
            }
            (if inode.directory { HOT_NODE } else { WARM_NODE }, payloads)
        };
        if payloads.is_empty() {
            return Ok(());
        }
        self.append(log, payloads).await
    }
}
