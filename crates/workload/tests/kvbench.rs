//! kv-bench, RocksDB's write path on zonedfs in virtual time: memtables flush into L0, compactions merge
//! levels and delete their inputs (so zonedfs resets zones), unsynced puts run at their host CPU's rate, and
//! synced puts wait when a reset load's erases hold the dies.

use zonelab_workload::kvbench::{parse_args, run, KvBenchResult};

fn bench(args: &[&str]) -> KvBenchResult {
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    let spec = parse_args(&args).expect("valid options");
    run(&spec).expect("kv-bench runs")
}

/// 64 zones of 16 MiB and a database scaled down with them, so that two seconds hold many flushes.
const SMALL: [&str; 5] = [
    "--preset=zn540,zones=64,namespace.zone-size=\"16MiB\",namespace.zone-cap=\"16MiB\"",
    "--memtable-size=1MiB",
    "--sst-size=1MiB",
    "--level-base-size=4MiB",
    "--reset-pool-zones=4",
];

#[test]
fn memtables_flush_compactions_merge_and_dead_zones_are_reset() {
    let mut args = SMALL.to_vec();
    args.extend(["--runtime=2", "--threads=2"]);
    let result = bench(&args);
    assert!(result.flushes >= 10, "{} flushes", result.flushes);
    assert!(result.compactions >= 5, "{} compactions", result.compactions);
    let flushed = result.flushes << 20;
    assert!(result.compaction_bytes_written > flushed, "leveled compaction rewrites what was flushed");
    assert!(result.level_files.len() >= 3, "data reached L2: {:?}", result.level_files);
    assert!(result.fs.zone_resets > 0, "deleted SSTs and WALs free whole zones, which zonedfs resets");
    assert_eq!(bench(&args).puts, result.puts, "the same options give the same run");
}

#[test]
fn unsynced_puts_run_at_the_rate_of_their_host_cpu() {
    let result = bench(&["--preset=zn540,zones=16", "--runtime=1", "--reset-pool-zones=0", "--put-cost-us=10"]);
    // 10 us of CPU a put, and a WAL write of 1 MiB now and then that the writer waits for.
    assert!((95.0..=100.0).contains(&result.kiops), "one writer at 10 us a put: {} KIOPS", result.kiops);
}

#[test]
fn synced_puts_wait_while_resets_erase_the_dies() {
    let run_with = |resets: &str| {
        bench(&[
            "--preset=zn540,zones=64",
            "--runtime=1",
            "--sync=1",
            "--threads=4",
            "--reset-pool-zones=40",
            &format!("--resets-per-second={resets}"),
        ])
    };
    let quiet = run_with("0");
    let resets = run_with("32");
    assert!(resets.reset_load.resets >= 30, "{} resets", resets.reset_load.resets);
    assert!(resets.kiops < quiet.kiops * 0.97, "{} KIOPS with resets, {} without", resets.kiops, quiet.kiops);
    assert!(
        resets.put_latency.percentile(99.9) > 10 * quiet.put_latency.percentile(99.9),
        "the slowest puts wait for a reset's erases"
    );
}

#[test]
fn bad_options_are_refused_by_name() {
    let refuse = |arg: &str, name: &str| {
        let error = parse_args(&[arg.to_string()]).expect_err(arg).to_string();
        assert!(error.contains(name), "{arg}: {error}");
    };
    refuse("--threads=0", "threads");
    refuse("--scheduler=cfq", "scheduler");
    refuse("--memtable-size=0", "memtable-size");
    refuse("--resets-per-second=-1", "resets-per-second");
    refuse("--put-cost-us=abc", "put-cost-us");
    let error = parse_args(&["--colour=blue".to_string()]).expect_err("unknown").to_string();
    assert!(error.contains("colour"), "{error}");
}

/// RocksDB's write-lifetime hints group files by lifetime in zones: with them more of what the zones hold is
/// live at the end and more zones die whole (resets), without them files of every lifetime share zones. The zone
/// map is drawn when asked.
#[test]
fn lifetime_hints_keep_files_of_a_lifetime_together_in_zones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let png = dir.path().join("map.png");
    let mut args = SMALL.to_vec();
    let map_arg = format!("--map={}", png.display());
    args.extend(["--runtime=2", map_arg.as_str()]);
    let hinted = bench(&args);
    assert!(std::fs::metadata(&png).expect("the zone map").len() > 1000);
    args.push("--lifetime-hints=0");
    let unhinted = bench(&args);
    assert!(hinted.zones.zones_in_use > 0 && unhinted.zones.zones_in_use > 0);
    assert!(
        hinted.zones.live_fraction > unhinted.zones.live_fraction,
        "hints: {:?}; none: {:?}",
        hinted.zones,
        unhinted.zones
    );
    assert!(
        hinted.fs.zone_resets > unhinted.fs.zone_resets,
        "{} against {}",
        hinted.fs.zone_resets,
        unhinted.fs.zone_resets
    );
}
