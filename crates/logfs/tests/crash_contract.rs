//! logfs under power loss, over many seeds, against an in-memory model. One task runs a seeded sequence of
//! creates, writes (appends and overwrites, unaligned), fsyncs, unlinks and syncs on a small device (so
//! zones fill, are cleaned and reset, and checkpoints come from cleaning as well as from sync); the power
//! fails at a seeded instant. A new mount must show:
//! - every file whose fsync (or a sync) returned, unless it was unlinked after;
//! - in each file, every byte as the model had it at the file's last returned fsync or sync, or as a write
//!   after it (including the one under way) put it; bytes past that size may also be zeros (a checkpoint may
//!   record a size before the data is written back, as on F2FS);
//! - and a file system that takes new files and survives another remount.
//!
//! A failure prints the seed.

mod common;

use std::collections::BTreeMap;

use common::{bytes, device, options, run};
use zonelab_logfs::LogFs;
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::IoData;

#[derive(Clone, Debug)]
enum Op {
    Create(String),
    Write {
        name: String,
        offset: u64,
        len: u64,
    },
    Fsync(String),
    Unlink(String),
    /// To a name never used before (a replacing rename is checked in tests/files.rs).
    Rename {
        from: String,
        to: String,
    },
    Sync,
}

#[derive(Clone, Debug, Default)]
struct ModelFile {
    content: Vec<u8>,
    /// The content at the last returned fsync or sync; None before the first.
    durable: Option<Vec<u8>>,
    /// Writes since then: (op index, offset, len).
    since: Vec<(usize, u64, u64)>,
    /// Names it had before renames that no fsync or sync has made durable yet: a recovery may show it under
    /// any of them (a rename reaches the device with a checkpoint, as on F2FS).
    former_names: Vec<String>,
}

#[derive(Clone, Debug, Default)]
struct Model {
    live: BTreeMap<String, ModelFile>,
    unlinked: BTreeMap<String, ModelFile>,
}

fn step(model: &mut Model, index: usize, op: &Op) {
    match op {
        Op::Create(name) => {
            model.live.insert(name.clone(), ModelFile::default());
        }
        Op::Write { name, offset, len } => {
            let file = model.live.get_mut(name).expect("writes go to live files");
            let end = (offset + len) as usize;
            if file.content.len() < end {
                file.content.resize(end, 0);
            }
            file.content[*offset as usize..end].copy_from_slice(&bytes(index, *offset, *len));
            file.since.push((index, *offset, *len));
        }
        Op::Fsync(name) => {
            let file = model.live.get_mut(name).expect("live");
            file.durable = Some(file.content.clone());
            file.since.clear();
            file.former_names.clear();
        }
        Op::Rename { from, to } => {
            let mut file = model.live.remove(from).expect("live");
            file.former_names.push(from.clone());
            model.live.insert(to.clone(), file);
        }
        Op::Unlink(name) => {
            let file = model.live.remove(name).expect("live");
            model.unlinked.insert(name.clone(), file);
        }
        Op::Sync => {
            for file in model.live.values_mut() {
                file.durable = Some(file.content.clone());
                file.since.clear();
                file.former_names.clear();
            }
        }
    }
}

fn script(seed: u64) -> Vec<Op> {
    let mut rng = SplitMix64::split(seed, "logfs script");
    let mut model = Model::default();
    let mut ops = Vec::new();
    let mut next = 0;
    while ops.len() < 300 {
        let names: Vec<String> = model.live.keys().cloned().collect();
        let live: usize = model.live.values().map(|f| f.content.len()).sum();
        let pick = |rng: &mut SplitMix64| names[rng.below(names.len() as u64) as usize].clone();
        let op = match rng.below(12) {
            0 | 1 if names.len() < 12 => {
                next += 1;
                Op::Create(format!("mail{next:05}"))
            }
            2..=6 if !names.is_empty() && live < 2_400_000 => {
                let name = pick(&mut rng);
                let size = model.live[&name].content.len() as u64;
                let large = rng.below(5) == 0;
                let len = 1 + rng.below(if large { 120_000 } else { 20_000 });
                let offset = if size > 0 && rng.below(2) == 0 { rng.below(size) } else { size };
                Op::Write { name, offset, len }
            }
            7 | 8 if !names.is_empty() => Op::Fsync(pick(&mut rng)),
            9 | 10 if !names.is_empty() && (live > 1_600_000 || rng.below(4) == 0) => Op::Unlink(pick(&mut rng)),
            11 if rng.below(3) == 0 => Op::Sync,
            11 if !names.is_empty() => {
                next += 1;
                Op::Rename { from: pick(&mut rng), to: format!("mail{next:05}") }
            }
            _ => continue,
        };
        step(&mut model, ops.len(), &op);
        ops.push(op);
    }
    ops
}

/// Runs the script on a fresh device until `stop_at` (or to its end); returns the device, the instant
/// reached, how many operations returned (None before the format did) and the stats of a whole run.
fn execute(
    seed: u64,
    protected: bool,
    ops: &[Op],
    stop_at: u64,
) -> (zonelab_device::Device<zonelab_zns::MemoryStore>, u64, Option<usize>, Option<zonelab_logfs::LogFsStats>) {
    use std::cell::RefCell;
    use std::rc::Rc;
    use zonelab_runtime::Simulation;
    let mut simulation = Simulation::new(device(24, protected), Some(seed));
    let host = simulation.host();
    let done = Rc::new(RefCell::new(None));
    let stats = Rc::new(RefCell::new(None));
    let (ops, counter, stats_out) = (ops.to_vec(), Rc::clone(&done), Rc::clone(&stats));
    simulation.spawn(async move {
        let fs = LogFs::format(host, options()).await.expect("format");
        *counter.borrow_mut() = Some(0);
        for (index, op) in ops.iter().enumerate() {
            let result = match op {
                Op::Create(name) => fs.create(name).await,
                Op::Write { name, offset, len } => {
                    fs.write(name, *offset, IoData::Bytes(bytes(index, *offset, *len))).await.map(|_| ())
                }
                Op::Fsync(name) => fs.fsync(name).await,
                Op::Unlink(name) => fs.unlink(name).await,
                Op::Rename { from, to } => fs.rename(from, to).await,
                Op::Sync => fs.sync().await,
            };
            result.unwrap_or_else(|error| panic!("seed {seed}: operation {index} {op:?} failed: {error}"));
            *counter.borrow_mut() = Some(index + 1);
        }
        *stats_out.borrow_mut() = Some(fs.stats());
    });
    let reached = simulation.run_until(stop_at);
    let done = *done.borrow();
    let stats = stats.borrow_mut().take();
    (simulation.into_device(), reached, done, stats)
}

/// Whether recovered byte `at` is one the model allows.
fn allowed(file: &ModelFile, under_way: Option<(usize, u64, u64)>, at: u64, value: u8) -> bool {
    let durable = file.durable.as_deref().unwrap_or(&[]);
    if (at as usize) < durable.len() && durable[at as usize] == value {
        return true;
    }
    if at as usize >= durable.len() && value == 0 {
        return true;
    }
    file.since
        .iter()
        .copied()
        .chain(under_way)
        .any(|(op, offset, len)| (offset..offset + len).contains(&at) && common::byte(op, at) == value)
}

/// Checks one seed; returns what the whole run did and how many fsyncs the recovery rolled forward.
fn check(seed: u64) -> (zonelab_logfs::LogFsStats, u64) {
    let ops = script(seed);

    let mut rng = SplitMix64::split(seed, "power loss");
    let protected = rng.below(2) == 0;
    let (_, end, all, stats) = execute(seed, protected, &ops, u64::MAX);
    assert_eq!(all, Some(ops.len()), "seed {seed}: the script runs to its end when nothing fails");
    let stop = rng.below(end + 1);
    let (mut device, reached, done, _) = execute(seed, protected, &ops, stop);
    device.power_loss(reached.max(stop)).expect("power loss");
    let Some(done) = done else { return (stats.expect("stats"), 0) };
    let mut model = Model::default();
    for (index, op) in ops[..done].iter().enumerate() {
        step(&mut model, index, op);
    }
    let under_way = ops.get(done).cloned();
    let ((files, report), device) = run(device, seed ^ 1, |host| async move {
        let (fs, report) = LogFs::mount(host, options())
            .await
            .unwrap_or_else(|error| panic!("seed {seed}: the mount after a power loss at {stop} ns failed: {error}"));
        let mut files = BTreeMap::new();
        for name in fs.list() {
            files.insert(name.clone(), fs.read(&name, 0, u64::MAX).await.expect("read"));
        }
        fs.create("after").await.expect("create after recovery");
        fs.write("after", 0, IoData::Bytes(bytes(9999, 0, 300_000))).await.expect("write after recovery");
        fs.sync().await.expect("sync after recovery");
        (files, report)
    });
    let context =
        format!("seed {seed}: power loss at {stop} ns after {done} operations (under way: {under_way:?}), {report:?}");
    for (name, data) in &files {
        let known = |files: &BTreeMap<String, ModelFile>| {
            files.get(name).or_else(|| files.values().find(|file| file.former_names.contains(name))).cloned()
        };
        let file = known(&model.live).or_else(|| known(&model.unlinked));
        let file = match (file, &under_way) {
            (Some(file), _) => file,
            (None, Some(Op::Create(created))) if created == name => ModelFile::default(),
            (None, Some(Op::Rename { from, to })) if to == name => model.live[from].clone(),
            (None, _) => panic!("{context}: {name} was never created"),
        };
        let in_flight = match &under_way {
            Some(Op::Write { name: written, offset, len })
                if written == name || model.live.get(written).is_some_and(|f| f.former_names.contains(name)) =>
            {
                Some((done, *offset, *len))
            }
            _ => None,
        };
        let longest = file.content.len().max(in_flight.map_or(0, |(_, o, l)| (o + l) as usize));
        assert!(data.len() <= longest, "{context}: {name} came back with {} bytes, more than ever written", data.len());
        let durable = file.durable.as_ref().map_or(0, Vec::len);
        assert!(
            data.len() >= durable,
            "{context}: {name} came back with {} bytes, its fsync covered {durable}",
            data.len()
        );
        for (at, &value) in data.iter().enumerate() {
            assert!(
                allowed(&file, in_flight, at as u64, value),
                "{context}: {name} byte {at} is {value}, which no write put there"
            );
        }
    }
    for (name, file) in &model.live {
        let renamed_under_way =
            matches!(&under_way, Some(Op::Rename { from, to }) if from == name && files.contains_key(to));
        if file.durable.is_some() && !renamed_under_way {
            assert!(
                files.contains_key(name) || file.former_names.iter().any(|former| files.contains_key(former)),
                "{context}: {name} was fsynced and is gone"
            );
        }
    }
    let (after, _) = run(device, seed ^ 2, |host| async move {
        let (fs, _) = LogFs::mount(host, options()).await.expect("second mount");
        fs.read("after", 0, u64::MAX).await.expect("read")
    });
    assert_eq!(after, bytes(9999, 0, 300_000), "seed {seed}: a file written after recovery survives a remount");
    (stats.expect("stats"), report.rolled_forward_fsyncs)
}

fn check_seeds(seeds: std::ops::Range<u64>) {
    let (mut cleanings, mut resets, mut checkpoints, mut rolled) = (0, 0, 0, 0);
    for seed in seeds {
        let (stats, rolled_forward) = check(seed);
        rolled += rolled_forward;
        cleanings += stats.foreground_cleanings;
        resets += stats.zone_resets;
        checkpoints += stats.checkpoints;
    }
    // The contract was tried where it is hardest: zones cleaned and reset, recoveries that rolled forward.
    eprintln!("{cleanings} zones cleaned, {resets} reset, {checkpoints} checkpoints, {rolled} fsyncs rolled forward");
    assert!(
        cleanings > 0 && resets > 0 && checkpoints > 0 && rolled > 0,
        "{cleanings} {resets} {checkpoints} {rolled}"
    );
}

#[test]
fn the_contract_holds_for_60_seeds() {
    check_seeds(0..60);
}

#[test]
#[ignore = "a longer soak: cargo test -p zonelab-logfs --release -- --ignored"]
fn the_contract_holds_for_1000_seeds() {
    check_seeds(0..1000);
}
