//! `zonelab wal-bench`: a single-threaded PUT stream into a write-ahead log (db_bench `fillrandom`-like: one
//! record per PUT, a modelled host cost per PUT), then optionally the log's recovery. Options are given
//! fio-style (`--key=value`); output is text or JSON.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use serde::Serialize;
use serde_json::json;
use zonelab_device::{Device, DeviceBuilder, DeviceSpec, HostPath, HostSide, StoreChoice};
use zonelab_host::trace::write_device_trace;
use zonelab_host::{RecoveryStats, Wal, WalConfig, WalDesign, WalStats};
use zonelab_runtime::{CommandQueue, Simulation};
use zonelab_zns::{ByteSize, MediaStore};

use crate::args::{take, Slot, ToolError, ToolOption};
use zonelab_fio::LatencyStats;

/// Limits of the options, checked before anything is allocated: a record is built in memory once, and the
/// device time of a run (records x put cost) stays far below 2^64 ns.
const MAX_RECORD_BYTES: u64 = 64 << 20;
const MAX_RECORDS: u64 = 1 << 32;
const MAX_BUFFER_BYTES: u64 = 1 << 30;
const MAX_QUEUE_DEPTH: u64 = 65_536;

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WalBenchSpec {
    pub preset: String,
    pub design: WalDesign,
    pub buffer_bytes: u64,
    pub queue_depth: u32,
    /// Bytes between barriers; None means one zone.
    pub barrier_bytes: Option<u64>,
    pub record_bytes: u64,
    pub records: u64,
    /// Host time spent per PUT outside the WAL (RocksDB's memtable insert and bookkeeping), in nanoseconds.
    pub put_cost_ns: u64,
    /// A sync after every N PUTs; 0 syncs once, at the end.
    pub sync_every: u64,
    pub recover: bool,
    /// Recovery's largest read in bytes (0: the barrier window, up to MDTS).
    pub read_bytes: u64,
    /// Host time to apply each recovered record to the memtable (RocksDB's recovery after reading the log),
    /// in nanoseconds.
    pub apply_cost_ns: u64,
    /// Where a recovered log's data is kept (None: `default_store`); the figures do not depend on it.
    #[serde(skip)]
    pub store: Option<StoreChoice>,
    pub json: bool,
    pub seed: u64,
    /// Write the device's commands and flash operations as a Perfetto trace here (`zonelab_host::trace::write_device_trace`).
    #[serde(skip)]
    pub trace: Option<std::path::PathBuf>,
}

impl Default for WalBenchSpec {
    fn default() -> Self {
        WalBenchSpec {
            preset: "confzns-zwal".into(),
            design: WalDesign::Zwal,
            buffer_bytes: 4096,
            queue_depth: 32,
            barrier_bytes: None,
            record_bytes: 3996,
            records: 20_000,
            put_cost_ns: 0,
            sync_every: 0,
            recover: false,
            read_bytes: 0,
            apply_cost_ns: 0,
            store: None,
            json: false,
            seed: 1,
            trace: None,
        }
    }
}

/// Parses `--key=value` options; an unknown option is an error that names it.
pub fn parse_args(args: &[String]) -> Result<WalBenchSpec, ToolError> {
    let mut spec = WalBenchSpec::default();
    for arg in args {
        let option = ToolOption::parse(arg)?;
        match option.key {
            "preset" => spec.preset = option.value()?.to_string(),
            "design" => {
                spec.design = match option.value()? {
                    "zwal" => WalDesign::Zwal,
                    "conventional" | "zenfs" => WalDesign::Conventional,
                    other => {
                        return Err(ToolError::Usage(format!("option design: {other:?} is not zwal or conventional")))
                    }
                }
            }
            "buffer" => spec.buffer_bytes = option.bytes()?,
            "qd" => spec.queue_depth = option.number()?,
            "barrier" => spec.barrier_bytes = if option.value()? == "zone" { None } else { Some(option.bytes()?) },
            "record-size" => spec.record_bytes = option.bytes()?,
            "records" => spec.records = option.number()?,
            "put-cost-us" => spec.put_cost_ns = option.host_time_ns()?,
            "apply-cost-us" => spec.apply_cost_ns = option.host_time_ns()?,
            "read-size" => spec.read_bytes = option.bytes()?,
            "sync-every" => spec.sync_every = option.number()?,
            "recover" => spec.recover = true,
            "store" => {
                spec.store = Some(match option.value()? {
                    "memory" => StoreChoice::Memory,
                    "temp-file" => StoreChoice::TempFile,
                    other => {
                        return Err(ToolError::Usage(format!("option store: {other:?} is not memory or temp-file")))
                    }
                })
            }
            "seed" => spec.seed = option.number()?,
            "output-format" => spec.json = option.json()?,
            "trace" => spec.trace = Some(option.value()?.into()),
            _ => return Err(option.unknown()),
        }
    }
    if spec.records == 0 || spec.record_bytes == 0 {
        return Err(ToolError::Usage("records and record-size must be positive".into()));
    }
    for (name, value, most, bytes) in [
        ("record-size", spec.record_bytes, MAX_RECORD_BYTES, true),
        ("records", spec.records, MAX_RECORDS, false),
        ("buffer", spec.buffer_bytes, MAX_BUFFER_BYTES, true),
        ("qd", u64::from(spec.queue_depth), MAX_QUEUE_DEPTH, false),
    ] {
        if value > most {
            let (value, most) = if bytes {
                (ByteSize(value).to_string(), ByteSize(most).to_string())
            } else {
                (value.to_string(), most.to_string())
            };
            return Err(ToolError::Usage(format!("option {name}: {value} is more than {most}, its limit")));
        }
    }
    Ok(spec)
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct WalBenchResult {
    pub spec: WalBenchSpec,
    pub device_time_ns: u64,
    pub kiops: f64,
    pub mib_per_s: f64,
    #[serde(skip)]
    pub put_latency: LatencyStats,
    pub wal: WalStats,
    pub recovery: Option<RecoveryStats>,
    pub recovered_records: Option<u64>,
    /// Whole recovery in device time: the reads, then applying every record (`--apply-cost-us`).
    pub recovery_ns: Option<u64>,
    pub wall_seconds: f64,
}

/// Logs up to this size keep their data in memory when they are to be recovered; larger ones in a temporary
/// file, so that a run stays under 512 MiB of memory (a 1 GiB log's recovery then takes about 3.5x the wall
/// time, in the kernel's page cache).
const MEMORY_STORE_MAX_BYTES: u64 = 256 << 20;

/// Where a run keeps its data unless `--store` says: nowhere without recovery, else by the log's size.
fn default_store(spec: &WalBenchSpec) -> StoreChoice {
    match spec.records.saturating_mul(spec.record_bytes + 4) {
        _ if !spec.recover => StoreChoice::Null,
        bytes if bytes <= MEMORY_STORE_MAX_BYTES => StoreChoice::Memory,
        _ => StoreChoice::TempFile,
    }
}

/// Runs the benchmark.
pub fn run(spec: &WalBenchSpec) -> Result<WalBenchResult, ToolError> {
    let store = spec.store.unwrap_or_else(|| default_store(spec));
    let mut built =
        DeviceBuilder::new(DeviceSpec::preset(&spec.preset)).host(HostPath::IoUringCmd).store(store).build()?;
    if spec.trace.is_some() {
        built.device.enable_trace();
    }
    run_on(built.device, built.host, spec)
}

fn run_on<S: MediaStore + 'static>(
    device: Device<S>,
    host_side: HostSide,
    spec: &WalBenchSpec,
) -> Result<WalBenchResult, ToolError> {
    let geometry = *device.namespace().geometry();
    let zone_cap_bytes = geometry.zone_cap_lba << geometry.lba_shift;
    let estimate = spec.records * (spec.record_bytes + 4) * 2 + zone_cap_bytes;
    let zones: Vec<u32> = (0..(estimate.div_ceil(zone_cap_bytes) as u32).min(geometry.zones)).collect();
    let config = WalConfig {
        design: spec.design,
        zones: zones.clone(),
        buffer_bytes: spec.buffer_bytes,
        queue_depth: spec.queue_depth,
        barrier_bytes: spec.barrier_bytes.unwrap_or(zone_cap_bytes),
        recovery_read_bytes: spec.read_bytes,
    };
    let mut simulation = Simulation::with_host(device, host_side, Some(spec.seed));
    let host = simulation.host();
    let mut wal = Wal::new(host.clone(), config.clone())?;
    let outcome: Slot<(u64, LatencyStats, WalStats)> = Rc::new(RefCell::new(None));
    let sink = Rc::clone(&outcome);
    let bench = spec.clone();
    simulation.spawn(async move {
        let record = vec![0x5au8; bench.record_bytes as usize];
        let mut latency = LatencyStats::default();
        let result = async {
            for put in 0..bench.records {
                if bench.put_cost_ns > 0 {
                    host.sleep(bench.put_cost_ns).await;
                }
                let started = host.now_ns();
                wal.append(&record).await?;
                if bench.sync_every > 0 && (put + 1).is_multiple_of(bench.sync_every) {
                    wal.sync().await?;
                }
                latency.record(host.now_ns() - started);
            }
            wal.sync().await?;
            Ok::<_, ToolError>(())
        }
        .await;
        *sink.borrow_mut() = Some(result.map(|()| (host.now_ns(), latency, wal.stats().clone())));
    });
    let wall = Instant::now();
    simulation.run();
    let wall_seconds = wall.elapsed().as_secs_f64();
    let (device_time_ns, put_latency, wal_stats) = take(&outcome, "the benchmark")?;
    let (recovery, recovered_records, recovery_ns) = if spec.recover {
        let out: Slot<(RecoveryStats, u64, u64)> = Rc::new(RefCell::new(None));
        let sink = Rc::clone(&out);
        let host = simulation.host();
        let mut reader = Wal::new(host.clone(), config)?;
        let apply_cost_ns = spec.apply_cost_ns;
        let written = vec![0x5au8; spec.record_bytes as usize];
        simulation.spawn(async move {
            let started = host.now_ns();
            // Each record is checked and dropped as it comes, so a 1 GiB log is not held twice over.
            let mut altered = 0u64;
            let result = match reader.recover_each(|record| altered += u64::from(record != written)).await {
                Ok(_) if altered > 0 => Err(ToolError::RecoveredAltered(altered)),
                Ok(records) => {
                    // RocksDB applies each recovered record to the memtable once the log is read.
                    host.sleep(apply_cost_ns.saturating_mul(records)).await;
                    Ok((reader.last_recovery().clone(), records, host.now_ns() - started))
                }
                Err(error) => Err(ToolError::Wal(error)),
            };
            *sink.borrow_mut() = Some(result);
        });
        simulation.run();
        let (stats, count, total) = take(&out, "recovery")?;
        (Some(stats), Some(count), Some(total))
    } else {
        (None, None, None)
    };
    if let Some(path) = &spec.trace {
        simulation
            .with_device(|device| write_device_trace(path, "wal-bench", &[], &[], device))
            .map_err(|error| ToolError::Usage(format!("option trace: {}: {error}", path.display())))?;
    }
    let seconds = device_time_ns as f64 / 1e9;
    Ok(WalBenchResult {
        spec: spec.clone(),
        device_time_ns,
        kiops: spec.records as f64 / seconds / 1000.0,
        mib_per_s: (spec.records * spec.record_bytes) as f64 / seconds / 1_048_576.0,
        put_latency,
        wal: wal_stats,
        recovery,
        recovered_records,
        recovery_ns,
        wall_seconds,
    })
}

pub fn to_json(result: &WalBenchResult) -> serde_json::Value {
    let latency = &result.put_latency;
    let mut value = serde_json::to_value(result).unwrap_or_default();
    value["put_latency_ns"] = json!({
        "min": latency.min(), "max": latency.max(), "mean": latency.mean(), "stddev": latency.stddev(),
        "N": latency.count(), "percentile": { "50.000000": latency.percentile(50.0), "99.000000": latency.percentile(99.0) },
    });
    value
}

pub fn to_text(result: &WalBenchResult) -> String {
    let spec = &result.spec;
    let mut text = format!(
        "wal-bench: {:?} on {}, buffer {} B, QD {}, barrier {}, {} records of {} B\n  put: IOPS={:.2}k, BW={:.1}MiB/s, device time {:.3} s\n    lat (usec): avg={:.2}, p50={:.2}, p99={:.2}, max={:.2}\n  wal: {} entries, {} barriers, {} zone rolls, {} flash bytes\n",
        spec.design,
        spec.preset,
        spec.buffer_bytes,
        spec.queue_depth,
        spec.barrier_bytes.map_or_else(|| "a zone".to_string(), |bytes| format!("{bytes} B")),
        spec.records,
        spec.record_bytes,
        result.kiops,
        result.mib_per_s,
        result.device_time_ns as f64 / 1e9,
        result.put_latency.mean() / 1000.0,
        result.put_latency.percentile(50.0) as f64 / 1000.0,
        result.put_latency.percentile(99.0) as f64 / 1000.0,
        result.put_latency.max() as f64 / 1000.0,
        result.wal.entries,
        result.wal.barriers,
        result.wal.zone_rolls,
        result.wal.flash_bytes
    );
    if let (Some(recovery), Some(records), Some(total)) =
        (&result.recovery, result.recovered_records, result.recovery_ns)
    {
        text.push_str(&format!(
            "  recovery: {records} records from {} entries in {:.3} s of device time: I/O {:.3} s in {} reads of {} B, then applying them; parsing {:.3} s and ordering {:.3} s of this host's CPU\n",
            recovery.entries,
            total as f64 / 1e9,
            recovery.io_device_ns as f64 / 1e9,
            recovery.reads,
            recovery.bytes_read,
            recovery.parse_wall_ns as f64 / 1e9,
            recovery.order_wall_ns as f64 / 1e9
        ));
    }
    text.push_str(&format!("  zonelab: {:.3} s of wall time\n", result.wall_seconds));
    text
}
