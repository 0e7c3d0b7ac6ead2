//! ZINC, the ZNS interface-aware scheduler of the ZINC slides (seed 004, part 2: "derived from mq-deadline with a
//! Kyber-style reset-throttling logic"), as its authors published it (stonet-research/zinc-scheduler, `zinc.c`).
//! User I/O goes as under mq-deadline; resets and finishes wait in a queue each, and are let go by an epoch timer:
//!
//! - Writes are counted in 8 KiB units (a smaller write is one): units dispatched since a queue last let a
//!   command go (its tokens), and units in flight.
//! - Every epoch (64 ms) the timer marks both queues fired. At the scheduler's next dispatch, a fired queue
//!   with a command in it lets one go if fewer than `concurrency_threshold` (3) units are in flight, or if more
//!   than `tokens` (2000) units were dispatched since it last let one go, or if that command has been held
//!   `max_holds` (3) epochs; otherwise every command in the queue is held one epoch more. The mark is spent
//!   either way: at most one command a queue an epoch while writes keep the device busy.
//! - A reset or finish that arrives, or completes, while fewer than the threshold's units are in flight marks
//!   its queue fired at once, so an idle device resets without waiting.
//! - The queue is taken from its head, where the module inserts (`list_add`): the newest held command goes first.
//!
//! zonelab's model differs in two places, both forced by what the module leaves open. The module puts zone
//! appends in the reset queue (its header: "does not support APPEND requests"); here they are user I/O, counted
//! as writes. The kernel runs the scheduler on every insert and completion; a held command with nothing else
//! happening would wait for the next, so here an epoch's end also runs it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::{Poll, Waker};

use serde::Serialize;
use zonelab_runtime::CommandQueue;

use super::{record, QueueSpan, QueueTrace, SchedulerCounters, SchedulerInfo, SchedulerKind, SchedulerQueue};

pub(super) const INFO: SchedulerInfo = SchedulerInfo {
    name: "zinc",
    aliases: &[],
    help: "mq-deadline with resets and finishes held by an epoch timer (options zinc_epoch, zinc_tokens, \
           zinc_max_holds, zinc_threshold)",
    make: || SchedulerKind::Zinc(ZincConfig::default()),
};

/// ZINC's knobs, as `zinc.c` names them (`RESET_*` and `FINISH_*`, the same for both queues).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ZincConfig {
    /// `RESET_EPOCH_INTERVAL`: 64 ms.
    pub epoch_ns: u64,
    /// `RESET_COMMAND_TOKENS`: 8 KiB write units dispatched since a queue last let a command go, past which it
    /// lets the next one go at its epoch. 2000.
    pub tokens: u32,
    /// `RESET_MAXIMUM_EPOCH_HOLDS`: epochs a command is held at most. 3.
    pub max_holds: u32,
    /// `RESET_MINIMUM_CONCURRENCY_THRESHOLD`: with fewer 8 KiB write units in flight, a queue lets a command
    /// go at once. 3.
    pub concurrency_threshold: u32,
}

impl Default for ZincConfig {
    fn default() -> Self {
        ZincConfig { epoch_ns: 64_000_000, tokens: 2000, max_holds: 3, concurrency_threshold: 3 }
    }
}

/// Bytes of the unit ZINC counts writes in (`ZINC_IO_SIZE_BIT_SHIFT` = 13).
const UNIT_SHIFT: u32 = 13;

/// The 8 KiB units ZINC counts a write of `bytes` as: at least one.
pub(super) fn write_units(bytes: u64) -> u64 {
    (bytes >> UNIT_SHIFT).max(1)
}

/// ZINC's two queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    Reset,
    Finish,
}

/// A held reset or finish.
struct Held {
    id: u64,
    slba: u64,
    holds: u32,
    since_ns: u64,
    waker: Option<Waker>,
}

#[derive(Default)]
struct Queue {
    /// Head first: the newest command is at the head.
    held: VecDeque<Held>,
    fired: bool,
    /// Write units dispatched since this queue last let a command go.
    tokens_used: u64,
}

/// ZINC's state beside mq-deadline's.
pub(super) struct ZincState {
    config: ZincConfig,
    queues: [Queue; 2],
    /// Write units dispatched and not yet completed.
    in_flight_units: u64,
    /// The last epoch whose timer the scheduler has seen.
    epoch: u64,
    next_id: u64,
}

impl ZincState {
    pub fn new(config: ZincConfig, now: u64) -> ZincState {
        let config = ZincConfig { epoch_ns: config.epoch_ns.max(1), ..config };
        ZincState { config, queues: Default::default(), in_flight_units: 0, epoch: now / config.epoch_ns, next_id: 0 }
    }

    fn queue(&mut self, class: Class) -> &mut Queue {
        &mut self.queues[class as usize]
    }

    fn few_in_flight(&self) -> bool {
        self.in_flight_units < u64::from(self.config.concurrency_threshold)
    }

    /// A user write of `units` reaches the device.
    pub fn write_dispatched(&mut self, units: u64) {
        self.in_flight_units += units;
        for queue in &mut self.queues {
            queue.tokens_used += units;
        }
    }

    pub fn write_completed(&mut self, units: u64) {
        self.in_flight_units = self.in_flight_units.saturating_sub(units);
    }

    /// A reset or finish completed: with few writes in flight, its queue may let the next go now.
    pub fn management_completed(&mut self, class: Class) {
        if self.few_in_flight() {
            self.queue(class).fired = true;
        }
    }

    /// The scheduler runs at `now` (an insert, a completion, or an epoch's end): marks both queues fired if an
    /// epoch ended since it last ran, and lets a fired queue's head go if one of ZINC's three rules allows.
    pub fn dispatch(&mut self, now: u64, counters: &mut SchedulerCounters, trace: &QueueTrace) {
        let epoch = now / self.config.epoch_ns;
        if epoch > self.epoch {
            self.epoch = epoch;
            self.queues.iter_mut().for_each(|queue| queue.fired = true);
        }
        let (few, config) = (self.few_in_flight(), self.config);
        for (queue, traced_as) in self.queues.iter_mut().zip([SchedulerQueue::Resets, SchedulerQueue::Finishes]) {
            if !std::mem::take(&mut queue.fired) {
                continue;
            }
            let Some(head) = queue.held.front() else { continue };
            let (counter, left) = if few {
                (&mut counters.released_few_in_flight, "few in flight")
            } else if queue.tokens_used > u64::from(config.tokens) {
                (&mut counters.released_by_tokens, "tokens spent")
            } else if head.holds >= config.max_holds {
                (&mut counters.released_by_holds, "most holds")
            } else {
                queue.held.iter_mut().for_each(|held| held.holds += 1);
                continue;
            };
            *counter += 1;
            let released = queue.held.pop_front().expect("a head");
            counters.held_ns += now - released.since_ns;
            let (lba, start_ns) = (released.slba, released.since_ns);
            record(trace, QueueSpan { queue: traced_as, lba, start_ns, end_ns: now, left });
            queue.tokens_used = 0;
            if let Some(waker) = released.waker {
                waker.wake();
            }
        }
    }

    /// Holds a reset or finish of `class` of the zone at `slba` until ZINC lets it go.
    pub async fn hold<Q: CommandQueue>(
        state: &Rc<RefCell<ZincState>>,
        counters: &RefCell<SchedulerCounters>,
        trace: &QueueTrace,
        queue: &Q,
        class: Class,
        slba: u64,
    ) {
        let id = {
            let mut zinc = state.borrow_mut();
            zinc.next_id += 1;
            let id = zinc.next_id;
            let few = zinc.few_in_flight();
            let held = zinc.queue(class);
            held.held.push_front(Held { id, slba, holds: 0, since_ns: queue.now_ns(), waker: None });
            held.fired |= few;
            counters.borrow_mut().management_held += 1;
            zinc.dispatch(queue.now_ns(), &mut counters.borrow_mut(), trace);
            id
        };
        loop {
            let epoch_ns = state.borrow().config.epoch_ns;
            let now = queue.now_ns();
            let mut epoch_end = std::pin::pin!(queue.sleep((now / epoch_ns + 1) * epoch_ns - now));
            let released = poll_fn(|context| {
                let mut zinc = state.borrow_mut();
                let Some(held) = zinc.queue(class).held.iter_mut().find(|held| held.id == id) else {
                    return Poll::Ready(true);
                };
                held.waker = Some(context.waker().clone());
                drop(zinc);
                epoch_end.as_mut().poll(context).map(|()| false)
            })
            .await;
            if released {
                return;
            }
            state.borrow_mut().dispatch(queue.now_ns(), &mut counters.borrow_mut(), trace);
        }
    }
}
