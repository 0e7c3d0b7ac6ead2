//! The mapping policy changes what the flash does, never what the host sees: the same seeded mix of writes,
//! appends, finishes and resets gives the same statuses, LBAs and zone reports under every policy, while
//! ReZNS's renewable zones erase less than the static policies.

use zonelab_device::{Device, DeviceConfig};
use zonelab_zns::{
    zone_attrs, Command, Completion, NullStore, ReceiveAction, ReportFilter, Status, ZoneDescriptor, ZoneReport,
    ZoneSendAction, ZoneState,
};

/// What the host saw, and the erases the run cost.
struct Run {
    results: Vec<Result<Completion, Status>>,
    zones: Vec<ZoneDescriptor>,
    erases: u64,
    inline_erases: u64,
}

fn run(policy: &str, seed: u64) -> Run {
    let overrides = ["namespace.zones=12".to_string(), format!("media.mapping.policy={policy:?}")];
    let config = DeviceConfig::load("nvmevirt-rezns", &overrides).expect("preset");
    let mut device = Device::new(&config, NullStore).expect("device");
    let geometry = *device.namespace().geometry();
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        state >> 24
    };
    let data = vec![0x5au8; 256 << 10];
    let mut results = Vec::new();
    let mut now = 0;
    for step in 0..4000 {
        now += 50_000 + next() % 1_000_000;
        let zone = (next() % u64::from(geometry.zones)) as u32;
        let zslba = geometry.zone_start_lba(zone);
        let len = (1 + next() % 64) << 12;
        let command = match next() % 20 {
            0..=2 => Command::ZoneManagementSend { slba: zslba, action: ZoneSendAction::Reset, select_all: false },
            3 => Command::ZoneManagementSend { slba: zslba, action: ZoneSendAction::Finish, select_all: false },
            4..=10 => Command::Append { zslba, data: &data[..len as usize] },
            _ => {
                let wp = device.namespace().zone(zone).wp_lba;
                Command::Write { slba: wp, data: &data[..len as usize] }
            }
        };
        results.push(device.submit(now, command).result);
        // The mapping check walks every zone's units; every 50th command still finds a broken mapping within
        // a few commands of the one that broke it, since a mapping stays broken.
        if step % 50 == 49 || step == 3999 {
            if let Err(broken) = device.media().check_mapping() {
                panic!("policy {policy}, seed {seed}, by command {step}: {broken}");
            }
        }
    }
    let zones = (0..geometry.zones).map(|zone| device.namespace().zone(zone)).collect();
    let summary = device.media().erase_summary();
    Run { results, zones, erases: summary.erases, inline_erases: summary.inline }
}

#[test]
fn every_policy_shows_the_host_the_same_device() {
    for seed in [1, 2, 3] {
        let full = run("static-full-erase", seed);
        let written = run("static-written-erase", seed);
        let rezns = run("rezns", seed);
        let context = format!("seed {seed}");
        assert!(full.results.iter().filter(|result| result.is_ok()).count() > 2500, "{context}: mostly successes");
        for other in [&written, &rezns] {
            assert_eq!(full.results, other.results, "{context}: statuses and LBAs");
            assert_eq!(full.zones, other.zones, "{context}: zone reports");
        }
        assert!(written.erases < full.erases, "{context}: {} vs {}", written.erases, full.erases);
        assert!(rezns.erases < written.erases, "{context}: {} vs {}", rezns.erases, written.erases);
        assert!(
            rezns.inline_erases < written.inline_erases,
            "{context}: rezns waits for {} erases, static-written-erase for {}",
            rezns.inline_erases,
            written.inline_erases
        );
    }
}

#[test]
fn the_zombie_scan_finishes_idle_open_zones_and_recycles_their_rest() {
    let overrides = [
        "namespace.zones=8",
        "media.mapping.policy=rezns",
        "media.mapping.zombie-scan-period-s=60",
        "media.mapping.zombie-idle-s=3600",
    ]
    .map(String::from);
    let config = DeviceConfig::load("nvmevirt-rezns", &overrides).expect("preset");
    let mut device = Device::new(&config, NullStore).expect("device");
    let geometry = *device.namespace().geometry();
    let data = vec![1u8; 256 << 10];
    let second = 1_000_000_000u64;
    // Zone 0 is written at 0 s and then left open; zone 1 keeps being written.
    assert!(device.submit(0, Command::Write { slba: 0, data: &data }).result.is_ok());
    for minute in 0..62u64 {
        let slba = device.namespace().zone(1).wp_lba;
        assert!(device.submit(minute * 60 * second, Command::Write { slba, data: &data }).result.is_ok());
    }
    let zone0 = device.namespace().zone(0);
    assert_eq!(zone0.state, ZoneState::Full, "idle for an hour: finished by the controller");
    let mut buf = vec![0u8; 64 + 64];
    let receive = Command::ZoneManagementReceive {
        slba: 0,
        action: ReceiveAction::ReportZones,
        filter: ReportFilter::Full,
        partial: true,
        buf: &mut buf,
    };
    assert!(device.submit(3700 * second, receive).result.is_ok());
    let report = ZoneReport::decode(&buf, geometry.zone_size_lba).expect("report");
    assert_eq!((report.zones[0].index, report.zones[0].attrs), (0, zone_attrs::ZFC), "the report says so");
    let zone1_state = device.namespace().zone(1);
    assert_eq!((zone1_state.state, zone1_state.attrs), (ZoneState::ImplicitlyOpened, 0), "zone 1 was written");
    assert_eq!(device.counters().controller_finishes, 1);
    let stats = device.media().erase_summary().renewable.expect("rezns stats");
    assert_eq!((stats.zombie_finishes, stats.spare_zones), (1, 1), "zone 0's erased rest is a spare");

    // The data stays readable; a new zone takes the zombie's rest; the host's reset clears the attribute.
    let mut buf = vec![0u8; 4096];
    assert!(device.submit(4000 * second, Command::Read { slba: 0, buf: &mut buf }).result.is_ok());
    assert_eq!(buf, vec![0u8; 4096], "the null store reads zeros; the read is served");
    let slba = geometry.zone_start_lba(2);
    assert!(device.submit(4001 * second, Command::Write { slba, data: &data }).result.is_ok());
    assert_eq!(device.media().erase_summary().renewable.expect("stats").spare_reuses, 1);
    let reset = Command::ZoneManagementSend { slba: 0, action: ZoneSendAction::Reset, select_all: false };
    assert!(device.submit(4002 * second, reset).result.is_ok());
    assert_eq!((device.namespace().zone(0).state, device.namespace().zone(0).attrs), (ZoneState::Empty, 0));
    device.media().check_mapping().expect("mapping");
}
