//! `zonelab._native`: the Rust side of the `zonelab` Python package (`python/zonelab/__init__.py` is the API
//! users see). Each function runs in virtual time in the calling process and releases the interpreter while it
//! runs, so Python threads (and Dask's workers) run points on every core. Results that are documents (fio's JSON,
//! zone reports) cross as JSON text; tables cross as lists of strings, typed on the Python side.

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use zonelab_device::{Device as Controller, DeviceBuilder, DeviceSpec, StoreChoice};
use zonelab_experiments::experiment;
use zonelab_experiments::sweep::{self, Grid};
use zonelab_fio::{parse_invocation, run as run_fio, to_json};
use zonelab_zns::{Command, Completion, MediaStore, NamespaceKind, Status, ZoneSendAction, WP_INVALID};

create_exception!(_native, ZonelabError, PyException, "A usage or configuration error, named as the CLI names it.");
create_exception!(
    _native,
    DeviceError,
    ZonelabError,
    "The device refused a command: `args` holds the NVMe status code and its name."
);

fn usage(error: impl std::fmt::Display) -> PyErr {
    ZonelabError::new_err(error.to_string())
}

fn refused(status: Status) -> PyErr {
    DeviceError::new_err((status.code(), status.to_string()))
}

/// Runs one fio invocation (`zonelab fio`'s arguments) in virtual time; returns fio's JSON document.
#[pyfunction]
fn fio(py: Python<'_>, args: Vec<String>) -> PyResult<String> {
    py.detach(|| {
        let invocation =
            parse_invocation(&args, |path| std::fs::read_to_string(path).map_err(|error| error.to_string()))
                .map_err(|error| error.to_string())?;
        let result = run_fio(&invocation, 1).map_err(|error| error.to_string())?;
        Ok(to_json(&result, false).to_string())
    })
    .map_err(|error: String| usage(error))
}

/// A grid's axes and points (key, axis values, seed, fio arguments), from its TOML text.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn grid_points(text: &str) -> PyResult<(Vec<String>, Vec<(String, Vec<String>, u64, Vec<String>)>)> {
    let grid = Grid::parse(text, "the grid").map_err(usage)?;
    let points = grid.points().into_iter().map(|point| (point.key, point.values, point.seed, point.args)).collect();
    Ok((grid.axis_names(), points))
}

/// The measures each row of a sweep carries after the point's key, axes and seed.
#[pyfunction]
fn measures() -> Vec<&'static str> {
    sweep::MEASURES.to_vec()
}

/// Runs one point of a sweep: whether it ran, and its rows of `measures()` (one with the error if it failed).
#[pyfunction]
fn run_point(py: Python<'_>, args: Vec<String>, seed: u64) -> (bool, Vec<Vec<String>>) {
    py.detach(|| match sweep::point_rows(&args, seed, None) {
        Ok(rows) => (true, rows),
        Err(rows) => (false, rows),
    })
}

/// Every experiment's id and title.
#[pyfunction]
fn experiments() -> Vec<(String, String)> {
    experiment::experiments().into_iter().map(|experiment| (experiment.id, experiment.title)).collect()
}

/// Runs experiment `id` into directory `out` (its report, results.json and plots), `jobs` virtual-time runs at a
/// time.
#[pyfunction]
fn run_experiment(py: Python<'_>, id: String, quick: bool, out: PathBuf, jobs: usize) -> PyResult<()> {
    py.detach(|| experiment::run(&id, quick, &out, jobs.max(1)).map(drop).map_err(|error| error.to_string()))
        .map_err(|error: String| usage(error))
}

/// A device in virtual time, driven one command at a time: each command arrives when the previous one
/// completed, and returns what it took.
#[pyclass(unsendable)]
struct Device {
    device: Controller<Box<dyn MediaStore>>,
    now_ns: u64,
}

impl Device {
    /// Runs `command` at the device's current time and moves the clock to its completion.
    fn submit(&mut self, command: Command<'_>) -> PyResult<(Completion, u64)> {
        let submitted = self.device.submit(self.now_ns, command);
        let took = submitted.complete_ns.saturating_sub(self.now_ns);
        self.now_ns = self.now_ns.max(submitted.complete_ns);
        submitted.result.map(|completion| (completion, took)).map_err(refused)
    }

    fn zone_lba(&self, zone: u32) -> PyResult<u64> {
        let geometry = self.device.geometry();
        if zone >= geometry.zones {
            return Err(usage(format!("zone {zone} does not exist: the namespace has {} zones", geometry.zones)));
        }
        Ok(geometry.zone_start_lba(zone))
    }
}

#[pymethods]
impl Device {
    /// Opens the device a spec names (`preset:NAME[,key=value...]`, kept in memory unless it says store=null, or
    /// an image's directory).
    #[new]
    fn new(spec: &str) -> PyResult<Device> {
        let built = DeviceBuilder::new(DeviceSpec::parse(spec)).store(StoreChoice::Memory).build().map_err(usage)?;
        Ok(Device { device: built.device, now_ns: 0 })
    }

    /// The attached namespace's geometry as JSON.
    fn geometry_json(&self) -> String {
        let geometry = self.device.geometry();
        serde_json::json!({
            "lba_size": geometry.lba_size,
            "zones": geometry.zones,
            "zone_size_lba": geometry.zone_size_lba,
            "zone_cap_lba": geometry.zone_cap_lba,
            "nsze_lba": geometry.nsze_lba,
            "max_open": geometry.max_open,
            "max_active": geometry.max_active,
        })
        .to_string()
    }

    /// The device's virtual time, in nanoseconds.
    #[getter]
    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Writes `data` at `lba`; returns the nanoseconds it took.
    fn write(&mut self, lba: u64, data: &[u8]) -> PyResult<u64> {
        self.submit(Command::Write { slba: lba, data }).map(|(_, took)| took)
    }

    /// Appends `data` to zone `zone`; returns the LBA it landed at and the nanoseconds it took.
    fn append(&mut self, zone: u32, data: &[u8]) -> PyResult<(u64, u64)> {
        let zslba = self.zone_lba(zone)?;
        match self.submit(Command::Append { zslba, data })? {
            (Completion::Appended { lba }, took) => Ok((lba, took)),
            _ => Err(usage("the device completed the append without an LBA")),
        }
    }

    /// Reads `blocks` blocks at `lba`; returns the bytes and the nanoseconds it took.
    fn read<'py>(&mut self, py: Python<'py>, lba: u64, blocks: u64) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        let bytes = blocks
            .checked_mul(u64::from(self.device.geometry().lba_size))
            .filter(|&bytes| bytes <= 1 << 32)
            .ok_or_else(|| usage(format!("{blocks} blocks are more than one command can carry")))?;
        let mut buf = vec![0u8; bytes as usize];
        let (_, took) = self.submit(Command::Read { slba: lba, buf: &mut buf })?;
        Ok((PyBytes::new(py, &buf), took))
    }

    /// A zone action (open, close, finish, reset, offline) on zone `zone`, or on every zone with `None`;
    /// returns the nanoseconds it took.
    #[pyo3(signature = (action, zone=None))]
    fn zone_action(&mut self, action: &str, zone: Option<u32>) -> PyResult<u64> {
        let action = match action {
            "open" => ZoneSendAction::Open,
            "close" => ZoneSendAction::Close,
            "finish" => ZoneSendAction::Finish,
            "reset" => ZoneSendAction::Reset,
            "offline" => ZoneSendAction::Offline,
            other => return Err(usage(format!("'{other}' is no zone action: open, close, finish, reset, offline"))),
        };
        let slba = match zone {
            Some(zone) => self.zone_lba(zone)?,
            None => 0,
        };
        self.submit(Command::ZoneManagementSend { slba, action, select_all: zone.is_none() }).map(|(_, took)| took)
    }

    /// Every zone's state, write pointer and capacity, as JSON (what a zone report gives). A conventional
    /// namespace has no zones: it refuses Zone Management Receive, as a drive does (Invalid Command Opcode).
    fn report_json(&self) -> PyResult<String> {
        if self.device.geometry().kind == NamespaceKind::Conventional {
            return Err(refused(Status::InvalidOpcode));
        }
        let namespace = self.device.namespace();
        let zones: Vec<serde_json::Value> = (0..namespace.geometry().zones)
            .map(|zone| {
                let zone = namespace.zone(zone);
                serde_json::json!({
                    "zone": zone.index,
                    "state": zone.state.to_string(),
                    "start_lba": zone.start_lba,
                    "wp_lba": (zone.wp_lba != WP_INVALID).then_some(zone.wp_lba),
                    "capacity_lba": zone.capacity_lba,
                })
            })
            .collect();
        Ok(serde_json::Value::Array(zones).to_string())
    }
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("ZonelabError", module.py().get_type::<ZonelabError>())?;
    module.add("DeviceError", module.py().get_type::<DeviceError>())?;
    module.add("VERSION", zonelab_fio::ZONELAB_VERSION)?;
    module.add_function(wrap_pyfunction!(fio, module)?)?;
    module.add_function(wrap_pyfunction!(grid_points, module)?)?;
    module.add_function(wrap_pyfunction!(measures, module)?)?;
    module.add_function(wrap_pyfunction!(run_point, module)?)?;
    module.add_function(wrap_pyfunction!(experiments, module)?)?;
    module.add_function(wrap_pyfunction!(run_experiment, module)?)?;
    module.add_class::<Device>()?;
    Ok(())
}
