//! The C example (`examples/c/zonelab_example.c`) is compiled with the system C compiler against the committed
//! header and the shared library (built with the test profile, so it is the current code), then run: it
//! exercises every function, the error paths and a real-time device from two threads, and exits 0 only when
//! every check passes.

mod common;

use std::process::Command;

#[test]
fn the_c_example_compiles_and_passes() {
    let out = tempfile::tempdir().expect("tempdir");
    let program = common::compile_c("examples/c/zonelab_example.c", out.path());
    let ran = Command::new(&program).output().expect("run the C example");
    assert!(
        ran.status.success(),
        "the C example failed:\n{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(String::from_utf8_lossy(&ran.stdout).contains("all checks passed"));
}
