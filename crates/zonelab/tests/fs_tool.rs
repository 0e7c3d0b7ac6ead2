//! `zonelab fs`: mkfs, ls, df, dump and fsck on an image, and what they say about an image that holds no file
//! system or a damaged one (a clear error, exit 1, and the image left as it was).

mod common;

use common::{image_created_with, ok, snapshot, zonelab};

#[test]
fn mkfs_then_every_view_of_an_empty_file_system() {
    let image = image_created_with(&["--zones", "16", "--zone-size", "1MiB"]);
    let formatted = ok(&["fs", "mkfs", image.s()]);
    assert!(formatted.contains("16 zones") && formatted.contains("14 data zones"), "{formatted}");
    assert!(ok(&["fs", "fsck", image.s()]).contains("clean, 0 files"));
    assert!(ok(&["fs", "ls", image.s()]).contains("0 files, 1 directories"));
    let df = ok(&["fs", "df", image.s()]);
    assert!(df.contains("in 14 data zones (14 empty)"), "{df}");
    // The journal: a superblock of generation 1, then the (empty) snapshot.
    let dump = ok(&["fs", "dump", image.s()]);
    let records: Vec<serde_json::Value> =
        dump.lines().map(|line| serde_json::from_str(line).expect("a JSON record")).collect();
    assert_eq!(records[0]["op"], "superblock");
    assert_eq!(records[0]["generation"], 1);
    assert_eq!(records[1]["op"], "snapshot");
    let json: serde_json::Value = serde_json::from_str(&ok(&["fs", "df", image.s(), "--json"])).expect("json");
    assert_eq!(json["space"]["data_zones"], 14);
}

#[test]
fn a_device_without_a_file_system_or_with_a_damaged_superblock_is_refused_and_left_alone() {
    let image = image_created_with(&["--zones", "16", "--zone-size", "1MiB"]);
    let blank = zonelab(&["fs", "fsck", image.s()]);
    assert_eq!(blank.code, 1, "{}", blank.stderr);
    assert!(blank.stderr.contains("every zone is empty; run `zonelab fs mkfs`"), "{}", blank.stderr);

    ok(&["fs", "mkfs", image.s()]);
    // Garbage where the superblock was.
    ok(&["reset", image.s(), "--zone", "0"]);
    ok(&["write", image.s(), "--lba", "0", "--pattern", "0x5a", "--blocks", "2"]);
    let before = snapshot(&image.path);
    for command in ["fsck", "ls", "df", "dump"] {
        let run = zonelab(&["fs", command, image.s()]);
        assert_eq!(run.code, 1, "fs {command}: {}", run.stderr);
        assert!(run.stderr.contains("no superblock in zones 0 and 1, and the device holds data"), "{}", run.stderr);
    }
    assert_eq!(snapshot(&image.path), before, "a refused mount changes nothing");
    // mkfs over data that is not a file system asks for --force, and changes nothing without it.
    let refused = zonelab(&["fs", "mkfs", image.s()]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("pass --force"), "{}", refused.stderr);
    assert_eq!(snapshot(&image.path), before);
    ok(&["fs", "mkfs", image.s(), "--force"]);
    assert!(ok(&["fs", "fsck", image.s()]).contains("clean"));
}

#[test]
fn a_bad_device_spec_is_a_usage_error() {
    let run = zonelab(&["fs", "ls", "preset:zn540,zonez=4"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("zonez"), "{}", run.stderr);
}

/// Writes `files` small files of three synced pieces each on the zonedfs of `image`, in-process.
fn write_files(image: &common::TestImage, files: u32) {
    use std::{cell::RefCell, rc::Rc};
    use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath, StoreChoice};
    use zonelab_runtime::Simulation;
    use zonelab_zonedfs::{FsOptions, OpenMode, ZonedFs};

    let built = DeviceBuilder::new(DeviceSpec::parse(image.s()))
        .host(HostPath::Kernel)
        .store(StoreChoice::Memory)
        .build()
        .expect("open the image");
    let mut simulation = Simulation::over(built, None);
    let host = simulation.host();
    let done = Rc::new(RefCell::new(false));
    let finished = Rc::clone(&done);
    simulation.spawn(async move {
        let fs =
            ZonedFs::mount(host, FsOptions { write_buffer_bytes: 4096, ..FsOptions::default() }).await.expect("mount");
        for file in 0..files {
            let id = fs.open_write(&format!("/f{file:03}"), 2, OpenMode::Truncate).await.expect("create");
            for piece in 0..3u8 {
                fs.append(id, &[piece.wrapping_add(file as u8); 5000]).await.expect("append");
                fs.sync(id).await.expect("sync");
            }
            fs.close(id).await.expect("close");
        }
        fs.unmount().await.expect("unmount");
        *finished.borrow_mut() = true;
    });
    simulation.run();
    assert!(*done.borrow(), "the files were written");
}

#[test]
fn a_flipped_bit_in_the_journal_is_reported_refused_and_repaired_never_taken_for_a_torn_end() {
    let image = image_created_with(&["--zones", "16", "--zone-size", "1MiB"]);
    ok(&["fs", "mkfs", image.s()]);
    write_files(&image, 12);
    assert!(ok(&["fs", "fsck", image.s()]).contains("clean, 12 files"));
    // One bit of a frame in the journal's third block, with valid frames after it.
    let data = image.path.join("data");
    let mut bytes = std::fs::read(&data).expect("read the image's data");
    bytes[2 * 4096 + 40] ^= 0x04;
    std::fs::write(&data, &bytes).expect("write the image's data");
    let before = snapshot(&image.path);
    let fsck = zonelab(&["fs", "fsck", image.s()]);
    assert_eq!(fsck.code, 1, "fsck fails on a damaged journal: {}", fsck.stdout);
    assert!(
        fsck.stdout.contains("journal zone 0") && fsck.stdout.contains("frame at byte 8192 (block 2)"),
        "{}",
        fsck.stdout
    );
    assert!(fsck.stdout.contains("files they touch: /f"), "{}", fsck.stdout);
    assert!(fsck.stderr.contains("fsck --repair"), "{}", fsck.stderr);
    for command in ["ls", "df", "dump"] {
        let run = zonelab(&["fs", command, image.s()]);
        assert_eq!(run.code, 1, "fs {command} refuses a damaged journal: {}", run.stdout);
        assert!(run.stderr.contains("damaged, not torn"), "{}", run.stderr);
    }
    assert_eq!(snapshot(&image.path), before, "neither fsck nor a refused mount changes the image");
    let repaired = ok(&["fs", "fsck", "--repair", image.s()]);
    assert!(repaired.contains("repaired: a new journal generation holds"), "{repaired}");
    let after = ok(&["fs", "fsck", image.s()]);
    assert!(after.contains("clean"), "{after}");
    // The damaged record was one change to one file: the other eleven files are whole.
    let listed = ok(&["fs", "ls", image.s()]);
    let whole = listed.lines().filter(|line| line.trim_start().starts_with("15000 /f")).count();
    assert_eq!(whole, 11, "{listed}");
    // The damaged record gave /f000 its first piece: the file is shorter now, repair says the record cannot be
    // named and keeps the piece it named (5000 bytes in two blocks at LBA 512) in /lost+found, never gone.
    assert!(repaired.contains("unreadable, so the files it changed cannot be named"), "{repaired}");
    assert!(repaired.contains("kept as /lost+found/lba-512"), "{repaired}");
    assert!(listed.lines().any(|line| line.trim_start().starts_with("8192 /lost+found/lba-512 ")), "{listed}");
}

#[test]
fn the_readers_open_an_image_read_only_beside_other_readers() {
    use std::os::fd::AsRawFd;
    let image = image_created_with(&["--zones", "16", "--zone-size", "1MiB"]);
    ok(&["fs", "mkfs", image.s()]);
    write_files(&image, 2);
    // Another reader (`zonelab info`, say) holds the image's shared lock; a writer's exclusive one is refused.
    let journal = std::fs::File::open(image.path.join("zones.meta")).expect("the image's zone journal");
    // Blocking: a child another test thread forked while this process held the image may keep the lock of
    // `write_files` until it execs.
    // SAFETY: flock reads its integer arguments only; the descriptor is owned by `journal`.
    assert_eq!(unsafe { libc::flock(journal.as_raw_fd(), libc::LOCK_SH) }, 0);
    let before = snapshot(&image.path);
    assert!(ok(&["fs", "ls", image.s()]).contains("2 files"));
    assert!(ok(&["fs", "df", image.s()]).contains("capacity"));
    assert!(ok(&["fs", "dump", image.s()]).contains("superblock"));
    assert!(ok(&["fs", "fsck", image.s()]).contains("clean, 2 files"));
    assert_eq!(snapshot(&image.path), before, "the readers change nothing");
    let repair = zonelab(&["fs", "fsck", "--repair", image.s()]);
    assert_ne!(repair.code, 0, "a writer waits for no reader: {}", repair.stdout);
    drop(journal);
}

#[test]
fn a_damaged_zone_record_leaves_the_image_readable_and_repair_zones_rebuilds_it() {
    let image = image_created_with(&["--zones", "16", "--zone-size", "1MiB"]);
    ok(&["fs", "mkfs", image.s()]);
    write_files(&image, 3);
    let listed = ok(&["fs", "ls", image.s()]);
    let report = ok(&["report", image.s(), "--format", "json"]);
    // One flipped bit in the record of zone 2, which holds file data.
    let journal = image.path.join("zones.meta");
    let mut bytes = std::fs::read(&journal).expect("read the zone journal");
    bytes[4096 + 2 * 64 + 9] ^= 0x01;
    std::fs::write(&journal, &bytes).expect("write the zone journal");
    let refused = zonelab(&["reset", image.s(), "--zone", "5"]);
    assert_eq!(refused.code, 1, "a writer refuses: {}", refused.stderr);
    assert!(refused.stderr.contains("the record of zone 2 fails its checksum"), "{}", refused.stderr);
    assert!(refused.stderr.contains("repair-zones"), "{}", refused.stderr);
    let info = zonelab(&["info", image.s()]);
    assert_eq!(info.code, 0, "{}", info.stderr);
    assert!(info.stderr.contains("zone 2 is shown offline"), "{}", info.stderr);
    let damaged: serde_json::Value =
        serde_json::from_str(&ok(&["report", image.s(), "--format", "json"])).expect("json");
    assert_eq!(damaged["zones"][2]["state"], "offline", "{damaged}");
    let repaired = ok(&["repair-zones", image.s()]);
    assert!(repaired.contains("zone 2: the record of zone 2 fails its checksum; rebuilt as"), "{repaired}");
    // The rebuilt write pointer is the one lost (the file system pads each file's last block, so no data ends
    // in zeros); the zone comes back CLOSED, as a power cycle leaves an open one, and everything reads as before.
    let wps = |text: &str| -> Vec<serde_json::Value> {
        let report: serde_json::Value = serde_json::from_str(text).expect("json");
        report["zones"].as_array().expect("zones").iter().map(|zone| zone["wp_lba"].clone()).collect()
    };
    let rebuilt = ok(&["report", image.s(), "--format", "json"]);
    assert_eq!(wps(&rebuilt), wps(&report));
    let rebuilt: serde_json::Value = serde_json::from_str(&rebuilt).expect("json");
    assert_eq!(rebuilt["zones"][2]["state"], "closed");
    assert_eq!(ok(&["fs", "ls", image.s()]), listed);
    assert!(ok(&["fs", "fsck", image.s()]).contains("clean, 3 files"));
}

/// `fs map`: the zones in use with the files whose extents they hold, which agrees with `fs ls`'s extents, `fs
/// df`'s live bytes and the device's own zone report; `--png` draws it.
#[test]
fn the_zone_map_names_the_files_in_each_zone_as_ls_df_and_the_zone_report_do() {
    let image = image_created_with(&["--zones", "16", "--zone-size", "1MiB"]);
    ok(&["fs", "mkfs", image.s()]);
    write_files(&image, 12);
    let dir = tempfile::tempdir().expect("tempdir");
    let png = dir.path().join("map.png");
    let map: serde_json::Value =
        serde_json::from_str(&ok(&["fs", "map", image.s(), "--json", "--png", png.to_str().expect("path")]))
            .expect("json");
    assert!(std::fs::metadata(&png).expect("the map's PNG").len() > 1000);
    let ls: serde_json::Value = serde_json::from_str(&ok(&["fs", "ls", image.s(), "--json"])).expect("json");
    let df: serde_json::Value = serde_json::from_str(&ok(&["fs", "df", image.s(), "--json"])).expect("json");
    let report: serde_json::Value =
        serde_json::from_str(&ok(&["report", image.s(), "--format", "json"])).expect("report json");
    let zones = map["zones"].as_array().expect("zones");
    assert!(!zones.is_empty());
    let mut files_seen = 0;
    for zone in zones {
        let number = zone["zone"].as_u64().expect("zone");
        // Written bytes are the zone's write pointer in the device's own report.
        let reported = report["zones"].as_array().expect("report").iter().find(|z| z["index"] == number).expect("zone");
        let written = zone["written_bytes"].as_u64().expect("written");
        let wp_bytes =
            (reported["wp_lba"].as_u64().expect("wp") - reported["start_lba"].as_u64().expect("start")) * 4096;
        assert!(reported["state"] == "full" || wp_bytes == written, "zone {number}: {reported} against {zone}");
        let df_zone = df["zones"].as_array().expect("df").iter().find(|z| z["zone"] == number).expect("df zone");
        assert_eq!(zone["live_bytes"], df_zone["live_bytes"], "zone {number}");
        // Every file named holds that many bytes of extents in this zone, as ls lists them.
        for file in zone["files"].as_array().expect("files") {
            let name = file["name"].as_str().expect("name");
            let listed = ls["files"].as_array().expect("ls").iter().find(|f| f["name"] == name).expect("listed");
            let in_zone: u64 = listed["extents"]
                .as_array()
                .expect("extents")
                .iter()
                .filter(|extent| extent["lba"].as_u64().expect("lba") / 256 == number)
                .map(|extent| extent["len_bytes"].as_u64().expect("len"))
                .sum();
            assert_eq!(file["bytes"].as_u64(), Some(in_zone), "{name} in zone {number}");
            files_seen += 1;
        }
    }
    assert!(files_seen >= 12, "every file appears in some zone: {files_seen}");
    let table = ok(&["fs", "map", image.s()]);
    assert!(table.contains("zones in use") && table.contains("/f000:"), "{table}");
    // fiemap: one file's extents in file order, as ls lists them, with their zones.
    let fiemap: serde_json::Value =
        serde_json::from_str(&ok(&["fs", "fiemap", image.s(), "/f003", "--json"])).expect("json");
    let listed = ls["files"].as_array().expect("ls").iter().find(|f| f["name"] == "/f003").expect("listed");
    let extents = fiemap["extents"].as_array().expect("extents");
    assert_eq!(extents.len(), listed["extents"].as_array().expect("extents").len());
    let mut logical = 0;
    for (mapped, extent) in extents.iter().zip(listed["extents"].as_array().expect("extents")) {
        assert_eq!((&mapped["lba"], &mapped["bytes"]), (&extent["lba"], &extent["len_bytes"]));
        assert_eq!(mapped["zone"].as_u64(), extent["lba"].as_u64().map(|lba| lba / 256));
        assert_eq!(mapped["logical"].as_u64(), Some(logical));
        logical += extent["len_bytes"].as_u64().expect("bytes");
    }
    assert_eq!(fiemap["size_bytes"].as_u64(), Some(logical));
    let missing = zonelab(&["fs", "fiemap", image.s(), "/nothing"]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(missing.stderr.contains("no file /nothing"), "{}", missing.stderr);
}
