//! `zonelab fio` as a user runs it: the seed 000 appendix D command lines with only --filename changed, job
//! files, output files, and fio's error paths.

mod common;

use common::*;

/// Listing 8 of seed 000 (writes, psync, one job per zone), 4 jobs, runtime shortened.
const LISTING_8: &str = "--name=nvme2n2_none_4Ki_numjobs-4 --output-format=json --filename=preset:zn540,zones=50 --direct=1 --size=3z --offset_increment=3z --ioengine=psync --zonemode=zbd --rw=write --bs=4Ki --runtime=1 --numa_cpu_nodes=0 --ramp_time=1 --group_reporting --numjobs=4 --percentile_list=50:95";

#[test]
fn listing_8_runs_with_only_the_filename_changed() {
    let args: Vec<&str> = std::iter::once("fio").chain(LISTING_8.split_whitespace()).collect();
    let json: serde_json::Value = serde_json::from_str(&ok(&args)).expect("json");
    let job = &json["jobs"][0];
    assert_eq!(job["jobname"], "nvme2n2_none_4Ki_numjobs-4");
    assert_eq!(job["error"], 0);
    assert_eq!(job["zonelab"]["jobs"], 4, "group_reporting folds the four jobs");
    let iops = job["write"]["iops"].as_f64().expect("iops");
    assert!(iops > 150_000.0 && iops < 200_000.0, "4 zones at QD 1 on zn540: {iops}");
    assert!(job["write"]["clat_ns"]["percentile"]["95.000000"].is_number());
    let notes = json["zonelab"]["notes"].as_array().expect("notes");
    assert!(notes.iter().any(|note| note.as_str().is_some_and(|n| n.contains("numa_cpu_nodes=0"))), "{notes:?}");
}

#[test]
fn listings_9_and_10_run_with_only_the_filename_changed() {
    let listing_9 = "fio --name=mq --output-format=json --filename=preset:zn540,zones=50 --direct=1 --size=100G --ioengine=libaio --zonemode=zbd --rw=write --bs=4Ki --runtime=1 --numa_cpu_nodes=0 --ramp_time=1 --iodepth=4 --time_based --percentile_list=50:95 --scheduler=mq-deadline";
    let json: serde_json::Value =
        serde_json::from_str(&ok(&listing_9.split_whitespace().collect::<Vec<_>>())).expect("json");
    assert_eq!(json["jobs"][0]["error"], 0);
    let listing_10 = "fio --name=fill --filename=preset:zn540,zones=50 --zonemode=zbd --rw=write --bs=128k --size=1z --ioengine=spdk --name=seqread --stonewall --output-format=json --filename=preset:zn540,zones=50 --direct=1 --size=1z --ioengine=libaio --zonemode=zbd --rw=read --bs=4Ki --runtime=1 --numa_cpu_nodes=0 --ramp_time=1 --iodepth=8 --time_based --percentile_list=50:95";
    let json: serde_json::Value =
        serde_json::from_str(&ok(&listing_10.split_whitespace().collect::<Vec<_>>())).expect("json");
    let read = &json["jobs"][1]["read"];
    assert!(read["iops"].as_f64().expect("iops") > 50_000.0, "{read}");
}

#[test]
fn job_files_and_output_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job_file = dir.path().join("jobs.fio");
    std::fs::write(&job_file, "[global]\nfilename=preset:zn540,zones=8\nzonemode=zbd\nioengine=spdk\n\n[fill]\nrw=write\nbs=256k\nsize=2z\n\n[read]\nstonewall\nrw=randread\nbs=4k\nsize=2z\niodepth=32\nio_size=64m\n").expect("write");
    let output = dir.path().join("out.json");
    ok(&["fio", "--output-format=json", &format!("--output={}", output.display()), job_file.to_str().expect("utf-8")]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&output).expect("output")).expect("json");
    assert_eq!(json["jobs"].as_array().expect("jobs").len(), 2);
    assert_eq!(json["jobs"][1]["read"]["io_bytes"], 64 << 20);
    let text = ok(&["fio", job_file.to_str().expect("utf-8")]);
    assert!(text.contains("fill: (groupid=0, jobs=1): err= 0"), "{text}");
    assert!(text.contains("Run status group 1 (all jobs):"), "{text}");
    assert!(text.contains("READ: bw="), "{text}");
}

#[test]
fn fio_errors() {
    usage_error(
        &["fio", "--name=a", "--filename=preset:zn540", "--frobnicate=2"],
        "unrecognized option '--frobnicate=2'",
    );
    usage_error(&["fio", "--name=a", "--filename=preset:zn540", "--rw=sideways"], "sideways");
    usage_error(&["fio", "missing.fio"], "failed to open job file missing.fio");
    let missing = zonelab(&["fio", "--name=a", "--filename=/nonexistent/image", "--rw=write"]);
    assert_eq!(missing.code, 1, "a missing image exits 1, as for every command: {}", missing.stderr);
    assert!(missing.stderr.contains("not a zonelab image"), "{}", missing.stderr);
    let run = zonelab(&[
        "fio",
        "--name=a",
        "--filename=preset:zn540,zones=4",
        "--zonemode=zbd",
        "--rw=write",
        "--size=1z",
        "--ioengine=libaio",
        "--iodepth=8",
        // Eight writes a call reach the device together, which may run them in any order.
        "--iodepth_batch_submit=8",
        "--scheduler=none",
        "--runtime=10ms",
        "--time_based",
    ]);
    assert_eq!(run.code, 1, "a job that fails makes fio fail");
    assert!(run.stdout.contains("err= 5"), "{}", run.stdout);
    assert!(run.stderr.contains("Zone Invalid Write (0x1bc)"), "{}", run.stderr);
}

#[test]
fn fio_runs_on_a_device_image_and_leaves_its_zones_written() {
    let img = image(&[]);
    ok(&[
        "fio",
        "--name=w",
        &format!("--filename={}", img.s()),
        "--zonemode=zbd",
        "--rw=write",
        "--bs=64k",
        "--size=2z",
        "--ioengine=spdk",
    ]);
    let report = report_json(&img);
    assert_eq!(
        (zone_state(&img, 0), zone_state(&img, 1), zone_state(&img, 2)),
        ("full".into(), "full".into(), "empty".into()),
        "{report}"
    );
}

#[test]
fn a_runtime_bound_job_on_a_device_without_latency_ends_and_says_why() {
    for extra in [&["--time_based"][..], &["--io_size=99999999p"][..]] {
        let mut args = vec!["fio", "--name=j", "--filename=preset:instant", "--rw=randread", "--runtime=1"];
        args.extend_from_slice(extra);
        let run = zonelab(&args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("note: job j stopped after 1048576 I/Os in a row"), "{args:?}: {}", run.stderr);
    }
    // A job bound by its size runs to its size, however many I/Os that takes at one instant.
    let run = zonelab(&[
        "fio",
        "--name=s",
        "--filename=preset:instant",
        "--rw=randread",
        "--io_size=6g",
        "--output-format=json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(json["jobs"][0]["read"]["io_bytes"].as_u64(), Some(6 << 30));
}

/// Without zonemode=zbd, fio reads a zone's whole size, and a ZN540 zone holds data in only its first 1077 of 2048
/// MiB: the rest reads as zeros at no flash cost. zonelab says how many reads did that; with zbd, none do.
#[test]
fn reads_past_the_written_data_are_named_in_a_note() {
    let unwritten_note = |zonemode: &str| -> Option<String> {
        let zonemode = format!("--zonemode={zonemode}");
        let args = ["fio", "--name=r", "--filename=preset:zn540,zones=4", &zonemode, "--prefill=full", "--rw=randread"];
        let rest = ["--bs=4k", "--size=1z", "--ioengine=spdk", "--io_size=4m", "--output-format=json"];
        let json: serde_json::Value = serde_json::from_str(&ok(&[&args[..], &rest].concat())).expect("json");
        let notes = json["zonelab"]["notes"].as_array().expect("notes").clone();
        notes.iter().filter_map(|note| note.as_str()).find(|note| note.contains("no write had reached")).map(Into::into)
    };
    let note = unwritten_note("none").expect("reads past the capacity are named");
    let count: u64 = note["group 0: ".len()..].split(' ').next().and_then(|n| n.parse().ok()).expect("a count");
    assert!(note.contains("of its 1024 reads"), "{note}");
    // 1 - 1077 / 2048 of uniformly random blocks: 47.4 %, about 485 of 1024.
    assert!((430..540).contains(&count), "{note}");
    assert_eq!(unwritten_note("zbd"), None, "zbd reads only written blocks");
}

/// `zonelab zone-timeline`: a traced run's zones, a line each, and its picture and table; a file that is not a
/// trace is refused by name.
#[test]
fn zone_timeline_draws_a_traced_runs_zones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (trace, png, tsv) = (dir.path().join("t.json"), dir.path().join("z.png"), dir.path().join("z.tsv"));
    let s = |path: &std::path::Path| path.to_str().expect("utf-8").to_string();
    let trace_arg = format!("--trace={}", s(&trace));
    ok(&[
        "fio",
        "--filename=preset:nvmevirt-rezns,zones=8",
        "--zonemode=zbd",
        "--name=w",
        "--rw=write",
        "--bs=128k",
        "--size=3z",
        &trace_arg,
    ]);
    let out = ok(&["zone-timeline", &s(&trace), "--png", &s(&png), "--tsv", &s(&tsv), "--intervals", "5"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "zone\tbytes_written\tresets\tfill_at_end");
    assert_eq!(
        lines[1..].iter().map(|line| line.split('\t').next().expect("zone")).collect::<Vec<_>>(),
        ["0", "1", "2"]
    );
    assert!(lines[1..].iter().all(|line| line.ends_with("\t0\t1.0000")), "three full zones, no reset: {out}");
    assert_eq!(std::fs::read_to_string(&tsv).expect("tsv").lines().count(), 1 + 3 * 5);
    assert!(std::fs::metadata(&png).expect("png").len() > 1000);
    std::fs::write(&trace, "{\"traceEvents\":[]}").expect("write");
    usage_error(&["zone-timeline", &s(&trace)], "otherData has no zones");
}
