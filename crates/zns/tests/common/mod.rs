//! Helpers shared by the scenario tests: small namespaces and one-line command wrappers.
#![allow(dead_code)]

use zonelab_zns::{
    ByteSize, MemoryStore, NamespaceConfig, ReportFilter, Status, ZoneDescriptor, ZoneSendAction, ZoneState,
    ZonedNamespace,
};

pub type Ns = ZonedNamespace<MemoryStore>;

/// 16 zones of 256 4-KiB LBAs, no limits.
pub fn config() -> NamespaceConfig {
    NamespaceConfig { zones: 16, zone_size: ByteSize(1 << 20), mdts: ByteSize(0), ..NamespaceConfig::default() }
}

pub fn namespace(config: NamespaceConfig) -> Ns {
    let geometry = config.validate().expect("valid test configuration");
    let bytes = geometry.nsze_lba << geometry.lba_shift;
    ZonedNamespace::new(config, MemoryStore::new(bytes)).expect("namespace")
}

pub fn fresh() -> Ns {
    namespace(config())
}

/// MO = 4, MA = 6, as docs/conformance.md 8.4 configures.
pub fn limited() -> Ns {
    namespace(NamespaceConfig { max_open: 4, max_active: 6, ..config() })
}

pub fn zslba(ns: &Ns, zone: u32) -> u64 {
    ns.geometry().zone_start_lba(zone)
}

pub fn block(ns: &Ns, byte: u8, blocks: u64) -> Vec<u8> {
    vec![byte; (blocks << ns.geometry().lba_shift) as usize]
}

pub fn write(ns: &mut Ns, lba: u64, blocks: u64) -> Result<(), Status> {
    let data = block(ns, 0xa5, blocks);
    ns.write(lba, &data)
}

pub fn write_zone(ns: &mut Ns, zone: u32, blocks: u64) -> Result<(), Status> {
    let wp = ns.zone(zone).wp_lba;
    write(ns, wp, blocks)
}

pub fn send(ns: &mut Ns, zone: u32, action: ZoneSendAction) -> Result<(), Status> {
    let start = zslba(ns, zone);
    ns.zone_management_send(start, action, false)
}

pub fn send_all(ns: &mut Ns, action: ZoneSendAction) -> Result<(), Status> {
    ns.zone_management_send(0, action, true)
}

pub fn state(ns: &Ns, zone: u32) -> ZoneState {
    ns.zone(zone).state
}

pub fn wp(ns: &Ns, zone: u32) -> u64 {
    ns.zone(zone).wp_lba
}

pub fn report_all(ns: &Ns) -> Vec<ZoneDescriptor> {
    ns.report_zones(0, ReportFilter::All, false, None).expect("report").zones
}

pub fn read(ns: &mut Ns, lba: u64, blocks: u64) -> Result<Vec<u8>, Status> {
    let mut buf = block(ns, 0xee, blocks);
    ns.read(lba, &mut buf)?;
    Ok(buf)
}

/// Asserts that `f` fails with `status` and changes no zone.
pub fn refused(ns: &mut Ns, status: Status, f: impl FnOnce(&mut Ns) -> Result<(), Status>) {
    let before = report_all(ns);
    let counts = (ns.open_zones(), ns.active_zones());
    assert_eq!(f(ns), Err(status));
    assert_eq!(report_all(ns), before, "a failed command changed a zone");
    assert_eq!((ns.open_zones(), ns.active_zones()), counts, "a failed command changed the resource counts");
}

/// `write` at an offset in LBAs from the start of `zone`.
pub fn write_at(ns: &mut Ns, zone: u32, blocks: u64) -> Result<(), Status> {
    let lba = zslba(ns, zone);
    write(ns, lba, blocks)
}

/// `read` from the start of `zone`.
pub fn read_at(ns: &mut Ns, zone: u32, blocks: u64) -> Result<Vec<u8>, Status> {
    let lba = zslba(ns, zone);
    read(ns, lba, blocks)
}
