//! Wear: the erase count of every block, when each physical zone's last erase ends, and how erases were timed.

use std::collections::BTreeMap;

use crate::{PhysicalZone, RenewableStats};

/// Wear: erase counts per block, and how erases were timed.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EraseSummary {
    pub blocks: u64,
    /// Blocks that make up one zone, so erases can be counted in zones.
    pub blocks_per_zone: u64,
    pub erases: u64,
    /// Erases a reset waited for.
    pub inline: u64,
    /// Erases that ran after their reset completed.
    pub deferred: u64,
    pub mean_per_block: f64,
    pub max_per_block: u32,
    /// Blocks by erase count.
    pub histogram: BTreeMap<u32, u64>,
    /// What the renewable mapping did, under the `rezns` policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renewable: Option<RenewableStats>,
}

#[derive(Clone, Debug)]
pub(super) struct Wear {
    blocks_per_zone: u64,
    /// Erase count per block, physical zone by physical zone, plane by plane.
    erase_counts: Vec<u32>,
    /// When each physical zone's last whole-zone erase ends: a zone recycled by the renewable mapping takes
    /// programs only after it, although plane timelines would fit them in earlier gaps.
    erased_until: Vec<u64>,
    /// Block erases that a reset waited for, and those that ran after it completed.
    inline: u64,
    deferred: u64,
}

impl Wear {
    pub fn new(physical_zones: usize, blocks_per_zone: u64) -> Wear {
        let mut wear =
            Wear { blocks_per_zone, erase_counts: Vec::new(), erased_until: Vec::new(), inline: 0, deferred: 0 };
        wear.cover(physical_zones);
        wear
    }

    /// Makes room for `physical_zones` zones (the renewable mapping may compose past the namespace's count).
    pub fn cover(&mut self, physical_zones: usize) {
        if self.erased_until.len() < physical_zones {
            self.erase_counts.resize(physical_zones * self.blocks_per_zone as usize, 0);
            self.erased_until.resize(physical_zones, 0);
        }
    }

    pub fn erase_counts(&self) -> &[u32] {
        &self.erase_counts
    }

    /// Whether any block has been erased, in this life of the device or an earlier one.
    pub fn any_erased(&self) -> bool {
        self.inline + self.deferred > 0
    }

    /// Erases a reset waited for, and erases that ran after it.
    pub fn timing_counts(&self) -> (u64, u64) {
        (self.inline, self.deferred)
    }

    /// Takes the erase counts of an earlier life of this device (a device image's); the physical zones they
    /// cover, overflow included, are kept. Refused when they do not fill whole zones of this geometry.
    pub fn restore(&mut self, counts: &[u32], inline: u64, deferred: u64) -> Result<(), String> {
        let per_zone = self.blocks_per_zone as usize;
        if !counts.len().is_multiple_of(per_zone.max(1)) {
            return Err(format!("{} erase counts do not fit {} blocks per zone", counts.len(), per_zone));
        }
        // Blocks past the saved ones (physical zones set aside since, for a conventional namespace) keep none.
        self.cover(counts.len() / per_zone.max(1));
        self.erase_counts[..counts.len()].copy_from_slice(counts);
        (self.inline, self.deferred) = (inline, deferred);
        Ok(())
    }

    /// One erase of `block`, waited for by its reset (`inline`) or not.
    pub fn record_erase(&mut self, block: usize, inline: bool) {
        self.erase_counts[block] += 1;
        if inline {
            self.inline += 1;
        } else {
            self.deferred += 1;
        }
    }

    pub fn erased_until(&self, zone: PhysicalZone) -> u64 {
        self.erased_until[zone.index()]
    }

    pub fn erased_at(&mut self, zone: PhysicalZone, end_ns: u64) {
        let until = &mut self.erased_until[zone.index()];
        *until = (*until).max(end_ns);
    }

    pub fn summary(&self, renewable: Option<RenewableStats>) -> EraseSummary {
        let mut histogram = BTreeMap::new();
        for &count in &self.erase_counts {
            *histogram.entry(count).or_insert(0u64) += 1;
        }
        let total: u64 = self.erase_counts.iter().map(|&count| u64::from(count)).sum();
        EraseSummary {
            blocks: self.erase_counts.len() as u64,
            blocks_per_zone: self.blocks_per_zone,
            erases: total,
            inline: self.inline,
            deferred: self.deferred,
            mean_per_block: total as f64 / self.erase_counts.len().max(1) as f64,
            max_per_block: self.erase_counts.iter().copied().max().unwrap_or(0),
            histogram,
            renewable,
        }
    }
}
