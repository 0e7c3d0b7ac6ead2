//! The mapping policy changes what the flash does, never what the host sees: the same seeded mix of writes,
//! appends, finishes and resets gives the same statuses, LBAs and zone reports under every policy, while
//! ReZNS's renewable zones erase less than the static policies.

use zonelab_device::{Device, DeviceConfig, HostPath};
use zonelab_zns::{Command, Completion, NullStore, Status, ZoneDescriptor, ZoneSendAction};

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
    let mut device = Device::new(&config, NullStore, HostPath::Spdk).expect("device");
    let geometry = *device.namespace().geometry();
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        state >> 24
    };
    let data = vec![0x5au8; 256 << 10];
    let mut results = Vec::new();
    let mut now = 0;
    for _ in 0..4000 {
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
        if let Err(broken) = device.media().check_mapping() {
            panic!("policy {policy}, seed {seed}: {broken}");
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
