//! Where a zone's program units live on flash: which plane and channel, and which block of the plane.

use crate::divisor::Divisor;
use crate::{NandConfig, PhysicalZone, ProgramUnit, StripeStart};

/// One plane and the channel that reaches it, as indices into the device's resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Place {
    pub plane: usize,
    pub channel: usize,
}

/// The geometry of a zone on flash, derived once from the NAND configuration and the zone capacity.
#[derive(Clone, Debug)]
pub(super) struct Layout {
    nand: NandConfig,
    pub zone_cap_bytes: u64,
    /// The sizes a read divides by are `Divisor`s (`get` gives the number): the program unit, the page, the
    /// planes a zone stripes over, and the pages (as energy is counted) in one program unit.
    pub unit_bytes: Divisor,
    pub units_per_zone: u64,
    pub planes_per_zone: Divisor,
    /// Blocks a zone needs on each of its planes.
    pub blocks_per_zone_plane: u64,
    pub pages_per_unit: Divisor,
    pub page_bytes: Divisor,
    /// The place of each plane of each group of zones (`group * planes_per_zone + plane_in_zone`), worked out
    /// once: every flash read and program asks, and the arithmetic is a chain of divisions.
    places: Vec<Place>,
    /// Groups of channels and dies that zones take turns over.
    zone_groups: Divisor,
}

impl Layout {
    /// `page_bytes` of 0 counts one page per program unit.
    pub fn new(nand: &NandConfig, zone_cap_bytes: u64, page_bytes: u64, planes_per_zone: u32) -> Layout {
        let unit_bytes = nand.program_unit_bytes;
        let units_per_zone = zone_cap_bytes.div_ceil(unit_bytes);
        let planes_per_zone = u64::from(planes_per_zone);
        let page_bytes = if page_bytes == 0 { unit_bytes } else { page_bytes };
        let groups =
            (nand.channels / nand.channels_per_zone) * (nand.dies_per_channel / nand.dies_per_channel_per_zone);
        let places = (0..groups)
            .flat_map(|group| (0..planes_per_zone as u32).map(move |within| group_place(nand, group, within)))
            .collect();
        Layout {
            nand: nand.clone(),
            zone_cap_bytes,
            unit_bytes: Divisor::new(unit_bytes),
            units_per_zone,
            planes_per_zone: Divisor::new(planes_per_zone),
            blocks_per_zone_plane: units_per_zone
                .div_ceil(planes_per_zone)
                .div_ceil(u64::from(nand.block_program_units)),
            pages_per_unit: Divisor::new(unit_bytes.div_ceil(page_bytes)),
            page_bytes: Divisor::new(page_bytes),
            places,
            zone_groups: Divisor::new(u64::from(groups)),
        }
    }

    /// Planes and channels of the whole device.
    pub fn device_planes(&self) -> usize {
        (self.nand.channels * self.nand.dies_per_channel * self.nand.planes_per_die) as usize
    }

    pub fn device_channels(&self) -> usize {
        self.nand.channels as usize
    }

    pub fn block_units(&self) -> u64 {
        u64::from(self.nand.block_program_units)
    }

    pub fn blocks_per_zone(&self) -> u64 {
        self.planes_per_zone.get() * self.blocks_per_zone_plane
    }

    /// The unit that holds byte `offset_bytes` of a zone.
    pub fn unit_at(&self, offset_bytes: u64) -> ProgramUnit {
        ProgramUnit(self.unit_bytes.div(offset_bytes))
    }

    /// The page that holds byte `offset_bytes` of a zone.
    pub fn page_at(&self, offset_bytes: u64) -> u64 {
        self.page_bytes.div(offset_bytes)
    }

    /// The pages a zone's bytes before `end_bytes` lie in, counted from its first.
    pub fn pages_to(&self, end_bytes: u64) -> u64 {
        self.page_bytes.div_ceil(end_bytes)
    }

    /// The unit that holds a zone's `page`.
    pub fn unit_of_page(&self, page: u64) -> ProgramUnit {
        ProgramUnit(self.pages_per_unit.div(page))
    }

    /// Which page of its program unit a zone's `page` is.
    pub fn page_in_unit(&self, page: u64) -> u64 {
        self.pages_per_unit.rem(page)
    }

    /// How many of a zone's first `units` units fall on its `plane_in_zone`-th plane.
    pub fn units_on_plane(&self, units: u64, plane_in_zone: u64) -> u64 {
        self.planes_per_zone.div(units) + u64::from(plane_in_zone < self.planes_per_zone.rem(units))
    }

    /// The plane and channel of a physical zone's `unit`: units go round-robin over the zone's planes, the
    /// planes of one die first, then the next channel, then the next die on the same channels (ConfZNS's order;
    /// with one plane per die it is NVMeVirt's), from the zone's first plane or one rotated by the zone's index
    /// (`stripe-start`). Zones narrower than the device take turns over disjoint channel and die groups.
    #[inline]
    pub fn place(&self, zone: PhysicalZone, unit: ProgramUnit) -> Place {
        let rotation = match self.nand.stripe_start {
            StripeStart::FirstDie => 0,
            StripeStart::ByZone => u64::from(zone.0),
        };
        let within = self.planes_per_zone.rem(unit.0 + rotation);
        self.places[(self.zone_groups.rem(u64::from(zone.0)) * self.planes_per_zone.get() + within) as usize]
    }

    /// The index, over every block of the device physical zone by physical zone, of the block that holds a
    /// physical zone's `unit`.
    pub fn block_of(&self, zone: PhysicalZone, unit: ProgramUnit) -> usize {
        let plane_in_zone = self.planes_per_zone.rem(unit.0);
        let block = self.planes_per_zone.div(unit.0) / self.block_units();
        ((u64::from(zone.0) * self.planes_per_zone.get() + plane_in_zone) * self.blocks_per_zone_plane + block) as usize
    }
}

/// The place of the `within`-th plane of the zones of `group` (see `Layout::place`).
fn group_place(nand: &NandConfig, group: u32, within: u32) -> Place {
    let plane_in_die = within % nand.planes_per_die;
    let stripe = within / nand.planes_per_die;
    let channel_in_zone = stripe % nand.channels_per_zone;
    let die_in_zone = stripe / nand.channels_per_zone;
    let channel_groups = nand.channels / nand.channels_per_zone;
    let channel = (group % channel_groups) * nand.channels_per_zone + channel_in_zone;
    let die = (group / channel_groups) * nand.dies_per_channel_per_zone + die_in_zone;
    let plane = (die * nand.channels + channel) * nand.planes_per_die + plane_in_die;
    Place { plane: plane as usize, channel: channel as usize }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 channels x 2 dies x 2 planes; a zone spans 2 channels and 1 die (4 planes), so zones take turns over
    /// 4 groups. Expected places worked out by hand from the order `place` documents.
    #[test]
    fn units_go_round_the_planes_of_their_zones_group() {
        let mut nand = crate::model::tests::config().nand;
        (nand.channels, nand.dies_per_channel, nand.planes_per_die) = (4, 2, 2);
        (nand.channels_per_zone, nand.dies_per_channel_per_zone) = (2, 1);
        let layout = Layout::new(&nand, 1 << 30, 0, 4);
        let at = |layout: &Layout, zone: u32, unit: u64| {
            let place = layout.place(PhysicalZone(zone), ProgramUnit(unit));
            (place.plane, place.channel)
        };
        let first_zone: Vec<_> = (0..5).map(|unit| at(&layout, 0, unit)).collect();
        assert_eq!(first_zone, [(0, 0), (1, 0), (2, 1), (3, 1), (0, 0)], "planes of a die, then the next channel");
        assert_eq!(at(&layout, 1, 0), (4, 2), "the second group: the other two channels");
        assert_eq!(at(&layout, 2, 0), (8, 0), "the third group: the second die");
        assert_eq!(at(&layout, 5, 3), at(&layout, 1, 3), "groups repeat every 4 zones");
        nand.stripe_start = StripeStart::ByZone;
        let rotated = Layout::new(&nand, 1 << 30, 0, 4);
        assert_eq!(at(&rotated, 1, 0), (5, 2), "zone 1 starts one plane further round");
    }
}
