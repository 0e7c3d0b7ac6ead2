//! The namespace configuration (TOML, kebab-case keys, sizes as strings) and the geometry derived from it.
//!
//! `NamespaceConfig` is what a user writes; `validate()` checks it once, naming the field at fault, and yields
//! the `Geometry` every command is checked against. The switches marked "configurable" in docs/semantics.md's
//! decision table are fields here, with zonelab's defaults, so QEMU's or null_blk's behaviour can be chosen.

use serde::{Deserialize, Serialize};

use crate::{ByteSize, Status};

/// Memory page size the ZASL and MDTS exponents count in (CAP.MPSMIN = 4 KiB, as Linux assumes).
pub const MIN_PAGE_BYTES: u64 = 4096;

/// The most zones a namespace may have: 2^20, ten times the zone count of the largest shipping ZNS drives, and a
/// bound on the zone state, journal and flash model a namespace allocates (about 100 bytes a zone).
pub const MAX_ZONES: u32 = 1 << 20;

/// What Close does to an open zone whose write pointer is still at the zone start (docs/semantics.md 1.1 fn 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CloseEmptyOpenZone {
    /// The zone becomes EMPTY and releases its active resource (null_blk, ZBC).
    #[default]
    Empty,
    /// The zone becomes CLOSED and keeps its active resource (QEMU).
    Closed,
}

/// A zoned namespace as a user describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct NamespaceConfig {
    /// Number of zones. Default 16; at least 1, at most `MAX_ZONES`.
    pub zones: u32,
    /// Zone size. Default 16MiB; a power of two, at least one LBA.
    pub zone_size: ByteSize,
    /// Writable capacity of each zone. Default 0, meaning the zone size; at most the zone size.
    pub zone_cap: ByteSize,
    /// Logical block size in bytes: 512 or 4096. Default 4096.
    pub lba_size: u32,
    /// Maximum open zones; 0 means no limit, or max-active when that is set. Default 0.
    pub max_open: u32,
    /// Maximum active zones; 0 means no limit. Default 0.
    pub max_active: u32,
    /// Zone Append Size Limit; 0 means MDTS applies. Default 0; a power of two multiple of 4KiB, at most MDTS.
    pub zasl: ByteSize,
    /// Maximum Data Transfer Size; 0 means no limit. Default 512KiB (QEMU's mdts=7); a power of two multiple
    /// of 4KiB.
    pub mdts: ByteSize,
    /// Close the oldest implicitly opened zone when an open needs room. Default true.
    pub auto_close: bool,
    /// Close of an open zone whose write pointer is at its start. Default "empty".
    pub close_empty_open_zone: CloseEmptyOpenZone,
    /// Finish of an EMPTY or CLOSED zone needs free resources (null_blk, ZBC). Default false (QEMU).
    pub finish_checks_resources: bool,
    /// Reads may cross zone boundaries (RAZB). Default false.
    pub cross_zone_reads: bool,
    /// Reads of unwritten blocks fail with Deallocated or Unwritten Logical Block. Default false (zeros).
    pub dulbe: bool,
}

impl Default for NamespaceConfig {
    fn default() -> Self {
        NamespaceConfig {
            zones: 16,
            zone_size: ByteSize(16 << 20),
            zone_cap: ByteSize(0),
            lba_size: 4096,
            max_open: 0,
            max_active: 0,
            zasl: ByteSize(0),
            mdts: ByteSize(512 << 10),
            auto_close: true,
            close_empty_open_zone: CloseEmptyOpenZone::Empty,
            finish_checks_resources: false,
            cross_zone_reads: false,
            dulbe: false,
        }
    }
}

/// A configuration refused by `validate`, naming the field at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {reason}")]
#[non_exhaustive]
pub struct ConfigError {
    pub field: &'static str,
    pub reason: String,
}

impl ConfigError {
    /// `field` refused for `reason`: for the layers above, whose configurations hold a namespace's.
    pub fn new(field: &'static str, reason: String) -> ConfigError {
        ConfigError { field, reason }
    }
}

pub(crate) fn refuse(field: &'static str, reason: String) -> ConfigError {
    ConfigError { field, reason }
}

/// Which command set a namespace follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamespaceKind {
    /// NVMe Zoned Namespace: sequential-write zones.
    Zoned,
    /// The NVM command set: any block written in any order, behind a flash translation layer.
    Conventional,
}

/// The validated shape of a namespace, in LBAs. Limits of 0 mean "no limit". A conventional namespace has no
/// zones; code that walks zones sees it as one zone that spans it, always full (zone size the next power of
/// two, zone capacity the namespace), and no zone limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub kind: NamespaceKind,
    pub lba_size: u32,
    pub lba_shift: u32,
    pub zones: u32,
    pub zone_size_lba: u64,
    pub zone_shift: u32,
    pub zone_cap_lba: u64,
    /// Namespace size (NSZE): a whole number of zones.
    pub nsze_lba: u64,
    pub max_open: u32,
    pub max_active: u32,
    /// Largest data transfer of one command, in LBAs; None for no limit.
    pub max_transfer_lba: Option<u64>,
    /// Largest zone append, in LBAs; None for no limit.
    pub max_append_lba: Option<u64>,
}

impl Geometry {
    pub const fn zone_start_lba(&self, zone: u32) -> u64 {
        (zone as u64) << self.zone_shift
    }

    /// The zone holding `lba`; the caller has checked `lba < nsze_lba`.
    pub const fn zone_of(&self, lba: u64) -> u32 {
        (lba >> self.zone_shift) as u32
    }

    /// The blocks in a data buffer of `bytes`: Invalid Field when it is empty or not whole blocks.
    pub(crate) fn blocks_in(&self, bytes: usize) -> Result<u64, Status> {
        let bytes = bytes as u64;
        if bytes == 0 || bytes & (u64::from(self.lba_size) - 1) != 0 {
            return Err(Status::InvalidField);
        }
        Ok(bytes >> self.lba_shift)
    }

    /// Invalid Field when `nlb` blocks exceed the largest transfer (MDTS).
    pub(crate) fn check_transfer(&self, nlb: u64) -> Result<(), Status> {
        match self.max_transfer_lba {
            Some(limit) if nlb > limit => Err(Status::InvalidField),
            _ => Ok(()),
        }
    }

    /// LBA Out of Range when `nlb` blocks from `slba` pass the namespace's end.
    pub(crate) fn check_range(&self, slba: u64, nlb: u64) -> Result<(), Status> {
        match slba.checked_add(nlb) {
            Some(end) if end <= self.nsze_lba => Ok(()),
            _ => Err(Status::LbaOutOfRange),
        }
    }
}

pub(crate) fn check_page_multiple(field: &'static str, size: ByteSize) -> Result<(), ConfigError> {
    let bytes = size.bytes();
    if bytes != 0 && (!bytes.is_multiple_of(MIN_PAGE_BYTES) || !(bytes / MIN_PAGE_BYTES).is_power_of_two()) {
        return Err(refuse(field, format!("{size} is not 0 or a power-of-two multiple of 4KiB")));
    }
    Ok(())
}

impl NamespaceConfig {
    /// Checks the configuration once and derives the geometry (QEMU's rules, docs/semantics.md decision table).
    pub fn validate(&self) -> Result<Geometry, ConfigError> {
        if self.lba_size != 512 && self.lba_size != 4096 {
            return Err(refuse("lba-size", format!("{} is not 512 or 4096", self.lba_size)));
        }
        let lba_bytes = u64::from(self.lba_size);
        if self.zones == 0 {
            return Err(refuse("zones", "a namespace needs at least one zone".into()));
        }
        if self.zones > MAX_ZONES {
            return Err(refuse(
                "zones",
                format!("{} zones is more than {MAX_ZONES}, the most zonelab keeps state for", self.zones),
            ));
        }
        let zone_bytes = self.zone_size.bytes();
        if !zone_bytes.is_power_of_two() {
            return Err(refuse("zone-size", format!("{} is not a power of two", self.zone_size)));
        }
        if zone_bytes < lba_bytes {
            return Err(refuse("zone-size", format!("{} is smaller than one {lba_bytes}-byte LBA", self.zone_size)));
        }
        let cap_bytes = if self.zone_cap.bytes() == 0 { zone_bytes } else { self.zone_cap.bytes() };
        if cap_bytes > zone_bytes {
            return Err(refuse("zone-cap", format!("{} is above the zone size {}", self.zone_cap, self.zone_size)));
        }
        if cap_bytes % lba_bytes != 0 {
            return Err(refuse("zone-cap", format!("{} is not a multiple of the {lba_bytes}-byte LBA", self.zone_cap)));
        }
        if self.max_active != 0 && self.max_open > self.max_active {
            return Err(refuse("max-open", format!("{} is above max-active {}", self.max_open, self.max_active)));
        }
        check_page_multiple("mdts", self.mdts)?;
        check_page_multiple("zasl", self.zasl)?;
        if self.mdts.bytes() != 0 && self.zasl.bytes() > self.mdts.bytes() {
            return Err(refuse("zasl", format!("{} is above mdts {}", self.zasl, self.mdts)));
        }
        let zone_size_lba = zone_bytes / lba_bytes;
        let nsze_lba = u64::from(self.zones)
            .checked_mul(zone_size_lba)
            .filter(|lbas| lbas.checked_mul(lba_bytes).is_some())
            .ok_or_else(|| refuse("zones", format!("{} zones of {} overflow 64 bits", self.zones, self.zone_size)))?;
        let max_transfer_lba = (self.mdts.bytes() != 0).then(|| self.mdts.bytes() / lba_bytes);
        let max_append_lba =
            if self.zasl.bytes() != 0 { Some(self.zasl.bytes() / lba_bytes) } else { max_transfer_lba };
        Ok(Geometry {
            kind: NamespaceKind::Zoned,
            lba_size: self.lba_size,
            lba_shift: self.lba_size.trailing_zeros(),
            zones: self.zones,
            zone_size_lba,
            zone_shift: zone_size_lba.trailing_zeros(),
            zone_cap_lba: cap_bytes / lba_bytes,
            nsze_lba,
            max_open: if self.max_open == 0 { self.max_active } else { self.max_open },
            max_active: self.max_active,
            max_transfer_lba,
            max_append_lba,
        })
    }

    /// Parses a TOML configuration, refusing unknown keys; the error names the line and key at fault.
    pub fn from_toml(text: &str) -> Result<NamespaceConfig, String> {
        crate::toml_decode::decode(text)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a namespace configuration always serializes")
    }
}

/// Splits `nlb` blocks from `slba` into transfers of at most `max_transfer_lba` blocks (none: one transfer), as
/// the block layer splits a large request at the device's MDTS: `(slba, nlb)` of each, in order.
pub fn transfers(slba: u64, nlb: u64, max_transfer_lba: Option<u64>) -> impl Iterator<Item = (u64, u64)> {
    let step = max_transfer_lba.unwrap_or(nlb).max(1);
    (0..nlb.div_ceil(step)).map(move |index| (slba + index * step, step.min(nlb - index * step)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_field(config: NamespaceConfig) -> &'static str {
        config.validate().expect_err("must be refused").field
    }

    #[test]
    fn defaults_are_valid() {
        let geometry = NamespaceConfig::default().validate().expect("valid");
        assert_eq!(geometry.zone_size_lba, 4096);
        assert_eq!(geometry.zone_cap_lba, 4096);
        assert_eq!(geometry.nsze_lba, 16 * 4096);
        assert_eq!(geometry.max_append_lba, Some(128));
    }

    #[test]
    fn each_bad_field_is_named() {
        let base = NamespaceConfig::default;
        assert_eq!(refused_field(NamespaceConfig { zone_size: ByteSize(3 << 20), ..base() }), "zone-size");
        assert_eq!(refused_field(NamespaceConfig { zone_cap: ByteSize(32 << 20), ..base() }), "zone-cap");
        assert_eq!(refused_field(NamespaceConfig { zone_cap: ByteSize(6000), ..base() }), "zone-cap");
        assert_eq!(refused_field(NamespaceConfig { max_open: 8, max_active: 4, ..base() }), "max-open");
        assert_eq!(refused_field(NamespaceConfig { zones: 0, ..base() }), "zones");
        assert_eq!(refused_field(NamespaceConfig { zones: MAX_ZONES + 1, ..base() }), "zones");
        assert_eq!(refused_field(NamespaceConfig { lba_size: 1024, ..base() }), "lba-size");
        assert_eq!(refused_field(NamespaceConfig { zasl: ByteSize(12 << 10), ..base() }), "zasl");
        assert_eq!(refused_field(NamespaceConfig { zasl: ByteSize(1 << 20), ..base() }), "zasl");
        assert_eq!(refused_field(NamespaceConfig { mdts: ByteSize(6000), ..base() }), "mdts");
    }

    #[test]
    fn max_open_defaults_to_max_active() {
        let geometry = NamespaceConfig { max_active: 6, ..NamespaceConfig::default() }.validate().expect("valid");
        assert_eq!((geometry.max_open, geometry.max_active), (6, 6));
    }

    #[test]
    fn toml_uses_kebab_case_and_size_strings() {
        let config =
            NamespaceConfig::from_toml("zones = 4\nzone-size = \"1MiB\"\nzone-cap = \"768KiB\"\nmax-open = 2\n")
                .expect("parses");
        assert_eq!(config.zone_cap, ByteSize(768 << 10));
        assert_eq!(NamespaceConfig::from_toml(&config.to_toml()).expect("round trip"), config);
        let error = NamespaceConfig::from_toml("zone-sise = \"1MiB\"").expect_err("unknown key");
        assert!(error.to_string().contains("zone-sise"), "{error}");
    }
}
