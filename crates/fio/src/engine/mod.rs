//! Runs fio jobs on a simulated device: each job instance (`numjobs` of them) keeps `iodepth` I/Os in flight
//! through the chosen scheduler, with fio's zoned-block-device rules in `zonemode=zbd`: writes go to write
//! pointers, a sequential writer moves to the next zone when one fills and resets a full zone before writing it
//! again, `max_open_zones` bounds the zones a job writes, `rw=trim` resets zones, and reads stay below write
//! pointers. Jobs separated by `stonewall` or `new_group` run one group after another on the same device. With
//! `verify`, writes carry fio's verify blocks and are read back and checked (`verify.rs`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::rc::Rc;
use std::time::Instant;

use zonelab_device::{
    micros_to_ns, Built, CoreShare, DeviceBuilder, DeviceCounters, DeviceSpec, HostCosts, HostPath, HostSide,
    StoreChoice,
};
use zonelab_host::{host_ftl_geometry, HostFtl, HostFtlCounters, Scheduled, SchedulerCounters, SchedulerKind};
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
use super::randommap::{RandomGenerator, RandomPass};
use super::verify::{fill_pattern, BlockStamp, VerifyLayout};

mod checks;
mod group;
mod job;
mod targets;
mod thread;
mod worker;
mod zones;

use checks::*;
use group::*;
use job::*;
use targets::*;
use thread::*;
use worker::*;
use zonelab_host::trace::{self, IoKind, IoSpan};
use zones::*;

/// Statistics of one direction (read, write or trim) of a job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirectionStats {
    pub ios: u64,
    pub bytes: u64,
    /// The measured window of the job instances that moved data in this direction, the longest when several
    /// are folded (fio's per-direction `runtime`); 0 when none did.
    pub runtime_ns: u64,
    pub slat: LatencyStats,
    pub clat: LatencyStats,
    pub lat: LatencyStats,
    /// Bandwidth (KiB/s) and IOPS over each `SAMPLE_NS` of the job's device time in which it moved data in
    /// this direction, as fio samples them for `bw_min`, `bw_max`, `iops_stddev` and the rest.
    pub bw_samples: Vec<f64>,
    pub iops_samples: Vec<f64>,
}

impl DirectionStats {
    /// I/Os a second over its measured window (0 when it moved nothing).
    pub fn iops(&self) -> f64 {
        self.per_second(self.ios)
    }

    /// Bytes a second over its measured window (0 when it moved nothing).
    pub fn bytes_per_s(&self) -> f64 {
        self.per_second(self.bytes)
    }

    fn per_second(&self, amount: u64) -> f64 {
        if self.ios == 0 {
            0.0
        } else {
            amount as f64 * 1e9 / self.runtime_ns.max(1) as f64
        }
    }

    fn merge(&mut self, other: &DirectionStats) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.runtime_ns = self.runtime_ns.max(other.runtime_ns);
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

/// What a job (or, with group_reporting, the job instances of one reporting group) did.
#[derive(Clone, Debug, PartialEq)]
pub struct JobResult {
    pub options: JobOptions,
    /// fio's reporting group: the next one starts at a job with `stonewall` or `new_group`.
    pub groupid: u32,
    /// The run group it ran in, its index in `FioResult::groups`: the next one starts at a job with `stonewall`.
    pub run_group: u32,
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

/// Device-wide figures of one run group: the jobs between two `stonewall`s, which run side by side (and may
/// report in several groups, split by `new_group`).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupResult {
    pub run_group: u32,
    pub device_time_ns: u64,
    pub wall_seconds: f64,
    pub commands: u64,
    pub device: DeviceCounters,
    pub flash: FlashCounters,
    /// What the host FTL did in the group, when the jobs run on one (`hostftl`).
    pub host_ftl: Option<HostFtlCounters>,
}

/// Everything a fio run produced.
#[derive(Clone, Debug)]
pub struct FioResult {
    pub device_name: String,
    pub host_path: HostPath,
    pub jobs: Vec<JobResult>,
    /// The jobs as given, each with its reporting group, for fio's header lines (`jobs` may fold several).
    pub defined: Vec<(u32, JobOptions)>,
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
    host_ftl: Option<HostFtlCounters>,
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
    let Built { mut device, config, host: host_side } = built;
    if let Some(path) = &invocation.trace {
        trace::prepare_trace(path)
            .map_err(|error| FioError::Trace { path: path.display().to_string(), message: error.to_string() })?;
        device.enable_trace();
    }
    // The path's CPU per command is spent on each job's thread (`JobHostCost::of`, `JobState::submit_on_core`): a job, one
    // thread on one core, cannot submit and reap faster than it allows. The runtime adds only the rest of the
    // path's latency, the waits that occupy no core.
    let host_side = host_side.waits_only(&config.host);
    let (nsids, target_of) = namespaces_of(invocation, &device, config.default_nsid())?;
    if let Some(job) = invocation.jobs.iter().find(|job| job.hostftl.is_some()).filter(|_| nsids.len() > 1) {
        return Err(FioError::Options(format!(
            "job {}: hostftl with jobs on several namespaces: a host FTL runs under the jobs of one",
            job.name
        )));
    }
    let jobs_on = |index: usize| -> Vec<&JobOptions> {
        invocation.jobs.iter().filter(|job| target_of[job.filename.as_deref().unwrap_or_default()] == index).collect()
    };
    let mut checked = Vec::new();
    for (index, &nsid) in nsids.iter().enumerate() {
        checked.push(check_namespace(&device, nsid, &jobs_on(index))?);
    }
    let simulation = Simulation::with_host(device, host_side, Some(seed));
    let mut targets = Vec::new();
    for ((index, &nsid), checked) in nsids.iter().enumerate().zip(checked) {
        let mut target_notes = Vec::new();
        let target = target(&simulation, nsid, &jobs_on(index), checked, verifies, &mut target_notes)?;
        if invocation.trace.is_some() {
            target.scheduled.record_queues();
        }
        targets.push(target);
        // Jobs on several namespaces: each note says which one it is about.
        let prefix = if nsids.len() > 1 { format!("namespace {nsid}: ") } else { String::new() };
        notes.extend(target_notes.into_iter().map(|note| format!("{prefix}{note}")));
    }
    let firsts: Vec<&JobOptions> = (0..nsids.len()).map(|index| jobs_on(index)[0]).collect();
    let mut run = GroupRunner {
        simulation,
        targets,
        target_of: target_of.clone(),
        zone_released: Rc::new(Notify::new()),
        host_costs: config.host,
        threads: 0,
        io_logs: Vec::new(),
        spans: invocation.trace.is_some().then(Vec::new),
    };
    let mut results = Vec::new();
    let mut group_results = Vec::new();
    let energy = config.media.energy.clone();
    let run_groups = job_groups(invocation);
    let defined: Vec<(u32, JobOptions)> =
        run_groups.iter().flatten().map(|&(groupid, job)| (groupid, job.clone())).collect();
    let snapshot = |jobs: Vec<JobResult>, groups: Vec<GroupResult>, wear, notes, io_logs| FioResult {
        device_name: config.name.clone(),
        host_path: host,
        jobs,
        defined: defined.clone(),
        groups,
        energy: energy.clone(),
        wear,
        notes,
        global_options: invocation.global_given.clone(),
        io_logs,
        started_unix_ms,
    };
    let status_interval_ns = invocation.status_interval_ns.filter(|_| status.is_some());
    for (run_group, group) in (0..).zip(&run_groups) {
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
        let (jobs, group_result, stalled_jobs) = run.run_group(run_group, group, &mut report, dumps.as_mut())?;
        let groups = match (group[0].0, group[group.len() - 1].0) {
            (first, last) if first == last => format!("group {first}"),
            (first, last) => format!("groups {first}-{last}"),
        };
        results.extend(jobs);
        let device = &group_result.device;
        if device.reads_of_unwritten > 0 {
            notes.push(format!(
                "{}: {} of its {} reads ({:.1} %) reached blocks no write had reached (at or past a \
                 zone's write pointer or its capacity; on a conventional namespace, never written or deallocated): \
                 the device returns zeros for those without reading flash, so they complete sooner than reads of \
                 data (zonemode=zbd keeps reads to written blocks; precondition= writes a conventional namespace)",
                groups,
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
    for (target, first) in run.targets.iter().zip(firsts) {
        let (JobQueue::HostFtl(ftl), Some(over_provisioning)) = (&target.queue, first.hostftl) else { continue };
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
    if let (Some(path), Some(spans)) = (&invocation.trace, &run.spans) {
        let queued: Vec<_> = run.targets.iter().flat_map(|target| target.scheduled.queue_spans()).collect();
        run.simulation
            .with_device(|device| trace::write_trace(path, "fio", spans, &[], &queued, device))
            .map_err(|error| FioError::Trace { path: path.display().to_string(), message: error.to_string() })?;
    }
    let wear = run.simulation.with_device(|device| device.media().erase_summary());
    Ok(snapshot(results, group_results, wear, notes, std::mem::take(&mut run.io_logs)))
}
