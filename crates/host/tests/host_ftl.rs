//! The block-level host FTL over a zoned namespace: every read returns the last data written or zeros after a
//! deallocate, with writers in flight together and garbage collection running under them; the zoned namespace
//! sees only sequential writes and resets, and the host counts the amplification the device no longer has.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use zonelab_device::rng::SplitMix64;
use zonelab_device::{Device, DeviceConfig};
use zonelab_host::{host_ftl_geometry, HostFtl, Scheduled, SchedulerKind};
use zonelab_runtime::{CommandQueue, HostExt, IoData, Simulation};
use zonelab_zns::{MemoryStore, NamespaceKind, Status, ZoneSendAction};

const WRITERS: u64 = 4;

/// 32 zones of 1 MiB (256 blocks of 4 KiB) under mq-deadline, kept in memory.
fn simulation() -> Simulation<MemoryStore> {
    let overrides: Vec<String> =
        ["namespace.zones=32", "namespace.zone-size=\"1MiB\"", "namespace.zone-cap=\"1MiB\"", "namespace.max-open=4"]
            .iter()
            .map(|text| text.to_string())
            .collect();
    let config = DeviceConfig::load("zn540", &overrides).expect("preset");
    Simulation::new(Device::new(&config, MemoryStore::new(32 << 20)).expect("device"), None)
}

fn block(lba: u64, version: u32) -> Vec<u8> {
    let mut data = vec![0u8; 4096];
    data[..8].copy_from_slice(&lba.to_le_bytes());
    data[8..12].copy_from_slice(&version.to_le_bytes());
    data
}

#[test]
fn reads_return_the_last_write_while_garbage_collection_moves_blocks() {
    let mut simulation = simulation();
    let scheduled = Scheduled::new(simulation.host(), SchedulerKind::MqDeadline, 1280 << 10);
    let ftl = HostFtl::new(scheduled, 0.3).expect("fits");
    let exported = ftl.geometry();
    assert_eq!(exported.kind, NamespaceKind::Conventional);
    let blocks = exported.nsze_lba;
    assert_eq!(blocks, (32 * 256) * 10 / 13, "the zones' capacity over 1.3");
    let failures = Rc::new(RefCell::new(Vec::new()));
    // Each writer owns the blocks congruent to its index, so that its own model is exact with all in flight.
    let models: Vec<Rc<RefCell<BTreeMap<u64, u32>>>> = (0..WRITERS).map(|_| Rc::default()).collect();
    for writer in 0..WRITERS {
        let (ftl, failures, model) = (ftl.clone(), Rc::clone(&failures), Rc::clone(&models[writer as usize]));
        simulation.spawn(async move {
            let mut rng = SplitMix64::split(11, &format!("writer {writer}"));
            let owned = blocks / WRITERS;
            // Six times the exported space over all writers: many collections.
            for step in 0..(6 * owned) as u32 {
                let lba = rng.below(owned) * WRITERS + writer;
                let action = rng.below(20);
                let result = if action == 0 {
                    model.borrow_mut().remove(&lba);
                    ftl.deallocate(lba, 1).await
                } else {
                    model.borrow_mut().insert(lba, step);
                    ftl.write(lba, IoData::Bytes(block(lba, step))).await
                };
                if let Err(status) = result {
                    failures.borrow_mut().push(format!("step {step} on {lba}: {status}"));
                    return;
                }
                // Read back one block of this writer's: the newest data, or zeros.
                let probe = rng.below(owned) * WRITERS + writer;
                let expected = model.borrow().get(&probe).map_or(vec![0u8; 4096], |&version| block(probe, version));
                match ftl.read(probe, 1).await {
                    Ok(data) if data == expected => {}
                    other => {
                        failures
                            .borrow_mut()
                            .push(format!("read of {probe} after step {step}: {:?}", other.map(|d| d[..12].to_vec())));
                        return;
                    }
                }
            }
        });
    }
    simulation.run();
    assert_eq!(*failures.borrow(), Vec::<String>::new());
    // Every block at the end, as the models say.
    let checked = Rc::new(RefCell::new(0u64));
    {
        let (ftl, models, checked) = (ftl.clone(), models.clone(), Rc::clone(&checked));
        simulation.spawn(async move {
            for lba in 0..blocks / WRITERS * WRITERS {
                let model = models[(lba % WRITERS) as usize].borrow().get(&lba).copied();
                let data = ftl.read(lba, 1).await.expect("read");
                assert_eq!(data, model.map_or(vec![0u8; 4096], |version| block(lba, version)), "block {lba}");
                *checked.borrow_mut() += 1;
            }
        });
    }
    simulation.run();
    assert_eq!(*checked.borrow(), blocks / WRITERS * WRITERS);
    let counters = ftl.counters();
    assert!(counters.gc_zones_reset > 10 && counters.gc_blocks_moved > 0, "{counters:?}");
    assert!(counters.write_amplification() > 1.2, "{counters:?}");
    // The device wrote exactly what the host FTL wrote, sequentially, and reset what it collected.
    let device = simulation.with_device(|device| device.stats());
    assert_eq!(device.counters.bytes_written, (counters.host_blocks_written + counters.gc_blocks_moved) * 4096);
    assert_eq!(device.counters.resets, counters.gc_zones_reset);
    assert_eq!(device.counters.errors, 0, "no write off a write pointer, no reset of a zone in use");
}

#[test]
fn bad_commands_and_shapes_are_refused() {
    let mut simulation = simulation();
    let zoned = simulation.host().geometry();
    let ftl = HostFtl::new(simulation.host(), 0.3).expect("fits");
    assert!(host_ftl_geometry(&zoned, 0.05).is_err(), "no room");
    let end = ftl.geometry().nsze_lba;
    let outcomes = Rc::new(RefCell::new(Vec::new()));
    let (queue, seen) = (ftl.clone(), Rc::clone(&outcomes));
    simulation.spawn(async move {
        let results = [
            queue.write(end, IoData::Zeros(4096)).await.err(),
            queue.read(end - 1, 2).await.err(),
            queue.zone_send(0, ZoneSendAction::Reset, true).await.err(),
            queue.append(0, IoData::Zeros(4096)).await.err(),
            queue.write(0, IoData::Zeros(1000)).await.err(),
            queue.read(7, 1).await.err(),
        ];
        seen.borrow_mut().extend(results);
    });
    simulation.run();
    assert_eq!(
        *outcomes.borrow(),
        [
            Some(Status::LbaOutOfRange),
            Some(Status::LbaOutOfRange),
            Some(Status::InvalidOpcode),
            Some(Status::InvalidOpcode),
            Some(Status::InvalidField),
            None
        ]
    );
}

/// Under mq-deadline a write waits in the scheduler while a read goes straight to the device: a read of a block
/// whose write is in flight waits for it, and so returns the new data, not the old.
#[test]
fn a_read_waits_for_the_write_in_flight_to_its_block() {
    let mut simulation = simulation();
    let ftl =
        HostFtl::new(Scheduled::new(simulation.host(), SchedulerKind::MqDeadline, 1280 << 10), 0.3).expect("fits");
    let writer = ftl.clone();
    simulation.spawn(async move { writer.write(5, IoData::Bytes(block(5, 1))).await.expect("write") });
    let seen = Rc::new(RefCell::new(None));
    let (reader, read) = (ftl.clone(), Rc::clone(&seen));
    simulation.spawn(async move { *read.borrow_mut() = Some(reader.read(5, 1).await.expect("read")) });
    simulation.run();
    assert_eq!(seen.borrow().as_deref(), Some(&block(5, 1)[..]));
}
