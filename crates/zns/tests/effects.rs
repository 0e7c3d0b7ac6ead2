//! The effects contract: `execute` reports every zone transition with its cause and every range written, and a
//! failed command reports (and changes) nothing.

mod common;

use common::*;
use zonelab_zns::{
    Command, Effect, NamespaceConfig, Status, TransitionCause as Cause, ZoneSendAction as Zsa, ZoneState as S,
};

fn transition(zone: u32, from: S, to: S, cause: Cause) -> Effect {
    Effect::Transition { zone, from, to, cause }
}

#[test]
fn a_write_that_auto_closes_reports_the_victim_then_its_own_open() {
    let mut ns = namespace(NamespaceConfig { max_open: 1, ..config() });
    write_at(&mut ns, 0, 1).expect("zone 0 opens");
    let data = block(&ns, 1, 2);
    let slba = zslba(&ns, 1);
    let done = ns.execute(Command::Write { slba, data: &data }).expect("write to zone 1");
    assert_eq!(
        done.effects.as_slice(),
        [
            Effect::Written { zone: 1, slba, nlb: 2 },
            transition(0, S::ImplicitlyOpened, S::Closed, Cause::AutoClose),
            transition(1, S::Empty, S::ImplicitlyOpened, Cause::Write),
        ]
    );
    // A write inside an open zone moves only its write pointer.
    let more = ns.execute(Command::Write { slba: slba + 2, data: &data }).expect("next write");
    assert_eq!(more.effects.as_slice(), [Effect::Written { zone: 1, slba: slba + 2, nlb: 2 }]);
}

#[test]
fn filling_a_zone_reports_full_and_append_reports_where_it_landed() {
    let mut ns = fresh();
    let cap = ns.geometry().zone_cap_lba;
    let data = block(&ns, 2, cap);
    let zslba = zslba(&ns, 2);
    let done = ns.execute(Command::Append { zslba, data: &data }).expect("append a whole zone");
    assert_eq!(
        done.effects.as_slice(),
        [Effect::Written { zone: 2, slba: zslba, nlb: cap }, transition(2, S::Empty, S::Full, Cause::Write)]
    );
}

#[test]
fn select_all_reports_every_zone_it_processed_and_no_op_commands_report_nothing() {
    let mut ns = fresh();
    for zone in [1, 4, 9] {
        write_at(&mut ns, zone, 1).expect("write");
    }
    let done =
        ns.execute(Command::ZoneManagementSend { slba: 0, action: Zsa::Reset, select_all: true }).expect("reset");
    let reset: Vec<u32> = done
        .effects
        .iter()
        .map(|effect| match *effect {
            Effect::Transition { zone, from: S::ImplicitlyOpened, to: S::Empty, cause: Cause::Host(Zsa::Reset) } => {
                zone
            }
            other => panic!("unexpected effect {other:?}"),
        })
        .collect();
    assert_eq!(reset, [1, 4, 9]);
    let again =
        ns.execute(Command::ZoneManagementSend { slba: 0, action: Zsa::Reset, select_all: false }).expect("no-op");
    assert!(again.effects.is_empty(), "resetting an EMPTY zone changes nothing: {:?}", again.effects);
}

#[test]
fn explicit_open_and_finish_report_host_causes() {
    let mut ns = namespace(NamespaceConfig { max_open: 1, ..config() });
    write_at(&mut ns, 0, 1).expect("write");
    let start = zslba(&ns, 5);
    let open =
        ns.execute(Command::ZoneManagementSend { slba: start, action: Zsa::Open, select_all: false }).expect("open");
    assert_eq!(
        open.effects.as_slice(),
        [
            transition(0, S::ImplicitlyOpened, S::Closed, Cause::AutoClose),
            transition(5, S::Empty, S::ExplicitlyOpened, Cause::Host(Zsa::Open)),
        ]
    );
    let finish = ns
        .execute(Command::ZoneManagementSend { slba: start, action: Zsa::Finish, select_all: false })
        .expect("finish");
    assert_eq!(finish.effects.as_slice(), [transition(5, S::ExplicitlyOpened, S::Full, Cause::Host(Zsa::Finish))]);
}

#[test]
fn a_failed_command_reports_nothing_and_the_next_one_starts_clean() {
    let mut ns = fresh();
    write_at(&mut ns, 0, 1).expect("write");
    let data = block(&ns, 3, 1);
    let slba = zslba(&ns, 0);
    assert_eq!(ns.execute(Command::Write { slba, data: &data }), Err(Status::ZoneInvalidWrite));
    let read = ns.execute(Command::ReadDiscard { slba, nlb: 1 }).expect("read");
    assert!(read.effects.is_empty());
}
