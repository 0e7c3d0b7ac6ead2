//! `zonelab fs mkfs|ls|df|dump|fsck DEVICE`: zonedfs (the file system the RocksDB plugin mounts) seen from the
//! command line, in virtual time, as the zenfs tool shows ZenFS. Only mkfs and `fsck --repair` write; the others
//! mount read-only.

use std::cell::RefCell;
use std::future::Future;
use std::io::Write;
use std::rc::Rc;

use clap::Subcommand;
use zonelab_bench::zonemap::{draw, summarize, zone_map};
use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath, StoreChoice};
use zonelab_runtime::{Host, Simulation};
use zonelab_zns::MediaStore;
use zonelab_zonedfs::{FsOptions, ZonedFs, ZonedFsError};

use crate::{stdout_error, CliError};

#[derive(Subcommand)]
pub enum FsCommand {
    /// Format DEVICE: reset every zone and write an empty file system (--force if it holds data).
    Mkfs {
        device: String,
        #[arg(long)]
        force: bool,
    },
    /// List every file: size, write-lifetime hint, modification time and extents (LBA, bytes, zone), or a WAL's
    /// design and zones.
    Ls {
        device: String,
        #[arg(long)]
        json: bool,
    },
    /// Space and zones: capacity, free, live and reclaimable bytes; each used zone's role and contents.
    Df {
        device: String,
        #[arg(long)]
        json: bool,
    },
    /// The metadata journal, one JSON record per line (superblock, snapshot, then changes).
    Dump { device: String },
    /// A file's extents in file order: logical offset, LBA, bytes, and the zone that holds each (zns-tools'
    /// `zns.fiemap`), or a WAL file's zones.
    Fiemap {
        device: String,
        /// The file's path, as `fs ls` names it.
        file: String,
        #[arg(long)]
        json: bool,
    },
    /// Which files share which zones: each used zone's role, written, live and dead bytes and the files whose
    /// extents it holds (with their bytes), as a table, as JSON, or as a PNG zone-utilization map (a strip per
    /// zone, each file's extents in a colour of its own, dead data grey).
    Map {
        device: String,
        #[arg(long)]
        json: bool,
        /// Also draw the map into this PNG file.
        #[arg(long, value_name = "FILE")]
        png: Option<std::path::PathBuf>,
    },
    /// Check consistency (the journal's frames, extents within zones and below write pointers, no overlaps,
    /// live counts): exit 1 when anything is wrong, naming the damaged journal frames and the files they touch.
    Fsck {
        device: String,
        /// Keep every journal record that checks, skipping damaged frames, and write what they describe as a
        /// new journal generation; zones no kept record names are left for the next mount to reclaim.
        #[arg(long)]
        repair: bool,
    },
}

type Fs = ZonedFs<Host<Box<dyn MediaStore>>>;

/// How `on_fs` reaches the file system.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Format,
    ReadOnly,
    /// Read-only, replaying every journal record that checks and listing the damage (fsck).
    Examine,
    /// Read-write, writing what a damaged journal's checking records describe as a new generation.
    Repair,
}

/// Runs `work` on the file system of `device`, in virtual time.
fn on_fs<T: 'static, F: Future<Output = Result<T, ZonedFsError>>>(
    device: &str,
    access: Access,
    work: impl FnOnce(Fs) -> F + 'static,
) -> Result<T, CliError> {
    let spec = DeviceSpec::parse(device);
    let built = match spec {
        // Readers open an image read-only, beside other readers, as `info` does: an image on a read-only file
        // system, or one another reader holds, can be looked at.
        DeviceSpec::Image(path) if matches!(access, Access::ReadOnly | Access::Examine) => {
            let image = crate::open_to_read(&path)?;
            DeviceBuilder::over_image(image, HostPath::Kernel, device)
        }
        spec => DeviceBuilder::new(spec).host(HostPath::Kernel).store(StoreChoice::Memory).build(),
    }
    .map_err(|error| CliError::Config(error.to_string()))?;
    let mut simulation = Simulation::over(built, None);
    let host = simulation.host();
    let out = Rc::new(RefCell::new(None));
    let result = Rc::clone(&out);
    simulation.spawn(async move {
        let read_only = matches!(access, Access::ReadOnly | Access::Examine);
        let salvage = matches!(access, Access::Examine | Access::Repair);
        let mounted = if access == Access::Format {
            ZonedFs::format(host, FsOptions::default()).await
        } else {
            ZonedFs::mount(host, FsOptions { read_only, salvage, ..FsOptions::default() }).await
        };
        let done = match mounted {
            Ok(fs) => work(fs).await,
            Err(error) => Err(error),
        };
        *result.borrow_mut() = Some(done);
    });
    simulation.run();
    let done = out.borrow_mut().take();
    done.ok_or_else(|| CliError::Failed("the file system's work did not finish".into()))?
        .map_err(|error| CliError::Failed(format!("{device}: {error}")))
}

pub fn run(command: FsCommand, out: &mut impl Write) -> Result<(), CliError> {
    match command {
        FsCommand::Mkfs { device, force } => {
            if !force {
                let holds_data = on_fs(&device, Access::ReadOnly, |fs| async move { Ok(!fs.files().is_empty()) });
                match holds_data {
                    Ok(true) => {
                        return Err(CliError::Usage(format!(
                            "{device} holds a file system with files; pass --force to format it anyway"
                        )))
                    }
                    Err(CliError::Failed(message)) if message.contains("holds data") => {
                        return Err(CliError::Usage(format!("{message}; pass --force to format it anyway")))
                    }
                    _ => {}
                }
            }
            let geometry = on_fs(&device, Access::Format, |fs| async move { Ok(fs.geometry()) })?;
            writeln!(
                out,
                "formatted {device}: {} zones of {} bytes ({} data zones, 2 for the journal)",
                geometry.zones,
                geometry.zone_cap_lba << geometry.lba_shift,
                geometry.zones - 2
            )
            .map_err(stdout_error)
        }
        FsCommand::Ls { device, json } => {
            let (files, directories, geometry) =
                on_fs(
                    &device,
                    Access::ReadOnly,
                    |fs| async move { Ok((fs.files(), fs.directories(), fs.geometry())) },
                )?;
            if json {
                let value = serde_json::json!({ "directories": directories, "files": files });
                return writeln!(out, "{}", serde_json::to_string_pretty(&value).unwrap_or_default())
                    .map_err(stdout_error);
            }
            for file in &files {
                let mut extents: Vec<String> = file
                    .extents
                    .iter()
                    .map(|extent| format!("{}+{}@z{}", extent.lba, extent.len_bytes, geometry.zone_of(extent.lba)))
                    .collect();
                if let Some(wal) = &file.wal {
                    let zones: Vec<String> = wal.zones.iter().map(|zone| format!("z{zone}")).collect();
                    let design = serde_json::to_value(wal.design).unwrap_or_default();
                    extents.push(format!("wal={} zones={}", design.as_str().unwrap_or("?"), zones.join(",")));
                }
                writeln!(
                    out,
                    "{:>12} {} lifetime={} mtime={} {}",
                    file.size_bytes,
                    file.name,
                    file.lifetime,
                    file.mtime_s,
                    extents.join(" ")
                )
                .map_err(stdout_error)?;
            }
            writeln!(out, "{} files, {} directories", files.len(), directories.len()).map_err(stdout_error)
        }
        FsCommand::Df { device, json } => {
            let (space, zones) = on_fs(&device, Access::ReadOnly, |fs| async move { Ok((fs.space(), fs.zones())) })?;
            if json {
                let value = serde_json::json!({ "space": space, "zones": zones });
                return writeln!(out, "{}", serde_json::to_string_pretty(&value).unwrap_or_default())
                    .map_err(stdout_error);
            }
            let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
            writeln!(
                out,
                "capacity {:.1} MiB in {} data zones ({} empty); free {:.1} MiB, live {:.1} MiB, reclaimable {:.1} MiB",
                mib(space.capacity_bytes),
                space.data_zones,
                space.empty_zones,
                mib(space.free_bytes),
                mib(space.live_bytes),
                mib(space.reclaimable_bytes)
            )
            .map_err(stdout_error)?;
            for zone in zones.iter().filter(|zone| zone.written_bytes > 0) {
                writeln!(
                    out,
                    "zone {:>5} {:<8} written {:>10} live {:>10} lifetime {}{}",
                    zone.zone,
                    zone.role,
                    zone.written_bytes,
                    zone.live_bytes,
                    zone.lifetime,
                    if zone.full { " full" } else { "" }
                )
                .map_err(stdout_error)?;
            }
            Ok(())
        }
        FsCommand::Fiemap { device, file, json } => {
            let (files, geometry) =
                on_fs(&device, Access::ReadOnly, |fs| async move { Ok((fs.files(), fs.geometry())) })?;
            let Some(found) = files.iter().find(|info| info.name == file) else {
                return Err(CliError::Failed(format!("{device}: no file {file}")));
            };
            let mut logical = 0;
            let mut extents = Vec::new();
            for extent in &found.extents {
                let zone = geometry.zone_of(extent.lba);
                extents.push(serde_json::json!({
                    "logical": logical, "lba": extent.lba, "bytes": extent.len_bytes, "zone": zone,
                    "zone_offset_bytes": (extent.lba - geometry.zone_start_lba(zone)) << geometry.lba_shift,
                }));
                logical += extent.len_bytes;
            }
            let wal_zones: Vec<u32> = found.wal.iter().flat_map(|wal| wal.zones.iter().copied()).collect();
            if json {
                let value = serde_json::json!({ "file": file, "size_bytes": found.size_bytes, "extents": extents, "wal_zones": wal_zones });
                return writeln!(out, "{}", serde_json::to_string_pretty(&value).unwrap_or_default())
                    .map_err(stdout_error);
            }
            writeln!(out, "{file}: {} bytes in {} extents", found.size_bytes, extents.len()).map_err(stdout_error)?;
            for extent in &extents {
                writeln!(
                    out,
                    "  logical {:>12} lba {:>12} bytes {:>10} zone {:>5} (+{})",
                    extent["logical"], extent["lba"], extent["bytes"], extent["zone"], extent["zone_offset_bytes"]
                )
                .map_err(stdout_error)?;
            }
            if !wal_zones.is_empty() {
                let zones: Vec<String> = wal_zones.iter().map(u32::to_string).collect();
                writeln!(out, "  a WAL in zones {}", zones.join(", ")).map_err(stdout_error)?;
            }
            Ok(())
        }
        FsCommand::Map { device, json, png } => {
            let (files, zones, geometry) =
                on_fs(&device, Access::ReadOnly, |fs| async move { Ok((fs.files(), fs.zones(), fs.geometry())) })?;
            let map = zone_map(&files, &zones, &geometry);
            if let Some(png) = &png {
                draw(png, &format!("{device}: files in zones"), &map, &files).map_err(CliError::Failed)?;
            }
            if json {
                let zones: Vec<serde_json::Value> = map
                    .iter()
                    .map(|zone| {
                        let files: Vec<serde_json::Value> = zone
                            .files
                            .iter()
                            .map(|&(file, bytes)| serde_json::json!({ "name": files[file].name, "bytes": bytes }))
                            .collect();
                        serde_json::json!({
                            "zone": zone.info.zone,
                            "role": zone.info.role,
                            "capacity_bytes": zone.info.capacity_bytes,
                            "written_bytes": zone.info.written_bytes,
                            "live_bytes": zone.info.live_bytes,
                            "full": zone.info.full,
                            "lifetime": zone.info.lifetime,
                            "files": files,
                        })
                    })
                    .collect();
                let value = serde_json::json!({ "zones": zones, "summary": summarize(&map) });
                return writeln!(out, "{}", serde_json::to_string_pretty(&value).unwrap_or_default())
                    .map_err(stdout_error);
            }
            for zone in &map {
                let info = &zone.info;
                let state = match (info.full, info.written_bytes) {
                    (true, _) => "full",
                    (false, 0) => "empty",
                    _ => "partial",
                };
                let names: Vec<String> =
                    zone.files.iter().map(|&(file, bytes)| format!("{}:{bytes}", files[file].name)).collect();
                writeln!(
                    out,
                    "zone {:>5} {:<8} {:<7} written {:>10} live {:>10} dead {:>10} files {} {}",
                    info.zone,
                    info.role,
                    state,
                    info.written_bytes,
                    info.live_bytes,
                    info.written_bytes.saturating_sub(info.live_bytes),
                    zone.files.len(),
                    names.join(" ")
                )
                .map_err(stdout_error)?;
            }
            let summary = summarize(&map);
            writeln!(
                out,
                "{} zones in use, {} shared by more than one file ({:.1} files a zone, at most {}); {:.1} % of the \
                 written bytes live",
                summary.zones_in_use,
                summary.shared_zones,
                summary.files_per_zone,
                summary.most_files_in_a_zone,
                summary.live_fraction * 100.0
            )
            .map_err(stdout_error)
        }
        FsCommand::Dump { device } => {
            let records = on_fs(&device, Access::ReadOnly, |fs| async move { fs.journal_records().await })?;
            for record in records {
                writeln!(out, "{}", serde_json::to_string(&record).unwrap_or_default()).map_err(stdout_error)?;
            }
            Ok(())
        }
        FsCommand::Fsck { device, repair } => {
            let access = if repair { Access::Repair } else { Access::Examine };
            let (problems, files, zones, dead) = on_fs(&device, access, |fs| async move {
                let zones = fs.zones();
                let used = zones.iter().filter(|zone| zone.written_bytes > 0).count();
                let dead: Vec<u32> = zones
                    .iter()
                    .filter(|zone| zone.role == "data" && zone.written_bytes > 0 && zone.live_bytes == 0)
                    .map(|zone| zone.zone)
                    .collect();
                Ok((fs.check(), fs.files().len(), used, dead))
            })?;
            if problems.is_empty() {
                return writeln!(out, "{device}: clean, {files} files in {zones} written zones").map_err(stdout_error);
            }
            for problem in &problems {
                writeln!(out, "{problem}").map_err(stdout_error)?;
            }
            if !repair {
                return Err(CliError::Failed(format!(
                    "{device}: {} problems{}",
                    problems.len(),
                    if problems.iter().any(|problem| problem.starts_with("journal zone")) {
                        "; `zonelab fs fsck --repair` keeps every journal record that checks"
                    } else {
                        ""
                    }
                )));
            }
            let dead: Vec<String> = dead.iter().map(u32::to_string).collect();
            writeln!(
                out,
                "{device}: repaired: a new journal generation holds {files} files; zones no kept record names \
                 (reclaimed at the next read-write mount): {}",
                if dead.is_empty() { "none".to_string() } else { dead.join(", ") }
            )
            .map_err(stdout_error)
        }
    }
}
