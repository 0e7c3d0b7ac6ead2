//! A reset completes once the erases it waits for are done; reads that suspend those erases make the dies work
//! longer, so the reset completes later than it would on a quiet device, and both runtimes deliver it then.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use zonelab_device::{DeviceBuilder, DeviceSpec};
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::sync::join_all;
use zonelab_runtime::{block_on, CommandQueue, HostExt, RealTime, Simulation};
use zonelab_zns::ZoneSendAction;

/// A zn540 device of 4 zones whose zones 2 and 3 are full, with `overrides` of the preset.
fn builder(overrides: &str) -> DeviceBuilder {
    DeviceBuilder::new(DeviceSpec::parse(&format!("preset:zn540,zones=4{overrides}"))).full_tail_zones(2)
}

/// A reset of full zone 2, with `readers` tasks that read random 4 KiB blocks of zone 3 (on the same dies) one
/// after another until the reset completes, on `queue`; returns the reset's latency as the runtime's clock sees
/// it.
async fn reset_beside_readers<Q: CommandQueue + Clone + 'static>(queue: Q, readers: u64) -> u64 {
    let geometry = queue.geometry();
    let start = queue.now_ns();
    let done = Rc::new(std::cell::Cell::new(false));
    let (resetter, reset_done) = (queue.clone(), Rc::clone(&done));
    let reset: Pin<Box<dyn Future<Output = u64>>> = Box::pin(async move {
        resetter.zone_send(geometry.zone_start_lba(2), ZoneSendAction::Reset, false).await.expect("reset");
        reset_done.set(true);
        resetter.now_ns() - start
    });
    let readers = (0..readers).map(|reader| -> Pin<Box<dyn Future<Output = u64>>> {
        let (queue, done) = (queue.clone(), Rc::clone(&done));
        Box::pin(async move {
            let mut rng = SplitMix64::new(reader);
            while !done.get() {
                let block = rng.below(geometry.zone_cap_lba / 8);
                queue.read_discard(geometry.zone_start_lba(3) + block * 8, 8).await.expect("read");
            }
            0
        })
    });
    join_all(std::iter::once(reset).chain(readers).collect()).await[0]
}

/// The reset's latency in virtual time, beside `readers` readers.
fn simulated(overrides: &str, readers: u64) -> u64 {
    let mut simulation = Simulation::over(builder(overrides).build().expect("device"), None);
    let latency = Rc::new(std::cell::Cell::new(0));
    let (host, seen) = (simulation.host(), Rc::clone(&latency));
    simulation.spawn(async move { seen.set(reset_beside_readers(host, readers).await) });
    simulation.run();
    latency.get()
}

#[test]
fn reads_that_wait_for_a_resets_erases_do_not_delay_it() {
    let no_suspend = ",media.nand.suspend-latency-us=0";
    assert_eq!(simulated(no_suspend, 32), simulated(no_suspend, 0));
}

/// Virtual time shows the reads' suspensions move the reset well past a quiet one; the real-time runtime
/// delivers it no earlier than the time they moved it to (a margin below virtual time's, as a loaded machine
/// may run fewer reads during the erases).
#[test]
fn in_both_runtimes_a_reset_beside_reads_waits_for_its_lengthened_erases() {
    let quiet = simulated("", 0);
    let virtual_time = simulated("", 32);
    assert!(virtual_time > quiet + 2_000_000, "virtual time: {virtual_time} ns beside reads, {quiet} ns quiet");

    let realtime = RealTime::start(builder("")).expect("real-time device");
    let real_time = block_on(reset_beside_readers(realtime.host(), 32));
    realtime.stop();
    assert!(real_time > quiet + 200_000, "real time: {real_time} ns beside reads, {quiet} ns quiet");
}
