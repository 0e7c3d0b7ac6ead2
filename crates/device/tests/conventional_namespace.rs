//! The ZN540's two namespaces on one device: its 4 GiB conventional namespace (nsid 1) takes the NVM command
//! set through a page-mapped FTL whose garbage collection shares the zoned namespace's (nsid 2) dies, so
//! random overwrites amplify on nsid 1 alone and its collection slows reads on nsid 2 by mechanism.

use zonelab_device::{Device, DeviceConfig};
use zonelab_media::{FlashOp, OpSource};
use zonelab_zns::{Command, MediaStore, NamespaceKind, NullStore, Status, ZoneSendAction};

const CONVENTIONAL: u32 = 1;
const ZONED: u32 = 2;
/// A 1 GiB conventional namespace: 16 blocks of 66 MiB, at 30 % over-provisioning so that the open blocks and
/// the collection's reserve fit.
const SMALL: [&str; 2] = ["conventional.capacity=\"1GiB\"", "conventional.over-provisioning=0.3"];

fn zn540(overrides: &[&str]) -> Device<NullStore> {
    let overrides: Vec<String> = overrides.iter().map(|text| text.to_string()).collect();
    Device::new(&DeviceConfig::load("zn540", &overrides).expect("preset"), NullStore).expect("device")
}

fn ok<S: MediaStore>(device: &mut Device<S>, nsid: u32, now: u64, command: Command<'_>) -> u64 {
    let submitted = device.submit_to(nsid, now, command);
    submitted.result.unwrap_or_else(|status| panic!("nsid {nsid}: {status}"));
    submitted.complete_ns
}

#[test]
fn each_namespace_takes_its_own_command_set_and_names_the_others_errors() {
    let mut device = zn540(&[]);
    assert_eq!(device.namespace_ids(), [CONVENTIONAL, ZONED]);
    let conventional = device.geometry_of(CONVENTIONAL).expect("nsid 1");
    assert_eq!(
        (conventional.kind, conventional.nsze_lba << conventional.lba_shift),
        (NamespaceKind::Conventional, 4 << 30)
    );
    assert_eq!(device.geometry_of(ZONED).expect("nsid 2").kind, NamespaceKind::Zoned);
    assert_eq!(device.geometry_of(3), None);

    let block = [5u8; 4096];
    ok(&mut device, CONVENTIONAL, 0, Command::Write { slba: 777, data: &block });
    ok(&mut device, CONVENTIONAL, 0, Command::Write { slba: 3, data: &block });
    let status = |device: &mut Device<NullStore>, nsid, command| device.submit_to(nsid, 0, command).result.err();
    let reset = Command::ZoneManagementSend { slba: 0, action: ZoneSendAction::Reset, select_all: true };
    assert_eq!(status(&mut device, CONVENTIONAL, reset), Some(Status::InvalidOpcode), "no zones on nsid 1");
    let append = Command::Append { zslba: 0, data: &block };
    assert_eq!(status(&mut device, CONVENTIONAL, append), Some(Status::InvalidOpcode));
    let trim = Command::Deallocate { slba: 0, nlb: 8 };
    assert_eq!(status(&mut device, ZONED, trim), Some(Status::InvalidOpcode), "no trim on the zoned namespace");
    assert_eq!(status(&mut device, 3, Command::Flush), Some(Status::InvalidNamespaceOrFormat));
    let past = Command::Write { slba: conventional.nsze_lba, data: &block };
    assert_eq!(status(&mut device, CONVENTIONAL, past), Some(Status::LbaOutOfRange));
    let random = Command::Write { slba: 4096, data: &block };
    assert_eq!(status(&mut device, ZONED, random), Some(Status::ZoneInvalidWrite), "nsid 2 stays sequential");
    ok(&mut device, CONVENTIONAL, 0, Command::Deallocate { slba: 0, nlb: 1 << 20 });
    let stats = device.stats();
    assert_eq!((stats.counters.writes, stats.counters.deallocates, stats.counters.errors), (2, 1, 6));
}

#[test]
fn data_is_kept_per_namespace() {
    let config = DeviceConfig::load("zn540", &[]).expect("preset");
    let mut device = Device::new(&config, zonelab_zns::MemoryStore::new(4 << 20)).expect("device");
    let mut submit = |nsid, command| device.submit_to(nsid, 0, command).result.expect("ok");
    submit(CONVENTIONAL, Command::Write { slba: 0, data: &[1u8; 4096] });
    submit(ZONED, Command::Write { slba: 0, data: &[2u8; 4096] });
    submit(CONVENTIONAL, Command::Write { slba: 0, data: &[3u8; 4096] });
    let (mut conventional, mut zoned) = ([0u8; 4096], [0u8; 4096]);
    submit(CONVENTIONAL, Command::Read { slba: 0, buf: &mut conventional });
    submit(ZONED, Command::Read { slba: 0, buf: &mut zoned });
    assert_eq!((conventional[0], zoned[0]), (3, 2), "LBA 0 of each namespace is its own");
}

/// Uniform random 4 KiB writes at QD 1 over the preconditioned conventional namespace; returns the time reached.
fn random_writes(device: &mut Device<NullStore>, mut now: u64, count: u64) -> u64 {
    let pages = device.geometry_of(CONVENTIONAL).expect("nsid 1").nsze_lba;
    let mut rng = zonelab_device::rng::SplitMix64::split(7, "random writes");
    for _ in 0..count {
        now = ok(device, CONVENTIONAL, now, Command::Write { slba: rng.below(pages), data: &[0; 4096] });
    }
    now
}

#[test]
fn random_overwrites_amplify_on_the_conventional_namespace_only() {
    let mut device = zn540(&SMALL);
    // Writes on the zoned namespace: programmed once, by the host.
    let mut now = 0;
    for block in 0..2048u64 {
        now = ok(&mut device, ZONED, now, Command::Write { slba: block, data: &[0; 4096] });
    }
    let flash = device.stats().flash;
    assert_eq!(flash.get(FlashOp::PageProgram, OpSource::GcWrite), 0, "a zoned namespace has no garbage collection");
    device.precondition_conventional(2, 1).expect("nsid 1");
    let pages = device.geometry_of(CONVENTIONAL).expect("nsid 1").nsze_lba;
    random_writes(&mut device, now, pages);
    let stats = device.stats();
    let ftl = stats.conventional.expect("the FTL's counters");
    // 30 % over-provisioning: the analytic model gives 2.3 for many blocks; with 21 blocks of 66 MiB to
    // choose among it is less exact, but well above 1.
    assert!(ftl.write_amplification > 1.5, "{ftl:?}");
    assert!(stats.flash.get(FlashOp::PageProgram, OpSource::GcWrite) > 0);
    assert!(stats.flash.get(FlashOp::BlockErase, OpSource::GcErase) > 0);
}

#[test]
fn garbage_collection_on_one_namespace_slows_reads_on_the_other() {
    // QD 1 reads of the zoned namespace's written blocks, alone and while the conventional namespace's random
    // writes keep its garbage collection busy on the same dies: namespaces do not isolate.
    let mean_read_ns = |busy_neighbour: bool| {
        let mut device = zn540(&SMALL);
        let mut now = 0;
        for block in 0..4096u64 {
            now = ok(&mut device, ZONED, now, Command::Write { slba: block, data: &[0; 4096] });
        }
        now += 1_000_000_000;
        device.precondition_conventional(2, 1).expect("nsid 1");
        let mut rng = zonelab_device::rng::SplitMix64::split(3, "reads");
        let mut total = 0;
        for _ in 0..2000 {
            if busy_neighbour {
                random_writes(&mut device, now, 8);
            }
            let done = ok(&mut device, ZONED, now, Command::ReadDiscard { slba: rng.below(4096), nlb: 1 });
            total += done - now;
            now = done;
        }
        total / 2000
    };
    let (alone, beside_gc) = (mean_read_ns(false), mean_read_ns(true));
    assert!(beside_gc > alone * 3 / 2, "reads beside garbage collection {beside_gc} ns, alone {alone} ns");
}

/// The `conventional` preset is a conventional SSD: one namespace, no zoned one; commands that name no
/// namespace go to it, and a configuration that asks for zones or leaves it without a namespace is refused.
#[test]
fn a_device_without_a_zoned_namespace_is_a_conventional_ssd() {
    let config = DeviceConfig::load("conventional", &[]).expect("preset");
    let mut device = Device::new(&config, NullStore).expect("device");
    assert_eq!((device.namespace_ids(), device.attached_nsid()), (vec![1], 1));
    assert_eq!(device.geometry().kind, NamespaceKind::Conventional);
    assert_eq!(device.geometry_of(0), None, "0 is no namespace ID");
    assert_eq!(device.submit(0, Command::Write { slba: 12_345, data: &[0; 4096] }).result.err(), None);
    assert_eq!(device.submit_to(0, 0, Command::Flush).result.err(), Some(Status::InvalidNamespaceOrFormat));
    let reset = Command::ZoneManagementSend { slba: 0, action: ZoneSendAction::Reset, select_all: true };
    assert_eq!(device.submit(0, reset).result.err(), Some(Status::InvalidOpcode));
    let refused = |overrides: &[&str]| {
        let overrides: Vec<String> = overrides.iter().map(|text| text.to_string()).collect();
        DeviceConfig::load("conventional", &overrides).expect_err("refused").to_string()
    };
    let zones = refused(&["namespace={ zones = 4 }"]);
    assert!(zones.contains("zoned-nsid") && zones.contains("no [namespace]"), "{zones}");
    let none = DeviceConfig::load("instant", &["zoned-nsid=0".into()]).expect_err("no namespace").to_string();
    assert!(none.contains("needs a [conventional] table"), "{none}");
}

/// The Optane preset writes in place: data reads back, overwrites program where the page lies, nothing is
/// ever erased or copied, and a write completes when its program ends (no buffer), so it takes longer than
/// a buffered write on the flash SSD beside it.
#[test]
fn an_in_place_namespace_never_collects_garbage() {
    let config = DeviceConfig::load("optane-900p", &[]).expect("preset");
    let mut device = Device::new(&config, zonelab_zns::MemoryStore::new(1 << 20)).expect("device");
    let mut now = 0;
    let mut rng = zonelab_device::rng::SplitMix64::split(5, "overwrites");
    for round in 0..4u8 {
        for _ in 0..2000 {
            let slba = rng.below(1 << 20) * 8;
            now = ok(&mut device, 1, now, Command::Write { slba, data: &[round; 4096] });
        }
    }
    ok(&mut device, 1, now, Command::Write { slba: 8, data: &[9; 4096] });
    let mut back = [0u8; 4096];
    ok(&mut device, 1, now, Command::Read { slba: 8, buf: &mut back });
    assert_eq!(back[4095], 9);
    let stats = device.stats();
    let ftl = stats.conventional.expect("counters");
    assert_eq!((ftl.write_amplification, ftl.ftl.gc_pages_moved, ftl.ftl.gc_blocks_erased), (1.0, 0, 0));
    assert_eq!(stats.flash.get(FlashOp::BlockErase, OpSource::GcErase), 0);
    let write_ns = |preset: &str| {
        let mut device = Device::new(&DeviceConfig::load(preset, &[]).expect("preset"), NullStore).expect("device");
        ok(&mut device, 1, 1_000_000, Command::Write { slba: 0, data: &[0; 4096] }) - 1_000_000
    };
    let (in_place, buffered) = (write_ns("optane-900p"), write_ns("samsung-980pro"));
    let program_ns = (config.media.nand.program_latency_us * 1000.0) as u64;
    assert!(in_place > program_ns, "an unbuffered write waits for its {program_ns} ns program: {in_place} ns");
    assert!(buffered < 450_000, "the flash SSD acknowledges from its buffer before a 450 us program: {buffered} ns");
}

#[test]
fn an_in_place_mapping_is_refused_spare_space_and_multi_page_units() {
    let refused = |overrides: &[&str]| {
        let overrides: Vec<String> = overrides.iter().map(|text| text.to_string()).collect();
        DeviceConfig::load("optane-900p", &overrides).expect_err("refused").to_string()
    };
    let spare = refused(&["conventional.over-provisioning=0.1"]);
    assert!(spare.contains("conventional.over-provisioning") && spare.contains("in-place"), "{spare}");
    let units = refused(&["media.nand.program-unit-bytes=8192"]);
    assert!(units.contains("conventional.mapping") && units.contains("8192"), "{units}");
}
