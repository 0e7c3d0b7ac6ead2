//! The block layer's I/O schedulers for zoned devices, as a `CommandQueue` in front of another.
//!
//! - `none` hands every command straight to the device. Several writes outstanding in one zone may then reach it
//!   in any order (the runtime's seeded reordering plays the part of the multi-queue block layer), and a write
//!   that arrives before its predecessor fails with Zone Invalid Write: the failure seed 000 section 4.3 warns of.
//! - `mq-deadline` keeps Linux's zone write lock: one write in flight per zone, queued writes sorted by LBA and
//!   dispatched lowest first, with adjacent queued writes merged into one command up to a maximum request size.
//!   Reads, appends (which Linux does not lock) and zone management pass straight through.
//! - `zinc` (seed 004, "ZINC is derived from mq-deadline with a Kyber-style reset-throttling logic"): user I/O as
//!   under mq-deadline; resets and finishes are held and released by epochs. Each epoch grants
//!   `tokens_per_epoch` write tokens, one per user write or append dispatched. (1) When an epoch's tokens are
//!   consumed, the oldest held command is issued and the tokens start again; (2) each epoch boundary a held
//!   command lives through raises its priority by one; (3) a command whose priority passes `max_priority` is
//!   issued at once. So user I/O goes first, and a held command waits at most `max_priority + 1` epochs.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::{Poll, Waker};

use serde::Serialize;
use zonelab_device::HostPath;
use zonelab_runtime::sync::yield_now;
use zonelab_runtime::{CommandQueue, IoData, Output, QueuedCommand};
use zonelab_zns::{Status, ZoneSendAction};

/// ZINC's knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ZincConfig {
    /// Epoch length. Default 1 ms: a few reset-latencies' worth of user writes at the ZN540's rates.
    pub epoch_ns: u64,
    /// User writes (and appends) per epoch before a held reset or finish may go. Default 64.
    pub tokens_per_epoch: u32,
    /// Epochs a held command may wait before it is issued regardless. Default 4.
    pub max_priority: u32,
}

impl Default for ZincConfig {
    fn default() -> Self {
        ZincConfig { epoch_ns: 1_000_000, tokens_per_epoch: 64, max_priority: 4 }
    }
}

/// Which scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulerKind {
    None,
    MqDeadline,
    Zinc(ZincConfig),
}

impl SchedulerKind {
    pub fn parse(name: &str) -> Option<SchedulerKind> {
        match name {
            "none" => Some(SchedulerKind::None),
            "mq-deadline" | "mq_deadline" => Some(SchedulerKind::MqDeadline),
            "zinc" => Some(SchedulerKind::Zinc(ZincConfig::default())),
            _ => None,
        }
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
        match self {
            SchedulerKind::None => "none",
            SchedulerKind::MqDeadline => "mq-deadline",
            SchedulerKind::Zinc(_) => "zinc",
        }
    }

    /// Whether writes take the zone lock and merge (mq-deadline and ZINC).
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
    /// Resets and finishes ZINC held, and how each was released.
    pub management_held: u64,
    pub released_by_tokens: u64,
    pub released_by_priority: u64,
    /// Total time management commands spent held.
    pub held_ns: u64,
}

/// A reset or finish ZINC holds.
struct Held {
    id: u64,
    waker: Option<Waker>,
    /// Set when the write tokens run out while this is the oldest held command.
    signalled: bool,
}

/// A queued write, waiting for its zone's lock.
struct QueuedWrite {
    id: u64,
    blocks: u64,
    data: IoData,
    /// Woken when the write may be dispatched or its merged result is in.
    waker: Option<Waker>,
}

impl QueuedWrite {
    fn wake(&self) {
        if let Some(waker) = &self.waker {
            waker.wake_by_ref();
        }
    }
}

#[derive(Default)]
struct ZoneQueue {
    locked: bool,
    /// Queued writes by start LBA.
    writes: BTreeMap<u64, QueuedWrite>,
}

#[derive(Default)]
struct DeadlineState {
    zones: BTreeMap<u64, ZoneQueue>,
    /// ZINC: the current epoch, its consumed write tokens, and the held management commands, oldest first.
    epoch: u64,
    tokens_used: u64,
    held: Vec<Held>,
    zinc: Option<ZincConfig>,
    /// Results of merged requests, by request id, for their waiting tasks.
    results: BTreeMap<u64, Result<Output, Status>>,
    /// Wakers of merged requests waiting for their results, by request id.
    merged_waiters: BTreeMap<u64, Waker>,
    next_id: u64,
    counters: SchedulerCounters,
}

impl DeadlineState {
    /// ZINC: moves to the epoch of `now`; a new epoch starts with all its tokens.
    fn roll_epoch(&mut self, now: u64) {
        if let Some(zinc) = self.zinc {
            let epoch = now / zinc.epoch_ns;
            if epoch != self.epoch {
                self.epoch = epoch;
                self.tokens_used = 0;
            }
        }
    }

    /// ZINC: counts user writes; once the epoch's tokens are used, the oldest held command may go.
    fn consume_tokens<Q: CommandQueue>(&mut self, count: u64, queue: &Q) {
        let Some(zinc) = self.zinc else { return };
        self.roll_epoch(queue.now_ns());
        self.tokens_used += count;
        if self.tokens_used >= u64::from(zinc.tokens_per_epoch) {
            if let Some(oldest) = self.held.first_mut() {
                oldest.signalled = true;
                if let Some(waker) = &oldest.waker {
                    waker.wake_by_ref();
                }
            }
        }
    }
}

/// A `CommandQueue` with a scheduler in front of `inner`.
pub struct Scheduled<Q> {
    inner: Q,
    kind: SchedulerKind,
    zone_shift: u32,
    max_request_blocks: u64,
    state: Rc<RefCell<DeadlineState>>,
}

impl<Q: Clone> Clone for Scheduled<Q> {
    fn clone(&self) -> Self {
        Scheduled {
            inner: self.inner.clone(),
            kind: self.kind,
            zone_shift: self.zone_shift,
            max_request_blocks: self.max_request_blocks,
            state: Rc::clone(&self.state),
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
            SchedulerKind::Zinc(zinc) => Some(ZincConfig { epoch_ns: zinc.epoch_ns.max(1), ..zinc }),
            _ => None,
        };
        Scheduled {
            inner,
            kind,
            zone_shift: geometry.zone_shift,
            max_request_blocks: limit.max(1),
            state: Rc::new(RefCell::new(DeadlineState { zinc, ..DeadlineState::default() })),
        }
    }

    pub fn kind(&self) -> SchedulerKind {
        self.kind
    }

    pub fn counters(&self) -> SchedulerCounters {
        self.state.borrow().counters.clone()
    }

    /// mq-deadline's write path: queue, wait for the zone lock and to be the lowest queued LBA, then dispatch
    /// with every adjacent queued write merged in; the other merged requests get the same result.
    async fn locked_write(
        inner: Q,
        state: Rc<RefCell<DeadlineState>>,
        zone_shift: u32,
        max_blocks: u64,
        slba: u64,
        data: IoData,
        lba_bytes: u64,
    ) -> Result<Output, Status> {
        let blocks = data.len() / lba_bytes;
        let zone = slba >> zone_shift;
        let id = {
            let mut state = state.borrow_mut();
            state.next_id += 1;
            let id = state.next_id;
            state.counters.write_requests += 1;
            state.zones.entry(zone).or_default().writes.insert(slba, QueuedWrite { id, blocks, data, waker: None });
            id
        };
        // Like the block layer's plug, a request that may dispatch first lets every request submitted at the same
        // instant join the queue, so that they can merge.
        let mut plugged = false;
        let members = loop {
            let turn = poll_fn(|context| {
                let mut state = state.borrow_mut();
                if let Some(result) = state.results.remove(&id) {
                    return Poll::Ready(Turn::Merged(result));
                }
                let queue = state.zones.entry(zone).or_default();
                let head_is_us = queue.writes.get(&slba).is_some_and(|write| write.id == id)
                    && queue.writes.first_key_value().is_some_and(|(_, head)| head.id == id);
                if queue.locked || !head_is_us {
                    match queue.writes.get_mut(&slba).filter(|write| write.id == id) {
                        Some(write) => write.waker = Some(context.waker().clone()),
                        None => {
                            state.merged_waiters.insert(id, context.waker().clone());
                        }
                    }
                    return Poll::Pending;
                }
                Poll::Ready(if plugged { Turn::Dispatch } else { Turn::Plug })
            })
            .await;
            match turn {
                Turn::Merged(result) => return result,
                Turn::Plug => {
                    plugged = true;
                    yield_now().await;
                }
                Turn::Dispatch => break Self::take_group(&state, &inner, zone, max_blocks),
            }
        };
        let data = merge(members.iter().map(|member| &member.data));
        let result = inner.submit(QueuedCommand::Write { slba, data }).await;
        let mut state = state.borrow_mut();
        for member in members.iter().skip(1) {
            state.results.insert(member.id, result.clone());
            member.wake();
            if let Some(waker) = state.merged_waiters.remove(&member.id) {
                waker.wake();
            }
        }
        let queue = state.zones.entry(zone).or_default();
        queue.locked = false;
        if let Some((_, head)) = queue.writes.first_key_value() {
            head.wake();
        }
        result
    }

    /// Locks the zone and takes the head write with every adjacent queued write that fits in one command.
    fn take_group(state: &RefCell<DeadlineState>, inner: &Q, zone: u64, max_blocks: u64) -> Vec<QueuedWrite> {
        let mut state = state.borrow_mut();
        let queue = state.zones.entry(zone).or_default();
        queue.locked = true;
        let (mut end, head) =
            queue.writes.pop_first().map(|(lba, write)| (lba + write.blocks, write)).expect("the head exists");
        let mut members = vec![head];
        let mut total = members[0].blocks;
        while let Some(next) = queue.writes.first_key_value().map(|(lba, write)| (*lba, write.blocks)) {
            if next.0 != end || total + next.1 > max_blocks {
                break;
            }
            let (_, write) = queue.writes.pop_first().expect("peeked");
            end += write.blocks;
            total += write.blocks;
            members.push(write);
        }
        state.counters.write_commands += 1;
        state.counters.merged_requests += members.len() as u64 - 1;
        state.consume_tokens(members.len() as u64, inner);
        members
    }
}

/// Where a queued write stands when its task looks.
enum Turn {
    /// Another request's command carried it; here is the result.
    Merged(Result<Output, Status>),
    /// It heads an unlocked zone for the first time: let the requests of this instant join first.
    Plug,
    /// It heads an unlocked zone after the plug: dispatch.
    Dispatch,
}

impl<Q: CommandQueue + Clone + 'static> Scheduled<Q> {
    /// ZINC: holds a reset or finish until the write tokens of an epoch are used up (and it is the oldest held)
    /// or until it has lived through more than `max_priority` epoch boundaries.
    async fn hold(inner: &Q, state: &Rc<RefCell<DeadlineState>>, zinc: ZincConfig) {
        let held_at = inner.now_ns();
        let first_epoch = held_at / zinc.epoch_ns;
        let id = {
            let mut state = state.borrow_mut();
            state.next_id += 1;
            let id = state.next_id;
            state.counters.management_held += 1;
            state.held.push(Held { id, waker: None, signalled: false });
            id
        };
        loop {
            let now = inner.now_ns();
            {
                let mut state = state.borrow_mut();
                state.roll_epoch(now);
                let oldest = state.held.first().is_some_and(|held| held.id == id);
                let by_priority = now / zinc.epoch_ns - first_epoch > u64::from(zinc.max_priority);
                let by_tokens = oldest && state.tokens_used >= u64::from(zinc.tokens_per_epoch);
                if by_priority || by_tokens {
                    state.held.retain(|held| held.id != id);
                    if by_tokens {
                        state.tokens_used = 0;
                        state.counters.released_by_tokens += 1;
                    } else {
                        state.counters.released_by_priority += 1;
                    }
                    state.counters.held_ns += now - held_at;
                    return;
                }
            }
            let boundary = (now / zinc.epoch_ns + 1) * zinc.epoch_ns;
            let mut sleep = std::pin::pin!(inner.sleep(boundary - now));
            poll_fn(|context| {
                let mut state = state.borrow_mut();
                let Some(held) = state.held.iter_mut().find(|held| held.id == id) else { return Poll::Ready(()) };
                if held.signalled {
                    return Poll::Ready(());
                }
                held.waker = Some(context.waker().clone());
                drop(state);
                sleep.as_mut().poll(context)
            })
            .await;
            if let Some(held) = state.borrow_mut().held.iter_mut().find(|held| held.id == id) {
                held.signalled = false;
            }
        }
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
    fn submit(&self, command: QueuedCommand) -> impl Future<Output = Result<Output, Status>> {
        let inner = self.inner.clone();
        let state = Rc::clone(&self.state);
        let (kind, zone_shift, max_blocks) = (self.kind, self.zone_shift, self.max_request_blocks);
        async move {
            match (kind, command) {
                (kind, QueuedCommand::Write { slba, data }) if kind.locks_zones() => {
                    let lba_bytes = u64::from(inner.geometry().lba_size);
                    Self::locked_write(inner, state, zone_shift, max_blocks, slba, data, lba_bytes).await
                }
                (
                    SchedulerKind::Zinc(zinc),
                    command @ QueuedCommand::ZoneSend { action: ZoneSendAction::Reset | ZoneSendAction::Finish, .. },
                ) => {
                    Self::hold(&inner, &state, zinc).await;
                    inner.submit(command).await
                }
                (SchedulerKind::Zinc(_), command @ QueuedCommand::Append { .. }) => {
                    state.borrow_mut().consume_tokens(1, &inner);
                    inner.submit(command).await
                }
                (_, command) => {
                    if let QueuedCommand::Write { .. } = command {
                        let mut state = state.borrow_mut();
                        state.counters.write_requests += 1;
                        state.counters.write_commands += 1;
                    }
                    inner.submit(command).await
                }
            }
        }
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn sleep(&self, duration_ns: u64) -> impl Future<Output = ()> {
        self.inner.sleep(duration_ns)
    }

    fn geometry(&self) -> zonelab_zns::Geometry {
        self.inner.geometry()
    }
}
