//! The kinds of point an experiment measures, one per tool: a fio run, wal-bench, kv-bench, file-churn, or real
//! RocksDB (db_bench, zonelab_ycsb); the placeholders a series' arguments take; and each tool's metrics.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use zonelab_bench::realdb::RealDbTool;
use zonelab_fio::{parse_invocation, run as run_fio, FioResult};

use super::{Figure, Point, Series};

/// What measures a series' points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tool {
    Fio,
    WalBench,
    KvBench,
    FileChurn,
    /// Real RocksDB on the wall clock: each point the median of rounds.
    RealDb(RealDbTool),
}

/// A run in virtual time that points may read: its tool, its arguments, and for fio the seed. Each is
/// deterministic on its own, so it is run once, in any order, on any thread.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum RunKey {
    Fio(Vec<String>, u64),
    WalBench(Vec<String>),
    KvBench(Vec<String>),
    FileChurn(Vec<String>),
}

/// What a virtual-time run gave.
enum Ran {
    Fio(Box<FioResult>),
    WalBench(Box<zonelab_bench::walbench::WalBenchResult>),
    KvBench(Box<zonelab_bench::kvbench::KvBenchResult>),
    FileChurn(Box<zonelab_bench::filechurn::FileChurnResult>),
}

impl RunKey {
    /// Runs it; with `traces`, it writes its trace there (`trace_file`), which changes none of its figures.
    fn run(&self, traces: Option<&Path>) -> Result<Ran, String> {
        let text = |error: zonelab_bench::args::ToolError| error.to_string();
        let trace = traces.map(|dir| dir.join(self.trace_file()));
        Ok(match self {
            RunKey::Fio(args, seed) => {
                let mut invocation = parse_invocation(args, |_| Err("experiments use no job files".into()))
                    .map_err(|error| error.to_string())?;
                invocation.trace = trace;
                Ran::Fio(Box::new(run_fio(&invocation, *seed).map_err(|error| error.to_string())?))
            }
            RunKey::WalBench(args) => {
                let mut spec = zonelab_bench::walbench::parse_args(args).map_err(text)?;
                spec.trace = trace;
                Ran::WalBench(Box::new(zonelab_bench::walbench::run(&spec).map_err(text)?))
            }
            RunKey::KvBench(args) => {
                let mut spec = zonelab_bench::kvbench::parse_args(args).map_err(text)?;
                spec.trace = trace;
                Ran::KvBench(Box::new(zonelab_bench::kvbench::run(&spec).map_err(text)?))
            }
            RunKey::FileChurn(args) => {
                let mut spec = zonelab_bench::filechurn::parse_args(args).map_err(text)?;
                spec.trace = trace;
                Ran::FileChurn(Box::new(zonelab_bench::filechurn::run(&spec).map_err(text)?))
            }
        })
    }

    /// Its tool's command name, its arguments and fio's seed.
    fn parts(&self) -> (&'static str, &[String], Option<u64>) {
        match self {
            RunKey::Fio(args, seed) => ("fio", args, Some(*seed)),
            RunKey::WalBench(args) => ("wal-bench", args, None),
            RunKey::KvBench(args) => ("kv-bench", args, None),
            RunKey::FileChurn(args) => ("file-churn", args, None),
        }
    }

    /// The name of its trace: the tool, a hash of its arguments and fio's seed.
    fn trace_file(&self) -> String {
        let (tool, args, seed) = self.parts();
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(args, &mut hasher);
        let hash = std::hash::Hasher::finish(&hasher);
        let seed = seed.map(|seed| format!("-seed{seed}")).unwrap_or_default();
        format!("{tool}-{hash:016x}{seed}.json")
    }

    /// Its command line, as a line of `traces.tsv` says which run a trace is.
    fn describe(&self) -> String {
        let (tool, args, seed) = self.parts();
        let seed = seed.map(|seed| format!(" (seed {seed})")).unwrap_or_default();
        format!("zonelab {tool} {}{seed}", args.join(" "))
    }
}

/// Runs that several points or series read different metrics of: a run in virtual time is deterministic (the
/// points of a series that reads one job of many, `JOB{x}/...`, share one), and a real program's run is slow
/// and noisy, so each is run once.
#[derive(Default)]
pub(super) struct Runs {
    done: HashMap<RunKey, Ran>,
    realdb: HashMap<Vec<String>, zonelab_bench::realdb::RealDbResult>,
    /// Where each virtual-time run writes its trace, when the experiment is traced.
    pub traces: Option<PathBuf>,
}

impl Runs {
    /// Runs the virtual-time runs of `keys` not yet done, `jobs` at a time on as many threads. The points then
    /// find them done and measure the same as if each had run alone: the results are the same bytes whatever
    /// `jobs` is. A run that fails is left for its point, which reports the error.
    pub fn prefetch(&mut self, keys: Vec<RunKey>, jobs: usize) {
        let mut todo: Vec<RunKey> = Vec::new();
        for key in keys {
            if !self.done.contains_key(&key) && !todo.contains(&key) {
                todo.push(key);
            }
        }
        let traces = self.traces.as_deref();
        for (key, ran) in todo.iter().zip(zonelab_bench::parallel::map(&todo, jobs, "runs", |key| key.run(traces))) {
            if let Ok(ran) = ran {
                self.done.insert(key.clone(), ran);
            }
        }
    }

    /// Which trace file is which run: a `traces.tsv` of file and run, in file order, beside the traces.
    pub fn write_trace_index(&self) -> std::io::Result<()> {
        let Some(dir) = &self.traces else { return Ok(()) };
        let mut lines: Vec<String> =
            self.done.keys().map(|key| format!("{}\t{}", key.trace_file(), key.describe())).collect();
        lines.sort();
        std::fs::write(dir.join("traces.tsv"), format!("file\trun\n{}\n", lines.join("\n")))
    }

    /// The run of `key`: done before, or now.
    fn get(&mut self, key: RunKey) -> Result<&Ran, String> {
        match self.done.entry(key) {
            Entry::Occupied(done) => Ok(done.into_mut()),
            Entry::Vacant(slot) => {
                let ran = slot.key().run(self.traces.as_deref())?;
                Ok(slot.insert(ran))
            }
        }
    }
}

impl Tool {
    /// The series' tool (`tool`, fio when left out).
    pub fn of(series: &Series) -> Result<Tool, String> {
        Ok(match series.tool.as_deref() {
            None | Some("fio") => Tool::Fio,
            Some("wal-bench") => Tool::WalBench,
            Some("kv-bench") => Tool::KvBench,
            Some("file-churn") => Tool::FileChurn,
            Some("db-bench") => Tool::RealDb(RealDbTool::DbBench),
            Some("ycsb") => Tool::RealDb(RealDbTool::Ycsb),
            Some(other) => {
                return Err(format!(
                    "series {}: unknown tool {other:?} (fio, wal-bench, kv-bench, file-churn, db-bench or ycsb)",
                    series.label
                ))
            }
        })
    }

    /// The virtual-time runs measuring a series at a point takes, given its arguments `args`: none for real
    /// programs, which run on the wall clock one at a time.
    pub fn runs(self, figure: &Figure, args: &[String]) -> Vec<RunKey> {
        match self {
            Tool::Fio => (1..=figure.seeds.max(1)).map(|seed| RunKey::Fio(args.to_vec(), seed)).collect(),
            Tool::WalBench => vec![RunKey::WalBench(args.to_vec())],
            Tool::KvBench => vec![RunKey::KvBench(args.to_vec())],
            Tool::FileChurn => vec![RunKey::FileChurn(args.to_vec())],
            Tool::RealDb(_) => Vec::new(),
        }
    }

    /// Measures `series` at `x` with its arguments `args`.
    pub fn measure(
        self,
        runs: &mut Runs,
        figure: &Figure,
        series: &Series,
        x: u32,
        args: &[String],
        quick: bool,
    ) -> Result<Point, String> {
        let point = |y, events, by_seed, file_system| Point { x, y, events, by_seed, file_system, late_share: None };
        match self {
            Tool::WalBench => {
                let Ran::WalBench(result) = runs.get(RunKey::WalBench(args.to_vec()))? else { unreachable!() };
                Ok(point(wal_metric(result, &series.metric)?, None, Vec::new(), None))
            }
            Tool::KvBench => {
                let Ran::KvBench(result) = runs.get(RunKey::KvBench(args.to_vec()))? else { unreachable!() };
                let (y, events) = kv_metric(result, &series.metric)?;
                Ok(point(y, events, Vec::new(), None))
            }
            Tool::FileChurn => {
                let Ran::FileChurn(result) = runs.get(RunKey::FileChurn(args.to_vec()))? else { unreachable!() };
                // `{x}` in a metric names the point's window (`window{x}/write.kiops`), as in fio's.
                let (y, events) = churn_metric(result, &series.metric.replace("{x}", &x.to_string()))?;
                let file_system = result.logfs.as_ref().map(|stats| {
                    format!(
                        "logfs reset {} zones, {} of them not yet full; {} zones cleaned, {} checkpoints",
                        stats.zone_resets,
                        stats.partial_zone_resets,
                        stats.foreground_cleanings + stats.background_cleanings,
                        stats.checkpoints
                    )
                });
                Ok(point(y, events, Vec::new(), file_system))
            }
            Tool::RealDb(tool) => {
                // Rounds, each with its own seed: the wall clock is noisy, so a claim whose two figures' ranges
                // over the rounds overlap is not settled (`seed_ranges_overlap`).
                let rounds = if quick { figure.seeds.min(2) } else { figure.seeds }.max(1);
                let (mut measured, mut late_shares) = (Vec::new(), Vec::new());
                for round in 1..=rounds {
                    let args: Vec<String> = args.iter().map(|arg| arg.replace("{seed}", &round.to_string())).collect();
                    let key: Vec<String> = std::iter::once(format!("{tool:?}")).chain(args.iter().cloned()).collect();
                    let result = match runs.realdb.entry(key) {
                        Entry::Occupied(done) => done.into_mut(),
                        Entry::Vacant(slot) => slot.insert(zonelab_bench::realdb::run(tool, &args)?),
                    };
                    measured.push(zonelab_bench::realdb::metric(result, &series.metric)?);
                    late_shares.extend(result.stats.as_ref().and_then(|stats| stats["pacing"]["late_share"].as_f64()));
                }
                let mut ys: Vec<f64> = measured.iter().map(|&(y, _)| y).collect();
                let events = measured.iter().filter_map(|&(_, events)| events).min();
                let by_seed = if ys.len() > 1 { ys.clone() } else { Vec::new() };
                ys.sort_by(f64::total_cmp);
                // The worst round's pacing: the plugin's counters carry the device's.
                let late_share = late_shares.into_iter().reduce(f64::max);
                // The median round (the lower of the middle two for an even count).
                Ok(Point { late_share, ..point(ys[(ys.len() - 1) / 2], events, by_seed, None) })
            }
            Tool::Fio => {
                // `{x}` in a metric names the job of the point (`w{x}/write.kiops`: window x of one run).
                let metric_name = series.metric.replace("{x}", &x.to_string());
                let mut measured = Vec::new();
                for seed in 1..=figure.seeds.max(1) {
                    let Ran::Fio(result) = runs.get(RunKey::Fio(args.to_vec(), seed))? else { unreachable!() };
                    measured.push(metric(result, &metric_name)?);
                }
                let (y, events) = measured[0];
                let by_seed = if measured.len() > 1 { measured.iter().map(|&(y, _)| y).collect() } else { Vec::new() };
                Ok(point(y, events, by_seed, None))
            }
        }
    }
}

/// A series' arguments at `x`, with the placeholders filled in: `{x}` and its multiples, and the run lengths and
/// sizes a quick run shrinks.
pub(super) fn fill(args: &str, figure: &Figure, x: u32, quick: bool) -> Vec<String> {
    let (runtime, ramp) = if quick { ("100ms", "20ms") } else { ("2s", "500ms") };
    let extra = figure.when_x_positive.as_deref().filter(|_| x > 0).unwrap_or("");
    format!("{args} {extra}")
        .replace("{x}", &x.to_string())
        .replace("{x*256}", &(u64::from(x) * 256).to_string())
        .replace("{x*1024}", &(u64::from(x) * 1024).to_string())
        // YCSB's core workloads by number: 1 is A, ..., 6 is F.
        .replace("{ycsb_workload}", &ycsb_workload(x))
        .replace("{db_seconds}", if quick { "2" } else { "10" })
        .replace("{ycsb_records}", if quick { "5000" } else { "20000" })
        .replace("{ycsb_operations}", if quick { "10000" } else { "100000" })
        // ReZNS's YCSB runs must write enough for zonedfs to reset zones of 64 MiB.
        .replace("{rezns_records}", if quick { "100000" } else { "200000" })
        .replace("{runtime}", runtime)
        .replace("{ramp}", ramp)
        .replace("{records}", if quick { "5000" } else { "40000" })
        .replace("{zinc_runtime}", if quick { "500ms" } else { "3s" })
        // A finish pads about 1 GiB (about a second of the write budget): runs long enough for ten.
        .replace("{finish_runtime}", if quick { "1s" } else { "10s" })
        // The finish sweep in the artifact's form measures the finish rate itself: five finishes or more even when
        // quick, and no more than its pool of 14 zones holds (about 13 s of finishes alone), since a finish of a
        // full zone does nothing.
        .replace("{finish_sweep_runtime}", if quick { "5s" } else { "12s" })
        .replace("{recovery_records}", if quick { "4096" } else { "16384" })
        // kv-bench: 32 full-zone resets a second need a pool of prefilled zones for the whole run.
        .replace("{kv_runtime}", if quick { "1" } else { "10" })
        .replace("{kv_pool}", if quick { "40" } else { "330" })
        // block-interface-tax: two passes over the 16.4 GiB space in full, the onset of collection in quick.
        .replace("{btax_window}", if quick { "512Mi" } else { "2Gi" })
        // logfs's file (3.75 GiB) overwritten 2 or 8 times in 16 windows: 480 MiB or 1.9 GiB each.
        .replace("{btax_rounds}", if quick { "2" } else { "8" })
        .replace("{churn_jobs}", if quick { "16" } else { "64" })
        .replace("{churn_runtime}", if quick { "5" } else { "60" })
        // Quick runs shrink the device to 96 zones (6 GiB) so that its prefill costs seconds, not minutes: the
        // fewest that hold half of them prefilled and fileserver's 10,000 files within logfs's user capacity.
        .replace("{churn_zones}", if quick { ",zones=96" } else { "" })
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// YCSB's core workload numbered `x` (1 is A, 6 is F).
fn ycsb_workload(x: u32) -> String {
    (b'a'..=b'f').nth(x.saturating_sub(1) as usize).map_or_else(|| x.to_string(), |letter| (letter as char).to_string())
}

/// Bytes in a GiB, the unit papers quote bandwidth in ("2GiB" per second).
const GIB: f64 = (1u64 << 30) as f64;

/// A metric's value, and for a percentile the samples beyond it.
fn metric(result: &FioResult, metric: &str) -> Result<(f64, Option<u64>), String> {
    // `JOB/what` reads job JOB; a bare `what` reads the last job.
    let (job, metric) = match metric.split_once('/') {
        Some((name, what)) => (
            result.jobs.iter().find(|job| job.options.name == name).ok_or_else(|| format!("no job named {name}"))?,
            what,
        ),
        None => (result.jobs.last().ok_or("no job ran")?, metric),
    };
    if job.error != 0 {
        return Err(format!("job {} failed: {}", job.options.name, job.error_message.clone().unwrap_or_default()));
    }
    let group = &result.groups[job.run_group as usize];
    match metric {
        // Pages programmed per page the host wrote, in the job's group.
        "device.waf" => return Ok((group.flash.write_amplification(), None)),
        // Blocks the host FTL wrote to the zoned namespace per block the jobs wrote (1 without one).
        "host.waf" => return Ok((group.host_ftl.map_or(1.0, |counters| counters.write_amplification()), None)),
        _ => {}
    }
    let parts: Vec<&str> = metric.splitn(3, '.').collect();
    let direction = match parts.first() {
        Some(&"read") => &job.read,
        Some(&"write") => &job.write,
        Some(&"trim") => &job.trim,
        Some(&"scheduler") if parts.get(1) == Some(&"commands_per_request") => {
            return Ok((job.scheduler.write_commands as f64 / job.scheduler.write_requests.max(1) as f64, None));
        }
        _ => return Err(format!("unknown metric {metric}")),
    };
    match parts.get(1..) {
        Some(["kiops"]) => Ok((direction.iops() / 1000.0, None)),
        // The rate a rate-limited job achieved (a reset job's resets a second), which may fall short of its ask.
        Some(["iops"]) => Ok((direction.iops(), None)),
        Some(["gib_per_s"]) => Ok((direction.bytes_per_s() / GIB, None)),
        Some(["lat_mean_ms"]) => Ok((direction.lat.mean() / 1e6, None)),
        Some(["clat", percentile]) => {
            let p: f64 = percentile.trim_start_matches('p').parse().map_err(|_| format!("unknown metric {metric}"))?;
            let tail = (direction.clat.count() as f64 * (100.0 - p) / 100.0).floor() as u64;
            Ok((direction.clat.percentile(p) as f64 / 1000.0, Some(tail)))
        }
        _ => Err(format!("unknown metric {metric}")),
    }
}

fn wal_metric(result: &zonelab_bench::walbench::WalBenchResult, metric: &str) -> Result<f64, String> {
    match metric {
        "wal.kiops" => Ok(result.kiops),
        "wal.recovery_io_s" => result
            .recovery
            .as_ref()
            .map(|recovery| recovery.io_device_ns as f64 / 1e9)
            .ok_or_else(|| "no recovery was run (--recover)".into()),
        "wal.recovery_s" => {
            result.recovery_ns.map(|ns| ns as f64 / 1e9).ok_or_else(|| "no recovery was run (--recover)".into())
        }
        _ => Err(format!("unknown metric {metric}")),
    }
}

/// A kv-bench metric: `kv.kiops`, `kv.put.p99.9` (microseconds) with the puts beyond it (see
/// `Point::events`), where its files ended up: `kv.zones.live_pct` (the live share of what the zones in use
/// hold), `kv.zones.files_per_zone`, `kv.zone_resets` (with itself as its count), or what the device did:
/// `kv.blocks_erased` (with itself as its count), `kv.energy_j`.
fn kv_metric(result: &zonelab_bench::kvbench::KvBenchResult, metric: &str) -> Result<(f64, Option<u64>), String> {
    match metric {
        "kv.kiops" => Ok((result.kiops, None)),
        "kv.zones.live_pct" => Ok((result.zones.live_fraction * 100.0, None)),
        "kv.zones.files_per_zone" => Ok((result.zones.files_per_zone, None)),
        "kv.zone_resets" => Ok((result.fs.zone_resets as f64, Some(result.fs.zone_resets))),
        "kv.blocks_erased" => Ok((result.blocks_erased as f64, Some(result.blocks_erased))),
        "kv.energy_j" => Ok((result.energy_j, None)),
        "kv.put.p99.9" => {
            let beyond = result.put_latency.count() / 1000;
            Ok((result.put_latency.percentile(99.9) as f64 / 1000.0, Some(beyond)))
        }
        _ => Err(format!("unknown metric {metric}")),
    }
}

/// A file-churn metric, and for a count the count itself (see `Point::events`).
fn churn_metric(
    result: &zonelab_bench::filechurn::FileChurnResult,
    metric: &str,
) -> Result<(f64, Option<u64>), String> {
    let value = churn_value(result, metric)?;
    Ok((value, (metric == "churn.zones_erased").then_some(value.round() as u64)))
}

fn churn_value(result: &zonelab_bench::filechurn::FileChurnResult, metric: &str) -> Result<f64, String> {
    if let Some((window, figure)) = metric.strip_prefix("window").and_then(|rest| rest.split_once('/')) {
        let n: usize = window.parse().map_err(|_| format!("metric {metric}: {window:?} is not a window's number"))?;
        let Some(window) = n.checked_sub(1).and_then(|index| result.windows.get(index)) else {
            return Err(format!("metric {metric}: the run has {} windows (--windows=N)", result.windows.len()));
        };
        return match figure {
            "write.kiops" => Ok(window.kiops),
            "call.p99.9" => Ok(window.p99_9_us),
            "call.p100" => Ok(window.max_us),
            "host.waf" => Ok(window.host_waf),
            _ => Err(format!("unknown metric {metric}")),
        };
    }
    match metric {
        "churn.mib_per_s" => Ok(result.mib_per_s),
        "churn.ops_per_s" => Ok(result.ops_per_s),
        "churn.zones_erased" => Ok(result.zones_erased),
        "churn.read_energy_j" => Ok(result.read_energy_j),
        "churn.write_energy_j" => Ok(result.write_energy_j),
        "churn.reset_energy_j" => Ok(result.reset_energy_j),
        "churn.total_energy_j" => Ok(result.total_energy_j),
        _ => Err(format!("unknown metric {metric}")),
    }
}
