//! What the FTL asks of flash: the flash model's physical API, one block of the FTL being one physical zone
//! of the model (a superblock striped over the zone's planes), or no flash time at all.

use zonelab_media::{FlashModel, OpSource, PhysicalZone, ProgramUnit};

/// Flash as the FTL drives it; every call returns when the operation is done.
pub trait Flash {
    /// Senses `unit` of `block` from `start` and moves `bytes` of it to the controller.
    fn sense(&mut self, now: u64, start: u64, block: u32, unit: u64, bytes: u64, source: OpSource) -> u64;
    /// Programs `unit` of `block` once its data is in the controller at `ready`.
    fn program(&mut self, now: u64, block: u32, unit: u64, ready: u64, source: OpSource) -> u64;
    /// Erases `block` from `start`.
    fn erase(&mut self, now: u64, start: u64, block: u32, source: OpSource) -> u64;
}

impl Flash for FlashModel {
    fn sense(&mut self, now: u64, start: u64, block: u32, unit: u64, bytes: u64, source: OpSource) -> u64 {
        self.sense_physical(now, start, PhysicalZone(block), ProgramUnit(unit), bytes, source)
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
    fn sense(&mut self, _now: u64, start: u64, _block: u32, _unit: u64, _bytes: u64, _source: OpSource) -> u64 {
        start
    }

    fn program(&mut self, _now: u64, _block: u32, _unit: u64, ready: u64, _source: OpSource) -> u64 {
        ready
    }

    fn erase(&mut self, _now: u64, start: u64, _block: u32, _source: OpSource) -> u64 {
        start
    }
}
