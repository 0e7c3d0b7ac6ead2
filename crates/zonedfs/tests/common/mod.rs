//! A small zoned device and a runner for zonedfs tests.
#![allow(dead_code)]

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_runtime::{Host, Simulation};
use zonelab_zns::MemoryStore;
use zonelab_zonedfs::{FsOptions, ZonedFs};

pub type Fs = ZonedFs<Host<MemoryStore>>;

/// `zones` zones of 1 MiB, 6 active at most, on the zn540 timing model.
pub fn simulation(zones: u32) -> Simulation<MemoryStore> {
    let overrides = [
        format!("namespace.zones={zones}"),
        "namespace.zone-size=\"1MiB\"".to_string(),
        "namespace.zone-cap=\"1MiB\"".to_string(),
        "namespace.max-active=6".to_string(),
        "namespace.max-open=6".to_string(),
    ];
    let config = DeviceConfig::load("zn540", &overrides).expect("preset");
    let geometry = config.namespace.validate().expect("geometry");
    let device = Device::new(&config, MemoryStore::new(geometry.nsze_lba << geometry.lba_shift)).expect("device");
    Simulation::new(device, Some(1))
}

/// Formats the device and runs `work` on the file system; returns what it returns.
pub fn on_new_fs<T: 'static, F: Future<Output = T> + 'static>(
    simulation: &mut Simulation<MemoryStore>,
    options: FsOptions,
    work: impl FnOnce(Fs) -> F + 'static,
) -> T {
    let host = simulation.host();
    let out = Rc::new(RefCell::new(None));
    let result = Rc::clone(&out);
    simulation.spawn(async move {
        let fs = ZonedFs::format(host, options).await.expect("format");
        *result.borrow_mut() = Some(work(fs).await);
    });
    simulation.run();
    let done = out.borrow_mut().take();
    done.expect("the work finished")
}
