//! kv-bench, RocksDB's write path on zonedfs in virtual time: memtables flush into L0, compactions merge
//! levels and delete their inputs (so zonedfs resets zones), unsynced puts run at their host CPU's rate, and
//! synced puts wait when a reset load's erases hold the dies.

use zonelab_bench::kvbench::{parse_args, run, KvBenchResult};

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

/// `--trace`: a kv-bench run (and a wal-bench run) as a Perfetto trace: its flushes and compactions with arrows
/// to the commands they caused (a compaction's zone resets among them), every command a slice on its zone's
/// track with arrows to the flash operations it caused; the same run without it gives the same figures.
#[test]
fn a_trace_holds_every_command_of_the_run_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kv.json");
    let mut args = SMALL.to_vec();
    args.push("--runtime=1");
    let plain = bench(&args);
    let trace_arg = format!("--trace={}", path.display());
    args.push(&trace_arg);
    let traced = bench(&args);
    assert_eq!((traced.puts, traced.flushes, traced.compactions), (plain.puts, plain.flushes, plain.compactions));
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).expect("trace")).expect("json");
    let events = trace["traceEvents"].as_array().expect("events");
    let count = |pid: u64, phase: &str| events.iter().filter(|e| e["pid"] == pid && e["ph"] == phase).count();
    // Device commands (pid 2): at least a write for every flushed or compacted MiB, and reads for compactions.
    let commands = count(2, "X");
    assert!(commands as u64 >= traced.compaction_bytes_written >> 20, "{commands} commands");
    assert!(count(3, "X") > 0, "flash operations");
    let starts = events.iter().filter(|e| e["ph"] == "s").count();
    assert!(starts > 0 && starts == events.iter().filter(|e| e["ph"] == "f").count(), "arrows start and land once");
    assert_eq!(trace["otherData"]["dropped_commands"], 0);
    // kv-bench's own operations (pid 1): a slice per flush and per compaction, each on its kind's track.
    let named = |prefix: &str| {
        events
            .iter()
            .filter(|e| e["pid"] == 1 && e["ph"] == "X" && e["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .count()
    };
    assert_eq!((named("flush"), named("compaction")), (traced.flushes as usize, traced.compactions as usize));
    let tracks: Vec<&str> = events
        .iter()
        .filter(|e| e["pid"] == 1 && e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(tracks.contains(&"flush") && tracks.contains(&"compaction"), "{tracks:?}");
    // zonedfs's own work: a slice per journal commit and per garbage collection, as many as it counted.
    assert!(tracks.contains(&"zonedfs journal"), "{tracks:?}");
    let (commits, collections) = (named("commit of "), named("GC of zone "));
    assert_eq!((commits as u64, collections as u64), (traced.fs.journal_commits, traced.fs.gc_runs));
    assert!(commits > 0);
    // A slice per put, and arrows from the puts whose WAL append reached the device to its commands.
    assert!(traced.puts < 100_000, "the test's puts fit the trace's window");
    // The run counts the puts that ended within its runtime; each writer's last may end after it.
    let put_slices = named("put") as u64;
    assert!((traced.puts..=traced.puts + u64::from(traced.spec.writers)).contains(&put_slices), "{put_slices}");
    let put_tids: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["pid"] == 1 && e["name"] == "thread_name")
        .filter(|e| e["args"]["name"].as_str().is_some_and(|name| name.starts_with("puts")))
        .map(|e| &e["tid"])
        .collect();
    // zonedfs buffers the WAL's appends: only the puts whose append filled the buffer wrote to the device.
    let group_appends = named("put, appending ");
    let from_puts = events.iter().filter(|e| e["ph"] == "s" && e["pid"] == 1 && put_tids.contains(&&e["tid"])).count();
    assert!(from_puts > 0 && from_puts <= group_appends * 4, "{group_appends} WAL appends, {from_puts} arrows");
    // Arrows from each compaction to the commands its thread submitted while it ran: among them the zone resets
    // that deleting its input files caused, and nothing before the compaction began.
    let thread_of = |name: &str| {
        events
            .iter()
            .find(|e| e["pid"] == 1 && e["name"] == "thread_name" && e["args"]["name"] == name)
            .map(|e| e["tid"].clone())
            .expect("the track")
    };
    let compaction_tid = thread_of("compaction");
    // Slices by track and arrows' ends by id, looked up once each: the trace holds a slice per put.
    let mut by_track: std::collections::HashMap<(u64, u64), Vec<&serde_json::Value>> = Default::default();
    for slice in events.iter().filter(|e| e["ph"] == "X") {
        let track = (slice["pid"].as_u64().expect("pid"), slice["tid"].as_u64().expect("tid"));
        by_track.entry(track).or_default().push(slice);
    }
    let ends: std::collections::HashMap<u64, &serde_json::Value> =
        events.iter().filter(|e| e["ph"] == "f").map(|e| (e["id"].as_u64().expect("id"), e)).collect();
    let slice_at = |pid: u64, tid: &serde_json::Value, ts: f64| {
        by_track.get(&(pid, tid.as_u64().expect("tid"))).and_then(|slices| {
            slices.iter().copied().find(|e| {
                e["ts"].as_f64().is_some_and(|start| start <= ts + 1e-3)
                    && e["ts"].as_f64().zip(e["dur"].as_f64()).is_some_and(|(start, dur)| ts <= start + dur + 1e-3)
            })
        })
    };
    let mut caused = Vec::new();
    for start in events.iter().filter(|e| e["ph"] == "s" && e["pid"] == 1 && e["tid"] == compaction_tid) {
        let end = ends.get(&start["id"].as_u64().expect("id")).expect("the arrow lands");
        assert_eq!(end["pid"], 2, "a compaction's arrows go to device commands");
        let ts = end["ts"].as_f64().expect("ts");
        let command = slice_at(2, &end["tid"], ts).expect("the command the arrow lands on");
        let compaction = slice_at(1, &compaction_tid, start["ts"].as_f64().expect("ts")).expect("its compaction");
        assert!(command["ts"].as_f64() >= compaction["ts"].as_f64(), "{command} before {compaction}");
        caused.push(command["name"].as_str().expect("name").to_string());
    }
    assert!(caused.iter().any(|name| name == "zone reset"), "a compaction caused a zone reset: {caused:?}");
    assert!(caused.iter().any(|name| name == "read") && caused.iter().any(|name| name == "write"), "{caused:?}");

    let wal = dir.path().join("wal.json");
    let spec = zonelab_bench::walbench::parse_args(&["--records=500".into(), format!("--trace={}", wal.display())])
        .expect("wal-bench options");
    let result = zonelab_bench::walbench::run(&spec).expect("wal-bench runs");
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&wal).expect("trace")).expect("json");
    let appends = trace["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["pid"] == 2 && e["ph"] == "X" && e["name"] == "zone append")
        .count();
    assert_eq!(appends as u64, result.wal.entries, "one zone append per WAL entry");
}
