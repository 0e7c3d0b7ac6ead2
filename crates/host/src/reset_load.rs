//! A steady load of zone resets beside other host software, as the ZINC slides measure RocksDB "with concurrent
//! resets" and as `zinc-reset-write` runs fio's trim job: one reset at a time (psync), of the next full zone of a
//! pool, started at most `per_second` times a second; through the same `CommandQueue` (and so the same I/O
//! scheduler) as the software it interferes with.

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;

use serde::Serialize;
use zonelab_runtime::{CommandQueue, HostExt};
use zonelab_zns::{ReportFilter, ZoneSendAction, ZoneState};

/// What the load did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ResetLoadStats {
    pub resets: u64,
    pub latency_ns_total: u64,
    pub latency_ns_max: u64,
    /// Resets not issued because the pool had no full zone left.
    pub pool_exhausted: bool,
}

impl ResetLoadStats {
    pub fn latency_ms_mean(&self) -> f64 {
        if self.resets == 0 {
            return 0.0;
        }
        self.latency_ns_total as f64 / self.resets as f64 / 1e6
    }
}

/// Resets the full zones of `pool`, in order, `per_second` times a second until `running` turns false or the
/// pool has no full zone left. `stats` is updated after every reset, so a reader sees the load as it goes.
pub async fn run_reset_load<Q: CommandQueue>(
    queue: Q,
    pool: Range<u32>,
    per_second: f64,
    running: impl Fn() -> bool,
    stats: Rc<RefCell<ResetLoadStats>>,
) {
    if per_second <= 0.0 {
        return;
    }
    let geometry = queue.geometry();
    let interval_ns = (1e9 / per_second) as u64;
    let mut next_ns = queue.now_ns();
    for zone in pool {
        if !running() {
            return;
        }
        let start_lba = geometry.zone_start_lba(zone);
        let full = match queue.report_zones(start_lba, ReportFilter::All, 1).await {
            Ok(report) => report.zones.first().is_some_and(|descriptor| descriptor.state == ZoneState::Full),
            Err(_) => false,
        };
        if !full {
            continue;
        }
        let now = queue.now_ns();
        if next_ns > now {
            queue.sleep(next_ns - now).await;
        }
        let started = queue.now_ns();
        let reset = queue.zone_send(start_lba, ZoneSendAction::Reset, false).await;
        let latency_ns = queue.now_ns() - started;
        if reset.is_ok() {
            let mut stats = stats.borrow_mut();
            stats.resets += 1;
            stats.latency_ns_total += latency_ns;
            stats.latency_ns_max = stats.latency_ns_max.max(latency_ns);
        }
        next_ns = started.max(next_ns) + interval_ns;
    }
    stats.borrow_mut().pool_exhausted = true;
}
