//! `zonelab file-churn`: the ReZNS paper's FIO setup (seed 002, section 4.2) on the zonefs-like file layer.
//! The device is prefilled to a fraction of its zones; then each of `jobs` tasks, for `rounds` rounds, writes
//! a file of `file-size` in `bs` writes at queue depth 1 with an fsync every `fsync` writes, and deletes it
//! (truncate to 0: a zone reset). The paper ran F2FS, which packs many files into a zone; here each file is a
//! zone, so a deleted file is a reset of a partly written zone, the pattern ReZNS is about.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use serde::Serialize;
use zonelab_device::{Device, HostPath};
use zonelab_host::{ZoneFs, ZoneFsStats};
use zonelab_media::{EraseSummary, FlashCounters, FlashOp, OpSource};
use zonelab_runtime::{IoData, Simulation};
use zonelab_zns::NullStore;

use crate::args::{load_preset, Slot, ToolOption};

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileChurnSpec {
    /// Preset name, then `,key=value` overrides as `zonelab create --set` takes them.
    pub preset: String,
    pub jobs: u32,
    pub file_bytes: u64,
    pub write_bytes: u64,
    /// An fsync after every N writes; 0 never.
    pub fsync_every: u64,
    pub rounds: u32,
    /// Share of the zones written full before the run.
    pub prefill: f64,
    pub seed: u64,
    pub json: bool,
}

impl Default for FileChurnSpec {
    fn default() -> Self {
        FileChurnSpec {
            preset: "nvmevirt-rezns".into(),
            jobs: 64,
            file_bytes: 15 << 20,
            write_bytes: 4096,
            fsync_every: 16,
            rounds: 3,
            prefill: 0.5,
            seed: 1,
            json: false,
        }
    }
}

/// Parses `--key=value` options; an unknown option is an error that names it.
pub fn parse_args(args: &[String]) -> Result<FileChurnSpec, String> {
    let mut spec = FileChurnSpec::default();
    for arg in args {
        let option = ToolOption::parse(arg)?;
        match option.key {
            "preset" => spec.preset = option.value()?.to_string(),
            "jobs" => spec.jobs = option.number()?,
            "file-size" => spec.file_bytes = option.bytes()?,
            "bs" => spec.write_bytes = option.bytes()?,
            "fsync" => spec.fsync_every = option.number()?,
            "rounds" => spec.rounds = option.number()?,
            "prefill" => spec.prefill = option.number()?,
            "seed" => spec.seed = option.number()?,
            "output-format" => spec.json = option.value()? == "json",
            _ => return Err(option.unknown()),
        }
    }
    if spec.jobs == 0 || spec.rounds == 0 || spec.write_bytes == 0 || spec.file_bytes < spec.write_bytes {
        return Err("jobs, rounds and bs must be positive and file-size at least bs".into());
    }
    if !(0.0..1.0).contains(&spec.prefill) {
        return Err(format!("option prefill: {} is not a fraction in [0, 1)", spec.prefill));
    }
    Ok(spec)
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct FileChurnResult {
    pub spec: FileChurnSpec,
    pub device_time_ns: u64,
    /// File data written per second of device time.
    pub mib_per_s: f64,
    pub files: ZoneFsStats,
    /// Physical zones' worth of blocks erased (block erases over blocks per zone).
    pub zones_erased: f64,
    pub wear: EraseSummary,
    pub flash: FlashCounters,
    pub reset_energy_j: f64,
    pub total_energy_j: f64,
    pub wall_seconds: f64,
}

/// Runs the benchmark.
pub fn run(spec: &FileChurnSpec) -> Result<FileChurnResult, String> {
    let config = load_preset(&spec.preset)?;
    let mut device = Device::new(&config, NullStore, HostPath::IoUring).map_err(|error| error.to_string())?;
    let geometry = *device.namespace().geometry();
    let capacity = geometry.zone_cap_lba << geometry.lba_shift;
    let prefilled = (f64::from(geometry.zones) * spec.prefill) as u32;
    if prefilled + spec.jobs > geometry.zones {
        return Err(format!(
            "{} jobs need a zone each past the {prefilled} prefilled, and the device has {} zones",
            spec.jobs, geometry.zones
        ));
    }
    if spec.file_bytes > capacity {
        return Err(format!("file-size {} is past the zone capacity {capacity}", spec.file_bytes));
    }
    for zone in 0..prefilled {
        device.precondition(zone, capacity).map_err(|status| format!("prefill of zone {zone}: {status}"))?;
    }
    let mut simulation = Simulation::new(device, Some(spec.seed));
    let host = simulation.host();
    let mounted: Slot<Rc<ZoneFs<_>>> = Rc::new(RefCell::new(None));
    let sink = Rc::clone(&mounted);
    simulation.spawn(async move {
        *sink.borrow_mut() = Some(ZoneFs::mount(host).await.map(Rc::new).map_err(|status| status.to_string()));
    });
    simulation.run();
    let fs = mounted.borrow_mut().take().ok_or("the mount did not finish")??;
    let start = simulation.now_ns();
    let failure: Rc<RefCell<Option<String>>> = Rc::new(RefCell::new(None));
    for job in 0..spec.jobs {
        let (fs, failure, spec) = (Rc::clone(&fs), Rc::clone(&failure), spec.clone());
        let file = prefilled + job;
        simulation.spawn(async move {
            let result = async {
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
                Ok::<(), zonelab_host::FsError>(())
            }
            .await;
            if let Err(error) = result {
                failure.borrow_mut().get_or_insert(format!("job {job}: {error}"));
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
    let blocks_per_zone = wear.blocks as f64 / f64::from(geometry.zones).max(1.0);
    let energy = &config.media.energy;
    let files = fs.stats();
    Ok(FileChurnResult {
        spec: spec.clone(),
        device_time_ns,
        mib_per_s: files.bytes_written as f64 / 1_048_576.0 / (device_time_ns as f64 / 1e9),
        files,
        zones_erased: flash.total(FlashOp::BlockErase) as f64 / blocks_per_zone,
        reset_energy_j: flash.energy_nj(energy, OpSource::Reset) / 1e9,
        total_energy_j: flash.total_energy_nj(energy) / 1e9,
        wear,
        flash,
        wall_seconds,
    })
}

pub fn to_text(result: &FileChurnResult) -> String {
    let spec = &result.spec;
    let mut text = format!(
        "file-churn: {} jobs x {} rounds of a {} B file in {} B writes, fsync every {}, on {} ({:.0} % prefilled)\n",
        spec.jobs,
        spec.rounds,
        spec.file_bytes,
        spec.write_bytes,
        spec.fsync_every,
        spec.preset,
        spec.prefill * 100.0
    );
    text += &format!(
        "  write: BW={:.1}MiB/s, device time {:.3} s ({:.2} s of wall time)\n",
        result.mib_per_s,
        result.device_time_ns as f64 / 1e9,
        result.wall_seconds
    );
    text += &format!(
        "  files: {} writes, {} fsyncs, {} deletes (zone resets)\n  flash: {:.1} zones erased ({} inline, {} deferred block erases), max {} erases per block\n  energy: reset {:.4} J, total {:.3} J\n",
        result.files.writes,
        result.files.fsyncs,
        result.files.resets,
        result.zones_erased,
        result.wear.inline,
        result.wear.deferred,
        result.wear.max_per_block,
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
