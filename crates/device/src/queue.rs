//! The device as an actor: host commands wait in a bounded submission queue until a driver (the virtual-time
//! executor, or a real-time device thread) asks the device to process them at some instant. NVMe lets commands
//! that are outstanding together execute in any order; with reordering on, the device picks a seeded order, both
//! among the commands that reach it at one instant and for a write that reaches it while earlier writes of its
//! zone are still outstanding (`Overtaking`).

use zonelab_zns::{
    Command, Completion, MediaStore, ReceiveAction, Status, ZoneReport, REPORT_HEADER_BYTES, ZONE_DESCRIPTOR_BYTES,
};

use crate::rng::SplitMix64;
use crate::{Device, Output, QueuedCommand, Submitted};

/// Entries the submission queue holds at most: NVMe's largest I/O queue (MQES + 1 = 65,536).
pub const SUBMISSION_QUEUE_ENTRIES: usize = 1 << 16;

/// The submission queue is full; the command is handed back.
#[derive(Debug)]
pub struct QueueFull(pub QueuedCommand);

/// Commands waiting for the device, with the caller's tag and the namespace for each.
#[derive(Debug, Default)]
pub(crate) struct SubmissionQueue {
    entries: Vec<Entry>,
    reorder: Option<SplitMix64>,
    /// With reordering on: where a write that arrives while others of its zone are outstanding runs among them.
    overtaking: Option<Overtaking>,
}

/// A write that reaches the device while earlier writes to its zone are still outstanding (submitted, not
/// completed) is, as NVMe allows, not bound to run after them: the device gives it a seeded place among them,
/// each place equally likely. A place ahead of an outstanding write means the write met the write pointer that
/// write found, so it fails with Zone Invalid Write unless it was aimed there (then the order that ran the
/// earlier write first is the only one consistent with what has completed, and it is kept). Results already
/// given are never changed, and a zone whose writes are one at a time (mq-deadline's zone write lock) is never
/// touched: this is why the ZNS study needs mq-deadline for deep writes in a zone, even at one I/O a call.
#[derive(Debug)]
struct Overtaking {
    /// Its own stream, so that the shuffles of commands arriving together draw what they drew before.
    rng: SplitMix64,
    /// Writes of the zoned namespace that succeeded and are still outstanding, in the order they ran.
    outstanding: Vec<OutstandingWrite>,
}

#[derive(Debug, Clone, Copy)]
struct OutstandingWrite {
    zone: u32,
    slba: u64,
    complete_ns: u64,
}

impl Overtaking {
    /// Whether a write to `zone` at `slba` arriving at `now` takes a place ahead of an outstanding write of its
    /// zone that it cannot succeed at, so that it fails.
    fn fails_ahead(&mut self, zone: u32, slba: u64, now: u64) -> bool {
        self.outstanding.retain(|write| write.complete_ns > now);
        let mut same_zone = self.outstanding.iter().filter(|write| write.zone == zone);
        let ahead = same_zone.clone().count();
        if ahead == 0 {
            return false;
        }
        let place = self.rng.below(ahead as u64 + 1) as usize;
        same_zone.nth(place).is_some_and(|overtaken| overtaken.slba != slba)
    }
}

#[derive(Debug)]
struct Entry {
    tag: u64,
    nsid: u32,
    command: QueuedCommand,
    /// The host task that submitted it, if the runtime says (`enqueue_from`).
    submitter: Option<u32>,
}

impl<S: MediaStore> Device<S> {
    /// Turns seeded reordering of commands outstanding together on (`Some(seed)`) or off.
    pub fn set_reordering(&mut self, seed: Option<u64>) {
        self.queue.reorder = seed.map(|seed| SplitMix64::split(seed, "reorder"));
        self.queue.overtaking =
            seed.map(|seed| Overtaking { rng: SplitMix64::split(seed, "overtake"), outstanding: Vec::new() });
    }

    /// Queues `command` for the attached namespace under `tag` (the caller's, handed back with its completion).
    pub fn enqueue(&mut self, tag: u64, command: QueuedCommand) -> Result<(), QueueFull> {
        self.enqueue_to(tag, self.attached_nsid(), command)
    }

    /// Queues `command` for namespace `nsid` under `tag`.
    pub fn enqueue_to(&mut self, tag: u64, nsid: u32, command: QueuedCommand) -> Result<(), QueueFull> {
        self.enqueue_from(tag, nsid, command, None)
    }

    /// `enqueue_to`, naming the host task that submits the command (a simulation's), which the trace keeps as
    /// what caused it (`TraceEvent::submitter`).
    pub fn enqueue_from(
        &mut self,
        tag: u64,
        nsid: u32,
        command: QueuedCommand,
        submitter: Option<u32>,
    ) -> Result<(), QueueFull> {
        if self.queue.entries.len() >= SUBMISSION_QUEUE_ENTRIES {
            return Err(QueueFull(command));
        }
        self.queue.entries.push(Entry { tag, nsid, command, submitter });
        Ok(())
    }

    /// Commands waiting in the submission queue.
    pub fn queued(&self) -> usize {
        self.queue.entries.len()
    }

    /// Executes every queued command as submitted at `now`, in submission order or, with reordering on, in a
    /// seeded order; `complete` gets each one's tag, completion time and result. A reset's or a read's completion
    /// may move later afterwards (`moved_completions`).
    pub fn process_queue(&mut self, now: u64, mut complete: impl FnMut(u64, u64, Result<Output, Status>)) {
        let mut batch = std::mem::take(&mut self.queue.entries);
        if let Some(rng) = &mut self.queue.reorder {
            rng.shuffle(&mut batch);
        }
        for Entry { tag, nsid, command, submitter } in batch.drain(..) {
            // Work done for the command may be delayed while it is in flight: the flash model names it by its tag.
            self.media.serve(Some(tag));
            self.trace_submitter = submitter;
            // Only a reordering device keeps its outstanding writes.
            let zoned_write = self.queue.overtaking.is_some().then(|| self.zoned_write(nsid, &command)).flatten();
            if let (Some((zone, slba)), Some(overtaking)) = (zoned_write, &mut self.queue.overtaking) {
                if overtaking.fails_ahead(zone, slba, now) {
                    self.overtaken_write = true;
                }
            }
            let (complete_ns, result) = self.execute_queued_to(nsid, now, command);
            if let (Some((zone, slba)), Some(overtaking), true) =
                (zoned_write, &mut self.queue.overtaking, result.is_ok())
            {
                overtaking.outstanding.push(OutstandingWrite { zone, slba, complete_ns });
            }
            complete(tag, complete_ns, result);
        }
        self.media.serve(None);
        self.trace_submitter = None;
        // Keep the allocation for the next batch.
        if self.queue.entries.is_empty() {
            self.queue.entries = batch;
        }
    }

    /// The zone and start of a write (or Write Zeroes) to the zoned namespace.
    fn zoned_write(&self, nsid: u32, command: &QueuedCommand) -> Option<(u32, u64)> {
        let slba = match command {
            QueuedCommand::Write { slba, .. } | QueuedCommand::WriteZeroes { slba, .. } => *slba,
            _ => return None,
        };
        if nsid == 0 || nsid != self.zoned_nsid() {
            return None;
        }
        self.geometry_of(nsid).map(|geometry| (geometry.zone_of(slba), slba))
    }

    /// Hands `moved` each queued command whose completion has moved later since it was given, with its new
    /// completion time: a reset whose erases the reads processed since have suspended (the die works that much
    /// longer), a read whose data a later read's, ready sooner, went ahead of, or a finish whose padding writes
    /// shared the write budget with. A runtime that does not ask completes such a command at its first time.
    #[inline]
    pub fn moved_completions(&mut self, mut moved: impl FnMut(u64, u64)) {
        // Asked at every instant of a simulation: at most of them nothing moved.
        if self.media.any_moved() {
            self.media.take_moved().for_each(|(tag, end)| moved(tag, end));
        }
    }

    /// Forgets the resets and reads a previous driver left in flight (a power loss, or a new runtime over this
    /// device): their tags mean nothing any more, and nothing of theirs completes.
    pub fn forget_in_flight(&mut self) {
        self.media.forget_commands();
    }

    /// Runs one owned command for the attached namespace submitted at `now`; returns when it completes and what
    /// it returns.
    pub fn execute_queued(&mut self, now: u64, command: QueuedCommand) -> (u64, Result<Output, Status>) {
        self.execute_queued_to(self.attached_nsid(), now, command)
    }

    /// Runs one owned command for namespace `nsid` submitted at `now`.
    pub fn execute_queued_to(&mut self, nsid: u32, now: u64, command: QueuedCommand) -> (u64, Result<Output, Status>) {
        let Some(geometry) = self.geometry_of(nsid) else {
            return (now, Err(Status::InvalidNamespaceOrFormat));
        };
        let lba_size = u64::from(geometry.lba_size);
        let with = |submitted: Submitted, output: Output| {
            (
                submitted.complete_ns,
                submitted.result.map(|completion| match completion {
                    Completion::Appended { lba } => Output::Appended(lba),
                    Completion::Success => output,
                }),
            )
        };
        match command {
            QueuedCommand::Read { slba, nlb, keep: false } => {
                with(self.submit_to(nsid, now, Command::ReadDiscard { slba, nlb }), Output::Done)
            }
            QueuedCommand::Read { slba, nlb, keep: true } => {
                // A read the namespace refuses (past MDTS or the namespace's end, say) fails before data moves:
                // send it without its buffer, which for a hostile `nlb` would not fit in memory.
                if self.check_read(nsid, slba, nlb).is_err() {
                    return with(self.submit_to(nsid, now, Command::ReadDiscard { slba, nlb }), Output::Done);
                }
                let mut buf = vec![0u8; nlb.saturating_mul(lba_size).min(usize::MAX as u64) as usize];
                let submitted = self.submit_to(nsid, now, Command::Read { slba, buf: &mut buf });
                with(submitted, Output::Data(Box::new(buf)))
            }
            QueuedCommand::Write { slba, data } => {
                let submitted =
                    data.with_bytes(|bytes| self.submit_to(nsid, now, Command::Write { slba, data: bytes }));
                with(submitted, Output::Done)
            }
            QueuedCommand::WriteZeroes { slba, nlb } => {
                with(self.submit_to(nsid, now, Command::WriteZeroes { slba, nlb }), Output::Done)
            }
            QueuedCommand::Append { zslba, data } => {
                let submitted =
                    data.with_bytes(|bytes| self.submit_to(nsid, now, Command::Append { zslba, data: bytes }));
                with(submitted, Output::Done)
            }
            QueuedCommand::Flush => with(self.submit_to(nsid, now, Command::Flush), Output::Done),
            QueuedCommand::Deallocate { slba, nlb } => {
                with(self.submit_to(nsid, now, Command::Deallocate { slba, nlb }), Output::Done)
            }
            QueuedCommand::ZoneSend { slba, action, select_all } => {
                with(self.submit_to(nsid, now, Command::ZoneManagementSend { slba, action, select_all }), Output::Done)
            }
            QueuedCommand::Report { slba, filter, partial, max_zones } => {
                // No report lists more zones than the namespace has, whatever room the host offers.
                let max_zones = max_zones.min(geometry.zones);
                let mut buf = vec![0u8; REPORT_HEADER_BYTES + ZONE_DESCRIPTOR_BYTES * max_zones as usize];
                let action = ReceiveAction::ReportZones;
                let receive = Command::ZoneManagementReceive { slba, action, filter, partial, buf: &mut buf };
                let submitted = self.submit_to(nsid, now, receive);
                let zone_size = geometry.zone_size_lba;
                let report =
                    ZoneReport::decode(&buf, zone_size).unwrap_or(ZoneReport { nr_zones: 0, zones: Vec::new() });
                with(submitted, Output::Report(Box::new(report)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceConfig;
    use zonelab_zns::NullStore;

    #[test]
    fn a_full_submission_queue_hands_the_command_back() {
        let config = DeviceConfig::load("instant", &["namespace.zones=4".into()]).expect("preset");
        let mut device = Device::new(&config, NullStore).expect("device");
        for tag in 0..SUBMISSION_QUEUE_ENTRIES as u64 {
            device.enqueue(tag, QueuedCommand::Flush).expect("room");
        }
        assert!(matches!(device.enqueue(0, QueuedCommand::Flush), Err(QueueFull(QueuedCommand::Flush))));
        let mut completed = 0;
        device.process_queue(0, |_, _, result| completed += usize::from(result.is_ok()));
        assert_eq!((completed, device.queued()), (SUBMISSION_QUEUE_ENTRIES, 0));
    }
}
