//! A job's thread: what the host path costs it per command, and fio's submit-and-reap loop on its core.

use super::*;

/// What the host path costs a job per command, in nanoseconds: CPU time on the job's core, and the wait for the
/// kblockd worker when Linux defers a command's dispatch to it.
#[derive(Clone, Copy, Debug)]
pub(super) struct JobHostCost {
    pub(super) submit_ns: u64,
    pub(super) complete_ns: u64,
    /// The kblockd worker's wait for reads and for writes on the kernel path (0: dispatched by the submitting
    /// call). fio submits one iocb per `io_submit` (its default `iodepth_batch_submit=1`), and Linux's aio plugs
    /// only calls of more than two (`AIO_PLUG_THRESHOLD`, see `Submission`), and psync's direct reads do not
    /// plug: a scheduler defers them, none issues them directly. A block device's writes hold a plug
    /// (`blkdev_write_iter`) that psync's sleep until completion flushes, which defers them under any scheduler.
    pub(super) read_dispatch_ns: u64,
    pub(super) write_dispatch_ns: u64,
}

impl JobHostCost {
    /// What `job`'s I/O engine costs per command, with the device's scheduler's own work (mq-deadline's, and
    /// ZINC's, which is built on it) on the paths through the block layer.
    pub(super) fn of(job: &JobOptions, costs: &HostCosts, scheduler: SchedulerKind) -> JobHostCost {
        let path = HostSide::new(job.ioengine.host_path(), costs);
        let block_layer = path.path.through_block_layer();
        let elevator = block_layer && matches!(scheduler, SchedulerKind::MqDeadline | SchedulerKind::Zinc(_));
        let plugged_writes = job.ioengine == IoEngine::Psync;
        // io_uring's path latency comes from measurements through the block layer (the grid's rows 18 and 28),
        // which hold whatever its dispatch cost there: only the kernel path of psync and libaio adds the wait.
        let kernel = path.path == HostPath::Kernel;
        let wait = |deferred: bool| if kernel && deferred { micros_to_ns(costs.kblockd_dispatch_us) } else { 0 };
        let (submit_ns, complete_ns) = path.cpu_ns(costs);
        JobHostCost {
            submit_ns: submit_ns + if elevator { micros_to_ns(costs.mq_deadline_us) } else { 0 },
            complete_ns,
            read_dispatch_ns: wait(elevator),
            write_dispatch_ns: wait(elevator || plugged_writes),
        }
    }

    /// The kblockd worker's wait for a command going `direction`.
    pub(super) fn dispatch_ns(&self, direction: Direction) -> u64 {
        if direction == Direction::Write {
            self.write_dispatch_ns
        } else {
            self.read_dispatch_ns
        }
    }
}

/// fio's loop of submissions and reaps on an asynchronous job's one thread (`do_io` in backend.c), with its
/// batches (`iodepth_batch_submit`, `iodepth_batch_complete_min` and `_max`, `iodepth_low`). The thread queues
/// I/Os and submits them in one call once it has `submit` of them or nothing else to do; with its queue full it
/// waits until `complete_min` commands (or all it has out, if fewer) have completed, reaps up to `complete_max`
/// of those at once, and goes on reaping until no more than `low` are out before it queues again. With fio's
/// defaults (1, 1, 1 and `iodepth`) it reaps one completion when its queue is full and submits one I/O in its
/// place, so completions that arrive together wait their turn in the completion queue, in `clat`, and every I/O
/// is in flight from its preparation to its reap. The job's workers stand for fio's I/O units; these counts say
/// what its thread is doing.
pub(super) struct FioLoop {
    pub(super) submit: u32,
    pub(super) complete_min: u32,
    pub(super) complete_max: u32,
    pub(super) low: u32,
    /// Reaped workers that wait for the queue to drain to `low` before they queue again.
    pub(super) held: Vec<Rc<Reaped>>,
    /// Workers on the job's thread: started or reaped and not yet queued, nor waiting (for a zone, for their
    /// rate) or done. When none is, the thread submits what it has queued and waits for completions.
    pub(super) runnable: u32,
    /// Workers queued for the next submission, and the call they wait for.
    pub(super) queued: u32,
    pub(super) next_submission: Rc<SubmissionCall>,
    /// Commands submitted and not yet reaped; of them, the completed ones, oldest first, each with what its reap
    /// will say.
    pub(super) outstanding: u32,
    pub(super) completed: VecDeque<Rc<Reaped>>,
}

/// A completed command's reap, as fio's thread does it: when the reap ends, and whether the worker must then
/// wait for the queue to drain to its low-water mark before it queues again. `changed` wakes that worker
/// alone: woken together, a deep queue's workers would all look at every step of the thread, a cost that grows
/// with the square of the depth.
#[derive(Default)]
pub(super) struct Reaped {
    pub(super) at: Cell<Option<u64>>,
    pub(super) held: Cell<bool>,
    pub(super) changed: Notify,
}

/// The submission call the workers queued for it wait for: its times once the thread makes it.
#[derive(Default)]
pub(super) struct SubmissionCall {
    pub(super) made: Cell<Option<Submission>>,
    pub(super) changed: Notify,
}

/// One submission call: when its CPU work ended (fio's issue time of each of its I/Os), and whether Linux
/// plugged it. `io_submit` plugs a call that carries more than two iocbs (fs/aio.c, `AIO_PLUG_THRESHOLD`), as
/// io_uring does a submission of more than two SQEs, and the plug's flush at the end of the call dispatches the
/// requests from the submitting thread, under a scheduler too: no kblockd worker.
#[derive(Clone, Copy, Debug)]
pub(super) struct Submission {
    pub(super) issued_ns: u64,
    pub(super) plugged: bool,
}

impl FioLoop {
    /// An asynchronous job's loop; none for psync, which submits one I/O a call and reaps it in the same call.
    /// A `complete_max` below `complete_min` (fio's default is 0) becomes `complete_min`, as fio's
    /// `fixup_options` (init.c) makes it.
    pub(super) fn of(job: &JobOptions) -> Option<FioLoop> {
        let depth = job.iodepth;
        let submit = if job.iodepth_batch_submit == 0 { depth } else { job.iodepth_batch_submit.min(depth) };
        let complete_min = job.iodepth_batch_complete_min.clamp(1, depth);
        let complete_max = job.iodepth_batch_complete_max.clamp(complete_min, depth);
        let low = if job.iodepth_low == 0 { depth } else { job.iodepth_low.min(depth) };
        (job.ioengine != IoEngine::Psync).then(|| FioLoop {
            submit,
            complete_min,
            complete_max,
            low,
            held: Vec::new(),
            runnable: depth,
            queued: 0,
            next_submission: Rc::default(),
            outstanding: 0,
            completed: VecDeque::new(),
        })
    }
}

impl JobState {
    /// What an asynchronous job's thread does next, at `now`: submits what it queued once the batch is full or
    /// nothing else runs, then, with nothing running, reaps the completed commands if enough have completed. A
    /// round is reaped at once, as one `io_getevents` returns it: the core does the completion work of all its
    /// commands, and fio stamps them all with the time the call returned.
    pub(super) fn settle_batches(&mut self, now: u64) {
        let issued_ns = self.core_busy_until_ns;
        let (complete_ns, measured) = (self.cost.complete_ns, now >= self.ramp_end_ns);
        let Some(fio_loop) = self.fio_loop.as_mut() else { return };
        if fio_loop.queued > 0 && (fio_loop.queued >= fio_loop.submit || fio_loop.runnable == 0) {
            let call = std::mem::take(&mut fio_loop.next_submission);
            call.made.set(Some(Submission { issued_ns, plugged: fio_loop.queued > 2 }));
            call.changed.notify_waiters();
            fio_loop.outstanding += fio_loop.queued;
            fio_loop.queued = 0;
        }
        // Rounds follow each other while the thread has nothing else to do (it drains towards `low`).
        while fio_loop.runnable == 0
            && fio_loop.completed.len() >= fio_loop.complete_min.min(fio_loop.outstanding).max(1) as usize
        {
            let reaped = fio_loop.completed.len().min(fio_loop.complete_max as usize);
            let reaped_ns = self.thread.reap(now, self.core_busy_until_ns, reaped as u64 * complete_ns, measured);
            fio_loop.outstanding -= reaped as u32;
            // Above the low-water mark the thread goes on reaping; the reaped wait to queue again.
            let drained = fio_loop.outstanding <= fio_loop.low;
            for admitted in fio_loop.completed.drain(..reaped) {
                admitted.at.set(Some(reaped_ns));
                admitted.changed.notify_waiters();
                if !drained {
                    admitted.held.set(true);
                    fio_loop.held.push(admitted);
                }
            }
            self.core_busy_until_ns = reaped_ns;
            if drained {
                fio_loop.runnable += (reaped + fio_loop.held.len()) as u32;
                for released in fio_loop.held.drain(..) {
                    released.held.set(false);
                    released.changed.notify_waiters();
                }
            }
        }
    }

    /// Starts preparing an I/O on the job's core at `now` or once the core is free, and spends its submission's
    /// CPU there; returns when the preparation began (fio's `start_time`).
    pub(super) fn prepare_on_core(&mut self, now: u64) -> u64 {
        let prepared_ns = self.thread.work(self.core_busy_until_ns.max(now), 0, false);
        self.core_busy_until_ns = self.work_on_core(prepared_ns, self.cost.submit_ns);
        prepared_ns
    }

    /// Spends `work` nanoseconds of CPU on the job's thread from `start` on; returns when it ends.
    pub(super) fn work_on_core(&mut self, start: u64, work: u64) -> u64 {
        self.thread.work(start, work, start >= self.ramp_end_ns)
    }

    /// The thread's CPU time in the measured window and its context switches there: a polling thread is busy
    /// whenever it is on its core (in user space, spinning on its queue, for SPDK and `sqthread_poll`; in the
    /// kernel for `hipri`, which polls inside `io_uring_enter`) and is switched out only to let another take
    /// its turn; a thread that sleeps works only for its commands (in the kernel, on the kernel's paths) and is
    /// switched out each time it waits. Returns (user, system, context switches).
    pub(super) fn cpu(&self, window: (u64, u64)) -> (u64, u64, u64) {
        if !self.options.polls() {
            return (0, self.thread.cpu_ns, self.thread.wakeups);
        }
        let (on_ns, preempted) = match self.thread.turns {
            Some((share, thread)) => share.on_core_ns(thread, window.0, window.1),
            None => (window.1 - window.0, 0),
        };
        if self.options.ioengine.host_path().polls() || self.options.sqthread_poll {
            (on_ns, 0, preempted)
        } else {
            (0, on_ns, preempted)
        }
    }

    /// Submits a synchronous job's one I/O on its thread at `now`: the command reaches the scheduler when its
    /// submission's CPU work ends, after what the job's core is busy with, or when Linux defers its dispatch, when
    /// the kblockd worker runs next. Returns its arrival, and fio's two timestamps for it: when the core began its
    /// submission and when that CPU work ended.
    pub(super) fn submit_on_core(&mut self, now: u64, direction: Direction) -> (u64, SubmitTimes) {
        let dispatch_ns = self.cost.dispatch_ns(direction);
        let prepared_ns = self.prepare_on_core(now);
        let issued_ns = self.core_busy_until_ns;
        (self.dispatched_at(issued_ns, dispatch_ns), SubmitTimes { prepared_ns, issued_ns })
    }

    /// Reaps a synchronous job's completed command on its thread at `now`: its CPU work runs after what the core
    /// is busy with. Returns when the reap ends.
    pub(super) fn reap_on_core(&mut self, now: u64) -> u64 {
        let measured = now >= self.ramp_end_ns;
        self.core_busy_until_ns = self.thread.reap(now, self.core_busy_until_ns, self.cost.complete_ns, measured);
        self.core_busy_until_ns
    }

    /// When a command issued at `issued_ns` reaches the device: then, or, when Linux defers its dispatch
    /// (`dispatch_ns` > 0), when the kblockd worker runs next; a command that finds a run already due leaves
    /// with it.
    pub(super) fn dispatched_at(&mut self, issued_ns: u64, dispatch_ns: u64) -> u64 {
        if dispatch_ns == 0 {
            return issued_ns;
        }
        if self.dispatch_run_ns <= issued_ns {
            self.dispatch_run_ns = issued_ns + dispatch_ns;
        }
        self.dispatch_run_ns
    }

    /// A worker leaves the job's thread at `now` to wait (for a zone, for its rate) or ends (`true`), or is
    /// back (`false`).
    pub(super) fn set_waiting(&mut self, now: u64, waiting: bool) {
        if let Some(fio_loop) = self.fio_loop.as_mut() {
            if waiting {
                fio_loop.runnable -= 1;
            } else {
                fio_loop.runnable += 1;
            }
        }
        if waiting {
            self.settle_batches(now);
        }
    }
}

/// A job's thread on the host's cores: how it takes turns when the group's polling threads outnumber the cores
/// (the share and its place in it), and, for fio's CPU figures, the CPU time of the work it began in the measured
/// window and how many times a completion woke it there (a thread that sleeps while it waits).
#[derive(Default)]
pub(super) struct JobThread {
    pub(super) turns: Option<(CoreShare, u32)>,
    pub(super) cpu_ns: u64,
    pub(super) wakeups: u64,
}

impl JobThread {
    /// When `work` nanoseconds of CPU begun at `start` end: at once on a core of its own, after the turns it is
    /// off its core when it takes turns. With no work, when it can begin. `measured` counts the work.
    pub(super) fn work(&mut self, start: u64, work: u64, measured: bool) -> u64 {
        if measured {
            self.cpu_ns += work;
        }
        match self.turns {
            Some((share, thread)) => share.run_ns(thread, start, work),
            None => start + work,
        }
    }

    /// Reaps at `now` with `work` of CPU after what keeps the core busy until `busy_until`; a thread idle before
    /// `now` was asleep and the completion woke it. Returns when the reap ends.
    pub(super) fn reap(&mut self, now: u64, busy_until: u64, work: u64, measured: bool) -> u64 {
        if measured {
            self.wakeups += u64::from(now > busy_until);
        }
        self.work(busy_until.max(now), work, measured)
    }
}
