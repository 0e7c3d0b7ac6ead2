//! `zonelab churn`: a seeded random mix of writes, appends and zone management on an image, with every block
//! stamped with its own LBA so that `--verify` can check, block by block, that the image holds exactly what
//! the completed commands wrote. The crash tests kill it at random instants and verify what is left.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use zonelab_runtime::rng::SplitMix64;
use zonelab_zns::pattern::{first_unstamped_block, stamp_blocks};
use zonelab_zns::{Image, MediaStore, Status, ZoneSendAction, ZoneState, ZonedNamespace};

use crate::{stdout_error, CliError};

#[derive(Args)]
pub struct ChurnArgs {
    image: PathBuf,
    /// Seed of the command mix.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of commands; 0 runs until the process is killed.
    #[arg(long, default_value_t = 10_000)]
    ops: u64,
    /// Do not write: check that every block below each write pointer holds its stamp and that every block
    /// above reads as zeros.
    #[arg(long)]
    verify: bool,
}

pub fn run(args: &ChurnArgs, out: &mut impl Write) -> Result<(), CliError> {
    let mut image = Image::open(&args.image)?;
    if args.verify {
        let blocks = verify(image.namespace_mut()).map_err(CliError::Failed)?;
        return writeln!(out, "verified {blocks} written blocks and the zeros above every write pointer")
            .map_err(stdout_error);
    }
    let namespace = image.namespace_mut();
    let mut rng = SplitMix64::new(args.seed);
    let mut done = 0u64;
    let mut refused = 0u64;
    while args.ops == 0 || done < args.ops {
        match step(namespace, &mut rng) {
            Ok(()) => {}
            Err(Status::TooManyOpenZones | Status::TooManyActiveZones | Status::InvalidZoneStateTransition) => {
                refused += 1
            }
            Err(status) => {
                return Err(CliError::Failed(format!("command {done} of seed {} failed: {status}", args.seed)));
            }
        }
        done += 1;
    }
    writeln!(out, "ran {done} commands with seed {} ({refused} refused for resources or state)", args.seed)
        .map_err(stdout_error)
}

/// One random command that a correct device must either complete or refuse for resources or state.
fn step<S: MediaStore>(namespace: &mut ZonedNamespace<S>, rng: &mut SplitMix64) -> Result<(), Status> {
    let geometry = *namespace.geometry();
    let zone = rng.below(u64::from(geometry.zones)) as u32;
    let descriptor = namespace.zone(zone);
    match rng.below(100) {
        0..=79 => {
            let Some(wp) = descriptor.wp_lba() else { return namespace_action(namespace, zone, ZoneSendAction::Reset) };
            let room = descriptor.start_lba + geometry.zone_cap_lba - wp;
            let limit = geometry.max_transfer_lba.unwrap_or(64).min(geometry.max_append_lba.unwrap_or(64)).min(64);
            let blocks = 1 + rng.below(room.min(limit));
            let mut data = vec![0u8; (blocks << geometry.lba_shift) as usize];
            stamp_blocks(wp, geometry.lba_size as usize, &mut data);
            if rng.below(2) == 0 {
                namespace.write(wp, &data)
            } else {
                let lba = namespace.append(descriptor.start_lba, &data)?;
                assert_eq!(lba, wp, "an append lands at the write pointer");
                Ok(())
            }
        }
        80..=86 => namespace_action(namespace, zone, ZoneSendAction::Reset),
        87..=90 => namespace_action(namespace, zone, ZoneSendAction::Close),
        91..=93 => namespace_action(namespace, zone, ZoneSendAction::Open),
        94..=96 => namespace_action(namespace, zone, ZoneSendAction::Finish),
        97 => namespace.zone_management_send(0, ZoneSendAction::Close, true),
        98 => namespace.zone_management_send(0, ZoneSendAction::Reset, true),
        _ => namespace.power_cycle(),
    }
}

fn namespace_action<S: MediaStore>(
    namespace: &mut ZonedNamespace<S>,
    zone: u32,
    action: ZoneSendAction,
) -> Result<(), Status> {
    let start = namespace.geometry().zone_start_lba(zone);
    namespace.zone_management_send(start, action, false)
}

/// Reads every zone whole and checks stamps below the write pointer and zeros above it; returns the number of
/// stamped blocks.
fn verify<S: MediaStore>(namespace: &mut ZonedNamespace<S>) -> Result<u64, String> {
    namespace.check_invariants()?;
    let geometry = *namespace.geometry();
    let lba_size = geometry.lba_size as usize;
    let mut stamped = 0;
    let chunk_lba = geometry.max_transfer_lba.unwrap_or(256).min(geometry.zone_size_lba);
    for zone in 0..geometry.zones {
        let descriptor = namespace.zone(zone);
        if descriptor.state == ZoneState::Offline {
            continue;
        }
        let written_end = match descriptor.state {
            ZoneState::Full | ZoneState::ReadOnly => None,
            _ => descriptor.wp_lba(),
        };
        let mut lba = descriptor.start_lba;
        let zone_end = descriptor.start_lba + geometry.zone_size_lba;
        let mut buf = Vec::new();
        while lba < zone_end {
            let blocks = chunk_lba.min(zone_end - lba);
            buf.resize((blocks as usize) * lba_size, 0);
            namespace.read(lba, &mut buf).map_err(|status| format!("read of LBA {lba} failed: {status}"))?;
            for (index, block) in buf.chunks_exact(lba_size).enumerate() {
                let at = lba + index as u64;
                let zero = block.iter().all(|&b| b == 0);
                let below_wp = written_end.is_none_or(|wp| at < wp);
                if below_wp && first_unstamped_block(at, lba_size, block).is_none() {
                    stamped += 1;
                } else if below_wp && !(written_end.is_none() && zero) {
                    return Err(format!("zone {zone}: LBA {at} is below the write pointer but holds wrong data"));
                } else if !below_wp && !zero {
                    return Err(format!("zone {zone}: LBA {at} is above the write pointer but is not zeros"));
                }
            }
            lba += blocks;
        }
    }
    Ok(stamped)
}
