//! The swarm, in the spirit of TigerBeetle's VOPR: each seed draws a device (a preset with drawn overrides:
//! zone count, size and capacity, open and active limits, power-loss protection), an I/O scheduler (none,
//! mq-deadline, ZINC) and a workload, runs it in virtual time and checks that workload's contract:
//!
//! - **fio**: zoned writes (sequential or random, psync or libaio at a drawn depth, one to four jobs) with
//!   crc32c verification: no job fails, and everything written reads back as written;
//! - **zonedfs**: RocksDB-shaped files, appended and synced through the scheduler; the power fails at a drawn
//!   instant; a mount must show every file whose creation returned, each holding at least what its last
//!   returned sync covered and nothing but what was appended, and fsck is clean;
//! - **logfs**: files written and fsynced; the power fails at a drawn instant; a mount must recover every
//!   fsynced byte.
//!
//! Underneath every workload the layers check themselves in debug builds (the test profile): the namespace's
//! invariants after every change, the zone mapping after every zone management command, the clock never
//! moving back. CI runs 200 seeds; `cargo test -p zonelab-fio --release --test swarm -- --ignored` runs
//! 10,000 more. A failure names its seed and what it drew.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_fio as fio;
use zonelab_host::{Scheduled, SchedulerKind};
use zonelab_logfs::{LogFs, LogFsOptions};
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::{Host, IoData, Simulation};
use zonelab_zns::MemoryStore;
use zonelab_zonedfs::{FsOptions, OpenMode, ZonedFs};

/// What a seed drew.
#[derive(Debug)]
struct Draw {
    preset: &'static str,
    overrides: Vec<String>,
    scheduler: &'static str,
}

fn draw(seed: u64) -> Draw {
    let mut rng = SplitMix64::split(seed, "swarm device");
    let preset = ["zn540", "instant", "confzns-zwal", "nvmevirt-rezns"][rng.below(4) as usize];
    let zone_kib = [256u64, 512, 1024][rng.below(3) as usize];
    let cap_kib = zone_kib - [0, zone_kib / 4, zone_kib / 2][rng.below(3) as usize];
    let active = 6 + rng.below(9);
    let overrides = vec![
        format!("namespace.zones={}", 24 + rng.below(24)),
        format!("namespace.zone-size=\"{zone_kib}KiB\""),
        format!("namespace.zone-cap=\"{cap_kib}KiB\""),
        format!("namespace.max-active={active}"),
        format!("namespace.max-open={}", active - rng.below(3)),
        format!("power-loss-protection={}", rng.below(2) == 0),
    ];
    Draw { preset, overrides, scheduler: ["none", "mq-deadline", "zinc"][rng.below(3) as usize] }
}

fn device(draw: &Draw) -> Device<MemoryStore> {
    let config = DeviceConfig::load(draw.preset, &draw.overrides).expect("a drawn device is valid");
    let geometry = config.namespace.validate().expect("geometry");
    Device::new(&config, MemoryStore::new(geometry.nsze_lba << geometry.lba_shift)).expect("device")
}

/// fio's zoned writes with verification on the drawn device.
fn fio_contract(seed: u64, draw: &Draw) {
    let mut rng = SplitMix64::split(seed, "swarm fio");
    // The namespace's overrides, as a spec takes them (power-loss protection does not matter without a loss).
    let overrides: Vec<String> =
        draw.overrides.iter().filter(|text| text.starts_with("namespace.")).map(|text| text.replace('"', "")).collect();
    let filename = format!("--filename=preset:{},{},store=memory", draw.preset, overrides.join(","));
    let rw = ["write", "randwrite"][rng.below(2) as usize];
    // Several writes in flight in one zone need a scheduler with zone write locking: under none they may
    // reach the device out of order and fail, as on Linux, so none gets one write at a time.
    let most = if draw.scheduler == "none" { 1 } else { 16 };
    let (engine, depth) = if rng.below(2) == 0 { ("psync", 1) } else { ("libaio", 1 + rng.below(most)) };
    // A job keeps zones active beyond its max_open_zones: a sequential one every zone its writes in flight
    // span (the next is opened while the last writes of one are out), a random one each of its four zones
    // (partly written). Together the jobs stay within the device's open and active limits, which fio's own
    // options do not see.
    let geometry = DeviceConfig::load(draw.preset, &draw.overrides).expect("drawn").namespace.validate().expect("ok");
    let block_kib = [4u64, 8, 16, 64][rng.below(4) as usize];
    let open_per_job = 1 + rng.below(2);
    let cap_kib = (geometry.zone_cap_lba << geometry.lba_shift) >> 10;
    let in_flight_zones = (depth * block_kib).div_ceil(cap_kib) + 1;
    let zones_per_job = if rw == "randwrite" { 4 } else { open_per_job.max(in_flight_zones) + 1 };
    let limit = u64::from(geometry.max_active.min(geometry.max_open));
    let jobs = 1 + rng.below((limit / zones_per_job).clamp(1, 4));
    let args: Vec<String> = [
        "--name=swarm".to_string(),
        filename,
        "--zonemode=zbd".into(),
        "--direct=1".into(),
        format!("--rw={rw}"),
        format!("--bs={block_kib}k"),
        format!("--ioengine={engine}"),
        format!("--iodepth={depth}"),
        format!("--numjobs={jobs}"),
        format!("--scheduler={}", draw.scheduler),
        format!("--max_open_zones={open_per_job}"),
        // Each job its own four zones, so that every job has something to write.
        "--size=4z".into(),
        "--offset_increment=4z".into(),
        "--verify=crc32c".into(),
        format!("--seed={seed}"),
    ]
    .to_vec();
    let invocation = fio::parse_invocation(&args, |path| Err(format!("no job files here: {path}")))
        .unwrap_or_else(|error| panic!("seed {seed}: {draw:?}: {args:?}: {error}"));
    let result = fio::run(&invocation, seed).unwrap_or_else(|error| panic!("seed {seed}: {draw:?}: {error}"));
    for job in &result.jobs {
        assert_eq!((job.error, job.total_errors), (0, 0), "seed {seed}: {draw:?}: {args:?}: {:?}", job.error_message);
        assert!(job.write.bytes > 0, "seed {seed}: {draw:?}: {args:?}: the job wrote");
        assert_eq!(job.read.bytes, job.write.bytes, "seed {seed}: {draw:?}: verification read back every byte");
    }
}

/// Seeded file content: what file `file` holds at byte `at`.
fn byte(seed: u64, file: usize, at: usize) -> u8 {
    (seed as usize ^ (file * 131) ^ (at * 7)) as u8
}

/// Each file's bytes appended and the length its last returned sync covered; None until its creation returned.
type Model = Rc<RefCell<BTreeMap<String, (usize, usize)>>>;

/// A returned sync (or close) covers everything appended to `name` so far.
fn mark_synced(model: &Model, name: &str) {
    let mut model = model.borrow_mut();
    let entry = model.get_mut(name).expect("created");
    entry.1 = entry.0;
}

/// Runs `work` on the drawn device until a drawn instant (or its end), cuts the power there and returns the
/// device; the first run to the end gives the instant's range.
fn until_power_loss<F: std::future::Future<Output = ()> + 'static>(
    seed: u64,
    draw: &Draw,
    work: impl Fn(Simulation<MemoryStore>, Model) -> (Simulation<MemoryStore>, F),
) -> (Device<MemoryStore>, BTreeMap<String, (usize, usize)>) {
    let run = |stop: u64| {
        let model = Model::default();
        let (mut simulation, future) = work(Simulation::new(device(draw), Some(seed)), Rc::clone(&model));
        simulation.spawn(future);
        let reached = simulation.run_until(stop);
        let mut device = simulation.into_device();
        device.power_loss(reached.max(stop)).expect("power loss");
        let model = model.borrow().clone();
        (device, model, reached)
    };
    let (_, _, end) = run(u64::MAX);
    let stop = SplitMix64::split(seed, "swarm power loss").below(end + 1);
    let (device, model, _) = run(stop);
    (device, model)
}

/// Checks recovered files against the model: every file whose creation returned is there with at least its
/// synced bytes, and nothing but what was appended; past the synced bytes, `holes` allows zeros too.
fn check_files(
    seed: u64,
    draw: &Draw,
    what: &str,
    model: &BTreeMap<String, (usize, usize)>,
    files: &BTreeMap<String, Vec<u8>>,
    holes: bool,
) {
    for (name, &(appended, synced)) in model {
        let digits: String = name.chars().filter(char::is_ascii_digit).collect();
        let file: usize = digits.parse().expect("numbered");
        let data = files.get(name).unwrap_or_else(|| panic!("seed {seed}: {draw:?}: {what}: {name} was lost"));
        assert!(
            data.len() >= synced && data.len() <= appended,
            "seed {seed}: {draw:?}: {what}: {name} came back with {} bytes; {synced} were synced of {appended}",
            data.len()
        );
        let allowed = |at: usize, value: u8| value == byte(seed, file, at) || (holes && at >= synced && value == 0);
        let wrong = data.iter().enumerate().position(|(at, &value)| !allowed(at, value));
        assert!(
            wrong.is_none(),
            "seed {seed}: {draw:?}: {what}: {name} holds bytes that were never appended from byte {wrong:?} of {} \
             ({synced} synced, {appended} appended)",
            data.len()
        );
    }
}

/// Runs `mount` on the device a power loss left, through the drawn scheduler, to its end.
fn recover<T: 'static>(
    device: Device<MemoryStore>,
    seed: u64,
    draw: &Draw,
    mount: impl AsyncFnOnce(Scheduled<Host<MemoryStore>>) -> Result<T, String> + 'static,
) -> Result<T, String> {
    let mut simulation = Simulation::new(device, Some(seed ^ 1));
    let queue = Scheduled::new(simulation.host(), scheduler(draw), 512 << 10);
    let found = Rc::new(RefCell::new(None));
    let out = Rc::clone(&found);
    simulation.spawn(async move {
        *out.borrow_mut() = Some(mount(queue).await);
    });
    simulation.run();
    let found = found.borrow_mut().take();
    found.expect("the mount ran")
}

fn scheduler(draw: &Draw) -> SchedulerKind {
    SchedulerKind::parse(draw.scheduler).expect("a known scheduler")
}

/// zonedfs: files appended and synced through the scheduler, then a power loss and a mount.
fn zonedfs_contract(seed: u64, draw: &Draw) {
    let (device, model) = until_power_loss(seed, draw, |simulation, model| {
        let queue = Scheduled::new(simulation.host(), scheduler(draw), 512 << 10);
        let future = async move {
            let options = FsOptions { write_buffer_bytes: 16 << 10, ..FsOptions::default() };
            let fs = ZonedFs::format(queue, options).await.expect("format");
            fs.mkdir("/db").await.expect("mkdir");
            let mut rng = SplitMix64::split(seed, "swarm zonedfs");
            for file in 0..12 {
                let name = format!("/db/{file:06}.sst");
                let id = fs.open_write(&name, (file % 6) as u8, OpenMode::Truncate).await.expect("create");
                model.borrow_mut().insert(name.clone(), (0, 0));
                for _ in 0..1 + rng.below(4) {
                    let len = 1 + rng.below(20_000) as usize;
                    let at = model.borrow()[&name].0;
                    let data: Vec<u8> = (at..at + len).map(|offset| byte(seed, file, offset)).collect();
                    model.borrow_mut().get_mut(&name).expect("created").0 += len;
                    fs.append(id, &data).await.expect("append");
                    if rng.below(2) == 0 {
                        fs.sync(id).await.expect("sync");
                        mark_synced(&model, &name);
                    }
                }
                fs.close(id).await.expect("close");
                mark_synced(&model, &name);
                if file % 4 == 3 {
                    // Out of the model first: a delete under way at the power loss may show either way.
                    let old = format!("/db/{:06}.sst", file - 3);
                    model.borrow_mut().remove(&old);
                    fs.delete(&old).await.expect("delete");
                }
            }
        };
        (simulation, future)
    });
    let found = recover(device, seed, draw, async |queue| {
        let fs = ZonedFs::mount(queue, FsOptions::default()).await.map_err(|error| error.to_string())?;
        let mut files = BTreeMap::new();
        for info in fs.files() {
            let id = fs.open_read(&info.name).expect("listed");
            files.insert(info.name.clone(), fs.read(id, 0, info.size_bytes).await.expect("read"));
        }
        Ok((files, fs.check()))
    });
    if model.is_empty() {
        // The power failed before the format returned: there may be no file system yet.
        return;
    }
    let (files, problems) = found.unwrap_or_else(|error| panic!("seed {seed}: {draw:?}: zonedfs mount: {error}"));
    assert_eq!(problems, Vec::<String>::new(), "seed {seed}: {draw:?}: zonedfs fsck");
    check_files(seed, draw, "zonedfs", &model, &files, false);
}

/// logfs: files written and fsynced, then a power loss and a mount.
fn logfs_contract(seed: u64, draw: &Draw) {
    let (device, model) = until_power_loss(seed, draw, |simulation, model| {
        let queue = Scheduled::new(simulation.host(), scheduler(draw), 512 << 10);
        let future = async move {
            let fs = LogFs::format(queue, LogFsOptions::default()).await.expect("format");
            let mut rng = SplitMix64::split(seed, "swarm logfs");
            for file in 0..10 {
                let name = format!("f{file:03}");
                fs.create(&name).await.expect("create");
                model.borrow_mut().insert(name.clone(), (0, 0));
                for _ in 0..1 + rng.below(3) {
                    let len = 4096 * (1 + rng.below(8)) as usize;
                    let at = model.borrow()[&name].0;
                    let data: Vec<u8> = (at..at + len).map(|offset| byte(seed, file, offset)).collect();
                    model.borrow_mut().get_mut(&name).expect("created").0 += len;
                    fs.write(&name, at as u64, IoData::Bytes(data)).await.expect("write");
                    if rng.below(2) == 0 {
                        fs.fsync(&name).await.expect("fsync");
                        mark_synced(&model, &name);
                    }
                }
            }
        };
        (simulation, future)
    });
    let found = recover(device, seed, draw, async |queue| {
        let (fs, _) = LogFs::mount(queue, LogFsOptions::default()).await.map_err(|error| error.to_string())?;
        let mut files = BTreeMap::new();
        for name in fs.list() {
            let size = fs.stat(&name).expect("listed").size;
            files.insert(name.clone(), fs.read(&name, 0, size).await.expect("read"));
        }
        Ok(files)
    });
    if model.is_empty() {
        return;
    }
    let files = found.unwrap_or_else(|error| panic!("seed {seed}: {draw:?}: logfs mount: {error}"));
    // A file created but never fsynced may be gone: logfs makes a creation durable at fsync or checkpoint.
    let durable: BTreeMap<String, (usize, usize)> =
        model.into_iter().filter(|(name, (_, synced))| *synced > 0 || files.contains_key(name)).collect();
    // A checkpoint writes an inode's size without its dirty data, as F2FS's does (its `block_operations`
    // writes dentries and nodes, not regular files' data): bytes never fsynced may come back as a hole.
    check_files(seed, draw, "logfs", &durable, &files, true);
}

fn check_seed(seed: u64) {
    let draw = draw(seed);
    match SplitMix64::split(seed, "swarm workload").below(3) {
        0 => fio_contract(seed, &draw),
        1 => zonedfs_contract(seed, &draw),
        _ => logfs_contract(seed, &draw),
    }
}

/// Checks `seeds` and prints how fast they went.
fn check_seeds(seeds: std::ops::Range<u64>) {
    let started = std::time::Instant::now();
    let count = seeds.end - seeds.start;
    for seed in seeds {
        check_seed(seed);
    }
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("swarm: {count} seeds in {seconds:.2} s ({:.0} seeds/s)", count as f64 / seconds);
}

#[test]
fn the_swarm_holds_for_200_seeds() {
    check_seeds(0..200);
}

#[test]
#[ignore = "a soak: cargo test -p zonelab-fio --release --test swarm -- --ignored"]
fn the_swarm_holds_for_10000_seeds() {
    check_seeds(200..10_200);
}
