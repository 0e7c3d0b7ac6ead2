//! A zonefs-like file layer: every zone of the namespace is a sequential file (`seq/N` in zonefs) whose size is
//! its zone's write pointer. Writes go at the end of a file; truncating a file to 0 resets its zone and to its
//! capacity finishes it; fsync is a device flush. Rules and error numbers follow Linux zonefs
//! (Documentation/filesystems/zonefs.rst): a write elsewhere than the end is EINVAL, one past the zone
//! capacity EFBIG (a write that crosses it is cut short), any other truncate size EPERM, a read-only zone
//! EPERM on write, an offline zone EIO.
//!
//! [`ZoneLayout`] holds the rules themselves, free of any I/O: [`ZoneFs`] applies them on the async command API
//! (the simulated experiments), and the zonefs-compatible FUSE mount applies the same ones to the kernel's
//! requests.

use std::cell::RefCell;

use zonelab_runtime::sync::{Mutex, MutexGuard};
use zonelab_runtime::{CommandQueue, HostExt, IoData};
use zonelab_zns::{Geometry, ReportFilter, Status, ZoneDescriptor, ZoneSendAction, ZoneState};

/// Why a file operation failed; `errno` gives the number zonefs returns.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    #[error("no file {0}: the namespace has {1} zones")]
    NoSuchFile(u32, u32),
    #[error("file {file}: writes go at the end of the file ({size}), not at {offset}")]
    NotAtEnd { file: u32, offset: u64, size: u64 },
    #[error("file {file}: {len} bytes is not a whole number of {lba_size}-byte blocks")]
    Misaligned { file: u32, len: u64, lba_size: u32 },
    #[error("file {file}: {size} + {len} bytes is past the zone capacity of {capacity} bytes")]
    TooBig { file: u32, size: u64, len: u64, capacity: u64 },
    #[error("file {file}: truncate to {size} bytes; only 0 (reset) and the capacity {capacity} (finish) are allowed")]
    BadTruncate { file: u32, size: u64, capacity: u64 },
    #[error("file {0}: its zone is read-only")]
    ReadOnly(u32),
    #[error("file {0}: its zone is offline")]
    Offline(u32),
    #[error("file {file}: the device failed the command: {status}")]
    Device { file: u32, status: Status },
}

impl FsError {
    /// The errno zonefs returns for this failure.
    pub fn errno(&self) -> i32 {
        const EPERM: i32 = 1;
        const ENOENT: i32 = 2;
        const EIO: i32 = 5;
        const EINVAL: i32 = 22;
        const EFBIG: i32 = 27;
        match self {
            FsError::NoSuchFile(..) => ENOENT,
            FsError::NotAtEnd { .. } | FsError::Misaligned { .. } => EINVAL,
            FsError::TooBig { .. } => EFBIG,
            FsError::BadTruncate { .. } | FsError::ReadOnly(_) => EPERM,
            FsError::Offline(_) | FsError::Device { .. } => EIO,
        }
    }
}

/// One file: its zone's size (the write pointer offset, in bytes) and condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileState {
    pub size: u64,
    pub condition: ZoneState,
}

/// Where each file's zone lies and the zonefs rules that follow from the geometry alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneLayout {
    pub lba_size: u32,
    pub lba_shift: u32,
    pub zone_size_lba: u64,
    /// A file's maximum size: its zone's capacity.
    pub capacity_bytes: u64,
    /// The largest command the device takes (MDTS), in blocks; None for no limit.
    pub max_transfer_lba: Option<u64>,
}

impl ZoneLayout {
    pub fn new(geometry: &Geometry) -> ZoneLayout {
        ZoneLayout {
            lba_size: geometry.lba_size,
            lba_shift: geometry.lba_shift,
            zone_size_lba: geometry.zone_size_lba,
            capacity_bytes: geometry.zone_cap_lba << geometry.lba_shift,
            max_transfer_lba: geometry.max_transfer_lba,
        }
    }

    /// Splits `nlb` blocks from `slba` into commands the device takes, as the block layer splits a large
    /// request at the device's MDTS: `(slba, nlb)` of each, in order.
    pub fn commands(&self, slba: u64, nlb: u64) -> impl Iterator<Item = (u64, u64)> {
        zonelab_zns::transfers(slba, nlb, self.max_transfer_lba)
    }

    /// A file as a zone report shows its zone, as zonefs's `zonefs_check_zone_condition` reads it: a full zone
    /// is its capacity, an offline one empty; a read-only zone has no valid write pointer, so the file keeps
    /// the size it had (`known_size`: 0 at mount, so that such a file mounts empty).
    pub fn file_of(&self, zone: &ZoneDescriptor, known_size: u64) -> FileState {
        let size = match zone.state {
            ZoneState::Full => self.capacity_bytes,
            ZoneState::Offline => 0,
            ZoneState::ReadOnly => known_size,
            _ => zone.wp_lba.saturating_sub(zone.start_lba) << self.lba_shift,
        };
        FileState { size, condition: zone.state }
    }

    /// The first LBA of a file's zone.
    pub fn zslba(&self, file: u32) -> u64 {
        u64::from(file) * self.zone_size_lba
    }

    /// Checks a write of `len` bytes at `offset` into `file`, whose writes so far end at `state.size`; returns
    /// how many bytes zonefs accepts. In `zonefs_file_write_iter`'s order: a read-only or offline zone is
    /// refused, a write that starts at or past the capacity is EFBIG and one that crosses it is cut short
    /// (`zonefs_write_check_limits`), an unaligned offset or length is EINVAL, and so is any offset but the end.
    pub fn check_write(&self, file: u32, state: &FileState, offset: u64, len: u64) -> Result<u64, FsError> {
        match state.condition {
            ZoneState::ReadOnly => return Err(FsError::ReadOnly(file)),
            ZoneState::Offline => return Err(FsError::Offline(file)),
            _ => {}
        }
        if len == 0 {
            return Ok(0);
        }
        if offset >= self.capacity_bytes {
            return Err(FsError::TooBig { file, size: state.size, len, capacity: self.capacity_bytes });
        }
        let accepted = len.min(self.capacity_bytes - offset);
        let mask = u64::from(self.lba_size) - 1;
        if (offset | accepted) & mask != 0 {
            return Err(FsError::Misaligned { file, len, lba_size: self.lba_size });
        }
        if offset != state.size {
            return Err(FsError::NotAtEnd { file, offset, size: state.size });
        }
        Ok(accepted)
    }

    /// What a truncate of `file` to `size` asks of its zone: a reset for 0, a finish for the capacity, nothing
    /// when the file has that size already; any other size is EPERM.
    pub fn truncate_action(&self, file: u32, state: &FileState, size: u64) -> Result<Option<ZoneSendAction>, FsError> {
        // zonefs_inode_setattr truncates only when the size changes: to the current size is a no-op.
        if state.size == size {
            return Ok(None);
        }
        let action = if size == 0 {
            ZoneSendAction::Reset
        } else if size == self.capacity_bytes {
            ZoneSendAction::Finish
        } else {
            return Err(FsError::BadTruncate { file, size, capacity: self.capacity_bytes });
        };
        match state.condition {
            ZoneState::ReadOnly => Err(FsError::ReadOnly(file)),
            ZoneState::Offline => Err(FsError::Offline(file)),
            _ => Ok(Some(action)),
        }
    }

    /// The whole blocks that hold bytes `offset..end` of a file: the first LBA and the count.
    pub fn blocks_of(&self, file: u32, offset: u64, end: u64) -> (u64, u64) {
        let mask = u64::from(self.lba_size) - 1;
        let (first, last) = (offset & !mask, (end + mask) & !mask);
        (self.zslba(file) + (first >> self.lba_shift), (last - first) >> self.lba_shift)
    }
}

/// Counts of what the file layer asked of the device.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ZoneFsStats {
    pub writes: u64,
    pub bytes_written: u64,
    pub reads: u64,
    pub bytes_read: u64,
    pub resets: u64,
    pub finishes: u64,
    pub fsyncs: u64,
}

/// Every file's size and condition, from a report of the whole device: what zonefs reads at mount.
pub async fn read_files<Q: CommandQueue>(queue: &Q) -> Result<Vec<FileState>, Status> {
    let geometry = queue.geometry();
    let layout = ZoneLayout::new(&geometry);
    let mut files = Vec::with_capacity(geometry.zones as usize);
    while files.len() < geometry.zones as usize {
        let report = queue.report_zones(layout.zslba(files.len() as u32), ReportFilter::All, 1024).await?;
        if report.zones.is_empty() {
            break;
        }
        files.extend(report.zones.iter().map(|zone| layout.file_of(zone, 0)));
    }
    Ok(files)
}

/// The mounted file system.
pub struct ZoneFs<Q> {
    queue: Q,
    layout: ZoneLayout,
    files: RefCell<Vec<FileState>>,
    /// One per file, held through a write, truncate or its error recovery: like zonefs's inode lock, one at a
    /// time. The guard releases it even when the operation's future is dropped half way.
    locks: Vec<Mutex<()>>,
    stats: RefCell<ZoneFsStats>,
}

impl<Q: CommandQueue> ZoneFs<Q> {
    /// Mounts: a zone report sets each file's size from its write pointer, as zonefs does.
    pub async fn mount(queue: Q) -> Result<ZoneFs<Q>, Status> {
        let geometry = queue.geometry();
        let fs = ZoneFs {
            layout: ZoneLayout::new(&geometry),
            files: RefCell::new(Vec::new()),
            locks: (0..geometry.zones).map(|_| Mutex::new(())).collect(),
            stats: RefCell::default(),
            queue,
        };
        *fs.files.borrow_mut() = read_files(&fs.queue).await?;
        Ok(fs)
    }

    pub fn files(&self) -> u32 {
        self.files.borrow().len() as u32
    }

    /// The largest size a file can reach: its zone's capacity.
    pub fn capacity(&self) -> u64 {
        self.layout.capacity_bytes
    }

    pub fn size(&self, file: u32) -> Result<u64, FsError> {
        self.check(file)?;
        Ok(self.files.borrow()[file as usize].size)
    }

    pub fn stats(&self) -> ZoneFsStats {
        self.stats.borrow().clone()
    }

    fn check(&self, file: u32) -> Result<(), FsError> {
        let files = self.files.borrow().len() as u32;
        if file >= files {
            return Err(FsError::NoSuchFile(file, files));
        }
        Ok(())
    }

    fn state(&self, file: u32) -> FileState {
        self.files.borrow()[file as usize]
    }

    /// Takes the file's lock, waiting for the writer before.
    async fn lock(&self, file: u32) -> MutexGuard<'_, ()> {
        self.locks[file as usize].lock().await
    }

    /// Appends `data` at the end of a file (a write at offset `size`); returns the offset it landed at. As in
    /// zonefs, a write that crosses the capacity is cut short: `size` tells how far it went.
    pub async fn append(&self, file: u32, data: IoData) -> Result<u64, FsError> {
        self.check(file)?;
        let _guard = self.lock(file).await;
        let size = self.state(file).size;
        let result = self.write_locked(file, size, data).await;
        result.map(|_| size)
    }

    /// Writes `data` at `offset`, which must be the file's end; returns how many bytes were written.
    pub async fn write(&self, file: u32, offset: u64, data: IoData) -> Result<u64, FsError> {
        self.check(file)?;
        let _guard = self.lock(file).await;
        let result = self.write_locked(file, offset, data).await;
        result
    }

    async fn write_locked(&self, file: u32, offset: u64, data: IoData) -> Result<u64, FsError> {
        let accepted = self.layout.check_write(file, &self.state(file), offset, data.len())?;
        if accepted == 0 {
            return Ok(0);
        }
        let slba = self.layout.zslba(file) + (offset >> self.layout.lba_shift);
        let mut written = Ok(());
        for (chunk_slba, nlb) in self.layout.commands(slba, accepted >> self.layout.lba_shift) {
            let chunk = data.range((chunk_slba - slba) << self.layout.lba_shift, nlb << self.layout.lba_shift);
            written = self.queue.write(chunk_slba, chunk).await;
            if written.is_err() {
                break;
            }
        }
        match written {
            Ok(()) => {
                let mut files = self.files.borrow_mut();
                let state = &mut files[file as usize];
                state.size = offset + accepted;
                state.condition = if state.size == self.layout.capacity_bytes {
                    ZoneState::Full
                } else {
                    ZoneState::ImplicitlyOpened
                };
                let mut stats = self.stats.borrow_mut();
                stats.writes += 1;
                stats.bytes_written += accepted;
                Ok(accepted)
            }
            Err(status) => {
                // As zonefs does after a write error: the zone's report says what the file now is.
                self.refresh(file).await;
                Err(FsError::Device { file, status })
            }
        }
    }

    /// Re-reads a file's zone from the device and takes its size and condition from it.
    async fn refresh(&self, file: u32) {
        if let Ok(report) = self.queue.report_zones(self.layout.zslba(file), ReportFilter::All, 1).await {
            if let Some(zone) = report.zones.first() {
                let known = self.state(file).size;
                self.files.borrow_mut()[file as usize] = self.layout.file_of(zone, known);
            }
        }
    }

    /// Reads up to `len` bytes at `offset`; short at the end of the file, empty past it.
    pub async fn read(&self, file: u32, offset: u64, len: u64) -> Result<Vec<u8>, FsError> {
        self.check(file)?;
        let state = self.state(file);
        if state.condition == ZoneState::Offline {
            return Err(FsError::Offline(file));
        }
        let end = (offset.saturating_add(len)).min(state.size);
        if end <= offset {
            return Ok(Vec::new());
        }
        let (slba, nlb) = self.layout.blocks_of(file, offset, end);
        let mut bytes = Vec::with_capacity((nlb << self.layout.lba_shift) as usize);
        for (chunk_slba, chunk_nlb) in self.layout.commands(slba, nlb) {
            let chunk =
                self.queue.read(chunk_slba, chunk_nlb).await.map_err(|status| FsError::Device { file, status })?;
            bytes.extend_from_slice(&chunk);
        }
        let mut stats = self.stats.borrow_mut();
        stats.reads += 1;
        stats.bytes_read += end - offset;
        let skip = offset - ((slba - self.layout.zslba(file)) << self.layout.lba_shift);
        Ok(bytes[skip as usize..(skip + end - offset) as usize].to_vec())
    }

    /// Truncate: to 0 resets the file's zone, to its capacity finishes it; any other size is refused.
    pub async fn truncate(&self, file: u32, size: u64) -> Result<(), FsError> {
        self.check(file)?;
        let _guard = self.lock(file).await;
        let Some(action) = self.layout.truncate_action(file, &self.state(file), size)? else {
            return Ok(());
        };
        let result = match self.queue.zone_send(self.layout.zslba(file), action, false).await {
            Ok(()) => {
                let condition = if size == 0 { ZoneState::Empty } else { ZoneState::Full };
                self.files.borrow_mut()[file as usize] = FileState { size, condition };
                let mut stats = self.stats.borrow_mut();
                if size == 0 {
                    stats.resets += 1;
                } else {
                    stats.finishes += 1;
                }
                Ok(())
            }
            Err(status) => {
                self.refresh(file).await;
                Err(FsError::Device { file, status })
            }
        };
        result
    }

    /// fsync: a device flush, so every completed write of every file is durable.
    pub async fn fsync(&self, file: u32) -> Result<(), FsError> {
        self.check(file)?;
        self.queue.flush().await.map_err(|status| FsError::Device { file, status })?;
        self.stats.borrow_mut().fsyncs += 1;
        Ok(())
    }
}
