//! Faults injected into a running device (what a mount's control channel passes on): an I/O error fails the
//! zone's next read or write once, with a media error, and changes nothing; READ_ONLY and OFFLINE change the zone
//! as null_blk's configfs does; a zone that does not exist is refused by name.

use zonelab_device::{Device, DeviceConfig, ZoneFault};
use zonelab_zns::{Command, InjectError, MemoryStore, Status, ZoneState};

fn device() -> Device<MemoryStore> {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".to_string()]).expect("preset");
    let bytes = {
        let geometry = Device::new(&config, zonelab_zns::NullStore).expect("device").geometry();
        geometry.nsze_lba << geometry.lba_shift
    };
    Device::new(&config, MemoryStore::new(bytes)).expect("device")
}

#[test]
fn an_io_error_fails_the_zones_next_command_once_and_changes_nothing() {
    let mut device = device();
    let block = vec![7u8; 4096];
    let zone1 = device.geometry().zone_start_lba(1);
    device.submit(0, Command::Write { slba: zone1, data: &block }).result.expect("write");
    device.inject_fault(1, ZoneFault::IoError).expect("inject");
    // Another zone is not touched by it.
    device.submit(10, Command::Write { slba: 0, data: &block }).result.expect("zone 0");
    let failed = device.submit(20, Command::Write { slba: zone1 + 1, data: &block }).result;
    assert_eq!(failed, Err(Status::WriteFault));
    assert_eq!(device.namespace().written_lba(1), 1, "the failed write wrote nothing");
    device.submit(30, Command::Write { slba: zone1 + 1, data: &block }).result.expect("the fault was used up");

    device.inject_fault(1, ZoneFault::IoError).expect("inject");
    let mut buf = vec![0u8; 4096];
    assert_eq!(
        device.submit(40, Command::Read { slba: zone1, buf: &mut buf }).result,
        Err(Status::UnrecoveredReadError)
    );
    device.submit(50, Command::Read { slba: zone1, buf: &mut buf }).result.expect("read");
    assert_eq!(buf, block);
}

#[test]
fn zone_conditions_change_and_missing_zones_are_refused() {
    let mut device = device();
    device.inject_fault(2, ZoneFault::ReadOnly).expect("read-only");
    assert_eq!(device.namespace().zone(2).state, ZoneState::ReadOnly);
    device.inject_fault(3, ZoneFault::Offline).expect("offline");
    assert_eq!(device.namespace().zone(3).state, ZoneState::Offline);
    for fault in [ZoneFault::ReadOnly, ZoneFault::Offline, ZoneFault::IoError] {
        assert_eq!(device.inject_fault(4, fault), Err(InjectError::NoSuchZone { zone: 4, zones: 4 }));
    }
}
