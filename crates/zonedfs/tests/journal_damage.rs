//! The journal under damage, over many seeds: a file system of 36 files written in several synced pieces, then
//! one seeded fault in a metadata zone behind its back (a flipped bit, zeroed blocks, or the zone's written tail
//! zeroed). The contract: a mount either replays everything (every file, every byte) or refuses with an error,
//! never mounts with files missing; when it refuses, a salvaging mount (fsck) reports the damage; a repair then
//! leaves a file system that mounts clean, where every file the damage report does not name reads as written
//! or as it was earlier (a prefix of its content, or absent: records lost in zeroed blocks name nothing). A torn commit (a crash mid-commit) is not damage, and what the next mount commits after it is
//! found by the mount after that. A failure prints the seed.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::{HostExt, IoData, Simulation};
use zonelab_zns::{MediaStore, MemoryStore};
use zonelab_zonedfs::{FsOptions, OpenMode, ZonedFs, ZonedFsError};

const BLOCK: u64 = 4096;
const ZONE_BYTES: u64 = 512 << 10;

/// 24 zones of 512 KiB on the zn540 model, 4 KiB blocks.
fn device() -> Device<MemoryStore> {
    let overrides = ["namespace.zones=24", "namespace.zone-size=\"512KiB\"", "namespace.zone-cap=\"512KiB\""];
    let overrides: Vec<String> = overrides.iter().map(|text| text.to_string()).collect();
    let config = DeviceConfig::load("zn540", &overrides).expect("preset");
    let geometry = config.namespace.validate().expect("geometry");
    Device::new(&config, MemoryStore::new(geometry.nsze_lba << geometry.lba_shift)).expect("device")
}

fn options() -> FsOptions {
    FsOptions { write_buffer_bytes: 8 << 10, ..FsOptions::default() }
}

type Files = BTreeMap<String, Vec<u8>>;

/// Runs `work` on a simulation of `device` to its end.
fn on_device<T: 'static>(
    device: Device<MemoryStore>,
    work: impl AsyncFnOnce(zonelab_runtime::Host<MemoryStore>) -> T + 'static,
) -> (Device<MemoryStore>, T) {
    let mut simulation = Simulation::new(device, Some(7));
    let host = simulation.host();
    let out = Rc::new(RefCell::new(None));
    let result = Rc::clone(&out);
    simulation.spawn(async move {
        *result.borrow_mut() = Some(work(host).await);
    });
    simulation.run();
    let done = out.borrow_mut().take().expect("the work finished");
    (simulation.into_device(), done)
}

/// `count` files of three synced appends each, with a rename and a delete among them.
fn populate(seed: u64, count: u64) -> (Device<MemoryStore>, Files) {
    let device = device();
    let (device, files) = on_device(device, async move |host| {
        let fs = ZonedFs::format(host, options()).await.expect("format");
        fs.mkdir("/db").await.expect("mkdir");
        let mut files = Files::new();
        for file in 0..count {
            let name = format!("/db/{file:06}.sst");
            let id = fs.open_write(&name, (file % 5) as u8, OpenMode::Truncate).await.expect("create");
            let mut content = Vec::new();
            for piece in 0..3u64 {
                let bytes: Vec<u8> =
                    (0..3000 + (seed + file * 7 + piece) % 9000).map(|at| (at ^ file ^ seed) as u8).collect();
                fs.append(id, &bytes).await.expect("append");
                fs.sync(id).await.expect("sync");
                content.extend(bytes);
            }
            fs.close(id).await.expect("close");
            files.insert(name, content);
        }
        fs.rename("/db/000003.sst", "/db/000003.renamed").await.expect("rename");
        let moved = files.remove("/db/000003.sst").expect("written");
        files.insert("/db/000003.renamed".into(), moved);
        fs.delete("/db/000005.sst").await.expect("delete");
        files.remove("/db/000005.sst");
        fs.unmount().await.expect("unmount");
        files
    });
    (device, files)
}

/// What a mount gave: the files and fsck's problems, or the error.
type Mounted = Result<(Files, Vec<String>), ZonedFsError>;

fn mount(device: Device<MemoryStore>, options: FsOptions) -> (Device<MemoryStore>, Mounted) {
    on_device(device, async move |host| {
        let fs = ZonedFs::mount(host, options).await?;
        let mut files = Files::new();
        for info in fs.files() {
            let id = fs.open_read(&info.name)?;
            files.insert(info.name.clone(), fs.read(id, 0, info.size_bytes).await?);
        }
        Ok((files, fs.check()))
    })
}

/// One seeded fault in a metadata zone's written bytes; returns what it did.
fn damage(device: &mut Device<MemoryStore>, seed: u64) -> String {
    let mut rng = SplitMix64::split(seed, "journal damage");
    let zone = rng.below(2) as u32;
    let descriptor = device.namespace().zone(zone);
    let written = match descriptor.wp_lba() {
        Some(wp_lba) => (wp_lba - descriptor.start_lba) * BLOCK,
        None => descriptor.capacity_lba * BLOCK,
    };
    let start = descriptor.start_lba * BLOCK;
    assert!(written > 0, "seed {seed}: both journal zones were written (the journal rolled)");
    let store = device.store_mut();
    match rng.below(3) {
        0 => {
            let at = rng.below(written);
            let mut byte = [0u8];
            store.read_at(start + at, &mut byte).expect("read");
            byte[0] ^= 1 << rng.below(8);
            store.write_at(start + at, &byte).expect("write");
            format!("flipped a bit at byte {at} of zone {zone}")
        }
        1 => {
            let first = rng.below(written / BLOCK);
            let blocks = (1 + rng.below(16)).min(written / BLOCK - first);
            store.write_zeroes_at(start + first * BLOCK, blocks * BLOCK).expect("zero");
            format!("zeroed blocks {first}..{} of zone {zone}", first + blocks)
        }
        _ => {
            let from = rng.below(written);
            store.write_zeroes_at(start + from, written - from).expect("zero");
            format!("zeroed zone {zone} from byte {from} to its write pointer ({written})")
        }
    }
}

#[test]
fn damage_is_replayed_whole_or_reported_never_lost_in_silence() {
    let (mut refused, mut repaired) = (0, 0);
    for seed in 0..200 {
        let (mut device, model) = populate(seed, 37);
        assert_eq!(ZONE_BYTES / BLOCK, 128);
        let fault = damage(&mut device, seed);
        let (device, mounted) = mount(device, options());
        match mounted {
            Ok((files, problems)) => {
                assert_eq!(problems, Vec::<String>::new(), "seed {seed}: {fault}: a mount that succeeds is clean");
                assert_eq!(files, model, "seed {seed}: {fault}: a mount that succeeds shows every file whole");
            }
            Err(error) => {
                refused += 1;
                assert!(matches!(error, ZonedFsError::Corrupt(_)), "seed {seed}: {fault}: {error}");
                // fsck (a read-only salvage) reports it, and a repair leaves a file system that mounts clean.
                let examine = FsOptions { read_only: true, salvage: true, ..options() };
                let (device, examined) = mount(device, examine);
                let (_, problems) = examined.unwrap_or_else(|error| panic!("seed {seed}: {fault}: fsck: {error}"));
                assert!(!problems.is_empty(), "seed {seed}: {fault}: fsck reports the damage a mount refused");
                let (device, salvaged) = mount(device, FsOptions { salvage: true, ..options() });
                let (_, report) = salvaged.unwrap_or_else(|error| panic!("seed {seed}: {fault}: repair: {error}"));
                let (_, after) = mount(device, options());
                let (files, problems) =
                    after.unwrap_or_else(|error| panic!("seed {seed}: {fault}: mount after repair: {error}"));
                assert_eq!(problems, Vec::<String>::new(), "seed {seed}: {fault}: clean after repair");
                let named = |name: &str| report.iter().any(|line| line.contains(name));
                for (name, content) in &model {
                    let earlier = files.get(name).is_none_or(|got| content.starts_with(got));
                    assert!(earlier || named(name), "seed {seed}: {fault}: {name} changed but no report names it");
                }
                for name in files.keys().filter(|name| !model.contains_key(*name)) {
                    let earlier = ["/db/000003.sst", "/db/000005.sst"].contains(&name.as_str());
                    assert!(earlier || named(name), "seed {seed}: {fault}: {name} appeared but no report names it");
                }
                repaired += 1;
            }
        }
    }
    // The faults reached live journal bytes often enough to be refused and repaired.
    eprintln!("refused {refused} of 200, repaired {repaired}");
    assert!(refused >= 40 && repaired == refused, "refused {refused}, repaired {repaired}");
}

#[test]
fn a_torn_commit_is_no_damage_and_the_commits_after_it_are_found() {
    let (device, mut model) = populate(1, 8);
    // A commit cut by a crash after its first block: a frame header that promises more than was written,
    // then JSON-like bytes to the block's end, at the journal's write pointer.
    let (device, ()) = on_device(device, async move |host| {
        let report = host.report_zones(0, zonelab_zns::ReportFilter::All, 2).await.expect("report");
        // Eight small files never fill the first journal zone, so it is the current one.
        let (current, other) = (&report.zones[0], &report.zones[1]);
        assert!(current.wp_lba > current.start_lba && other.wp_lba == other.start_lba);
        let mut block = vec![b'x'; BLOCK as usize];
        block[..4].copy_from_slice(&0x5346_4c5au32.to_le_bytes());
        block[4..8].copy_from_slice(&(3 * BLOCK as u32).to_le_bytes());
        host.write(current.wp_lba, IoData::Bytes(block)).await.expect("torn write");
        host.flush().await.expect("flush");
    });
    let (device, mounted) = on_device(device, async move |host| {
        let fs = ZonedFs::mount(host, options()).await.expect("a torn commit mounts");
        assert_eq!(fs.check(), Vec::<String>::new());
        let id = fs.open_write("/db/later.sst", 1, OpenMode::Truncate).await.expect("create");
        fs.append(id, b"after the torn commit").await.expect("append");
        fs.sync(id).await.expect("sync");
        fs.files().len()
    });
    model.insert("/db/later.sst".into(), b"after the torn commit".to_vec());
    assert_eq!(mounted, model.len());
    let (_, again) = mount(device, options());
    let (files, problems) = again.expect("the second mount");
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(files, model, "the second mount finds what the first committed after the torn commit");
}
