//! A closed-loop generator: `zones x qd_per_zone` workers, each submitting its next operation as soon as the
//! previous one completes, over the async command API.

use std::cell::RefCell;
use std::rc::Rc;

use serde::Serialize;
use zonelab_device::CoreShare;
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::{CommandQueue, Host, HostExt, IoData, Simulation};
use zonelab_zns::{MediaStore, Status};

use zonelab_fio::Histogram;

/// What each job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// Sequential writes at the zone's write pointer.
    Write,
    /// Zone appends.
    Append,
    /// Reads at random block-aligned offsets of the zone's written capacity.
    RandRead,
    /// Writes at random block-aligned offsets of the zone's capacity: a conventional namespace, which code
    /// that walks zones sees as one zone spanning it.
    RandWrite,
}

impl Operation {
    pub fn name(self) -> &'static str {
        match self {
            Operation::Write => "write",
            Operation::Append => "append",
            Operation::RandRead => "randread",
            Operation::RandWrite => "randwrite",
        }
    }
}

/// A closed-loop run over zones `0..zones`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LoopSpec {
    pub operation: Operation,
    pub bs_bytes: u64,
    pub zones: u32,
    pub qd_per_zone: u32,
    /// Operations completed before measuring starts.
    pub warmup: u64,
    /// Operations measured after the warmup. Workers go on issuing until that many have completed, so up to
    /// `zones x qd_per_zone` more are issued than are measured.
    pub measured: u64,
    pub seed: u64,
}

/// What a closed-loop run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoopStats {
    pub operations: u64,
    pub window_ns: u64,
    pub iops: f64,
    pub mean_latency_ns: f64,
    pub max_latency_ns: u64,
    /// The 99th percentile of each zone's latencies (one fio job per zone), the highest over the zones: the
    /// reference grid's `p99_clat_us_max_job`.
    pub p99_latency_ns_max_zone: u64,
}

#[derive(Default)]
struct Tally {
    completed: u64,
    window_start_ns: u64,
    window_end_ns: u64,
    measured: u64,
    latency_sum_ns: u128,
    latency_max_ns: u64,
    /// Measured latencies by zone, in fio's histogram: the grid's percentiles are its buckets' values.
    latencies: Vec<Histogram>,
    failure: Option<Status>,
}

/// Runs `spec` on the simulation's device, on the namespace its host attaches to. Reads need the zones written
/// first (`Device::precondition`);
/// writes and appends (with the last ones in flight) must fit in the zones' remaining capacity. The first
/// failure ends the run. Each zone's commands come from one thread (zone `z` is thread `z` of `cores`, when the
/// threads take turns on the host's cores): a command that completes while its thread is off its core is seen
/// when the thread runs again.
pub fn run_closed_loop<S: MediaStore + 'static>(
    simulation: &mut Simulation<S>,
    spec: &LoopSpec,
    cores: Option<CoreShare>,
) -> Result<LoopStats, Status> {
    let host = simulation.host();
    let geometry = host.geometry();
    let blocks = spec.bs_bytes >> geometry.lba_shift;
    let total = spec.warmup + spec.measured;
    let latencies = (0..spec.zones).map(|_| Histogram::default()).collect();
    let tally = Rc::new(RefCell::new(Tally { latencies, ..Tally::default() }));
    let write_pointers: Rc<RefCell<Vec<u64>>> = Rc::new(RefCell::new(
        (0..spec.zones).map(|zone| host.with_device(|d| d.namespace().zone(zone).wp_lba)).collect(),
    ));
    for zone in 0..spec.zones {
        for slot in 0..spec.qd_per_zone {
            let host: Host<S> = host.clone();
            let tally = Rc::clone(&tally);
            let write_pointers = Rc::clone(&write_pointers);
            let spec = spec.clone();
            let mut rng = SplitMix64::split(spec.seed, &format!("job {zone}/{slot}"));
            simulation.spawn(async move {
                let start = geometry.zone_start_lba(zone);
                let readable = geometry.zone_cap_lba.saturating_sub(blocks) / blocks.max(1) + 1;
                loop {
                    {
                        let tally = tally.borrow();
                        if tally.completed >= total || tally.failure.is_some() {
                            return;
                        }
                    }
                    let submitted = host.now_ns();
                    let result = match spec.operation {
                        Operation::Write => {
                            let lba = {
                                let mut wps = write_pointers.borrow_mut();
                                let lba = wps[zone as usize];
                                wps[zone as usize] += blocks;
                                lba
                            };
                            host.write(lba, IoData::Zeros(spec.bs_bytes)).await
                        }
                        Operation::Append => host.append(start, IoData::Zeros(spec.bs_bytes)).await.map(|_| ()),
                        Operation::RandRead => host.read_discard(start + rng.below(readable) * blocks, blocks).await,
                        Operation::RandWrite => {
                            host.write(start + rng.below(readable) * blocks, IoData::Zeros(spec.bs_bytes)).await
                        }
                    };
                    let mut now = host.now_ns();
                    if let Some(turn) = cores.map(|cores| cores.run_ns(zone, now, 0)).filter(|&turn| turn > now) {
                        host.sleep(turn - now).await;
                        now = turn;
                    }
                    let mut tally = tally.borrow_mut();
                    if let Err(status) = result {
                        tally.failure.get_or_insert(status);
                        return;
                    }
                    tally.completed += 1;
                    if tally.completed == spec.warmup {
                        tally.window_start_ns = now;
                    }
                    // As fio counts a timed run: what is still in flight at the end is not measured, so that a
                    // straggler (a command whose thread is off its core) does not stretch the window.
                    if tally.completed > spec.warmup && tally.completed <= total {
                        let latency = now - submitted;
                        tally.measured += 1;
                        tally.latency_sum_ns += u128::from(latency);
                        tally.latency_max_ns = tally.latency_max_ns.max(latency);
                        tally.latencies[zone as usize].record(latency);
                        tally.window_end_ns = now;
                    }
                }
            });
        }
    }
    simulation.run();
    let tally = tally.borrow();
    if let Some(status) = tally.failure {
        return Err(status);
    }
    let window_ns = tally.window_end_ns.saturating_sub(tally.window_start_ns).max(1);
    Ok(LoopStats {
        operations: tally.measured,
        window_ns,
        iops: tally.measured as f64 * 1e9 / window_ns as f64,
        mean_latency_ns: tally.latency_sum_ns as f64 / tally.measured.max(1) as f64,
        max_latency_ns: tally.latency_max_ns,
        p99_latency_ns_max_zone: tally.latencies.iter().map(|zone| zone.percentile(99.0)).max().unwrap_or(0),
    })
}
