//! A zonefs-like file layer: every zone of the namespace is a sequential file (`seq/N` in zonefs) whose size is
//! its zone's write pointer. Writes go at the end of a file; truncating a file to 0 resets its zone and to its
//! capacity finishes it; fsync is a device flush. Rules and error numbers follow Linux zonefs
//! (Documentation/filesystems/zonefs.rst): a write elsewhere than the end is EINVAL, one past the zone
//! capacity EFBIG, any other truncate size EPERM, a read-only zone EPERM on write, an offline zone EIO.
//!
//! The simulated experiments use it now; the zonefs-compatible mount will serve the same code.

use std::cell::RefCell;

use zonelab_runtime::sync::{Mutex, MutexGuard};
use zonelab_runtime::{CommandQueue, HostExt, IoData};
use zonelab_zns::{ReportFilter, Status, ZoneSendAction, ZoneState};

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

/// One file: its zone's size and condition.
#[derive(Clone, Debug)]
struct FileState {
    size: u64,
    condition: ZoneState,
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

/// The mounted file system.
pub struct ZoneFs<Q> {
    queue: Q,
    lba_size: u32,
    lba_shift: u32,
    zone_size_lba: u64,
    capacity_bytes: u64,
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
            lba_size: geometry.lba_size,
            lba_shift: geometry.lba_shift,
            zone_size_lba: geometry.zone_size_lba,
            capacity_bytes: geometry.zone_cap_lba << geometry.lba_shift,
            files: RefCell::new(Vec::with_capacity(geometry.zones as usize)),
            locks: (0..geometry.zones).map(|_| Mutex::new(())).collect(),
            stats: RefCell::default(),
            queue,
        };
        let mut slba = 0;
        while fs.files.borrow().len() < geometry.zones as usize {
            let report = fs.queue.report_zones(slba, ReportFilter::All, 1024).await?;
            if report.zones.is_empty() {
                break;
            }
            for zone in &report.zones {
                let size = fs.size_of(zone.state, zone.wp_lba - zone.start_lba);
                fs.files.borrow_mut().push(FileState { size, condition: zone.state });
                slba = zone.start_lba + fs.zone_size_lba;
            }
        }
        Ok(fs)
    }

    /// A file's size from its zone's state and write pointer offset (in blocks).
    fn size_of(&self, state: ZoneState, written_lba: u64) -> u64 {
        match state {
            ZoneState::Full => self.capacity_bytes,
            ZoneState::Offline | ZoneState::ReadOnly => 0,
            _ => written_lba << self.lba_shift,
        }
    }

    pub fn files(&self) -> u32 {
        self.files.borrow().len() as u32
    }

    /// The largest size a file can reach: its zone's capacity.
    pub fn capacity(&self) -> u64 {
        self.capacity_bytes
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

    fn zslba(&self, file: u32) -> u64 {
        u64::from(file) * self.zone_size_lba
    }

    /// Takes the file's lock, waiting for the writer before.
    async fn lock(&self, file: u32) -> MutexGuard<'_, ()> {
        self.locks[file as usize].lock().await
    }

    /// Appends `data` at the end of a file (a write at offset `size`); returns the offset it landed at.
    pub async fn append(&self, file: u32, data: IoData) -> Result<u64, FsError> {
        self.check(file)?;
        let _guard = self.lock(file).await;
        let size = self.files.borrow()[file as usize].size;
        let result = self.write_locked(file, size, data).await;
        result.map(|()| size)
    }

    /// Writes `data` at `offset`, which must be the file's end.
    pub async fn write(&self, file: u32, offset: u64, data: IoData) -> Result<(), FsError> {
        self.check(file)?;
        let _guard = self.lock(file).await;
        let result = self.write_locked(file, offset, data).await;
        result
    }

    async fn write_locked(&self, file: u32, offset: u64, data: IoData) -> Result<(), FsError> {
        let (size, condition) = {
            let files = self.files.borrow();
            (files[file as usize].size, files[file as usize].condition)
        };
        let len = data.len();
        match condition {
            ZoneState::ReadOnly => return Err(FsError::ReadOnly(file)),
            ZoneState::Offline => return Err(FsError::Offline(file)),
            _ => {}
        }
        if offset != size {
            return Err(FsError::NotAtEnd { file, offset, size });
        }
        if !len.is_multiple_of(u64::from(self.lba_size)) {
            return Err(FsError::Misaligned { file, len, lba_size: self.lba_size });
        }
        if size + len > self.capacity_bytes {
            return Err(FsError::TooBig { file, size, len, capacity: self.capacity_bytes });
        }
        if len == 0 {
            return Ok(());
        }
        let slba = self.zslba(file) + (size >> self.lba_shift);
        match self.queue.write(slba, data).await {
            Ok(()) => {
                let mut files = self.files.borrow_mut();
                let state = &mut files[file as usize];
                state.size = size + len;
                state.condition =
                    if state.size == self.capacity_bytes { ZoneState::Full } else { ZoneState::ImplicitlyOpened };
                let mut stats = self.stats.borrow_mut();
                stats.writes += 1;
                stats.bytes_written += len;
                Ok(())
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
        if let Ok(report) = self.queue.report_zones(self.zslba(file), ReportFilter::All, 1).await {
            if let Some(zone) = report.zones.first() {
                let size = self.size_of(zone.state, zone.wp_lba.saturating_sub(zone.start_lba));
                let mut files = self.files.borrow_mut();
                files[file as usize].size = size;
                files[file as usize].condition = zone.state;
            }
        }
    }

    /// Reads up to `len` bytes at `offset`; short at the end of the file, empty past it.
    pub async fn read(&self, file: u32, offset: u64, len: u64) -> Result<Vec<u8>, FsError> {
        self.check(file)?;
        let (size, condition) = {
            let files = self.files.borrow();
            (files[file as usize].size, files[file as usize].condition)
        };
        if condition == ZoneState::Offline {
            return Err(FsError::Offline(file));
        }
        let end = (offset.saturating_add(len)).min(size);
        if end <= offset {
            return Ok(Vec::new());
        }
        let mask = u64::from(self.lba_size) - 1;
        let (first, last) = (offset & !mask, (end + mask) & !mask);
        let slba = self.zslba(file) + (first >> self.lba_shift);
        let bytes = self
            .queue
            .read(slba, (last - first) >> self.lba_shift)
            .await
            .map_err(|status| FsError::Device { file, status })?;
        let mut stats = self.stats.borrow_mut();
        stats.reads += 1;
        stats.bytes_read += end - offset;
        Ok(bytes[(offset - first) as usize..(end - first) as usize].to_vec())
    }

    /// Truncate: to 0 resets the file's zone, to its capacity finishes it; any other size is refused.
    pub async fn truncate(&self, file: u32, size: u64) -> Result<(), FsError> {
        self.check(file)?;
        let action = if size == 0 {
            ZoneSendAction::Reset
        } else if size == self.capacity_bytes {
            ZoneSendAction::Finish
        } else {
            return Err(FsError::BadTruncate { file, size, capacity: self.capacity_bytes });
        };
        let _guard = self.lock(file).await;
        let condition = self.files.borrow()[file as usize].condition;
        let result = match condition {
            ZoneState::ReadOnly => Err(FsError::ReadOnly(file)),
            ZoneState::Offline => Err(FsError::Offline(file)),
            _ => match self.queue.zone_send(self.zslba(file), action, false).await {
                Ok(()) => {
                    let mut files = self.files.borrow_mut();
                    files[file as usize].size = size;
                    files[file as usize].condition = if size == 0 { ZoneState::Empty } else { ZoneState::Full };
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
            },
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
