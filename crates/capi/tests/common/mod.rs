//! Building C programs against the library in the tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compiles `source` (relative to the repository root) with the system C compiler (`CC`, else `cc`) against
/// the committed header and `libzonelab.so`, which is built first with the test profile so that it is the
/// current code; returns the program, in `out`.
pub fn compile_c(source: &str, out: &Path) -> PathBuf {
    let root = root();
    // `target/<profile>`, where cargo puts libzonelab.so beside the test binaries' `deps/`.
    let libs = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().and_then(Path::parent).map(Path::to_path_buf))
        .expect("target/<profile>/deps/<test>");
    let built = Command::new(env!("CARGO"))
        .args(["build", "--profile", "test", "--lib", "-p", "zonelab-capi", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .output()
        .expect("run cargo");
    assert!(built.status.success(), "building libzonelab.so failed:\n{}", String::from_utf8_lossy(&built.stderr));
    assert!(libs.join("libzonelab.so").exists(), "cargo builds libzonelab.so in {}", libs.display());
    let program = out.join(Path::new(source).file_stem().expect("a file name"));
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let compiled = Command::new(&compiler)
        .arg(root.join(source))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg("-L")
        .arg(&libs)
        .arg(format!("-Wl,-rpath,{}", libs.display()))
        .args(["-lzonelab", "-lpthread", "-o"])
        .arg(&program)
        .output()
        .unwrap_or_else(|error| panic!("the C compiler {compiler:?} must be installed: {error}"));
    assert!(compiled.status.success(), "compiling {source} failed:\n{}", String::from_utf8_lossy(&compiled.stderr));
    program
}
