//! `zonelab bench experiments`: what running the experiments' points on every core buys. It runs `zonelab
//! experiment run all` twice in one paired run, with `--jobs 1` and with `--jobs N`, each a child process
//! writing into a temporary directory, and prints each run's wall time, split into the virtual-time experiments
//! (whose points run N at a time) and the real-time ones (real RocksDB, one point at a time whatever N is), the
//! ratios, and each run's peak memory: zonelab's own process (what it prints on standard error) and the largest
//! of its processes (the kernel's `ru_maxrss` of the child, which covers the RocksDB processes it ran).

use std::io::Write;
use std::process::Command;
use std::time::Instant;

use serde_json::json;
use zonelab_experiments::experiment::experiments;

use crate::{stdout_error, CliError};

/// One run of every experiment.
struct Run {
    jobs: usize,
    wall_s: f64,
    virtual_s: f64,
    real_time_s: f64,
    peak_bytes: u64,
    /// zonelab's own process, without the RocksDB processes it ran.
    own_peak_bytes: u64,
}

pub fn experiments_bench(full: bool, jobs: usize, json: bool, out: &mut impl Write) -> Result<(), CliError> {
    let runs = [1, jobs.max(2)].map(|jobs| run_all(full, jobs)).into_iter().collect::<Result<Vec<_>, _>>()?;
    let ratio = |part: fn(&Run) -> f64| part(&runs[1]) / part(&runs[0]).max(f64::MIN_POSITIVE);
    if json {
        let rows: Vec<_> = runs
            .iter()
            .map(|run| {
                json!({"jobs": run.jobs, "wall_s": run.wall_s, "virtual_time_s": run.virtual_s,
                       "real_time_s": run.real_time_s, "peak_bytes": run.peak_bytes,
                       "zonelab_peak_bytes": run.own_peak_bytes})
            })
            .collect();
        let ratios = json!({"wall": ratio(|run| run.wall_s), "virtual_time": ratio(|run| run.virtual_s)});
        return writeln!(out, "{}", json!({"full": full, "runs": rows, "ratios": ratios})).map_err(stdout_error);
    }
    let mode = if full { "full" } else { "quick" };
    writeln!(out, "zonelab experiment run all --{mode}, paired:").map_err(stdout_error)?;
    writeln!(
        out,
        "  jobs   wall (s)   virtual-time experiments (s)   real-time experiments (s)   peak memory (MiB): zonelab, \
         any process"
    )
    .map_err(stdout_error)?;
    for run in &runs {
        writeln!(
            out,
            "  {:>4}   {:>8.1}   {:>28.1}   {:>25.1}   {:>26.0}, {:.0}",
            run.jobs,
            run.wall_s,
            run.virtual_s,
            run.real_time_s,
            run.own_peak_bytes as f64 / f64::from(1 << 20),
            run.peak_bytes as f64 / f64::from(1 << 20)
        )
        .map_err(stdout_error)?;
    }
    writeln!(
        out,
        "  --jobs {} against --jobs 1: {:.2}x the wall time, {:.2}x for the virtual-time experiments",
        runs[1].jobs,
        ratio(|run| run.wall_s),
        ratio(|run| run.virtual_s)
    )
    .map_err(stdout_error)
}

/// Runs every experiment in a child process with `jobs` points at once.
fn run_all(full: bool, jobs: usize) -> Result<Run, CliError> {
    let dir = tempfile::tempdir().map_err(|error| CliError::Io(std::env::temp_dir(), error))?;
    let exe = std::env::current_exe().map_err(|error| CliError::Failed(format!("this program's path: {error}")))?;
    let stdout_path = dir.path().join("stdout");
    let stdout = std::fs::File::create(&stdout_path).map_err(|error| CliError::Io(stdout_path.clone(), error))?;
    let mut command = Command::new(exe);
    command.args(["experiment", "run", "all", "--jobs", &jobs.to_string(), "--out"]).arg(dir.path().join("results"));
    if !full {
        command.arg("--quick");
    }
    let started = Instant::now();
    let stderr_path = dir.path().join("stderr");
    let stderr = std::fs::File::create(&stderr_path).map_err(|error| CliError::Io(stderr_path.clone(), error))?;
    let child = command
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|error| CliError::Failed(format!("starting zonelab experiment run: {error}")))?;
    let (status, peak_bytes) = wait_with_peak(child.id())?;
    let wall_s = started.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&stdout_path).map_err(|error| CliError::Io(stdout_path.clone(), error))?;
    if !status {
        return Err(CliError::Failed(format!("zonelab experiment run all --jobs {jobs} failed:\n{text}")));
    }
    let real_time: Vec<String> =
        experiments().into_iter().filter(|experiment| experiment.real_time).map(|experiment| experiment.id).collect();
    let (mut virtual_s, mut real_time_s) = (0.0, 0.0);
    // Each experiment's line: `ID: wrote DIR in SECONDS s`.
    for line in text.lines() {
        let Some((id, rest)) = line.split_once(": wrote ") else { continue };
        let seconds: f64 = rest.rsplit(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0.0);
        if real_time.iter().any(|name| name == id) {
            real_time_s += seconds;
        } else {
            virtual_s += seconds;
        }
    }
    let own_peak_bytes = std::fs::read_to_string(&stderr_path)
        .map_err(|error| CliError::Io(stderr_path.clone(), error))?
        .lines()
        .find_map(|line| {
            line.strip_prefix("zonelab: peak memory of this process: ")?.strip_suffix(" MiB")?.parse().ok()
        })
        .map_or(0, |mib: u64| mib << 20);
    Ok(Run { jobs, wall_s, virtual_s, real_time_s, peak_bytes, own_peak_bytes })
}

/// Waits for child `pid`; whether it succeeded, and its peak resident memory with its own children's.
fn wait_with_peak(pid: u32) -> Result<(bool, u64), CliError> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct that wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes only into `status` and `usage`, which outlive the call; `pid` is our own child's.
    let waited = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    if waited < 0 {
        return Err(CliError::Failed(format!("waiting for the experiments: {}", std::io::Error::last_os_error())));
    }
    let succeeded = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    // Linux gives ru_maxrss in KiB.
    Ok((succeeded, usage.ru_maxrss.max(0) as u64 * 1024))
}
