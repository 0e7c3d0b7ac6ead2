//! # zonelab-experiments: the papers' figures
//!
//! Layer 6 of `docs/design.md`, over the fio engine (`zonelab-fio`) and the benchmarks (`zonelab-bench`): each
//! experiment of `experiments/` run with its report, plots and judged claims, sweeps over a grid of fio jobs, and
//! the calibration of a preset against the reference measurements in `reference/`.

pub mod calibrate;
pub mod experiment;
pub mod sweep;
