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

/// Three 4 KiB reads of zone 3 submitted together: two on the die of the zone's first program unit (the second
/// waits for the first's sense and transfer off the die), then one on the next die, whose data is ready first.
/// Returns each read's latency as the runtime's clock sees it, in submission order.
async fn three_reads<Q: CommandQueue + Clone + 'static>(queue: Q) -> Vec<u64> {
    let geometry = queue.geometry();
    let start = queue.now_ns();
    let zone = geometry.zone_start_lba(3);
    // 4 KiB blocks: a program unit is 96 KiB (24 blocks) on one die.
    let blocks = [zone + 16, zone + 20, zone + 24];
    let reads = blocks.map(|lba| -> Pin<Box<dyn Future<Output = u64>>> {
        let queue = queue.clone();
        Box::pin(async move {
            queue.read_discard(lba, 1).await.expect("read");
            queue.now_ns() - start
        })
    });
    join_all(reads.into_iter().collect()).await
}

const TRANSFER_NS: u64 = 390_625;

#[test]
fn the_read_whose_data_is_ready_first_leaves_first_in_both_runtimes() {
    let mut simulation = Simulation::over(builder().build().expect("device"), None);
    let latencies = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let (host, seen) = (simulation.host(), std::rc::Rc::clone(&latencies));
    simulation.spawn(async move { *seen.borrow_mut() = three_reads(host).await });
    simulation.run();
    let virtual_time = latencies.borrow().clone();
    // The third leaves first, then the first, then the second, one whole transfer apart: sent in submission
    // order, the third would have come last.
    assert!(virtual_time[2] < virtual_time[0] && virtual_time[0] < virtual_time[1], "virtual time: {virtual_time:?}");
    assert!(virtual_time[0] - virtual_time[2] >= TRANSFER_NS, "virtual time: {virtual_time:?}");
    assert!(virtual_time[1] - virtual_time[0] >= TRANSFER_NS, "virtual time: {virtual_time:?}");

    let realtime = RealTime::start(builder()).expect("real-time device");
    let real_time = block_on(three_reads(realtime.host()));
    realtime.stop();
    // A loaded machine may submit the three apart: the margins leave it 100 us.
    assert!(real_time[2] < real_time[0] && real_time[0] < real_time[1], "real time: {real_time:?}");
    assert!(real_time[1] - real_time[2] >= 2 * TRANSFER_NS - 100_000, "real time: {real_time:?}");
}
