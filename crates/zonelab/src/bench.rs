//! `zonelab bench`: performance figures printed, never asserted.

use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use clap::Subcommand;
use serde_json::json;
use zonelab_zns::{ByteSize, NamespaceConfig, NullStore, ZoneSendAction, ZonedNamespace};

use crate::{stdout_error, CliError};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Commands per second of the zns layer with the null store on one core: 4 KiB writes, 4 KiB appends and
    /// zone resets, on a ZN540-shaped namespace (904 zones of 2 GiB, 1077 MiB writable).
    Core {
        /// Timed runs of each command; the median is reported.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Commands in each run.
        #[arg(long, default_value_t = 4_000_000)]
        commands: u64,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(which: BenchCommand, out: &mut impl Write) -> Result<(), CliError> {
    match which {
        BenchCommand::Core { runs, commands, json } => core(runs.max(1), commands.max(1), json, out),
    }
}

type Ns = ZonedNamespace<NullStore>;

fn zn540_shape(max_open: u32) -> Ns {
    let config = NamespaceConfig {
        zones: 904,
        zone_size: ByteSize(2 << 30),
        zone_cap: ByteSize(1077 << 20),
        max_open,
        max_active: max_open,
        mdts: ByteSize(0),
        ..NamespaceConfig::default()
    };
    ZonedNamespace::new(config, NullStore).expect("the benchmark geometry is valid")
}

/// Seconds for `commands` 4 KiB writes (or appends) spread round-robin over 14 open zones.
fn time_writes(commands: u64, append: bool) -> f64 {
    let mut ns = zn540_shape(14);
    let block = [0u8; 4096];
    let zone_lba = ns.geometry().zone_size_lba;
    let per_zone = ns.geometry().zone_cap_lba;
    let mut wps = [0u64; 14];
    let started = Instant::now();
    for i in 0..commands {
        let zone = (i % 14) as usize;
        if wps[zone] == per_zone {
            ns.zone_management_send(zone as u64 * zone_lba, ZoneSendAction::Reset, false).expect("reset");
            wps[zone] = 0;
        }
        let start = zone as u64 * zone_lba;
        if append {
            black_box(ns.append(start, black_box(&block)).expect("append"));
        } else {
            ns.write(start + wps[zone], black_box(&block)).expect("write");
        }
        wps[zone] += 1;
    }
    started.elapsed().as_secs_f64()
}

/// Seconds spent in `commands` resets of written zones (the writes that fill them are not timed).
fn time_resets(commands: u64) -> f64 {
    let mut ns = zn540_shape(0);
    let zones = ns.geometry().zones;
    let zone_lba = ns.geometry().zone_size_lba;
    let block = [0u8; 4096];
    let mut elapsed = 0.0;
    let mut done = 0;
    while done < commands {
        let batch = (commands - done).min(u64::from(zones)) as u32;
        for zone in 0..batch {
            ns.write(u64::from(zone) * zone_lba, &block).expect("write");
        }
        let started = Instant::now();
        for zone in 0..batch {
            ns.zone_management_send(u64::from(zone) * zone_lba, ZoneSendAction::Reset, false).expect("reset");
        }
        elapsed += started.elapsed().as_secs_f64();
        done += u64::from(batch);
    }
    elapsed
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn core(runs: usize, commands: u64, json: bool, out: &mut impl Write) -> Result<(), CliError> {
    let cases: [(&str, &dyn Fn(u64) -> f64); 3] =
        [("write_4k", &|n| time_writes(n, false)), ("append_4k", &|n| time_writes(n, true)), ("reset", &time_resets)];
    let mut results = serde_json::Map::new();
    if !json {
        writeln!(
            out,
            "zns layer, null store, one core: {runs} runs of {commands} commands each, ZN540-shaped namespace"
        )
        .map_err(stdout_error)?;
    }
    for (name, case) in cases {
        let mut rates: Vec<f64> = (0..runs).map(|_| commands as f64 / case(commands)).collect();
        let (min, max) = rates.iter().fold((f64::MAX, 0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        let med = median(&mut rates);
        if !json {
            writeln!(
                out,
                "  {name:<10} median {:>7.2} M commands/s  (min {:.2}, max {:.2}; {:.1} ns per command)",
                med / 1e6,
                min / 1e6,
                max / 1e6,
                1e9 / med
            )
            .map_err(stdout_error)?;
        }
        results.insert(
            name.to_string(),
            json!({ "median_commands_per_s": med, "min_commands_per_s": min, "max_commands_per_s": max, "runs": runs, "commands_per_run": commands }),
        );
    }
    if json {
        writeln!(out, "{}", serde_json::Value::Object(results)).map_err(stdout_error)?;
    }
    Ok(())
}
