//! Power loss: with power-loss protection everything acknowledged survives; without it, what sat in the
//! write buffer unprogrammed is lost and the zone's write pointer rolls back to what was durable.

use zonelab_device::{Device, DeviceConfig};
use zonelab_zns::{Command, MemoryStore, ZoneState};

fn device(protected: bool) -> Device<MemoryStore> {
    let overrides = ["namespace.zones=4".to_string(), format!("power-loss-protection={protected}")];
    let config = DeviceConfig::load("zn540", &overrides).expect("preset");
    let geometry = config.namespace.validate().expect("geometry");
    Device::new(&config, MemoryStore::new(geometry.nsze_lba << geometry.lba_shift)).expect("device")
}

/// Writes 40 x 64 KiB of 0xab to zone 0 back to back; returns when the last was acknowledged.
fn write_some(device: &mut Device<MemoryStore>) -> u64 {
    let data = vec![0xabu8; 64 << 10];
    let mut now = 0;
    for i in 0..40u64 {
        let submitted = device.submit(now, Command::Write { slba: i * 16, data: &data });
        assert!(submitted.result.is_ok());
        now = submitted.complete_ns;
    }
    now
}

#[test]
fn with_protection_everything_acknowledged_survives() {
    let mut device = device(true);
    let acknowledged = write_some(&mut device);
    device.power_loss(acknowledged).expect("power loss");
    let zone = device.namespace().zone(0);
    assert_eq!((zone.state, zone.wp_lba), (ZoneState::Closed, 640));
}

#[test]
fn without_protection_the_unprogrammed_tail_is_lost() {
    let mut device = device(false);
    let acknowledged = write_some(&mut device);
    device.power_loss(acknowledged).expect("power loss");
    let zone = device.namespace().zone(0);
    let unit_lbas = device.media().config().nand.program_unit_bytes >> 12;
    assert!(zone.wp_lba < 640, "acknowledged data in the write buffer is gone: wp {}", zone.wp_lba);
    assert_eq!(zone.wp_lba % unit_lbas, 0, "what survives is whole programmed units");
    assert_eq!(zone.state, if zone.wp_lba == 0 { ZoneState::Empty } else { ZoneState::Closed });
    let mut buf = vec![0u8; 640 * 4096];
    for (chunk, piece) in buf.chunks_mut(64 * 4096).enumerate() {
        let read = device.submit(acknowledged + 1, Command::Read { slba: chunk as u64 * 64, buf: piece });
        assert!(read.result.is_ok(), "{:?}", read.result);
    }
    let survived = (zone.wp_lba * 4096) as usize;
    assert!(buf[..survived].iter().all(|&b| b == 0xab), "durable blocks keep their data");
    assert!(buf[survived..].iter().all(|&b| b == 0), "lost blocks read as zeros");
}

#[test]
fn without_protection_programmed_data_survives_given_time() {
    let mut device = device(false);
    let acknowledged = write_some(&mut device);
    device.power_loss(acknowledged + 1_000_000_000).expect("power loss");
    let kept = device.namespace().zone(0).wp_lba;
    let unit_lbas = device.media().config().nand.program_unit_bytes >> 12;
    assert_eq!(kept, 640 / unit_lbas * unit_lbas, "every whole unit was programmed a second later; the tail never is");
}

#[test]
fn without_protection_a_completed_flush_makes_everything_durable() {
    let mut device = device(false);
    let acknowledged = write_some(&mut device);
    let flushed = device.submit(acknowledged, Command::Flush);
    assert!(flushed.result.is_ok());
    assert!(flushed.complete_ns > acknowledged, "a flush waits for the programs");
    device.power_loss(flushed.complete_ns).expect("power loss");
    assert_eq!(device.namespace().zone(0).wp_lba, 640, "even the partial program unit was flushed");
}

/// A flush right after one 4 KiB write: its time, and the state of the flushed zone after a power loss.
fn flush_after_a_small_write(protected: bool) -> (u64, u64) {
    let mut device = device(protected);
    let written = device.submit(0, Command::Write { slba: 0, data: &[7u8; 4096] });
    let flushed = device.submit(written.complete_ns, Command::Flush);
    assert!(flushed.result.is_ok());
    let flush_ns = flushed.complete_ns - written.complete_ns;
    device.power_loss(flushed.complete_ns).expect("power loss");
    (flush_ns, device.namespace().zone(0).wp_lba)
}

#[test]
fn a_flush_programs_the_write_buffer_only_without_protection() {
    let (protected_ns, protected_wp) = flush_after_a_small_write(true);
    let (unprotected_ns, unprotected_wp) = flush_after_a_small_write(false);
    // Both keep the block: the flush is what makes it durable without protection.
    assert_eq!((protected_wp, unprotected_wp), (1, 1));
    // Without protection the partial unit is programmed (hundreds of microseconds of TLC program time); with
    // it the buffer is durable already and the flush costs the command alone.
    assert!(unprotected_ns > 200_000, "{unprotected_ns} ns");
    assert!(protected_ns < 50_000, "{protected_ns} ns");
}
