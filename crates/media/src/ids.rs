//! Indices that are easy to mix up, each in its own type: a zone as the host numbers it, the group of blocks on
//! flash that holds it, and a program unit counted from a zone's start. Under the static mappings logical zone
//! `z` is physical zone `z` and units keep their index; under ReZNS's renewable mapping neither holds.

/// A zone as the namespace numbers it (the host's zone index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogicalZone(pub u32);

/// A zone-sized set of blocks on flash (one block group per plane of the zone's stripe).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct PhysicalZone(pub u32);

/// A program unit (the one-shot program of one plane) counted from the start of a logical or physical zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProgramUnit(pub u64);

impl LogicalZone {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl PhysicalZone {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
