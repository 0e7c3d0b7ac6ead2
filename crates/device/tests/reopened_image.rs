//! An image written by one process and opened by another reads like flash that holds data: the composition root
//! preconditions the flash model from the zones the image holds, so a read costs what it costs on a
//! preconditioned device, not what an unwritten page costs.

use zonelab_device::{Device, DeviceBuilder, DeviceConfig, DeviceSpec, HostPath};
use zonelab_zns::{Command, Image, NullStore, StoreKind};

/// Device time of a 4 KiB read 100 blocks into zone 1 of `device`.
fn read_latency<S: zonelab_zns::MediaStore>(device: &mut Device<S>) -> u64 {
    let mut buf = vec![0u8; 4096];
    let slba = device.namespace().geometry().zone_start_lba(1) + 100;
    let at = 1_000_000_000;
    let submitted = device.submit(at, Command::Read { slba, buf: &mut buf });
    submitted.result.expect("read");
    submitted.complete_ns - at
}

#[test]
fn a_reopened_image_reads_like_a_preconditioned_device() {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".into()]).expect("preset");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let model: toml::Table = toml::from_str(&config.to_toml()).expect("model");
    let half_zone_lba = config.namespace.validate().expect("geometry").zone_cap_lba / 2;
    {
        let mut image =
            Image::create(&path, StoreKind::File, config.namespace.clone(), Some(model), false).expect("create");
        let start = image.namespace().geometry().zone_start_lba(1);
        image.namespace_mut().write_zeroes(start, half_zone_lba).expect("write half of zone 1");
    }
    let mut reopened =
        DeviceBuilder::new(DeviceSpec::Image(path.clone())).host(HostPath::Spdk).build().expect("open image");
    let mut preconditioned = Device::new(&config, NullStore).expect("device");
    preconditioned.precondition(1, half_zone_lba << 12).expect("precondition");
    let (reopened_ns, preconditioned_ns) = (read_latency(&mut reopened.device), read_latency(&mut preconditioned));
    assert_eq!(reopened_ns, preconditioned_ns, "the image's data reads from programmed flash");
    assert!(reopened_ns > 50_000, "a 4 KiB read of programmed flash on the ZN540 takes ~73 us: {reopened_ns} ns");
    assert_eq!(reopened.config.name, "zn540", "the image keeps the model it was created with");
}

/// A read that reaches past a zone's written data (its write pointer, or its capacity once full) costs no flash
/// read for those blocks; the device counts such reads, so that a tool can say when a job made them.
#[test]
fn reads_that_reach_unwritten_blocks_are_counted() {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".into()]).expect("preset");
    let mut device = Device::new(&config, NullStore).expect("device");
    let geometry = *device.namespace().geometry();
    device.precondition(0, 8 << 12).expect("eight blocks in zone 0");
    device.precondition(1, geometry.zone_cap_lba << 12).expect("zone 1 full");
    let zone_1 = geometry.zone_start_lba(1);
    let reads = [
        (0, 8, false),
        (4, 8, true),
        (8, 1, true),
        (zone_1 + geometry.zone_cap_lba - 1, 1, false),
        (zone_1 + geometry.zone_cap_lba, 1, true),
        (geometry.zone_start_lba(2), 1, true),
    ];
    for (at, (slba, nlb, unwritten)) in (1..).map(|step| step * 1_000_000_000).zip(reads) {
        let before = device.counters().reads_of_unwritten;
        device.submit(at, Command::ReadDiscard { slba, nlb }).result.expect("read");
        assert_eq!(device.counters().reads_of_unwritten - before, u64::from(unwritten), "{nlb} blocks at {slba}");
    }
    assert_eq!(device.counters().reads, 6);
}
