//! The C example (`examples/c/zonelab_example.c`) is compiled with the system C compiler against the committed
//! header and the shared library (built here with the test profile, so it is the current code), then run: it exercises every function, the error paths and a
//! real-time device from two threads, and exits 0 only when every check passes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`, where cargo puts `libzonelab.so` beside the test binaries' `deps/`.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>").to_path_buf()
}

#[test]
fn the_c_example_compiles_and_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let libs = library_dir();
    let built = Command::new(env!("CARGO"))
        .args(["build", "--profile", "test", "--lib", "-p", "zonelab-capi", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .output()
        .expect("run cargo");
    assert!(built.status.success(), "building libzonelab.so failed:\n{}", String::from_utf8_lossy(&built.stderr));
    assert!(libs.join("libzonelab.so").exists(), "cargo builds libzonelab.so in {}", libs.display());
    let out = tempfile::tempdir().expect("tempdir");
    let program = out.path().join("zonelab_example");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let compiled = Command::new(&compiler)
        .arg(root.join("examples/c/zonelab_example.c"))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg("-L")
        .arg(&libs)
        .arg(format!("-Wl,-rpath,{}", libs.display()))
        .args(["-lzonelab", "-lpthread", "-o"])
        .arg(&program)
        .output()
        .unwrap_or_else(|error| panic!("the C compiler {compiler:?} must be installed: {error}"));
    assert!(
        compiled.status.success(),
        "compiling the C example failed:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let ran = Command::new(&program).output().expect("run the C example");
    assert!(
        ran.status.success(),
        "the C example failed:\n{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(String::from_utf8_lossy(&ran.stdout).contains("all checks passed"));
}
