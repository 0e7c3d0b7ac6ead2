//! Seeded reordering: appends outstanding at the same instant may execute in any order, as NVMe allows; they
//! still land on distinct, contiguous LBAs.

use std::cell::RefCell;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_runtime::{HostExt, IoData, Simulation};
use zonelab_zns::NullStore;

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
