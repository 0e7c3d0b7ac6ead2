//! # zonelab-runtime: clocks
//!
//! Layer 4 of `../shared/DESIGN.md`. Host code talks to a device through one async command API, the
//! `CommandQueue` trait and its helpers in `HostExt`, and never reads a clock of its own. This crate has the
//! *virtual-time* runtime: `Simulation`, a deterministic single-threaded executor whose clock jumps to the next
//! completion, so the same seed gives the same results byte for byte and a simulation runs far faster than real
//! time. The real-time runtime (a device thread that completes each command when the wall clock reaches its
//! modelled completion time) implements the same trait later; host code written against `CommandQueue` runs
//! under both.

mod api;
pub mod rng;
mod sim;

pub use api::{CommandQueue, HostExt, IoData, Output, QueuedCommand, TaskId};
pub use sim::{Host, Simulation};
