//! fio's output: its JSON schema (so existing parsers read it unchanged) and its normal text, plus a `zonelab`
//! object with what only a simulation knows. Everything but the `wall` figures is the same, byte for byte, for
//! the same seed.

use serde_json::{json, Map, Value};
use zonelab_media::{FlashOp, OpSource};

use super::engine::{DirectionStats, FioResult, GroupResult, IoDistribution, JobResult, LATENCY_BOUNDS};
use super::help::FIO_RELEASE;
use super::histogram::LatencyStats;
use super::options::JobOptions;

/// zonelab's own version, in the `zonelab` object beside fio's `fio version`.
pub const ZONELAB_VERSION: &str = concat!("zonelab-", env!("CARGO_PKG_VERSION"));

/// Minimum, maximum, mean and sample standard deviation (n - 1, as fio's running variance) of samples.
fn sample_stats(samples: &[f64]) -> (f64, f64, f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let variance =
        if samples.len() > 1 { samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(0.0, f64::max);
    (min, max, mean, variance.sqrt())
}

/// The group's aggregate bandwidth in one direction, in bytes per second (fio's `agg`).
fn group_bandwidth(result: &FioResult, groupid: u32, pick: fn(&JobResult) -> &DirectionStats) -> f64 {
    let jobs: Vec<&JobResult> = result.jobs.iter().filter(|job| job.groupid == groupid).collect();
    let bytes: u64 = jobs.iter().map(|job| pick(job).bytes).sum();
    let runtime = jobs.iter().map(|job| pick(job).runtime_ns).max().unwrap_or(1).max(1);
    bytes as f64 * 1e9 / runtime as f64
}

/// Percentages of `counts` (fio prints 0 for every bucket when nothing was counted).
fn percentages(counts: &[u64]) -> Vec<f64> {
    let total: u64 = counts.iter().sum();
    counts.iter().map(|&count| if total == 0 { 0.0 } else { count as f64 * 100.0 / total as f64 }).collect()
}

/// fio's `iodepth_*` and `latency_*` objects of a job.
fn distribution_json(job: &JobResult) -> Map<String, Value> {
    let IoDistribution { depth, latency } = &job.distribution;
    let ios: u64 = depth.iter().sum();
    let mut out = Map::new();
    let depth_labels = ["1", "2", "4", "8", "16", "32", ">=64"];
    out.insert("iodepth_level".into(), labelled(&depth_labels, &percentages(depth)));
    // zonelab submits and reaps one I/O per call, which fio counts in its 1-4 bucket.
    let calls = [0.0, if ios == 0 { 0.0 } else { 100.0 }, 0.0, 0.0, 0.0, 0.0, 0.0];
    let call_labels = ["0", "4", "8", "16", "32", "64", ">=64"];
    out.insert("iodepth_submit".into(), labelled(&call_labels, &calls));
    out.insert("iodepth_complete".into(), labelled(&call_labels, &calls));
    let shares = percentages(latency);
    let bounds: Vec<String> = LATENCY_BOUNDS.iter().map(u64::to_string).collect();
    let bounds: Vec<&str> = bounds.iter().map(String::as_str).collect();
    out.insert("latency_ns".into(), labelled(&bounds, &shares[0..10]));
    out.insert("latency_us".into(), labelled(&bounds, &shares[10..20]));
    let ms_labels: Vec<&str> = bounds.iter().copied().chain(["2000", ">=2000"]).collect();
    out.insert("latency_ms".into(), labelled(&ms_labels, &shares[20..32]));
    out
}

fn labelled(labels: &[&str], values: &[f64]) -> Value {
    Value::Object(labels.iter().zip(values).map(|(label, value)| (label.to_string(), json!(value))).collect())
}

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

/// CPU time as fio gives it: a percentage of the threads' summed run time.
fn cpu_pct(cpu_ns: u64, thread_ns: u64) -> f64 {
    cpu_ns as f64 * 100.0 / thread_ns.max(1) as f64
}

fn direction_json(stats: &DirectionStats, job: &JobResult, group_bw_bytes: f64, bins: bool) -> Value {
    let (bw_bytes, iops) = (stats.bytes_per_s(), stats.iops());
    let list = &job.options.percentile_list;
    let (bw_min, bw_max, bw_mean, bw_dev) = sample_stats(&stats.bw_samples);
    let (iops_min, iops_max, iops_mean, iops_dev) = sample_stats(&stats.iops_samples);
    let mut clat = stats_json(&stats.clat, job.options.clat_percentiles.then_some(list.as_slice()));
    if bins {
        let table: Map<String, Value> =
            stats.clat.bins().map(|(value, hits)| (value.to_string(), json!(hits))).collect();
        clat["bins"] = Value::Object(table);
    }
    let bw_agg = if group_bw_bytes > 0.0 { bw_mean / (group_bw_bytes / 1024.0) * 100.0 } else { 0.0 };
    json!({
        "io_bytes": stats.bytes,
        "io_kbytes": stats.bytes / 1024,
        "bw_bytes": bw_bytes.round() as u64,
        "bw": (bw_bytes / 1024.0).round() as u64,
        "iops": iops,
        "runtime": (stats.runtime_ns as f64 / 1e6).round() as u64,
        "total_ios": stats.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": stats_json(&stats.slat, None),
        "clat_ns": clat,
        "lat_ns": stats_json(&stats.lat, job.options.lat_percentiles.then_some(list.as_slice())),
        "bw_min": bw_min as u64,
        "bw_max": bw_max as u64,
        "bw_agg": bw_agg,
        "bw_mean": bw_mean,
        "bw_dev": bw_dev,
        "bw_samples": stats.bw_samples.len(),
        "iops_min": iops_min as u64,
        "iops_max": iops_max as u64,
        "iops_mean": iops_mean,
        "iops_stddev": iops_dev,
        "iops_samples": stats.iops_samples.len(),
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
        OpSource::GcRead => "gc_read",
        OpSource::GcWrite => "gc_write",
        OpSource::GcErase => "gc_erase",
    }
}

/// fio's JSON document; with `bins` (json+), each completion-latency histogram's bins too.
pub fn to_json(result: &FioResult, bins: bool) -> Value {
    let jobs: Vec<Value> = result
        .jobs
        .iter()
        .map(|job| {
            let group = &result.groups[job.run_group as usize];
            let simulated_ios = group.commands as f64 / group.wall_seconds.max(1e-9);
            let direction = |stats: &DirectionStats, pick: fn(&JobResult) -> &DirectionStats| {
                direction_json(stats, job, group_bandwidth(result, job.groupid, pick), bins)
            };
            let mut job_json = json!({
                "jobname": job.options.name,
                "groupid": job.groupid,
                "error": job.error,
                "eta": 0,
                "elapsed": (group.device_time_ns as f64 / 1e9).ceil() as u64,
                "job options": given_json(&job.options.given),
                "read": direction(&job.read, |job| &job.read),
                "write": direction(&job.write, |job| &job.write),
                "trim": direction(&job.trim, |job| &job.trim),
                "sync": {
                    "total_ios": job.sync.ios,
                    "lat_ns": stats_json(&job.sync.lat, (job.sync.ios > 0).then_some(job.options.percentile_list.as_slice())),
                },
                "job_runtime": (job.thread_ns as f64 / 1e6).round() as u64,
                "usr_cpu": cpu_pct(job.usr_ns, job.thread_ns),
                "sys_cpu": cpu_pct(job.sys_ns, job.thread_ns),
                "ctx": job.ctx,
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
                    "group_host_ftl": group.host_ftl.map(|counters| json!({
                        "counters": counters,
                        "write_amplification": counters.write_amplification(),
                    })),
                    "wall": {
                        "seconds": group.wall_seconds,
                        "simulated_commands_per_second": simulated_ios,
                    },
                },
            });
            let object = job_json.as_object_mut().expect("a job is an object");
            if job.options.continue_on_error.any() {
                object.insert("total_err".into(), json!(job.total_errors));
                object.insert("first_error".into(), json!(job.first_error));
            }
            object.extend(distribution_json(job));
            object.insert("latency_depth".into(), json!(job.options.iodepth));
            object.insert("latency_target".into(), json!(0));
            object.insert("latency_percentile".into(), json!(100.0));
            object.insert("latency_window".into(), json!(0));
            job_json
        })
        .collect();
    let mut document = json!({
        "fio version": FIO_RELEASE,
        "timestamp": result.started_unix_ms / 1000,
        "timestamp_ms": result.started_unix_ms,
        "time": ctime(result.started_unix_ms / 1000),
    });
    if !result.global_options.is_empty() {
        document["global options"] = given_json(&result.global_options);
    }
    document["jobs"] = Value::Array(jobs);
    document["disk_util"] = json!([disk_util(result)]);
    document["zonelab"] = json!({
            "version": ZONELAB_VERSION,
            "device": result.device_name,
            "host_path": result.host_path.name(),
            "wear": serde_json::to_value(&result.wear).unwrap_or(Value::Null),
            "notes": result.notes,
    });
    document
}

/// fio's `disk_util` for the emulated device, over the whole run: commands by direction, requests merged into
/// others by the scheduler, the time I/Os spent in the device (ms, from completion latencies), and utilisation
/// as that time over the device time, capped at 100 % (Linux counts time with at least one I/O in flight, which
/// a sum of latencies overstates at depths above one, hence the cap).
fn disk_util(result: &FioResult) -> Value {
    let commands = |pick: fn(&zonelab_device::DeviceCounters) -> u64| -> u64 {
        result.groups.iter().map(|group| pick(&group.device)).sum()
    };
    let ticks_ms = |pick: fn(&JobResult) -> &DirectionStats| -> u64 {
        let total: f64 = result.jobs.iter().map(|job| pick(job).clat.mean() * pick(job).clat.count() as f64).sum();
        (total / 1e6).round() as u64
    };
    let (read_ticks, write_ticks) = (ticks_ms(|job| &job.read), ticks_ms(|job| &job.write));
    let device_ms: f64 = result.groups.iter().map(|group| group.device_time_ns as f64 / 1e6).sum();
    let in_queue = read_ticks + write_ticks;
    let util = if device_ms > 0.0 { (in_queue as f64 / device_ms * 100.0).min(100.0) } else { 0.0 };
    let merges: u64 = result.jobs.iter().map(|job| job.scheduler.merged_requests).max().unwrap_or(0);
    json!({
        "name": result.device_name,
        "read_ios": commands(|counters| counters.reads),
        "write_ios": commands(|counters| counters.writes + counters.appends),
        "read_merges": 0,
        "write_merges": merges,
        "read_ticks": read_ticks,
        "write_ticks": write_ticks,
        "in_queue": in_queue,
        "util": util,
    })
}

/// Options as given, in order (fio echoes them as strings; a flag has an empty value).
fn given_json(given: &[(String, String)]) -> Value {
    Value::Object(given.iter().map(|(key, value)| (key.clone(), json!(value))).collect())
}

/// A Unix time as C's `ctime` prints it (in UTC): `Mon Nov 23 19:36:22 2026`.
fn ctime(unix_seconds: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (days, second_of_day) = (unix_seconds / 86_400, unix_seconds % 86_400);
    // Howard Hinnant's days-to-civil algorithm, over 400-year eras of 146097 days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {year}",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// A number as fio's `num2str` prints it in its summary lines: at most four digits, with a unit prefix once
/// the value reaches 10,000 (`14.6k`, `512k`, `1235k`, `2000MiB`), up to exa, so no rate is absurdly long.
/// `pow2` picks binary prefixes (Ki, Mi) over SI ones (k, M); `unit` follows the prefix.
fn num2str(value: f64, pow2: bool, unit: &str) -> String {
    const SI: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    const IEC: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let (base, prefixes) = if pow2 { (1024.0, IEC) } else { (1000.0, SI) };
    let mut value = value.max(0.0);
    let mut index = 0;
    while value >= 10_000.0 && index < prefixes.len() - 1 {
        value /= base;
        index += 1;
    }
    let decimals = if index > 0 && value < 100.0 { 1 } else { 0 };
    let mut text = format!("{value:.decimals$}");
    if text.len() > 4 && decimals > 0 {
        text = format!("{value:.0}");
    }
    format!("{text}{}{unit}", prefixes[index])
}

/// A count like fio: `85.1k`, `1234`.
fn count(value: f64) -> String {
    num2str(value, false, "")
}

/// How a job's quantities of data print (fio's `kb_base` and `unit_base`): binary prefixes first unless
/// kb_base=1000, and rates in bits with unit_base=1 (sizes stay in bytes).
#[derive(Clone, Copy)]
struct DataUnits {
    pow2_first: bool,
    bits: bool,
}

impl DataUnits {
    fn of(options: &JobOptions) -> DataUnits {
        DataUnits { pow2_first: options.kb_base != 1000, bits: options.unit_bits }
    }

    /// A quantity of data in the preferred prefixes: `1024KiB`.
    fn size(self, bytes: f64) -> String {
        num2str(bytes, self.pow2_first, "B")
    }

    /// Preferred, then the other: `1024KiB (1049kB)`.
    fn size_both(self, bytes: f64) -> String {
        format!("{} ({})", self.size(bytes), num2str(bytes, !self.pow2_first, "B"))
    }

    fn rate_in(self, bytes_per_s: f64, pow2: bool) -> String {
        if self.bits {
            num2str(bytes_per_s * 8.0, pow2, "bit/s")
        } else {
            num2str(bytes_per_s, pow2, "B/s")
        }
    }

    /// A rate in the preferred prefixes and the other: (`477MiB/s`, `500MB/s`).
    fn rates(self, bytes_per_s: f64) -> (String, String) {
        (self.rate_in(bytes_per_s, self.pow2_first), self.rate_in(bytes_per_s, !self.pow2_first))
    }

    fn rate_both(self, bytes_per_s: f64) -> String {
        let (preferred, other) = self.rates(bytes_per_s);
        format!("{preferred} ({other})")
    }

    /// fio's bandwidth-sample line unit and scale for a mean of `mean_kib` KiB/s (`show_ddir_status`): kB or
    /// KiB (kibit or Kibit in bits), switching to MiB (Mibit) past kb_base squared, as fio labels it.
    fn sample_unit(self, mean_kib: f64) -> (&'static str, f64) {
        let kb_base = if self.pow2_first { 1024.0 } else { 1000.0 };
        let mut scale = 1024.0 / kb_base * if self.bits { 8.0 } else { 1.0 };
        let mut unit = match (self.bits, self.pow2_first) {
            (true, true) => "Kibit",
            (true, false) => "kbit",
            (false, true) => "KiB",
            (false, false) => "kB",
        };
        if mean_kib * scale > kb_base * kb_base {
            scale /= kb_base;
            unit = if self.bits { "Mibit" } else { "MiB" };
        }
        (unit, scale)
    }
}

/// fio's `display_lat`: nanoseconds unless min, max, mean and stddev all exceed a microsecond (then usec) or a
/// millisecond (then msec).
fn latency_line(label: &str, stats: &LatencyStats) -> String {
    let (min, max, mean, dev) = (stats.min() as f64, stats.max() as f64, stats.mean(), stats.stddev());
    let all_above = |limit: f64| min > limit && max > limit && mean > limit && dev > limit;
    let (unit, divisor) = if all_above(1e6) {
        ("msec", 1e6)
    } else if all_above(1e3) {
        ("usec", 1e3)
    } else {
        ("nsec", 1.0)
    };
    format!(
        "    {label} ({unit}): min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}\n",
        min / divisor,
        max / divisor,
        mean / divisor,
        dev / divisor
    )
}

/// fio's `show_clat_percentiles`: the unit follows the smallest and largest value listed, entries four to a
/// line, each as wide as the largest.
fn percentile_lines(label: &str, stats: &LatencyStats, list: &[f64]) -> String {
    let values: Vec<u64> = list.iter().map(|&p| stats.percentile(p)).collect();
    let (minv, maxv) = (values.iter().copied().min().unwrap_or(0), values.iter().copied().max().unwrap_or(0));
    let (unit, divisor) = if minv > 2_000_000 && maxv > 99_999_999 {
        ("msec", 1_000_000)
    } else if minv > 2000 && maxv > 99_999 {
        ("usec", 1000)
    } else {
        ("nsec", 1)
    };
    // As many decimals as the list needs, at most two (" 50th", " 1.00th"); values in five columns.
    let precision = list
        .iter()
        .map(|p| (0..2).find(|&digits| (p * 10f64.powi(digits)).fract().abs() < 1e-9).unwrap_or(2) as usize)
        .max()
        .unwrap_or(0);
    let width = precision + 3;
    let cells: Vec<String> =
        list.iter().zip(&values).map(|(p, v)| format!("{p:width$.precision$}th=[{:5}]", v.div_ceil(divisor))).collect();
    let rows: Vec<String> = cells.chunks(4).map(|row| format!("     | {}", row.join(", "))).collect();
    format!("    {label} percentiles ({unit}):\n{}\n", rows.join(",\n"))
}

/// fio's `lat (nsec)`, `lat (usec)` and `lat (msec)` lines: the share of I/Os in each latency bucket.
fn latency_distribution(distribution: &IoDistribution) -> String {
    let shares = percentages(&distribution.latency);
    let mut out = String::new();
    for (unit, range) in [("nsec", 0..10), ("usec", 10..20), ("msec", 20..32)] {
        let cells: Vec<String> = range
            .clone()
            .filter(|&slot| shares[slot] > 0.0)
            .map(|slot| {
                let label = match slot - range.start {
                    10 => "2000".to_string(),
                    11 => ">=2000".to_string(),
                    index => LATENCY_BOUNDS[index].to_string(),
                };
                let share = shares[slot];
                if share < 0.01 {
                    format!("{label}=0.01%")
                } else {
                    format!("{label}={share:.2}%")
                }
            })
            .collect();
        if !cells.is_empty() {
            out.push_str(&format!("  lat ({unit})   : {}\n", cells.join(", ")));
        }
    }
    out
}

fn bucket_line(labels: &[&str], shares: &[f64]) -> String {
    let cells: Vec<String> = labels.iter().zip(shares).map(|(label, share)| format!("{label}={share:.1}%")).collect();
    cells.join(", ")
}

/// fio's job header: `j: (g=0): rw=randread, bs=(R) 4096B-4096B, ..., ioengine=psync, iodepth=1`.
fn job_header(options: &super::options::JobOptions, groupid: u32) -> String {
    let bs = options.bs_bytes;
    format!(
        "{}: (g={groupid}): rw={}, bs=(R) {bs}B-{bs}B, (W) {bs}B-{bs}B, (T) {bs}B-{bs}B, ioengine={}, iodepth={}\n",
        options.name,
        options.rw.name(),
        options.ioengine.name(),
        options.iodepth
    )
}

/// fio's normal text output, with `zonelab:` lines for what only a simulation knows. The run's notes are not
/// part of it: like fio's warnings, they go to standard error.
pub fn to_text(result: &FioResult) -> String {
    let mut out = String::new();
    let mut processes = 0;
    for (groupid, job) in &result.defined {
        out.push_str(&job_header(job, *groupid));
        if job.numjobs > 1 {
            out.push_str("...\n");
        }
        processes += job.numjobs;
    }
    out.push_str(&format!(
        "{FIO_RELEASE} ({ZONELAB_VERSION}, virtual time on {}, {} path)\nStarting {processes} process{}\n",
        result.device_name,
        result.host_path.name(),
        if processes == 1 { "" } else { "es" }
    ));
    for job in &result.jobs {
        out.push('\n');
        out.push_str(&job_text(result, job));
    }
    let mut groupids: Vec<u32> = result.jobs.iter().map(|job| job.groupid).collect();
    groupids.dedup();
    for groupid in groupids {
        out.push_str(&group_text(result, groupid));
    }
    let disk = disk_util(result);
    out.push_str(&format!(
        "\nDisk stats (read/write):\n  {}: ios={}/{}, merge={}/{}, ticks={}/{}, in_queue={}, util={:.2}%\n",
        result.device_name,
        disk["read_ios"],
        disk["write_ios"],
        disk["read_merges"],
        disk["write_merges"],
        disk["read_ticks"],
        disk["write_ticks"],
        disk["in_queue"],
        disk["util"].as_f64().unwrap_or(0.0)
    ));
    out
}

fn job_text(result: &FioResult, job: &JobResult) -> String {
    let mut out = format!(
        "{}: (groupid={}, jobs={}): err={:2}: pid={}: {}\n",
        job.options.name,
        job.groupid,
        job.instances,
        job.error,
        std::process::id(),
        ctime(result.started_unix_ms / 1000)
    );
    if let Some(message) = &job.error_message {
        out.push_str(&format!("  fio: {message}\n"));
    }
    let units = DataUnits::of(&job.options);
    for (label, stats, pick) in [
        ("read", &job.read, (|job: &JobResult| &job.read) as fn(&JobResult) -> &DirectionStats),
        ("write", &job.write, |job: &JobResult| &job.write),
        ("trim", &job.trim, |job: &JobResult| &job.trim),
    ] {
        if stats.ios == 0 {
            continue;
        }
        let resets =
            if job.options.zonemode_zbd { format!("; {} zone resets", job.zone_resets) } else { String::new() };
        out.push_str(&format!(
            "  {label}: IOPS={}, BW={}({}/{}msec){resets}\n",
            count(stats.iops()),
            units.rate_both(stats.bytes_per_s()),
            units.size(stats.bytes as f64),
            (stats.runtime_ns as f64 / 1e6).round(),
        ));
        if stats.slat.count() > 0 {
            out.push_str(&latency_line("slat", &stats.slat));
        }
        out.push_str(&latency_line("clat", &stats.clat));
        out.push_str(&latency_line(" lat", &stats.lat));
        let list = &job.options.percentile_list;
        if job.options.clat_percentiles && stats.clat.count() > 0 {
            out.push_str(&percentile_lines("clat", &stats.clat, list));
        }
        if job.options.lat_percentiles && stats.lat.count() > 0 {
            out.push_str(&percentile_lines(" lat", &stats.lat, list));
        }
        if !stats.bw_samples.is_empty() {
            let (min, max, mean, dev) = sample_stats(&stats.bw_samples);
            let group_kib = group_bandwidth(result, job.groupid, pick) / 1024.0;
            let share = if group_kib > 0.0 { mean / group_kib * 100.0 } else { 0.0 };
            let (unit, scale) = units.sample_unit(mean);
            out.push_str(&format!(
                "   bw ({unit:>5}/s): min={:5}, max={:5}, per={share:3.2}%, avg={:5.02}, stdev={:5.02}, samples={}\n",
                (min * scale) as u64,
                (max * scale) as u64,
                mean * scale,
                dev * scale,
                stats.bw_samples.len()
            ));
            let (min, max, mean, dev) = sample_stats(&stats.iops_samples);
            out.push_str(&format!(
                "   iops        : min={:5}, max={:5}, avg={mean:5.02}, stdev={dev:5.02}, samples={}\n",
                min as u64,
                max as u64,
                stats.iops_samples.len()
            ));
        }
    }
    out.push_str(&latency_distribution(&job.distribution));
    out.push_str(&format!(
        "  cpu          : usr={:.2}%, sys={:.2}%, ctx={}, majf=0, minf=0\n",
        cpu_pct(job.usr_ns, job.thread_ns),
        cpu_pct(job.sys_ns, job.thread_ns),
        job.ctx
    ));
    let depth = percentages(&job.distribution.depth);
    out.push_str(&format!("  IO depths    : {}\n", bucket_line(&["1", "2", "4", "8", "16", "32", ">=64"], &depth)));
    let any = job.read.ios + job.write.ios + job.trim.ios > 0;
    let calls = [0.0, if any { 100.0 } else { 0.0 }, 0.0, 0.0, 0.0, 0.0, 0.0];
    let call_labels = ["0", "4", "8", "16", "32", "64", ">=64"];
    out.push_str(&format!("     submit    : {}\n", bucket_line(&call_labels, &calls)));
    out.push_str(&format!("     complete  : {}\n", bucket_line(&call_labels, &calls)));
    out.push_str(&format!(
        "     issued rwts: total={},{},{},0 short=0,0,0,0 dropped=0,0,0,0\n",
        job.read.ios, job.write.ios, job.trim.ios
    ));
    out.push_str(&format!("     latency   : target=0, window=0, percentile=100.00%, depth={}\n", job.options.iodepth));
    if job.options.continue_on_error.any() {
        let reason = match job.first_error {
            0 => "Success",
            84 => "Invalid or incomplete multibyte or wide character",
            _ => "Input/output error",
        };
        out.push_str(&format!(
            "     errors    : total={}, first_error={}/<{reason}>\n",
            job.total_errors, job.first_error
        ));
    }
    out.push_str(&format!(
        "  zonelab: scheduler {}, {} write commands for {} write requests\n",
        job.options.scheduler.name(),
        job.scheduler.write_commands,
        job.scheduler.write_requests
    ));
    out
}

/// fio's `Run status group` lines of reporting group `groupid`, and the device figures of the run group it ran in
/// (shared with the other reporting groups that ran beside it).
fn group_text(result: &FioResult, groupid: u32) -> String {
    let mut out = format!("\nRun status group {groupid} (all jobs):\n");
    let jobs: Vec<&JobResult> = result.jobs.iter().filter(|job| job.groupid == groupid).collect();
    // fio prints a group's figures in its first job's units.
    let Some(units) = jobs.first().map(|job| DataUnits::of(&job.options)) else { return out };
    let group = &result.groups[jobs[0].run_group as usize];
    for (label, pick) in [
        ("READ", (|job: &JobResult| &job.read) as fn(&JobResult) -> &DirectionStats),
        ("WRITE", |job: &JobResult| &job.write),
        ("TRIM", |job: &JobResult| &job.trim),
    ] {
        let bytes: u64 = jobs.iter().map(|job| pick(job).bytes).sum();
        if bytes == 0 {
            continue;
        }
        let rates: Vec<f64> =
            jobs.iter().filter(|job| pick(job).bytes > 0).map(|job| pick(job).bytes_per_s()).collect();
        let (slowest, fastest) =
            (rates.iter().copied().fold(f64::INFINITY, f64::min), rates.iter().copied().fold(0.0, f64::max));
        let runtimes = jobs.iter().filter(|job| pick(job).bytes > 0).map(|job| pick(job).runtime_ns);
        let (shortest, longest) = (runtimes.clone().min().unwrap_or(1), runtimes.max().unwrap_or(1));
        out.push_str(&format!(
            "{label:>7}: bw={}, {}-{} ({}-{}), io={}, run={}-{}msec\n",
            units.rate_both(group_bandwidth(result, groupid, pick)),
            units.rates(slowest).0,
            units.rates(fastest).0,
            units.rates(slowest).1,
            units.rates(fastest).1,
            units.size_both(bytes as f64),
            (shortest as f64 / 1e6).round(),
            (longest as f64 / 1e6).round()
        ));
    }
    // Reporting groups that ran side by side (`new_group`) share their run's device figures: say with whom.
    let mut beside: Vec<String> = result
        .jobs
        .iter()
        .filter(|job| job.run_group == group.run_group && job.groupid != groupid)
        .map(|job| job.groupid.to_string())
        .collect();
    beside.dedup();
    let shared = match beside.len() {
        0 => String::new(),
        1 => format!(", shared with group {}, which ran beside it", beside[0]),
        _ => format!(", shared with groups {}, which ran beside it", beside.join(", ")),
    };
    out.push_str(&format!(
        "  zonelab: {:.3} s of device time in {:.3} s of wall time, {} device commands{shared}\n",
        group.device_time_ns as f64 / 1e9,
        group.wall_seconds,
        group.commands
    ));
    out
}

/// fio's terse output, version 3 (`show_thread_status_terse_all`): one `;`-separated line per job with the
/// read and write statistics in microseconds and KiB, CPU, IO depths, latency distribution and disk figures.
pub fn to_terse(result: &FioResult) -> String {
    let disk = disk_util(result);
    let mut out = String::new();
    for job in &result.jobs {
        let mut fields =
            vec!["3".to_string(), FIO_RELEASE.to_string(), job.options.name.clone(), job.groupid.to_string()];
        fields.push(job.error.to_string());
        for (stats, pick) in [
            (&job.read, (|job: &JobResult| &job.read) as fn(&JobResult) -> &DirectionStats),
            (&job.write, |job: &JobResult| &job.write),
        ] {
            terse_direction(job, stats, group_bandwidth(result, job.groupid, pick), &mut fields);
        }
        fields.push(format!("{:.6}%", cpu_pct(job.usr_ns, job.thread_ns)));
        fields.push(format!("{:.6}%", cpu_pct(job.sys_ns, job.thread_ns)));
        fields.extend([job.ctx.to_string(), "0".to_string(), "0".to_string()]);
        fields.extend(percentages(&job.distribution.depth).iter().map(|share| format!("{share:3.1}%")));
        let latency = percentages(&job.distribution.latency);
        fields.extend(latency[10..32].iter().map(|share| format!("{share:3.2}%")));
        for key in
            ["name", "read_ios", "write_ios", "read_merges", "write_merges", "read_ticks", "write_ticks", "in_queue"]
        {
            fields.push(disk[key].as_str().map_or_else(|| disk[key].to_string(), str::to_string));
        }
        fields.push(format!("{:3.2}%", disk["util"].as_f64().unwrap_or(0.0)));
        if job.options.continue_on_error.any() {
            fields.extend([job.total_errors.to_string(), job.first_error.to_string()]);
        }
        out.push_str(&fields.join(";"));
        out.push('\n');
    }
    out
}

/// One direction of a terse line (`show_ddir_status_terse`): KiB, KiB/s, IOPS, runtime, then slat, clat with
/// twenty percentile slots, lat, and bandwidth samples.
fn terse_direction(job: &JobResult, stats: &DirectionStats, group_bw_bytes: f64, fields: &mut Vec<String>) {
    let runtime_ms = (stats.runtime_ns as f64 / 1e6).round() as u64;
    let (bw, iops) = match runtime_ms {
        0 => (0, 0),
        ms => (stats.bytes * 1000 / ms / 1024, stats.ios * 1000 / ms),
    };
    fields.extend([stats.bytes >> 10, bw, iops, runtime_ms].map(|n| n.to_string()));
    let latency = |latency: &LatencyStats, fields: &mut Vec<String>| {
        fields.push((latency.min() / 1000).to_string());
        fields.push((latency.max() / 1000).to_string());
        fields.push(format!("{:.6}", latency.mean() / 1000.0));
        fields.push(format!("{:.6}", latency.stddev() / 1000.0));
    };
    latency(&stats.slat, fields);
    latency(&stats.clat, fields);
    let list: &[f64] = if job.options.clat_percentiles { &job.options.percentile_list } else { &[] };
    for slot in 0..20 {
        match list.get(slot) {
            Some(&percent) => fields.push(format!("{percent:.6}%={}", stats.clat.percentile(percent) / 1000)),
            None => fields.push("0%=0".to_string()),
        }
    }
    latency(&stats.lat, fields);
    let (min, max, mean, dev) = sample_stats(&stats.bw_samples);
    let share = if stats.bw_samples.is_empty() {
        0.0
    } else if group_bw_bytes > 0.0 {
        (mean * 100.0 / (group_bw_bytes / 1024.0)).min(100.0)
    } else {
        100.0
    };
    fields.extend([(min as u64).to_string(), (max as u64).to_string(), format!("{share:.6}%")]);
    fields.extend([format!("{mean:.6}"), format!("{dev:.6}")]);
}

/// fio's status line for a run in progress: `Jobs: 1 (f=1): [r(1)][45.0%][r=371MiB/s][r=94.9k IOPS][eta 00m:05s]`.
/// Rates are the emulated device's, per second of device time; the ETA is in wall-clock time.
pub fn status_line(progress: &super::engine::Progress) -> String {
    let rate = |read: f64, write: f64, show: &dyn Fn(f64) -> String| match (read > 0.0, write > 0.0) {
        (true, true) => format!("r={},w={}", show(read), show(write)),
        (false, true) => format!("w={}", show(write)),
        _ => format!("r={}", show(read)),
    };
    let eta_seconds = if progress.done > 0.0 {
        (progress.wall.as_secs_f64() * (1.0 - progress.done) / progress.done).round() as u64
    } else {
        0
    };
    format!(
        "Jobs: {} (f={}): [{}][{:.1}%][{}][{} IOPS][eta {:02}m:{:02}s]",
        progress.running,
        progress.running,
        progress.patterns,
        progress.done * 100.0,
        rate(progress.read_bytes_per_s, progress.write_bytes_per_s, &|bytes| num2str(bytes, true, "B/s")),
        rate(progress.read_iops, progress.write_iops, &count),
        eta_seconds / 60,
        eta_seconds % 60
    )
}
