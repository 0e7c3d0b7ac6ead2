//! The real-time runtime: the same device model, paced by the wall clock. A device thread drives the device;
//! host threads submit through queue pairs of their own (one submission queue per pair, as NVMe gives each
//! CPU one), so submitters that queue contend only on their own pair (one that finds the device free only
//! tries its lock, below). The device thread executes each command at the instant it sees it (model time =
//! nanoseconds of a monotonic clock since the device was opened) and delivers the completion no earlier than
//! its modelled time: it sleeps until shortly before, then spins. A completion whose time has already passed
//! when the device thread gets to it is delivered at once and counted as late. A host thread that finds the
//! device free executes its command itself, at the instant it submits it, and takes a completion that is due
//! at once (a device with no flash time) without a round trip through the device thread; later completions
//! still wait for their times there.
//!
//! Host code written against `CommandQueue` runs here unchanged: the futures complete through wakers, and
//! `block_on` drives one on the calling thread.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use zonelab_device::{
    BuildError, Device, DeviceBuilder, DeviceCounters, DeviceStats, HostSide, ZoneFault, SUBMISSION_QUEUE_ENTRIES,
};
use zonelab_zns::{Command, Geometry, InjectError, MediaStore, Status};

use crate::api::{CommandQueue, Output, QueuedCommand};
use crate::placement::{Placement, Wait};
use crate::timers::Timers;

/// Below this much time to go, the device thread spins instead of sleeping: a sleep overshoots by tens of
/// microseconds on a loaded Linux host, a spin by well under one.
const SPIN_BELOW_NS: u64 = 150_000;

/// A completion delivered more than this after its time counts as late.
const LATE_AFTER_NS: u64 = 15_000;

/// Until this close to a completion's time the device thread yields its core while it waits (a host thread may
/// need it), then spins.
const YIELD_ABOVE_NS: u64 = 5_000;

/// A gap this much longer than the device thread meant to wait, between two looks at its clock while it waits,
/// is time it could not run (another thread had its core): a stall. Above the spin's slack, below the 15 us after
/// which a completion counts as late.
const STALL_AFTER_NS: u64 = 10_000;

/// A park may overshoot its timeout by the kernel's timer slack (50 us for a normal thread) and a wake-up; only
/// an overshoot beyond this is a stall. The device thread wakes this early before a completion for the same
/// reason (`SPIN_BELOW_NS`).
const PARK_SLACK_NS: u64 = SPIN_BELOW_NS;

/// How long the device thread keeps looking for submissions after its last work before it parks.
const IDLE_SPIN_NS: u64 = 100_000;

/// For this long after its last work the device thread looks again without yielding its core (on a machine
/// with more than one): a host that has just taken a completion often submits again within a few microseconds,
/// and a yield costs a system call. RocksDB's readrandom through the plugin on 200,000 keys went from 0.74-0.76x
/// to 0.84-1.01x of tmpfs with it (`scripts/bench_rocksdb.sh 200000 3`, docs/rocksdb.md).
const IDLE_HOT_NS: u64 = 10_000;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a command's (or a sleep's) completion meets the future waiting for it.
#[derive(Default)]
struct Cell {
    state: Mutex<CellState>,
}

#[derive(Default)]
struct CellState {
    result: Option<Result<Output, Status>>,
    waker: Option<Waker>,
}

impl Cell {
    /// Stores the result; returns the waker to wake (the caller wakes each distinct waker once).
    fn complete(&self, result: Result<Output, Status>) -> Option<Waker> {
        let mut state = lock(&self.state);
        state.result = Some(result);
        state.waker.take()
    }
}

/// Wakes each distinct waker once: the futures of one host thread usually share its waker, and each wake of a
/// parked thread is a system call.
fn wake_each(wakers: &mut Vec<Waker>) {
    let mut woken: Vec<&Waker> = Vec::new();
    for waker in wakers.iter() {
        if !woken.iter().any(|seen| seen.will_wake(waker)) {
            waker.wake_by_ref();
            woken.push(waker);
        }
    }
    wakers.clear();
}

/// What a host thread hands the device thread.
enum Request {
    /// A command for a namespace, from a submitter (`CommandQueue::task`).
    Command(QueuedCommand, u32, u32, Arc<Cell>),
    /// Wake the cell at this model time.
    Sleep(u64, Arc<Cell>),
    /// Send the device's statistics back at once.
    Stats(std::sync::mpsc::Sender<DeviceStats>),
    /// Send how well the run has kept pace so far.
    Pacing(std::sync::mpsc::Sender<PacingSummary>),
}

/// One submission queue; the device thread drains it.
struct QueuePair {
    submissions: Mutex<VecDeque<Request>>,
    /// What a device trace names as the submitter of its commands when no host thread's task is running.
    submitter: u32,
}

impl QueuePair {
    fn new() -> QueuePair {
        QueuePair { submissions: Mutex::new(VecDeque::new()), submitter: new_submitter() }
    }
}

/// Submitters of a real-time device's commands, as its trace names them: queue pairs and host threads' tasks
/// draw from one count, so that no two share a number.
static NEXT_SUBMITTER: AtomicU32 = AtomicU32::new(0);

pub(crate) fn new_submitter() -> u32 {
    NEXT_SUBMITTER.fetch_add(1, Ordering::Relaxed)
}

thread_local! {
    /// The host thread's task being polled on this thread (`HostThread`), which submits in its own name.
    static RUNNING_TASK: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// Runs `poll` as task `task` of a host thread: the commands it submits name it in a device trace.
pub(crate) fn as_task<R>(task: u32, poll: impl FnOnce() -> R) -> R {
    let outer = RUNNING_TASK.replace(Some(task));
    let result = poll();
    RUNNING_TASK.set(outer);
    result
}

/// How far delivered completions were from their modelled times.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pacing {
    pub completions: u64,
    /// Completions whose modelled time had passed when the device thread reached them.
    pub late: u64,
    /// Delivered minus modelled completion time, in nanoseconds, per completion (for percentiles).
    pub errors_ns: Vec<u64>,
    /// Wall time the device thread could not run while a completion was due, measured from gaps in its own
    /// clock readings as it waited for it (`STALL_AFTER_NS`), and how many such gaps there were.
    pub stalled_ns: u64,
    pub stalls: u64,
    /// Wall time from the device's start to its last completion (or its stop): what the stalls are a share of,
    /// and unchanged while the device is idle, so that its figures read the same twice.
    pub wall_ns: u64,
    /// Where and how the device thread ran (`Placement`), as it says.
    pub placement: String,
}

/// A share of late completions above which a run's figures are slower than the model's: every real-time front
/// end warns past it.
pub const LATE_SHARE_WARNING: f64 = 0.01;

/// How well a real-time run kept the model's pace: what every real-time front end reports.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct PacingSummary {
    pub completions: u64,
    pub late: u64,
    /// Late completions over all completions.
    pub late_share: f64,
    /// Delivered minus modelled completion time, in nanoseconds.
    pub error_p50_ns: u64,
    pub error_p99_ns: u64,
    pub error_p999_ns: u64,
    pub error_max_ns: u64,
    /// Wall time the device thread could not run when it wanted to, and its share of the run's wall time.
    pub stalled_ns: u64,
    pub stalled_share: f64,
    pub stalls: u64,
    pub placement: String,
}

impl Pacing {
    pub fn summary(&self) -> PacingSummary {
        let mut errors = self.errors_ns.clone();
        errors.sort_unstable();
        // The nearest rank: of n sorted errors, the one at (n - 1) q.
        let at = |q: f64| errors.get(((errors.len().saturating_sub(1)) as f64 * q).round() as usize).copied();
        PacingSummary {
            completions: self.completions,
            late: self.late,
            late_share: self.late as f64 / self.completions.max(1) as f64,
            error_p50_ns: at(0.5).unwrap_or(0),
            error_p99_ns: at(0.99).unwrap_or(0),
            error_p999_ns: at(0.999).unwrap_or(0),
            error_max_ns: errors.last().copied().unwrap_or(0),
            stalled_ns: self.stalled_ns,
            stalled_share: self.stalled_ns as f64 / self.wall_ns.max(1) as f64,
            stalls: self.stalls,
            placement: self.placement.clone(),
        }
    }
}

impl PacingSummary {
    /// The figures on one line, for the front ends that print them.
    pub fn line(&self) -> String {
        format!(
            "late {:.2} % of {} completions, pacing error p50 {:.1} us, p99 {:.1} us, max {:.1} us; device thread \
             stalled {:.1} ms ({:.2} % of the run) in {} gaps; {}",
            self.late_share * 100.0,
            self.completions,
            self.error_p50_ns as f64 / 1000.0,
            self.error_p99_ns as f64 / 1000.0,
            self.error_max_ns as f64 / 1000.0,
            self.stalled_ns as f64 / 1e6,
            self.stalled_share * 100.0,
            self.stalls,
            self.placement
        )
    }

    /// A warning for interactive use when the device ran late too often for the figures to be the model's.
    pub fn warning(&self) -> Option<String> {
        (self.late_share > LATE_SHARE_WARNING).then(|| {
            format!(
                "the emulated device ran late for {:.1} % of {} completions (pacing error p99 {:.1} us, max {:.1} us; \
                 its thread could not run for {:.1} ms, {}): figures are slower than the model; give the device \
                 thread a core of its own (device-cpu=N)",
                self.late_share * 100.0,
                self.completions,
                self.error_p99_ns as f64 / 1000.0,
                self.error_max_ns as f64 / 1000.0,
                self.stalled_ns as f64 / 1e6,
                self.placement
            )
        })
    }
}

/// The device and what waits to be delivered from it, behind one lock: the device thread takes it for each
/// round of its loop, a host thread to execute a command on the spot. Lock order: the engine, then the pairs.
struct Engine {
    device: Device<Box<dyn MediaStore>>,
    host: HostSide,
    due: Timers<Due>,
    /// The commands queued for the next `process`, by tag less the first one's (`next_tag - cells.len()`).
    cells: Vec<Option<Arc<Cell>>>,
    /// The tag of the next command queued: tags stay unique, so the device can name a command it retimes later.
    next_tag: u64,
    /// Commands not delivered yet whose completions the device has moved later (a reset whose erases reads
    /// suspended, a read whose data a later read's went ahead of), by tag, with their new times.
    moved: HashMap<u64, u64>,
    pacing: Pacing,
}

impl Engine {
    /// Executes `command` submitted at `now` on the spot (nothing else may be queued); returns its result when
    /// it is due by `now`, or leaves it in `due` for the device thread and returns None.
    fn execute_now(
        &mut self,
        now: u64,
        nsid: u32,
        submitter: u32,
        command: QueuedCommand,
        cell: &Arc<Cell>,
    ) -> Option<Result<Output, Status>> {
        debug_assert_eq!(self.device.queued(), 0, "a command executes on the spot only on an idle queue");
        let arrival = self.host.arrival_ns(now);
        let tag = self.next_tag;
        self.next_tag += 1;
        let queued = self.device.enqueue_from(tag, nsid, command, Some(submitter));
        debug_assert!(queued.is_ok(), "the queue is empty");
        let mut outcome = None;
        self.device.process_queue(arrival, |_, device_ns, result| outcome = Some((device_ns, result)));
        take_moves(&mut self.device, self.host, &mut self.moved);
        let (device_ns, result) = outcome.expect("the command completed");
        let at_ns = self.host.completion_ns(arrival, device_ns);
        if at_ns <= now {
            self.pacing.completions += 1;
            self.pacing.errors_ns.push(0);
            self.pacing.wall_ns = now;
            return Some(result);
        }
        self.due.set(at_ns, Due { cell: Arc::clone(cell), result, tag: Some(tag) });
        None
    }
}

struct Shared {
    epoch: Instant,
    engine: Mutex<Engine>,
    /// When the earliest completion in the engine is due (`u64::MAX`: none), for the device thread to wait on
    /// without the engine's lock; written under it.
    next_due_ns: AtomicU64,
    /// When a host thread last executed a command itself: the device thread stays ready for the commands that
    /// still come through the queues (sleeps, a pair with earlier work) while hosts are busy, as after its own.
    last_executed_here_ns: AtomicU64,
    pairs: Mutex<Vec<Arc<QueuePair>>>,
    stop: AtomicBool,
    /// Read by every submission to ring the doorbell, so it is no lock.
    device_thread: Thread,
    geometry: Geometry,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn submissions_waiting(&self) -> bool {
        lock(&self.pairs).iter().any(|pair| !lock(&pair.submissions).is_empty())
    }

    fn ring_doorbell(&self) {
        self.device_thread.unpark();
    }
}

/// What the device thread returns when the runtime stops.
#[derive(Debug)]
pub struct Stopped {
    pub counters: DeviceCounters,
    pub pacing: Pacing,
    /// The flush at shutdown, which makes every completed write durable in an image.
    pub flushed: Result<(), Status>,
}

/// A device running in real time on a thread of its own.
pub struct RealTime {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Option<Stopped>>>,
}

/// Why a real-time device did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("the device thread could not be placed: {0}")]
    Placement(String),
}

impl RealTime {
    /// Opens the device `builder` describes, starts its clock and its device thread, placed as the environment
    /// says (`Placement::from_env`).
    pub fn start(builder: DeviceBuilder) -> Result<RealTime, StartError> {
        RealTime::start_placed(builder, Placement::from_env().map_err(StartError::Placement)?)
    }

    /// Opens the device `builder` describes and starts its device thread where `placement` says.
    pub fn start_placed(builder: DeviceBuilder, placement: Placement) -> Result<RealTime, StartError> {
        let built = builder.build()?;
        let geometry = built.device.geometry();
        let (shared_tx, shared_rx) = std::sync::mpsc::channel::<Arc<Shared>>();
        let (placed_tx, placed_rx) = std::sync::mpsc::channel::<Result<String, String>>();
        let wait = placement.wait;
        let thread = std::thread::Builder::new()
            .name("zonelab-device".into())
            .spawn(move || {
                let placed = placement.apply();
                let placed_ok = placed.is_ok();
                let _ = placed_tx.send(placed);
                if !placed_ok {
                    return None;
                }
                let shared = shared_rx.recv().ok()?;
                let _polling = (wait == Wait::Poll).then(PollingThread::count);
                Some(device_loop(&shared, wait))
            })
            .expect("spawn the device thread");
        let placed = placed_rx.recv().unwrap_or_else(|_| Err("the device thread ended before it ran".into()));
        let placed = match placed {
            Ok(said) => said,
            Err(error) => {
                let _ = thread.join();
                return Err(StartError::Placement(error));
            }
        };
        let engine = Engine {
            device: built.device,
            host: built.host,
            due: Timers::new(),
            cells: Vec::new(),
            next_tag: 0,
            moved: HashMap::new(),
            pacing: Pacing { placement: placed, ..Pacing::default() },
        };
        let shared = Arc::new(Shared {
            epoch: Instant::now(),
            engine: Mutex::new(engine),
            next_due_ns: AtomicU64::new(u64::MAX),
            last_executed_here_ns: AtomicU64::new(0),
            pairs: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            device_thread: thread.thread().clone(),
            geometry,
        });
        shared_tx.send(Arc::clone(&shared)).expect("the device thread waits for its clock");
        Ok(RealTime { shared, thread: Some(thread) })
    }

    /// A handle with a queue pair of its own: give each submitting thread one.
    pub fn host(&self) -> RealTimeHost {
        let pair = Arc::new(QueuePair::new());
        lock(&self.shared.pairs).push(Arc::clone(&pair));
        let nsid = lock(&self.shared.engine).device.attached_nsid();
        RealTimeHost { shared: Arc::clone(&self.shared), pair, nsid, geometry: self.shared.geometry }
    }

    /// Model time now, in nanoseconds since the device was opened.
    pub fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    /// Has the device keep a trace of its commands and flash operations from now on (`Device::enable_trace`),
    /// which `stop_then` can write.
    pub fn enable_trace(&self) {
        lock(&self.shared.engine).device.enable_trace();
    }

    /// Stops the device thread once the commands submitted so far have completed, flushing the device.
    pub fn stop(self) -> Stopped {
        self.stop_then(|_| ()).0
    }

    /// `stop`, then `then` with the stopped device (to write its trace).
    pub fn stop_then<R>(mut self, then: impl FnOnce(&Device<Box<dyn MediaStore>>) -> R) -> (Stopped, R) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.ring_doorbell();
        let thread = self.thread.take().expect("stopped once");
        let stopped = thread.join().ok().flatten().expect("the device thread ran to its end");
        let after = then(&lock(&self.shared.engine).device);
        (stopped, after)
    }
}

impl Drop for RealTime {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.shared.stop.store(true, Ordering::SeqCst);
            self.shared.ring_doorbell();
            let _ = thread.join();
        }
    }
}

/// A completion (or a sleep's end) the device thread holds until its time.
struct Due {
    cell: Arc<Cell>,
    result: Result<Output, Status>,
    /// The command's tag. A sleep has none: sleeps are not completions, and count for neither pacing nor
    /// lateness.
    tag: Option<u64>,
}

/// The device thread: take submissions, execute them at the instant they are seen, deliver completions at
/// their modelled times. Each round holds the engine's lock; the waits between rounds do not.
/// Busy-polling device threads of this process that are running.
static POLLING_THREADS: AtomicUsize = AtomicUsize::new(0);

/// One running busy-polling device thread, counted while it lives. More of them than the machine has cores
/// take turns on the cores, each a fraction of the time, and their devices fall far behind the model's pace:
/// the first to overcommit says so on standard error as it starts, rather than only in its pacing line.
struct PollingThread;

impl PollingThread {
    fn count() -> PollingThread {
        let running = POLLING_THREADS.fetch_add(1, Ordering::SeqCst) + 1;
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        if let Some(warning) = Self::overcommitted(running, cores) {
            eprintln!("zonelab: warning: {warning}");
        }
        PollingThread
    }

    /// The warning the thread that makes `running` pollers on `cores` cores gives: only the first one past them.
    fn overcommitted(running: usize, cores: usize) -> Option<String> {
        (running == cores + 1).then(|| {
            format!(
                "{running} busy-polling device threads (device-wait=poll) on {cores} cores: they take turns, and \
                 their devices fall behind the model's pace (device-wait=adaptive sleeps instead)"
            )
        })
    }
}

impl Drop for PollingThread {
    fn drop(&mut self) {
        POLLING_THREADS.fetch_sub(1, Ordering::SeqCst);
    }
}

fn device_loop(shared: &Shared, wait: Wait) -> Stopped {
    let mut batch = Vec::new();
    let mut stalled = Stalls::default();
    let mut to_wake = Vec::new();
    let mut last_busy_ns = 0;
    // Looking again without yielding is only for a machine where the host has a core of its own meanwhile.
    let hot_idle_ns = if std::thread::available_parallelism().map_or(1, usize::from) > 1 { IDLE_HOT_NS } else { 0 };
    loop {
        let mut engine = lock(&shared.engine);
        let Engine { device, host, due, cells, next_tag, moved, pacing } = &mut *engine;
        let host = *host;
        pacing.stalled_ns += std::mem::take(&mut stalled.ns);
        pacing.stalls += std::mem::take(&mut stalled.count);
        // Take what every queue pair holds; each pair's lock is held only to drain its queue.
        for pair in lock(&shared.pairs).iter() {
            batch.extend(lock(&pair.submissions).drain(..));
        }
        let now = shared.now_ns();
        for request in batch.drain(..) {
            match request {
                Request::Command(command, nsid, submitter, cell) => {
                    if !host.carries(&command) {
                        let arrival = host.arrival_ns(now);
                        let result = Err(Status::InvalidOpcode);
                        let tag = Some(*next_tag);
                        *next_tag += 1;
                        due.set(host.completion_ns(arrival, arrival), Due { cell, result, tag });
                        continue;
                    }
                    if device.queued() == SUBMISSION_QUEUE_ENTRIES {
                        process(device, host, now, cells, *next_tag, moved, due);
                    }
                    cells.push(Some(cell));
                    let queued = device.enqueue_from(*next_tag, nsid, command, Some(submitter));
                    *next_tag += 1;
                    debug_assert!(queued.is_ok(), "the submission queue was just emptied");
                }
                Request::Stats(reply) => {
                    let _ = reply.send(device.stats());
                }
                Request::Pacing(reply) => {
                    let _ = reply.send(pacing.summary());
                }
                Request::Sleep(until_ns, cell) => {
                    due.set(until_ns, Due { cell, result: Ok(Output::Done), tag: None });
                }
            }
        }
        if !cells.is_empty() || due.next_ns().is_some() {
            last_busy_ns = now;
        }
        process(device, host, now, cells, *next_tag, moved, due);
        // Deliver what is due.
        let now = shared.now_ns();
        while let Some((at_ns, next)) = due.pop_due(now) {
            if let Some(tag) = next.tag {
                // Most completions were never moved: the map is usually empty, and then not hashed.
                let moved_to = if moved.is_empty() { None } else { moved.remove(&tag) };
                if let Some(later) = moved_to {
                    if later > at_ns {
                        due.set(later, next);
                        continue;
                    }
                }
                let delivered = shared.now_ns();
                pacing.completions += 1;
                pacing.errors_ns.push(delivered.saturating_sub(at_ns));
                pacing.wall_ns = delivered;
                // Late: the device thread reached it only after its time had passed by more than a spin's slack.
                if delivered > at_ns + LATE_AFTER_NS {
                    pacing.late += 1;
                }
            }
            to_wake.extend(next.cell.complete(next.result));
        }
        let next_due_ns = due.next_ns();
        if next_due_ns.is_none() && shared.stop.load(Ordering::SeqCst) && !shared.submissions_waiting() {
            let flushed = device.submit(shared.now_ns(), Command::Flush).result.map(|_| ());
            pacing.wall_ns = shared.now_ns();
            let pacing = std::mem::take(pacing);
            let counters = device.counters().clone();
            drop(engine);
            wake_each(&mut to_wake);
            return Stopped { counters, pacing, flushed };
        }
        shared.next_due_ns.store(next_due_ns.unwrap_or(u64::MAX), Ordering::SeqCst);
        drop(engine);
        wake_each(&mut to_wake);
        wait_for_work(shared, last_busy_ns, hot_idle_ns, wait, &mut stalled);
    }
}

/// Time the device thread could not run while it waited, not yet added to its pacing.
#[derive(Default)]
struct Stalls {
    ns: u64,
    count: u64,
}

impl Stalls {
    /// Notes a look at the clock at `now` after one meant to wait `meant_ns` (up to `slack_ns` more is normal)
    /// from the look at `before`.
    fn note(&mut self, before: u64, now: u64, meant_ns: u64, slack_ns: u64) {
        let over = now.saturating_sub(before).saturating_sub(meant_ns);
        if over > slack_ns + STALL_AFTER_NS {
            self.ns += over;
            self.count += 1;
        }
    }
}

/// Waits, without the engine's lock, until a submission comes, a completion is due or the runtime stops. A
/// submission, and a completion set earlier than the one waited for, ring the doorbell: a park after an unpark
/// returns at once.
///
/// While a completion is due, each look at the clock is checked against the last (`Stalls`): a thread that
/// spins or yields looks again within microseconds unless it lost its core. An idle thread's waits delay
/// nothing, and are not counted.
fn wait_for_work(shared: &Shared, last_busy_ns: u64, hot_idle_ns: u64, wait: Wait, stalled: &mut Stalls) {
    // The last look at the clock, how long the wait after it was meant to take, and the slack it may overrun.
    let mut last: Option<(u64, u64, u64)> = None;
    // Whether the thread last looked while nothing was due: a completion a host then set (executing a command
    // itself) is due from its own time, and a thread that runs only after that has lost the time between.
    let mut looked_idle = false;
    loop {
        if shared.submissions_waiting() {
            return;
        }
        let now = shared.now_ns();
        if let Some((before, meant_ns, slack_ns)) = last.take() {
            stalled.note(before, now, meant_ns, slack_ns);
        }
        // Commands hosts execute themselves keep it looking as its own work does: the next may come through a
        // queue (a sleep, a pair with earlier work), and waking a parked device thread costs tens of us.
        let last_host_ns = last_busy_ns.max(shared.last_executed_here_ns.load(Ordering::Relaxed));
        match shared.next_due_ns.load(Ordering::SeqCst) {
            u64::MAX if shared.stop.load(Ordering::SeqCst) => return,
            at_ns if at_ns <= now => {
                if looked_idle {
                    stalled.note(at_ns, now, 0, PARK_SLACK_NS);
                }
                return;
            }
            at_ns if wait == Wait::Poll => {
                looked_idle = at_ns == u64::MAX;
                if !looked_idle {
                    last = Some((now, 0, 0));
                }
                std::hint::spin_loop();
            }
            // A host that just had a completion often submits its next command within microseconds: looking
            // again for a while costs less than the wake-up of a parked thread on an idle core.
            // Yielding, not spinning, so that a host thread that needs this core (to take the completion and
            // submit again) gets it.
            u64::MAX if now.saturating_sub(last_host_ns) < hot_idle_ns => {
                looked_idle = true;
                std::hint::spin_loop();
            }
            u64::MAX if now.saturating_sub(last_host_ns) < IDLE_SPIN_NS => {
                looked_idle = true;
                std::thread::yield_now();
            }
            u64::MAX => {
                looked_idle = true;
                std::thread::park_timeout(Duration::from_millis(10));
            }
            // A completion is due: time the thread cannot run now makes it late, so it counts.
            at_ns => {
                let wait = at_ns - now;
                looked_idle = false;
                last = Some((now, 0, 0));
                if wait > SPIN_BELOW_NS {
                    last = Some((now, wait - SPIN_BELOW_NS, PARK_SLACK_NS));
                    std::thread::park_timeout(Duration::from_nanos(wait - SPIN_BELOW_NS));
                } else if wait > YIELD_ABOVE_NS {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

/// Executes the commands queued at `now`, which reach the device after the host path's submission cost; their
/// completions, with the path's completion cost, wait in `due` for their times.
/// A reset whose erases these commands suspended is moved later (`take_moves`).
fn process(
    device: &mut Device<Box<dyn MediaStore>>,
    host: HostSide,
    now: u64,
    cells: &mut Vec<Option<Arc<Cell>>>,
    next_tag: u64,
    moved: &mut HashMap<u64, u64>,
    due: &mut Timers<Due>,
) {
    let arrival = host.arrival_ns(now);
    let first_tag = next_tag - cells.len() as u64;
    device.process_queue(arrival, |tag, device_ns, result| {
        let cell = cells[(tag - first_tag) as usize].take().expect("each tag completes once");
        due.set(host.completion_ns(arrival, device_ns), Due { cell, result, tag: Some(tag) });
    });
    cells.clear();
    take_moves(device, host, moved);
}

/// Notes the completions the device has moved later since it was last asked, by tag: when a command's first
/// time comes, the device thread holds it until the latest of them.
fn take_moves(device: &mut Device<Box<dyn MediaStore>>, host: HostSide, moved: &mut HashMap<u64, u64>) {
    device.moved_completions(|tag, device_ns| {
        let at_ns = host.completion_ns(device_ns, device_ns);
        let later = moved.entry(tag).or_insert(at_ns);
        *later = (*later).max(at_ns);
    });
}

/// A `CommandQueue` on a real-time device, with its own queue pair.
#[derive(Clone)]
pub struct RealTimeHost {
    shared: Arc<Shared>,
    pair: Arc<QueuePair>,
    /// The namespace its commands go to, and its geometry.
    nsid: u32,
    geometry: Geometry,
}

impl RealTimeHost {
    /// Queues `command`, as `CommandQueue::submit` does, with a future that is `Send`. When the device is free
    /// and nothing this pair submitted before is still queued, the command executes here and now instead, and a
    /// completion due at once is in the future when it returns: the hand-off to the device thread and back
    /// costs more than such a command (RocksDB's reads through the plugin on the instant preset).
    pub fn submit_pending(&self, command: QueuedCommand) -> Pending {
        let cell = Arc::new(Cell::default());
        if let Err(command) = self.execute_here(command, &cell) {
            self.request(Request::Command(command, self.nsid, self.submitter(), Arc::clone(&cell)));
        }
        Pending { cell }
    }

    /// Executes `command` on this thread if the device thread is not in a round and this pair has nothing
    /// queued (which keeps its commands in order); gives it back otherwise.
    fn execute_here(&self, command: QueuedCommand, cell: &Arc<Cell>) -> Result<(), QueuedCommand> {
        let Ok(mut engine) = self.shared.engine.try_lock() else {
            return Err(command);
        };
        if !lock(&self.pair.submissions).is_empty() || !engine.host.carries(&command) || engine.device.queued() != 0 {
            return Err(command);
        }
        let now = self.shared.now_ns();
        self.shared.last_executed_here_ns.store(now, Ordering::Relaxed);
        match engine.execute_now(now, self.nsid, self.submitter(), command, cell) {
            Some(result) => {
                let waker = cell.complete(result);
                debug_assert!(waker.is_none(), "nobody waits on a cell before its command is submitted");
            }
            None => {
                // Due later: the device thread delivers it, and may have to wake earlier than it planned.
                let at_ns = engine.due.next_ns().unwrap_or(u64::MAX);
                if at_ns < self.shared.next_due_ns.load(Ordering::SeqCst) {
                    self.shared.next_due_ns.store(at_ns, Ordering::SeqCst);
                    self.shared.ring_doorbell();
                }
            }
        }
        Ok(())
    }

    /// The submitter of a command submitted now: the host thread's task running here, else this queue pair.
    fn submitter(&self) -> u32 {
        RUNNING_TASK.get().unwrap_or(self.pair.submitter)
    }

    /// The device's statistics now (commands, flash operations and energy, wear), from the device thread.
    pub fn stats(&self) -> Option<DeviceStats> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.request(Request::Stats(reply));
        answer.recv().ok()
    }

    /// The namespace IDs the device has, lowest first (`Device::namespace_ids`).
    pub fn namespace_ids(&self) -> Vec<u32> {
        lock(&self.shared.engine).device.namespace_ids()
    }

    /// A handle with a queue pair of its own on namespace `nsid` of the same device; None if it has none.
    pub fn on_namespace(&self, nsid: u32) -> Option<RealTimeHost> {
        let geometry = lock(&self.shared.engine).device.geometry_of(nsid)?;
        let pair = Arc::new(QueuePair::new());
        lock(&self.shared.pairs).push(Arc::clone(&pair));
        Some(RealTimeHost { shared: Arc::clone(&self.shared), pair, nsid, geometry })
    }

    /// Injects `fault` into zone `zone` of the device's zoned namespace while it runs (a mount's control
    /// channel: a zone that turns read-only or offline, or an I/O error, under a live host).
    pub fn inject(&self, zone: u32, fault: ZoneFault) -> Result<(), InjectError> {
        lock(&self.shared.engine).device.inject_fault(zone, fault)
    }

    /// How well the run has kept the model's pace so far, from the device thread.
    pub fn pacing(&self) -> Option<PacingSummary> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.request(Request::Pacing(reply));
        answer.recv().ok()
    }

    fn request(&self, request: Request) {
        lock(&self.pair.submissions).push_back(request);
        self.shared.ring_doorbell();
    }
}

/// The future of a command or sleep handed to the device thread; it may move between threads, so a C caller
/// can keep it until it polls for completions.
pub struct Pending {
    cell: Arc<Cell>,
}

impl Pending {
    /// The result if the command has completed, without registering a waker (a poll that does not wait must
    /// not take the wake-up of whoever does).
    pub fn try_take(&self) -> Option<Result<Output, Status>> {
        lock(&self.cell.state).result.take()
    }
}

impl Future for Pending {
    type Output = Result<Output, Status>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = lock(&self.cell.state);
        match state.result.take() {
            Some(result) => Poll::Ready(result),
            None => {
                state.waker = Some(context.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl CommandQueue for RealTimeHost {
    fn submit(&self, command: QueuedCommand) -> impl Future<Output = Result<Output, Status>> {
        self.submit_pending(command)
    }

    fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn task(&self) -> Option<u32> {
        Some(self.submitter())
    }

    fn sleep(&self, duration_ns: u64) -> impl Future<Output = ()> {
        let cell = Arc::new(Cell::default());
        self.request(Request::Sleep(self.shared.now_ns() + duration_ns, Arc::clone(&cell)));
        let waiting = Pending { cell };
        async move {
            let _ = waiting.await;
        }
    }
}

/// Wakes the thread that blocks on a future.
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread, and so in every thread it starts from then on, and
/// gives the set for one thread to take them with `sigwait`: how a real-time front end (the mount, the ublk
/// server) stops cleanly, its devices removed and its device flushed, whichever thread the signal reaches.
pub fn block_termination_signals() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is valid storage; sigemptyset/sigaddset initialise it, and pthread_sigmask
    // only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Runs `future` to completion on the calling thread, parking it while nothing is ready.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod pacing_tests {
    use super::*;

    #[test]
    fn more_polling_device_threads_than_cores_are_warned_of_once() {
        assert_eq!(PollingThread::overcommitted(2, 2), None);
        let warning = PollingThread::overcommitted(3, 2).expect("the third poller on two cores warns");
        assert!(warning.starts_with("3 busy-polling device threads (device-wait=poll) on 2 cores"), "{warning}");
        assert_eq!(PollingThread::overcommitted(16, 2), None, "once, not for each one after");
        let before = POLLING_THREADS.load(Ordering::SeqCst);
        let polling = PollingThread::count();
        assert_eq!(POLLING_THREADS.load(Ordering::SeqCst), before + 1);
        drop(polling);
        assert_eq!(POLLING_THREADS.load(Ordering::SeqCst), before);
    }

    #[test]
    fn the_summary_gives_the_late_share_and_the_error_percentiles_and_warns_past_the_bound() {
        let pacing =
            Pacing { completions: 100, late: 5, errors_ns: (0..100).map(|i| i * 1000).collect(), ..Pacing::default() };
        let summary = pacing.summary();
        assert_eq!((summary.late_share, summary.error_p50_ns, summary.error_max_ns), (0.05, 50_000, 99_000));
        assert_eq!((summary.error_p99_ns, summary.error_p999_ns), (98_000, 99_000), "the errors at ranks 98 and 99");
        let warning = summary.warning().expect("5 % late is past the bound");
        assert!(warning.contains("5.0 % of 100 completions"), "{warning}");
        let on_time = Pacing { completions: 1000, late: 1, errors_ns: vec![100; 1000], ..Pacing::default() }.summary();
        assert_eq!(on_time.warning(), None, "0.1 % late is within the bound");
        assert_eq!(Pacing::default().summary().late_share, 0.0, "no completions, nothing late");
    }
}
