//! Where zonedfs puts data and how it wins space back, in virtual time: files of different write-lifetime hints
//! go to different zones; deleting every file of a zone resets it; under space pressure, garbage collection
//! moves live extents out of mostly-dead zones and every byte still reads back; the active limit is never
//! exceeded; a file system that is remounted holds the same files.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::{on_new_fs, simulation, Fs};
use zonelab_zonedfs::{FsOptions, OpenMode, ZonedFs};

fn pattern(file: usize, len: usize) -> Vec<u8> {
    (0..len).map(|at| (at * 13 + file * 101) as u8).collect()
}

async fn write_file(fs: &Fs, name: &str, lifetime: u8, data: &[u8]) {
    let id = fs.open_write(name, lifetime, OpenMode::Truncate).await.expect("create");
    for chunk in data.chunks(50_000) {
        fs.append(id, chunk).await.expect("append");
    }
    fs.close(id).await.expect("close");
}

async fn read_file(fs: &Fs, name: &str) -> Vec<u8> {
    let id = fs.open_read(name).expect("open");
    let size = fs.file_size(name).expect("size");
    let data = fs.read(id, 0, size).await.expect("read");
    fs.close(id).await.expect("close");
    data
}

#[test]
fn lifetimes_keep_to_their_own_zones_and_dead_zones_are_reset() {
    let mut simulation = simulation(16);
    let (short_zones, long_zones, resets) = on_new_fs(&mut simulation, FsOptions::default(), |fs| async move {
        for index in 0..4 {
            write_file(&fs, &format!("/wal{index}.log"), 2, &pattern(index, 300_000)).await;
            write_file(&fs, &format!("/{index}.sst"), 4, &pattern(index + 10, 300_000)).await;
        }
        let zone_of = |name: &str| {
            let info = fs.stat(name).expect("stat");
            info.extents.iter().map(|extent| fs.geometry().zone_of(extent.lba)).collect::<Vec<u32>>()
        };
        let short: Vec<u32> = (0..4).flat_map(|index| zone_of(&format!("/wal{index}.log"))).collect();
        let long: Vec<u32> = (0..4).flat_map(|index| zone_of(&format!("/{index}.sst"))).collect();
        for index in 0..4 {
            fs.delete(&format!("/wal{index}.log")).await.expect("delete");
        }
        (short, long, fs.stats().zone_resets)
    });
    assert!(short_zones.iter().all(|zone| !long_zones.contains(zone)), "short {short_zones:?}, long {long_zones:?}");
    let mut distinct = short_zones.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(resets >= distinct.len() as u64, "every zone that held only the deleted WALs was reset ({resets})");
}

#[test]
fn garbage_collection_moves_live_data_under_space_pressure_and_all_of_it_reads_back() {
    let mut simulation = simulation(12);
    let options = FsOptions { write_buffer_bytes: 64 << 10, ..FsOptions::default() };
    let (stats, problems, mismatches) = on_new_fs(&mut simulation, options, |fs| async move {
        // Ten data zones of 1 MiB. Rounds of four interleaved files (so they share zones), deleting every
        // other one, keep about 5.5 MiB live while 16 MiB pass through.
        let mut live: Vec<(String, usize)> = Vec::new();
        let mut next = 0;
        for _round in 0..16 {
            let mut ids = Vec::new();
            for _ in 0..4 {
                let name = format!("/f{next}");
                ids.push((fs.open_write(&name, 3, OpenMode::Truncate).await.expect("create"), name, next));
                next += 1;
            }
            for part in 0..5 {
                for (id, _, file) in &ids {
                    fs.append(*id, &pattern(*file, 250_000)[part * 50_000..(part + 1) * 50_000]).await.expect("append");
                }
            }
            for (index, (id, name, file)) in ids.into_iter().enumerate() {
                fs.close(id).await.expect("close");
                if index % 2 == 0 {
                    fs.delete(&name).await.expect("delete");
                } else {
                    live.push((name, file));
                }
            }
            while live.len() > 22 {
                let (name, _) = live.remove(0);
                fs.delete(&name).await.expect("delete");
            }
        }
        let mut mismatches = Vec::new();
        for (name, file) in &live {
            if read_file(&fs, name).await != pattern(*file, 250_000) {
                mismatches.push(name.clone());
            }
        }
        (fs.stats(), fs.check(), mismatches)
    });
    assert!(stats.gc_runs > 0 && stats.gc_bytes_moved > 0, "garbage collection ran: {stats:?}");
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(mismatches, Vec::<String>::new(), "every live file reads back as written");
    // The device refuses a write beyond its active limit (Too Many Active Zones): every append above succeeded.
}

#[test]
fn a_remount_holds_the_same_files_and_bytes() {
    let mut simulation = simulation(12);
    let names = on_new_fs(&mut simulation, FsOptions::default(), |fs| async move {
        fs.mkdir("/db").await.expect("mkdir");
        for index in 0..6 {
            write_file(&fs, &format!("/db/{index:06}.sst"), (index % 5) as u8, &pattern(index, 70_000 * (index + 1)))
                .await;
        }
        fs.rename("/db/000001.sst", "/db/CURRENT").await.expect("rename");
        fs.delete("/db/000002.sst").await.expect("delete");
        fs.unmount().await.expect("unmount");
        fs.list("/db").expect("list")
    });
    let host = simulation.host();
    let out = Rc::new(RefCell::new(None));
    let result = Rc::clone(&out);
    simulation.spawn(async move {
        let fs = ZonedFs::mount(host, FsOptions::default()).await.expect("mount");
        let mut files = Vec::new();
        for name in fs.list("/db").expect("list") {
            files.push((name.clone(), read_file(&fs, &format!("/db/{name}")).await));
        }
        *result.borrow_mut() = Some((files, fs.check()));
    });
    simulation.run();
    let (files, problems) = out.borrow_mut().take().expect("mounted");
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(files.iter().map(|(name, _)| name.clone()).collect::<Vec<_>>(), names);
    for (name, data) in files {
        let index = if name == "CURRENT" { 1 } else { name[..6].parse::<usize>().expect("number") };
        assert_eq!(data, pattern(index, 70_000 * (index + 1)), "{name}");
    }
}

#[test]
fn a_read_plan_reads_what_the_file_system_reads_until_a_reset() {
    let mut simulation = simulation(12);
    let (mismatches, generation_moved) = on_new_fs(&mut simulation, FsOptions::default(), |fs| async move {
        // Synced in pieces, so the file has unaligned extents with padding between them.
        let id = fs.open_write("/a.sst", 3, OpenMode::Truncate).await.expect("create");
        for part in 0..5 {
            fs.append(id, &pattern(7, 250_000)[part * 50_000..(part + 1) * 50_000]).await.expect("append");
            fs.sync(id).await.expect("sync");
        }
        assert_eq!(fs.read_plan(id), None, "no plan while the file is open for writing");
        fs.close(id).await.expect("close");
        write_file(&fs, "/b.sst", 3, &pattern(8, 10_000)).await;
        let id = fs.open_read("/a.sst").expect("open");
        let plan = fs.read_plan(id).expect("a closed file has a plan");
        let block = u64::from(fs.geometry().lba_size);
        let mut mismatches = Vec::new();
        for (offset, len) in [(0u64, 250_000u64), (1, 4095), (49_999, 2), (123_457, 80_000), (249_000, 5_000)] {
            let mut direct = Vec::new();
            for (lba, blocks, skip, take) in plan.pieces(offset, len, block) {
                let bytes = fs_queue_read(&fs, lba, blocks).await;
                direct.extend_from_slice(&bytes[skip as usize..(skip + take) as usize]);
            }
            if direct != fs.read(id, offset, len).await.expect("read") {
                mismatches.push((offset, len));
            }
        }
        let before = fs.reset_generation().load(std::sync::atomic::Ordering::Acquire);
        fs.delete("/b.sst").await.expect("delete");
        fs.close(id).await.expect("close");
        fs.delete("/a.sst").await.expect("delete");
        (mismatches, fs.reset_generation().load(std::sync::atomic::Ordering::Acquire) > before)
    });
    assert_eq!(mismatches, Vec::<(u64, u64)>::new());
    assert!(generation_moved, "resetting the zones the plan pointed at raised the generation");
}

/// Reads blocks from the device under the file system, as the C library's direct reads do.
async fn fs_queue_read(fs: &Fs, lba: u64, blocks: u64) -> Vec<u8> {
    use zonelab_runtime::HostExt;
    fs.queue().read(lba, blocks).await.expect("read")
}

/// Under `wal=zwal` and `wal=conventional`, a `*.log` file is a log in zones of its own, taken as it grows:
/// its syncs commit nothing to the journal, no other file shares its zones, a remount reads its records back
/// through the WAL library, and deleting it resets its zones.
#[test]
fn wal_files_live_in_zones_of_their_own_and_come_back_whole() {
    for design in ["zwal", "conventional"] {
        let mut options = FsOptions::default();
        options
            .apply(&format!("wal={design}&wal_buffer_bytes=16384&wal_queue_depth=8&wal_barrier_bytes=65536"))
            .expect("options");
        let mut simulation = simulation(16);
        let (commits_per_sync, wal_zones, data_zones) = on_new_fs(&mut simulation, options.clone(), |fs| async move {
            let wal = fs.open_write("/000003.log", 2, OpenMode::Truncate).await.expect("create");
            fs.append(wal, &pattern(0, 10_000)).await.expect("append");
            fs.sync(wal).await.expect("sync");
            let commits = fs.stats().journal_commits;
            // 2.5 MiB of records: the log rolls across three 1 MiB zones.
            for round in 0..50 {
                fs.append(wal, &pattern(round + 1, 50_000)).await.expect("append");
                fs.sync(wal).await.expect("sync");
            }
            let commits_per_sync = (fs.stats().journal_commits - commits) as f64 / 50.0;
            write_file(&fs, "/000004.sst", 2, &pattern(99, 300_000)).await;
            fs.close(wal).await.expect("close");
            let info = fs.stat("/000003.log").expect("stat");
            let wal_zones = info.wal.expect("a WAL file").zones;
            let data_zones: Vec<u32> = fs
                .stat("/000004.sst")
                .expect("stat")
                .extents
                .iter()
                .map(|extent| fs.geometry().zone_of(extent.lba))
                .collect();
            fs.unmount().await.expect("unmount");
            (commits_per_sync, wal_zones, data_zones)
        });
        assert!(commits_per_sync < 0.1, "{design}: {commits_per_sync} journal commits per WAL sync");
        assert!(wal_zones.len() >= 3, "{design}: the log took zones as it grew: {wal_zones:?}");
        assert!(data_zones.iter().all(|zone| !wal_zones.contains(zone)), "{design}: {data_zones:?} {wal_zones:?}");

        let host = simulation.host();
        let out = Rc::new(RefCell::new(None));
        let result = Rc::clone(&out);
        let log_zones = wal_zones.clone();
        simulation.spawn(async move {
            let fs = ZonedFs::mount(host, options).await.expect("mount");
            let log = read_file(&fs, "/000003.log").await;
            let roles: Vec<&str> = fs.zones().iter().map(|zone| zone.role).collect();
            let problems = fs.check();
            fs.delete("/000003.log").await.expect("delete");
            let after: Vec<&str> = fs.zones().iter().map(|zone| zone.role).collect();
            let zones = fs.zones();
            let written_after: u64 = log_zones.iter().map(|zone| zones[*zone as usize].written_bytes).sum();
            *result.borrow_mut() = Some((log, roles, problems, after, written_after, fs.check()));
        });
        simulation.run();
        let (log, roles, problems, after, written_after, problems_after) = out.borrow_mut().take().expect("mounted");
        let mut expected = pattern(0, 10_000);
        for round in 0..50 {
            expected.extend(pattern(round + 1, 50_000));
        }
        assert!(log == expected, "{design}: the log came back with {} of {} bytes", log.len(), expected.len());
        assert_eq!(roles.iter().filter(|role| **role == "wal").count(), wal_zones.len(), "{design}: {roles:?}");
        assert_eq!(problems, Vec::<String>::new(), "{design}");
        assert!(!after.contains(&"wal"), "{design}: {after:?}");
        assert_eq!(written_after, 0, "{design}: the log's zones {wal_zones:?} were reset");
        assert_eq!(problems_after, Vec::<String>::new(), "{design}");
    }
}
