//! `zonelab file-churn`: the ReZNS paper's file workloads (seed 002, sections 4.2 and 4.3), after prefilling
//! half the device, on one of two file systems:
//! - `--fs=logfs` (the default): logfs, the F2FS-like file system the paper's F2FS stands for; the workloads
//!   are in `filebench.rs` (fio's random overwrites with fsyncs, filebench's varmail and fileserver as their
//!   `.f` files define them). A prefill is a file written through the file system.
//! - `--fs=zonefs`: one file per zone (Linux zonefs). `fio`: each job, for `rounds` rounds, writes a file of
//!   `file-size` in `bs` writes with an fsync every `fsync` writes, and deletes it (a zone reset); varmail and
//!   fileserver run filebench's flowops over `files` files per job, each file a zone, so every delete is a
//!   reset of a partly written zone. A prefill is zones written full before the run.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use serde::Serialize;
use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath};
use zonelab_host::{FsError, ZoneFs};
use zonelab_logfs::{FsActivity, LogFs, LogFsError, LogFsOptions, LogFsPlacement, LogFsStats, BLOCK};
use zonelab_zonedfs::{Extent, FileInfo, ZoneInfo};

use crate::zonemap::{draw, summarize, zone_map, MapSummary};
use zonelab_media::{EraseSummary, FlashCounters, FlashOp, OpSource};
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::{CommandQueue, IoData, Simulation};
use zonelab_zns::MediaStore;

use crate::args::{take, Slot, ToolError, ToolOption};
use crate::filebench;
use zonelab_host::trace::{write_device_trace, OperationSpan};

/// Which file workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileWorkload {
    Fio,
    Varmail,
    Fileserver,
}

/// Which file system the workloads run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileSystem {
    Logfs,
    Zonefs,
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileChurnSpec {
    pub workload: FileWorkload,
    pub fs: FileSystem,
    /// Files in the shared fileset (logfs varmail and fileserver; the paper's 1000 and 10,000).
    pub fileset_files: u32,
    /// Preset name, then `,key=value` overrides as `zonelab create --set` takes them.
    pub preset: String,
    pub jobs: u32,
    /// Files each job works on (varmail, fileserver; fio uses one).
    pub files_per_job: u32,
    /// Device time the mixes run for, in nanoseconds.
    pub runtime_ns: u64,
    pub file_bytes: u64,
    pub write_bytes: u64,
    /// An fsync after every N writes; 0 never.
    pub fsync_every: u64,
    pub rounds: u32,
    /// The fio workload's writes (on logfs) cut into this many windows of equal bytes, each reported with its
    /// throughput, tail latency and write amplification; 0 none.
    pub windows: u32,
    /// Share of the device's capacity written before the run.
    pub prefill: f64,
    pub seed: u64,
    /// Each job starts after a seeded delay below this, in nanoseconds, as threads a benchmark starts together
    /// do: jobs started at one instant move in lock step (every fsync at once), which real ones never do.
    pub start_jitter_ns: u64,
    /// The host's cores, which the jobs' system calls share (logfs).
    pub cores: u32,
    pub json: bool,
    /// Write the timed run as a Perfetto trace here: each job's span, with arrows to the commands it submitted,
    /// and the device's commands and flash operations (`zonelab_host::trace::write_device_trace`).
    #[serde(skip)]
    pub trace: Option<std::path::PathBuf>,
    /// Draw logfs's zone map at the end into this PNG: which files' data and nodes each zone holds.
    #[serde(skip)]
    pub map: Option<std::path::PathBuf>,
}

/// One millisecond: the spread of thread starts that a benchmark's setup leaves, several writes' worth here.
const DEFAULT_START_JITTER_NS: u64 = 1_000_000;

impl Default for FileChurnSpec {
    fn default() -> Self {
        FileChurnSpec {
            workload: FileWorkload::Fio,
            fs: FileSystem::Logfs,
            fileset_files: 1000,
            preset: "nvmevirt-rezns".into(),
            jobs: 64,
            files_per_job: 8,
            runtime_ns: 60_000_000_000,
            file_bytes: 15 << 20,
            write_bytes: 4096,
            fsync_every: 16,
            rounds: 3,
            windows: 0,
            prefill: 0.5,
            seed: 1,
            start_jitter_ns: DEFAULT_START_JITTER_NS,
            cores: filebench::PAPER_CORES,
            json: false,
            trace: None,
            map: None,
        }
    }
}

/// Parses `--key=value` options; an unknown option is an error that names it.
pub fn parse_args(args: &[String]) -> Result<FileChurnSpec, ToolError> {
    let mut spec = FileChurnSpec::default();
    for arg in args {
        let option = ToolOption::parse(arg)?;
        match option.key {
            "workload" => {
                spec.workload = match option.value()? {
                    "fio" => FileWorkload::Fio,
                    "varmail" => FileWorkload::Varmail,
                    "fileserver" => FileWorkload::Fileserver,
                    other => {
                        return Err(ToolError::Usage(format!(
                            "option workload: {other:?} is not fio, varmail or fileserver"
                        )))
                    }
                }
            }
            "fs" => {
                spec.fs = match option.value()? {
                    "logfs" => FileSystem::Logfs,
                    "zonefs" => FileSystem::Zonefs,
                    other => return Err(ToolError::Usage(format!("option fs: {other:?} is not logfs or zonefs"))),
                }
            }
            "files" => spec.files_per_job = option.number()?,
            "fileset" => spec.fileset_files = option.number()?,
            "runtime" => spec.runtime_ns = option.run_time_ns()?,
            "preset" => spec.preset = option.value()?.to_string(),
            "jobs" => spec.jobs = option.number()?,
            "file-size" => spec.file_bytes = option.bytes()?,
            "bs" => spec.write_bytes = option.bytes()?,
            "fsync" => spec.fsync_every = option.number()?,
            "rounds" => spec.rounds = option.number()?,
            "windows" => spec.windows = option.number()?,
            "prefill" => spec.prefill = option.number()?,
            "seed" => spec.seed = option.number()?,
            "trace" => spec.trace = Some(option.value()?.into()),
            "map" => spec.map = Some(option.value()?.into()),
            "cores" => spec.cores = option.number()?,
            "start-jitter-us" => {
                let us = option.number::<f64>()?;
                if !(0.0..=1e6).contains(&us) {
                    return Err(ToolError::Usage(format!(
                        "option start-jitter-us: {us} is not a time from 0 to 1000000 microseconds"
                    )));
                }
                spec.start_jitter_ns = (us * 1000.0) as u64;
            }
            "output-format" => spec.json = option.json()?,
            _ => return Err(option.unknown()),
        }
    }
    if spec.jobs == 0
        || spec.rounds == 0
        || spec.files_per_job == 0
        || spec.write_bytes == 0
        || spec.fileset_files == 0
        || spec.cores == 0
    {
        return Err(ToolError::Usage("jobs, rounds, files, fileset, bs and cores must be positive".into()));
    }
    if spec.file_bytes < spec.write_bytes {
        return Err(ToolError::Usage(format!("file-size {} is below bs {}", spec.file_bytes, spec.write_bytes)));
    }
    if spec.fs == FileSystem::Logfs {
        whole_blocks(&spec, BLOCK, "logfs's block")?;
    }
    if spec.windows > 0 && (spec.fs != FileSystem::Logfs || spec.workload != FileWorkload::Fio) {
        return Err(ToolError::Usage("option windows: cuts the fio workload's writes on logfs".into()));
    }
    if spec.map.is_some() && spec.fs != FileSystem::Logfs {
        return Err(ToolError::Usage("option map: draws logfs's zones (on zonefs a file is its zone)".into()));
    }
    if !(0.0..1.0).contains(&spec.prefill) {
        return Err(ToolError::Usage(format!("option prefill: {} is not a fraction in [0, 1)", spec.prefill)));
    }
    Ok(spec)
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct FileChurnResult {
    pub spec: FileChurnSpec,
    pub device_time_ns: u64,
    /// File data written and read per second of device time.
    pub mib_per_s: f64,
    /// File operations per second of device time: under logfs filebench's flowops (fio: writes and fsyncs),
    /// under zonefs writes, reads, deletes, finishes and fsyncs.
    pub ops_per_s: f64,
    pub files: FileOps,
    /// The writes window by window, when `windows` asked for them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<filebench::WriteWindow>,
    /// What logfs did (writes of data and nodes, checkpoints, cleaning), over the timed run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logfs: Option<LogFsStats>,
    /// Which files share which zones at the end, when `map` drew them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zones: Option<MapSummary>,
    /// Physical zones' worth of blocks erased (block erases over blocks per zone).
    pub zones_erased: f64,
    pub wear: EraseSummary,
    pub flash: FlashCounters,
    /// Flash energy of host reads, of host writes (with any padding and sealing), and of resets.
    pub read_energy_j: f64,
    pub write_energy_j: f64,
    pub reset_energy_j: f64,
    pub total_energy_j: f64,
    pub wall_seconds: f64,
}

/// Draws logfs's `placement` as a zone map into `path` and sums it up: each file's data and its node blocks are
/// entries of their own (`NAME (nodes)`), so that the node logs' zones show whose nodes they hold.
fn draw_placement(
    path: &std::path::Path,
    placement: &LogFsPlacement,
    geometry: &zonelab_zns::Geometry,
) -> Result<MapSummary, ToolError> {
    let extents =
        |runs: &[(u64, u64)]| runs.iter().map(|&(lba, len_bytes)| Extent { lba, len_bytes }).collect::<Vec<_>>();
    let file = |name: String, size_bytes: u64, runs: &[(u64, u64)]| FileInfo {
        name,
        size_bytes,
        lifetime: 0,
        mtime_s: 0,
        extents: extents(runs),
        wal: None,
    };
    let files: Vec<FileInfo> = placement
        .files
        .iter()
        .flat_map(|f| {
            let node_bytes = f.nodes.iter().map(|&(_, bytes)| bytes).sum();
            [file(f.name.clone(), f.size_bytes, &f.data), file(format!("{} (nodes)", f.name), node_bytes, &f.nodes)]
        })
        .filter(|file| !file.extents.is_empty())
        .collect();
    let zones: Vec<ZoneInfo> = placement
        .zones
        .iter()
        .map(|zone| ZoneInfo {
            zone: zone.zone,
            role: zone.role,
            written_bytes: zone.written_bytes,
            live_bytes: zone.valid_bytes,
            capacity_bytes: zone.capacity_bytes,
            lifetime: 0,
            full: zone.written_bytes == zone.capacity_bytes,
        })
        .collect();
    let map = zone_map(&files, &zones, geometry);
    draw(path, "file-churn on logfs: files' data and nodes in zones at the end", &map, &files)
        .map_err(|message| ToolError::Usage(format!("option map: {message}")))?;
    Ok(summarize(&map))
}

/// What the file system was asked to do.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FileOps {
    pub ops: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub fsyncs: u64,
    pub deletes: u64,
    /// Zone resets the file system issued.
    pub zone_resets: u64,
}

/// The jobs of a traced run: each job's span as it ends (job, start, end), and each job's simulation task.
#[derive(Default)]
struct JobTrace {
    spans: RefCell<Vec<(u32, u64, u64)>>,
    tasks: RefCell<Vec<u32>>,
}

impl JobTrace {
    /// Starts tracing the device for the timed run, if `spec` asks for a trace.
    fn start<S: MediaStore + 'static>(spec: &FileChurnSpec, simulation: &Simulation<S>) -> Rc<JobTrace> {
        if spec.trace.is_some() {
            simulation.with_device(|device| device.enable_trace());
        }
        Rc::new(JobTrace::default())
    }

    /// Writes the trace, if `spec` asks for one, once the run is over: the jobs, then the file system's
    /// checkpoints and cleanings (logfs's `activity`) on a track of each kind.
    fn write<S: MediaStore + 'static>(
        &self,
        spec: &FileChurnSpec,
        simulation: &Simulation<S>,
        activity: &[FsActivity],
    ) -> Result<(), ToolError> {
        let Some(path) = &spec.trace else { return Ok(()) };
        let tasks = self.tasks.borrow();
        let jobs = self.spans.borrow();
        let jobs = jobs.iter().map(|&(job, start_ns, end_ns)| OperationSpan {
            track: "jobs".into(),
            name: format!("job {job}"),
            start_ns,
            end_ns,
            task: tasks.get(job as usize).copied(),
        });
        let fs = activity.iter().map(|done| OperationSpan {
            track: match done.kind {
                "checkpoint" => "checkpoints",
                _ => "cleaning",
            }
            .into(),
            name: match done.zone {
                Some(zone) => format!("{} zone {zone}", done.kind),
                None => done.kind.to_string(),
            },
            start_ns: done.start_ns,
            end_ns: done.end_ns,
            task: done.task,
        });
        let spans: Vec<OperationSpan> = jobs.chain(fs).collect();
        simulation
            .with_device(|device| write_device_trace(path, "file-churn", &spans, &[], device))
            .map_err(|error| ToolError::Usage(format!("option trace: {}: {error}", path.display())))
    }
}

/// Runs the benchmark.
pub fn run(spec: &FileChurnSpec) -> Result<FileChurnResult, ToolError> {
    match spec.fs {
        FileSystem::Logfs => run_logfs(spec),
        FileSystem::Zonefs => run_zonefs(spec),
    }
}

/// What the device measured over a run, and the result built from it.
struct Measured {
    windows: Vec<filebench::WriteWindow>,
    device_time_ns: u64,
    flash: FlashCounters,
    wear: EraseSummary,
    files: FileOps,
    logfs: Option<LogFsStats>,
    zones: Option<MapSummary>,
    wall_seconds: f64,
}

fn result_of(spec: &FileChurnSpec, energy: &zonelab_media::EnergyConfig, m: Measured) -> FileChurnResult {
    let seconds = m.device_time_ns as f64 / 1e9;
    FileChurnResult {
        spec: spec.clone(),
        device_time_ns: m.device_time_ns,
        mib_per_s: (m.files.bytes_written + m.files.bytes_read) as f64 / 1_048_576.0 / seconds,
        ops_per_s: m.files.ops as f64 / seconds,
        zones_erased: m.flash.total(FlashOp::BlockErase) as f64 / m.wear.blocks_per_zone.max(1) as f64,
        read_energy_j: m.flash.energy_nj(energy, OpSource::HostRead) / 1e9,
        write_energy_j: [OpSource::HostWrite, OpSource::Append, OpSource::FinishPadding, OpSource::Seal]
            .iter()
            .map(|&source| m.flash.energy_nj(energy, source))
            .sum::<f64>()
            / 1e9,
        reset_energy_j: m.flash.energy_nj(energy, OpSource::Reset) / 1e9,
        total_energy_j: m.flash.total_energy_nj(energy) / 1e9,
        files: m.files,
        windows: m.windows,
        logfs: m.logfs,
        zones: m.zones,
        wear: m.wear,
        flash: m.flash,
        wall_seconds: m.wall_seconds,
    }
}

/// The workloads on logfs: format, prefill a file, set up (fio's layout, filebench's preallocation), then
/// the timed run beside the file system's background work.
fn run_logfs(spec: &FileChurnSpec) -> Result<FileChurnResult, ToolError> {
    let built = DeviceBuilder::new(DeviceSpec::preset(&spec.preset)).host(HostPath::IoUring).build()?;
    let (device, config, host_side) = (built.device, built.config, built.host);
    let geometry = *device.namespace().geometry();
    let mut simulation = Simulation::with_host(device, host_side, Some(spec.seed));
    let host = simulation.host();
    let mounted: Slot<Rc<LogFs<_>>> = Rc::new(RefCell::new(None));
    let fileset = spec.workload != FileWorkload::Fio;
    let mut setup_rng = SplitMix64::split(spec.seed, "file-churn setup");
    let set = filebench::fileset_for(spec, &mut setup_rng);
    {
        let (sink, spec, set) = (Rc::clone(&mounted), spec.clone(), Rc::clone(&set));
        let capacity = u64::from(geometry.zones) * (geometry.zone_cap_lba << geometry.lba_shift);
        simulation.spawn(async move {
            let setup = async {
                let fs = LogFs::format(host, LogFsOptions::default()).await?;
                let prefill = (capacity as f64 * spec.prefill) as u64 / BLOCK * BLOCK;
                if prefill > 0 {
                    filebench::lay_out(&fs, "prefill", prefill).await?;
                }
                if fileset {
                    filebench::preallocate(&fs, &set, &mut setup_rng).await?;
                } else {
                    for job in 0..spec.jobs {
                        filebench::lay_out(&fs, &format!("job{job}"), spec.file_bytes).await?;
                    }
                    fs.sync().await?;
                }
                Ok::<_, LogFsError>(fs)
            };
            *sink.borrow_mut() =
                Some(setup.await.map(Rc::new).map_err(|source| ToolError::LogFs { phase: "set-up".into(), source }));
        });
    }
    simulation.run();
    let fs = take(&mounted, "the file system's set-up")?;
    let start = simulation.now_ns();
    let (flash_before, fs_before) = (simulation.with_device(|d| d.media().counters().clone()), fs.stats());
    let counts = Rc::new(RefCell::new(filebench::Counts::default()));
    if spec.windows > 0 {
        let total = u64::from(spec.jobs) * u64::from(spec.rounds) * spec.file_bytes;
        let window = total / u64::from(spec.windows) / spec.write_bytes * spec.write_bytes;
        counts.borrow_mut().windows.window_bytes = window.max(spec.write_bytes);
    }
    let failure: Rc<RefCell<Option<ToolError>>> = Rc::new(RefCell::new(None));
    let running = Rc::new(Cell::new(spec.jobs));
    let end = Rc::new(Cell::new(start));
    let cores = Rc::new(filebench::Cores::new(spec.cores));
    let traced = JobTrace::start(spec, &simulation);
    if spec.trace.is_some() {
        fs.record_activity();
    }
    for job in 0..spec.jobs {
        let (fs, failure, spec, counts, set) =
            (Rc::clone(&fs), Rc::clone(&failure), spec.clone(), Rc::clone(&counts), Rc::clone(&set));
        let (running, end, cores, trace) =
            (Rc::clone(&running), Rc::clone(&end), Rc::clone(&cores), Rc::clone(&traced));
        let mut rng = SplitMix64::split(spec.seed, &format!("file-churn job {job}"));
        let host = simulation.host();
        let jitter_ns = rng.below(spec.start_jitter_ns.max(1));
        let task = simulation.spawn(async move {
            host.sleep(jitter_ns).await;
            let began = host.now_ns();
            let vfs = filebench::Vfs::timed(&fs, &cores);
            let result = match spec.workload {
                FileWorkload::Fio => {
                    filebench::overwrite_rounds(&vfs, &format!("job{job}"), &spec, &mut rng, &counts).await
                }
                FileWorkload::Varmail | FileWorkload::Fileserver => {
                    let mut outcome = Ok(());
                    while outcome.is_ok() && host.now_ns() - start < spec.runtime_ns {
                        outcome = if spec.workload == FileWorkload::Varmail {
                            filebench::varmail(&vfs, &set, &mut rng, &counts).await
                        } else {
                            filebench::fileserver(&vfs, &set, &mut rng, &counts).await
                        };
                    }
                    outcome
                }
            };
            if let Err(error) = result {
                failure.borrow_mut().get_or_insert(ToolError::LogFs { phase: format!("job {job}"), source: error });
            }
            trace.spans.borrow_mut().push((job, began, host.now_ns()));
            end.set(end.get().max(host.now_ns()));
            running.set(running.get() - 1);
        });
        traced.tasks.borrow_mut().push(task);
    }
    {
        let (fs, running) = (Rc::clone(&fs), Rc::clone(&running));
        simulation.spawn(async move {
            // The background thread stops with the jobs; an error of its own shows in the stats it left.
            let _ = fs.background(|| running.get() == 0).await;
        });
    }
    let wall = Instant::now();
    simulation.run();
    let wall_seconds = wall.elapsed().as_secs_f64();
    if let Some(error) = failure.borrow_mut().take() {
        return Err(error);
    }
    traced.write(spec, &simulation, &fs.activity())?;
    let zones = spec.map.as_ref().map(|path| draw_placement(path, &fs.placement(), &geometry)).transpose()?;
    let (flash, wear) = simulation
        .with_device(|device| (device.media().counters().since(&flash_before), device.media().erase_summary()));
    let after = fs.stats();
    let counts = counts.borrow().clone();
    let logfs = logfs_delta(&after, &fs_before);
    let files = FileOps {
        ops: counts.flowops,
        bytes_written: counts.bytes_written,
        bytes_read: counts.bytes_read,
        fsyncs: logfs.fsyncs,
        deletes: logfs.deletes,
        zone_resets: logfs.zone_resets,
    };
    let device_time_ns = end.get() - start;
    let windows = counts.windows.closed;
    let measured = Measured { device_time_ns, flash, wear, files, windows, logfs: Some(logfs), zones, wall_seconds };
    Ok(result_of(spec, &config.media.energy, measured))
}

/// What logfs did between two snapshots of its counters.
fn logfs_delta(after: &LogFsStats, before: &LogFsStats) -> LogFsStats {
    LogFsStats {
        creates: after.creates - before.creates,
        deletes: after.deletes - before.deletes,
        renames: after.renames - before.renames,
        writes: after.writes - before.writes,
        bytes_written: after.bytes_written - before.bytes_written,
        reads: after.reads - before.reads,
        bytes_read: after.bytes_read - before.bytes_read,
        fsyncs: after.fsyncs - before.fsyncs,
        checkpoints: after.checkpoints - before.checkpoints,
        zone_resets: after.zone_resets - before.zone_resets,
        partial_zone_resets: after.partial_zone_resets - before.partial_zone_resets,
        foreground_cleanings: after.foreground_cleanings - before.foreground_cleanings,
        background_cleanings: after.background_cleanings - before.background_cleanings,
        blocks_moved: after.blocks_moved - before.blocks_moved,
        data_blocks_written: after.data_blocks_written - before.data_blocks_written,
        node_blocks_written: after.node_blocks_written - before.node_blocks_written,
        checkpoint_blocks_written: after.checkpoint_blocks_written - before.checkpoint_blocks_written,
        device_blocks_read: after.device_blocks_read - before.device_blocks_read,
        cache_hits: after.cache_hits - before.cache_hits,
    }
}

/// Refuses a file size or write size that is not whole blocks of `block` bytes: a smaller write moves no block
/// to the device, so the run would report operations that wrote nothing.
fn whole_blocks(spec: &FileChurnSpec, block: u64, what: &str) -> Result<(), ToolError> {
    for (name, bytes) in [("file-size", spec.file_bytes), ("bs", spec.write_bytes)] {
        if !bytes.is_multiple_of(block) {
            return Err(ToolError::Usage(format!("option {name}: {bytes} is not a multiple of {block} bytes, {what}")));
        }
    }
    Ok(())
}

/// The workloads on zonefs: one file per zone.
fn run_zonefs(spec: &FileChurnSpec) -> Result<FileChurnResult, ToolError> {
    let built = DeviceBuilder::new(DeviceSpec::preset(&spec.preset)).host(HostPath::IoUring).build()?;
    let (mut device, config, host_side) = (built.device, built.config, built.host);
    let geometry = *device.namespace().geometry();
    let capacity = geometry.zone_cap_lba << geometry.lba_shift;
    let prefilled = (f64::from(geometry.zones) * spec.prefill) as u32;
    let files_per_job = if spec.workload == FileWorkload::Fio { 1 } else { spec.files_per_job };
    let files = spec.jobs * files_per_job;
    if prefilled + files > geometry.zones {
        return Err(ToolError::Usage(format!(
            "{} jobs x {files_per_job} files need a zone each past the {prefilled} prefilled, and the device has {} zones",
            spec.jobs, geometry.zones
        )));
    }
    if spec.file_bytes > capacity {
        return Err(ToolError::Usage(format!("file-size {} is past the zone capacity {capacity}", spec.file_bytes)));
    }
    whole_blocks(spec, u64::from(geometry.lba_size), "the device's LBA size (zonefs writes are direct)")?;
    for zone in 0..prefilled {
        device.precondition(zone, capacity).map_err(|status| ToolError::Prefill { zone, status })?;
    }
    let mut simulation = Simulation::with_host(device, host_side, Some(spec.seed));
    let host = simulation.host();
    let mounted: Slot<Rc<ZoneFs<_>>> = Rc::new(RefCell::new(None));
    let sink = Rc::clone(&mounted);
    simulation.spawn(async move {
        *sink.borrow_mut() = Some(ZoneFs::mount(host).await.map(Rc::new).map_err(ToolError::Mount));
    });
    simulation.run();
    let fs = take(&mounted, "the mount")?;
    let start = simulation.now_ns();
    let failure: Rc<RefCell<Option<ToolError>>> = Rc::new(RefCell::new(None));
    let traced = JobTrace::start(spec, &simulation);
    for job in 0..spec.jobs {
        let (fs, failure, spec, trace) = (Rc::clone(&fs), Rc::clone(&failure), spec.clone(), Rc::clone(&traced));
        let first = prefilled + job * files_per_job;
        let own: Vec<u32> = (first..first + files_per_job).collect();
        let mut rng = SplitMix64::split(spec.seed, &format!("file-churn job {job}"));
        let host = simulation.host();
        let jitter_ns = rng.below(spec.start_jitter_ns.max(1));
        let task = simulation.spawn(async move {
            host.sleep(jitter_ns).await;
            let began = host.now_ns();
            let result = match spec.workload {
                FileWorkload::Fio => write_and_delete(&fs, own[0], &spec).await,
                FileWorkload::Varmail | FileWorkload::Fileserver => {
                    let mut outcome = Ok(());
                    while outcome.is_ok() && host.now_ns() - start < spec.runtime_ns {
                        outcome = if spec.workload == FileWorkload::Varmail {
                            varmail(&fs, &own, &mut rng).await
                        } else {
                            fileserver(&fs, &own, &mut rng, spec.file_bytes).await
                        };
                    }
                    outcome
                }
            };
            if let Err(error) = result {
                failure.borrow_mut().get_or_insert(ToolError::Fs { job, source: error });
            }
            trace.spans.borrow_mut().push((job, began, host.now_ns()));
        });
        traced.tasks.borrow_mut().push(task);
    }
    let wall = Instant::now();
    simulation.run();
    let wall_seconds = wall.elapsed().as_secs_f64();
    if let Some(error) = failure.borrow_mut().take() {
        return Err(error);
    }
    traced.write(spec, &simulation, &[])?;
    let device_time_ns = simulation.now_ns() - start;
    let (flash, wear) =
        simulation.with_device(|device| (device.media().counters().clone(), device.media().erase_summary()));
    let stats = fs.stats();
    let files = FileOps {
        ops: stats.writes + stats.reads + stats.resets + stats.finishes + stats.fsyncs,
        bytes_written: stats.bytes_written,
        bytes_read: stats.bytes_read,
        fsyncs: stats.fsyncs,
        deletes: stats.resets,
        zone_resets: stats.resets,
    };
    let measured =
        Measured { device_time_ns, flash, wear, files, windows: Vec::new(), logfs: None, zones: None, wall_seconds };
    Ok(result_of(spec, &config.media.energy, measured))
}

type FsResult = Result<(), FsError>;

/// The fio round trip: write the file in `bs` writes with fsyncs, delete it; `rounds` times.
async fn write_and_delete<Q: CommandQueue>(fs: &ZoneFs<Q>, file: u32, spec: &FileChurnSpec) -> FsResult {
    for _ in 0..spec.rounds {
        let writes = spec.file_bytes / spec.write_bytes;
        for write in 1..=writes {
            fs.append(file, IoData::Zeros(spec.write_bytes)).await?;
            if spec.fsync_every > 0 && write.is_multiple_of(spec.fsync_every) {
                fs.fsync(file).await?;
            }
        }
        fs.truncate(file, 0).await?;
    }
    Ok(())
}

/// filebench's appendfilerand: a random size of up to 16 KiB, in 4 KiB steps.
fn append_size(rng: &mut SplitMix64) -> u64 {
    (1 + rng.below(4)) * 4096
}

fn pick(own: &[u32], rng: &mut SplitMix64) -> u32 {
    own[rng.below(own.len() as u64) as usize]
}

/// Deletes a file that has data (a zone reset).
async fn delete<Q: CommandQueue>(fs: &ZoneFs<Q>, file: u32) -> FsResult {
    if fs.size(file)? > 0 {
        fs.truncate(file, 0).await?;
    }
    Ok(())
}

/// Appends `len` bytes, deleting the file first when they would not fit.
async fn append<Q: CommandQueue>(fs: &ZoneFs<Q>, file: u32, len: u64) -> FsResult {
    if fs.size(file)? + len > fs.capacity() {
        fs.truncate(file, 0).await?;
    }
    fs.append(file, IoData::Zeros(len)).await.map(|_| ())
}

async fn read_whole<Q: CommandQueue>(fs: &ZoneFs<Q>, file: u32) -> FsResult {
    let size = fs.size(file)?;
    fs.read(file, 0, size).await.map(|_| ())
}

/// One pass of varmail's flowops.
async fn varmail<Q: CommandQueue>(fs: &ZoneFs<Q>, own: &[u32], rng: &mut SplitMix64) -> FsResult {
    let created = pick(own, rng);
    delete(fs, created).await?;
    append(fs, created, append_size(rng)).await?;
    fs.fsync(created).await?;
    let appended = pick(own, rng);
    append(fs, appended, append_size(rng)).await?;
    fs.fsync(appended).await?;
    read_whole(fs, appended).await?;
    read_whole(fs, pick(own, rng)).await
}

/// One pass of fileserver's flowops.
async fn fileserver<Q: CommandQueue>(fs: &ZoneFs<Q>, own: &[u32], rng: &mut SplitMix64, file_bytes: u64) -> FsResult {
    let written = pick(own, rng);
    delete(fs, written).await?;
    append(fs, written, file_bytes).await?;
    append(fs, pick(own, rng), append_size(rng)).await?;
    read_whole(fs, pick(own, rng)).await?;
    delete(fs, pick(own, rng)).await
}

pub fn to_text(result: &FileChurnResult) -> String {
    let spec = &result.spec;
    let workload = match spec.workload {
        FileWorkload::Fio => format!(
            "fio: {} jobs x {} rounds of a {} B file in {} B writes, fsync every {}",
            spec.jobs, spec.rounds, spec.file_bytes, spec.write_bytes, spec.fsync_every
        ),
        FileWorkload::Varmail | FileWorkload::Fileserver if spec.fs == FileSystem::Logfs => format!(
            "{}: {} threads on a fileset of {} files for {:.1} s",
            format!("{:?}", spec.workload).to_lowercase(),
            spec.jobs,
            spec.fileset_files,
            spec.runtime_ns as f64 / 1e9
        ),
        FileWorkload::Varmail | FileWorkload::Fileserver => format!(
            "{}: {} jobs x {} files for {:.1} s",
            format!("{:?}", spec.workload).to_lowercase(),
            spec.jobs,
            spec.files_per_job,
            spec.runtime_ns as f64 / 1e9
        ),
    };
    let fs = format!("{:?}", spec.fs).to_lowercase();
    let mut text =
        format!("file-churn {workload}, on {fs} on {} ({:.0} % prefilled)\n", spec.preset, spec.prefill * 100.0);
    text += &format!(
        "  files: {:.1} ops/s, BW={:.1}MiB/s, device time {:.3} s ({:.2} s of wall time)\n",
        result.ops_per_s,
        result.mib_per_s,
        result.device_time_ns as f64 / 1e9,
        result.wall_seconds
    );
    text += &format!(
        "  ops: {} file operations, {} fsyncs, {} deletes, {} zone resets issued\n  flash: {:.1} zones erased ({} inline, {} deferred block erases), max {} erases per block\n  energy: read {:.4} J, write {:.4} J, reset {:.4} J, total {:.3} J\n",
        result.files.ops,
        result.files.fsyncs,
        result.files.deletes,
        result.files.zone_resets,
        result.zones_erased,
        result.wear.inline,
        result.wear.deferred,
        result.wear.max_per_block,
        result.read_energy_j,
        result.write_energy_j,
        result.reset_energy_j,
        result.total_energy_j
    );
    if let Some(logfs) = &result.logfs {
        text += &format!(
            "  logfs: {} data and {} node blocks written, {} checkpoints, {} of {} zone resets before the zone was full, {} zones cleaned ({} in the background), {} blocks moved\n",
            logfs.data_blocks_written,
            logfs.node_blocks_written,
            logfs.checkpoints,
            logfs.partial_zone_resets,
            logfs.zone_resets,
            logfs.foreground_cleanings + logfs.background_cleanings,
            logfs.background_cleanings,
            logfs.blocks_moved
        );
    }
    for (n, window) in result.windows.iter().enumerate() {
        text += &format!(
            "  window {}: {} MiB written, {:.1} K writes/s, p99.9 {:.1} us, max {:.1} us, host write amplification {:.2} ({} blocks moved)\n",
            n + 1,
            window.bytes_written >> 20,
            window.kiops,
            window.p99_9_us,
            window.max_us,
            window.host_waf,
            window.blocks_moved
        );
    }
    if let Some(zones) = &result.zones {
        text += &format!(
            "  zone map: {} zones in use, {} shared, {:.1} files a zone (at most {}), {:.1} % of written bytes live\n",
            zones.zones_in_use,
            zones.shared_zones,
            zones.files_per_zone,
            zones.most_files_in_a_zone,
            zones.live_fraction * 100.0
        );
    }
    if let Some(renewable) = &result.wear.renewable {
        text += &format!(
            "  rezns: {} renewed and {} normal resets, {} spare reuses, {} ReGC releases, {} spares left, {} overflow zones\n",
            renewable.renewed_resets,
            renewable.normal_resets,
            renewable.spare_reuses,
            renewable.regc_releases,
            renewable.spare_zones,
            renewable.overflow_zones
        );
    }
    text
}
