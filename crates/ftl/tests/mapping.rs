//! The FTL's mapping against a reference model, and its garbage collection against the analytic model of
//! greedy cleaning, with no flash time (`Untimed`): what is tested is where pages go, not how long it takes.

use std::collections::BTreeSet;

use proptest::prelude::*;
use zonelab_device::rng::SplitMix64;
use zonelab_ftl::{greedy_write_amplification, Flash, Ftl, FtlConfig, Untimed, VictimPolicy};
use zonelab_media::OpSource;

/// 64 blocks of 32 pages (units of 4) for 1,536 logical pages: 33 % over-provisioning, so that garbage
/// collection runs within a few thousand writes.
fn small(victim: VictimPolicy, streams: u32) -> Ftl {
    let config = FtlConfig {
        logical_pages: 1536,
        page_bytes: 4096,
        pages_per_block: 32,
        pages_per_unit: 4,
        blocks: 64,
        victim,
        foreground_free_blocks: 2,
        background_free_blocks: 6,
        streams,
        write_buffer_units: 1,
        collection_units_in_flight: 1,
        read_ahead_pages: 0,
    };
    Ftl::new(config).expect("a valid configuration")
}

#[derive(Clone, Debug)]
enum Op {
    Write { lpn: u64, stream: u32 },
    Trim { lpn: u64 },
    Read { lpn: u64 },
    Idle,
}

fn op() -> impl Strategy<Value = Op> {
    // Writes to a hot tenth most of the time, so that blocks die unevenly and victims differ by policy.
    let lpn = prop_oneof![3 => 0u64..154, 1 => 0u64..1536];
    prop_oneof![
        12 => (lpn.clone(), 0u32..2).prop_map(|(lpn, stream)| Op::Write { lpn, stream }),
        2 => lpn.clone().prop_map(|lpn| Op::Trim { lpn }),
        2 => lpn.prop_map(|lpn| Op::Read { lpn }),
        1 => Just(Op::Idle),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// After every operation the FTL maps exactly the pages written and not trimmed since, its invariants
    /// hold (inverse maps, valid counts, block states), and no two logical pages share a physical one.
    #[test]
    fn the_map_holds_what_was_written_and_not_trimmed(
        ops in proptest::collection::vec(op(), 1..6000),
        cost_benefit in any::<bool>(),
    ) {
        let victim = if cost_benefit { VictimPolicy::CostBenefit } else { VictimPolicy::Greedy };
        let mut ftl = small(victim, 2);
        let mut mapped = BTreeSet::new();
        for (at, op) in ops.iter().enumerate() {
            let now = at as u64 * 1000;
            match *op {
                Op::Write { lpn, stream } => {
                    ftl.write(&mut Untimed, now, lpn, stream).expect("in range");
                    mapped.insert(lpn);
                }
                Op::Trim { lpn } => {
                    ftl.trim(lpn).expect("in range");
                    mapped.remove(&lpn);
                }
                Op::Read { lpn } => {
                    ftl.read(&mut Untimed, now, lpn).expect("in range");
                }
                Op::Idle => {
                    ftl.collect_idle(&mut Untimed, now);
                }
            }
            prop_assert_eq!(ftl.check(), Ok(()), "after op {} {:?}", at, op);
        }
        let found: BTreeSet<u64> = (0..1536).filter(|&lpn| ftl.lookup(lpn).is_some()).collect();
        prop_assert_eq!(&found, &mapped);
        let physical: BTreeSet<u64> = mapped.iter().filter_map(|&lpn| ftl.lookup(lpn)).collect();
        prop_assert_eq!(physical.len(), mapped.len(), "every live page has a physical page of its own");
    }
}

#[test]
fn out_of_range_pages_and_streams_are_refused() {
    let mut ftl = small(VictimPolicy::Greedy, 1);
    assert!(ftl.write(&mut Untimed, 0, 1536, 0).is_err());
    assert!(ftl.write(&mut Untimed, 0, 0, 1).is_err());
    assert!(ftl.read(&mut Untimed, 0, 1 << 40).is_err());
    assert!(ftl.trim(9999).is_err());
    let too_little = FtlConfig { blocks: 51, ..ftl.config().clone() };
    assert!(Ftl::new(too_little).is_err(), "no room for the open blocks and the GC reserve");
}

/// A seeded stream of page numbers below `pages`.
fn uniform(seed: u64, pages: u64) -> impl Iterator<Item = u64> {
    let mut rng = SplitMix64::split(seed, "ftl mapping");
    std::iter::repeat_with(move || rng.below(pages))
}

/// Greedy write amplification under uniform random 4 KiB writes, after the space is written once and then
/// twice more at random (the steady state), over four more passes.
fn steady_state_waf(over_provisioning: f64) -> f64 {
    // 512 blocks of 256 pages: many blocks of many pages, as the analytic model assumes.
    let physical_bytes = 512u64 * 256 * 4096;
    let logical_bytes = (physical_bytes as f64 / (1.0 + over_provisioning)) as u64 / 4096 * 4096;
    let config = FtlConfig::with_over_provisioning(logical_bytes, over_provisioning, 256, 4);
    let pages = config.logical_pages;
    let mut ftl = Ftl::new(config).expect("config");
    ftl.precondition((0..pages).chain(uniform(1, pages).take(2 * pages as usize))).expect("precondition");
    for lpn in uniform(2, pages).take(4 * pages as usize) {
        ftl.write(&mut Untimed, 0, lpn, 0).expect("write");
    }
    ftl.check().expect("invariants");
    ftl.counters().write_amplification()
}

#[test]
fn greedy_write_amplification_follows_the_analytic_model_at_7_and_28_percent() {
    for over_provisioning in [0.07, 0.28] {
        let measured = steady_state_waf(over_provisioning);
        let model = greedy_write_amplification(over_provisioning);
        let error = (measured - model).abs() / model;
        eprintln!(
            "over-provisioning {over_provisioning}: WAF {measured:.3}, model {model:.3} ({:+.1} %)",
            100.0 * (measured / model - 1.0)
        );
        assert!(error < 0.15, "at {over_provisioning}: measured {measured:.3}, model {model:.3}");
    }
}

/// One die: programs run one after another, 100 ns each; senses and erases take no time.
#[derive(Default)]
struct OneDie {
    free_at: u64,
}

impl Flash for OneDie {
    fn sense(&mut self, _: u64, start: u64, _: u32, _: u64, _: u64, _: u64, _: OpSource) -> u64 {
        start
    }
    fn program(&mut self, _: u64, _: u32, _: u64, ready: u64, _: OpSource) -> u64 {
        self.free_at = self.free_at.max(ready) + 100;
        self.free_at
    }
    fn erase(&mut self, _: u64, start: u64, _: u32, _: OpSource) -> u64 {
        start
    }
}

#[test]
fn a_deeper_write_buffer_acknowledges_writes_before_their_programs_end() {
    // Each write that fills unit k (4 pages) waits for the program of unit k - depth, which ends at 100 (k - depth + 1).
    let completion_of_eighth_unit = |depth: u32| {
        let mut config = small(VictimPolicy::Greedy, 1).config().clone();
        config.write_buffer_units = depth;
        let mut ftl = Ftl::new(config).expect("in range");
        let mut flash = OneDie::default();
        (0..32).map(|lpn| ftl.write(&mut flash, 0, lpn, 0).expect("in range")).last().expect("in range")
    };
    assert_eq!(completion_of_eighth_unit(1), 700);
    assert_eq!(completion_of_eighth_unit(4), 400);
    let mut config = small(VictimPolicy::Greedy, 1).config().clone();
    config.write_buffer_units = 0;
    assert!(Ftl::new(config).is_err(), "a buffer of no units is refused");
}

/// Counts senses; each takes 50 ns from its start.
#[derive(Default)]
struct CountingSenses {
    senses: u32,
}

impl Flash for CountingSenses {
    fn sense(&mut self, _: u64, start: u64, _: u32, _: u64, _: u64, _: u64, _: OpSource) -> u64 {
        self.senses += 1;
        start + 50
    }
    fn program(&mut self, _: u64, _: u32, _: u64, ready: u64, _: OpSource) -> u64 {
        ready
    }
    fn erase(&mut self, _: u64, start: u64, _: u32, _: OpSource) -> u64 {
        start
    }
}

#[test]
fn read_ahead_senses_a_sequential_streams_next_pages_before_it_asks() {
    let mut config = small(VictimPolicy::Greedy, 1).config().clone();
    config.read_ahead_pages = 8;
    let mut ftl = Ftl::new(config).expect("in range");
    ftl.precondition(0..64).expect("in range");
    let mut flash = CountingSenses::default();
    // Units hold 4 pages. The first read starts the stream; the second continues it, so its unit and the two
    // after it (8 pages ahead) are sensed.
    assert_eq!(ftl.read_range(&mut flash, 1000, 0, 4).expect("in range"), 1050);
    assert_eq!(ftl.read_range(&mut flash, 2000, 4, 4).expect("in range"), 2050);
    assert_eq!(flash.senses, 4);
    // The third finds its pages held; only the unit now 8 pages ahead is sensed.
    assert_eq!(ftl.read_range(&mut flash, 3000, 8, 4).expect("in range"), 3000, "served from the controller's memory");
    assert_eq!(flash.senses, 5);
    // A read elsewhere is a plain read and restarts the stream.
    assert_eq!(ftl.read_range(&mut flash, 4000, 40, 1).expect("in range"), 4050);
    assert_eq!(flash.senses, 6);
    // An overwrite of a held page lets the read-ahead go.
    ftl.read_range(&mut flash, 5000, 41, 1).expect("in range");
    assert_eq!(ftl.read_range(&mut flash, 6000, 43, 1).expect("in range"), 6000, "held since the read at 41");
    ftl.write(&mut flash, 6100, 46, 0).expect("in range");
    assert_eq!(ftl.read_range(&mut flash, 7000, 44, 1).expect("in range"), 7050, "the stream starts over");
}
