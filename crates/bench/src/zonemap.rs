//! Zone-utilization maps: which files share which zones of a zonedfs, how much of each zone is still live, and
//! a picture of it (zns-tools' zone maps, exact here because the file system's own records give every extent).

use std::path::Path;

use zonelab_zns::Geometry;
use zonelab_zonedfs::{FileInfo, ZoneInfo};

use crate::plot::{plot_zone_map, ZoneStrip};

/// A used zone of the map: the file system's view of it, the files whose bytes it holds (file index, bytes) in
/// the order they first appear in it, and their extents as (offset in the zone, bytes, file index).
pub struct MappedZone {
    pub info: ZoneInfo,
    pub files: Vec<(usize, u64)>,
    pub extents: Vec<(u64, u64, usize)>,
}

/// Every zone that holds written data, with the files whose extents (or WAL zones) it holds.
pub fn zone_map(files: &[FileInfo], zones: &[ZoneInfo], geometry: &Geometry) -> Vec<MappedZone> {
    let block = u64::from(geometry.lba_size);
    let mut map: Vec<MappedZone> = zones
        .iter()
        .filter(|zone| zone.written_bytes > 0)
        .map(|zone| MappedZone { info: zone.clone(), files: Vec::new(), extents: Vec::new() })
        .collect();
    let index_of: std::collections::HashMap<u32, usize> =
        map.iter().enumerate().map(|(index, zone)| (zone.info.zone, index)).collect();
    let mut place = |zone: u32, offset: u64, bytes: u64, file: usize| {
        let Some(&index) = index_of.get(&zone) else { return };
        let mapped = &mut map[index];
        mapped.extents.push((offset, bytes, file));
        match mapped.files.iter_mut().find(|(owner, _)| *owner == file) {
            Some((_, held)) => *held += bytes,
            None => mapped.files.push((file, bytes)),
        }
    };
    for (file, info) in files.iter().enumerate() {
        for extent in &info.extents {
            let zone = geometry.zone_of(extent.lba);
            let offset = (extent.lba - geometry.zone_start_lba(zone)) * block;
            place(zone, offset, extent.len_bytes, file);
        }
        // A WAL's zones are its own, written from their start.
        for &zone in info.wal.iter().flat_map(|wal| &wal.zones) {
            let written = zones.iter().find(|info| info.zone == zone).map_or(0, |info| info.written_bytes);
            place(zone, 0, written, file);
        }
    }
    map
}

/// What a map comes to: zones in use, how many files a zone holds on average and at most, and how much of the
/// written data is still live.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct MapSummary {
    pub zones_in_use: usize,
    pub shared_zones: usize,
    pub files_per_zone: f64,
    pub most_files_in_a_zone: usize,
    pub live_fraction: f64,
}

pub fn summarize(map: &[MappedZone]) -> MapSummary {
    let written: u64 = map.iter().map(|zone| zone.info.written_bytes).sum();
    let live: u64 = map.iter().map(|zone| zone.info.live_bytes).sum();
    MapSummary {
        zones_in_use: map.len(),
        shared_zones: map.iter().filter(|zone| zone.files.len() > 1).count(),
        files_per_zone: map.iter().map(|zone| zone.files.len()).sum::<usize>() as f64 / map.len().max(1) as f64,
        most_files_in_a_zone: map.iter().map(|zone| zone.files.len()).max().unwrap_or(0),
        live_fraction: live as f64 / written.max(1) as f64,
    }
}

/// Draws `map` into the PNG `path`.
pub fn draw(path: &Path, title: &str, map: &[MappedZone], files: &[FileInfo]) -> Result<(), String> {
    let strips: Vec<ZoneStrip> = map
        .iter()
        .map(|zone| ZoneStrip {
            label: format!("zone {}", zone.info.zone),
            capacity: zone.info.capacity_bytes,
            written: zone.info.written_bytes,
            extents: zone.extents.clone(),
        })
        .collect();
    let names: Vec<String> = files.iter().map(|file| file.name.clone()).collect();
    plot_zone_map(path, title, &strips, &names)
}
