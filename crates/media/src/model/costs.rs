//! The configuration's times in nanoseconds and rates in nanoseconds per byte, converted once.

use crate::divisor::Divisor;
use crate::{EraseTiming, MediaConfig};

fn ns(us: f64) -> u64 {
    (us * 1000.0).round() as u64
}

/// Nanoseconds per byte at `mib_per_s`; 0 when the rate is 0 (no limit).
pub(super) fn ns_per_byte(mib_per_s: f64) -> f64 {
    if mib_per_s <= 0.0 {
        0.0
    } else {
        1e9 / (mib_per_s * 1_048_576.0)
    }
}

/// Nanoseconds to move `bytes` at `ns_per_byte`.
pub(super) fn transfer_ns(bytes: u64, ns_per_byte: f64) -> u64 {
    debug_assert!(i64::try_from(bytes).is_ok(), "a transfer of fewer than 2^63 bytes: {bytes}");
    whole_ns(bytes as i64 as f64 * ns_per_byte)
}

/// A time in nanoseconds, rounded to the nearest. Converted through `i64`, whose conversions are a few
/// instructions shorter than `u64`'s on a hot path and the same below 2^63 ns (292 years).
pub(super) fn whole_ns(ns: f64) -> u64 {
    let rounded = ns + 0.5;
    debug_assert!((0.0..9.2e18).contains(&rounded), "a time in range: {ns} ns");
    rounded as i64 as u64
}

#[derive(Clone, Debug)]
pub(super) struct Costs {
    read_ns: u64,
    /// The read time of each page type of a program unit, in page order (`NandConfig::read_page_factors`).
    read_ns_by_page_type: Vec<u64>,
    /// How many page types there are, as a divisor (None: one read time for every page).
    page_types: Option<Divisor>,
    pub program_ns: u64,
    pub erase_ns: u64,
    /// `erase-timing = "zone-latency"`: erases delay their reset and hold no plane.
    pub erase_zone_latency: bool,
    pub seal_ns: u64,
    /// 0: no program/erase suspend.
    pub suspend_ns: u64,
    pub resume_before_suspend_ns: u64,
    pub channel_ns_per_byte: f64,
    /// `NandConfig::sense_every_read` and `transfer_whole_pages`.
    pub sense_every_read: bool,
    pub transfer_whole_pages: bool,
    /// `NandConfig::read_retries_per_1000_pe`, per cycle.
    pub read_retries_per_pe: f64,
    pub link_ns_per_byte: f64,
    pub read_budget_ns_per_byte: f64,
    pub read_firmware_ns: u64,
    pub write_firmware_ns: u64,
    pub write_firmware_per_4k_ns: u64,
    pub append_extra_ns: u64,
    pub implicit_open_extra_ns: u64,
    /// 0 per byte: no fetch of write data beyond the host link.
    pub write_fetch_setup_ns: u64,
    pub write_fetch_ns_per_byte: f64,
    pub read_command_ns: u64,
    pub read_command_per_4k_ns: u64,
    pub write_command_ns: u64,
    pub append_command_ns: u64,
    pub management_command_ns: u64,
    pub idle_slice_ns: u64,
    pub open_ns: u64,
    pub close_ns: u64,
    pub close_written_ns: u64,
    pub reset_ns: u64,
    pub finish_ns: u64,
    pub zone_write_buffer_bytes: u64,
    pub read_ahead_bytes: u64,
    pub early_completion: bool,
    pub aggregate_program_units: bool,
    pub append_maps_post_write_pointer: bool,
}

impl Costs {
    pub fn new(config: &MediaConfig) -> Costs {
        let (nand, controller) = (&config.nand, &config.controller);
        Costs {
            read_ns: ns(nand.read_latency_us),
            read_ns_by_page_type: nand
                .read_page_factors
                .iter()
                .map(|factor| ns(nand.read_latency_us * factor))
                .collect(),
            page_types: (!nand.read_page_factors.is_empty()).then(|| Divisor::new(nand.read_page_factors.len() as u64)),
            program_ns: ns(nand.program_latency_us),
            erase_ns: ns(nand.erase_latency_us),
            erase_zone_latency: nand.erase_timing == EraseTiming::ZoneLatency,
            seal_ns: ns(nand.seal_latency_us),
            suspend_ns: ns(nand.suspend_latency_us),
            resume_before_suspend_ns: ns(nand.resume_before_suspend_us),
            channel_ns_per_byte: ns_per_byte(nand.channel_mib_per_s),
            sense_every_read: nand.sense_every_read,
            transfer_whole_pages: nand.transfer_whole_pages,
            read_retries_per_pe: nand.read_retries_per_1000_pe / 1000.0,
            link_ns_per_byte: ns_per_byte(controller.host_link_mib_per_s),
            read_budget_ns_per_byte: ns_per_byte(controller.read_mib_per_s),
            read_firmware_ns: ns(controller.read_firmware_us),
            write_firmware_ns: ns(controller.write_firmware_us),
            write_firmware_per_4k_ns: ns(controller.write_firmware_per_4k_us),
            append_extra_ns: ns(controller.append_extra_us),
            implicit_open_extra_ns: ns(controller.implicit_open_extra_us),
            write_fetch_setup_ns: ns(controller.write_fetch_setup_us),
            write_fetch_ns_per_byte: ns_per_byte(controller.write_fetch_mib_per_s),
            read_command_ns: ns(controller.read_command_us),
            read_command_per_4k_ns: ns(controller.read_command_per_4k_us),
            write_command_ns: ns(controller.write_command_us),
            append_command_ns: ns(controller.append_command_us),
            management_command_ns: ns(controller.management_command_us),
            idle_slice_ns: ns(controller.idle_slice_us),
            open_ns: ns(controller.open_us),
            close_ns: ns(controller.close_us),
            close_written_ns: ns(controller.close_written_us),
            reset_ns: ns(controller.reset_us),
            finish_ns: ns(controller.finish_us),
            zone_write_buffer_bytes: controller.zone_write_buffer_bytes,
            read_ahead_bytes: controller.read_ahead_bytes,
            early_completion: controller.early_completion,
            aggregate_program_units: controller.aggregate_program_units,
            append_maps_post_write_pointer: controller.append_maps_post_write_pointer,
        }
    }

    /// Sensing `pages` pages of one plane from the `first_page`-th page of a program unit: as long as the
    /// slowest page type among them (a multi-page read senses each word line once).
    pub fn read_ns(&self, first_page: u64, pages: u64) -> u64 {
        let Some(types) = self.page_types else {
            return self.read_ns;
        };
        (first_page..first_page + pages.clamp(1, types.get()))
            .map(|page| self.read_ns_by_page_type[types.rem(page) as usize])
            .max()
            .unwrap_or(self.read_ns)
    }
}
