//! # zonelab-workload: load and measurement
//!
//! Layer 6 of `docs/design.md`. For now: the closed-loop load generator (a fixed number of jobs, each
//! keeping its queue depth of one operation busy, as fio and SPDK's perf do) and the calibration of a preset
//! against the reference measurements in `reference/`. The fio-compatible engine grows out of the generator.

mod args;
pub mod calibrate;
mod closed_loop;
pub mod experiment;
mod filebench;
pub mod filechurn;
pub mod fio;
pub mod kvbench;
mod parallel;
mod plot;
pub mod realdb;
pub mod sweep;
pub mod walbench;
pub mod zonemap;
pub mod zonetimeline;

pub use args::ToolError;
pub use closed_loop::{run_closed_loop, LoopSpec, LoopStats, Operation};
