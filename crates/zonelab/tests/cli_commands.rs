//! The command line end to end: zone states persist between invocations, and docs/conformance.md cases through the
//! CLI.

mod common;

use common::*;

#[test]
fn states_and_data_persist_between_invocations() {
    let img = image(&[]);
    ok(&["write", img.s(), "--lba", "0", "--pattern", "0xab", "--blocks", "3"]);
    ok(&["open", img.s(), "--zone", "2"]);
    let report = report_json(&img);
    assert_eq!(report["zones"][0]["state"], "open-implicit");
    assert_eq!(report["zones"][0]["wp_lba"], 3);
    assert_eq!(report["zones"][2]["state"], "open-explicit");
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", img.s(), "--json"])).expect("json");
    assert_eq!((info["open_zones"].as_u64(), info["active_zones"].as_u64()), (Some(2), Some(2)));
    let bytes = zonelab(&["read", img.s(), "--lba", "0", "--blocks", "4"]).raw_stdout;
    assert_eq!(bytes.len(), 4 * 4096);
    assert!(bytes[..3 * 4096].iter().all(|&b| b == 0xab));
    assert!(bytes[3 * 4096..].iter().all(|&b| b == 0), "above the write pointer reads zeros");
}

#[test]
fn power_cycle_is_the_only_thing_that_closes_open_zones() {
    let img = image(&[]);
    ok(&["write", img.s(), "--lba", "0", "--pattern", "1", "--blocks", "1"]);
    ok(&["open", img.s(), "--zone", "1"]);
    assert_eq!(zone_state(&img, 0), "open-implicit");
    ok(&["power-cycle", img.s()]);
    assert_eq!((zone_state(&img, 0), zone_state(&img, 1)), ("closed".into(), "empty".into()));
}

#[test]
fn append_prints_the_lba_written() {
    let img = image(&[]);
    assert_eq!(
        ok(&["append", img.s(), "--zone", "1", "--pattern", "7", "--blocks", "2"]),
        "appended at LBA 256 (0x100)\n"
    );
    assert_eq!(
        ok(&["append", img.s(), "--start-lba", "256", "--pattern", "7", "--blocks", "1"]),
        "appended at LBA 258 (0x102)\n"
    );
}

#[test]
fn write_from_a_file_and_read_to_a_file() {
    let img = image(&[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in.bin");
    let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&input, &data).expect("write input");
    ok(&["write", img.s(), "--lba", "256", "--data", input.to_str().expect("utf-8")]);
    let output = dir.path().join("out.bin");
    ok(&["read", img.s(), "--lba", "256", "--blocks", "2", "--out", output.to_str().expect("utf-8")]);
    assert_eq!(std::fs::read(&output).expect("read output"), data);
}

#[test]
fn limits_and_auto_close_through_the_cli() {
    let img = image(&["--max-open", "2", "--max-active", "3"]);
    for zone in 0..3 {
        let lba = (zone * 256).to_string();
        ok(&["write", img.s(), "--lba", &lba, "--pattern", "1", "--blocks", "1"]);
    }
    assert_eq!(zone_state(&img, 0), "closed", "case 50: the oldest implicitly opened zone was closed");
    refused(&["write", img.s(), "--lba", "768", "--pattern", "1", "--blocks", "1"], "Too Many Active Zones (0x1bd)");
    ok(&["close", img.s(), "--all"]);
    ok(&["open", img.s(), "--zone", "0"]);
    ok(&["open", img.s(), "--zone", "1"]);
    refused(&["open", img.s(), "--zone", "2"], "Too Many Open Zones (0x1be)");
}

#[test]
fn select_all_actions() {
    let img = image(&[]);
    for zone in 0..3 {
        let lba = (zone * 256).to_string();
        ok(&["write", img.s(), "--lba", &lba, "--pattern", "1", "--blocks", "1"]);
    }
    ok(&["finish", img.s(), "--all"]);
    let full = ok(&["report", img.s(), "--state", "fu", "--format", "json"]);
    let full: serde_json::Value = serde_json::from_str(&full).expect("json");
    assert_eq!(full["nr_zones"], 3);
    assert!(full["zones"].as_array().expect("zones").iter().all(|z| z["wp_lba"].is_null()));
    ok(&["reset", img.s(), "--all"]);
    assert_eq!(
        report_json(&img)["zones"].as_array().expect("zones").iter().filter(|z| z["state"] == "empty").count(),
        8
    );
}

#[test]
fn injected_faults() {
    let img = image(&[]);
    ok(&["write", img.s(), "--lba", "256", "--pattern", "9", "--blocks", "2"]);
    ok(&["inject", img.s(), "--zone", "1", "--state", "read-only"]);
    refused(&["write", img.s(), "--lba", "258", "--pattern", "1", "--blocks", "1"], "Zone Is Read Only (0x1ba)");
    refused(&["reset", img.s(), "--zone", "1"], "Invalid Zone State Transition (0x1bf)");
    let bytes = zonelab(&["read", img.s(), "--lba", "256", "--blocks", "2"]).raw_stdout;
    assert!(bytes.iter().all(|&b| b == 9), "a read-only zone keeps its data readable");
    ok(&["offline", img.s(), "--zone", "1"]);
    refused(&["read", img.s(), "--lba", "256", "--blocks", "1"], "Zone Is Offline (0x1bb)");
    ok(&["inject", img.s(), "--zone", "2", "--state", "offline"]);
    refused(&["append", img.s(), "--zone", "2", "--pattern", "1", "--blocks", "1"], "Zone Is Offline (0x1bb)");
    ok(&["inject", img.s(), "--zone", "2", "--state", "offline"]);
    assert_eq!(zone_state(&img, 2), "empty", "injecting the same fault again clears it");
}

#[test]
fn zone_capacity_below_zone_size() {
    let img = image(&["--zone-cap", "768KiB"]);
    ok(&["write", img.s(), "--lba", "0", "--pattern", "1", "--blocks", "128"]);
    refused(&["write", img.s(), "--lba", "128", "--pattern", "1", "--blocks", "65"], "Zone Boundary Error (0x1b8)");
    ok(&["write", img.s(), "--lba", "128", "--pattern", "1", "--blocks", "64"]);
    assert_eq!(zone_state(&img, 0), "full", "case 19: full at capacity");
    let gap = zonelab(&["read", img.s(), "--lba", "200", "--blocks", "56"]);
    assert_eq!(gap.code, 0, "reads in the capacity gap are allowed");
    assert!(gap.raw_stdout.iter().all(|&b| b == 0));
}

#[test]
fn the_demo_runs_its_tour() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("the demo");
    let out = ok(&["demo", "--dir", image.to_str().expect("utf-8")]);
    assert!(out.contains("error: Zone Invalid Write (0x1bc)"), "{out}");
    assert!(out.contains("appended at LBA 256 (0x100)"), "{out}");
    assert!(out.contains("error: Too Many Active Zones (0x1bd)"), "{out}");
    assert!(out.contains("zcond:14(fu)"), "{out}");

    // It never replaces what is there, and stops at the first failure it did not mean to show.
    let before = zonelab(&["report", image.to_str().expect("utf-8")]).stdout;
    let again = zonelab(&["demo", "--dir", image.to_str().expect("utf-8")]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    assert!(!again.stdout.contains("Writes go to the write pointer"), "stopped at the first step");
    assert_eq!(zonelab(&["report", image.to_str().expect("utf-8")]).stdout, before, "the image is as it was");
    let file = dir.path().join("a file");
    std::fs::write(&file, "keep me").expect("write");
    let refused = zonelab(&["demo", "--dir", file.to_str().expect("utf-8")]);
    assert_eq!(refused.code, 1);
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "keep me");
}

#[test]
fn churn_then_verify() {
    let img = image(&["--zone-cap", "768KiB", "--max-open", "3", "--max-active", "5", "--lba-size", "512"]);
    let out = ok(&["churn", img.s(), "--seed", "7", "--ops", "3000"]);
    assert!(out.starts_with("ran 3000 commands with seed 7"), "{out}");
    let verified = ok(&["churn", img.s(), "--verify"]);
    assert!(verified.starts_with("verified "), "{verified}");
    assert!(!verified.starts_with("verified 0 "), "churn must leave written blocks: {verified}");
}

#[test]
fn a_memory_store_image_says_its_data_lives_for_one_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mem");
    let created = ok(&["create", path.to_str().expect("utf-8"), "--store", "memory", "--zones", "2"]);
    assert!(created.contains("data lives only while one process has the image open"), "{created}");
    ok(&["write", path.to_str().expect("utf-8"), "--lba", "0", "--pattern", "0x5a", "--blocks", "1"]);
    let info = ok(&["info", path.to_str().expect("utf-8")]);
    assert!(info.contains("memory store: zone states persist; data lives only"), "{info}");
    let read = zonelab(&["read", path.to_str().expect("utf-8"), "--lba", "0", "--blocks", "1"]);
    assert!(read.raw_stdout.iter().all(|&byte| byte == 0), "as it says: the data did not outlive its process");
}

#[test]
fn every_subcommand_answers_help_as_zonelab_help_does() {
    let commands = [
        "create",
        "info",
        "report",
        "open",
        "close",
        "finish",
        "reset",
        "offline",
        "write",
        "append",
        "read",
        "inject",
        "power-cycle",
        "flush",
        "repair-zones",
        "churn",
        "experiment",
        "wal-bench",
        "kv-bench",
        "file-churn",
        "presets",
        "calibrate",
        "bench",
        "fs",
        "mount",
        "demo",
    ];
    for command in commands {
        let help = ok(&["help", command]);
        assert!(help.contains(&format!("Usage: zonelab {command}")), "{command}: {help}");
        assert_eq!(ok(&[command, "--help"]), help, "zonelab {command} --help");
    }
    // The tools that take fio-style options answer -h with the whole text, every option named.
    for (tool, option) in [("wal-bench", "--record-size"), ("kv-bench", "--runtime"), ("file-churn", "--workload")] {
        let help = ok(&[tool, "-h"]);
        assert_eq!(help, ok(&["help", tool]));
        assert!(help.contains(option), "{tool} -h names {option}");
    }
    assert!(ok(&["help", "file-churn"]).contains("--fs=logfs|zonefs"));
}

/// A sweep interrupted keeps the rows of the points it finished: each point's rows are in the table as soon as it
/// finishes (docs/sweeps.md promises resuming after an interruption).
#[test]
fn an_interrupted_sweep_keeps_the_points_it_finished() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (grid, table) = (dir.path().join("grid.toml"), dir.path().join("table.csv"));
    std::fs::write(
        &grid,
        "args = \"--name=r --filename=preset:zn540 --rw=randread --bs=4k --runtime=100ms --time_based\"\n\
         seeds = [1, 2, 3, 4, 5, 6, 7, 8]\n[axes]\niodepth = [1, 4, 16, 64]\n",
    )
    .expect("write the grid");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_zonelab"))
        .args(["sweep", grid.to_str().expect("utf-8"), "--out", table.to_str().expect("utf-8"), "--jobs", "1"])
        .spawn()
        .expect("start the sweep");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let rows = || std::fs::read_to_string(&table).map_or(0, |text| text.lines().count().saturating_sub(1));
    while rows() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: kill has no memory effects; the pid is that of a child this test holds.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("wait for the sweep");
    let kept = rows();
    assert!(kept >= 2, "the finished points' rows are in the table after SIGINT ({status:?})");
    assert!(kept < 32, "the sweep was interrupted before its end");
    let text = std::fs::read_to_string(&table).expect("table");
    assert!(text.ends_with('\n'), "whole rows only");
}

/// Saving an image's media state never writes through a symbolic link planted at its temporary name: the
/// planted link is replaced, its target left as it was.
#[test]
fn saving_state_does_not_follow_a_planted_link() {
    let img = image(&[]);
    let victim = img.path.with_extension("victim");
    std::fs::write(&victim, b"not zonelab's").expect("write the victim");
    std::os::unix::fs::symlink(&victim, img.path.join("media.json.partial")).expect("plant a link");
    ok(&["write", img.s(), "--lba", "0", "--pattern", "0xab", "--blocks", "3"]);
    assert_eq!(std::fs::read(&victim).expect("the victim"), b"not zonelab's");
    assert!(std::fs::read_to_string(img.path.join("media.json")).expect("the media state").starts_with('{'));
    std::fs::remove_file(&victim).expect("clean up");
}
