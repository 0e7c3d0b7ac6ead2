//! `zonelab sweep GRID.toml`: fio over a grid of options and seeds, every point in virtual time on its own
//! thread (`--jobs` at a time), flattened into one tidy CSV table: a row per point and fio job, with the grid's
//! values as columns beside the job's throughput, latencies and the device's write amplification and energy.
//!
//! The grid file:
//!
//! ```toml
//! args = "--name=job --rw=randread --bs=4k --ioengine=io_uring --runtime=50ms --time_based"
//! seeds = [1, 2]
//! [axes]
//! filename = ["preset:zn540", "preset:zn540,ns=1,precondition=sequential"]
//! iodepth = [1, 8, 32]
//! ```
//!
//! Each point is `--KEY=VALUE` for every axis (as global options, before `args`) and a seed. A point is keyed by
//! a hash of its arguments, its seed and zonelab's version, so a sweep into a table that has rows already skips
//! the points it holds (a sweep resumes where it stopped, and a grown grid runs only its new points). A point
//! that fails gets a row with its error, and the sweep goes on. The table can also be written as Parquet
//! (`write_parquet`).

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use zonelab_fio::{parse_invocation, run as run_fio, DirectionStats, FioResult};

mod parquet_file;

/// What the grid file holds.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    /// fio arguments every point shares.
    pub args: String,
    /// Seeds of the reordering of concurrent submissions; each point runs once per seed.
    #[serde(default = "one_seed")]
    pub seeds: Vec<u64>,
    /// fio options and their values, in the table's column order.
    #[serde(default)]
    pub axes: toml::Table,
}

fn one_seed() -> Vec<u64> {
    vec![1]
}

/// Why a sweep could not run (a point's failure is a row, not this).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: {reason}")]
    Grid { path: String, reason: String },
}

/// One point of the grid: its axis values, in the axes' order, and a seed.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub values: Vec<String>,
    pub seed: u64,
    /// `--KEY=VALUE` for every axis, then the grid's arguments.
    pub args: Vec<String>,
    /// The hash that names the point in the table.
    pub key: String,
}

/// The most points a grid may make, so that a grid typed wrong is refused before its points are built.
pub const MAX_POINTS: u64 = 1_000_000;

/// The table's columns after the point's key, its axes and seed.
pub const MEASURES: [&str; 17] = [
    "job",
    "error",
    "read_kiops",
    "read_mib_per_s",
    "read_lat_mean_us",
    "read_p50_us",
    "read_p99_us",
    "read_p99_9_us",
    "write_kiops",
    "write_mib_per_s",
    "write_lat_mean_us",
    "write_p50_us",
    "write_p99_us",
    "write_p99_9_us",
    "device_waf",
    "energy_j",
    "zone_resets",
];

impl Grid {
    pub fn load(path: &Path) -> Result<Grid, SweepError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SweepError::Io { path: shown.clone(), source })?;
        Grid::parse(&text, &shown)
    }

    /// A grid from its TOML text; `shown` names it in errors.
    pub fn parse(text: &str, shown: &str) -> Result<Grid, SweepError> {
        let shown = shown.to_string();
        let grid: Grid = toml::from_str(text)
            .map_err(|error| SweepError::Grid { path: shown.clone(), reason: error.to_string() })?;
        for (axis, values) in &grid.axes {
            let valid = values.as_array().is_some_and(|values| !values.is_empty());
            if !valid {
                return Err(SweepError::Grid {
                    path: shown,
                    reason: format!("axis {axis}: give a non-empty list of values"),
                });
            }
        }
        if grid.seeds.is_empty() {
            return Err(SweepError::Grid { path: shown, reason: "seeds: give at least one".into() });
        }
        let points = grid
            .axes
            .values()
            .map(|values| values.as_array().map_or(1, Vec::len) as u64)
            .fold(grid.seeds.len() as u64, u64::saturating_mul);
        if points > MAX_POINTS {
            return Err(SweepError::Grid {
                path: shown,
                reason: format!("its axes and seeds make {points} points; a sweep runs at most {MAX_POINTS}"),
            });
        }
        Ok(grid)
    }

    /// The axes' names, in the file's order.
    pub fn axis_names(&self) -> Vec<String> {
        self.axes.keys().cloned().collect()
    }

    /// Every point: the product of the axes, each once per seed.
    pub fn points(&self) -> Vec<Point> {
        let mut combinations: Vec<Vec<String>> = vec![Vec::new()];
        for values in self.axes.values() {
            let values: Vec<String> = values.as_array().into_iter().flatten().map(value_text).collect();
            combinations = combinations
                .into_iter()
                .flat_map(|prefix| {
                    values.iter().map(move |value| prefix.iter().cloned().chain([value.clone()]).collect())
                })
                .collect();
        }
        let names = self.axis_names();
        let mut points = Vec::new();
        for values in combinations {
            for &seed in &self.seeds {
                let args: Vec<String> = names
                    .iter()
                    .zip(&values)
                    .map(|(name, value)| format!("--{name}={value}"))
                    .chain(self.args.split_whitespace().map(str::to_string))
                    .collect();
                let key = point_key(&args, seed);
                points.push(Point { values: values.clone(), seed, args, key });
            }
        }
        points
    }
}

/// A TOML value as a fio option value: strings bare, numbers and booleans as written.
fn value_text(value: &toml::Value) -> String {
    match value {
        toml::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// FNV-1a over the point's arguments, seed and zonelab's version: stable from run to run and machine to machine.
fn point_key(args: &[String], seed: u64) -> String {
    let text = format!("{}\n{seed}\n{}", args.join("\n"), env!("CARGO_PKG_VERSION"));
    let hash = text
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3));
    format!("{hash:016x}")
}

/// What a sweep did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepOutcome {
    pub points: usize,
    pub skipped: usize,
    pub failed: usize,
    pub rows: usize,
}

/// Runs the points of `grid` that `table` (a CSV file) does not hold yet, `jobs` at a time, and appends their
/// rows to it (writing the header first when it is new). With `traces`, each point run also writes its
/// Perfetto trace there as `POINT.json`, POINT being its `point` column.
pub fn run(grid: &Grid, table: &Path, jobs: usize, traces: Option<&Path>) -> Result<SweepOutcome, SweepError> {
    let shown = table.display().to_string();
    let io = |source| SweepError::Io { path: shown.clone(), source };
    let names = grid.axis_names();
    let header: Vec<String> = ["point".to_string()]
        .into_iter()
        .chain(names.iter().cloned())
        .chain(["seed".to_string()])
        .chain(MEASURES.map(String::from))
        .collect();
    let existing = whole_rows(table).map_err(io)?;
    if let Some(first) = existing.lines().next() {
        if first != header.join(",") {
            return Err(SweepError::Grid {
                path: shown,
                reason: format!(
                    "its columns are {first:?}, not this grid's {:?}: write to another table",
                    header.join(",")
                ),
            });
        }
    }
    let done: HashSet<&str> = existing.lines().skip(1).filter_map(|line| line.split(',').next()).collect();
    let points: Vec<Point> = grid.points();
    let todo: Vec<&Point> = points.iter().filter(|point| !done.contains(point.key.as_str())).collect();
    if let Some(dir) = traces {
        std::fs::create_dir_all(dir).map_err(|source| SweepError::Io { path: dir.display().to_string(), source })?;
    }
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(table).map_err(io)?;
    if existing.is_empty() {
        std::io::Write::write_all(&mut file, format!("{}\n", header.join(",")).as_bytes()).map_err(io)?;
    }
    // Each point's rows are appended as it finishes, so that a sweep that is stopped keeps what it ran.
    let appending = std::sync::Mutex::new((file, None::<std::io::Error>));
    let results = zonelab_bench::parallel::map_as_done(
        &todo,
        jobs,
        "points",
        |point| point_rows(&point.args, point.seed, traces.map(|dir| dir.join(format!("{}.json", point.key)))),
        |point, result| {
            let text = point_text(point, result.as_ref().unwrap_or_else(|rows| rows));
            let mut appending = appending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (file, failure) = &mut *appending;
            if failure.is_none() {
                *failure = std::io::Write::write_all(file, text.as_bytes()).err();
            }
        },
    );
    if let (_, Some(error)) = appending.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        return Err(io(error));
    }
    // A point failed when it did not run or when one of its jobs failed (a row with an error).
    let failed = results
        .iter()
        .filter(|result| result.as_ref().map_or(true, |rows| rows.iter().any(|row| !row[1].is_empty())))
        .count();
    let rows = results.iter().map(|result| result.as_ref().unwrap_or_else(|rows| rows).len()).sum();
    // The rows went in as points finished; a finished sweep puts its own in the grid's order, so that its table
    // is the same for any number of threads.
    let mut ordered = existing;
    if ordered.is_empty() {
        ordered = format!("{}\n", header.join(","));
    }
    for (point, result) in todo.iter().zip(&results) {
        ordered.push_str(&point_text(point, result.as_ref().unwrap_or_else(|rows| rows)));
    }
    replace_table(table, &ordered).map_err(io)?;
    Ok(SweepOutcome { points: points.len(), skipped: points.len() - todo.len(), failed, rows })
}

/// A point's rows as the table's lines: its key, axis values and seed, then each row's measures.
fn point_text(point: &Point, rows: &[Vec<String>]) -> String {
    let prefix: Vec<String> = [point.key.clone()]
        .into_iter()
        .chain(point.values.iter().map(|value| csv_field(value)))
        .chain([point.seed.to_string()])
        .collect();
    let mut text = String::new();
    for row in rows {
        let fields: Vec<String> = row.iter().map(|field| csv_field(field)).collect();
        let _ = writeln!(text, "{},{}", prefix.join(","), fields.join(","));
    }
    text
}

/// The table's text up to its last whole row. A table that does not end in a line break was cut short (a sweep
/// killed mid-write, a full disk): its torn last row is dropped, from the file too, so that its point runs again
/// and the next row starts a line of its own.
fn whole_rows(table: &Path) -> std::io::Result<String> {
    let bytes = match std::fs::read(table) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(error) => return Err(error),
    };
    let whole = bytes.iter().rposition(|&byte| byte == b'\n').map_or(0, |at| at + 1);
    if whole < bytes.len() {
        std::fs::OpenOptions::new().write(true).open(table)?.set_len(whole as u64)?;
    }
    Ok(String::from_utf8_lossy(&bytes[..whole]).into_owned())
}

/// Replaces the table with `text` at once: written beside it, then renamed over it.
fn replace_table(table: &Path, text: &str) -> std::io::Result<()> {
    let mut partial = table.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    match std::fs::remove_file(&partial) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    // A new file, never one found there (create_new does not follow a symbolic link planted at the name).
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&partial)?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&partial, table)
}

/// Runs one point (fio's arguments and the seed), writing its trace to `trace` if given, and gives its rows of
/// `MEASURES`, one per fio job; a point that fails gives one row with its error, as the `Err` of the result.
pub fn point_rows(args: &[String], seed: u64, trace: Option<PathBuf>) -> Result<Vec<Vec<String>>, Vec<Vec<String>>> {
    parse_invocation(args, |_| Err("a sweep takes no job files".into()))
        .map_err(|error| error.to_string())
        .and_then(|mut invocation| {
            invocation.trace = trace.or(invocation.trace);
            run_fio(&invocation, seed).map_err(|error| error.to_string())
        })
        .map(|result| job_rows(&result))
        .map_err(|error| {
            let mut row = vec![String::new(); MEASURES.len()];
            row[1] = error;
            vec![row]
        })
}

/// The measures of each job of a run, in `MEASURES`' order.
fn job_rows(result: &FioResult) -> Vec<Vec<String>> {
    result
        .jobs
        .iter()
        .map(|job| {
            let group = &result.groups[job.run_group as usize];
            let direction = |stats: &DirectionStats| {
                let us = |ns: f64| format!("{:.3}", ns / 1000.0);
                [
                    format!("{:.3}", stats.iops() / 1000.0),
                    format!("{:.3}", stats.bytes_per_s() / f64::from(1 << 20)),
                    us(stats.lat.mean()),
                    us(stats.clat.percentile(50.0) as f64),
                    us(stats.clat.percentile(99.0) as f64),
                    us(stats.clat.percentile(99.9) as f64),
                ]
            };
            let error = job.error_message.clone().filter(|_| job.error != 0).unwrap_or_default();
            [job.options.name.clone(), error]
                .into_iter()
                .chain(direction(&job.read))
                .chain(direction(&job.write))
                .chain([
                    format!("{:.4}", group.flash.write_amplification()),
                    format!("{:.6}", group.flash.total_energy_nj(&result.energy) / 1e9),
                    job.zone_resets.to_string(),
                ])
                .collect()
        })
        .collect()
}

/// A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Writes the whole CSV table at `table` as Parquet at `parquet` (`parquet_file.rs`: typed columns, empty fields
/// null), for the tools that read Parquet.
pub fn write_parquet(table: &Path, parquet: &Path) -> Result<(), SweepError> {
    let text = std::fs::read_to_string(table)
        .map_err(|source| SweepError::Io { path: table.display().to_string(), source })?;
    let mut lines = text.lines();
    let header = split_csv(lines.next().unwrap_or_default());
    let rows: Vec<Vec<String>> = lines.map(split_csv).collect();
    parquet_file::write(parquet, &header, &rows)
}

/// The columns of a table, and each row's fields by column, for readers of the table (tests, tools).
pub fn read_table(text: &str) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap_or_default().split(',').map(str::to_string).collect();
    let rows = lines.map(|line| header.iter().cloned().zip(split_csv(line)).collect()).collect();
    (header, rows)
}

/// One CSV line's fields, quotes undone.
fn split_csv(line: &str) -> Vec<String> {
    let (mut fields, mut field, mut quoted, mut chars) = (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}
