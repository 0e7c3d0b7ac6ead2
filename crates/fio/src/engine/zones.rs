//! fio's zone bookkeeping for one device: write pointers as the jobs see them, which zones a job holds, and the
//! countdown of `zone_reset_frequency`.

use super::*;

/// fio's zone bookkeeping for one device, shared by every job: the write pointer as fio has issued writes.
/// Write pointers change only through `set_wp`, which keeps the blocks written in all zones (so the reset
/// threshold needs no scan of every zone per write) and a version that tells readers when their list of
/// readable zones is stale.
pub(super) struct ZoneCache {
    pub(super) wp: Vec<u64>,
    pub(super) geometry: Geometry,
    /// Blocks written in all zones.
    written_total: u64,
    pub(super) version: u64,
    /// fio's zone locks (`zbd.c`, `zone_lock`): a job instance holds a zone from choosing an offset in it until
    /// the I/O completes. The lock is recursive, so one instance keeps iodepth I/Os in a zone; another waits
    /// until all of them complete. By zone: the holding instance and its I/Os in flight there (a slot per zone:
    /// every I/O takes and releases one, and a hashed map cost the write path 5 % of its time).
    pub(super) holders: Vec<Option<(usize, u32)>>,
    /// fio's `write_cnt`: writes over the reset threshold left until the next threshold reset.
    pub(super) reset_countdown: u64,
}

/// Where fio's reset countdown starts for a frequency (`_zbd_reset_write_cnt`: 1/frequency, truncated).
pub(super) fn reset_countdown_start(frequency: f64) -> u64 {
    if frequency > 0.0 {
        (1.0 / frequency).min(f64::from(u32::MAX)) as u64
    } else {
        u64::from(u32::MAX)
    }
}

impl ZoneCache {
    pub(super) fn new(wp: Vec<u64>, geometry: Geometry) -> ZoneCache {
        let mut cache = ZoneCache {
            written_total: 0,
            wp: Vec::new(),
            geometry,
            version: 0,
            holders: vec![None; wp.len()],
            reset_countdown: 0,
        };
        cache.wp = (0..wp.len() as u32).map(|zone| geometry.zone_start_lba(zone)).collect();
        for (zone, wp) in (0..).zip(wp) {
            cache.set_wp(zone, wp);
        }
        cache
    }

    pub(super) fn set_wp(&mut self, zone: u32, wp: u64) {
        let old = self.written(zone);
        self.wp[zone as usize] = wp;
        self.written_total = self.written_total - old + self.written(zone);
        self.version += 1;
    }

    /// Blocks written in all zones.
    pub(super) fn written_total(&self) -> u64 {
        self.written_total
    }

    pub(super) fn full(&self, zone: u32) -> bool {
        self.wp[zone as usize] >= self.geometry.zone_start_lba(zone) + self.geometry.zone_cap_lba
    }

    pub(super) fn written(&self, zone: u32) -> u64 {
        self.wp[zone as usize] - self.geometry.zone_start_lba(zone)
    }

    pub(super) fn held_by_another(&self, zone: u32, instance: usize) -> bool {
        self.holders[zone as usize].is_some_and(|(holder, _)| holder != instance)
    }

    pub(super) fn hold(&mut self, zone: u32, instance: usize) {
        self.holders[zone as usize].get_or_insert((instance, 0)).1 += 1;
    }

    /// Releases one I/O's hold; true when the zone is free for other instances.
    pub(super) fn release(&mut self, zone: u32) -> bool {
        let slot = &mut self.holders[zone as usize];
        let Some(hold) = slot else { return false };
        hold.1 -= 1;
        if hold.1 == 0 {
            *slot = None;
            return true;
        }
        false
    }
}
