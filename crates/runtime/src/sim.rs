//! The virtual-time runtime: a single-threaded executor whose clock jumps from one completion to the next.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use zonelab_device::{Device, Submitted};
use zonelab_zns::{
    Command, Completion, MediaStore, ReceiveAction, Status, ZoneReport, REPORT_HEADER_BYTES, ZONE_DESCRIPTOR_BYTES,
};

use crate::api::{CommandQueue, IoData, Output, QueuedCommand, TaskId};
use crate::rng::SplitMix64;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Zeros that writes of `IoData::Zeros` are served from, so that simulations keeping no data allocate none.
static ZEROS: [u8; 1 << 20] = [0; 1 << 20];

/// Runs `f` on the bytes of `data`; zeros come from a shared buffer when they fit in it.
fn with_bytes<T>(data: &IoData, f: impl FnOnce(&[u8]) -> T) -> T {
    match data {
        IoData::Bytes(bytes) => f(bytes),
        IoData::Zeros(len) => match ZEROS.get(..*len as usize) {
            Some(zeros) => f(zeros),
            None => f(&vec![0u8; *len as usize]),
        },
    }
}

/// A command's place between its submission and the moment its task sees the result.
#[derive(Debug)]
enum Slot {
    Free,
    Queued,
    Done { complete_ns: u64, result: Result<Output, Status> },
}

struct Queued {
    slot: usize,
    task: usize,
    command: QueuedCommand,
}

struct Shared<S> {
    device: Device<S>,
    now_ns: u64,
    /// (time, sequence, task): tasks to poll when the clock reaches their time; the sequence keeps ties in
    /// submission order, so nothing depends on the heap's internals.
    timers: BinaryHeap<Reverse<(u64, u64, usize)>>,
    timer_seq: u64,
    current_task: usize,
    queued: Vec<Queued>,
    slots: Vec<Slot>,
    free_slots: Vec<usize>,
    reorder: Option<SplitMix64>,
    spawned: Vec<Task>,
}

impl<S: MediaStore> Shared<S> {
    fn wake_at(&mut self, at_ns: u64, task: usize) {
        self.timer_seq += 1;
        self.timers.push(Reverse((at_ns, self.timer_seq, task)));
    }

    /// Hands the commands queued at this instant to the device, in a seeded random order when reordering is
    /// on (NVMe lets concurrently outstanding commands execute in any order; appends then land in any order).
    fn dispatch(&mut self) {
        let mut batch = std::mem::take(&mut self.queued);
        if let Some(rng) = &mut self.reorder {
            rng.shuffle(&mut batch);
        }
        for Queued { slot, task, command } in batch.drain(..) {
            let (complete_ns, result) = self.execute(command);
            self.slots[slot] = Slot::Done { complete_ns, result };
            self.wake_at(complete_ns, task);
        }
        self.queued = batch;
    }

    fn execute(&mut self, command: QueuedCommand) -> (u64, Result<Output, Status>) {
        let now = self.now_ns;
        let lba_size = u64::from(self.device.namespace().geometry().lba_size);
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
                with(self.device.submit_read_without_data(now, slba, nlb), Output::Done)
            }
            QueuedCommand::Read { slba, nlb, keep: true } => {
                let mut buf = vec![0u8; nlb.saturating_mul(lba_size).min(usize::MAX as u64) as usize];
                let submitted = self.device.submit(now, Command::Read { slba, buf: &mut buf });
                with(submitted, Output::Data(buf))
            }
            QueuedCommand::Write { slba, data } => {
                let submitted =
                    with_bytes(&data, |bytes| self.device.submit(now, Command::Write { slba, data: bytes }));
                with(submitted, Output::Done)
            }
            QueuedCommand::WriteZeroes { slba, nlb } => {
                with(self.device.submit(now, Command::WriteZeroes { slba, nlb }), Output::Done)
            }
            QueuedCommand::Append { zslba, data } => {
                let submitted =
                    with_bytes(&data, |bytes| self.device.submit(now, Command::Append { zslba, data: bytes }));
                with(submitted, Output::Done)
            }
            QueuedCommand::Flush => with(self.device.submit(now, Command::Flush), Output::Done),
            QueuedCommand::ZoneSend { slba, action, select_all } => {
                with(self.device.submit(now, Command::ZoneManagementSend { slba, action, select_all }), Output::Done)
            }
            QueuedCommand::Report { slba, filter, partial, max_zones } => {
                let mut buf = vec![0u8; REPORT_HEADER_BYTES + ZONE_DESCRIPTOR_BYTES * max_zones as usize];
                let action = ReceiveAction::ReportZones;
                let submitted = self
                    .device
                    .submit(now, Command::ZoneManagementReceive { slba, action, filter, partial, buf: &mut buf });
                let zone_size = self.device.namespace().geometry().zone_size_lba;
                let report =
                    ZoneReport::decode(&buf, zone_size).unwrap_or(ZoneReport { nr_zones: 0, zones: Vec::new() });
                with(submitted, Output::Report(report))
            }
        }
    }
}

/// The handle host code holds: a `CommandQueue` on the simulated device.
pub struct Host<S> {
    shared: Rc<RefCell<Shared<S>>>,
}

impl<S> Clone for Host<S> {
    fn clone(&self) -> Self {
        Host { shared: Rc::clone(&self.shared) }
    }
}

impl<S: MediaStore + 'static> Host<S> {
    /// Starts another task; it runs from the current instant.
    pub fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.shared.borrow_mut().spawned.push(Box::pin(task));
    }

    /// Runs `f` on the device (counters, namespace state); the device must not be driven from inside.
    pub fn with_device<T>(&self, f: impl FnOnce(&mut Device<S>) -> T) -> T {
        f(&mut self.shared.borrow_mut().device)
    }
}

/// The future of one queued command.
struct CommandFuture<S> {
    shared: Rc<RefCell<Shared<S>>>,
    command: Option<QueuedCommand>,
    slot: usize,
}

impl<S: MediaStore> Future for CommandFuture<S> {
    type Output = Result<Output, Status>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut shared = this.shared.borrow_mut();
        if let Some(command) = this.command.take() {
            let slot = match shared.free_slots.pop() {
                Some(slot) => slot,
                None => {
                    shared.slots.push(Slot::Free);
                    shared.slots.len() - 1
                }
            };
            shared.slots[slot] = Slot::Queued;
            let task = shared.current_task;
            shared.queued.push(Queued { slot, task, command });
            this.slot = slot;
            return Poll::Pending;
        }
        let now = shared.now_ns;
        match &shared.slots[this.slot] {
            Slot::Done { complete_ns, .. } if *complete_ns <= now => {
                let Slot::Done { result, .. } = std::mem::replace(&mut shared.slots[this.slot], Slot::Free) else {
                    unreachable!("matched Done above")
                };
                shared.free_slots.push(this.slot);
                Poll::Ready(result)
            }
            _ => Poll::Pending,
        }
    }
}

/// The future of a sleep.
struct Sleep<S> {
    shared: Rc<RefCell<Shared<S>>>,
    until_ns: Option<u64>,
    duration_ns: u64,
}

impl<S: MediaStore> Future for Sleep<S> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        let mut shared = self.shared.borrow_mut();
        let now = shared.now_ns;
        match self.until_ns {
            Some(until) if now >= until => Poll::Ready(()),
            Some(_) => Poll::Pending,
            None => {
                let until = now + self.duration_ns;
                let task = shared.current_task;
                shared.wake_at(until, task);
                drop(shared);
                self.until_ns = Some(until);
                Poll::Pending
            }
        }
    }
}

/// The future of a park: pending once, ready when polled again.
struct Park {
    parked: bool,
}

impl Future for Park {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.parked {
            Poll::Ready(())
        } else {
            self.parked = true;
            Poll::Pending
        }
    }
}

impl<S: MediaStore + 'static> CommandQueue for Host<S> {
    fn submit(&self, command: QueuedCommand) -> impl Future<Output = Result<Output, Status>> {
        CommandFuture { shared: Rc::clone(&self.shared), command: Some(command), slot: usize::MAX }
    }

    fn now_ns(&self) -> u64 {
        self.shared.borrow().now_ns
    }

    fn sleep(&self, duration_ns: u64) -> impl Future<Output = ()> {
        Sleep { shared: Rc::clone(&self.shared), until_ns: None, duration_ns }
    }

    fn geometry(&self) -> zonelab_zns::Geometry {
        *self.shared.borrow().device.namespace().geometry()
    }

    fn current_task(&self) -> TaskId {
        TaskId(self.shared.borrow().current_task)
    }

    fn wake(&self, task: TaskId) {
        let mut shared = self.shared.borrow_mut();
        let now = shared.now_ns;
        shared.wake_at(now, task.0);
    }

    fn park(&self) -> impl Future<Output = ()> {
        Park { parked: false }
    }
}

/// A deterministic simulation of one device and the host tasks that drive it.
pub struct Simulation<S> {
    shared: Rc<RefCell<Shared<S>>>,
    tasks: Vec<Option<Task>>,
    ready: VecDeque<usize>,
}

impl<S: MediaStore + 'static> Simulation<S> {
    /// A simulation of `device` from time 0. `reorder_seed` turns on seeded reordering of the commands that
    /// are submitted at the same instant.
    pub fn new(device: Device<S>, reorder_seed: Option<u64>) -> Simulation<S> {
        let shared = Shared {
            device,
            now_ns: 0,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            current_task: 0,
            queued: Vec::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            reorder: reorder_seed.map(|seed| SplitMix64::split(seed, "reorder")),
            spawned: Vec::new(),
        };
        Simulation { shared: Rc::new(RefCell::new(shared)), tasks: Vec::new(), ready: VecDeque::new() }
    }

    pub fn host(&self) -> Host<S> {
        Host { shared: Rc::clone(&self.shared) }
    }

    /// Adds a task that starts at the current instant.
    pub fn spawn(&mut self, task: impl Future<Output = ()> + 'static) {
        self.host().spawn(task);
    }

    pub fn now_ns(&self) -> u64 {
        self.shared.borrow().now_ns
    }

    /// Runs until every task has finished or none can make progress; returns the device time reached.
    pub fn run(&mut self) -> u64 {
        self.run_until(u64::MAX)
    }

    /// Runs until every task has finished, none can make progress, or the clock would pass `deadline_ns`.
    pub fn run_until(&mut self, deadline_ns: u64) -> u64 {
        let waker = Waker::noop();
        let mut context = Context::from_waker(waker);
        loop {
            self.adopt_spawned();
            while let Some(task) = self.ready.pop_front() {
                let Some(future) = self.tasks[task].as_mut() else { continue };
                self.shared.borrow_mut().current_task = task;
                if future.as_mut().poll(&mut context).is_ready() {
                    self.tasks[task] = None;
                }
                self.adopt_spawned();
            }
            let mut shared = self.shared.borrow_mut();
            shared.dispatch();
            let Some(&Reverse((at, _, _))) = shared.timers.peek() else { break };
            if at > deadline_ns {
                break;
            }
            debug_assert!(at >= shared.now_ns, "the clock never moves backwards");
            shared.now_ns = at;
            while let Some(&Reverse((when, _, task))) = shared.timers.peek() {
                if when != at {
                    break;
                }
                shared.timers.pop();
                self.ready.push_back(task);
            }
        }
        self.shared.borrow().now_ns
    }

    fn adopt_spawned(&mut self) {
        let spawned = std::mem::take(&mut self.shared.borrow_mut().spawned);
        for task in spawned {
            self.tasks.push(Some(task));
            self.ready.push_back(self.tasks.len() - 1);
        }
    }

    /// Tasks that have not finished (after `run`, those waiting on something that will never come).
    pub fn unfinished_tasks(&self) -> usize {
        self.tasks.iter().filter(|task| task.is_some()).count()
    }

    /// Runs `f` on the device.
    pub fn with_device<T>(&self, f: impl FnOnce(&mut Device<S>) -> T) -> T {
        f(&mut self.shared.borrow_mut().device)
    }

    /// Ends the simulation and gives the device back. Every `Host` handle must have been dropped (tasks hold
    /// theirs and are dropped here); one kept outside the simulation is a bug in the caller, and panics.
    pub fn into_device(self) -> Device<S> {
        drop(self.tasks);
        match Rc::try_unwrap(self.shared) {
            Ok(shared) => shared.into_inner().device,
            Err(_) => panic!("a Host handle outlived its simulation"),
        }
    }
}
