//! `zonelab bench ftl`: the conventional namespace's page-mapped FTL on a preset's flash model, under uniform
//! random 4 KiB writes at 7 % and 28 % over-provisioning: write amplification against the analytic model of
//! greedy cleaning, simulated commands per wall-clock second with garbage collection running, the FTL's
//! memory, and how long preconditioning the space twice over takes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;
use std::time::Instant;

use serde_json::json;
use zonelab_device::DeviceConfig;
use zonelab_ftl::{greedy_write_amplification, Ftl, FtlConfig};
use zonelab_media::FlashModel;

use crate::{stdout_error, CliError};

/// Bytes of an FTL page (the mapping unit and the host's write here).
const PAGE_BYTES: u64 = 4096;
/// Writes in flight: enough to keep every die of a preset busy, as fio's random-write steady-state runs do.
const QUEUE_DEPTH: usize = 32;

/// A splitmix64 stream of page numbers below `pages` (the seed fixed: the same run every time).
fn uniform(seed: u64, pages: u64) -> impl Iterator<Item = u64> {
    let mut rng = zonelab_runtime::rng::SplitMix64::split(seed, "bench ftl");
    std::iter::repeat_with(move || rng.below(pages))
}

pub fn ftl(preset: &str, logical_bytes: u64, writes: u64, json: bool, out: &mut impl Write) -> Result<(), CliError> {
    let device = DeviceConfig::load(preset, &[]).map_err(|error| CliError::Config(error.to_string()))?;
    let mut media = device.media;
    // An FTL block is one flash block on each die of one channel (a superblock of the channel's dies): a
    // zone's whole stripe (66 MiB on the ZN540) would leave a 4 GiB space too few blocks to collect among.
    media.nand.channels_per_zone = 1;
    let unit_bytes = media.nand.program_unit_bytes;
    let block_bytes = u64::from(media.planes_per_zone()) * u64::from(media.nand.block_program_units) * unit_bytes;
    if unit_bytes % PAGE_BYTES != 0 {
        return Err(CliError::Usage(format!("{preset}: its {unit_bytes}-byte program unit is not whole 4 KiB pages")));
    }
    if logical_bytes < block_bytes {
        return Err(CliError::Usage(format!(
            "--size {logical_bytes}: the space must hold at least one of {preset}'s {block_bytes}-byte blocks"
        )));
    }
    let mut rows = Vec::new();
    for over_provisioning in [0.07, 0.28] {
        let mut config = FtlConfig::with_over_provisioning(
            logical_bytes,
            over_provisioning,
            (block_bytes / PAGE_BYTES) as u32,
            (unit_bytes / PAGE_BYTES) as u32,
        );
        config.collection_units_in_flight = media.planes_per_zone();
        let mut flash = FlashModel::new(media.clone(), config.blocks, block_bytes);
        let pages = config.logical_pages;
        let mut ftl = Ftl::new(config).map_err(|error| CliError::Config(error.to_string()))?;
        let started = Instant::now();
        ftl.precondition((0..pages).chain(uniform(1, pages).take(pages as usize)))
            .map_err(|error| CliError::Failed(error.to_string()))?;
        let precondition_s = started.elapsed().as_secs_f64();
        // A closed loop of QUEUE_DEPTH writers: each write starts when the earliest one in flight completes.
        let mut in_flight: BinaryHeap<Reverse<u64>> = (0..QUEUE_DEPTH).map(|_| Reverse(0)).collect();
        let started = Instant::now();
        let mut last = 0;
        for lpn in uniform(2, pages).take(writes as usize) {
            let Reverse(now) = in_flight.pop().unwrap_or(Reverse(last));
            let done = ftl.write(&mut flash, now, lpn, 0).map_err(|error| CliError::Failed(error.to_string()))?;
            last = last.max(done);
            in_flight.push(Reverse(done));
        }
        let wall_s = started.elapsed().as_secs_f64();
        ftl.check().map_err(CliError::Failed)?;
        let measured = ftl.counters().write_amplification();
        rows.push(json!({
            "over_provisioning": over_provisioning,
            "blocks": ftl.config().blocks,
            "write_amplification": measured,
            "model_write_amplification": greedy_write_amplification(ftl.config().over_provisioning()),
            "device_kiops": writes as f64 / (last as f64 / 1e9) / 1000.0,
            "commands_per_s": writes as f64 / wall_s,
            "ftl_state_mib": ftl.memory_bytes() as f64 / f64::from(1 << 20),
            "precondition_s": precondition_s,
        }));
    }
    if json {
        let value = json!({ "preset": preset, "logical_bytes": logical_bytes, "writes": writes, "runs": rows });
        return writeln!(out, "{value}").map_err(stdout_error);
    }
    writeln!(
        out,
        "ftl on {preset}: {} GiB logical, {writes} random 4 KiB writes at QD {QUEUE_DEPTH} after preconditioning \
         (written once, then once more at random)",
        logical_bytes >> 30
    )
    .map_err(stdout_error)?;
    for row in &rows {
        writeln!(
            out,
            "  OP {:>4.1} %: WAF {:.3} (greedy model {:.3}), {:.1} K writes/s of device time, {:.2} M commands/s \
             simulated, FTL state {:.1} MiB, precondition {:.2} s ({} blocks)",
            row["over_provisioning"].as_f64().unwrap_or_default() * 100.0,
            row["write_amplification"].as_f64().unwrap_or_default(),
            row["model_write_amplification"].as_f64().unwrap_or_default(),
            row["device_kiops"].as_f64().unwrap_or_default(),
            row["commands_per_s"].as_f64().unwrap_or_default() / 1e6,
            row["ftl_state_mib"].as_f64().unwrap_or_default(),
            row["precondition_s"].as_f64().unwrap_or_default(),
            row["blocks"],
        )
        .map_err(stdout_error)?;
    }
    Ok(())
}
