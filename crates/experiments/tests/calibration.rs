//! The presets stay within the calibration targets. The model is deterministic, so this is a property of the
//! model, not of the machine: it fails when a change to the model moves it away from the measurements.

use zonelab_device::DeviceConfig;
use zonelab_experiments::calibrate::calibrate;

#[test]
fn zn540_meets_its_targets() {
    let config = DeviceConfig::load("zn540", &[]).expect("preset");
    let calibration = calibrate(&config, 1.0).expect("calibration runs");
    assert_eq!(calibration.points.len(), 309, "every row of the SPDK grid is replayed");
    let summary = &calibration.summary;
    assert!(summary.iops_err_pct_median <= 10.0 && summary.iops_err_pct_p90 <= 25.0, "IOPS: {summary:?}");
    assert!(summary.lat_err_pct_median <= 10.0 && summary.lat_err_pct_p90 <= 25.0, "latency: {summary:?}");
    // 14 SPDK jobs on the grid machine's 10 cores took turns: their random reads came out 26-35 % slower than
    // 14 jobs with a core each would have made them.
    let turns: Vec<_> = calibration.points.iter().filter(|point| point.zones == 14 && point.op == "randread").collect();
    assert_eq!(turns.len(), 3);
    for point in turns {
        assert!(point.iops_err_pct.abs() <= 10.0, "14 polling jobs on 10 cores: {point:?}");
    }
    // Past the way out's ceiling (16 KiB reads at 160 K/s) read data leaves as it comes ready, so the reads
    // queued behind others on their dies wait longest, and the tail stays as far above the mean as the drive's;
    // sent in submission order, every read would wait the same backlog (p99 = mean, 18-30 % low).
    let ceiling: Vec<_> = calibration
        .points
        .iter()
        .filter(|point| point.op == "randread" && point.bs_bytes == 16384 && point.qd >= 64)
        .collect();
    assert_eq!(ceiling.len(), 3);
    for point in ceiling {
        let p99_err = point.p99_err_pct.expect("the grid has p99");
        assert!(p99_err.abs() <= 10.0, "16 KiB reads at the read ceiling: {point:?}");
    }
    for point in &calibration.management {
        assert!(point.err_pct.abs() <= 15.0, "{} at {}: {:+.1} %", point.op, point.occupancy, point.err_pct);
    }
    assert_eq!(calibration.management.len(), 23);
}

#[test]
fn confzns_zwal_reproduces_its_append_scaling() {
    let config = DeviceConfig::load("confzns-zwal", &[]).expect("preset");
    let calibration = calibrate(&config, 1.0).expect("calibration runs");
    for point in &calibration.points {
        assert!(point.iops_err_pct.abs() <= 10.0, "{point:?}");
        if let Some(err) = point.lat_err_pct {
            assert!(err.abs() <= 10.0, "{point:?}");
        }
    }
    let plateau = calibration.points.iter().find(|point| point.qd == 64).expect("QD 64 row");
    assert!((plateau.model_iops - 35_550.0).abs() / 35_550.0 < 0.05, "plateau near 35.5 K IOPS: {plateau:?}");
}

#[test]
fn presets_without_references_are_refused() {
    let config = DeviceConfig::load("instant", &[]).expect("preset");
    let error = calibrate(&config, 0.1).expect_err("no references");
    assert!(error.to_string().contains("no reference measurements"), "{error}");
}

#[test]
fn a_preset_names_its_references_and_a_missing_one_is_named() {
    let overrides = ["calibration={ grid = \"nvmevirt_grid.csv\", host = \"spdk\" }".to_string()];
    let config = DeviceConfig::load("instant", &overrides).expect("a preset may name any file");
    let error = calibrate(&config, 0.1).expect_err("no such file");
    assert!(error.to_string().contains("no reference file \"nvmevirt_grid.csv\""), "{error}");
}
