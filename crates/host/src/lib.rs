//! # zonelab-host: software on the device
//!
//! Layer 5 of `docs/design.md`: host software written against the async command API of the runtime
//! (`CommandQueue`), never against device internals, so it runs in simulation now and against real clients later.
//! For now: the I/O schedulers of the Linux block layer for zoned devices, write-ahead logs on zones, and a
//! zonefs-like file layer.

mod reset_load;
mod scheduler;
pub mod wal;
mod zonefs;

pub use reset_load::{run_reset_load, ResetLoadStats};
pub use scheduler::{Scheduled, SchedulerCounters, SchedulerKind, ZincConfig};
pub use wal::{RecoveryStats, Wal, WalConfig, WalDesign, WalError, WalStats, ZoneSource};
pub use zonefs::{read_files, FileState, FsError, ZoneFs, ZoneFsStats, ZoneLayout};
