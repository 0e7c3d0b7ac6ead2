//! One job instance: its state, and the next I/O it issues (fio's offsets, zones and verify checks).

use super::*;

/// One job instance's state, shared by its iodepth workers.
pub(super) struct JobState {
    pub(super) options: JobOptions,
    /// This instance among every instance of its run group, for zone locks.
    pub(super) instance_id: usize,
    /// The reporting group its results go to (fio's `groupid`).
    pub(super) groupid: u32,
    /// The open-zone bound of zbd mode, as fio sets it from `max_open_zones` and the device's limit (0: none).
    pub(super) max_open_zones: u32,
    /// In zbd mode, the kind and zone of an I/O chosen but not issued because another instance holds the zone.
    pub(super) waiting: Option<(Direction, u32)>,
    pub(super) geometry: Geometry,
    pub(super) first_zone: u32,
    pub(super) end_zone: u32,
    pub(super) start_lba: u64,
    pub(super) end_lba: u64,
    pub(super) bs_blocks: u64,
    pub(super) budget_bytes: u64,
    pub(super) issued_bytes: u64,
    pub(super) issued_ios: u64,
    pub(super) cursor_lba: u64,
    pub(super) cursor_zone: u32,
    /// zbd mode: zones a sequential job skips after each one it is done with (`zoneskip`).
    pub(super) skip_zones: u32,
    /// Strided mode (`zonemode=strided`): the window's start, its size and the bytes moved in it, the bytes
    /// per window (`zonesize`), and the skip after it, in LBAs.
    pub(super) stride: Option<Stride>,
    pub(super) open_zones: Vec<u32>,
    /// `random_distribution` other than uniform: draws blocks of the job's range, and the last draw of a zbd
    /// read until its offset is chosen.
    pub(super) skew: Option<Picker>,
    pub(super) drawn_lba: Option<u64>,
    /// A uniform random job outside zbd and strided mode: its pass over the range (fio's random map or lfsr),
    /// with the LBAs of one of the pass's blocks (the smallest block size).
    pub(super) pass: Option<(RandomPass, u64)>,
    /// The last I/O was a reset a write asked for; that write comes next and has been counted.
    pub(super) just_reset: bool,
    /// The zones this job may read (written at least one block size), as of a `ZoneCache` version.
    pub(super) readable: ((u64, u64), Vec<u32>),
    pub(super) deadline_ns: u64,
    pub(super) ramp_end_ns: u64,
    pub(super) next_issue_ns: u64,
    pub(super) rng: SplitMix64,
    /// The host path's CPU time per command on the job's thread (to submit it, fio's slat, and to reap it), and
    /// the kblockd worker's wait where Linux defers the dispatch.
    pub(super) cost: JobHostCost,
    /// Until when the job's thread is busy on its core with the CPU work of its commands.
    pub(super) core_busy_until_ns: u64,
    /// The job's thread on the host's cores.
    pub(super) thread: JobThread,
    /// fio's loop of submissions and reaps for an asynchronous job (None for psync's one I/O a call).
    pub(super) fio_loop: Option<FioLoop>,
    /// When the kblockd worker that dispatches this job's deferred commands runs next (or last ran): the worker
    /// of the job's core's hardware queue.
    pub(super) dispatch_run_ns: u64,
    pub(super) read: DirectionStats,
    pub(super) write: DirectionStats,
    pub(super) trim: DirectionStats,
    /// Flushes of a replayed trace: fio's `sync` section.
    pub(super) sync: DirectionStats,
    pub(super) last_completion_ns: u64,
    pub(super) error: Option<IoFailure>,
    pub(super) zone_resets: u64,
    /// Device time at the last I/O issued, and how many I/Os in a row were issued at it.
    pub(super) still_at_ns: u64,
    pub(super) still_ios: u64,
    /// The job stopped because device time stood still (`STILL_IOS_BOUND`).
    pub(super) stalled: bool,
    pub(super) in_flight: u64,
    pub(super) distribution: IoDistribution,
    /// Start of the current bandwidth sample, and the bytes and I/Os by direction at that instant.
    pub(super) sample_start_ns: u64,
    pub(super) sampled: [(u64, u64); 3],
    /// Device time the job started, and its completed I/Os when it writes fio's logs.
    pub(super) started_ns: u64,
    pub(super) log: Option<Vec<LogEntry>>,
    /// Every I/O with its times, when the run writes a trace (`--trace`).
    pub(super) spans: Option<Vec<IoSpan>>,
    /// I/Os that failed and were gone past (`continue_on_error`), and the errno of the first.
    pub(super) total_errors: u64,
    pub(super) first_error: Option<i32>,
    /// Writes issued so far: fio's `numberio` of the next write.
    pub(super) writes_issued: u64,
    /// The last I/O issued was a Flush of `fsync` or `end_fsync` (fio's `last_was_sync`), and `end_fsync`'s
    /// Flush has been issued.
    pub(super) last_was_sync: bool,
    pub(super) end_synced: bool,
    pub(super) verify: Option<Verifier>,
    /// `read_iolog`: the trace's I/Os left, and when the last one was issued.
    pub(super) replay: Option<(VecDeque<TraceOp>, u64)>,
    /// `write_iolog`: the trace of the I/Os issued.
    pub(super) trace: Option<IoTrace>,
    /// Device time before which the next I/O may not be issued (a replayed trace's delay).
    pub(super) not_before_ns: u64,
    /// The first block that read back wrong, in fio's words (the job stops on it unless `continue_on_error`
    /// covers verify).
    pub(super) verify_error: Option<String>,
}

/// fio's strided zone mode (`setup_strided_zone_mode`), in LBAs.
pub(super) struct Stride {
    pub(super) start: u64,
    pub(super) range: u64,
    pub(super) size: u64,
    pub(super) skip: u64,
    pub(super) moved: u64,
}

/// fio's verification of one job instance: the written blocks not yet checked (`io_hist_list`), the
/// `verify_backlog` batches, and the verify phase after the writes (`do_verify`).
pub(super) struct Verifier {
    pub(super) layout: VerifyLayout,
    /// Blocks written and not yet checked.
    pub(super) pending: PendingChecks,
    /// The last issued of the logged writes of each block written: a write that a later one overlaps is not
    /// checked, as fio drops an overlapped entry from its log (`log_io_piece`; random writes to a namespace
    /// that is not zoned overwrite blocks).
    pub(super) latest: HashMap<u64, u64>,
    /// Writes logged so far, and checks left in the current backlog batch.
    pub(super) logged: u64,
    pub(super) batch_left: u64,
    pub(super) writes_in_flight: u64,
    /// The writes are over: only checks remain.
    pub(super) verifying: bool,
    /// Wakes workers waiting for the last writes to complete before the verify phase.
    pub(super) drained: Rc<Notify>,
}

/// A written block to check: LBA, blocks, the numberio expected in the header (None when fio does not check it:
/// more than one block size, or a time-based job), and the write's place in the log.
pub(super) type Check = (u64, u64, Option<u16>, u64);

/// The written blocks not yet checked, in the order fio checks them: as written when the job keeps a random map
/// (fio's `io_hist_list`, whose pass never writes a block twice), else by offset (fio's `io_hist_tree`, sorted so
/// that a block written again replaces its older entry: `log_io_piece`).
pub(super) enum PendingChecks {
    Written(VecDeque<Check>),
    ByOffset(BTreeMap<(u64, u64), Check>),
}

impl PendingChecks {
    pub(super) fn new(in_written_order: bool) -> PendingChecks {
        if in_written_order {
            PendingChecks::Written(VecDeque::new())
        } else {
            PendingChecks::ByOffset(BTreeMap::new())
        }
    }

    pub(super) fn push(&mut self, check: Check) {
        match self {
            PendingChecks::Written(checks) => checks.push_back(check),
            PendingChecks::ByOffset(checks) => {
                checks.insert((check.0, check.3), check);
            }
        }
    }

    /// The next check, taken out.
    pub(super) fn take_next(&mut self) -> Option<Check> {
        match self {
            PendingChecks::Written(checks) => checks.pop_front(),
            PendingChecks::ByOffset(checks) => checks.pop_first().map(|(_, check)| check),
        }
    }

    /// Puts back a check just taken, to be the next again.
    pub(super) fn put_back(&mut self, check: Check) {
        match self {
            PendingChecks::Written(checks) => checks.push_front(check),
            PendingChecks::ByOffset(_) => self.push(check),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        match self {
            PendingChecks::Written(checks) => checks.is_empty(),
            PendingChecks::ByOffset(checks) => checks.is_empty(),
        }
    }
}

/// The errnos fio treats as non-fatal under `continue_on_error`.
pub(super) mod libc_errno {
    pub const EIO: i32 = 5;
    pub const EILSEQ: i32 = 84;
}

/// I/Os a job may issue in a row without device time moving. On a preset with no latency at all (`instant`)
/// device time never reaches a runtime or deadline, so a time-bound job would never end; past this bound it
/// stops, and the run says so.
pub(super) const STILL_IOS_BOUND: u64 = 1 << 20;

/// What a job does next.
pub(super) enum Next {
    Issue(Io),
    /// In zbd mode: wait until another instance releases the zone this one chose.
    WaitForZone,
    /// Verify phase: wait until the writes still in flight complete, then check them.
    WaitForWrites(Rc<Notify>),
    Done,
}

/// The direction an I/O is counted in, as fio reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Direction {
    Read,
    Write,
    /// Zone resets and finishes, which fio counts as trims.
    Trim,
    /// Flushes, which only a replayed trace issues (fio's `sync`).
    Sync,
}

impl Direction {
    pub(super) fn name(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
            Direction::Trim => "trim",
            Direction::Sync => "sync",
        }
    }
}

/// The first I/O of a job that failed.
#[derive(Clone, Copy, Debug)]
pub(super) struct IoFailure {
    pub(super) status: Status,
    pub(super) direction: Direction,
    pub(super) lba: u64,
    pub(super) len_bytes: u64,
}

/// One I/O a worker issues.
pub(super) enum Io {
    Read {
        lba: u64,
        blocks: u64,
    },
    /// A read whose data is checked against the verify block written there (`numberio`: the write expected).
    Verify {
        lba: u64,
        blocks: u64,
        numberio: Option<u16>,
    },
    Write {
        lba: u64,
        blocks: u64,
    },
    Append {
        zone_start: u64,
        blocks: u64,
    },
    Reset {
        zone_start: u64,
    },
    /// A trim of a conventional namespace's blocks: Dataset Management's deallocate.
    Trim {
        lba: u64,
        blocks: u64,
    },
    Finish {
        zone_start: u64,
    },
    Flush,
}

impl Io {
    /// The bytes fio counts for the I/O: its data, or the whole zone for a reset or finish.
    pub(super) fn bytes(&self, geometry: &Geometry) -> u64 {
        match *self {
            Io::Read { blocks, .. }
            | Io::Verify { blocks, .. }
            | Io::Write { blocks, .. }
            | Io::Append { blocks, .. }
            | Io::Trim { blocks, .. } => blocks << geometry.lba_shift,
            Io::Reset { .. } | Io::Finish { .. } => geometry.zone_size_lba << geometry.lba_shift,
            Io::Flush => 0,
        }
    }

    /// The data it moves, in bytes (none for zone management).
    pub(super) fn data_bytes(&self, geometry: &Geometry) -> u64 {
        match self {
            Io::Reset { .. } | Io::Finish { .. } | Io::Trim { .. } => 0,
            _ => self.bytes(geometry),
        }
    }

    /// The command it becomes, the direction it is counted in and the LBA it names.
    pub(super) fn command(&self, lba_shift: u32) -> (Direction, QueuedCommand, u64) {
        match *self {
            Io::Read { lba, blocks } => {
                (Direction::Read, QueuedCommand::Read { slba: lba, nlb: blocks, keep: false }, lba)
            }
            Io::Verify { lba, blocks, .. } => {
                (Direction::Read, QueuedCommand::Read { slba: lba, nlb: blocks, keep: true }, lba)
            }
            Io::Write { lba, blocks } => {
                (Direction::Write, QueuedCommand::Write { slba: lba, data: IoData::Zeros(blocks << lba_shift) }, lba)
            }
            Io::Append { zone_start, blocks } => (
                Direction::Write,
                QueuedCommand::Append { zslba: zone_start, data: IoData::Zeros(blocks << lba_shift) },
                zone_start,
            ),
            Io::Reset { zone_start } => (
                Direction::Trim,
                QueuedCommand::ZoneSend { slba: zone_start, action: ZoneSendAction::Reset, select_all: false },
                zone_start,
            ),
            Io::Finish { zone_start } => (
                Direction::Trim,
                QueuedCommand::ZoneSend { slba: zone_start, action: ZoneSendAction::Finish, select_all: false },
                zone_start,
            ),
            Io::Trim { lba, blocks } => (Direction::Trim, QueuedCommand::Deallocate { slba: lba, nlb: blocks }, lba),
            Io::Flush => (Direction::Sync, QueuedCommand::Flush, 0),
        }
    }

    /// How fio's iolog names the I/O: its action, offset and length in bytes (None: not an I/O fio logs,
    /// a zonelab finish).
    pub(super) fn traced(&self, geometry: &Geometry) -> Option<(TraceAction, u64, u64)> {
        let shift = geometry.lba_shift;
        let bytes = self.bytes(geometry);
        match *self {
            Io::Read { lba, .. } | Io::Verify { lba, .. } => Some((TraceAction::Read, lba << shift, bytes)),
            Io::Write { lba, .. } => Some((TraceAction::Write, lba << shift, bytes)),
            Io::Append { zone_start, .. } => Some((TraceAction::Write, zone_start << shift, bytes)),
            Io::Reset { zone_start } => Some((TraceAction::Trim, zone_start << shift, bytes)),
            Io::Trim { lba, .. } => Some((TraceAction::Trim, lba << shift, bytes)),
            Io::Flush => Some((TraceAction::Sync, 0, 0)),
            Io::Finish { .. } => None,
        }
    }
}

impl JobState {
    /// Picks the next I/O. Zone bookkeeping moves when the I/O is issued, as in fio. In zbd mode the zone is
    /// chosen first and locked as fio does (`zbd_adjust_block`): a zone another instance holds is waited for,
    /// and the offset in it is chosen once it is free. A zone that must be reset before it is written again
    /// comes back as a Reset first.
    pub(super) fn next_io(&mut self, now: u64, zones: &mut ZoneCache) -> Next {
        if self.failed() || now >= self.deadline_ns {
            return Next::Done;
        }
        // Only a job bound by its runtime can wait forever for time to pass; a size-bound one ends by its size.
        if now == self.still_at_ns && self.options.runtime_ns.is_some() {
            self.still_ios += 1;
            if self.still_ios > STILL_IOS_BOUND {
                self.stalled = true;
                return Next::Done;
            }
        } else {
            (self.still_at_ns, self.still_ios) = (now, 1);
        }
        if let Some(next) = self.next_check(zones) {
            return next;
        }
        if let Some((ops, last_issue_ns)) = self.replay.as_mut() {
            // A replayed trace is issued as written, with no zone locks or write-pointer moves (fio takes
            // trace I/Os past `fill_io_u`, where zbd mode adjusts offsets).
            let Some(op) = ops.pop_front() else { return Next::Done };
            self.not_before_ns = last_issue_ns.saturating_add(op.delay_ns);
            *last_issue_ns = self.not_before_ns.max(now);
            let (lba, blocks) = (op.offset >> self.geometry.lba_shift, op.len >> self.geometry.lba_shift);
            let io = match op.action {
                TraceAction::Read => Io::Read { lba, blocks },
                TraceAction::Write => {
                    let zone = self.geometry.zone_of(lba);
                    if zones.wp[zone as usize] == lba {
                        zones.set_wp(zone, lba + blocks);
                    }
                    Io::Write { lba, blocks }
                }
                TraceAction::Trim if self.geometry.kind == NamespaceKind::Conventional => Io::Trim { lba, blocks },
                TraceAction::Trim => {
                    let zone_start = self.geometry.zone_start_lba(self.geometry.zone_of(lba));
                    zones.set_wp(self.geometry.zone_of(lba), zone_start);
                    Io::Reset { zone_start }
                }
                TraceAction::Sync => Io::Flush,
            };
            self.issued_bytes += io.data_bytes(&self.geometry);
            self.issued_ios += 1;
            return Next::Issue(io);
        }
        // fio's `fsync=N`: a sync once every N writes, before the next I/O (`fill_io_u`, `should_fsync`).
        let fsync = self.options.fsync_blocks;
        if fsync != 0 && self.writes_issued != 0 && self.writes_issued.is_multiple_of(fsync) && !self.last_was_sync {
            self.last_was_sync = true;
            return Next::Issue(Io::Flush);
        }
        if !self.options.time_based && self.issued_bytes >= self.budget_bytes {
            return self.end_writes(zones);
        }
        if self.options.number_ios != 0 && self.issued_ios >= self.options.number_ios {
            return self.end_writes(zones);
        }
        if !self.options.bssplit.is_empty() && self.waiting.is_none() {
            self.bs_blocks = self.draw_block_size();
        }
        let trims = matches!(self.options.rw, ReadWrite::Trim | ReadWrite::RandTrim | ReadWrite::Finish);
        let io = if self.options.zonemode_zbd {
            let (direction, zone) = match self.waiting.take() {
                Some(waiting) => waiting,
                None => {
                    let direction = self.next_direction(trims);
                    match self.pick_zone(direction, zones) {
                        Some(zone) => (direction, zone),
                        // A mixed job whose zones hold no data yet (its writes reset full zones) writes instead,
                        // as fio, finding no zone to read (`zbd_find_zone`), ends its loop and draws again.
                        None if direction == Direction::Read && !self.failed() => (Direction::Write, self.write_zone()),
                        None => return Next::Done,
                    }
                }
            };
            if zones.held_by_another(zone, self.instance_id) {
                self.waiting = Some((direction, zone));
                return Next::WaitForZone;
            }
            let zone = match direction {
                // fio never resets a full zone of a verifying job, whose data is still to be checked
                // (`zbd_open_zone`): the writes go on in a zone with room, and end when there is none.
                Direction::Write if self.verify.is_some() && zones.full(zone) => match self.zone_with_room(zones) {
                    Some(zone) => zone,
                    None => return self.end_writes(zones),
                },
                _ => zone,
            };
            let io = match direction {
                // (Syncs are never chosen here: only a replayed trace issues them.)
                Direction::Trim | Direction::Sync => self.trim_in(zone, zones),
                Direction::Read => match self.read_in(zone, zones) {
                    Some(io) => io,
                    // Another instance reset the zone while this one waited: choose again.
                    None => return self.next_io(now, zones),
                },
                Direction::Write => self.write_in(zone, zones),
            };
            zones.hold(zone, self.instance_id);
            io
        } else {
            let direction = self.next_direction(trims);
            let (lba, blocks) = self.unzoned_block();
            match direction {
                Direction::Read => Io::Read { lba, blocks },
                Direction::Trim => Io::Trim { lba, blocks },
                _ => Io::Write { lba, blocks },
            }
        };
        // A reset a writer issues before writing a full zone is fio's own, not an I/O of the job's size.
        if trims || !matches!(io, Io::Reset { .. }) {
            self.issued_bytes += io.bytes(&self.geometry);
            self.issued_ios += 1;
        }
        // A job that only reads checks each block it reads against the verify block written there.
        let io = match io {
            Io::Read { lba, blocks } if self.verify.is_some() && !self.options.rw.writes() => {
                Io::Verify { lba, blocks, numberio: None }
            }
            io => io,
        };
        Next::Issue(io)
    }

    pub(super) fn failed(&self) -> bool {
        self.error.is_some() || self.verify_error.is_some()
    }

    /// The next check of a written block, when one is due: in a `verify_backlog` batch, or in the verify phase
    /// (which waits for the last writes to complete, and ends once nothing is left to check).
    pub(super) fn next_check(&mut self, zones: &mut ZoneCache) -> Option<Next> {
        let verifier = self.verify.as_mut()?;
        if !verifier.verifying && verifier.batch_left == 0 {
            return None;
        }
        // fio's verify phase starts once the job's last writes have completed (`do_verify` runs after `do_io`).
        if verifier.verifying && verifier.writes_in_flight > 0 {
            return Some(Next::WaitForWrites(Rc::clone(&verifier.drained)));
        }
        while let Some((lba, blocks, numberio, index)) = verifier.pending.take_next() {
            if (lba..lba + blocks).any(|block| verifier.latest.get(&block) != Some(&index)) {
                continue;
            }
            if self.options.zonemode_zbd {
                let zone = self.geometry.zone_of(lba);
                if zones.held_by_another(zone, self.instance_id) {
                    verifier.pending.put_back((lba, blocks, numberio, index));
                    return Some(Next::WaitForZone);
                }
                zones.hold(zone, self.instance_id);
            }
            verifier.batch_left = verifier.batch_left.saturating_sub(1);
            return Some(Next::Issue(Io::Verify { lba, blocks, numberio }));
        }
        verifier.batch_left = 0;
        match (verifier.verifying, verifier.writes_in_flight) {
            (false, _) => None,
            (true, 0) => Some(Next::Done),
            (true, _) => Some(Next::WaitForWrites(Rc::clone(&verifier.drained))),
        }
    }

    /// The job's writes are done: a verifying job that writes goes on to check them (`do_verify`).
    pub(super) fn end_writes(&mut self, zones: &mut ZoneCache) -> Next {
        // fio's `end_fsync`: one sync after the job's writes, before it verifies them (`do_io`'s end).
        if self.options.end_fsync && self.options.rw.writes() && !self.end_synced {
            self.end_synced = true;
            if !self.last_was_sync {
                self.last_was_sync = true;
                return Next::Issue(Io::Flush);
            }
        }
        let writes = self.options.rw.writes() && self.options.do_verify;
        match self.verify.as_mut() {
            Some(verifier) if writes && !verifier.verifying => {
                verifier.verifying = true;
                self.next_check(zones).unwrap_or(Next::Done)
            }
            _ => Next::Done,
        }
    }

    /// A zone of the job's range that is not full, for a verifying writer whose zone is: the next one after
    /// it for sequential writes, an open or new one for random writes.
    pub(super) fn zone_with_room(&mut self, zones: &ZoneCache) -> Option<u32> {
        self.open_zones.retain(|&open| !zones.full(open));
        if let Some(&open) = self.open_zones.first().filter(|_| self.options.rw.is_random()) {
            return Some(open);
        }
        let zone = (self.first_zone..self.end_zone).find(|&zone| !zones.full(zone))?;
        self.cursor_zone = zone;
        if self.options.rw.is_random() {
            self.open_zones.push(zone);
        }
        Some(zone)
    }

    /// The data of a write of `blocks` at `lba` issued at `now`, when the job's data matters: a verify block
    /// (with the numberio it carries), or the buffer pattern. None: zeros.
    pub(super) fn write_data(&mut self, lba: u64, blocks: u64, now: u64) -> Option<(Vec<u8>, Option<u16>)> {
        let numberio = self.writes_issued as u16;
        self.writes_issued += 1;
        self.last_was_sync = false;
        let len = (blocks << self.geometry.lba_shift) as usize;
        if let Some(verifier) = &self.verify {
            let stamp = BlockStamp { numberio, thread: self.instance_id as u16 + 1, time_ns: now };
            let data = verifier.layout.fill(lba << self.geometry.lba_shift, len, stamp);
            let fixed = self.options.bssplit.is_empty() && !self.options.time_based;
            return Some((data, fixed.then_some(numberio)));
        }
        let pattern = self.options.buffer_pattern.as_ref()?;
        let mut data = vec![0; len];
        fill_pattern(&mut data, pattern);
        Some((data, None))
    }

    /// A block size from `bssplit`, by its weights, in LBAs.
    pub(super) fn draw_block_size(&mut self) -> u64 {
        let total: u64 = self.options.bssplit.iter().map(|(_, weight)| weight).sum();
        let mut ticket = self.rng.below(total.max(1));
        for &(bytes, weight) in &self.options.bssplit {
            if ticket < weight {
                return bytes >> self.geometry.lba_shift;
            }
            ticket -= weight;
        }
        self.options.bs_bytes >> self.geometry.lba_shift
    }

    pub(super) fn next_direction(&mut self, trims: bool) -> Direction {
        let reading = match self.options.rw {
            ReadWrite::Read | ReadWrite::RandRead => true,
            ReadWrite::ReadWrite | ReadWrite::RandRw => self.rng.below(100) < u64::from(self.options.rwmixread),
            _ => false,
        };
        match (trims, reading) {
            (true, _) => Direction::Trim,
            (false, true) => Direction::Read,
            (false, false) => Direction::Write,
        }
    }

    /// The zone the next I/O of `direction` goes to; None when there is nothing to read (with the job's error
    /// set, for a job that only reads).
    pub(super) fn pick_zone(&mut self, direction: Direction, zones: &ZoneCache) -> Option<u32> {
        match direction {
            Direction::Trim if self.options.rw == ReadWrite::RandTrim => Some(self.random_zone()),
            Direction::Trim => {
                let zone = self.cursor_zone;
                self.cursor_zone = if zone + 1 >= self.end_zone { self.first_zone } else { zone + 1 };
                Some(zone)
            }
            Direction::Read => self.read_zone(zones),
            Direction::Write | Direction::Sync => Some(self.write_zone()),
        }
    }

    pub(super) fn random_zone(&mut self) -> u32 {
        self.first_zone + self.rng.below(u64::from(self.end_zone - self.first_zone)) as u32
    }

    pub(super) fn trim_in(&mut self, zone: u32, zones: &mut ZoneCache) -> Io {
        let zone_start = self.geometry.zone_start_lba(zone);
        if self.options.rw == ReadWrite::Finish {
            zones.set_wp(zone, zone_start + self.geometry.zone_cap_lba);
            return Io::Finish { zone_start };
        }
        zones.set_wp(zone, zone_start);
        Io::Reset { zone_start }
    }

    /// The zone a sequential reader or writer moves to after `zone`: the next, past `zoneskip`'s zones,
    /// wrapping to the range's start (`setup_zbd_zone_mode`).
    pub(super) fn next_sequential_zone(&self, zone: u32) -> u32 {
        let next = u64::from(zone) + 1 + u64::from(self.skip_zones);
        if next >= u64::from(self.end_zone) {
            self.first_zone
        } else {
            next as u32
        }
    }

    /// Outside zbd mode: the LBA and length of the next I/O, a random block of the range or the next one,
    /// wrapping at the end.
    pub(super) fn unzoned_block(&mut self) -> (u64, u64) {
        let bs = self.bs_blocks;
        if let Some(stride) = self.stride.as_mut() {
            // fio's strided mode: zonesize bytes in a window of zonerange bytes, then the next window past
            // zoneskip, wrapping to the range's start; within a window, sequential or random.
            if stride.moved >= stride.size {
                stride.moved = 0;
                stride.start += stride.range + stride.skip;
                if stride.start >= self.end_lba {
                    stride.start = self.start_lba;
                }
                self.cursor_lba = stride.start;
            }
            let window_end = (stride.start + stride.range).min(self.end_lba);
            if self.cursor_lba < stride.start || self.cursor_lba + bs > window_end {
                self.cursor_lba = stride.start;
            }
            stride.moved += bs;
            if self.options.rw.is_random() {
                let blocks = ((window_end - stride.start) / bs).max(1);
                return (stride.start + self.rng.below(blocks) * bs, bs);
            }
            self.cursor_lba += bs;
            return (self.cursor_lba - bs, bs);
        }
        if let Some((pass, unit)) = self.pass.as_mut() {
            let block = pass.next_block(&mut self.rng);
            let covered = pass.claim(block, bs.div_ceil(*unit));
            return (self.start_lba + block * *unit, (covered * *unit).min(bs));
        }
        if self.options.rw.is_random() {
            let blocks = ((self.end_lba - self.start_lba) / bs).max(1);
            let block = match &self.skew {
                Some(picker) => picker.next(&mut self.rng) % blocks,
                None => self.rng.below(blocks),
            };
            return (self.start_lba + block * bs, bs);
        }
        if self.cursor_lba + bs > self.end_lba {
            self.cursor_lba = self.start_lba;
        }
        self.cursor_lba += bs;
        (self.cursor_lba - bs, bs)
    }

    /// A zone with at least a block size written (fio's `zbd_adjust_block` for reads): a random one, or for
    /// sequential reads the cursor's, moving to the next readable zone when the cursor reaches a write pointer.
    pub(super) fn read_zone(&mut self, zones: &ZoneCache) -> Option<u32> {
        let bs = self.bs_blocks;
        if self.readable.0 != (zones.version, bs) {
            let readable = (self.first_zone..self.end_zone).filter(|&zone| zones.written(zone) >= bs).collect();
            self.readable = ((zones.version, bs), readable);
        }
        let readable = &self.readable.1;
        if readable.is_empty() && self.options.rw.writes() {
            return None;
        }
        if readable.is_empty() {
            self.error = Some(IoFailure {
                status: Status::LbaOutOfRange,
                direction: Direction::Read,
                lba: self.start_lba,
                len_bytes: 0,
            });
            return None;
        }
        if self.options.rw.is_random() {
            let Some(picker) = &self.skew else {
                return Some(readable[self.rng.below(readable.len() as u64) as usize]);
            };
            // A skewed pick is a block of the job's range; fio moves a read of a zone without enough data to
            // another zone (`zbd_find_zone`), here the next readable one.
            let lba = self.start_lba + picker.next(&mut self.rng) * (self.options.bs_bytes >> self.geometry.lba_shift);
            let zone = self.geometry.zone_of(lba.min(self.end_lba - 1));
            self.drawn_lba = Some(lba);
            return Some(readable[readable.partition_point(|&candidate| candidate < zone) % readable.len()]);
        }
        let mut zone = self.geometry.zone_of(self.cursor_lba.min(self.end_lba - 1));
        if self.cursor_lba + bs > zones.wp[zone as usize] {
            // The zone the reader is done with: the one before a zone boundary it reached, the cursor's own
            // when it reached a write pointer; a reader that starts in an empty zone moves on unskipped.
            let start = self.geometry.zone_start_lba(zone);
            let next = match (self.cursor_lba == start, self.cursor_lba > self.start_lba) {
                (true, true) => self.next_sequential_zone(zone - 1),
                (true, false) => zone + 1,
                (false, _) => self.next_sequential_zone(zone),
            };
            let readable = &self.readable.1;
            zone = readable[readable.partition_point(|&candidate| candidate < next) % readable.len()];
            self.cursor_lba = self.geometry.zone_start_lba(zone);
        }
        Some(zone)
    }

    /// A read in `zone` below its write pointer; None if the zone no longer holds a block size.
    pub(super) fn read_in(&mut self, zone: u32, zones: &ZoneCache) -> Option<Io> {
        let bs = self.bs_blocks;
        if self.options.rw.is_random() {
            let written = zones.written(zone);
            let slots = (written / bs).max(1);
            // fio keeps a skewed pick's place in its zone, wrapped into the zone's written part.
            let slot = match self.drawn_lba.take() {
                Some(lba) => (lba % self.geometry.zone_size_lba) / bs % slots,
                None => self.rng.below(slots),
            };
            let lba = self.geometry.zone_start_lba(zone) + slot * bs;
            return (written >= bs).then_some(Io::Read { lba, blocks: bs });
        }
        if self.geometry.zone_of(self.cursor_lba) != zone || self.cursor_lba + bs > zones.wp[zone as usize] {
            return None;
        }
        let lba = self.cursor_lba;
        self.cursor_lba += bs;
        Some(Io::Read { lba, blocks: bs })
    }

    pub(super) fn write_in(&mut self, zone: u32, zones: &mut ZoneCache) -> Io {
        let bs = self.bs_blocks;
        let start = self.geometry.zone_start_lba(zone);
        // fio decides on the threshold reset before it looks at whether the zone is full, once per write
        // (`zbd_adjust_block`): the write that follows a reset was already counted.
        let due = !std::mem::take(&mut self.just_reset) && self.reset_due(zones);
        if zones.full(zone) || due && zones.written(zone) > 0 {
            zones.set_wp(zone, start);
            self.just_reset = true;
            return Io::Reset { zone_start: start };
        }
        let room = start + self.geometry.zone_cap_lba - zones.wp[zone as usize];
        let blocks = bs.min(room);
        let lba = zones.wp[zone as usize];
        zones.set_wp(zone, lba + blocks);
        if zones.full(zone) {
            self.open_zones.retain(|&open| open != zone);
            // fio's sequential offset moves on to the next zone once this one is written to its capacity.
            if !self.options.rw.is_random() {
                self.cursor_zone = self.next_sequential_zone(zone);
            }
        }
        if self.options.zone_append {
            Io::Append { zone_start: start, blocks }
        } else {
            Io::Write { lba, blocks }
        }
    }

    /// The zone the next write goes to: the sequential cursor, or for random writes a random zone among at
    /// most `max_open_zones` open ones. Writes go to the zone's write pointer and a full zone is reset first
    /// (fio's `zbd_adjust_block`); fio resets the zones of a job's range when it starts only for verification,
    /// which zonelab fio does not do.
    pub(super) fn write_zone(&mut self) -> u32 {
        if !self.options.rw.is_random() {
            return self.cursor_zone;
        }
        let limit = [self.max_open_zones, self.options.job_max_open_zones]
            .into_iter()
            .filter(|&limit| limit != 0)
            .min()
            .unwrap_or(u32::MAX) as usize;
        if self.open_zones.len() < limit {
            let zone = self.random_zone();
            if !self.open_zones.contains(&zone) {
                self.open_zones.push(zone);
            }
            return zone;
        }
        self.open_zones[self.rng.below(self.open_zones.len() as u64) as usize]
    }

    /// fio 3.33's zone_reset_threshold / zone_reset_frequency (`zbd_adjust_block`): with a frequency set, once
    /// the data below the device's write pointers reaches the threshold times the job's range, each write counts
    /// down a device-wide counter that starts at 1/frequency, and the write that brings it to zero resets its
    /// zone first (and restarts the count).
    pub(super) fn reset_due(&self, zones: &mut ZoneCache) -> bool {
        let frequency = self.options.zone_reset_frequency;
        if frequency <= 0.0 {
            return false;
        }
        let written = zones.written_total() << self.geometry.lba_shift;
        let range = (self.end_lba - self.start_lba) << self.geometry.lba_shift;
        if (written as f64) < range as f64 * self.options.zone_reset_threshold {
            return false;
        }
        zones.reset_countdown = zones.reset_countdown.saturating_sub(1);
        if zones.reset_countdown > 0 {
            return false;
        }
        zones.reset_countdown = reset_countdown_start(frequency);
        true
    }
}
