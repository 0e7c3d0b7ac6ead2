//! ZINC's published logic in deterministic scenarios: an idle device resets at once, a busy one lets one reset go
//! an epoch (newest first) once enough writes spent the tokens, holds bound the wait without writes, and user I/O
//! is never starved.

use std::cell::RefCell;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_host::{Scheduled, SchedulerKind, ZincConfig};
use zonelab_runtime::{CommandQueue, HostExt, IoData, Simulation};
use zonelab_zns::{NullStore, ZoneSendAction};

/// ZINC's published logic on a 1 ms epoch, with 16 write tokens: small enough for short scenarios.
const ZINC: ZincConfig = ZincConfig { epoch_ns: 1_000_000, tokens: 16, max_holds: 3, concurrency_threshold: 3 };

fn simulation() -> Simulation<NullStore> {
    let config = DeviceConfig::load(
        "zn540",
        &["namespace.zones=32".into(), "namespace.max-open=0".into(), "namespace.max-active=0".into()],
    )
    .expect("preset");
    let mut device = Device::new(&config, NullStore).expect("device");
    device.enable_trace();
    for zone in 16..32 {
        let cap = device.namespace().geometry().zone_cap_lba << 12;
        device.precondition(zone, cap).expect("full zones to reset");
    }
    Simulation::new(device, None)
}

/// Device times at which resets reached the device.
fn reset_submissions(simulation: &Simulation<NullStore>) -> Vec<u64> {
    simulation.with_device(|device| {
        device.trace().iter().filter(|event| event.opcode == 0x79).map(|event| event.submit_ns).collect()
    })
}

fn reset(
    queue: &Scheduled<zonelab_runtime::Host<NullStore>>,
    zone: u64,
) -> impl std::future::Future<Output = ()> + 'static {
    let queue = queue.clone();
    async move {
        let zone_lbas = queue.geometry().zone_size_lba;
        queue.zone_send(zone * zone_lbas, ZoneSendAction::Reset, false).await.expect("reset");
    }
}

/// Starting LBAs of the resets that reached the device, and when.
fn reset_commands(simulation: &Simulation<NullStore>) -> Vec<(u64, u64)> {
    simulation.with_device(|device| {
        device.trace().iter().filter(|event| event.opcode == 0x79).map(|event| (event.slba, event.submit_ns)).collect()
    })
}

#[test]
fn an_idle_device_resets_at_once() {
    let mut simulation = simulation();
    let queue = Scheduled::new(simulation.host(), SchedulerKind::Zinc(ZINC), 1280 << 10);
    simulation.spawn(reset(&queue, 16));
    simulation.run();
    assert_eq!(reset_submissions(&simulation), vec![0], "fewer than 3 write units in flight: no hold");
    let counters = queue.counters();
    assert_eq!((counters.management_held, counters.released_few_in_flight), (1, 1));
}

#[test]
fn without_tokens_a_held_reset_waits_its_most_holds() {
    // A threshold of 0 never counts the writes in flight as few, and no writes spend tokens: the reset is held
    // at the ends of epochs 1, 2 and 3 and goes at the 4th.
    let mut simulation = simulation();
    let zinc = ZincConfig { concurrency_threshold: 0, ..ZINC };
    let queue = Scheduled::new(simulation.host(), SchedulerKind::Zinc(zinc), 1280 << 10);
    simulation.spawn(reset(&queue, 16));
    simulation.run();
    assert_eq!(reset_submissions(&simulation), vec![4_000_000]);
    let counters = queue.counters();
    assert_eq!((counters.management_held, counters.released_by_holds, counters.released_by_tokens), (1, 1, 0));
}

#[test]
fn busy_writers_let_one_reset_go_an_epoch_newest_first() {
    let mut simulation = simulation();
    let queue = Scheduled::new(simulation.host(), SchedulerKind::Zinc(ZINC), 1280 << 10);
    let running = Rc::new(RefCell::new(true));
    for writer in 0..4u64 {
        let (queue, running) = (queue.clone(), Rc::clone(&running));
        simulation.spawn(async move {
            let zone_lbas = queue.geometry().zone_size_lba;
            let mut block = 0;
            while *running.borrow() {
                queue.write(writer * zone_lbas + block, IoData::Zeros(8192)).await.expect("write");
                block += 2;
            }
        });
    }
    let resets_left = Rc::new(RefCell::new(3));
    for zone in 16..19 {
        let (queue, running, left) = (queue.clone(), Rc::clone(&running), Rc::clone(&resets_left));
        simulation.spawn(async move {
            // After the writers have writes in flight.
            queue.sleep(10_000).await;
            reset(&queue, zone).await;
            *left.borrow_mut() -= 1;
            if *left.borrow() == 0 {
                *running.borrow_mut() = false;
            }
        });
    }
    simulation.run();
    let counters = queue.counters();
    assert_eq!((counters.management_held, counters.released_by_tokens), (3, 3), "{counters:?}");
    let resets = reset_commands(&simulation);
    let zone_lbas = queue.geometry().zone_size_lba;
    let zones: Vec<u64> = resets.iter().map(|(slba, _)| slba / zone_lbas).collect();
    assert_eq!(zones, vec![18, 17, 16], "the queue is taken from its head, where the newest is");
    let epochs: Vec<u64> = resets.iter().map(|(_, at)| at / ZINC.epoch_ns).collect();
    assert_eq!(epochs, vec![1, 2, 3], "one reset at each epoch's end: {resets:?}");
}

#[test]
fn held_resets_all_go_and_writes_keep_going() {
    let mut simulation = simulation();
    let zinc = ZincConfig { concurrency_threshold: 0, ..ZINC };
    let queue = Scheduled::new(simulation.host(), SchedulerKind::Zinc(zinc), 1280 << 10);
    // A slow writer: far fewer than 16 units an epoch.
    let slow = queue.clone();
    simulation.spawn(async move {
        for block in 0..40u64 {
            slow.write(block, IoData::Zeros(4096)).await.expect("write");
            slow.sleep(200_000).await;
        }
    });
    for zone in 16..24 {
        let queue = queue.clone();
        simulation.spawn(async move {
            queue.sleep((zone - 16) * 700_000).await;
            reset(&queue, zone).await;
        });
    }
    simulation.run();
    assert_eq!(simulation.unfinished_tasks(), 0);
    let writes = simulation.with_device(|device| device.counters().writes);
    assert_eq!(writes, 40, "the writer finished");
    let counters = queue.counters();
    // Tokens add up across epochs until a command goes, so even a slow writer's lets some go.
    assert_eq!(counters.management_held, 8);
    assert_eq!(counters.released_by_holds + counters.released_by_tokens, 8, "{counters:?}");
    assert!(counters.released_by_holds > counters.released_by_tokens, "{counters:?}");
}
