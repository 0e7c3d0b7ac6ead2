//! Zones over time: each zone's write pointer, interval by interval, replayed from the device commands of a
//! `--trace` file (what zns-tools draws from its probes, exact here because the trace holds every command of its
//! window). Writes and Write Zeroes move a zone's write pointer to their end, appends by their length, a finish
//! fills the zone, a reset empties it; failed commands change nothing.

use std::path::Path;

use serde_json::Value;

use crate::plot::{plot_zone_timeline, TimelineRow};

/// The zones a trace's commands touched, over `intervals` equal intervals of its span.
#[derive(Clone, Debug, PartialEq)]
pub struct ZoneTimeline {
    pub program: String,
    pub interval_ns: u64,
    pub zone_cap_bytes: u64,
    pub zones: Vec<ZoneHistory>,
}

/// One zone: its written bytes at the end of each interval, the resets in each, and its totals.
#[derive(Clone, Debug, PartialEq)]
pub struct ZoneHistory {
    pub zone: u32,
    pub written_bytes: Vec<u64>,
    pub resets: Vec<u32>,
    pub bytes_written_total: u64,
}

/// Replays the commands of `trace` (a `--trace` file's JSON) over `intervals` intervals.
pub fn zone_timeline(trace: &Value, intervals: usize) -> Result<ZoneTimeline, String> {
    let other = &trace["otherData"];
    let number = |key: &str| other[key].as_u64().ok_or_else(|| format!("the trace's otherData has no {key}"));
    let (zones, zone_size_lba, zone_cap_lba) = (number("zones")?, number("zone_size_lba")?, number("zone_cap_lba")?);
    let (lba_bytes, zoned_nsid) = (number("lba_bytes")?, number("zoned_nsid")?);
    if zone_size_lba == 0 || intervals == 0 {
        return Err("a timeline needs zones and at least one interval".into());
    }
    let program = trace["traceEvents"]
        .as_array()
        .and_then(|events| events.iter().find(|event| event["ph"] == "M" && event["pid"] == 1))
        .and_then(|event| event["args"]["name"].as_str())
        .unwrap_or("run")
        .to_string();
    // The zoned namespace's successful commands that move a write pointer, in time order.
    let mut commands: Vec<(f64, &str, u64, u64)> = Vec::new();
    for event in trace["traceEvents"].as_array().ok_or("the trace has no traceEvents")? {
        if event["ph"] != "X" || event["pid"] != 2 || event["args"]["nsid"].as_u64() != Some(zoned_nsid) {
            continue;
        }
        let name = event["name"].as_str().unwrap_or("");
        if !matches!(name, "write" | "write zeroes" | "zone append" | "zone reset" | "zone finish")
            || event["args"]["status"] != 0
        {
            continue;
        }
        let (slba, nlb) = (event["args"]["slba"].as_u64().unwrap_or(0), event["args"]["nlb"].as_u64().unwrap_or(0));
        commands.push((event["ts"].as_f64().unwrap_or(0.0), name, slba, nlb));
    }
    commands.sort_by(|a, b| a.0.total_cmp(&b.0));
    let end_us = commands.last().map_or(0.0, |command| command.0);
    let interval_us = (end_us / intervals as f64).max(1e-3);
    let mut wp = vec![0u64; zones as usize];
    let mut histories: Vec<Option<ZoneHistory>> = vec![None; zones as usize];
    let mut next = commands.iter().peekable();
    for interval in 0..intervals {
        let until = interval_us * (interval + 1) as f64;
        while let Some(&&(ts, name, slba, nlb)) = next.peek() {
            if ts > until && interval + 1 < intervals {
                break;
            }
            next.next();
            let zone = (slba / zone_size_lba).min(zones - 1) as usize;
            let history = histories[zone].get_or_insert_with(|| ZoneHistory {
                zone: zone as u32,
                written_bytes: vec![0; intervals],
                resets: vec![0; intervals],
                bytes_written_total: 0,
            });
            let offset = slba - zone as u64 * zone_size_lba;
            match name {
                "zone reset" => {
                    wp[zone] = 0;
                    history.resets[interval] += 1;
                }
                "zone finish" => wp[zone] = zone_cap_lba,
                "zone append" => {
                    wp[zone] = (wp[zone] + nlb).min(zone_cap_lba);
                    history.bytes_written_total += nlb * lba_bytes;
                }
                _ => {
                    wp[zone] = wp[zone].max(offset + nlb).min(zone_cap_lba);
                    history.bytes_written_total += nlb * lba_bytes;
                }
            }
        }
        for (zone, history) in histories.iter_mut().enumerate() {
            if let Some(history) = history {
                history.written_bytes[interval] = wp[zone] * lba_bytes;
            }
        }
    }
    Ok(ZoneTimeline {
        program,
        interval_ns: (interval_us * 1000.0).round() as u64,
        zone_cap_bytes: zone_cap_lba * lba_bytes,
        zones: histories.into_iter().flatten().collect(),
    })
}

impl ZoneTimeline {
    /// A row per zone and interval: zone, interval start in seconds, written bytes, share of capacity, resets.
    pub fn tsv(&self) -> String {
        let mut out = String::from("zone\tstart_s\twritten_bytes\tfill\tresets\n");
        for history in &self.zones {
            for (interval, (&written, &resets)) in history.written_bytes.iter().zip(&history.resets).enumerate() {
                let start_s = (interval as u64 * self.interval_ns) as f64 / 1e9;
                let fill = written as f64 / self.zone_cap_bytes.max(1) as f64;
                out += &format!("{}\t{start_s:.6}\t{written}\t{fill:.4}\t{resets}\n", history.zone);
            }
        }
        out
    }

    /// The picture: a strip per zone, an interval per column, darker as the zone fills, a red mark where it was
    /// reset.
    pub fn draw(&self, path: &Path) -> Result<(), String> {
        let rows: Vec<TimelineRow> = self
            .zones
            .iter()
            .map(|history| TimelineRow {
                label: format!("zone {}", history.zone),
                fill: history
                    .written_bytes
                    .iter()
                    .map(|&bytes| bytes as f64 / self.zone_cap_bytes.max(1) as f64)
                    .collect(),
                resets: history.resets.clone(),
            })
            .collect();
        let span_s =
            (self.interval_ns * self.zones.first().map_or(0, |zone| zone.written_bytes.len()) as u64) as f64 / 1e9;
        let title = format!("{}: zones over {span_s:.3} s of device time (share written; red: reset)", self.program);
        plot_zone_timeline(path, &title, span_s, &rows)
    }
}
