//! Experiments that reproduce published figures: each is data (`experiments/*.toml`: fio command lines with a
//! swept `{x}`, the metric each series plots, and the paper's claims with their sources). A run writes
//! `results.json`, `report.md` (every figure beside the paper's, with the difference) and a PNG per figure.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;
use zonelab_device::DeviceConfig;

use crate::calibrate::calibrate;
use crate::fio::{parse_invocation, run as run_fio, FioResult};
use crate::plot::{plot_lines, plot_scatter, Line};

/// The experiments, compiled in.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    ("zns-study-reads", include_str!("../../../experiments/zns-study-reads.toml")),
    ("zns-study-writes", include_str!("../../../experiments/zns-study-writes.toml")),
    ("zwal-append-scaling", include_str!("../../../experiments/zwal-append-scaling.toml")),
    ("zn540-calibration", include_str!("../../../experiments/zn540-calibration.toml")),
    ("zwal-buffer", include_str!("../../../experiments/zwal-buffer.toml")),
    ("zwal-recovery", include_str!("../../../experiments/zwal-recovery.toml")),
    ("zwal-barrier", include_str!("../../../experiments/zwal-barrier.toml")),
    ("zinc-reset-write", include_str!("../../../experiments/zinc-reset-write.toml")),
    ("zinc-reset-read", include_str!("../../../experiments/zinc-reset-read.toml")),
    ("rezns-fio", include_str!("../../../experiments/rezns-fio.toml")),
    ("rezns-varmail", include_str!("../../../experiments/rezns-varmail.toml")),
    ("rezns-fileserver", include_str!("../../../experiments/rezns-fileserver.toml")),
    ("rezns-energy", include_str!("../../../experiments/rezns-energy.toml")),
    ("zinc-finish-read", include_str!("../../../experiments/zinc-finish-read.toml")),
    ("zinc-appends", include_str!("../../../experiments/zinc-appends.toml")),
];

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Experiment {
    pub id: String,
    pub title: String,
    pub source: String,
    pub device: String,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub figure: Vec<Figure>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Figure {
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: Vec<u32>,
    pub quick_x: Vec<u32>,
    /// fio arguments added to every series' at the points where x > 0 (a background job whose rate is x).
    #[serde(default)]
    pub when_x_positive: Option<String>,
    pub series: Vec<Series>,
    #[serde(default)]
    pub claim: Vec<Claim>,
    #[serde(default)]
    pub interference: Vec<Interference>,
}

/// The slides' interference figure over a figure's sweep (seed 004): `Z = (1/n) sum sqrt(a dT^2 + b dL^2)`,
/// with dT and dL the relative changes of throughput and latency against the sweep's first point (the isolated
/// run), over the other points.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Interference {
    pub label: String,
    pub throughput: String,
    pub latency: String,
    #[serde(default = "half")]
    pub alpha: f64,
}

fn half() -> f64 {
    0.5
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Series {
    pub label: String,
    /// `fio` (the default) or `wal-bench`.
    #[serde(default)]
    pub tool: Option<String>,
    /// For fio: `read|write.clat.pNN`, `read|write.kiops`, or `scheduler.commands_per_request`, of the last job.
    /// For wal-bench: `wal.kiops`, `wal.recovery_io_s`.
    pub metric: String,
    /// fio arguments; `{x}`, `{runtime}` and `{ramp}` are filled in.
    pub args: String,
}

/// A figure from the paper to compare with: the relative change of series a against series b at x.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Claim {
    pub text: String,
    pub series_a: String,
    pub series_b: String,
    pub x: u32,
    /// Where series b is read; `x` unless given (to compare one series at two points).
    #[serde(default)]
    pub x_b: Option<u32>,
    pub paper_change_pct: f64,
    pub explanation: String,
}

/// Why an experiment could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    #[error("unknown experiment {0:?}: see `zonelab experiment list`")]
    Unknown(String),
    #[error("experiment {id}: {message}")]
    Failed { id: String, message: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// Every experiment's definition.
pub fn experiments() -> Vec<Experiment> {
    EXPERIMENTS.iter().map(|(_, text)| toml::from_str(text).expect("the compiled-in experiments parse")).collect()
}

/// Where a series' point came from and what it measured.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub x: u32,
    pub y: f64,
}

/// A claim and what the model gives for it.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimOutcome {
    pub text: String,
    pub paper_change_pct: f64,
    pub model_change_pct: Option<f64>,
    pub explanation: String,
}

/// What `run` wrote, for the caller to print.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub id: String,
    pub directory: PathBuf,
    pub summary: Vec<String>,
}

fn metric(result: &FioResult, metric: &str) -> Result<f64, String> {
    // `JOB/what` reads job JOB; a bare `what` reads the last job.
    let (job, metric) = match metric.split_once('/') {
        Some((name, what)) => (
            result.jobs.iter().find(|job| job.options.name == name).ok_or_else(|| format!("no job named {name}"))?,
            what,
        ),
        None => (result.jobs.last().ok_or("no job ran")?, metric),
    };
    if job.error != 0 {
        return Err(format!("job {} failed: {}", job.options.name, job.error_message.clone().unwrap_or_default()));
    }
    let parts: Vec<&str> = metric.splitn(3, '.').collect();
    let direction = match parts.first() {
        Some(&"read") => &job.read,
        Some(&"write") => &job.write,
        Some(&"trim") => &job.trim,
        Some(&"scheduler") if parts.get(1) == Some(&"commands_per_request") => {
            return Ok(job.scheduler.write_commands as f64 / job.scheduler.write_requests.max(1) as f64);
        }
        _ => return Err(format!("unknown metric {metric}")),
    };
    match parts.get(1..) {
        Some(["kiops"]) => Ok(direction.ios as f64 / (job.runtime_ns as f64 / 1e9) / 1000.0),
        Some(["lat_mean_ms"]) => Ok(direction.lat.mean() / 1e6),
        Some(["clat", percentile]) => {
            let p: f64 = percentile.trim_start_matches('p').parse().map_err(|_| format!("unknown metric {metric}"))?;
            Ok(direction.clat.percentile(p) as f64 / 1000.0)
        }
        _ => Err(format!("unknown metric {metric}")),
    }
}

fn wal_metric(result: &crate::walbench::WalBenchResult, metric: &str) -> Result<f64, String> {
    match metric {
        "wal.kiops" => Ok(result.kiops),
        "wal.recovery_io_s" => result
            .recovery
            .as_ref()
            .map(|recovery| recovery.io_device_ns as f64 / 1e9)
            .ok_or_else(|| "no recovery was run (--recover)".into()),
        _ => Err(format!("unknown metric {metric}")),
    }
}

fn churn_metric(result: &crate::filechurn::FileChurnResult, metric: &str) -> Result<f64, String> {
    match metric {
        "churn.mib_per_s" => Ok(result.mib_per_s),
        "churn.ops_per_s" => Ok(result.ops_per_s),
        "churn.zones_erased" => Ok(result.zones_erased),
        "churn.read_energy_j" => Ok(result.read_energy_j),
        "churn.write_energy_j" => Ok(result.write_energy_j),
        "churn.reset_energy_j" => Ok(result.reset_energy_j),
        "churn.total_energy_j" => Ok(result.total_energy_j),
        _ => Err(format!("unknown metric {metric}")),
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ExperimentError> {
    std::fs::write(path, bytes).map_err(|source| ExperimentError::Io { path: path.to_path_buf(), source })
}

/// Runs one experiment into `out` (created if needed). `quick` sweeps fewer points over shorter runs.
pub fn run(id: &str, quick: bool, out: &Path) -> Result<Outcome, ExperimentError> {
    let experiment = experiments()
        .into_iter()
        .find(|experiment| experiment.id == id)
        .ok_or_else(|| ExperimentError::Unknown(id.to_string()))?;
    std::fs::create_dir_all(out).map_err(|source| ExperimentError::Io { path: out.to_path_buf(), source })?;
    if experiment.kind.as_deref() == Some("calibration") {
        return run_calibration(&experiment, quick, out);
    }
    let fail = |message: String| ExperimentError::Failed { id: id.to_string(), message };
    let (runtime, ramp) = if quick { ("100ms", "20ms") } else { ("2s", "500ms") };
    let mut report = format!(
        "# {}\n\nSource: {}.\n\nDevice: {}. Virtual time; {} run.\n",
        experiment.title,
        experiment.source,
        experiment.device,
        if quick { "quick" } else { "full" }
    );
    let mut figures_json = Vec::new();
    let mut summary = Vec::new();
    for figure in &experiment.figure {
        let xs = if quick { &figure.quick_x } else { &figure.x };
        let mut lines = Vec::new();
        for series in &figure.series {
            let mut points = Vec::new();
            for &x in xs {
                let extra = figure.when_x_positive.as_deref().filter(|_| x > 0).unwrap_or("");
                let args: Vec<String> = format!("{} {extra}", series.args)
                    .replace("{x}", &x.to_string())
                    .replace("{x*256}", &(u64::from(x) * 256).to_string())
                    .replace("{runtime}", runtime)
                    .replace("{ramp}", ramp)
                    .replace("{records}", if quick { "5000" } else { "40000" })
                    .replace("{zinc_runtime}", if quick { "500ms" } else { "3s" })
                    .replace("{recovery_records}", if quick { "4096" } else { "16384" })
                    .replace("{churn_jobs}", if quick { "16" } else { "64" })
                    .replace("{churn_runtime}", if quick { "5" } else { "60" })
                    .split_whitespace()
                    .map(str::to_string)
                    .collect();
                let y = match series.tool.as_deref() {
                    Some("wal-bench") => {
                        let spec = crate::walbench::parse_args(&args)
                            .map_err(|error| fail(format!("{}: {error}", series.label)))?;
                        let result =
                            crate::walbench::run(&spec).map_err(|error| fail(format!("{}: {error}", series.label)))?;
                        wal_metric(&result, &series.metric)
                            .map_err(|error| fail(format!("{} at x={x}: {error}", series.label)))?
                    }
                    Some("file-churn") => {
                        let spec = crate::filechurn::parse_args(&args)
                            .map_err(|error| fail(format!("{}: {error}", series.label)))?;
                        let result =
                            crate::filechurn::run(&spec).map_err(|error| fail(format!("{}: {error}", series.label)))?;
                        churn_metric(&result, &series.metric)
                            .map_err(|error| fail(format!("{} at x={x}: {error}", series.label)))?
                    }
                    _ => {
                        let invocation = parse_invocation(&args, |_| Err("experiments use no job files".into()))
                            .map_err(|error| fail(format!("{}: {error}", series.label)))?;
                        let result =
                            run_fio(&invocation, 1).map_err(|error| fail(format!("{}: {error}", series.label)))?;
                        metric(&result, &series.metric)
                            .map_err(|error| fail(format!("{} at x={x}: {error}", series.label)))?
                    }
                };
                points.push(Point { x, y });
            }
            lines.push((series.label.clone(), points));
        }
        let png = out.join(format!("{}.png", figure.id));
        let plotted: Vec<Line> = lines
            .iter()
            .filter(|(label, _)| !label.contains("per request"))
            .map(|(label, points)| Line {
                label: label.clone(),
                points: points.iter().map(|p| (f64::from(p.x), p.y)).collect(),
            })
            .collect();
        plot_lines(&png, &figure.title, &figure.x_label, &figure.y_label, &plotted).map_err(fail)?;
        let _ = writeln!(report, "\n## {}: {}\n\n![{}]({}.png)\n", figure.id, figure.title, figure.id, figure.id);
        let _ = writeln!(
            report,
            "| {} | {} |",
            figure.x_label,
            lines.iter().map(|(label, _)| label.as_str()).collect::<Vec<_>>().join(" | ")
        );
        let _ = writeln!(report, "|---|{}", "---|".repeat(lines.len()));
        for (index, x) in xs.iter().enumerate() {
            let cells: Vec<String> = lines.iter().map(|(_, points)| format!("{:.2}", points[index].y)).collect();
            let _ = writeln!(report, "| {x} | {} |", cells.join(" | "));
        }
        let mut claims = Vec::new();
        if !figure.claim.is_empty() {
            let _ = writeln!(report, "\n| the paper says | paper | zonelab | why |\n|---|---|---|---|");
        }
        for claim in &figure.claim {
            let value = |label: &str, x: u32| {
                lines
                    .iter()
                    .find(|(name, _)| name == label)
                    .and_then(|(_, points)| points.iter().find(|p| p.x == x))
                    .map(|p| p.y)
            };
            let model = match (value(&claim.series_a, claim.x), value(&claim.series_b, claim.x_b.unwrap_or(claim.x))) {
                (Some(a), Some(b)) if b != 0.0 => Some((a - b) / b * 100.0),
                _ => None,
            };
            let model_text = model.map_or_else(|| "not in this sweep".to_string(), |change| format!("{change:+.1} %"));
            let _ = writeln!(
                report,
                "| {} | {:+.1} % | {} | {} |",
                claim.text, claim.paper_change_pct, model_text, claim.explanation
            );
            summary.push(format!(
                "{} {}: paper {:+.1} %, zonelab {}",
                experiment.id, figure.id, claim.paper_change_pct, model_text
            ));
            claims.push(ClaimOutcome {
                text: claim.text.clone(),
                paper_change_pct: claim.paper_change_pct,
                model_change_pct: model,
                explanation: claim.explanation.clone(),
            });
        }
        let mut interference = Vec::new();
        for spec in &figure.interference {
            let series = |label: &str| lines.iter().find(|(name, _)| name == label).map(|(_, points)| points.clone());
            let (Some(throughput), Some(latency)) = (series(&spec.throughput), series(&spec.latency)) else {
                return Err(fail(format!(
                    "interference {}: no series {} or {}",
                    spec.label, spec.throughput, spec.latency
                )));
            };
            let (t0, l0) = (throughput[0].y, latency[0].y);
            let terms: Vec<f64> = throughput
                .iter()
                .zip(&latency)
                .skip(1)
                .map(|(t, l)| {
                    let (dt, dl) = ((t.y - t0) / t0, (l.y - l0) / l0);
                    (spec.alpha * dt * dt + (1.0 - spec.alpha) * dl * dl).sqrt()
                })
                .collect();
            let z = terms.iter().sum::<f64>() / terms.len().max(1) as f64;
            let _ = writeln!(report, "\nInterference Z ({}, alpha {}): {z:.3}", spec.label, spec.alpha);
            summary.push(format!("{} {}: interference Z of {} = {z:.3}", experiment.id, figure.id, spec.label));
            interference.push(json!({ "label": spec.label, "alpha": spec.alpha, "z": z }));
        }
        figures_json.push(json!({
            "interference": interference,
            "id": figure.id,
            "title": figure.title,
            "x_label": figure.x_label,
            "y_label": figure.y_label,
            "series": lines.iter().map(|(label, points)| json!({"label": label, "points": points})).collect::<Vec<_>>(),
            "claims": claims,
        }));
    }
    let results = json!({ "experiment": experiment.id, "title": experiment.title, "source": experiment.source, "quick": quick, "figures": figures_json });
    write_file(&out.join("results.json"), serde_json::to_string_pretty(&results).expect("json").as_bytes())?;
    write_file(&out.join("report.md"), report.as_bytes())?;
    Ok(Outcome { id: experiment.id, directory: out.to_path_buf(), summary })
}

fn run_calibration(experiment: &Experiment, quick: bool, out: &Path) -> Result<Outcome, ExperimentError> {
    let fail = |message: String| ExperimentError::Failed { id: experiment.id.clone(), message };
    let config = DeviceConfig::load("zn540", &[]).map_err(|error| fail(error.to_string()))?;
    let calibration = calibrate(&config, if quick { 0.1 } else { 1.0 }).map_err(|error| fail(error.to_string()))?;
    let iops: Vec<(f64, f64)> =
        calibration.points.iter().map(|p| (p.measured_iops / 1000.0, p.model_iops / 1000.0)).collect();
    let latency: Vec<(f64, f64)> = calibration
        .points
        .iter()
        .filter_map(|p| p.measured_lat_us.map(|measured| (measured, p.model_lat_us)))
        .collect();
    let management: Vec<(f64, f64)> = calibration.management.iter().map(|p| (p.measured_ms, p.model_ms)).collect();
    plot_scatter(
        &out.join("iops.png"),
        "zn540: model against measured IOPS (309 SPDK points)",
        "measured KIOPS",
        "model KIOPS",
        &iops,
    )
    .map_err(fail)?;
    plot_scatter(
        &out.join("latency.png"),
        "zn540: model against measured mean latency",
        "measured us",
        "model us",
        &latency,
    )
    .map_err(fail)?;
    plot_scatter(
        &out.join("zone-management.png"),
        "zn540: reset, finish, open, close latency",
        "measured ms",
        "model ms",
        &management,
    )
    .map_err(fail)?;
    let summary = &calibration.summary;
    let mut report = format!(
        "# {}\n\nSource: {}.\n\nDevice: {}. {} run.\n\n| | median abs. error | p90 abs. error |\n|---|---|---|\n| IOPS | {:.1} % | {:.1} % |\n| mean latency | {:.1} % | {:.1} % |\n\nZone management, worst error: {:.1} %.\n\n![IOPS](iops.png)\n\n![latency](latency.png)\n\n![zone management](zone-management.png)\n\n## Zone management\n\n| op | occupancy | measured ms | model ms | error |\n|---|---|---|---|---|\n",
        experiment.title,
        experiment.source,
        experiment.device,
        if quick { "Quick" } else { "Full" },
        summary.iops_err_pct_median,
        summary.iops_err_pct_p90,
        summary.lat_err_pct_median,
        summary.lat_err_pct_p90,
        summary.management_err_pct_max.unwrap_or(0.0)
    );
    for point in &calibration.management {
        let _ = writeln!(
            report,
            "| {} | {} | {:.4} | {:.4} | {:+.1} % |",
            point.op, point.occupancy, point.measured_ms, point.model_ms, point.err_pct
        );
    }
    let mut worst: Vec<_> = calibration.points.iter().collect();
    worst.sort_by(|a, b| b.iops_err_pct.abs().total_cmp(&a.iops_err_pct.abs()));
    let _ = writeln!(report, "\n## The ten worst points (IOPS)\n\n| op | bs | zones | qd | measured | model | error |\n|---|---|---|---|---|---|---|");
    for point in worst.iter().take(10) {
        let _ = writeln!(
            report,
            "| {} | {} | {} | {} | {:.0} | {:.0} | {:+.1} % |",
            point.op, point.bs_bytes, point.zones, point.qd, point.measured_iops, point.model_iops, point.iops_err_pct
        );
    }
    write_file(&out.join("results.json"), serde_json::to_string_pretty(&calibration).expect("json").as_bytes())?;
    write_file(&out.join("report.md"), report.as_bytes())?;
    Ok(Outcome {
        id: experiment.id.clone(),
        directory: out.to_path_buf(),
        summary: vec![format!(
            "{}: IOPS error median {:.1} %, p90 {:.1} %; latency median {:.1} %, p90 {:.1} %",
            experiment.id,
            summary.iops_err_pct_median,
            summary.iops_err_pct_p90,
            summary.lat_err_pct_median,
            summary.lat_err_pct_p90
        )],
    })
}
