//! # zonelab-logfs: an F2FS-like log-structured file system on zones
//!
//! Host layer (docs/design.md layer 5), written against the async command API so that it runs in virtual
//! time. It is the file system the ReZNS paper ran its FIO and filebench workloads on (F2FS, on a zoned
//! device), rebuilt in our own code from F2FS's published design (Lee et al., "F2FS: A New File System for
//! Flash Storage", FAST 2015) and its zoned-device mode; docs/logfs.md describes the layout and what differs.
//!
//! - **Sections are zones.** Zones 0 and 1 hold checkpoint records; the rest is the main area, written only
//!   at the write pointer by six logs (hot, warm and cold data; hot, warm and cold nodes).
//! - **Files** are an inode node and direct nodes holding block addresses (923 and 1015 per node); every
//!   write goes to a new block, invalidating the old one. Data is buffered in a page cache and written back on
//!   fsync, under memory pressure, or at unmount.
//! - **fsync** writes the file's data, then its nodes marked for roll-forward recovery, then flushes.
//! - **Checkpoints** write the directory's changed buckets and all dirty nodes, then the node address table;
//!   zones left with no valid block (prefree) are reset after it.
//! - **Cleaning** moves a victim zone's valid blocks (greedy in the foreground when free zones run short,
//!   cost-benefit in the background when idle), so the zone is reset at the next checkpoint.

mod format;
mod fs;
mod segments;

pub use format::BLOCK;
pub use fs::{
    FileStat, FsActivity, LogFs, LogFsError, LogFsFile, LogFsOptions, LogFsPlacement, LogFsSpace, LogFsStats,
    LogFsZone, MountReport,
};
pub use segments::Victim;
