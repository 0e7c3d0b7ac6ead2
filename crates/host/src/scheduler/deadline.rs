//! mq-deadline's zone write lock, as Linux keeps it for zoned devices: one write in flight per zone, queued
//! writes sorted by LBA and dispatched lowest first, adjacent queued writes merged into one command up to a
//! maximum request size. Reads, appends (which Linux does not lock) and zone management pass straight through.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

use zonelab_runtime::sync::yield_now;
use zonelab_runtime::{CommandQueue, IoData, Output, QueuedCommand};
use zonelab_zns::Status;

use super::zinc::{write_units, ZincState};
use super::{merge, record, QueueSpan, QueueTrace, SchedulerCounters, SchedulerInfo, SchedulerKind, SchedulerQueue};

pub(super) const INFO: SchedulerInfo = SchedulerInfo {
    name: "mq-deadline",
    aliases: &["mq_deadline"],
    help: "Linux's zone write lock: one write in flight per zone, queued writes sorted and merged",
    make: || SchedulerKind::MqDeadline,
};

/// A queued write, waiting for its zone's lock.
struct QueuedWrite {
    id: u64,
    slba: u64,
    queued_ns: u64,
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
    /// Queued writes in start-LBA order (those with one start in the order they came): a deque, since the head
    /// leaves first and it keeps its allocation for the zone's next writes.
    writes: VecDeque<QueuedWrite>,
}

impl ZoneQueue {
    fn insert(&mut self, write: QueuedWrite) {
        let at = self.writes.partition_point(|queued| queued.slba <= write.slba);
        self.writes.insert(at, write);
    }

    /// Locks the zone if it is unlocked with nothing queued.
    fn lock_if_idle(&mut self) -> bool {
        let idle = !self.locked && self.writes.is_empty();
        self.locked |= idle;
        idle
    }

    /// The queued write `id`, which starts at `slba`.
    fn find_mut(&mut self, slba: u64, id: u64) -> Option<&mut QueuedWrite> {
        let from = self.writes.partition_point(|queued| queued.slba < slba);
        self.writes.range_mut(from..).take_while(|queued| queued.slba == slba).find(|queued| queued.id == id)
    }
}

/// The zones' locks and queues, and the results of merged requests for their waiting tasks.
#[derive(Default)]
pub(super) struct ZoneLocks {
    /// By zone number, grown to the highest zone written.
    zones: Vec<ZoneQueue>,
    results: BTreeMap<u64, Result<Output, Status>>,
    /// Wakers of merged requests waiting for their results, by request id.
    merged_waiters: BTreeMap<u64, Waker>,
    next_id: u64,
}

impl ZoneLocks {
    /// Inlined, with the growth out of line: every write looks its zone up twice.
    #[inline]
    fn zone(&mut self, zone: u64) -> &mut ZoneQueue {
        let index = usize::try_from(zone).expect("a zone number fits in memory");
        if index >= self.zones.len() {
            self.grow_to(index);
        }
        &mut self.zones[index]
    }

    #[cold]
    fn grow_to(&mut self, index: usize) {
        self.zones.resize_with(index + 1, ZoneQueue::default);
    }
}

/// The requests one write command carries: the head of the zone's queue and the adjacent writes merged in.
struct Group {
    head: QueuedWrite,
    merged: Vec<QueuedWrite>,
}

impl Group {
    fn members(&self) -> impl Iterator<Item = &QueuedWrite> + Clone {
        std::iter::once(&self.head).chain(&self.merged)
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

/// What a locked write needs of its scheduler.
pub(super) struct LockedWrite<'a, Q> {
    pub inner: &'a Q,
    pub locks: &'a RefCell<ZoneLocks>,
    pub counters: &'a RefCell<SchedulerCounters>,
    pub queue_trace: &'a QueueTrace,
    pub zinc: Option<&'a Rc<RefCell<ZincState>>>,
    pub zone_shift: u32,
    pub max_blocks: u64,
}

impl<Q: CommandQueue> LockedWrite<'_, Q> {
    /// The write path: a write alone at its idle zone dispatches at once (`lock_alone`); any other is queued, waits
    /// for the zone lock and to be the lowest queued LBA, then dispatches with every adjacent queued write merged
    /// in, and the other merged requests get the same result.
    pub async fn write(&self, slba: u64, data: IoData) -> Result<Output, Status> {
        if self.lock_alone(slba) {
            return self.submit_locked(slba, data, None).await;
        }
        self.write_queued(slba, data).await
    }

    /// The write path of a write `lock_alone` did not lock.
    pub async fn write_queued(&self, slba: u64, data: IoData) -> Result<Output, Status> {
        self.counters.borrow_mut().write_requests += 1;
        let mut group = match self.queue_until_dispatched(slba >> self.zone_shift, slba, data).await {
            Err(merged) => return merged,
            Ok(group) => group,
        };
        // A request alone hands its buffer on; merged ones are copied into one.
        let data = match group.merged.is_empty() {
            true => std::mem::replace(&mut group.head.data, IoData::Zeros(0)),
            false => merge(group.members().map(|member| &member.data)),
        };
        self.submit_locked(slba, data, Some(group)).await
    }

    /// Submits the command of a write whose zone is locked (carrying `group`'s requests if it is merged), then
    /// unlocks.
    async fn submit_locked(&self, slba: u64, data: IoData, group: Option<Group>) -> Result<Output, Status> {
        let units = write_units(data.len());
        if let Some(zinc) = self.zinc {
            zinc.borrow_mut().write_dispatched(units);
        }
        let result = self.inner.submit(QueuedCommand::Write { slba, data }).await;
        if let Some(zinc) = self.zinc {
            zinc.borrow_mut().write_completed(units);
        }
        if let Some(group) = &group {
            self.hand_on(group, &result);
        }
        self.unlock(slba);
        result
    }

    /// Locks the zone of a write to `slba` at once, as one request and one command, if it is idle and no other
    /// task has anything to do at this instant: nothing can join the write behind the plug, so it dispatches at
    /// once, as the queue would let it. Then the caller submits it and `unlock`s.
    #[inline]
    pub fn lock_alone(&self, slba: u64) -> bool {
        let locked =
            self.inner.alone_at_this_instant() && self.locks.borrow_mut().zone(slba >> self.zone_shift).lock_if_idle();
        if locked {
            let mut counters = self.counters.borrow_mut();
            counters.write_requests += 1;
            counters.write_commands += 1;
        }
        locked
    }

    /// The command of the requests merged into `group`'s head has `result`: it is theirs too.
    fn hand_on(&self, group: &Group, result: &Result<Output, Status>) {
        let mut locks = self.locks.borrow_mut();
        for member in &group.merged {
            locks.results.insert(member.id, result.clone());
            member.wake();
            if let Some(waker) = locks.merged_waiters.remove(&member.id) {
                waker.wake();
            }
        }
    }

    /// The command of a write to `slba` has completed: unlocks its zone and wakes the zone's next queued write.
    #[inline]
    pub fn unlock(&self, slba: u64) {
        let mut locks = self.locks.borrow_mut();
        let queue = locks.zone(slba >> self.zone_shift);
        queue.locked = false;
        if let Some(head) = queue.writes.front() {
            head.wake();
        }
    }

    /// Queues the write and waits until it heads its unlocked zone after the plug (Ok: the zone is locked and its
    /// group taken), or until another request's command carried it (Err: that command's result).
    async fn queue_until_dispatched(
        &self,
        zone: u64,
        slba: u64,
        data: IoData,
    ) -> Result<Group, Result<Output, Status>> {
        let blocks = data.len() / u64::from(self.inner.geometry().lba_size);
        let id = {
            let mut locks = self.locks.borrow_mut();
            locks.next_id += 1;
            let id = locks.next_id;
            let queued_ns = self.inner.now_ns();
            let write = QueuedWrite { id, slba, queued_ns, blocks, data, waker: None };
            locks.zone(zone).insert(write);
            id
        };
        // Like the block layer's plug, a request that may dispatch first lets every request submitted at the same
        // instant join the queue, so that they can merge.
        let mut plugged = false;
        loop {
            let turn = poll_fn(|context| {
                let mut locks = self.locks.borrow_mut();
                if let Some(result) = locks.results.remove(&id) {
                    return Poll::Ready(Turn::Merged(result));
                }
                let queue = locks.zone(zone);
                let head_is_us = queue.writes.front().is_some_and(|head| head.id == id);
                if queue.locked || !head_is_us {
                    match queue.find_mut(slba, id) {
                        Some(write) => write.waker = Some(context.waker().clone()),
                        None => {
                            locks.merged_waiters.insert(id, context.waker().clone());
                        }
                    }
                    return Poll::Pending;
                }
                Poll::Ready(if plugged { Turn::Dispatch } else { Turn::Plug })
            })
            .await;
            match turn {
                Turn::Merged(result) => return Err(result),
                Turn::Plug => {
                    plugged = true;
                    yield_now().await;
                }
                Turn::Dispatch => return Ok(self.take_group(zone)),
            }
        }
    }

    /// Locks the zone and takes the head write with every adjacent queued write that fits in one command.
    fn take_group(&self, zone: u64) -> Group {
        let mut locks = self.locks.borrow_mut();
        let queue = locks.zone(zone);
        queue.locked = true;
        let head = queue.writes.pop_front().expect("the head exists");
        let (mut end, mut total) = (head.slba + head.blocks, head.blocks);
        let mut merged = Vec::new();
        while let Some(next) =
            queue.writes.front().filter(|next| next.slba == end && total + next.blocks <= self.max_blocks)
        {
            (end, total) = (end + next.blocks, total + next.blocks);
            merged.push(queue.writes.pop_front().expect("peeked"));
        }
        let group = Group { head, merged };
        let mut counters = self.counters.borrow_mut();
        counters.write_commands += 1;
        counters.merged_requests += group.merged.len() as u64;
        let now = self.inner.now_ns();
        for (index, member) in group.members().enumerate() {
            let left = if index == 0 { "dispatched" } else { "merged" };
            let (queue, lba, start_ns) = (SchedulerQueue::ZoneWrites(zone), member.slba, member.queued_ns);
            record(self.queue_trace, QueueSpan { queue, lba, start_ns, end_ns: now, left });
        }
        group
    }
}
