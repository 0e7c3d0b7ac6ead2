//! The async command API host code is written against.

use std::future::Future;

pub use zonelab_device::{IoData, Output, QueuedCommand};
use zonelab_zns::{Geometry, ReportFilter, Status, ZoneReport, ZoneSendAction};

/// A device as host code sees it: commands go in, completions come out, in device time. The futures honour
/// their `Context` (they register its waker), so any executor can drive them; host code that coordinates
/// several tasks uses the waker-based primitives of `sync`.
pub trait CommandQueue {
    /// Queues a command; the future resolves when the device completes it.
    fn submit(&self, command: QueuedCommand) -> impl Future<Output = Result<Output, Status>>;
    /// Device time now, in nanoseconds.
    fn now_ns(&self) -> u64;
    /// The namespace's geometry (what Identify tells a host).
    fn geometry(&self) -> Geometry;
    /// Resolves `duration_ns` of device time from now.
    fn sleep(&self, duration_ns: u64) -> impl Future<Output = ()>;
    /// The simulation task running now, which a device trace names as the submitter of its commands
    /// (`TraceEvent::submitter`), so that an operation a host layer traces is joined to the commands it caused;
    /// in real time, the host thread's task or the queue pair that submits.
    fn task(&self) -> Option<u32> {
        None
    }
    /// Whether no other task has anything to do at this instant, so that a yield would come straight back: in
    /// a simulation, for a sequential task (`Host::spawn_sequential`) when nothing else is ready, woken, queued at
    /// the device or due now; never in real time.
    fn alone_at_this_instant(&self) -> bool {
        false
    }
    /// Moves device time on to `until_ns` and returns true when a sleep until then would end with nothing else
    /// happening first (a sequential task alone, as in `alone_at_this_instant`), so that the caller need not
    /// sleep; false changes nothing. Never in real time.
    fn pass_alone(&self, _until_ns: u64) -> bool {
        false
    }
}

/// The commands by name, on any `CommandQueue`.
pub trait HostExt: CommandQueue {
    fn read(&self, slba: u64, nlb: u64) -> impl Future<Output = Result<Vec<u8>, Status>> {
        let done = self.submit(QueuedCommand::Read { slba, nlb, keep: true });
        async move {
            match done.await? {
                Output::Data(bytes) => Ok(*bytes),
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
                Output::Report(report) => Ok(*report),
                _ => unreachable!("a report completes with zones"),
            }
        }
    }

    /// Deallocate (a conventional namespace's trim): the blocks read as zeros afterwards.
    fn deallocate(&self, slba: u64, nlb: u64) -> impl Future<Output = Result<(), Status>> {
        let done = self.submit(QueuedCommand::Deallocate { slba, nlb });
        async move { done.await.map(|_| ()) }
    }

    fn flush(&self) -> impl Future<Output = Result<(), Status>> {
        let done = self.submit(QueuedCommand::Flush);
        async move { done.await.map(|_| ()) }
    }
}

impl<Q: CommandQueue + ?Sized> HostExt for Q {}
