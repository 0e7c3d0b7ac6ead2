//! Format and mount. A mount loads the newest whole checkpoint, reads every node it names, rebuilds block
//! validity from them, then rolls forward: nodes written by fsync after that checkpoint (found in the node
//! logs' zones past the checkpoint's positions and in zones that held nothing valid then) are applied batch
//! by batch in the order written, a batch only when its last node is there. Zones left partly written are
//! finished, zones with nothing valid are reset by the checkpoint the mount ends with.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use zonelab_runtime::sync::{Mutex, Notify, RwLock};
use zonelab_runtime::{CommandQueue, HostExt};
use zonelab_zns::{ReportFilter, ZoneDescriptor, ZoneSendAction, ZoneState};

use super::{
    device, Geo, Inode, LogFs, LogFsError, LogFsOptions, LogHead, PageCache, State, CHECKPOINT_ZONES, LOGS, ROOT_INO,
};
use crate::format::{
    decode_bucket, node_range, Checkpoint, NodeBlock, BLOCK, FLAG_DENTRY, FLAG_FSYNC, FLAG_FSYNC_LAST, NULL_ADDR,
};
use crate::segments::{Owner, SectionUse, SegmentTable};

/// What a mount found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MountReport {
    pub checkpoint_version: u64,
    pub files: u64,
    /// Nodes applied by roll-forward, and the fsyncs they came from.
    pub rolled_forward_nodes: u64,
    pub rolled_forward_fsyncs: u64,
    /// Zones written partly and finished; zones with nothing valid, reset.
    pub zones_finished: u64,
    pub zones_reset: u64,
}

impl<Q: CommandQueue> LogFs<Q> {
    fn empty(queue: Q, options: LogFsOptions) -> Result<LogFs<Q>, LogFsError> {
        let geometry = queue.geometry();
        let lba = u64::from(geometry.lba_size);
        if !BLOCK.is_multiple_of(lba) {
            return Err(LogFsError::NotFormatted(format!("LBA size {lba} does not divide the 4096-byte block")));
        }
        let lbas_per_block = BLOCK / lba;
        let needed = CHECKPOINT_ZONES + 2 * LOGS as u32 + 3;
        if geometry.zones < needed {
            return Err(LogFsError::TooSmall { zones: geometry.zones, needed });
        }
        let max_blocks = match geometry.max_transfer_lba {
            Some(lbas) => (lbas / lbas_per_block).max(1) as u32,
            None => 256,
        };
        let geo = Geo {
            lbas_per_block,
            zone_size_lba: geometry.zone_size_lba,
            blocks_per_zone: (geometry.zone_cap_lba / lbas_per_block) as u32,
            zones: geometry.zones,
            max_blocks,
        };
        let state = State {
            inodes: BTreeMap::new(),
            names: BTreeMap::new(),
            buckets: 1,
            dirty_buckets: BTreeSet::new(),
            bucket_bytes: vec![0],
            segments: SegmentTable::new(geo.zones, CHECKPOINT_ZONES, geo.blocks_per_zone),
            cache: PageCache::new((options.cache_bytes / BLOCK) as usize),
            dirty_bytes: 0,
            writeback_blocks: 0,
            next_ino: ROOT_INO + 1,
            next_seq: 1,
            checkpoint_version: 0,
            checkpoint_zone: 0,
            checkpoint_next: 0,
            last_checkpoint_ns: queue.now_ns(),
        };
        Ok(LogFs {
            queue,
            options,
            geo,
            state: RefCell::new(state),
            logs: (0..LOGS).map(|_| Mutex::new(LogHead::default())).collect(),
            checkpoint_lock: RwLock::new(),
            cleaner: Mutex::new(()),
            writeback_done: Notify::new(),
            stats: RefCell::default(),
            inflight: Cell::new(0),
            activity: RefCell::new(None),
        })
    }

    /// Formats the device (every zone reset) and mounts the empty file system.
    pub async fn format(queue: Q, options: LogFsOptions) -> Result<LogFs<Q>, LogFsError> {
        let fs = Self::empty(queue, options)?;
        fs.queue.zone_send(0, ZoneSendAction::Reset, true).await.map_err(device("format reset"))?;
        {
            let mut state = fs.state.borrow_mut();
            let mut root =
                Inode { name: "/".into(), directory: true, size: BLOCK, nodes: vec![NULL_ADDR], ..Inode::default() };
            root.dirty_nodes.insert(0);
            state.inodes.insert(ROOT_INO, root);
            state.dirty_buckets.insert(0);
        }
        fs.checkpoint().await?;
        Ok(fs)
    }

    async fn report(queue: &Q) -> Result<Vec<ZoneDescriptor>, LogFsError> {
        let geometry = queue.geometry();
        let mut zones = Vec::with_capacity(geometry.zones as usize);
        while (zones.len() as u32) < geometry.zones {
            let slba = zones.len() as u64 * geometry.zone_size_lba;
            let report = queue.report_zones(slba, ReportFilter::All, 1024).await.map_err(device("zone report"))?;
            if report.zones.is_empty() {
                break;
            }
            zones.extend(report.zones);
        }
        Ok(zones)
    }

    /// Blocks written in a zone, from its report.
    fn written_blocks(&self, zone: &ZoneDescriptor) -> u32 {
        match zone.state {
            ZoneState::Full => self.geo.blocks_per_zone,
            ZoneState::Empty | ZoneState::Offline => 0,
            _ => ((zone.wp_lba - zone.start_lba) / self.geo.lbas_per_block) as u32,
        }
    }

    /// The newest checkpoint record in the two checkpoint zones: (record, zone, the block after it). Records
    /// follow one another from a zone's start, so the only thing a crash leaves that does not check is a last
    /// record cut by the write pointer, or (in a zone a power loss finished) zeroed blocks at its end. Any
    /// other record that does not check is damage, and damage in the zone that may hold the newest
    /// checkpoint (not older than the other's newest) fails the mount rather than fall back to an older one.
    async fn newest_checkpoint(&self, zones: &[ZoneDescriptor]) -> Result<Option<(Checkpoint, u32, u32)>, LogFsError> {
        let mut newest: Option<(Checkpoint, u32, u32)> = None;
        let mut damaged: Vec<(u32, u32, Option<u64>)> = Vec::new();
        for zone in 0..CHECKPOINT_ZONES {
            let descriptor = &zones[zone as usize];
            let lost_tail = descriptor.may_have_lost_tail();
            let written = self.written_blocks(descriptor);
            let mut offset = 0;
            let mut zone_newest = None;
            while offset < written {
                let addr = zone * self.geo.blocks_per_zone + offset;
                let header = self.read_blocks(addr, 1).await?;
                let record = match Checkpoint::payload_len(&header) {
                    Some(len) if offset + 1 + len.div_ceil(BLOCK) as u32 > written => break,
                    Some(len) => {
                        let blocks = len.div_ceil(BLOCK) as u32;
                        let mut payload = Vec::new();
                        let mut at = 0;
                        while at < blocks {
                            let count = (blocks - at).min(self.geo.max_blocks);
                            payload.extend(self.read_blocks(addr + 1 + at, count).await?);
                            at += count;
                        }
                        Checkpoint::decode(&header, &payload).map(|record| (record, blocks))
                    }
                    None => None,
                };
                let Some((record, blocks)) = record else {
                    if !lost_tail {
                        damaged.push((zone, offset, zone_newest));
                    }
                    break;
                };
                offset += 1 + blocks;
                zone_newest = zone_newest.max(Some(record.version));
                if newest.as_ref().is_none_or(|(known, _, _)| record.version > known.version) {
                    newest = Some((record, zone, offset));
                }
            }
        }
        let newest_version = newest.as_ref().map(|(record, ..)| record.version);
        for (zone, block, zone_newest) in damaged {
            if zone_newest.is_some() && zone_newest < newest_version {
                continue;
            }
            return Err(LogFsError::Corrupt(format!(
                "checkpoint zone {zone}: the record at block {block} does not check, and it is not a record a crash \
                 cut short; it may be the newest checkpoint, so nothing was mounted"
            )));
        }
        Ok(newest)
    }

    async fn read_node(&self, addr: u32) -> Result<Option<NodeBlock>, LogFsError> {
        Ok(NodeBlock::decode(&self.read_blocks(addr, 1).await?))
    }

    /// Mounts a formatted device, recovering what fsync made durable since the last checkpoint.
    pub async fn mount(queue: Q, options: LogFsOptions) -> Result<(LogFs<Q>, MountReport), LogFsError> {
        let fs = Self::empty(queue, options)?;
        let zones = Self::report(&fs.queue).await?;
        let Some((checkpoint, cp_zone, cp_next)) = fs.newest_checkpoint(&zones).await? else {
            return Err(LogFsError::NotFormatted("no valid checkpoint in zones 0 and 1".into()));
        };
        let mut report = MountReport { checkpoint_version: checkpoint.version, ..MountReport::default() };
        // The checkpoint's files, node by node.
        let mut inodes = BTreeMap::new();
        for (ino, nodes) in &checkpoint.nat {
            let mut inode = Inode { nodes: nodes.clone(), dentry_checkpointed: true, ..Inode::default() };
            for (index, &addr) in nodes.iter().enumerate() {
                if addr == NULL_ADDR {
                    continue;
                }
                let node = fs.read_node(addr).await?.filter(|n| n.ino == *ino && n.index == index as u32);
                let Some(node) = node else {
                    return Err(LogFsError::NotFormatted(format!(
                        "checkpoint {} names node {index} of inode {ino} at block {addr}, which holds no such node",
                        checkpoint.version
                    )));
                };
                apply_node(&mut inode, &node);
            }
            inodes.insert(*ino, inode);
        }
        let mut valid_zones = BTreeSet::new();
        for inode in inodes.values() {
            for &addr in inode.blocks.iter().chain(&inode.nodes) {
                if addr != NULL_ADDR {
                    valid_zones.insert(addr / fs.geo.blocks_per_zone);
                }
            }
        }
        // Roll-forward: fsynced nodes written after the checkpoint.
        let mut scan: Vec<(u32, u32)> = Vec::new();
        for position in checkpoint.node_logs.iter().flatten() {
            scan.push((position.zone, position.offset));
        }
        for zone in CHECKPOINT_ZONES..fs.geo.zones {
            if !valid_zones.contains(&zone) && !scan.iter().any(|&(z, _)| z == zone) {
                scan.push((zone, 0));
            }
        }
        let mut found: Vec<(u32, NodeBlock)> = Vec::new();
        let node_logs = checkpoint.node_logs.iter().flatten().count();
        for (position, (zone, from)) in scan.into_iter().enumerate() {
            let descriptor = &zones[zone as usize];
            let written = fs.written_blocks(descriptor);
            // A node log holds nothing but node blocks from the checkpoint's position on, and a crash never
            // leaves one half written (one block, one command): one that does not check is damage, unless a
            // power loss finished the zone and zeroed its end.
            let lost_tail = descriptor.may_have_lost_tail();
            let node_log = position < node_logs;
            let mut offset = from;
            while offset < written {
                let count = (written - offset).min(fs.geo.max_blocks);
                let addr = zone * fs.geo.blocks_per_zone + offset;
                let bytes = fs.read_blocks(addr, count).await?;
                for i in 0..count {
                    let block = &bytes[(i as u64 * BLOCK) as usize..((i + 1) as u64 * BLOCK) as usize];
                    match NodeBlock::decode(block) {
                        Some(node) if node.checkpoint == checkpoint.version && node.flags & FLAG_FSYNC != 0 => {
                            found.push((addr + i, node));
                        }
                        Some(_) => {}
                        // Elsewhere (a log opened after the checkpoint, or data) only what claims to be a node is.
                        None if (node_log && !(lost_tail && block.iter().all(|&byte| byte == 0)))
                            || NodeBlock::has_magic(block) =>
                        {
                            return Err(LogFsError::Corrupt(format!(
                                "node log in zone {zone}: block {} (device block {}) after checkpoint {} is no \
                                 node that checks; fsynced data after it could not be recovered, so nothing was \
                                 mounted",
                                offset + i,
                                addr + i,
                                checkpoint.version
                            )));
                        }
                        None => {}
                    }
                }
                offset += count;
            }
        }
        found.sort_by_key(|(_, node)| node.seq);
        let mut batches: BTreeMap<u32, Vec<(u32, NodeBlock)>> = BTreeMap::new();
        let mut names: BTreeMap<String, u32> = BTreeMap::new();
        let mut next_seq = checkpoint.next_seq;
        let mut next_ino = checkpoint.next_ino;
        for (addr, node) in found {
            let last = node.flags & FLAG_FSYNC_LAST != 0;
            let ino = node.ino;
            batches.entry(ino).or_default().push((addr, node));
            if !last {
                continue;
            }
            report.rolled_forward_fsyncs += 1;
            for (addr, node) in batches.remove(&ino).unwrap_or_default() {
                let inode = inodes.entry(ino).or_insert_with(Inode::default);
                if inode.nodes.len() <= node.index as usize {
                    inode.nodes.resize(node.index as usize + 1, NULL_ADDR);
                }
                inode.nodes[node.index as usize] = addr;
                if node.flags & FLAG_DENTRY != 0 {
                    if let Some(head) = &node.inode {
                        names.insert(head.name.clone(), ino);
                    }
                }
                next_seq = next_seq.max(node.seq + 1);
                next_ino = next_ino.max(ino + 1);
                apply_node(inode, &node);
                report.rolled_forward_nodes += 1;
            }
        }
        // The directory: its buckets, then entries roll-forward recovered.
        let Some(root) = inodes.get(&ROOT_INO) else {
            return Err(LogFsError::NotFormatted(format!("checkpoint {} has no root directory", checkpoint.version)));
        };
        let mut entries = BTreeMap::new();
        for &addr in root.blocks.clone().iter().filter(|&&a| a != NULL_ADDR) {
            let bytes = fs.read_blocks(addr, 1).await?;
            let Some(bucket) = decode_bucket(&bytes) else {
                return Err(LogFsError::NotFormatted(format!("directory bucket at block {addr} is corrupt")));
            };
            entries.extend(bucket);
        }
        for (name, ino) in names {
            entries.entry(name).or_insert(ino);
        }
        // Files no entry names are gone (deleted before the checkpoint's directory was written).
        let named: BTreeSet<u32> = entries.values().copied().chain([ROOT_INO]).collect();
        inodes.retain(|ino, _| named.contains(ino));
        let buckets = (root_size(&inodes) / BLOCK).max(1) as u32;
        {
            let mut state = fs.state.borrow_mut();
            let state = &mut *state;
            let now_s = fs.queue.now_ns() as f64 / 1e9;
            for (&ino, inode) in &mut inodes {
                inode.blocks.truncate(inode.size.div_ceil(BLOCK) as usize);
                for (block, &addr) in inode.blocks.iter().enumerate() {
                    if addr != NULL_ADDR {
                        state.segments.validate(addr, Owner::Data { ino, block: block as u64 }, now_s);
                    }
                }
                for (index, &addr) in inode.nodes.iter().enumerate() {
                    if addr != NULL_ADDR {
                        state.segments.validate(addr, Owner::Node { ino, index: index as u32 }, now_s);
                    }
                }
            }
            report.files = entries.len() as u64;
            state.inodes = inodes;
            state.buckets = buckets;
            state.bucket_bytes = vec![0; buckets as usize];
            state.names = BTreeMap::new();
            for (name, ino) in entries {
                let bucket = fs.bucket_of(&name, buckets);
                state.bucket_bytes[bucket as usize] += crate::format::entry_bytes(&name);
                let recovered = state.inodes.get(&ino).is_some_and(|inode| !inode.dentry_checkpointed);
                if recovered {
                    state.dirty_buckets.insert(bucket);
                }
                state.names.insert(name, ino);
            }
            state.next_ino = next_ino;
            state.next_seq = next_seq;
            state.checkpoint_version = checkpoint.version;
            state.checkpoint_zone = cp_zone;
            state.checkpoint_next = cp_next;
        }
        // Zones: written ones with valid blocks are closed for good, the rest reset by the next checkpoint.
        for zone in CHECKPOINT_ZONES..fs.geo.zones {
            let descriptor = &zones[zone as usize];
            let written = fs.written_blocks(descriptor);
            let valid = fs.state.borrow().segments.valid(zone);
            let used = match descriptor.state {
                ZoneState::Offline | ZoneState::ReadOnly => SectionUse::Written,
                _ if written == 0 => SectionUse::Free,
                _ if valid == 0 => SectionUse::Prefree,
                _ => SectionUse::Written,
            };
            if used == SectionUse::Written && valid > 0 && written < fs.geo.blocks_per_zone {
                let zslba = u64::from(zone) * fs.geo.zone_size_lba;
                fs.queue.zone_send(zslba, ZoneSendAction::Finish, false).await.map_err(device("finish"))?;
                report.zones_finished += 1;
            }
            let mut state = fs.state.borrow_mut();
            state.segments.advance(zone, if used == SectionUse::Written { fs.geo.blocks_per_zone } else { written });
            state.segments.set_use(zone, used);
            if used == SectionUse::Prefree {
                report.zones_reset += 1;
            }
        }
        if report.rolled_forward_nodes > 0 || report.zones_reset > 0 {
            fs.checkpoint().await?;
        }
        Ok((fs, report))
    }
}

fn root_size(inodes: &BTreeMap<u32, Inode>) -> u64 {
    inodes.get(&ROOT_INO).map_or(BLOCK, |root| root.size)
}

/// Takes what a node block says into the inode it belongs to.
fn apply_node(inode: &mut Inode, node: &NodeBlock) {
    if let Some(head) = &node.inode {
        inode.size = head.size;
        inode.mtime_ns = head.mtime_ns;
        inode.directory = head.directory;
        inode.name = head.name.clone();
    }
    let (first, _) = node_range(node.index);
    let end = first as usize + node.addrs.len();
    if inode.blocks.len() < end {
        inode.blocks.resize(end, NULL_ADDR);
    }
    inode.blocks[first as usize..end].copy_from_slice(&node.addrs);
}
