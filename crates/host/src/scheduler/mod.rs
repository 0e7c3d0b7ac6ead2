//! The block layer's I/O schedulers for zoned devices, each a `CommandQueue` in front of another, chosen by
//! name from `SCHEDULERS`; one file each beside this one, with its options and help.
//!
//! - `none` (here) hands every command straight to the device. Several writes outstanding in one zone may then
//!   run there in any order (the device's seeded reordering, `zonelab_device`'s `queue.rs`), and a write that
//!   runs before its predecessor fails with Zone Invalid Write: the failure seed 000 section 2.2 warns of.
//! - `mq-deadline` (`deadline.rs`) keeps Linux's zone write lock, sorting and merging queued writes.
//! - `zinc` (`zinc.rs`) is mq-deadline with resets and finishes held and let go by an epoch timer, as its authors
//!   published it.

mod deadline;
mod zinc;

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use serde::Serialize;
use zonelab_device::HostPath;
use zonelab_runtime::{CommandQueue, IoData, Output, QueuedCommand};
use zonelab_zns::{NamespaceKind, Status, ZoneSendAction};

use deadline::{LockedWrite, ZoneLocks};
pub use zinc::ZincConfig;
use zinc::{write_units, Class, ZincState};

/// A scheduler a host can name: what `scheduler=` takes and `zonelab help` shows.
pub struct SchedulerInfo {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub help: &'static str,
    /// The scheduler with its default options.
    pub make: fn() -> SchedulerKind,
}

const NONE: SchedulerInfo = SchedulerInfo {
    name: "none",
    aliases: &[],
    help: "every command straight to the device, in whatever order the queues deliver it",
    make: || SchedulerKind::None,
};

/// Every scheduler, by name.
pub const SCHEDULERS: &[SchedulerInfo] = &[NONE, deadline::INFO, zinc::INFO];

/// Which scheduler, with its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulerKind {
    None,
    MqDeadline,
    Zinc(ZincConfig),
}

impl SchedulerKind {
    /// The scheduler `name` (or an alias) names, with its default options.
    pub fn parse(name: &str) -> Option<SchedulerKind> {
        SCHEDULERS.iter().find(|info| info.name == name || info.aliases.contains(&name)).map(|info| (info.make)())
    }

    /// The names `parse` takes, for messages.
    pub fn names() -> String {
        SCHEDULERS.iter().map(|info| info.name).collect::<Vec<_>>().join(", ")
    }

    /// The scheduler Linux gives a zoned namespace reached through `host`. Linux's NVMe driver requires an
    /// elevator with zone write locking for a zoned namespace (`ELEVATOR_F_ZBD_SEQ_WRITE`, Linux 5.9 to 6.9),
    /// which only mq-deadline has, so the paths through the block layer get it; SPDK and io_uring passthrough
    /// bypass the block layer's scheduler and get none.
    pub fn linux_default(host: HostPath) -> SchedulerKind {
        if host.through_block_layer() {
            SchedulerKind::MqDeadline
        } else {
            SchedulerKind::None
        }
    }

    pub fn name(self) -> &'static str {
        let make = |info: &&SchedulerInfo| std::mem::discriminant(&(info.make)()) == std::mem::discriminant(&self);
        SCHEDULERS.iter().find(make).expect("every scheduler is registered").name
    }

    fn locks_zones(self) -> bool {
        !matches!(self, SchedulerKind::None)
    }
}

/// What the scheduler did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SchedulerCounters {
    /// Write requests from the host.
    pub write_requests: u64,
    /// Write commands sent to the device (fewer than requests when requests merged).
    pub write_commands: u64,
    /// Requests that were merged into another request's command.
    pub merged_requests: u64,
    /// Resets and finishes ZINC held, and which of its rules let each go: few writes in flight, the write
    /// tokens spent, or the most epochs a command is held.
    pub management_held: u64,
    pub released_few_in_flight: u64,
    pub released_by_tokens: u64,
    pub released_by_holds: u64,
    /// Total time management commands spent held.
    pub held_ns: u64,
}

/// One of the scheduler's queues, as a trace draws it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchedulerQueue {
    /// mq-deadline's queue of writes waiting for the zone's write lock.
    ZoneWrites(u64),
    /// ZINC's held resets, and its held finishes.
    Resets,
    Finishes,
}

/// A request's wait in one of the scheduler's queues, and how it left: `dispatched` (the head of a zone's queue
/// when its lock came free), `merged` (carried by the head's command), or the ZINC rule that let a held command
/// go (`few in flight`, `tokens spent`, `most holds`). Requests that left at the instant they came are not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSpan {
    pub queue: SchedulerQueue,
    pub lba: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub left: &'static str,
}

/// Where a traced scheduler keeps its requests' waits: None until `Scheduled::record_queues`.
type QueueTrace = Rc<RefCell<Option<Vec<QueueSpan>>>>;

/// Keeps `span` if the queues are traced and it lasted.
fn record(trace: &QueueTrace, span: QueueSpan) {
    if span.end_ns > span.start_ns {
        // As many as the device traces commands (a real-time mount may run for hours).
        if let Some(spans) = trace.borrow_mut().as_mut().filter(|spans| spans.len() < zonelab_device::TRACE_LIMIT) {
            spans.push(span);
        }
    }
}

/// A `CommandQueue` with a scheduler in front of `inner`.
pub struct Scheduled<Q> {
    inner: Q,
    kind: SchedulerKind,
    /// Whether the namespace is zoned: Linux keeps zone write locks for zoned devices only.
    zoned: bool,
    zone_shift: u32,
    max_request_blocks: u64,
    locks: Rc<RefCell<ZoneLocks>>,
    zinc: Option<Rc<RefCell<ZincState>>>,
    counters: Rc<RefCell<SchedulerCounters>>,
    queue_trace: QueueTrace,
}

impl<Q: Clone> Clone for Scheduled<Q> {
    fn clone(&self) -> Self {
        Scheduled {
            inner: self.inner.clone(),
            kind: self.kind,
            zoned: self.zoned,
            zone_shift: self.zone_shift,
            max_request_blocks: self.max_request_blocks,
            locks: Rc::clone(&self.locks),
            zinc: self.zinc.clone(),
            counters: Rc::clone(&self.counters),
            queue_trace: Rc::clone(&self.queue_trace),
        }
    }
}

impl<Q: CommandQueue + Clone + 'static> Scheduled<Q> {
    /// A scheduler in front of `inner`; merged writes stay within `max_request_bytes` and the device's MDTS
    /// (Linux's max_sectors_kb, 1280 KiB by default).
    pub fn new(inner: Q, kind: SchedulerKind, max_request_bytes: u64) -> Scheduled<Q> {
        let geometry = inner.geometry();
        let limit = (max_request_bytes >> geometry.lba_shift).min(geometry.max_transfer_lba.unwrap_or(u64::MAX));
        let zinc = match kind {
            SchedulerKind::Zinc(config) => Some(Rc::new(RefCell::new(ZincState::new(config, inner.now_ns())))),
            _ => None,
        };
        Scheduled {
            inner,
            kind,
            zoned: geometry.kind == NamespaceKind::Zoned,
            zone_shift: geometry.zone_shift,
            max_request_blocks: limit.max(1),
            locks: Rc::default(),
            zinc,
            counters: Rc::default(),
            queue_trace: Rc::default(),
        }
    }

    /// Keeps every request's wait in the scheduler's queues from now on, for a trace (`queue_spans`).
    pub fn record_queues(&self) {
        self.queue_trace.borrow_mut().get_or_insert_with(Vec::new);
    }

    /// The waits kept since `record_queues`, in the order they ended.
    pub fn queue_spans(&self) -> Vec<QueueSpan> {
        self.queue_trace.borrow().clone().unwrap_or_default()
    }

    pub fn kind(&self) -> SchedulerKind {
        self.kind
    }

    pub fn counters(&self) -> SchedulerCounters {
        self.counters.borrow().clone()
    }

    /// ZINC runs at every insert and completion.
    fn zinc_dispatch(&self) {
        if let Some(zinc) = &self.zinc {
            zinc.borrow_mut().dispatch(self.inner.now_ns(), &mut self.counters.borrow_mut(), &self.queue_trace);
        }
    }

    /// The common paths (a write under the zone lock, anything else passed on) are polled inline; ZINC's
    /// paths are a boxed future of their own, so that its code stays out of the common paths' poll.
    async fn submit_scheduled(&self, command: QueuedCommand) -> Result<Output, Status> {
        if self.zinc.is_some() {
            return Box::pin(self.submit_zinc(command)).await;
        }
        match command {
            QueuedCommand::Write { slba, data } if self.kind.locks_zones() && self.zoned => {
                let locked = self.locked_write(None);
                if !locked.lock_alone(slba) {
                    return locked.write_queued(slba, data).await;
                }
                // `LockedWrite::write`'s common case inline, without ZINC's accounting: a future less to poll.
                let result = self.inner.submit(QueuedCommand::Write { slba, data }).await;
                locked.unlock(slba);
                result
            }
            command => {
                if let QueuedCommand::Write { .. } = command {
                    self.count_unlocked_write();
                }
                self.inner.submit(command).await
            }
        }
    }

    /// ZINC: mq-deadline's zone lock, with resets and finishes held until ZINC lets them go, and every insert and
    /// completion running ZINC's dispatch.
    async fn submit_zinc(&self, command: QueuedCommand) -> Result<Output, Status> {
        let zinc = self.zinc.as_ref().expect("ZINC's state");
        let management = match &command {
            QueuedCommand::ZoneSend { action: ZoneSendAction::Reset, slba, .. } => Some((Class::Reset, *slba)),
            QueuedCommand::ZoneSend { action: ZoneSendAction::Finish, slba, .. } => Some((Class::Finish, *slba)),
            _ => None,
        };
        let result = match (command, management) {
            (QueuedCommand::Write { slba, data }, _) if self.zoned => {
                self.zinc_dispatch();
                self.locked_write(Some(zinc)).write(slba, data).await
            }
            (command, Some((class, slba))) => {
                ZincState::hold(zinc, &self.counters, &self.queue_trace, &self.inner, class, slba).await;
                let result = self.inner.submit(command).await;
                zinc.borrow_mut().management_completed(class);
                result
            }
            (QueuedCommand::Append { zslba, data }, _) => {
                let units = write_units(data.len());
                let command = QueuedCommand::Append { zslba, data };
                zinc.borrow_mut().write_dispatched(units);
                self.zinc_dispatch();
                let result = self.inner.submit(command).await;
                zinc.borrow_mut().write_completed(units);
                result
            }
            (command, _) => {
                if let QueuedCommand::Write { .. } = command {
                    self.count_unlocked_write();
                }
                self.zinc_dispatch();
                self.inner.submit(command).await
            }
        };
        self.zinc_dispatch();
        result
    }

    fn locked_write<'a>(&'a self, zinc: Option<&'a Rc<RefCell<ZincState>>>) -> LockedWrite<'a, Q> {
        LockedWrite {
            inner: &self.inner,
            locks: &self.locks,
            counters: &self.counters,
            queue_trace: &self.queue_trace,
            zinc,
            zone_shift: self.zone_shift,
            max_blocks: self.max_request_blocks,
        }
    }

    /// A write no zone lock holds back (no scheduler, or a conventional namespace) is one request and one command.
    fn count_unlocked_write(&self) {
        let mut counters = self.counters.borrow_mut();
        counters.write_requests += 1;
        counters.write_commands += 1;
    }
}

/// One buffer for merged writes: zeros stay zeros, bytes are concatenated.
fn merge<'a>(parts: impl Iterator<Item = &'a IoData> + Clone) -> IoData {
    if parts.clone().all(|part| matches!(part, IoData::Zeros(_))) {
        return IoData::Zeros(parts.map(IoData::len).sum());
    }
    let mut bytes = Vec::new();
    for part in parts {
        match part {
            IoData::Bytes(data) => bytes.extend_from_slice(data),
            IoData::Zeros(len) => bytes.resize(bytes.len() + *len as usize, 0),
        }
    }
    IoData::Bytes(bytes)
}

impl<Q: CommandQueue + Clone + 'static> CommandQueue for Scheduled<Q> {
    // Borrows the scheduler rather than cloning it: a clone and its drop cost every command.
    fn submit(&self, command: QueuedCommand) -> impl Future<Output = Result<Output, Status>> {
        self.submit_scheduled(command)
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn sleep(&self, duration_ns: u64) -> impl Future<Output = ()> {
        self.inner.sleep(duration_ns)
    }

    fn pass_alone(&self, until_ns: u64) -> bool {
        self.inner.pass_alone(until_ns)
    }

    fn geometry(&self) -> zonelab_zns::Geometry {
        self.inner.geometry()
    }

    fn task(&self) -> Option<u32> {
        self.inner.task()
    }
}
