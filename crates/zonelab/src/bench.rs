//! `zonelab bench`: performance figures printed, never asserted.

use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use clap::Subcommand;
use serde_json::json;
use zonelab_bench::{run_closed_loop, LoopSpec, Operation};
use zonelab_device::{DeviceBuilder, DeviceConfig, DeviceSpec};
use zonelab_runtime::Simulation;
use zonelab_zns::{ByteSize, NamespaceConfig, NullStore, ZoneSendAction, ZonedNamespace};

use crate::{stdout_error, CliError};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Commands per second of the zns layer with the null store on one core: 4 KiB writes, 4 KiB appends and
    /// zone resets, on a ZN540-shaped namespace (904 zones of 2 GiB, 1077 MiB writable).
    Core {
        /// Timed runs of each command; the median is reported.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Commands in each run.
        #[arg(long, default_value_t = 4_000_000)]
        commands: u64,
        #[arg(long)]
        json: bool,
    },
    /// Simulated commands per wall-clock second of the whole virtual-time stack (runtime, device, flash model,
    /// zns layer, null store) on a preset: 4 KiB writes over 14 zones at QD 1 per zone, 4 KiB random reads at
    /// QD 64, and 8 KiB appends over 14 zones at QD 4 per zone, one SPDK thread per zone (taking turns on the
    /// preset's cores when they outnumber them); on a preset with a conventional namespace, 4 KiB random
    /// writes on it at QD 32 after preconditioning (written whole, then once more at random), so that garbage
    /// collection runs. Also prints the process's peak memory.
    Sim {
        #[arg(long, default_value = "zn540")]
        preset: String,
        /// Timed runs of each workload; the median is reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Simulated commands in each run.
        #[arg(long, default_value_t = 1_000_000)]
        commands: u64,
        /// Runs only this workload (repeatable; for profiling one): write_4k_14zones_qd1, randread_4k_qd64,
        /// append_8k_14zones_qd4 or randwrite_4k_conventional_qd32. All of them when none is named.
        #[arg(long = "workload", value_name = "NAME")]
        workloads: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Pacing of the real-time runtime: delivered minus modelled completion time at p50, p99, p99.9 and max,
    /// and the share of late completions, for 4 KiB reads and writes at QD 1 and 32 from one and two threads;
    /// then the highest command rate held on the instant preset with p99 pacing error under 10 us.
    Realtime {
        /// The preset, with overrides and the device thread's placement keys (device-cpu=N, device-sched=,
        /// device-wait=adaptive|poll, device-placement=).
        #[arg(long, default_value = "zn540")]
        preset: String,
        /// Busy threads of its own beside the device thread while it measures: the pacing a loaded machine
        /// gives (with the preset's placement keys, `--preset zn540,device-cpu=1`, or ZONELAB_DEVICE_CPU and
        /// ZONELAB_DEVICE_SCHED, what placement wins back). At most 1,024.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1024))]
        load: u32,
        #[arg(long)]
        json: bool,
    },
    /// The conventional namespace's page-mapped FTL on the preset's flash: uniform random 4 KiB writes at 7 %
    /// and 28 % over-provisioning after preconditioning; write amplification against the analytic model of
    /// greedy cleaning, simulated commands per wall-clock second, the FTL's memory and preconditioning time.
    Ftl {
        #[arg(long, default_value = "zn540")]
        preset: String,
        /// The logical space (4 GiB: the ZN540's conventional namespace).
        #[arg(long, default_value = "4GiB")]
        size: zonelab_zns::ByteSize,
        /// Timed random writes after preconditioning.
        #[arg(long, default_value_t = 2_000_000)]
        writes: u64,
        #[arg(long)]
        json: bool,
    },
    /// What `zonelab fio` costs against real fio: 1.1 M sequential 4 KiB writes through `zonelab fio` on the
    /// full zn540 model and through real fio's null ioengine (fio's own per-I/O work, no I/O), paired round by
    /// round; the medians of their wall times and the ratio. Needs real fio.
    Fio {
        /// Paired rounds; the medians are reported.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[arg(long)]
        json: bool,
    },
    /// What running the experiments' points on every core buys: `zonelab experiment run all --quick` twice in
    /// one paired run, with --jobs 1 and --jobs N, each in a child process; wall time split into virtual-time and
    /// real-time experiments (real RocksDB runs one point at a time), their ratios, and each run's peak memory
    /// (its largest process, RocksDB's included).
    Experiments {
        /// Every point at full length instead of --quick (tens of minutes).
        #[arg(long)]
        full: bool,
        /// Points at once in the second run (default: the cores available, at least 2).
        #[arg(long)]
        jobs: Option<usize>,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(which: BenchCommand, out: &mut impl Write) -> Result<(), CliError> {
    match which {
        BenchCommand::Core { runs, commands, json } => core(runs.max(1), commands.max(1), json, out),
        BenchCommand::Sim { preset, runs, commands, workloads, json } => {
            sim(&preset, runs.max(1), commands.max(1000), &workloads, json, out)
        }
        BenchCommand::Realtime { preset, load, json } => crate::bench_realtime::realtime(&preset, load, json, out),
        BenchCommand::Ftl { preset, size, writes, json } => {
            crate::bench_ftl::ftl(&preset, size.0, writes.max(1), json, out)
        }
        BenchCommand::Fio { rounds, json } => crate::bench_fio::fio_bench(rounds.max(1), json, out),
        BenchCommand::Experiments { full, jobs, json } => {
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
            crate::bench_experiments::experiments_bench(full, jobs, json, out)
        }
    }
}

type Ns = ZonedNamespace<NullStore>;

fn zn540_shape(max_open: u32) -> Ns {
    let config = NamespaceConfig {
        zones: 904,
        zone_size: ByteSize(2 << 30),
        zone_cap: ByteSize(1077 << 20),
        max_open,
        max_active: max_open,
        mdts: ByteSize(0),
        ..NamespaceConfig::default()
    };
    ZonedNamespace::new(config, NullStore).expect("the benchmark geometry is valid")
}

/// Seconds for `commands` 4 KiB writes (or appends) spread round-robin over 14 open zones.
fn time_writes(commands: u64, append: bool) -> f64 {
    let mut ns = zn540_shape(14);
    let block = [0u8; 4096];
    let zone_lba = ns.geometry().zone_size_lba;
    let per_zone = ns.geometry().zone_cap_lba;
    let mut wps = [0u64; 14];
    let started = Instant::now();
    for i in 0..commands {
        let zone = (i % 14) as usize;
        if wps[zone] == per_zone {
            ns.zone_management_send(zone as u64 * zone_lba, ZoneSendAction::Reset, false).expect("reset");
            wps[zone] = 0;
        }
        let start = zone as u64 * zone_lba;
        if append {
            black_box(ns.append(start, black_box(&block)).expect("append"));
        } else {
            ns.write(start + wps[zone], black_box(&block)).expect("write");
        }
        wps[zone] += 1;
    }
    started.elapsed().as_secs_f64()
}

/// Seconds spent in `commands` resets of written zones (the writes that fill them are not timed).
fn time_resets(commands: u64) -> f64 {
    let mut ns = zn540_shape(0);
    let zones = ns.geometry().zones;
    let zone_lba = ns.geometry().zone_size_lba;
    let block = [0u8; 4096];
    let mut elapsed = 0.0;
    let mut done = 0;
    while done < commands {
        let batch = (commands - done).min(u64::from(zones)) as u32;
        for zone in 0..batch {
            ns.write(u64::from(zone) * zone_lba, &block).expect("write");
        }
        let started = Instant::now();
        for zone in 0..batch {
            ns.zone_management_send(u64::from(zone) * zone_lba, ZoneSendAction::Reset, false).expect("reset");
        }
        elapsed += started.elapsed().as_secs_f64();
        done += u64::from(batch);
    }
    elapsed
}

/// Median, minimum and maximum of the rates of several runs.
pub(crate) fn spread(mut rates: Vec<f64>) -> (f64, f64, f64) {
    rates.sort_by(f64::total_cmp);
    (rates[rates.len() / 2], rates[0], rates[rates.len() - 1])
}

fn core(runs: usize, commands: u64, json: bool, out: &mut impl Write) -> Result<(), CliError> {
    let cases: [(&str, &dyn Fn(u64) -> f64); 3] =
        [("write_4k", &|n| time_writes(n, false)), ("append_4k", &|n| time_writes(n, true)), ("reset", &time_resets)];
    let mut results = serde_json::Map::new();
    if !json {
        writeln!(
            out,
            "zns layer, null store, one core: {runs} runs of {commands} commands each, ZN540-shaped namespace"
        )
        .map_err(stdout_error)?;
    }
    for (name, case) in cases {
        let (med, min, max) = spread((0..runs).map(|_| commands as f64 / case(commands)).collect());
        if !json {
            writeln!(
                out,
                "  {name:<10} median {:>7.2} M commands/s  (min {:.2}, max {:.2}; {:.1} ns per command)",
                med / 1e6,
                min / 1e6,
                max / 1e6,
                1e9 / med
            )
            .map_err(stdout_error)?;
        }
        results.insert(
            name.to_string(),
            json!({ "median_commands_per_s": med, "min_commands_per_s": min, "max_commands_per_s": max, "runs": runs, "commands_per_run": commands }),
        );
    }
    if json {
        writeln!(out, "{}", serde_json::Value::Object(results)).map_err(stdout_error)?;
    }
    Ok(())
}

/// Peak resident memory of this process in bytes (Linux `VmHWM`), if the system tells.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Enlarges the zones of `config` (to the next power of two, capacity = size) when a workload's writes would
/// not fit in the zones it writes, as on the small `instant` preset; returns the new zone size if it did.
fn hold_the_writes(
    config: &mut DeviceConfig,
    workloads: &[(&str, Operation, u64, u32, u32)],
    commands: u64,
) -> Result<Option<ByteSize>, CliError> {
    let geometry = config.namespace.validate().map_err(|error| CliError::Config(error.to_string()))?;
    let capacity = geometry.zone_cap_lba << geometry.lba_shift;
    let needed = workloads
        .iter()
        .filter(|(_, operation, ..)| matches!(operation, Operation::Write | Operation::Append))
        .map(|&(_, _, bs_bytes, zones, qd_per_zone)| {
            // A closed loop issues up to its queue depth beyond the commands it measures.
            (commands.div_ceil(u64::from(zones.min(geometry.zones))) + u64::from(qd_per_zone)).saturating_mul(bs_bytes)
        })
        .max()
        .unwrap_or(0);
    if needed <= capacity {
        return Ok(None);
    }
    let zone_size = ByteSize(
        needed
            .checked_next_power_of_two()
            .ok_or_else(|| CliError::Usage(format!("{commands} commands a run need zones of more than 2^63 bytes")))?,
    );
    config.namespace.zone_size = zone_size;
    config.namespace.zone_cap = ByteSize(0);
    config.namespace.validate().map_err(|error| CliError::Config(error.to_string()))?;
    Ok(Some(zone_size))
}

fn sim(
    preset: &str,
    runs: usize,
    commands: u64,
    only: &[String],
    json: bool,
    out: &mut impl Write,
) -> Result<(), CliError> {
    let mut config = DeviceConfig::load(preset, &[]).map_err(|error| CliError::Config(error.to_string()))?;
    let all = [
        ("write_4k_14zones_qd1", Operation::Write, 4096, 14, 1),
        ("randread_4k_qd64", Operation::RandRead, 4096, 1, 64),
        ("append_8k_14zones_qd4", Operation::Append, 8192, 14, 4),
        ("randwrite_4k_conventional_qd32", Operation::RandWrite, 4096, 1, 32),
    ];
    if let Some(unknown) = only.iter().find(|name| !all.iter().any(|workload| workload.0 == name.as_str())) {
        let names: Vec<&str> = all.iter().map(|workload| workload.0).collect();
        return Err(CliError::Usage(format!("no bench workload named {unknown:?}; there are {}", names.join(", "))));
    }
    let conventional = config.conventional.as_ref().map(|cnv| cnv.nsid);
    if conventional.is_none() && only.iter().any(|name| name == "randwrite_4k_conventional_qd32") {
        return Err(CliError::Usage(format!("preset {preset} has no conventional namespace")));
    }
    let workloads: Vec<_> = all
        .into_iter()
        .filter(|workload| only.is_empty() || only.iter().any(|name| name == workload.0))
        .filter(|workload| workload.1 != Operation::RandWrite || conventional.is_some())
        .collect();
    let enlarged = hold_the_writes(&mut config, &workloads, commands)?;
    let mut results = serde_json::Map::new();
    if !json {
        writeln!(
            out,
            "virtual-time simulation on preset {preset}, null store, one core: {runs} runs of {commands} commands each"
        )
        .map_err(stdout_error)?;
        if let Some(zone_size) = enlarged {
            writeln!(out, "  (zones enlarged to {zone_size} so that every run's writes fit)").map_err(stdout_error)?;
        }
    }
    for (name, operation, bs_bytes, zones, qd_per_zone) in workloads {
        let mut rates = Vec::new();
        let mut speedup = 0.0;
        for _ in 0..runs {
            let mut built = DeviceBuilder::new(DeviceSpec::Config(Box::new(config.clone())))
                .build()
                .map_err(|error| CliError::Config(error.to_string()))?;
            let device = &mut built.device;
            let zones = zones.min(config.namespace.zones);
            if operation == Operation::RandRead {
                let geometry = *device.namespace().geometry();
                device.precondition(0, geometry.zone_cap_lba << geometry.lba_shift)?;
            }
            if let (Operation::RandWrite, Some(nsid)) = (operation, conventional) {
                device.attach(nsid)?;
                device.precondition_conventional(1, 1)?;
            }
            let spec = LoopSpec { operation, bs_bytes, zones, qd_per_zone, warmup: 0, measured: commands, seed: 1 };
            let cores = config.host.core_share(built.host.path.polls(), zones);
            let mut simulation = Simulation::over(built, None);
            let started = Instant::now();
            run_closed_loop(&mut simulation, &spec, cores)?;
            let wall = started.elapsed().as_secs_f64();
            rates.push(commands as f64 / wall);
            speedup = simulation.now_ns() as f64 / 1e9 / wall;
        }
        let (med, min, max) = spread(rates);
        if !json {
            let pace = if speedup > 0.0 {
                format!("{speedup:.0}x faster than real time")
            } else {
                "no simulated time passes on this preset".to_string()
            };
            writeln!(
                out,
                "  {name:<22} median {:>6.2} M simulated commands/s (min {:.2}, max {:.2}); {pace}",
                med / 1e6,
                min / 1e6,
                max / 1e6,
            )
            .map_err(stdout_error)?;
        }
        results.insert(
            name.to_string(),
            json!({ "median_commands_per_s": med, "min_commands_per_s": min, "max_commands_per_s": max, "faster_than_real_time": speedup }),
        );
    }
    let peak = peak_rss_bytes();
    if json {
        results.insert("peak_rss_bytes".to_string(), json!(peak));
        writeln!(out, "{}", serde_json::Value::Object(results)).map_err(stdout_error)?;
    } else if let Some(bytes) = peak {
        writeln!(out, "  peak resident memory of this process: {:.1} MiB", bytes as f64 / 1_048_576.0)
            .map_err(stdout_error)?;
    }
    Ok(())
}
