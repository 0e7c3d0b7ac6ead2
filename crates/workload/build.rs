//! Compiles in every experiment of `experiments/`: a new experiment is one TOML file there, named as its id.

use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut ids: Vec<String> = std::fs::read_dir(&dir)
        .expect("the experiments directory")
        .filter_map(|entry| {
            let path = entry.expect("an experiment file").path();
            let toml = path.extension().is_some_and(|ext| ext == "toml");
            toml.then(|| path.file_stem().expect("a file name").to_string_lossy().into_owned())
        })
        .collect();
    ids.sort();
    let entries: String = ids
        .iter()
        .map(|id| {
            format!(
                "({id:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../../experiments/{id}.toml\"))),\n"
            )
        })
        .collect();
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("experiments.rs");
    std::fs::write(out, format!("&[\n{entries}]\n")).expect("OUT_DIR is writable");
}
