//! # zonelab-zonedfs: a zoned file system for RocksDB
//!
//! Host layer (docs/design.md layer 5), in the spirit of ZenFS (the file system RocksDB uses on ZNS drives) but
//! our own design, written against the async command API so that it runs in virtual time in tests and in real
//! time under RocksDB (through the C ABI and the plugin in `rocksdb/`). docs/zonedfs.md describes the layout.
//!
//! - **Metadata**: the first two zones hold a journal of CRC-sealed records (`journal`): a superblock and a
//!   snapshot of the namespace, then one record per change. When a zone is full the journal rolls to the other
//!   zone with a new snapshot; a mount replays the newest whole generation.
//! - **Files** are lists of extents in data zones. A writable file buffers its appends and writes whole blocks
//!   at the write pointer of a zone it holds alone for that write; `sync` writes the tail (padded to a block)
//!   and journals the file's new extents, so what `sync` returned survives a crash and nothing past a write
//!   pointer is ever believed.
//! - **Zones** are chosen by RocksDB's write-lifetime hint (files with similar lifetimes share zones, as in
//!   ZenFS), within the device's active and open limits; a zone whose extents are all dead is reset, and when
//!   empty zones run low, garbage collection moves the live extents of the emptiest full zone and resets it.

mod fs;
pub mod journal;

pub use fs::{FileInfo, FsOptions, FsSpace, FsStats, OpenMode, ReadPlan, ZoneInfo, ZonedFs, ZonedFsError};
pub use journal::{Extent, FileRecord, Record};
