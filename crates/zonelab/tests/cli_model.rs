//! The command line of the timing model: presets, image creation from a preset, calibration and the
//! simulation benchmark.

mod common;

use common::*;

#[test]
fn presets_are_listed() {
    let out = ok(&["presets"]);
    for name in ["zn540", "confzns-zwal", "nvmevirt-rezns", "instant"] {
        assert!(out.lines().any(|line| line.starts_with(name)), "{name} missing from:\n{out}");
    }
}

#[test]
fn calibrate_json_has_every_documented_field() {
    let out = ok(&["calibrate", "--preset", "confzns-zwal", "--json", "--scale", "0.2"]);
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    let points = json["points"].as_array().expect("points");
    assert_eq!(points.len(), 8);
    for field in [
        "op",
        "bs_bytes",
        "zones",
        "qd",
        "measured_iops",
        "model_iops",
        "iops_err_pct",
        "measured_lat_us",
        "model_lat_us",
        "lat_err_pct",
        "measured_p99_us",
        "model_p99_us",
        "p99_err_pct",
    ] {
        assert!(points[0].get(field).is_some(), "points[] lacks {field}");
    }
    for field in [
        "iops_err_pct_median",
        "iops_err_pct_p90",
        "lat_err_pct_median",
        "lat_err_pct_p90",
        "p99_err_pct_median",
        "p99_err_pct_p90",
    ] {
        assert!(json["summary"][field].as_f64().is_some(), "summary lacks {field}");
    }
    assert!(points.iter().all(|point| point["model_p99_us"].as_f64().is_some_and(|p99| p99 > 0.0)));
    // The ZN540 grid's p99 column is read: every point has a measured p99 and an error beside it.
    let zn540: serde_json::Value =
        serde_json::from_str(&ok(&["calibrate", "--json", "--scale", "0.05"])).expect("json");
    let points = zn540["points"].as_array().expect("points");
    assert!(points.iter().all(|point| point["measured_p99_us"].as_f64().is_some_and(|p99| p99 > 0.0)));
    assert!(points.iter().all(|point| point["p99_err_pct"].as_f64().is_some()));
    // The mean absolute errors are the points' own, as the fits of the spread constants use them.
    for (field, point_field) in [("iops_err_pct_mean", "iops_err_pct"), ("p99_err_pct_mean", "p99_err_pct")] {
        let errors: Vec<f64> = points.iter().filter_map(|point| point[point_field].as_f64()).map(f64::abs).collect();
        let mean = errors.iter().sum::<f64>() / errors.len() as f64;
        let reported = zn540["summary"][field].as_f64().unwrap_or_else(|| panic!("summary lacks {field}"));
        assert!((reported - mean).abs() < 1e-9, "{field} {reported} against {mean} from the points");
    }
    assert!(json["summary"]["iops_err_pct_median"].as_f64().expect("median") < 10.0);
}

#[test]
fn calibrate_text_ends_with_the_summary() {
    let out = ok(&["calibrate", "--scale", "0.05"]);
    assert!(out.contains("zone management"), "{out}");
    let last = out.lines().last().expect("summary line");
    assert!(last.starts_with("summary: IOPS error median"), "{last}");
}

#[test]
fn calibrate_refuses_what_it_cannot_do() {
    let run = zonelab(&["calibrate", "--preset", "instant"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no reference measurements"), "{}", run.stderr);
    usage_error(&["calibrate", "--preset", "zn999"], "unknown preset \"zn999\"");
    usage_error(&["calibrate", "--set", "media.nand.channels=0"], "media.nand.channels");
    usage_error(&["calibrate", "--scale", "0"], "--scale");
}

#[test]
fn create_from_a_preset_keeps_the_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let p = path.to_str().expect("utf-8");
    ok(&["create", p, "--preset", "nvmevirt-rezns", "--set", "namespace.zones=8", "--zones", "6"]);
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", p, "--json"])).expect("json");
    assert_eq!(info["device_model"], "nvmevirt-rezns");
    assert_eq!(info["nr_zones"], 6, "flags override the preset's namespace");
    assert_eq!(info["zone_size_bytes"], 64 << 20);
    let config = std::fs::read_to_string(path.join("config.toml")).expect("config");
    assert!(config.contains("program-latency-us = 533.0"), "the flash model is kept:\n{config}");
    usage_error(&["create", p, "--set", "namespace.zones=8", "--force"], "--preset");
    usage_error(&["create", p, "--preset", "zn540", "--set", "nand.channels=8", "--force"], "no such section");
}

#[test]
fn bench_sim_prints_its_figures() {
    let out = ok(&["bench", "sim", "--runs", "1", "--commands", "20000", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    for workload in ["write_4k_14zones_qd1", "randread_4k_qd64", "append_8k_14zones_qd4"] {
        assert!(json[workload]["median_commands_per_s"].as_f64().expect("rate") > 0.0, "{workload}");
    }
    let one = ok(&["bench", "sim", "--runs", "1", "--commands", "20000", "--workload", "randread_4k_qd64", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&one).expect("json");
    assert!(json["randread_4k_qd64"]["median_commands_per_s"].as_f64().expect("rate") > 0.0, "{one}");
    assert!(json.get("write_4k_14zones_qd1").is_none() && json.get("append_8k_14zones_qd4").is_none(), "{one}");
}

/// Needs real fio; under CI=true its absence is a failure.
#[test]
fn bench_fio_times_the_same_writes_through_zonelab_and_real_fios_null_engine() {
    if !have_fio() {
        return;
    }
    let out = ok(&["bench", "fio", "--rounds", "1", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(json["writes"], 1_102_848, "four zn540 zones' capacity in 4 KiB writes: {out}");
    let (ours, theirs) = (&json["zonelab"]["median_s"], &json["fio_null"]["median_s"]);
    let ratio = ours.as_f64().expect("zonelab's time") / theirs.as_f64().expect("fio's time");
    assert!((json["ratio"].as_f64().expect("ratio") - ratio).abs() < 1e-9, "{out}");
    // CPU time: zonelab's run is all CPU, so its CPU time cannot exceed its wall time by more than rounding;
    // fio's spans its job process too, which a wall clock around fio alone would not show.
    let (ours_cpu, theirs_cpu) = (&json["zonelab"]["median_cpu_s"], &json["fio_null"]["median_cpu_s"]);
    let (ours_cpu, theirs_cpu) = (ours_cpu.as_f64().expect("zonelab's CPU"), theirs_cpu.as_f64().expect("fio's CPU"));
    assert!(ours_cpu > 0.0 && ours_cpu <= ours.as_f64().expect("wall") + 0.02, "{out}");
    assert!(theirs_cpu > 0.0, "fio's job process ran 1.1 M writes: {out}");
    assert!((json["cpu_ratio"].as_f64().expect("cpu ratio") - ours_cpu / theirs_cpu).abs() < 1e-9, "{out}");
}

#[test]
fn experiments_list_and_run() {
    let list = ok(&["experiment", "list"]);
    for id in ["zns-study-reads", "zns-study-writes", "zwal-append-scaling", "zn540-calibration"] {
        assert!(list.contains(id), "{list}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let out =
        ok(&["experiment", "run", "zwal-append-scaling", "--quick", "--out", dir.path().to_str().expect("utf-8")]);
    assert!(out.starts_with("zwal-append-scaling: wrote"), "{out}");
    assert!(dir.path().join("zwal-append-scaling/report.md").exists());
    assert!(dir.path().join("zwal-append-scaling/fig2b.png").exists());
    // Each claim's verdict is computed from the run, at the top of the report and in the summary.
    let report = std::fs::read_to_string(dir.path().join("zwal-append-scaling/report.md")).expect("report");
    let glance = report.find("## Claims at a glance").expect("the claims come first");
    assert!(glance < report.find("## fig2a").expect("a figure"), "{report}");
    assert!(report.contains("| fig2b | ") && report.contains("| reproduced | fitted |"), "{report}");
    let summary = ok(&["experiment", "summary", dir.path().to_str().expect("utf-8")]);
    assert!(summary.contains("3 claims: "), "{summary}");
    assert!(summary.contains("| zwal-append-scaling | fig2b |"), "{summary}");
    let empty = tempfile::tempdir().expect("tempdir");
    let missing = zonelab(&["experiment", "summary", empty.path().to_str().expect("utf-8")]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(missing.stderr.contains("no experiment results"), "{}", missing.stderr);
    usage_error(&["experiment", "run", "no-such-thing"], "unknown experiment \"no-such-thing\"");
}

#[test]
fn wal_bench_runs_both_designs_and_recovers() {
    let recover = [
        "wal-bench",
        "--design=zwal",
        "--buffer=4KiB",
        "--qd=32",
        "--records=2000",
        "--recover",
        "--output-format=json",
    ];
    let zwal: serde_json::Value = serde_json::from_str(&ok(&recover)).expect("json");
    assert_eq!(zwal["recovered_records"], 2000);
    // Kept in a temporary file rather than memory, the log recovers the same records in the same device time.
    let in_file: serde_json::Value =
        serde_json::from_str(&ok(&[&recover[..], &["--store=temp-file"]].concat())).expect("json");
    for key in ["recovered_records", "recovery_ns", "device_time_ns"] {
        assert!(!zwal[key].is_null(), "{key} in {zwal}");
        assert_eq!(in_file[key], zwal[key], "{key}");
    }
    for key in ["reads", "bytes_read", "entries", "io_device_ns"] {
        assert_eq!(in_file["recovery"][key], zwal["recovery"][key], "recovery.{key}");
    }
    usage_error(&["wal-bench", "--store=disk"], "option store: \"disk\" is not memory or temp-file");
    let conventional =
        ok(&["wal-bench", "--design=conventional", "--buffer=4KiB", "--records=2000", "--output-format=json"]);
    let conventional: serde_json::Value = serde_json::from_str(&conventional).expect("json");
    let (fast, slow) = (zwal["kiops"].as_f64().expect("kiops"), conventional["kiops"].as_f64().expect("kiops"));
    assert!(fast > 5.0 * slow, "ZWAL at QD 32 outruns one write at a time: {fast} against {slow}");
    let text = ok(&["wal-bench", "--records=100"]);
    assert!(text.starts_with("wal-bench: Zwal on confzns-zwal"), "{text}");
    usage_error(&["wal-bench", "--design=paper"], "zwal or conventional");
    usage_error(&["wal-bench", "--bogus=1"], "unrecognized option '--bogus=1'");
    usage_error(&["wal-bench", "--preset=nope"], "unknown preset \"nope\"");
    // Out-of-range values are refused before anything is allocated or any time is added.
    usage_error(&["wal-bench", "--record-size=99999999p", "--records=1"], "option record-size");
    usage_error(&["wal-bench", "--record-size=1p", "--records=1"], "option record-size");
    usage_error(&["wal-bench", "--output-format=xml"], "option output-format: \"xml\" is not normal or json");
    let run = zonelab(&["wal-bench", "--record-size=abc"]);
    assert_eq!(run.stderr.trim_end(), "error: option record-size: \"abc\" is not a size (e.g. 4k, 4Ki, 1G, 3z, 50%)");
    for cost in ["1e14", "inf", "nan", "-1"] {
        usage_error(&["wal-bench", &format!("--put-cost-us={cost}")], "option put-cost-us");
    }
}

#[test]
fn file_churn_reports_rezns_figures() {
    let args = [
        "file-churn",
        "--fs=zonefs",
        "--preset=nvmevirt-rezns,zones=8,media.mapping.policy=rezns",
        "--jobs=2",
        "--rounds=2",
    ];
    let json: serde_json::Value =
        serde_json::from_str(&ok(&[&args[..], &["--output-format=json"]].concat())).expect("json");
    assert_eq!(json["files"]["zone_resets"], 4);
    assert_eq!(json["wear"]["renewable"]["renewed_resets"], 4);
    assert!(json["mib_per_s"].as_f64().expect("throughput") > 0.0);
    let text = ok(&args);
    assert!(text.contains("rezns: 4 renewed and 0 normal resets"), "{text}");
    usage_error(&["file-churn", "--rounds=0"], "rounds");
    usage_error(&["file-churn", "--fs=ext4"], "option fs: \"ext4\" is not logfs or zonefs");
    usage_error(&["file-churn", "--preset=nope"], "unknown preset \"nope\"");
    usage_error(&["file-churn", "--output-format=xml"], "option output-format: \"xml\" is not normal or json");
}
