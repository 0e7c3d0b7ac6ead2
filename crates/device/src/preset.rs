//! Device presets: a namespace, a flash model and host-path costs in one TOML document. The presets in
//! `presets/` are compiled in; a user may also give a TOML file, and override single fields (`key.path=value`).

use serde::{Deserialize, Serialize};
use zonelab_media::{MediaConfig, MediaConfigError};
use zonelab_zns::{toml_decode, ConfigError, NamespaceConfig};

use crate::{ConventionalNamespaceConfig, HostPath};

/// The compiled-in presets, by name: every TOML file of `presets/` (the build script lists them).
pub const PRESETS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/presets.rs"));

/// Per-command cost of one host path, on the host's side of the device: the time it adds to a command's
/// latency on each side, and how much of that is CPU time on the submitting thread's core. They differ where a
/// path waits without working (an interrupt's delivery, a sleeping thread's wake-up) or where batching shares a
/// system call among many commands.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct HostCost {
    pub submit_us: f64,
    pub complete_us: f64,
    /// CPU time of the submission; all of `submit_us` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_cpu_us: Option<f64>,
    /// CPU time of the completion; all of `complete_us` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_cpu_us: Option<f64>,
}

impl HostCost {
    /// CPU time of the submission and of the completion, in microseconds.
    pub fn cpu_us(&self) -> (f64, f64) {
        (self.submit_cpu_us.unwrap_or(self.submit_us), self.complete_cpu_us.unwrap_or(self.complete_us))
    }

    /// Refuses negative or non-finite times, and CPU time longer than the latency it is part of.
    fn validate(&self) -> Result<(), String> {
        let (submit_cpu, complete_cpu) = self.cpu_us();
        let times = [
            ("submit-us", self.submit_us),
            ("complete-us", self.complete_us),
            ("submit-cpu-us", submit_cpu),
            ("complete-cpu-us", complete_cpu),
        ];
        if let Some((name, value)) = times.iter().find(|(_, value)| !value.is_finite() || *value < 0.0) {
            return Err(format!("{name} = {value} must be a finite time of at least 0"));
        }
        if submit_cpu > self.submit_us || complete_cpu > self.complete_us {
            return Err(format!(
                "CPU time ({submit_cpu} + {complete_cpu} us) cannot exceed the latency it is part of ({} + {} us)",
                self.submit_us, self.complete_us
            ));
        }
        Ok(())
    }
}

/// The four host paths' costs, and what the block layer's mq-deadline adds to them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct HostCosts {
    /// CPU per command that mq-deadline (and ZINC, built on it) adds on the submitting thread, on the paths
    /// through the block layer: its lock, sort and merge, and dispatch; `none` adds nothing.
    #[serde(default)]
    pub mq_deadline_us: f64,
    /// How long a request waits for the kblockd worker that dispatches it when Linux defers the dispatch: a
    /// request that a scheduler (mq-deadline, ZINC) takes without a plug goes into it and the hardware queue runs
    /// asynchronously (`blk_mq_submit_bio`), and a plug flushed because its task sleeps, as psync's writes do,
    /// runs the queue asynchronously under any scheduler. It occupies no core of the submitter. It applies to the
    /// kernel path (psync, libaio); io_uring's latency, measured through the block layer, already holds it.
    #[serde(default)]
    pub kblockd_dispatch_us: f64,
    /// Cores the host's polling threads (which never sleep: SPDK's, io_uring's with `hipri` or `sqthread_poll`)
    /// run on. With more such threads than cores they take turns of `time-slice-ms` (`CoreShare`). 0: each
    /// thread has a core of its own.
    #[serde(default)]
    pub cores: u32,
    /// How long a polling thread keeps a core before a waiting one takes it, when they share.
    #[serde(default)]
    pub time_slice_ms: f64,
    pub spdk: HostCost,
    pub io_uring: HostCost,
    pub io_uring_cmd: HostCost,
    pub kernel: HostCost,
}

impl HostCosts {
    /// The cost of one host path.
    pub fn for_path(&self, host: crate::HostPath) -> HostCost {
        match host {
            crate::HostPath::Spdk => self.spdk,
            crate::HostPath::IoUring => self.io_uring,
            crate::HostPath::IoUringCmd => self.io_uring_cmd,
            crate::HostPath::Kernel => self.kernel,
        }
    }

    /// How `threads` threads share the host's cores: None unless they poll (`polling`) and outnumber the cores.
    pub fn core_share(&self, polling: bool, threads: u32) -> Option<crate::CoreShare> {
        let slice_ns = (self.time_slice_ms * 1e6).round() as u64;
        crate::CoreShare::new(threads, self.cores, slice_ns).filter(|_| polling)
    }

    fn validate(&self) -> Result<(), PresetError> {
        let times = [
            ("mq-deadline-us", self.mq_deadline_us),
            ("kblockd-dispatch-us", self.kblockd_dispatch_us),
            ("time-slice-ms", self.time_slice_ms),
        ];
        for (name, time) in times {
            if !time.is_finite() || time < 0.0 {
                let reason = format!("{name} = {time} must be a finite time of at least 0");
                return Err(PresetError::Host { path: "host".to_string(), reason });
            }
        }
        if self.cores > 0 && self.time_slice_ms <= 0.0 {
            let reason = format!("cores = {} needs a time-slice-ms above 0 for threads to take turns", self.cores);
            return Err(PresetError::Host { path: "host".to_string(), reason });
        }
        for path in crate::HostPath::ALL {
            self.for_path(path).validate().map_err(|reason| PresetError::Host {
                path: format!("host.{}", path.name().replace('_', "-")),
                reason,
            })?;
        }
        Ok(())
    }
}

/// A whole device: what a preset file holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DeviceConfig {
    pub name: String,
    pub description: String,
    /// Acknowledged writes survive a power loss (capacitors flush the write buffer).
    pub power_loss_protection: bool,
    /// The zoned namespace's ID. Default 1; 0 for a device with no zoned namespace (a conventional SSD), whose
    /// `[conventional]` table is then its one namespace and which takes no `[namespace]` table.
    #[serde(default = "first_nsid")]
    pub zoned_nsid: u32,
    /// The zoned namespace. On a device without one, the shape the flash model lays its physical zones out
    /// by: one zone of one superblock (`DeviceConfig::superblock_namespace`), which no host reaches.
    #[serde(default)]
    pub namespace: NamespaceConfig,
    /// A conventional namespace beside the zoned one, sharing its dies; none when the table is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conventional: Option<ConventionalNamespaceConfig>,
    pub media: MediaConfig,
    pub host: HostCosts,
    /// The measurements `zonelab calibrate` replays for this device, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationReferences>,
}

/// The measurements a preset is calibrated against: CSV files of `reference/`, by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CalibrationReferences {
    /// fio points (operation, request size, zones, queue depth: IOPS, latencies).
    pub grid: String,
    /// Zone-management latencies by zone occupancy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_management: Option<String>,
    /// The host path the measurements went through.
    pub host: HostPath,
}

fn preset_names() -> String {
    PRESETS.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

fn first_nsid() -> u32 {
    1
}

/// Why a device configuration was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PresetError {
    #[error("unknown preset {0:?}: the presets are {names} (or give a .toml file)", names = preset_names())]
    Unknown(String),
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("override {0:?} is not of the form key.path=value")]
    OverrideSyntax(String),
    #[error("override {key:?}: {reason}")]
    Override { key: String, reason: String },
    #[error("{path}: {reason}")]
    Host { path: String, reason: String },
    #[error(transparent)]
    Namespace(#[from] ConfigError),
    #[error(transparent)]
    Media(#[from] MediaConfigError),
}

/// Sets one field of a TOML document by its dotted path; the value is parsed as TOML (`4`, `true`, `"2GiB"`),
/// or taken as a string when it does not parse. The field's section must exist; a field the document leaves out
/// (an optional one) may be added, and the schema refuses a name it does not know when the document is decoded.
pub fn apply_override(document: &mut toml::Table, assignment: &str) -> Result<(), PresetError> {
    let (key, raw) = assignment.split_once('=').ok_or_else(|| PresetError::OverrideSyntax(assignment.to_string()))?;
    let key = key.trim();
    let value = toml::from_str::<toml::Table>(&format!("v = {}", raw.trim()))
        .ok()
        .and_then(|mut table| table.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let refuse = |reason: &str| PresetError::Override { key: key.to_string(), reason: reason.to_string() };
    let mut parts = key.split('.').peekable();
    let mut table = document;
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            table.insert(part.to_string(), value);
            return Ok(());
        }
        table = table.get_mut(part).and_then(toml::Value::as_table_mut).ok_or_else(|| refuse("no such section"))?;
    }
    Err(refuse("empty key"))
}

impl DeviceConfig {
    /// The namespace a host reaches when it names none: the zoned one, or the conventional one of a device
    /// without it.
    pub fn default_nsid(&self) -> u32 {
        match (self.zoned_nsid, &self.conventional) {
            (0, Some(cnv)) => cnv.nsid,
            (zoned, _) => zoned,
        }
    }

    /// A compiled-in preset by name, or a TOML file by path (anything ending in `.toml`), with overrides.
    pub fn load(name_or_path: &str, overrides: &[String]) -> Result<DeviceConfig, PresetError> {
        let (origin, text) = match PRESETS.iter().find(|(name, _)| *name == name_or_path) {
            Some((name, text)) => (format!("preset {name}"), text.to_string()),
            None if name_or_path.ends_with(".toml") => {
                let text = std::fs::read_to_string(name_or_path).map_err(|error| PresetError::Parse {
                    origin: name_or_path.to_string(),
                    message: error.to_string(),
                })?;
                (name_or_path.to_string(), text)
            }
            None => return Err(PresetError::Unknown(name_or_path.to_string())),
        };
        DeviceConfig::parse(&origin, &text, overrides)
    }

    /// Parses a device document, applies overrides and validates the result.
    pub fn parse(origin: &str, text: &str, overrides: &[String]) -> Result<DeviceConfig, PresetError> {
        let parse_error = |message: String| PresetError::Parse { origin: origin.to_string(), message };
        let mut document: toml::Table = toml_decode::decode(text).map_err(parse_error)?;
        for assignment in overrides {
            apply_override(&mut document, assignment)?;
        }
        let mut config: DeviceConfig = toml_decode::decode_table(document).map_err(parse_error)?;
        config.media.validate()?;
        if config.zoned_nsid == 0 {
            let refuse = |reason: &str| PresetError::Namespace(ConfigError::new("zoned-nsid", reason.to_string()));
            if config.conventional.is_none() {
                return Err(refuse("0 (no zoned namespace) needs a [conventional] table: a device has a namespace"));
            }
            let shape = DeviceConfig::superblock_namespace(&config.media);
            if config.namespace != NamespaceConfig::default() && config.namespace != shape {
                return Err(refuse("0 (no zoned namespace) takes no [namespace] table or namespace fields"));
            }
            config.namespace = shape;
        }
        config.namespace.validate()?;
        if let Some(conventional) = &config.conventional {
            conventional.validate(&config.media)?;
            if conventional.nsid == config.zoned_nsid {
                let reason = format!("{} is the zoned namespace's ID too", conventional.nsid);
                return Err(PresetError::Namespace(ConfigError::new("conventional.nsid", reason)));
            }
        }
        config.host.validate()?;
        Ok(config)
    }

    /// The namespace a device without a zoned one lays its flash out by: one zone of one superblock (a block on
    /// each plane a zone stripes over), so that a conventional namespace's FTL blocks are one physical zone
    /// each.
    pub fn superblock_namespace(media: &MediaConfig) -> NamespaceConfig {
        let row_bytes = u64::from(media.planes_per_zone())
            * u64::from(media.nand.block_program_units)
            * media.nand.program_unit_bytes;
        NamespaceConfig {
            zones: 1,
            zone_size: zonelab_zns::ByteSize(row_bytes.next_power_of_two()),
            zone_cap: zonelab_zns::ByteSize(row_bytes),
            ..NamespaceConfig::default()
        }
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a device configuration always serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_loads() {
        for (name, _) in PRESETS {
            let config = DeviceConfig::load(name, &[]).unwrap_or_else(|error| panic!("{name}: {error}"));
            assert_eq!(&config.name, name);
        }
    }

    #[test]
    fn overrides_set_fields_the_schema_knows() {
        let config = DeviceConfig::load("zn540", &["namespace.zones=64".into(), "media.nand.channels=16".into()])
            .expect("overridden");
        assert_eq!((config.namespace.zones, config.media.nand.channels), (64, 16));
        let error = DeviceConfig::load("zn540", &["namespace.zonez=64".into()]).expect_err("unknown field");
        assert!(error.to_string().contains("namespace.zonez: unknown field"), "{error}");
        let error = DeviceConfig::load("zn540", &["namespaze.zones=64".into()]).expect_err("unknown section");
        assert!(error.to_string().contains("no such section"), "{error}");
        let config = DeviceConfig::load("instant", &["host.kernel.submit-cpu-us=0".into()]).expect("optional field");
        assert_eq!(config.host.kernel.submit_cpu_us, Some(0.0));
        let error = DeviceConfig::load("zn540", &["media.nand.channels-per-zone=99".into()]).expect_err("invalid");
        assert!(error.to_string().contains("channels-per-zone"), "{error}");
        let error = DeviceConfig::load("zn540", &["media.nand.read-page-factors=[1.0, 0.0]".into()]).expect_err("zero");
        assert!(error.to_string().contains("read-page-factors"), "{error}");
        let error = DeviceConfig::load("zn540", &["media.controller.command-time-cv=1.5".into()]).expect_err("cv > 1");
        assert!(error.to_string().contains("command-time-cv"), "{error}");
        assert!(DeviceConfig::load("zn999", &[]).is_err());
    }

    #[test]
    fn a_host_paths_cpu_time_is_part_of_its_latency() {
        let config = DeviceConfig::load("zn540", &[]).expect("zn540");
        let io_uring = config.host.io_uring;
        let (submit_cpu, complete_cpu) = io_uring.cpu_us();
        assert!(submit_cpu < io_uring.submit_us && complete_cpu < io_uring.complete_us, "{io_uring:?}");
        let kernel = config.host.kernel;
        assert_eq!(kernel.cpu_us(), (kernel.submit_us, kernel.complete_us), "no CPU given: all of the latency");
        let error =
            DeviceConfig::load("zn540", &["host.io-uring.submit-cpu-us=9.0".into()]).expect_err("more CPU than time");
        assert!(error.to_string().contains("host.io-uring") && error.to_string().contains("cannot exceed"), "{error}");
        let error = DeviceConfig::load("zn540", &["host.kernel.complete-us=-1.0".into()]).expect_err("negative");
        assert!(error.to_string().contains("host.kernel: complete-us = -1"), "{error}");
    }

    #[test]
    fn polling_threads_share_the_cores_a_preset_gives_them() {
        let config = DeviceConfig::load("zn540", &[]).expect("zn540");
        assert!(config.host.core_share(true, 10).is_none(), "10 polling threads on 10 cores: a core each");
        assert!(config.host.core_share(true, 14).is_some(), "14 take turns");
        assert!(config.host.core_share(false, 14).is_none(), "sleeping threads take no turns");
        let error = DeviceConfig::load("zn540", &["host.time-slice-ms=0".into()]).expect_err("cores without turns");
        assert!(error.to_string().contains("time-slice-ms"), "{error}");
        let none = DeviceConfig::load("zn540", &["host.cores=0".into(), "host.time-slice-ms=0".into()]).expect("off");
        assert!(none.host.core_share(true, 64).is_none(), "no core count: a core each");
    }
}
