//! Experiments that reproduce published figures: each is data (`experiments/*.toml`: fio command lines with a
//! swept `{x}`, the metric each series plots, and the paper's claims with their sources). A run writes
//! `results.json`, `report.md` (every figure beside the paper's, with the difference) and a PNG per figure.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;
use zonelab_device::DeviceConfig;

use crate::calibrate::calibrate;
use zonelab_bench::plot::{plot_lines, plot_scatter, Line, Mark};

mod tools;
mod verdict;

use tools::{fill, Runs, Tool};
pub use verdict::Verdict;

/// The experiments, compiled in: every TOML file of `experiments/` (the build script lists them), by id.
pub const EXPERIMENTS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/experiments.rs"));

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Experiment {
    pub id: String,
    pub title: String,
    pub source: String,
    pub device: String,
    #[serde(default)]
    pub kind: Option<String>,
    /// Runs real programs on the wall clock (db_bench and zonelab_ycsb through the RocksDB plugin, see
    /// `realdb`) instead of the virtual-time simulation; without RocksDB its claims are not measured.
    #[serde(default)]
    pub real_time: bool,
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
    /// fio series run this many times, with seeds 1 to N of the reordering of concurrent submissions; tables
    /// show seed 1 and the interference figure its spread over the seeds. Real programs (`db-bench`, `ycsb`)
    /// run this many rounds (two in a quick run) with `{seed}` set to the round; tables show their median.
    #[serde(default = "one")]
    pub seeds: u64,
    pub series: Vec<Series>,
    #[serde(default)]
    pub claim: Vec<Claim>,
    #[serde(default)]
    pub interference: Vec<Interference>,
}

/// The slides' interference figure over a figure's sweep (seed 004): `Z = (1/n) sum sqrt(a dT^2 + b dL^2)`,
/// with dT and dL the relative changes of throughput and latency against the sweep's first point (the isolated
/// run), over the other points. With a baseline, Z is the authors' artifact's (stonet-research/
/// systor-confznsplusplus-artifact, `interference_model/quantification.py`): every point against the same point
/// of a run without interference, `sqrt(dT^2 + dL^2)` unweighted.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Interference {
    pub label: String,
    pub throughput: String,
    pub latency: String,
    #[serde(default = "half")]
    pub alpha: f64,
    /// The series of the run without interference, point by point (the artifact's form).
    #[serde(default)]
    pub baseline_throughput: Option<String>,
    #[serde(default)]
    pub baseline_latency: Option<String>,
}

fn half() -> f64 {
    0.5
}

fn one() -> u64 {
    1
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Series {
    pub label: String,
    /// `fio` (the default), `wal-bench`, `file-churn`, `kv-bench`, or, in a real-time experiment, `db-bench`
    /// or `ycsb` (real RocksDB; metrics in `realdb::metric`).
    #[serde(default)]
    pub tool: Option<String>,
    /// For fio: `read|write|trim.clat.pNN`, `read|write|trim.kiops`, `read|write|trim.iops` (a rate-limited
    /// job's achieved rate), `read|write.gib_per_s` (bandwidth in GiB/s),
    /// `scheduler.commands_per_request`, `device.waf` (pages programmed per page the host wrote, in the job's
    /// group) or `host.waf` (the host FTL's), of the last job; `JOB/metric` of job JOB, where `{x}` in JOB is
    /// the point's x (one run's consecutive jobs as the points of a series).
    /// For wal-bench: `wal.kiops`, `wal.recovery_io_s` (the reads), `wal.recovery_s` (reads and memtable apply).
    /// For kv-bench: `kv.kiops`, `kv.put.p99.9`, `kv.zones.live_pct`, `kv.zones.files_per_zone`, `kv.zone_resets`.
    pub metric: String,
    /// fio arguments; `{x}`, `{runtime}` and `{ramp}` are filled in.
    pub args: String,
}

/// A figure from the paper to compare with: the relative change of series a against series b at x.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Claim {
    /// The claim as a figure zonelab can compute.
    pub text: String,
    /// The paper's own words for it, verbatim.
    pub quote: String,
    /// Where in the paper: section, figure or slide.
    #[serde(rename = "where")]
    pub location: String,
    /// A series' label, or `Z of LABEL` for one of the figure's interference figures.
    pub series_a: String,
    /// The series a is compared with (a change claim); absent for a value claim.
    #[serde(default)]
    pub series_b: Option<String>,
    pub x: u32,
    /// Where series b is read; `x` unless given (to compare one series at two points).
    #[serde(default)]
    pub x_b: Option<u32>,
    /// The paper's relative change of a against b, in percent (a change claim).
    #[serde(default)]
    pub paper_change_pct: Option<f64>,
    /// The paper's change is a bound from below (a claim that something does not help: at least no change).
    #[serde(default)]
    pub at_least: bool,
    /// The paper's value of series a at x, in the figure's unit (a value claim).
    #[serde(default)]
    pub paper_value: Option<f64>,
    /// In-sample: which of the model's constants were fitted to which measurement this figure also rests on.
    /// None: the figure is a prediction.
    #[serde(default)]
    pub fitted: Option<String>,
    /// Why the paper's stated setup cannot give its figure, with the evidence: a run that does not reproduce it
    /// then gets that verdict, and the report shows the evidence.
    #[serde(default)]
    pub setup_cannot_produce: Option<String>,
    /// How this series bounds the paper's setup from above: its figure is then an upper bound, never a direction.
    #[serde(default)]
    pub upper_bound: Option<String>,
    /// What explains each outcome; the report shows the one for the verdict the run computes.
    #[serde(default)]
    pub why: Why,
}

/// A claim's explanation for each verdict it can get.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Why {
    #[serde(default)]
    pub reproduced: Option<String>,
    #[serde(default)]
    pub direction: Option<String>,
    #[serde(default)]
    pub not_reproduced: Option<String>,
}

/// Interference figures below this are no measurable interference: a relative change of throughput and tail
/// latency of 1 % together, within the run-to-run spread of the micro-benchmarks' points.
const Z_NOISE_FLOOR: f64 = 0.01;

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
    /// The events behind the figure, when few could move it: for a percentile the samples beyond it, for a
    /// count of erased zones the count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
    /// y under each seed, when the figure runs more than one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_seed: Vec<f64>,
    /// What the file system under a file workload did, when it explains the figure (logfs's resets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_system: Option<String>,
    /// In real time, the worst share of late completions over the point's rounds: past
    /// `zonelab_runtime::LATE_SHARE_WARNING` the device did not keep the model's pace, and the point is not settled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_share: Option<f64>,
}

/// Events behind a figure below which it is not stable: a few more or less (a longer run) move it.
const STABLE_EVENTS: u64 = 100;

impl Point {
    fn unstable(&self) -> bool {
        self.events.is_some_and(|tail| tail < STABLE_EVENTS) || self.ran_late()
    }

    /// The device ran late for more of its completions than a run's figures can stand.
    fn ran_late(&self) -> bool {
        self.late_share.is_some_and(|share| share > zonelab_runtime::LATE_SHARE_WARNING)
    }

    /// The lowest and highest y over seeds, when the figure ran more than one.
    fn seed_range(&self) -> Option<(f64, f64)> {
        (self.by_seed.len() > 1).then(|| {
            self.by_seed.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), &y| (low.min(y), high.max(y)))
        })
    }
}

/// Two figures whose ranges over seeds overlap: which is larger depends on the seed, so the run does not
/// settle a comparison of them.
fn seed_ranges_overlap(a: &Point, b: &Point) -> bool {
    match (a.seed_range(), b.seed_range()) {
        (Some((a_low, a_high)), Some((b_low, b_high))) => a_low <= b_high && b_low <= a_high,
        _ => false,
    }
}

/// A claim and what the model gives for it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClaimOutcome {
    pub text: String,
    pub quote: String,
    #[serde(rename = "where")]
    pub location: String,
    /// The paper's figure and the run's: relative changes in percent, or values in `unit`.
    pub paper: f64,
    pub zonelab: Option<f64>,
    /// `%` for a change claim, the figure's unit for a value claim.
    pub unit: String,
    pub verdict: Verdict,
    /// False when a figure it rests on has too few events behind it to hold still (see `Point::events`).
    pub settled: bool,
    /// What was fitted to what, for an in-sample figure; None for a prediction.
    pub fitted: Option<String>,
    pub explanation: String,
}

impl ClaimOutcome {
    /// A figure of this claim as tables print it: `+12.3 %` for a change, `1.95 s` for a value.
    pub fn figure(&self, value: Option<f64>) -> String {
        match value {
            None => "not measured".to_string(),
            Some(value) if self.unit == "%" => format!("{value:+.1} %"),
            Some(value) => format!("{value:.3} {}", self.unit),
        }
    }

    /// The verdict's name, flagged when the run cannot settle it.
    pub fn verdict_text(&self) -> String {
        if self.settled {
            self.verdict.name().to_string()
        } else {
            format!("{} (not settled)", self.verdict.name())
        }
    }

    /// `fitted` or `predicted`, for tables.
    pub fn basis(&self) -> &'static str {
        if self.fitted.is_some() {
            "fitted"
        } else {
            "predicted"
        }
    }
}

/// What `run` wrote, for the caller to print.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub id: String,
    pub directory: PathBuf,
    pub summary: Vec<String>,
}

/// The report of a real-time experiment that could not run here: every claim not measured, and why.
fn not_run(
    experiment: &Experiment,
    mut report: String,
    reason: &str,
    quick: bool,
    out: &Path,
) -> Result<Outcome, ExperimentError> {
    let _ = writeln!(report, "\nNot run on this machine: {reason}.");
    let mut all_claims = Vec::new();
    let mut summary = Vec::new();
    for figure in &experiment.figure {
        for claim in &figure.claim {
            let (paper, unit) = match (claim.paper_change_pct, claim.paper_value) {
                (Some(change), _) => (change, "%".to_string()),
                (None, Some(value)) => (value, figure_unit(&figure.y_label).unwrap_or("").to_string()),
                (None, None) => continue,
            };
            let outcome = ClaimOutcome {
                text: claim.text.clone(),
                quote: claim.quote.clone(),
                location: claim.location.clone(),
                paper,
                zonelab: None,
                unit,
                verdict: Verdict::NotMeasured,
                settled: true,
                fitted: claim.fitted.clone(),
                explanation: format!("not run: {reason}"),
            };
            summary.push(format!("{} {}: not measured ({reason})", experiment.id, figure.id));
            all_claims.push((figure.id.clone(), outcome));
        }
    }
    let figures: Vec<serde_json::Value> = experiment
        .figure
        .iter()
        .map(|figure| {
            let claims: Vec<&ClaimOutcome> =
                all_claims.iter().filter(|(id, _)| *id == figure.id).map(|(_, claim)| claim).collect();
            json!({ "id": figure.id, "title": figure.title, "series": [], "claims": claims })
        })
        .collect();
    let results = json!({ "experiment": experiment.id, "title": experiment.title, "source": experiment.source,
        "quick": quick, "not_run": reason, "figures": figures });
    write_file(&out.join("results.json"), serde_json::to_string_pretty(&results).expect("json").as_bytes())?;
    report.push_str(&claims_at_a_glance(&all_claims));
    write_file(&out.join("report.md"), report.as_bytes())?;
    Ok(Outcome { id: experiment.id.clone(), directory: out.to_path_buf(), summary })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ExperimentError> {
    std::fs::write(path, bytes).map_err(|source| ExperimentError::Io { path: path.to_path_buf(), source })
}

/// Runs one experiment into `out` (created if needed). `quick` sweeps fewer points over shorter runs; `jobs`
/// virtual-time runs go at once, each on a thread of its own, with the same results for any number.
pub fn run(id: &str, quick: bool, out: &Path, jobs: usize) -> Result<Outcome, ExperimentError> {
    run_traced(id, quick, out, jobs, false)
}

/// `run`; with `trace`, every virtual-time run (fio, wal-bench, kv-bench, file-churn) also writes its Perfetto
/// trace into `OUT/traces`, named by its tool, a hash of its arguments and fio's seed, and `traces.tsv` there
/// says which file is which run. The results are the same bytes either way.
pub fn run_traced(id: &str, quick: bool, out: &Path, jobs: usize, trace: bool) -> Result<Outcome, ExperimentError> {
    let experiment = experiments()
        .into_iter()
        .find(|experiment| experiment.id == id)
        .ok_or_else(|| ExperimentError::Unknown(id.to_string()))?;
    std::fs::create_dir_all(out).map_err(|source| ExperimentError::Io { path: out.to_path_buf(), source })?;
    if experiment.kind.as_deref() == Some("calibration") {
        return run_calibration(&experiment, quick, out);
    }
    let fail = |message: String| ExperimentError::Failed { id: id.to_string(), message };
    let clock = if experiment.real_time {
        "Real time: Debian's RocksDB through the zonelab plugin on this machine's clock, each point the median of \
         its figure's rounds (two in a quick run), run one after another, so the ratios carry this machine's noise"
    } else {
        "Virtual time"
    };
    let mut report = format!(
        "# {}\n\nSource: {}.\n\nDevice: {}. {clock}; {} run.\n",
        experiment.title,
        experiment.source,
        experiment.device,
        if quick { "quick" } else { "full" }
    );
    if experiment.real_time {
        if let Err(reason) = zonelab_bench::realdb::plugin() {
            return not_run(&experiment, report, &reason, quick, out);
        }
    }
    let mut figures_json = Vec::new();
    let mut summary = Vec::new();
    let mut all_claims: Vec<(String, ClaimOutcome)> = Vec::new();
    let mut runs = Runs::default();
    if trace {
        let dir = out.join("traces");
        std::fs::create_dir_all(&dir).map_err(|source| ExperimentError::Io { path: dir.clone(), source })?;
        runs.traces = Some(dir);
    }
    // Every virtual-time run the points take, `jobs` at a time; real programs run on the wall clock, one at a
    // time, as their points come.
    let mut keys = Vec::new();
    for figure in &experiment.figure {
        for series in &figure.series {
            let tool = Tool::of(series).map_err(fail)?;
            for &x in if quick { &figure.quick_x } else { &figure.x } {
                keys.extend(tool.runs(figure, &fill(&series.args, figure, x, quick)));
            }
        }
    }
    runs.prefetch(keys, jobs);
    for figure in &experiment.figure {
        let xs = if quick { &figure.quick_x } else { &figure.x };
        let mut lines = Vec::new();
        for series in &figure.series {
            let tool = Tool::of(series).map_err(fail)?;
            let mut points = Vec::new();
            for &x in xs {
                let args = fill(&series.args, figure, x, quick);
                let point = tool
                    .measure(&mut runs, figure, series, x, &args, quick)
                    .map_err(|error| fail(format!("{} at x={x}: {error}", series.label)))?;
                points.push(point);
            }
            lines.push((series.label.clone(), points));
        }
        let _ = writeln!(report, "\n## {}: {}\n", figure.id, figure.title);
        // One unit per axis: series of another unit than the figure's (a latency beside KIOPS) get a plot of
        // their own.
        let mut plots: Vec<(String, Vec<Line>)> = Vec::new();
        for (label, points) in lines.iter().filter(|(label, _)| !is_ratio(label)) {
            let y_label = series_axis(&figure.y_label, label);
            let line = Line { label: label.clone(), points: points.iter().map(|p| (f64::from(p.x), p.y)).collect() };
            match plots.iter_mut().find(|(axis, _)| *axis == y_label) {
                Some((_, plotted)) => plotted.push(line),
                None => plots.push((y_label, vec![line])),
            }
        }
        // The paper's figures as crosses numbered by claim: a value where the paper gives one, and for a change
        // the value it implies beside the series it is a change of.
        let paper_marks = |y_label: &str| -> Vec<Mark> {
            let on_axis = |label: &str| series_axis(&figure.y_label, label) == y_label;
            let at = |label: &str, x: u32| {
                let points = lines.iter().find(|(name, _)| name == label).map(|(_, points)| points)?;
                points.iter().find(|point| point.x == x).map(|point| point.y)
            };
            let implied = |claim: &Claim| match (claim.paper_value, claim.paper_change_pct, &claim.series_b) {
                (Some(value), ..) => Some(value),
                (None, Some(pct), Some(b)) => at(b, claim.x_b.unwrap_or(claim.x)).map(|y| y * (1.0 + pct / 100.0)),
                _ => None,
            };
            figure
                .claim
                .iter()
                .enumerate()
                .filter(|(_, claim)| !claim.series_a.starts_with("Z of ") && on_axis(&claim.series_a))
                .filter_map(|(index, claim)| {
                    implied(claim).map(|y| Mark { claim: index + 1, x: f64::from(claim.x), y })
                })
                .collect()
        };
        for (index, (y_label, plotted)) in plots.iter().enumerate() {
            let name = if index == 0 { figure.id.clone() } else { format!("{}-{}", figure.id, index + 1) };
            let marks = paper_marks(y_label);
            plot_lines(&out.join(format!("{name}.png")), &figure.title, &figure.x_label, y_label, plotted, &marks)
                .map_err(fail)?;
            let _ = writeln!(report, "![{name}]({name}.png)\n");
        }
        let headers: Vec<String> = lines.iter().map(|(label, _)| column_header(&figure.y_label, label)).collect();
        let _ = writeln!(report, "| {} | {} |", figure.x_label, headers.join(" | "));
        let _ = writeln!(report, "|---|{}", "---|".repeat(lines.len()));
        for (index, x) in xs.iter().enumerate() {
            let cells: Vec<String> = lines
                .iter()
                .map(|(_, points)| {
                    let point = &points[index];
                    format!("{:.2}{}", point.y, if point.unstable() { "*" } else { "" })
                })
                .collect();
            let _ = writeln!(report, "| {x} | {} |", cells.join(" | "));
        }
        // Series read from one run (a run's read, write and reset energy) share its file system's figures: each
        // is said once, with every series it holds for.
        let mut file_systems: Vec<(u32, &str, Vec<&str>)> = Vec::new();
        for (label, points) in &lines {
            for point in points {
                let Some(file_system) = point.file_system.as_deref() else { continue };
                match file_systems.iter_mut().find(|(x, text, _)| *x == point.x && *text == file_system) {
                    Some((_, _, labels)) => labels.push(label),
                    None => file_systems.push((point.x, file_system, vec![label])),
                }
            }
        }
        for (x, file_system, labels) in file_systems {
            let _ = writeln!(report, "\n{} at {x}: {file_system}.", labels.join(", "));
        }
        let tails: Vec<u64> = lines.iter().flat_map(|(_, points)| points.iter().filter_map(|p| p.events)).collect();
        if let (Some(fewest), Some(most)) = (tails.iter().min(), tails.iter().max()) {
            let _ = writeln!(
                report,
                "\nPercentiles and counts rest on {fewest} to {most} events (samples beyond a percentile, zones erased){}",
                if lines.iter().any(|(_, points)| points.iter().any(Point::unstable)) {
                    format!(
                        "; * marks those with fewer than {STABLE_EVENTS}, which a few samples can move (a full \
                         run is longer)."
                    )
                } else {
                    ".".to_string()
                }
            );
        }
        // The interference figures first: a claim may compare them ("Z of LABEL").
        let mut zs = Vec::new();
        for spec in &figure.interference {
            let series = |label: &str| lines.iter().find(|(name, _)| name == label).map(|(_, points)| points.clone());
            let (Some(throughput), Some(latency)) = (series(&spec.throughput), series(&spec.latency)) else {
                return Err(fail(format!(
                    "interference {}: no series {} or {}",
                    spec.label, spec.throughput, spec.latency
                )));
            };
            let baseline = match (&spec.baseline_throughput, &spec.baseline_latency) {
                (Some(throughput), Some(latency)) => match (series(throughput), series(latency)) {
                    (Some(throughput), Some(latency)) => Some((throughput, latency)),
                    _ => return Err(fail(format!("interference {}: no baseline series", spec.label))),
                },
                (None, None) => None,
                _ => return Err(fail(format!("interference {}: a baseline needs both series", spec.label))),
            };
            // Z of seed `s` (0: the tables' seed), from each series' values under that seed.
            let z_of = |s: usize| {
                let value = |point: &Point| point.by_seed.get(s).copied().unwrap_or(point.y);
                let change = |now: &Point, then: &Point| (value(now) - value(then)) / value(then);
                let terms: Vec<f64> = match &baseline {
                    Some((base_throughput, base_latency)) => (throughput.iter().zip(&latency))
                        .zip(base_throughput.iter().zip(base_latency))
                        .map(|((t, l), (t0, l0))| change(t, t0).hypot(change(l, l0)))
                        .collect(),
                    None => throughput
                        .iter()
                        .zip(&latency)
                        .skip(1)
                        .map(|(t, l)| {
                            let (dt, dl) = (change(t, &throughput[0]), change(l, &latency[0]));
                            (spec.alpha * dt * dt + (1.0 - spec.alpha) * dl * dl).sqrt()
                        })
                        .collect(),
                };
                terms.iter().sum::<f64>() / terms.len().max(1) as f64
            };
            let by_seed: Vec<f64> = (0..figure.seeds.max(1) as usize).map(z_of).collect();
            let z = by_seed[0];
            let unstable = throughput.iter().chain(&latency).any(Point::unstable);
            // As a point a claim can read: an unsettled Z marks the claim unsettled, as a percentile on too few
            // samples does.
            let point =
                Point { x: 0, y: z, events: unstable.then_some(0), by_seed, file_system: None, late_share: None };
            let spread = match point.seed_range() {
                Some((low, high)) => {
                    format!(" (seed 1; {low:.3} to {high:.3} over seeds 1 to {})", point.by_seed.len())
                }
                None => String::new(),
            };
            zs.push((spec, point, spread));
        }
        let mut claims = Vec::new();
        if !figure.claim.is_empty() {
            let _ = writeln!(
                report,
                "\n| # | the paper says | where | paper | zonelab | verdict | basis | why |\n|---|---|---|---|---|---|---|---|"
            );
        }
        for (number, claim) in (1..).zip(&figure.claim) {
            let point = |label: &str, x: u32| {
                if let Some(of) = label.strip_prefix("Z of ") {
                    return zs.iter().find(|(spec, ..)| spec.label == of).map(|(_, point, _)| point);
                }
                lines.iter().find(|(name, _)| name == label).and_then(|(_, points)| points.iter().find(|p| p.x == x))
            };
            let a = point(&claim.series_a, claim.x);
            let b = claim.series_b.as_deref().and_then(|series| point(series, claim.x_b.unwrap_or(claim.x)));
            let unit = figure_unit(&figure.y_label).unwrap_or_default();
            // Two interference figures below the noise floor are no interference either way: their ratio is
            // noise, and the change between them is not measured.
            let below_floor = |point: &Point| claim.series_a.starts_with("Z of ") && point.y.abs() < Z_NOISE_FLOOR;
            let below_noise_floor = a.zip(b).is_some_and(|(a, b)| below_floor(a) && below_floor(b));
            let (paper, model, unit, verdict) = match (claim.paper_change_pct, claim.paper_value) {
                (Some(paper), None) => {
                    let model = match (a, b) {
                        _ if below_noise_floor => None,
                        (Some(a), Some(b)) if b.y != 0.0 => Some((a.y - b.y) / b.y * 100.0),
                        // Nothing against nothing (no zone erased under either policy) is no change.
                        (Some(a), Some(b)) if a.y == 0.0 && b.y == 0.0 => Some(0.0),
                        _ => None,
                    };
                    let verdict = if claim.at_least {
                        Verdict::judge_at_least(paper, model)
                    } else {
                        Verdict::judge(paper, model)
                    };
                    (paper, model, "%".to_string(), verdict)
                }
                (None, Some(paper)) => {
                    let model = a.map(|a| a.y);
                    (paper, model, unit.to_string(), Verdict::judge_value(paper, model))
                }
                _ => {
                    return Err(fail(format!(
                        "claim {:?}: give paper-change-pct with series-b, or paper-value",
                        claim.text
                    )))
                }
            };
            let verdict = match (verdict, &claim.setup_cannot_produce, &claim.upper_bound) {
                (Verdict::NotMeasured, ..) => verdict,
                (_, _, Some(_)) => Verdict::UpperBound,
                (Verdict::Reproduced, ..) => verdict,
                (_, Some(_), None) => Verdict::NotReproducibleFromSetup,
                (verdict, None, None) => verdict,
            };
            let few_events = a.into_iter().chain(b).any(Point::unstable);
            let seeds_disagree = a.zip(b).is_some_and(|(a, b)| seed_ranges_overlap(a, b));
            let settled = !few_events && !seeds_disagree;
            let outcome = ClaimOutcome {
                text: claim.text.clone(),
                quote: claim.quote.clone(),
                location: claim.location.clone(),
                paper,
                zonelab: model,
                unit,
                verdict,
                settled,
                fitted: claim.fitted.clone(),
                explanation: String::new(),
            };
            let model_text = outcome.figure(model);
            let chosen = match verdict {
                Verdict::Reproduced => claim.why.reproduced.as_deref(),
                Verdict::Direction => claim.why.direction.as_deref(),
                Verdict::NotReproduced => claim.why.not_reproduced.as_deref(),
                Verdict::NotMeasured if below_noise_floor => Some(
                    "both interference figures are below the noise floor (Z < 0.01): neither scheduler shows measurable \
                     interference here, so their ratio is noise.",
                ),
                Verdict::NotMeasured => Some("a full run measures it (`zonelab experiment run` without --quick)."),
                Verdict::NotReproducibleFromSetup => claim.setup_cannot_produce.as_deref(),
                Verdict::UpperBound => claim.upper_bound.as_deref(),
            };
            let explanation = chosen.unwrap_or("no explanation is written for this outcome; the figures are above.");
            let basis = match &claim.fitted {
                Some(fitted) => format!("fitted: {fitted}"),
                None => "predicted".to_string(),
            };
            let unsettled = if a.into_iter().chain(b).any(Point::ran_late) {
                "; not settled: the emulated device ran late in a figure it rests on (its late share is in results.json)"
            } else if few_events {
                "; not settled: it rests on figures marked *"
            } else if seeds_disagree {
                "; not settled: the two figures' ranges over seeds overlap"
            } else {
                ""
            };
            let detail = match (outcome.unit.as_str(), model) {
                _ if below_noise_floor => {
                    format!("{}: both below the noise floor, Z < {Z_NOISE_FLOOR}", verdict.name())
                }
                ("%", Some(model)) if claim.at_least => {
                    format!("{}: {model:+.1} % against at least {paper:+.1} %", verdict.name())
                }
                ("%", _) => verdict.detail(paper, model),
                (_, Some(model)) => format!("{}: {:.2}x the paper's value", verdict.name(), model / paper),
                (_, None) => verdict.detail(paper, None),
            };
            let paper_text = outcome.figure(Some(paper));
            let _ = writeln!(
                report,
                "| {number} | {} (\"{}\") | {} | {paper_text} | {model_text} | {detail}{unsettled} | {basis} | \
                 {explanation} |",
                claim.text, claim.quote, claim.location,
            );
            let metric = if claim.series_a.starts_with("Z of ") { "interference Z" } else { &figure.y_label };
            summary.push(format!(
                "{} {} ({metric}): paper {paper_text}, zonelab {model_text}: {}",
                experiment.id,
                figure.id,
                verdict.name()
            ));
            claims.push(ClaimOutcome { explanation: explanation.to_string(), ..outcome });
        }
        if figure.claim.is_empty() && figure.interference.is_empty() {
            // A figure the source gives no number for: its series, to read beside the report.
            let values: Vec<String> = lines
                .iter()
                .map(|(label, points)| {
                    let ys: Vec<String> = points.iter().map(|point| format!("{:.2}", point.y)).collect();
                    format!("{label} {}", ys.join(" / "))
                })
                .collect();
            let xs: Vec<String> = xs.iter().map(u32::to_string).collect();
            summary.push(format!(
                "{} {}: no claim to judge; at x = {}: {}",
                experiment.id,
                figure.id,
                xs.join(" / "),
                values.join("; ")
            ));
        }
        let mut interference = Vec::new();
        if figure.interference.iter().any(|spec| spec.baseline_throughput.is_none()) {
            let _ = writeln!(
                report,
                "\nThe slides' interference figure: Z = (1/n) sum over the n points with x > 0 of sqrt(alpha dT^2 + \
                 (1 - alpha) dL^2), where dT and dL are the relative changes of throughput and of tail latency \
                 against the point without interference (x = 0). Z = 0 is no interference."
            );
        }
        if figure.interference.iter().any(|spec| spec.baseline_throughput.is_some()) {
            let _ = writeln!(
                report,
                "\nThe interference figure as the ZINC authors' artifact computes it (interference_model/\
                 quantification.py): Z = (1/n) sum over the n points of sqrt(dT^2 + dL^2), where dT and dL are the \
                 relative changes of throughput and of tail latency against the same point of the run without \
                 interference. Z = 0 is no interference."
            );
        }
        for (spec, point, spread) in &zs {
            let (z, unstable) = (point.y, point.unstable());
            let _ = writeln!(
                report,
                "\nInterference Z ({}, alpha {}): {z:.3}{spread}{}",
                spec.label,
                spec.alpha,
                if unstable { "; it rests on figures marked *, so it is not settled by this run" } else { "" }
            );
            summary.push(format!("{} {}: interference Z of {} = {z:.3}{spread}", experiment.id, figure.id, spec.label));
            interference.push(
                json!({ "label": spec.label, "alpha": spec.alpha, "z": z, "z_by_seed": point.by_seed, "settled": !unstable }),
            );
        }
        all_claims.extend(claims.iter().cloned().map(|claim| (figure.id.clone(), claim)));
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
    // The claims at a glance go first, after the header.
    let header_end = report.find("\n## ").unwrap_or(report.len());
    report.insert_str(header_end, &claims_at_a_glance(&all_claims));
    write_file(&out.join("report.md"), report.as_bytes())?;
    if let Some(dir) = &runs.traces {
        runs.write_trace_index().map_err(|source| ExperimentError::Io { path: dir.join("traces.tsv"), source })?;
    }
    Ok(Outcome { id: experiment.id, directory: out.to_path_buf(), summary })
}

/// The y axis a series is plotted on: its own unit when its label names one (`p99.9 (us)`), as the part of the
/// figure's label with that unit (`KIOPS / p99.9 latency (us)`) or as `latency (us)`; else the figure's first
/// unit.
fn series_axis(y_label: &str, series: &str) -> String {
    let parts: Vec<&str> = y_label.split(" / ").collect();
    let Some(unit) = label_unit(series) else {
        return parts[0].to_string();
    };
    let with_unit = format!("({unit})");
    if let Some(part) = parts.iter().find(|part| part.ends_with(&with_unit)) {
        return part.to_string();
    }
    if parts.len() == 1 && y_label == unit {
        return y_label.to_string();
    }
    match unit {
        "us" | "ms" | "ns" | "s" => format!("latency ({unit})"),
        _ => with_unit,
    }
}

/// The units series labels may name in parentheses (`p99.9 (us)`; `conventional (ZenFS)` names none).
const UNITS: &[&str] = &["ns", "us", "ms", "s", "/s", "IOPS", "KIOPS", "MiB/s", "GiB/s", "J", "KiB", "MiB", "%"];

/// The unit a series label names, if any.
fn label_unit(label: &str) -> Option<&str> {
    label.rsplit_once('(').and_then(|(_, unit)| unit.strip_suffix(')')).filter(|unit| UNITS.contains(unit))
}

/// A series' column in a figure's table: its label with its unit, the y axis's unless the figure mixes units
/// and each series names its own, or none for a ratio.
fn column_header(y_label: &str, label: &str) -> String {
    match figure_unit(y_label) {
        Some(unit) if label_unit(label).is_none() && !is_ratio(label) => format!("{label} ({unit})"),
        _ => label.to_string(),
    }
}

/// Whether a series counts one thing per another (`write commands per request`): a plain number, in neither the
/// figure's unit nor its plots.
fn is_ratio(label: &str) -> bool {
    label.contains(" per ")
}

/// The unit of a figure's y axis (`throughput (KIOPS)`: KIOPS); None when it mixes units (`a / b (us)`).
fn figure_unit(y_label: &str) -> Option<&str> {
    y_label.rsplit_once('(').and_then(|(_, unit)| unit.strip_suffix(')')).filter(|_| !y_label.contains(" / "))
}

/// The table at the top of a report: every claim with its verdict and basis, and the counts.
fn claims_at_a_glance(claims: &[(String, ClaimOutcome)]) -> String {
    if claims.is_empty() {
        return String::new();
    }
    let mut text = format!("\n## Claims at a glance\n\n{}\n\n", verdict_counts(claims.iter().map(|(_, claim)| claim)));
    text.push_str("| figure | the paper says | paper | zonelab | verdict | basis |\n|---|---|---|---|---|---|\n");
    for (figure, claim) in claims {
        let _ = writeln!(
            text,
            "| {figure} | {} | {} | {} | {} | {} |",
            claim.text,
            claim.figure(Some(claim.paper)),
            claim.figure(claim.zonelab),
            claim.verdict_text(),
            claim.basis()
        );
    }
    text
}

/// "3 claims: 1 reproduced (1 fitted), 1 direction only, 1 not reproduced".
pub fn verdict_counts<'a>(claims: impl Iterator<Item = &'a ClaimOutcome>) -> String {
    let claims: Vec<&ClaimOutcome> = claims.collect();
    let mut parts = Vec::new();
    for verdict in [
        Verdict::Reproduced,
        Verdict::Direction,
        Verdict::NotReproduced,
        Verdict::NotReproducibleFromSetup,
        Verdict::UpperBound,
        Verdict::NotMeasured,
    ] {
        let with: Vec<&&ClaimOutcome> = claims.iter().filter(|claim| claim.verdict == verdict).collect();
        if with.is_empty() {
            continue;
        }
        let fitted = with.iter().filter(|claim| claim.fitted.is_some()).count();
        let fitted = if fitted > 0 { format!(" ({fitted} fitted)") } else { String::new() };
        parts.push(format!("{} {}{fitted}", with.len(), verdict.name()));
    }
    let unsettled = claims.iter().filter(|claim| !claim.settled).count();
    let unsettled = if unsettled > 0 {
        format!(
            " {unsettled} not settled by this run: they rest on figures with fewer than {STABLE_EVENTS} events, or \
             compare figures whose ranges over seeds overlap."
        )
    } else {
        String::new()
    };
    format!("{} claims: {}.{unsettled}", claims.len(), parts.join(", "))
}

/// `zonelab experiment summary`: the claims of every experiment in a results directory, with their verdicts,
/// as a Markdown table, and the counts.
pub fn summary(results: &Path) -> Result<String, ExperimentError> {
    let io = |path: &Path, source| ExperimentError::Io { path: path.to_path_buf(), source };
    let mut directories: Vec<PathBuf> = std::fs::read_dir(results)
        .map_err(|source| io(results, source))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path().join("results.json")))
        .filter(|path| path.is_file())
        .collect();
    directories.sort();
    let mut rows = String::new();
    let mut all: Vec<ClaimOutcome> = Vec::new();
    let mut runs = Vec::new();
    let mut calibrations = Vec::new();
    for path in &directories {
        let text = std::fs::read_to_string(path).map_err(|source| io(path, source))?;
        let document: serde_json::Value = serde_json::from_str(&text)
            .map_err(|error| io(path, std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string())))?;
        let Some(id) = document["experiment"].as_str() else {
            // A calibration is in-sample throughout: its errors are a fit's residuals, not claims.
            if let Some(median) = document["summary"]["iops_err_pct_median"].as_f64() {
                let name = path.parent().and_then(Path::file_name).map(|name| name.to_string_lossy().into_owned());
                calibrations.push(format!(
                    "{}: fitted (in-sample), IOPS error median {median:.1} %, latency error median {:.1} %",
                    name.unwrap_or_default(),
                    document["summary"]["lat_err_pct_median"].as_f64().unwrap_or(f64::NAN)
                ));
            }
            continue;
        };
        runs.push(format!("{id} ({})", if document["quick"] == true { "quick" } else { "full" }));
        for figure in document["figures"].as_array().into_iter().flatten() {
            for claim in figure["claims"].as_array().into_iter().flatten() {
                let claim: ClaimOutcome = serde_json::from_value(claim.clone()).map_err(|error| {
                    io(path, std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()))
                })?;
                let _ = writeln!(
                    rows,
                    "| {id} | {} | {} | {} | {} | {} | {} |",
                    figure["id"].as_str().unwrap_or(""),
                    claim.text,
                    claim.figure(Some(claim.paper)),
                    claim.figure(claim.zonelab),
                    claim.verdict_text(),
                    claim.basis()
                );
                all.push(claim);
            }
        }
    }
    if runs.is_empty() {
        return Err(io(
            results,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no experiment results (DIR/ID/results.json) here"),
        ));
    }
    let calibrations =
        if calibrations.is_empty() { String::new() } else { format!("Calibrations: {}.\n\n", calibrations.join("; ")) };
    Ok(format!(
        "# Claims of {} experiments\n\n{}\n\nRuns: {}.\n\n{calibrations}| experiment | figure | the paper says | paper | zonelab | verdict | basis |\n|---|---|---|---|---|---|---|\n{rows}",
        runs.len(),
        verdict_counts(all.iter()),
        runs.join(", ")
    ))
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
        "# {}\n\nSource: {}.\n\nDevice: {}. {} run.\n\n| | median abs. error | p90 abs. error | mean abs. error |\n|---|---|---|---|\n| IOPS | {:.1} % | {:.1} % | {:.2} % |\n| mean latency | {:.1} % | {:.1} % | {:.2} % |\n| p99 latency of the slowest job | {:.1} % | {:.1} % | {:.2} % |\n\nEvery figure here is fitted (in-sample): the model's constants were set from these measurements (presets/zn540.toml names the row each comes from), so the errors are the fit's residuals, not predictions.\n\nZone management, worst error: {:.1} %.\n\n![IOPS](iops.png)\n\n![latency](latency.png)\n\n![zone management](zone-management.png)\n\n## Zone management\n\n| op | occupancy | measured ms | model ms | error |\n|---|---|---|---|---|\n",
        experiment.title,
        experiment.source,
        experiment.device,
        if quick { "Quick" } else { "Full" },
        summary.iops_err_pct_median,
        summary.iops_err_pct_p90,
        summary.iops_err_pct_mean,
        summary.lat_err_pct_median,
        summary.lat_err_pct_p90,
        summary.lat_err_pct_mean,
        summary.p99_err_pct_median,
        summary.p99_err_pct_p90,
        summary.p99_err_pct_mean,
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
    let _ = writeln!(report, "\n## The ten worst points (IOPS)\n\n| op | bs (bytes) | zones | qd | measured (IOPS) | model (IOPS) | error |\n|---|---|---|---|---|---|---|");
    for point in worst.iter().take(10) {
        let _ = writeln!(
            report,
            "| {} | {} | {} | {} | {:.0} | {:.0} | {:+.1} % |",
            point.op, point.bs_bytes, point.zones, point.qd, point.measured_iops, point.model_iops, point.iops_err_pct
        );
    }
    let mut worst_latency: Vec<_> =
        calibration.points.iter().filter_map(|p| p.measured_lat_us.map(|measured| (p, measured))).collect();
    let error = |(point, measured): &(&crate::calibrate::Point, f64)| (point.model_lat_us - measured) / measured;
    worst_latency.sort_by(|a, b| error(b).abs().total_cmp(&error(a).abs()));
    let _ = writeln!(
        report,
        "\n## The ten worst points (mean latency)\n\n| op | bs (bytes) | zones | qd | measured (us) | model (us) | error |\n|---|---|---|---|---|---|---|"
    );
    for entry in worst_latency.iter().take(10) {
        let (point, measured) = entry;
        let _ = writeln!(
            report,
            "| {} | {} | {} | {} | {measured:.1} | {:.1} | {:+.1} % |",
            point.op,
            point.bs_bytes,
            point.zones,
            point.qd,
            point.model_lat_us,
            error(entry) * 100.0
        );
    }
    write_file(&out.join("results.json"), serde_json::to_string_pretty(&calibration).expect("json").as_bytes())?;
    write_file(&out.join("report.md"), report.as_bytes())?;
    Ok(Outcome {
        id: experiment.id.clone(),
        directory: out.to_path_buf(),
        summary: vec![format!(
            "{}: IOPS error median {:.1} %, p90 {:.1} %; latency median {:.1} %, p90 {:.1} %; p99 median {:.1} %, \
             p90 {:.1} %",
            experiment.id,
            summary.iops_err_pct_median,
            summary.iops_err_pct_p90,
            summary.lat_err_pct_median,
            summary.lat_err_pct_p90,
            summary.p99_err_pct_median,
            summary.p99_err_pct_p90
        )],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comparison_of_figures_whose_seed_ranges_overlap_is_not_settled() {
        let point = |by_seed: &[f64]| Point {
            x: 0,
            y: by_seed[0],
            events: None,
            by_seed: by_seed.to_vec(),
            file_system: None,
            late_share: None,
        };
        assert!(seed_ranges_overlap(&point(&[0.003, 0.011]), &point(&[0.0, 0.008])));
        assert!(!seed_ranges_overlap(&point(&[9.87, 9.98]), &point(&[9.80, 9.86])));
        assert!(!seed_ranges_overlap(&point(&[1.0]), &point(&[1.0])), "one seed gives no range to compare");
    }

    #[test]
    fn a_real_time_point_whose_device_ran_late_is_not_settled() {
        let point =
            |late_share| Point { x: 0, y: 1.0, events: None, by_seed: Vec::new(), file_system: None, late_share };
        assert!(point(Some(0.05)).unstable(), "5 % late");
        assert!(!point(Some(0.001)).unstable(), "0.1 % late is within the bound");
        assert!(!point(None).unstable(), "virtual time is never late");
    }

    #[test]
    fn columns_name_the_axis_unit_except_for_ratios() {
        assert_eq!(column_header("latency (us)", "none median"), "none median (us)");
        assert_eq!(
            column_header("latency (us)", "mq-deadline write commands per request"),
            "mq-deadline write commands per request"
        );
        assert_eq!(column_header("latency (us)", "p99.9 (ms)"), "p99.9 (ms)");
        assert_eq!(column_header("KIOPS / p99.9 latency (us)", "reads"), "reads");
    }

    #[test]
    fn every_claim_names_its_source_and_explains_at_least_one_outcome() {
        for experiment in experiments() {
            for claim in experiment.figure.iter().flat_map(|figure| &figure.claim) {
                assert!(!claim.quote.is_empty() && !claim.location.is_empty(), "{}: {}", experiment.id, claim.text);
                let why = &claim.why;
                assert!(
                    why.reproduced.is_some() || why.direction.is_some() || why.not_reproduced.is_some(),
                    "{}: {} explains no outcome",
                    experiment.id,
                    claim.text
                );
            }
        }
    }
}
