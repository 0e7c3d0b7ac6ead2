//! The device's shared resources, each keeping the time it is next free: planes (with what each plane's page
//! register holds), channels, the erase slots, the controller's command processor, the host link into the
//! device, the write budget, and the way out to the host.

use crate::timeline::Timeline;
use crate::LogicalZone;

/// Pages of one zone a plane's register holds after a read, from the time they are there; a read of them needs
/// no new sensing (a cache read). Any program or erase on the plane clears it.
#[derive(Clone, Copy, Debug)]
pub(super) struct HeldPages {
    pub zone: LogicalZone,
    pub first_page: u64,
    pub end_page: u64,
    pub ready_ns: u64,
}

#[derive(Clone, Debug)]
pub(super) struct Resources {
    /// Planes keep timelines, so that a read fits between programs queued for later (a finish's padding is
    /// reserved when the finish is submitted); erases and seals queue after everything else.
    pub planes: Vec<Timeline>,
    pub page_register: Vec<Option<HeldPages>>,
    /// Resources reserved for future instants fill gaps (see `Timeline`); the command processor, the link into
    /// the device and the write budget are reserved in arrival order.
    pub channels: Vec<Timeline>,
    /// When each of the device's erase slots is next free; empty when erases are not bounded device-wide.
    erase_slot_free: Vec<u64>,
    command_free: u64,
    link_to_device_free: u64,
    /// The way out to the host: the read budget and the host link, whichever is narrower, as one resource.
    pub output: Timeline,
    write_budget_free: u64,
}

impl Resources {
    pub fn new(planes: usize, channels: usize, erase_concurrency: u32) -> Resources {
        Resources {
            planes: vec![Timeline::default(); planes],
            page_register: vec![None; planes],
            channels: vec![Timeline::default(); channels],
            erase_slot_free: vec![0; erase_concurrency as usize],
            command_free: 0,
            link_to_device_free: 0,
            output: Timeline::default(),
            write_budget_free: 0,
        }
    }

    /// Reserves the controller's command processor for `busy_ns` from `now`; returns when it is done.
    pub fn command(&mut self, now: u64, busy_ns: u64) -> u64 {
        let start = self.command_free.max(now);
        self.command_free = start + busy_ns;
        self.command_free
    }

    /// Moves data into the device over the host link from `ready`; returns when it is in.
    pub fn link_to_device(&mut self, ready: u64, link_ns: u64) -> u64 {
        self.link_to_device_free = self.link_to_device_free.max(ready) + link_ns;
        self.link_to_device_free
    }

    /// Takes `budget_ns` of the device's write bandwidth from `ready` on; returns when it is spent.
    pub fn write_budget(&mut self, ready: u64, budget_ns: u64) -> u64 {
        self.write_budget_free = self.write_budget_free.max(ready) + budget_ns;
        self.write_budget_free
    }

    /// When the write budget is next free, from `at` on.
    pub fn write_budget_start(&self, at: u64) -> u64 {
        self.write_budget_free.max(at)
    }

    /// One block erase of `erase_ns` on `plane` from `at`, through the device's erase slots when their number
    /// is bounded; returns when it ends.
    pub fn erase_block(&mut self, now: u64, plane: usize, at: u64, erase_ns: u64) -> u64 {
        match self.erase_slot_free.iter_mut().min_by_key(|free| **free) {
            Some(slot) => {
                let begin = (*slot).max(at).max(self.planes[plane].last_end());
                *slot = self.planes[plane].reserve_after_all(now, begin, erase_ns);
                *slot
            }
            None => self.planes[plane].reserve_after_all(now, at, erase_ns),
        }
    }

    /// Forgets what plane registers hold of `zone` (its data is gone).
    pub fn forget_pages_of(&mut self, zone: LogicalZone) {
        for register in &mut self.page_register {
            if register.is_some_and(|held| held.zone == zone) {
                *register = None;
            }
        }
    }

    /// A power loss at `at`: registers are empty and nothing reserved past `at` happens.
    pub fn lose_power(&mut self, at: u64) {
        self.page_register.fill(None);
        for line in self.planes.iter_mut().chain(self.channels.iter_mut()).chain([&mut self.output]) {
            line.truncate(at);
        }
    }

    /// The latest time any resource is reserved to.
    pub fn busy_until(&self) -> u64 {
        let timelines = self.planes.iter().chain(self.channels.iter()).chain([&self.output]).map(Timeline::last_end);
        self.erase_slot_free
            .iter()
            .chain([&self.command_free, &self.link_to_device_free, &self.write_budget_free])
            .copied()
            .chain(timelines)
            .max()
            .unwrap_or(0)
    }
}
