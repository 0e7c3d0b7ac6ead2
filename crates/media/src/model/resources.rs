//! The device's shared resources, each keeping the time it is next free: planes (with what each plane's page
//! register holds), channels, the erase slots, the controller's command processor, the host link into the
//! device, the write budget, and the way out to the host.

use std::collections::VecDeque;

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
    pub write_budget: WriteBudget,
}

/// The rate at which flash absorbs written data, the device's write ceiling, spent in arrival order. With a
/// drain unit it is spent unit by unit, each unit taking an exponentially distributed time around the mean
/// (seeded by the unit's index, so a run is reproducible): whether the next unit is absorbed soon depends on
/// which of many busy dies frees first, so the times are memoryless. A buffer in front of the flash absorbs the
/// spread while the host writes below the ceiling; once it is full a write waits for the flash to absorb what
/// is ahead of it, a sum of unit times whose spread grows with the square root of the bytes in flight, as the
/// grid's tails do.
#[derive(Clone, Debug)]
pub(super) struct WriteBudget {
    free_ns: u64,
    ns_per_byte: f64,
    unit_bytes: u64,
    buffer_bytes: u64,
    /// Bytes taken since the device was built: which unit the next byte falls in.
    spent_bytes: u64,
    /// What the flash absorbs of the last `buffer_bytes` taken: byte ranges with the times they start and
    /// end being absorbed, oldest first.
    absorbing: VecDeque<Absorbing>,
}

#[derive(Clone, Copy, Debug)]
struct Absorbing {
    first_byte: u64,
    end_byte: u64,
    start_ns: u64,
    end_ns: u64,
}

/// When a piece of written data is in the device (it may complete) and when the flash has absorbed it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Drained {
    pub in_device_ns: u64,
    pub absorbed_ns: u64,
}

impl WriteBudget {
    pub fn new(ns_per_byte: f64, unit_bytes: u64, buffer_bytes: u64) -> WriteBudget {
        WriteBudget { free_ns: 0, ns_per_byte, unit_bytes, buffer_bytes, spent_bytes: 0, absorbing: VecDeque::new() }
    }

    /// Takes `bytes` whose data is ready at `ready`.
    pub fn take(&mut self, ready: u64, bytes: u64) -> Drained {
        let mut ns = bytes as f64 * self.ns_per_byte;
        let first_byte = self.spent_bytes;
        if self.unit_bytes != 0 && self.ns_per_byte != 0.0 {
            ns = 0.0;
            let mut left = bytes;
            while left > 0 {
                let unit = self.spent_bytes / self.unit_bytes;
                let in_unit = (self.unit_bytes - self.spent_bytes % self.unit_bytes).min(left);
                ns += in_unit as f64 * self.ns_per_byte * exponential(unit);
                self.spent_bytes += in_unit;
                left -= in_unit;
            }
        } else {
            self.spent_bytes += bytes;
        }
        let start_ns = self.free_ns.max(ready);
        self.free_ns = start_ns + (ns + 0.5) as u64;
        if self.buffer_bytes == 0 {
            return Drained { in_device_ns: self.free_ns, absorbed_ns: self.free_ns };
        }
        let absorbed = Absorbing { first_byte, end_byte: self.spent_bytes, start_ns, end_ns: self.free_ns };
        self.absorbing.push_back(absorbed);
        // In once all but the last `buffer_bytes` taken, these bytes included, are absorbed.
        let must_absorb = self.spent_bytes.saturating_sub(self.buffer_bytes);
        while self.absorbing.front().is_some_and(|range| range.end_byte < must_absorb) {
            self.absorbing.pop_front();
        }
        let range = self.absorbing.front().copied().unwrap_or(absorbed);
        let through = must_absorb.saturating_sub(range.first_byte);
        let span = (range.end_byte - range.first_byte).max(1);
        let at =
            range.start_ns + ((range.end_ns - range.start_ns) as u128 * u128::from(through) / u128::from(span)) as u64;
        Drained { in_device_ns: ready.max(at), absorbed_ns: self.free_ns }
    }

    /// When the budget is next free, from `at` on.
    pub fn start(&self, at: u64) -> u64 {
        self.free_ns.max(at)
    }
}

/// A draw of the exponential distribution with mean 1, fixed by `index` (SplitMix64's finalizer as the hash).
fn exponential(index: u64) -> f64 {
    let mut z = index.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let uniform = ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -uniform.ln()
}

impl Resources {
    pub fn new(planes: usize, channels: usize, erase_concurrency: u32, write_budget: WriteBudget) -> Resources {
        Resources {
            planes: vec![Timeline::default(); planes],
            page_register: vec![None; planes],
            channels: vec![Timeline::default(); channels],
            erase_slot_free: vec![0; erase_concurrency as usize],
            command_free: 0,
            link_to_device_free: 0,
            output: Timeline::default(),
            write_budget,
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
            .chain([&self.command_free, &self.link_to_device_free, &self.write_budget.free_ns])
            .copied()
            .chain(timelines)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS_PER_BYTE: f64 = 1.0;
    const UNIT: u64 = 100_000;

    #[test]
    fn a_steady_budget_spends_bytes_at_its_rate_in_arrival_order() {
        let mut budget = WriteBudget::new(NS_PER_BYTE, 0, 0);
        assert_eq!(budget.take(0, 1000).in_device_ns, 1000);
        assert_eq!(budget.take(0, 1000).in_device_ns, 2000);
        assert_eq!(budget.take(5000, 1000).absorbed_ns, 6000, "an idle budget starts when the data is ready");
    }

    #[test]
    fn a_drain_buffer_lets_writes_in_until_it_is_full() {
        let mut budget = WriteBudget::new(NS_PER_BYTE, 0, 4000);
        let taken: Vec<Drained> = (0..8).map(|_| budget.take(0, 1000)).collect();
        for (i, drained) in taken.iter().enumerate() {
            assert_eq!(drained.absorbed_ns, 1000 * (i as u64 + 1), "the flash absorbs at its rate");
        }
        assert!(taken[..4].iter().all(|drained| drained.in_device_ns == 0), "four fit: {taken:?}");
        // The fifth is in once the first is absorbed, the eighth once the fourth is.
        assert_eq!(taken[4].in_device_ns, 1000);
        assert_eq!(taken[7].in_device_ns, 4000);
    }

    #[test]
    fn drain_units_vary_around_the_mean_rate_and_repeat_run_to_run() {
        let units = 20_000u64;
        let take_all = || {
            let mut budget = WriteBudget::new(NS_PER_BYTE, UNIT, 0);
            (0..units).map(|_| budget.take(0, UNIT).absorbed_ns).collect::<Vec<_>>()
        };
        let ends = take_all();
        assert_eq!(ends, take_all(), "the same units take the same times");
        let mean_rate = ends[ends.len() - 1] as f64 / (units * UNIT) as f64;
        assert!((mean_rate - NS_PER_BYTE).abs() < 0.03, "mean ns per byte {mean_rate}");
        let mut times: Vec<u64> = std::iter::once(ends[0]).chain(ends.windows(2).map(|w| w[1] - w[0])).collect();
        times.sort_unstable();
        let unit_ns = UNIT as f64 * NS_PER_BYTE;
        // Exponential unit times: the median is ln 2 of the mean and the 99th percentile ln 100 of it.
        let quantile = |q: f64| times[(q * (times.len() - 1) as f64) as usize] as f64 / unit_ns;
        assert!((quantile(0.5) - 2f64.ln()).abs() < 0.05, "median {}", quantile(0.5));
        assert!((quantile(0.99) - 100f64.ln()).abs() < 0.4, "p99 {}", quantile(0.99));
    }

    #[test]
    fn a_wait_behind_more_bytes_spreads_by_the_square_root() {
        // Sums of k exponential unit times: p99 - mean grows as sqrt(k), so 16x the bytes gives ~4x the spread.
        let spread = |k: u64| {
            let mut budget = WriteBudget::new(NS_PER_BYTE, UNIT, 0);
            let mut sums: Vec<f64> = (0..4000)
                .map(|_| {
                    let start = budget.start(0);
                    (budget.take(0, k * UNIT).absorbed_ns - start) as f64
                })
                .collect();
            sums.sort_by(f64::total_cmp);
            let mean = sums.iter().sum::<f64>() / sums.len() as f64;
            sums[(0.99 * (sums.len() - 1) as f64) as usize] - mean
        };
        let ratio = spread(64) / spread(4);
        assert!((3.2..4.8).contains(&ratio), "spread ratio {ratio} for 16x the bytes");
    }
}
