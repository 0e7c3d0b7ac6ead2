//! Calibration: replay reference measurements on a preset in virtual time and report model against
//! measurement, point by point, with the error distribution.

use serde::Serialize;
use zonelab_device::{Built, DeviceBuilder, DeviceConfig, DeviceSpec, HostPath};
use zonelab_runtime::{CommandQueue, HostExt, Simulation};
use zonelab_zns::{MediaStore, Status, ZoneSendAction};

use zonelab_bench::{run_closed_loop, LoopSpec, Operation};

/// The measurements of `reference/`, compiled in by file name (the build script lists them).
const REFERENCES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/references.rs"));

/// The text of reference file `name`.
fn reference(name: &str) -> Result<(&'static str, &'static str), CalibrationError> {
    REFERENCES
        .iter()
        .find(|(file, _)| *file == name)
        .copied()
        .ok_or_else(|| CalibrationError::NoSuchReference(name.to_string()))
}

/// One measured point and the model's figure for it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    pub op: String,
    pub bs_bytes: u64,
    pub zones: u32,
    pub qd: u32,
    pub measured_iops: f64,
    pub model_iops: f64,
    pub iops_err_pct: f64,
    pub measured_lat_us: Option<f64>,
    pub model_lat_us: f64,
    pub lat_err_pct: Option<f64>,
    /// The 99th-percentile completion latency of the slowest job, measured and modelled.
    pub measured_p99_us: Option<f64>,
    pub model_p99_us: f64,
    pub p99_err_pct: Option<f64>,
}

/// One zone-management latency and the model's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ManagementPoint {
    pub op: String,
    pub occupancy: String,
    pub measured_ms: f64,
    pub model_ms: f64,
    pub err_pct: f64,
}

/// Median, 90th percentile and mean of the absolute errors (the mean is what the constants that spread the
/// model's times were chosen to minimise: presets/zn540.toml).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub iops_err_pct_median: f64,
    pub iops_err_pct_p90: f64,
    pub iops_err_pct_mean: f64,
    pub lat_err_pct_median: f64,
    pub lat_err_pct_p90: f64,
    pub lat_err_pct_mean: f64,
    pub p99_err_pct_median: f64,
    pub p99_err_pct_p90: f64,
    pub p99_err_pct_mean: f64,
    pub management_err_pct_max: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Calibration {
    pub preset: String,
    pub host_path: String,
    pub points: Vec<Point>,
    pub management: Vec<ManagementPoint>,
    pub summary: Summary,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrationError {
    #[error("preset {0:?} names no reference measurements (a [calibration] table): calibrate zn540 or confzns-zwal")]
    NoReference(String),
    #[error("no reference file {0:?} in reference/")]
    NoSuchReference(String),
    #[error("the reference file {file} is malformed at line {line}: {reason}")]
    Reference { file: &'static str, line: usize, reason: String },
    #[error("the model failed a command while replaying {what}: {status}")]
    Device { what: String, status: Status },
}

struct GridRow {
    op: Operation,
    bs_bytes: u64,
    zones: u32,
    qd: u32,
    iops: f64,
    lat_us: Option<f64>,
    p99_us: Option<f64>,
}

fn parse_grid(file: &'static str, text: &str) -> Result<Vec<GridRow>, CalibrationError> {
    text.lines()
        .enumerate()
        .skip(1)
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            let bad = |reason: &str| CalibrationError::Reference { file, line: index + 1, reason: reason.to_string() };
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() < 7 {
                return Err(bad("fewer than 7 fields"));
            }
            let op = match fields[0] {
                "write" => Operation::Write,
                "append" => Operation::Append,
                "randread" => Operation::RandRead,
                _ => return Err(bad("unknown operation")),
            };
            let number = |i: usize| fields[i].trim().parse::<f64>().map_err(|_| bad("a field is not a number"));
            Ok(GridRow {
                op,
                bs_bytes: number(1)? as u64,
                zones: number(2)? as u32,
                qd: number(3)? as u32,
                iops: number(4)?,
                lat_us: if fields[6].trim().is_empty() { None } else { Some(number(6)?) },
                p99_us: match fields.get(7).map(|field| field.trim()) {
                    None | Some("") => None,
                    Some(_) => Some(number(7)?),
                },
            })
        })
        .collect()
}

fn error_pct(model: f64, measured: f64) -> f64 {
    (model - measured) / measured * 100.0
}

fn percentile(values: &mut [f64], fraction: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = (fraction * (values.len() - 1) as f64).round() as usize;
    values[rank]
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

fn fresh_device(config: &DeviceConfig, host: HostPath) -> Built {
    DeviceBuilder::new(DeviceSpec::Config(Box::new(config.clone())))
        .host(host)
        .build()
        .expect("a validated preset builds a device")
}

/// Replays one grid row in a fresh simulation. `scale` multiplies the number of measured operations.
fn replay(config: &DeviceConfig, host: HostPath, row: &GridRow, scale: f64) -> Result<Point, CalibrationError> {
    let mut built = fresh_device(config, host);
    let device = &mut built.device;
    let geometry = *device.namespace().geometry();
    let zone_cap_bytes = geometry.zone_cap_lba << geometry.lba_shift;
    let jobs = u64::from(row.zones * row.qd);
    let what = format!("{} {} B, {} zones, QD {}", row.op.name(), row.bs_bytes, row.zones, row.qd);
    let device_error = |status| CalibrationError::Device { what: what.clone(), status };
    let mut operations = (20_000.0 * scale) as u64;
    if row.op == Operation::RandRead {
        for zone in 0..row.zones {
            device.precondition(zone, zone_cap_bytes).map_err(device_error)?;
        }
    } else {
        let fit = u64::from(row.zones) * (zone_cap_bytes / row.bs_bytes) * 9 / 10;
        operations = operations.min(fit);
    }
    let warmup = (operations / 10).max(jobs * 4).min(operations / 2);
    let spec = LoopSpec {
        operation: row.op,
        bs_bytes: row.bs_bytes,
        zones: row.zones,
        qd_per_zone: row.qd,
        warmup,
        measured: operations - warmup,
        seed: 1,
    };
    // The grid ran one fio job, one thread, per zone.
    let cores = config.host.core_share(host.polls(), row.zones);
    let mut simulation = Simulation::over(built, None);
    let stats = run_closed_loop(&mut simulation, &spec, cores).map_err(device_error)?;
    let model_lat_us = stats.mean_latency_ns / 1000.0;
    let model_p99_us = stats.p99_latency_ns_max_zone as f64 / 1000.0;
    Ok(Point {
        op: row.op.name().to_string(),
        bs_bytes: row.bs_bytes,
        zones: row.zones,
        qd: row.qd,
        measured_iops: row.iops,
        model_iops: stats.iops,
        iops_err_pct: error_pct(stats.iops, row.iops),
        measured_lat_us: row.lat_us,
        model_lat_us,
        lat_err_pct: row.lat_us.map(|measured| error_pct(model_lat_us, measured)),
        measured_p99_us: row.p99_us,
        model_p99_us,
        p99_err_pct: row.p99_us.map(|measured| error_pct(model_p99_us, measured)),
    })
}

/// Bytes of a zone an occupancy label stands for.
fn occupancy_bytes(label: &str, zone_cap_bytes: u64, lba_bytes: u64) -> Option<u64> {
    Some(match label {
        "empty" => 0,
        "1lba" => lba_bytes,
        "full-1lba" => zone_cap_bytes - lba_bytes,
        percent => {
            let fraction: f64 = percent.strip_suffix('%')?.parse().ok()?;
            ((zone_cap_bytes as f64 * fraction / 100.0) as u64 / lba_bytes) * lba_bytes
        }
    })
}

/// Latency of one zone-management command on a fresh, idle device whose zone 0 holds `occupancy`.
fn management_latency(
    config: &DeviceConfig,
    host: HostPath,
    op: &str,
    occupancy: &str,
) -> Result<f64, CalibrationError> {
    let mut built = fresh_device(config, host);
    let device = &mut built.device;
    let geometry = *device.namespace().geometry();
    let lba_bytes = u64::from(geometry.lba_size);
    let bad = |reason: &str| CalibrationError::Reference {
        file: "zn540_zone_management.csv",
        line: 0,
        reason: reason.to_string(),
    };
    let bytes = occupancy_bytes(occupancy, geometry.zone_cap_lba * lba_bytes, lba_bytes)
        .ok_or_else(|| bad("unknown occupancy"))?;
    let what = format!("{op} at {occupancy}");
    let device_error = |status| CalibrationError::Device { what: what.clone(), status };
    device.precondition(0, bytes).map_err(device_error)?;
    let mut simulation = Simulation::over(built, None);
    let host_handle = simulation.host();
    let op = op.to_string();
    let outcome = std::rc::Rc::new(std::cell::Cell::new(Err(Status::InvalidOpcode)));
    let result = std::rc::Rc::clone(&outcome);
    simulation.spawn(async move {
        let idle = |h: &zonelab_runtime::Host<Box<dyn MediaStore>>| h.with_device(|device| device.media().busy_until());
        let send = |action| host_handle.zone_send(0, action, false);
        let measured = async {
            if op == "reset-after-finish" {
                send(ZoneSendAction::Finish).await?;
            }
            let wait = idle(&host_handle).saturating_sub(host_handle.now_ns());
            host_handle.sleep(wait).await;
            let start = host_handle.now_ns();
            match op.as_str() {
                "reset" | "reset-after-finish" => send(ZoneSendAction::Reset).await?,
                "finish" => send(ZoneSendAction::Finish).await?,
                "open" => send(ZoneSendAction::Open).await?,
                "close" if bytes == 0 => {
                    send(ZoneSendAction::Open).await?;
                    let reopened = host_handle.now_ns();
                    send(ZoneSendAction::Close).await?;
                    return Ok(host_handle.now_ns() - reopened);
                }
                "close" => send(ZoneSendAction::Close).await?,
                _ => return Err(Status::InvalidOpcode),
            }
            Ok(host_handle.now_ns() - start)
        };
        result.set(measured.await);
    });
    simulation.run();
    outcome.get().map(|ns| ns as f64 / 1e6).map_err(device_error)
}

/// Calibrates a preset against its reference measurements. `scale` multiplies the operations simulated per
/// point (1.0 for the full run; smaller for a quick check; the model is deterministic either way).
pub fn calibrate(config: &DeviceConfig, scale: f64) -> Result<Calibration, CalibrationError> {
    let references = config.calibration.as_ref().ok_or_else(|| CalibrationError::NoReference(config.name.clone()))?;
    let (grid_file, grid_text) = reference(&references.grid)?;
    let grid = parse_grid(grid_file, grid_text)?;
    let management = references.zone_management.as_deref().map(reference).transpose()?;
    let host = references.host;
    let points = grid.iter().map(|row| replay(config, host, row, scale)).collect::<Result<Vec<_>, _>>()?;
    let management = match management {
        Some((file, text)) => {
            text.lines()
                .enumerate()
                .skip(1)
                .filter(|(_, line)| !line.trim().is_empty())
                .map(|(index, line)| {
                    let fields: Vec<&str> = line.split(',').collect();
                    let measured_ms: f64 = fields.get(2).and_then(|field| field.parse().ok()).ok_or_else(|| {
                        CalibrationError::Reference { file, line: index + 1, reason: line.to_string() }
                    })?;
                    let model_ms = management_latency(config, host, fields[0], fields[1])?;
                    Ok(ManagementPoint {
                        op: fields[0].to_string(),
                        occupancy: fields[1].to_string(),
                        measured_ms,
                        model_ms,
                        err_pct: error_pct(model_ms, measured_ms),
                    })
                })
                .collect::<Result<Vec<_>, CalibrationError>>()?
        }
        None => Vec::new(),
    };
    let mut iops_errors: Vec<f64> = points.iter().map(|point| point.iops_err_pct.abs()).collect();
    let mut lat_errors: Vec<f64> = points.iter().filter_map(|point| point.lat_err_pct.map(f64::abs)).collect();
    let mut p99_errors: Vec<f64> = points.iter().filter_map(|point| point.p99_err_pct.map(f64::abs)).collect();
    let summary = Summary {
        iops_err_pct_median: percentile(&mut iops_errors, 0.5),
        iops_err_pct_p90: percentile(&mut iops_errors, 0.9),
        iops_err_pct_mean: mean(&iops_errors),
        lat_err_pct_median: percentile(&mut lat_errors, 0.5),
        lat_err_pct_p90: percentile(&mut lat_errors, 0.9),
        lat_err_pct_mean: mean(&lat_errors),
        p99_err_pct_median: percentile(&mut p99_errors, 0.5),
        p99_err_pct_p90: percentile(&mut p99_errors, 0.9),
        p99_err_pct_mean: mean(&p99_errors),
        management_err_pct_max: management.iter().map(|point| point.err_pct.abs()).reduce(f64::max),
    };
    Ok(Calibration { preset: config.name.clone(), host_path: host.name().to_string(), points, management, summary })
}
