//! The kernel's zoned stack on zonelab's block devices, in a Linux guest booted once for the whole file:
//! `tests/guest/kernel-stack.sh` runs inside it (sysfs, blkzone, fio, F2FS with kill -9 rounds, btrfs, ext4
//! with discard, libzbd, dm-linear, dm-flakey, null_blk as the reference for errors, fio's t/zbd suite) and
//! prints one line per case. The guest is Debian's Linux 6.12 under virtme-ng (`vng`), which sees this
//! machine's files and runs this build's binaries; it runs under QEMU's TCG unless `ZONELAB_GUEST_KVM=1` says
//! KVM works here (docs/kernel.md). Without the guest's tools the test stops early with a note, except under
//! CI=true, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The newest kernel image in /boot that has ublk's zoned devices (6.6 or newer), if any.
fn guest_kernel() -> Option<PathBuf> {
    let mut kernels: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir("/boot")
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let release = name.strip_prefix("vmlinuz-")?;
            let version: Vec<u32> =
                release.split(['.', '-', '+']).take(2).map_while(|part| part.parse().ok()).collect();
            (version.len() == 2 && version >= vec![6, 6]).then(|| (version, entry.path()))
        })
        .collect();
    kernels.sort();
    kernels.pop().map(|(_, path)| path)
}

fn on_path(tool: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|out| out.status.success())
}

/// The source of the installed fio (for its t/zbd suite), where .ci/run unpacks it: target/fio-src/fio-VERSION.
fn fio_source() -> Option<PathBuf> {
    let out = Command::new("fio").arg("--version").output().ok()?;
    let version = String::from_utf8_lossy(&out.stdout).trim().trim_start_matches("fio-").to_string();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../target/fio-src/fio-{version}"));
    dir.join("t/zbd/test-zbd-support").exists().then_some(dir)
}

/// The guest's kernel and fio's source when everything the guest needs is here; under CI=true a missing piece
/// is a failure.
fn guest() -> Option<(PathBuf, PathBuf)> {
    let kernel = guest_kernel();
    let fio_source = fio_source();
    let mut missing: Vec<&str> =
        ["vng", "qemu-system-x86_64", "busybox", "fio", "blkzone", "mkfs.f2fs", "mkfs.btrfs", "zbd", "dmsetup"]
            .into_iter()
            .filter(|tool| !on_path(tool))
            .collect();
    if kernel.is_none() {
        missing.push("a Linux 6.6+ kernel in /boot (linux-image-6.12-amd64)");
    }
    if fio_source.is_none() {
        missing.push("the installed fio's source in target/fio-src (apt-get source fio, as .ci/run does)");
    }
    if let (true, Some(kernel), Some(fio_source)) = (missing.is_empty(), kernel, fio_source) {
        return Some((kernel, fio_source));
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {missing:?} missing: .ci/run must install them");
    eprintln!("skipped: {missing:?} not installed");
    None
}

/// The directory of this build's `zonelab` and `zonelab-ublk`: `zonelab ublk` runs zonelab-ublk from beside
/// zonelab, and `cargo test --workspace` builds both there.
fn binaries() -> PathBuf {
    let ublk = PathBuf::from(env!("CARGO_BIN_EXE_zonelab-ublk"));
    let dir = ublk.parent().expect("the binary's directory").to_path_buf();
    assert!(
        dir.join("zonelab").exists(),
        "no zonelab beside {}: run the workspace's tests (cargo test --workspace)",
        ublk.display()
    );
    dir
}

#[test]
fn the_kernels_zoned_stack_runs_on_zonelabs_block_devices() {
    let Some((kernel, fio_source)) = guest() else { return };
    let bin = binaries();
    let work = tempfile::tempdir().expect("tempdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guest/kernel-stack.sh");
    let kvm = std::env::var("ZONELAB_GUEST_KVM").as_deref() == Ok("1");
    let mut vng = Command::new("vng");
    vng.arg("-r").arg(&kernel).args(["--memory", "3G", "--cpus", "2"]).arg("--rwdir").arg(work.path());
    if !kvm {
        vng.arg("--disable-kvm");
    }
    let command =
        format!("bash {} {} {} {}", script.display(), bin.display(), work.path().display(), fio_source.display());
    let started = std::time::Instant::now();
    let out = vng.arg("--").arg(command).output().expect("run vng");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "guest: {} under {} in {:.0} s\n{stdout}",
        kernel.display(),
        if kvm { "KVM" } else { "TCG" },
        started.elapsed().as_secs_f64()
    );
    if let Ok(log) = std::fs::read_to_string(work.path().join("server.log")) {
        eprintln!("server log:\n{log}");
    }
    let cases = std::fs::read_to_string(work.path().join("cases")).unwrap_or_default();
    eprintln!("cases:\n{cases}");
    assert!(cases.contains("CASES DONE"), "the guest did not run to the end: {}", String::from_utf8_lossy(&out.stderr));
    let cases: Vec<&str> = cases.lines().filter(|line| line.starts_with("CASE ")).collect();
    let failed: Vec<&&str> = cases.iter().filter(|line| !line.contains(": ok (")).collect();
    assert!(failed.is_empty(), "{} of {} cases failed: {failed:#?}", failed.len(), cases.len());
    for needed in [
        "sysfs-zoned",
        "blkzone-report",
        "fio-zbd-io_uring",
        "f2fs",
        "f2fs-crash-5",
        "btrfs",
        "ext4-discard",
        "ext4-recovery",
        "libzbd",
        "dm-linear",
        "dm-flakey",
        "queue-depth",
        "inject-while-served",
        "trace",
        "fio-zbd-suite",
    ] {
        // A case's name ends at its colon, or at the figures some cases give in parentheses.
        let ran = |line: &&str| [":", " ("].iter().any(|end| line.starts_with(&format!("CASE {needed}{end}")));
        assert!(cases.iter().any(ran), "case {needed} did not run");
    }
}
