//! `include/zonelab.h` is generated from the library by cbindgen and committed; this test fails when it is
//! stale (run `ZONELAB_BLESS=1 cargo test -p zonelab-capi --test header` to regenerate it).

use std::path::Path;

#[test]
fn the_committed_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let header = crate_dir.join("../../include/zonelab.h");
    if std::env::var_os("ZONELAB_BLESS").is_some() {
        std::fs::write(&header, &generated).expect("write the header");
    }
    let committed = std::fs::read(&header).unwrap_or_default();
    assert!(
        committed == generated,
        "include/zonelab.h is stale: run ZONELAB_BLESS=1 cargo test -p zonelab-capi --test header"
    );
}
