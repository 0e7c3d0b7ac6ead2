//! Every error path of the command line: device statuses exit 1 with the status name and code, usage and
//! configuration errors exit 2 naming what is wrong, and no failure changes the image.

mod common;

use common::*;

#[test]
fn device_rejections_exit_1_and_leave_the_image_as_it_was() {
    let img = image(&["--zone-cap", "768KiB", "--mdts", "64KiB", "--zasl", "16KiB"]);
    ok(&["write", img.s(), "--lba", "0", "--pattern", "1", "--blocks", "8"]);
    let before = snapshot(&img.path);
    let cases: &[(&[&str], &str)] = &[
        (&["write", img.s(), "--lba", "0", "--pattern", "1", "--blocks", "1"], "Zone Invalid Write (0x1bc)"),
        (&["write", img.s(), "--lba", "9", "--pattern", "1", "--blocks", "1"], "Zone Invalid Write (0x1bc)"),
        (&["write", img.s(), "--lba", "2047", "--pattern", "1", "--blocks", "2"], "LBA Out of Range (0x080)"),
        (&["write", img.s(), "--lba", "8", "--pattern", "1", "--blocks", "17"], "Invalid Field in Command (0x002)"),
        (&["append", img.s(), "--zone", "0", "--pattern", "1", "--blocks", "5"], "Invalid Field in Command (0x002)"),
        (
            &["append", img.s(), "--start-lba", "1", "--pattern", "1", "--blocks", "1"],
            "Invalid Field in Command (0x002)",
        ),
        (&["append", img.s(), "--zone", "99", "--pattern", "1", "--blocks", "1"], "LBA Out of Range (0x080)"),
        (&["read", img.s(), "--lba", "255", "--blocks", "2"], "Zone Boundary Error (0x1b8)"),
        (&["read", img.s(), "--lba", "2048", "--blocks", "1"], "LBA Out of Range (0x080)"),
        (&["close", img.s(), "--zone", "1"], "Invalid Zone State Transition (0x1bf)"),
        (&["offline", img.s(), "--zone", "1"], "Invalid Zone State Transition (0x1bf)"),
        (&["open", img.s(), "--start-lba", "5"], "Invalid Field in Command (0x002)"),
        (&["reset", img.s(), "--start-lba", "2048"], "LBA Out of Range (0x080)"),
        (&["finish", img.s(), "--zone", "8"], "LBA Out of Range (0x080)"),
        (&["report", img.s(), "--start-lba", "2048"], "LBA Out of Range (0x080)"),
    ];
    for (args, status) in cases {
        refused(args, status);
        assert_eq!(snapshot(&img.path), before, "zonelab {args:?} changed the image");
    }
}

#[test]
fn writes_to_full_zones_name_the_status() {
    let img = image(&[]);
    ok(&["finish", img.s(), "--zone", "0"]);
    refused(&["write", img.s(), "--lba", "0", "--pattern", "1", "--blocks", "1"], "Zone Is Full (0x1b9)");
    refused(&["open", img.s(), "--zone", "0"], "Invalid Zone State Transition (0x1bf)");
}

#[test]
fn bad_configurations_are_refused_at_create_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let p = path.to_str().expect("utf-8");
    usage_error(&["create", p, "--zone-size", "3MiB"], "zone-size");
    usage_error(&["create", p, "--zone-size", "1MiB", "--zone-cap", "2MiB"], "zone-cap");
    usage_error(&["create", p, "--max-open", "8", "--max-active", "4"], "max-open");
    usage_error(&["create", p, "--zones", "0"], "zones");
    usage_error(&["create", p, "--lba-size", "1024"], "lba-size");
    usage_error(&["create", p, "--zasl", "12KiB"], "zasl");
    usage_error(&["create", p, "--zone-size", "lots"], "invalid size \"lots\"");
    usage_error(&["create", p, "--preset", "conventional"], "preset conventional has no zoned namespace");
    usage_error(&["create", p, "--preset", "zn540", "--set", "conventional.nsid=2"], "conventional.nsid");
    usage_error(
        &["create", p, "--preset", "zn540", "--set", "conventional.over-provisioning=0.01"],
        "over-provisioning",
    );
    assert!(!path.exists(), "a refused configuration creates nothing");
}

#[test]
fn a_toml_configuration_with_overrides() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("ns.toml");
    std::fs::write(&config, "zones = 4\nzone-size = \"2MiB\"\nmax-active = 3\n").expect("write config");
    let path = dir.path().join("img");
    let p = path.to_str().expect("utf-8");
    ok(&["create", p, "--config", config.to_str().expect("utf-8"), "--zones", "6"]);
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", p, "--json"])).expect("json");
    assert_eq!(
        (info["nr_zones"].as_u64(), info["max_active"].as_u64(), info["max_open"].as_u64()),
        (Some(6), Some(3), Some(3))
    );
    std::fs::write(&config, "zones = 4\nzone-sise = \"2MiB\"\n").expect("write config");
    usage_error(&["create", p, "--config", config.to_str().expect("utf-8"), "--force"], "zone-sise");
}

#[test]
fn create_does_not_replace_without_force_or_clobber_other_directories() {
    let img = image(&[]);
    let run = zonelab(&["create", img.s()]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("already exists; pass --force"), "{}", run.stderr);
    ok(&["write", img.s(), "--lba", "0", "--pattern", "1", "--blocks", "1"]);
    ok(&["create", img.s(), "--force"]);
    assert_eq!(zone_state(&img, 0), "empty");

    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("precious.txt"), "keep me").expect("write");
    let run = zonelab(&["create", dir.path().to_str().expect("utf-8"), "--force"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("not a zonelab image"), "{}", run.stderr);
    assert!(dir.path().join("precious.txt").exists());
}

#[test]
fn a_failed_create_force_leaves_the_old_image_and_nothing_beside_it() {
    let img = image(&[]);
    ok(&["write", img.s(), "--lba", "0", "--pattern", "7", "--blocks", "2"]);
    let before = snapshot(&img.path);
    let run = zonelab(&["create", img.s(), "--force", "--zones", "1048576", "--zone-size", "8TiB"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains(&format!("{}/data", img.s())), "names the image's file: {}", run.stderr);
    assert_eq!(snapshot(&img.path), before, "the old image is as it was");
    let parent = img.path.parent().expect("parent");
    let beside: Vec<String> = std::fs::read_dir(parent)
        .expect("read dir")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["img"], "nothing left beside the image");

    // What a killed creation (a process no longer running) left beside the image is removed by the next one.
    let leftover = parent.join(".img.zonelab-new-4294967");
    std::fs::create_dir(&leftover).expect("leftover");
    ok(&["create", img.s(), "--force", "--zones", "2"]);
    assert!(!leftover.exists());
    assert_eq!(zone_state(&img, 1), "empty");
}

#[test]
fn concurrent_creates_of_one_image_never_corrupt_it() {
    let img = image(&[]);
    for round in 0..8 {
        let spawn = |extra: &[&str]| {
            std::process::Command::new(env!("CARGO_BIN_EXE_zonelab"))
                .args(["create", img.s(), "--force"])
                .args(extra)
                .output()
                .expect("run zonelab")
        };
        let (first, second) = std::thread::scope(|scope| {
            let first = scope.spawn(|| spawn(&["--zones", "8", "--zone-size", "64k"]));
            let second = scope.spawn(|| spawn(&["--zones", "16", "--zone-size", "128k", "--lba-size", "512"]));
            (first.join().expect("first"), second.join().expect("second"))
        });
        for output in [&first, &second] {
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success() || stderr.contains("in use"), "round {round}: {stderr}");
        }
        assert!(first.status.success() || second.status.success(), "round {round}: one of them replaced it");
        ok(&["report", img.s()]);
    }
}

#[test]
fn usage_errors_exit_2() {
    let img = image(&[]);
    usage_error(&["open", img.s()], "--zone");
    usage_error(&["open", img.s(), "--zone", "1", "--all"], "cannot be used with");
    usage_error(&["write", img.s(), "--lba", "0", "--pattern", "1"], "--blocks");
    usage_error(&["write", img.s(), "--lba", "0", "--pattern", "300", "--blocks", "1"], "not a byte");
    usage_error(&["report", img.s(), "--state", "opened"], "unknown zone state");
    usage_error(&["report", img.s(), "--format", "xml"], "xml");
    usage_error(&["inject", img.s(), "--zone", "1", "--state", "full"], "full");
    usage_error(&["inject", img.s(), "--zone", "99", "--state", "offline"], "zone 99 does not exist");
    usage_error(&["frobnicate"], "frobnicate");
    let dir = tempfile::tempdir().expect("tempdir");
    let odd = dir.path().join("odd.bin");
    std::fs::write(&odd, vec![0u8; 1000]).expect("write");
    usage_error(
        &["write", img.s(), "--lba", "0", "--data", odd.to_str().expect("utf-8")],
        "not a whole number of 4096-byte LBAs",
    );
}

#[test]
fn corrupt_or_foreign_images_are_refused_without_a_panic() {
    let img = image(&[]);
    let meta = img.path.join("zones.meta");
    let config = img.path.join("config.toml");
    let original_meta = std::fs::read(&meta).expect("read meta");
    let original_config = std::fs::read_to_string(&config).expect("read config");

    let expect_refusal = |needle: &str| {
        let run = zonelab(&["report", img.s()]);
        assert_eq!(run.code, 1, "stderr: {}", run.stderr);
        assert!(run.stderr.starts_with("error: ") && run.stderr.contains(needle), "{} lacks {needle:?}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    };

    // A damaged zone record: every writer refuses the image (readers see the zone offline, `fs_tool.rs`).
    let mut damaged = original_meta.clone();
    damaged[4096 + 64 * 3 + 9] ^= 0xff;
    std::fs::write(&meta, &damaged).expect("write");
    let run = zonelab(&["reset", img.s(), "--zone", "1"]);
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(run.stderr.contains("the record of zone 3 fails its checksum"), "{}", run.stderr);

    // A journal of another version, sealed as its writer would seal it; the same byte flipped without the
    // seal is corruption.
    let mut other_version = original_meta.clone();
    other_version[8] = 9;
    std::fs::write(&meta, &other_version).expect("write");
    expect_refusal("is corrupt: its header checksum does not match");
    let seal = crc32fast::hash(&other_version[..60]).to_le_bytes();
    other_version[60..64].copy_from_slice(&seal);
    std::fs::write(&meta, &other_version).expect("write");
    expect_refusal("format version 9");

    std::fs::write(&meta, &original_meta[..4500]).expect("write");
    expect_refusal("zones need");

    std::fs::write(&meta, &original_meta).expect("write");
    std::fs::write(&config, original_config.replace("format-version = 1", "format-version = 7")).expect("write");
    expect_refusal("image format version 7");

    std::fs::write(&config, "this is not toml [").expect("write");
    expect_refusal("config.toml is corrupt");

    std::fs::write(&config, original_config.replace("zones = 8", "zones = 9")).expect("write");
    expect_refusal("its geometry differs from the image configuration");

    std::fs::write(&config, &original_config).expect("write");
    std::fs::OpenOptions::new().write(true).open(img.path.join("data")).expect("open").set_len(10).expect("truncate");
    expect_refusal("data is 10 bytes long");

    let missing = zonelab(&["info", "/nonexistent/zonelab-image"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("not a zonelab image"), "{}", missing.stderr);
}

#[test]
fn fio_exits_as_every_command_does_for_missing_images_and_bad_presets() {
    let job = ["fio", "--name=r", "--rw=read", "--bs=4k", "--size=1m"];
    let missing = zonelab(&[&job[..], &["--filename=/nonexistent/zonelab-image"]].concat());
    assert_eq!(missing.code, 1, "a missing image exits 1: {}", missing.stderr);
    assert!(missing.stderr.contains("/nonexistent/zonelab-image"), "{}", missing.stderr);
    let preset = zonelab(&[&job[..], &["--filename=preset:zn999"]].concat());
    assert_eq!(preset.code, 2, "an unknown preset is a configuration error: {}", preset.stderr);
    assert!(preset.stderr.contains("zn999"), "{}", preset.stderr);
    let option = zonelab(&[&job[..], &["--filename=preset:instant", "--frobnicate=1"]].concat());
    assert_eq!(option.code, 2, "{}", option.stderr);
}

#[test]
fn a_zone_index_past_the_last_zone_is_out_of_range_and_changes_nothing() {
    // Two zones of 4 TiB in 512-byte LBAs (2^33 each): zone 2^31 + 1 shifted into an LBA wraps at 64 bits to zone 1.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let img = path.to_str().expect("utf-8");
    ok(&["create", img, "--zones", "2", "--zone-size", "4TiB", "--lba-size", "512"]);
    ok(&["append", img, "--zone", "1", "--pattern", "1", "--blocks", "1"]);
    // The data file is 8 TiB sparse: compare the zone journal and what reads back, not every byte.
    let state = || {
        let meta = std::fs::read(path.join("zones.meta")).expect("zones.meta");
        (meta, ok(&["report", img, "--format", "json"]), ok(&["read", img, "--lba", "8589934592", "--blocks", "2"]))
    };
    let before = state();
    for zone in ["2", "2147483648", "2147483649", "4294967295"] {
        refused(&["reset", img, "--zone", zone], "LBA Out of Range (0x080)");
        refused(&["append", img, "--zone", zone, "--pattern", "1", "--blocks", "1"], "LBA Out of Range (0x080)");
    }
    assert!(state() == before, "a refused zone index changes nothing");
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    use std::io::BufRead;
    // 4096 zones print far more than a pipe holds, so the writer meets the closed pipe.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let img = path.to_str().expect("utf-8");
    ok(&["create", img, "--zones", "4096", "--zone-size", "64KiB"]);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_zonelab"))
        .args(["report", img])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn report");
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first).expect("first line");
    let output = child.wait_with_output().expect("reap");
    assert!(first.contains("zone"), "{first}");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// Runs zonelab as the unprivileged user `nobody` (with setpriv, which needs root); None where that is not
/// possible here, which under CI=true (root, util-linux) is a failure.
fn as_nobody(args: &[&str]) -> Option<std::process::Output> {
    let root = running_as_root();
    let setpriv = std::process::Command::new("setpriv").arg("--version").output().is_ok();
    if !root || !setpriv {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true runs as root with setpriv");
        eprintln!("skipped: needs root and setpriv to run as nobody");
        return None;
    }
    Some(
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_zonelab")])
            .args(args)
            .output()
            .expect("run setpriv"),
    )
}

fn running_as_root() -> bool {
    std::process::Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.starts_with(b"0\n"))
}

#[test]
fn a_read_only_image_can_still_be_reported_and_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = dir.path().join("img");
    let img = path.to_str().expect("utf-8");
    ok(&["create", img, "--zones", "4"]);
    ok(&["write", img, "--lba", "0", "--pattern", "0x33", "--blocks", "2"]);
    for entry in std::fs::read_dir(&path).expect("image") {
        let file = entry.expect("entry").path();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let before = snapshot(&path);
    let Some(report) = as_nobody(&["report", img, "--format", "json"]) else { return };
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    assert!(String::from_utf8_lossy(&report.stdout).contains("\"wp_lba\":2"));
    let read = as_nobody(&["read", img, "--lba", "0", "--blocks", "1"]).expect("as before");
    assert!(read.status.success() && read.stdout == vec![0x33; 4096], "{}", String::from_utf8_lossy(&read.stderr));
    let info = as_nobody(&["info", img]).expect("as before");
    assert!(info.status.success(), "{}", String::from_utf8_lossy(&info.stderr));
    let reset = as_nobody(&["reset", img, "--zone", "0"]).expect("as before");
    assert_eq!(reset.status.code(), Some(1), "changing it is refused");
    assert!(String::from_utf8_lossy(&reset.stderr).contains("Permission denied"));
    assert_eq!(snapshot(&path), before, "and nothing changed");
}

/// A damaged `ftl.state` stops every device over the image (its timing would be wrong), naming the file;
/// `repair-zones` sets it aside, and the next device maps the conventional namespace from the data it holds, which
/// reads back as written (issue 75, item 6).
#[test]
fn repair_zones_sets_a_damaged_ftl_state_aside_and_the_data_reads_back() {
    let img = image_created_with(&["--preset", "zn540", "--zones", "2"]);
    let conventional = format!("--filename={},ns=1", img.s());
    let zoned = format!("--filename={},ns=2", img.s());
    let verified = ["--name=w", conventional.as_str(), "--rw=write", "--bs=64k", "--size=4M", "--verify=crc32c"];
    ok(&[&["fio"][..], &verified[..]].concat());
    let state = img.path.join("ftl.state");
    let mut bytes = std::fs::read(&state).expect("the write saved the FTL state");
    bytes[20] ^= 0xff;
    std::fs::write(&state, &bytes).expect("writes");
    let refused = zonelab(&["fio", "--name=r", &zoned, "--rw=read", "--size=4k"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("ftl.state is corrupt"), "{}", refused.stderr);
    let said = ok(&["repair-zones", img.s()]);
    assert!(said.contains("ftl.state: the saved FTL state: its checksum does not match"), "{said}");
    assert!(said.contains("set aside as ftl.state.damaged"), "{said}");
    assert_eq!(std::fs::read(img.path.join("ftl.state.damaged")).expect("kept"), bytes);
    ok(&["fio", "--name=r", &zoned, "--rw=read", "--size=4k"]);
    let read_back = ok(&["fio", "--name=v", &conventional, "--rw=read", "--bs=64k", "--size=4M", "--verify=crc32c"]);
    assert!(read_back.contains("err= 0"), "{read_back}");
    assert!(ok(&["repair-zones", img.s()]).ends_with("0 zone records rebuilt\n"), "nothing more to set aside");
}

/// A zone journal whose header is damaged refuses the image, naming the file; `repair-zones` writes a new header
/// from config.toml with the identity the zone records carry, so that every zone keeps its record and its data
/// (issue 75, item 6).
#[test]
fn repair_zones_rebuilds_a_damaged_journal_header_from_the_configuration() {
    let img = image_created_with(&["--zones", "4"]);
    let data = img.path.join("one-block");
    std::fs::write(&data, vec![0x5a; 4096]).expect("write the block");
    let data = data.to_str().expect("utf-8");
    ok(&["write", img.s(), "--lba", "0", "--data", data]);
    let before = ok(&["report", img.s()]);
    let journal = img.path.join("zones.meta");
    let mut bytes = std::fs::read(&journal).expect("the journal");
    bytes[13] ^= 0x01;
    std::fs::write(&journal, &bytes).expect("damage the header");
    let refused = zonelab(&["report", img.s()]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("zones.meta") && refused.stderr.contains("repair-zones"), "{}", refused.stderr);
    let said = ok(&["repair-zones", img.s()]);
    assert!(said.contains("zone journal: its header was damaged (its checksum did not match)"), "{said}");
    assert!(said.contains("the image identity that 4 of its 4 zone records carry"), "{said}");
    assert!(said.contains("0 zone records rebuilt"), "every record kept: {said}");
    assert_eq!(ok(&["report", img.s()]), before, "every zone as it was");
    assert_eq!(ok(&["read", img.s(), "--lba", "0", "--blocks", "1"]), "Z".repeat(4096), "the data reads back");
    assert!(!ok(&["repair-zones", img.s()]).contains("zone journal"), "a header that checks is left alone");
}
