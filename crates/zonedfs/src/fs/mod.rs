//! The file system proper: its state and namespace here; writing and the zones (`zones.rs`), the journal's
//! commits and rolls (`commits.rs`).
//!
//! State lives in one `RefCell`, borrowed only between awaits; device I/O happens with no borrow held. The
//! order that makes a crash harmless: data is written and the device flushed before a journal record points at
//! it, and a zone is reset only after a durable record says no live extent is in it.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;
use zonelab_host::trace::{OperationSpan, TRACE_LIMIT};
use zonelab_host::{Wal, WalDesign};
use zonelab_runtime::sync::{Mutex, Notify};
use zonelab_runtime::{CommandQueue, HostExt};
use zonelab_zns::{Geometry, ReportFilter, Status, ZoneSendAction, ZoneState};

mod commits;
mod wals;
mod zones;

use commits::apply;

use crate::journal::{self, Extent, FileRecord, Record, WalLayout};

/// The zones the journal uses: the first two.
const META_ZONES: u32 = 2;

/// Why an operation failed; `errno` gives the POSIX number the C ABI returns.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ZonedFsError {
    #[error("no such file or directory: {0}")]
    NotFound(String),
    #[error("{0} already exists")]
    Exists(String),
    #[error("{0} is not empty")]
    NotEmpty(String),
    #[error("file {0} is not open for writing")]
    NotWritable(u64),
    #[error("no open file has id {0}")]
    BadFile(u64),
    #[error("{0} is not a directory")]
    NotADirectory(String),
    #[error("no space left: every data zone is full of live data")]
    NoSpace,
    #[error("the device failed a command: {0}")]
    Device(Status),
    #[error("the device holds no zonedfs file system: {0}")]
    NotFormatted(String),
    #[error("the file system's metadata is corrupt: {0}")]
    Corrupt(String),
    #[error("invalid option: {0}")]
    InvalidOption(String),
    #[error("write-ahead log: {0}")]
    Wal(String),
}

impl From<Status> for ZonedFsError {
    fn from(status: Status) -> Self {
        ZonedFsError::Device(status)
    }
}

impl ZonedFsError {
    pub fn errno(&self) -> i32 {
        match self {
            ZonedFsError::NotFound(_) => 2,
            ZonedFsError::Exists(_) => 17,
            ZonedFsError::NotEmpty(_) => 39,
            ZonedFsError::NotWritable(_) | ZonedFsError::BadFile(_) => 9,
            ZonedFsError::NotADirectory(_) => 20,
            ZonedFsError::NoSpace => 28,
            ZonedFsError::Device(_) | ZonedFsError::Wal(_) => 5,
            ZonedFsError::NotFormatted(_) | ZonedFsError::Corrupt(_) => 117,
            ZonedFsError::InvalidOption(_) => 22,
        }
    }
}

type Result<T> = std::result::Result<T, ZonedFsError>;

/// Mount-time knobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FsOptions {
    /// Bytes a writable file gathers before it writes them (whole blocks) to a zone. Default 1 MiB.
    pub write_buffer_bytes: u64,
    /// Finish a data zone once less than this percentage of its capacity is left (ZenFS's finish threshold),
    /// to free its active resource; 0 (default) never finishes early.
    pub finish_threshold_pct: u32,
    /// Active data zones at most; 0 (default) for what the device's active limit leaves after the journal's.
    pub max_active_data_zones: u32,
    /// Empty zones kept for garbage collection: writers collect when no more than this many remain. Default 2.
    pub gc_reserve_zones: u32,
    /// Seconds since the epoch at device time 0, to stamp modification times (0 in simulations).
    pub epoch_s: u64,
    /// Format a device whose zones are all empty instead of refusing to mount it.
    pub format_blank: bool,
    /// Mount without writing anything (for inspection): zones a crash left dead wait for a read-write mount.
    pub read_only: bool,
    /// Mount a damaged journal anyway, replaying every record that checks and listing the damage among the
    /// mount's problems (`check`); a read-write mount then writes what it salvaged as a new generation
    /// (`zonelab fs fsck --repair`). Without it, a mount refuses a damaged journal.
    pub salvage: bool,
    /// Zones at the end of the device left to another user of it (a reset load), never written.
    pub reserved_tail_zones: u32,
    /// How files named `*.log` (RocksDB's WALs) created from now on are written: None (default) as any other
    /// file; else through the WAL library with this design, in zones of their own (see `wals.rs`).
    pub wal: Option<WalDesign>,
    /// The WAL buffer: one WAL entry at most, header included. Default 1 MiB, ZenFS's sparse buffer.
    pub wal_buffer_bytes: u64,
    /// ZWAL's zone appends in flight at most. Default 32, the ZWAL paper's (seed 001) setting.
    pub wal_queue_depth: u32,
    /// ZWAL's barrier interval in bytes; 0 for none but the zone's end. Default 1 MiB, ZWAL's build default.
    pub wal_barrier_bytes: u64,
}

impl Default for FsOptions {
    fn default() -> Self {
        FsOptions {
            write_buffer_bytes: 1 << 20,
            finish_threshold_pct: 0,
            max_active_data_zones: 0,
            gc_reserve_zones: 2,
            epoch_s: 0,
            format_blank: false,
            read_only: false,
            salvage: false,
            reserved_tail_zones: 0,
            wal: None,
            wal_buffer_bytes: 1 << 20,
            wal_queue_depth: 32,
            wal_barrier_bytes: 1 << 20,
        }
    }
}

impl FsOptions {
    /// Applies `key=value` options separated by `&` or `,` (the query of a `zonelab://` URI).
    pub fn apply(&mut self, text: &str) -> Result<()> {
        for item in text.split(['&', ',']).filter(|item| !item.is_empty()) {
            let (key, value) = item.split_once('=').unwrap_or((item, "1"));
            let number = || {
                value.parse::<u64>().map_err(|_| ZonedFsError::InvalidOption(format!("{key}={value}: not a number")))
            };
            match key {
                "write_buffer_bytes" => self.write_buffer_bytes = number()?.max(1),
                "finish_threshold" => self.finish_threshold_pct = number()?.min(100) as u32,
                "max_active_zones" => self.max_active_data_zones = number()? as u32,
                "gc_reserve_zones" => self.gc_reserve_zones = number()? as u32,
                "format" => self.format_blank = number()? != 0,
                "reserve_tail_zones" => self.reserved_tail_zones = number()? as u32,
                "wal" => {
                    self.wal = match value {
                        "file" => None,
                        "zwal" => Some(WalDesign::Zwal),
                        "conventional" => Some(WalDesign::Conventional),
                        _ => {
                            return Err(ZonedFsError::InvalidOption(format!(
                                "wal={value}: not file, zwal or conventional"
                            )))
                        }
                    }
                }
                "wal_buffer_bytes" => self.wal_buffer_bytes = number()?,
                "wal_queue_depth" => self.wal_queue_depth = number()?.clamp(1, 1024) as u32,
                "wal_barrier_bytes" => self.wal_barrier_bytes = number()?,
                _ => {
                    return Err(ZonedFsError::InvalidOption(format!(
                        "unknown option {key} (known: write_buffer_bytes, finish_threshold, max_active_zones, \
                         gc_reserve_zones, format, reserve_tail_zones, wal, wal_buffer_bytes, wal_queue_depth, \
                         wal_barrier_bytes)"
                    )))
                }
            }
        }
        Ok(())
    }
}

/// How `open_write` treats an existing file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Replace it with an empty file (RocksDB's NewWritableFile).
    Truncate,
    /// Append to it (ReopenWritableFile), creating it if missing.
    Append,
}

/// What the file system did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FsStats {
    pub bytes_written: u64,
    pub padding_bytes: u64,
    pub bytes_read: u64,
    pub journal_commits: u64,
    pub journal_rolls: u64,
    pub zone_resets: u64,
    pub zone_finishes: u64,
    pub gc_runs: u64,
    pub gc_bytes_moved: u64,
    /// Zones taken by WAL files' logs.
    pub wal_zones: u64,
}

/// A file as `ls` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileInfo {
    pub name: String,
    pub size_bytes: u64,
    pub lifetime: u8,
    pub mtime_s: u64,
    pub extents: Vec<Extent>,
    /// A WAL file's design and zones (its bytes are not in extents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wal: Option<WalLayout>,
}

/// A closed file's extents as of one reset generation (see `ZonedFs::read_plan`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPlan {
    pub generation: u64,
    pub size_bytes: u64,
    pub extents: Vec<Extent>,
}

impl ReadPlan {
    /// The reads that fetch `len` bytes from `offset` (cut at the end of the file): `(lba, blocks, skip,
    /// take)`, each within one extent: read `blocks` from `lba`, keep `take` bytes from byte `skip` of them.
    pub fn pieces(&self, offset: u64, len: u64, block_bytes: u64) -> Vec<(u64, u64, u64, u64)> {
        let offset = offset.min(self.size_bytes);
        let end = offset.saturating_add(len).min(self.size_bytes);
        let mut pieces = Vec::new();
        let mut at = 0;
        for extent in &self.extents {
            let (from, to) = (offset.max(at), end.min(at + extent.len_bytes));
            if from < to {
                let skip_in_extent = from - at;
                let first = extent.lba + skip_in_extent / block_bytes;
                let skip = skip_in_extent % block_bytes;
                let blocks = (skip + to - from).div_ceil(block_bytes);
                pieces.push((first, blocks, skip, to - from));
            }
            at += extent.len_bytes;
        }
        pieces
    }
}

/// A zone as `ls` and `df` show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ZoneInfo {
    pub zone: u32,
    pub role: &'static str,
    pub written_bytes: u64,
    pub live_bytes: u64,
    pub capacity_bytes: u64,
    pub lifetime: u8,
    pub full: bool,
}

/// Space, as `df` and RocksDB's GetFreeSpace see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FsSpace {
    pub data_zones: u32,
    pub empty_zones: u32,
    pub capacity_bytes: u64,
    /// Room left in empty and partly written zones.
    pub free_bytes: u64,
    pub live_bytes: u64,
    /// Written but dead: what garbage collection and resets can win back.
    pub reclaimable_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Meta,
    Data,
    /// Read-only, offline, or reserved for another user of the device: never written.
    Unusable,
}

/// A WAL file's log, shared by its handles; its lock keeps one operation on the log at a time.
type SharedWal<Q> = Rc<Mutex<Wal<Q>>>;

#[derive(Clone, Debug)]
struct ZoneUse {
    role: Role,
    /// Blocks written from the zone's start (the write pointer this host predicts). A WAL's zones keep what
    /// the mount or their allocation saw: the WAL library keeps its own write head.
    written_lba: u64,
    full: bool,
    /// The WAL file whose log owns this zone: no other file is written into it and it is never collected.
    wal_of: Option<u64>,
    /// Blocks of live extents (an extent's padding counts with it).
    live_lba: u64,
    lifetime: u8,
    /// Taken by one writer, a reclaim or garbage collection.
    held: bool,
    readers: u32,
}

struct Node {
    record: FileRecord,
    /// `record.extents[..journaled]` are as the journal has them.
    journaled: usize,
    /// Appended bytes not yet written to a zone; for a WAL file, every byte of it (the log is on the device,
    /// and this copy serves reads: RocksDB reads a WAL only when it recovers).
    buffer: Vec<u8>,
    writers: u32,
    handles: u32,
    unlinked: bool,
    last_zone: Option<u32>,
    /// Held through a write of the buffer, so one file's writes go out in order.
    flushing: Rc<Mutex<()>>,
}

impl ZoneUse {
    /// Whether the zone takes one of the device's active resources: written and not full, or a WAL's zone
    /// that the log has not rolled past (it may be written at any moment).
    fn is_active(&self) -> bool {
        match self.wal_of {
            Some(_) => !self.full,
            None => self.written_lba > 0 && !self.full,
        }
    }
}

impl Node {
    fn new(record: FileRecord) -> Node {
        let journaled = record.extents.len();
        Node {
            record,
            journaled,
            buffer: Vec::new(),
            writers: 0,
            handles: 0,
            unlinked: false,
            last_zone: None,
            flushing: Rc::new(Mutex::new(())),
        }
    }

    fn size(&self) -> u64 {
        self.record.extents.iter().map(|extent| extent.len_bytes).sum::<u64>() + self.buffer.len() as u64
    }
}

struct MetaLog {
    current: u32,
    written_lba: u64,
    generation: u64,
    fs_id: u64,
}

struct State {
    files: BTreeMap<u64, Node>,
    names: BTreeMap<String, u64>,
    dirs: BTreeSet<String>,
    next_id: u64,
    zones: Vec<ZoneUse>,
    meta: MetaLog,
    stats: FsStats,
    /// What the mount found wrong: journaled extents past their zone's write pointer (a journal record is
    /// written only after the data it points at is flushed, so these mean lost or corrupt data).
    mount_problems: Vec<String>,
}

struct Inner<Q> {
    queue: Q,
    geometry: Geometry,
    block_bytes: u64,
    options: FsOptions,
    active_limit: u32,
    open_limit: u32,
    state: RefCell<State>,
    journal_lock: Mutex<()>,
    gc_lock: Mutex<()>,
    zones_changed: Notify,
    /// Counts data-zone resets, raised before each is issued: a reader on another thread that planned its
    /// reads from extents (a `ReadPlan`) and finds it unchanged after reading knows the data was still there.
    reset_generation: Arc<AtomicU64>,
    /// The logs of WAL files, by file id, from their first append (or the mount) until their zones are reset.
    wals: RefCell<BTreeMap<u64, SharedWal<Q>>>,
    /// Journal commits and garbage collections kept for a trace, once `record_activity` asks.
    activity: RefCell<Option<Vec<OperationSpan>>>,
}

/// A mounted file system on the device behind `Q`. Clones share it.
pub struct ZonedFs<Q> {
    inner: Rc<Inner<Q>>,
}

impl<Q> Clone for ZonedFs<Q> {
    fn clone(&self) -> Self {
        ZonedFs { inner: Rc::clone(&self.inner) }
    }
}

/// A path with one leading slash, no trailing one and no empty components.
fn normalize(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|part| !part.is_empty() && *part != ".").collect();
    format!("/{}", parts.join("/"))
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(at) => &path[..at],
    }
}

/// The highest write-lifetime hint, RocksDB's WLTH_EXTREME.
pub const MAX_LIFETIME: u8 = 5;

fn check_lifetime(lifetime: u8) -> Result<()> {
    if lifetime > MAX_LIFETIME {
        return Err(ZonedFsError::InvalidOption(format!(
            "lifetime hint {lifetime}: not 0 (not set) to {MAX_LIFETIME} (extreme)"
        )));
    }
    Ok(())
}

/// A new name's parent must be a directory, as POSIX's open(O_CREAT), mkdir and rename want.
fn check_parent(state: &State, path: &str) -> Result<()> {
    let parent = parent_of(path);
    if state.dirs.contains(parent) {
        return Ok(());
    }
    Err(if state.names.contains_key(parent) {
        ZonedFsError::NotADirectory(parent.to_string())
    } else {
        ZonedFsError::NotFound(parent.to_string())
    })
}

/// How well a zone of `zone_lifetime` suits a file of `file_lifetime`: None if it does not (a zone takes files
/// that live no longer than the files already in it), else the difference (ZenFS's GetLifeTimeDiff).
fn lifetime_fit(zone_lifetime: u8, file_lifetime: u8) -> Option<u8> {
    (file_lifetime <= zone_lifetime).then(|| zone_lifetime - file_lifetime)
}

/// What a zone is wanted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    /// A file's data: any zone of a fitting lifetime, shared with other files.
    Write,
    /// Garbage collection's copies: may take the reserve.
    Collect,
    /// A WAL's log: an empty zone of its own.
    Wal,
}

enum Choice {
    Take(u32),
    Open(u32),
    FinishThenRetry(u32),
    Collect,
    Wait,
    NoSpace,
}

impl<Q: CommandQueue + Clone + 'static> ZonedFs<Q> {
    /// Formats the device: every zone reset, a superblock and an empty snapshot in the first metadata zone.
    pub async fn format(queue: Q, options: FsOptions) -> Result<ZonedFs<Q>> {
        let geometry = queue.geometry();
        if geometry.zones < META_ZONES + 2 {
            return Err(ZonedFsError::InvalidOption(format!(
                "the device has {} zones; zonedfs needs at least {} (2 for its journal, 2 for data)",
                geometry.zones,
                META_ZONES + 2
            )));
        }
        let fs_id = queue.now_ns() ^ 0x9e37_79b9_7f4a_7c15 ^ (u64::from(geometry.zones) << 32);
        let report = report_all(&queue).await?;
        let fs = ZonedFs::assemble(queue, options, MetaLog { current: 0, written_lba: 0, generation: 0, fs_id })?;
        // Every zone of the file system empty; a reserved tail keeps what it holds.
        let ours = geometry.zones - fs.inner.options.reserved_tail_zones;
        for zone in report.iter().take(ours as usize) {
            if matches!(zone.state, ZoneState::Empty | ZoneState::ReadOnly | ZoneState::Offline) {
                continue;
            }
            fs.inner.queue.zone_send(zone.start_lba, ZoneSendAction::Reset, false).await?;
        }
        {
            let _journal = fs.inner.journal_lock.lock().await;
            fs.roll_journal().await?;
            fs.inner.queue.flush().await?;
        }
        Ok(fs)
    }

    /// Mounts the file system on the device: replays the journal, checks every extent against its zone's
    /// write pointer (what a crash left unwritten is not there), and resets zones with no live data.
    pub async fn mount(queue: Q, options: FsOptions) -> Result<ZonedFs<Q>> {
        let geometry = queue.geometry();
        let report = report_all(&queue).await?;
        let zones = commits::read_meta_zones(&queue, &report).await?;
        let Some(found) = commits::choose_journal(&zones, &geometry, options.salvage)? else {
            let ours = geometry.zones.saturating_sub(options.reserved_tail_zones) as usize;
            let blank = report.iter().take(ours).all(|zone| zone.state == ZoneState::Empty);
            if blank && options.format_blank {
                return ZonedFs::format(queue, options).await;
            }
            return Err(ZonedFsError::NotFormatted(if blank {
                "every zone is empty; run `zonelab fs mkfs` (or mount with format=1)".to_string()
            } else {
                "no superblock in zones 0 and 1, and the device holds data".to_string()
            }));
        };
        let commits::Journal { generation, current, fs_id, records, problems, needs_roll } = found;
        let descriptor = &report[current as usize];
        let written_lba = if descriptor.state == ZoneState::Full {
            descriptor.capacity_lba
        } else {
            descriptor.wp_lba - descriptor.start_lba
        };
        let fs = ZonedFs::assemble(queue, options, MetaLog { current, written_lba, generation, fs_id })?;
        let dead = {
            let mut state = fs.inner.state.borrow_mut();
            state.mount_problems = problems;
            for record in &records {
                apply(&mut state, record);
            }
            let dead = fs.adopt_report(&mut state, &report);
            if fs.inner.options.salvage && !state.mount_problems.is_empty() {
                fs.find_lost_data(&mut state);
            }
            dead
        };
        if !fs.inner.options.read_only {
            if needs_roll {
                // New commits must never follow bytes that replay stops at: the next generation starts clean.
                let _journal = fs.inner.journal_lock.lock().await;
                fs.roll_journal().await?;
                fs.inner.queue.flush().await?;
            }
            // A salvage resets nothing: a zone only the damaged records named stays as it is for a person to
            // read, until a later mount finds it dead.
            if !fs.inner.options.salvage {
                fs.reclaim(dead).await?;
            }
        }
        fs.recover_wals().await?;
        Ok(fs)
    }

    fn assemble(queue: Q, options: FsOptions, meta: MetaLog) -> Result<ZonedFs<Q>> {
        let geometry = queue.geometry();
        let device_active = if geometry.max_active == 0 { geometry.zones } else { geometry.max_active };
        let device_open = if geometry.max_open == 0 { geometry.zones } else { geometry.max_open };
        // The journal keeps up to both its zones active (the old one until the next roll resets it).
        let room = device_active.saturating_sub(META_ZONES);
        let active_limit = match options.max_active_data_zones {
            0 => room,
            wanted => wanted.min(room),
        };
        if active_limit == 0 {
            return Err(ZonedFsError::InvalidOption(format!(
                "the device allows {device_active} active zones; the journal needs {META_ZONES} and data at least 1"
            )));
        }
        let reserved_from = geometry.zones.saturating_sub(options.reserved_tail_zones);
        if reserved_from < META_ZONES + 2 {
            return Err(ZonedFsError::InvalidOption(format!(
                "reserve_tail_zones={} leaves {reserved_from} of the device's {} zones; zonedfs needs at least {}",
                options.reserved_tail_zones,
                geometry.zones,
                META_ZONES + 2
            )));
        }
        let zones = (0..geometry.zones)
            .map(|zone| ZoneUse {
                role: match zone {
                    _ if zone < META_ZONES => Role::Meta,
                    _ if zone >= reserved_from => Role::Unusable,
                    _ => Role::Data,
                },
                written_lba: 0,
                full: false,
                wal_of: None,
                live_lba: 0,
                lifetime: 0,
                held: false,
                readers: 0,
            })
            .collect();
        let mut dirs = BTreeSet::new();
        dirs.insert("/".to_string());
        Ok(ZonedFs {
            inner: Rc::new(Inner {
                block_bytes: u64::from(geometry.lba_size),
                geometry,
                active_limit,
                open_limit: device_open.saturating_sub(1).max(1),
                options,
                queue,
                state: RefCell::new(State {
                    files: BTreeMap::new(),
                    names: BTreeMap::new(),
                    dirs,
                    next_id: 1,
                    zones,
                    meta,
                    stats: FsStats::default(),
                    mount_problems: Vec::new(),
                }),
                journal_lock: Mutex::new(()),
                gc_lock: Mutex::new(()),
                zones_changed: Notify::new(),
                reset_generation: Arc::new(AtomicU64::new(0)),
                wals: RefCell::new(BTreeMap::new()),
                activity: RefCell::new(None),
            }),
        })
    }

    /// Takes the zones' write pointers and conditions from a report, cuts extents at them, counts live data;
    /// returns the data zones written but holding nothing live.
    fn adopt_report(&self, state: &mut State, report: &[zonelab_zns::ZoneDescriptor]) -> Vec<u32> {
        let geometry = &self.inner.geometry;
        for (zone, descriptor) in state.zones.iter_mut().zip(report) {
            zone.written_lba = match descriptor.state {
                ZoneState::Full => descriptor.capacity_lba,
                ZoneState::Offline | ZoneState::ReadOnly => descriptor.capacity_lba,
                _ => descriptor.wp_lba - descriptor.start_lba,
            };
            zone.full = zone.written_lba >= descriptor.capacity_lba;
            if matches!(descriptor.state, ZoneState::Offline | ZoneState::ReadOnly) && zone.role == Role::Data {
                zone.role = Role::Unusable;
            }
        }
        let block = self.inner.block_bytes;
        for node in state.files.values_mut() {
            let mut kept = Vec::with_capacity(node.record.extents.len());
            for extent in &node.record.extents {
                let zone = geometry.zone_of(extent.lba);
                let written_end = geometry.zone_start_lba(zone) + state.zones[zone as usize].written_lba;
                let end = extent.lba + extent.len_bytes.div_ceil(block);
                if end <= written_end {
                    kept.push(*extent);
                } else {
                    // Past the write pointer: the file is cut there, and fsck says so.
                    state.mount_problems.push(format!(
                        "{}: extent at LBA {} ({} bytes) runs past zone {zone}'s write pointer; the file was cut \
                         to {} bytes at mount",
                        node.record.name,
                        extent.lba,
                        extent.len_bytes,
                        kept.iter().map(|kept: &Extent| kept.len_bytes).sum::<u64>()
                    ));
                    break;
                }
            }
            node.record.extents = kept;
            node.journaled = node.record.extents.len();
            for extent in &node.record.extents {
                let zone = &mut state.zones[geometry.zone_of(extent.lba) as usize];
                zone.live_lba += extent.len_bytes.div_ceil(block);
                zone.lifetime = zone.lifetime.max(node.record.lifetime);
            }
            // A WAL's zones are live as far as written: the log, not extents, says what is in them.
            for &zone in node.record.wal.iter().flat_map(|layout| &layout.zones) {
                let zone = &mut state.zones[zone as usize];
                zone.wal_of = Some(node.record.id);
                zone.live_lba = zone.written_lba;
            }
        }
        state
            .zones
            .iter()
            .enumerate()
            .filter(|(_, zone)| {
                zone.role == Role::Data && zone.wal_of.is_none() && zone.written_lba > 0 && zone.live_lba == 0
            })
            .map(|(index, _)| index as u32)
            .collect()
    }

    /// After a salvage that skipped damage: the data written in data zones that no file names any more (a
    /// damaged record may have named it) becomes files of `/lost+found`, one per unnamed run, as e2fsck keeps
    /// orphaned inodes, so that it stays findable and live; a read-only check lists each. Such a run may also
    /// be data of a file deleted before the damage: a person tells which.
    fn find_lost_data(&self, state: &mut State) {
        let geometry = self.inner.geometry;
        let block = self.inner.block_bytes;
        let mut named: Vec<(u64, u64)> = state
            .files
            .values()
            .flat_map(|node| {
                node.record.extents.iter().map(|extent| (extent.lba, extent.lba + extent.len_bytes.div_ceil(block)))
            })
            .collect();
        named.sort_unstable();
        let mut lost = Vec::new();
        for (zone, zone_use) in state.zones.iter().enumerate() {
            if zone_use.role != Role::Data || zone_use.wal_of.is_some() || zone_use.written_lba == 0 {
                continue;
            }
            let start = geometry.zone_start_lba(zone as u32);
            let end = start + zone_use.written_lba;
            let mut at = start;
            for &(from, to) in named.iter().filter(|(from, _)| (start..end).contains(from)) {
                if from > at {
                    lost.push((at, from));
                }
                at = at.max(to);
            }
            if at < end {
                lost.push((at, end));
            }
        }
        for (from, to) in lost {
            let name = format!("/lost+found/lba-{from}");
            let zone = geometry.zone_of(from);
            if self.inner.options.read_only {
                state.mount_problems.push(format!(
                    "LBAs {from}..{to} of zone {zone} are written and no file names them; `--repair` keeps them as \
                     {name}"
                ));
                continue;
            }
            state.dirs.insert("/lost+found".to_string());
            let id = state.next_id;
            state.next_id += 1;
            let extents = vec![Extent { lba: from, len_bytes: (to - from) * block }];
            let record = FileRecord { id, name: name.clone(), lifetime: 0, mtime_s: self.now_s(), extents, wal: None };
            state.names.insert(name.clone(), id);
            state.files.insert(id, Node::new(record));
            state.zones[zone as usize].live_lba += to - from;
            state
                .mount_problems
                .push(format!("LBAs {from}..{to} of zone {zone} were written and no file named them: kept as {name}"));
        }
    }

    fn now_s(&self) -> u64 {
        self.inner.options.epoch_s + self.inner.queue.now_ns() / 1_000_000_000
    }

    // ---- namespace ----

    /// Opens `name` for writing with a write-lifetime hint; returns the file's id for `append`/`sync`/`close`.
    pub async fn open_write(&self, name: &str, lifetime: u8, mode: OpenMode) -> Result<u64> {
        check_lifetime(lifetime)?;
        let name = normalize(name);
        let (id, records, freed) = {
            let mut state = self.inner.state.borrow_mut();
            if state.dirs.contains(&name) {
                return Err(ZonedFsError::Exists(name));
            }
            check_parent(&state, &name)?;
            match (state.names.get(&name).copied(), mode) {
                (Some(id), OpenMode::Append) => {
                    let node = state.files.get_mut(&id).expect("named files exist");
                    node.writers += 1;
                    node.handles += 1;
                    (id, Vec::new(), Vec::new())
                }
                (existing, _) => {
                    let mut records = Vec::new();
                    let freed = match existing {
                        Some(old) => {
                            records.push(Record::Delete { id: old });
                            unlink(&mut state, old, self.inner.block_bytes, &self.inner.geometry)
                        }
                        None => Vec::new(),
                    };
                    let id = state.next_id;
                    state.next_id += 1;
                    let wal = self
                        .inner
                        .options
                        .wal
                        .filter(|_| name.ends_with(".log"))
                        .map(|design| WalLayout { design, zones: Vec::new() });
                    let record =
                        FileRecord { id, name: name.clone(), lifetime, mtime_s: self.now_s(), extents: vec![], wal };
                    records.push(Record::Create { file: record.clone() });
                    let mut node = Node::new(record);
                    node.writers = 1;
                    node.handles = 1;
                    state.files.insert(id, node);
                    state.names.insert(name, id);
                    (id, records, freed)
                }
            }
        };
        if !records.is_empty() {
            self.commit(records).await?;
        }
        self.reclaim(freed).await?;
        Ok(id)
    }

    /// Sets the write-lifetime hint of a file open for writing (RocksDB sets it after creating the file); it
    /// chooses the zones of the data written from now on, and is journaled with the next sync.
    pub fn set_lifetime(&self, id: u64, lifetime: u8) -> Result<()> {
        check_lifetime(lifetime)?;
        let mut state = self.inner.state.borrow_mut();
        let node = state.files.get_mut(&id).filter(|node| node.writers > 0).ok_or(ZonedFsError::NotWritable(id))?;
        node.record.lifetime = lifetime;
        Ok(())
    }

    /// Opens `name` for reading; returns its id for `read` and `close`.
    pub fn open_read(&self, name: &str) -> Result<u64> {
        let name = normalize(name);
        let mut state = self.inner.state.borrow_mut();
        let id = *state.names.get(&name).ok_or(ZonedFsError::NotFound(name))?;
        state.files.get_mut(&id).expect("named files exist").handles += 1;
        Ok(id)
    }

    /// Appends to a file open for writing; the bytes are written once a buffer's worth has gathered (a WAL
    /// file's go to its log as one record).
    pub async fn append(&self, id: u64, data: &[u8]) -> Result<()> {
        if self.inner.state.borrow().files.get(&id).is_some_and(|node| node.writers > 0 && node.record.wal.is_some()) {
            return self.append_to_wal(id, data).await;
        }
        let full = {
            let mut state = self.inner.state.borrow_mut();
            let node = state.files.get_mut(&id).filter(|node| node.writers > 0).ok_or(ZonedFsError::NotWritable(id))?;
            node.buffer.extend_from_slice(data);
            node.buffer.len() as u64 >= self.inner.options.write_buffer_bytes
        };
        if full {
            self.write_buffer(id, false).await?;
        }
        Ok(())
    }

    /// Makes everything appended to the file durable: its buffer written (the last block padded) and its
    /// extents journaled.
    pub async fn sync(&self, id: u64) -> Result<()> {
        if self.inner.state.borrow().files.get(&id).is_some_and(|node| node.record.wal.is_some()) {
            return self.sync_wal(id).await;
        }
        self.write_buffer(id, true).await?;
        let record = {
            let mut state = self.inner.state.borrow_mut();
            let now = self.now_s();
            let Some(node) = state.files.get_mut(&id) else { return Ok(()) };
            if node.journaled == node.record.extents.len() || node.unlinked {
                None
            } else {
                node.record.mtime_s = now;
                let from = node.journaled;
                node.journaled = node.record.extents.len();
                Some(Record::Extents {
                    id,
                    from,
                    extents: node.record.extents[from..].to_vec(),
                    mtime_s: now,
                    lifetime: node.record.lifetime,
                })
            }
        };
        match record {
            Some(record) => self.commit(vec![record]).await,
            None => Ok(()),
        }
    }

    /// Closes a handle; a writer's data is synced first. The last handle of an unlinked file frees its space.
    pub async fn close(&self, id: u64) -> Result<()> {
        if self.inner.state.borrow().files.get(&id).is_none_or(|node| node.handles == 0) {
            return Err(ZonedFsError::BadFile(id));
        }
        let writer = self.inner.state.borrow().files.get(&id).is_some_and(|node| node.writers > 0);
        let synced = if writer { self.sync(id).await } else { Ok(()) };
        let freed = {
            let mut state = self.inner.state.borrow_mut();
            let Some(node) = state.files.get_mut(&id) else { return synced };
            node.handles = node.handles.saturating_sub(1);
            if writer {
                node.writers -= 1;
            }
            if node.unlinked && node.handles == 0 {
                release_extents(&mut state, id, self.inner.block_bytes, &self.inner.geometry)
            } else {
                Vec::new()
            }
        };
        self.reclaim(freed).await?;
        synced
    }

    /// Reads up to `len` bytes from `offset` (fewer at the end of the file).
    pub async fn read(&self, id: u64, offset: u64, len: u64) -> Result<Vec<u8>> {
        let geometry = self.inner.geometry;
        let block = self.inner.block_bytes;
        // Plan the pieces and pin their zones against reset while the reads are out.
        let (pieces, tail, wanted) = {
            let mut state = self.inner.state.borrow_mut();
            let node = state.files.get(&id).ok_or_else(|| ZonedFsError::NotFound(format!("file id {id}")))?;
            let size = node.size();
            let written = size - node.buffer.len() as u64;
            let plan = ReadPlan { generation: 0, size_bytes: written, extents: node.record.extents.clone() };
            let pieces = plan.pieces(offset, len, block);
            // A length past the file's end (the C API's SIZE_MAX, say) reads to the end and allocates no more.
            let (offset, end) = (offset.min(size), offset.saturating_add(len).min(size));
            let tail =
                node.buffer[(offset.max(written) - written) as usize..(end.max(written) - written) as usize].to_vec();
            for (lba, ..) in &pieces {
                state.zones[geometry.zone_of(*lba) as usize].readers += 1;
            }
            (pieces, tail, end - offset)
        };
        let mut out = Vec::with_capacity(wanted as usize);
        let mut failure = None;
        for (lba, blocks, skip, take) in &pieces {
            if failure.is_none() {
                match read_blocks(&self.inner.queue, *lba, *blocks).await {
                    Ok(bytes) => out.extend_from_slice(&bytes[*skip as usize..(skip + take) as usize]),
                    Err(status) => failure = Some(status),
                }
            }
        }
        {
            let mut state = self.inner.state.borrow_mut();
            for (lba, ..) in &pieces {
                state.zones[geometry.zone_of(*lba) as usize].readers -= 1;
            }
            state.stats.bytes_read += out.len() as u64;
        }
        self.inner.zones_changed.notify_waiters();
        if let Some(status) = failure {
            return Err(status.into());
        }
        out.extend_from_slice(&tail);
        Ok(out)
    }

    /// Where a file's bytes are, for a reader on another thread that reads the device directly: None while the
    /// file is open for writing (its tail may be in a buffer) and for a WAL file (its bytes are the log's
    /// records, served from memory). Valid while `reset_generation` still holds
    /// `generation` after the reads complete: extents move only when garbage collection empties a zone, and
    /// a zone is reset only after the generation is raised.
    pub fn read_plan(&self, id: u64) -> Option<ReadPlan> {
        let state = self.inner.state.borrow();
        let node = state.files.get(&id).filter(|node| node.writers == 0 && node.record.wal.is_none())?;
        Some(ReadPlan {
            generation: self.inner.reset_generation.load(Ordering::Acquire),
            size_bytes: node.size(),
            extents: node.record.extents.clone(),
        })
    }

    /// The counter `read_plan`s are checked against.
    pub fn reset_generation(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.inner.reset_generation)
    }

    /// Deletes a file; its space is freed now, or at its last close if it is open.
    pub async fn delete(&self, name: &str) -> Result<()> {
        let name = normalize(name);
        let (id, freed) = {
            let mut state = self.inner.state.borrow_mut();
            let id = *state.names.get(&name).ok_or(ZonedFsError::NotFound(name))?;
            (id, unlink(&mut state, id, self.inner.block_bytes, &self.inner.geometry))
        };
        self.commit(vec![Record::Delete { id }]).await?;
        self.reclaim(freed).await
    }

    /// Renames a file, replacing any file named `to`, or a directory with all it holds (`to` must not exist).
    pub async fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        if from != "/" && self.inner.state.borrow().dirs.contains(&from) {
            return self.rename_dir(&from, &to).await;
        }
        let (records, freed) = {
            let mut state = self.inner.state.borrow_mut();
            let id = *state.names.get(&from).ok_or_else(|| ZonedFsError::NotFound(from.clone()))?;
            if state.dirs.contains(&to) {
                return Err(ZonedFsError::Exists(to));
            }
            check_parent(&state, &to)?;
            let mut records = Vec::new();
            let mut freed = Vec::new();
            if let Some(&old) = state.names.get(&to) {
                if old == id {
                    return Ok(());
                }
                records.push(Record::Delete { id: old });
                freed = unlink(&mut state, old, self.inner.block_bytes, &self.inner.geometry);
            }
            state.names.remove(&from);
            state.names.insert(to.clone(), id);
            state.files.get_mut(&id).expect("named files exist").record.name = to.clone();
            records.push(Record::Rename { id, to });
            (records, freed)
        };
        self.commit(records).await?;
        self.reclaim(freed).await
    }

    /// Moves directory `from` and everything under it to `to`, in one commit: the new directories, each file
    /// renamed, then the old directories removed, deepest first.
    async fn rename_dir(&self, from: &str, to: &str) -> Result<()> {
        let records = {
            let mut state = self.inner.state.borrow_mut();
            if state.dirs.contains(to) || state.names.contains_key(to) {
                return Err(ZonedFsError::Exists(to.to_string()));
            }
            if to.starts_with(&format!("{from}/")) {
                return Err(ZonedFsError::InvalidOption(format!("cannot move {from} into itself ({to})")));
            }
            check_parent(&state, to)?;
            let moved = |path: &str| format!("{to}{}", &path[from.len()..]);
            let inside = |path: &str| path == from || path.starts_with(&format!("{from}/"));
            let dirs: Vec<String> = state.dirs.iter().filter(|dir| inside(dir)).cloned().collect();
            let files: Vec<(String, u64)> =
                state.names.iter().filter(|(name, _)| inside(name)).map(|(name, id)| (name.clone(), *id)).collect();
            let mut records: Vec<Record> = dirs.iter().map(|dir| Record::Mkdir { path: moved(dir) }).collect();
            for (name, id) in &files {
                let new_name = moved(name);
                state.names.remove(name);
                state.names.insert(new_name.clone(), *id);
                state.files.get_mut(id).expect("named files exist").record.name = new_name.clone();
                records.push(Record::Rename { id: *id, to: new_name });
            }
            for dir in dirs.iter().rev() {
                state.dirs.remove(dir);
                state.dirs.insert(moved(dir));
                records.push(Record::Rmdir { path: dir.clone() });
            }
            records
        };
        self.commit(records).await
    }

    pub async fn mkdir(&self, path: &str) -> Result<()> {
        let path = normalize(path);
        {
            let mut state = self.inner.state.borrow_mut();
            if state.names.contains_key(&path) || state.dirs.contains(&path) {
                return Err(ZonedFsError::Exists(path));
            }
            check_parent(&state, &path)?;
            state.dirs.insert(path.clone());
        }
        self.commit(vec![Record::Mkdir { path }]).await
    }

    pub async fn rmdir(&self, path: &str) -> Result<()> {
        let path = normalize(path);
        {
            let mut state = self.inner.state.borrow_mut();
            if !state.dirs.contains(&path) {
                return Err(ZonedFsError::NotFound(path));
            }
            if !children(&state, &path).is_empty() {
                return Err(ZonedFsError::NotEmpty(path));
            }
            state.dirs.remove(&path);
        }
        self.commit(vec![Record::Rmdir { path }]).await
    }

    pub fn is_dir(&self, path: &str) -> bool {
        self.inner.state.borrow().dirs.contains(&normalize(path))
    }

    pub fn exists(&self, path: &str) -> bool {
        let path = normalize(path);
        let state = self.inner.state.borrow();
        state.dirs.contains(&path) || state.names.contains_key(&path)
    }

    /// The names (not paths) of a directory's files and directories, sorted.
    pub fn list(&self, dir: &str) -> Result<Vec<String>> {
        let dir = normalize(dir);
        let state = self.inner.state.borrow();
        if state.names.contains_key(&dir) {
            return Err(ZonedFsError::NotADirectory(dir));
        }
        if !state.dirs.contains(&dir) {
            return Err(ZonedFsError::NotFound(dir));
        }
        Ok(children(&state, &dir))
    }

    /// A file's size, appended bytes not yet written included.
    pub fn file_size(&self, name: &str) -> Result<u64> {
        self.stat(name).map(|info| info.size_bytes)
    }

    pub fn stat(&self, name: &str) -> Result<FileInfo> {
        let name = normalize(name);
        let state = self.inner.state.borrow();
        let id = state.names.get(&name).ok_or(ZonedFsError::NotFound(name))?;
        Ok(info_of(&state.files[id]))
    }

    /// Every file, by name.
    pub fn files(&self) -> Vec<FileInfo> {
        let state = self.inner.state.borrow();
        state.names.values().map(|id| info_of(&state.files[id])).collect()
    }

    pub fn directories(&self) -> Vec<String> {
        self.inner.state.borrow().dirs.iter().cloned().collect()
    }

    pub fn zones(&self) -> Vec<ZoneInfo> {
        let block = self.inner.block_bytes;
        let capacity = self.inner.geometry.zone_cap_lba * block;
        let state = self.inner.state.borrow();
        state
            .zones
            .iter()
            .enumerate()
            .map(|(index, zone)| ZoneInfo {
                zone: index as u32,
                role: match (zone.role, zone.wal_of) {
                    (Role::Meta, _) => "journal",
                    (Role::Data, Some(_)) => "wal",
                    (Role::Data, None) => "data",
                    (Role::Unusable, _) => "unusable",
                },
                written_bytes: zone.written_lba * block,
                live_bytes: zone.live_lba * block,
                capacity_bytes: capacity,
                lifetime: zone.lifetime,
                full: zone.full,
            })
            .collect()
    }

    pub fn space(&self) -> FsSpace {
        let block = self.inner.block_bytes;
        let cap = self.inner.geometry.zone_cap_lba;
        let state = self.inner.state.borrow();
        let data: Vec<&ZoneUse> = state.zones.iter().filter(|zone| zone.role == Role::Data).collect();
        let free_lba: u64 =
            data.iter().filter(|zone| !zone.full && zone.wal_of.is_none()).map(|zone| cap - zone.written_lba).sum();
        let live_lba: u64 = data.iter().map(|zone| zone.live_lba).sum();
        let written_lba: u64 = data.iter().map(|zone| zone.written_lba).sum();
        FsSpace {
            data_zones: data.len() as u32,
            empty_zones: data.iter().filter(|zone| zone.written_lba == 0).count() as u32,
            capacity_bytes: data.len() as u64 * cap * block,
            free_bytes: free_lba * block,
            live_bytes: live_lba * block,
            reclaimable_bytes: written_lba.saturating_sub(live_lba) * block,
        }
    }

    pub fn stats(&self) -> FsStats {
        self.inner.state.borrow().stats.clone()
    }

    pub fn geometry(&self) -> Geometry {
        self.inner.geometry
    }

    /// Keeps every journal commit and garbage collection from now on (`activity`), for a trace (up to
    /// `TRACE_LIMIT`).
    pub fn record_activity(&self) {
        self.inner.activity.borrow_mut().get_or_insert_with(Vec::new);
    }

    /// The journal commits (track `zonedfs journal`) and garbage collections (`zonedfs GC`) kept since
    /// `record_activity`, in the order they ended, each with the task that ran it.
    pub fn activity(&self) -> Vec<OperationSpan> {
        self.inner.activity.borrow().clone().unwrap_or_default()
    }

    /// Runs `work`, keeping it on `track` under the name `name` gives when activity is recorded.
    async fn traced<T>(
        &self,
        track: &'static str,
        name: impl FnOnce() -> String,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let (start_ns, task) = (self.inner.queue.now_ns(), self.inner.queue.task());
        let result = work.await;
        if let Some(activity) = self.inner.activity.borrow_mut().as_mut().filter(|kept| kept.len() < TRACE_LIMIT) {
            let end_ns = self.inner.queue.now_ns();
            activity.push(OperationSpan { track: track.into(), name: name(), start_ns, end_ns, task });
        }
        result
    }

    /// The device the file system runs on.
    pub fn queue(&self) -> &Q {
        &self.inner.queue
    }

    /// Consistency: every extent inside one data zone and below its write pointer, no two extents overlapping,
    /// and every zone's live count equal to the extents in it. Returns what is wrong, empty when all is well.
    pub fn check(&self) -> Vec<String> {
        let geometry = self.inner.geometry;
        let block = self.inner.block_bytes;
        let state = self.inner.state.borrow();
        let mut problems = state.mount_problems.clone();
        let mut live = vec![0u64; state.zones.len()];
        let mut owners: BTreeMap<u64, (u64, String)> = BTreeMap::new();
        for node in state.files.values() {
            for extent in &node.record.extents {
                let blocks = extent.len_bytes.div_ceil(block);
                let zone = geometry.zone_of(extent.lba);
                let start = geometry.zone_start_lba(zone);
                let name = &node.record.name;
                if state.zones.get(zone as usize).is_none_or(|use_| use_.role != Role::Data) {
                    problems.push(format!("{name}: extent at LBA {} is not in a data zone", extent.lba));
                    continue;
                }
                if extent.lba + blocks > start + state.zones[zone as usize].written_lba {
                    problems
                        .push(format!("{name}: extent at LBA {} runs past zone {zone}'s write pointer", extent.lba));
                }
                if extent.lba + blocks > start + geometry.zone_cap_lba {
                    problems.push(format!("{name}: extent at LBA {} crosses the end of zone {zone}", extent.lba));
                }
                if let Some((_, (other_end, other))) = owners.range(..extent.lba + blocks).next_back() {
                    if *other_end > extent.lba {
                        problems.push(format!("{name}: extent at LBA {} overlaps one of {other}", extent.lba));
                    }
                }
                owners.insert(extent.lba, (extent.lba + blocks, name.clone()));
                live[zone as usize] += blocks;
            }
        }
        let mut wal_owners: BTreeMap<u32, &str> = BTreeMap::new();
        for node in state.files.values() {
            for &zone in node.record.wal.iter().flat_map(|layout| &layout.zones) {
                let name = &node.record.name;
                if let Some(other) = wal_owners.insert(zone, name) {
                    problems.push(format!("{name}: WAL zone {zone} is also a zone of {other}"));
                }
                match state.zones.get(zone as usize) {
                    Some(zone_use) if zone_use.role == Role::Data && live[zone as usize] == 0 => {}
                    _ => problems.push(format!("{name}: WAL zone {zone} is not a data zone of its own")),
                }
            }
        }
        for (index, zone) in state.zones.iter().enumerate() {
            if zone.role == Role::Data && zone.wal_of.is_none() && zone.live_lba != live[index] {
                problems.push(format!(
                    "zone {index}: {} live blocks counted, {} in files' extents",
                    zone.live_lba, live[index]
                ));
            }
        }
        problems
    }

    /// Syncs every file still open for writing and flushes the device: what a clean unmount does.
    pub async fn unmount(&self) -> Result<()> {
        let writers: Vec<u64> =
            self.inner.state.borrow().files.iter().filter(|(_, node)| node.writers > 0).map(|(id, _)| *id).collect();
        for id in writers {
            self.sync(id).await?;
        }
        self.inner.queue.flush().await?;
        Ok(())
    }

    /// The journal's records as the device holds them now, current zone first: for `zonelab fs dump`.
    pub async fn journal_records(&self) -> Result<Vec<Record>> {
        let (zone, written) = {
            let state = self.inner.state.borrow();
            (state.meta.current, state.meta.written_lba)
        };
        let bytes = read_blocks(&self.inner.queue, self.inner.geometry.zone_start_lba(zone), written).await?;
        Ok(journal::salvage(&bytes, self.inner.block_bytes as usize, true).0)
    }
}

/// Removes a file's name; frees its extents unless a handle keeps it. Returns zones that may now be dead.
fn unlink(state: &mut State, id: u64, block: u64, geometry: &Geometry) -> Vec<u32> {
    let Some(node) = state.files.get_mut(&id) else { return Vec::new() };
    state.names.remove(&node.record.name);
    node.unlinked = true;
    if node.handles > 0 {
        return Vec::new();
    }
    release_extents(state, id, block, geometry)
}

fn release_extents(state: &mut State, id: u64, block: u64, geometry: &Geometry) -> Vec<u32> {
    let Some(node) = state.files.remove(&id) else { return Vec::new() };
    let mut zones = BTreeSet::new();
    for extent in &node.record.extents {
        let zone = geometry.zone_of(extent.lba);
        state.zones[zone as usize].live_lba -= extent.len_bytes.div_ceil(block);
        zones.insert(zone);
    }
    // A WAL's zones are dead whole. Their write pointers are not tracked, so they count as written: resetting
    // a zone the log never reached costs a command and changes nothing.
    for &zone in node.record.wal.iter().flat_map(|layout| &layout.zones) {
        let zone_use = &mut state.zones[zone as usize];
        zone_use.wal_of = None;
        zone_use.live_lba = 0;
        zone_use.written_lba = geometry.zone_cap_lba;
        zone_use.full = true;
        zones.insert(zone);
    }
    zones.into_iter().collect()
}

fn children(state: &State, dir: &str) -> Vec<String> {
    let prefix = if dir == "/" { "/".to_string() } else { format!("{dir}/") };
    let mut names: Vec<String> = state
        .names
        .keys()
        .chain(state.dirs.iter())
        .filter(|path| path.as_str() != dir && parent_of(path) == dir)
        .map(|path| path[prefix.len()..].to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

fn info_of(node: &Node) -> FileInfo {
    FileInfo {
        name: node.record.name.clone(),
        size_bytes: node.size(),
        lifetime: node.record.lifetime,
        mtime_s: node.record.mtime_s,
        extents: node.record.extents.clone(),
        wal: node.record.wal.clone(),
    }
}

/// Every zone's descriptor, in order.
async fn report_all<Q: CommandQueue>(queue: &Q) -> Result<Vec<zonelab_zns::ZoneDescriptor>> {
    let geometry = queue.geometry();
    let mut zones = Vec::with_capacity(geometry.zones as usize);
    while zones.len() < geometry.zones as usize {
        let report = queue.report_zones(geometry.zone_start_lba(zones.len() as u32), ReportFilter::All, 1024).await?;
        if report.zones.is_empty() {
            break;
        }
        zones.extend(report.zones);
    }
    Ok(zones)
}

/// Reads `blocks` from `lba`, split at the device's transfer limit.
async fn read_blocks<Q: CommandQueue>(queue: &Q, lba: u64, blocks: u64) -> std::result::Result<Vec<u8>, Status> {
    let geometry = queue.geometry();
    let step = geometry.max_transfer_lba.unwrap_or(blocks).max(1);
    let mut out = Vec::with_capacity((blocks * u64::from(geometry.lba_size)) as usize);
    let mut done = 0;
    while done < blocks {
        let count = step.min(blocks - done);
        out.extend(queue.read(lba + done, count).await?);
        done += count;
    }
    Ok(out)
}
