//! Compiles in every experiment of `experiments/` (a new experiment is one TOML file there, named as its id) and
//! every measurement of `reference/`, which presets name for calibration.

use std::path::Path;

fn main() {
    table("experiments", "toml", "experiments.rs", |name| name.trim_end_matches(".toml").to_string());
    table("reference", "csv", "references.rs", str::to_string);
}

/// Writes `out` in OUT_DIR: a slice of (key, text) for every `.ext` file of `dir` (from the workspace root), in
/// name order, keyed by `key` of its file name.
fn table(dir: &str, ext: &str, out: &str, key: impl Fn(&str) -> String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(dir);
    println!("cargo:rerun-if-changed={}", path.display());
    let mut names: Vec<String> = std::fs::read_dir(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .filter_map(|entry| {
            let file = entry.expect("a directory entry").path();
            let matches = file.extension().is_some_and(|found| found == ext);
            matches.then(|| file.file_name().expect("a file name").to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    let entries: String = names
        .iter()
        .map(|name| {
            let key = key(name);
            format!("({key:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../../{dir}/{name}\"))),\n")
        })
        .collect();
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join(out);
    std::fs::write(out, format!("&[\n{entries}]\n")).expect("OUT_DIR is writable");
}
