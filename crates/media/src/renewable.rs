//! ReZNS's renewable zones (seed 002, Algorithm 1): logical zones map to physical zones through extents, a reset
//! of a zone with much capacity left keeps its still-erased tail in a spare list instead of erasing it, and new
//! zones are composed from spare tails before fresh physical zones are used.
//!
//! Only the flash side is modelled here; what the host sees (zone states, write pointers, data) never depends on
//! the mapping.

use std::collections::VecDeque;

/// A run of a logical zone's program units held by one physical zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Extent {
    /// First logical unit of the run.
    logical: u64,
    physical_zone: u32,
    /// The physical unit that holds `logical`.
    physical: u64,
}

/// Who holds a physical zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    /// Erased, unused.
    Free,
    /// Part of a logical zone's extents.
    Zone(u32),
    /// In the spare list: its units from `used` on are still erased.
    Spare,
}

#[derive(Clone, Copy, Debug)]
struct PhysicalZone {
    /// Units programmed or handed out from the start; the rest is erased.
    used: u64,
    holder: Holder,
}

/// What a reset asks the flash to erase: whole physical zones, waited for or in the background.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErasePlan {
    pub inline: Vec<u32>,
    pub deferred: Vec<u32>,
}

/// Counts of what the renewable mapping did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RenewableStats {
    /// Resets that kept the zone's tail in the spare list (Rzones).
    pub renewed_resets: u64,
    /// Resets that erased the zone (Nzones).
    pub normal_resets: u64,
    /// Extents taken from the spare list.
    pub spare_reuses: u64,
    /// Spare entries ReGC released, erasing them.
    pub regc_releases: u64,
    /// Physical zones beyond the namespace's count that composing zones needed (the mapping has no relocation,
    /// so dead prefixes can use up the spare capacity; a run that needs any says so here).
    pub overflow_zones: u64,
    pub spare_zones: u64,
}

/// The renewable mapping of one device.
#[derive(Clone, Debug)]
pub struct RenewableMap {
    units_per_zone: u64,
    /// A reset keeps the zone when more than this many units are unused (the paper's 25 %).
    renew_above_units: u64,
    /// ReGC runs when the spare list holds more than this many zones (the paper's half of all zones).
    spare_limit: usize,
    physical: Vec<PhysicalZone>,
    extents: Vec<Vec<Extent>>,
    /// Spare physical zones, most remaining units first; ties by zone number.
    spare: Vec<u32>,
    free: VecDeque<u32>,
    stats: RenewableStats,
}

impl RenewableMap {
    pub fn new(zones: u32, units_per_zone: u64, renew_above_fraction: f64) -> RenewableMap {
        RenewableMap {
            units_per_zone,
            renew_above_units: (units_per_zone as f64 * renew_above_fraction).floor() as u64,
            spare_limit: zones as usize / 2,
            physical: vec![PhysicalZone { used: 0, holder: Holder::Free }; zones as usize],
            extents: vec![Vec::new(); zones as usize],
            spare: Vec::new(),
            free: (0..zones).collect(),
            stats: RenewableStats::default(),
        }
    }

    /// Physical zones in use, including any overflow.
    pub fn physical_zones(&self) -> usize {
        self.physical.len()
    }

    pub fn stats(&self) -> RenewableStats {
        RenewableStats { spare_zones: self.spare.len() as u64, ..self.stats.clone() }
    }

    /// The physical zone and unit of a logical zone's `unit`, mapping it first if it is past the zone's
    /// extents. Units are handed out in order, so a zone's extents cover its units from 0 without gaps.
    pub fn locate(&mut self, zone: u32, unit: u64) -> (u32, u64) {
        loop {
            if let Some(found) = self.lookup(zone, unit) {
                let entry = &mut self.physical[found.0 as usize];
                entry.used = entry.used.max(found.1 + 1);
                return found;
            }
            self.extend(zone);
        }
    }

    /// Where a mapped unit lives; None for a unit the zone has not reached.
    pub fn lookup(&self, zone: u32, unit: u64) -> Option<(u32, u64)> {
        let extents = &self.extents[zone as usize];
        let index = extents.partition_point(|extent| extent.logical <= unit).checked_sub(1)?;
        let extent = extents[index];
        let physical = extent.physical + (unit - extent.logical);
        (physical < self.units_per_zone).then_some((extent.physical_zone, physical))
    }

    /// Gives the zone one more extent: the spare zone with the most erased units, else a free zone, else a new
    /// (overflow) one.
    fn extend(&mut self, zone: u32) {
        let extents = &self.extents[zone as usize];
        let logical = extents.last().map_or(0, |last| last.logical + (self.units_per_zone - last.physical));
        let physical_zone = if self.spare.is_empty() {
            self.free.pop_front().unwrap_or_else(|| {
                self.stats.overflow_zones += 1;
                self.physical.push(PhysicalZone { used: 0, holder: Holder::Free });
                (self.physical.len() - 1) as u32
            })
        } else {
            self.stats.spare_reuses += 1;
            self.spare.remove(0)
        };
        let entry = &mut self.physical[physical_zone as usize];
        entry.holder = Holder::Zone(zone);
        let physical = entry.used;
        self.extents[zone as usize].push(Extent { logical, physical_zone, physical });
    }

    /// A host reset of a zone: Algorithm 1's `reset_zone`. The physical zone that holds the write frontier is
    /// kept as a spare when more than the threshold of a zone is still erased in it (ReGC first releases the
    /// spares with least room if the list is over its limit); the zone's other physical zones are full of
    /// dead data and are erased in the background. Otherwise every physical zone of the zone is erased before
    /// the reset completes, as on a conventional ZNS SSD.
    pub fn reset(&mut self, zone: u32) -> ErasePlan {
        let extents = std::mem::take(&mut self.extents[zone as usize]);
        let mut plan = ErasePlan::default();
        let Some(frontier) = extents.last().map(|extent| extent.physical_zone) else {
            return plan;
        };
        let remaining = self.units_per_zone - self.physical[frontier as usize].used;
        let done_with: Vec<u32> =
            extents.iter().map(|extent| extent.physical_zone).filter(|&physical| physical != frontier).collect();
        if remaining > self.renew_above_units {
            self.stats.renewed_resets += 1;
            while self.spare.len() >= self.spare_limit.max(1) {
                let Some(released) = self.spare.pop() else { break };
                self.stats.regc_releases += 1;
                plan.deferred.push(released);
            }
            self.insert_spare(frontier);
            plan.deferred.extend(done_with);
        } else {
            self.stats.normal_resets += 1;
            plan.inline.extend(done_with);
            plan.inline.push(frontier);
        }
        for &erased in plan.inline.iter().chain(&plan.deferred) {
            self.physical[erased as usize] = PhysicalZone { used: 0, holder: Holder::Free };
            self.free.push_back(erased);
        }
        plan
    }

    fn insert_spare(&mut self, physical_zone: u32) {
        self.physical[physical_zone as usize].holder = Holder::Spare;
        let key = |zone: u32| (self.physical[zone as usize].used, zone);
        let at = self.spare.partition_point(|&other| key(other) < key(physical_zone));
        self.spare.insert(at, physical_zone);
    }

    /// Checks the mapping's invariants; returns what is broken. No physical unit serves two logical units, no
    /// spare or free zone holds a live unit, and the spare list is in order.
    pub fn check(&self, written_units: impl Fn(u32) -> u64) -> Result<(), String> {
        let mut owner = std::collections::HashMap::new();
        for (zone, extents) in self.extents.iter().enumerate() {
            let zone = zone as u32;
            for unit in 0..written_units(zone) {
                let (physical_zone, physical) =
                    self.lookup(zone, unit).ok_or(format!("zone {zone} unit {unit} is written but not mapped"))?;
                if self.physical[physical_zone as usize].holder != Holder::Zone(zone) {
                    return Err(format!("zone {zone} unit {unit} lives in physical zone {physical_zone}, not held"));
                }
                if let Some(other) = owner.insert((physical_zone, physical), (zone, unit)) {
                    return Err(format!("physical unit {physical_zone}:{physical} serves {other:?} and {zone}:{unit}"));
                }
            }
            for pair in extents.windows(2) {
                if pair[1].logical != pair[0].logical + (self.units_per_zone - pair[0].physical) {
                    return Err(format!("zone {zone} has a gap between extents {pair:?}"));
                }
            }
        }
        let room = |zone: u32| self.units_per_zone - self.physical[zone as usize].used;
        if self.spare.windows(2).any(|pair| room(pair[0]) < room(pair[1])) {
            return Err(format!("spare list out of order: {:?}", self.spare));
        }
        for &zone in &self.spare {
            if self.physical[zone as usize].holder != Holder::Spare {
                return Err(format!("spare physical zone {zone} is held elsewhere"));
            }
        }
        for &zone in &self.free {
            let entry = self.physical[zone as usize];
            if entry.holder != Holder::Free || entry.used != 0 {
                return Err(format!("free physical zone {zone} is {entry:?}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 zones of 10 units, renewed when more than 2 units (25 %) are left.
    fn map() -> RenewableMap {
        RenewableMap::new(4, 10, 0.25)
    }

    fn write(map: &mut RenewableMap, zone: u32, units: std::ops::Range<u64>) -> Vec<(u32, u64)> {
        units.map(|unit| map.locate(zone, unit)).collect()
    }

    #[test]
    fn a_zone_reset_with_most_of_its_room_left_becomes_a_spare_and_is_reused_first() {
        let mut map = map();
        assert_eq!(write(&mut map, 2, 0..3), vec![(0, 0), (0, 1), (0, 2)]);
        let plan = map.reset(2);
        assert_eq!(plan, ErasePlan::default(), "70 % left: nothing is erased");
        assert_eq!(map.stats().spare_zones, 1);
        // Zone 1 is composed: 7 units from the spare, then a fresh physical zone.
        let units = write(&mut map, 1, 0..10);
        assert_eq!(units[0], (0, 3));
        assert_eq!(units[6], (0, 9));
        assert_eq!(units[7], (1, 0));
        assert_eq!(map.stats().spare_reuses, 1);
        map.check(|zone| if zone == 1 { 10 } else { 0 }).expect("invariants");
    }

    #[test]
    fn the_spare_list_is_ordered_by_room_left() {
        let mut map = RenewableMap::new(8, 10, 0.25);
        write(&mut map, 0, 0..4);
        write(&mut map, 1, 0..1);
        write(&mut map, 2, 0..3);
        for zone in 0..3 {
            map.reset(zone);
        }
        // Zone 1's physical zone (9 left) is first, then zone 2's (7), then zone 0's (6).
        assert_eq!(map.locate(5, 0), (1, 1));
        assert_eq!(map.locate(6, 0), (2, 3));
        assert_eq!(map.locate(7, 0), (0, 4));
        map.check(|zone| u64::from(zone >= 5)).expect("invariants");
    }

    #[test]
    fn a_nearly_full_zone_is_erased_on_reset_and_its_dead_parts_in_the_background() {
        let mut map = map();
        write(&mut map, 0, 0..5);
        map.reset(0); // physical 0 becomes a spare with 5 units left
        write(&mut map, 1, 0..13); // 5 from physical 0, 8 from physical 1
        assert_eq!(map.reset(1), ErasePlan { inline: vec![0, 1], deferred: vec![] }, "2 left of 10: an Nzone");
        write(&mut map, 2, 0..7); // physical 2, the next free one, with 3 left: renewed
        let plan = map.reset(2);
        assert!(plan.inline.is_empty() && plan.deferred.is_empty(), "{plan:?}");
        let stats = map.stats();
        assert_eq!((stats.renewed_resets, stats.normal_resets), (2, 1));
    }

    #[test]
    fn regc_releases_the_spares_with_least_room_when_the_list_is_full() {
        let mut map = map(); // spare limit: 2
        for (zone, units) in [(0, 1), (1, 2), (2, 3)] {
            write(&mut map, zone, 0..units); // physical zones 0, 1, 2
        }
        assert_eq!(map.reset(0), ErasePlan::default());
        assert_eq!(map.reset(1), ErasePlan::default());
        let plan = map.reset(2);
        assert_eq!(plan.deferred, vec![1], "physical 1, with 8 left, has least room");
        assert_eq!(map.stats().regc_releases, 1);
        assert_eq!(map.stats().spare_zones, 2);
        map.check(|_| 0).expect("invariants");
    }

    #[test]
    fn composition_past_the_physical_zones_overflows_and_says_so() {
        let mut map = RenewableMap::new(2, 10, 0.25);
        write(&mut map, 0, 0..1);
        map.reset(0); // physical 0: spare, 9 left
        write(&mut map, 0, 0..10); // 9 from physical 0, then 1 from physical 1
        write(&mut map, 1, 0..10); // zone 0 holds both physical zones, so a third is needed
        assert_eq!(map.stats().overflow_zones, 1);
        assert_eq!(map.physical_zones(), 3);
        map.check(|_| 10).expect("invariants");
    }
}
