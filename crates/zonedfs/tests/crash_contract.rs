//! The file system's contract under power loss, over many seeds, against an in-memory model: one task runs a
//! seeded sequence of creates, appends, syncs, closes, renames and deletes on small zones (so zones fill, die,
//! get reset and collected, and the journal rolls); the power fails at a seeded instant; a new mount must show
//! every operation that returned, each file's content a prefix of what was appended and at least what its last
//! returned sync covered. The one operation under way at the power loss may show either way. A third of the
//! seeds write `*.log` files through ZWAL, a third through the conventional WAL (small buffers, barriers and a
//! queue depth of 4, so appends complete out of order and logs roll across zones). A failure prints the seed.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_host::WalDesign;
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::Simulation;
use zonelab_zns::MemoryStore;
use zonelab_zonedfs::{FsOptions, FsStats, OpenMode, ZonedFs};

/// 24 zones of 512 KiB on the zn540 timing model, with 8 active, with or without PLP. Zones of even seeds
/// take 256 KiB (a gap between zones), of odd seeds all 512 KiB (the end of one zone is the LBA before the
/// next's start, which an extent must never run across).
fn device(seed: u64, protected: bool) -> Device<MemoryStore> {
    let capacity = if seed.is_multiple_of(2) { "256KiB" } else { "512KiB" };
    let overrides = [
        "namespace.zones=24".to_string(),
        "namespace.zone-size=\"512KiB\"".to_string(),
        format!("namespace.zone-cap=\"{capacity}\""),
        "namespace.max-active=8".to_string(),
        "namespace.max-open=8".to_string(),
        format!("power-loss-protection={protected}"),
    ];
    let config = DeviceConfig::load("zn540", &overrides).expect("preset");
    let geometry = config.namespace.validate().expect("geometry");
    Device::new(&config, MemoryStore::new(geometry.nsze_lba << geometry.lba_shift)).expect("device")
}

fn options(seed: u64) -> FsOptions {
    FsOptions {
        write_buffer_bytes: 64 << 10,
        gc_reserve_zones: 2,
        wal: [None, Some(WalDesign::Zwal), Some(WalDesign::Conventional)][(seed % 3) as usize],
        wal_buffer_bytes: 16 << 10,
        wal_queue_depth: 4,
        wal_barrier_bytes: 64 << 10,
        ..FsOptions::default()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Create { name: String, lifetime: u8 },
    Append { name: String, len: usize },
    Sync { name: String },
    Close { name: String },
    Rename { from: String, to: String },
    Delete { name: String },
}

/// A file in the model: everything appended, how much a returned sync covered, and whether it is open.
#[derive(Clone, Debug, Default)]
struct ModelFile {
    content: Vec<u8>,
    synced: usize,
    open: bool,
}

type Model = BTreeMap<String, ModelFile>;

fn bytes_for(seed: u64, op_index: usize, len: usize) -> Vec<u8> {
    (0..len).map(|at| (op_index as u64 * 131 + at as u64 * 7 + seed) as u8).collect()
}

/// Applies `op` to the model (the state once it has returned).
fn step(model: &mut Model, seed: u64, index: usize, op: &Op) {
    match op {
        Op::Create { name, .. } => {
            model.insert(name.clone(), ModelFile { open: true, ..ModelFile::default() });
        }
        Op::Append { name, len } => {
            let file = model.get_mut(name).expect("appends go to open files");
            file.content.extend(bytes_for(seed, index, *len));
        }
        Op::Sync { name } | Op::Close { name } => {
            let file = model.get_mut(name).expect("known");
            file.synced = file.content.len();
            file.open = matches!(op, Op::Sync { .. });
        }
        Op::Rename { from, to } => {
            let file = model.remove(from).expect("known");
            model.insert(to.clone(), file);
        }
        Op::Delete { name } => {
            model.remove(name);
        }
    }
}

/// A seeded sequence of operations that the model accepts.
fn script(seed: u64) -> Vec<Op> {
    let mut rng = SplitMix64::split(seed, "zonedfs script");
    let mut model = Model::new();
    let mut ops = Vec::new();
    let mut next_name = 0;
    while ops.len() < 200 {
        let names: Vec<String> = model.keys().cloned().collect();
        let open: Vec<String> = model.iter().filter(|(_, file)| file.open).map(|(name, _)| name.clone()).collect();
        let live_bytes: usize = model.values().map(|file| file.content.len()).sum();
        let logs = model.keys().filter(|name| name.ends_with(".log")).count();
        let op = match rng.below(10) {
            0 | 1 if open.len() < 6 => {
                next_name += 1;
                let kind = if logs < 2 && rng.below(4) == 0 { "log" } else { "sst" };
                Op::Create { name: format!("/db/{next_name:06}.{kind}"), lifetime: rng.below(6) as u8 }
            }
            // A log holds zones of its own: count each as a zone more than its bytes.
            2..=5 if !open.is_empty() && live_bytes + logs * (512 << 10) < 9 << 19 => {
                let large = rng.below(4) == 0;
                let len = 1 + rng.below(if large { 600_000 } else { 9000 }) as usize;
                Op::Append { name: open[rng.below(open.len() as u64) as usize].clone(), len }
            }
            6 if !open.is_empty() => Op::Sync { name: open[rng.below(open.len() as u64) as usize].clone() },
            7 if !open.is_empty() => Op::Close { name: open[rng.below(open.len() as u64) as usize].clone() },
            8 if !names.is_empty() => {
                let from = names[rng.below(names.len() as u64) as usize].clone();
                // A WAL keeps a WAL's name (it stays a WAL whatever its name; the script counts them by name).
                let to = if rng.below(3) == 0 && names.len() > 1 && !from.ends_with(".log") {
                    names[rng.below(names.len() as u64) as usize].clone()
                } else {
                    next_name += 1;
                    format!("/db/{next_name:06}.{}", if from.ends_with(".log") { "log" } else { "renamed" })
                };
                if to.ends_with(".log") && !from.ends_with(".log") {
                    continue;
                }
                if from == to || model.get(&to).is_some_and(|file| file.open) {
                    continue;
                }
                Op::Rename { from, to }
            }
            9 if !names.is_empty() => {
                let name = names[rng.below(names.len() as u64) as usize].clone();
                if model[&name].open {
                    continue;
                }
                Op::Delete { name }
            }
            _ => continue,
        };
        step(&mut model, seed, ops.len(), &op);
        ops.push(op);
    }
    ops
}

/// Runs the script until `stop_at`; returns the device, the instant reached and how many operations returned
/// (None if the format itself had not).
fn run(
    seed: u64,
    protected: bool,
    ops: &[Op],
    stop_at: u64,
    stats: &Stats,
) -> (Device<MemoryStore>, u64, Option<usize>) {
    let mut simulation = Simulation::new(device(seed, protected), Some(seed));
    let host = simulation.host();
    let done = Rc::new(RefCell::new(None));
    let (ops, counter) = (ops.to_vec(), Rc::clone(&done));
    let stats_out = Rc::clone(stats);
    simulation.spawn(async move {
        let fs = ZonedFs::format(host, options(seed)).await.expect("format");
        fs.mkdir("/db").await.expect("mkdir");
        *counter.borrow_mut() = Some(0);
        let mut ids = BTreeMap::new();
        for (index, op) in ops.iter().enumerate() {
            let result = match op {
                Op::Create { name, lifetime } => fs.open_write(name, *lifetime, OpenMode::Truncate).await.map(|id| {
                    ids.insert(name.clone(), id);
                }),
                Op::Append { name, len } => fs.append(ids[name], &bytes_for(seed, index, *len)).await,
                Op::Sync { name } => fs.sync(ids[name]).await,
                Op::Close { name } => fs.close(ids[name]).await,
                Op::Rename { from, to } => fs.rename(from, to).await.map(|()| {
                    if let Some(id) = ids.remove(from) {
                        ids.insert(to.clone(), id);
                    }
                }),
                Op::Delete { name } => fs.delete(name).await,
            };
            result.unwrap_or_else(|error| panic!("seed {seed}: operation {index} {op:?} failed: {error}"));
            *counter.borrow_mut() = Some(index + 1);
        }
        assert_eq!(fs.check(), Vec::<String>::new(), "seed {seed}: the file system is consistent at the end");
        *stats_out.borrow_mut() = Some(fs.stats());
    });
    let reached = simulation.run_until(stop_at);
    let done = *done.borrow();
    (simulation.into_device(), reached, done)
}

/// What the file system did in a run to the end.
type Stats = Rc<RefCell<Option<FsStats>>>;

/// Whether a recovered file agrees with a model of it.
fn agrees(recovered: &[u8], model: &ModelFile) -> bool {
    recovered.len() >= model.synced && model.content.starts_with(recovered)
}

/// Checks one seed; returns what the file system did in the run to the end.
fn check(seed: u64) -> FsStats {
    let ops = script(seed);
    let mut rng = SplitMix64::split(seed, "power loss");
    let protected = rng.below(2) == 0;
    let stats = Stats::default();
    let (_, end, all) = run(seed, protected, &ops, u64::MAX, &stats);
    let stats = stats.borrow_mut().take().expect("the run to the end finished");
    assert_eq!(all, Some(ops.len()), "seed {seed}: the script runs to its end when nothing fails");
    let stop = rng.below(end + 1);
    let (mut device, reached, done) = run(seed, protected, &ops, stop, &Stats::default());
    device.power_loss(reached.max(stop)).expect("power loss");
    // Before the format and the first directory returned, there may be no file system yet.
    let Some(done) = done else { return stats };

    let mut before = Model::new();
    for (index, op) in ops[..done].iter().enumerate() {
        step(&mut before, seed, index, op);
    }
    let mut after = before.clone();
    if done < ops.len() {
        step(&mut after, seed, done, &ops[done]);
    }
    let (device, files, problems) = mount_and_read(device, seed, stop, Some(seed ^ 1), true);
    assert_eq!(problems, Vec::<String>::new(), "seed {seed}: fsck after the power loss");
    // What the first mount after the crash commits, a second mount finds, with all the first one showed (a
    // torn commit's bytes must never hide later records).
    let (_, again, problems) = mount_and_read(device, seed, stop, Some(seed ^ 2), false);
    assert_eq!(problems, Vec::<String>::new(), "seed {seed}: fsck at the second mount");
    let mut expected = files.clone();
    expected.insert(AFTER_RECOVERY.to_string(), after_recovery_bytes(seed));
    assert_eq!(
        again.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "seed {seed}: the second mount lists what the first showed and then wrote"
    );
    assert_eq!(again, expected, "seed {seed}: the second mount reads what the first showed and then wrote");
    let in_flight = ops.get(done);
    for (name, data) in &files {
        let ok = before.get(name).is_some_and(|model| agrees(data, model))
            || after.get(name).is_some_and(|model| agrees(data, model));
        assert!(
            ok,
            "seed {seed}: {name} came back with {} bytes, which no model allows (power loss at {stop} ns after {done} \
             operations, PLP {protected}, under way: {in_flight:?})",
            data.len()
        );
    }
    for name in before.keys().filter(|name| after.contains_key(*name)) {
        assert!(files.contains_key(name), "seed {seed}: {name} was lost (power loss after {done} operations)");
    }
    stats
}

/// A file the first mount after a power loss writes and syncs.
const AFTER_RECOVERY: &str = "/db/after-recovery.sst";

fn after_recovery_bytes(seed: u64) -> Vec<u8> {
    bytes_for(seed, 9999, 20_000)
}

/// Mounts, reads every file and runs fsck; when `write_after`, then writes and syncs `AFTER_RECOVERY`.
fn mount_and_read(
    device: Device<MemoryStore>,
    seed: u64,
    stop: u64,
    sim_seed: Option<u64>,
    write_after: bool,
) -> (Device<MemoryStore>, BTreeMap<String, Vec<u8>>, Vec<String>) {
    let mut recovery = Simulation::new(device, sim_seed);
    let host = recovery.host();
    let found = Rc::new(RefCell::new(None));
    let out = Rc::clone(&found);
    recovery.spawn(async move {
        let fs = match ZonedFs::mount(host, options(seed)).await {
            Ok(fs) => fs,
            Err(error) => {
                *out.borrow_mut() = Some(Err(error.to_string()));
                return;
            }
        };
        let mut files = BTreeMap::new();
        for info in fs.files() {
            let id = fs.open_read(&info.name).expect("listed");
            let data = fs.read(id, 0, info.size_bytes).await.expect("read");
            files.insert(info.name, data);
        }
        let problems = fs.check();
        if write_after {
            let id = fs.open_write(AFTER_RECOVERY, 2, OpenMode::Truncate).await.expect("create after recovery");
            fs.append(id, &after_recovery_bytes(seed)).await.expect("append after recovery");
            fs.sync(id).await.expect("sync after recovery");
        }
        *out.borrow_mut() = Some(Ok((files, problems)));
    });
    recovery.run();
    let (files, problems) = found
        .borrow_mut()
        .take()
        .expect("the mount ran")
        .unwrap_or_else(|error| panic!("seed {seed}: the mount after a power loss at {stop} ns failed: {error}"));
    (recovery.into_device(), files, problems)
}

/// Checks seeds `0..count`; the runs must between them have reset zones, collected garbage and rolled the
/// journal, or the contract was not tried where it is hardest.
fn check_seeds(count: u64) {
    let mut total = FsStats::default();
    for seed in 0..count {
        let stats = check(seed);
        total.zone_resets += stats.zone_resets;
        total.gc_runs += stats.gc_runs;
        total.journal_rolls += stats.journal_rolls;
        total.wal_zones += stats.wal_zones;
    }
    assert!(total.zone_resets > 0 && total.gc_runs > 0 && total.journal_rolls > count, "{total:?}");
    // Logs started and rolled to further zones in the seeds that write them.
    assert!(total.wal_zones > count / 3, "{total:?}");
}

#[test]
fn the_contract_holds_for_60_seeds() {
    check_seeds(60);
}

#[test]
#[ignore = "a longer soak: cargo test -p zonelab-zonedfs --release -- --ignored"]
fn the_contract_holds_for_2000_seeds() {
    check_seeds(2000);
}
