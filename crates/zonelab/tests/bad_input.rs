//! The attack table: every defect of the bad-input audit (issue 15) as the command that showed it, with the exit
//! code and message zonelab now gives. A refused command must leave every image of its case byte for byte as it
//! was. Each case runs in its own directory; `IMG` and `DIR` in arguments stand for the case's image and
//! directory. Two defects need more than one command line and are pinned beside their code: concurrent
//! `create --force` (defect 1, `cli_errors.rs` races two of them) and a full host disk (defect 9,
//! `zns/tests/store_faults.rs` fails the store with ENOSPC).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use zonelab_zns::{Access, Image};

/// Who holds the case's image while the attack runs.
#[derive(Clone, Copy, PartialEq)]
enum Holder {
    Nobody,
    /// Another process drives it (an exclusive lock).
    Writer,
    /// Another process looks at it (a shared lock).
    Reader,
}

struct Attack {
    defect: u32,
    /// zonelab commands that build the case first.
    setup: &'static [&'static [&'static str]],
    /// A change to the case's files between setup and attack (a corruption, a permission).
    tamper: Option<fn(&Path)>,
    holder: Holder,
    args: &'static [&'static str],
    code: i32,
    /// Text the command prints: on stderr when it fails, on stdout or stderr when it succeeds.
    says: &'static str,
}

const fn attack(defect: u32, args: &'static [&'static str], code: i32, says: &'static str) -> Attack {
    Attack { defect, setup: &[], tamper: None, holder: Holder::Nobody, args, code, says }
}

/// Zone 0's journal record copied into zone 3's place.
fn copy_zone_0s_record_over_zone_3s(dir: &Path) {
    let journal = dir.join("img/zones.meta");
    let mut bytes = std::fs::read(&journal).expect("read");
    bytes.copy_within(4096..4096 + 64, 4096 + 3 * 64);
    std::fs::write(journal, bytes).expect("write");
}

const SMALL: &[&str] = &["create", "IMG", "--zones", "4", "--zone-size", "1MiB"];
const HUGE_ZONES: &[&str] = &["create", "IMG", "--zones", "2", "--zone-size", "4TiB", "--store", "null"];

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read");
    assert!(text.contains(from), "{} lacks {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).expect("write");
}

const ATTACKS: &[Attack] = &[
    // 1. The lock covers the whole replacement: the loser is told the image is in use.
    Attack {
        setup: &[SMALL],
        holder: Holder::Writer,
        ..attack(1, &["create", "IMG", "--force", "--zones", "8"], 1, "is in use by another zonelab process")
    },
    // 2. A failed replacement leaves the old image whole.
    Attack { setup: &[SMALL], ..attack(2, &["create", "IMG", "--force", "--zones", "4294967295"], 2, "invalid zones") },
    // 3. Zone indexes past the last zone, and zone x size beyond 64 bits.
    Attack { setup: &[HUGE_ZONES], ..attack(3, &["reset", "IMG", "--zone", "2147483649"], 1, "LBA Out of Range") },
    Attack {
        setup: &[HUGE_ZONES],
        ..attack(
            3,
            &["append", "IMG", "--zone", "2147483648", "--pattern", "1", "--blocks", "1"],
            1,
            "LBA Out of Range",
        )
    },
    attack(3, &["create", "IMG", "--zones", "1048576", "--zone-size", "16TiB"], 2, "overflow 64 bits"),
    // 4. A time-based job on a device with no latency ends, and says why.
    attack(
        4,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=randread", "--runtime=1", "--time_based"],
        0,
        "stopped after 1048576 I/Os in a row at one device instant",
    ),
    attack(
        4,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=randread", "--io_size=99999999p", "--runtime=1"],
        0,
        "stopped after 1048576 I/Os in a row at one device instant",
    ),
    // 5. Sizes are checked against documented limits before anything is allocated.
    attack(5, &["wal-bench", "--record-size=99999999p", "--records=1"], 2, "is 2^64 bytes or more"),
    attack(
        5,
        &["wal-bench", "--record-size=1p", "--records=1"],
        2,
        "record-size: 1024TiB is more than 64MiB, its limit",
    ),
    attack(
        5,
        &["create", "IMG", "--store", "null", "--zones", "4294967295", "--zone-size", "4k"],
        2,
        "is more than 1048576",
    ),
    attack(
        5,
        &["fio", "--name=j", "--filename=preset:zn540,zones=1000000000", "--rw=read", "--size=4k"],
        2,
        "is more than 1048576",
    ),
    Attack {
        setup: &[SMALL],
        ..attack(
            5,
            &["write", "IMG", "--lba", "0", "--pattern", "1", "--blocks", "1048576"],
            1,
            "Invalid Field in Command",
        )
    },
    // 6. Times out of range.
    attack(6, &["wal-bench", "--put-cost-us=1e14"], 2, "is not a time from 0 to 1000000 microseconds"),
    attack(6, &["wal-bench", "--put-cost-us=inf"], 2, "is not a time from 0 to 1000000 microseconds"),
    attack(6, &["wal-bench", "--put-cost-us=-1"], 2, "is not a time from 0 to 1000000 microseconds"),
    attack(6, &["wal-bench", "--put-cost-us=nan"], 2, "is not a time from 0 to 1000000 microseconds"),
    // 7. The demo replaces nothing and stops at the first failure.
    Attack { setup: &[SMALL], ..attack(7, &["demo", "--dir", "IMG"], 1, "already exists") },
    Attack {
        tamper: Some(|dir| std::fs::write(dir.join("img"), "a file").expect("write")),
        ..attack(7, &["demo", "--dir", "IMG"], 1, "is not a zonelab image")
    },
    // 8. Looking at an image shares it with other lookers; changing it waits for them.
    Attack { setup: &[SMALL], holder: Holder::Reader, ..attack(8, &["report", "IMG"], 0, "zone") },
    Attack { setup: &[SMALL], holder: Holder::Reader, ..attack(8, &["info", "IMG"], 0, "zones:        4 x 256 LBAs") },
    Attack {
        setup: &[SMALL],
        holder: Holder::Reader,
        ..attack(8, &["reset", "IMG", "--zone", "0"], 1, "is in use by another zonelab process")
    },
    // 9. Messages that name what is wrong.
    Attack {
        tamper: Some(|dir| {
            std::fs::write(dir.join("p.toml"), "name = \"p\"\n[namespace]\nzones = \"abc\"\n").expect("write")
        }),
        ..attack(
            9,
            &["create", "IMG", "--preset", "DIR/p.toml"],
            2,
            "namespace.zones: invalid type: string \"abc\", expected u32",
        )
    },
    Attack {
        tamper: Some(|dir| {
            std::fs::write(dir.join("p.toml"), "name = \"p\"\n[namespace]\nzone-size = true\n").expect("write")
        }),
        ..attack(
            9,
            &["create", "IMG", "--preset", "DIR/p.toml"],
            2,
            "namespace.zone-size: invalid type: boolean `true`, expected a size",
        )
    },
    Attack {
        tamper: Some(|dir| std::fs::write(dir.join("p.toml"), "name = \"p\"\nmedia = 3\n").expect("write")),
        ..attack(
            9,
            &["create", "IMG", "--preset", "DIR/p.toml"],
            2,
            "media: invalid type: integer `3`, expected a table",
        )
    },
    attack(
        9,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=read", "--size=4k", "--output-format=xml"],
        2,
        "\"xml\" is not",
    ),
    attack(9, &["bench", "sim", "--preset", "instant", "--runs", "1", "--commands", "100000"], 0, "zones enlarged"),
    attack(9, &["bench", "sim", "--workload", "randwrite"], 2, "no bench workload named \"randwrite\"; there are"),
    Attack {
        setup: &[SMALL],
        tamper: Some(|dir| {
            let journal = dir.join("img/zones.meta");
            let mut bytes = std::fs::read(&journal).expect("read");
            bytes[9] ^= 0xff;
            std::fs::write(journal, bytes).expect("write");
        }),
        ..attack(9, &["report", "IMG"], 1, "is corrupt: its header checksum does not match")
    },
    attack(9, &["wal-bench", "--preset=nope"], 2, "unknown preset \"nope\""),
    attack(9, &["file-churn", "--preset=nope"], 2, "unknown preset \"nope\""),
    // 10. Values out of range, in fio's words where fio has them.
    attack(10, &["wal-bench", "--output-format=xml"], 2, "\"xml\" is not normal or json"),
    attack(10, &["file-churn", "--output-format=xml"], 2, "\"xml\" is not normal or json"),
    // Runs that cannot run: an endless or clock-wrapping run time, writes smaller than a block.
    attack(10, &["kv-bench", "--runtime=inf"], 2, "runtime: inf is not a time above 0 and at most 86400 seconds"),
    attack(10, &["kv-bench", "--runtime=1e30"], 2, "is not a time above 0 and at most 86400 seconds"),
    attack(10, &["file-churn", "--runtime=nan"], 2, "runtime: NaN is not a time above 0"),
    attack(
        10,
        &["file-churn", "--file-size=1", "--bs=1"],
        2,
        "file-size: 1 is not a multiple of 4096 bytes, logfs's block",
    ),
    attack(
        10,
        &["file-churn", "--fs=zonefs", "--file-size=8k", "--bs=100"],
        2,
        "bs: 100 is not a multiple of 512 bytes, the device's LBA size",
    ),
    attack(
        10,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=randrw", "--rwmixread=150"],
        2,
        "rwmixread: max value out of range: 150 (100 max)",
    ),
    attack(
        10,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=read", "--iodepth=0"],
        2,
        "iodepth: min value out of range: 0 (1 min)",
    ),
    attack(
        10,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=read", "--numjobs=0"],
        2,
        "numjobs: min value out of range: 0 (1 min)",
    ),
    attack(
        10,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=write", "--zone_reset_threshold=-1"],
        2,
        "zone_reset_threshold: value out of range",
    ),
    attack(
        10,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=write", "--zone_reset_threshold=nan"],
        2,
        "is not a number from 0 to 1",
    ),
    attack(10, &["create", "IMG", "--zone-cap", "0"], 2, "0 bytes leaves nothing to write"),
    Attack {
        setup: &[SMALL],
        tamper: Some(|dir| edit(&dir.join("img/config.toml"), "max-open = 0\n", "")),
        ..attack(10, &["report", "IMG"], 1, "[namespace] lacks max-open, which every image records")
    },
    // 11. Zone records are sealed to their zone and their image: a damaged one stops every writer, and a reader
    // sees its zone offline (issue 45: one record must not brick the image).
    Attack {
        setup: &[SMALL, &["write", "IMG", "--lba", "0", "--pattern", "1", "--blocks", "1"]],
        tamper: Some(copy_zone_0s_record_over_zone_3s),
        ..attack(11, &["reset", "IMG", "--zone", "1"], 1, "the record in zone 3's place is zone 0's")
    },
    Attack {
        setup: &[SMALL, &["write", "IMG", "--lba", "0", "--pattern", "1", "--blocks", "1"]],
        tamper: Some(copy_zone_0s_record_over_zone_3s),
        ..attack(11, &["report", "IMG"], 0, "zone 3 is shown offline")
    },
    // 12. A memory-store image says that its data lives for one process.
    attack(12, &["create", "IMG", "--store", "memory"], 0, "data lives only while one process has the image open"),
    // 13. Two synchronous jobs writing one zone take turns, as fio's zone locks make them.
    attack(
        13,
        &[
            "fio",
            "--name=j",
            "--filename=preset:zn540",
            "--zonemode=zbd",
            "--numjobs=2",
            "--ioengine=psync",
            "--scheduler=none",
            "--rw=write",
            "--bs=4k",
            "--size=1z",
            "--io_size=4M",
        ],
        0,
        "err= 0",
    ),
    // Issue 75, item 8: sizes that would abort the process on an allocation are refused, naming the limit.
    attack(
        75,
        &["fio", "--name=j", "--filename=preset:conventional,conventional.capacity=14TiB", "--rw=read", "--size=4k"],
        2,
        "invalid conventional.capacity: the FTL's maps of 3758096384 logical",
    ),
    attack(75, &["bench", "ftl", "--size", "8TiB"], 2, "zonelab keeps them within 4 GiB"),
    attack(75, &["bench", "ftl", "--size", "0"], 2, "--size 0: the space must hold at least one"),
    attack(
        75,
        &["fio", "--name=j", "--filename=preset:zn540,ns=1,precondition=random:1000000000", "--rw=read", "--size=4k"],
        2,
        "N in random:N is at most 64 passes",
    ),
    attack(75, &["fio", "--name=j", "--filename=preset:zn540,ns=9", "--rw=read", "--size=4k"], 2, "no namespace 9"),
    attack(75, &["bench", "realtime", "--load", "100000"], 2, "100000 is not in 0..=1024"),
    // Issue 75, item 9: a trace that cannot be written is refused before the run, not lost at its end.
    attack(
        75,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=write", "--size=4k", "--trace=DIR/no/t.json"],
        2,
        "/no/t.json: No such file or directory",
    ),
    attack(
        75,
        &["fio", "--name=j", "--filename=preset:instant", "--rw=write", "--size=4k", "--trace=/dev/full"],
        2,
        "trace /dev/full: No space left on device",
    ),
];

/// The longest any attack may run before it counts as a hang (defect 4 was a run that never ended).
const HANG: Duration = Duration::from_secs(300);

fn substitute(args: &[&str], dir: &Path) -> Vec<String> {
    let image = dir.join("img");
    args.iter()
        .map(|arg| match *arg {
            "IMG" => image.to_string_lossy().into_owned(),
            other => other.replace("DIR", &dir.to_string_lossy()),
        })
        .collect()
}

/// Runs zonelab to its end, failing the test if it runs past `HANG`.
fn run_bounded(args: &[String]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonelab"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zonelab");
    let started = Instant::now();
    while child.try_wait().expect("poll").is_none() {
        if started.elapsed() > HANG {
            child.kill().expect("kill");
            panic!("zonelab {args:?} ran past {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("reap");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        raw_stdout: output.stdout,
    }
}

fn image_files(dir: &Path) -> Option<Vec<(String, Vec<u8>)>> {
    let image = dir.join("img");
    image.is_dir().then(|| snapshot(&image))
}

#[test]
fn every_attack_gets_its_exit_code_and_message_and_changes_nothing() {
    let mut failures = Vec::new();
    for (row, case) in ATTACKS.iter().enumerate() {
        let dir = tempfile::tempdir().expect("tempdir");
        for setup in case.setup {
            let run = run_bounded(&substitute(setup, dir.path()));
            assert_eq!(run.code, 0, "row {row} setup {setup:?}: {}", run.stderr);
        }
        if let Some(tamper) = case.tamper {
            tamper(dir.path());
        }
        let image = dir.path().join("img");
        let _holder = match case.holder {
            Holder::Nobody => None,
            Holder::Writer => Some(Image::open(&image).expect("hold the image")),
            Holder::Reader => Some(Image::open_as(&image, Access::ReadOnly).expect("look at the image")),
        };
        let before = image_files(dir.path());
        let args = substitute(case.args, dir.path());
        let run = run_bounded(&args);
        let said = if case.code == 0 { format!("{}{}", run.stdout, run.stderr) } else { run.stderr.clone() };
        let mut wrong = Vec::new();
        if run.code != case.code {
            wrong.push(format!("exit {} (expected {})", run.code, case.code));
        }
        if !said.contains(case.says) {
            wrong.push(format!("does not say {:?}", case.says));
        }
        if run.stderr.contains("panicked") {
            wrong.push("panicked".into());
        }
        if case.code != 0 && image_files(dir.path()) != before {
            wrong.push("changed the image".into());
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "defect {} row {row}: zonelab {:?}: {}\n  stderr: {}",
                case.defect,
                case.args,
                wrong.join("; "),
                run.stderr.trim_end()
            ));
        }
    }
    let defects: std::collections::BTreeSet<u32> = ATTACKS.iter().map(|case| case.defect).collect();
    assert_eq!(defects.len(), 14, "every defect of the audit (13, and issue 75's sizes) has at least one attack");
    assert!(failures.is_empty(), "{} of {} attacks failed:\n{}", failures.len(), ATTACKS.len(), failures.join("\n"));
    eprintln!("bad input: {} attacks over {} defects, all passing", ATTACKS.len(), defects.len());
}
