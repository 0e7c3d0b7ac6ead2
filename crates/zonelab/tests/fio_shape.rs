//! `zonelab fio` looks like fio 3.33: the same job run by real fio (psync on a plain file) and by zonelab (on a
//! preset) gives JSON in which every key real fio emits is present, and text in which every line real fio
//! prints has its counterpart. Needs real fio; under CI=true its absence is a failure.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::{have_fio, ok};
use serde_json::Value;

const JOB: &[&str] =
    &["--name=j", "--rw=randread", "--bs=4k", "--size=4M", "--ioengine=psync", "--percentile_list=50:99"];

/// Every key path of a JSON document (`/jobs[]/read/bw_min`), not descending into values whose keys depend
/// on the job (percentiles, options) or into zonelab's own objects.
fn key_paths(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let path = format!("{prefix}/{key}");
                out.insert(path.clone());
                if !matches!(key.as_str(), "percentile" | "job options" | "global options" | "zonelab") {
                    key_paths(child, &path, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                key_paths(first, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// What a text line is: the words before its first `:`, `=` or `(`.
fn line_label(line: &str) -> String {
    line.split([':', '=', '(']).next().unwrap_or("").trim().to_string()
}

fn real_fio(format: &str) -> String {
    real_fio_with(&[], format)
}

/// Real fio on the job with `extra` options after it.
fn real_fio_with(extra: &[&str], format: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("file");
    let output = Command::new("fio")
        .args(JOB)
        .args(extra)
        .arg(format!("--filename={}", file.display()))
        .arg(format!("--output-format={format}"))
        .output()
        .expect("run fio");
    assert!(output.status.success(), "fio failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

fn zonelab_fio(format: &str) -> String {
    zonelab_fio_with(&[], format)
}

fn zonelab_fio_with(extra: &[&str], format: &str) -> String {
    let mut args = vec!["fio", "--filename=preset:zn540"];
    args.extend_from_slice(JOB);
    args.extend_from_slice(extra);
    let format = format!("--output-format={format}");
    args.push(&format);
    ok(&args)
}

#[test]
fn json_has_every_key_real_fio_emits() {
    if !have_fio() {
        return;
    }
    let (mut theirs, mut ours) = (BTreeSet::new(), BTreeSet::new());
    key_paths(&serde_json::from_str(&real_fio("json")).expect("fio's JSON"), "", &mut theirs);
    let zonelab: Value = serde_json::from_str(&zonelab_fio("json")).expect("zonelab's JSON");
    key_paths(&zonelab, "", &mut ours);
    let missing: Vec<&String> = theirs.difference(&ours).collect();
    assert!(missing.is_empty(), "keys real fio emits that zonelab lacks: {missing:?}");
    assert_eq!(zonelab["fio version"], "fio-3.33");
    assert!(zonelab["timestamp"].as_u64().expect("timestamp") > 1_600_000_000, "a real timestamp");
    assert_eq!(zonelab["jobs"][0]["job options"]["percentile_list"], "50:99", "options echoed as given");
}

/// Jobs split by `new_group` and `stonewall` and folded by `group_reporting` come out as real fio reports them:
/// the same results, reporting groups, bytes and directions, and a header line for every job as given.
#[test]
fn groups_fold_and_split_as_real_fio_reports_them() {
    if !have_fio() {
        return;
    }
    let jobs = [
        "--group_reporting",
        "--ioengine=psync",
        "--bs=4k",
        "--size=4M",
        "--name=a",
        "--rw=write",
        "--name=b",
        "--new_group",
        "--rw=read",
        "--name=c",
        "--rw=randwrite",
        "--name=d",
        "--stonewall",
        "--rw=randread",
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let file = format!("--filename={}", dir.path().join("file").display());
    let run_fio = |format: &str| {
        // fio prints the header lines as it reads each job, in the output format given before it; the file, given
        // before the first job, is every job's.
        let output = Command::new("fio").arg(format).arg(&file).args(jobs).output().expect("run fio");
        assert!(output.status.success(), "fio failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let run_zonelab = |format: &str| {
        let mut args = vec!["fio", format, "--filename=preset:conventional"];
        args.extend_from_slice(&jobs);
        ok(&args)
    };
    let shape = |text: &str| -> Vec<(String, u64, u64, u64, bool, bool)> {
        let document: Value = serde_json::from_str(text).expect("JSON");
        let jobs = document["jobs"].as_array().expect("jobs").iter();
        jobs.map(|job| {
            let runs = |direction: &str| job[direction]["runtime"].as_u64().expect("runtime") > 0;
            (
                job["jobname"].as_str().expect("name").to_string(),
                job["groupid"].as_u64().expect("groupid"),
                job["read"]["io_bytes"].as_u64().expect("read bytes"),
                job["write"]["io_bytes"].as_u64().expect("write bytes"),
                runs("read"),
                runs("write"),
            )
        })
        .collect()
    };
    let theirs = shape(&run_fio("--output-format=json"));
    assert_eq!(theirs.len(), 3, "real fio folds c into b: {theirs:?}");
    assert_eq!(shape(&run_zonelab("--output-format=json")), theirs);
    let headers = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|line| line.contains(": (g="))
            .map(|line| line[..line.find(", bs=").unwrap_or(0)].to_string())
            .collect()
    };
    assert_eq!(headers(&run_zonelab("--output-format=normal")), headers(&run_fio("--output-format=normal")));
}

#[test]
fn text_has_every_line_real_fio_prints() {
    if !have_fio() {
        return;
    }
    // The disk line is labelled by the device's name, which differs by design (vda there, zn540 here).
    let label = |line: &str| if line.contains(": ios=") { "<disk>: ios".to_string() } else { line_label(line) };
    let ours: BTreeSet<String> = zonelab_fio("normal").lines().map(label).collect();
    let missing: Vec<String> =
        real_fio("normal").lines().map(label).filter(|label| !label.is_empty() && !ours.contains(label)).collect();
    assert!(missing.is_empty(), "lines real fio prints that zonelab lacks: {missing:?}");
}

#[test]
fn terse_lines_have_real_fios_fields_and_formats_combine() {
    if !have_fio() {
        return;
    }
    let fields = |line: &str| line.trim_end().split(';').map(str::to_string).collect::<Vec<_>>();
    let theirs = fields(&real_fio("terse"));
    let ours = fields(&zonelab_fio("terse"));
    assert_eq!(ours.len(), theirs.len(), "terse v3 fields:\n{theirs:?}\n{ours:?}");
    assert_eq!((ours[0].as_str(), ours[1].as_str(), ours[2].as_str()), ("3", "fio-3.33", "j"));
    for (index, (mine, real)) in ours.iter().zip(&theirs).enumerate() {
        let shape = |field: &str| (field.contains('%'), field.contains('='), field.contains('.'));
        // The disk's name (field 121) differs by design; every other field has real fio's shape.
        if index != 121 {
            assert_eq!(shape(mine), shape(real), "field {index}: {mine} against fio's {real}");
        }
    }
    let both = zonelab_fio("normal,json+");
    let json_start = both.find("\n{").expect("the JSON document follows the normal report");
    assert!(both.starts_with("j: (g=0): rw=randread"), "{both}");
    let document: Value = serde_json::from_str(&both[json_start..]).expect("JSON after the text");
    let bins = document["jobs"][0]["read"]["clat_ns"]["bins"].as_object().expect("json+ bins");
    let binned: u64 = bins.values().map(|hits| hits.as_u64().expect("count")).sum();
    assert_eq!(binned, document["jobs"][0]["read"]["total_ios"].as_u64().expect("ios"), "every I/O is in a bin");
}

/// The log files real fio writes for the same log options, by name, and lines of its five fields.
#[test]
fn logs_have_real_fios_names_and_line_format() {
    if !have_fio() {
        return;
    }
    let logs = ["--write_lat_log=x", "--write_bw_log=x", "--write_iops_log=x", "--log_avg_msec=10"];
    let run_in = |dir: &std::path::Path, program: &str, device: String| {
        let mut command = Command::new(program);
        if program != "fio" {
            command.arg("fio");
        }
        let output = command.current_dir(dir).args(JOB).args(logs).arg(device).output().expect("run");
        assert!(output.status.success(), "{program}: {}", String::from_utf8_lossy(&output.stderr));
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".log"))
            .collect();
        names.sort();
        names
    };
    let (real, ours) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let file = real.path().join("file").display().to_string();
    let theirs = run_in(real.path(), "fio", format!("--filename={file}"));
    let mine = run_in(ours.path(), env!("CARGO_BIN_EXE_zonelab"), "--filename=preset:zn540".to_string());
    assert_eq!(mine, theirs, "log files");
    for (dir, name) in [(&real, "x_lat.1.log"), (&ours, "x_lat.1.log"), (&ours, "x_bw.1.log"), (&ours, "x_iops.1.log")]
    {
        let text = std::fs::read_to_string(dir.path().join(name)).expect("log");
        assert!(!text.is_empty() || name != "x_lat.1.log", "{name} is empty");
        for line in text.lines() {
            let fields: Vec<&str> = line.split(", ").collect();
            assert!(fields.len() == 5 && fields.iter().all(|f| f.parse::<u64>().is_ok()), "{name}: {line:?}");
        }
    }
}

/// The data units of the job and run-status lines: for each quantity, whether its prefix is binary, and its
/// unit (`B`, `B/s` or `bit/s`); quantities small enough to have no prefix are left out.
fn data_units(text: &str) -> Vec<(bool, String)> {
    text.lines()
        .filter(|line| line.trim_start().starts_with("read:") || line.trim_start().starts_with("READ:"))
        .flat_map(|line| line.split([' ', ',', '(', ')', '=', '-']).map(str::to_string).collect::<Vec<_>>())
        .filter(|token| token.starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|token| {
            let unit = token.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
            let unit = unit.split('/').next().unwrap_or("").to_string() + if unit.contains("/s") { "/s" } else { "" };
            let base = unit.trim_start_matches(['k', 'K', 'M', 'G', 'T', 'P', 'E']);
            let binary = base.starts_with('i');
            let base = base.trim_start_matches('i').to_string();
            (base != unit.trim_start_matches('i') && ["B", "B/s", "bit/s"].contains(&base.as_str()))
                .then_some((binary, base))
        })
        .collect()
}

/// kb_base and unit_base as real fio 3.33 takes and prints them: under its default ("compatibility") kb_base,
/// `1MiB` is 10^6 bytes and under kb_base=1000 it is 2^20; kb_base=1000 puts SI units first and unit_base=1
/// prints rates in bits.
#[test]
fn sizes_and_units_follow_kb_base_and_unit_base_as_real_fio() {
    if !have_fio() {
        return;
    }
    for extra in [&["--io_size=1MiB"][..], &["--kb_base=1000", "--io_size=1MiB", "--unit_base=1"], &["--kb_base=1000"]]
    {
        let read_bytes = |json: &str| -> u64 {
            let document: Value = serde_json::from_str(json).expect("JSON");
            document["jobs"][0]["read"]["io_bytes"].as_u64().expect("io_bytes")
        };
        assert_eq!(
            read_bytes(&zonelab_fio_with(extra, "json")),
            read_bytes(&real_fio_with(extra, "json")),
            "{extra:?}: the bytes read"
        );
        let (ours, theirs) =
            (data_units(&zonelab_fio_with(extra, "normal")), data_units(&real_fio_with(extra, "normal")));
        assert!(ours.len() >= 6, "{extra:?}: {ours:?}");
        assert_eq!(ours, theirs, "{extra:?}: units, binary or SI, in order");
    }
}
