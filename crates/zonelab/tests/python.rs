//! zonelab's Python package (`python/`, PyO3 built by maturin): its tests (`python/tests`, pytest) run against
//! this build's `zonelab` binary: `zonelab.fio` against `zonelab fio`'s JSON, `zonelab.sweep` against `zonelab
//! sweep`'s table, locally and on a Dask LocalCluster, resumption after a kill, failure rows, experiments, the
//! device object and the matplotlib example. `.ci/run` installs the package (`pip install ./python`) and what its
//! tests use (pytest, pandas, pyarrow, Dask, matplotlib); without them this test stops early, except under
//! CI=true, where it fails.

use std::path::Path;
use std::process::Command;

#[test]
fn the_python_package_passes_its_tests() {
    let probe = Command::new("python3")
        .args(["-c", "import zonelab, pytest, pandas, pyarrow, distributed, matplotlib"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !probe {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and the zonelab Python package or its test dependencies missing: .ci/run must install them"
        );
        eprintln!("skipped: the zonelab Python package (pip install ./python) or pytest, pyarrow, dask, matplotlib");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("python/tests"))
        .env("ZONELAB_BIN", env!("CARGO_BIN_EXE_zonelab"))
        .current_dir(env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("run pytest");
    assert!(
        output.status.success(),
        "python/tests failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
