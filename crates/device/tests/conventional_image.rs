//! A device image keeps the conventional namespace's data beside the zoned namespace's (`conventional.data`),
//! reached as `PATH,ns=ID`: what one process wrote another reads back, and its FTL reads those pages from flash
//! while pages never written cost no flash read. The FTL's own state (`ftl.state`) outlives the process too, so
//! a preconditioned namespace stays in its steady state.

use zonelab_device::{Built, DeviceBuilder, DeviceConfig, DeviceSpec, HostPath, StoreChoice};
use zonelab_zns::{Command, Image, StoreKind};

fn open(spec: &str) -> Built {
    DeviceBuilder::new(DeviceSpec::parse(spec)).host(HostPath::Spdk).build().expect("open image")
}

/// Device time of a 4 KiB read of `slba` on namespace 1, and what it read.
fn read(built: &mut Built, slba: u64, at: u64) -> (u64, Vec<u8>) {
    let mut buf = vec![0u8; 4096];
    let submitted = built.device.submit_to(1, at, Command::Read { slba, buf: &mut buf });
    submitted.result.expect("read");
    (submitted.complete_ns - at, buf)
}

/// A file-store image of the ZN540 model with `overrides`, in `dir`.
fn zn540_image(dir: &std::path::Path, overrides: &[&str]) -> std::path::PathBuf {
    let overrides: Vec<String> = overrides.iter().map(|o| o.to_string()).collect();
    let config = DeviceConfig::load("zn540", &overrides).expect("preset");
    let path = dir.join("img");
    let model: toml::Table = toml::from_str(&config.to_toml()).expect("model");
    Image::create(&path, StoreKind::File, config.namespace.clone(), Some(model), false).expect("create");
    path
}

/// A conventional namespace small enough to age in a test, with room for garbage collection.
const AGED: [&str; 3] = ["namespace.zones=4", "conventional.capacity=1GiB", "conventional.over-provisioning=0.28"];

#[test]
fn an_image_keeps_the_conventional_namespace_s_data_and_maps_it_on_reopening() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = zn540_image(dir.path(), &["namespace.zones=4"]);
    let spec = format!("{},ns=1", path.display());
    // 1 MiB, so that the pages read back below lie in whole program units, not in the write buffer.
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
    {
        let mut built = open(&spec);
        assert_eq!(built.device.attached_nsid(), 1);
        for (at, half) in (1000..).step_by(128).zip(data.chunks(512 << 10)) {
            let written = built.device.submit(0, Command::Write { slba: at, data: half });
            written.result.expect("write a half of it");
        }
        // No flush: the process ends as a killed one would, and the data file already holds the write.
    }
    assert!(path.join("conventional.data").exists());
    let mut reopened = open(&spec);
    let at = 1_000_000_000;
    let (written_ns, first) = read(&mut reopened, 1000, at);
    let (_, second) = read(&mut reopened, 1001, 2 * at);
    assert_eq!([first, second].concat(), data[..8192], "the data came back");
    let (unwritten_ns, zeros) = read(&mut reopened, 500_000, 3 * at);
    assert!(zeros.iter().all(|&byte| byte == 0));
    assert!(
        written_ns > unwritten_ns + 20_000,
        "a written page is sensed from flash ({written_ns} ns), an unwritten one is not ({unwritten_ns} ns)"
    );
    let stats = reopened.device.stats();
    let cnv = stats.conventional.expect("the image's device has its conventional namespace");
    assert!(cnv.free_blocks < cnv.blocks, "the rebuilt FTL holds the written pages: {cnv:?}");
    drop(reopened);
    let Err(error) = DeviceBuilder::new(DeviceSpec::parse(&format!("{},ns=5", path.display()))).build() else {
        panic!("the image has no namespace 5")
    };
    assert!(error.to_string().contains("no namespace 5 (its namespaces: 1, 2)"), "{error}");
}

/// 4 KiB writes at seeded places over namespace 1's first `pages` pages, from device time `from`.
fn random_writes(built: &mut Built, pages: u64, count: u64, from: u64) {
    let data = vec![0x3cu8; 4096];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..count {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let written =
            built.device.submit_to(1, from + i * 100_000, Command::Write { slba: state % pages, data: &data });
        written.result.expect("write");
    }
}

#[test]
fn an_image_keeps_the_conventional_namespace_s_ftl_state_so_its_steady_state_outlives_the_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = zn540_image(dir.path(), &AGED);
    let spec = format!("{},ns=1", path.display());
    let pages = (1 << 30) / 4096;
    // The image's device and a twin in memory reach the same steady state; the image's closes in between.
    {
        let mut built = open(&spec);
        built.device.precondition_conventional(1, 7).expect("precondition");
    }
    let saved = std::fs::read(path.join("ftl.state")).expect("the closing device saved its FTL state");
    let twin_spec = format!("preset:zn540,{},ns=1", AGED.join(","));
    let mut twin = DeviceBuilder::new(DeviceSpec::parse(&twin_spec))
        .host(HostPath::Spdk)
        .store(StoreChoice::Memory)
        .build()
        .expect("twin");
    twin.device.precondition_conventional(1, 7).expect("precondition");
    let mut reopened = open(&spec);
    let free = |built: &Built| built.device.stats().conventional.expect("namespace 1").free_blocks;
    assert_eq!(free(&reopened), free(&twin), "the reopened FTL has the twin's free blocks");
    random_writes(&mut reopened, pages, 20_000, 0);
    random_writes(&mut twin, pages, 20_000, 0);
    let (ftl, twin_ftl) =
        (reopened.device.stats().conventional.expect("ns 1").ftl, twin.device.stats().conventional.expect("ns 1").ftl);
    assert!(ftl.gc_pages_moved > 0, "garbage collection ran at once, as in a steady state: {ftl:?}");
    assert_eq!(ftl, twin_ftl, "the same writes cost the same garbage collection as on the twin");
    drop(reopened);
    // A state that does not check is refused, naming the file and what is wrong, and the image is left as it was.
    let mut damaged = std::fs::read(path.join("ftl.state")).expect("saved again");
    assert_ne!(damaged, saved, "the writes changed the state");
    damaged[100] ^= 0x10;
    std::fs::write(path.join("ftl.state"), &damaged).expect("damage it");
    let Err(error) = DeviceBuilder::new(DeviceSpec::parse(&spec)).build() else { panic!("a damaged FTL state") };
    let message = error.to_string();
    assert!(message.contains("ftl.state") && message.contains("checksum"), "{message}");
    assert_eq!(std::fs::read(path.join("ftl.state")).expect("still there"), damaged);
}

/// `IMAGE,ns=1,precondition=random:N` brings an image's conventional namespace to its steady state, which the
/// image then keeps; a bad value is refused by name before anything changes.
#[test]
fn an_image_spec_preconditions_the_conventional_namespace_and_the_image_keeps_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = zn540_image(dir.path(), &AGED);
    let Err(error) =
        DeviceBuilder::new(DeviceSpec::parse(&format!("{},ns=1,precondition=twice", path.display()))).build()
    else {
        panic!("a bad precondition")
    };
    assert!(error.to_string().contains("precondition=twice: it is sequential, random or random:N"), "{error}");
    assert!(!path.join("ftl.state").exists(), "the refused spec changed nothing");
    let free = |built: &Built| built.device.stats().conventional.expect("namespace 1").free_blocks;
    let aged = free(&open(&format!("{},ns=1,precondition=random:2", path.display())));
    assert!(path.join("ftl.state").exists(), "the image kept the steady state");
    let reopened = open(&format!("{},ns=1", path.display()));
    assert_eq!(free(&reopened), aged, "reopened as it was left");
    assert!(aged < reopened.device.stats().conventional.expect("namespace 1").blocks);
}
