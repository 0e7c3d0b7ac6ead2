//! `zonelab bench fio`: what `zonelab fio` costs against real fio itself. The same 1.1 million 4 KiB sequential
//! writes (four zn540 zones' capacity) through `zonelab fio` on the full zn540 model, in this process, and through
//! real fio's `null` ioengine, which does no I/O at all (fio's own per-I/O work only), in one paired run: each
//! round times both, one after the other, and the medians and their ratio are printed. Beside the wall time, the
//! CPU time: fio's wall time includes a fixed wait of its own (a job of one 4 KiB write takes about 0.4 s, most of
//! it idle), which a busy machine does not stretch as it stretches CPU time, so the two ratios tell apart what
//! zonelab costs and what fio waits.

use std::io::Write;
use std::process::Command;
use std::time::Instant;

use serde_json::json;
use zonelab_fio::{parse_invocation, run as run_fio};

use crate::bench::spread;
use crate::{stdout_error, CliError};

/// Four zn540 zones' capacity (1077 MiB each): 1,102,848 writes of 4 KiB, which `zonelab fio` writes as four zones
/// (`--size=4z` in zbd mode, where a zone holds its capacity) and real fio as this many bytes.
const BYTES: &str = "4308M";

pub fn fio_bench(rounds: usize, json: bool, out: &mut impl Write) -> Result<(), CliError> {
    let (mut ours, mut ours_cpu) = (Vec::new(), Vec::new());
    let (mut null_engine, mut null_engine_cpu) = (Vec::new(), Vec::new());
    let mut writes = 0;
    for _ in 0..rounds {
        let (seconds, cpu, ios) = zonelab_round()?;
        writes = ios;
        ours.push(seconds);
        ours_cpu.push(cpu);
        let (seconds, cpu) = null_engine_round()?;
        null_engine.push(seconds);
        null_engine_cpu.push(cpu);
    }
    let (ours, null_engine) = (spread(ours), spread(null_engine));
    let (ours_cpu, null_engine_cpu) = (spread(ours_cpu).0, spread(null_engine_cpu).0);
    let ratio = ours.0 / null_engine.0.max(f64::MIN_POSITIVE);
    let cpu_ratio = ours_cpu / null_engine_cpu.max(f64::MIN_POSITIVE);
    if json {
        let figures = |(median, min, max): (f64, f64, f64), cpu: f64| json!({"median_s": median, "min_s": min, "max_s": max, "median_cpu_s": cpu});
        let document = json!({"writes": writes, "rounds": rounds, "zonelab": figures(ours, ours_cpu),
                              "fio_null": figures(null_engine, null_engine_cpu), "ratio": ratio,
                              "cpu_ratio": cpu_ratio});
        return writeln!(out, "{document}").map_err(stdout_error);
    }
    writeln!(out, "{writes} sequential 4 KiB writes ({BYTES}), {rounds} paired rounds:").map_err(stdout_error)?;
    let line = |name: &str, (median, min, max): (f64, f64, f64), cpu: f64| {
        format!(
            "  {name:<34} wall median {median:>6.3} s (min {min:.3}, max {max:.3}), {:.2} M writes/s; CPU median {cpu:.3} s",
            writes as f64 / median / 1e6
        )
    };
    writeln!(out, "{}", line("zonelab fio, preset zn540, psync", ours, ours_cpu)).map_err(stdout_error)?;
    writeln!(out, "{}", line("real fio, ioengine=null", null_engine, null_engine_cpu)).map_err(stdout_error)?;
    writeln!(out, "  ratio of the medians: {ratio:.2}x wall time, {cpu_ratio:.2}x CPU time").map_err(stdout_error)
}

/// CPU time (user and system) of this process, or of its children that have been waited for.
fn cpu_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed value it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Runs `work`; its result, the wall time it took and the CPU time `who` (`RUSAGE_SELF` or `RUSAGE_CHILDREN`) spent.
fn timed<T>(who: libc::c_int, work: impl FnOnce() -> T) -> (T, f64, f64) {
    let (started, cpu_before) = (Instant::now(), cpu_seconds(who));
    let result = work();
    (result, started.elapsed().as_secs_f64(), cpu_seconds(who) - cpu_before)
}

/// One `zonelab fio` run of the job; its wall time, its CPU time and the writes it made.
fn zonelab_round() -> Result<(f64, f64, u64), CliError> {
    let job =
        "--filename=preset:zn540 --zonemode=zbd --direct=1 --name=w --rw=write --bs=4k --size=4z --ioengine=psync";
    let args: Vec<String> = job.split_whitespace().map(str::to_string).collect();
    let invocation = parse_invocation(&args, |path| Err(format!("no job file {path} here")))
        .map_err(|error| CliError::Failed(error.to_string()))?;
    let (result, seconds, cpu) = timed(libc::RUSAGE_SELF, || run_fio(&invocation, 1));
    let result = result.map_err(|error| CliError::Failed(error.to_string()))?;
    Ok((seconds, cpu, result.jobs.iter().map(|job| job.write.ios).sum()))
}

/// One run of real fio's null engine on the same job; its wall time and its CPU time (fio's and its job
/// process's).
fn null_engine_round() -> Result<(f64, f64), CliError> {
    let (output, seconds, cpu) = timed(libc::RUSAGE_CHILDREN, || {
        Command::new("fio")
            .args(["--name=w", "--ioengine=null", "--rw=write", "--bs=4k", "--output-format=json"])
            .arg(format!("--size={BYTES}"))
            .output()
    });
    let output =
        output.map_err(|error| CliError::Failed(format!("bench fio runs real fio, which could not start: {error}")))?;
    if !output.status.success() {
        return Err(CliError::Failed(format!("real fio failed: {}", String::from_utf8_lossy(&output.stderr))));
    }
    Ok((seconds, cpu))
}
