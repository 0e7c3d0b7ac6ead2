//! The workers of a job instance: each keeps one I/O in flight through the job's queue (the scheduler, or a host
//! FTL over it), submitting and reaping on the job's thread, and records what completed.

use super::*;

/// Queues a command for the job's next submission call (an asynchronous job) and waits for the call: the command
/// reaches the scheduler when the call's CPU work ends, or, in a call Linux does not plug, when the kblockd
/// worker runs next where Linux defers the dispatch. Returns fio's two timestamps, as `JobState::submit_on_core`.
pub(super) async fn submit_in_batch<Q: CommandQueue>(
    queue: &Q,
    state: &Rc<RefCell<JobState>>,
    direction: Direction,
) -> SubmitTimes {
    let now = queue.now_ns();
    let (prepared_ns, call) = {
        let mut job = state.borrow_mut();
        let prepared_ns = job.prepare_on_core(now);
        let fio_loop = job.fio_loop.as_mut().expect("only an asynchronous job submits in batches");
        fio_loop.runnable -= 1;
        fio_loop.queued += 1;
        let call = Rc::clone(&fio_loop.next_submission);
        job.settle_batches(now);
        (prepared_ns, call)
    };
    let submission = wait_for(&call.changed, || call.made.get()).await;
    let arrival = {
        let mut job = state.borrow_mut();
        let dispatch_ns = if submission.plugged { 0 } else { job.cost.dispatch_ns(direction) };
        job.dispatched_at(submission.issued_ns, dispatch_ns)
    };
    if let Some(sleep) = sleep_until(queue, arrival) {
        sleep.await;
    }
    SubmitTimes { prepared_ns, issued_ns: submission.issued_ns }
}

/// Reaps an asynchronous job's completed command in the round fio's thread reaps it in (see `FioLoop`). Resolves
/// when the reap ends, with the reap, as the worker may have to wait before it queues again (`wait_to_queue`).
pub(super) async fn reap_in_batch<Q: CommandQueue>(queue: &Q, state: &Rc<RefCell<JobState>>) -> Rc<Reaped> {
    let reaped = {
        let mut job = state.borrow_mut();
        let reaped = Rc::new(Reaped::default());
        job.fio_loop
            .as_mut()
            .expect("only an asynchronous job reaps in batches")
            .completed
            .push_back(Rc::clone(&reaped));
        job.settle_batches(queue.now_ns());
        reaped
    };
    let reaped_ns = wait_for(&reaped.changed, || reaped.at.get()).await;
    if let Some(sleep) = sleep_until(queue, reaped_ns) {
        sleep.await;
    }
    reaped
}

/// Waits until fio's thread has drained its queue to the low-water mark, if `reaped` is held for it.
pub(super) async fn wait_to_queue(reaped: Rc<Reaped>) {
    wait_for(&reaped.changed, || (!reaped.held.get()).then_some(())).await;
}

/// Waits until `ready` has a value, looking again each time fio's thread notifies `changed`.
pub(super) async fn wait_for<T>(changed: &Notify, ready: impl Fn() -> Option<T>) -> T {
    loop {
        if let Some(value) = ready() {
            return value;
        }
        changed.notified().await;
    }
}

/// The sleep until device time `at`; None if there is none to wait (`at` has passed, or the clock may simply move
/// there), so that the common case polls no future.
pub(super) fn sleep_until<Q: CommandQueue>(queue: &Q, at: u64) -> Option<impl Future<Output = ()> + '_> {
    let now = queue.now_ns();
    (at > now && !queue.pass_alone(at)).then(|| queue.sleep(at - now))
}

/// Runs `wait` with the worker off fio's thread (waiting for a zone, for written blocks to verify, for its
/// rate), so that an asynchronous job's thread may submit and reap meanwhile.
pub(super) async fn off_the_thread<Q: CommandQueue>(
    queue: &Q,
    state: &Rc<RefCell<JobState>>,
    wait: impl Future<Output = ()>,
) {
    state.borrow_mut().set_waiting(queue.now_ns(), true);
    wait.await;
    state.borrow_mut().set_waiting(queue.now_ns(), false);
}

/// fio's timestamps of one I/O before the device: `start_time` (prepared) and `issue_time` (issued).
#[derive(Clone, Copy, Debug)]
pub(super) struct SubmitTimes {
    pub(super) prepared_ns: u64,
    pub(super) issued_ns: u64,
}

/// What a job submits to: the device's scheduler, or a host FTL over it (`hostftl`).
pub(super) enum JobQueue<S> {
    Direct(Scheduled<Host<S>>),
    HostFtl(HostFtl<Scheduled<Host<S>>>),
}

impl<S: MediaStore + 'static> JobQueue<S> {
    /// The host FTL's counters, when the jobs run on one.
    pub(super) fn host_ftl_counters(&self) -> Option<HostFtlCounters> {
        match self {
            JobQueue::Direct(_) => None,
            JobQueue::HostFtl(ftl) => Some(ftl.counters()),
        }
    }
}

impl<S> Clone for JobQueue<S> {
    fn clone(&self) -> Self {
        match self {
            JobQueue::Direct(queue) => JobQueue::Direct(queue.clone()),
            JobQueue::HostFtl(ftl) => JobQueue::HostFtl(ftl.clone()),
        }
    }
}

/// One worker: issue, wait, record, until the job is done.
pub(super) async fn worker<Q: CommandQueue>(
    queue: Q,
    state: Rc<RefCell<JobState>>,
    zones: Rc<RefCell<ZoneCache>>,
    zone_released: Rc<Notify>,
) {
    let geometry = queue.geometry();
    let lba_shift = geometry.lba_shift;
    let (zoned, started) = {
        let job = state.borrow();
        (job.options.zonemode_zbd, job.started_ns)
    };
    if let Some(sleep) = sleep_until(&queue, started) {
        sleep.await;
    }
    let mut last_reap = None;
    loop {
        // (Only an asynchronous job's reaps can hold it: a synchronous one polls no waiting future here.)
        if let Some(reaped) = last_reap.take() {
            wait_to_queue(reaped).await;
        }
        let now = queue.now_ns();
        let next = state.borrow_mut().next_io(now, &mut zones.borrow_mut());
        let io = match next {
            Next::Issue(io) => io,
            Next::WaitForZone => {
                off_the_thread(&queue, &state, zone_released.notified()).await;
                continue;
            }
            Next::WaitForWrites(drained) => {
                off_the_thread(&queue, &state, drained.notified()).await;
                continue;
            }
            Next::Done => {
                state.borrow_mut().set_waiting(queue.now_ns(), true);
                return;
            }
        };
        let wait = {
            let mut job = state.borrow_mut();
            let mut wait = job.not_before_ns.saturating_sub(now);
            if let Some(interval) = 1_000_000_000u64.checked_div(job.options.rate_iops) {
                let slot = job.next_issue_ns.max(now);
                job.next_issue_ns = slot + interval;
                wait = wait.max(slot - now);
            }
            wait
        };
        if wait > 0 {
            off_the_thread(&queue, &state, queue.sleep(wait)).await;
        }
        let (issued, command) = state.borrow_mut().issue(io, lba_shift, queue.now_ns());
        let direction = issued.direction;
        let asynchronous = state.borrow().fio_loop.is_some();
        let times = if asynchronous {
            submit_in_batch(&queue, &state, direction).await
        } else {
            let (arrival, times) = state.borrow_mut().submit_on_core(queue.now_ns(), direction);
            if let Some(sleep) = sleep_until(&queue, arrival) {
                sleep.await;
            }
            times
        };
        let result = queue.submit(command).await;
        last_reap = if asynchronous {
            Some(reap_in_batch(&queue, &state).await)
        } else {
            let reaped_ns = state.borrow_mut().reap_on_core(queue.now_ns());
            if let Some(sleep) = sleep_until(&queue, reaped_ns) {
                sleep.await;
            }
            None
        };
        let completed = queue.now_ns();
        if zoned && zones.borrow_mut().release(geometry.zone_of(issued.lba)) {
            zone_released.notify_waiters();
        }
        state.borrow_mut().complete(issued, times, completed, result);
    }
}

/// One I/O on its way to the device: what the worker accounts for once it completes.
pub(super) struct Issued {
    io: Io,
    direction: Direction,
    lba: u64,
    /// A write the verifier logs once it succeeds: its first block, its blocks, fio's `numberio`, and its place
    /// among the job's verified writes in the order issued.
    logged_write: Option<(u64, u64, Option<u16>, u64)>,
    /// A reset fio issues itself before writing a zone again, which is not one of the job's I/Os.
    internal_reset: bool,
    /// The job's I/Os in flight with this one.
    in_flight: u64,
}

impl JobState {
    /// Turns `io` into its command at `now`, with the data fio writes, and notes it in flight, in the verifier's
    /// log and in the job's trace.
    fn issue(&mut self, io: Io, lba_shift: u32, now: u64) -> (Issued, QueuedCommand) {
        let (direction, mut command, lba) = io.command(lba_shift);
        let mut logged_write = None;
        if let (Io::Write { lba, blocks } | Io::Append { zone_start: lba, blocks }, QueuedCommand::Write { data, .. })
        | (
            Io::Write { lba, blocks } | Io::Append { zone_start: lba, blocks },
            QueuedCommand::Append { data, .. },
        ) = (&io, &mut command)
        {
            if let Some((bytes, numberio)) = self.write_data(*lba, *blocks, now) {
                *data = IoData::Bytes(bytes);
                if let Some(verifier) = self.verify.as_mut() {
                    verifier.writes_in_flight += 1;
                    // write_data counted this write: its place among the job's writes in the order issued.
                    logged_write = Some((*lba, *blocks, numberio, self.writes_issued - 1));
                }
            }
        }
        let internal_reset = direction == Direction::Trim
            && self.replay.is_none()
            && !matches!(self.options.rw, ReadWrite::Trim | ReadWrite::RandTrim | ReadWrite::Finish);
        if !internal_reset {
            let (geometry, started) = (self.geometry, self.started_ns);
            if let (Some(trace), Some((action, offset, len))) = (self.trace.as_mut(), io.traced(&geometry)) {
                trace.record(now.saturating_sub(started), action, offset, len);
            }
        }
        self.in_flight += 1;
        let in_flight = self.in_flight;
        (Issued { io, direction, lba, logged_write, internal_reset, in_flight }, command)
    }

    /// Accounts for an I/O that completed at `completed` with `result`: the verifier's log and checks, errors,
    /// and, past the ramp, fio's statistics and logs.
    fn complete(&mut self, issued: Issued, times: SubmitTimes, completed: u64, result: Result<Output, Status>) {
        let Issued { io, direction, lba, logged_write, internal_reset, in_flight } = issued;
        self.in_flight -= 1;
        if self.spans.is_some() {
            self.record_span(&io, direction, lba, times, completed, result.is_ok());
        }
        if let Some(piece) = logged_write {
            self.log_written(piece, result.is_ok());
        }
        if let (Io::Verify { lba, numberio, .. }, Ok(Output::Data(data))) = (&io, &result) {
            self.check_read_back(*lba, data, *numberio);
        }
        if let Err(status) = result {
            self.fail(status, direction, lba, &io);
            return;
        }
        if let Io::Reset { .. } = io {
            self.zone_resets += 1;
        }
        if internal_reset || completed < self.ramp_end_ns {
            return;
        }
        let bytes = io.bytes(&self.geometry);
        let total = completed - times.prepared_ns;
        // fio samples no submission latency for a synchronous engine: its clat is the whole system call.
        let synchronous = self.options.ioengine == IoEngine::Psync;
        let slat = if synchronous { 0 } else { times.issued_ns - times.prepared_ns };
        self.last_completion_ns = self.last_completion_ns.max(completed);
        let stats = match direction {
            Direction::Read => &mut self.read,
            Direction::Write => &mut self.write,
            Direction::Trim => &mut self.trim,
            Direction::Sync => &mut self.sync,
        };
        stats.ios += 1;
        stats.bytes += bytes;
        stats.clat.record(total - slat);
        // A synchronous engine's lat is its clat, which `JobState::result` reports for both.
        if !synchronous {
            stats.slat.record(slat);
            stats.lat.record(total);
        }
        self.distribution.record(in_flight, total - slat);
        self.sample(completed);
        if self.log.is_some() {
            self.log_latency(direction, completed, bytes, slat, total);
        }
    }

    // The rest of an I/O's accounting is for options most jobs leave off, or for failures: out of line, so that
    // the common path's code stays compact.

    #[cold]
    fn record_span(&mut self, io: &Io, direction: Direction, lba: u64, times: SubmitTimes, end_ns: u64, ok: bool) {
        let blocks = io.bytes(&self.geometry) >> self.geometry.lba_shift;
        let kind = match direction {
            Direction::Read => IoKind::Read,
            Direction::Write => IoKind::Write,
            Direction::Trim => IoKind::Trim,
            Direction::Sync => IoKind::Sync,
        };
        let (start_ns, issued_ns) = (times.prepared_ns, times.issued_ns);
        if let Some(spans) = self.spans.as_mut() {
            spans.push(IoSpan { kind, lba, blocks, start_ns, issued_ns, end_ns, ok });
        }
    }

    /// A write the verifier logged has completed: once it succeeded, its blocks are to be read back.
    #[cold]
    fn log_written(&mut self, (lba, blocks, numberio, index): (u64, u64, Option<u16>, u64), ok: bool) {
        let (backlog, batch) = (self.options.verify_backlog, self.options.verify_batch);
        let Some(verifier) = self.verify.as_mut() else { return };
        verifier.writes_in_flight -= 1;
        if ok {
            // Of two writes of a block, the one issued later is the one checked, whichever completes first (fio
            // logs a write as it issues it).
            for block in lba..lba + blocks {
                let latest = verifier.latest.entry(block).or_insert(index);
                *latest = (*latest).max(index);
            }
            verifier.pending.push((lba, blocks, numberio, index));
            verifier.logged += 1;
            if backlog != 0 && verifier.logged % backlog == 0 {
                verifier.batch_left = if batch != 0 { batch } else { backlog };
            }
        }
        if verifier.writes_in_flight == 0 {
            verifier.drained.notify_waiters();
        }
    }

    /// Checks the data a verifying read brought back. The read counts as a read either way, as fio accounts it
    /// before its verify callback.
    #[cold]
    fn check_read_back(&mut self, lba: u64, data: &[u8], numberio: Option<u16>) {
        let file = self.options.filename.clone().unwrap_or_default();
        let offset = lba << self.geometry.lba_shift;
        let checked =
            self.verify.as_ref().map_or(Ok(()), |verifier| verifier.layout.check(&file, offset, data, numberio));
        if let Err(message) = checked {
            if self.options.continue_on_error.verify {
                self.total_errors += 1;
                self.first_error.get_or_insert(libc_errno::EILSEQ);
            } else {
                self.verify_error.get_or_insert(message);
            }
        }
    }

    /// An I/O failed: fio goes on only past errors it deems non-fatal (EIO and EILSEQ) when told to continue;
    /// otherwise the job has failed, and the worker's next turn finds it done.
    #[cold]
    fn fail(&mut self, status: Status, direction: Direction, lba: u64, io: &Io) {
        let coe = self.options.continue_on_error;
        let continued = if direction == Direction::Read { coe.read } else { coe.write };
        if continued && matches!(status.errno(), libc_errno::EIO | libc_errno::EILSEQ) {
            self.total_errors += 1;
            self.first_error.get_or_insert(status.errno());
            return;
        }
        let len_bytes = io.data_bytes(&self.geometry);
        self.error.get_or_insert(IoFailure { status, direction, lba, len_bytes });
    }

    #[cold]
    fn log_latency(&mut self, direction: Direction, completed: u64, bytes: u64, slat: u64, total: u64) {
        let time_ns = completed - self.started_ns;
        let direction = match direction {
            Direction::Read => 0,
            Direction::Write => 1,
            Direction::Trim => 2,
            Direction::Sync => 3,
        };
        if let Some(log) = self.log.as_mut() {
            log.push(LogEntry { time_ns, direction, bytes, slat_ns: slat, clat_ns: total - slat, lat_ns: total });
        }
    }

    /// Whether the job has stopped issuing: an error, its deadline, or its size done.
    pub(super) fn finished(&self, now: u64) -> bool {
        let checking = self.verify.as_ref().is_some_and(|verifier| !verifier.pending.is_empty());
        self.failed()
            || now >= self.deadline_ns
            || (!self.options.time_based && self.issued_bytes >= self.budget_bytes && !checking)
    }

    /// How much of its work the job has done, 0 to 1: of its runtime or of its size, whichever is further.
    pub(super) fn done_share(&self, now: u64) -> f64 {
        if self.finished(now) {
            return 1.0;
        }
        let by_size =
            if self.options.time_based { 0.0 } else { self.issued_bytes as f64 / self.budget_bytes.max(1) as f64 };
        let span = self.deadline_ns.saturating_sub(self.started_ns);
        let by_time = if self.options.runtime_ns.is_some() && span > 0 {
            now.saturating_sub(self.started_ns) as f64 / span as f64
        } else {
            0.0
        };
        by_size.max(by_time).min(1.0)
    }

    /// Takes fio's bandwidth and IOPS samples (`add_bw_samples`, `add_iops_samples`): once `SAMPLE_NS` has
    /// passed since the last, each direction that moved data in between gets the rate over the span.
    pub(super) fn sample(&mut self, now: u64) {
        let span = now - self.sample_start_ns;
        if span < SAMPLE_NS {
            return;
        }
        for (index, stats) in [&mut self.read, &mut self.write, &mut self.trim].into_iter().enumerate() {
            let (bytes, ios) = self.sampled[index];
            if stats.bytes > bytes {
                stats.bw_samples.push((stats.bytes - bytes) as f64 * 1e9 / span as f64 / 1024.0);
                stats.iops_samples.push((stats.ios - ios) as f64 * 1e9 / span as f64);
            }
            self.sampled[index] = (stats.bytes, stats.ios);
        }
        self.sample_start_ns = now;
    }
}

/// fio 3.33's open-zone bound for a zbd job (`zbd_set_max_open_zones`): the device's limit when the job sets
/// none, the job's when it is within the device's, an error when it is above it (unless `ignore_zone_limits`),
/// and never above fio's own 4096 (`ZBD_MAX_OPEN_ZONES`).
pub(super) fn max_open_zones(job: &JobOptions, geometry: &Geometry) -> Result<u32, FioError> {
    const FIO_MAX_OPEN_ZONES: u32 = 4096;
    let device = geometry.max_open;
    let limit = match (job.max_open_zones, device) {
        (wanted, _) if job.ignore_zone_limits || device == 0 => wanted,
        (0, device) => device,
        (wanted, device) if wanted <= device => wanted,
        (wanted, device) => {
            return Err(FioError::Options(format!(
                "job {}: Specified --max_open_zones ({wanted}) is larger than max ({device})",
                job.name
            )))
        }
    };
    if limit > FIO_MAX_OPEN_ZONES {
        return Err(FioError::Options(format!(
            "job {}: 'max_open_zones' value is larger than {FIO_MAX_OPEN_ZONES}",
            job.name
        )));
    }
    Ok(if job.zonemode_zbd { limit } else { 0 })
}

/// fio's message for a failed I/O, with the errno's text and the device's status.
pub(super) fn errno_message(failure: IoFailure, lba_bytes: u64) -> String {
    let IoFailure { status, direction, lba, len_bytes } = failure;
    let name = match status {
        Status::TooManyActiveZones => "Value too large for defined data type",
        Status::TooManyOpenZones => "Too many references: cannot splice",
        _ => "Input/output error",
    };
    format!(
        "io_u error: {name}: {} offset={}, buflen={len_bytes} (device: {status})",
        direction.name(),
        lba * lba_bytes
    )
}
