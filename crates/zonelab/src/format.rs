//! How `report` and `info` print: zonelab's text and JSON, and byte-for-byte copies of util-linux blkzone's
//! and nvme-cli's report formats, so that scripts written for those tools (fio's `t/zbd` among them) parse
//! zonelab's output unchanged.

use std::io::{self, Write};

use clap::ValueEnum;
use serde_json::json;
use zonelab_zns::{Image, ZoneDescriptor, ZoneReport, ZoneState, ZONE_TYPE_SEQUENTIAL_WRITE_REQUIRED};

#[derive(Clone, Copy, ValueEnum)]
pub enum ReportFormat {
    /// A table for people.
    Text,
    /// util-linux `blkzone report`: 512-byte sectors, write pointer relative to the zone start.
    Blkzone,
    /// nvme-cli `nvme zns report-zones`: LBAs, raw state byte.
    Nvme,
    /// JSON with every field in LBAs.
    Json,
}

pub fn report(lba_size: u32, report: &ZoneReport, format: ReportFormat, out: &mut impl Write) -> io::Result<()> {
    match format {
        ReportFormat::Text => text(report, out),
        ReportFormat::Blkzone => {
            report.zones.iter().try_for_each(|zone| writeln!(out, "{}", blkzone_line(zone, lba_size)))
        }
        ReportFormat::Nvme => {
            writeln!(out, "nr_zones: {}", report.nr_zones)?;
            report.zones.iter().try_for_each(|zone| writeln!(out, "{}", nvme_line(zone)))
        }
        ReportFormat::Json => {
            let zones: Vec<_> = report
                .zones
                .iter()
                .map(|zone| {
                    json!({
                        "index": zone.index,
                        "start_lba": zone.start_lba,
                        "size_lba": zone.size_lba,
                        "capacity_lba": zone.capacity_lba,
                        "wp_lba": zone.wp_lba(),
                        "state": zone.state.long_name(),
                        "attrs": attr_names(zone.attrs),
                    })
                })
                .collect();
            let document = json!({ "lba_size": lba_size, "nr_zones": report.nr_zones, "zones": zones });
            writeln!(out, "{document}")
        }
    }
}

fn attr_names(attrs: u8) -> Vec<&'static str> {
    use zonelab_zns::zone_attrs::*;
    [(ZFC, "zfc"), (FZR, "fzr"), (RZR, "rzr"), (ZRWAV, "zrwav"), (ZDEV, "zdev")]
        .into_iter()
        .filter(|(bit, _)| attrs & bit != 0)
        .map(|(_, name)| name)
        .collect()
}

fn text(report: &ZoneReport, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "{:>6}  {:>14}  {:<13}  {:>14}  {:>12}", "zone", "start_lba", "state", "wp_lba", "capacity_lba")?;
    for zone in &report.zones {
        let wp = zone.wp_lba().map_or_else(|| "-".to_string(), |wp| wp.to_string());
        writeln!(
            out,
            "{:>6}  {:>14}  {:<13}  {:>14}  {:>12}",
            zone.index,
            zone.start_lba,
            zone.state.long_name(),
            wp,
            zone.capacity_lba
        )?;
    }
    writeln!(out, "nr_zones: {}", report.nr_zones)
}

/// blkzone's condition abbreviation: libzbd's, except "of" for offline.
fn blkzone_condition(state: ZoneState) -> &'static str {
    match state {
        ZoneState::Offline => "of",
        other => other.short_name(),
    }
}

/// One line of `blkzone report`: `  start: 0x%09x, len 0x%06x, cap 0x%06x, wptr 0x%06x reset:%u non-seq:%u,
/// zcond:%2u(%s) [type: %u(%s)]`, in 512-byte sectors, with `N/A` for the write pointer of a FULL, READ_ONLY
/// or OFFLINE zone.
pub fn blkzone_line(zone: &ZoneDescriptor, lba_size: u32) -> String {
    let sectors = |lbas: u64| lbas * u64::from(lba_size / 512);
    let wptr = match zone.wp_lba() {
        Some(wp) => format!("0x{:06x}", sectors(wp - zone.start_lba)),
        None => "N/A".to_string(),
    };
    format!(
        "  start: 0x{:09x}, len 0x{:06x}, cap 0x{:06x}, wptr {} reset:{} non-seq:{}, zcond:{:2}({}) [type: {}({})]",
        sectors(zone.start_lba),
        sectors(zone.size_lba),
        sectors(zone.capacity_lba),
        wptr,
        u8::from(zone.attrs & zonelab_zns::zone_attrs::RZR != 0),
        0,
        zone.state as u8,
        blkzone_condition(zone.state),
        ZONE_TYPE_SEQUENTIAL_WRITE_REQUIRED,
        "SEQ_WRITE_REQUIRED"
    )
}

/// C's `%#-Nx`: hex with a `0x` prefix except for zero, left-aligned in N columns.
fn c_alt_hex(value: u64, width: usize) -> String {
    let text = if value == 0 { "0".to_string() } else { format!("{value:#x}") };
    format!("{text:<width$}")
}

/// One line of `nvme zns report-zones`: `SLBA: %#-10x WP: %#-10x Cap: %#-10x State: %#-4x Type: %#-4x
/// Attrs: %#-4x AttrsInfo: %#-4x`, State being the raw `zs` byte and WP all-ones where NVMe has no write pointer.
pub fn nvme_line(zone: &ZoneDescriptor) -> String {
    format!(
        "SLBA: {} WP: {} Cap: {} State: {} Type: {} Attrs: {} AttrsInfo: {}",
        c_alt_hex(zone.start_lba, 10),
        c_alt_hex(zone.wp_lba, 10),
        c_alt_hex(zone.capacity_lba, 10),
        c_alt_hex(u64::from(zone.state as u8) << 4, 4),
        c_alt_hex(u64::from(ZONE_TYPE_SEQUENTIAL_WRITE_REQUIRED), 4),
        c_alt_hex(u64::from(zone.attrs), 4),
        c_alt_hex(0, 4)
    )
}

pub fn info(image: &Image, json: bool, out: &mut impl Write) -> io::Result<()> {
    let namespace = image.namespace();
    let geometry = namespace.geometry();
    let config = namespace.config();
    let mut counts = [0u64; 16];
    for zone in 0..geometry.zones {
        counts[namespace.zone(zone).state as usize] += 1;
    }
    let limit = |value: u32| if value == 0 { "unlimited".to_string() } else { value.to_string() };
    let bytes = |lbas: u64| lbas << geometry.lba_shift;
    if json {
        let states: serde_json::Map<String, serde_json::Value> = ZoneState::ALL
            .iter()
            .map(|state| (state.long_name().to_string(), json!(counts[*state as usize])))
            .collect();
        let document = json!({
            "image": image.path(),
            "store": image.store_kind().name(),
            "store_persists": image.store_kind().what_persists(),
            "device_model": device_name(image),
            "lba_size": geometry.lba_size,
            "nr_zones": geometry.zones,
            "zone_size_lba": geometry.zone_size_lba,
            "zone_cap_lba": geometry.zone_cap_lba,
            "nsze_lba": geometry.nsze_lba,
            "zone_size_bytes": bytes(geometry.zone_size_lba),
            "zone_cap_bytes": bytes(geometry.zone_cap_lba),
            "max_open": geometry.max_open,
            "max_active": geometry.max_active,
            "zasl_bytes": config.zasl.bytes(),
            "mdts_bytes": config.mdts.bytes(),
            "open_zones": namespace.open_zones(),
            "active_zones": namespace.active_zones(),
            "zones_by_state": states,
            "auto_close": config.auto_close,
            "cross_zone_reads": config.cross_zone_reads,
            "namespaces": namespaces(image).iter().map(|namespace| namespace.json()).collect::<Vec<_>>(),
        });
        return writeln!(out, "{document}");
    }
    let store = image.store_kind();
    writeln!(out, "image:        {} ({} store: {})", image.path().display(), store.name(), store.what_persists())?;
    if let Some(name) = device_name(image) {
        writeln!(out, "device model: {name}")?;
    }
    writeln!(out, "lba size:     {} bytes", geometry.lba_size)?;
    writeln!(
        out,
        "zones:        {} x {} LBAs ({}), capacity {} LBAs ({})",
        geometry.zones,
        geometry.zone_size_lba,
        zonelab_zns::ByteSize(bytes(geometry.zone_size_lba)),
        geometry.zone_cap_lba,
        zonelab_zns::ByteSize(bytes(geometry.zone_cap_lba))
    )?;
    writeln!(out, "namespace:    {} LBAs ({})", geometry.nsze_lba, zonelab_zns::ByteSize(bytes(geometry.nsze_lba)))?;
    writeln!(out, "max open:     {}", limit(geometry.max_open))?;
    writeln!(out, "max active:   {}", limit(geometry.max_active))?;
    let size_or =
        |size: zonelab_zns::ByteSize, zero: &str| if size.bytes() == 0 { zero.to_string() } else { size.to_string() };
    writeln!(out, "zasl:         {}", size_or(config.zasl, "mdts"))?;
    writeln!(out, "mdts:         {}", size_or(config.mdts, "unlimited"))?;
    writeln!(out, "open zones:   {}", namespace.open_zones())?;
    writeln!(out, "active zones: {}", namespace.active_zones())?;
    let by_state: Vec<String> = ZoneState::ALL
        .iter()
        .filter(|state| counts[**state as usize] != 0)
        .map(|state| format!("{} {}", counts[*state as usize], state.long_name()))
        .collect();
    writeln!(out, "zone states:  {}", by_state.join(", "))?;
    let listed: Vec<String> = namespaces(image).iter().map(ImageNamespace::line).collect();
    writeln!(out, "namespaces:   {}", listed.join("; "))
}

/// A namespace of an image's device, as `info` lists it.
enum ImageNamespace {
    /// The zoned namespace, which the rest of `info` describes.
    Zoned {
        nsid: u32,
        nsze_lba: u64,
    },
    Conventional {
        nsid: u32,
        config: Box<zonelab_device::ConventionalNamespaceConfig>,
    },
}

impl ImageNamespace {
    fn json(&self) -> serde_json::Value {
        match self {
            ImageNamespace::Zoned { nsid, nsze_lba } => json!({"nsid": nsid, "kind": "zoned", "nsze_lba": nsze_lba}),
            ImageNamespace::Conventional { nsid, config } => {
                let lba_size = u64::from(config.lba_size);
                json!({
                    "nsid": nsid,
                    "kind": "conventional",
                    "nsze_lba": config.capacity.bytes() / lba_size,
                    "lba_size": lba_size,
                    "mdts_bytes": config.mdts.bytes(),
                    "over_provisioning": config.over_provisioning,
                    "spec": format!(",ns={nsid}"),
                })
            }
        }
    }

    fn line(&self) -> String {
        match self {
            ImageNamespace::Zoned { nsid, .. } => format!("{nsid} zoned (above)"),
            ImageNamespace::Conventional { nsid, config } => format!(
                "{nsid} conventional, {} in {}-byte LBAs, {:.0} % over-provisioning (IMAGE,ns={nsid})",
                config.capacity,
                config.lba_size,
                config.over_provisioning * 100.0
            ),
        }
    }
}

/// The namespaces of an image's device, by ID: the zoned one, and the conventional one its model has beside it.
fn namespaces(image: &Image) -> Vec<ImageNamespace> {
    let geometry = image.namespace().geometry();
    let model = image.device();
    let zoned_nsid = model.and_then(|table| table.get("zoned-nsid")?.as_integer()).unwrap_or(1) as u32;
    let mut listed = vec![ImageNamespace::Zoned { nsid: zoned_nsid, nsze_lba: geometry.nsze_lba }];
    let conventional: Option<zonelab_device::ConventionalNamespaceConfig> =
        model.and_then(|table| table.get("conventional")?.clone().try_into().ok());
    if let Some(config) = conventional.map(Box::new) {
        let nsid = config.nsid;
        listed.push(ImageNamespace::Conventional { nsid, config });
    }
    listed.sort_by_key(|namespace| match namespace {
        ImageNamespace::Zoned { nsid, .. } | ImageNamespace::Conventional { nsid, .. } => *nsid,
    });
    listed
}

/// The name of the device model an image was created from (`--preset`).
fn device_name(image: &Image) -> Option<&str> {
    image.device()?.get("name")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(state: ZoneState, start_lba: u64, wp_lba: u64) -> ZoneDescriptor {
        ZoneDescriptor { index: 0, state, attrs: 0, start_lba, size_lba: 0x8000, capacity_lba: 0x6000, wp_lba }
    }

    #[test]
    fn blkzone_lines_match_util_linux() {
        assert_eq!(
            blkzone_line(&zone(ZoneState::ImplicitlyOpened, 0x8000, 0x8010), 4096),
            "  start: 0x000040000, len 0x040000, cap 0x030000, wptr 0x000080 reset:0 non-seq:0, zcond: 2(oi) [type: 2(SEQ_WRITE_REQUIRED)]"
        );
        assert_eq!(
            blkzone_line(&zone(ZoneState::Offline, 0, u64::MAX), 512),
            "  start: 0x000000000, len 0x008000, cap 0x006000, wptr N/A reset:0 non-seq:0, zcond:15(of) [type: 2(SEQ_WRITE_REQUIRED)]"
        );
    }

    #[test]
    fn nvme_lines_match_nvme_cli() {
        assert_eq!(
            nvme_line(&zone(ZoneState::Empty, 0, 0)),
            "SLBA: 0          WP: 0          Cap: 0x6000     State: 0x10 Type: 0x2  Attrs: 0    AttrsInfo: 0   "
        );
        assert_eq!(
            nvme_line(&zone(ZoneState::Full, 0x8000, u64::MAX)),
            "SLBA: 0x8000     WP: 0xffffffffffffffff Cap: 0x6000     State: 0xe0 Type: 0x2  Attrs: 0    AttrsInfo: 0   "
        );
    }
}
