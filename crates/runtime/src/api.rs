//! The async command API host code is written against.

use std::future::Future;

use zonelab_zns::{Geometry, ReportFilter, Status, ZoneReport, ZoneSendAction};

/// Data a write carries: real bytes, or zeros of a length (for simulations that keep no data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoData {
    Bytes(Vec<u8>),
    Zeros(u64),
}

impl IoData {
    pub fn len(&self) -> u64 {
        match self {
            IoData::Bytes(bytes) => bytes.len() as u64,
            IoData::Zeros(len) => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A command as host code queues it; it owns its data, since it outlives the call that queued it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueuedCommand {
    /// Read `nlb` blocks; with `keep` false the data is dropped (the timing is what matters).
    Read {
        slba: u64,
        nlb: u64,
        keep: bool,
    },
    Write {
        slba: u64,
        data: IoData,
    },
    WriteZeroes {
        slba: u64,
        nlb: u64,
    },
    Append {
        zslba: u64,
        data: IoData,
    },
    Flush,
    ZoneSend {
        slba: u64,
        action: ZoneSendAction,
        select_all: bool,
    },
    Report {
        slba: u64,
        filter: ReportFilter,
        partial: bool,
        max_zones: u32,
    },
}

/// What a completed command returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Done,
    Appended(u64),
    Data(Vec<u8>),
    Report(ZoneReport),
}

/// A task of the runtime, for waking it from another task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TaskId(pub usize);

/// A device as host code sees it: commands go in, completions come out, in device time. It also lets host
/// code that coordinates several tasks (an I/O scheduler) park a task and wake it from another.
pub trait CommandQueue {
    /// Queues a command; the future resolves when the device completes it.
    fn submit(&self, command: QueuedCommand) -> impl Future<Output = Result<Output, Status>>;
    /// Device time now, in nanoseconds.
    fn now_ns(&self) -> u64;
    /// The namespace's geometry (what Identify tells a host).
    fn geometry(&self) -> Geometry;
    /// Resolves `duration_ns` of device time from now.
    fn sleep(&self, duration_ns: u64) -> impl Future<Output = ()>;
    /// The task being polled.
    fn current_task(&self) -> TaskId;
    /// Polls `task` again at the current instant.
    fn wake(&self, task: TaskId);
    /// Returns to the runtime once; the task is polled again when something wakes it. Callers re-check what
    /// they wait for, since a task may be polled for other reasons too.
    fn park(&self) -> impl Future<Output = ()>;
}

/// The commands by name, on any `CommandQueue`.
pub trait HostExt: CommandQueue {
    fn read(&self, slba: u64, nlb: u64) -> impl Future<Output = Result<Vec<u8>, Status>> {
        let done = self.submit(QueuedCommand::Read { slba, nlb, keep: true });
        async move {
            match done.await? {
                Output::Data(bytes) => Ok(bytes),
                _ => unreachable!("a read completes with data"),
            }
        }
    }

    /// A read whose data is not wanted.
    fn read_discard(&self, slba: u64, nlb: u64) -> impl Future<Output = Result<(), Status>> {
        let done = self.submit(QueuedCommand::Read { slba, nlb, keep: false });
        async move { done.await.map(|_| ()) }
    }

    fn write(&self, slba: u64, data: IoData) -> impl Future<Output = Result<(), Status>> {
        let done = self.submit(QueuedCommand::Write { slba, data });
        async move { done.await.map(|_| ()) }
    }

    /// Zone Append; resolves to the LBA the data landed at.
    fn append(&self, zslba: u64, data: IoData) -> impl Future<Output = Result<u64, Status>> {
        let done = self.submit(QueuedCommand::Append { zslba, data });
        async move {
            match done.await? {
                Output::Appended(lba) => Ok(lba),
                _ => unreachable!("an append completes with its LBA"),
            }
        }
    }

    fn zone_send(
        &self,
        slba: u64,
        action: ZoneSendAction,
        select_all: bool,
    ) -> impl Future<Output = Result<(), Status>> {
        let done = self.submit(QueuedCommand::ZoneSend { slba, action, select_all });
        async move { done.await.map(|_| ()) }
    }

    fn report_zones(
        &self,
        slba: u64,
        filter: ReportFilter,
        max_zones: u32,
    ) -> impl Future<Output = Result<ZoneReport, Status>> {
        let done = self.submit(QueuedCommand::Report { slba, filter, partial: true, max_zones });
        async move {
            match done.await? {
                Output::Report(report) => Ok(report),
                _ => unreachable!("a report completes with zones"),
            }
        }
    }

    fn flush(&self) -> impl Future<Output = Result<(), Status>> {
        let done = self.submit(QueuedCommand::Flush);
        async move { done.await.map(|_| ()) }
    }
}

impl<Q: CommandQueue + ?Sized> HostExt for Q {}
