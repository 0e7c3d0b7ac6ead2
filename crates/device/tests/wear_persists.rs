//! Wear accumulates over an image's life: a device over an image saves the flash model's state (erase counts,
//! ReZNS's mapping) when it is dropped, and the next device over the image takes it up. A mapping saved against
//! other data than the image now holds is not taken, and a device that changed nothing leaves the image alone.

use std::path::{Path, PathBuf};

use zonelab_device::{Built, DeviceBuilder, DeviceConfig, DeviceSpec, HostPath};
use zonelab_media::Restored;
use zonelab_zns::{Command, Image, StoreKind, ZoneSendAction};

fn image(dir: &Path, preset: &str, overrides: &[&str]) -> PathBuf {
    let overrides: Vec<String> = overrides.iter().map(|text| text.to_string()).collect();
    let config = DeviceConfig::load(preset, &overrides).expect("preset");
    let model: toml::Table = toml::from_str(&config.to_toml()).expect("model");
    let path = dir.join(preset);
    Image::create(&path, StoreKind::Null, config.namespace, Some(model), false).expect("create");
    path
}

fn open(path: &Path) -> Built {
    DeviceBuilder::new(DeviceSpec::Image(path.to_path_buf())).host(HostPath::Spdk).build().expect("open image")
}

/// Writes `blocks` zeroed blocks into `zone` of the device, then resets it, at device time `at`.
fn write_and_reset(built: &mut Built, zone: u32, blocks: u64, at: u64) {
    let slba = built.device.namespace().geometry().zone_start_lba(zone);
    built.device.submit(at, Command::WriteZeroes { slba, nlb: blocks }).result.expect("write");
    let reset = Command::ZoneManagementSend { slba, action: ZoneSendAction::Reset, select_all: false };
    built.device.submit(at + 1_000_000_000, reset).result.expect("reset");
}

#[test]
fn erase_counts_accumulate_from_one_device_to_the_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = image(dir.path(), "zn540", &["namespace.zones=4"]);
    let zone_cap_lba = {
        let mut first = open(&path);
        let cap = first.device.namespace().geometry().zone_cap_lba;
        write_and_reset(&mut first, 1, cap, 0);
        cap
    };
    let once = open(&path).device.media().erase_summary().erases;
    assert!(once > 0, "a reset of a full zone erases blocks");
    assert!(!path.join("media.json.partial").exists());
    let mut second = open(&path);
    assert_eq!(second.device.media_restored(), Some(&Ok(Restored::Everything)));
    write_and_reset(&mut second, 2, zone_cap_lba, 0);
    drop(second);
    assert_eq!(open(&path).device.media().erase_summary().erases, 2 * once, "the second life adds to the first");
}

#[test]
fn a_device_that_changed_nothing_leaves_the_image_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = image(dir.path(), "zn540", &["namespace.zones=4"]);
    let mut built = open(&path);
    let mut buf = vec![0u8; 4096];
    let slba = built.device.namespace().geometry().zone_start_lba(3);
    built.device.submit(0, Command::Read { slba, buf: &mut buf }).result.expect("a read of an empty zone");
    let off_the_write_pointer = Command::WriteZeroes { slba: slba + 8, nlb: 8 };
    assert!(built.device.submit(0, off_the_write_pointer).result.is_err(), "Zone Invalid Write");
    drop(built);
    assert!(!path.join("media.json").exists(), "a read and a failed write change nothing on flash");
}

#[test]
fn the_rezns_mapping_is_taken_up_only_over_the_data_it_maps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = image(dir.path(), "nvmevirt-rezns", &["namespace.zones=8", "media.mapping.policy=rezns"]);
    let stats = {
        let mut first = open(&path);
        // A quarter of zone 0, then a reset: ReZNS keeps the rest of its physical zone as a spare.
        let quarter = first.device.namespace().geometry().zone_cap_lba / 4;
        write_and_reset(&mut first, 0, quarter, 0);
        let stats = first.device.media().erase_summary().renewable.expect("rezns");
        assert_eq!((stats.renewed_resets, stats.spare_zones), (1, 1));
        stats
    };
    let reopened = open(&path);
    assert_eq!(reopened.device.media_restored(), Some(&Ok(Restored::Everything)));
    assert_eq!(reopened.device.media().erase_summary().renewable, Some(stats.clone()), "spares and counts kept");
    reopened.device.media().check_mapping().expect("the restored mapping holds");
    drop(reopened);

    // Data written behind the device's back (straight into the namespace): the saved mapping no longer fits.
    {
        let mut image = Image::open(&path).expect("image");
        image.namespace_mut().write_zeroes(0, 8).expect("write");
    }
    let stale = open(&path);
    assert_eq!(stale.device.media_restored(), Some(&Ok(Restored::EraseCountsOnly)));
    assert_eq!(stale.device.media().erase_summary().renewable.expect("rezns").spare_zones, 0, "mapped afresh");
    stale.device.media().check_mapping().expect("a fresh mapping holds");
}
