//! ZINC's epoch logic in deterministic scenarios: tokens release a held reset, priority bounds how long it waits,
//! resets are throttled to one per epoch's worth of writes, and user I/O is never starved.

use std::cell::RefCell;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_host::{Scheduled, SchedulerKind, ZincConfig};
use zonelab_runtime::{CommandQueue, HostExt, IoData, Simulation};
use zonelab_zns::{NullStore, ZoneSendAction};

const ZINC: ZincConfig = ZincConfig { epoch_ns: 1_000_000, tokens_per_epoch: 16, max_priority: 3 };

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

#[test]
fn without_writes_a_held_reset_waits_for_its_priority_bound() {
    let mut simulation = simulation();
    let queue = Scheduled::new(simulation.host(), SchedulerKind::Zinc(ZINC), 1280 << 10);
    simulation.spawn(reset(&queue, 16));
    simulation.run();
    assert_eq!(
        reset_submissions(&simulation),
        vec![4_000_000],
        "issued when its priority passes 3: at the 4th epoch boundary"
    );
    let counters = queue.counters();
    assert_eq!((counters.management_held, counters.released_by_priority, counters.released_by_tokens), (1, 1, 0));
}

#[test]
fn write_tokens_release_held_resets_one_per_epochs_worth_of_writes() {
    let mut simulation = simulation();
    let queue = Scheduled::new(simulation.host(), SchedulerKind::Zinc(ZINC), 1280 << 10);
    let writes_done = Rc::new(RefCell::new(Vec::new()));
    for writer in 0..4u64 {
        let (queue, done) = (queue.clone(), Rc::clone(&writes_done));
        simulation.spawn(async move {
            let zone_lbas = queue.geometry().zone_size_lba;
            for block in 0..400u64 {
                queue.write(writer * zone_lbas + block, IoData::Zeros(4096)).await.expect("write");
                done.borrow_mut().push(queue.now_ns());
            }
        });
    }
    for zone in 16..19 {
        simulation.spawn(reset(&queue, zone));
    }
    simulation.run();
    let counters = queue.counters();
    assert_eq!(counters.management_held, 3);
    assert_eq!(counters.released_by_tokens, 3, "busy writers release the resets by tokens: {counters:?}");
    let resets = reset_submissions(&simulation);
    assert_eq!(resets.len(), 3);
    let mut writes = writes_done.borrow().clone();
    writes.sort_unstable();
    for (index, &at) in resets.iter().enumerate() {
        let before = writes.iter().filter(|&&done| done <= at).count();
        assert!(before >= 16 * (index + 1) - 4, "reset {index} went after {before} writes; each needs 16 tokens");
    }
}

#[test]
fn a_held_reset_never_waits_past_its_bound_and_writes_keep_going() {
    let mut simulation = simulation();
    let queue = Scheduled::new(simulation.host(), SchedulerKind::Zinc(ZINC), 1280 << 10);
    // A slow writer: far fewer than 16 writes per epoch.
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
    let counters = queue.counters();
    let bound = (u64::from(ZINC.max_priority) + 1) * ZINC.epoch_ns;
    assert!(counters.held_ns <= 8 * bound, "held {} ns in all, at most {bound} each", counters.held_ns);
    let writes = simulation.with_device(|device| device.counters().writes);
    assert_eq!(writes, 40, "the writer finished");
    assert_eq!(queue.counters().management_held, 8);
}
