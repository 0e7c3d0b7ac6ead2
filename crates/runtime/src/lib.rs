//! # zonelab-runtime: clocks
//!
//! Layer 4 of `docs/design.md`. Host code talks to a device through one async command API, the
//! `CommandQueue` trait and its helpers in `HostExt`, and never reads a clock of its own. Its futures register
//! the waker of the `Context` they are polled with, and tasks coordinate through the waker-based primitives of
//! `sync` (mutex with guard, notification, bounded channel), so host code runs under any executor. This crate
//! has the *virtual-time* runtime: `Simulation`, a deterministic single-threaded executor whose clock jumps to
//! the next completion, so the same seed gives the same results byte for byte and a simulation runs far faster
//! than real time. The device is an actor: commands wait in its bounded submission queue until the runtime asks
//! it to process them, and it picks their order. The *real-time* runtime (`RealTime`) drives the same device
//! from a thread of its own that delivers each completion when the wall clock reaches its modelled time; a
//! `HostThread` runs host code against it for callers on other threads.

mod api;
pub mod control;
mod host_thread;
pub mod placement;
mod realtime;
mod sim;
pub mod sync;
mod timers;

pub use api::{CommandQueue, HostExt, IoData, Output, QueuedCommand};
pub use host_thread::HostThread;
pub use placement::{Placement, Wait};
pub use realtime::{
    block_on, block_termination_signals, Pacing, PacingSummary, Pending, RealTime, RealTimeHost, StartError, Stopped,
    LATE_SHARE_WARNING,
};
pub use sim::{Host, Simulation};
pub use zonelab_device::rng;
