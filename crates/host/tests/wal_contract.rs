//! The WAL durability contract under reordering and power loss, over many seeds: once `sync` returns, every
//! record appended before it survives; what `recover` returns is a prefix of what was appended, with no hole, no
//! reordering and no corrupted record. Each seed draws the design, buffer, queue depth, barrier, record sizes,
//! power-loss protection and the instant of the power loss; a failure prints the seed.

use std::cell::RefCell;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_host::{Wal, WalConfig, WalDesign};
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::Simulation;
use zonelab_zns::MemoryStore;

/// Small zones (768 KiB writable, so logs roll over) on the zn540 timing model, with or without PLP.
fn device(protected: bool) -> Device<MemoryStore> {
    let overrides = [
        "namespace.zones=8".to_string(),
        "namespace.zone-size=\"1MiB\"".to_string(),
        "namespace.zone-cap=\"768KiB\"".to_string(),
        format!("power-loss-protection={protected}"),
    ];
    let config = DeviceConfig::load("zn540", &overrides).expect("preset");
    let geometry = config.namespace.validate().expect("geometry");
    Device::new(&config, MemoryStore::new(geometry.nsze_lba << geometry.lba_shift)).expect("device")
}

struct Case {
    config: WalConfig,
    protected: bool,
    records: Vec<Vec<u8>>,
    sync_every: u64,
}

fn case(seed: u64) -> Case {
    let mut rng = SplitMix64::split(seed, "wal case");
    let design = if rng.below(2) == 0 { WalDesign::Zwal } else { WalDesign::Conventional };
    let buffer_bytes = [4096u64, 8192, 16384, 65536][rng.below(4) as usize];
    let barrier_bytes = [0u64, 16384, 65536, 262144][rng.below(4) as usize];
    let config = WalConfig {
        design,
        zones: vec![2, 3, 4],
        buffer_bytes,
        queue_depth: 1 + rng.below(32) as u32,
        barrier_bytes,
        // Small reads sometimes, so recovery across read boundaries is exercised too.
        recovery_read_bytes: [0u64, 8192][rng.below(2) as usize],
    };
    let count = 20 + rng.below(120);
    let records = (0..count)
        .map(|index| {
            let largest = if rng.below(8) == 0 { 40_000 } else { 3000 };
            let len = 1 + rng.below(largest) as usize;
            (0..len).map(|byte| (index as usize * 31 + byte * 7) as u8 ^ (seed as u8)).collect()
        })
        .collect();
    Case { config, protected: rng.below(2) == 0, records, sync_every: 1 + rng.below(12) }
}

/// Runs the writer until `stop_at` (or to the end); returns the device, the time reached, and how many records
/// a completed `sync` had covered by then.
fn write(seed: u64, case: &Case, stop_at: u64) -> (Device<MemoryStore>, u64, usize) {
    let mut simulation = Simulation::new(device(case.protected), Some(seed));
    let synced = Rc::new(RefCell::new(0usize));
    let host = simulation.host();
    let (config, records, sync_every, synced_by_writer) =
        (case.config.clone(), case.records.clone(), case.sync_every, Rc::clone(&synced));
    simulation.spawn(async move {
        let mut wal = Wal::new(host, config).expect("configuration");
        for (index, record) in records.iter().enumerate() {
            if wal.append(record).await.is_err() {
                return;
            }
            if (index as u64 + 1).is_multiple_of(sync_every) || index + 1 == records.len() {
                if wal.sync().await.is_err() {
                    return;
                }
                *synced_by_writer.borrow_mut() = index + 1;
            }
        }
    });
    let reached = simulation.run_until(stop_at);
    let synced = *synced.borrow();
    (simulation.into_device(), reached, synced)
}

fn check(seed: u64) {
    let case = case(seed);
    let (_, end, all_synced) = write(seed, &case, u64::MAX);
    assert_eq!(all_synced, case.records.len(), "seed {seed}: the writer finishes when nothing fails");
    let mut rng = SplitMix64::split(seed, "power loss");
    let stop = rng.below(end + 1);
    let (mut device, reached, synced) = write(seed, &case, stop);
    device.power_loss(reached.max(stop)).expect("power loss");
    let mut recovery = Simulation::new(device, Some(seed ^ 1));
    let host = recovery.host();
    let config = case.config.clone();
    let recovered = Rc::new(RefCell::new(None));
    let out = Rc::clone(&recovered);
    recovery.spawn(async move {
        let mut wal = Wal::new(host, config).expect("configuration");
        *out.borrow_mut() = Some(wal.recover().await);
    });
    recovery.run();
    let recovered = recovered
        .borrow_mut()
        .take()
        .expect("recovery ran")
        .unwrap_or_else(|error| panic!("seed {seed}: recovery failed: {error}"));
    assert!(recovered.len() <= case.records.len(), "seed {seed}: more records than appended");
    assert!(
        recovered.len() >= synced,
        "seed {seed}: {} records recovered but {synced} were synced before the power loss at {stop} ns ({:?}, PLP {})",
        recovered.len(),
        case.config.design,
        case.protected
    );
    for (index, (got, want)) in recovered.iter().zip(&case.records).enumerate() {
        assert!(got == want, "seed {seed}: record {index} differs (a hole, reordering or corruption)");
    }
}

#[test]
fn the_contract_holds_for_500_seeds() {
    for seed in 0..500 {
        check(seed);
    }
}

#[test]
#[ignore = "a longer search: cargo test -p zonelab-host --test wal_contract -- --ignored"]
fn the_contract_holds_for_10000_seeds() {
    for seed in 0..10_000 {
        check(seed);
    }
}
