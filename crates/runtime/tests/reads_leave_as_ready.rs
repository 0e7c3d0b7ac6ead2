//! Read data leaves the device in the order it comes ready, not in the order its commands came: a read whose die
//! was free overtakes one queued on a busy die, and the overtaken read completes later than the device first
//! said. Both runtimes deliver it then.

use std::future::Future;
use std::pin::Pin;

use zonelab_device::{DeviceBuilder, DeviceSpec};
use zonelab_runtime::sync::join_all;
use zonelab_runtime::{block_on, CommandQueue, HostExt, RealTime, Simulation};

/// A zn540 of 4 zones whose last zone is full, with a way out to the host so narrow (10 MiB/s: 391 us for
/// 4 KiB) that it is the only queue that matters.
fn builder() -> DeviceBuilder {
    let spec = DeviceSpec::parse("preset:zn540,zones=4,media.controller.read-mib-per-s=10");
    DeviceBuilder::new(spec).full_tail_zones(1)
}

/// Six 4 KiB reads of zone 3 submitted together: five on one die, each waiting for the one before to be sensed
/// and moved off the die, then one on the next die, whose data is ready first (about 60 us in, where the fifth on
/// the busy die has its data about 390 us in). Returns each read's latency as the runtime's clock sees it, in
/// submission order.
async fn six_reads<Q: CommandQueue + Clone + 'static>(queue: Q) -> Vec<u64> {
    let geometry = queue.geometry();
    let start = queue.now_ns();
    let zone = geometry.zone_start_lba(3);
    // A program unit is 96 KiB (24 blocks of 4 KiB) on one die, and a zone's units go round its 32 dies: units 0,
    // 32, 64, 96 and 128 share a die (their upper pages, block 16 of each, read in 66 us), unit 1 is on the next
    // (its lower page, block 0, in 35 us).
    let busy_die = (0..5).map(|turn| zone + turn * 32 * 24 + 16);
    let blocks: Vec<u64> = busy_die.chain([zone + 24]).collect();
    let reads = blocks.into_iter().map(|lba| -> Pin<Box<dyn Future<Output = u64>>> {
        let queue = queue.clone();
        Box::pin(async move {
            queue.read_discard(lba, 1).await.expect("read");
            queue.now_ns() - start
        })
    });
    join_all(reads.collect()).await
}

const TRANSFER_NS: u64 = 390_625;

#[test]
fn the_read_whose_data_is_ready_first_leaves_first_in_both_runtimes() {
    let mut simulation = Simulation::over(builder().build().expect("device"), None);
    let latencies = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let (host, seen) = (simulation.host(), std::rc::Rc::clone(&latencies));
    simulation.spawn(async move { *seen.borrow_mut() = six_reads(host).await });
    simulation.run();
    let virtual_time = latencies.borrow().clone();
    // The last submitted leaves first, then the five of the busy die in turn, a whole transfer apart: sent in
    // submission order, it would have come last.
    let order = [5, 0, 1, 2, 3, 4];
    for pair in order.windows(2) {
        let (earlier, later) = (virtual_time[pair[0]], virtual_time[pair[1]]);
        assert!(later >= earlier + TRANSFER_NS, "virtual time: {virtual_time:?}");
    }

    // In real time the host submits the six a few microseconds apart, or more on a loaded machine; as long as
    // the sixth's data is ready before the fifth's (300 us of slack), the fifth leaves after six transfers. The
    // device first gave it the end of five (the sixth was not booked yet): it is delivered no earlier than its
    // moved time.
    let realtime = RealTime::start(builder()).expect("real-time device");
    let real_time = block_on(six_reads(realtime.host()));
    realtime.stop();
    assert!(real_time[4] >= 6 * TRANSFER_NS, "real time: {real_time:?}");
}
