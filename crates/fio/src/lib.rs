//! `zonelab fio`: fio's options and outputs over a simulated device. A job file or command line written for
//! fio runs with only `--filename` changed, in virtual time.

mod distribution;
mod engine;
pub mod help;
mod histogram;
mod iolog;
mod logs;
mod options;
mod randommap;
mod report;
mod verify;

pub use engine::{run, run_reporting, DirectionStats, FioResult, GroupResult, IoDistribution, JobResult, Progress};
pub use histogram::{Histogram, LatencyStats};
pub use logs::{write_logs, IoLog, LogEntry};
pub use options::{
    parse_invocation, parse_size, Eta, FioError, FioInvocation, IoEngine, JobOptions, OutputFormat, ReadWrite, SizeSpec,
};
pub use report::{status_line, to_json, to_terse, to_text, ZONELAB_VERSION};
