//! Seeded reordering: appends outstanding at the same instant may execute in any order, as NVMe allows; they
//! still land on distinct, contiguous LBAs.

use std::cell::RefCell;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_runtime::{CommandQueue, HostExt, IoData, Simulation};
use zonelab_zns::{NullStore, Status};

/// LBA each of 16 tasks' 8 KiB append landed at, by task.
fn landed(reorder: Option<u64>) -> Vec<u64> {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".into()]).expect("preset");
    let device = Device::new(&config, NullStore).expect("device");
    let mut simulation = Simulation::new(device, reorder);
    let lbas = Rc::new(RefCell::new(vec![u64::MAX; 16]));
    for task in 0..16 {
        let host = simulation.host();
        let lbas = Rc::clone(&lbas);
        simulation.spawn(async move {
            let lba = host.append(0, IoData::Zeros(8192)).await.expect("append");
            lbas.borrow_mut()[task] = lba;
        });
    }
    simulation.run();
    let result = lbas.borrow().clone();
    result
}

#[test]
fn without_reordering_appends_land_in_submission_order() {
    assert_eq!(landed(None), (0..16).map(|task| task * 2).collect::<Vec<_>>());
}

#[test]
fn with_reordering_appends_land_in_a_seeded_order() {
    let reordered = landed(Some(3));
    let mut sorted = reordered.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..16).map(|task| task * 2).collect::<Vec<_>>(), "distinct and contiguous");
    assert_ne!(reordered, sorted, "seed 3 reorders 16 concurrent appends");
    assert_eq!(reordered, landed(Some(3)), "the same seed gives the same order");
    assert_ne!(reordered, landed(Some(4)), "another seed another order");
}

/// Two writes to consecutive blocks of one zone, the second submitted 1 us after the first while the first is
/// still outstanding: the status of each, and where the write pointer ends.
fn staggered_writes(reorder: Option<u64>, second_slba: u64) -> (Vec<Result<(), Status>>, u64) {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".into()]).expect("preset");
    let device = Device::new(&config, NullStore).expect("device");
    let mut simulation = Simulation::new(device, reorder);
    let results = Rc::new(RefCell::new(vec![Ok(()); 2]));
    for (task, slba, delay_ns) in [(0, 0, 0), (1, second_slba, 1_000)] {
        let (host, results) = (simulation.host(), Rc::clone(&results));
        simulation.spawn(async move {
            host.sleep(delay_ns).await;
            results.borrow_mut()[task] = host.write(slba, IoData::Zeros(4096)).await;
        });
    }
    simulation.run();
    let write_pointer = simulation.with_device(|device| device.namespace().zone(0).wp_lba);
    let results = results.borrow().clone();
    (results, write_pointer)
}

#[test]
fn a_write_arriving_while_an_earlier_one_of_its_zone_is_outstanding_may_overtake_it() {
    assert_eq!(staggered_writes(None, 1), (vec![Ok(()), Ok(())], 2), "in order without reordering");
    let outcomes: Vec<_> = (1..=16).map(|seed| staggered_writes(Some(seed), 1)).collect();
    let overtaken = (vec![Ok(()), Err(Status::ZoneInvalidWrite)], 1);
    assert!(outcomes.contains(&overtaken), "some seed runs the second write first, where it fails");
    assert!(outcomes.contains(&(vec![Ok(()), Ok(())], 2)), "some seed keeps the order: {outcomes:?}");
    assert!(outcomes.iter().all(|outcome| *outcome == overtaken || outcome.1 == 2), "{outcomes:?}");
    assert_eq!(outcomes, (1..=16).map(|seed| staggered_writes(Some(seed), 1)).collect::<Vec<_>>(), "seeded");
}

#[test]
fn a_write_that_could_only_succeed_ahead_of_a_completed_choice_keeps_the_order() {
    // The second write aims at the first one's block: ahead of it, it would succeed and the first would fail,
    // but the first has its result already; so it runs after it, and fails there, for every seed.
    for seed in 1..=16 {
        let (results, write_pointer) = staggered_writes(Some(seed), 0);
        assert_eq!((results[0], write_pointer), (Ok(()), 1), "seed {seed}");
        assert_eq!(results[1], Err(Status::ZoneInvalidWrite), "seed {seed}");
    }
}
