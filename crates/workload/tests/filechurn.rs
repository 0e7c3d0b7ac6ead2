//! The file-churn driver: the same files are written and deleted under every mapping policy, and ReZNS's
//! renewable zones erase less, which the driver's figures show.

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
}

#[test]
fn bad_options_name_what_is_wrong() {
    let error = parse_args(&["--fsync=often".to_string()]).expect_err("not a number");
    assert!(error.contains("fsync"), "{error}");
    let error = parse_args(&["--prefill=1.5".to_string()]).expect_err("not a fraction");
    assert!(error.contains("prefill"), "{error}");
    let too_many =
        parse_args(&["--preset=nvmevirt-rezns,zones=8".to_string(), "--jobs=8".to_string()]).expect("parses");
    assert!(run(&too_many).expect_err("no room").contains("8 jobs"));
}
