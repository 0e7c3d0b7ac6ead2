//! The file system: its state, the POSIX-like calls, and the page cache they go through.

mod cache;
mod clean;
mod log;
mod mount;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use zonelab_runtime::sync::{Mutex, Notify, RwLock};
use zonelab_runtime::{CommandQueue, HostExt, IoData};
use zonelab_zns::Status;

use crate::format::{node_of, nodes_for, Addr, BLOCK, NULL_ADDR};
use crate::segments::{SectionUse, SegmentTable, Victim};

use cache::{CachedBlocks, PageCache};

pub use mount::MountReport;

/// The root directory's inode number; files get numbers from 2 on.
pub const ROOT_INO: u32 = 1;

/// Tunables, each with F2FS's default where F2FS has one.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LogFsOptions {
    /// Share of the main area kept out of users' reach for cleaning (mkfs.f2fs's overprovision ratio; it
    /// computes about 5 % for a 40 GiB device with 64 MiB sections).
    pub overprovision_pct: f64,
    /// Clean pages kept in memory (the page cache); reads of cached blocks cost no device read.
    pub cache_bytes: u64,
    /// Dirty data beyond this is written back by the writer that crossed it (Linux's dirty_background_bytes).
    pub dirty_bytes: u64,
    /// A checkpoint at least this often (F2FS's cp_interval: 60 s).
    pub checkpoint_interval_ns: u64,
    /// A checkpoint when this share of the main area is prefree (F2FS's DEF_RECLAIM_PREFREE_SEGMENTS: 5 %).
    pub prefree_checkpoint_pct: f64,
    /// Background cleaning of one zone when the file system is idle, at this period (F2FS's
    /// gc_min_sleep_time: 30 s); 0 turns it off.
    pub background_gc_period_ns: u64,
    pub foreground_victim: Victim,
    pub background_victim: Victim,
}

impl Default for LogFsOptions {
    fn default() -> Self {
        LogFsOptions {
            overprovision_pct: 5.0,
            cache_bytes: 1 << 30,
            dirty_bytes: 256 << 20,
            checkpoint_interval_ns: 60_000_000_000,
            prefree_checkpoint_pct: 5.0,
            background_gc_period_ns: 30_000_000_000,
            foreground_victim: Victim::Greedy,
            background_victim: Victim::CostBenefit,
        }
    }
}

/// Why a call failed; `errno` gives the number a POSIX file system returns.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogFsError {
    #[error("no file {0:?}")]
    NotFound(String),
    #[error("file {0:?} exists")]
    Exists(String),
    #[error("name {0:?} is empty, longer than 255 bytes or holds a '/'")]
    BadName(String),
    #[error("no space: {needed} more blocks needed, {free} of the {capacity} user blocks free")]
    NoSpace { needed: u64, free: u64, capacity: u64 },
    #[error("not a logfs device: {0}")]
    NotFormatted(String),
    /// A checkpoint or node log holds a block that does not check where no crash leaves one: nothing mounted.
    #[error("the file system's metadata is damaged: {0}")]
    Corrupt(String),
    #[error("the device has {zones} zones; logfs needs at least {needed} (2 for checkpoints, 6 logs, room to clean, a zone for data)")]
    TooSmall { zones: u32, needed: u32 },
    #[error("{what}: the device failed the command: {status}")]
    Device { what: &'static str, status: Status },
}

impl LogFsError {
    pub fn errno(&self) -> i32 {
        match self {
            LogFsError::NotFound(_) => 2,
            LogFsError::Exists(_) => 17,
            LogFsError::BadName(_) => 22,
            LogFsError::NoSpace { .. } => 28,
            LogFsError::NotFormatted(_) | LogFsError::TooSmall { .. } => 22,
            LogFsError::Corrupt(_) => 117,
            LogFsError::Device { .. } => 5,
        }
    }
}

pub(crate) fn device(what: &'static str) -> impl Fn(Status) -> LogFsError {
    move |status| LogFsError::Device { what, status }
}

/// One block of file data in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Page {
    Zeros,
    Bytes(Box<[u8]>),
}

impl Page {
    fn from_bytes(bytes: &[u8]) -> Page {
        // OR-ed 64 bytes at a time, which compiles to vector instructions: a byte-at-a-time test with its early
        // exit was half of what cleaning a zone cost.
        let mut chunks = bytes.chunks_exact(64);
        let zeros = chunks.all(|chunk| chunk.iter().fold(0, |any, &byte| any | byte) == 0)
            && chunks.remainder().iter().all(|&byte| byte == 0);
        if zeros {
            Page::Zeros
        } else {
            Page::Bytes(bytes.into())
        }
    }

    fn bytes(&self) -> Vec<u8> {
        match self {
            Page::Zeros => vec![0; BLOCK as usize],
            Page::Bytes(bytes) => bytes.to_vec(),
        }
    }
}

/// A file (or the root directory) in memory: the NAT's and the nodes' view of it, and its pages.
#[derive(Debug, Default)]
pub(crate) struct Inode {
    pub name: String,
    pub directory: bool,
    pub size: u64,
    pub mtime_ns: u64,
    /// Where each file block lies; NULL_ADDR for a hole or a block not written back yet.
    pub blocks: Vec<Addr>,
    /// Where each node lies; NULL_ADDR for one never written.
    pub nodes: Vec<Addr>,
    pub dirty_nodes: BTreeSet<u32>,
    pub dirty_pages: BTreeMap<u64, Page>,
    /// Pages on their way to the device: reads see them until the write completes.
    pub writeback: BTreeMap<u64, Page>,
    pub cached: CachedBlocks,
    /// Its directory entry is in a checkpoint (else its fsync carries FLAG_DENTRY).
    pub dentry_checkpointed: bool,
    /// Renamed since the last checkpoint: its fsync checkpoints, as F2FS's does for a moved inode.
    pub needs_checkpoint: bool,
}

impl Inode {
    fn block_count(&self) -> u64 {
        self.size.div_ceil(BLOCK)
    }

    /// Blocks that hold space: written or dirty data, and nodes.
    fn space_blocks(&self) -> u64 {
        let data = self.blocks.iter().filter(|&&a| a != NULL_ADDR).count() as u64;
        let pending = self
            .dirty_pages
            .keys()
            .chain(self.writeback.keys())
            .filter(|&&b| self.blocks.get(b as usize).is_none_or(|&a| a == NULL_ADDR))
            .collect::<BTreeSet<_>>()
            .len() as u64;
        data + pending + u64::from(nodes_for(self.block_count()))
    }

    fn dirty_node_of(&mut self, block: u64) {
        self.dirty_nodes.insert(node_of(block).0);
    }
}

/// A log's head: its zone and the next block in it.
#[derive(Default)]
pub(crate) struct LogHead {
    pub zone: Option<u32>,
    pub next: u32,
}

/// F2FS's six logs.
pub(crate) const HOT_DATA: usize = 0;
pub(crate) const WARM_DATA: usize = 1;
pub(crate) const COLD_DATA: usize = 2;
pub(crate) const HOT_NODE: usize = 3;
pub(crate) const WARM_NODE: usize = 4;
pub(crate) const LOGS: usize = 6;
pub(crate) const NODE_LOGS: [usize; 3] = [HOT_NODE, WARM_NODE, 5];

/// Counts of what the file system did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LogFsStats {
    pub creates: u64,
    pub deletes: u64,
    pub renames: u64,
    pub writes: u64,
    pub bytes_written: u64,
    pub reads: u64,
    pub bytes_read: u64,
    pub fsyncs: u64,
    pub checkpoints: u64,
    /// Zones reset (sections freed after a checkpoint).
    pub zone_resets: u64,
    /// Of those, zones reset before they were written full (the resets ReZNS can renew).
    pub partial_zone_resets: u64,
    pub foreground_cleanings: u64,
    pub background_cleanings: u64,
    /// Valid blocks the cleaner moved.
    pub blocks_moved: u64,
    pub data_blocks_written: u64,
    pub node_blocks_written: u64,
    pub checkpoint_blocks_written: u64,
    pub device_blocks_read: u64,
    pub cache_hits: u64,
}

/// Where the main area's data lies (`LogFs::placement`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFsPlacement {
    pub zones: Vec<LogFsZone>,
    pub files: Vec<LogFsFile>,
}

/// A zone of the main area holding written blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFsZone {
    pub zone: u32,
    /// The log writing it (`hot data`...), or `written` once its log left it, `prefree` once nothing in it is
    /// valid.
    pub role: &'static str,
    pub written_bytes: u64,
    pub valid_bytes: u64,
    pub capacity_bytes: u64,
}

/// A file's blocks on the device: runs of (first LBA, bytes), its data in file order, then its node blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFsFile {
    pub name: String,
    pub size_bytes: u64,
    pub data: Vec<(u64, u64)>,
    pub nodes: Vec<(u64, u64)>,
}

/// Space as statfs reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LogFsSpace {
    pub block_bytes: u64,
    /// Blocks users may fill (the main area less the overprovision).
    pub capacity_blocks: u64,
    pub used_blocks: u64,
    pub free_zones: u32,
    pub prefree_zones: u32,
    pub main_zones: u32,
}

/// A file as stat reports it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FileStat {
    pub ino: u32,
    pub size: u64,
    /// Blocks it holds on the device or in memory (data and nodes).
    pub blocks: u64,
    pub mtime_ns: u64,
}

pub(crate) struct State {
    pub inodes: BTreeMap<u32, Inode>,
    pub names: BTreeMap<String, u32>,
    /// Root directory buckets: count, and the ones changed since the last checkpoint.
    pub buckets: u32,
    pub dirty_buckets: BTreeSet<u32>,
    pub segments: SegmentTable,
    pub cache: PageCache,
    pub dirty_bytes: u64,
    /// Pages on their way to the device.
    pub writeback_blocks: u64,
    /// Bytes of directory entries in each root bucket.
    pub bucket_bytes: Vec<usize>,
    pub next_ino: u32,
    pub next_seq: u64,
    pub checkpoint_version: u64,
    /// The checkpoint zone in use (0 or 1) and its next block.
    pub checkpoint_zone: u32,
    pub checkpoint_next: u32,
    pub last_checkpoint_ns: u64,
}

/// Geometry in file system blocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geo {
    pub lbas_per_block: u64,
    pub zone_size_lba: u64,
    pub blocks_per_zone: u32,
    pub zones: u32,
    /// The largest write or read in blocks (MDTS).
    pub max_blocks: u32,
}

impl Geo {
    pub fn lba(&self, addr: Addr) -> u64 {
        let per = u64::from(self.blocks_per_zone);
        u64::from(addr) / per * self.zone_size_lba + u64::from(addr) % per * self.lbas_per_block
    }
}

/// Zones 0 and 1 hold checkpoints; the main area starts after them.
pub(crate) const CHECKPOINT_ZONES: u32 = 2;

/// The F2FS-like file system on a zoned namespace.
pub struct LogFs<Q> {
    queue: Q,
    options: LogFsOptions,
    geo: Geo,
    state: RefCell<State>,
    logs: Vec<Mutex<LogHead>>,
    /// Shared by every change, held alone by a checkpoint (F2FS's cp_rwsem).
    checkpoint_lock: RwLock,
    cleaner: Mutex<()>,
    writeback_done: Notify,
    stats: RefCell<LogFsStats>,
    /// Device commands in flight, for the background cleaner's idle test.
    inflight: Cell<u32>,
    /// Checkpoints and cleanings kept for a trace, once `record_activity` asks.
    activity: RefCell<Option<Vec<FsActivity>>>,
}

/// A checkpoint or the cleaning of a zone, as a trace draws it: when it ran, and the simulation task that ran it
/// (`CommandQueue::task`), whose commands meanwhile are the ones it caused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsActivity {
    /// `checkpoint`, or `cleaning` (foreground or background).
    pub kind: &'static str,
    /// The zone cleaned.
    pub zone: Option<u32>,
    pub start_ns: u64,
    pub end_ns: u64,
    pub task: Option<u32>,
}

fn check_name(name: &str) -> Result<(), LogFsError> {
    if name.is_empty() || name.len() > 255 || name.contains('/') {
        return Err(LogFsError::BadName(name.to_string()));
    }
    Ok(())
}

impl<Q: CommandQueue> LogFs<Q> {
    pub fn options(&self) -> &LogFsOptions {
        &self.options
    }

    /// The device it runs on (for its clock).
    pub fn device(&self) -> &Q {
        &self.queue
    }

    pub fn stats(&self) -> LogFsStats {
        self.stats.borrow().clone()
    }

    /// Where the main area's data lies now, for a zone map: each zone written, with its log (or `written`,
    /// `prefree`) and its written and valid bytes, and each file's (and directory's) data blocks and node blocks
    /// as runs of consecutive LBAs, in file order (zns-tools' `zns.fiemap` for F2FS).
    pub fn placement(&self) -> LogFsPlacement {
        const LOG_NAMES: [&str; LOGS] = ["hot data", "warm data", "cold data", "hot node", "warm node", "cold node"];
        let state = self.state.borrow();
        let per_zone = u64::from(self.geo.blocks_per_zone) * BLOCK;
        let zones = (CHECKPOINT_ZONES..self.geo.zones)
            .filter(|&zone| state.segments.written(zone) > 0)
            .map(|zone| LogFsZone {
                zone,
                role: match state.segments.use_of(zone) {
                    SectionUse::Log(log) => LOG_NAMES[log],
                    SectionUse::Prefree => "prefree",
                    SectionUse::Written | SectionUse::Free => "written",
                },
                written_bytes: u64::from(state.segments.written(zone)) * BLOCK,
                valid_bytes: u64::from(state.segments.valid(zone)) * BLOCK,
                capacity_bytes: per_zone,
            })
            .collect();
        // Consecutive addresses in one zone are one run of LBAs.
        let runs = |addrs: &[Addr]| {
            let mut runs: Vec<(Addr, u64)> = Vec::new();
            for &addr in addrs.iter().filter(|&&addr| addr != NULL_ADDR) {
                match runs.last_mut() {
                    Some((first, blocks))
                        if *first + *blocks as Addr == addr
                            && state.segments.zone_of(*first) == state.segments.zone_of(addr) =>
                    {
                        *blocks += 1
                    }
                    _ => runs.push((addr, 1)),
                }
            }
            runs.into_iter().map(|(first, blocks)| (self.geo.lba(first), blocks * BLOCK)).collect()
        };
        let files = state
            .inodes
            .values()
            .map(|inode| LogFsFile {
                name: inode.name.clone(),
                size_bytes: inode.size,
                data: runs(&inode.blocks),
                nodes: runs(&inode.nodes),
            })
            .collect();
        LogFsPlacement { zones, files }
    }

    /// Keeps every checkpoint and cleaning from now on (`activity`), for a trace.
    pub fn record_activity(&self) {
        self.activity.borrow_mut().get_or_insert_with(Vec::new);
    }

    /// The checkpoints and cleanings kept since `record_activity`, in the order they ended.
    pub fn activity(&self) -> Vec<FsActivity> {
        self.activity.borrow().clone().unwrap_or_default()
    }

    /// Runs `work`, keeping it as a `kind` activity when they are recorded.
    async fn traced<T>(&self, kind: &'static str, zone: Option<u32>, work: impl std::future::Future<Output = T>) -> T {
        let (start_ns, task) = (self.queue.now_ns(), self.queue.task());
        let result = work.await;
        if let Some(activity) = self.activity.borrow_mut().as_mut() {
            activity.push(FsActivity { kind, zone, start_ns, end_ns: self.queue.now_ns(), task });
        }
        result
    }

    pub fn space(&self) -> LogFsSpace {
        let state = self.state.borrow();
        LogFsSpace {
            block_bytes: BLOCK,
            capacity_blocks: self.capacity_blocks(),
            used_blocks: Self::used_blocks(&state),
            free_zones: state.segments.free_zones(),
            prefree_zones: state.segments.prefree_zones(),
            main_zones: state.segments.main_zones(),
        }
    }

    /// Blocks in use: valid on the device, dirty in memory or on their way (an overwrite counts twice until
    /// written back, so the check errs toward ENOSPC, as F2FS's reservation does).
    fn used_blocks(state: &State) -> u64 {
        state.segments.total_valid() + state.dirty_bytes / BLOCK + state.writeback_blocks
    }

    /// Blocks users may fill: the main area less the overprovision and less a zone for each log. The cleaner
    /// keeps its free zones while every log holds a zone of its own, so the logs' zones are no room for data
    /// either; mkfs.f2fs counts them in its reserve the same way (NR_CURSEG_TYPE sections in
    /// `get_reserved`). Without them a file over most of the capacity leaves the cleaner nothing to free.
    fn capacity_blocks(&self) -> u64 {
        let main = u64::from(self.geo.zones - CHECKPOINT_ZONES);
        let reserved = u64::from(self.overprovision_zones()) + LOGS as u64;
        main.saturating_sub(reserved) * u64::from(self.geo.blocks_per_zone)
    }

    /// Zones kept for cleaning: the overprovision, and never fewer than the logs need to move a zone.
    fn overprovision_zones(&self) -> u32 {
        let main = self.geo.zones - CHECKPOINT_ZONES;
        ((f64::from(main) * self.options.overprovision_pct / 100.0).ceil() as u32).max(LOGS as u32 + 2)
    }

    /// File names, sorted.
    pub fn list(&self) -> Vec<String> {
        self.state.borrow().names.keys().cloned().collect()
    }

    pub fn stat(&self, name: &str) -> Result<FileStat, LogFsError> {
        let state = self.state.borrow();
        let ino = *state.names.get(name).ok_or_else(|| LogFsError::NotFound(name.to_string()))?;
        let inode = &state.inodes[&ino];
        Ok(FileStat { ino, size: inode.size, blocks: inode.space_blocks(), mtime_ns: inode.mtime_ns })
    }

    fn lookup(state: &State, name: &str) -> Result<u32, LogFsError> {
        state.names.get(name).copied().ok_or_else(|| LogFsError::NotFound(name.to_string()))
    }

    /// Creates an empty file.
    pub async fn create(&self, name: &str) -> Result<(), LogFsError> {
        check_name(name)?;
        self.balance().await?;
        let _op = self.checkpoint_lock.read().await;
        let mut state = self.state.borrow_mut();
        if state.names.contains_key(name) {
            return Err(LogFsError::Exists(name.to_string()));
        }
        self.reserve(&state, 1)?;
        let ino = state.next_ino;
        state.next_ino += 1;
        let now = self.queue.now_ns();
        let mut inode = Inode { name: name.to_string(), mtime_ns: now, nodes: vec![NULL_ADDR], ..Inode::default() };
        inode.dirty_nodes.insert(0);
        state.inodes.insert(ino, inode);
        self.add_entry(&mut state, name, ino);
        self.stats.borrow_mut().creates += 1;
        Ok(())
    }

    /// Fails with NoSpace unless `blocks` more fit in the user capacity.
    fn reserve(&self, state: &State, blocks: u64) -> Result<(), LogFsError> {
        let capacity = self.capacity_blocks();
        let used = Self::used_blocks(state);
        if used + blocks > capacity {
            return Err(LogFsError::NoSpace { needed: blocks, free: capacity.saturating_sub(used), capacity });
        }
        Ok(())
    }

    /// Removes a file: its blocks become invalid, zones left with none valid become prefree.
    pub async fn unlink(&self, name: &str) -> Result<(), LogFsError> {
        self.balance().await?;
        let _op = self.checkpoint_lock.read().await;
        let mut state = self.state.borrow_mut();
        let ino = Self::lookup(&state, name)?;
        self.remove_entry(&mut state, name);
        self.drop_inode(&mut state, ino);
        self.stats.borrow_mut().deletes += 1;
        Ok(())
    }

    fn drop_inode(&self, state: &mut State, ino: u32) {
        let inode = state.inodes.remove(&ino).expect("named inodes exist");
        state.dirty_bytes -= inode.dirty_pages.len() as u64 * BLOCK;
        for &addr in inode.blocks.iter().chain(&inode.nodes) {
            if addr != NULL_ADDR {
                state.segments.invalidate(addr);
            }
        }
        for block in inode.cached.iter() {
            state.cache.remove(ino, block);
        }
    }

    /// Renames `from` to `to`, replacing `to` if it exists.
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), LogFsError> {
        check_name(to)?;
        self.balance().await?;
        let _op = self.checkpoint_lock.read().await;
        let mut state = self.state.borrow_mut();
        let ino = Self::lookup(&state, from)?;
        if from == to {
            return Ok(());
        }
        if let Some(&old) = state.names.get(to) {
            self.remove_entry(&mut state, to);
            self.drop_inode(&mut state, old);
        }
        self.remove_entry(&mut state, from);
        self.add_entry(&mut state, to, ino);
        let inode = state.inodes.get_mut(&ino).expect("named inodes exist");
        inode.name = to.to_string();
        inode.dirty_nodes.insert(0);
        inode.needs_checkpoint = true;
        self.stats.borrow_mut().renames += 1;
        Ok(())
    }

    /// Writes `data` at `offset` into the page cache; it reaches the device at writeback, fsync or under
    /// memory pressure. Returns the bytes written (all of them).
    pub async fn write(&self, name: &str, offset: u64, data: IoData) -> Result<u64, LogFsError> {
        let len = data.len();
        if len == 0 {
            return Ok(0);
        }
        self.balance().await?;
        {
            let _op = self.checkpoint_lock.read().await;
            let ino = Self::lookup(&self.state.borrow(), name)?;
            let (first, last) = (offset / BLOCK, (offset + len - 1) / BLOCK);
            // Partial blocks need their old content: from memory, or read from the device first.
            let edges: BTreeSet<u64> = [first, last]
                .into_iter()
                .filter(|&b| {
                    let start = (b * BLOCK).max(offset);
                    let end = ((b + 1) * BLOCK).min(offset + len);
                    end - start < BLOCK
                })
                .collect();
            let mut old = BTreeMap::new();
            for block in edges {
                old.insert(block, self.page_of(ino, block).await?);
            }
            let mut state = self.state.borrow_mut();
            let ino = Self::lookup(&state, name)?;
            let inode = &state.inodes[&ino];
            let new_blocks = (first..=last).filter(|b| !inode.dirty_pages.contains_key(b)).count() as u64;
            self.reserve(&state, new_blocks)?;
            let state = &mut *state;
            let inode = state.inodes.get_mut(&ino).expect("looked up");
            let mut added_dirty = 0;
            for block in first..=last {
                let start = (block * BLOCK).max(offset);
                let end = ((block + 1) * BLOCK).min(offset + len);
                let piece = data.range(start - offset, end - start);
                let page = if end - start == BLOCK {
                    match piece {
                        IoData::Zeros(_) => Page::Zeros,
                        IoData::Bytes(bytes) => Page::from_bytes(&bytes),
                    }
                } else {
                    let base = inode
                        .dirty_pages
                        .get(&block)
                        .or_else(|| inode.writeback.get(&block))
                        .cloned()
                        .or_else(|| old.remove(&block))
                        .unwrap_or(Page::Zeros);
                    let mut bytes = base.bytes();
                    let at = (start - block * BLOCK) as usize;
                    match piece {
                        IoData::Zeros(n) => bytes[at..at + n as usize].fill(0),
                        IoData::Bytes(b) => bytes[at..at + b.len()].copy_from_slice(&b),
                    }
                    Page::from_bytes(&bytes)
                };
                if inode.dirty_pages.insert(block, page).is_none() {
                    added_dirty += 1;
                }
                if inode.cached.remove(block) {
                    state.cache.remove(ino, block);
                }
            }
            inode.size = inode.size.max(offset + len);
            inode.mtime_ns = self.queue.now_ns();
            inode.dirty_nodes.insert(0);
            state.dirty_bytes += added_dirty * BLOCK;
            let mut stats = self.stats.borrow_mut();
            stats.writes += 1;
            stats.bytes_written += len;
        }
        if self.state.borrow().dirty_bytes > self.options.dirty_bytes {
            self.write_back_all().await?;
        }
        Ok(len)
    }

    /// A block's content as the file holds it now: memory first, else the device (and it is cached).
    async fn page_of(&self, ino: u32, block: u64) -> Result<Page, LogFsError> {
        let addr = {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let Some(inode) = state.inodes.get(&ino) else { return Ok(Page::Zeros) };
            if let Some(page) = inode.dirty_pages.get(&block).or_else(|| inode.writeback.get(&block)) {
                return Ok(page.clone());
            }
            if let Some(page) = state.cache.get(ino, block) {
                self.stats.borrow_mut().cache_hits += 1;
                return Ok(page);
            }
            match inode.blocks.get(block as usize) {
                Some(&addr) if addr != NULL_ADDR => addr,
                _ => return Ok(Page::Zeros),
            }
        };
        let bytes = self.read_blocks(addr, 1).await?;
        let page = Page::from_bytes(&bytes);
        self.cache_page(ino, block, page.clone(), addr);
        Ok(page)
    }

    /// Caches a page read from `addr`, unless the file has changed that block meanwhile.
    fn cache_page(&self, ino: u32, block: u64, page: Page, addr: Addr) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let Some(inode) = state.inodes.get_mut(&ino) else { return };
        if inode.blocks.get(block as usize) != Some(&addr) || inode.dirty_pages.contains_key(&block) {
            return;
        }
        inode.cached.insert(block);
        for (evicted_ino, evicted) in state.cache.insert(ino, block, page) {
            if let Some(owner) = state.inodes.get_mut(&evicted_ino) {
                owner.cached.remove(evicted);
            }
        }
    }

    async fn read_blocks(&self, addr: Addr, blocks: u32) -> Result<Vec<u8>, LogFsError> {
        self.inflight.set(self.inflight.get() + 1);
        let lba = self.geo.lba(addr);
        let result = self.queue.read(lba, u64::from(blocks) * self.geo.lbas_per_block).await;
        self.inflight.set(self.inflight.get() - 1);
        self.stats.borrow_mut().device_blocks_read += u64::from(blocks);
        result.map_err(device("read"))
    }

    /// Reads up to `len` bytes at `offset`: short at the end of the file, zeros in holes.
    pub async fn read(&self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, LogFsError> {
        let (ino, size) = {
            let state = self.state.borrow();
            let ino = Self::lookup(&state, name)?;
            (ino, state.inodes[&ino].size)
        };
        let end = offset.saturating_add(len).min(size);
        if end <= offset {
            return Ok(Vec::new());
        }
        let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
        let mut pages: BTreeMap<u64, Page> = BTreeMap::new();
        // Runs of blocks that must come from the device: consecutive in the file and on the device.
        let mut runs: Vec<(u64, Addr, u32)> = Vec::new();
        {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let inode = &state.inodes[&ino];
            for block in first..=last {
                if let Some(page) = inode.dirty_pages.get(&block).or_else(|| inode.writeback.get(&block)) {
                    pages.insert(block, page.clone());
                    continue;
                }
                if let Some(page) = state.cache.get(ino, block) {
                    self.stats.borrow_mut().cache_hits += 1;
                    pages.insert(block, page);
                    continue;
                }
                let addr = inode.blocks.get(block as usize).copied().unwrap_or(NULL_ADDR);
                if addr == NULL_ADDR {
                    pages.insert(block, Page::Zeros);
                    continue;
                }
                match runs.last_mut() {
                    Some((start, run_addr, count))
                        if *start + u64::from(*count) == block
                            && *run_addr + *count == addr
                            && state.segments.zone_of(*run_addr) == state.segments.zone_of(addr)
                            && *count < self.geo.max_blocks =>
                    {
                        *count += 1
                    }
                    _ => runs.push((block, addr, 1)),
                }
            }
        }
        for (start, addr, count) in runs {
            let bytes = self.read_blocks(addr, count).await?;
            for i in 0..u64::from(count) {
                let page = Page::from_bytes(&bytes[(i * BLOCK) as usize..((i + 1) * BLOCK) as usize]);
                self.cache_page(ino, start + i, page.clone(), addr + i as Addr);
                pages.insert(start + i, page);
            }
        }
        let mut out = Vec::with_capacity((end - offset) as usize);
        for (block, page) in pages {
            let from = (offset.max(block * BLOCK) - block * BLOCK) as usize;
            let to = (end.min((block + 1) * BLOCK) - block * BLOCK) as usize;
            match page {
                Page::Zeros => out.resize(out.len() + to - from, 0),
                Page::Bytes(bytes) => out.extend_from_slice(&bytes[from..to]),
            }
        }
        let mut stats = self.stats.borrow_mut();
        stats.reads += 1;
        stats.bytes_read += end - offset;
        Ok(out)
    }

    /// Sets a file's size: blocks past it become invalid, a partial last block is zeroed past the end.
    pub async fn truncate(&self, name: &str, size: u64) -> Result<(), LogFsError> {
        self.balance().await?;
        let _op = self.checkpoint_lock.read().await;
        let ino = Self::lookup(&self.state.borrow(), name)?;
        let tail = (!size.is_multiple_of(BLOCK)).then_some(size / BLOCK);
        let tail_page = match tail {
            Some(block) if size < self.state.borrow().inodes[&ino].size => Some(self.page_of(ino, block).await?),
            _ => None,
        };
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let ino = Self::lookup(state, name)?;
        let inode = state.inodes.get_mut(&ino).expect("looked up");
        let keep = size.div_ceil(BLOCK);
        if size < inode.size {
            for block in keep..inode.blocks.len() as u64 {
                let addr = std::mem::replace(&mut inode.blocks[block as usize], NULL_ADDR);
                if addr != NULL_ADDR {
                    state.segments.invalidate(addr);
                    inode.dirty_node_of(block);
                }
            }
            inode.blocks.truncate(keep as usize);
            let dropped = inode.dirty_pages.split_off(&keep);
            state.dirty_bytes -= dropped.len() as u64 * BLOCK;
            for block in inode.cached.split_off(keep) {
                state.cache.remove(ino, block);
            }
            let nodes = nodes_for(keep) as usize;
            for addr in inode.nodes.split_off(nodes.min(inode.nodes.len())) {
                if addr != NULL_ADDR {
                    state.segments.invalidate(addr);
                }
            }
            inode.dirty_nodes.retain(|&n| (n as usize) < nodes);
            if let (Some(block), Some(page)) = (tail, tail_page) {
                let mut bytes = page.bytes();
                bytes[(size % BLOCK) as usize..].fill(0);
                if inode.dirty_pages.insert(block, Page::from_bytes(&bytes)).is_none() {
                    state.dirty_bytes += BLOCK;
                }
                if inode.cached.remove(block) {
                    state.cache.remove(ino, block);
                }
            }
        }
        inode.size = size;
        inode.mtime_ns = self.queue.now_ns();
        inode.dirty_nodes.insert(0);
        Ok(())
    }

    /// Makes the file's data and size durable: its dirty pages and a flush, then its nodes (marked for
    /// roll-forward) and a flush. A file renamed since the last checkpoint writes its data back, then
    /// checkpoints in place of the nodes, as on F2FS (its name reaches the device only with a checkpoint).
    pub async fn fsync(&self, name: &str) -> Result<(), LogFsError> {
        self.balance().await?;
        let needs_checkpoint = {
            let _op = self.checkpoint_lock.read().await;
            let (ino, needs_checkpoint) = {
                let state = self.state.borrow();
                let ino = Self::lookup(&state, name)?;
                (ino, state.inodes[&ino].needs_checkpoint)
            };
            self.write_back(ino).await?;
            self.wait_writeback(ino).await;
            // The data must be durable before the nodes that point at it are (a volatile write cache may
            // otherwise keep the nodes and lose the data).
            self.flush().await?;
            if !needs_checkpoint {
                self.write_nodes(ino, true).await?;
                self.flush().await?;
            }
            needs_checkpoint
        };
        if needs_checkpoint {
            self.checkpoint().await?;
        }
        self.stats.borrow_mut().fsyncs += 1;
        Ok(())
    }

    async fn flush(&self) -> Result<(), LogFsError> {
        self.inflight.set(self.inflight.get() + 1);
        let result = self.queue.flush().await;
        self.inflight.set(self.inflight.get() - 1);
        result.map_err(device("flush"))
    }

    /// Waits until no page of `ino` is on its way to the device.
    async fn wait_writeback(&self, ino: u32) {
        loop {
            let busy = self.state.borrow().inodes.get(&ino).is_some_and(|inode| !inode.writeback.is_empty());
            if !busy {
                return;
            }
            self.writeback_done.notified().await;
        }
    }

    /// Writes every file's dirty pages back (memory pressure, or before a checkpoint of everything).
    async fn write_back_all(&self) -> Result<(), LogFsError> {
        let _op = self.checkpoint_lock.read().await;
        let inos: Vec<u32> = self
            .state
            .borrow()
            .inodes
            .iter()
            .filter(|(_, inode)| !inode.directory && !inode.dirty_pages.is_empty())
            .map(|(&ino, _)| ino)
            .collect();
        for ino in inos {
            self.write_back(ino).await?;
        }
        Ok(())
    }

    /// Everything durable: dirty data written back, then a checkpoint (sync(2), and unmount).
    pub async fn sync(&self) -> Result<(), LogFsError> {
        self.write_back_all().await?;
        self.checkpoint().await
    }

    fn bucket_of(&self, name: &str, buckets: u32) -> u32 {
        crc32c::crc32c(name.as_bytes()) % buckets
    }

    /// Adds a directory entry; a full bucket doubles the buckets (all rewritten at the next checkpoint).
    fn add_entry(&self, state: &mut State, name: &str, ino: u32) {
        state.names.insert(name.to_string(), ino);
        let bucket = self.bucket_of(name, state.buckets);
        state.bucket_bytes[bucket as usize] += crate::format::entry_bytes(name);
        if state.bucket_bytes[bucket as usize] > crate::format::BUCKET_ROOM {
            self.resize_buckets(state, state.buckets * 2);
        } else {
            state.dirty_buckets.insert(bucket);
        }
    }

    fn remove_entry(&self, state: &mut State, name: &str) {
        state.names.remove(name);
        let bucket = self.bucket_of(name, state.buckets);
        state.bucket_bytes[bucket as usize] -= crate::format::entry_bytes(name);
        state.dirty_buckets.insert(bucket);
    }

    /// Spreads the entries over `buckets` buckets (all rewritten at the next checkpoint).
    fn resize_buckets(&self, state: &mut State, buckets: u32) {
        state.buckets = buckets;
        state.dirty_buckets = (0..buckets).collect();
        state.bucket_bytes = vec![0; buckets as usize];
        for name in state.names.keys() {
            state.bucket_bytes[self.bucket_of(name, buckets) as usize] += crate::format::entry_bytes(name);
        }
        let root = state.inodes.get_mut(&ROOT_INO).expect("the root exists");
        root.size = u64::from(buckets) * BLOCK;
    }
}
