//! The composition root of a device: every tool (fio, wal-bench, file-churn, bench, calibrate, the C library,
//! the mount) opens its device here, so that a spec is parsed, a configuration merged and validated, and a flash
//! model preconditioned in one place. The steps, in order:
//!
//! 1. **Configuration**: a compiled-in preset or TOML file with `key.path=value` overrides (bare keys are
//!    namespace fields), or the configuration an image was created with: its device model, with the
//!    namespace the image holds.
//! 2. **Store**: `null` or `memory` for a preset, the image's own store (and its exclusive lock) for an image.
//! 3. **Namespace**: fresh, or restored from the image's zone journal.
//! 4. **Flash model**: built from the configuration, given the state an image's last device saved (erase counts,
//!    ReZNS's mapping), then preconditioned from the namespace's zones, so that data an earlier process wrote
//!    reads from programmed flash, not as unwritten pages. A device over an image saves that state when dropped.
//! 5. **Host path**: how the host reaches the device and its per-command cost on either side, which the
//!    runtimes charge (`HostSide`).

use std::path::{Path, PathBuf};

/// The most random passes `precondition=random:N` runs: each writes every page through the FTL (0.2 s a pass
/// for the ZN540's 4 GiB), so that a mistyped N is refused instead of running for hours.
const MAX_PRECONDITION_PASSES: u32 = 64;

use zonelab_media::MediaState;
use zonelab_zns::{FileStore, Image, ImageError, MediaStore, MemoryStore, NullStore, ZonedNamespace};

use crate::{Device, DeviceConfig, HostPath, HostSide, PresetError};

/// Which device: a preset (or TOML file) with overrides, a configuration already in hand, or a device image.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceSpec {
    /// `store`: the spec's own `store=` value, which wins over the builder's choice; `nsid`: the namespace
    /// the host attaches to (`ns=`), the zoned one when not given; `precondition`: the conventional
    /// namespace's steady state (`precondition=`).
    Preset {
        name: String,
        overrides: Vec<String>,
        store: Option<String>,
        nsid: Option<String>,
        precondition: Option<String>,
    },
    Config(Box<DeviceConfig>),
    Image(PathBuf),
    /// An image with options: `PATH[,ns=ID][,precondition=...]`, the namespace the host attaches to and the
    /// conventional namespace's steady state, as for a preset.
    ImageWith {
        path: PathBuf,
        nsid: Option<String>,
        precondition: Option<String>,
    },
}

impl DeviceSpec {
    /// fio's `--filename` and the C library's spec: `preset:NAME[,key=value...]`, or else an image path, with
    /// `,ns=ID` for a namespace of it other than the zoned one and `,precondition=...` for its conventional
    /// namespace's steady state (taken up and kept by the image).
    pub fn parse(text: &str) -> DeviceSpec {
        if let Some(preset) = text.strip_prefix("preset:") {
            return DeviceSpec::preset(preset);
        }
        let (mut path, mut nsid, mut precondition) = (text, None, None);
        while let Some((head, option)) = path.rsplit_once(',') {
            match option.split_once('=') {
                Some(("ns", id)) if nsid.is_none() && !id.is_empty() && !id.contains('/') => nsid = Some(id),
                Some(("precondition", how)) if precondition.is_none() && !how.contains('/') => precondition = Some(how),
                _ => break,
            }
            path = head;
        }
        match (nsid, precondition) {
            (None, None) => DeviceSpec::Image(PathBuf::from(text)),
            (nsid, precondition) => DeviceSpec::ImageWith {
                path: PathBuf::from(path),
                nsid: nsid.map(str::to_string),
                precondition: precondition.map(str::to_string),
            },
        }
    }

    /// The spec without its namespace (`ns=`), and that namespace: specs that differ in it alone name one
    /// device.
    pub fn split_namespace(self) -> (DeviceSpec, Option<String>) {
        match self {
            DeviceSpec::Preset { name, overrides, store, nsid, precondition } => {
                (DeviceSpec::Preset { name, overrides, store, nsid: None, precondition }, nsid)
            }
            DeviceSpec::ImageWith { path, nsid, precondition: None } => (DeviceSpec::Image(path), nsid),
            DeviceSpec::ImageWith { path, nsid, precondition } => {
                (DeviceSpec::ImageWith { path, nsid: None, precondition }, nsid)
            }
            other => (other, None),
        }
    }

    /// `NAME[,key=value...]`, as the tools' `--preset=` takes it: keys as `zonelab create --set` takes them,
    /// and bare keys are namespace fields (`zones=64` is `namespace.zones=64`); `store=null|memory` chooses
    /// where the device keeps its data, over the tool's default; `ns=ID` attaches the host to namespace ID
    /// (`preset:zn540,ns=1` is the ZN540's conventional namespace) instead of the zoned one;
    /// `precondition=sequential|random[:N]` writes the conventional namespace whole before the host starts, in
    /// no time, then N times more at random (1 when N is not given): the steady state the ZNS study reached by
    /// "writing the entire space numerous times".
    pub fn preset(text: &str) -> DeviceSpec {
        let mut parts = text.split(',');
        let name = parts.next().unwrap_or_default().to_string();
        let (mut overrides, mut store, mut nsid, mut precondition) = (Vec::new(), None, None, None);
        for part in parts {
            if let Some(choice) = part.strip_prefix("store=") {
                store = Some(choice.to_string());
            } else if let Some(how) = part.strip_prefix("precondition=") {
                precondition = Some(how.to_string());
            } else if let Some(id) = part.strip_prefix("ns=") {
                nsid = Some(id.to_string());
            } else if part.contains('.') {
                overrides.push(part.to_string());
            } else {
                overrides.push(format!("namespace.{part}"));
            }
        }
        DeviceSpec::Preset { name, overrides, store, nsid, precondition }
    }
}

/// Where a preset device keeps its data (an image keeps its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreChoice {
    /// No data: reads return zeros; for large, fast simulations.
    Null,
    /// Sparse memory: data written is data read.
    Memory,
    /// A sparse temporary file, gone when the device is dropped: data written is data read, held by the
    /// kernel's page cache (written back to disk under memory pressure) rather than the process's own memory,
    /// for a run whose data outgrows what a process should hold (a 1 GiB log recovered).
    TempFile,
}

impl StoreChoice {
    /// A spec's `store=` value.
    fn parse(text: &str) -> Result<StoreChoice, PresetError> {
        match text {
            "null" => Ok(StoreChoice::Null),
            "memory" => Ok(StoreChoice::Memory),
            "temp-file" => Ok(StoreChoice::TempFile),
            other => Err(PresetError::Override {
                key: "store".into(),
                reason: format!(
                    "{other:?} is not null (keep no data), memory (keep it for the run) or temp-file (keep it in a \
                     temporary file for the run)"
                ),
            }),
        }
    }
}

/// Why a device could not be opened; each names the spec.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    #[error("{spec}: {source}")]
    Config { spec: String, source: PresetError },
    #[error("{spec}: {source}")]
    Namespace { spec: String, source: zonelab_zns::ConfigError },
    #[error("{spec}: {source}")]
    Image { spec: String, source: zonelab_zns::ImageError },
    #[error("{spec}: the image's device model is not a valid device: {message}")]
    ImageModel { spec: String, message: String },
    #[error("{spec}: precondition={given}: {reason}")]
    Precondition { spec: String, given: String, reason: String },
    #[error("{spec}: the device has no namespace {nsid} (its namespaces: {ids})")]
    NoSuchNamespace { spec: String, nsid: String, ids: String },
    #[error("{spec}: a temporary file for the data (store=temp-file): {source}")]
    TempFile { spec: String, source: std::io::Error },
    #[error("zone {zone} could not be filled for a reset load: {reason}")]
    FillZone { zone: u32, reason: String },
}

/// An opened device, its configuration, and the host path it is reached through with that path's costs. A
/// device over an image holds the image's lock until it is dropped.
pub struct Built {
    pub device: Device<Box<dyn MediaStore>>,
    pub config: DeviceConfig,
    pub host: HostSide,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built").field("device", &self.device.name()).finish()
    }
}

/// Opens devices: `DeviceBuilder::new(spec).host(path).store(choice).build()`.
#[derive(Clone, Debug)]
pub struct DeviceBuilder {
    spec: DeviceSpec,
    host: HostPath,
    store: StoreChoice,
    full_tail_zones: u32,
}

impl DeviceBuilder {
    /// A builder for `spec`, reached through SPDK with the null store until told otherwise.
    pub fn new(spec: DeviceSpec) -> DeviceBuilder {
        DeviceBuilder { spec, host: HostPath::Spdk, store: StoreChoice::Null, full_tail_zones: 0 }
    }

    /// Preconditions the last `zones` zones full, as written long ago (step 4), for a load that resets full
    /// zones beside the host software on the rest: real time has no time to fill them.
    pub fn full_tail_zones(mut self, zones: u32) -> DeviceBuilder {
        self.full_tail_zones = zones;
        self
    }

    pub fn host(mut self, host: HostPath) -> DeviceBuilder {
        self.host = host;
        self
    }

    pub fn store(mut self, store: StoreChoice) -> DeviceBuilder {
        self.store = store;
        self
    }

    /// Steps 1 to 5 of the module documentation.
    pub fn build(self) -> Result<Built, BuildError> {
        let full_tail_zones = self.full_tail_zones;
        let mut built = self.build_unfilled()?;
        let geometry = *built.device.namespace().geometry();
        let capacity_bytes = geometry.zone_cap_lba << geometry.lba_shift;
        for zone in geometry.zones.saturating_sub(full_tail_zones)..geometry.zones {
            if built.device.namespace().zone(zone).state == zonelab_zns::ZoneState::Empty {
                built
                    .device
                    .precondition(zone, capacity_bytes)
                    .map_err(|status| BuildError::FillZone { zone, reason: status.to_string() })?;
            }
        }
        Ok(built)
    }

    fn build_unfilled(self) -> Result<Built, BuildError> {
        let label = match &self.spec {
            DeviceSpec::Preset { name, overrides, store, nsid, precondition } => {
                std::iter::once(format!("preset:{name}"))
                    .chain(overrides.iter().cloned())
                    .chain(store.iter().map(|store| format!("store={store}")))
                    .chain(nsid.iter().map(|nsid| format!("ns={nsid}")))
                    .chain(precondition.iter().map(|how| format!("precondition={how}")))
                    .collect::<Vec<_>>()
                    .join(",")
            }
            DeviceSpec::Config(config) => format!("device {}", config.name),
            DeviceSpec::Image(path) => path.display().to_string(),
            DeviceSpec::ImageWith { path, nsid, precondition } => std::iter::once(path.display().to_string())
                .chain(nsid.iter().map(|nsid| format!("ns={nsid}")))
                .chain(precondition.iter().map(|how| format!("precondition={how}")))
                .collect::<Vec<_>>()
                .join(","),
        };
        let config_error = |source| BuildError::Config { spec: label.clone(), source };
        match self.spec {
            DeviceSpec::Preset { name, overrides, store, nsid, precondition } => {
                // 1. Configuration, and the spec's choice of store if it makes one.
                let store = store.as_deref().map_or(Ok(self.store), StoreChoice::parse).map_err(config_error)?;
                let config = DeviceConfig::load(&name, &overrides).map_err(config_error)?;
                let mut built = Self::fresh(config, store, self.host, &label)?;
                if let Some(nsid) = nsid {
                    Self::attach(&mut built.device, &nsid, &label)?;
                }
                if let Some(given) = precondition {
                    Self::precondition(&mut built.device, &given, &label)?;
                }
                Ok(built)
            }
            DeviceSpec::Config(config) => Self::fresh(*config, self.store, self.host, &label),
            DeviceSpec::Image(path) => {
                // 2 and 3. The image's store, lock and restored namespace.
                let image = Image::open(&path).map_err(|source| BuildError::Image { spec: label.clone(), source })?;
                Self::over_image(image, self.host, &label)
            }
            DeviceSpec::ImageWith { path, nsid, precondition } => {
                let image = Image::open(&path).map_err(|source| BuildError::Image { spec: label.clone(), source })?;
                let mut built = Self::over_image(image, self.host, &label)?;
                if let Some(nsid) = nsid {
                    Self::attach(&mut built.device, &nsid, &label)?;
                }
                if let Some(given) = precondition {
                    Self::precondition(&mut built.device, &given, &label)?;
                }
                Ok(built)
            }
        }
    }

    /// `precondition=sequential|random[:N]`: the conventional namespace written whole, then N times at random,
    /// in no time (each pass simulates every page's write, so N is bounded).
    fn precondition(device: &mut Device<Box<dyn MediaStore>>, given: &str, label: &str) -> Result<(), BuildError> {
        let refuse = |reason: &str| BuildError::Precondition {
            spec: label.to_string(),
            given: given.to_string(),
            reason: reason.to_string(),
        };
        let passes = match given.split_once(':') {
            _ if given == "sequential" => 0,
            _ if given == "random" => 1,
            Some(("random", passes)) => match passes.parse() {
                Ok(passes) if passes <= MAX_PRECONDITION_PASSES => passes,
                Ok(_) => return Err(refuse(&format!("N in random:N is at most {MAX_PRECONDITION_PASSES} passes"))),
                Err(_) => return Err(refuse("N in random:N is a whole number of passes")),
            },
            _ => return Err(refuse("it is sequential, random or random:N")),
        };
        device.precondition_conventional(passes, 0x5eed).map_err(|_| refuse("the device has no conventional namespace"))
    }

    /// Sends the host's commands to namespace `nsid` (`ns=`); an error lists the namespaces the device has.
    fn attach(device: &mut Device<Box<dyn MediaStore>>, nsid: &str, label: &str) -> Result<(), BuildError> {
        let ids = device.namespace_ids();
        let unknown = || BuildError::NoSuchNamespace {
            spec: label.to_string(),
            nsid: nsid.to_string(),
            ids: ids.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        };
        let id = nsid.parse().map_err(|_| unknown())?;
        device.attach(id).map_err(|_| unknown())
    }

    /// Steps 1, 4 and 5 for an image already open (2 and 3), reached through `host`.
    pub fn over_image(image: Image, host: HostPath, label: &str) -> Result<Built, BuildError> {
        let path = image.path().to_path_buf();
        // 1. Its configuration: the device model it was created with (the ZN540 if none), its namespace.
        let config = Self::image_config(&image, &path, label)?;
        let saved = Self::media_state(&image, &path, label)?;
        let image_error = |source| BuildError::Image { spec: label.to_string(), source };
        let conventional = match &config.conventional {
            Some(cnv) => Some(image.conventional_store(cnv.capacity.bytes()).map_err(image_error)?),
            None => None,
        };
        let saved_ftl = image.ftl_state().map_err(image_error)?;
        let (namespace, lock) = image.into_namespace();
        // 4 and 5.
        let device = Device::over_image(&config, namespace, conventional, lock, saved, saved_ftl)
            .map_err(|(file, reason)| image_error(ImageError::Corrupt { path: path.join(file), reason }))?;
        // 5.
        let host = HostSide::new(host, &config.host);
        Ok(Built { device, config, host })
    }

    /// Steps 2 to 5 for a configuration without an image.
    fn fresh(config: DeviceConfig, store: StoreChoice, host: HostPath, label: &str) -> Result<Built, BuildError> {
        let namespace_error = |source| BuildError::Namespace { spec: label.to_string(), source };
        let geometry = config.namespace.validate().map_err(namespace_error)?;
        let new_store = |bytes: u64| -> Result<Box<dyn MediaStore>, BuildError> {
            Ok(match store {
                StoreChoice::Null => Box::new(NullStore),
                StoreChoice::Memory => Box::new(MemoryStore::new(bytes)),
                StoreChoice::TempFile => Box::new(
                    FileStore::temporary(bytes)
                        .map_err(|error| BuildError::TempFile { spec: label.to_string(), source: error })?,
                ),
            })
        };
        let namespace =
            ZonedNamespace::new(config.namespace.clone(), new_store(geometry.nsze_lba << geometry.lba_shift)?)
                .map_err(namespace_error)?;
        let conventional = config.conventional.as_ref().map(|cnv| new_store(cnv.capacity.bytes())).transpose()?;
        let device = Device::with_namespaces(&config, namespace, conventional);
        let host = HostSide::new(host, &config.host);
        Ok(Built { device, config, host })
    }

    /// Sets aside the device states of the image at `path` that no longer open (`ftl.state`, `media.json`), as
    /// `NAME.damaged`, so that the next device rebuilds them: the conventional namespace's map from the data its
    /// store holds (as for an image whose namespace was never saved), the flash model's wear from zero. Neither
    /// holds data the host wrote. Returns what was set aside and why.
    pub fn repair_saved_states(path: &Path) -> Result<Vec<(&'static str, String)>, BuildError> {
        let mut set_aside = Vec::new();
        let label = path.display().to_string();
        loop {
            let image = Image::open(path).map_err(|source| BuildError::Image { spec: label.clone(), source })?;
            let error = match Self::over_image(image, HostPath::Spdk, &label) {
                Ok(_) => return Ok(set_aside),
                Err(error) => error,
            };
            let BuildError::Image { source: ImageError::Corrupt { path: file, reason }, .. } = &error else {
                return Err(error);
            };
            let name = [zonelab_zns::FTL_STATE_FILE, "media.json"]
                .into_iter()
                .find(|name| file.file_name().is_some_and(|found| found == *name));
            let Some(name) = name.filter(|name| !set_aside.iter().any(|(done, _)| done == name)) else {
                return Err(error);
            };
            let damaged = path.join(format!("{name}.damaged"));
            std::fs::rename(file, &damaged).map_err(|source| BuildError::Image {
                spec: label.clone(),
                source: ImageError::Io { path: damaged.clone(), source },
            })?;
            set_aside.push((name, reason.clone()));
        }
    }

    /// The flash model's state the image's last device saved, if any.
    fn media_state(image: &Image, path: &Path, label: &str) -> Result<Option<MediaState>, BuildError> {
        let image_error = |source| BuildError::Image { spec: label.to_string(), source };
        let Some(bytes) = image.media_state().map_err(image_error)? else { return Ok(None) };
        serde_json::from_slice(&bytes).map(Some).map_err(|error| {
            image_error(ImageError::Corrupt { path: path.join("media.json"), reason: error.to_string() })
        })
    }

    fn image_config(image: &Image, path: &Path, label: &str) -> Result<DeviceConfig, BuildError> {
        let namespace = image.namespace().config().clone();
        let mut config = match image.device() {
            Some(model) => {
                let mut table = model.clone();
                let invalid = |message: String| BuildError::ImageModel { spec: label.to_string(), message };
                let namespace_value = toml::Value::try_from(&namespace).map_err(|error| invalid(error.to_string()))?;
                table.insert("namespace".into(), namespace_value);
                let text = toml::to_string(&table).map_err(|error| invalid(error.to_string()))?;
                DeviceConfig::parse(&path.display().to_string(), &text, &[])
                    .map_err(|error| invalid(error.to_string()))?
            }
            // An image made without a preset has the ZN540's flash and host, and its own zoned namespace
            // alone: no conventional namespace it did not ask for.
            None => DeviceConfig {
                conventional: None,
                ..DeviceConfig::load("zn540", &[])
                    .map_err(|source| BuildError::Config { spec: label.to_string(), source })?
            },
        };
        config.namespace = namespace;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_as_fio_filenames_and_tool_presets() {
        assert_eq!(
            DeviceSpec::parse("preset:zn540,zones=64,media.nand.channels=4"),
            DeviceSpec::Preset {
                name: "zn540".into(),
                overrides: vec!["namespace.zones=64".into(), "media.nand.channels=4".into()],
                store: None,
                nsid: None,
                precondition: None,
            }
        );
        assert_eq!(DeviceSpec::parse("img/dev"), DeviceSpec::Image("img/dev".into()));
        assert_eq!(
            DeviceSpec::parse("img/dev,ns=1"),
            DeviceSpec::ImageWith { path: "img/dev".into(), nsid: Some("1".into()), precondition: None }
        );
        assert_eq!(
            DeviceSpec::parse("img,v2/dev,ns=1,precondition=random:2"),
            DeviceSpec::ImageWith {
                path: "img,v2/dev".into(),
                nsid: Some("1".into()),
                precondition: Some("random:2".into())
            }
        );
        let memory = DeviceBuilder::new(DeviceSpec::parse("preset:instant,store=memory")).build().expect("builds");
        let mut device = memory.device;
        device.submit(0, zonelab_zns::Command::Write { slba: 0, data: &[7u8; 4096] }).result.expect("write");
        let mut back = [0u8; 4096];
        device.submit(0, zonelab_zns::Command::Read { slba: 0, buf: &mut back }).result.expect("read");
        assert_eq!(back, [7u8; 4096], "store=memory keeps data over the builder's default (null)");
        let error =
            DeviceBuilder::new(DeviceSpec::parse("preset:zn540,store=disk")).build().expect_err("no such store");
        assert!(error.to_string().contains("\"disk\" is not null"), "{error}");
        let error = DeviceBuilder::new(DeviceSpec::parse("preset:zn540,zonez=4")).build().expect_err("bad key");
        assert!(
            error.to_string().contains("preset:zn540,namespace.zonez=4")
                && error.to_string().contains("unknown field `zonez`"),
            "{error}"
        );
    }
}
