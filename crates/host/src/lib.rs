//! # zonelab-host: software on the device
//!
//! Layer 5 of `docs/design.md`: host software written against the async command API of the runtime
//! (`CommandQueue`), never against device internals, so it runs in simulation now and against real clients later.
//! The I/O schedulers of the Linux block layer for zoned devices, write-ahead logs on zones, a zonefs-like file
//! layer, and a block-level host FTL that makes a zoned namespace randomly writable (dm-zap's level).

mod host_ftl;
mod reset_load;
mod scheduler;
pub mod trace;
pub mod wal;
mod zonefs;

pub use host_ftl::{host_ftl_geometry, HostFtl, HostFtlCounters, HostFtlError};
pub use reset_load::{run_reset_load, ResetLoadStats};
pub use scheduler::{
    QueueSpan, Scheduled, SchedulerCounters, SchedulerInfo, SchedulerKind, SchedulerQueue, ZincConfig, SCHEDULERS,
};
pub use wal::{RecoveryStats, Wal, WalConfig, WalDesign, WalError, WalStats, ZoneSource};
pub use zonefs::{read_files, FileState, FsError, ZoneFs, ZoneFsStats, ZoneLayout};
