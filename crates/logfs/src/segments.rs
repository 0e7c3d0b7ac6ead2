//! The section table (F2FS's SIT and SSA together): for each zone of the main area, what it is used for,
//! which of its blocks are valid and who owns each, and the cleaning victim policies.

use crate::format::Addr;

/// What a zone of the main area is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionUse {
    /// Empty on the device: a log may take it.
    Free,
    /// A log's current zone.
    Log(usize),
    /// Written and left by its log (full, or finished).
    Written,
    /// Written, and none of its blocks valid: it is reset once a checkpoint no longer refers to it (F2FS's
    /// prefree segments).
    Prefree,
}

/// Who a valid block belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    Data { ino: u32, block: u64 },
    Node { ino: u32, index: u32 },
}

impl Owner {
    fn pack(self) -> u64 {
        match self {
            Owner::Data { ino, block } => (u64::from(ino) << 32) | (block & 0x7fff_ffff),
            Owner::Node { ino, index } => (u64::from(ino) << 32) | 0x8000_0000 | u64::from(index),
        }
    }

    fn unpack(packed: u64) -> Owner {
        let ino = (packed >> 32) as u32;
        let low = packed & 0xffff_ffff;
        if low & 0x8000_0000 != 0 {
            Owner::Node { ino, index: (low & 0x7fff_ffff) as u32 }
        } else {
            Owner::Data { ino, block: low }
        }
    }
}

/// How a cleaner picks the zone to clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Victim {
    /// Fewest valid blocks (F2FS's foreground policy).
    Greedy,
    /// Most free space gained per cost, weighted by age: (1 - u) * age / (1 + u) (F2FS's background policy,
    /// after the LFS paper's cost-benefit).
    CostBenefit,
}

#[derive(Clone, Debug)]
struct Section {
    used: SectionUse,
    /// Blocks written (the zone's write pointer, in blocks).
    written: u32,
    valid: u32,
    bitmap: Vec<u64>,
    owners: Vec<u64>,
    /// Sum of the write times of its blocks, for their mean age.
    mtime_sum_s: f64,
}

/// The table over the main area.
pub struct SegmentTable {
    sections: Vec<Section>,
    total_valid: u64,
    /// Main-area zones free and prefree, kept as uses change (writers ask at every call).
    free: u32,
    prefree: u32,
    pub first_main: u32,
    pub blocks_per_zone: u32,
}

impl SegmentTable {
    pub fn new(zones: u32, first_main: u32, blocks_per_zone: u32) -> SegmentTable {
        let empty = Section {
            used: SectionUse::Free,
            written: 0,
            valid: 0,
            bitmap: Vec::new(),
            owners: Vec::new(),
            mtime_sum_s: 0.0,
        };
        SegmentTable {
            sections: vec![empty; zones as usize],
            total_valid: 0,
            free: zones - first_main,
            prefree: 0,
            first_main,
            blocks_per_zone,
        }
    }

    pub fn addr(&self, zone: u32, offset: u32) -> Addr {
        zone * self.blocks_per_zone + offset
    }

    pub fn zone_of(&self, addr: Addr) -> u32 {
        addr / self.blocks_per_zone
    }

    fn main(&self) -> impl Iterator<Item = (u32, &Section)> {
        self.sections.iter().enumerate().skip(self.first_main as usize).map(|(zone, s)| (zone as u32, s))
    }

    pub fn main_zones(&self) -> u32 {
        self.sections.len() as u32 - self.first_main
    }

    pub fn use_of(&self, zone: u32) -> SectionUse {
        self.sections[zone as usize].used
    }

    pub fn set_use(&mut self, zone: u32, used: SectionUse) {
        let was = std::mem::replace(&mut self.sections[zone as usize].used, used);
        if zone < self.first_main {
            return;
        }
        for (kind, count) in [(SectionUse::Free, &mut self.free), (SectionUse::Prefree, &mut self.prefree)] {
            if was == kind {
                *count -= 1;
            }
            if used == kind {
                *count += 1;
            }
        }
    }

    /// Blocks written in `zone` (its write pointer, in blocks).
    pub fn written(&self, zone: u32) -> u32 {
        self.sections[zone as usize].written
    }

    pub fn valid(&self, zone: u32) -> u32 {
        self.sections[zone as usize].valid
    }

    /// Valid blocks in the whole main area.
    pub fn total_valid(&self) -> u64 {
        self.total_valid
    }

    pub fn free_zones(&self) -> u32 {
        self.free
    }

    pub fn prefree_zones(&self) -> u32 {
        self.prefree
    }

    /// The lowest free zone, taken by log `log`.
    pub fn take_free(&mut self, log: usize) -> Option<u32> {
        let zone = self.main().find(|(_, s)| s.used == SectionUse::Free).map(|(zone, _)| zone)?;
        self.set_use(zone, SectionUse::Log(log));
        Some(zone)
    }

    /// Blocks `[from, to)` of `zone` are written (the write pointer moves); their validity is set one by one.
    pub fn advance(&mut self, zone: u32, to: u32) {
        let section = &mut self.sections[zone as usize];
        section.written = section.written.max(to);
    }

    /// Marks `addr` valid and owned by `owner`, written at `now_s`.
    pub fn validate(&mut self, addr: Addr, owner: Owner, now_s: f64) {
        let per_zone = self.blocks_per_zone as usize;
        let section = &mut self.sections[(addr / self.blocks_per_zone) as usize];
        let offset = (addr % self.blocks_per_zone) as usize;
        if section.bitmap.is_empty() {
            section.bitmap = vec![0; per_zone.div_ceil(64)];
            section.owners = vec![0; per_zone];
        }
        let (word, bit) = (offset / 64, 1u64 << (offset % 64));
        if section.bitmap[word] & bit == 0 {
            section.bitmap[word] |= bit;
            section.valid += 1;
            self.total_valid += 1;
        }
        section.owners[offset] = owner.pack();
        section.written = section.written.max(offset as u32 + 1);
        section.mtime_sum_s += now_s;
    }

    /// Marks `addr` invalid; a written zone left with no valid block becomes prefree. Returns whether it did.
    pub fn invalidate(&mut self, addr: Addr) -> bool {
        let section = &mut self.sections[(addr / self.blocks_per_zone) as usize];
        let offset = (addr % self.blocks_per_zone) as usize;
        let (word, bit) = (offset / 64, 1u64 << (offset % 64));
        if section.bitmap.get(word).is_none_or(|w| w & bit == 0) {
            return false;
        }
        section.bitmap[word] &= !bit;
        section.valid -= 1;
        self.total_valid -= 1;
        if section.valid == 0 && section.used == SectionUse::Written {
            self.set_use(addr / self.blocks_per_zone, SectionUse::Prefree);
            return true;
        }
        false
    }

    /// A log leaves its zone: it is written, or prefree if nothing in it is valid.
    pub fn retire(&mut self, zone: u32) {
        let used = if self.sections[zone as usize].valid == 0 { SectionUse::Prefree } else { SectionUse::Written };
        self.set_use(zone, used);
    }

    /// The zone was reset: free, nothing in it.
    pub fn reset(&mut self, zone: u32) {
        self.set_use(zone, SectionUse::Free);
        let section = &mut self.sections[zone as usize];
        *section = Section {
            used: SectionUse::Free,
            written: 0,
            valid: 0,
            bitmap: Vec::new(),
            owners: Vec::new(),
            mtime_sum_s: 0.0,
        };
    }

    /// The valid blocks of `zone` and their owners, in address order.
    pub fn valid_blocks(&self, zone: u32) -> Vec<(Addr, Owner)> {
        let section = &self.sections[zone as usize];
        let base = zone * self.blocks_per_zone;
        let mut blocks = Vec::with_capacity(section.valid as usize);
        for (word_index, &word) in section.bitmap.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let offset = word_index * 64 + bits.trailing_zeros() as usize;
                blocks.push((base + offset as Addr, Owner::unpack(section.owners[offset])));
                bits &= bits - 1;
            }
        }
        blocks
    }

    /// The written zone a cleaner should take, if any has an invalid block.
    pub fn victim(&self, policy: Victim, now_s: f64) -> Option<u32> {
        let candidates = self.main().filter(|(_, s)| s.used == SectionUse::Written && s.valid < s.written);
        match policy {
            Victim::Greedy => candidates.min_by_key(|(zone, s)| (s.valid, *zone)).map(|(zone, _)| zone),
            Victim::CostBenefit => candidates
                .map(|(zone, s)| {
                    let u = f64::from(s.valid) / f64::from(self.blocks_per_zone);
                    let age = (now_s - s.mtime_sum_s / f64::from(s.written.max(1))).max(0.0);
                    (zone, (1.0 - u) * (1.0 + age) / (1.0 + u))
                })
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|(zone, _)| zone),
        }
    }
}
