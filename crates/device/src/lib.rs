//! # zonelab-device: the emulated controller
//!
//! Layer 3 of `docs/design.md`: one emulated ZNS controller that runs each command through the zoned
//! namespace (what happens) and the flash model (when it completes). A host path (SPDK, io_uring, io_uring
//! passthrough, the kernel block layer) and its per-command cost are the host's side (`HostSide`), which the
//! runtimes charge around each command. It also models power loss
//! (without power-loss protection, what sat in the write buffer unprogrammed is lost and write pointers roll
//! back), keeps counters, and records per-command trace events on request. Presets (`presets/*.toml`) describe
//! whole devices.

mod build;
mod command;
mod conventional;
mod device;
mod host;
mod preset;
mod queue;
pub mod rng;

pub use build::{BuildError, Built, DeviceBuilder, DeviceSpec, StoreChoice};
pub use command::{IoData, Output, QueuedCommand};
pub use conventional::{ConventionalNamespaceConfig, ConventionalStats};
pub use device::{Device, DeviceCounters, DeviceStats, Submitted, TraceEvent, ZoneFault, TRACE_LIMIT};
pub use host::{micros_to_ns, CoreShare, HostPath, HostSide};
pub use preset::{apply_override, CalibrationReferences, DeviceConfig, HostCost, HostCosts, PresetError, PRESETS};
pub use queue::{QueueFull, SUBMISSION_QUEUE_ENTRIES};
