//! The host's side of the device: how the host reaches it (SPDK, io_uring, io_uring passthrough, the kernel
//! block layer) and what that costs the host per command, before the command reaches the controller and after
//! the controller completes it. The runtimes charge it; the device never sees it.

use serde::Serialize;

use crate::{HostCosts, QueuedCommand};

/// How the host reaches the device; each path adds its own per-command cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostPath {
    /// User-space driver: the least host overhead; carries zone append.
    Spdk,
    /// io_uring on the block device: no zone append.
    IoUring,
    /// io_uring NVMe passthrough: carries zone append.
    IoUringCmd,
    /// The kernel block layer (psync, libaio): no zone append from user space.
    Kernel,
}

impl HostPath {
    pub const ALL: [HostPath; 4] = [HostPath::Spdk, HostPath::IoUring, HostPath::IoUringCmd, HostPath::Kernel];

    /// The path `name` names (`spdk`, `io_uring`, `io_uring_cmd`, `kernel`).
    pub fn parse(name: &str) -> Option<HostPath> {
        HostPath::ALL.into_iter().find(|path| path.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            HostPath::Spdk => "spdk",
            HostPath::IoUring => "io_uring",
            HostPath::IoUringCmd => "io_uring_cmd",
            HostPath::Kernel => "kernel",
        }
    }

    /// Whether commands pass Linux's block-layer I/O scheduler on this path (SPDK and passthrough bypass it).
    pub fn through_block_layer(self) -> bool {
        matches!(self, HostPath::IoUring | HostPath::Kernel)
    }

    pub fn carries_append(self) -> bool {
        matches!(self, HostPath::Spdk | HostPath::IoUringCmd)
    }
}

/// Microseconds, as a preset gives them, in whole nanoseconds.
pub fn micros_to_ns(us: f64) -> u64 {
    (us * 1000.0).round() as u64
}

/// A host path with its per-command costs in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostSide {
    pub path: HostPath,
    /// From the host's submission to the command's arrival at the controller.
    pub submit_ns: u64,
    /// From the controller's completion to the host seeing it.
    pub complete_ns: u64,
}

impl HostSide {
    /// `path` with the costs a preset gives it.
    pub fn new(path: HostPath, costs: &HostCosts) -> HostSide {
        let cost = costs.for_path(path);
        HostSide { path, submit_ns: micros_to_ns(cost.submit_us), complete_ns: micros_to_ns(cost.complete_us) }
    }

    /// The CPU time, in nanoseconds, of a submission and of a completion on this path.
    pub fn cpu_ns(&self, costs: &HostCosts) -> (u64, u64) {
        let (submit_us, complete_us) = costs.for_path(self.path).cpu_us();
        (micros_to_ns(submit_us), micros_to_ns(complete_us))
    }

    /// This path less its CPU time: what a runtime adds to a command when the host's threads spend that CPU
    /// time themselves (as fio's jobs do on their cores), leaving the waits that occupy no core.
    pub fn waits_only(self, costs: &HostCosts) -> HostSide {
        let (submit_cpu_ns, complete_cpu_ns) = self.cpu_ns(costs);
        HostSide {
            submit_ns: self.submit_ns.saturating_sub(submit_cpu_ns),
            complete_ns: self.complete_ns.saturating_sub(complete_cpu_ns),
            ..self
        }
    }

    /// SPDK at no cost: the device alone, as a test of the device sees it.
    pub fn free() -> HostSide {
        HostSide { path: HostPath::Spdk, submit_ns: 0, complete_ns: 0 }
    }

    /// When a command submitted at `now_ns` reaches the controller.
    pub fn arrival_ns(&self, now_ns: u64) -> u64 {
        now_ns.saturating_add(self.submit_ns)
    }

    /// When the host sees a command that arrived at `arrival_ns` and that the device completed at `device_ns`.
    pub fn completion_ns(&self, arrival_ns: u64, device_ns: u64) -> u64 {
        device_ns.max(arrival_ns).saturating_add(self.complete_ns)
    }

    /// Whether the path can carry `command` at all: zone append needs SPDK or NVMe passthrough; through the
    /// others it fails as an invalid opcode.
    pub fn carries(&self, command: &QueuedCommand) -> bool {
        !matches!(command, QueuedCommand::Append { .. }) || self.path.carries_append()
    }
}
