//! One group of jobs on the device: its instances started together, run to their end, and their results.

use super::*;

impl JobState {
    /// One instance of `job` over `[start_lba, end_lba)`, starting at device time `group_start`.
    pub(super) fn new(
        job: &JobOptions,
        instance: u32,
        geometry: Geometry,
        (start_lba, end_lba): (u64, u64),
        group_start: u64,
        cost: JobHostCost,
    ) -> JobState {
        let device_bytes = geometry.nsze_lba << geometry.lba_shift;
        let zone_bytes = geometry.zone_size_lba << geometry.lba_shift;
        let (first_zone, last_zone) = (geometry.zone_of(start_lba), geometry.zone_of(end_lba - 1));
        // In zbd mode a zone holds only its capacity, so that is what a pass over the range moves.
        let range_lbas = if job.zonemode_zbd {
            (end_lba - start_lba) / geometry.zone_size_lba * geometry.zone_cap_lba
        } else {
            end_lba - start_lba
        };
        let budget_bytes = job
            .io_size
            .map_or(range_lbas << geometry.lba_shift, |io| io.resolve(device_bytes, zone_bytes))
            .saturating_mul(job.loops);
        let runtime = job.runtime_ns.unwrap_or(u64::MAX / 4);
        // fio keeps a random map for a uniform random job unless told not to (`init_random_map`); zonelab follows
        // it outside zbd and strided mode, where zones and windows choose the offsets.
        let uniform_random = job.rw.is_random() && job.random_distribution == Distribution::Uniform;
        let fio_keeps_map = uniform_random && !job.norandommap && job.random_generator == RandomGenerator::Draw;
        let follows_pass = uniform_random && !job.zonemode_zbd && !job.zonemode_strided;
        // startdelay: the job's clock starts after it, as fio's does.
        let group_start = group_start.saturating_add(job.startdelay_ns);
        JobState {
            options: job.clone(),
            instance_id: 0,
            groupid: 0,
            max_open_zones: job.max_open_zones,
            waiting: None,
            geometry,
            first_zone,
            end_zone: last_zone + 1,
            start_lba,
            end_lba,
            bs_blocks: job.bs_bytes >> geometry.lba_shift,
            budget_bytes,
            issued_bytes: 0,
            issued_ios: 0,
            cursor_lba: start_lba,
            cursor_zone: first_zone,
            skip_zones: (job.zoneskip.resolve(device_bytes, zone_bytes) / zone_bytes.max(1)) as u32,
            stride: job.zonemode_strided.then(|| {
                let lbas = |size: SizeSpec| size.resolve(device_bytes, zone_bytes) >> geometry.lba_shift;
                let size = job.zonesize.map_or(0, lbas);
                Stride {
                    start: start_lba,
                    range: job.zonerange.map_or(size, lbas).max(1),
                    size,
                    skip: lbas(job.zoneskip),
                    moved: 0,
                }
            }),
            open_zones: Vec::new(),
            just_reset: false,
            skew: (job.random_distribution != Distribution::Uniform).then(|| {
                let blocks = ((end_lba - start_lba) / (job.bs_bytes >> geometry.lba_shift).max(1)).max(1);
                Picker::new(job.random_distribution, blocks)
            }),
            drawn_lba: None,
            pass: if follows_pass {
                let smallest = job.bssplit.iter().map(|&(bytes, _)| bytes).fold(job.bs_bytes, u64::min);
                let unit = (smallest >> geometry.lba_shift).max(1);
                let mut seed = SplitMix64::split(job.randseed, &format!("pass/{}/{instance}", job.name));
                let blocks = ((end_lba - start_lba) / unit).max(1);
                RandomPass::new(job.random_generator, job.norandommap, blocks, &mut seed).map(|pass| (pass, unit))
            } else {
                None
            },
            readable: ((u64::MAX, 0), Vec::new()),
            deadline_ns: group_start.saturating_add(job.ramp_time_ns).saturating_add(runtime),
            ramp_end_ns: group_start + job.ramp_time_ns,
            next_issue_ns: group_start,
            rng: SplitMix64::split(job.randseed, &format!("{}/{instance}", job.name)),
            cost,
            core_busy_until_ns: group_start,
            thread: JobThread::default(),
            fio_loop: FioLoop::of(job),
            dispatch_run_ns: 0,
            read: DirectionStats::default(),
            write: DirectionStats::default(),
            trim: DirectionStats::default(),
            sync: DirectionStats::default(),
            last_completion_ns: group_start,
            error: None,
            zone_resets: 0,
            still_at_ns: u64::MAX,
            still_ios: 0,
            stalled: false,
            in_flight: 0,
            distribution: IoDistribution::default(),
            sample_start_ns: group_start + job.ramp_time_ns,
            sampled: [(0, 0); 3],
            started_ns: group_start,
            total_errors: 0,
            first_error: None,
            writes_issued: 0,
            last_was_sync: false,
            end_synced: false,
            verify: job.verify.map(|method| Verifier {
                layout: VerifyLayout {
                    method,
                    interval: verify_interval(job) as usize,
                    pattern: job.verify_pattern.clone(),
                    randseed: job.randseed,
                },
                pending: PendingChecks::new(fio_keeps_map),
                latest: HashMap::new(),
                logged: 0,
                batch_left: 0,
                writes_in_flight: 0,
                verifying: false,
                drained: Rc::new(Notify::new()),
            }),
            verify_error: None,
            replay: None,
            trace: None,
            not_before_ns: 0,
            log: (job.lat_log.is_some() || job.bw_log.is_some() || job.iops_log.is_some()).then(Vec::new),
            spans: None,
        }
    }

    /// What the instance did, as fio reports a job.
    pub(super) fn result(&self, run_group: u32, scheduler: SchedulerCounters) -> JobResult {
        let lba_bytes = u64::from(self.geometry.lba_size);
        let (error, error_message) = match self.error {
            Some(IoFailure { status: Status::LbaOutOfRange, direction: Direction::Read, len_bytes: 0, .. }) => {
                (5, Some(format!("{}: no written data to read in the job's zones", self.options.name)))
            }
            Some(failure) => (failure.status.errno(), Some(errno_message(failure, lba_bytes))),
            None => match &self.verify_error {
                Some(message) => (libc_errno::EILSEQ, Some(message.clone())),
                None => (0, None),
            },
        };
        let runtime_ns = self.last_completion_ns.saturating_sub(self.ramp_end_ns).max(1);
        let (usr_ns, sys_ns, ctx) = self.cpu((self.ramp_end_ns, self.ramp_end_ns + runtime_ns));
        // The worker records a synchronous engine's latency once, as clat: with no slat, lat is the same.
        let synchronous = self.options.ioengine == IoEngine::Psync;
        let measured = |stats: &DirectionStats| DirectionStats {
            runtime_ns: if stats.ios > 0 { runtime_ns } else { 0 },
            lat: if synchronous { stats.clat.clone() } else { stats.lat.clone() },
            ..stats.clone()
        };
        JobResult {
            options: self.options.clone(),
            groupid: self.groupid,
            run_group,
            instances: 1,
            error,
            error_message,
            read: measured(&self.read),
            write: measured(&self.write),
            trim: measured(&self.trim),
            sync: measured(&self.sync),
            runtime_ns,
            thread_ns: runtime_ns,
            usr_ns,
            sys_ns,
            ctx,
            zone_resets: self.zone_resets,
            scheduler,
            distribution: self.distribution.clone(),
            total_errors: self.total_errors,
            first_error: self.first_error.unwrap_or(0),
        }
    }
}

impl JobResult {
    /// Folds another job instance of the same reporting group into this result (`group_reporting`).
    pub(super) fn absorb(&mut self, other: JobResult) {
        self.instances += 1;
        self.read.merge(&other.read);
        self.write.merge(&other.write);
        self.trim.merge(&other.trim);
        self.sync.merge(&other.sync);
        self.runtime_ns = self.runtime_ns.max(other.runtime_ns);
        self.thread_ns += other.thread_ns;
        self.usr_ns += other.usr_ns;
        self.sys_ns += other.sys_ns;
        self.ctx += other.ctx;
        self.zone_resets += other.zone_resets;
        self.distribution.merge(&other.distribution);
        self.total_errors += other.total_errors;
        if self.first_error == 0 {
            self.first_error = other.first_error;
        }
        if self.error == 0 {
            self.error = other.error;
            self.error_message = other.error_message;
        }
    }
}

/// The device, its scheduler and fio's zone bookkeeping, kept from one group of jobs to the next.
pub(super) struct GroupRunner<S: MediaStore + 'static> {
    pub(super) simulation: Simulation<S>,
    /// The namespaces the jobs run on, and each job's by its filename.
    pub(super) targets: Vec<Target<S>>,
    pub(super) target_of: HashMap<String, usize>,
    /// Wakes instances waiting for a zone lock (see `ZoneCache::holders`).
    pub(super) zone_released: Rc<Notify>,
    pub(super) host_costs: HostCosts,
    /// Job instances started so far: fio's thread numbers, which name the log files.
    pub(super) threads: u32,
    pub(super) io_logs: Vec<IoLog>,
    /// Each job instance's I/Os by its thread's name, when the run writes a trace.
    pub(super) spans: Option<Vec<(String, Vec<IoSpan>)>>,
}

impl<S: MediaStore + 'static> GroupRunner<S> {
    /// The namespace `job` runs on.
    pub(super) fn target(&self, job: &JobOptions) -> &Target<S> {
        &self.targets[self.target_of[job.filename.as_deref().unwrap_or_default()]]
    }

    /// The host FTL's counters, when the jobs run on one (on one namespace: see `run_reporting`).
    fn host_ftl_counters(&self) -> Option<HostFtlCounters> {
        self.targets.iter().find_map(|target| target.queue.host_ftl_counters())
    }

    /// Runs one group of jobs to its end; returns their results (folded under `group_reporting`), the group's
    /// device-wide figures, and the jobs that stopped because device time stood still.
    pub(super) fn run_group(
        &mut self,
        run_group: u32,
        group: &[(u32, &JobOptions)],
        report: &mut Option<Reporter<'_>>,
        status: Option<&mut StatusDumps<'_>>,
    ) -> Result<(Vec<JobResult>, GroupResult, Vec<String>), FioError> {
        let jobs: Vec<&JobOptions> = group.iter().map(|&(_, job)| job).collect();
        self.reset_for_verify(&jobs)?;
        let group_start = self.simulation.now_ns();
        let counters_before =
            self.simulation.with_device(|device| (device.counters().clone(), device.media().counters().clone()));
        let mut instances = Vec::new();
        // Polling threads never leave their cores: when they outnumber the host's, they take turns.
        let polling_threads = jobs.iter().filter(|job| job.polls()).map(|job| job.numjobs).sum();
        let share = self.host_costs.core_share(true, polling_threads);
        let mut polling_thread = 0;
        for &(groupid, job) in group {
            let geometry = self.target(job).geometry;
            for instance in 0..job.numjobs {
                let range = instance_range(job, instance, &geometry)?;
                if let Some(fill) = job.prefill {
                    self.prefill(job, fill, range)?;
                }
                let target = self.target(job);
                let (queue, zones, scheduler) =
                    (target.queue.clone(), Rc::clone(&target.zones), target.scheduled.kind());
                // fio restarts the device's reset countdown as each job opens the device (`zbd_file_reset`).
                zones.borrow_mut().reset_countdown = reset_countdown_start(job.zone_reset_frequency);
                let cost = JobHostCost::of(job, &self.host_costs, scheduler);
                let mut state = JobState::new(job, instance, geometry, range, group_start, cost);
                state.spans = self.spans.is_some().then(Vec::new);
                // A job that named no scheduler runs under the device's, which it reports.
                if job.scheduler_defaulted {
                    state.options.scheduler = scheduler;
                }
                state.instance_id = instances.len();
                state.groupid = groupid;
                if job.polls() {
                    state.thread.turns = share.map(|share| (share, polling_thread));
                    polling_thread += 1;
                }
                state.max_open_zones = max_open_zones(job, &geometry)?;
                check_verify_sizes(job, &geometry)?;
                check_zone_options(job, &geometry)?;
                if let Some(path) = &job.read_iolog {
                    let text = std::fs::read_to_string(path)
                        .map_err(|error| FioError::Options(format!("job {}: read_iolog {path}: {error}", job.name)))?;
                    let ops = parse_iolog(path, &text, u64::from(geometry.lba_size), job.replay_no_stall)?;
                    state.replay = Some((ops.into(), state.started_ns));
                }
                if let Some(path) = &job.write_iolog {
                    state.trace = Some(IoTrace::new(path, job.filename.as_deref().unwrap_or_default()));
                }
                let state = Rc::new(RefCell::new(state));
                let depth = if job.ioengine == IoEngine::Psync { 1 } else { job.iodepth };
                for _ in 0..depth {
                    let (zones, released) = (Rc::clone(&zones), Rc::clone(&self.zone_released));
                    // A worker awaits one thing at a time. Each kind of queue has its own, so that a command
                    // goes straight to it.
                    let state = Rc::clone(&state);
                    match &queue {
                        JobQueue::Direct(scheduled) => {
                            self.simulation.spawn_sequential(worker(scheduled.clone(), state, zones, released));
                        }
                        JobQueue::HostFtl(ftl) => {
                            self.simulation.spawn_sequential(worker(ftl.clone(), state, zones, released));
                        }
                    }
                }
                instances.push(state);
            }
        }
        let start = GroupStart {
            device_ns: group_start,
            counters: counters_before.0,
            flash: counters_before.1,
            host_ftl: self.host_ftl_counters(),
            wall: Instant::now(),
        };
        match (report.as_mut(), status) {
            (None, None) => {
                self.simulation.run();
            }
            (progress, status) => self.run_watched(run_group, &instances, &start, progress, status),
        }
        let (folded, group_result) = self.results(run_group, &instances, &start);
        let mut stalled_jobs: Vec<String> = Vec::new();
        for state in instances {
            let mut state = state.borrow_mut();
            self.threads += 1;
            let end_ns = state.last_completion_ns.saturating_sub(state.started_ns);
            let trace = state.trace.take().map(|trace| (trace.path.clone(), trace.finish(end_ns)));
            if state.log.is_some() || trace.is_some() {
                let options = &state.options;
                self.io_logs.push(IoLog {
                    thread_number: self.threads,
                    lat_prefix: options.lat_log.clone(),
                    bw_prefix: options.bw_log.clone(),
                    iops_prefix: options.iops_log.clone(),
                    avg_msec: options.log_avg_msec,
                    entries: state.log.take().unwrap_or_default(),
                    trace,
                });
            }
            if let (Some(all), Some(spans)) = (self.spans.as_mut(), state.spans.take()) {
                all.push((format!("{} (thread {})", state.options.name, self.threads), spans));
            }
            if state.stalled {
                stalled_jobs.push(state.options.name.clone());
            }
        }
        stalled_jobs.dedup();
        Ok((folded, group_result, stalled_jobs))
    }

    /// Runs the group in slices of device time: its progress goes to `progress` every so often of wall-clock
    /// time, and a snapshot of its results to `status` every so often of device time (`--status-interval`).
    pub(super) fn run_watched(
        &mut self,
        group: u32,
        instances: &[Rc<RefCell<JobState>>],
        start: &GroupStart,
        mut progress: Option<&mut Reporter<'_>>,
        mut status: Option<&mut StatusDumps<'_>>,
    ) {
        let started = Instant::now();
        let totals = |instances: &[Rc<RefCell<JobState>>]| {
            instances.iter().fold([0u64; 4], |sum, state| {
                let job = state.borrow();
                [sum[0] + job.read.bytes, sum[1] + job.write.bytes, sum[2] + job.read.ios, sum[3] + job.write.ios]
            })
        };
        let (mut last_wall, mut last_ns, mut last) = (started, self.simulation.now_ns(), totals(instances));
        let mut next_dump = status.as_ref().map(|(every, _)| start.device_ns.saturating_add(*every));
        let mut next = Some(self.simulation.now_ns());
        while let Some(at) = next {
            let slice_end = if progress.is_some() { at.saturating_add(PROGRESS_SLICE_NS) } else { u64::MAX };
            let until = next_dump.map_or(slice_end, |dump| dump.min(slice_end));
            self.simulation.run_until(until);
            if let (Some(dump), Some((every, report))) = (next_dump, status.as_mut()) {
                if dump == until {
                    // Once every job is done, the group's own report follows: no dump repeats it.
                    if instances.iter().any(|state| !state.borrow().finished(until)) {
                        let (jobs, group_result) = self.results(group, instances, start);
                        let wear = self.simulation.with_device(|device| device.media().erase_summary());
                        report(&jobs, &group_result, &wear);
                    }
                    next_dump = Some(dump.saturating_add(*every));
                }
            }
            next = self.simulation.next_event_ns();
            let Some((every, report)) = progress.as_mut() else { continue };
            if last_wall.elapsed() < *every {
                continue;
            }
            let (now, current) = (self.simulation.now_ns(), totals(instances));
            let seconds = (now.saturating_sub(last_ns) as f64 / 1e9).max(1e-9);
            let rate = |index: usize| (current[index] - last[index]) as f64 / seconds;
            let running: Vec<std::cell::Ref<JobState>> =
                instances.iter().map(|state| state.borrow()).filter(|job| !job.finished(now)).collect();
            let done =
                instances.iter().map(|state| state.borrow().done_share(now)).sum::<f64>() / instances.len() as f64;
            report(&Progress {
                group,
                running: running.len() as u32,
                patterns: patterns(running.iter().map(|job| job.options.rw.letter())),
                done,
                read_bytes_per_s: rate(0),
                write_bytes_per_s: rate(1),
                read_iops: rate(2),
                write_iops: rate(3),
                wall: started.elapsed(),
            });
            (last_wall, last_ns, last) = (Instant::now(), now, current);
        }
    }

    /// The group's results as they stand: its jobs (folded under `group_reporting`) and its device figures.
    pub(super) fn results(
        &self,
        run_group: u32,
        instances: &[Rc<RefCell<JobState>>],
        start: &GroupStart,
    ) -> (Vec<JobResult>, GroupResult) {
        let (counters_after, flash_after) =
            self.simulation.with_device(|device| (device.counters().clone(), device.media().counters().clone()));
        let device_delta = counters_after.since(&start.counters);
        let group_result = GroupResult {
            run_group,
            device_time_ns: self.simulation.now_ns() - start.device_ns,
            wall_seconds: start.wall.elapsed().as_secs_f64(),
            commands: device_delta.reads + device_delta.writes + device_delta.appends + device_delta.zone_management,
            device: device_delta,
            flash: flash_after.since(&start.flash),
            host_ftl: self.host_ftl_counters().zip(start.host_ftl).map(|(after, before)| after.since(&before)),
        };
        // fio's rule (`__show_run_stats`): an instance with group_reporting joins the result before it when the
        // instance before it is of the same reporting group.
        let mut folded: Vec<JobResult> = Vec::new();
        let mut previous_groupid = None;
        for state in instances {
            let state = state.borrow();
            let result = state.result(run_group, self.target(&state.options).scheduled.counters());
            match folded.last_mut() {
                Some(previous) if state.options.group_reporting && previous_groupid == Some(state.groupid) => {
                    previous.absorb(result);
                }
                _ => folded.push(result),
            }
            previous_groupid = Some(state.groupid);
        }
        (folded, group_result)
    }

    /// fio resets the zones a verifying job writes before it starts (`zbd_file_reset`), so that no reset is
    /// needed, and no data lost, while it writes. The resets go through the device before the group's clock
    /// starts.
    pub(super) fn reset_for_verify(&mut self, group: &[&JobOptions]) -> Result<(), FioError> {
        for index in 0..self.targets.len() {
            let on_target = |job: &&&JobOptions| self.target_of[job.filename.as_deref().unwrap_or_default()] == index;
            let jobs: Vec<&JobOptions> = group.iter().filter(on_target).copied().collect();
            self.reset_for_verify_on(index, &jobs)?;
        }
        Ok(())
    }

    /// `reset_for_verify` of the jobs `group` on target `index`.
    fn reset_for_verify_on(&mut self, index: usize, group: &[&JobOptions]) -> Result<(), FioError> {
        let target = &self.targets[index];
        let geometry = target.geometry;
        let mut targets: Vec<(u32, String)> = Vec::new();
        for &job in group.iter().filter(|job| job.verify.is_some() && job.zonemode_zbd && job.rw.writes()) {
            for instance in 0..job.numjobs {
                let (start, end) = instance_range(job, instance, &geometry)?;
                for zone in geometry.zone_of(start)..=geometry.zone_of(end - 1) {
                    if target.zones.borrow().written(zone) > 0 && !targets.iter().any(|&(target, _)| target == zone) {
                        targets.push((zone, job.name.clone()));
                    }
                }
            }
        }
        if targets.is_empty() {
            return Ok(());
        }
        let failure = Rc::new(RefCell::new(None));
        let (queue, failed, resets) = (target.scheduled.clone(), Rc::clone(&failure), targets.clone());
        self.simulation.spawn(async move {
            for (zone, job) in resets {
                let slba = geometry.zone_start_lba(zone);
                let reset = QueuedCommand::ZoneSend { slba, action: ZoneSendAction::Reset, select_all: false };
                if let Err(status) = queue.submit(reset).await {
                    *failed.borrow_mut() = Some((job, zone, status));
                    return;
                }
            }
        });
        self.simulation.run();
        if let Some((job, zone, status)) = failure.take() {
            return Err(FioError::Options(format!(
                "job {job}: resetting zone {zone} before the writes it verifies failed: {status}"
            )));
        }
        for (zone, _) in targets {
            self.targets[index].zones.borrow_mut().set_wp(zone, geometry.zone_start_lba(zone));
        }
        Ok(())
    }

    /// `prefill`: the zones of the range that hold nothing are written to `fill` (the zone capacity when
    /// None) beforehand, in no device time.
    pub(super) fn prefill(
        &mut self,
        job: &JobOptions,
        fill: Option<SizeSpec>,
        range: (u64, u64),
    ) -> Result<(), FioError> {
        let target = self.target(job);
        let (geometry, zones) = (target.geometry, Rc::clone(&target.zones));
        let device_bytes = geometry.nsze_lba << geometry.lba_shift;
        let zone_bytes = geometry.zone_size_lba << geometry.lba_shift;
        let cap_bytes = geometry.zone_cap_lba << geometry.lba_shift;
        let lba_bytes = u64::from(geometry.lba_size);
        let bytes = fill.map_or(cap_bytes, |size| size.resolve(device_bytes, zone_bytes).min(cap_bytes)) / lba_bytes
            * lba_bytes;
        for zone in geometry.zone_of(range.0)..=geometry.zone_of(range.1 - 1) {
            if zones.borrow().written(zone) > 0 {
                continue;
            }
            self.simulation
                .with_device(|device| device.precondition(zone, bytes))
                .map_err(|status| FioError::Prefill { job: job.name.clone(), zone, status })?;
            zones.borrow_mut().set_wp(zone, geometry.zone_start_lba(zone) + (bytes >> geometry.lba_shift));
        }
        Ok(())
    }
}
