//! fio's output: its JSON schema (so existing parsers read it unchanged) and its normal text, plus a `zonelab`
//! object with what only a simulation knows. Everything but the `wall` figures is the same, byte for byte, for
//! the same seed.

use serde_json::{json, Map, Value};
use zonelab_media::{FlashOp, OpSource};

use super::engine::{DirectionStats, FioResult, GroupResult, JobResult};
use super::histogram::LatencyStats;

/// The version fio parsers see; zonelab is not fio, and says so.
pub const FIO_VERSION: &str = "zonelab-0.1.0 (fio-3.36 compatible)";

fn stats_json(stats: &LatencyStats, percentiles: Option<&[f64]>) -> Value {
    let mut object = json!({
        "min": stats.min(),
        "max": stats.max(),
        "mean": stats.mean(),
        "stddev": stats.stddev(),
        "N": stats.count(),
    });
    if let Some(list) = percentiles.filter(|_| stats.count() > 0) {
        let table: Map<String, Value> = list.iter().map(|p| (format!("{p:.6}"), json!(stats.percentile(*p)))).collect();
        object["percentile"] = Value::Object(table);
    }
    object
}

fn direction_json(stats: &DirectionStats, runtime_ns: u64, job: &JobResult) -> Value {
    let seconds = runtime_ns as f64 / 1e9;
    let (bw_bytes, iops) =
        if stats.ios == 0 { (0.0, 0.0) } else { (stats.bytes as f64 / seconds, stats.ios as f64 / seconds) };
    let list = &job.options.percentile_list;
    json!({
        "io_bytes": stats.bytes,
        "io_kbytes": stats.bytes / 1024,
        "bw_bytes": bw_bytes.round() as u64,
        "bw": (bw_bytes / 1024.0).round() as u64,
        "iops": iops,
        "runtime": if stats.ios == 0 { 0 } else { (runtime_ns as f64 / 1e6).round() as u64 },
        "total_ios": stats.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": stats_json(&stats.slat, None),
        "clat_ns": stats_json(&stats.clat, job.options.clat_percentiles.then_some(list.as_slice())),
        "lat_ns": stats_json(&stats.lat, job.options.lat_percentiles.then_some(list.as_slice())),
        "bw_min": (bw_bytes / 1024.0).round() as u64,
        "bw_max": (bw_bytes / 1024.0).round() as u64,
        "bw_agg": if stats.ios == 0 { 0.0 } else { 100.0 },
        "bw_mean": bw_bytes / 1024.0,
        "bw_dev": 0.0,
        "iops_min": iops.round() as u64,
        "iops_max": iops.round() as u64,
        "iops_mean": iops,
        "iops_stddev": 0.0,
    })
}

fn flash_json(group: &GroupResult, result: &FioResult) -> Value {
    let by_source = |op: FlashOp| -> Map<String, Value> {
        OpSource::ALL
            .iter()
            .map(|&source| (source_name(source).to_string(), json!(group.flash.get(op, source))))
            .collect()
    };
    let energy: Map<String, Value> = OpSource::ALL
        .iter()
        .map(|&source| (source_name(source).to_string(), json!(group.flash.energy_nj(&result.energy, source) / 1e9)))
        .collect();
    json!({
        "page_reads": by_source(FlashOp::PageRead),
        "page_programs": by_source(FlashOp::PageProgram),
        "block_erases": by_source(FlashOp::BlockErase),
        "energy_j": energy,
        "energy_j_total": group.flash.total_energy_nj(&result.energy) / 1e9,
    })
}

fn source_name(source: OpSource) -> &'static str {
    match source {
        OpSource::HostRead => "host_read",
        OpSource::HostWrite => "host_write",
        OpSource::Append => "append",
        OpSource::FinishPadding => "finish_padding",
        OpSource::Seal => "seal",
        OpSource::Reset => "reset",
    }
}

/// fio's JSON document.
pub fn to_json(result: &FioResult) -> Value {
    let jobs: Vec<Value> = result
        .jobs
        .iter()
        .map(|job| {
            let group = &result.groups[job.groupid as usize];
            let simulated_ios = group.commands as f64 / group.wall_seconds.max(1e-9);
            json!({
                "jobname": job.options.name,
                "groupid": job.groupid,
                "error": job.error,
                "eta": 0,
                "elapsed": (group.device_time_ns as f64 / 1e9).ceil() as u64,
                "job options": job_options_json(job),
                "read": direction_json(&job.read, job.runtime_ns, job),
                "write": direction_json(&job.write, job.runtime_ns, job),
                "trim": direction_json(&job.trim, job.runtime_ns, job),
                "job_runtime": (job.runtime_ns as f64 / 1e6).round() as u64,
                "usr_cpu": 0.0,
                "sys_cpu": 0.0,
                "ctx": 0,
                "majf": 0,
                "minf": 0,
                "zonelab": {
                    "jobs": job.instances,
                    "device_time_ns": group.device_time_ns,
                    "zone_resets": job.zone_resets,
                    "zone_finishes": group.device.finishes,
                    "error_message": job.error_message,
                    "scheduler": job.options.scheduler.name(),
                    "scheduler_counters": serde_json::to_value(&job.scheduler).unwrap_or(Value::Null),
                    "group_device_counters": serde_json::to_value(&group.device).unwrap_or(Value::Null),
                    "group_flash": flash_json(group, result),
                    "wall": {
                        "seconds": group.wall_seconds,
                        "simulated_commands_per_second": simulated_ios,
                    },
                },
            })
        })
        .collect();
    json!({
        "fio version": FIO_VERSION,
        "timestamp": 0,
        "timestamp_ms": 0,
        "time": "virtual time",
        "jobs": jobs,
        "zonelab": {
            "device": result.device_name,
            "host_path": result.host_path.name(),
            "wear": serde_json::to_value(&result.wear).unwrap_or(Value::Null),
            "notes": result.notes,
        },
    })
}

fn job_options_json(job: &JobResult) -> Value {
    let options = &job.options;
    json!({
        "name": options.name,
        "filename": options.filename,
        "rw": format!("{:?}", options.rw).to_lowercase(),
        "bs": options.bs_bytes.to_string(),
        "iodepth": options.iodepth.to_string(),
        "numjobs": options.numjobs.to_string(),
        "ioengine": options.ioengine.name(),
        "zonemode": if options.zonemode_zbd { "zbd" } else { "none" },
    })
}

/// Formats a count like fio: `85.1k`, `1234`.
fn short(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 1e4 {
        format!("{:.1}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

/// Bytes per second like fio: `332MiB/s (349MB/s)`.
fn bandwidth(bytes_per_second: f64) -> String {
    let binary = if bytes_per_second >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}GiB/s", bytes_per_second / 1073741824.0)
    } else if bytes_per_second >= 1024.0 * 1024.0 {
        format!("{:.0}MiB/s", bytes_per_second / 1048576.0)
    } else {
        format!("{:.0}KiB/s", bytes_per_second / 1024.0)
    };
    let decimal = if bytes_per_second >= 1e9 {
        format!("{:.2}GB/s", bytes_per_second / 1e9)
    } else if bytes_per_second >= 1e6 {
        format!("{:.0}MB/s", bytes_per_second / 1e6)
    } else {
        format!("{:.0}kB/s", bytes_per_second / 1e3)
    };
    format!("{binary} ({decimal})")
}

fn latency_line(label: &str, stats: &LatencyStats) -> String {
    let (unit, divisor) = if stats.max() >= 10_000_000 {
        ("msec", 1e6)
    } else if stats.max() >= 10_000 {
        ("usec", 1e3)
    } else {
        ("nsec", 1.0)
    };
    format!(
        "    {label} ({unit}): min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}",
        stats.min() as f64 / divisor,
        stats.max() as f64 / divisor,
        stats.mean() / divisor,
        stats.stddev() / divisor
    )
}

/// fio's normal text output.
pub fn to_text(result: &FioResult) -> String {
    let mut out = String::new();
    for note in &result.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    for job in &result.jobs {
        out.push_str(&format!(
            "{}: (groupid={}, jobs={}): err={:2}: pid=0: virtual time on {} ({})\n",
            job.options.name,
            job.groupid,
            job.instances,
            job.error,
            result.device_name,
            result.host_path.name()
        ));
        if let Some(message) = &job.error_message {
            out.push_str(&format!("  fio: {message}\n"));
        }
        for (label, stats) in [("read", &job.read), ("write", &job.write), ("trim", &job.trim)] {
            if stats.ios == 0 {
                continue;
            }
            let seconds = job.runtime_ns as f64 / 1e9;
            out.push_str(&format!(
                "  {label}: IOPS={}, BW={}({}/{}msec); {} zone resets\n",
                short(stats.ios as f64 / seconds),
                bandwidth(stats.bytes as f64 / seconds),
                human_bytes(stats.bytes),
                (job.runtime_ns as f64 / 1e6).round(),
                job.zone_resets
            ));
            out.push_str(&latency_line("slat", &stats.slat));
            out.push('\n');
            out.push_str(&latency_line("clat", &stats.clat));
            out.push('\n');
            out.push_str(&latency_line(" lat", &stats.lat));
            out.push('\n');
            if job.options.clat_percentiles && stats.clat.count() > 0 {
                let (unit, divisor) = if stats.clat.max() >= 10_000_000 { ("msec", 1e6) } else { ("usec", 1e3) };
                out.push_str(&format!("    clat percentiles ({unit}):\n"));
                for row in job.options.percentile_list.chunks(4) {
                    let cells: Vec<String> = row
                        .iter()
                        .map(|p| format!("{p:5.2}th=[{:5.0}]", stats.clat.percentile(*p) as f64 / divisor))
                        .collect();
                    out.push_str(&format!("     | {},\n", cells.join(", ")));
                }
            }
        }
        out.push_str(&format!(
            "  zonelab: scheduler {}, {} write commands for {} write requests\n",
            job.options.scheduler.name(),
            job.scheduler.write_commands,
            job.scheduler.write_requests
        ));
    }
    for group in &result.groups {
        out.push_str(&format!("\nRun status group {} (all jobs):\n", group.groupid));
        for (label, pick) in [("READ", 0), ("WRITE", 1), ("TRIM", 2)] {
            let jobs: Vec<&JobResult> = result.jobs.iter().filter(|job| job.groupid == group.groupid).collect();
            let bytes: u64 = jobs.iter().map(|job| [&job.read, &job.write, &job.trim][pick].bytes).sum();
            if bytes == 0 {
                continue;
            }
            let runtime = jobs.iter().map(|job| job.runtime_ns).max().unwrap_or(1);
            out.push_str(&format!(
                "  {label:>5}: bw={}, io={}, run={}-{}msec\n",
                bandwidth(bytes as f64 / (runtime as f64 / 1e9)),
                human_bytes(bytes),
                (jobs.iter().map(|job| job.runtime_ns).min().unwrap_or(1) as f64 / 1e6).round(),
                (runtime as f64 / 1e6).round()
            ));
        }
        out.push_str(&format!(
            "  zonelab: {:.3} s of device time in {:.3} s of wall time, {} device commands\n",
            group.device_time_ns as f64 / 1e9,
            group.wall_seconds,
            group.commands
        ));
    }
    out
}

fn human_bytes(bytes: u64) -> String {
    let value = bytes as f64;
    if value >= 1073741824.0 {
        format!("{:.1}GiB", value / 1073741824.0)
    } else if value >= 1048576.0 {
        format!("{:.0}MiB", value / 1048576.0)
    } else {
        format!("{:.0}KiB", value / 1024.0)
    }
}
