//! mq-deadline's zone write lock, as Linux keeps it for zoned devices: one write in flight per zone, queued
//! writes sorted by LBA and dispatched lowest first, adjacent queued writes merged into one command up to a
//! maximum request size. Reads, appends (which Linux does not lock) and zone management pass straight through.

use std::cell::RefCell;
use std::collections::BTreeMap;
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
    /// Queued writes by start LBA.
    writes: BTreeMap<u64, QueuedWrite>,
}

/// The zones' locks and queues, and the results of merged requests for their waiting tasks.
#[derive(Default)]
pub(super) struct ZoneLocks {
    zones: BTreeMap<u64, ZoneQueue>,
    results: BTreeMap<u64, Result<Output, Status>>,
    /// Wakers of merged requests waiting for their results, by request id.
    merged_waiters: BTreeMap<u64, Waker>,
    next_id: u64,
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
    /// The write path: queue, wait for the zone lock and to be the lowest queued LBA, then dispatch with every
    /// adjacent queued write merged in; the other merged requests get the same result.
    pub async fn write(&self, slba: u64, data: IoData) -> Result<Output, Status> {
        let blocks = data.len() / u64::from(self.inner.geometry().lba_size);
        let zone = slba >> self.zone_shift;
        let id = {
            let mut locks = self.locks.borrow_mut();
            locks.next_id += 1;
            let id = locks.next_id;
            self.counters.borrow_mut().write_requests += 1;
            let queued_ns = self.inner.now_ns();
            let write = QueuedWrite { id, slba, queued_ns, blocks, data, waker: None };
            locks.zones.entry(zone).or_default().writes.insert(slba, write);
            id
        };
        // Like the block layer's plug, a request that may dispatch first lets every request submitted at the same
        // instant join the queue, so that they can merge.
        let mut plugged = false;
        let members = loop {
            let turn = poll_fn(|context| {
                let mut locks = self.locks.borrow_mut();
                if let Some(result) = locks.results.remove(&id) {
                    return Poll::Ready(Turn::Merged(result));
                }
                let queue = locks.zones.entry(zone).or_default();
                let head_is_us = queue.writes.get(&slba).is_some_and(|write| write.id == id)
                    && queue.writes.first_key_value().is_some_and(|(_, head)| head.id == id);
                if queue.locked || !head_is_us {
                    match queue.writes.get_mut(&slba).filter(|write| write.id == id) {
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
                Turn::Merged(result) => return result,
                Turn::Plug => {
                    plugged = true;
                    yield_now().await;
                }
                Turn::Dispatch => break self.take_group(zone),
            }
        };
        let data = merge(members.iter().map(|member| &member.data));
        let units = write_units(data.len());
        if let Some(zinc) = self.zinc {
            zinc.borrow_mut().write_dispatched(units);
        }
        let result = self.inner.submit(QueuedCommand::Write { slba, data }).await;
        if let Some(zinc) = self.zinc {
            zinc.borrow_mut().write_completed(units);
        }
        let mut locks = self.locks.borrow_mut();
        for member in members.iter().skip(1) {
            locks.results.insert(member.id, result.clone());
            member.wake();
            if let Some(waker) = locks.merged_waiters.remove(&member.id) {
                waker.wake();
            }
        }
        let queue = locks.zones.entry(zone).or_default();
        queue.locked = false;
        if let Some((_, head)) = queue.writes.first_key_value() {
            head.wake();
        }
        result
    }

    /// Locks the zone and takes the head write with every adjacent queued write that fits in one command.
    fn take_group(&self, zone: u64) -> Vec<QueuedWrite> {
        let mut locks = self.locks.borrow_mut();
        let queue = locks.zones.entry(zone).or_default();
        queue.locked = true;
        let (mut end, head) =
            queue.writes.pop_first().map(|(lba, write)| (lba + write.blocks, write)).expect("the head exists");
        let mut members = vec![head];
        let mut total = members[0].blocks;
        while let Some(next) = queue.writes.first_key_value().map(|(lba, write)| (*lba, write.blocks)) {
            if next.0 != end || total + next.1 > self.max_blocks {
                break;
            }
            let (_, write) = queue.writes.pop_first().expect("peeked");
            end += write.blocks;
            total += write.blocks;
            members.push(write);
        }
        let mut counters = self.counters.borrow_mut();
        counters.write_commands += 1;
        counters.merged_requests += members.len() as u64 - 1;
        let now = self.inner.now_ns();
        for (index, member) in members.iter().enumerate() {
            let left = if index == 0 { "dispatched" } else { "merged" };
            let (queue, lba, start_ns) = (SchedulerQueue::ZoneWrites(zone), member.slba, member.queued_ns);
            record(self.queue_trace, QueueSpan { queue, lba, start_ns, end_ns: now, left });
        }
        members
    }
}
