//! The host's side of the device: how the host reaches it (SPDK, io_uring, io_uring passthrough, the kernel
//! block layer) and what that costs the host per command, before the command reaches the controller and after
//! the controller completes it. The runtimes charge it; the device never sees it.

use serde::{Deserialize, Serialize};

use crate::{HostCosts, QueuedCommand};

/// How the host reaches the device; each path adds its own per-command cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

    /// Whether a thread on this path busy-polls for its completions and so never leaves its core: SPDK's. The
    /// others sleep in the kernel until an interrupt wakes them.
    pub fn polls(self) -> bool {
        self == HostPath::Spdk
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

/// Polling threads taking turns on fewer cores than there are of them, as Linux's scheduler shares cores among
/// threads that never sleep: time is cut into slices, and in each slice the next `cores` threads of a circle
/// run, so that each runs `cores / threads` of the time and is off its core one slice at a time. A polling
/// thread off its core reaps nothing and submits nothing: a command that completes then waits for its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreShare {
    threads: u64,
    cores: u64,
    slice_ns: u64,
}

impl CoreShare {
    /// `threads` polling threads on `cores` cores, each turn `slice_ns` long; None when each has a core.
    pub fn new(threads: u32, cores: u32, slice_ns: u64) -> Option<CoreShare> {
        (cores > 0 && threads > cores && slice_ns > 0).then_some(CoreShare {
            threads: u64::from(threads),
            cores: u64::from(cores),
            slice_ns,
        })
    }

    /// Whether `thread` runs in slice `slice`: the slice's turns go to the `cores` threads of the circle from
    /// where the last slice's ended.
    fn runs_in(&self, thread: u32, slice: u64) -> bool {
        let first = slice % self.threads * self.cores % self.threads;
        (u64::from(thread) + self.threads - first) % self.threads < self.cores
    }

    /// When `work` nanoseconds of CPU that `thread` begins at `start` end: the work waits for the thread's turn
    /// and stops while the thread is off its core. With no work, when the thread is next on its core.
    pub fn run_ns(&self, thread: u32, start: u64, work: u64) -> u64 {
        let (mut at, mut left) = (start, work);
        loop {
            let mut slice = at / self.slice_ns;
            while !self.runs_in(thread, slice) {
                slice += 1;
            }
            at = at.max(slice * self.slice_ns);
            let turn_end = (slice + 1) * self.slice_ns;
            if at + left <= turn_end {
                return at + left;
            }
            left -= turn_end - at;
            at = turn_end;
        }
    }

    /// How long `thread` is on a core in `[from, to)`, and how many times it is taken off one there.
    pub fn on_core_ns(&self, thread: u32, from: u64, to: u64) -> (u64, u64) {
        let (mut on_ns, mut preempted) = (0, 0);
        if from >= to {
            return (0, 0);
        }
        for slice in from / self.slice_ns..=(to - 1) / self.slice_ns {
            let (start, end) = (slice * self.slice_ns, (slice + 1) * self.slice_ns);
            if self.runs_in(thread, slice) {
                on_ns += end.min(to) - start.max(from);
            } else if slice > 0 && start > from && self.runs_in(thread, slice - 1) {
                preempted += 1;
            }
        }
        (on_ns, preempted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_beyond_the_cores_take_turns_one_slice_at_a_time() {
        assert_eq!(CoreShare::new(10, 10, 1000), None, "a core each: no turns");
        assert_eq!(CoreShare::new(14, 0, 1000), None, "no core count: a core each");
        let share = CoreShare::new(14, 10, 1000).expect("14 threads on 10 cores share");
        let slices = 7 * 20;
        for slice in 0..slices {
            let running = (0..14).filter(|&thread| share.runs_in(thread, slice)).count();
            assert_eq!(running, 10, "every core busy in slice {slice}");
        }
        for thread in 0..14 {
            let turns = (0..slices).filter(|&slice| share.runs_in(thread, slice)).count();
            assert_eq!(turns, 100, "thread {thread} runs 10/14 of the time");
            let mut off_run = 0;
            for slice in 0..slices {
                off_run = if share.runs_in(thread, slice) { 0 } else { off_run + 1 };
                assert!(off_run <= 1, "thread {thread} off two slices running at {slice}");
            }
        }
        // Thread 10 first runs in slice 1; work crossing the end of a turn it does not keep resumes at its next.
        assert_eq!(share.run_ns(10, 200, 0), 1000);
        assert_eq!(share.run_ns(0, 200, 50), 250);
        let off = (0..slices).find(|&slice| !share.runs_in(0, slice)).expect("thread 0 waits once in a while");
        let end_of_turn = off * 1000;
        assert_eq!(share.run_ns(0, end_of_turn - 30, 100), end_of_turn + 1000 + 70);
        // Over whole cycles of 7 slices each thread is on for 5 and taken off twice.
        assert_eq!(share.on_core_ns(3, 0, 7_000 * 20), (5_000 * 20, 2 * 20));
        assert_eq!(share.on_core_ns(0, end_of_turn - 30, end_of_turn + 10), (30, 1));
    }
}
