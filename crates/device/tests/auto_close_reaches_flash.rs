//! The device acts on what the namespace reports a command did: a write that auto-closes the oldest open zone
//! pays for that close on the controller (its effects name the victim), where the same write with room to open
//! its zone does not.

use zonelab_device::{Device, DeviceConfig};
use zonelab_zns::{Command, NullStore, ZoneState};

/// Completion latency of a 4 KiB write to zone 1 after a write to zone 0, on a device with `max_open` zones.
fn second_write_latency(max_open: u32) -> (u64, ZoneState) {
    let overrides = ["namespace.zones=8".to_string(), format!("namespace.max-open={max_open}")];
    let config = DeviceConfig::load("zn540", &overrides).expect("preset");
    let mut device = Device::new(&config, NullStore).expect("device");
    let block = vec![0u8; 4096];
    device.submit(0, Command::Write { slba: 0, data: &block }).result.expect("zone 0");
    let at = 1_000_000_000;
    let slba = device.namespace().geometry().zone_start_lba(1);
    let submitted = device.submit(at, Command::Write { slba, data: &block });
    submitted.result.expect("zone 1");
    (submitted.complete_ns - at, device.namespace().zone(0).state)
}

#[test]
fn a_write_that_auto_closes_a_zone_waits_for_the_close() {
    let (with_room, state) = second_write_latency(0);
    assert_eq!(state, ZoneState::ImplicitlyOpened);
    let (auto_closing, state) = second_write_latency(1);
    assert_eq!(state, ZoneState::Closed);
    assert!(auto_closing > with_room, "auto-close {auto_closing} ns against {with_room} ns with room");
}
