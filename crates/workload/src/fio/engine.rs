//! Runs fio jobs on a simulated device: each job instance (`numjobs` of them) keeps `iodepth` I/Os in flight
//! through the chosen scheduler, with fio's zoned-block-device rules in `zonemode=zbd`: writes go to write
//! pointers, a sequential writer moves to the next zone when one fills and resets a full zone before writing it
//! again, `max_open_zones` bounds the zones a job writes, `rw=trim` resets zones, and reads stay below write
//! pointers. Jobs separated by `stonewall` or `new_group` run one group after another on the same device. With
//! `verify`, writes carry fio's verify blocks and are read back and checked (`verify.rs`).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::rc::Rc;
use std::time::Instant;

use zonelab_device::{
    micros_to_ns, Built, CoreShare, DeviceBuilder, DeviceCounters, DeviceSpec, HostCosts, HostPath, HostSide,
    StoreChoice,
};
use zonelab_host::{HostFtl, Scheduled, SchedulerCounters, SchedulerKind};
use zonelab_media::FlashCounters;
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::sync::Notify;
use zonelab_runtime::{CommandQueue, Host, IoData, Output, QueuedCommand, Simulation};
use zonelab_zns::{Geometry, MediaStore, NamespaceKind, Status, ZoneSendAction, ZoneState};

use super::distribution::{Distribution, Picker};
use super::histogram::LatencyStats;
use super::iolog::{parse_iolog, IoTrace, TraceAction, TraceOp};
use super::logs::{IoLog, LogEntry};
use super::options::{FioError, FioInvocation, IoEngine, JobOptions, ReadWrite, SizeSpec};
use super::verify::{fill_pattern, BlockStamp, VerifyLayout};

/// Statistics of one direction (read, write or trim) of a job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirectionStats {
    pub ios: u64,
    pub bytes: u64,
    pub slat: LatencyStats,
    pub clat: LatencyStats,
    pub lat: LatencyStats,
    /// Bandwidth (KiB/s) and IOPS over each `SAMPLE_NS` of the job's device time in which it moved data in
    /// this direction, as fio samples them for `bw_min`, `bw_max`, `iops_stddev` and the rest.
    pub bw_samples: Vec<f64>,
    pub iops_samples: Vec<f64>,
}

impl DirectionStats {
    fn merge(&mut self, other: &DirectionStats) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.slat.merge(&other.slat);
        self.clat.merge(&other.clat);
        self.lat.merge(&other.lat);
        self.bw_samples.extend_from_slice(&other.bw_samples);
        self.iops_samples.extend_from_slice(&other.iops_samples);
    }
}

/// fio's default `bwavgtime` and `iopsavgtime`: 500 ms between bandwidth and IOPS samples.
pub const SAMPLE_NS: u64 = 500_000_000;

/// How a job's I/Os were spread, as fio's `IO depths` and `lat (usec)` lines report them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IoDistribution {
    /// I/Os by the job's I/Os in flight when each was issued, itself included, in fio's buckets: 1, 2-3, 4-7,
    /// 8-15, 16-31, 32-63, 64 and more (`io_u_mark_depth`).
    pub depth: [u64; 7],
    /// I/Os by completion latency (fio measures it from issue, `io_u_mark_latency`): below 2, 4, 10, 20, 50,
    /// 100, 250, 500, 750 and 1000 ns, then the same in us, then in ms followed by below 2000 ms and 2000 ms or
    /// more.
    pub latency: [u64; 32],
}

/// The upper bounds of fio's latency buckets within a unit.
pub const LATENCY_BOUNDS: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];

impl IoDistribution {
    fn record(&mut self, in_flight: u64, clat_ns: u64) {
        let depth = match in_flight {
            0 | 1 => 0,
            2..=3 => 1,
            4..=7 => 2,
            8..=15 => 3,
            16..=31 => 4,
            32..=63 => 5,
            _ => 6,
        };
        self.depth[depth] += 1;
        let (unit, value) = match clat_ns {
            0..1_000 => (0, clat_ns),
            1_000..1_000_000 => (10, clat_ns / 1_000),
            _ => (20, clat_ns / 1_000_000),
        };
        let slot = match LATENCY_BOUNDS.iter().position(|&bound| value < bound) {
            Some(slot) => unit + slot,
            None if value < 2000 => 30,
            None => 31,
        };
        self.latency[slot] += 1;
    }

    fn merge(&mut self, other: &IoDistribution) {
        for (mine, theirs) in self.depth.iter_mut().zip(other.depth) {
            *mine += theirs;
        }
        for (mine, theirs) in self.latency.iter_mut().zip(other.latency) {
            *mine += theirs;
        }
    }
}

/// What a job (or, with group_reporting, a group of job instances) did.
#[derive(Clone, Debug, PartialEq)]
pub struct JobResult {
    pub options: JobOptions,
    pub groupid: u32,
    /// Job instances folded into this result.
    pub instances: u32,
    /// errno of the first failure (0 if none) and fio's message for it.
    pub error: i32,
    pub error_message: Option<String>,
    pub read: DirectionStats,
    pub write: DirectionStats,
    pub trim: DirectionStats,
    /// Flushes (a replayed trace's `sync` lines): fio's `sync` section.
    pub sync: DirectionStats,
    /// The measured window (after ramp_time), in device nanoseconds.
    pub runtime_ns: u64,
    /// Summed over the instances folded in, as fio sums its threads': each one's measured window, the user and
    /// system CPU time its thread used there, and its context switches (`JobState::cpu`).
    pub thread_ns: u64,
    pub usr_ns: u64,
    pub sys_ns: u64,
    pub ctx: u64,
    pub zone_resets: u64,
    pub scheduler: SchedulerCounters,
    pub distribution: IoDistribution,
    /// Failed I/Os gone past under `continue_on_error`, and the errno of the first (0 if none).
    pub total_errors: u64,
    pub first_error: i32,
}

/// Device-wide figures of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupResult {
    pub groupid: u32,
    pub device_time_ns: u64,
    pub wall_seconds: f64,
    pub commands: u64,
    pub device: DeviceCounters,
    pub flash: FlashCounters,
}

/// Everything a fio run produced.
#[derive(Clone, Debug)]
pub struct FioResult {
    pub device_name: String,
    pub host_path: HostPath,
    pub jobs: Vec<JobResult>,
    pub groups: Vec<GroupResult>,
    pub energy: zonelab_media::EnergyConfig,
    /// Erase counts per block over the device's life when the run ended.
    pub wear: zonelab_media::EraseSummary,
    pub notes: Vec<String>,
    /// Options given before the first job or in `[global]`, as given.
    pub global_options: Vec<(String, String)>,
    /// The logs jobs asked for (`write_lat_log` and the rest), by thread number.
    pub io_logs: Vec<IoLog>,
    /// When the run started, in milliseconds since the Unix epoch (fio's `timestamp_ms`); the only figure
    /// besides the wall-clock ones that differs between runs of the same seed.
    pub started_unix_ms: u64,
}

/// fio's zone bookkeeping for one device, shared by every job: the write pointer as fio has issued writes.
/// Write pointers change only through `set_wp`, which keeps a Fenwick tree of blocks written per zone (so a
/// job's written share is a range sum, not a scan of every zone per write) and a version that tells readers
/// when their list of readable zones is stale.
struct ZoneCache {
    wp: Vec<u64>,
    geometry: Geometry,
    /// Fenwick tree over blocks written per zone (1-based).
    written_tree: Vec<u64>,
    version: u64,
    /// fio's zone locks (`zbd.c`, `zone_lock`): a job instance holds a zone from choosing an offset in it until
    /// the I/O completes. The lock is recursive, so one instance keeps iodepth I/Os in a zone; another waits
    /// until all of them complete. By zone: the holding instance and its I/Os in flight there.
    holders: HashMap<u32, (usize, u32)>,
    /// fio's `write_cnt`: writes over the reset threshold left until the next threshold reset.
    reset_countdown: u64,
}

/// Where fio's reset countdown starts for a frequency (`_zbd_reset_write_cnt`: 1/frequency, truncated).
fn reset_countdown_start(frequency: f64) -> u64 {
    if frequency > 0.0 {
        (1.0 / frequency).min(f64::from(u32::MAX)) as u64
    } else {
        u64::from(u32::MAX)
    }
}

impl ZoneCache {
    fn new(wp: Vec<u64>, geometry: Geometry) -> ZoneCache {
        let mut cache = ZoneCache {
            written_tree: vec![0; wp.len() + 1],
            wp: Vec::new(),
            geometry,
            version: 0,
            holders: HashMap::new(),
            reset_countdown: 0,
        };
        cache.wp = (0..wp.len() as u32).map(|zone| geometry.zone_start_lba(zone)).collect();
        for (zone, wp) in (0..).zip(wp) {
            cache.set_wp(zone, wp);
        }
        cache
    }

    fn set_wp(&mut self, zone: u32, wp: u64) {
        let old = self.written(zone);
        self.wp[zone as usize] = wp;
        let new = self.written(zone);
        let mut index = zone as usize + 1;
        while index < self.written_tree.len() {
            self.written_tree[index] = self.written_tree[index].wrapping_add(new.wrapping_sub(old));
            index += index & index.wrapping_neg();
        }
        self.version += 1;
    }

    /// Blocks written in zones `0..end`.
    fn written_below(&self, end: u32) -> u64 {
        let (mut sum, mut index) = (0u64, end as usize);
        while index > 0 {
            sum = sum.wrapping_add(self.written_tree[index]);
            index &= index - 1;
        }
        sum
    }

    fn full(&self, zone: u32) -> bool {
        self.wp[zone as usize] >= self.geometry.zone_start_lba(zone) + self.geometry.zone_cap_lba
    }

    fn written(&self, zone: u32) -> u64 {
        self.wp[zone as usize] - self.geometry.zone_start_lba(zone)
    }

    fn held_by_another(&self, zone: u32, instance: usize) -> bool {
        self.holders.get(&zone).is_some_and(|&(holder, _)| holder != instance)
    }

    fn hold(&mut self, zone: u32, instance: usize) {
        self.holders.entry(zone).or_insert((instance, 0)).1 += 1;
    }

    /// Releases one I/O's hold; true when the zone is free for other instances.
    fn release(&mut self, zone: u32) -> bool {
        let Some(hold) = self.holders.get_mut(&zone) else { return false };
        hold.1 -= 1;
        if hold.1 == 0 {
            self.holders.remove(&zone);
            return true;
        }
        false
    }
}

/// One job instance's state, shared by its iodepth workers.
struct JobState {
    options: JobOptions,
    /// This instance among every instance of its group, for zone locks.
    instance_id: usize,
    /// The open-zone bound of zbd mode, as fio sets it from `max_open_zones` and the device's limit (0: none).
    max_open_zones: u32,
    /// In zbd mode, the kind and zone of an I/O chosen but not issued because another instance holds the zone.
    waiting: Option<(Direction, u32)>,
    geometry: Geometry,
    first_zone: u32,
    end_zone: u32,
    start_lba: u64,
    end_lba: u64,
    bs_blocks: u64,
    budget_bytes: u64,
    issued_bytes: u64,
    issued_ios: u64,
    cursor_lba: u64,
    cursor_zone: u32,
    /// zbd mode: zones a sequential job skips after each one it is done with (`zoneskip`).
    skip_zones: u32,
    /// Strided mode (`zonemode=strided`): the window's start, its size and the bytes moved in it, the bytes
    /// per window (`zonesize`), and the skip after it, in LBAs.
    stride: Option<Stride>,
    open_zones: Vec<u32>,
    /// `random_distribution` other than uniform: draws blocks of the job's range, and the last draw of a zbd
    /// read until its offset is chosen.
    skew: Option<Picker>,
    drawn_lba: Option<u64>,
    /// The last I/O was a reset a write asked for; that write comes next and has been counted.
    just_reset: bool,
    /// The zones this job may read (written at least one block size), as of a `ZoneCache` version.
    readable: ((u64, u64), Vec<u32>),
    deadline_ns: u64,
    ramp_end_ns: u64,
    next_issue_ns: u64,
    rng: SplitMix64,
    /// The host path's CPU time per command on the job's thread (to submit it, fio's slat, and to reap it), and
    /// the kblockd worker's wait where Linux defers the dispatch.
    cost: JobHostCost,
    /// Until when the job's thread is busy on its core with the CPU work of its commands.
    core_busy_until_ns: u64,
    /// The job's thread on the host's cores.
    thread: JobThread,
    /// fio's loop of submissions and reaps for an asynchronous job (None for psync's one I/O a call).
    fio_loop: Option<FioLoop>,
    /// When the kblockd worker that dispatches this job's deferred commands runs next (or last ran): the worker
    /// of the job's core's hardware queue.
    dispatch_run_ns: u64,
    read: DirectionStats,
    write: DirectionStats,
    trim: DirectionStats,
    /// Flushes of a replayed trace: fio's `sync` section.
    sync: DirectionStats,
    last_completion_ns: u64,
    error: Option<IoFailure>,
    zone_resets: u64,
    /// Device time at the last I/O issued, and how many I/Os in a row were issued at it.
    still_at_ns: u64,
    still_ios: u64,
    /// The job stopped because device time stood still (`STILL_IOS_BOUND`).
    stalled: bool,
    in_flight: u64,
    distribution: IoDistribution,
    /// Start of the current bandwidth sample, and the bytes and I/Os by direction at that instant.
    sample_start_ns: u64,
    sampled: [(u64, u64); 3],
    /// Device time the job started, and its completed I/Os when it writes fio's logs.
    started_ns: u64,
    log: Option<Vec<LogEntry>>,
    /// I/Os that failed and were gone past (`continue_on_error`), and the errno of the first.
    total_errors: u64,
    first_error: Option<i32>,
    /// Writes issued so far: fio's `numberio` of the next write.
    writes_issued: u64,
    verify: Option<Verifier>,
    /// `read_iolog`: the trace's I/Os left, and when the last one was issued.
    replay: Option<(VecDeque<TraceOp>, u64)>,
    /// `write_iolog`: the trace of the I/Os issued.
    trace: Option<IoTrace>,
    /// Device time before which the next I/O may not be issued (a replayed trace's delay).
    not_before_ns: u64,
    /// The first block that read back wrong, in fio's words (the job stops on it unless `continue_on_error`
    /// covers verify).
    verify_error: Option<String>,
}

/// fio's strided zone mode (`setup_strided_zone_mode`), in LBAs.
struct Stride {
    start: u64,
    range: u64,
    size: u64,
    skip: u64,
    moved: u64,
}

/// fio's verification of one job instance: the written blocks not yet checked (`io_hist_list`), the
/// `verify_backlog` batches, and the verify phase after the writes (`do_verify`).
struct Verifier {
    layout: VerifyLayout,
    /// Blocks written and not yet checked, oldest first: LBA, blocks, the numberio expected in the header
    /// (None when fio does not check it: more than one block size, or a time-based job), and the write's place
    /// in the log.
    pending: VecDeque<(u64, u64, Option<u16>, u64)>,
    /// The last logged write of each block written: a write that a later one overlaps is not checked, as fio
    /// drops an overlapped entry from its log (`log_io_piece`; random writes to a namespace that is not zoned
    /// overwrite blocks).
    latest: HashMap<u64, u64>,
    /// Writes logged so far, and checks left in the current backlog batch.
    logged: u64,
    batch_left: u64,
    writes_in_flight: u64,
    /// The writes are over: only checks remain.
    verifying: bool,
    /// Wakes workers waiting for the last writes to complete before the verify phase.
    drained: Rc<Notify>,
}

/// The errnos fio treats as non-fatal under `continue_on_error`.
mod libc_errno {
    pub const EIO: i32 = 5;
    pub const EILSEQ: i32 = 84;
}

/// I/Os a job may issue in a row without device time moving. On a preset with no latency at all (`instant`)
/// device time never reaches a runtime or deadline, so a time-bound job would never end; past this bound it
/// stops, and the run says so.
const STILL_IOS_BOUND: u64 = 1 << 20;

/// What a job does next.
enum Next {
    Issue(Io),
    /// In zbd mode: wait until another instance releases the zone this one chose.
    WaitForZone,
    /// Verify phase: wait until the writes still in flight complete, then check them.
    WaitForWrites(Rc<Notify>),
    Done,
}

/// The direction an I/O is counted in, as fio reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Read,
    Write,
    /// Zone resets and finishes, which fio counts as trims.
    Trim,
    /// Flushes, which only a replayed trace issues (fio's `sync`).
    Sync,
}

impl Direction {
    fn name(self) -> &'static str {
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
struct IoFailure {
    status: Status,
    direction: Direction,
    lba: u64,
    len_bytes: u64,
}

/// One I/O a worker issues.
enum Io {
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
    fn bytes(&self, geometry: &Geometry) -> u64 {
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
    fn data_bytes(&self, geometry: &Geometry) -> u64 {
        match self {
            Io::Reset { .. } | Io::Finish { .. } | Io::Trim { .. } => 0,
            _ => self.bytes(geometry),
        }
    }

    /// The command it becomes, the direction it is counted in and the LBA it names.
    fn command(&self, lba_shift: u32) -> (Direction, QueuedCommand, u64) {
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
    fn traced(&self, geometry: &Geometry) -> Option<(TraceAction, u64, u64)> {
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
    fn next_io(&mut self, now: u64, zones: &mut ZoneCache) -> Next {
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
                    let Some(zone) = self.pick_zone(direction, zones) else { return Next::Done };
                    (direction, zone)
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
            let (lba, blocks) = (self.unzoned_lba(), self.bs_blocks);
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

    fn failed(&self) -> bool {
        self.error.is_some() || self.verify_error.is_some()
    }

    /// The next check of a written block, when one is due: in a `verify_backlog` batch, or in the verify phase
    /// (where the job ends, or waits for its last writes, once nothing is left to check).
    fn next_check(&mut self, zones: &mut ZoneCache) -> Option<Next> {
        let verifier = self.verify.as_mut()?;
        if !verifier.verifying && verifier.batch_left == 0 {
            return None;
        }
        while let Some((lba, blocks, numberio, index)) = verifier.pending.pop_front() {
            if (lba..lba + blocks).any(|block| verifier.latest.get(&block) != Some(&index)) {
                continue;
            }
            if self.options.zonemode_zbd {
                let zone = self.geometry.zone_of(lba);
                if zones.held_by_another(zone, self.instance_id) {
                    verifier.pending.push_front((lba, blocks, numberio, index));
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
    fn end_writes(&mut self, zones: &mut ZoneCache) -> Next {
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
    fn zone_with_room(&mut self, zones: &ZoneCache) -> Option<u32> {
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
    fn write_data(&mut self, lba: u64, blocks: u64, now: u64) -> Option<(Vec<u8>, Option<u16>)> {
        let numberio = self.writes_issued as u16;
        self.writes_issued += 1;
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
    fn draw_block_size(&mut self) -> u64 {
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

    fn next_direction(&mut self, trims: bool) -> Direction {
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

    /// The zone the next I/O of `direction` goes to; None (with the job's error set) when there is nothing to
    /// read.
    fn pick_zone(&mut self, direction: Direction, zones: &ZoneCache) -> Option<u32> {
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

    fn random_zone(&mut self) -> u32 {
        self.first_zone + self.rng.below(u64::from(self.end_zone - self.first_zone)) as u32
    }

    fn trim_in(&mut self, zone: u32, zones: &mut ZoneCache) -> Io {
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
    fn next_sequential_zone(&self, zone: u32) -> u32 {
        let next = u64::from(zone) + 1 + u64::from(self.skip_zones);
        if next >= u64::from(self.end_zone) {
            self.first_zone
        } else {
            next as u32
        }
    }

    /// Outside zbd mode: a random block of the range, or the next one, wrapping at the end.
    fn unzoned_lba(&mut self) -> u64 {
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
                return stride.start + self.rng.below(blocks) * bs;
            }
            self.cursor_lba += bs;
            return self.cursor_lba - bs;
        }
        if self.options.rw.is_random() {
            let blocks = ((self.end_lba - self.start_lba) / bs).max(1);
            let block = match &self.skew {
                Some(picker) => picker.next(&mut self.rng) % blocks,
                None => self.rng.below(blocks),
            };
            return self.start_lba + block * bs;
        }
        if self.cursor_lba + bs > self.end_lba {
            self.cursor_lba = self.start_lba;
        }
        self.cursor_lba += bs;
        self.cursor_lba - bs
    }

    /// A zone with at least a block size written (fio's `zbd_adjust_block` for reads): a random one, or for
    /// sequential reads the cursor's, moving to the next readable zone when the cursor reaches a write pointer.
    fn read_zone(&mut self, zones: &ZoneCache) -> Option<u32> {
        let bs = self.bs_blocks;
        if self.readable.0 != (zones.version, bs) {
            let readable = (self.first_zone..self.end_zone).filter(|&zone| zones.written(zone) >= bs).collect();
            self.readable = ((zones.version, bs), readable);
        }
        let readable = &self.readable.1;
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
    fn read_in(&mut self, zone: u32, zones: &ZoneCache) -> Option<Io> {
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

    fn write_in(&mut self, zone: u32, zones: &mut ZoneCache) -> Io {
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
    fn write_zone(&mut self) -> u32 {
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
    fn reset_due(&self, zones: &mut ZoneCache) -> bool {
        let frequency = self.options.zone_reset_frequency;
        if frequency <= 0.0 {
            return false;
        }
        let written = zones.written_below(zones.wp.len() as u32) << self.geometry.lba_shift;
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

/// What the host path costs a job per command, in nanoseconds: CPU time on the job's core, and the wait for the
/// kblockd worker when Linux defers a command's dispatch to it.
#[derive(Clone, Copy, Debug)]
struct JobHostCost {
    submit_ns: u64,
    complete_ns: u64,
    /// The kblockd worker's wait for reads and for writes on the kernel path (0: dispatched by the submitting
    /// call). fio submits one iocb per `io_submit` (its default `iodepth_batch_submit=1`), and Linux's aio plugs
    /// only calls of more than two (`AIO_PLUG_THRESHOLD`, see `Submission`), and psync's direct reads do not
    /// plug: a scheduler defers them, none issues them directly. A block device's writes hold a plug
    /// (`blkdev_write_iter`) that psync's sleep until completion flushes, which defers them under any scheduler.
    read_dispatch_ns: u64,
    write_dispatch_ns: u64,
}

impl JobHostCost {
    /// What `job`'s I/O engine costs per command, with the device's scheduler's own work (mq-deadline's, and
    /// ZINC's, which is built on it) on the paths through the block layer.
    fn of(job: &JobOptions, costs: &HostCosts, scheduler: SchedulerKind) -> JobHostCost {
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
    fn dispatch_ns(&self, direction: Direction) -> u64 {
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
struct FioLoop {
    submit: u32,
    complete_min: u32,
    complete_max: u32,
    low: u32,
    /// Reaped workers that wait for the queue to drain to `low` before they queue again.
    held: Vec<Rc<Reaped>>,
    /// Workers on the job's thread: started or reaped and not yet queued, nor waiting (for a zone, for their
    /// rate) or done. When none is, the thread submits what it has queued and waits for completions.
    runnable: u32,
    /// Workers queued for the next submission, and the call they wait for.
    queued: u32,
    next_submission: Rc<SubmissionCall>,
    /// Commands submitted and not yet reaped; of them, the completed ones, oldest first, each with what its reap
    /// will say.
    outstanding: u32,
    completed: VecDeque<Rc<Reaped>>,
}

/// A completed command's reap, as fio's thread does it: when the reap ends, and whether the worker must then
/// wait for the queue to drain to its low-water mark before it queues again. `changed` wakes that worker
/// alone: woken together, a deep queue's workers would all look at every step of the thread, a cost that grows
/// with the square of the depth.
#[derive(Default)]
struct Reaped {
    at: Cell<Option<u64>>,
    held: Cell<bool>,
    changed: Notify,
}

/// The submission call the workers queued for it wait for: its times once the thread makes it.
#[derive(Default)]
struct SubmissionCall {
    made: Cell<Option<Submission>>,
    changed: Notify,
}

/// One submission call: when its CPU work ended (fio's issue time of each of its I/Os), and whether Linux
/// plugged it. `io_submit` plugs a call that carries more than two iocbs (fs/aio.c, `AIO_PLUG_THRESHOLD`), as
/// io_uring does a submission of more than two SQEs, and the plug's flush at the end of the call dispatches the
/// requests from the submitting thread, under a scheduler too: no kblockd worker.
#[derive(Clone, Copy, Debug)]
struct Submission {
    issued_ns: u64,
    plugged: bool,
}

impl FioLoop {
    /// An asynchronous job's loop; none for psync, which submits one I/O a call and reaps it in the same call.
    /// A `complete_max` below `complete_min` (fio's default is 0) becomes `complete_min`, as fio's
    /// `fixup_options` (init.c) makes it.
    fn of(job: &JobOptions) -> Option<FioLoop> {
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
    fn settle_batches(&mut self, now: u64) {
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
    fn prepare_on_core(&mut self, now: u64) -> u64 {
        let prepared_ns = self.thread.work(self.core_busy_until_ns.max(now), 0, false);
        self.core_busy_until_ns = self.work_on_core(prepared_ns, self.cost.submit_ns);
        prepared_ns
    }

    /// Spends `work` nanoseconds of CPU on the job's thread from `start` on; returns when it ends.
    fn work_on_core(&mut self, start: u64, work: u64) -> u64 {
        self.thread.work(start, work, start >= self.ramp_end_ns)
    }

    /// The thread's CPU time in the measured window and its context switches there: a polling thread is busy
    /// whenever it is on its core (in user space, spinning on its queue, for SPDK and `sqthread_poll`; in the
    /// kernel for `hipri`, which polls inside `io_uring_enter`) and is switched out only to let another take
    /// its turn; a thread that sleeps works only for its commands (in the kernel, on the kernel's paths) and is
    /// switched out each time it waits. Returns (user, system, context switches).
    fn cpu(&self, window: (u64, u64)) -> (u64, u64, u64) {
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

    /// When a command issued at `issued_ns` reaches the device: then, or, when Linux defers its dispatch
    /// (`dispatch_ns` > 0), when the kblockd worker runs next; a command that finds a run already due leaves
    /// with it.
    fn dispatched_at(&mut self, issued_ns: u64, dispatch_ns: u64) -> u64 {
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
    fn set_waiting(&mut self, now: u64, waiting: bool) {
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
struct JobThread {
    turns: Option<(CoreShare, u32)>,
    cpu_ns: u64,
    wakeups: u64,
}

impl JobThread {
    /// When `work` nanoseconds of CPU begun at `start` end: at once on a core of its own, after the turns it is
    /// off its core when it takes turns. With no work, when it can begin. `measured` counts the work.
    fn work(&mut self, start: u64, work: u64, measured: bool) -> u64 {
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
    fn reap(&mut self, now: u64, busy_until: u64, work: u64, measured: bool) -> u64 {
        if measured {
            self.wakeups += u64::from(now > busy_until);
        }
        self.work(busy_until.max(now), work, measured)
    }
}

/// Queues a command for the job's next submission call (an asynchronous job) and waits for the call: the command
/// reaches the scheduler when the call's CPU work ends, or, in a call Linux does not plug, when the kblockd
/// worker runs next where Linux defers the dispatch. Returns fio's two timestamps, as `submit_on_job_core`.
async fn submit_in_batch<S: MediaStore + 'static>(
    queue: &JobQueue<S>,
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
    sleep_until(queue, arrival).await;
    SubmitTimes { prepared_ns, issued_ns: submission.issued_ns }
}

/// Reaps a completed command on the job's thread: an asynchronous job's in the round fio's thread reaps it in
/// (see `FioLoop`), psync's on its own, its CPU work after what the core is busy with. Resolves when the reap ends,
/// with the reap when the worker may have to wait before it queues again (`wait_to_queue`).
async fn reap<S: MediaStore + 'static>(queue: &JobQueue<S>, state: &Rc<RefCell<JobState>>) -> Option<Rc<Reaped>> {
    let now = queue.now_ns();
    let waiting = {
        let mut job = state.borrow_mut();
        match job.fio_loop.as_mut() {
            Some(fio_loop) => {
                let reaped = Rc::new(Reaped::default());
                fio_loop.completed.push_back(Rc::clone(&reaped));
                job.settle_batches(now);
                Some(reaped)
            }
            None => None,
        }
    };
    let Some(reaped) = waiting else {
        reap_on_job_core(queue, state).await;
        return None;
    };
    let reaped_ns = wait_for(&reaped.changed, || reaped.at.get()).await;
    sleep_until(queue, reaped_ns).await;
    Some(reaped)
}

/// Waits until fio's thread has drained its queue to the low-water mark, if `reaped` is held for it.
async fn wait_to_queue(reaped: Option<Rc<Reaped>>) {
    let Some(reaped) = reaped else { return };
    wait_for(&reaped.changed, || (!reaped.held.get()).then_some(())).await;
}

/// Waits until `ready` has a value, looking again each time fio's thread notifies `changed`.
async fn wait_for<T>(changed: &Notify, ready: impl Fn() -> Option<T>) -> T {
    loop {
        if let Some(value) = ready() {
            return value;
        }
        changed.notified().await;
    }
}

/// Sleeps until device time `at` (not at all if it has passed).
async fn sleep_until<S: MediaStore + 'static>(queue: &JobQueue<S>, at: u64) {
    let now = queue.now_ns();
    if at > now {
        queue.sleep(at - now).await;
    }
}

/// Runs `wait` with the worker off fio's thread (waiting for a zone, for written blocks to verify, for its
/// rate), so that an asynchronous job's thread may submit and reap meanwhile.
async fn off_the_thread<S: MediaStore + 'static>(
    queue: &JobQueue<S>,
    state: &Rc<RefCell<JobState>>,
    wait: impl Future<Output = ()>,
) {
    state.borrow_mut().set_waiting(queue.now_ns(), true);
    wait.await;
    state.borrow_mut().set_waiting(queue.now_ns(), false);
}

/// Submits a synchronous job's one I/O on its thread: the command reaches the scheduler when its submission's CPU
/// work ends, after what the job's core is busy with, or when Linux defers its dispatch, when the kblockd worker
/// runs next. Resolves at the command's arrival, and returns fio's two timestamps for it: when the core began its
/// submission and when that CPU work ended.
async fn submit_on_job_core<S: MediaStore + 'static>(
    queue: &JobQueue<S>,
    state: &Rc<RefCell<JobState>>,
    direction: Direction,
) -> SubmitTimes {
    let now = queue.now_ns();
    let (arrival, times) = {
        let mut job = state.borrow_mut();
        let dispatch_ns = job.cost.dispatch_ns(direction);
        let prepared_ns = job.prepare_on_core(now);
        let issued_ns = job.core_busy_until_ns;
        (job.dispatched_at(issued_ns, dispatch_ns), SubmitTimes { prepared_ns, issued_ns })
    };
    sleep_until(queue, arrival).await;
    times
}

/// fio's timestamps of one I/O before the device: `start_time` (prepared) and `issue_time` (issued).
#[derive(Clone, Copy, Debug)]
struct SubmitTimes {
    prepared_ns: u64,
    issued_ns: u64,
}

/// Reaps a completed command on the job's thread: its CPU work runs after what the core is busy with.
async fn reap_on_job_core<S: MediaStore + 'static>(queue: &JobQueue<S>, state: &Rc<RefCell<JobState>>) {
    let now = queue.now_ns();
    let done = {
        let mut job = state.borrow_mut();
        let (busy_until, complete_ns, measured) =
            (job.core_busy_until_ns, job.cost.complete_ns, now >= job.ramp_end_ns);
        job.core_busy_until_ns = job.thread.reap(now, busy_until, complete_ns, measured);
        job.core_busy_until_ns
    };
    sleep_until(queue, done).await;
}

/// One worker: issue, wait, record, until the job is done.
/// What a job submits to: the device's scheduler, or a host FTL over it (`hostftl`).
enum JobQueue<S> {
    Direct(Scheduled<Host<S>>),
    HostFtl(HostFtl<Scheduled<Host<S>>>),
}

impl<S> Clone for JobQueue<S> {
    fn clone(&self) -> Self {
        match self {
            JobQueue::Direct(queue) => JobQueue::Direct(queue.clone()),
            JobQueue::HostFtl(ftl) => JobQueue::HostFtl(ftl.clone()),
        }
    }
}

impl<S: MediaStore + 'static> CommandQueue for JobQueue<S> {
    fn submit(&self, command: QueuedCommand) -> impl Future<Output = Result<Output, Status>> {
        let queue = self.clone();
        async move {
            match queue {
                JobQueue::Direct(scheduled) => scheduled.submit(command).await,
                JobQueue::HostFtl(ftl) => ftl.submit(command).await,
            }
        }
    }

    fn now_ns(&self) -> u64 {
        match self {
            JobQueue::Direct(queue) => queue.now_ns(),
            JobQueue::HostFtl(ftl) => ftl.now_ns(),
        }
    }

    fn geometry(&self) -> Geometry {
        match self {
            JobQueue::Direct(queue) => queue.geometry(),
            JobQueue::HostFtl(ftl) => ftl.geometry(),
        }
    }

    fn sleep(&self, duration_ns: u64) -> impl Future<Output = ()> {
        let queue = self.clone();
        async move {
            match queue {
                JobQueue::Direct(scheduled) => scheduled.sleep(duration_ns).await,
                JobQueue::HostFtl(ftl) => ftl.sleep(duration_ns).await,
            }
        }
    }
}

async fn worker<S: MediaStore + 'static>(
    queue: JobQueue<S>,
    state: Rc<RefCell<JobState>>,
    zones: Rc<RefCell<ZoneCache>>,
    zone_released: Rc<Notify>,
) {
    let lba_shift = queue.geometry().lba_shift;
    let (zoned, started) = {
        let job = state.borrow();
        (job.options.zonemode_zbd, job.started_ns)
    };
    sleep_until(&queue, started).await;
    let mut last_reap = None;
    loop {
        wait_to_queue(last_reap.take()).await;
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
        let (direction, mut command, lba) = io.command(lba_shift);
        let mut logged_write = None;
        if let (Io::Write { lba, blocks } | Io::Append { zone_start: lba, blocks }, QueuedCommand::Write { data, .. })
        | (
            Io::Write { lba, blocks } | Io::Append { zone_start: lba, blocks },
            QueuedCommand::Append { data, .. },
        ) = (&io, &mut command)
        {
            let mut job = state.borrow_mut();
            if let Some((bytes, numberio)) = job.write_data(*lba, *blocks, queue.now_ns()) {
                *data = IoData::Bytes(bytes);
                if let Some(verifier) = job.verify.as_mut() {
                    verifier.writes_in_flight += 1;
                    logged_write = Some((*lba, *blocks, numberio));
                }
            }
        }
        let is_internal_reset = {
            let job = state.borrow();
            direction == Direction::Trim
                && job.replay.is_none()
                && !matches!(job.options.rw, ReadWrite::Trim | ReadWrite::RandTrim | ReadWrite::Finish)
        };
        let submitted = queue.now_ns();
        if !is_internal_reset {
            let mut job = state.borrow_mut();
            let (geometry, started) = (job.geometry, job.started_ns);
            if let (Some(trace), Some((action, offset, len))) = (job.trace.as_mut(), io.traced(&geometry)) {
                trace.record(submitted.saturating_sub(started), action, offset, len);
            }
        }
        let in_flight = {
            let mut job = state.borrow_mut();
            job.in_flight += 1;
            job.in_flight
        };
        let asynchronous = state.borrow().fio_loop.is_some();
        let times = if asynchronous {
            submit_in_batch(&queue, &state, direction).await
        } else {
            submit_on_job_core(&queue, &state, direction).await
        };
        let result = queue.submit(command).await;
        last_reap = reap(&queue, &state).await;
        let completed = queue.now_ns();
        if zoned && zones.borrow_mut().release(queue.geometry().zone_of(lba)) {
            zone_released.notify_waiters();
        }
        let mut job = state.borrow_mut();
        job.in_flight -= 1;
        let (backlog, batch) = (job.options.verify_backlog, job.options.verify_batch);
        if let (Some(piece), Some(verifier)) = (logged_write, job.verify.as_mut()) {
            verifier.writes_in_flight -= 1;
            if result.is_ok() {
                let (lba, blocks, numberio) = piece;
                let index = verifier.logged;
                verifier.latest.extend((lba..lba + blocks).map(|block| (block, index)));
                verifier.pending.push_back((lba, blocks, numberio, index));
                verifier.logged += 1;
                if backlog != 0 && verifier.logged % backlog == 0 {
                    verifier.batch_left = if batch != 0 { batch } else { backlog };
                }
            }
            if verifier.writes_in_flight == 0 {
                verifier.drained.notify_waiters();
            }
        }
        if let (Io::Verify { lba, numberio, .. }, Ok(Output::Data(data))) = (&io, &result) {
            let file = job.options.filename.clone().unwrap_or_default();
            let offset = lba << lba_shift;
            let checked =
                job.verify.as_ref().map_or(Ok(()), |verifier| verifier.layout.check(&file, offset, data, *numberio));
            // The read counts as a read either way, as fio accounts it before its verify callback.
            if let Err(message) = checked {
                if job.options.continue_on_error.verify {
                    job.total_errors += 1;
                    job.first_error.get_or_insert(libc_errno::EILSEQ);
                } else {
                    job.verify_error.get_or_insert(message);
                }
            }
        }
        if let Err(status) = result {
            let coe = job.options.continue_on_error;
            let continued = if direction == Direction::Read { coe.read } else { coe.write };
            // fio goes on only past errors it deems non-fatal: EIO and EILSEQ.
            if continued && matches!(status.errno(), libc_errno::EIO | libc_errno::EILSEQ) {
                job.total_errors += 1;
                job.first_error.get_or_insert(status.errno());
                continue;
            }
            let len_bytes = io.data_bytes(&job.geometry);
            job.error.get_or_insert(IoFailure { status, direction, lba, len_bytes });
            // The job has failed: the next turn finds it done.
            continue;
        }
        if let Io::Reset { .. } = io {
            job.zone_resets += 1;
        }
        if is_internal_reset || completed < job.ramp_end_ns {
            continue;
        }
        let bytes = io.bytes(&job.geometry);
        let total = completed - times.prepared_ns;
        // fio samples no submission latency for a synchronous engine: its clat is the whole system call.
        let synchronous = job.options.ioengine == IoEngine::Psync;
        let slat = if synchronous { 0 } else { times.issued_ns - times.prepared_ns };
        job.last_completion_ns = job.last_completion_ns.max(completed);
        let stats = match direction {
            Direction::Read => &mut job.read,
            Direction::Write => &mut job.write,
            Direction::Trim => &mut job.trim,
            Direction::Sync => &mut job.sync,
        };
        stats.ios += 1;
        stats.bytes += bytes;
        if !synchronous {
            stats.slat.record(slat);
        }
        stats.clat.record(total - slat);
        stats.lat.record(total);
        job.distribution.record(in_flight, total - slat);
        job.sample(completed);
        let started = job.started_ns;
        if let Some(log) = job.log.as_mut() {
            let direction = match direction {
                Direction::Read => 0,
                Direction::Write => 1,
                Direction::Trim => 2,
                Direction::Sync => 3,
            };
            let time_ns = completed - started;
            log.push(LogEntry { time_ns, direction, bytes, slat_ns: slat, clat_ns: total - slat, lat_ns: total });
        }
    }
}

impl JobState {
    /// Whether the job has stopped issuing: an error, its deadline, or its size done.
    fn finished(&self, now: u64) -> bool {
        let checking = self.verify.as_ref().is_some_and(|verifier| !verifier.pending.is_empty());
        self.failed()
            || now >= self.deadline_ns
            || (!self.options.time_based && self.issued_bytes >= self.budget_bytes && !checking)
    }

    /// How much of its work the job has done, 0 to 1: of its runtime or of its size, whichever is further.
    fn done_share(&self, now: u64) -> f64 {
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
    fn sample(&mut self, now: u64) {
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
fn max_open_zones(job: &JobOptions, geometry: &Geometry) -> Result<u32, FioError> {
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
fn errno_message(failure: IoFailure, lba_bytes: u64) -> String {
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

/// How a run stands, for fio's status line (`Jobs: 1 (f=1): [r(1)][45.0%][r=371MiB/s][r=94.9k IOPS][eta 00m:05s]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub group: u32,
    /// Job instances still running, and what they do in fio's letters (`r(1),W(2)`).
    pub running: u32,
    pub patterns: String,
    /// Share of the group's work done, 0 to 1.
    pub done: f64,
    /// The emulated device's rates since the last report, per second of device time: read and write bytes
    /// and I/Os.
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    /// Wall-clock time the group has run.
    pub wall: std::time::Duration,
}

/// fio's pattern summary of running jobs: each letter with how many jobs run it, in order (`r(2),W(1)`).
fn patterns(letters: impl Iterator<Item = char>) -> String {
    let mut counts: Vec<(char, u32)> = Vec::new();
    for letter in letters {
        match counts.iter_mut().find(|(seen, _)| *seen == letter) {
            Some((_, count)) => *count += 1,
            None => counts.push((letter, 1)),
        }
    }
    counts.iter().map(|(letter, count)| format!("{letter}({count})")).collect::<Vec<_>>().join(",")
}

/// How often (wall-clock time) to report progress, and to whom.
pub type Reporter<'a> = (std::time::Duration, &'a mut dyn FnMut(&Progress));

/// `--status-interval`: every so often of device time (ns), a group's results so far, and the device's wear.
type StatusDumps<'a> = (u64, &'a mut dyn FnMut(&[JobResult], &GroupResult, &zonelab_media::EraseSummary));

/// Where a group started: device time, the device's counters, and the wall clock.
struct GroupStart {
    device_ns: u64,
    counters: DeviceCounters,
    flash: FlashCounters,
    wall: Instant,
}

/// Device time simulated between looks at the wall clock when progress is reported.
const PROGRESS_SLICE_NS: u64 = 1_000_000;

/// Runs every job of `invocation` on one simulated device; `default_seed` seeds the reordering of concurrent
/// submissions unless a job sets `seed`.
pub fn run(invocation: &FioInvocation, default_seed: u64) -> Result<FioResult, FioError> {
    run_reporting(invocation, default_seed, None, None)
}

/// `run`, calling `report` about every `every` of wall-clock time while jobs run, and `status` with the results
/// so far every `--status-interval` of device time. The results are the same as without them: the simulation
/// runs in slices of device time that end where it would have paused anyway.
pub fn run_reporting(
    invocation: &FioInvocation,
    default_seed: u64,
    mut report: Option<Reporter<'_>>,
    mut status: Option<&mut dyn FnMut(&FioResult)>,
) -> Result<FioResult, FioError> {
    let started_unix_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
    let first = &invocation.jobs[0];
    let (filename, host, mut notes) = check_jobs(invocation)?;
    // `preset:NAME[,key=value...]` is an ephemeral device with the null store; anything else is a device image.
    // Verification needs the data back: a preset keeps it in memory for the run unless its spec says otherwise.
    let verifies = invocation.jobs.iter().any(|job| job.verify.is_some());
    let store = if verifies { StoreChoice::Memory } else { StoreChoice::Null };
    let built =
        DeviceBuilder::new(DeviceSpec::parse(&filename)).host(host).store(store).build().map_err(FioError::Device)?;
    let seed = first.seed.unwrap_or(default_seed);
    let Built { device, config, host: host_side } = built;
    // The path's CPU per command is spent on each job's thread (`JobHostCost::of`, `submit_on_job_core`): a job, one
    // thread on one core, cannot submit and reap faster than it allows. The runtime adds only the rest of the
    // path's latency, the waits that occupy no core.
    let host_side = host_side.waits_only(&config.host);
    let device_geometry = device.geometry();
    // With a host FTL the jobs see the namespace it exports: randomly writable, as a conventional one.
    let hostftl = first.hostftl;
    let geometry = match hostftl {
        Some(_) if device_geometry.kind == NamespaceKind::Conventional => {
            return Err(FioError::Options(format!(
                "hostftl on {filename}, a conventional namespace: a host FTL runs over a zoned one"
            )));
        }
        Some(over_provisioning) => {
            HostFtl::<Scheduled<Host<Box<dyn MediaStore>>>>::exported_geometry(&device_geometry, over_provisioning)
                .map_err(|error| FioError::Options(error.to_string()))?
        }
        None => device_geometry,
    };
    // A conventional namespace is one range, every block of it readable.
    let zone_wps: Vec<u64> = match geometry.kind {
        NamespaceKind::Conventional => vec![geometry.nsze_lba],
        NamespaceKind::Zoned => (0..geometry.zones)
            .map(|zone| {
                let descriptor = device.namespace().zone(zone);
                match descriptor.state {
                    ZoneState::Full | ZoneState::ReadOnly | ZoneState::Offline => {
                        descriptor.start_lba + geometry.zone_cap_lba
                    }
                    _ => descriptor.wp_lba,
                }
            })
            .collect(),
    };
    if geometry.kind == NamespaceKind::Conventional {
        if let Some(job) = invocation.jobs.iter().find(|job| job.zonemode_zbd) {
            return Err(FioError::Options(format!(
                "job {}: zonemode=zbd on {filename}, a conventional namespace: it is not a zoned block device",
                job.name
            )));
        }
    } else if let Some(job) =
        invocation.jobs.iter().find(|job| matches!(job.rw, ReadWrite::Trim | ReadWrite::RandTrim) && !job.zonemode_zbd)
    {
        return Err(FioError::Options(format!(
            "job {}: rw=trim needs zonemode=zbd (zone resets) on {filename}, a zoned namespace; a conventional \
             namespace (ns= in the filename) takes trims as deallocates",
            job.name
        )));
    }
    let zones = Rc::new(RefCell::new(ZoneCache::new(zone_wps, geometry)));
    let simulation = Simulation::with_host(device, host_side, Some(seed));
    let conventional = device_geometry.kind == NamespaceKind::Conventional;
    let scheduler = scheduler_on(first, &device_geometry);
    if first.scheduler_defaulted {
        let why = match (scheduler, conventional) {
            (SchedulerKind::None, true) => "gets none, as Linux gives a namespace that is not zoned",
            (SchedulerKind::None, false) => "bypasses the block layer's scheduler",
            _ => "goes through the block layer, where Linux sets it on a zoned device",
        };
        notes.push(format!(
            "scheduler {}: ioengine {} {why} (choose with --scheduler=)",
            scheduler.name(),
            first.ioengine.name()
        ));
    }
    // One scheduler per device, as the block layer has: the first job's.
    let scheduled = Scheduled::new(simulation.host(), scheduler, 1280 << 10);
    let queue = match hostftl {
        Some(over_provisioning) => JobQueue::HostFtl(
            HostFtl::new(scheduled.clone(), over_provisioning).map_err(|error| FioError::Options(error.to_string()))?,
        ),
        None => JobQueue::Direct(scheduled.clone()),
    };
    if let Some(other) = invocation.jobs.iter().find(|job| !job.scheduler_defaulted && job.scheduler != scheduler) {
        notes.push(format!(
            "job {} asks for scheduler {}, but the device has one scheduler: {} (the first job's)",
            other.name,
            other.scheduler.name(),
            scheduler.name()
        ));
    }
    let zone_released = Rc::new(Notify::new());
    let mut run = GroupRunner {
        simulation,
        scheduled,
        queue,
        zones,
        zone_released,
        geometry,
        host_costs: config.host,
        threads: 0,
        io_logs: Vec::new(),
    };
    let mut results = Vec::new();
    let mut group_results = Vec::new();
    let energy = config.media.energy.clone();
    let snapshot = |jobs: Vec<JobResult>, groups: Vec<GroupResult>, wear, notes, io_logs| FioResult {
        device_name: config.name.clone(),
        host_path: host,
        jobs,
        groups,
        energy: energy.clone(),
        wear,
        notes,
        global_options: invocation.global_given.clone(),
        io_logs,
        started_unix_ms,
    };
    let status_interval_ns = invocation.status_interval_ns.filter(|_| status.is_some());
    for (groupid, group) in (0..).zip(job_groups(invocation)) {
        // A status dump shows the groups done and this one so far.
        let mut dump = |jobs: &[JobResult], group: &GroupResult, wear: &zonelab_media::EraseSummary| {
            let all_jobs = results.iter().chain(jobs).cloned().collect();
            let all_groups = group_results.iter().chain([group]).cloned().collect();
            if let Some(status) = status.as_mut() {
                status(&snapshot(all_jobs, all_groups, wear.clone(), Vec::new(), Vec::new()));
            }
        };
        let mut dumps = status_interval_ns.map(|every| {
            (every, &mut dump as &mut dyn FnMut(&[JobResult], &GroupResult, &zonelab_media::EraseSummary))
        });
        let (jobs, group_result, stalled_jobs) = run.run_group(groupid, &group, &mut report, dumps.as_mut())?;
        results.extend(jobs);
        let device = &group_result.device;
        if device.reads_of_unwritten > 0 {
            notes.push(format!(
                "group {groupid}: {} of its {} reads ({:.1} %) reached blocks no write had reached (at or past a \
                 zone's write pointer, or past its capacity): the device returns zeros for those without reading \
                 flash, so they complete sooner than reads of data (zonemode=zbd keeps reads to written blocks)",
                device.reads_of_unwritten,
                device.reads,
                device.reads_of_unwritten as f64 * 100.0 / device.reads as f64
            ));
        }
        group_results.push(group_result);
        for name in stalled_jobs {
            notes.push(format!(
                "job {name} stopped after {STILL_IOS_BOUND} I/Os in a row at one device instant: the device has no \
                 latency, so its runtime would never pass; bound the job by size instead"
            ));
        }
    }
    if let (JobQueue::HostFtl(ftl), Some(over_provisioning)) = (&run.queue, hostftl) {
        let counters = ftl.counters();
        notes.push(format!(
            "host FTL at {:.0} % over-provisioning: the jobs wrote {} blocks, its garbage collection moved {} and reset \
             {} zones (host write amplification {:.3}; the device's stays 1)",
            over_provisioning * 100.0,
            counters.host_blocks_written,
            counters.gc_blocks_moved,
            counters.gc_zones_reset,
            counters.write_amplification()
        ));
    }
    let wear = run.simulation.with_device(|device| device.media().erase_summary());
    Ok(snapshot(results, group_results, wear, notes, std::mem::take(&mut run.io_logs)))
}

/// Checks what the jobs ask of the device as a whole: one filename, a host path that can carry what they
/// issue. Returns the filename, the host path (the first job's) and notes on what differs from what was asked.
fn check_jobs(invocation: &FioInvocation) -> Result<(String, HostPath, Vec<String>), FioError> {
    let first = &invocation.jobs[0];
    let filename = first
        .filename
        .clone()
        .ok_or_else(|| FioError::Options("no filename given: use --filename=IMAGE or --filename=preset:NAME".into()))?;
    if let Some(other) = invocation.jobs.iter().find(|job| job.filename.as_deref() != Some(filename.as_str())) {
        let theirs = other.filename.as_deref().map_or("no filename".to_string(), |name| format!("filename {name}"));
        return Err(FioError::Options(format!(
            "job {} has {theirs}: zonelab runs every job of one invocation on one device ({filename})",
            other.name
        )));
    }
    let host = first.ioengine.host_path();
    let mut notes = Vec::new();
    if let Some(other) = invocation.jobs.iter().find(|job| job.ioengine.host_path() != host) {
        notes.push(format!(
            "job {} uses ioengine {}: its commands cost that path's host CPU, but the device is attached through {} \
             (the first job's)",
            other.name,
            other.ioengine.name(),
            host.name()
        ));
    }
    for job in &invocation.jobs {
        if job.zone_append && !host.carries_append() {
            return Err(FioError::Options(format!(
                "job {}: zone_append=1 needs an ioengine that carries zone append (io_uring_cmd or spdk), not {}",
                job.name,
                job.ioengine.name()
            )));
        }
        if job.verify.is_some() && job.zone_append {
            return Err(FioError::Options(format!(
                "job {}: verify with zone_append=1: an append's offset is known only when it completes, after its \
                 verify header is written",
                job.name
            )));
        }
        if job.verify.is_some() && job.zone_reset_frequency > 0.0 {
            return Err(FioError::Options(format!(
                "job {}: verify with zone_reset_frequency: a threshold reset loses data still to be verified (fio \
                 3.33 stops on an assertion)",
                job.name
            )));
        }
        if job.rw == ReadWrite::Finish && !job.zonemode_zbd {
            return Err(FioError::Options(format!("job {}: rw=finish needs zonemode=zbd", job.name)));
        }
        if job.nrfiles > 1 {
            notes.push(format!(
                "job {}: nrfiles={} with one filename is one file, as fio caps it at the files named",
                job.name, job.nrfiles
            ));
        }
        if !job.ignored.is_empty() {
            notes.push(format!(
                "job {}: ignored options with no meaning in a simulation: {}",
                job.name,
                job.ignored.join(" ")
            ));
        }
    }
    Ok((filename, host, notes))
}

/// The scheduler a job runs under on a namespace of `geometry`: the one it asks for, or the one Linux gives the
/// device (`IoEngine::default_scheduler` on a zoned one; none on a namespace that is not zoned).
fn scheduler_on(job: &JobOptions, geometry: &Geometry) -> SchedulerKind {
    if job.scheduler_defaulted && geometry.kind == NamespaceKind::Conventional {
        SchedulerKind::None
    } else {
        job.scheduler
    }
}

/// What fio 3.33 requires of the zone options (`zbd_verify_sizes`, strided mode's setup): in zbd mode
/// `zonesize` is the device's zone size and `zoneskip` a whole number of zones; strided mode needs a zonesize.
fn check_zone_options(job: &JobOptions, geometry: &Geometry) -> Result<(), FioError> {
    let device_bytes = geometry.nsze_lba << geometry.lba_shift;
    let zone_bytes = geometry.zone_size_lba << geometry.lba_shift;
    let file = job.filename.as_deref().unwrap_or_default();
    let zonesize = job.zonesize.map(|size| size.resolve(device_bytes, zone_bytes));
    let skip = job.zoneskip.resolve(device_bytes, zone_bytes);
    if job.zonemode_zbd {
        if let Some(size) = zonesize.filter(|&size| size != zone_bytes) {
            return Err(FioError::Options(format!(
                "{file}: zonesize {size} does not match the device zone size {zone_bytes}."
            )));
        }
        if !skip.is_multiple_of(zone_bytes) {
            return Err(FioError::Options(format!(
                "{file}: zoneskip {skip} is not a multiple of the device zone size {zone_bytes}."
            )));
        }
    }
    if job.zonemode_strided && zonesize.unwrap_or(0) == 0 {
        return Err(FioError::Options(format!("job {}: zonemode=strided needs a zonesize", job.name)));
    }
    Ok(())
}

/// Bytes each verify header covers: `verify_interval`, else the smallest block size (fio's `min_bs`).
fn verify_interval(job: &JobOptions) -> u64 {
    let smallest = job.bssplit.iter().map(|&(bytes, _)| bytes).chain([job.bs_bytes]).min().unwrap_or(job.bs_bytes);
    job.verify_interval.unwrap_or(smallest)
}

/// What fio 3.33 requires of a verifying job's sizes (`zbd_verify_bs`, `fixup_options`): each block size
/// divides the zone size in zbd mode, and is a whole number of verify intervals.
fn check_verify_sizes(job: &JobOptions, geometry: &Geometry) -> Result<(), FioError> {
    if job.verify.is_none() {
        return Ok(());
    }
    let zone_bytes = geometry.zone_size_lba << geometry.lba_shift;
    let interval = verify_interval(job);
    for bytes in job.bssplit.iter().map(|&(bytes, _)| bytes).chain([job.bs_bytes]) {
        if job.zonemode_zbd && !zone_bytes.is_multiple_of(bytes) {
            return Err(FioError::Options(format!(
                "job {}: block size {bytes} is not a divisor of the zone size {zone_bytes}",
                job.name
            )));
        }
        if bytes % interval != 0 {
            return Err(FioError::Options(format!(
                "job {}: block size {bytes} is not a multiple of verify_interval {interval}",
                job.name
            )));
        }
    }
    Ok(())
}

/// Jobs in the groups that run one after another: a job with `stonewall` or `new_group` starts a new one.
fn job_groups(invocation: &FioInvocation) -> Vec<Vec<&JobOptions>> {
    let mut groups: Vec<Vec<&JobOptions>> = Vec::new();
    for job in &invocation.jobs {
        if groups.is_empty() || job.stonewall || job.new_group {
            groups.push(Vec::new());
        }
        groups.last_mut().expect("a group exists").push(job);
    }
    groups
}

/// The LBA range `[start, end)` one instance of a job works on: its offset (moved by `offset_increment` per
/// instance) and size, aligned to zones in zbd mode; an error when it holds no block of the job's size.
fn instance_range(job: &JobOptions, instance: u32, geometry: &Geometry) -> Result<(u64, u64), FioError> {
    let device_bytes = geometry.nsze_lba << geometry.lba_shift;
    let zone_bytes = geometry.zone_size_lba << geometry.lba_shift;
    let offset = job.offset.resolve(device_bytes, zone_bytes)
        + u64::from(instance) * job.offset_increment.resolve(device_bytes, zone_bytes);
    let size = match job.filesize {
        Some((low, high)) => {
            // fio's `filesize` (`setup_files`): a device outside [low, high] is used as a file of that size,
            // drawn for a range and aligned down to the block size; the job's range ends there.
            let (low, high) = (low.resolve(device_bytes, zone_bytes), high.resolve(device_bytes, zone_bytes));
            let end = if device_bytes < low || device_bytes > high {
                let mut rng = SplitMix64::split(job.randseed, &format!("filesize/{}/{instance}", job.name));
                let drawn = low + rng.below(high.saturating_sub(low).saturating_add(1));
                drawn - drawn % job.bs_bytes.max(1)
            } else {
                device_bytes
            };
            end.saturating_sub(offset)
        }
        None => job.size.map_or(device_bytes.saturating_sub(offset), |size| size.resolve(device_bytes, zone_bytes)),
    };
    let (mut start_lba, mut end_lba) =
        (offset >> geometry.lba_shift, ((offset + size) >> geometry.lba_shift).min(geometry.nsze_lba));
    if job.zonemode_zbd {
        start_lba = start_lba.div_ceil(geometry.zone_size_lba) * geometry.zone_size_lba;
        end_lba = end_lba / geometry.zone_size_lba * geometry.zone_size_lba;
    }
    let bs_blocks = job.bs_bytes >> geometry.lba_shift;
    for bytes in job.bssplit.iter().map(|&(bytes, _)| bytes).chain([job.bs_bytes]) {
        if !bytes.is_multiple_of(u64::from(geometry.lba_size)) || bytes < u64::from(geometry.lba_size) {
            return Err(FioError::Options(format!(
                "job {}: bs={bytes} is not a multiple of the {}-byte LBA",
                job.name, geometry.lba_size
            )));
        }
    }
    if end_lba <= start_lba || end_lba - start_lba < bs_blocks {
        return Err(FioError::Options(format!(
            "job {}: the I/O range at offset {offset} of {size} bytes is empty on this device{}",
            job.name,
            if job.zonemode_zbd { " once aligned to zones" } else { "" }
        )));
    }
    Ok((start_lba, end_lba))
}

impl JobState {
    /// One instance of `job` over `[start_lba, end_lba)`, starting at device time `group_start`.
    fn new(
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
        // startdelay: the job's clock starts after it, as fio's does.
        let group_start = group_start.saturating_add(job.startdelay_ns);
        JobState {
            options: job.clone(),
            instance_id: 0,
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
            verify: job.verify.map(|method| Verifier {
                layout: VerifyLayout {
                    method,
                    interval: verify_interval(job) as usize,
                    pattern: job.verify_pattern.clone(),
                    randseed: job.randseed,
                },
                pending: VecDeque::new(),
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
        }
    }

    /// What the instance did, as fio reports a job.
    fn result(&self, groupid: u32, scheduler: SchedulerCounters) -> JobResult {
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
        JobResult {
            options: self.options.clone(),
            groupid,
            instances: 1,
            error,
            error_message,
            read: self.read.clone(),
            write: self.write.clone(),
            trim: self.trim.clone(),
            sync: self.sync.clone(),
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
    /// Folds another instance of the same job into this result (`group_reporting`).
    fn absorb(&mut self, other: JobResult) {
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
struct GroupRunner<S: MediaStore + 'static> {
    simulation: Simulation<S>,
    scheduled: Scheduled<Host<S>>,
    /// What the jobs submit to: the scheduler, or a host FTL over it.
    queue: JobQueue<S>,
    zones: Rc<RefCell<ZoneCache>>,
    /// Wakes instances waiting for a zone lock (see `ZoneCache::holders`).
    zone_released: Rc<Notify>,
    geometry: Geometry,
    host_costs: HostCosts,
    /// Job instances started so far: fio's thread numbers, which name the log files.
    threads: u32,
    io_logs: Vec<IoLog>,
}

impl<S: MediaStore + 'static> GroupRunner<S> {
    /// Runs one group of jobs to its end; returns their results (folded under `group_reporting`), the group's
    /// device-wide figures, and the jobs that stopped because device time stood still.
    fn run_group(
        &mut self,
        groupid: u32,
        group: &[&JobOptions],
        report: &mut Option<Reporter<'_>>,
        status: Option<&mut StatusDumps<'_>>,
    ) -> Result<(Vec<JobResult>, GroupResult, Vec<String>), FioError> {
        let geometry = self.geometry;
        self.reset_for_verify(group)?;
        let group_start = self.simulation.now_ns();
        let counters_before =
            self.simulation.with_device(|device| (device.counters().clone(), device.media().counters().clone()));
        let mut instances = Vec::new();
        // Polling threads never leave their cores: when they outnumber the host's, they take turns.
        let polling_threads = group.iter().filter(|job| job.polls()).map(|job| job.numjobs).sum();
        let share = self.host_costs.core_share(true, polling_threads);
        let mut polling_thread = 0;
        for &job in group {
            for instance in 0..job.numjobs {
                let range = instance_range(job, instance, &geometry)?;
                if let Some(fill) = job.prefill {
                    self.prefill(job, fill, range)?;
                }
                // fio restarts the device's reset countdown as each job opens the device (`zbd_file_reset`).
                self.zones.borrow_mut().reset_countdown = reset_countdown_start(job.zone_reset_frequency);
                let cost = JobHostCost::of(job, &self.host_costs, self.scheduled.kind());
                let mut state = JobState::new(job, instance, geometry, range, group_start, cost);
                // A job that named no scheduler runs under the device's, which it reports.
                if job.scheduler_defaulted {
                    state.options.scheduler = self.scheduled.kind();
                }
                state.instance_id = instances.len();
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
                    let (zones, released) = (Rc::clone(&self.zones), Rc::clone(&self.zone_released));
                    self.simulation.spawn(worker(self.queue.clone(), Rc::clone(&state), zones, released));
                }
                instances.push(state);
            }
        }
        let start = GroupStart {
            device_ns: group_start,
            counters: counters_before.0,
            flash: counters_before.1,
            wall: Instant::now(),
        };
        match (report.as_mut(), status) {
            (None, None) => {
                self.simulation.run();
            }
            (progress, status) => self.run_watched(groupid, &instances, &start, progress, status),
        }
        let (folded, group_result) = self.results(groupid, &instances, &start);
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
            if state.stalled {
                stalled_jobs.push(state.options.name.clone());
            }
        }
        stalled_jobs.dedup();
        Ok((folded, group_result, stalled_jobs))
    }

    /// Runs the group in slices of device time: its progress goes to `progress` every so often of wall-clock
    /// time, and a snapshot of its results to `status` every so often of device time (`--status-interval`).
    fn run_watched(
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
    fn results(
        &self,
        groupid: u32,
        instances: &[Rc<RefCell<JobState>>],
        start: &GroupStart,
    ) -> (Vec<JobResult>, GroupResult) {
        let (counters_after, flash_after) =
            self.simulation.with_device(|device| (device.counters().clone(), device.media().counters().clone()));
        let device_delta = counters_after.since(&start.counters);
        let group_result = GroupResult {
            groupid,
            device_time_ns: self.simulation.now_ns() - start.device_ns,
            wall_seconds: start.wall.elapsed().as_secs_f64(),
            commands: device_delta.reads + device_delta.writes + device_delta.appends + device_delta.zone_management,
            device: device_delta,
            flash: flash_after.since(&start.flash),
        };
        let mut folded: Vec<JobResult> = Vec::new();
        for state in instances {
            let state = state.borrow();
            let result = state.result(groupid, self.scheduled.counters());
            match folded.last_mut() {
                Some(previous) if state.options.group_reporting && previous.options.name == state.options.name => {
                    previous.absorb(result);
                }
                _ => folded.push(result),
            }
        }
        (folded, group_result)
    }

    /// fio resets the zones a verifying job writes before it starts (`zbd_file_reset`), so that no reset is
    /// needed, and no data lost, while it writes. The resets go through the device before the group's clock
    /// starts.
    fn reset_for_verify(&mut self, group: &[&JobOptions]) -> Result<(), FioError> {
        let geometry = self.geometry;
        let mut targets: Vec<(u32, String)> = Vec::new();
        for &job in group.iter().filter(|job| job.verify.is_some() && job.zonemode_zbd && job.rw.writes()) {
            for instance in 0..job.numjobs {
                let (start, end) = instance_range(job, instance, &geometry)?;
                for zone in geometry.zone_of(start)..=geometry.zone_of(end - 1) {
                    if self.zones.borrow().written(zone) > 0 && !targets.iter().any(|&(target, _)| target == zone) {
                        targets.push((zone, job.name.clone()));
                    }
                }
            }
        }
        if targets.is_empty() {
            return Ok(());
        }
        let failure = Rc::new(RefCell::new(None));
        let (queue, failed, resets) = (self.scheduled.clone(), Rc::clone(&failure), targets.clone());
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
            self.zones.borrow_mut().set_wp(zone, geometry.zone_start_lba(zone));
        }
        Ok(())
    }

    /// `prefill`: the zones of the range that hold nothing are written to `fill` (the zone capacity when
    /// None) beforehand, in no device time.
    fn prefill(&mut self, job: &JobOptions, fill: Option<SizeSpec>, range: (u64, u64)) -> Result<(), FioError> {
        let geometry = self.geometry;
        let device_bytes = geometry.nsze_lba << geometry.lba_shift;
        let zone_bytes = geometry.zone_size_lba << geometry.lba_shift;
        let cap_bytes = geometry.zone_cap_lba << geometry.lba_shift;
        let lba_bytes = u64::from(geometry.lba_size);
        let bytes = fill.map_or(cap_bytes, |size| size.resolve(device_bytes, zone_bytes).min(cap_bytes)) / lba_bytes
            * lba_bytes;
        for zone in geometry.zone_of(range.0)..=geometry.zone_of(range.1 - 1) {
            if self.zones.borrow().written(zone) > 0 {
                continue;
            }
            self.simulation
                .with_device(|device| device.precondition(zone, bytes))
                .map_err(|status| FioError::Prefill { job: job.name.clone(), zone, status })?;
            self.zones.borrow_mut().set_wp(zone, geometry.zone_start_lba(zone) + (bytes >> geometry.lba_shift));
        }
        Ok(())
    }
}
