//! Runs the `zonelab` binary the way a user does.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub raw_stdout: Vec<u8>,
}

pub fn zonelab(args: &[&str]) -> Run {
    let output: Output = Command::new(env!("CARGO_BIN_EXE_zonelab")).args(args).output().expect("run zonelab");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        raw_stdout: output.stdout,
    }
}

/// Runs and expects success; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let run = zonelab(args);
    assert_eq!(run.code, 0, "zonelab {args:?} failed: {}", run.stderr);
    run.stdout
}

/// Runs and expects the device to refuse with `status` (e.g. "Zone Invalid Write (0x1bc)"): exit 1.
pub fn refused(args: &[&str], status: &str) {
    let run = zonelab(args);
    assert_eq!(run.code, 1, "zonelab {args:?}: expected exit 1, stderr {}", run.stderr);
    assert_eq!(run.stderr.trim_end(), format!("error: {status}"), "zonelab {args:?}");
}

/// Runs and expects a usage or configuration error naming `needle`: exit 2.
pub fn usage_error(args: &[&str], needle: &str) {
    let run = zonelab(args);
    assert_eq!(run.code, 2, "zonelab {args:?}: expected exit 2, stderr {}", run.stderr);
    assert!(run.stderr.contains(needle), "zonelab {args:?}: stderr {:?} does not name {needle:?}", run.stderr);
}

pub struct TestImage {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl TestImage {
    pub fn s(&self) -> &str {
        self.path.to_str().expect("utf-8 path")
    }
}

/// A fresh image with `extra` create flags (8 zones of 1 MiB with 4 KiB LBAs unless overridden).
pub fn image(extra: &[&str]) -> TestImage {
    let mut flags = vec!["--zones", "8", "--zone-size", "1MiB"];
    flags.extend_from_slice(extra);
    image_created_with(&flags)
}

/// A fresh image made by `zonelab create IMAGE FLAGS...`.
pub fn image_created_with(flags: &[&str]) -> TestImage {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let mut args = vec!["create", path.to_str().expect("utf-8")];
    args.extend_from_slice(flags);
    ok(&args);
    TestImage { _dir: dir, path }
}

/// Every file of an image, for checking that a failed command left it as it was.
pub fn snapshot(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(path)
        .expect("read image dir")
        .map(|entry| {
            let entry = entry.expect("entry");
            (entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path()).expect("read"))
        })
        .collect();
    files.sort();
    files
}

pub fn report_json(image: &TestImage) -> serde_json::Value {
    serde_json::from_str(&ok(&["report", image.s(), "--format", "json"])).expect("json report")
}

pub fn zone_state(image: &TestImage, zone: usize) -> String {
    report_json(image)["zones"][zone]["state"].as_str().expect("state").to_string()
}

/// Whether real fio is here; under CI=true its absence is a failure, not a skip.
pub fn have_fio() -> bool {
    let found = Command::new("fio").arg("--version").output().is_ok_and(|out| out.status.success());
    if !found {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and fio missing: .ci/run must install it");
        eprintln!("skipped: fio not installed");
    }
    found
}
