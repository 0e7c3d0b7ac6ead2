//! What the FTL asks of flash: the flash model's physical API, one block of the FTL being one physical zone
//! of a model of its own (`FlashModel`), or one row of the physical zones a device's model sets aside for it
//! (`Rows`: a superblock, one flash block on each plane the zones stripe over), or no flash time at all.

use zonelab_media::{FlashModel, OpSource, PhysicalZone, ProgramUnit};

/// Flash as the FTL drives it; every call returns when the operation is done.
pub trait Flash {
    /// Senses `unit` of `block` from `start` and moves its bytes `offset..offset + bytes` to the controller.
    #[allow(clippy::too_many_arguments)]
    fn sense(&mut self, now: u64, start: u64, block: u32, unit: u64, offset: u64, bytes: u64, source: OpSource) -> u64;
    /// Programs `unit` of `block` once its data is in the controller at `ready`.
    fn program(&mut self, now: u64, block: u32, unit: u64, ready: u64, source: OpSource) -> u64;
    /// Erases `block` from `start`.
    fn erase(&mut self, now: u64, start: u64, block: u32, source: OpSource) -> u64;
}

impl Flash for FlashModel {
    fn sense(&mut self, now: u64, start: u64, block: u32, unit: u64, offset: u64, bytes: u64, source: OpSource) -> u64 {
        self.sense_physical(now, start, PhysicalZone(block), ProgramUnit(unit), offset, bytes, source)
    }

    fn program(&mut self, now: u64, block: u32, unit: u64, ready: u64, source: OpSource) -> u64 {
        self.program_physical(now, PhysicalZone(block), ProgramUnit(unit), ready, source)
    }

    fn erase(&mut self, now: u64, start: u64, block: u32, source: OpSource) -> u64 {
        self.erase_physical(now, start, PhysicalZone(block), source)
    }
}

/// No flash time: every operation is done when it may start. For the mapping alone (its reference-model
/// tests, write amplification studies) and for preconditioning, which reaches a steady state untimed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Untimed;

impl Flash for Untimed {
    fn sense(&mut self, _now: u64, start: u64, _: u32, _: u64, _: u64, _: u64, _: OpSource) -> u64 {
        start
    }

    fn program(&mut self, _now: u64, _block: u32, _unit: u64, ready: u64, _source: OpSource) -> u64 {
        ready
    }

    fn erase(&mut self, _now: u64, start: u64, _block: u32, _source: OpSource) -> u64 {
        start
    }
}

/// An FTL's blocks on physical zones a device's flash model set aside for it, from `first` on: block `b` is row
/// `b % rows_per_zone` of physical zone `first + b / rows_per_zone`, so a block is a superblock over the same
/// planes and channels as the device's zones.
pub struct Rows<'a> {
    pub model: &'a mut FlashModel,
    pub first: PhysicalZone,
}

impl Rows<'_> {
    /// Physical zones `blocks` blocks take on `model`.
    pub fn zones_for(model: &FlashModel, blocks: u32) -> u32 {
        u64::from(blocks).div_ceil(model.rows_per_zone()) as u32
    }

    fn place(&self, block: u32, unit: u64) -> (PhysicalZone, u64, ProgramUnit) {
        let rows = self.model.rows_per_zone();
        let (zone, row) = (u64::from(block) / rows, u64::from(block) % rows);
        let zone = PhysicalZone(self.first.0 + zone as u32);
        (zone, row, ProgramUnit(row * self.model.units_per_row() + unit))
    }
}

impl Flash for Rows<'_> {
    fn sense(&mut self, now: u64, start: u64, block: u32, unit: u64, offset: u64, bytes: u64, source: OpSource) -> u64 {
        let (zone, _, unit) = self.place(block, unit);
        self.model.sense_physical(now, start, zone, unit, offset, bytes, source)
    }

    fn program(&mut self, now: u64, block: u32, unit: u64, ready: u64, source: OpSource) -> u64 {
        let (zone, _, unit) = self.place(block, unit);
        self.model.program_physical(now, zone, unit, ready, source)
    }

    fn erase(&mut self, now: u64, start: u64, block: u32, source: OpSource) -> u64 {
        let (zone, row, _) = self.place(block, 0);
        self.model.erase_physical_row(now, start, zone, row, source)
    }
}
