//! A real-time device whose thread cannot run when its completions are due delivers them late, and says so: the
//! late share rises past the warning bound, the thread's clock sees the time it lost, and the summary names
//! where the thread ran. The device thread is pinned to one CPU beside busy threads pinned to the same CPU, so
//! it gets its turn only as the kernel's scheduler shares that CPU out, on a quiet machine as on a busy one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use zonelab_device::{DeviceBuilder, DeviceSpec};
use zonelab_runtime::placement::{allowed_cpus, pin_this_thread};
use zonelab_runtime::{block_on, CommandQueue, HostExt, IoData, Placement, RealTime, LATE_SHARE_WARNING};

#[test]
fn a_device_thread_sharing_its_cpu_with_busy_threads_runs_late_and_says_so() {
    let cpu = allowed_cpus()[0];
    let placement = Placement { cpu: Some(cpu), ..Placement::default() };
    let builder = DeviceBuilder::new(DeviceSpec::parse("preset:zn540,zones=4"));
    let realtime = RealTime::start_placed(builder, placement).expect("real-time device pinned to an allowed CPU");
    let host = realtime.host();
    let zone = host.geometry().zone_start_lba(0);
    block_on(host.append(zone, IoData::Zeros(128 << 10))).expect("data to read");

    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..3)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                pin_this_thread(cpu).expect("the same CPU");
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    // QD 1 reads of about 80 us each: the busy threads hold the CPU for whole time slices of milliseconds while
    // reads fall due (on this test's 2-core machine: 99.7 % late, about 4 ms each at p50, and 1.7 s of 1.7 s
    // stalled).
    for read in 0..300u64 {
        block_on(host.read_discard(zone + read % 32, 1)).expect("read");
    }
    stop.store(true, Ordering::Relaxed);
    for thread in busy {
        thread.join().expect("busy thread");
    }
    let pacing = realtime.stop().pacing.summary();
    assert!(pacing.late_share > LATE_SHARE_WARNING, "late share past the warning bound: {pacing:?}");
    assert!(pacing.error_max_ns > 1_000_000, "a completion a time slice late: {pacing:?}");
    assert!(pacing.stalled_ns > 0 && pacing.stalls > 0, "the thread saw the time it lost: {pacing:?}");
    assert!(pacing.placement.starts_with(&format!("pinned to CPU {cpu}")), "{pacing:?}");
    let warning = pacing.warning().expect("a warning");
    assert!(warning.contains("ran late") && warning.contains("device-cpu=N"), "{warning}");
}
