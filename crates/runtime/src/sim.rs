//! The virtual-time runtime: a single-threaded executor whose clock jumps from one completion to the next.
//!
//! At each instant it polls the ready tasks, then hands the commands they queued to the device (which picks
//! their order), then moves the clock to the next completion or timer. Tasks and the command and sleep futures
//! meet through standard wakers only: a woken task is polled again at the current instant, after the commands
//! queued so far have reached the device, exactly as if its wake-up were a timer due now.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex as StdMutex};
use std::task::{Context, Poll, Wake, Waker};

use zonelab_device::{Built, Device, HostSide, QueueFull};
use zonelab_zns::{MediaStore, Status};

use crate::api::{CommandQueue, Output, QueuedCommand};
use crate::timers::Timers;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Tasks woken since the executor last looked, in the order they were woken; `any` lets the executor skip the
/// lock when none was.
#[derive(Default)]
struct Woken {
    any: AtomicBool,
    tasks: StdMutex<Vec<usize>>,
}

type WokenList = Arc<Woken>;

/// Hands each task woken since the last call to `f`, in the order they were woken.
fn drain_woken(woken: &WokenList, mut f: impl FnMut(usize)) {
    // A plain load first: the executor asks twice an instant, and a swap is a locked instruction.
    if !woken.any.load(AtomicOrdering::Relaxed) || !woken.any.swap(false, AtomicOrdering::Acquire) {
        return;
    }
    let mut tasks = woken.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for task in tasks.drain(..) {
        f(task);
    }
}

/// The waker of one task: it lists the task as woken.
struct TaskWaker {
    task: usize,
    woken: WokenList,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(self.task);
        self.woken.any.store(true, AtomicOrdering::Release);
    }
}

/// Whom to wake: one of the simulation's own tasks (the fast path: no waker is cloned or called), or the
/// waker of whatever executor polled the future.
enum Wakee {
    Task(usize),
    Waker(Waker),
}

/// A command's place between its submission and the moment its future sees the result: whom its completion
/// wakes (none while the slot is free), and the completion once the device has it. The completion is written
/// beside the wakee, which stays in place.
struct Slot {
    wakee: Option<Wakee>,
    done: Option<Done>,
}

struct Done {
    complete_ns: u64,
    result: Result<Output, Status>,
}

impl Slot {
    const FREE: Slot = Slot { wakee: None, done: None };
}

/// What a timer wakes when the clock reaches it: a task, a command's slot, or a foreign waker kept in
/// `Shared::sleepers` (so that timers stay small: the heap moves them on every push and pop; 32-bit indices
/// make a timer 24 bytes instead of 32).
#[derive(Clone, Copy)]
enum Target {
    Task(u32),
    Slot(u32),
    Sleeper(u32),
}

/// An index as a timer holds it. Tasks, command slots and sleepers number far fewer than 2^32 (slots are bounded
/// by the submission queue).
fn index32(index: usize) -> u32 {
    u32::try_from(index).expect("fewer than 2^32 tasks, slots and sleepers")
}

struct Shared<S> {
    device: Device<S>,
    /// What the host path costs on either side of the device.
    host: HostSide,
    now_ns: u64,
    timers: Timers<Target>,
    slots: Vec<Slot>,
    free_slots: Vec<usize>,
    /// Foreign wakers of sleeps, by the index their timer holds; freed indices are reused.
    sleepers: Vec<Option<Waker>>,
    free_sleepers: Vec<usize>,
    /// Futures waiting for room in the device's submission queue.
    queue_waiters: Vec<Waker>,
    /// Tasks spawned and not yet adopted, each with whether it is sequential (`Host::spawn_sequential`).
    spawned: Vec<(Task, bool)>,
    /// The waker of each task, and the task being polled, for the fast path of `wakee`.
    task_wakers: Vec<Waker>,
    /// Whether each task awaits one future at a time (`Host::spawn_sequential`).
    sequential: Vec<bool>,
    polling: Option<usize>,
    /// Tasks spawned so far: the next one's index, as adopting them in order numbers them.
    tasks_spawned: usize,
    /// Whether another task is ready at this instant, while one is polled; and the tasks woken meanwhile.
    others_ready: bool,
    woken: WokenList,
    /// The clock does not pass this in the current `run_until`.
    deadline_ns: u64,
}

impl<S: MediaStore> Shared<S> {
    /// Whom a future polled with `context` wakes.
    fn wakee(&self, context: &Context<'_>) -> Wakee {
        match self.polling {
            Some(task) if self.task_wakers[task].will_wake(context.waker()) => Wakee::Task(task),
            _ => Wakee::Waker(context.waker().clone()),
        }
    }

    /// Whether the task being polled may move the clock to `until_ns` itself: it is sequential, and nothing else
    /// would happen at this instant or before `until_ns` (no other task ready or woken, no command queued but
    /// `own_queued` of its own, no timer due by then).
    fn alone_until(&self, until_ns: u64, own_queued: usize) -> bool {
        self.polling.is_some_and(|task| self.sequential[task])
            && !self.others_ready
            && until_ns <= self.deadline_ns
            && self.spawned.is_empty()
            && self.queue_waiters.is_empty()
            && self.device.queued() == own_queued
            && !self.woken.any.load(AtomicOrdering::Relaxed)
            && self.timers.next_ns().is_none_or(|next| next > until_ns)
    }

    /// Moves the clock to `until_ns` when the task being polled may (`alone_until`), as the executor would move
    /// it to a sleep's timer; false changes nothing.
    fn pass_alone(&mut self, until_ns: u64) -> bool {
        let alone = until_ns >= self.now_ns && self.alone_until(until_ns, 0);
        if alone {
            self.now_ns = until_ns;
        }
        alone
    }

    /// A sequential task alone at this instant with the command it has just queued in `slot`: hands the command
    /// to the device now, as the end of the instant would, and if its completion comes before anything else,
    /// moves the clock there and gives the result, as the executor would on waking the task. None sets the
    /// completion's timer, as the dispatch would have.
    fn complete_alone(&mut self, slot: usize) -> Option<Result<Output, Status>> {
        if !self.alone_until(self.now_ns, 1) {
            return None;
        }
        let next_other = self.timers.next_ns();
        let dispatched_ns = self.dispatch_holding(Some(slot)).expect("the device completed the command");
        let complete_ns = self.slots[slot].done.as_ref().expect("the device completed the command").complete_ns;
        let first = next_other.is_none_or(|next| complete_ns < next) && complete_ns <= self.deadline_ns;
        // The dispatch wakes whoever waited for room in the queue: then they run first.
        if !first || self.woken.any.load(AtomicOrdering::Relaxed) {
            self.set_timer(dispatched_ns, Target::Slot(index32(slot)));
            return None;
        }
        self.now_ns = complete_ns;
        let done = self.slots[slot].done.take().expect("checked above");
        self.slots[slot].wakee = None;
        self.free_slots.push(slot);
        Some(done.result)
    }

    fn set_timer(&mut self, at_ns: u64, target: Target) {
        self.timers.set(at_ns, target);
    }

    /// Hands the commands queued at this instant to the device, which has them once the host path's submission
    /// cost has passed; each completion, with the path's completion cost, becomes a timer.
    fn dispatch(&mut self) {
        self.dispatch_holding(None);
    }

    /// `dispatch`, but the completion of slot `held` gets no timer: its caller may take it at once, and sets the
    /// timer, for the time returned, if it does not.
    fn dispatch_holding(&mut self, held: Option<usize>) -> Option<u64> {
        let (host, arrival) = (self.host, self.host.arrival_ns(self.now_ns));
        let (slots, timers) = (&mut self.slots, &mut self.timers);
        let mut held_ns = None;
        self.device.process_queue(arrival, |tag, device_ns, result| {
            let complete_ns = host.completion_ns(arrival, device_ns);
            let slot = tag as usize;
            debug_assert!(
                slots[slot].wakee.is_some() && slots[slot].done.is_none(),
                "only queued slots reach the device"
            );
            slots[slot].done = Some(Done { complete_ns, result });
            if held == Some(slot) {
                held_ns = Some(complete_ns);
            } else {
                timers.set(complete_ns, Target::Slot(index32(slot)));
            }
        });
        // A reset whose erases these commands suspended, a read whose data theirs went ahead of, or a finish
        // whose padding their writes shared the budget with completes later: its timer, when it comes, is set
        // again for the new time.
        self.device.moved_completions(|tag, device_ns| {
            if let Some(Done { complete_ns, .. }) = &mut slots[tag as usize].done {
                *complete_ns = (*complete_ns).max(host.completion_ns(device_ns, device_ns));
            }
        });
        if !self.queue_waiters.is_empty() {
            for waker in std::mem::take(&mut self.queue_waiters) {
                waker.wake();
            }
        }
        held_ns
    }
}

/// The handle host code holds: a `CommandQueue` on one namespace of the simulated device (the attached one,
/// unless `on_namespace` says another).
pub struct Host<S> {
    shared: Rc<RefCell<Shared<S>>>,
    nsid: u32,
}

impl<S> Clone for Host<S> {
    fn clone(&self) -> Self {
        Host { shared: Rc::clone(&self.shared), nsid: self.nsid }
    }
}

impl<S: MediaStore + 'static> Host<S> {
    /// A handle on namespace `nsid` of the same device, sharing its clock; None if the device has none.
    pub fn on_namespace(&self, nsid: u32) -> Option<Host<S>> {
        self.shared.borrow().device.geometry_of(nsid)?;
        Some(Host { shared: Rc::clone(&self.shared), nsid })
    }

    /// Starts another task; it runs from the current instant. Returns its index, which a device trace names
    /// as the submitter of the task's commands (`TraceEvent::submitter`).
    pub fn spawn(&self, task: impl Future<Output = ()> + 'static) -> u32 {
        self.spawn_task(Box::pin(task), false)
    }

    /// Starts a task that awaits one future at a time, at any depth (no join or select inside it). When nothing
    /// else could happen first, its sleeps and its commands complete in the poll that began them and
    /// `alone_at_this_instant` holds, which spares a round of the executor each; a task that polls several
    /// futures at once would see the clock move under the ones polled after the first.
    pub fn spawn_sequential(&self, task: impl Future<Output = ()> + 'static) -> u32 {
        self.spawn_task(Box::pin(task), true)
    }

    fn spawn_task(&self, task: Task, sequential: bool) -> u32 {
        let mut shared = self.shared.borrow_mut();
        let index = shared.tasks_spawned;
        shared.tasks_spawned += 1;
        shared.spawned.push((task, sequential));
        index32(index)
    }

    /// Runs `f` on the device (counters, namespace state); the device must not be driven from inside.
    pub fn with_device<T>(&self, f: impl FnOnce(&mut Device<S>) -> T) -> T {
        f(&mut self.shared.borrow_mut().device)
    }
}

/// The future of one queued command.
struct CommandFuture<S> {
    shared: Rc<RefCell<Shared<S>>>,
    nsid: u32,
    command: Option<QueuedCommand>,
    slot: Option<usize>,
}

impl<S: MediaStore> Future for CommandFuture<S> {
    type Output = Result<Output, Status>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut shared = this.shared.borrow_mut();
        if let Some(command) = this.command.take() {
            let slot = shared.free_slots.pop().unwrap_or_else(|| {
                shared.slots.push(Slot::FREE);
                shared.slots.len() - 1
            });
            if !shared.host.carries(&command) {
                let arrival = shared.host.arrival_ns(shared.now_ns);
                let complete_ns = shared.host.completion_ns(arrival, arrival);
                let wakee = shared.wakee(context);
                shared.slots[slot] =
                    Slot { wakee: Some(wakee), done: Some(Done { complete_ns, result: Err(Status::InvalidOpcode) }) };
                shared.set_timer(complete_ns, Target::Slot(index32(slot)));
                this.slot = Some(slot);
                return Poll::Pending;
            }
            let submitter = shared.polling.map(index32);
            match shared.device.enqueue_from(slot as u64, this.nsid, command, submitter) {
                Ok(()) => {
                    shared.slots[slot].wakee = Some(shared.wakee(context));
                    if let Some(result) = shared.complete_alone(slot) {
                        return Poll::Ready(result);
                    }
                    this.slot = Some(slot);
                }
                Err(QueueFull(command)) => {
                    shared.free_slots.push(slot);
                    this.command = Some(command);
                    shared.queue_waiters.push(context.waker().clone());
                }
            }
            return Poll::Pending;
        }
        let Some(slot) = this.slot else { return Poll::Pending };
        let now = shared.now_ns;
        if let Some(done) = shared.slots[slot].done.take_if(|done| done.complete_ns <= now) {
            shared.slots[slot].wakee = None;
            shared.free_slots.push(slot);
            this.slot = None;
            return Poll::Ready(done.result);
        }
        let wakee = shared.wakee(context);
        shared.slots[slot].wakee = Some(wakee);
        Poll::Pending
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

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        let mut shared = self.shared.borrow_mut();
        let now = shared.now_ns;
        match self.until_ns {
            Some(until) if now >= until => Poll::Ready(()),
            Some(_) => Poll::Pending,
            None => {
                let until = now.saturating_add(self.duration_ns);
                if shared.pass_alone(until) {
                    return Poll::Ready(());
                }
                let wakee = shared.wakee(context);
                let target = match wakee {
                    Wakee::Task(task) => Target::Task(index32(task)),
                    Wakee::Waker(waker) => {
                        let index = shared.free_sleepers.pop().unwrap_or(shared.sleepers.len());
                        if index == shared.sleepers.len() {
                            shared.sleepers.push(None);
                        }
                        shared.sleepers[index] = Some(waker);
                        Target::Sleeper(index32(index))
                    }
                };
                shared.set_timer(until, target);
                drop(shared);
                self.until_ns = Some(until);
                Poll::Pending
            }
        }
    }
}

impl<S: MediaStore + 'static> CommandQueue for Host<S> {
    fn submit(&self, command: QueuedCommand) -> impl Future<Output = Result<Output, Status>> {
        CommandFuture { shared: Rc::clone(&self.shared), nsid: self.nsid, command: Some(command), slot: None }
    }

    fn now_ns(&self) -> u64 {
        self.shared.borrow().now_ns
    }

    fn sleep(&self, duration_ns: u64) -> impl Future<Output = ()> {
        Sleep { shared: Rc::clone(&self.shared), until_ns: None, duration_ns }
    }

    fn geometry(&self) -> zonelab_zns::Geometry {
        self.shared.borrow().device.geometry_of(self.nsid).expect("a host's namespace exists")
    }

    fn task(&self) -> Option<u32> {
        self.shared.borrow().polling.map(index32)
    }

    fn alone_at_this_instant(&self) -> bool {
        let shared = self.shared.borrow();
        shared.alone_until(shared.now_ns, 0)
    }

    fn pass_alone(&self, until_ns: u64) -> bool {
        self.shared.borrow_mut().pass_alone(until_ns)
    }
}

/// A deterministic simulation of one device and the host tasks that drive it.
pub struct Simulation<S> {
    shared: Rc<RefCell<Shared<S>>>,
    tasks: Vec<Option<Task>>,
    /// Each task's waker (a clone of the one `Shared` compares against).
    wakers: Vec<Waker>,
    ready: VecDeque<usize>,
    woken: WokenList,
}

impl Simulation<Box<dyn MediaStore>> {
    /// A simulation of a device the composition root opened, reached through the host path it was opened for.
    pub fn over(built: Built, reorder_seed: Option<u64>) -> Simulation<Box<dyn MediaStore>> {
        Simulation::with_host(built.device, built.host, reorder_seed)
    }
}

impl<S: MediaStore + 'static> Simulation<S> {
    /// A simulation of `device` alone from time 0, reached at no host cost. `reorder_seed` turns on the
    /// device's seeded reordering of the commands outstanding together.
    pub fn new(device: Device<S>, reorder_seed: Option<u64>) -> Simulation<S> {
        Simulation::with_host(device, HostSide::free(), reorder_seed)
    }

    /// A simulation of `device` reached through `host`, which costs each command its submission and
    /// completion time.
    pub fn with_host(mut device: Device<S>, host: HostSide, reorder_seed: Option<u64>) -> Simulation<S> {
        device.set_reordering(reorder_seed);
        device.forget_in_flight();
        let shared = Shared {
            device,
            host,
            now_ns: 0,
            timers: Timers::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            sleepers: Vec::new(),
            free_sleepers: Vec::new(),
            queue_waiters: Vec::new(),
            spawned: Vec::new(),
            task_wakers: Vec::new(),
            sequential: Vec::new(),
            polling: None,
            tasks_spawned: 0,
            others_ready: false,
            woken: WokenList::default(),
            deadline_ns: 0,
        };
        let woken = Arc::clone(&shared.woken);
        Simulation {
            shared: Rc::new(RefCell::new(shared)),
            tasks: Vec::new(),
            wakers: Vec::new(),
            ready: VecDeque::new(),
            woken,
        }
    }

    pub fn host(&self) -> Host<S> {
        let nsid = self.shared.borrow().device.attached_nsid();
        Host { shared: Rc::clone(&self.shared), nsid }
    }

    /// Adds a task that starts at the current instant; returns its index (`Host::spawn`).
    pub fn spawn(&mut self, task: impl Future<Output = ()> + 'static) -> u32 {
        self.host().spawn(task)
    }

    /// Adds a task that awaits one future at a time (`Host::spawn_sequential`).
    pub fn spawn_sequential(&mut self, task: impl Future<Output = ()> + 'static) -> u32 {
        self.host().spawn_sequential(task)
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
        self.shared.borrow_mut().deadline_ns = deadline_ns;
        loop {
            self.adopt_spawned();
            while let Some(task) = self.ready.pop_front() {
                let Some(future) = self.tasks[task].as_mut() else { continue };
                {
                    let mut shared = self.shared.borrow_mut();
                    shared.polling = Some(task);
                    shared.others_ready = !self.ready.is_empty();
                }
                let mut context = Context::from_waker(&self.wakers[task]);
                let done = future.as_mut().poll(&mut context).is_ready();
                self.shared.borrow_mut().polling = None;
                if done {
                    self.tasks[task] = None;
                }
                self.adopt_spawned();
            }
            let mut shared = self.shared.borrow_mut();
            // Tasks woken while others ran are due now, after this instant's commands reach the device.
            let now = shared.now_ns;
            drain_woken(&self.woken, |task| shared.set_timer(now, Target::Task(index32(task))));
            shared.dispatch();
            drain_woken(&self.woken, |task| shared.set_timer(now, Target::Task(index32(task))));
            let Some(at) = shared.timers.next_ns() else { break };
            if at > deadline_ns {
                break;
            }
            debug_assert!(at >= shared.now_ns, "the clock never moves backwards");
            shared.now_ns = at;
            while let Some((_, target)) = shared.timers.pop_due(at) {
                let woke_a_waker = match target {
                    Target::Task(task) => {
                        self.ready.push_back(task as usize);
                        false
                    }
                    Target::Sleeper(index) => {
                        let index = index as usize;
                        if let Some(waker) = shared.sleepers[index].take() {
                            waker.wake();
                        }
                        shared.free_sleepers.push(index);
                        true
                    }
                    Target::Slot(slot) => match &shared.slots[slot as usize] {
                        Slot { done: Some(Done { complete_ns, .. }), .. } if *complete_ns > at => {
                            let later = *complete_ns;
                            shared.timers.set(later, target);
                            false
                        }
                        Slot { wakee: Some(Wakee::Task(task)), .. } => {
                            self.ready.push_back(*task);
                            false
                        }
                        Slot { wakee: Some(Wakee::Waker(waker)), .. } => {
                            waker.wake_by_ref();
                            true
                        }
                        Slot { wakee: None, .. } => unreachable!("a completion timer points at a slot in use"),
                    },
                };
                if woke_a_waker {
                    let ready = &mut self.ready;
                    drain_woken(&self.woken, |task| ready.push_back(task));
                }
            }
        }
        self.shared.borrow().now_ns
    }

    /// Takes in the tasks spawned since the last call. Inlined for its usual answer, none; the adoption is not.
    #[inline]
    fn adopt_spawned(&mut self) {
        if !self.shared.borrow().spawned.is_empty() {
            self.adopt_spawned_tasks();
        }
    }

    #[inline(never)]
    fn adopt_spawned_tasks(&mut self) {
        let mut shared = self.shared.borrow_mut();
        // Drained, not taken, so that the list keeps its allocation for the next spawns.
        let mut spawned = std::mem::take(&mut shared.spawned);
        for (task, sequential) in spawned.drain(..) {
            let id = self.tasks.len();
            shared.sequential.push(sequential);
            let waker = Waker::from(Arc::new(TaskWaker { task: id, woken: Arc::clone(&self.woken) }));
            shared.task_wakers.push(waker.clone());
            self.wakers.push(waker);
            self.tasks.push(Some(task));
            self.ready.push_back(id);
        }
        shared.spawned = spawned;
    }

    /// When the next thing happens: now if a task is ready to run, else the earliest timer or completion; None
    /// when nothing is left. `run_until` in slices until this is None does exactly what `run` does.
    pub fn next_event_ns(&self) -> Option<u64> {
        let shared = self.shared.borrow();
        if !self.ready.is_empty() || !shared.spawned.is_empty() {
            return Some(shared.now_ns);
        }
        shared.timers.next_ns()
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
