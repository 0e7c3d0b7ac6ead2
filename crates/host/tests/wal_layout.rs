//! How the WAL lays entries out: splitting at ZASL and at zone capacity, barriers, zone roll-over, a full log,
//! a log that asks for more zones, and delete.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_host::{Wal, WalConfig, WalDesign, WalError, WalStats};
use zonelab_runtime::{Host, Simulation};
use zonelab_zns::MemoryStore;

/// Runs `body` against a fresh small-zone zn540 (zones of 768 KiB capacity, ZASL 128 KiB) and returns its result.
fn with_wal<T: 'static>(
    config: WalConfig,
    body: impl FnOnce(Wal<Host<MemoryStore>>) -> std::pin::Pin<Box<dyn Future<Output = T>>> + 'static,
) -> T {
    let overrides =
        ["namespace.zones=8", "namespace.zone-size=\"1MiB\"", "namespace.zone-cap=\"768KiB\""].map(String::from);
    let preset = DeviceConfig::load("zn540", &overrides).expect("preset");
    let geometry = preset.namespace.validate().expect("geometry");
    let device = Device::new(&preset, MemoryStore::new(geometry.nsze_lba << geometry.lba_shift)).expect("device");
    let mut simulation = Simulation::new(device, Some(3));
    let wal = Wal::new(simulation.host(), config).expect("configuration");
    let out = Rc::new(RefCell::new(None));
    let sink = Rc::clone(&out);
    simulation.spawn(async move {
        let result = body(wal).await;
        *sink.borrow_mut() = Some(result);
    });
    simulation.run();
    let result = out.borrow_mut().take().expect("the task finished");
    result
}

fn zwal(buffer_bytes: u64, barrier_bytes: u64) -> WalConfig {
    WalConfig {
        design: WalDesign::Zwal,
        zones: vec![1, 2, 3],
        buffer_bytes,
        queue_depth: 16,
        barrier_bytes,
        recovery_read_bytes: 0,
    }
}

type Outcome = (Result<Vec<Vec<u8>>, WalError>, WalStats);

fn write_and_recover(config: WalConfig, records: Vec<Vec<u8>>) -> Outcome {
    with_wal(config, move |mut wal| {
        Box::pin(async move {
            for record in &records {
                if let Err(error) = wal.append(record).await {
                    return (Err(error), wal.stats().clone());
                }
            }
            if let Err(error) = wal.sync().await {
                return (Err(error), wal.stats().clone());
            }
            let stats = wal.stats().clone();
            (wal.recover().await, stats)
        })
    })
}

#[test]
fn entries_larger_than_zasl_are_split() {
    let record = vec![7u8; 500_000];
    let (recovered, stats) = write_and_recover(zwal(1 << 20, 0), vec![record.clone()]);
    assert_eq!(recovered.expect("recovers"), vec![record]);
    assert!(stats.entries >= 4, "a 500 KB record needs four 128 KiB entries at least: {stats:?}");
    assert!(stats.flash_bytes / stats.entries <= 128 << 10);
}

#[test]
fn a_full_zone_rolls_to_the_next_and_entries_never_straddle_it() {
    let records: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 30_000]).collect();
    for design in [WalDesign::Zwal, WalDesign::Conventional] {
        let config = WalConfig { design, ..zwal(64 << 10, 0) };
        let (recovered, stats) = write_and_recover(config, records.clone());
        assert_eq!(recovered.expect("recovers"), records, "{design:?}");
        assert_eq!(stats.zone_rolls, 1, "{design:?}: 1.2 MB over zones of 768 KiB: {stats:?}");
    }
}

#[test]
fn barriers_come_every_barrier_bytes() {
    let records: Vec<Vec<u8>> = (0..64u8).map(|i| vec![i; 4000]).collect();
    let (recovered, stats) = write_and_recover(zwal(8192, 65536), records.clone());
    assert_eq!(recovered.expect("recovers"), records);
    let expected = stats.flash_bytes / 65536;
    assert!(stats.barriers >= expected.saturating_sub(1) && stats.barriers <= expected, "{stats:?}");
}

#[test]
fn a_log_larger_than_its_zones_is_full() {
    let records: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 30_000]).collect();
    let (recovered, _) = write_and_recover(zwal(64 << 10, 0), records);
    assert_eq!(recovered, Err(WalError::Full(3)));
}

#[test]
fn a_zone_source_gives_a_full_log_more_zones() {
    let records: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 30_000]).collect();
    for design in [WalDesign::Zwal, WalDesign::Conventional] {
        let asked = Rc::new(RefCell::new(Vec::new()));
        let (given, log) = (Rc::clone(&asked), records.clone());
        let config = WalConfig { design, zones: vec![1], ..zwal(64 << 10, 0) };
        let (recovered, zones) = with_wal(config, move |wal| {
            // Zones 5, 6, 7, then none: 3 MB of records need four zones of 768 KiB.
            let mut next = 5u32;
            let mut wal = wal.with_zone_source(Box::new(move || {
                let zone = (next < 8).then_some(next);
                next += 1;
                given.borrow_mut().extend(zone);
                Box::pin(async move { zone })
            }));
            Box::pin(async move {
                for record in &log {
                    wal.append(record).await.expect("append");
                }
                wal.sync().await.expect("sync");
                let zones = wal.config().zones.clone();
                (wal.recover().await.expect("recover"), zones)
            })
        });
        assert_eq!(recovered, records, "{design:?}");
        assert_eq!(zones, vec![1, 5, 6, 7], "{design:?}");
        assert_eq!(*asked.borrow(), vec![5, 6, 7], "{design:?}: asked once per roll");
    }
}

#[test]
fn delete_starts_a_new_log() {
    let recovered = with_wal(zwal(16 << 10, 0), |mut wal| {
        Box::pin(async move {
            for i in 0..10u8 {
                wal.append(&[i; 5000]).await.expect("append");
            }
            wal.sync().await.expect("sync");
            wal.delete().await.expect("delete");
            assert_eq!(wal.append(b"fresh").await.expect("append"), 0, "sequence numbers restart");
            wal.sync().await.expect("sync");
            wal.recover().await.expect("recover")
        })
    });
    assert_eq!(recovered, vec![b"fresh".to_vec()]);
}

#[test]
fn bad_configurations_are_refused() {
    let preset = DeviceConfig::load("instant", &[]).expect("preset");
    let device = Device::new(&preset, MemoryStore::new(16 << 24)).expect("device");
    let simulation = Simulation::new(device, None);
    let refuse = |config: WalConfig| Wal::new(simulation.host(), config).err().expect("refused").to_string();
    assert!(refuse(WalConfig { zones: vec![99], ..zwal(4096, 0) }).contains("zones [99]"));
    assert!(refuse(zwal(100, 0)).contains("holds no"));
    assert!(refuse(WalConfig { queue_depth: 0, ..zwal(4096, 0) }).contains("queue depth"));
    assert!(refuse(zwal(4096, 100)).contains("barrier"));
}
