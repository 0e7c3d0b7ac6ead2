//! A finish pads its zone through the write budget, which it shares equally with each zone the host writes:
//! writers that keep the budget busy make the padding, and so the finish, take as many times as long as there
//! are streams, and the simulation delivers the finish at its later time.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use zonelab_device::{DeviceBuilder, DeviceSpec};
use zonelab_runtime::sync::join_all;
use zonelab_runtime::{CommandQueue, HostExt, IoData, Simulation};
use zonelab_zns::ZoneSendAction;

/// The latency of a finish of zone 0 (holding 4 KiB) beside `writers` tasks that write 128 KiB at a time into
/// zones 1, 2 and so on until the finish completes, in virtual time.
fn finish_beside(writers: u64) -> u64 {
    let device = DeviceBuilder::new(DeviceSpec::parse("preset:zn540,zones=4")).build().expect("device");
    let mut simulation = Simulation::over(device, None);
    let (host, latency) = (simulation.host(), Rc::new(Cell::new(0)));
    let seen = Rc::clone(&latency);
    simulation.spawn(async move {
        let geometry = host.geometry();
        host.write(0, IoData::Zeros(4096)).await.expect("the finished zone's first write");
        let (start, done) = (host.now_ns(), Rc::new(Cell::new(false)));
        let (finisher, finished) = (host.clone(), Rc::clone(&done));
        let finish: Pin<Box<dyn Future<Output = ()>>> = Box::pin(async move {
            finisher.zone_send(0, ZoneSendAction::Finish, false).await.expect("finish");
            finished.set(true);
        });
        let writers = (1..=writers).map(|zone| -> Pin<Box<dyn Future<Output = ()>>> {
            let (host, done) = (host.clone(), Rc::clone(&done));
            Box::pin(async move {
                let chunk = 128 * 1024 / u64::from(geometry.lba_size);
                let mut offset = 0;
                while !done.get() && offset + chunk <= geometry.zone_cap_lba {
                    host.write(geometry.zone_start_lba(zone as u32) + offset, IoData::Zeros(128 * 1024))
                        .await
                        .expect("write");
                    offset += chunk;
                }
            })
        });
        join_all(std::iter::once(finish).chain(writers).collect()).await;
        seen.set(host.now_ns() - start);
    });
    simulation.run();
    latency.get()
}

#[test]
fn each_busy_writer_adds_the_padding_an_equal_share_of_the_write_budget() {
    let alone = finish_beside(0);
    for (writers, streams) in [(1, 2.0), (2, 3.0)] {
        let ratio = finish_beside(writers) as f64 / alone as f64;
        assert!((streams - 0.3..streams + 0.3).contains(&ratio), "{writers} writers: {ratio} times as long");
    }
}
