//! `zonelab presets` and `zonelab calibrate`.

use std::io::Write;

use clap::Args;
use zonelab_device::{DeviceConfig, PRESETS};
use zonelab_experiments::calibrate::calibrate;

use crate::{stdout_error, CliError};

#[derive(Args)]
pub struct CalibrateArgs {
    /// A preset name or a preset TOML file.
    #[arg(long, default_value = "zn540")]
    preset: String,
    /// Override one preset field, e.g. --set media.nand.read-latency-us=60 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Fraction of the default number of simulated operations per point.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    #[arg(long)]
    json: bool,
}

pub fn list_presets(out: &mut impl Write) -> Result<(), CliError> {
    for (name, _) in PRESETS {
        let config = DeviceConfig::load(name, &[]).map_err(|error| CliError::Failed(error.to_string()))?;
        writeln!(out, "{name:<16} {}", config.description).map_err(stdout_error)?;
    }
    Ok(())
}

pub fn run(args: &CalibrateArgs, out: &mut impl Write) -> Result<(), CliError> {
    if !(args.scale > 0.0 && args.scale <= 10.0) {
        return Err(CliError::Usage(format!("--scale {} is not in (0, 10]", args.scale)));
    }
    let config =
        DeviceConfig::load(&args.preset, &args.overrides).map_err(|error| CliError::Config(error.to_string()))?;
    let calibration = calibrate(&config, args.scale).map_err(|error| CliError::Failed(error.to_string()))?;
    if args.json {
        let text = serde_json::to_string_pretty(&calibration).map_err(|error| CliError::Failed(error.to_string()))?;
        return writeln!(out, "{text}").map_err(stdout_error);
    }
    let write = |out: &mut dyn Write, line: String| writeln!(out, "{line}").map_err(stdout_error);
    write(
        out,
        format!(
            "calibration of {} ({} host path) against its reference measurements",
            calibration.preset, calibration.host_path
        ),
    )?;
    write(
        out,
        format!(
            "{:<9} {:>7} {:>5} {:>4}  {:>11} {:>11} {:>7}  {:>10} {:>10} {:>7}  {:>10} {:>10} {:>7}",
            "op",
            "bs",
            "zones",
            "qd",
            "meas IOPS",
            "model IOPS",
            "err %",
            "meas us",
            "model us",
            "err %",
            "meas p99",
            "model p99",
            "err %"
        ),
    )?;
    for point in &calibration.points {
        let measured_lat = point.measured_lat_us.map_or_else(|| "-".to_string(), |lat| format!("{lat:.1}"));
        let lat_err = point.lat_err_pct.map_or_else(|| "-".to_string(), |err| format!("{err:+.1}"));
        let measured_p99 = point.measured_p99_us.map_or_else(|| "-".to_string(), |p99| format!("{p99:.1}"));
        let p99_err = point.p99_err_pct.map_or_else(|| "-".to_string(), |err| format!("{err:+.1}"));
        write(
            out,
            format!(
                "{:<9} {:>7} {:>5} {:>4}  {:>11.0} {:>11.0} {:>+7.1}  {:>10} {:>10.1} {:>7}  {:>10} {:>10.1} {:>7}",
                point.op,
                point.bs_bytes,
                point.zones,
                point.qd,
                point.measured_iops,
                point.model_iops,
                point.iops_err_pct,
                measured_lat,
                point.model_lat_us,
                lat_err,
                measured_p99,
                point.model_p99_us,
                p99_err
            ),
        )?;
    }
    if !calibration.management.is_empty() {
        write(out, String::new())?;
        write(
            out,
            format!(
                "{:<19} {:>10}  {:>12} {:>12} {:>7}",
                "zone management", "occupancy", "meas ms", "model ms", "err %"
            ),
        )?;
        for point in &calibration.management {
            write(
                out,
                format!(
                    "{:<19} {:>10}  {:>12.4} {:>12.4} {:>+7.1}",
                    point.op, point.occupancy, point.measured_ms, point.model_ms, point.err_pct
                ),
            )?;
        }
    }
    let summary = &calibration.summary;
    write(out, String::new())?;
    write(
        out,
        format!(
            "summary: IOPS error median {:.1} %, p90 {:.1} %, mean {:.2} %; latency error median {:.1} %, p90 {:.1} %, \
             mean {:.2} %; p99 latency error median {:.1} %, p90 {:.1} %, mean {:.2} %{}",
            summary.iops_err_pct_median,
            summary.iops_err_pct_p90,
            summary.iops_err_pct_mean,
            summary.lat_err_pct_median,
            summary.lat_err_pct_p90,
            summary.lat_err_pct_mean,
            summary.p99_err_pct_median,
            summary.p99_err_pct_p90,
            summary.p99_err_pct_mean,
            summary
                .management_err_pct_max
                .map_or_else(String::new, |max| format!("; zone management worst {max:.1} %"))
        ),
    )
}
