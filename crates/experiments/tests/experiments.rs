//! Every experiment runs end to end in its quick form and writes its results, report and plots.

use std::path::{Path, PathBuf};
use std::process::Command;

use zonelab_experiments::experiment::{experiments, run, run_traced, EXPERIMENTS};

/// The RocksDB plugin for the real-time experiments, built with the test profile (as the RocksDB tests build
/// it) and handed to them; None without RocksDB, which fails under CI=true.
fn rocksdb_plugin() -> Option<PathBuf> {
    let installed = Command::new("db_bench").arg("--help").output().is_ok()
        && Path::new("/usr/include/rocksdb/file_system.h").exists();
    if !installed {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and RocksDB missing: .ci/run must install librocksdb-dev and rocksdb-tools"
        );
        eprintln!("RocksDB is not installed: the real-time experiments report that they did not run");
        return None;
    }
    // In the target directory's scratch space, rebuilt in place each run: nothing is left in /tmp.
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("zonelab-experiments-plugin");
    let plugin = zonelab_bench::realdb::build_plugin(Some(&out), "test").unwrap_or_else(|error| panic!("{error}"));
    zonelab_bench::realdb::use_plugin(plugin.clone());
    Some(plugin)
}

#[test]
fn every_experiment_runs_quick_and_writes_its_outputs() {
    let out = tempfile::tempdir().expect("tempdir");
    let all = experiments();
    let files = std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments"))
        .expect("experiments/")
        .filter(|entry| entry.as_ref().is_ok_and(|entry| entry.path().extension().is_some_and(|ext| ext == "toml")))
        .count();
    assert_eq!(all.len(), files, "every file of experiments/ is an experiment");
    for ((file, _), experiment) in EXPERIMENTS.iter().zip(&all) {
        assert_eq!(*file, experiment.id, "an experiment's file is named as its id");
    }
    let rocksdb = rocksdb_plugin();
    let mut verdicts = String::new();
    for experiment in all {
        let directory = out.path().join(&experiment.id);
        let outcome =
            run(&experiment.id, true, &directory, 2).unwrap_or_else(|error| panic!("{}: {error}", experiment.id));
        assert!(!outcome.summary.is_empty(), "{}: a summary line per claim", experiment.id);
        if experiment.real_time && rocksdb.is_none() {
            let report = std::fs::read_to_string(directory.join("report.md")).expect("report.md");
            assert!(report.contains("Not run on this machine"), "{}: says why it did not run", experiment.id);
            continue;
        }
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(directory.join("results.json")).expect("results.json"))
                .expect("json");
        let report = std::fs::read_to_string(directory.join("report.md")).expect("report.md");
        assert!(report.starts_with(&format!("# {}", experiment.title)));
        let pngs: Vec<_> = std::fs::read_dir(&directory)
            .expect("dir")
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "png"))
            .collect();
        assert!(!pngs.is_empty(), "{}: plots", experiment.id);
        for png in &pngs {
            let bytes = std::fs::read(png).expect("png");
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", png.display());
            assert!(
                report.contains(png.file_name().and_then(|n| n.to_str()).expect("name")),
                "the report shows {}",
                png.display()
            );
        }
        for figure in &experiment.figure {
            let series = results["figures"]
                .as_array()
                .expect("figures")
                .iter()
                .find(|f| f["id"] == figure.id.as_str())
                .expect("figure");
            for line in series["series"].as_array().expect("series") {
                assert_eq!(
                    line["points"].as_array().expect("points").len(),
                    figure.quick_x.len(),
                    "{} {}",
                    figure.id,
                    line["label"]
                );
            }
            assert_eq!(series["claims"].as_array().expect("claims").len(), figure.claim.len());
            // Claims in virtual time come out the same on every run: their figures and verdicts are pinned.
            if !experiment.real_time {
                for claim in series["claims"].as_array().expect("claims") {
                    let figure_value =
                        claim["zonelab"].as_f64().map_or("-".to_string(), |value| format!("{value:.4e}"));
                    verdicts.push_str(&format!(
                        "{}\t{}\t{}\t{}\t{}\n",
                        experiment.id,
                        figure.id,
                        claim["text"].as_str().unwrap_or_default(),
                        figure_value,
                        claim["verdict"].as_str().unwrap_or_default()
                    ));
                }
            }
        }
    }
    check_golden_verdicts(&verdicts);
}

/// `experiments/quick-verdicts.tsv` holds every virtual-time claim of a quick run with its figure (4 significant
/// digits) and verdict, so that a change to the model that moves one shows in review. Regenerate it with
/// `ZONELAB_BLESS=1 cargo test -p zonelab-experiments --test experiments every_experiment`.
fn check_golden_verdicts(verdicts: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/quick-verdicts.tsv");
    let header = "# experiment\tfigure\tclaim\tzonelab\tverdict (quick run, virtual time)\n";
    let generated = format!("{header}{verdicts}");
    if std::env::var_os("ZONELAB_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the verdicts");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let changed: Vec<String> = committed
        .lines()
        .zip(generated.lines())
        .filter(|(old, new)| old != new)
        .map(|(old, new)| format!("- {old}\n+ {new}"))
        .collect();
    assert!(
        changed.is_empty() && committed.lines().count() == generated.lines().count(),
        "virtual-time claims moved (regenerate with ZONELAB_BLESS=1 if intended):\n{}",
        changed.join("\n")
    );
}

#[test]
fn the_reproductions_go_the_papers_way() {
    let out = tempfile::tempdir().expect("tempdir");
    let outcome = run("zwal-append-scaling", true, out.path(), 2).expect("runs");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).expect("json")).expect("json");
    let claims: Vec<&serde_json::Value> = results["figures"]
        .as_array()
        .expect("figures")
        .iter()
        .flat_map(|f| f["claims"].as_array().expect("claims"))
        .collect();
    for claim in claims {
        let paper = claim["paper"].as_f64().expect("paper");
        let model = claim["zonelab"].as_f64().expect("model");
        assert_eq!(paper.signum(), model.signum(), "{}: paper {paper}, model {model}", claim["text"]);
        assert_ne!(claim["verdict"], "not-reproduced", "{}", claim["text"]);
    }
    assert_eq!(outcome.id, "zwal-append-scaling");
    let writes = run("zns-study-writes", true, out.path(), 2).expect("runs");
    assert!(
        writes.summary.iter().any(|line| line.contains("fig6b") && line.contains("zonelab -")),
        "{:?}",
        writes.summary
    );
}

/// Figure 4 of the ZNS study runs one job twice: 4 KiB sequential reads at QD 4 are a point of 4a (in KIOPS) and
/// of 4b (in GiB/s), so the two metrics must give the same I/Os a second.
#[test]
fn bandwidth_and_throughput_of_one_job_agree() {
    let out = tempfile::tempdir().expect("tempdir");
    run("zns-study-peak", true, out.path(), 2).expect("runs");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).expect("json")).expect("json");
    let point = |figure: &str| {
        let figure = results["figures"].as_array().expect("figures").iter().find(|f| f["id"] == figure).expect(figure);
        let series = figure["series"].as_array().expect("series");
        let reads = series.iter().find(|s| s["label"] == "sequential reads").expect("sequential reads");
        let at_4 = reads["points"].as_array().expect("points").iter().find(|p| p["x"] == 4).expect("x = 4");
        at_4["y"].as_f64().expect("y")
    };
    let (kiops, gib_per_s) = (point("fig4a"), point("fig4b"));
    let from_bandwidth = gib_per_s * f64::from(1u32 << 30) / 4096.0 / 1000.0;
    assert!(kiops > 100.0, "{kiops} KIOPS");
    assert!((from_bandwidth - kiops).abs() < kiops * 1e-9, "{gib_per_s} GiB/s is {from_bandwidth} KIOPS, not {kiops}");
}

/// Virtual-time runs go several at once, each deterministic on its own: one thread or four write the same
/// bytes (zinc-namespace-isolation takes many fio runs, zwal-append-scaling wal-bench and fio runs).
#[test]
fn any_number_of_jobs_writes_the_same_results() {
    for id in ["zinc-namespace-isolation", "zwal-append-scaling"] {
        let (one, four) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        run(id, true, one.path(), 1).expect("one at a time");
        run(id, true, four.path(), 4).expect("four at once");
        for file in ["results.json", "report.md"] {
            let read = |dir: &tempfile::TempDir| std::fs::read(dir.path().join(file)).expect(file);
            assert!(read(&one) == read(&four), "{id}: {file} differs between --jobs 1 and --jobs 4");
        }
    }
}

/// `--trace`: every virtual-time run of an experiment also writes its Perfetto trace, listed in traces.tsv, and
/// the results stay the same bytes (zwal-append-scaling takes fio runs, zwal-barrier wal-bench runs).
#[test]
fn a_traced_experiment_writes_a_trace_of_every_run_and_the_same_results() {
    let mut every = Vec::new();
    for id in ["zwal-append-scaling", "zwal-barrier"] {
        let (plain, traced) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        run(id, true, plain.path(), 2).expect("plain");
        run_traced(id, true, traced.path(), 2, true).expect("traced");
        for file in ["results.json", "report.md"] {
            let read = |dir: &tempfile::TempDir| std::fs::read(dir.path().join(file)).expect(file);
            assert!(read(&plain) == read(&traced), "{id}: {file} differs with traces");
        }
        let traces = traced.path().join("traces");
        let index = std::fs::read_to_string(traces.join("traces.tsv")).expect("the index");
        let listed: Vec<&str> = index.lines().skip(1).filter_map(|line| line.split('\t').next()).collect();
        let mut written: Vec<String> = std::fs::read_dir(&traces)
            .expect("traces")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".json"))
            .collect();
        written.sort();
        assert!(!written.is_empty(), "{id}: traces");
        assert_eq!(listed, written, "{id}: traces.tsv names every trace");
        for name in &written {
            let trace: serde_json::Value =
                serde_json::from_slice(&std::fs::read(traces.join(name)).expect("trace")).expect("json");
            assert!(trace["traceEvents"].as_array().is_some_and(|events| !events.is_empty()), "{id}: {name}");
        }
        every.extend(written);
    }
    assert!(
        every.iter().any(|name| name.starts_with("fio-")) && every.iter().any(|name| name.starts_with("wal-bench-"))
    );
}
