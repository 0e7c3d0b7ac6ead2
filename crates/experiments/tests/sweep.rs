//! `zonelab sweep`: a grid of fio options and seeds, one CSV row per point and job; the same rows for any number
//! of threads, traced or not, a resumed sweep runs only the points its table lacks, and a failing point is a row
//! with its error.

use zonelab_experiments::sweep::{read_table, run, Grid};

fn grid(text: &str) -> Grid {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("grid.toml");
    std::fs::write(&path, text).expect("write grid");
    Grid::load(&path).expect("a grid")
}

const GRID: &str = r#"
args = "--name=job --rw=randwrite --bs=4k --ioengine=io_uring --runtime=5ms --time_based"
seeds = [1, 2]
[axes]
filename = ["preset:zn540,ns=1", "preset:instant,ns=9"]
iodepth = [1, 16]
"#;

#[test]
fn a_sweep_is_one_row_a_point_whatever_the_threads_and_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (one, three, traces) = (dir.path().join("one.csv"), dir.path().join("three.csv"), dir.path().join("traces"));
    let outcome = run(&grid(GRID), &one, 1, None).expect("sweep");
    assert_eq!((outcome.points, outcome.skipped, outcome.rows), (8, 0, 8));
    assert_eq!(outcome.failed, 4, "the instant preset has no namespace 9: four points fail, the sweep goes on");
    run(&grid(GRID), &three, 3, Some(&traces)).expect("sweep");
    let text = std::fs::read_to_string(&one).expect("table");
    assert_eq!(
        text,
        std::fs::read_to_string(&three).expect("table"),
        "the same rows on one thread or three, traced or not"
    );

    let (columns, rows) = read_table(&text);
    assert_eq!(&columns[..4], ["point", "filename", "iodepth", "seed"]);
    let ran: Vec<_> = rows.iter().filter(|row| row["error"].is_empty()).collect();
    assert_eq!(ran.len(), 4);
    let kiops = |depth: &str| -> f64 {
        ran.iter().find(|row| row["iodepth"] == depth).expect("a row")["write_kiops"].parse().expect("a number")
    };
    assert!(kiops("16") > kiops("1") * 2.0, "deeper queues write faster: {} and {}", kiops("16"), kiops("1"));
    // The traced sweep wrote a trace for each point that ran, named by its point column.
    for row in &ran {
        let trace = std::fs::read(traces.join(format!("{}.json", row["point"]))).expect("the point's trace");
        let trace: serde_json::Value = serde_json::from_slice(&trace).expect("json");
        assert!(trace["traceEvents"].as_array().is_some_and(|events| events.len() > 10), "{}", row["point"]);
    }
    let failed = rows.iter().find(|row| !row["error"].is_empty()).expect("a failed point");
    assert!(failed["error"].contains("no namespace 9"), "{}", failed["error"]);
    assert_eq!(failed["filename"], "preset:instant,ns=9", "a value with a comma survives the CSV");

    let again = run(&grid(GRID), &one, 2, None).expect("resume");
    assert_eq!((again.skipped, again.rows), (8, 0), "every point is there already");
    let grown = GRID.replace("iodepth = [1, 16]", "iodepth = [1, 16, 4]");
    let more = run(&grid(&grown), &one, 2, None).expect("a grown grid");
    assert_eq!((more.points, more.skipped, more.rows), (12, 8, 4), "only the new points run");

    // A table cut short ends in a torn row: it is dropped and its point runs again, and no row is glued to it.
    let whole = std::fs::read_to_string(&one).expect("table");
    std::fs::write(&one, &whole[..whole.len() - 40]).expect("cut the table short");
    let widest = GRID.replace("iodepth = [1, 16]", "iodepth = [1, 16, 4, 2]");
    let resumed = run(&grid(&widest), &one, 2, None).expect("resume a torn table");
    assert_eq!((resumed.points, resumed.skipped, resumed.rows), (16, 11, 5), "the torn point and the 4 new ones");
    let text = std::fs::read_to_string(&one).expect("table");
    let (_, rows) = read_table(&text);
    assert_eq!(rows.len(), 16);
    let keys: std::collections::HashSet<&String> = rows.iter().map(|row| &row["point"]).collect();
    assert_eq!(keys.len(), 16, "every point once");

    let other = GRID.replace("iodepth", "bs");
    let refused = run(&grid(&other), &one, 1, None).expect_err("another grid's table");
    assert!(refused.to_string().contains("write to another table"), "{refused}");
}

#[test]
fn a_bad_grid_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("grid.toml");
    std::fs::write(&path, "args = \"--name=j\"\n[axes]\niodepth = []\n").expect("write");
    let error = Grid::load(&path).expect_err("an empty axis");
    assert!(error.to_string().contains("axis iodepth"), "{error}");
    std::fs::write(&path, "argz = \"--name=j\"\n").expect("write");
    assert!(Grid::load(&path).is_err(), "an unknown key");
    // Six axes of 1,000 values make 10^18 points: refused with the limit, before any point is built.
    let axis: Vec<String> = (0..1000).map(|value| value.to_string()).collect();
    let axes: String = (0..6).map(|axis_no| format!("a{axis_no} = [{}]\n", axis.join(", "))).collect();
    std::fs::write(&path, format!("args = \"--name=j\"\nseeds = [1]\n[axes]\n{axes}")).expect("write");
    let error = Grid::load(&path).expect_err("too many points");
    assert!(error.to_string().contains("make 1000000000000000000 points; a sweep runs at most 1000000"), "{error}");
}

/// The table goes to pandas as it is: `examples/python/sweep_table.py` reads it with `pandas.read_csv` and finds
/// the axes typed (an option's numbers as integers), the measures as floats, and the failed point apart. Under
/// CI=true, python3 with pandas must be here (.ci/run installs pandas with pip).
#[test]
fn pandas_reads_a_sweep_table() {
    let has_pandas = std::process::Command::new("python3")
        .args(["-c", "import pandas"])
        .status()
        .is_ok_and(|status| status.success());
    if !has_pandas {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and python3 with pandas missing");
        eprintln!("skipped: python3 with pandas is not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let table = dir.path().join("sweep.csv");
    run(&grid(GRID), &table, 2, None).expect("sweep");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/python/sweep_table.py");
    let output = std::process::Command::new("python3").arg(&script).arg(&table).output().expect("python3");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).expect("the script's JSON");
    assert_eq!(summary["axes"], serde_json::json!(["filename", "iodepth"]));
    assert_eq!(summary["dtypes"]["iodepth"], "int64");
    assert_eq!(summary["dtypes"]["write_kiops"], "float64");
    let means = summary["means"].as_array().expect("means");
    assert_eq!(means.len(), 2, "two points ran, each over two seeds: {means:?}");
    let at = |depth: u64| means.iter().find(|row| row["iodepth"] == depth).expect("a mean")["write_kiops"].as_f64();
    assert!(at(16) > at(1), "pandas sees deeper queues write faster");
    assert_eq!(summary["failed"].as_array().map(Vec::len), Some(4));
}

#[test]
fn a_point_whose_job_fails_counts_as_failed() {
    // Random reads of empty zones run and fail in the job ("no written data to read"), not in the set-up.
    let text = r#"
args = "--name=job --filename=preset:zn540,zones=8 --zonemode=zbd --bs=4k --size=1z"
seeds = [1, 2, 3]
[axes]
rw = ["randread", "write"]
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let outcome = run(&grid(text), &dir.path().join("t.csv"), 1, None).expect("sweep");
    assert_eq!((outcome.points, outcome.failed), (6, 3), "the three reading points failed, the writers did not");
}
