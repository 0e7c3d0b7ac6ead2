//! Compiles in every preset of `presets/`: a new preset is one TOML file there, named as the preset.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("the presets directory")
        .map(|entry| entry.expect("a preset file").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .map(|path| path.file_stem().expect("a file name").to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut table = String::from("&[\n");
    for name in &names {
        writeln!(
            table,
            "    ({name:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../../presets/{name}.toml\"))),"
        )
        .expect("a string takes writes");
    }
    table.push_str("]\n");
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("presets.rs");
    std::fs::write(out, table).expect("OUT_DIR is writable");
}
