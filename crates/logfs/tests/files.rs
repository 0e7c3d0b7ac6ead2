//! Files through logfs, without power loss: reads see writes (aligned or not, holes, overwrites, truncates),
//! a remount after sync sees the same files, cleaning keeps contents under space pressure, and a full file
//! system says ENOSPC without losing anything.

mod common;

use std::collections::BTreeMap;

use common::{bytes, device, options, run};
use zonelab_logfs::{LogFs, LogFsError};
use zonelab_runtime::IoData;

#[test]
fn reads_see_unaligned_writes_overwrites_holes_and_truncates() {
    let (result, _) = run(device(24, true), 1, |host| async move {
        let fs = LogFs::format(host, options()).await.expect("format");
        fs.create("a").await.expect("create");
        fs.write("a", 100, IoData::Bytes(bytes(1, 100, 9000))).await.expect("write");
        fs.write("a", 5000, IoData::Bytes(bytes(2, 5000, 10))).await.expect("overwrite");
        fs.write("a", 20_000, IoData::Bytes(bytes(3, 20_000, 5))).await.expect("write past a hole");
        let mut model = vec![0u8; 20_005];
        model[100..9100].copy_from_slice(&bytes(1, 100, 9000));
        model[5000..5010].copy_from_slice(&bytes(2, 5000, 10));
        model[20_000..].copy_from_slice(&bytes(3, 20_000, 5));
        assert_eq!(fs.read("a", 0, 1 << 20).await.expect("read"), model, "in memory");
        fs.fsync("a").await.expect("fsync");
        assert_eq!(fs.read("a", 0, 1 << 20).await.expect("read"), model, "after fsync");
        fs.truncate("a", 5003).await.expect("truncate");
        model.truncate(5003);
        fs.write("a", 9000, IoData::Bytes(bytes(4, 9000, 3))).await.expect("write after truncate");
        model.resize(9000, 0);
        model.extend(bytes(4, 9000, 3));
        assert_eq!(fs.read("a", 0, 1 << 20).await.expect("read"), model, "truncated bytes read back as zeros");
        assert_eq!(fs.read("a", 8999, 100).await.expect("short read"), model[8999..].to_vec());
        assert_eq!(fs.stat("a").expect("stat").size, 9003);
        assert_eq!(fs.create("a").await, Err(LogFsError::Exists("a".into())));
        assert_eq!(fs.read("b", 0, 1).await, Err(LogFsError::NotFound("b".into())));
        assert!(matches!(fs.create("x/y").await, Err(LogFsError::BadName(_))));
        fs.stats()
    });
    assert!(result.data_blocks_written >= 3 && result.node_blocks_written >= 2, "{result:?}");
}

#[test]
fn a_remount_after_sync_sees_every_file_renamed_and_deleted_as_left() {
    let ((), device) = run(device(24, false), 2, |host| async move {
        let fs = LogFs::format(host, options()).await.expect("format");
        for i in 0..300 {
            let name = format!("file{i:04}");
            fs.create(&name).await.expect("create");
            fs.write(&name, 0, IoData::Bytes(bytes(i, 0, 1 + (i as u64 * 37) % 5000))).await.expect("write");
        }
        fs.rename("file0001", "renamed").await.expect("rename");
        fs.rename("file0002", "file0003").await.expect("rename over a file");
        fs.unlink("file0004").await.expect("unlink");
        fs.sync().await.expect("sync");
    });
    let ((report, files), _) = run(device, 3, |host| async move {
        let (fs, report) = LogFs::mount(host, options()).await.expect("mount");
        let mut files = BTreeMap::new();
        for name in fs.list() {
            let size = fs.stat(&name).expect("stat").size;
            files.insert(name.clone(), fs.read(&name, 0, size).await.expect("read"));
        }
        (report, files)
    });
    assert_eq!(report.files, 298, "{report:?}");
    assert_eq!(report.rolled_forward_nodes, 0, "a clean unmount needs no roll-forward");
    assert_eq!(files["renamed"], bytes(1, 0, 1 + 37));
    assert_eq!(files["file0003"], bytes(2, 0, 1 + 74), "the rename replaced the target");
    assert!(!files.contains_key("file0004") && !files.contains_key("file0001") && !files.contains_key("file0002"));
    for i in 5..300 {
        assert_eq!(files[&format!("file{i:04}")], bytes(i, 0, 1 + (i as u64 * 37) % 5000), "file {i}");
    }
}

#[test]
fn cleaning_under_space_pressure_moves_valid_blocks_and_resets_zones() {
    let (outcome, _) = run(device(24, true), 4, |host| async move {
        let fs = LogFs::format(host, options()).await.expect("format");
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        // Live data stays near half the capacity while ten times that is written: files are rewritten at
        // random offsets and deleted, so zones hold a mix of valid and invalid blocks and must be cleaned.
        let capacity = fs.space().capacity_blocks * 4096;
        let mut op = 0;
        for round in 0..40 {
            for i in 0..6 {
                let name = format!("r{round}-{i}");
                fs.create(&name).await.expect("create");
                let len = capacity / 30;
                op += 1;
                fs.write(&name, 0, IoData::Bytes(bytes(op, 0, len))).await.expect("write");
                model.insert(name, bytes(op, 0, len));
            }
            for (name, content) in model.iter_mut().filter(|(n, _)| n.ends_with('1') || n.ends_with('3')) {
                op += 1;
                let at = (op as u64 * 4099) % (content.len() as u64 - 5000);
                fs.write(name, at, IoData::Bytes(bytes(op, at, 5000))).await.expect("overwrite");
                content[at as usize..at as usize + 5000].copy_from_slice(&bytes(op, at, 5000));
                fs.fsync(name).await.expect("fsync");
            }
            while model.len() > 14 {
                let name = model.keys().next().cloned().expect("some");
                fs.unlink(&name).await.expect("unlink");
                model.remove(&name);
            }
        }
        for (name, content) in &model {
            assert_eq!(&fs.read(name, 0, 1 << 30).await.expect("read"), content, "{name}");
        }
        fs.stats()
    });
    assert!(outcome.foreground_cleanings > 0, "{outcome:?}");
    assert!(outcome.blocks_moved > 0 && outcome.zone_resets > 20, "{outcome:?}");
}

#[test]
fn a_full_file_system_says_enospc_and_keeps_every_file() {
    let (errno, device) = run(device(24, true), 5, |host| async move {
        let fs = LogFs::format(host, options()).await.expect("format");
        let mut errno = None;
        for i in 0..1000 {
            let name = format!("f{i}");
            // The file's inode or its data may be what does not fit.
            let written = match fs.create(&name).await {
                Ok(()) => fs.write(&name, 0, IoData::Bytes(bytes(i, 0, 64 << 10))).await.map(|_| ()),
                Err(error) => Err(error),
            };
            match written {
                Ok(()) => fs.fsync(&name).await.expect("fsync"),
                Err(error) => {
                    errno = Some(error.errno());
                    if fs.list().contains(&name) {
                        fs.unlink(&name).await.expect("unlink the file that did not fit");
                    }
                    break;
                }
            }
        }
        let files = fs.list();
        for name in &files {
            let i: usize = name[1..].parse().expect("number");
            assert_eq!(fs.read(name, 0, 1 << 20).await.expect("read"), bytes(i, 0, 64 << 10), "{name}");
        }
        fs.unlink(&files[0]).await.expect("unlink");
        fs.create("again").await.expect("create after a delete");
        fs.write("again", 0, IoData::Bytes(bytes(7, 0, 64 << 10))).await.expect("a delete makes room");
        fs.sync().await.expect("sync");
        errno
    });
    assert_eq!(errno, Some(28), "ENOSPC");
    let (count, _) = run(device, 6, |host| async move {
        let (fs, _) = LogFs::mount(host, options()).await.expect("mount after ENOSPC");
        fs.list().len()
    });
    assert!(count > 10);
}

#[test]
fn an_unformatted_device_is_refused_by_name() {
    let (result, _) = run(device(24, true), 7, |host| async move {
        LogFs::mount(host, options()).await.map(|_| ()).map_err(|e| e.to_string())
    });
    let error = result.expect_err("no checkpoint");
    assert!(error.contains("no valid checkpoint"), "{error}");
}

/// `placement`: every written block is accounted for. A file's data runs cover its blocks; each run lies in a zone
/// the map lists, and a zone's valid bytes are exactly what the files' data and nodes hold there.
#[test]
fn the_placement_holds_every_valid_block_where_the_zones_count_it() {
    let (placement, _) = run(device(24, true), 4, |host| async move {
        let fs = LogFs::format(host, options()).await.expect("format");
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            fs.create(name).await.expect("create");
            fs.write(name, 0, IoData::Bytes(bytes(i, 0, 300 << 10))).await.expect("write");
        }
        // Overwrites leave dead blocks behind; a truncate drops some.
        fs.write("b", 4096, IoData::Bytes(bytes(9, 4096, 64 << 10))).await.expect("overwrite");
        fs.truncate("c", 100 << 10).await.expect("truncate");
        fs.sync().await.expect("sync");
        fs.placement()
    });
    let file = |name: &str| placement.files.iter().find(|file| file.name == name).expect("listed");
    let bytes_of = |runs: &[(u64, u64)]| runs.iter().map(|&(_, bytes)| bytes).sum::<u64>();
    assert_eq!([bytes_of(&file("a").data), bytes_of(&file("b").data)], [300 << 10, 300 << 10]);
    assert_eq!(bytes_of(&file("c").data), 100 << 10);
    assert!(placement.files.iter().all(|file| !file.nodes.is_empty()), "every inode's node is written");
    for zone in &placement.zones {
        assert!(zone.valid_bytes <= zone.written_bytes && zone.written_bytes <= zone.capacity_bytes, "{zone:?}");
    }
    let valid: u64 = placement.zones.iter().map(|zone| zone.valid_bytes).sum();
    let held: u64 = placement.files.iter().map(|file| bytes_of(&file.data) + bytes_of(&file.nodes)).sum();
    assert_eq!(valid, held, "the zones' valid bytes are the files' data and nodes");
    let dead: u64 = placement.zones.iter().map(|zone| zone.written_bytes - zone.valid_bytes).sum();
    assert!(dead >= 64 << 10, "the overwrite and the truncate left dead blocks: {dead}");
    assert!(placement.zones.iter().any(|zone| zone.role.ends_with("data")), "{:?}", placement.zones);
}
