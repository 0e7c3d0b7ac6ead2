//! Real RocksDB in real time, for the experiments whose effects live at application level: Debian's db_bench
//! through the zonelab FileSystem plugin (`LD_PRELOAD`, `--fs_uri=zonelab://...`) and zonelab_ycsb, which links
//! the plugin. Each run is a process of its own; its throughput comes from the tool's output and the device's
//! and file system's counters from the plugin's `ZONELAB_STATS` line. Needs Debian's RocksDB and g++
//! (`apt-get install -y librocksdb-dev rocksdb-tools g++`); `rocksdb/build.sh` builds the plugin.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The program a run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RealDbTool {
    /// Debian's db_bench with the plugin preloaded.
    DbBench,
    /// zonelab_ycsb (rocksdb/ycsb.cc), built beside the plugin.
    Ycsb,
}

/// What one run gave.
#[derive(Clone, Debug, Default)]
pub struct RealDbResult {
    /// Thousands of operations per second, by db_bench benchmark or YCSB phase (`fillrandom`, `load`, `run`).
    pub kops: BTreeMap<String, f64>,
    /// The plugin's counters of the last mount (`{"device": ..., "fs": ...}`), when it printed them.
    pub stats: Option<Value>,
}

static PLUGIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The plugin library, built once per process by `rocksdb/build.sh` unless `use_plugin` named one; the error
/// says what is missing.
pub fn plugin() -> Result<&'static Path, String> {
    PLUGIN.get_or_init(find_or_build_plugin).as_deref().map_err(Clone::clone)
}

/// Runs use `path` as the plugin (a test builds its own, with its profile); no effect once a run found one.
pub fn use_plugin(path: PathBuf) {
    let _ = PLUGIN.set(Ok(path));
}

fn find_or_build_plugin() -> Result<PathBuf, String> {
    if Command::new("db_bench").arg("--help").output().is_err() {
        return Err(format!("db_bench is not installed: {MISSING}"));
    }
    build_plugin(None, "release")
}

const MISSING: &str = "needs Debian's RocksDB and g++ (apt-get install -y librocksdb-dev rocksdb-tools g++)";

/// Builds the plugin and zonelab_ycsb with `rocksdb/build.sh` into `out` (by default `target/PROFILE`), against
/// libzonelab built with the cargo profile `profile`; returns the plugin's path.
pub fn build_plugin(out: Option<&Path>, profile: &str) -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rocksdb/build.sh");
    if !script.exists() {
        return Err(format!("{} is not here: the RocksDB plugin builds from zonelab's source tree", script.display()));
    }
    let mut command = Command::new("bash");
    command.arg(&script);
    if let Some(out) = out {
        command.arg(out).arg(profile);
    }
    let built = command.output().map_err(|error| format!("running {}: {error}", script.display()))?;
    if !built.status.success() {
        return Err(format!(
            "building the RocksDB plugin failed ({MISSING}):\n{}",
            String::from_utf8_lossy(&built.stderr).trim_end()
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&built.stdout).trim()))
}

/// Runs `tool` with `args` through the plugin and reads its throughput and counters.
pub fn run(tool: RealDbTool, args: &[String]) -> Result<RealDbResult, String> {
    let plugin = plugin()?;
    let mut command = match tool {
        RealDbTool::DbBench => {
            let mut command = Command::new("db_bench");
            command.env("LD_PRELOAD", plugin);
            command
        }
        RealDbTool::Ycsb => Command::new(plugin.with_file_name("zonelab_ycsb")),
    };
    let output = command.env("ZONELAB_STATS", "1").args(args).output().map_err(|error| format!("{tool:?}: {error}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(format!("{tool:?} {} failed ({}): {}", args.join(" "), output.status, tail.join(" / ")));
    }
    let kops = match tool {
        RealDbTool::DbBench => db_bench_kops(&stdout),
        RealDbTool::Ycsb => ycsb_kops(&stdout)?,
    };
    if kops.is_empty() {
        return Err(format!("{tool:?} {} printed no throughput", args.join(" ")));
    }
    Ok(RealDbResult { kops, stats: last_stats(&stderr) })
}

/// db_bench's result lines: `fillrandom   :  5.2 micros/op 192307 ops/sec ...`.
fn db_bench_kops(stdout: &str) -> BTreeMap<String, f64> {
    let mut kops = BTreeMap::new();
    for line in stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let rate = words
            .windows(2)
            .find(|pair| pair[1].trim_end_matches(';') == "ops/sec")
            .and_then(|pair| pair[0].parse::<f64>().ok());
        if let (Some(name), Some(rate)) = (words.first(), rate) {
            kops.insert(name.to_string(), rate / 1000.0);
        }
    }
    kops
}

/// zonelab_ycsb's JSON: a job per phase (`load`, `run`) with its `ops_per_s`.
fn ycsb_kops(stdout: &str) -> Result<BTreeMap<String, f64>, String> {
    let json: Value = serde_json::from_str(stdout).map_err(|error| format!("zonelab_ycsb's output: {error}"))?;
    let jobs = json["jobs"].as_array().ok_or("zonelab_ycsb's output has no jobs")?;
    Ok(jobs
        .iter()
        .filter_map(|job| Some((job["jobname"].as_str()?.to_string(), job["ops_per_s"].as_f64()? / 1000.0)))
        .collect())
}

/// The last `zonelab stats URI: {...}` line the plugin printed.
fn last_stats(stderr: &str) -> Option<Value> {
    stderr
        .lines()
        .rev()
        .filter(|line| line.starts_with("zonelab stats "))
        .find_map(|line| serde_json::from_str(line.split_once(": ")?.1).ok())
}

/// A metric of a run: `PHASE.kops` (a db_bench benchmark or a YCSB phase), `fs.zone_resets`,
/// `device.blocks_erased` or `device.energy_j`; for a count, the count too (few events move a comparison).
pub fn metric(result: &RealDbResult, metric: &str) -> Result<(f64, Option<u64>), String> {
    if let Some(phase) = metric.strip_suffix(".kops") {
        return result.kops.get(phase).map(|&kops| (kops, None)).ok_or_else(|| format!("no {phase} in the run"));
    }
    let stats = result.stats.as_ref().ok_or("the plugin printed no counters (ZONELAB_STATS)")?;
    let count = |value: Option<f64>, what: &str| {
        value.map(|value| (value, Some(value as u64))).ok_or_else(|| format!("no {what} in the plugin's counters"))
    };
    match metric {
        "fs.zone_resets" => count(stats["fs"]["zone_resets"].as_f64(), "fs.zone_resets"),
        "device.blocks_erased" => {
            let erases = stats["device"]["flash"]["block_erases"].as_array();
            count(erases.map(|all| all.iter().filter_map(Value::as_f64).sum()), "device.flash.block_erases")
        }
        "device.energy_j" => {
            stats["device"]["energy_j_total"].as_f64().map(|joules| (joules, None)).ok_or_else(|| "no energy".into())
        }
        _ => Err(format!("unknown metric {metric}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_bench_and_ycsb_output_and_the_plugins_counters_parse() {
        let db_bench = "Keys:       16 bytes each\nfillrandom   :       5.200 micros/op 192307 ops/sec 10.000 seconds \
                        1923070 operations;   75.2 MB/s\nreadrandom   :       8.000 micros/op 125000 ops/sec;\n";
        let kops = db_bench_kops(db_bench);
        assert_eq!(kops.get("fillrandom"), Some(&192.307));
        assert_eq!(kops.get("readrandom"), Some(&125.0));
        assert_eq!(kops.len(), 2, "only result lines: {kops:?}");

        let ycsb = r#"{"jobs": [{"jobname": "load", "ops_per_s": 20000.0}, {"jobname": "run", "ops_per_s": 5500.5}]}"#;
        let stats = "noise\nzonelab stats zonelab://x: {\"fs\": {\"zone_resets\": 7}, \"device\": {\"flash\": \
                     {\"block_erases\": [3, 4, 5]}, \"energy_j_total\": 1.5}}\n";
        let result = RealDbResult { kops: ycsb_kops(ycsb).expect("json"), stats: last_stats(stats) };
        assert_eq!(metric(&result, "run.kops"), Ok((5.5005, None)));
        assert_eq!(metric(&result, "fs.zone_resets"), Ok((7.0, Some(7))));
        assert_eq!(metric(&result, "device.blocks_erased"), Ok((12.0, Some(12))));
        assert_eq!(metric(&result, "device.energy_j"), Ok((1.5, None)));
        assert!(metric(&result, "fillrandom.kops").is_err());
    }
}
