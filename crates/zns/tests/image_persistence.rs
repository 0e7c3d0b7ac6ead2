//! Device images: everything survives closing and reopening, a many-zone command interrupted by a crash is
//! completed on open, and one image is driven by one process at a time.

use std::os::unix::fs::FileExt;

use zonelab_zns::{ByteSize, Image, ImageError, NamespaceConfig, StoreKind, ZoneSendAction, ZoneState};

fn config() -> NamespaceConfig {
    NamespaceConfig { zones: 6, zone_size: ByteSize(256 << 10), max_open: 2, ..NamespaceConfig::default() }
}

fn states(image: &Image) -> Vec<ZoneState> {
    (0..6).map(|zone| image.namespace().zone(zone).state).collect()
}

#[test]
fn reopening_keeps_states_order_and_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    {
        let mut image = Image::create(&path, StoreKind::File, config(), None, false).expect("create");
        let ns = image.namespace_mut();
        ns.write(0, &[1u8; 8192]).expect("write zone 0");
        ns.write(64, &[2u8; 4096]).expect("write zone 1");
        ns.zone_management_send(128, ZoneSendAction::Open, false).expect("open zone 2");
    }
    let mut image = Image::open(&path).expect("reopen");
    assert_eq!(
        states(&image),
        [
            ZoneState::Closed,
            ZoneState::ImplicitlyOpened,
            ZoneState::ExplicitlyOpened,
            ZoneState::Empty,
            ZoneState::Empty,
            ZoneState::Empty
        ]
    );
    let mut buf = [0u8; 8192];
    image.namespace_mut().read(0, &mut buf).expect("read");
    assert!(buf.iter().all(|&b| b == 1));
    // The implicit-open order survived: zone 1 is the next auto-close victim.
    image.namespace_mut().write(192, &[3u8; 4096]).expect("write zone 3");
    assert_eq!(image.namespace().zone(1).state, ZoneState::Closed);
}

#[test]
fn memory_and_null_stores_keep_zone_state_but_not_data_across_opens() {
    for store in [StoreKind::Memory, StoreKind::Null] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("img");
        Image::create(&path, store, config(), None, false)
            .expect("create")
            .namespace_mut()
            .write(0, &[9u8; 4096])
            .expect("write");
        let mut image = Image::open(&path).expect("reopen");
        assert_eq!(image.namespace().zone(0).wp_lba, 1);
        let mut buf = [7u8; 4096];
        image.namespace_mut().read(0, &mut buf).expect("read");
        assert!(buf.iter().all(|&b| b == 0), "{store:?} keeps no data across opens");
        assert!(!path.join("data").exists());
    }
}

#[test]
fn an_interrupted_select_all_is_completed_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    {
        let mut image = Image::create(&path, StoreKind::File, config(), None, false).expect("create");
        let ns = image.namespace_mut();
        ns.write(0, &[1u8; 4096]).expect("write");
        ns.write(64, &[1u8; 4096]).expect("write");
        ns.zone_management_send(128, ZoneSendAction::Finish, false).expect("finish");
    }
    // What a crash right after the intent was recorded leaves: the intent of a Reset with Select All, and no
    // zone reset yet.
    let journal = std::fs::OpenOptions::new().write(true).open(path.join("zones.meta")).expect("open journal");
    let mut intent = [0u8; 64];
    intent[0] = 1;
    intent[1] = ZoneSendAction::Reset as u8;
    let crc = crc32fast::hash(&intent[..60]);
    intent[60..].copy_from_slice(&crc.to_le_bytes());
    journal.write_all_at(&intent, 64).expect("write intent");
    drop(journal);

    let image = Image::open(&path).expect("open completes the reset");
    assert!(states(&image).iter().all(|&state| state == ZoneState::Empty), "{:?}", states(&image));
    drop(image);
    let mut cleared = [0u8; 64];
    std::fs::File::open(path.join("zones.meta")).expect("open").read_exact_at(&mut cleared, 64).expect("read");
    assert_eq!(cleared, [0u8; 64], "the intent is cleared once the command completes");
}

#[test]
fn readers_share_an_image_and_exclude_a_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    drop(Image::create(&path, StoreKind::File, config(), None, false).expect("create"));
    let first = Image::open_as(&path, zonelab_zns::Access::ReadOnly).expect("a reader");
    let second = Image::open_as(&path, zonelab_zns::Access::ReadOnly).expect("another reader beside it");
    assert!(matches!(Image::open(&path), Err(ImageError::Busy(_))), "no writer while they read");
    drop((first, second));
    Image::open(&path).expect("free again");
}

#[test]
fn a_flipped_version_byte_in_the_journal_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    drop(Image::create(&path, StoreKind::File, config(), None, false).expect("create"));
    let journal = std::fs::OpenOptions::new().read(true).write(true).open(path.join("zones.meta")).expect("open");
    let mut byte = [0u8; 1];
    journal.read_exact_at(&mut byte, 9).expect("read");
    journal.write_all_at(&[byte[0] ^ 0xff], 9).expect("write");
    let error = Image::open(&path).expect_err("refused").to_string();
    assert!(error.contains("is corrupt: its header checksum does not match"), "{error}");
}

#[test]
fn one_process_at_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let first = Image::create(&path, StoreKind::File, config(), None, false).expect("create");
    assert!(matches!(Image::open(&path), Err(ImageError::Busy(_))));
    assert!(matches!(Image::create(&path, StoreKind::File, config(), None, true), Err(ImageError::Busy(_))));
    drop(first);
    Image::open(&path).expect("free again");
}

#[test]
fn a_failed_command_leaves_the_image_files_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let mut image = Image::create(&path, StoreKind::File, config(), None, false).expect("create");
    image.namespace_mut().write(0, &[5u8; 4096]).expect("write");
    let snapshot =
        || (std::fs::read(path.join("zones.meta")).expect("meta"), std::fs::read(path.join("data")).expect("data"));
    let before = snapshot();
    let ns = image.namespace_mut();
    assert!(ns.write(0, &[6u8; 4096]).is_err());
    assert!(ns.write(65, &[6u8; 4096]).is_err());
    assert!(ns.zone_management_send(64, ZoneSendAction::Close, false).is_err());
    assert!(ns.zone_management_send(1, ZoneSendAction::Reset, false).is_err());
    ns.write(64, &[6u8; 4096]).expect("zone 1");
    assert!(ns.write(128, &[6u8; 4096]).is_ok(), "auto-close makes room");
    ns.zone_management_send(0, ZoneSendAction::Reset, true).expect("reset all");
    let after_reset = snapshot();
    assert_ne!(after_reset.0, before.0);
    drop(image);
    assert!(Image::open(&path).expect("open").namespace().zone(0).state == ZoneState::Empty);
}

#[test]
fn a_zone_finished_by_the_controller_keeps_its_attribute_until_reset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    {
        let mut image = Image::create(&path, StoreKind::File, config(), None, false).expect("create");
        let ns = image.namespace_mut();
        ns.write(0, &[1u8; 8192]).expect("write zone 0");
        assert_eq!(ns.finish_by_controller(1), Err(zonelab_zns::Status::InvalidZoneStateTransition), "empty");
        ns.finish_by_controller(0).expect("finish the open zone");
        assert_eq!(ns.open_zones(), 0, "a finished zone gives its open resource back");
    }
    let mut image = Image::open(&path).expect("reopen");
    let zone = image.namespace().zone(0);
    assert_eq!((zone.state, zone.attrs), (ZoneState::Full, zonelab_zns::zone_attrs::ZFC));
    let mut buf = [0u8; 8192];
    image.namespace_mut().read(0, &mut buf).expect("read");
    assert!(buf.iter().all(|&b| b == 1), "the data stays");
    image.namespace_mut().zone_management_send(0, ZoneSendAction::Reset, false).expect("reset");
    assert_eq!(image.namespace().zone(0).attrs, 0);
}

/// Zone `zone`'s 64-byte record in `zones.meta` (records start at byte 4096).
fn record_at(zone: u64) -> u64 {
    4096 + 64 * zone
}

#[test]
fn a_record_copied_to_another_zone_or_from_another_image_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, twin) = (dir.path().join("img"), dir.path().join("twin"));
    drop(Image::create(&path, StoreKind::File, config(), None, false).expect("create"));
    drop(Image::create(&twin, StoreKind::File, config(), None, false).expect("create a twin of the same shape"));
    let journal_of = |image: &std::path::Path| {
        std::fs::OpenOptions::new().read(true).write(true).open(image.join("zones.meta")).expect("open journal")
    };
    let original = std::fs::read(path.join("zones.meta")).expect("read journal");
    let mut record = [0u8; 64];

    journal_of(&path).read_exact_at(&mut record, record_at(3)).expect("read zone 3's record");
    journal_of(&path).write_all_at(&record, record_at(5)).expect("copy it over zone 5's");
    let error = Image::open(&path).expect_err("refused").to_string();
    assert!(error.contains("the record in zone 5's place is zone 3's"), "{error}");

    std::fs::write(path.join("zones.meta"), &original).expect("restore");
    journal_of(&twin).read_exact_at(&mut record, record_at(2)).expect("read the twin's zone 2");
    journal_of(&path).write_all_at(&record, record_at(2)).expect("copy it over this image's zone 2");
    let error = Image::open(&path).expect_err("refused").to_string();
    assert!(error.contains("the record of zone 2 comes from another image"), "{error}");

    std::fs::write(path.join("zones.meta"), &original).expect("restore");
    Image::open(&path).expect("the untouched journal opens");
}

#[test]
fn a_limit_missing_from_an_image_configuration_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    drop(Image::create(&path, StoreKind::File, config(), None, false).expect("create"));
    let text = std::fs::read_to_string(path.join("config.toml")).expect("read config");
    assert!(text.contains("max-open = 2"), "{text}");
    let without: String = text.lines().filter(|line| !line.starts_with("max-open")).map(|l| format!("{l}\n")).collect();
    std::fs::write(path.join("config.toml"), without).expect("delete the limit");
    let error = Image::open(&path).expect_err("refused").to_string();
    assert!(error.contains("is corrupt: [namespace] lacks max-open, which every image records"), "{error}");
    std::fs::write(path.join("config.toml"), text.replace("max-open = 2", "max-open = \"two\"")).expect("edit");
    let error = Image::open(&path).expect_err("refused").to_string();
    assert!(error.contains("line") && error.contains("namespace.max-open: invalid type: string \"two\""), "{error}");
}
