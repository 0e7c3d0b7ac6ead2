//! # zonelab-bench: the benchmarks of the workload layer
//!
//! Layer 6 of `docs/design.md`, beside the fio engine (`zonelab-fio`) and the experiments
//! (`zonelab-experiments`): the closed-loop load generator (a fixed number of jobs, each keeping its queue depth
//! of one operation busy, as fio and SPDK's perf do), kv-bench, wal-bench, file-churn, the real RocksDB driver,
//! the zone maps and timelines they draw, and the argument and parallel-map helpers the experiments share.

pub mod args;
mod closed_loop;
mod filebench;
pub mod filechurn;
pub mod kvbench;
pub mod parallel;
pub mod plot;
pub mod realdb;
pub mod walbench;
pub mod zonemap;
pub mod zonetimeline;

pub use args::ToolError;
pub use closed_loop::{run_closed_loop, LoopSpec, LoopStats, Operation};
