//! A small zoned device and a runner for logfs tests.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_logfs::LogFsOptions;
use zonelab_runtime::{Host, Simulation};
use zonelab_zns::MemoryStore;

/// `zones` zones of 256 KiB (64 blocks of 4 KiB) on the zn540 timing model, 12 active.
pub fn device(zones: u32, protected: bool) -> Device<MemoryStore> {
    let overrides = [
        format!("namespace.zones={zones}"),
        "namespace.zone-size=\"256KiB\"".to_string(),
        "namespace.zone-cap=\"256KiB\"".to_string(),
        "namespace.max-active=12".to_string(),
        "namespace.max-open=12".to_string(),
        format!("power-loss-protection={protected}"),
    ];
    let config = DeviceConfig::load("zn540", &overrides).expect("preset");
    let geometry = config.namespace.validate().expect("geometry");
    Device::new(&config, MemoryStore::new(geometry.nsze_lba << geometry.lba_shift)).expect("device")
}

/// Small caches and limits, so that write-back, eviction and cleaning happen in small runs.
pub fn options() -> LogFsOptions {
    LogFsOptions { cache_bytes: 64 << 10, dirty_bytes: 256 << 10, ..LogFsOptions::default() }
}

/// Runs `task` on `device` to the end; returns its output and the device.
pub fn run<T: 'static, F: Future<Output = T> + 'static>(
    device: Device<MemoryStore>,
    seed: u64,
    task: impl FnOnce(Host<MemoryStore>) -> F,
) -> (T, Device<MemoryStore>) {
    let mut simulation = Simulation::new(device, Some(seed));
    let out = Rc::new(RefCell::new(None));
    let sink = Rc::clone(&out);
    let future = task(simulation.host());
    simulation.spawn(async move {
        *sink.borrow_mut() = Some(future.await);
    });
    simulation.run();
    let value = out.borrow_mut().take().expect("the task finished");
    (value, simulation.into_device())
}

/// Seeded content: what write `op` puts at byte `at` of a file.
pub fn byte(op: usize, at: u64) -> u8 {
    (op as u64 * 131 + at * 7 + 1) as u8
}

pub fn bytes(op: usize, offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(|at| byte(op, at)).collect()
}
