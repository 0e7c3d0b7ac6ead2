//! `zonelab file-churn`: the ReZNS paper's file workloads (seed 002, section 4.2) on the zonefs-like file
//! layer, after prefilling a fraction of the zones.
//! - `fio`: each of `jobs` tasks, for `rounds` rounds, writes a file of `file-size` in `bs` writes at queue
//!   depth 1 with an fsync every `fsync` writes, and deletes it (truncate to 0: a zone reset).
//! - `varmail` and `fileserver`: filebench's flowops over `files` files per job for `runtime` of device time.
//!   varmail: delete a file, create it with a random append of up to 16 KiB and fsync, append up to 16 KiB to
//!   another and fsync, read it whole, read a third whole. fileserver: delete and rewrite a file whole
//!   (`file-size`), append up to 16 KiB to another, read a third whole, delete a fourth.
//!
//! The paper ran F2FS, which packs many files into a zone; here each file is a zone, so a deleted file is a
//! reset of a partly written zone, the pattern ReZNS is about.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use serde::Serialize;
use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath};
use zonelab_host::{FsError, ZoneFs, ZoneFsStats};
use zonelab_media::{EraseSummary, FlashCounters, FlashOp, OpSource};
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::{CommandQueue, IoData, Simulation};

use crate::args::{take, Slot, ToolError, ToolOption};

/// Which file workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileWorkload {
    Fio,
    Varmail,
    Fileserver,
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileChurnSpec {
    pub workload: FileWorkload,
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
    /// Share of the zones written full before the run.
    pub prefill: f64,
    pub seed: u64,
    /// Each job starts after a seeded delay below this, in nanoseconds, as threads a benchmark starts together
    /// do: jobs started at one instant move in lock step (every fsync at once), which real ones never do.
    pub start_jitter_ns: u64,
    pub json: bool,
}

/// One millisecond: the spread of thread starts that a benchmark's setup leaves, several writes' worth here.
const DEFAULT_START_JITTER_NS: u64 = 1_000_000;

impl Default for FileChurnSpec {
    fn default() -> Self {
        FileChurnSpec {
            workload: FileWorkload::Fio,
            preset: "nvmevirt-rezns".into(),
            jobs: 64,
            files_per_job: 8,
            runtime_ns: 60_000_000_000,
            file_bytes: 15 << 20,
            write_bytes: 4096,
            fsync_every: 16,
            rounds: 3,
            prefill: 0.5,
            seed: 1,
            start_jitter_ns: DEFAULT_START_JITTER_NS,
            json: false,
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
            "files" => spec.files_per_job = option.number()?,
            "runtime" => spec.runtime_ns = (option.number::<f64>()? * 1e9) as u64,
            "preset" => spec.preset = option.value()?.to_string(),
            "jobs" => spec.jobs = option.number()?,
            "file-size" => spec.file_bytes = option.bytes()?,
            "bs" => spec.write_bytes = option.bytes()?,
            "fsync" => spec.fsync_every = option.number()?,
            "rounds" => spec.rounds = option.number()?,
            "prefill" => spec.prefill = option.number()?,
            "seed" => spec.seed = option.number()?,
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
    if spec.jobs == 0 || spec.rounds == 0 || spec.files_per_job == 0 || spec.write_bytes == 0 {
        return Err(ToolError::Usage("jobs, rounds, files and bs must be positive".into()));
    }
    if spec.file_bytes < spec.write_bytes {
        return Err(ToolError::Usage(format!("file-size {} is below bs {}", spec.file_bytes, spec.write_bytes)));
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
    /// File operations (writes, reads, deletes, finishes, fsyncs) per second of device time.
    pub ops_per_s: f64,
    pub files: ZoneFsStats,
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

/// Runs the benchmark.
pub fn run(spec: &FileChurnSpec) -> Result<FileChurnResult, ToolError> {
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
    for job in 0..spec.jobs {
        let (fs, failure, spec) = (Rc::clone(&fs), Rc::clone(&failure), spec.clone());
        let first = prefilled + job * files_per_job;
        let own: Vec<u32> = (first..first + files_per_job).collect();
        let mut rng = SplitMix64::split(spec.seed, &format!("file-churn job {job}"));
        let host = simulation.host();
        let jitter_ns = rng.below(spec.start_jitter_ns.max(1));
        simulation.spawn(async move {
            host.sleep(jitter_ns).await;
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
        });
    }
    let wall = Instant::now();
    simulation.run();
    let wall_seconds = wall.elapsed().as_secs_f64();
    if let Some(error) = failure.borrow_mut().take() {
        return Err(error);
    }
    let device_time_ns = simulation.now_ns() - start;
    let (flash, wear) =
        simulation.with_device(|device| (device.media().counters().clone(), device.media().erase_summary()));
    let energy = &config.media.energy;
    let files = fs.stats();
    let seconds = device_time_ns as f64 / 1e9;
    let ops = files.writes + files.reads + files.resets + files.finishes + files.fsyncs;
    Ok(FileChurnResult {
        spec: spec.clone(),
        device_time_ns,
        mib_per_s: (files.bytes_written + files.bytes_read) as f64 / 1_048_576.0 / seconds,
        ops_per_s: ops as f64 / seconds,
        files,
        zones_erased: flash.total(FlashOp::BlockErase) as f64 / wear.blocks_per_zone.max(1) as f64,
        read_energy_j: flash.energy_nj(energy, OpSource::HostRead) / 1e9,
        write_energy_j: [OpSource::HostWrite, OpSource::Append, OpSource::FinishPadding, OpSource::Seal]
            .iter()
            .map(|&source| flash.energy_nj(energy, source))
            .sum::<f64>()
            / 1e9,
        reset_energy_j: flash.energy_nj(energy, OpSource::Reset) / 1e9,
        total_energy_j: flash.total_energy_nj(energy) / 1e9,
        wear,
        flash,
        wall_seconds,
    })
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
        FileWorkload::Varmail | FileWorkload::Fileserver => format!(
            "{:?}: {} jobs x {} files for {:.1} s",
            spec.workload,
            spec.jobs,
            spec.files_per_job,
            spec.runtime_ns as f64 / 1e9
        )
        .to_lowercase(),
    };
    let mut text = format!("file-churn {workload}, on {} ({:.0} % prefilled)\n", spec.preset, spec.prefill * 100.0);
    text += &format!(
        "  files: {:.1} ops/s, BW={:.1}MiB/s, device time {:.3} s ({:.2} s of wall time)\n",
        result.ops_per_s,
        result.mib_per_s,
        result.device_time_ns as f64 / 1e9,
        result.wall_seconds
    );
    text += &format!(
        "  ops: {} writes, {} reads, {} fsyncs, {} deletes (zone resets)\n  flash: {:.1} zones erased ({} inline, {} deferred block erases), max {} erases per block\n  energy: read {:.4} J, write {:.4} J, reset {:.4} J, total {:.3} J\n",
        result.files.writes,
        result.files.reads,
        result.files.fsyncs,
        result.files.resets,
        result.zones_erased,
        result.wear.inline,
        result.wear.deferred,
        result.wear.max_per_block,
        result.read_energy_j,
        result.write_energy_j,
        result.reset_energy_j,
        result.total_energy_j
    );
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
