//! The file-churn driver. On zonefs (one file per zone) the same files are written and deleted under every
//! mapping policy and ReZNS's renewable zones erase less; on logfs (the F2FS-like default) resets come from
//! checkpoints after cleaning and are of full zones, which ReZNS erases like the baseline.

use zonelab_bench::filechurn::{parse_args, run, FileChurnResult};
use zonelab_media::FlashOp;

fn churn(policy: &str, fsync: u64) -> FileChurnResult {
    let args: Vec<String> = format!(
        "--fs=zonefs --preset=nvmevirt-rezns,zones=40,media.mapping.policy={policy} --jobs=8 --file-size=15MiB --fsync={fsync} --rounds=3 --prefill=0.5"
    )
    .split_whitespace()
    .map(str::to_string)
    .collect();
    run(&parse_args(&args).expect("options")).expect("runs")
}

#[test]
fn rezns_renews_partly_written_zones_instead_of_erasing_them() {
    let baseline = churn("static-full-erase", 64);
    let rezns = churn("rezns", 64);
    for result in [&baseline, &rezns] {
        assert_eq!(result.files.bytes_written, 8 * 3 * (15 << 20), "every job writes its file three times");
        assert_eq!(result.files.zone_resets, 8 * 3, "and deletes it three times");
    }
    assert_eq!(baseline.zones_erased, 24.0, "each delete erases a whole zone");
    assert!(baseline.reset_energy_j > 0.0);
    assert_eq!((rezns.zones_erased, rezns.reset_energy_j), (0.0, 0.0), "15, 30, 45 of 64 MiB: always renewed");
    let renewable = rezns.wear.renewable.as_ref().expect("rezns stats");
    assert_eq!((renewable.renewed_resets, renewable.spare_reuses), (24, 16), "rounds 2 and 3 reuse the spares");
    assert!(rezns.mib_per_s > baseline.mib_per_s, "{} vs {}", rezns.mib_per_s, baseline.mib_per_s);
    assert!(rezns.total_energy_j < baseline.total_energy_j);
    for result in [&baseline, &rezns] {
        let parts = result.read_energy_j + result.write_energy_j + result.reset_energy_j;
        assert!((parts - result.total_energy_j).abs() < 1e-9, "energy adds up: {parts} vs {}", result.total_energy_j);
        let (programs, erases) = (result.flash.total(FlashOp::PageProgram), result.flash.total(FlashOp::BlockErase));
        let expected = programs as f64 * 7660e-9 + erases as f64 * 43125e-9;
        assert!((expected - result.total_energy_j).abs() < 1e-6, "Table 1's constants: {expected} J");
    }
}

#[test]
fn bad_options_name_what_is_wrong() {
    let error = parse_args(&["--fsync=often".to_string()]).expect_err("not a number");
    assert!(error.is_usage() && error.to_string().contains("fsync"), "{error}");
    let error = parse_args(&["--prefill=1.5".to_string()]).expect_err("not a fraction");
    assert!(error.is_usage() && error.to_string().contains("prefill"), "{error}");
    let too_many =
        parse_args(&["--fs=zonefs", "--preset=nvmevirt-rezns,zones=8", "--jobs=8"].map(String::from)).expect("parses");
    let error = run(&too_many).expect_err("no room");
    assert!(error.is_usage() && error.to_string().contains("8 jobs"), "{error}");
    let unknown = parse_args(&["--preset=nope".to_string()]).expect("parses");
    let error = run(&unknown).expect_err("no such preset");
    assert!(error.is_usage() && error.to_string().contains("unknown preset"), "{error}");
}

fn mix(workload: &str, policy: &str) -> FileChurnResult {
    let args: Vec<String> = format!(
        "--fs=zonefs --workload={workload} --preset=nvmevirt-rezns,zones=40,media.mapping.policy={policy} --jobs=2 --files=4 --file-size=128KiB --runtime=0.5 --seed=3"
    )
    .split_whitespace()
    .map(str::to_string)
    .collect();
    run(&parse_args(&args).expect("options")).expect("runs")
}

#[test]
fn the_filebench_mixes_delete_files_and_rezns_keeps_their_zones() {
    for workload in ["varmail", "fileserver"] {
        let baseline = mix(workload, "static-full-erase");
        let rezns = mix(workload, "rezns");
        for result in [&baseline, &rezns] {
            let files = &result.files;
            assert!(files.bytes_written > 0 && files.bytes_read > 0 && files.zone_resets > 0, "{workload}");
            assert!(result.device_time_ns >= 500_000_000, "{workload}: runs for its device time");
        }
        assert_eq!(baseline.zones_erased, baseline.files.zone_resets as f64, "{workload}: every delete erases a zone");
        let renewable = rezns.wear.renewable.as_ref().expect("rezns stats");
        assert!(renewable.renewed_resets > 0, "{workload}: {renewable:?}");
        assert!(rezns.ops_per_s > baseline.ops_per_s, "{workload}: {} vs {}", rezns.ops_per_s, baseline.ops_per_s);
        assert_eq!(mix(workload, "rezns").files, rezns.files, "{workload}: the same seed gives the same run");
    }
    assert!(parse_args(&["--workload=oltp".to_string()]).expect_err("unknown").to_string().contains("varmail"));
}

fn run_with(args: &str) -> FileChurnResult {
    let args: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    run(&parse_args(&args).expect("options")).expect("runs")
}

#[test]
fn on_logfs_the_fio_setup_cleans_and_resets_only_full_zones_so_rezns_erases_as_much() {
    // 40 zones of 64 MiB, half prefilled; eight 15 MiB files overwritten three times at random fill the rest,
    // so the file system cleans zones and resets them after checkpoints.
    let fio = |policy: &str| {
        run_with(&format!(
            "--preset=nvmevirt-rezns,zones=40,media.mapping.policy={policy} --jobs=8 --file-size=15MiB --fsync=16 --rounds=3 --prefill=0.5"
        ))
    };
    let (baseline, rezns) = (fio("static-full-erase"), fio("rezns"));
    let stats = baseline.logfs.as_ref().expect("logfs stats");
    assert_eq!(baseline.files.bytes_written, 8 * 3 * (15 << 20), "every block overwritten once a round");
    assert_eq!(baseline.files.fsyncs, 8 * 3 * (15 << 20) / 4096 / 16, "an fsync every 16 writes");
    assert!(stats.zone_resets > 0 && stats.checkpoints > 0, "{stats:?}");
    assert_eq!(stats.partial_zone_resets, 0, "F2FS's logs fill a zone before it can be freed: {stats:?}");
    assert_eq!(baseline.zones_erased, stats.zone_resets as f64, "each reset erases a full zone");
    let renewable = rezns.wear.renewable.as_ref().expect("rezns stats");
    assert_eq!(renewable.renewed_resets, 0, "no reset leaves room to renew: {renewable:?}");
    assert_eq!(rezns.zones_erased, baseline.zones_erased);
}

#[test]
fn on_logfs_filebench_counts_flowops_over_a_shared_fileset_and_is_deterministic() {
    let varmail = |seed: u64| {
        run_with(&format!(
            "--workload=varmail --preset=nvmevirt-rezns,zones=40 --jobs=16 --fileset=1000 --runtime=0.5 --prefill=0.25 --seed={seed}"
        ))
    };
    let result = varmail(3);
    let stats = result.logfs.as_ref().expect("logfs stats");
    // A varmail pass is 13 flowops with 2 fsyncs and 1 delete when every pick finds a file.
    assert!(result.files.fsyncs > 100 && result.files.deletes > 50, "{:?}", result.files);
    let passes = result.files.deletes as f64;
    assert!((result.files.ops as f64 / passes - 13.0).abs() < 0.5, "{:?}", result.files);
    assert!((result.files.fsyncs as f64 / passes - 2.0).abs() < 0.1, "{:?}", result.files);
    assert!(stats.node_blocks_written >= result.files.fsyncs, "each fsync writes its inode: {stats:?}");
    assert!(result.device_time_ns >= 500_000_000);
    assert_eq!(varmail(3).files, result.files, "the same seed gives the same run");
    let fileserver = |cores: u32| {
        run_with(&format!(
            "--workload=fileserver --preset=nvmevirt-rezns,zones=40 --jobs=50 --fileset=2000 --runtime=0.2 --prefill=0.25 --cores={cores}"
        ))
    };
    let (two, one) = (fileserver(2), fileserver(1));
    assert!(two.files.bytes_written > 0 && two.files.bytes_read > 0 && two.files.deletes > 0);
    assert_eq!(two.files.fsyncs, 0, "fileserver never fsyncs");
    // It stays in the page cache, so the host's cores bound it: two cores do twice one core's work.
    let ratio = two.files.ops as f64 / one.files.ops as f64;
    assert!((1.8..=2.1).contains(&ratio), "two cores against one: {ratio:.2}x");
}

/// `--trace`: a span per job on logfs and on zonefs, each with arrows to commands of the device, and the run's
/// figures the same as without it.
#[test]
fn a_traced_run_has_each_job_with_arrows_to_its_commands() {
    for fs in ["logfs", "zonefs"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("churn.json");
        let args =
            format!("--fs={fs} --preset=nvmevirt-rezns,zones=64 --jobs=4 --file-size=15MiB --rounds=1 --prefill=0.2");
        let plain = run_with(&args);
        let traced = run_with(&format!("{args} --trace={}", path.display()));
        assert_eq!((traced.ops_per_s, traced.flash), (plain.ops_per_s, plain.flash), "{fs}: tracing changes nothing");
        let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).expect("trace")).expect("json");
        let events = trace["traceEvents"].as_array().expect("events");
        let jobs: Vec<&serde_json::Value> = events.iter().filter(|e| e["pid"] == 1 && e["ph"] == "X").collect();
        assert_eq!(jobs.len(), 4, "{fs}: a slice per job");
        let job_tids: Vec<&serde_json::Value> = jobs.iter().map(|job| &job["tid"]).collect();
        let arrows = events.iter().filter(|e| e["ph"] == "s" && e["pid"] == 1 && job_tids.contains(&&e["tid"])).count();
        assert!(arrows >= 4, "{fs}: the jobs' arrows to their commands: {arrows}");
    }
}

/// `--trace` on logfs: every checkpoint and cleaning of the timed run on a track of its kind, as many as the
/// file system counted, each with arrows to the commands its task submitted while it ran.
#[test]
fn a_traced_logfs_run_shows_its_checkpoints_and_cleanings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("overwrites.json");
    let result = run_with(&format!(
        "--fs=logfs --preset=nvmevirt-rezns,zones=40 --jobs=1 --file-size=160MiB --fsync=16 --rounds=4 --prefill=0.5 \
         --trace={}",
        path.display()
    ));
    let stats = result.logfs.expect("logfs figures");
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).expect("trace")).expect("json");
    let events = trace["traceEvents"].as_array().expect("events");
    let slices = |prefix: &str| -> Vec<&serde_json::Value> {
        let of_kind = events.iter().filter(|e| e["pid"] == 1 && e["ph"] == "X");
        of_kind.filter(|e| e["name"].as_str().expect("name").starts_with(prefix)).collect()
    };
    let (checkpoints, cleanings) = (slices("checkpoint"), slices("cleaning zone "));
    assert!(stats.checkpoints > 0 && stats.foreground_cleanings + stats.background_cleanings > 0, "{stats:?}");
    assert_eq!(checkpoints.len() as u64, stats.checkpoints);
    assert_eq!(cleanings.len() as u64, stats.foreground_cleanings + stats.background_cleanings);
    for (name, slices) in [("checkpoint", &checkpoints), ("cleaning", &cleanings)] {
        let tids: Vec<&serde_json::Value> = slices.iter().map(|slice| &slice["tid"]).collect();
        let track = events.iter().find(|e| e["ph"] == "M" && e["pid"] == 1 && tids.contains(&&e["tid"]));
        let track = track.expect("a named track")["args"]["name"].as_str().expect("name").to_string();
        assert!(track.starts_with(if name == "checkpoint" { "checkpoints" } else { "cleaning" }), "{track}");
        let arrows = events.iter().filter(|e| e["ph"] == "s" && e["pid"] == 1 && tids.contains(&&e["tid"])).count();
        assert!(arrows > 0, "{name}: arrows to the commands it caused");
    }
}

/// `--map` on logfs: the zone map at the end as a PNG and its summary (each job's file and its nodes, the prefill's,
/// the root directory's); the run's figures stay as without it. zonefs refuses it: there a file is its zone.
#[test]
fn a_logfs_run_draws_its_zone_map() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("map.png");
    let args = "--fs=logfs --preset=nvmevirt-rezns,zones=64 --jobs=2 --file-size=15MiB --rounds=1 --prefill=0.2";
    let plain = run_with(args);
    let mapped = run_with(&format!("{args} --map={}", path.display()));
    assert_eq!((mapped.ops_per_s, mapped.flash), (plain.ops_per_s, plain.flash), "drawing changes nothing");
    assert!(plain.zones.is_none());
    let zones = mapped.zones.expect("the map's summary");
    assert!(zones.zones_in_use >= 2 && zones.live_fraction > 0.0 && zones.live_fraction <= 1.0, "{zones:?}");
    assert!(zones.most_files_in_a_zone >= 2, "a job's data zone holds both jobs' overwrites: {zones:?}");
    assert_eq!(&std::fs::read(&path).expect("drawn")[1..4], b"PNG");
    let args = ["--fs=zonefs".to_string(), format!("--map={}", path.display())];
    let refused = parse_args(&args).expect_err("zonefs has no map");
    assert!(refused.to_string().contains("option map"), "{refused}");
}

/// `--windows`: the fio workload's writes on logfs in windows of equal bytes, each with what logfs wrote
/// meanwhile; a window in which the cleaner ran writes more per block than one in which it did not.
#[test]
fn logfs_writes_come_in_windows_that_show_cleaning() {
    let args = "--fs=logfs --preset=nvmevirt-rezns,zones=40 --jobs=1 --file-size=160MiB --fsync=16 --rounds=4 --prefill=0.5 --windows=8";
    let result = run_with(args);
    let stats = result.logfs.as_ref().expect("logfs stats");
    assert_eq!(result.windows.len(), 8, "{:?}", result.windows);
    assert!(result.windows.iter().all(|window| window.bytes_written == 4 * (160 << 20) / 8));
    let moved: u64 = result.windows.iter().map(|window| window.blocks_moved).sum();
    assert!(moved > 0 && moved <= stats.blocks_moved, "{moved} of {}", stats.blocks_moved);
    for window in &result.windows {
        // An fsync every 16 random writes writes a node block for nearly each data block.
        assert!(window.host_waf > 1.5, "{window:?}");
        assert!(window.kiops > 0.0 && window.max_us >= window.p99_9_us, "{window:?}");
    }
    let waf = |cleaned: bool| {
        let windows = result.windows.iter().filter(|window| (window.blocks_moved > 0) == cleaned);
        windows.map(|window| window.host_waf).fold(f64::NAN, f64::max)
    };
    let calm = result.windows.iter().filter(|w| w.blocks_moved == 0).map(|w| w.host_waf).fold(f64::NAN, f64::min);
    assert!(waf(true) > calm, "a cleaning window writes more: {:?}", result.windows);
    let refused = parse_args(&["--fs=zonefs".to_string(), "--windows=4".to_string()]).expect_err("logfs only");
    assert!(refused.to_string().contains("option windows"), "{refused}");
}
