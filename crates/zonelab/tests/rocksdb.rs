//! Real RocksDB (Debian's 7.8.3: db_bench and ldb, unmodified) on zonelab through the FileSystem plugin
//! (`rocksdb/zonelab_fs.cc`, loaded with LD_PRELOAD, `--fs_uri=zonelab://IMAGE`): a database written, overwritten
//! and reopened by db_bench reads back whole and agrees key for key with ldb; a db_bench killed with SIGKILL
//! during synced writes loses no synced key; the YCSB driver (`rocksdb/ycsb.cc`) loads and runs workloads A to F;
//! and `zonelab fs fsck` finds the file system consistent after each.
//! Without the tools a test stops early, except under CI=true, where it fails.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{image_created_with, ok, TestImage};

fn have_rocksdb() -> bool {
    let found = ["db_bench", "ldb"].iter().all(|tool| Command::new(tool).arg("--help").output().is_ok())
        && Path::new("/usr/include/rocksdb/file_system.h").exists();
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and RocksDB missing: .ci/run must install librocksdb-dev and rocksdb-tools"
        );
        eprintln!("skipped: RocksDB (db_bench, ldb, librocksdb-dev) not installed");
    }
    found
}

/// The plugin, built once for this test binary against the test profile's libzonelab.so.
fn plugin() -> &'static Path {
    static PLUGIN: OnceLock<PathBuf> = OnceLock::new();
    PLUGIN.get_or_init(|| {
        // In the target directory's scratch space, rebuilt in place each run: nothing is left in /tmp.
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("zonelab-rocksdb-plugin");
        zonelab_bench::realdb::build_plugin(Some(&out), "test").unwrap_or_else(|error| panic!("{error}"))
    })
}

/// A RocksDB tool on `image` through the plugin.
fn tool(name: &str, image: &TestImage, args: &[&str]) -> Command {
    tool_with(name, image, "", args)
}

/// A RocksDB tool on `image` through the plugin, with mount options (`?key=value&...`).
fn tool_with(name: &str, image: &TestImage, options: &str, args: &[&str]) -> Command {
    let mut command = Command::new(name);
    command.env("LD_PRELOAD", plugin()).arg(format!("--fs_uri=zonelab://{}{options}", image.s())).args(args);
    command
}

fn run(mut command: Command) -> Output {
    let output = command.output().expect("run a RocksDB tool");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Small memtables and SST files, so that a few MiB flush and compact many times.
const SMALL_LSM: [&str; 4] = [
    "--write_buffer_size=262144",
    "--target_file_size_base=262144",
    "--max_bytes_for_level_base=1048576",
    "--compression_type=none",
];

/// A db_bench key as an integer: db_bench writes 16-byte keys whose first 8 bytes are the number, big-endian.
fn key_number(hex: &str) -> u64 {
    u64::from_str_radix(&hex[2..18], 16).expect("a hex key")
}

/// Every key of the database, in the order ldb scans them.
fn scanned_keys(image: &TestImage) -> Vec<u64> {
    let output = run(tool("ldb", image, &["--db=/rocksdbtest/dbbench", "scan", "--key_hex"]));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| key_number(line.split(" : ").next().expect("key")))
        .collect()
}

fn fsck(image: &TestImage) {
    let report = ok(&["fs", "fsck", image.s()]);
    assert!(report.contains("clean"), "fsck: {report}");
}

/// 64 zones of 4 MiB on the instant preset (no flash time: what is tested is the file system, not the model).
fn rocksdb_image() -> TestImage {
    image_created_with(&["--preset", "instant", "--zones", "64", "--zone-size", "4MiB"])
}

#[test]
fn db_bench_writes_overwrites_and_reopens_and_ldb_agrees_on_every_key() {
    if !have_rocksdb() {
        return;
    }
    let image = rocksdb_image();
    let num = 20_000;
    let n = format!("--num={num}");
    // fillrandom first: fillseq then destroys that database (db_bench's fresh_db) through the plugin.
    let mut fill = tool("db_bench", &image, &["--benchmarks=fillrandom,fillseq,overwrite", &n, "--value_size=100"]);
    fill.args(SMALL_LSM);
    let output = run(fill);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("fillrandom") && text.contains("fillseq") && text.contains("overwrite"), "{text}");

    let mut read =
        tool("db_bench", &image, &["--benchmarks=readrandom", "--use_existing_db=1", &n, "--value_size=100"]);
    read.args(SMALL_LSM);
    let text = String::from_utf8_lossy(&run(read).stdout).into_owned();
    assert!(text.contains(&format!("({num} of {num} found)")), "every key found after reopening: {text}");

    let keys = scanned_keys(&image);
    assert_eq!(keys, (0..num).collect::<Vec<u64>>(), "ldb scans exactly the keys db_bench wrote, in order");
    fsck(&image);
    // The small LSM did flush and compact: SST files on the device, not only a WAL.
    let listing = ok(&["fs", "ls", image.s()]);
    assert!(listing.matches(".sst").count() >= 2, "{listing}");
    // A file system with files is formatted only on purpose.
    let refused = common::zonelab(&["fs", "mkfs", image.s()]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("holds a file system with files; pass --force"), "{}", refused.stderr);
}

#[test]
fn synced_writes_survive_a_sigkill_of_db_bench() {
    if !have_rocksdb() {
        return;
    }
    sigkill_during_synced_fillseq("");
}

/// The WAL through the WAL library, both designs: what a synced put returned from is recovered from the log's
/// zones by a later process (ldb, mounted without the option: a WAL file's design is in the journal), and
/// `zonelab fs ls` shows the log's zones.
#[test]
fn synced_writes_through_zwal_and_the_conventional_wal_survive_a_sigkill() {
    if !have_rocksdb() {
        return;
    }
    for design in ["zwal", "conventional"] {
        let image = sigkill_during_synced_fillseq(&format!("?wal={design}&wal_buffer_bytes=8192&host=io_uring_cmd"));
        let listing = ok(&["fs", "ls", image.s()]);
        assert!(listing.contains(&format!("wal={design}")), "{design}: {listing}");
    }
}

/// Kills db_bench's synced fillseq after 3,000 acknowledged puts; checks what ldb finds; returns the image.
fn sigkill_during_synced_fillseq(options: &str) -> TestImage {
    let image = rocksdb_image();
    let mut fill = tool_with(
        "db_bench",
        &image,
        options,
        &["--benchmarks=fillseq", "--sync=1", "--num=1000000", "--value_size=100", "--stats_interval=0"],
    );
    fill.args(SMALL_LSM).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = fill.spawn().expect("start db_bench");
    // db_bench reports "... finished N ops" as it goes; kill it once it has passed a few thousand synced puts.
    let mut stderr = child.stderr.take().expect("stderr");
    let mut seen = Vec::new();
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    while finished_ops(&seen) < 3000 && started.elapsed() < Duration::from_secs(120) {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(read) => seen.extend_from_slice(&buf[..read]),
        }
    }
    child.kill().expect("SIGKILL db_bench");
    let _ = child.wait();
    let acknowledged = finished_ops(&seen);
    assert!(acknowledged >= 3000, "db_bench made progress before the kill: {}", String::from_utf8_lossy(&seen));

    let keys = scanned_keys(&image);
    let expected: Vec<u64> = (0..keys.len() as u64).collect();
    assert_eq!(keys, expected, "{options}: what survived is a prefix of fillseq's keys, with no hole");
    assert!(
        keys.len() as u64 >= acknowledged,
        "{options}: {} keys survived, but db_bench had finished {acknowledged} synced puts",
        keys.len()
    );
    fsck(&image);
    image
}

/// The largest "... finished N ops" db_bench has printed.
fn finished_ops(stderr: &[u8]) -> u64 {
    String::from_utf8_lossy(stderr)
        .split("... finished ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// An operation's share of a workload: (operation, lowest, highest).
type Share = (&'static str, f64, f64);

/// One zonelab_ycsb phase on `image`; its JSON.
fn ycsb(image: &TestImage, args: &[&str]) -> serde_json::Value {
    let driver = plugin().with_file_name("zonelab_ycsb");
    let mut command = Command::new(driver);
    command.arg("--db=/ycsb").arg(format!("--fs_uri=zonelab://{}", image.s())).args(args);
    let output = run(command);
    serde_json::from_slice(&output.stdout).expect("zonelab_ycsb prints JSON")
}

#[test]
fn ycsb_loads_and_runs_every_core_workload_through_the_plugin() {
    if !have_rocksdb() {
        return;
    }
    let image = rocksdb_image();
    let load = ycsb(&image, &["--workload=a", "--phase=load", "--records=3000", "--threads=2"]);
    assert_eq!(load["jobs"][0]["insert"]["total_ios"], 3000);
    // Each workload's mix, as shares of its 2,000 operations: (operation, lowest share, highest share).
    let mixes: [(&str, &[Share]); 6] = [
        ("a", &[("read", 0.45, 0.55), ("update", 0.45, 0.55)]),
        ("b", &[("read", 0.92, 0.98), ("update", 0.02, 0.08)]),
        ("c", &[("read", 1.0, 1.0)]),
        ("d", &[("read", 0.92, 0.98), ("insert", 0.02, 0.08)]),
        ("e", &[("scan", 0.92, 0.98), ("insert", 0.02, 0.08)]),
        ("f", &[("read", 0.45, 0.55), ("read_modify_write", 0.45, 0.55)]),
    ];
    for (workload, shares) in mixes {
        let workload_arg = format!("--workload={workload}");
        let result =
            ycsb(&image, &[&workload_arg, "--phase=run", "--records=3000", "--operations=2000", "--threads=2"]);
        let job = &result["jobs"][0];
        assert_eq!((job["ops"].as_u64(), job["errors"].as_u64()), (Some(2000), Some(0)), "{workload}: {job}");
        for (op, low, high) in shares {
            let share = job[op]["total_ios"].as_f64().unwrap_or(0.0) / 2000.0;
            assert!((*low..=*high).contains(&share), "workload {workload}: {op} is {share} of the operations");
            assert_eq!(job[op]["not_found"], 0, "workload {workload}: every record read was loaded before");
        }
    }
    // The same seed draws the same operations.
    let args = ["--workload=b", "--phase=run", "--records=3000", "--operations=500", "--threads=1", "--seed=9"];
    let (first, second) = (ycsb(&image, &args), ycsb(&image, &args));
    assert_eq!(first["jobs"][0]["update"]["total_ios"], second["jobs"][0]["update"]["total_ios"]);
    fsck(&image);
}

#[test]
fn zonelab_stats_prints_the_device_and_file_system_counters_at_exit() {
    if !have_rocksdb() {
        return;
    }
    let image = rocksdb_image();
    let mut command = Command::new(plugin().with_file_name("zonelab_ycsb"));
    command.env("ZONELAB_STATS", "1").arg("--db=/ycsb").arg(format!("--fs_uri=zonelab://{}", image.s())).args([
        "--workload=a",
        "--phase=both",
        "--records=500",
        "--operations=500",
        "--sync=1",
    ]);
    let stderr = String::from_utf8_lossy(&run(command).stderr).into_owned();
    let line = stderr.lines().find(|line| line.starts_with("zonelab stats ")).unwrap_or_else(|| panic!("{stderr}"));
    let stats: serde_json::Value =
        serde_json::from_str(line.split_once(": ").expect("uri: json").1).expect("the counters are JSON");
    assert!(stats["fs"]["journal_commits"].as_u64() > Some(500), "a synced put is a journal commit: {stats}");
    assert!(stats["device"]["counters"]["writes"].as_u64() > Some(500), "{stats}");
    assert_eq!(stats["reset_load"]["resets"], 0);
}

#[test]
fn a_uri_that_names_no_device_is_refused_with_a_message() {
    if !have_rocksdb() {
        return;
    }
    let output = Command::new("db_bench")
        .env("LD_PRELOAD", plugin())
        .args(["--fs_uri=zonelab://", "--benchmarks=fillseq", "--num=10"])
        .output()
        .expect("run db_bench");
    assert!(!output.status.success());
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("the URI names no device"), "{text}");
}
