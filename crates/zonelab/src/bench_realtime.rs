//! `zonelab bench realtime`: how closely the real-time runtime delivers completions to their modelled times.

use std::io::Write;
use std::time::Instant;

use serde_json::json;
use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath};
use zonelab_runtime::sync::join_all;
use zonelab_runtime::{block_on, CommandQueue, HostExt, IoData, Pacing, Placement, RealTime, RealTimeHost};

use crate::{stdout_error, CliError};

/// Commands each submitting thread issues per measurement.
const COMMANDS_PER_THREAD: u64 = 20_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
}

/// One measurement: what ran and how pacing went.
struct Measured {
    label: String,
    commands_per_s: f64,
    pacing: Pacing,
}

/// Runs `threads` threads, each with `qd` tasks of `COMMANDS_PER_THREAD / qd` commands on a zone of its own:
/// zone appends for writes (any order is fine at any depth), random reads of what the thread wrote first.
fn measure(spec: &str, op: Op, qd: u64, threads: u32) -> Result<Measured, CliError> {
    let (spec, placement) = Placement::split_spec(spec).map_err(CliError::Usage)?;
    let builder = DeviceBuilder::new(DeviceSpec::parse(&spec)).host(HostPath::Spdk);
    let realtime = RealTime::start_placed(builder, placement).map_err(|error| CliError::Config(error.to_string()))?;
    let hosts: Vec<RealTimeHost> = (0..threads).map(|_| realtime.host()).collect();
    let geometry = hosts[0].geometry();
    if op == Op::Read {
        // Something to read: each thread's zone gets its reads' worth of data first (1 MiB in appends of 128 KiB,
        // within every preset's append limit), outside the measurement.
        let filled = std::thread::scope(|scope| {
            let fills: Vec<_> = (0u32..)
                .zip(&hosts)
                .map(|(zone, host)| {
                    scope.spawn(move || {
                        let zslba = geometry.zone_start_lba(zone);
                        (0..8)
                            .try_for_each(|_| block_on(host.append(zslba, IoData::Zeros(128 << 10))).map(|_| ()))
                            .map_err(|status| status.to_string())
                    })
                })
                .collect();
            fills
                .into_iter()
                .try_for_each(|fill| fill.join().unwrap_or_else(|_| Err("a filling thread panicked".into())))
        });
        filled.map_err(|why| CliError::Failed(format!("{spec}: filling the zones to read failed: {why}")))?;
    }
    let started = Instant::now();
    let completed: u64 = std::thread::scope(|scope| {
        let workers: Vec<_> = (0u32..)
            .zip(&hosts)
            .map(|(zone, host)| scope.spawn(move || block_on(worker(host, zone, op, qd))))
            .collect();
        workers.into_iter().map(|worker| worker.join().unwrap_or(0)).sum()
    });
    let wall = started.elapsed().as_secs_f64();
    let stopped = realtime.stop();
    let mut pacing = stopped.pacing;
    // Leave out the preconditioning's completions: only those of the measured window count.
    let skip = if op == Op::Read { 8 * threads as usize } else { 0 };
    pacing.errors_ns.drain(..skip.min(pacing.errors_ns.len()));
    let name = if op == Op::Read { "read" } else { "write" };
    Ok(Measured {
        label: format!("{name}_4k_qd{qd}_{threads}thread{}", if threads == 1 { "" } else { "s" }),
        commands_per_s: completed as f64 / wall,
        pacing,
    })
}

/// `qd` tasks on one thread, `COMMANDS_PER_THREAD` commands in all; returns how many succeeded (a task stops at
/// its first failure).
async fn worker(host: &RealTimeHost, zone: u32, op: Op, qd: u64) -> u64 {
    let succeeded = std::cell::Cell::new(0u64);
    let succeeded = &succeeded;
    let zslba = host.geometry().zone_start_lba(zone);
    let per_task = COMMANDS_PER_THREAD / qd;
    let tasks: Vec<_> = (0..qd)
        .map(|task| async move {
            let mut lba = task;
            for _ in 0..per_task {
                let result = match op {
                    Op::Write => host.append(zslba, IoData::Zeros(4096)).await.map(|_| ()),
                    Op::Read => host.read_discard(zslba + lba % 256, 1).await,
                };
                if result.is_err() {
                    return;
                }
                succeeded.set(succeeded.get() + 1);
                lba = lba.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) >> 8;
            }
        })
        .collect();
    join_all(tasks).await;
    succeeded.get()
}

fn summary(measured: &Measured) -> serde_json::Value {
    let pacing = measured.pacing.summary();
    json!({
        "commands_per_s": measured.commands_per_s,
        "completions": pacing.completions,
        "late_share": pacing.late_share,
        "pacing_error_ns": {
            "p50": pacing.error_p50_ns,
            "p99": pacing.error_p99_ns,
            "p99.9": pacing.error_p999_ns,
            "max": pacing.error_max_ns,
        },
        "stalled_ns": pacing.stalled_ns,
        "stalled_share": pacing.stalled_share,
        "placement": pacing.placement,
    })
}

pub fn realtime(preset: &str, load: u32, json: bool, out: &mut impl Write) -> Result<(), CliError> {
    // The preset may carry the device thread's placement keys (`zn540,device-cpu=1`).
    let spec = format!("preset:{preset},zones=8");
    let mut results = serde_json::Map::new();
    let _load = BusyThreads::start(load);
    if !json {
        writeln!(
            out,
            "real-time runtime on preset {preset}: pacing error = delivered - modelled completion time; \
             {COMMANDS_PER_THREAD} commands per thread; {load} busy threads beside it"
        )
        .map_err(stdout_error)?;
    }
    for (op, qd, threads) in [
        (Op::Read, 1, 1),
        (Op::Read, 32, 1),
        (Op::Read, 1, 2),
        (Op::Read, 32, 2),
        (Op::Write, 1, 1),
        (Op::Write, 32, 1),
        (Op::Write, 1, 2),
        (Op::Write, 32, 2),
    ] {
        let measured = measure(&spec, op, qd, threads)?;
        let value = summary(&measured);
        if !json {
            if results.is_empty() {
                writeln!(out, "  device thread: {}", measured.pacing.placement).map_err(stdout_error)?;
            }
            let errors = &value["pacing_error_ns"];
            writeln!(
                out,
                "  {:<22} {:>8.0} commands/s  pacing error p50 {:>6.1} us  p99 {:>6.1} us  p99.9 {:>7.1} us  \
                 max {:>8.1} us  late {:>5.1} %  stalled {:>6.1} ms",
                measured.label,
                measured.commands_per_s,
                errors["p50"].as_u64().unwrap_or(0) as f64 / 1e3,
                errors["p99"].as_u64().unwrap_or(0) as f64 / 1e3,
                errors["p99.9"].as_u64().unwrap_or(0) as f64 / 1e3,
                errors["max"].as_u64().unwrap_or(0) as f64 / 1e3,
                value["late_share"].as_f64().unwrap_or(0.0) * 100.0,
                value["stalled_ns"].as_u64().unwrap_or(0) as f64 / 1e6,
            )
            .map_err(stdout_error)?;
        }
        results.insert(measured.label.clone(), value);
    }
    // The highest rate held: reads on the instant preset at rising depth from two threads, while p99 stays
    // under 10 us.
    let mut held = 0.0f64;
    for qd in [1, 4, 16, 64, 256] {
        let measured = measure("preset:instant", Op::Read, qd, 2)?;
        let value = summary(&measured);
        let p99 = value["pacing_error_ns"]["p99"].as_u64().unwrap_or(u64::MAX);
        if p99 < 10_000 {
            held = held.max(measured.commands_per_s);
        }
        if !json {
            writeln!(
                out,
                "  instant, 2 threads, QD {qd:<3}   {:>8.0} commands/s  pacing error p99 {:>6.1} us",
                measured.commands_per_s,
                p99 as f64 / 1e3
            )
            .map_err(stdout_error)?;
        }
        results.insert(format!("instant_read_qd{qd}_2threads"), value);
    }
    results.insert("highest_rate_with_p99_under_10us".into(), json!(held));
    results.insert("busy_threads".into(), json!(load));
    if json {
        writeln!(out, "{}", serde_json::Value::Object(results)).map_err(stdout_error)?;
    } else {
        writeln!(out, "  highest rate held with p99 pacing error under 10 us: {held:.0} commands/s")
            .map_err(stdout_error)?;
    }
    Ok(())
}

/// Threads that keep a core busy until dropped: a loaded machine for the pacing bench.
struct BusyThreads {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyThreads {
    fn start(count: u32) -> BusyThreads {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..count)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut spins = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        spins = std::hint::black_box(spins.wrapping_add(1));
                    }
                })
            })
            .collect();
        BusyThreads { stop, threads }
    }
}

impl Drop for BusyThreads {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
