//! The reset load (ZINC's "concurrent resets"): at a set rate, one at a time, of the full zones of a pool that
//! the device builder filled, through the scheduler in front of the device; it stops when told to.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath, StoreChoice};
use zonelab_host::{run_reset_load, ResetLoadStats, Scheduled, SchedulerKind};
use zonelab_runtime::{CommandQueue, HostExt, Simulation};
use zonelab_zns::{ReportFilter, ZoneState};

#[test]
fn resets_run_at_their_rate_from_a_filled_pool_and_stop_when_told() {
    let built = DeviceBuilder::new(DeviceSpec::parse("preset:zn540,zones=64"))
        .host(HostPath::Kernel)
        .store(StoreChoice::Null)
        .full_tail_zones(40)
        .build()
        .expect("device");
    let mut simulation = Simulation::over(built, None);
    let host = simulation.host();
    let stats = Rc::new(RefCell::new(ResetLoadStats::default()));
    let running = Rc::new(Cell::new(true));
    let (load_stats, load_running) = (Rc::clone(&stats), Rc::clone(&running));
    let queue = Scheduled::new(host.clone(), SchedulerKind::MqDeadline, 1280 << 10);
    simulation.spawn(async move {
        run_reset_load(queue, 24..64, 20.0, move || load_running.get(), load_stats).await;
    });
    let stopper = Rc::clone(&running);
    let timer = host.clone();
    simulation.spawn(async move {
        timer.sleep(1_000_000_000).await;
        stopper.set(false);
    });
    simulation.run();
    let stats = stats.borrow().clone();
    // 20 a second for one second: 20 or 21 (the one under way when told to stop finishes).
    assert!((20..=21).contains(&stats.resets), "{stats:?}");
    assert!(!stats.pool_exhausted);
    // A reset of a full ZN540 zone erases its blocks: milliseconds, not the microseconds of an empty one.
    assert!(stats.latency_ms_mean() > 5.0, "{stats:?}");
    let states = Rc::new(RefCell::new(Vec::new()));
    let out = Rc::clone(&states);
    simulation.spawn(async move {
        let report = host.report_zones(0, ReportFilter::All, 64).await.expect("report");
        *out.borrow_mut() = report.zones.iter().map(|zone| zone.state).collect();
    });
    simulation.run();
    let states = states.borrow();
    assert!(states[..24].iter().all(|state| *state == ZoneState::Empty), "the builder fills only the tail");
    let reset = stats.resets as usize;
    assert!(states[24..24 + reset].iter().all(|state| *state == ZoneState::Empty), "the pool is reset in order");
    assert!(states[24 + reset..].iter().all(|state| *state == ZoneState::Full));
}
