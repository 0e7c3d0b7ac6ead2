//! Property test: random command sequences on random geometries and limits, run against the namespace and
//! against a small reference model written independently from docs/semantics.md. After every step the status, each
//! zone's state and reported write pointer, the open/active counts and the data read back must agree, and the
//! namespace's invariants must hold. proptest prints the minimal failing sequence and geometry.

use proptest::prelude::*;
use zonelab_zns::pattern::stamp_blocks;
use zonelab_zns::{
    ByteSize, CloseEmptyOpenZone, MemoryStore, NamespaceConfig, Status, ZoneSendAction, ZoneState, ZonedNamespace,
    WP_INVALID,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Empty,
    Imp,
    Exp,
    Closed,
    Full,
    Ro,
    Off,
}

#[derive(Clone, Copy, Debug)]
struct MZone {
    st: St,
    /// Blocks written from the zone start (data below reads back; a FULL zone keeps it).
    written: u64,
    /// When the zone last became implicitly open.
    opened_at: u64,
}

#[derive(Clone, Debug)]
struct Params {
    lba_size: u32,
    zones: u32,
    size: u64,
    cap: u64,
    max_open: u32,
    max_active: u32,
    zasl_blocks: u64,
    auto_close: bool,
    close_to_empty: bool,
    finish_checks: bool,
}

struct Model {
    p: Params,
    z: Vec<MZone>,
    tick: u64,
}

impl Model {
    fn open(&self) -> u32 {
        self.z.iter().filter(|z| matches!(z.st, St::Imp | St::Exp)).count() as u32
    }
    fn active(&self) -> u32 {
        self.z.iter().filter(|z| matches!(z.st, St::Imp | St::Exp | St::Closed)).count() as u32
    }
    fn mo(&self) -> u32 {
        if self.p.max_open == 0 {
            self.p.max_active
        } else {
            self.p.max_open
        }
    }

    /// Room for zone `i` to open: Ok(victim) or the resource error.
    fn room(&self, i: usize) -> Result<Option<usize>, Status> {
        let st = self.z[i].st;
        if st == St::Empty && self.p.max_active > 0 && self.active() >= self.p.max_active {
            return Err(Status::TooManyActiveZones);
        }
        if matches!(st, St::Empty | St::Closed) && self.mo() > 0 && self.open() >= self.mo() {
            let oldest = (0..self.z.len()).filter(|&j| self.z[j].st == St::Imp).min_by_key(|&j| self.z[j].opened_at);
            return match oldest {
                Some(j) if self.p.auto_close => Ok(Some(j)),
                _ => Err(Status::TooManyOpenZones),
            };
        }
        Ok(None)
    }

    fn close_victim(&mut self, j: usize) {
        self.z[j].st = if self.z[j].written == 0 { St::Empty } else { St::Closed };
    }

    fn imp(&mut self, i: usize) {
        self.tick += 1;
        self.z[i].st = St::Imp;
        self.z[i].opened_at = self.tick;
    }

    fn write(&mut self, i: usize, at: u64, blocks: u64, append: bool) -> Result<u64, Status> {
        if append && self.p.zasl_blocks > 0 && blocks > self.p.zasl_blocks {
            return Err(Status::InvalidField);
        }
        match self.z[i].st {
            St::Full => return Err(Status::ZoneIsFull),
            St::Off => return Err(Status::ZoneIsOffline),
            St::Ro => return Err(Status::ZoneIsReadOnly),
            _ => {}
        }
        let at = if append { self.z[i].written } else { at };
        if at != self.z[i].written {
            return Err(Status::ZoneInvalidWrite);
        }
        if at + blocks > self.p.cap {
            return Err(Status::ZoneBoundaryError);
        }
        if let Some(j) = self.room(i)? {
            self.close_victim(j);
        }
        if matches!(self.z[i].st, St::Empty | St::Closed) {
            self.imp(i);
        }
        self.z[i].written += blocks;
        if self.z[i].written == self.p.cap {
            self.z[i].st = St::Full;
        }
        Ok(at)
    }

    fn action(&mut self, i: usize, a: ZoneSendAction) -> Result<(), Status> {
        use St::*;
        let st = self.z[i].st;
        match (a, st) {
            (ZoneSendAction::Open, Empty | Closed) => {
                if let Some(j) = self.room(i)? {
                    self.close_victim(j);
                }
                self.z[i].st = Exp;
            }
            (ZoneSendAction::Open, Imp) => self.z[i].st = Exp,
            (ZoneSendAction::Open, Exp) => {}
            (ZoneSendAction::Close, Imp | Exp) => {
                self.z[i].st = if self.z[i].written == 0 && self.p.close_to_empty { Empty } else { Closed }
            }
            (ZoneSendAction::Close, Closed) => {}
            (ZoneSendAction::Finish, Empty | Closed) => {
                if self.p.finish_checks {
                    if let Some(j) = self.room(i)? {
                        self.close_victim(j);
                    }
                }
                self.z[i].st = Full;
            }
            (ZoneSendAction::Finish, Imp | Exp) => self.z[i].st = Full,
            (ZoneSendAction::Finish, Full) => {}
            (ZoneSendAction::Reset, Imp | Exp | Closed | Full) => {
                self.z[i].st = Empty;
                self.z[i].written = 0;
            }
            (ZoneSendAction::Reset, Empty) => {}
            (ZoneSendAction::Offline, Ro | Off) => self.z[i].st = Off,
            _ => return Err(Status::InvalidZoneStateTransition),
        }
        Ok(())
    }

    fn all(&mut self, a: ZoneSendAction) -> Result<(), Status> {
        use St::*;
        let picks: Vec<usize> = (0..self.z.len())
            .filter(|&i| match a {
                ZoneSendAction::Open => self.z[i].st == Closed,
                ZoneSendAction::Close => matches!(self.z[i].st, Imp | Exp),
                ZoneSendAction::Finish => matches!(self.z[i].st, Imp | Exp | Closed),
                ZoneSendAction::Reset => matches!(self.z[i].st, Imp | Exp | Closed | Full),
                _ => self.z[i].st == Ro,
            })
            .collect();
        if a == ZoneSendAction::Open && self.mo() > 0 && picks.len() as u32 > self.mo() - self.open() {
            return Err(Status::TooManyOpenZones);
        }
        for i in picks {
            match a {
                ZoneSendAction::Finish => self.z[i].st = Full,
                _ => self.action(i, a)?,
            }
        }
        Ok(())
    }

    fn inject(&mut self, i: usize, st: St) {
        if self.z[i].st == st {
            self.z[i] = MZone { st: St::Empty, written: 0, opened_at: 0 };
        } else {
            self.z[i].st = st;
        }
    }

    fn power_cycle(&mut self) {
        for z in &mut self.z {
            if matches!(z.st, St::Imp | St::Exp | St::Closed) {
                z.st = if z.written > 0 { St::Closed } else { St::Empty };
            }
        }
    }

    fn reported_wp(&self, i: usize) -> u64 {
        match self.z[i].st {
            St::Full | St::Ro | St::Off => WP_INVALID,
            _ => i as u64 * self.p.size + self.z[i].written,
        }
    }
}

fn to_state(st: St) -> ZoneState {
    match st {
        St::Empty => ZoneState::Empty,
        St::Imp => ZoneState::ImplicitlyOpened,
        St::Exp => ZoneState::ExplicitlyOpened,
        St::Closed => ZoneState::Closed,
        St::Full => ZoneState::Full,
        St::Ro => ZoneState::ReadOnly,
        St::Off => ZoneState::Offline,
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Write at the write pointer plus `skew` (-1, 0 or +1 block).
    Write {
        zone: u32,
        skew: i8,
        blocks: u64,
    },
    Append {
        zone: u32,
        blocks: u64,
    },
    Action {
        zone: u32,
        action: ZoneSendAction,
    },
    All {
        action: ZoneSendAction,
    },
    Inject {
        zone: u32,
        offline: bool,
    },
    PowerCycle,
    Read {
        zone: u32,
        first: u64,
        blocks: u64,
    },
}

fn params() -> impl Strategy<Value = Params> {
    (
        prop_oneof![Just(512u32), Just(4096u32)],
        1u32..=8,
        3u32..=6,
        any::<u64>(),
        0u32..=9,
        0u32..=9,
        prop_oneof![Just(0u64), Just(4096), Just(8192)],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                lba_size,
                zones,
                size_log2,
                cap_seed,
                ma,
                mo_seed,
                zasl_bytes,
                auto_close,
                close_to_empty,
                finish_checks,
            )| {
                let size = 1u64 << size_log2;
                let cap = 1 + cap_seed % size;
                let max_active = ma.min(zones + 1);
                let max_open = if max_active == 0 { mo_seed } else { mo_seed % (max_active + 1) };
                Params {
                    lba_size,
                    zones,
                    size,
                    cap,
                    max_open,
                    max_active,
                    zasl_blocks: zasl_bytes / u64::from(lba_size),
                    auto_close,
                    close_to_empty,
                    finish_checks,
                }
            },
        )
}

fn action() -> impl Strategy<Value = ZoneSendAction> {
    prop_oneof![
        Just(ZoneSendAction::Open),
        Just(ZoneSendAction::Close),
        Just(ZoneSendAction::Finish),
        Just(ZoneSendAction::Reset),
        Just(ZoneSendAction::Offline),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..9, -1i8..=1, 1u64..20).prop_map(|(zone, skew, blocks)| Op::Write { zone, skew, blocks }),
        3 => (0u32..9, 1u64..20).prop_map(|(zone, blocks)| Op::Append { zone, blocks }),
        5 => (0u32..9, action()).prop_map(|(zone, action)| Op::Action { zone, action }),
        1 => action().prop_map(|action| Op::All { action }),
        1 => (0u32..9, any::<bool>()).prop_map(|(zone, offline)| Op::Inject { zone, offline }),
        1 => Just(Op::PowerCycle),
        2 => (0u32..9, 0u64..64, 1u64..64).prop_map(|(zone, first, blocks)| Op::Read { zone, first, blocks }),
    ]
}

fn run(p: Params, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let lba = u64::from(p.lba_size);
    let config = NamespaceConfig {
        zones: p.zones,
        zone_size: ByteSize(p.size * lba),
        zone_cap: ByteSize(p.cap * lba),
        lba_size: p.lba_size,
        max_open: p.max_open,
        max_active: p.max_active,
        zasl: ByteSize(p.zasl_blocks * lba),
        mdts: ByteSize(0),
        auto_close: p.auto_close,
        close_empty_open_zone: if p.close_to_empty { CloseEmptyOpenZone::Empty } else { CloseEmptyOpenZone::Closed },
        finish_checks_resources: p.finish_checks,
        ..NamespaceConfig::default()
    };
    if p.max_open > p.max_active && p.max_active > 0 {
        prop_assert!(config.validate().is_err());
        return Ok(());
    }
    let bytes = u64::from(p.zones) * p.size * lba;
    let mut ns = ZonedNamespace::new(config, MemoryStore::new(bytes)).expect("valid geometry");
    let mut model = Model { z: vec![MZone { st: St::Empty, written: 0, opened_at: 0 }; p.zones as usize], p, tick: 0 };
    let size = model.p.size;
    for (step, op) in ops.into_iter().enumerate() {
        let valid_zone = |zone: u32| zone < model.p.zones;
        let (got, want) = match op.clone() {
            Op::Write { zone, skew, blocks } => {
                let start = u64::from(zone) * size;
                let at = if valid_zone(zone) {
                    (start + model.z[zone as usize].written).saturating_add_signed(skew.into())
                } else {
                    start
                };
                let mut data = vec![0u8; (blocks * lba) as usize];
                stamp_blocks(at, lba as usize, &mut data);
                let got = ns.write(at, &data);
                let want = if at + blocks > u64::from(model.p.zones) * size {
                    Err(Status::LbaOutOfRange)
                } else {
                    let i = (at / size) as usize;
                    model.write(i, at - i as u64 * size, blocks, false).map(|_| ())
                };
                (got.map(|()| 0), want.map(|()| 0))
            }
            Op::Append { zone, blocks } => {
                let start = u64::from(zone) * size;
                let at = if valid_zone(zone) { start + model.z[zone as usize].written } else { start };
                let mut data = vec![0u8; (blocks * lba) as usize];
                stamp_blocks(at, lba as usize, &mut data);
                let got = ns.append(start, &data);
                let want = if start + blocks > u64::from(model.p.zones) * size {
                    Err(Status::LbaOutOfRange)
                } else {
                    model.write(zone as usize, 0, blocks, true).map(|offset| start + offset)
                };
                (got, want)
            }
            Op::Action { zone, action } => {
                let got = ns.zone_management_send(u64::from(zone) * size, action, false);
                let want =
                    if valid_zone(zone) { model.action(zone as usize, action) } else { Err(Status::LbaOutOfRange) };
                (got.map(|()| 0), want.map(|()| 0))
            }
            Op::All { action } => (ns.zone_management_send(0, action, true).map(|()| 0), model.all(action).map(|()| 0)),
            Op::Inject { zone, offline } => {
                let st = if offline { St::Off } else { St::Ro };
                let got = ns.inject_zone_state(zone, to_state(st));
                prop_assert_eq!(got.is_ok(), valid_zone(zone), "step {}: inject", step);
                if valid_zone(zone) {
                    model.inject(zone as usize, st);
                }
                (Ok(0), Ok(0))
            }
            Op::PowerCycle => {
                model.power_cycle();
                (ns.power_cycle().map(|()| 0), Ok(0))
            }
            Op::Read { zone, first, blocks } => {
                let zone = zone % model.p.zones;
                let first = first % size;
                let blocks = blocks.min(size - first);
                let start = u64::from(zone) * size;
                let mut buf = vec![0xeeu8; (blocks * lba) as usize];
                let got = ns.read(start + first, &mut buf);
                if model.z[zone as usize].st == St::Off {
                    (got.map(|()| 0), Err(Status::ZoneIsOffline))
                } else {
                    let mut want = vec![0u8; buf.len()];
                    let written = model.z[zone as usize].written;
                    for (k, block) in want.chunks_exact_mut(lba as usize).enumerate() {
                        let at = first + k as u64;
                        if at < written {
                            stamp_blocks(start + at, lba as usize, block);
                        }
                    }
                    prop_assert!(buf == want, "step {}: data read back differs ({:?})", step, op);
                    (got.map(|()| 0), Ok(0))
                }
            }
        };
        prop_assert_eq!(got, want, "step {}: {:?}", step, op);
        for i in 0..model.p.zones {
            let zone = ns.zone(i);
            prop_assert_eq!(
                zone.state,
                to_state(model.z[i as usize].st),
                "step {}: zone {} state after {:?}",
                step,
                i,
                op
            );
            prop_assert_eq!(zone.wp_lba, model.reported_wp(i as usize), "step {}: zone {} wp after {:?}", step, i, op);
        }
        prop_assert_eq!((ns.open_zones(), ns.active_zones()), (model.open(), model.active()), "step {}", step);
        if let Err(broken) = ns.check_invariants() {
            return Err(TestCaseError::fail(format!("step {step}: invariant broken after {op:?}: {broken}")));
        }
    }
    Ok(())
}

proptest! {
    // 512 cases by default; PROPTEST_CASES=N runs a longer search.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn namespace_agrees_with_the_reference_model(p in params(), ops in prop::collection::vec(op(), 1..80)) {
        run(p, ops)?;
    }
}
