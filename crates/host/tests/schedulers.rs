//! The schedulers against a simulated device: `none` lets several writes in one zone reach the device out of
//! order (Zone Invalid Write), `mq-deadline` never does and merges adjacent queued writes.

use std::cell::RefCell;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_host::{Scheduled, SchedulerKind};
use zonelab_runtime::{HostExt, IoData, Simulation};
use zonelab_zns::{NullStore, Status};

/// `depth` writers each issue `per_writer` sequential 4 KiB writes into zone 0, from a shared cursor, through
/// `kind`; returns every result and the scheduler's counters.
fn run(
    kind: SchedulerKind,
    depth: u64,
    per_writer: u64,
    seed: u64,
) -> (Vec<Result<(), Status>>, zonelab_host::SchedulerCounters) {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".into()]).expect("preset");
    let device = Device::new(&config, NullStore).expect("device");
    let mut simulation = Simulation::new(device, Some(seed));
    let queue = Scheduled::new(simulation.host(), kind, 1280 << 10);
    let cursor = Rc::new(RefCell::new(0u64));
    let results = Rc::new(RefCell::new(Vec::new()));
    for _ in 0..depth {
        let (queue, cursor, results) = (queue.clone(), Rc::clone(&cursor), Rc::clone(&results));
        simulation.spawn(async move {
            for _ in 0..per_writer {
                let lba = {
                    let mut next = cursor.borrow_mut();
                    *next += 1;
                    *next - 1
                };
                let result = queue.write(lba, IoData::Zeros(4096)).await;
                results.borrow_mut().push(result);
                if result.is_err() {
                    return;
                }
            }
        });
    }
    simulation.run();
    assert_eq!(simulation.unfinished_tasks(), 0, "no task is left waiting");
    let results = results.borrow().clone();
    (results, queue.counters())
}

#[test]
fn none_with_several_writes_in_a_zone_fails_with_zone_invalid_write() {
    let failures = (1..=8u64)
        .filter(|&seed| run(SchedulerKind::None, 4, 50, seed).0.contains(&Err(Status::ZoneInvalidWrite)))
        .count();
    assert!(failures >= 6, "reordered writes fail for most seeds: {failures} of 8");
    let (single, _) = run(SchedulerKind::None, 1, 200, 1);
    assert!(single.iter().all(Result::is_ok), "one write at a time never fails");
}

#[test]
fn mq_deadline_never_fails_and_merges() {
    for seed in 1..=8 {
        let (results, counters) = run(SchedulerKind::MqDeadline, 8, 100, seed);
        assert_eq!(results.len(), 800);
        assert!(results.iter().all(Result::is_ok), "seed {seed}: {:?}", results.iter().find(|r| r.is_err()));
        assert_eq!(counters.write_requests, 800);
        assert!(counters.write_commands < 400, "queued adjacent writes merge: {counters:?}");
        assert_eq!(counters.write_commands + counters.merged_requests, 800);
    }
}

#[test]
fn merges_stay_within_the_request_size_limit() {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".into()]).expect("preset");
    let device = Device::new(&config, NullStore).expect("device");
    let mut simulation = Simulation::new(device, None);
    let queue = Scheduled::new(simulation.host(), SchedulerKind::MqDeadline, 16 << 10);
    for writer in 0..32u64 {
        let queue = queue.clone();
        simulation.spawn(async move {
            queue.write(writer, IoData::Zeros(4096)).await.expect("write");
        });
    }
    simulation.run();
    let largest = simulation.with_device(|device| device.counters().bytes_written);
    assert_eq!(largest, 32 * 4096);
    let counters = queue.counters();
    assert!(counters.write_commands >= 32 / 4, "at most four 4 KiB requests per 16 KiB command: {counters:?}");
}

#[test]
fn every_registered_scheduler_parses_by_its_name_and_aliases() {
    for info in zonelab_host::SCHEDULERS {
        let kind = SchedulerKind::parse(info.name).expect("its own name");
        assert_eq!(kind.name(), info.name);
        for alias in info.aliases {
            assert_eq!(SchedulerKind::parse(alias), Some(kind), "{alias}");
        }
    }
    assert_eq!(SchedulerKind::parse("kyber"), None);
    assert_eq!(SchedulerKind::names(), "none, mq-deadline, zinc");
}
