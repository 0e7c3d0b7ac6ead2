//! fio's per-job log files (`write_lat_log`, `write_bw_log`, `write_iops_log`, `log_avg_msec`), in fio 3.33's
//! format so that fio's own tools (`fio_generate_plots`, `fiologparser.py`) read them: one line per entry,
//! `time (ms since the job started), value, direction (0 read, 1 write, 2 trim), block size, priority`, in
//! files named `PREFIX_TYPE.N.log` where N is the job's thread number, counted from 1 over the invocation.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One completed I/O, as the logs need it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogEntry {
    /// Completion, in device nanoseconds since the job started.
    pub time_ns: u64,
    /// 0 read, 1 write, 2 trim, 3 sync (fio's `ddir`).
    pub direction: u8,
    pub bytes: u64,
    pub slat_ns: u64,
    pub clat_ns: u64,
    pub lat_ns: u64,
}

/// What one job instance asked to log, and what it did.
#[derive(Clone, Debug, PartialEq)]
pub struct IoLog {
    pub thread_number: u32,
    pub lat_prefix: Option<String>,
    pub bw_prefix: Option<String>,
    pub iops_prefix: Option<String>,
    /// `log_avg_msec`: 0 logs every I/O; otherwise one entry per direction per window, the window's mean
    /// (latencies) or rate (bandwidth, IOPS).
    pub avg_msec: u64,
    pub entries: Vec<LogEntry>,
    /// `write_iolog`: the trace file and its text, appended to the file as fio appends (`fopen(..., "a")`).
    pub trace: Option<(String, String)>,
}

/// A value a log keeps of an I/O, or of a window of them.
#[derive(Clone, Copy)]
enum Series {
    Slat,
    Clat,
    Lat,
    /// KiB/s.
    Bandwidth,
    Iops,
}

impl Series {
    /// The value one I/O contributes: its latency in ns; for bandwidth its size over its latency in KiB/s; for
    /// IOPS one.
    fn of(self, entry: &LogEntry) -> u64 {
        match self {
            Series::Slat => entry.slat_ns,
            Series::Clat => entry.clat_ns,
            Series::Lat => entry.lat_ns,
            Series::Bandwidth => (entry.bytes as f64 * 1e9 / entry.lat_ns.max(1) as f64 / 1024.0).round() as u64,
            Series::Iops => 1,
        }
    }
}

/// The lines of one log file.
fn render(entries: &[LogEntry], series: Series, avg_msec: u64) -> String {
    let mut out = String::new();
    if avg_msec == 0 {
        for entry in entries {
            let time_ms = entry.time_ns / 1_000_000;
            let _ = writeln!(out, "{time_ms}, {}, {}, {}, 0", series.of(entry), entry.direction, entry.bytes);
        }
        return out;
    }
    // Windows end at multiples of avg_msec; each direction with I/Os in a window gets one entry at its end.
    let window_ns = avg_msec * 1_000_000;
    let mut start = 0;
    while start < entries.len() {
        let window = entries[start].time_ns / window_ns;
        let end = start + entries[start..].iter().take_while(|entry| entry.time_ns / window_ns == window).count();
        for direction in 0..3u8 {
            let values: Vec<u64> =
                entries[start..end].iter().filter(|entry| entry.direction == direction).map(|e| series.of(e)).collect();
            if values.is_empty() {
                continue;
            }
            let value = match series {
                Series::Iops => (values.len() as f64 * 1000.0 / avg_msec as f64).round() as u64,
                Series::Bandwidth => {
                    let bytes: u64 = entries[start..end]
                        .iter()
                        .filter(|entry| entry.direction == direction)
                        .map(|entry| entry.bytes)
                        .sum();
                    (bytes as f64 * 1000.0 / avg_msec as f64 / 1024.0).round() as u64
                }
                _ => (values.iter().sum::<u64>() as f64 / values.len() as f64 + 0.5) as u64,
            };
            let _ = writeln!(out, "{}, {value}, {direction}, 0, 0", (window + 1) * avg_msec);
        }
        start = end;
    }
    out
}

/// Writes every log the jobs asked for into `dir`; returns the files written.
pub fn write_logs(logs: &[IoLog], dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for log in logs {
        let mut files: Vec<(&str, &str, Series)> = Vec::new();
        if let Some(prefix) = &log.lat_prefix {
            files.extend([
                (prefix.as_str(), "lat", Series::Lat),
                (prefix, "slat", Series::Slat),
                (prefix, "clat", Series::Clat),
            ]);
        }
        if let Some(prefix) = &log.bw_prefix {
            files.push((prefix, "bw", Series::Bandwidth));
        }
        if let Some(prefix) = &log.iops_prefix {
            files.push((prefix, "iops", Series::Iops));
        }
        for (prefix, kind, series) in files {
            let path = dir.join(format!("{prefix}_{kind}.{}.log", log.thread_number));
            std::fs::write(&path, render(&log.entries, series, log.avg_msec))?;
            written.push(path);
        }
        if let Some((file, text)) = &log.trace {
            let path = dir.join(file);
            let mut trace = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
            std::io::Write::write_all(&mut trace, text.as_bytes())?;
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time_ms: u64, direction: u8, lat_us: u64) -> LogEntry {
        let lat_ns = lat_us * 1000;
        LogEntry { time_ns: time_ms * 1_000_000, direction, bytes: 4096, slat_ns: 1000, clat_ns: lat_ns - 1000, lat_ns }
    }

    #[test]
    fn every_io_or_one_entry_per_window_and_direction() {
        let entries = [entry(1, 0, 100), entry(3, 0, 300), entry(4, 1, 50), entry(12, 0, 200)];
        assert_eq!(render(&entries, Series::Lat, 0).lines().next(), Some("1, 100000, 0, 4096, 0"));
        assert_eq!(render(&entries, Series::Iops, 0).lines().count(), 4);
        assert_eq!(render(&entries, Series::Lat, 10), "10, 200000, 0, 0, 0\n10, 50000, 1, 0, 0\n20, 200000, 0, 0, 0\n");
        assert_eq!(render(&entries, Series::Iops, 10), "10, 200, 0, 0, 0\n10, 100, 1, 0, 0\n20, 100, 0, 0, 0\n");
        assert_eq!(render(&entries, Series::Bandwidth, 10).lines().next(), Some("10, 800, 0, 0, 0"));
    }
}
