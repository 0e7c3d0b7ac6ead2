//! ReZNS's renewable zones (seed 002, Algorithm 1): logical zones map to physical zones through extents, a reset
//! of a zone with much capacity left keeps its still-erased tail in a spare list instead of erasing it, and new
//! zones are composed from spare tails before fresh physical zones are used.
//!
//! Only the flash side is modelled here; what the host sees (zone states, write pointers, data) never depends on
//! the mapping.

use std::collections::VecDeque;

use crate::{LogicalZone, PhysicalZone, ProgramUnit};

/// A run of a logical zone's program units held by one physical zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Extent {
    /// First logical unit of the run.
    logical: u64,
    physical_zone: PhysicalZone,
    /// The physical unit that holds `logical`.
    physical: u64,
}

/// One physical zone: a prefix of units handed out (programmed, or about to be) and an erased rest. Its prefix
/// can hold live data of several logical zones (a zombie zone's data, then the zone that took its rest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Occupancy {
    used: u64,
    /// Logical zones with an extent here; the zone can be erased once none is left and it is not a spare.
    holders: u32,
    /// In the spare list: its units from `used` on are offered to new zones.
    spare: bool,
}

/// What a reset asks the flash to erase: whole physical zones, waited for or in the background.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErasePlan {
    pub inline: Vec<PhysicalZone>,
    pub deferred: Vec<PhysicalZone>,
}

/// Counts of what the renewable mapping did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RenewableStats {
    /// Resets that kept the zone's tail in the spare list (Rzones).
    pub renewed_resets: u64,
    /// Resets that erased the zone (Nzones).
    pub normal_resets: u64,
    /// Extents taken from the spare list.
    pub spare_reuses: u64,
    /// Open zones the zombie scan finished, their rest offered as spares.
    pub zombie_finishes: u64,
    /// Spare entries ReGC released, erasing them.
    pub regc_releases: u64,
    /// Physical zones beyond the namespace's count that composing zones needed (the mapping has no relocation,
    /// so dead prefixes can use up the spare capacity; a run that needs any says so here).
    pub overflow_zones: u64,
    pub spare_zones: u64,
}

/// The renewable mapping of one device; a device image keeps it between processes.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RenewableMap {
    units_per_zone: u64,
    /// A reset keeps the zone when more than this many units are unused (the paper's 25 %).
    renew_above_units: u64,
    /// ReGC runs when the spare list holds more than this many zones (the paper's half of all zones).
    spare_limit: usize,
    physical: Vec<Occupancy>,
    extents: Vec<Vec<Extent>>,
    /// Zones whose rest the zombie scan gave to the spare list: their reset has nothing left to renew.
    released: Vec<bool>,
    /// Spare physical zones, most remaining units first; ties by zone number.
    spare: Vec<PhysicalZone>,
    free: VecDeque<PhysicalZone>,
    stats: RenewableStats,
}

impl RenewableMap {
    pub fn new(zones: u32, units_per_zone: u64, renew_above_fraction: f64) -> RenewableMap {
        RenewableMap {
            units_per_zone,
            renew_above_units: (units_per_zone as f64 * renew_above_fraction).floor() as u64,
            spare_limit: zones as usize / 2,
            physical: vec![Occupancy::default(); zones as usize],
            extents: vec![Vec::new(); zones as usize],
            released: vec![false; zones as usize],
            spare: Vec::new(),
            free: (0..zones).map(PhysicalZone).collect(),
            stats: RenewableStats::default(),
        }
    }

    /// Logical zones the mapping serves, and program units per zone: a saved mapping fits only its own geometry.
    pub fn shape(&self) -> (usize, u64) {
        (self.extents.len(), self.units_per_zone)
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
    pub fn locate(&mut self, zone: LogicalZone, unit: ProgramUnit) -> (PhysicalZone, ProgramUnit) {
        loop {
            if let Some(found) = self.lookup(zone, unit) {
                let entry = &mut self.physical[found.0.index()];
                entry.used = entry.used.max(found.1 .0 + 1);
                return found;
            }
            self.extend(zone);
        }
    }

    /// Where a mapped unit lives; None for a unit the zone has not reached.
    pub fn lookup(&self, zone: LogicalZone, unit: ProgramUnit) -> Option<(PhysicalZone, ProgramUnit)> {
        let extents = &self.extents[zone.index()];
        let index = extents.partition_point(|extent| extent.logical <= unit.0).checked_sub(1)?;
        let extent = extents[index];
        let physical = extent.physical + (unit.0 - extent.logical);
        (physical < self.units_per_zone).then_some((extent.physical_zone, ProgramUnit(physical)))
    }

    /// Gives the zone one more extent: the spare zone with the most erased units, else a free zone, else a new
    /// (overflow) one.
    fn extend(&mut self, zone: LogicalZone) {
        let extents = &self.extents[zone.index()];
        let logical = extents.last().map_or(0, |last| last.logical + (self.units_per_zone - last.physical));
        // Units go out in order: the zone is past its last extent, so all of that one is handed out.
        if let Some(last) = extents.last() {
            self.physical[last.physical_zone.index()].used = self.units_per_zone;
        }
        let physical_zone = if self.spare.is_empty() {
            self.free.pop_front().unwrap_or_else(|| {
                self.stats.overflow_zones += 1;
                self.physical.push(Occupancy::default());
                PhysicalZone((self.physical.len() - 1) as u32)
            })
        } else {
            self.stats.spare_reuses += 1;
            self.spare.remove(0)
        };
        let entry = &mut self.physical[physical_zone.index()];
        entry.holders += 1;
        entry.spare = false;
        let physical = entry.used;
        self.extents[zone.index()].push(Extent { logical, physical_zone, physical });
    }

    /// A host reset of a zone: Algorithm 1's `reset_zone`. The physical zone that holds the write frontier is
    /// kept as a spare when more than the threshold of a zone is still erased in it; the zone's other physical
    /// zones are dead and are erased in the background. Otherwise the zone's physical zones are erased before
    /// the reset completes, as on a conventional ZNS SSD. A physical zone another zone still holds data in, or
    /// that is a spare, is left alone: it is erased when its last holder lets go.
    pub fn reset(&mut self, zone: LogicalZone) -> ErasePlan {
        let extents = std::mem::take(&mut self.extents[zone.index()]);
        let released = std::mem::take(&mut self.released[zone.index()]);
        let mut plan = ErasePlan::default();
        let Some(frontier) = extents.last().map(|extent| extent.physical_zone) else {
            return plan;
        };
        for extent in &extents {
            self.physical[extent.physical_zone.index()].holders -= 1;
        }
        let remaining = self.units_per_zone - self.physical[frontier.index()].used;
        let renew = !released && remaining > self.renew_above_units;
        if renew {
            self.stats.renewed_resets += 1;
            self.regc(&mut plan);
            self.insert_spare(frontier);
        } else {
            self.stats.normal_resets += 1;
        }
        for extent in &extents {
            let physical_zone = extent.physical_zone;
            let entry = self.physical[physical_zone.index()];
            let erasable = entry.holders == 0 && !entry.spare && entry.used > 0;
            if erasable && !plan.inline.contains(&physical_zone) && !plan.deferred.contains(&physical_zone) {
                if renew {
                    plan.deferred.push(physical_zone);
                } else {
                    plan.inline.push(physical_zone);
                }
            }
        }
        self.free_erased(&plan);
        plan
    }

    /// The zombie scan finished a zone: the erased rest of its frontier physical zone becomes a spare, while
    /// the zone keeps its data. Returns the erases ReGC asks for to make room.
    pub fn release_rest(&mut self, zone: LogicalZone) -> ErasePlan {
        let mut plan = ErasePlan::default();
        let Some(frontier) = self.extents[zone.index()].last().map(|extent| extent.physical_zone) else {
            return plan;
        };
        self.released[zone.index()] = true;
        self.stats.zombie_finishes += 1;
        if self.physical[frontier.index()].used < self.units_per_zone {
            self.regc(&mut plan);
            self.insert_spare(frontier);
        }
        self.free_erased(&plan);
        plan
    }

    /// ReGC: while the spare list is at its limit, the spare with least room leaves it, and is erased in the
    /// background unless a zone still holds data in it.
    fn regc(&mut self, plan: &mut ErasePlan) {
        while self.spare.len() >= self.spare_limit.max(1) {
            let Some(released) = self.spare.pop() else { break };
            self.stats.regc_releases += 1;
            let entry = &mut self.physical[released.index()];
            entry.spare = false;
            if entry.holders == 0 {
                plan.deferred.push(released);
            }
        }
    }

    /// The physical zones a plan erases go back to the free list.
    fn free_erased(&mut self, plan: &ErasePlan) {
        for &erased in plan.inline.iter().chain(&plan.deferred) {
            self.physical[erased.index()] = Occupancy::default();
            self.free.push_back(erased);
        }
    }

    fn insert_spare(&mut self, physical_zone: PhysicalZone) {
        self.physical[physical_zone.index()].spare = true;
        let key = |zone: PhysicalZone| (self.physical[zone.index()].used, zone);
        let at = self.spare.partition_point(|&other| key(other) < key(physical_zone));
        self.spare.insert(at, physical_zone);
    }

    /// Checks the mapping's invariants; returns what is broken. Every written unit is mapped, into a
    /// physical zone that counts its zone as a holder and below that zone's handed-out prefix; no physical unit
    /// serves two logical units; free zones are wholly erased and unheld; the spare list is in order.
    pub fn check(&self, written_units: impl Fn(LogicalZone) -> u64) -> Result<(), String> {
        let mut owner = std::collections::HashMap::new();
        let mut holders = vec![0u32; self.physical.len()];
        for (zone, extents) in (0..).map(LogicalZone).zip(&self.extents) {
            let mut held: Vec<PhysicalZone> = extents.iter().map(|extent| extent.physical_zone).collect();
            held.dedup();
            for physical_zone in held {
                holders[physical_zone.index()] += 1;
            }
            for unit in (0..written_units(zone)).map(ProgramUnit) {
                let (physical_zone, physical) =
                    self.lookup(zone, unit).ok_or(format!("{zone:?} {unit:?} is written but not mapped"))?;
                if physical.0 >= self.physical[physical_zone.index()].used {
                    return Err(format!("{zone:?} {unit:?} is past the used prefix of {physical_zone:?}"));
                }
                if let Some(other) = owner.insert((physical_zone, physical), (zone, unit)) {
                    return Err(format!("{physical_zone:?} {physical:?} serves {other:?} and {zone:?} {unit:?}"));
                }
            }
            for pair in extents.windows(2) {
                if pair[1].logical != pair[0].logical + (self.units_per_zone - pair[0].physical) {
                    return Err(format!("{zone:?} has a gap between extents {pair:?}"));
                }
            }
        }
        for (physical_zone, entry) in self.physical.iter().enumerate() {
            if entry.holders != holders[physical_zone] {
                return Err(format!(
                    "physical zone {physical_zone} counts {entry:?}, held by {}",
                    holders[physical_zone]
                ));
            }
        }
        let room = |zone: PhysicalZone| self.units_per_zone - self.physical[zone.index()].used;
        if self.spare.windows(2).any(|pair| room(pair[0]) < room(pair[1])) {
            return Err(format!("spare list out of order: {:?}", self.spare));
        }
        for &zone in &self.spare {
            if !self.physical[zone.index()].spare || room(zone) == 0 {
                return Err(format!("spare {zone:?} is {:?}", self.physical[zone.index()]));
            }
        }
        for &zone in &self.free {
            let entry = self.physical[zone.index()];
            if entry != Occupancy::default() {
                return Err(format!("free {zone:?} is {entry:?}"));
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

    fn at(map: &mut RenewableMap, zone: u32, unit: u64) -> (u32, u64) {
        let (physical_zone, physical_unit) = map.locate(LogicalZone(zone), ProgramUnit(unit));
        (physical_zone.0, physical_unit.0)
    }

    fn write(map: &mut RenewableMap, zone: u32, units: std::ops::Range<u64>) -> Vec<(u32, u64)> {
        units.map(|unit| at(map, zone, unit)).collect()
    }

    fn plan(inline: &[u32], deferred: &[u32]) -> ErasePlan {
        ErasePlan {
            inline: inline.iter().copied().map(PhysicalZone).collect(),
            deferred: deferred.iter().copied().map(PhysicalZone).collect(),
        }
    }

    #[test]
    fn a_zone_reset_with_most_of_its_room_left_becomes_a_spare_and_is_reused_first() {
        let mut map = map();
        assert_eq!(write(&mut map, 2, 0..3), vec![(0, 0), (0, 1), (0, 2)]);
        let plan = map.reset(LogicalZone(2));
        assert_eq!(plan, ErasePlan::default(), "70 % left: nothing is erased");
        assert_eq!(map.stats().spare_zones, 1);
        // Zone 1 is composed: 7 units from the spare, then a fresh physical zone.
        let units = write(&mut map, 1, 0..10);
        assert_eq!(units[0], (0, 3));
        assert_eq!(units[6], (0, 9));
        assert_eq!(units[7], (1, 0));
        assert_eq!(map.stats().spare_reuses, 1);
        map.check(|zone| if zone.0 == 1 { 10 } else { 0 }).expect("invariants");
    }

    #[test]
    fn the_spare_list_is_ordered_by_room_left() {
        let mut map = RenewableMap::new(8, 10, 0.25);
        write(&mut map, 0, 0..4);
        write(&mut map, 1, 0..1);
        write(&mut map, 2, 0..3);
        for zone in 0..3 {
            map.reset(LogicalZone(zone));
        }
        // Zone 1's physical zone (9 left) is first, then zone 2's (7), then zone 0's (6).
        assert_eq!(at(&mut map, 5, 0), (1, 1));
        assert_eq!(at(&mut map, 6, 0), (2, 3));
        assert_eq!(at(&mut map, 7, 0), (0, 4));
        map.check(|zone| u64::from(zone.0 >= 5)).expect("invariants");
    }

    #[test]
    fn a_nearly_full_zone_is_erased_on_reset_and_its_dead_parts_in_the_background() {
        let mut map = map();
        write(&mut map, 0, 0..5);
        map.reset(LogicalZone(0)); // physical 0 becomes a spare with 5 units left
        write(&mut map, 1, 0..13); // 5 from physical 0, 8 from physical 1
        assert_eq!(map.reset(LogicalZone(1)), plan(&[0, 1], &[]), "2 left of 10: an Nzone");
        write(&mut map, 2, 0..7); // physical 2, the next free one, with 3 left: renewed
        let plan = map.reset(LogicalZone(2));
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
        assert_eq!(map.reset(LogicalZone(0)), ErasePlan::default());
        assert_eq!(map.reset(LogicalZone(1)), ErasePlan::default());
        let plan = map.reset(LogicalZone(2));
        assert_eq!(plan.deferred, vec![PhysicalZone(1)], "physical 1, with 8 left, has least room");
        assert_eq!(map.stats().regc_releases, 1);
        assert_eq!(map.stats().spare_zones, 2);
        map.check(|_| 0).expect("invariants");
    }

    #[test]
    fn composition_past_the_physical_zones_overflows_and_says_so() {
        let mut map = RenewableMap::new(2, 10, 0.25);
        write(&mut map, 0, 0..1);
        map.reset(LogicalZone(0)); // physical 0: spare, 9 left
        write(&mut map, 0, 0..10); // 9 from physical 0, then 1 from physical 1
        write(&mut map, 1, 0..10); // zone 0 holds both physical zones, so a third is needed
        assert_eq!(map.stats().overflow_zones, 1);
        assert_eq!(map.physical_zones(), 3);
        map.check(|_| 10).expect("invariants");
    }

    #[test]
    fn a_zombie_zones_rest_is_shared_and_erased_only_when_both_zones_let_go() {
        let mut map = map();
        write(&mut map, 0, 0..4); // physical 0
        assert_eq!(map.release_rest(LogicalZone(0)), ErasePlan::default());
        assert_eq!(write(&mut map, 1, 0..6)[0], (0, 4), "zone 1 takes the zombie's 6 erased units");
        map.check(|zone| [4, 6, 0, 0][zone.index()]).expect("invariants");
        // The zombie's reset renews nothing and erases nothing: zone 1 still has data in physical 0.
        assert_eq!(map.reset(LogicalZone(0)), ErasePlan::default());
        map.check(|zone| [0, 6, 0, 0][zone.index()]).expect("invariants");
        // Zone 1 filled physical 0 (no room left): its reset erases it at once.
        assert_eq!(map.reset(LogicalZone(1)), plan(&[0], &[]));
        let stats = map.stats();
        assert_eq!((stats.zombie_finishes, stats.renewed_resets, stats.normal_resets), (1, 0, 2));
        map.check(|_| 0).expect("invariants");
    }
}
