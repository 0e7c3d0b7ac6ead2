//! Zone states, zone management actions, report filters and the zone report, with NVMe's encodings and the
//! names libzbd, blkzone and nvme-cli use for them (docs/semantics.md sections 0, 5 and 9).

use std::fmt;
use std::str::FromStr;

use crate::Status;

/// The state of a zone; the discriminant is the NVMe ZS value (the report's `zs` byte holds it in bits 7:4),
/// which equals Linux `BLK_ZONE_COND_*` and libzbd's `ZBD_ZONE_COND_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ZoneState {
    Empty = 0x1,
    ImplicitlyOpened = 0x2,
    ExplicitlyOpened = 0x3,
    Closed = 0x4,
    ReadOnly = 0xd,
    Full = 0xe,
    Offline = 0xf,
}

impl ZoneState {
    pub const ALL: [ZoneState; 7] = [
        ZoneState::Empty,
        ZoneState::ImplicitlyOpened,
        ZoneState::ExplicitlyOpened,
        ZoneState::Closed,
        ZoneState::ReadOnly,
        ZoneState::Full,
        ZoneState::Offline,
    ];

    pub const fn from_raw(value: u8) -> Option<ZoneState> {
        Some(match value {
            0x1 => ZoneState::Empty,
            0x2 => ZoneState::ImplicitlyOpened,
            0x3 => ZoneState::ExplicitlyOpened,
            0x4 => ZoneState::Closed,
            0xd => ZoneState::ReadOnly,
            0xe => ZoneState::Full,
            0xf => ZoneState::Offline,
            _ => return None,
        })
    }

    /// Holds an open resource: IMPL_OPEN or EXPL_OPEN.
    pub const fn is_open(self) -> bool {
        matches!(self, ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened)
    }

    /// Holds an active resource: open or CLOSED.
    pub const fn is_active(self) -> bool {
        matches!(self, ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened | ZoneState::Closed)
    }

    /// Whether a report shows a write pointer for this state (NVMe reports all-ones otherwise).
    pub const fn has_valid_wp(self) -> bool {
        !matches!(self, ZoneState::Full | ZoneState::ReadOnly | ZoneState::Offline)
    }

    /// libzbd's long name (`zbd_zone_cond_str`), also used in zonelab's JSON.
    pub const fn long_name(self) -> &'static str {
        match self {
            ZoneState::Empty => "empty",
            ZoneState::ImplicitlyOpened => "open-implicit",
            ZoneState::ExplicitlyOpened => "open-explicit",
            ZoneState::Closed => "closed",
            ZoneState::ReadOnly => "read-only",
            ZoneState::Full => "full",
            ZoneState::Offline => "offline",
        }
    }

    /// libzbd's short name.
    pub const fn short_name(self) -> &'static str {
        match self {
            ZoneState::Empty => "em",
            ZoneState::ImplicitlyOpened => "oi",
            ZoneState::ExplicitlyOpened => "oe",
            ZoneState::Closed => "cl",
            ZoneState::ReadOnly => "ro",
            ZoneState::Full => "fu",
            ZoneState::Offline => "ol",
        }
    }
}

impl fmt::Display for ZoneState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.long_name())
    }
}

/// Why a state name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown zone state {0:?}: expected one of empty implicit-open explicit-open closed full read-only offline (or em oi oe cl fu ro ol)")]
pub struct ParseZoneStateError(String);

impl FromStr for ZoneState {
    type Err = ParseZoneStateError;

    /// Accepts zonelab's CLI names, libzbd's long names and libzbd's short names.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "empty" | "em" => ZoneState::Empty,
            "implicit-open" | "open-implicit" | "oi" => ZoneState::ImplicitlyOpened,
            "explicit-open" | "open-explicit" | "oe" => ZoneState::ExplicitlyOpened,
            "closed" | "cl" => ZoneState::Closed,
            "full" | "fu" => ZoneState::Full,
            "read-only" | "ro" => ZoneState::ReadOnly,
            "offline" | "ol" => ZoneState::Offline,
            _ => return Err(ParseZoneStateError(text.to_string())),
        })
    }
}

/// Zone Send Action (ZSA) of Zone Management Send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ZoneSendAction {
    Close = 0x01,
    Finish = 0x02,
    Open = 0x03,
    Reset = 0x04,
    Offline = 0x05,
    SetZoneDescriptorExtension = 0x10,
    ZrwaFlush = 0x11,
}

impl ZoneSendAction {
    /// An undefined ZSA is Invalid Field (QEMU's default branch).
    pub const fn from_raw(value: u8) -> Result<ZoneSendAction, Status> {
        Ok(match value {
            0x01 => ZoneSendAction::Close,
            0x02 => ZoneSendAction::Finish,
            0x03 => ZoneSendAction::Open,
            0x04 => ZoneSendAction::Reset,
            0x05 => ZoneSendAction::Offline,
            0x10 => ZoneSendAction::SetZoneDescriptorExtension,
            0x11 => ZoneSendAction::ZrwaFlush,
            _ => return Err(Status::InvalidField),
        })
    }
}

/// Zone Receive Action Specific Field of a Report Zones: which zones the report lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum ReportFilter {
    #[default]
    All = 0,
    Empty = 1,
    ImplicitlyOpened = 2,
    ExplicitlyOpened = 3,
    Closed = 4,
    Full = 5,
    ReadOnly = 6,
    Offline = 7,
}

impl ReportFilter {
    /// ZRASF above 7 is Invalid Field.
    pub const fn from_raw(value: u8) -> Result<ReportFilter, Status> {
        Ok(match value {
            0 => ReportFilter::All,
            1 => ReportFilter::Empty,
            2 => ReportFilter::ImplicitlyOpened,
            3 => ReportFilter::ExplicitlyOpened,
            4 => ReportFilter::Closed,
            5 => ReportFilter::Full,
            6 => ReportFilter::ReadOnly,
            7 => ReportFilter::Offline,
            _ => return Err(Status::InvalidField),
        })
    }

    pub const fn only(state: ZoneState) -> ReportFilter {
        match state {
            ZoneState::Empty => ReportFilter::Empty,
            ZoneState::ImplicitlyOpened => ReportFilter::ImplicitlyOpened,
            ZoneState::ExplicitlyOpened => ReportFilter::ExplicitlyOpened,
            ZoneState::Closed => ReportFilter::Closed,
            ZoneState::Full => ReportFilter::Full,
            ZoneState::ReadOnly => ReportFilter::ReadOnly,
            ZoneState::Offline => ReportFilter::Offline,
        }
    }

    pub fn matches(self, state: ZoneState) -> bool {
        self == ReportFilter::All || self == ReportFilter::only(state)
    }
}

/// Zone type Sequential Write Required, the only type a ZNS namespace has.
pub const ZONE_TYPE_SEQUENTIAL_WRITE_REQUIRED: u8 = 0x2;

/// Zone attribute bits (`za`).
pub mod zone_attrs {
    /// Zone Finished by Controller.
    pub const ZFC: u8 = 1 << 0;
    /// Finish Zone Recommended.
    pub const FZR: u8 = 1 << 1;
    /// Reset Zone Recommended.
    pub const RZR: u8 = 1 << 2;
    /// ZRWA valid.
    pub const ZRWAV: u8 = 1 << 3;
    /// Zone Descriptor Extension valid.
    pub const ZDEV: u8 = 1 << 7;
}

/// One zone as a report describes it. `wp_lba` is NVMe's view: all-ones for FULL, READ_ONLY and OFFLINE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneDescriptor {
    pub index: u32,
    pub state: ZoneState,
    pub attrs: u8,
    pub start_lba: u64,
    pub size_lba: u64,
    pub capacity_lba: u64,
    pub wp_lba: u64,
}

/// What a report shows as the write pointer of a zone without one.
pub const WP_INVALID: u64 = u64::MAX;

impl ZoneDescriptor {
    /// The write pointer, or None where NVMe reports all-ones.
    pub fn wp_lba(&self) -> Option<u64> {
        (self.wp_lba != WP_INVALID).then_some(self.wp_lba)
    }

    /// Whether the zone's last written blocks may read as zeros: a power loss that caught a FULL zone's write
    /// buffer leaves it FULL with Zone Finished by Controller (`lose_unwritten_data`). Anywhere else, a block
    /// below the write pointer holds what was written to it.
    pub fn may_have_lost_tail(&self) -> bool {
        self.state == ZoneState::Full && self.attrs & zone_attrs::ZFC != 0
    }
}

/// Size of the report header and of one zone descriptor, in bytes.
pub const REPORT_HEADER_BYTES: usize = 64;
pub const ZONE_DESCRIPTOR_BYTES: usize = 64;

/// The result of Report Zones: `nr_zones` follows NVMe's rule for the Partial bit (section 5): without it,
/// every matching zone from the start zone to the end of the namespace; with it, the descriptors returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneReport {
    pub nr_zones: u64,
    pub zones: Vec<ZoneDescriptor>,
}

impl ZoneReport {
    /// Lays the report out as the device returns it: a 64-byte header (`nr_zones`, le64) and 64-byte
    /// descriptors, the rest of `buf` zeroed. Descriptors that do not fit are left out.
    pub fn encode_into(&self, buf: &mut [u8]) {
        buf.fill(0);
        buf[..8].copy_from_slice(&self.nr_zones.to_le_bytes());
        for (zone, slot) in self.zones.iter().zip(buf[REPORT_HEADER_BYTES..].chunks_exact_mut(ZONE_DESCRIPTOR_BYTES)) {
            slot[0] = ZONE_TYPE_SEQUENTIAL_WRITE_REQUIRED;
            slot[1] = (zone.state as u8) << 4;
            slot[2] = zone.attrs;
            slot[8..16].copy_from_slice(&zone.capacity_lba.to_le_bytes());
            slot[16..24].copy_from_slice(&zone.start_lba.to_le_bytes());
            slot[24..32].copy_from_slice(&zone.wp_lba.to_le_bytes());
        }
    }

    /// Reads a report buffer back, as a host does. `zone_size_lba` recovers each descriptor's index and size,
    /// which the descriptor itself does not carry. Returns None for a descriptor whose state is undefined.
    pub fn decode(buf: &[u8], zone_size_lba: u64) -> Option<ZoneReport> {
        let field = crate::codec::u64_le;
        let nr_zones = field(buf, 0);
        let fits = (buf.len().saturating_sub(REPORT_HEADER_BYTES)) / ZONE_DESCRIPTOR_BYTES;
        let listed = usize::try_from(nr_zones).unwrap_or(usize::MAX).min(fits);
        let zones = buf[REPORT_HEADER_BYTES..]
            .chunks_exact(ZONE_DESCRIPTOR_BYTES)
            .take(listed)
            .map(|slot| {
                let start_lba = field(slot, 16);
                Some(ZoneDescriptor {
                    index: u32::try_from(start_lba / zone_size_lba).ok()?,
                    state: ZoneState::from_raw(slot[1] >> 4)?,
                    attrs: slot[2],
                    start_lba,
                    size_lba: zone_size_lba,
                    capacity_lba: field(slot, 8),
                    wp_lba: field(slot, 24),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(ZoneReport { nr_zones, zones })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_parse_in_every_spelling() {
        for state in ZoneState::ALL {
            assert_eq!(state.long_name().parse::<ZoneState>(), Ok(state));
            assert_eq!(state.short_name().parse::<ZoneState>(), Ok(state));
            assert_eq!(ZoneState::from_raw(state as u8), Some(state));
        }
        assert_eq!("implicit-open".parse::<ZoneState>(), Ok(ZoneState::ImplicitlyOpened));
        assert_eq!("explicit-open".parse::<ZoneState>(), Ok(ZoneState::ExplicitlyOpened));
        assert!("opened".parse::<ZoneState>().is_err());
    }

    #[test]
    fn undefined_actions_and_filters_are_invalid_field() {
        assert_eq!(ZoneSendAction::from_raw(0x07), Err(Status::InvalidField));
        assert_eq!(ReportFilter::from_raw(8), Err(Status::InvalidField));
        assert_eq!(ReportFilter::from_raw(5), Ok(ReportFilter::Full));
    }

    #[test]
    fn report_encoding_round_trips() {
        let report = ZoneReport {
            nr_zones: 5,
            zones: vec![
                ZoneDescriptor {
                    index: 1,
                    state: ZoneState::ImplicitlyOpened,
                    attrs: 0,
                    start_lba: 64,
                    size_lba: 64,
                    capacity_lba: 48,
                    wp_lba: 70,
                },
                ZoneDescriptor {
                    index: 2,
                    state: ZoneState::Full,
                    attrs: zone_attrs::ZFC,
                    start_lba: 128,
                    size_lba: 64,
                    capacity_lba: 48,
                    wp_lba: WP_INVALID,
                },
            ],
        };
        let mut buf = vec![0xffu8; 64 * 3];
        report.encode_into(&mut buf);
        assert_eq!(buf[64 + 1], 0x20, "zs holds the state in bits 7:4");
        assert_eq!(buf[64], ZONE_TYPE_SEQUENTIAL_WRITE_REQUIRED);
        let decoded = ZoneReport::decode(&buf, 64).expect("decodes");
        assert_eq!(decoded, report);
    }
}
