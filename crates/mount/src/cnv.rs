//! `cnv/0`: the device's conventional namespace as one randomly writable file, as zonefs aggregates a zoned
//! device's conventional zones into `cnv/0` (kernel `Documentation/filesystems/zonefs.rst`, "Conventional zone
//! aggregation"). Its size is the namespace's and never changes; reads and writes may start and end anywhere
//! in it (a write that covers a block in part reads the block first), so a loop device over it can carry a
//! kernel file system on the emulated conventional SSD.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use fuser::{FileAttr, FileType, INodeNo};
use zonelab_runtime::{CommandQueue, IoData, Output, QueuedCommand, RealTimeHost};
use zonelab_zns::{transfers, Geometry, Status};

/// Node id of `cnv/`.
pub(crate) const CNV_DIR: u64 = 3;
/// Node id of `cnv/0`.
pub(crate) const CNV_FILE: u64 = 4;

/// The conventional namespace behind `cnv/0`.
pub(crate) struct ConventionalFile {
    host: RealTimeHost,
    geometry: Geometry,
    /// Mode, owner and group: in memory only, as zonefs keeps them.
    attr: Mutex<(u16, u32, u32)>,
}

impl ConventionalFile {
    /// The file over `host`, a handle on a conventional namespace.
    pub(crate) fn new(host: RealTimeHost, perm: u16, uid: u32, gid: u32) -> ConventionalFile {
        let geometry = host.geometry();
        ConventionalFile { host, geometry, attr: Mutex::new((perm, uid, gid)) }
    }

    pub(crate) fn host(&self) -> &RealTimeHost {
        &self.host
    }

    pub(crate) fn size(&self) -> u64 {
        self.geometry.nsze_lba << self.geometry.lba_shift
    }

    fn lba_bytes(&self) -> u64 {
        u64::from(self.geometry.lba_size)
    }

    /// Mode, owner and group as they stand.
    pub(crate) fn owner(&self) -> MutexGuard<'_, (u16, u32, u32)> {
        self.attr.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn attr(&self, mounted_at: SystemTime, read_only: bool) -> FileAttr {
        let (perm, uid, gid) = *self.owner();
        FileAttr {
            ino: INodeNo(CNV_FILE),
            size: self.size(),
            blocks: self.size() >> 9,
            atime: mounted_at,
            mtime: mounted_at,
            ctime: mounted_at,
            crtime: mounted_at,
            kind: FileType::RegularFile,
            perm: if read_only { perm & !0o222 } else { perm },
            nlink: 1,
            uid,
            gid,
            rdev: 0,
            blksize: self.geometry.lba_size,
            flags: 0,
        }
    }

    /// The blocks that hold bytes `offset..end`, as their first byte and reads of at most one transfer each.
    pub(crate) fn reads(&self, offset: u64, end: u64) -> (u64, Vec<QueuedCommand>) {
        let mask = self.lba_bytes() - 1;
        let (first, last) = (offset & !mask, (end + mask) & !mask);
        let (slba, nlb) = (first >> self.geometry.lba_shift, (last - first) >> self.geometry.lba_shift);
        let commands = transfers(slba, nlb, self.geometry.max_transfer_lba)
            .map(|(slba, nlb)| QueuedCommand::Read { slba, nlb, keep: true })
            .collect();
        (first, commands)
    }

    /// Writes of whole blocks `data` from byte `offset` (a multiple of the block size), one transfer each.
    pub(crate) fn writes(&self, offset: u64, data: &[u8]) -> Vec<QueuedCommand> {
        let shift = self.geometry.lba_shift;
        let slba = offset >> shift;
        transfers(slba, data.len() as u64 >> shift, self.geometry.max_transfer_lba)
            .map(|(piece, nlb)| {
                let start = ((piece - slba) << shift) as usize;
                let bytes = data[start..start + (nlb << shift) as usize].to_vec();
                QueuedCommand::Write { slba: piece, data: IoData::Bytes(bytes) }
            })
            .collect()
    }

    /// Writes `data` at `offset`: whole blocks as they are, and blocks it covers in part after reading them,
    /// so that the bytes around it stay. Returns when every command has completed.
    pub(crate) async fn write(&self, offset: u64, data: &[u8]) -> Result<(), Status> {
        let mask = self.lba_bytes() - 1;
        let end = offset + data.len() as u64;
        if (offset | end) & mask == 0 {
            return run(&self.host, self.writes(offset, data)).await.map(drop);
        }
        let (first, reads) = self.reads(offset, end);
        let mut blocks = crate::fs::data_of(run(&self.host, reads).await?);
        let at = (offset - first) as usize;
        blocks[at..at + data.len()].copy_from_slice(data);
        run(&self.host, self.writes(first, &blocks)).await.map(drop)
    }
}

/// Submits `commands` at once and waits for all of them; the first failure is the result.
pub(crate) async fn run(host: &RealTimeHost, commands: Vec<QueuedCommand>) -> Result<Vec<Output>, Status> {
    let pendings: Vec<_> = commands.into_iter().map(|command| host.submit_pending(command)).collect();
    crate::fs::all_done(pendings).await
}
