//! Crash consistency through the C library: a C program appends self-describing blocks to an image and prints
//! each acknowledged LBA; it is killed with SIGKILL at random instants, and after every kill the image must
//! open (its invariants hold) and every acknowledged block must read back as written. The instants come from
//! a seed printed on failure (`ZONELAB_CRASH_SEED=0x...` replays the same kill delays).

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use zonelab_device::DeviceConfig;
use zonelab_zns::{Image, StoreKind};

#[test]
fn killed_while_appending_through_the_c_library_the_image_keeps_every_acknowledged_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = common::compile_c("crates/capi/tests/c/crash_appender.c", dir.path());
    let config = DeviceConfig::load(
        "zn540",
        &["namespace.zones=64".into(), "namespace.zone-size=\"1MiB\"".into(), "namespace.zone-cap=\"1MiB\"".into()],
    )
    .expect("preset");
    let image = dir.path().join("img");
    let model: toml::Table = toml::from_str(&config.to_toml()).expect("model");
    drop(Image::create(&image, StoreKind::File, config.namespace.clone(), Some(model), false).expect("create"));
    let seed = std::env::var("ZONELAB_CRASH_SEED")
        .ok()
        .and_then(|text| u64::from_str_radix(text.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0xc0ff_ee00);
    let mut rng = seed;
    let mut acknowledged: Vec<u64> = Vec::new();
    for kill in 0..8 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay_ms = 10 + rng % 40;
        let mut child = Command::new(&program)
            .arg(&image)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the C program");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let mut printed = String::new();
        child.stdout.take().expect("stdout").read_to_string(&mut printed).expect("read stdout");
        let output = child.wait_with_output().expect("reap");
        assert!(
            output.stderr.is_empty(),
            "kill {kill} (ZONELAB_CRASH_SEED={seed:#x}): {}",
            String::from_utf8_lossy(&output.stderr)
        );
        acknowledged.extend(printed.lines().filter_map(|line| line.parse::<u64>().ok()));
        let mut opened = Image::open(&image).unwrap_or_else(|error| {
            panic!("after kill {kill} at {delay_ms} ms (ZONELAB_CRASH_SEED={seed:#x}): {error}")
        });
        let namespace = opened.namespace_mut();
        let lba_bytes = namespace.geometry().lba_size as usize;
        let mut block = vec![0u8; lba_bytes];
        for &lba in &acknowledged {
            namespace.read(lba, &mut block).expect("read an acknowledged block");
            let holds_its_lba =
                block.chunks(8).all(|word| u64::from_le_bytes(word.try_into().unwrap_or([0; 8])) == lba);
            assert!(
                holds_its_lba,
                "after kill {kill} at {delay_ms} ms (ZONELAB_CRASH_SEED={seed:#x}): acknowledged LBA {lba} lost"
            );
        }
    }
    assert!(acknowledged.len() > 100, "the program got to append: {} blocks", acknowledged.len());
}
