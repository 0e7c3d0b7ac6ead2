//! Finish writes padding for the rest of the zone through the same write budget as host writes, half each while
//! both have bytes to absorb, so writes to other zones slow down while a finish runs.

use zonelab_device::{Device, DeviceConfig};
use zonelab_zns::{Command, NullStore, ZoneSendAction};

/// Completion time of 64 back-to-back 128 KiB writes to zone 1, starting at `start`.
fn write_burst(device: &mut Device<NullStore>, start: u64) -> u64 {
    let data = vec![0u8; 128 << 10];
    let zone_start = device.namespace().geometry().zone_start_lba(1);
    let mut now = start;
    for i in 0..64u64 {
        let submitted = device.submit(now, Command::Write { slba: zone_start + i * 32, data: &data });
        assert!(submitted.result.is_ok(), "{:?}", submitted.result);
        now = submitted.complete_ns;
    }
    now - start
}

#[test]
fn writes_slow_down_while_a_finish_pads_its_zone() {
    let config = DeviceConfig::load("zn540", &["namespace.zones=8".into()]).expect("preset");
    let mut quiet = Device::new(&config, NullStore).expect("device");
    let alone = write_burst(&mut quiet, 0);

    let mut busy = Device::new(&config, NullStore).expect("device");
    busy.submit(0, Command::Write { slba: 0, data: &[0u8; 4096] });
    let finish =
        busy.submit(1_000, Command::ZoneManagementSend { slba: 0, action: ZoneSendAction::Finish, select_all: false });
    assert!(finish.result.is_ok());
    let padding_ms = (finish.complete_ns - 1_000) as f64 / 1e6;
    assert!((800.0..1100.0).contains(&padding_ms), "finishing a nearly empty zone pads ~1 GiB: {padding_ms} ms");
    let during = write_burst(&mut busy, 2_000);
    let slowdown = during as f64 / alone as f64;
    assert!((1.7..2.6).contains(&slowdown), "writes during the finish took {during} ns, alone {alone} ns");
    let pages =
        busy.media().counters().get(zonelab_media::FlashOp::PageProgram, zonelab_media::OpSource::FinishPadding);
    assert!(pages > 30_000, "the padding is programmed: {pages} pages");
}
