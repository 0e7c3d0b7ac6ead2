//! The file-churn driver: the same files are written and deleted under every mapping policy, and ReZNS's
//! renewable zones erase less, which the driver's figures show.

use zonelab_media::FlashOp;
use zonelab_workload::filechurn::{parse_args, run, FileChurnResult};

fn churn(policy: &str, fsync: u64) -> FileChurnResult {
    let args: Vec<String> = format!(
        "--preset=nvmevirt-rezns,zones=40,media.mapping.policy={policy} --jobs=8 --file-size=15MiB --fsync={fsync} --rounds=3 --prefill=0.5"
    )
    .split_whitespace()
    .map(str::to_string)
    .collect();
    run(&parse_args(&args).expect("options")).expect("runs")
}

#[test]
fn rezns_renews_partly_written_zones_instead_of_erasing_them() {
    let baseline = churn("static-full-erase", 64);
    let rezns = churn("rezns", 64);
    for result in [&baseline, &rezns] {
        assert_eq!(result.files.bytes_written, 8 * 3 * (15 << 20), "every job writes its file three times");
        assert_eq!(result.files.resets, 8 * 3, "and deletes it three times");
    }
    assert_eq!(baseline.zones_erased, 24.0, "each delete erases a whole zone");
    assert!(baseline.reset_energy_j > 0.0);
    assert_eq!((rezns.zones_erased, rezns.reset_energy_j), (0.0, 0.0), "15, 30, 45 of 64 MiB: always renewed");
    let renewable = rezns.wear.renewable.as_ref().expect("rezns stats");
    assert_eq!((renewable.renewed_resets, renewable.spare_reuses), (24, 16), "rounds 2 and 3 reuse the spares");
    assert!(rezns.mib_per_s > baseline.mib_per_s, "{} vs {}", rezns.mib_per_s, baseline.mib_per_s);
    assert!(rezns.total_energy_j < baseline.total_energy_j);
    for result in [&baseline, &rezns] {
        let parts = result.read_energy_j + result.write_energy_j + result.reset_energy_j;
        assert!((parts - result.total_energy_j).abs() < 1e-9, "energy adds up: {parts} vs {}", result.total_energy_j);
        let (programs, erases) = (result.flash.total(FlashOp::PageProgram), result.flash.total(FlashOp::BlockErase));
        let expected = programs as f64 * 7660e-9 + erases as f64 * 43125e-9;
        assert!((expected - result.total_energy_j).abs() < 1e-6, "Table 1's constants: {expected} J");
    }
}

#[test]
fn bad_options_name_what_is_wrong() {
    let error = parse_args(&["--fsync=often".to_string()]).expect_err("not a number");
    assert!(error.is_usage() && error.to_string().contains("fsync"), "{error}");
    let error = parse_args(&["--prefill=1.5".to_string()]).expect_err("not a fraction");
    assert!(error.is_usage() && error.to_string().contains("prefill"), "{error}");
    let too_many =
        parse_args(&["--preset=nvmevirt-rezns,zones=8".to_string(), "--jobs=8".to_string()]).expect("parses");
    let error = run(&too_many).expect_err("no room");
    assert!(error.is_usage() && error.to_string().contains("8 jobs"), "{error}");
    let unknown = parse_args(&["--preset=nope".to_string()]).expect("parses");
    let error = run(&unknown).expect_err("no such preset");
    assert!(error.is_usage() && error.to_string().contains("unknown preset"), "{error}");
}

fn mix(workload: &str, policy: &str) -> FileChurnResult {
    let args: Vec<String> = format!(
        "--workload={workload} --preset=nvmevirt-rezns,zones=40,media.mapping.policy={policy} --jobs=2 --files=4 --file-size=128KiB --runtime=0.5 --seed=3"
    )
    .split_whitespace()
    .map(str::to_string)
    .collect();
    run(&parse_args(&args).expect("options")).expect("runs")
}

#[test]
fn the_filebench_mixes_delete_files_and_rezns_keeps_their_zones() {
    for workload in ["varmail", "fileserver"] {
        let baseline = mix(workload, "static-full-erase");
        let rezns = mix(workload, "rezns");
        for result in [&baseline, &rezns] {
            assert!(result.files.writes > 0 && result.files.reads > 0 && result.files.resets > 0, "{workload}");
            assert!(result.device_time_ns >= 500_000_000, "{workload}: runs for its device time");
        }
        assert_eq!(baseline.zones_erased, baseline.files.resets as f64, "{workload}: every delete erases a zone");
        let renewable = rezns.wear.renewable.as_ref().expect("rezns stats");
        assert!(renewable.renewed_resets > 0, "{workload}: {renewable:?}");
        assert!(rezns.ops_per_s > baseline.ops_per_s, "{workload}: {} vs {}", rezns.ops_per_s, baseline.ops_per_s);
        assert_eq!(mix(workload, "rezns").files, rezns.files, "{workload}: the same seed gives the same run");
    }
    assert!(parse_args(&["--workload=oltp".to_string()]).expect_err("unknown").to_string().contains("varmail"));
}
