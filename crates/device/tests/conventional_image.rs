//! A device image keeps the conventional namespace's data beside the zoned namespace's (`conventional.data`),
//! reached as `PATH,ns=ID`: what one process wrote another reads back, and its FTL, rebuilt from the data,
//! reads those pages from flash while pages never written cost no flash read.

use zonelab_device::{Built, DeviceBuilder, DeviceConfig, DeviceSpec, HostPath};
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

#[test]
fn an_image_keeps_the_conventional_namespace_s_data_and_maps_it_on_reopening() {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".into()]).expect("preset");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let model: toml::Table = toml::from_str(&config.to_toml()).expect("model");
    Image::create(&path, StoreKind::File, config.namespace.clone(), Some(model), false).expect("create");
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
