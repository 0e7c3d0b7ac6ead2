//! The flash model's parameters, as presets write them (TOML, kebab-case, units in every name).

use serde::{Deserialize, Serialize};

/// NAND geometry and timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct NandConfig {
    pub channels: u32,
    pub dies_per_channel: u32,
    /// Planes per die that work independently (1 where the die is the unit of parallelism, as in NVMeVirt).
    pub planes_per_die: u32,
    /// Channels one zone spans (ConfZNS's chnls_per_zone); at most `channels`.
    pub channels_per_zone: u32,
    /// Dies on each of those channels that one zone spans (ConfZNS's ways_per_zone).
    pub dies_per_channel_per_zone: u32,
    /// Bytes programmed at once on one plane (TLC one-shot: three pages); the stripe unit of a zone.
    pub program_unit_bytes: u64,
    /// Program units per erase block.
    pub block_program_units: u32,
    pub read_latency_us: f64,
    /// How the read latency differs by page type: the read of the k-th page of a program unit (TLC: lower,
    /// middle, upper) takes `read-latency-us` times entry `k mod n`. A TLC cell needs more sensing steps for its
    /// upper pages. Empty means every page reads in `read-latency-us`. Images written before this key existed
    /// read uniformly.
    #[serde(default)]
    pub read_page_factors: Vec<f64>,
    pub program_latency_us: f64,
    pub erase_latency_us: f64,
    /// Closing a partially programmed block before it is erased or left (dummy word lines); 0 for none.
    pub seal_latency_us: f64,
    /// A read that finds its die programming or erasing suspends the operation and is sensed this long after
    /// it could start (program/erase suspend); 0 means reads wait for the operation to end. Images written
    /// before this key existed do not suspend.
    #[serde(default)]
    pub suspend_latency_us: f64,
    /// A program or erase resumed after a suspension runs this long before it may be suspended again, so that
    /// it progresses under a stream of reads; a read in that window waits for its end. 0: no such window.
    #[serde(default)]
    pub resume_before_suspend_us: f64,
    /// Channel transfer rate in MiB/s.
    pub channel_mib_per_s: f64,
    /// Erases that may run at once device-wide (a power budget); 0 means one per plane.
    pub erase_concurrency: u32,
    /// How an erase takes time: on its plane (`dies`), or as a delay of the reset that needs it with no plane
    /// held (`zone-latency`, where `erase-latency-us` is a whole zone's). Images written before this key
    /// existed time erases on their dies.
    #[serde(default)]
    pub erase_timing: EraseTiming,
    /// Where each zone's stripe starts. Images written before this key existed start every zone on the first
    /// die of its group.
    #[serde(default)]
    pub stripe_start: StripeStart,
    /// Every read senses its pages, even those its plane's register still holds from the read before: the
    /// emulators keep no register state (ConfZNS's `znsssd_read` and NVMeVirt's read charge the page read
    /// latency every time). Off, a read of held pages only moves them (a drive's cache read). Images written
    /// before this key existed read from the register.
    #[serde(default)]
    pub sense_every_read: bool,
    /// A read moves whole pages over its channel however few of their bytes it returns, as ConfZNS charges its
    /// page transfer time (`ch_xfer_lat`) per page touched. Off, only the bytes read move. Images written before
    /// this key existed move the bytes.
    #[serde(default)]
    pub transfer_whole_pages: bool,
    /// Read retries a read needs on average per 1000 program/erase cycles of its block: worn cells drift, the
    /// first sense fails ECC, and the controller senses again with shifted read voltages (each retry a sense and
    /// a transfer more). 0 for none; images written before this key existed have none.
    #[serde(default)]
    pub read_retries_per_1000_pe: f64,
}

/// See `NandConfig::stripe_start`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StripeStart {
    /// Every zone's first unit on the first die of its group, as NVMeVirt's `sdie = (zone * DIES_PER_ZONE) %
    /// total_luns` puts it when a zone spans every die (docs/calibration.md a.1).
    #[default]
    FirstDie,
    /// Rotated by the zone's index: zone z starts on the zone's (z mod planes)-th plane, so jobs that write
    /// different zones in lock step do not program the same die at the same moment.
    ByZone,
}

/// See `NandConfig::erase_timing`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EraseTiming {
    /// Each block erase holds its plane for `erase-latency-us` (through the device's erase slots).
    #[default]
    Dies,
    /// A reset that erases completes `erase-latency-us` after it starts, and erases hold no plane: resets of
    /// different zones overlap and I/O goes on beside them. This is NVMeVirt's zone reset (which charges no
    /// time, `zns_zmgmt_send`: `nsecs_target = nsecs_start`) with an erase latency at zone granularity added
    /// to its completion, as the ReZNS paper configured it.
    ZoneLatency,
}

/// The controller: firmware costs, the host link, the write buffer and the bandwidth budgets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ControllerConfig {
    /// Host link (PCIe) rate in MiB/s; 0 means no limit.
    pub host_link_mib_per_s: f64,
    /// Firmware latency of a read, before the NAND read.
    pub read_firmware_us: f64,
    /// Firmware latency of a write or append until the data is in the write buffer.
    pub write_firmware_us: f64,
    /// Extra write firmware latency per 4 KiB of data.
    pub write_firmware_per_4k_us: f64,
    /// Extra firmware latency of a zone append (the device picks the LBA), before its data moves.
    pub append_extra_us: f64,
    /// Extra latency of the first write to a zone that the write opens implicitly.
    pub implicit_open_extra_us: f64,
    /// The controller fetches a write's data from host memory with PCIe reads: a setup, then the data at
    /// `write-fetch-mib-per-s`, for each command on its own and beside its firmware work (commands fetch
    /// theirs concurrently: this bounds a write's latency, the host link their throughput). 0 MiB/s: no fetch
    /// beyond the host link. Images written before these keys existed have none.
    #[serde(default)]
    pub write_fetch_setup_us: f64,
    #[serde(default)]
    pub write_fetch_mib_per_s: f64,
    /// Time the (single) command processor is busy per command, which bounds commands per second.
    pub read_command_us: f64,
    /// Extra command-processor time of a read per 4 KiB it returns (the controller's per-sector work on the
    /// way out, such as ECC decoding), so that larger reads bound commands per second lower. Images written
    /// before this key existed have none.
    #[serde(default)]
    pub read_command_per_4k_us: f64,
    pub write_command_us: f64,
    pub append_command_us: f64,
    pub management_command_us: f64,
    /// How much the command processor's time varies from command to command, as its coefficient of variation
    /// (0: every command takes exactly its mean; at most 1): each takes `1 - cv` of its mean plus an
    /// exponentially distributed rest with mean `cv` of it. Images written before this key existed have none.
    #[serde(default)]
    pub command_time_cv: f64,
    /// When the command processor's queue empties it runs a slice of background work this long (housekeeping
    /// the firmware defers while commands wait); a command that arrives during the slice waits for its end.
    /// Images written before this key existed have none.
    #[serde(default)]
    pub idle_slice_us: f64,
    /// Device-wide budgets in MiB/s, shared by host writes, appends and finish padding (write) and by reads;
    /// 0 means no limit.
    pub write_mib_per_s: f64,
    pub read_mib_per_s: f64,
    /// The write budget is spent in units of this many bytes, each taking an exponentially distributed time
    /// around the mean rate (flash absorbs written data unevenly, which gives bandwidth-bound writes their
    /// tail); 0 for a steady rate. Images written before this key existed drain steadily.
    #[serde(default)]
    pub write_drain_unit_bytes: u64,
    /// Written data the device holds ahead of what flash has absorbed at the write ceiling: a write completes
    /// once what is ahead of it fits; 0 for none (a write completes when its share of the budget is spent).
    #[serde(default)]
    pub write_drain_buffer_bytes: u64,
    /// Per-zone write buffer; 0 means none, and every write waits for its program.
    pub zone_write_buffer_bytes: u64,
    /// How far ahead of a sequential read stream the controller senses pages into its memory (read-ahead);
    /// 0 for none. Images written before this key existed read nothing ahead.
    #[serde(default)]
    pub read_ahead_bytes: u64,
    /// Writes complete once their data is in the write buffer, before it is programmed.
    pub early_completion: bool,
    /// Writes smaller than a program unit are held until the unit is complete (NVMeVirt); without this each
    /// write programs every unit it touches (ConfZNS).
    pub aggregate_program_units: bool,
    /// Time appends at the write pointer after the append instead of where the data goes (ConfZNS maps an
    /// append by its post-write pointer).
    pub append_maps_post_write_pointer: bool,
    pub open_us: f64,
    pub close_us: f64,
    /// Close of a zone holding data.
    pub close_written_us: f64,
    /// Controller cost of a reset before the erases.
    pub reset_us: f64,
    /// Controller cost of a finish before the padding.
    pub finish_us: f64,
}

/// Energy per flash operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct EnergyConfig {
    pub page_read_nj: f64,
    pub page_program_nj: f64,
    pub block_erase_nj: f64,
    /// Page size that the per-page energies are given for.
    pub page_bytes: u64,
}

/// How logical zones map to flash blocks, and what a reset erases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MappingPolicy {
    /// Each zone owns its blocks; a reset erases the blocks that hold data (a calibrated ZN540 behaves so).
    #[default]
    StaticWrittenErase,
    /// Each zone owns its blocks; a reset of a written zone erases every one of them, used or not (NVMeVirt's
    /// baseline in the ReZNS paper: 96 ms per zone).
    StaticFullErase,
    /// ReZNS's renewable zones: a reset keeps a zone with much room left as a spare, and new zones are
    /// composed from spares first (see `renewable`).
    Rezns,
}

/// The mapping section of a preset; absent means the default policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct MappingConfig {
    pub policy: MappingPolicy,
    /// Under `rezns`, a reset keeps the zone as a spare when more than this fraction of it is unused (the
    /// paper's 25 %).
    #[serde(default = "default_renew_above")]
    pub renew_above: f64,
    /// Under `rezns`, how often (device seconds) the zombie scan looks for idle open zones; 0 turns it off.
    #[serde(default)]
    pub zombie_scan_period_s: f64,
    /// How long (device seconds) an open zone must go unwritten to count as a zombie (the paper's one hour).
    #[serde(default = "default_zombie_idle")]
    pub zombie_idle_s: f64,
}

fn default_renew_above() -> f64 {
    0.25
}

fn default_zombie_idle() -> f64 {
    3600.0
}

impl Default for MappingConfig {
    fn default() -> MappingConfig {
        MappingConfig {
            policy: MappingPolicy::default(),
            renew_above: default_renew_above(),
            zombie_scan_period_s: 0.0,
            zombie_idle_s: default_zombie_idle(),
        }
    }
}

/// Everything the flash model needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct MediaConfig {
    pub nand: NandConfig,
    pub controller: ControllerConfig,
    pub energy: EnergyConfig,
    #[serde(default)]
    pub mapping: MappingConfig,
}

/// A media configuration refused by `validate`, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {reason}")]
pub struct MediaConfigError {
    pub field: &'static str,
    pub reason: String,
}

fn refuse(field: &'static str, reason: impl Into<String>) -> MediaConfigError {
    MediaConfigError { field, reason: reason.into() }
}

impl MediaConfig {
    /// Checks every field once; the model assumes a validated configuration.
    pub fn validate(&self) -> Result<(), MediaConfigError> {
        let nand = &self.nand;
        for (field, value) in [
            ("media.nand.channels", nand.channels),
            ("media.nand.dies-per-channel", nand.dies_per_channel),
            ("media.nand.planes-per-die", nand.planes_per_die),
            ("media.nand.channels-per-zone", nand.channels_per_zone),
            ("media.nand.dies-per-channel-per-zone", nand.dies_per_channel_per_zone),
            ("media.nand.block-program-units", nand.block_program_units),
        ] {
            if value == 0 {
                return Err(refuse(field, "must be at least 1"));
            }
        }
        if nand.channels_per_zone > nand.channels {
            return Err(refuse(
                "media.nand.channels-per-zone",
                format!("{} is above channels {}", nand.channels_per_zone, nand.channels),
            ));
        }
        if nand.dies_per_channel_per_zone > nand.dies_per_channel {
            return Err(refuse(
                "media.nand.dies-per-channel-per-zone",
                format!("{} is above dies-per-channel {}", nand.dies_per_channel_per_zone, nand.dies_per_channel),
            ));
        }
        if nand.program_unit_bytes == 0 || !nand.program_unit_bytes.is_multiple_of(4096) {
            return Err(refuse("media.nand.program-unit-bytes", "must be a positive multiple of 4096"));
        }
        if nand.channel_mib_per_s <= 0.0 {
            return Err(refuse("media.nand.channel-mib-per-s", "must be positive"));
        }
        let times = [
            ("media.nand.read-latency-us", nand.read_latency_us),
            ("media.nand.program-latency-us", nand.program_latency_us),
            ("media.nand.erase-latency-us", nand.erase_latency_us),
            ("media.nand.seal-latency-us", nand.seal_latency_us),
            ("media.nand.suspend-latency-us", nand.suspend_latency_us),
            ("media.nand.resume-before-suspend-us", nand.resume_before_suspend_us),
            ("media.nand.read-retries-per-1000-pe", nand.read_retries_per_1000_pe),
            ("media.controller.host-link-mib-per-s", self.controller.host_link_mib_per_s),
            ("media.controller.read-firmware-us", self.controller.read_firmware_us),
            ("media.controller.write-firmware-us", self.controller.write_firmware_us),
            ("media.controller.write-firmware-per-4k-us", self.controller.write_firmware_per_4k_us),
            ("media.controller.append-extra-us", self.controller.append_extra_us),
            ("media.controller.implicit-open-extra-us", self.controller.implicit_open_extra_us),
            ("media.controller.write-fetch-setup-us", self.controller.write_fetch_setup_us),
            ("media.controller.write-fetch-mib-per-s", self.controller.write_fetch_mib_per_s),
            ("media.controller.read-command-us", self.controller.read_command_us),
            ("media.controller.read-command-per-4k-us", self.controller.read_command_per_4k_us),
            ("media.controller.write-command-us", self.controller.write_command_us),
            ("media.controller.append-command-us", self.controller.append_command_us),
            ("media.controller.management-command-us", self.controller.management_command_us),
            ("media.controller.idle-slice-us", self.controller.idle_slice_us),
            ("media.controller.write-mib-per-s", self.controller.write_mib_per_s),
            ("media.controller.read-mib-per-s", self.controller.read_mib_per_s),
            ("media.controller.open-us", self.controller.open_us),
            ("media.controller.close-us", self.controller.close_us),
            ("media.controller.close-written-us", self.controller.close_written_us),
            ("media.controller.reset-us", self.controller.reset_us),
            ("media.controller.finish-us", self.controller.finish_us),
            ("media.energy.page-read-nj", self.energy.page_read_nj),
            ("media.energy.page-program-nj", self.energy.page_program_nj),
            ("media.energy.block-erase-nj", self.energy.block_erase_nj),
            ("media.mapping.zombie-scan-period-s", self.mapping.zombie_scan_period_s),
            ("media.mapping.zombie-idle-s", self.mapping.zombie_idle_s),
        ];
        for (field, value) in times {
            if !value.is_finite() || value < 0.0 {
                return Err(refuse(field, format!("{value} is not a finite number at least 0")));
            }
        }
        if let Some(factor) = nand.read_page_factors.iter().find(|factor| !factor.is_finite() || **factor <= 0.0) {
            return Err(refuse("media.nand.read-page-factors", format!("{factor} is not a finite number above 0")));
        }
        let cv = self.controller.command_time_cv;
        if !(0.0..=1.0).contains(&cv) {
            return Err(refuse("media.controller.command-time-cv", format!("{cv} is not a fraction in [0, 1]")));
        }
        let renew_above = self.mapping.renew_above;
        if !(0.0..1.0).contains(&renew_above) {
            return Err(refuse("media.mapping.renew-above", format!("{renew_above} is not a fraction in [0, 1)")));
        }
        if self.controller.zone_write_buffer_bytes != 0
            && self.controller.zone_write_buffer_bytes < nand.program_unit_bytes
        {
            return Err(refuse(
                "media.controller.zone-write-buffer-bytes",
                "must hold at least one program unit, or be 0",
            ));
        }
        Ok(())
    }

    /// Planes one zone is striped over.
    pub fn planes_per_zone(&self) -> u32 {
        self.nand.channels_per_zone * self.nand.dies_per_channel_per_zone * self.nand.planes_per_die
    }
}
